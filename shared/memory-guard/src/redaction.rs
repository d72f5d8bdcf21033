//! Secret redaction — SR-1 of the OpenWOP agent-memory spec.
//!
//! SR-1 requires every value the run's BYOK vault resolved to be persisted as
//! `[REDACTED:<secretId>]` instead of its plaintext. The spec's reference notes fix the shape of
//! the mechanism, and this module follows them:
//!
//! - literal substring matching, never regex, so metacharacters in a value are inert and there is
//!   no ReDoS surface;
//! - longest match wins, so a secret that contains another secret is redacted whole rather than
//!   leaving a recognisable remainder;
//! - values shorter than [`MIN_SECRET_CHARS`] are never redacted (too many false positives).
//!
//! Where this goes beyond the reference's "sort by length and `replace` each in turn": all values
//! are matched in one left-to-right scan (an Aho-Corasick automaton, behind a skip table for
//! large registries), so the cost is one pass over the text however many secrets the run holds,
//! and the common no-secret case neither allocates nor copies.
//!
//! # Markers already in the text
//!
//! Content is redacted more than once (a consolidation or distillation pass re-redacts text that
//! a put already redacted), so redaction must be idempotent: markers it emitted must survive a
//! second pass untouched even when a secret value occurs inside one (for example a secret whose
//! value equals another secret's id). A marker naming a secret id registered in the run is
//! therefore copied through verbatim. A marker naming any *other* id is ordinary text: if it
//! were protected, a writer could smuggle a secret past redaction by wrapping it as
//! `[REDACTED:<the secret>]`, since most API keys are valid id characters.
//!
//! Precisely, one scan finds leftmost-longest, non-overlapping matches among the registered
//! values and the registered markers; a value match is replaced, a marker match is kept. What
//! that guarantees:
//!
//! - A registered value survives only where its occurrence starts inside a registered marker. A
//!   value containing no `]` that is not a substring of a marker therefore never survives;
//!   values that do (one equal to a secret id, say) reveal nothing the marker itself does not.
//! - Redaction is idempotent. A second scan can only change text where a value straddles a marker
//!   the first scan left, which needs a value containing `[` followed by the start of a marker
//!   (for example one ending in `[`). For such registries the scan is repeated until nothing
//!   changes. That terminates, because every further replacement swallows a marker's opening
//!   bracket together with text next to it; it is nevertheless capped at 32 passes as a cost
//!   bound, which only a value containing its own marker's opening can reach (each pass then
//!   eats one character of a run of them), so idempotence holds for every registry except such
//!   self-referential ones on text built to exhaust the cap.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use crate::GuardError;

mod engine;

use engine::{Action, Engine};

/// Values shorter than this many Unicode scalar values (`char`s, not bytes) are never redacted.
///
/// The floor guards against false positives, and false positives are about how many distinct
/// strings a value could collide with, which tracks characters rather than encoding length: a
/// 3-character CJK value is 9 bytes of UTF-8 but is still left alone, while an 8-character one
/// (24 bytes) is redacted.
pub const MIN_SECRET_CHARS: usize = 8;

/// Largest accepted secret value, in bytes.
///
/// Generous for PEM keys and service-account JSON; it exists so a misbehaving vault cannot make
/// the per-run automaton exhaust the function's memory.
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

/// Longest accepted secret id, in bytes.
pub const MAX_SECRET_ID_BYTES: usize = 128;

const MARKER_PREFIX: &str = "[REDACTED:";
const MARKER_SUFFIX: &str = "]";

/// Upper bound on scans for registries whose values can straddle markers (see module docs).
const MAX_PASSES: usize = 32;

/// Emitted for the whole text if no automaton could be built at all (only possible beyond
/// billions of pattern bytes): failing closed keeps SR-1 without making every caller handle an
/// error that cannot occur in practice.
const UNAVAILABLE_MARKER: &str = "[REDACTED:redactor-unavailable]";

/// Ids appear inside markers, so their charset excludes `[`, `]` and whitespace to keep
/// `[REDACTED:<id>]` unambiguous to parse back.
fn valid_secret_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_SECRET_ID_BYTES
        && id.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'@' | b'-')
        })
}

fn marker_for(id: &str) -> String {
    let mut marker = String::with_capacity(MARKER_PREFIX.len() + id.len() + MARKER_SUFFIX.len());
    marker.push_str(MARKER_PREFIX);
    marker.push_str(id);
    marker.push_str(MARKER_SUFFIX);
    marker
}

