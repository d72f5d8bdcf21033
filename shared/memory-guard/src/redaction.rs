//! Secret redaction — SR-1 of the OpenWOP agent-memory spec.
//!
//! SR-1 requires every value the run's BYOK vault resolved to be persisted as
//! `[REDACTED:<secretId>]` instead of its plaintext. The spec's reference notes fix the shape of
//! the mechanism, and this module follows them: literal substring matching, never regex (so
//! metacharacters in a value are inert and there is no ReDoS surface), a secret containing
//! another is redacted whole, and values shorter than [`MIN_SECRET_CHARS`] are never redacted.
//! Where it goes further than the reference's "sort by length and `replace` each in turn": all
//! values are matched in one left-to-right scan whatever their number, nothing is allocated or
//! copied when nothing matches, and the result is defined below exactly rather than by the
//! order of replacements.
//!
//! # Semantics
//!
//! The *active patterns* are, for every registered value of at least [`MIN_SECRET_CHARS`]
//! chars (the floor is judged on the value as registered), the value itself and, when they
//! differ from it, its Unicode NFC and NFD forms (so a secret is found whichever normalisation
//! form the text spells it in; an ASCII value is its own NFC and NFD form). Each pattern names
//! the secret whose value produced it; a string produced by several values names the one
//! registered first. (Registering a value again is a no-op, so two ids can only share a pattern
//! through normalisation: a value and another value's NFC or NFD form.)
//!
//! 1. **Markers.** A *well-formed marker* is `[REDACTED:` + an id in the secret-id grammar
//!    `[A-Za-z0-9._:/@-]{1,128}` + `]`, **except** one whose id contains an occurrence of an
//!    active pattern. That exception is a safety rule: most API keys are valid id characters,
//!    so without it a writer could smuggle a secret past redaction as
//!    `[REDACTED:sk-live-0123456789]`. Such text is ordinary text and the secret in it is
//!    redacted like any other. The id charset has no `[`, so two markers can never overlap and
//!    every `[REDACTED:` in the text can be judged on its own: it starts a marker exactly when
//!    the bytes after it are 1 to 128 id characters followed by `]`, with no active pattern
//!    among them. In `[REDACTED:[REDACTED:x]` the first `[REDACTED:` is ordinary text (no id
//!    follows it) and the second starts a marker.
//! 2. **Segments.** The text is split at its well-formed markers, whoever wrote them; they are
//!    copied through byte for byte. Matching happens only inside the segments between them: an
//!    occurrence that would cross into a marker, or lie inside one, does not count.
//! 3. **Coverage.** Every byte covered by an occurrence of an active pattern inside a segment
//!    is redacted. Overlapping or adjacent occurrences merge into one *span*, a maximal run of
//!    covered bytes, which is replaced by one marker. Spans in different segments never merge
//!    (the marker between them stays).
//! 4. **Naming.** A span's marker names the secret of the longest occurrence (in bytes) inside
//!    it; among equally long ones the leftmost; at the same place the same string, so the
//!    pattern's secret, which is the lowest registration index producing that string.
//! 5. **Count.** [`Redactor::redact_counting`] reports the number of spans replaced.
//! 6. **Names.** A marker names its secret by the secret's id, unless that id holds an
//!    occurrence of an active pattern (an id equal to a value, containing one, or containing
//!    another secret's value): then by [`digest_name`] of the id, `sha256:` and 32 hex digits
//!    (and, should that name hold an active pattern too, by the digest name of the name, at most
//!    [`DIGEST_NAME_ROUNDS`] times, then the redactor fails closed). So no marker ever carries a
//!    registered value, whatever id a caller chose.
//!
//! What this guarantees:
//!
//! - **No survivor.** Split the output at its well-formed markers and at every
//!   `[REDACTED:<registered id>]`: no piece contains an active pattern. Every piece lies in a
//!   stretch of a segment that no occurrence covered, and an occurrence there would have been
//!   one in the input.
//! - **No value in a marker's name.** By rule 6, no marker names its secret with text that
//!   holds an active pattern. (The marker's fixed syntax is the same for every secret: a
//!   "value" such as `[REDACTE` stands in every marker and tells nothing.)
//! - **Idempotence** (`redact(redact(x)) == redact(x)`). The markers emitted are well-formed
//!   (rule 6: no name holds an active pattern), text left unredacted keeps its markers and gains
//!   none (every emitted marker starts with `[`, which ends any id before it), so the second pass
//!   sees the same segments minus the spans and finds nothing. Content re-redacted by a
//!   consolidation or distillation pass keeps the markers of earlier passes (rule 2).
//! - **Linear time.** The fast scan's own work is budgeted to a small multiple of the text;
//!   input that would make it super-linear (values nested in one another over long runs, say)
//!   hands the text to a standard Aho-Corasick walk, one pass whatever the patterns. The Teddy
//!   searcher used for up to 64 patterns confirms candidates outside that budget, so it is
//!   used only while no pattern exceeds 256 bytes, which bounds its cost per text byte.
//!
//! A text mixing normalisation forms inside one value (one accent composed, the next
//! decomposed) is not matched; only the NFC and NFD spellings of the whole value are.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};
use unicode_normalization::UnicodeNormalization;

