//! Inference of standing intentions from memory (openwop-agent-memory §"Inferred commitments",
//! RFC 0068 clause 1).
//!
//! The rules are a fixed table (shared/commitments/README.md "Inference rules"), applied sentence
//! by sentence to the entry's content as stored — that is, after SR-1 redaction: the caller must
//! never run inference on unredacted text. A sentence yields at most one commitment, and only
//! when all of these hold:
//!
//! 1. it states an intention: an intention phrase ("remind me", "follow up", "check back",
//!    "don't forget", "need to"…), a first-person plan ("I will", "we'll", "I'm going to",
//!    "let's"…), or an imperative verb ("call", "email", "ping"…) at the start of a clause;
//! 2. no intention in it is negated ("don't remind me", "I will not", "no need to");
//! 3. it is not a question, unless it is a request ("can you remind me…?", "please…?");
//! 4. it names a predicate clause ("when the invoice clears") — which wins over any time in the
//!    same sentence, because the time is then usually relative to the event — or a time
//!    expression that resolves strictly after `createdAt` and is not recurring ("every Monday").
//!
//! Rules fail closed: a phrasing they do not understand yields nothing, never a guess.

mod lexer;
mod predicate;
mod time_expr;

use std::fmt;

use chrono::TimeZone;

use crate::{CommitmentError, TimeZoneSpec};
use lexer::{Sentence, COMMA};
pub use predicate::{predicate_holds, predicate_tag, PREDICATE_TAG_PREFIX, STOPWORDS};
pub use time_expr::{DEFAULT_HOUR, TODAY_HOUR};

/// At most this many commitments are inferred from one entry, so one long entry cannot fan out
/// into unbounded records and timers.
pub const MAX_INFERRED_PER_ENTRY: usize = 8;

/// When a commitment fires.
///
/// `Debug` shows a time condition in full but hides a predicate's tag (only its length): the
/// tag is made of words the user wrote, and records are logged in places where entry content
/// must never appear.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Condition {
    /// Fire once at this instant (epoch milliseconds, UTC).
    At { due_ms: i64 },
    /// Fire on each false-to-true transition of "a live entry in the same memoryRef carries
    /// this tag" (see [`predicate_tag`] for the convention).
    Predicate { tag: String },
}

impl fmt::Debug for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::At { due_ms } => f.debug_struct("At").field("due_ms", due_ms).finish(),
            Condition::Predicate { tag } => f
                .debug_struct("Predicate")
                .field("tag_bytes", &tag.len())
                .finish_non_exhaustive(),
        }
    }
}

impl Condition {
    /// The `kind` reported on `commitment.fired`: `"time"` or `"predicate"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Condition::At { .. } => "time",
            Condition::Predicate { .. } => "predicate",
        }
    }

    pub fn due_ms(&self) -> Option<i64> {
        match self {
            Condition::At { due_ms } => Some(*due_ms),
            Condition::Predicate { .. } => None,
        }
    }

    pub fn tag(&self) -> Option<&str> {
        match self {
            Condition::At { .. } => None,
            Condition::Predicate { tag } => Some(tag),
        }
    }

    /// A canonical one-string form (`at:<epoch ms>` or `pred:<tag>`), used in the commitment id
    /// and suitable for storing the condition as one attribute.
    pub fn encode(&self) -> String {
        match self {
            Condition::At { due_ms } => format!("at:{due_ms}"),
            Condition::Predicate { tag } => format!("pred:{tag}"),
        }
    }

    /// The inverse of [`Condition::encode`].
    pub fn decode(s: &str) -> Result<Condition, CommitmentError> {
        let corrupt = CommitmentError::Corrupt { field: "condition" };
        if let Some(ms) = s.strip_prefix("at:") {
            // Only the canonical spelling round-trips ("+5", "05" and "-0" are not stored forms).
            return match ms.parse::<i64>() {
                Ok(due_ms) if due_ms.to_string() == ms => Ok(Condition::At { due_ms }),
                _ => Err(corrupt),
            };
        }
        match s.strip_prefix("pred:") {
            Some(tag)
                if tag.len() > PREDICATE_TAG_PREFIX.len()
                    && tag.starts_with(PREDICATE_TAG_PREFIX) =>
            {
                Ok(Condition::Predicate {
                    tag: tag.to_string(),
                })
            }
            _ => Err(corrupt),
        }
    }
}