/// Plaintext that must never be printed; `Debug` shows a placeholder so a stray `{:?}` on a
/// containing type cannot leak it.
struct SecretValue(String);

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[derive(Debug)]
struct Registered {
    id: String,
    value: SecretValue,
}

/// The run's BYOK-resolved secrets (SR-1 "MemorySecretRegistry"), keyed by secret id.
///
/// Lives in process memory for one run only and has no `Display`; its `Debug` lists ids and the
/// count, never values.
#[derive(Default)]
pub struct SecretRegistry {
    entries: Vec<Registered>,
}

impl SecretRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a resolved secret so later redaction replaces `value` with `[REDACTED:<secret_id>]`.
    ///
    /// - `secret_id` must match `[A-Za-z0-9._:/@-]{1,128}` ([`GuardError::InvalidSecretId`]).
    /// - `value` must be at most [`MAX_SECRET_BYTES`] ([`GuardError::SecretTooLong`]).
    /// - Values shorter than [`MIN_SECRET_CHARS`] are accepted but never redacted.
    /// - A value already registered keeps the id it was first registered under, so the marker a
    ///   value maps to does not depend on how often the vault resolved it.
    /// - One id may carry several values (a rotated secret): each is redacted to the same marker.
    pub fn register(
        &mut self,
        secret_id: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), GuardError> {
        let id = secret_id.into();
        if !valid_secret_id(&id) {
            return Err(GuardError::InvalidSecretId);
        }
        let value = value.into();
        if value.len() > MAX_SECRET_BYTES {
            return Err(GuardError::SecretTooLong);
        }
        if self.entries.iter().any(|e| e.value.0 == value) {
            return Ok(());
        }
        self.entries.push(Registered {
            id,
            value: SecretValue(value),
        });
        Ok(())
    }

    /// Number of distinct registered values, including those below the length floor.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing has been registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Registered secret ids in registration order (ids are not secret: they appear in markers).
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.id.as_str())
    }

    /// Compiles the registry into a [`Redactor`]; build once per run and reuse it for every
    /// write, since compiling costs far more than a scan.
    pub fn redactor(&self) -> Redactor {
        Redactor::build(&self.entries)
    }
}

impl fmt::Debug for SecretRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretRegistry")
            .field("count", &self.entries.len())
            .field("ids", &self.ids().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Clone)]
enum Compiled {
    /// No value reaches the floor: every text passes through unchanged.
    Empty,
    Ready(Engine),
    /// No automaton could be built; see [`UNAVAILABLE_MARKER`].
    FailClosed,
}

/// A compiled, immutable redaction pass for one run's secrets (SR-1 write chokepoint).
///
/// Cheap to share across threads; `Debug` reports only how many values it redacts.
#[derive(Clone)]
pub struct Redactor {
    engine: Compiled,
    secrets: usize,
    needs_fixpoint: bool,
}

impl Redactor {
    fn build(entries: &[Registered]) -> Self {
        let mut marker_index: HashMap<&str, usize> = HashMap::new();
        let mut markers: Vec<String> = Vec::new();
        for entry in entries {
            marker_index.entry(entry.id.as_str()).or_insert_with(|| {
                markers.push(marker_for(&entry.id));
                markers.len() - 1
            });
        }

        // A value spelled exactly like a registered marker is already handled by keeping that
        // marker, and two identical patterns would make the winner depend on pattern order.
        let active: Vec<(&str, usize)> = entries
            .iter()
            .filter(|e| e.value.0.chars().count() >= MIN_SECRET_CHARS)
            .filter(|e| {
                let named = e.value.0.strip_prefix(MARKER_PREFIX);
                let id = named.and_then(|rest| rest.strip_suffix(MARKER_SUFFIX));
                !id.is_some_and(|id| marker_index.contains_key(id))
            })
            .filter_map(|e| Some((e.value.0.as_str(), *marker_index.get(e.id.as_str())?)))
            .collect();

        if active.is_empty() {
            return Self {
                engine: Compiled::Empty,
                secrets: 0,
                needs_fixpoint: false,
            };
        }

        let needs_fixpoint = active
            .iter()
            .any(|(value, _)| can_straddle_marker(value, &markers));

        let mut actions = Vec::with_capacity(markers.len() + active.len());
        actions.extend(std::iter::repeat_n(Action::Keep, markers.len()));
        actions.extend(active.iter().map(|&(_, marker)| Action::Replace(marker)));
        let patterns: Vec<&str> = markers
            .iter()
            .map(String::as_str)
            .chain(active.iter().map(|&(value, _)| value))
            .collect();

        let engine = match Engine::build(&patterns, actions, markers.clone()) {
            Some(engine) => Compiled::Ready(engine),
            None => Compiled::FailClosed,
        };
        Self {
            engine,
            secrets: active.len(),
            needs_fixpoint,
        }
    }