use crate::GuardError;

mod engine;
mod marker;
mod prefix;
mod rare;
mod skip;
mod slow;

use engine::{Engine, Pattern};

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
/// the per-run matcher exhaust the function's memory.
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

/// Longest accepted secret id, in bytes.
pub const MAX_SECRET_ID_BYTES: usize = 128;

/// Emitted for the whole text if no automaton could be built at all (only possible beyond
/// billions of pattern bytes): failing closed keeps SR-1 without making every caller handle an
/// error that cannot occur in practice.
const UNAVAILABLE_MARKER: &str = "[REDACTED:redactor-unavailable]";

/// How many times a digest name is derived again before the redactor fails closed: a digest
/// name holding an active pattern needs a value that is a run of its hex digits, and a second
/// one in a row has never happened.
const DIGEST_NAME_ROUNDS: usize = 4;

/// Prefix of a marker name derived from an id that holds a secret's value (rule 6).
pub const DIGEST_NAME_PREFIX: &str = "sha256:";

/// The name a marker carries instead of `id`: `sha256:` and the first 32 hex digits of the
/// SHA-256 of the id. It reveals nothing of the id (so nothing of the value inside it), and the
/// same id always gets the same name.
pub fn digest_name(id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(id.as_bytes());
    let mut name = String::with_capacity(DIGEST_NAME_PREFIX.len() + 32);
    name.push_str(DIGEST_NAME_PREFIX);
    for b in &digest[..16] {
        name.push_str(&format!("{b:02x}"));
    }
    name
}

/// Whether `name` holds an occurrence of an active pattern of `engine`.
fn carries_pattern(engine: &Engine, name: &str) -> bool {
    engine.holds_pattern(name)
}

/// Ids appear inside markers, so their charset excludes `[`, `]` and whitespace to keep
/// `[REDACTED:<id>]` unambiguous to parse back.
fn valid_secret_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_SECRET_ID_BYTES && id.bytes().all(marker::is_id_byte)
}

/// Whether `value` has at least [`MIN_SECRET_CHARS`] chars, without counting long values.
fn reaches_floor(value: &str) -> bool {
    // A char is 1 to 4 bytes of UTF-8.
    value.len() >= 4 * MIN_SECRET_CHARS
        || (value.len() >= MIN_SECRET_CHARS
            && (value.is_ascii() || value.chars().count() >= MIN_SECRET_CHARS))
}

/// Plaintext that must never be printed: `secrecy` gives it a placeholder `Debug` and wipes it
/// on drop; equality and hashing look at the value because the registry dedupes on it.
#[derive(Debug)]
struct SecretValue(SecretString);

impl PartialEq for SecretValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.expose_secret() == other.0.expose_secret()
    }
}

impl Eq for SecretValue {}

impl std::hash::Hash for SecretValue {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.expose_secret().hash(state);
    }
}