/// One inferred commitment: its condition and the rule that produced it. No intention text:
/// the record, its id and its events stay content-free by construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inferred {
    pub condition: Condition,
    /// The rule's stable name (e.g. `time.next_weekday`, `predicate.when`). It is hashed into
    /// the commitment id, so renaming a rule is a breaking change for stored commitments.
    pub rule: &'static str,
}

/// Infers commitments from `content`, written at `created_at_ms`, for a tenant in zone `tz`.
///
/// An empty or unknown `tz` falls back to UTC (the spec's default) rather than dropping the
/// commitment; callers that want to reject bad tenant configuration validate it up front with
/// [`TimeZoneSpec::parse`] and call [`infer_in`].
pub fn infer(content: &str, created_at_ms: i64, tz: &str) -> Vec<Inferred> {
    let zone = TimeZoneSpec::parse(tz).unwrap_or_default();
    infer_in(content, created_at_ms, zone)
}

/// [`infer`] with an already validated zone.
pub fn infer_in(content: &str, created_at_ms: i64, zone: TimeZoneSpec) -> Vec<Inferred> {
    let Some(created) = zone.tz().timestamp_millis_opt(created_at_ms).single() else {
        return Vec::new();
    };
    let mut out: Vec<Inferred> = Vec::new();
    for sentence in lexer::sentences(content) {
        if out.len() >= MAX_INFERRED_PER_ENTRY {
            break;
        }
        if let Some(found) = infer_sentence(&sentence, created) {
            if !out.iter().any(|o| o.condition == found.condition) {
                out.push(found);
            }
        }
    }
    out
}

/// Intention phrases: they mark an intention wherever they stand.
const PHRASES: &[&[&str]] = &[
    &["remind", "me"],
    &["remind", "us"],
    &["reminder"],
    &["follow", "up"],
    &["follow-up"],
    &["followup"],
    &["check", "back"],
    &["check", "in"],
    &["circle", "back"],
    &["get", "back", "to"],
    &["touch", "base"],
    &["let", "me", "know"],
    &["let", "us", "know"],
    &["notify", "me"],
    &["notify", "us"],
    &["alert", "me"],
    &["don't", "forget"],
    &["dont", "forget"],
    &["do", "not", "forget"],
    &["need", "to"],
    &["needs", "to"],
    &["have", "to"],
    &["has", "to"],
];

/// First-person plans. Third-person ones ("she will call") are reports, not our intentions.
const MODALS: &[&[&str]] = &[
    &["i", "will"],
    &["i'll"],
    &["we", "will"],
    &["we'll"],
    &["i", "shall"],
    &["we", "shall"],
    &["i", "should"],
    &["we", "should"],
    &["i", "must"],
    &["we", "must"],
    &["i'm", "going", "to"],
    &["i", "am", "going", "to"],
    &["we're", "going", "to"],
    &["we", "are", "going", "to"],
    &["let's"],
    &["let", "us"],
    &["i", "plan", "to"],
    &["we", "plan", "to"],
    &["i", "intend", "to"],
    &["we", "intend", "to"],
    &["i", "promise", "to"],
    &["we", "promise", "to"],
];

/// Imperative verbs: an intention only at the start of a clause ("Call Bob tomorrow", "Tomorrow
/// at 9, call Bob", "When the invoice clears email Alice"), not mid-sentence ("the call").
const IMPERATIVES: &[&str] = &[
    "call", "phone", "email", "e-mail", "ping", "text", "message", "contact", "ask", "tell",
    "send", "schedule", "book", "review", "renew", "pay", "submit", "remind", "chase", "reply",
    "check", "remember", "confirm", "notify", "deploy", "run", "buy", "prepare", "draft",
];

/// Words that negate an intention up to three words before it.
const NEGATORS: &[&str] = &[
    "not",
    "never",
    "don't",
    "dont",
    "no",
    "won't",
    "wont",
    "cannot",
    "can't",
    "shouldn't",
    "mustn't",
    "didn't",
    "doesn't",
    "isn't",
    "aren't",
];

/// Clause boundaries for the imperative rule.
const CLAUSE_OPENERS: &[&str] = &[COMMA, "please", "and", "then", "so"];

/// A question that is really a request.
const REQUEST_OPENERS: &[&[&str]] = &[
    &["can", "you"],
    &["could", "you"],
    &["would", "you"],
    &["will", "you"],
    &["please"],
];