    /// Whether this redactor can never change any text (no value reaches the floor).
    pub fn is_empty(&self) -> bool {
        self.secrets == 0
    }

    /// Number of distinct values this redactor replaces.
    pub fn len(&self) -> usize {
        self.secrets
    }

    /// Replaces every registered value with its `[REDACTED:<secretId>]` marker.
    ///
    /// Returns the input borrowed when nothing matched, so the common path allocates nothing.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        self.redact_counting(text).0
    }

    /// [`Redactor::redact`], also reporting how many values were replaced (for metrics: a count
    /// is content-free).
    pub fn redact_counting<'t>(&self, text: &'t str) -> (Cow<'t, str>, usize) {
        let engine = match &self.engine {
            Compiled::Ready(engine) => engine,
            Compiled::Empty => return (Cow::Borrowed(text), 0),
            Compiled::FailClosed => return fail_closed(text),
        };
        let (mut out, mut count) = match engine.pass(text) {
            Ok(Some(rewritten)) => rewritten,
            Ok(None) => return (Cow::Borrowed(text), 0),
            Err(_) => return fail_closed(text),
        };
        if self.needs_fixpoint {
            for _ in 1..MAX_PASSES {
                match engine.pass(&out) {
                    Ok(Some((next, n))) => {
                        out = next;
                        count += n;
                    }
                    Ok(None) => break,
                    Err(_) => return fail_closed(text),
                }
            }
        }
        (Cow::Owned(out), count)
    }

    /// Redacts each tag; tags are persisted and filterable, so they are as exposed as content.
    pub fn redact_tags<S: AsRef<str>>(&self, tags: &[S]) -> Vec<String> {
        tags.iter()
            .map(|tag| self.redact(tag.as_ref()).into_owned())
            .collect()
    }
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets)
            .finish_non_exhaustive()
    }
}

/// Replaces the whole text: used only when matching itself is impossible, so no plaintext can
/// be let through unexamined.
fn fail_closed(text: &str) -> (Cow<'_, str>, usize) {
    if text.is_empty() {
        (Cow::Borrowed(text), 0)
    } else {
        (Cow::Owned(UNAVAILABLE_MARKER.to_owned()), 1)
    }
}

/// Whether a value can match across a marker left by an earlier scan, the only way a second
/// scan can change anything: it must contain a `[` aligned with a marker's opening and agree
/// with that marker up to where either ends. At the value's very start it must extend the
/// whole marker, since a marker at least as long wins a tie on start position.
fn can_straddle_marker(value: &str, markers: &[String]) -> bool {
    value.match_indices('[').any(|(at, _)| {
        let tail = &value[at..];
        markers.iter().any(|marker| {
            if at == 0 {
                tail.len() > marker.len() && tail.starts_with(marker.as_str())
            } else {
                marker.starts_with(tail) || tail.starts_with(marker.as_str())
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn markers(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|id| marker_for(id)).collect()
    }

    #[test]
    fn straddle_detection_is_precise() {
        let m = markers(&["k"]);
        assert!(can_straddle_marker("abcdefg[", &m));
        assert!(can_straddle_marker("abcd[REDAC", &m));
        assert!(can_straddle_marker("ab[REDACTED:k]cd", &m));
        assert!(can_straddle_marker("[REDACTED:k]tail", &m));
        assert!(
            !can_straddle_marker("[REDACTED:", &m),
            "shorter at same start loses"
        );
        assert!(!can_straddle_marker("ab[cd]efgh", &m));
        assert!(
            !can_straddle_marker("k]abcdefg", &m),
            "starts inside: marker wins"
        );
        assert!(!can_straddle_marker("ab[REDACTED:x]cd", &m));
    }

    #[test]
    fn fail_closed_engine_never_passes_text_through() {
        let r = Redactor {
            engine: Compiled::FailClosed,
            secrets: 1,
            needs_fixpoint: false,
        };
        let (out, n) = r.redact_counting("contains sk-live-0123456789");
        assert_eq!(out, UNAVAILABLE_MARKER);
        assert_eq!(n, 1);
        assert!(matches!(r.redact(""), Cow::Borrowed("")));
    }
}