/// The run's BYOK-resolved secrets (SR-1 "MemorySecretRegistry"), keyed by secret id.
///
/// Lives in process memory for one run only and has no `Display`; its `Debug` lists ids and the
/// count, never values.
#[derive(Default)]
pub struct SecretRegistry {
    /// Secret id of each registered value, in registration order.
    ids: Vec<String>,
    /// Each distinct value and its registration index (dedupe in O(1) per registration).
    values: HashMap<SecretValue, u32, foldhash::fast::RandomState>,
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
        let index = u32::try_from(self.ids.len()).map_err(|_| GuardError::TooManySecrets)?;
        if let std::collections::hash_map::Entry::Vacant(slot) =
            self.values.entry(SecretValue(value.into()))
        {
            slot.insert(index);
            self.ids.push(id);
        }
        Ok(())
    }

    /// Number of distinct registered values, including those below the length floor.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether nothing has been registered.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Registered secret ids in registration order (ids are not secret: they appear in markers).
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.ids.iter().map(String::as_str)
    }

    /// Compiles the registry into a [`Redactor`]; build once per run and reuse it for every
    /// write. Compiling is cheap (no automaton is built up front), but it still copies every
    /// value.
    pub fn redactor(&self) -> Redactor {
        let mut ordered: Vec<&str> = vec![""; self.ids.len()];
        for (value, &index) in &self.values {
            ordered[index as usize] = value.0.expose_secret();
        }
        Redactor::build(&self.ids, &ordered)
    }
}

impl fmt::Debug for SecretRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretRegistry")
            .field("count", &self.ids.len())
            .field("ids", &self.ids().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Clone)]
enum Compiled {
    /// No value reaches the floor: every text passes through unchanged.
    Empty,
    Ready(Arc<Engine>),
    /// No automaton could be built; see [`UNAVAILABLE_MARKER`].
    FailClosed,
}

/// A compiled, immutable redaction pass for one run's secrets (SR-1 write chokepoint).
///
/// Cheap to clone and share across threads; `Debug` reports only how many values it redacts.
#[derive(Clone)]
pub struct Redactor {
    engine: Compiled,
    secrets: usize,
}

/// Collects the active patterns: each value over the floor plus its differing NFC/NFD forms.
struct PatternSet {
    bytes: Vec<u8>,
    patterns: Vec<Pattern>,
    needs_dedupe: bool,
}

impl PatternSet {
    fn push(&mut self, form: &str, secret: u32) -> Option<()> {
        let start = u32::try_from(self.bytes.len()).ok()?;
        let len = u32::try_from(form.len()).ok()?;
        start.checked_add(len)?;
        self.bytes.extend_from_slice(form.as_bytes());
        self.patterns.push(Pattern { start, len, secret });
        Some(())
    }

    fn add_value(&mut self, value: &str, secret: u32) -> Option<()> {
        self.push(value, secret)?;
        if value.is_ascii() {
            return Some(());
        }
        // A non-ASCII value's forms may equal another value (or each other's forms).
        self.needs_dedupe = true;
        let nfc: String = value.nfc().collect();
        if nfc != value {
            self.push(&nfc, secret)?;
        }
        let nfd: String = value.nfd().collect();
        if nfd != value && nfd != nfc {
            self.push(&nfd, secret)?;
        }
        Some(())
    }

    /// Keeps the first pattern of each distinct string: values are added in registration order,
    /// so that is the lowest registration index (rule 4's last tie-break).
    fn dedupe(&mut self) {
        if !self.needs_dedupe {
            return;
        }
        let bytes = &self.bytes;
        let mut seen: HashMap<&[u8], (), foldhash::fast::RandomState> = HashMap::default();
        self.patterns
            .retain(|p| seen.insert(&bytes[p.range()], ()).is_none());
    }
}

