//! Superseded facts kept as history (openwop-agent-memory.md §"Background consolidation (RFC
//! 0068)": "supersede stale facts"). A stale fact stops surfacing, yet what memory used to say
//! stays retrievable until forget or retention removes it.
//!
//! When a consolidation pass supersedes an entry, it writes a *history* copy in the same
//! all-or-nothing rewrite that puts the new version and deletes the old one: the old content,
//! tags, expiry, subject and attribution, plus two tags that say what it is:
//!
//! - `superseded-by:<id>` — the entry that now states the fact;
//! - `history-of:<id>` — the entry this copy preserves.
//!
//! Reads leave history out unless the tag filter asks for it by one of those tags
//! (`GET …/entries?tag=superseded-by:<id>` lists what an entry replaced). Forget reaches a copy
//! three ways: its subject is the old entry's, and its provenance names both the old entry and
//! the one that superseded it, so forgetting either takes the history with it. Retention: the
//! copy keeps the old expiry. Consolidation never takes history as input.

use sha2::{Digest, Sha256};
use ulid::Ulid;

use crate::model::{MemoryEntry, StoredEntry};

/// Tag naming the entry that superseded this one.
pub const SUPERSEDED_BY_PREFIX: &str = "superseded-by:";
/// Tag naming the entry this history copy preserves.
pub const HISTORY_OF_PREFIX: &str = "history-of:";

const HISTORY_ID_DOMAIN: &[u8] = b"wop-memory/history/v1\0";
const MAX_ULID_TIME_MS: i64 = (1 << 48) - 1;

/// Whether an entry is a history copy.
pub fn is_history(tags: &[String]) -> bool {
    tags.iter().any(|t| t.starts_with(SUPERSEDED_BY_PREFIX))
}

/// Whether a tag names history (a filter with one asks for history).
pub fn is_history_tag(tag: &str) -> bool {
    tag.starts_with(SUPERSEDED_BY_PREFIX) || tag.starts_with(HISTORY_OF_PREFIX)
}

/// The deterministic id of the history copy of `old` superseded by `by`: the old entry's time
/// and a digest of both ids, so a rerun of the same merge writes the same copy (put-if-absent
/// makes it a no-op) and ids still sort by time.
pub fn history_id(old: &StoredEntry, by: &str) -> String {
    let mut h = Sha256::new();
    h.update(HISTORY_ID_DOMAIN);
    h.update(old.entry.id.as_bytes());
    h.update(b"\0");
    h.update(by.as_bytes());
    let digest = h.finalize();
    let mut random = [0u8; 16];
    random[6..].copy_from_slice(&digest[..10]);
    let time = old.entry.created_at.as_millis().clamp(0, MAX_ULID_TIME_MS) as u64;
    Ulid::from_parts(time, u128::from_be_bytes(random)).to_string()
}

/// The history copy of `old`, superseded by the entry `by` (see the module documentation).
pub fn history_copy(old: &StoredEntry, by: &str) -> StoredEntry {
    let mut tags: Vec<String> = old
        .entry
        .tags
        .iter()
        .filter(|t| !is_history_tag(t))
        .cloned()
        .collect();
    tags.push(format!("{SUPERSEDED_BY_PREFIX}{by}"));
    tags.push(format!("{HISTORY_OF_PREFIX}{}", old.entry.id));
    let mut provenance = old.provenance.clone();
    provenance.push(old.entry.id.clone());
    provenance.push(by.to_owned());
    provenance.sort();
    provenance.dedup();
    StoredEntry {
        memory_ref: old.memory_ref.clone(),
        entry: MemoryEntry {
            id: history_id(old, by),
            content: old.entry.content.clone(),
            tags,
            created_at: old.entry.created_at,
            expires_at: old.entry.expires_at,
        },
        tier: old.tier,
        subject: old.subject.clone(),
        attribution: old.attribution.clone(),
        provenance,
        embedding: old.embedding.clone(),
    }
}
