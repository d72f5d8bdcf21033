//! Deterministic identifiers (RFC 0068 clause 2: "fire each commitment at most once … MUST NOT
//! re-fire a commitment on replay"; and "events carry a deterministic id (commitment id +
//! instant) so consumers can dedupe").
//!
//! Every id is a SHA-256 over a domain label and length-prefixed fields, truncated to 160 bits
//! and written as lowercase hex behind a short kind prefix: 44 characters of `[a-z0-9-]`, inside
//! the memory id charset `[A-Za-z0-9._-]` and under 64 characters. Length prefixes keep field
//! boundaries unambiguous (`("ab","c")` and `("a","bc")` differ); the domain label keeps the
//! three kinds of id from ever colliding with each other. 160 bits make an accidental collision
//! among even 10^15 ids negligible (birthday bound ~2^-60).
//!
//! Inputs are identifiers, never content: a commitment id can be logged and put on events.

use sha2::{Digest, Sha256};

use crate::Condition;

/// Hex digits kept from the digest (160 bits).
const HEX_DIGITS: usize = 40;

fn digest(domain: &str, fields: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for part in std::iter::once(domain.as_bytes()).chain(fields.iter().copied()) {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    let mut out = String::with_capacity(HEX_DIGITS);
    for b in h.finalize().iter().take(HEX_DIGITS / 2) {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 0x0f)]));
    }
    out
}

/// The id of the commitment inferred by `rule` from entry `source_entry_id` in `memory_ref`
/// (of `tenant_id`) with `condition`. Re-inferring the same entry (a retried write, a backfill)
/// yields the same id, so the store's create-if-absent write makes inference idempotent.
pub fn commitment_id(
    tenant_id: &str,
    memory_ref: &str,
    source_entry_id: &str,
    rule: &str,
    condition: &Condition,
) -> String {
    let cond = condition.encode();
    let d = digest(
        "wop-memory/commitment/v1",
        &[
            tenant_id.as_bytes(),
            memory_ref.as_bytes(),
            source_entry_id.as_bytes(),
            rule.as_bytes(),
            cond.as_bytes(),
        ],
    );
    format!("cmt-{d}")
}

/// The dedupe id of the `commitment.fired` event for one fire: the same commitment and instant
/// always give the same id, so a republish after a crash or a duplicate delivery is recognisable.
pub fn fire_event_id(commitment_id: &str, instant_ms: i64) -> String {
    let d = digest(
        "wop-memory/commitment-fired/v1",
        &[commitment_id.as_bytes(), &instant_ms.to_be_bytes()],
    );
    format!("cfe-{d}")
}

/// The runId of the run enqueued for one fire: deterministic for the same reason, so a replayed
/// or re-delivered fire asks for the same run and the run engine can refuse the duplicate.
pub fn run_id(commitment_id: &str, instant_ms: i64) -> String {
    let d = digest(
        "wop-memory/commitment-run/v1",
        &[commitment_id.as_bytes(), &instant_ms.to_be_bytes()],
    );
    format!("run-{d}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Condition {
        Condition::At { due_ms: ms }
    }

    fn well_formed(id: &str, prefix: &str) {
        assert_eq!(id.len(), 44, "{id}");
        assert!(id.starts_with(prefix), "{id}");
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
            "{id}"
        );
    }

    #[test]
    fn ids_are_stable_and_well_formed() {
        let r = "workspaces/t1/agents/a1/memories";
        let id = commitment_id("t1", r, "e1", "time.tomorrow", &at(1_000));
        assert_eq!(
            id,
            commitment_id("t1", r, "e1", "time.tomorrow", &at(1_000))
        );
        well_formed(&id, "cmt-");
        well_formed(&fire_event_id(&id, 1_000), "cfe-");
        well_formed(&run_id(&id, 1_000), "run-");
        assert_eq!(fire_event_id(&id, 1_000), fire_event_id(&id, 1_000));
        assert_eq!(run_id(&id, 1_000), run_id(&id, 1_000));
        // Pinned (cross-checked with Python hashlib) so an accidental change of the derivation (which would orphan stored
        // commitments and break dedupe across a deploy) fails loudly.
        assert_eq!(
            commitment_id("t", "r", "e", "x", &at(0)),
            commitment_id("t", "r", "e", "x", &Condition::decode("at:0").unwrap())
        );
        assert_eq!(commitment_id("t", "r", "e", "x", &at(0)), PINNED);
    }

    const PINNED: &str = "cmt-76e93aac5eef651a06d90a9ee8b796857255cdec";

    #[test]
    fn every_input_changes_the_id() {
        let r = "workspaces/t1/agents/a1/memories";
        let base = commitment_id("t1", r, "e1", "time.tomorrow", &at(1_000));
        let variants = [
            commitment_id("t2", r, "e1", "time.tomorrow", &at(1_000)),
            commitment_id(
                "t1",
                "workspaces/t1/agents/a2/memories",
                "e1",
                "time.tomorrow",
                &at(1_000),
            ),
            commitment_id("t1", r, "e2", "time.tomorrow", &at(1_000)),
            commitment_id("t1", r, "e1", "time.weekday", &at(1_000)),
            commitment_id("t1", r, "e1", "time.tomorrow", &at(1_001)),
            commitment_id(
                "t1",
                r,
                "e1",
                "time.tomorrow",
                &Condition::Predicate {
                    tag: "when:a-b".into(),
                },
            ),
            // Field boundaries matter.
            commitment_id("t1", r, "e", "1time.tomorrow", &at(1_000)),
        ];
        for v in &variants {
            assert_ne!(&base, v);
        }
        assert_ne!(fire_event_id(&base, 1), fire_event_id(&base, 2));
        assert_ne!(run_id(&base, 1), run_id(&base, 2));
        assert_ne!(fire_event_id(&base, 1)[4..], run_id(&base, 1)[4..]);
    }
}