impl Redactor {
    fn build(ids: &[String], values: &[&str]) -> Self {
        let mut set = PatternSet {
            bytes: Vec::with_capacity(values.iter().map(|v| v.len()).sum()),
            patterns: Vec::with_capacity(values.len()),
            needs_dedupe: false,
        };
        let mut secrets = 0;
        for (index, value) in values.iter().enumerate() {
            if !reaches_floor(value) {
                continue;
            }
            secrets += 1;
            // Registration caps the count at u32::MAX, so the index fits.
            if set.add_value(value, index as u32).is_none() {
                return Self {
                    engine: Compiled::FailClosed,
                    secrets,
                };
            }
        }
        if secrets == 0 {
            return Self {
                engine: Compiled::Empty,
                secrets,
            };
        }
        set.dedupe();
        let shortest = set
            .patterns
            .iter()
            .map(|p| p.len as usize)
            .min()
            .unwrap_or(0);
        let (bytes, patterns) = (
            set.bytes.into_boxed_slice(),
            set.patterns.into_boxed_slice(),
        );
        let Some((id_text, id_ends)) = Self::name_table(ids) else {
            return Self {
                engine: Compiled::FailClosed,
                secrets,
            };
        };
        let mut engine = Engine::new(bytes, patterns, id_text, id_ends);
        // Marker names (rule 6): an id holding an active pattern is replaced by its digest name,
        // and a digest name that holds one (never seen, but possible) by the digest of that.
        // Names are borrowed until one changes, and a change renames the engine in place (its
        // finders depend on the patterns only): building costs no copy per secret.
        let mut names: Vec<Cow<'_, str>> =
            ids.iter().map(|id| Cow::Borrowed(id.as_str())).collect();
        for _ in 0..DIGEST_NAME_ROUNDS {
            let carriers: Vec<usize> = (0..names.len())
                .filter(|&i| names[i].len() >= shortest && carries_pattern(&engine, &names[i]))
                .collect();
            if carriers.is_empty() {
                return Self {
                    engine: Compiled::Ready(Arc::new(engine)),
                    secrets,
                };
            }
            for i in carriers {
                names[i] = Cow::Owned(digest_name(&names[i]));
            }
            match Self::name_table(&names) {
                Some((id_text, id_ends)) => engine.rename(id_text, id_ends),
                None => break,
            }
        }
        Self {
            engine: Compiled::FailClosed,
            secrets,
        }
    }

    /// The names concatenated, and where each ends; `None` if they do not fit the offsets.
    fn name_table(names: &[impl AsRef<str>]) -> Option<(Box<str>, Box<[u32]>)> {
        let mut id_text = String::with_capacity(names.iter().map(|n| n.as_ref().len()).sum());
        let mut id_ends = Vec::with_capacity(names.len());
        for name in names {
            id_text.push_str(name.as_ref());
            id_ends.push(u32::try_from(id_text.len()).ok()?);
        }
        Some((id_text.into_boxed_str(), id_ends.into_boxed_slice()))
    }

    /// Whether this redactor can never change any text (no value reaches the floor).
    pub fn is_empty(&self) -> bool {
        self.secrets == 0
    }

    /// Number of distinct values this redactor replaces.
    pub fn len(&self) -> usize {
        self.secrets
    }

    /// Replaces every registered value with its `[REDACTED:<secretId>]` marker (module docs).
    ///
    /// Returns the input borrowed when nothing matched, so the common path allocates nothing.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        self.redact_counting(text).0
    }

    /// [`Redactor::redact`], also reporting how many spans were replaced (for metrics: a count
    /// is content-free).
    pub fn redact_counting<'t>(&self, text: &'t str) -> (Cow<'t, str>, usize) {
        match &self.engine {
            Compiled::Empty => (Cow::Borrowed(text), 0),
            Compiled::Ready(engine) => engine.redact(text).unwrap_or_else(|_| fail_closed(text)),
            Compiled::FailClosed => fail_closed(text),
        }
    }

    /// The linear fallback path alone, for tests that check it against the reference model
    /// (the fast path reaches it only on pathological input). Same contract as
    /// [`Redactor::redact_counting`].
    #[doc(hidden)]
    pub fn redact_counting_fallback<'t>(&self, text: &'t str) -> (Cow<'t, str>, usize) {
        match &self.engine {
            Compiled::Empty => (Cow::Borrowed(text), 0),
            Compiled::Ready(engine) => engine
                .redact_fallback(text)
                .unwrap_or_else(|_| fail_closed(text)),
            Compiled::FailClosed => fail_closed(text),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_closed_engine_never_passes_text_through() {
        let r = Redactor {
            engine: Compiled::FailClosed,
            secrets: 1,
        };
        let (out, n) = r.redact_counting("contains sk-live-0123456789");
        assert_eq!(out, UNAVAILABLE_MARKER);
        assert_eq!(n, 1);
        assert!(matches!(r.redact(""), Cow::Borrowed("")));
    }

    #[test]
    fn floor_shortcut_agrees_with_counting() {
        for value in [
            "",
            "abcdefg",
            "abcdefgh",
            "秘密鍵",
            "秘密鍵秘密鍵秘密",
            "🔑🔑🔑🔑🔑🔑🔑",
        ] {
            assert_eq!(
                reaches_floor(value),
                value.chars().count() >= MIN_SECRET_CHARS
            );
        }
    }
}