fn starts_with(w: &[String], i: usize, phrase: &[&str]) -> bool {
    w.get(i..i + phrase.len())
        .is_some_and(|s| s.iter().zip(phrase).all(|(a, b)| a == b))
}

#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
    /// First-person plan: "I will not" negates it from after.
    modal: bool,
}

fn infer_sentence(s: &Sentence, created: chrono::DateTime<chrono_tz::Tz>) -> Option<Inferred> {
    let w = &s.words;
    if s.question && !REQUEST_OPENERS.iter().any(|p| starts_with(w, 0, p)) {
        return None;
    }

    // Intention phrases and first-person plans, left to right, non-overlapping.
    let mut spans: Vec<Span> = Vec::new();
    let mut i = 0;
    while i < w.len() {
        let hit = PHRASES
            .iter()
            .map(|p| (p, false))
            .chain(MODALS.iter().map(|p| (p, true)))
            .find(|(p, _)| starts_with(w, i, p));
        match hit {
            Some((p, modal)) => {
                spans.push(Span {
                    start: i,
                    end: i + p.len(),
                    modal,
                });
                i += p.len();
            }
            None => i += 1,
        }
    }

    // Per-word masks, so every later check is O(1) and a hostile entry stays linear.
    let mut span_of: Vec<Option<usize>> = vec![None; w.len()];
    let mut span_start = vec![false; w.len()];
    let times = time_expr::scan(w);
    let mut time_start = vec![false; w.len()];
    let mut covered = vec![false; w.len()];
    for t in &times {
        time_start[t.start] = true;
        covered[t.start..t.end].iter_mut().for_each(|c| *c = true);
    }
    for sp in &spans {
        span_start[sp.start] = true;
    }
    // An imperative needs an object or complement: "Check: the backup ran" is a label.
    let is_imperative = |i: usize| {
        w.get(i).is_some_and(|x| IMPERATIVES.contains(&x.as_str()))
            && w.get(i + 1).is_some_and(|n| n != COMMA)
    };
    let clause = predicate::find(w, |i| time_start[i] || span_start[i], is_imperative);
    if let Some(c) = &clause {
        covered[c.start..c.end].iter_mut().for_each(|c| *c = true);
    }
    for (k, sp) in spans.iter().enumerate() {
        span_of[sp.start..sp.end]
            .iter_mut()
            .for_each(|s| *s = Some(k));
    }

    // Imperatives at a clause start: everything before them back to a boundary is a time
    // expression or the predicate clause.
    let in_clause = |i: usize| {
        clause
            .as_ref()
            .is_some_and(|c| (c.start..c.end).contains(&i))
    };
    let candidates: Vec<usize> = (0..w.len())
        .filter(|&i| is_imperative(i) && span_of[i].is_none() && !in_clause(i))
        .collect();
    for i in candidates {
        let mut j = i;
        let at_clause_start = loop {
            let Some(p) = j.checked_sub(1) else {
                break true;
            };
            if CLAUSE_OPENERS.contains(&w[p].as_str()) {
                break true;
            }
            if !covered[p] {
                break false;
            }
            j = p;
        };
        if at_clause_start {
            span_of[i] = Some(spans.len());
            spans.push(Span {
                start: i,
                end: i + 1,
                modal: false,
            });
        }
    }
    if spans.is_empty() {
        return None;
    }

    // Any negated intention silences the sentence: better a missed reminder than a false one.
    // The look-back stops at a comma and at another intention ("don't forget to follow up").
    let negated = spans.iter().enumerate().any(|(k, sp)| {
        let before = (sp.start.saturating_sub(3)..sp.start)
            .rev()
            .take_while(|&j| w[j] != COMMA && span_of[j].is_none_or(|o| o == k))
            .any(|j| NEGATORS.contains(&w[j].as_str()));
        let after = sp.modal
            && w.get(sp.end)
                .is_some_and(|a| matches!(a.as_str(), "not" | "never"));
        before || after
    });
    if negated {
        return None;
    }

    if let Some(c) = clause {
        return Some(Inferred {
            condition: Condition::Predicate { tag: c.tag },
            rule: "predicate.when",
        });
    }
    if w.iter()
        .any(|x| time_expr::RECURRENCE.contains(&x.as_str()))
    {
        return None;
    }
    times.iter().find_map(|t| {
        time_expr::resolve(t.expr, created).map(|due_ms| Inferred {
            condition: Condition::At { due_ms },
            rule: t.rule,
        })
    })
}

#[cfg(test)]
mod tests;
