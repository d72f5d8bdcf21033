//! MEMORY-INDEX.json and its MEMORY-INDEX.md sibling — RFC 0062 run contract §5 ("a retrievable
//! MEMORY-INDEX.json the next session loads at startup, stored as a workspace file … an optional
//! human-editable .md sibling MAY accompany it; the JSON is normative").
//!
//! One index per agent workspace lists that agent's distillation archives, newest first, at most
//! [`MAX_INDEX_LINES`]. A session reads it at startup to find the long-term entries to load
//! (`outputEntryId`, readable through `get`) and the archives behind them. Shape (one line when
//! written; wrapped here):
//!
//! ```text
//! {"format":"wop-memory.index/v1","memoryRef":"workspaces/t-1/agents/a-1/memories",
//!  "updatedAt":"2026-11-21T03:00:04.117Z","entries":[
//!   {"archiveKey":"t-1/agents/a-1/archives/3f1c….json","digest":"3f1c…","outputEntryId":"01JD…",
//!    "createdAt":"2026-11-20T17:00:00.000Z","sourceCount":3,"tokensUsed":171,
//!    "tokenBudget":100000,"tags":["billing","preference"]}]}
//! ```
//!
//! **No content.** A line holds keys, ids, counts, instants and tags — never summary text. Tags
//! are the one field that could carry content (`customer:alice@example.com`, `fact:prefers
//! email`), so a line keeps only *plain* tag names: 1–64 bytes of `[A-Za-z0-9._-]`, which rules
//! out key:value tags, free text, addresses and anything with a `[REDACTED:…]` marker, and at most
//! [`MAX_INDEX_TAGS`] of them. A topic word like `preference` survives; a value never does. Forget
//! still removes whole lines derived from a forgotten subject ([`remove_where`]), so even a plain
//! tag that only that subject's entries carried goes with them.
//!
//! The functions are pure: the caller reads the object (with its ETag), calls [`upsert`] or
//! [`remove_where`], and writes back only when they report a change, with `If-Match` on that ETag
//! (retrying from the read on a conflict), then emits `workspace.updated`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::archive::Archive;
use crate::json::canonical_bytes;
use crate::keys;
use crate::time;
use crate::DistillError;

/// `format` of every index this version writes.
pub const INDEX_FORMAT: &str = "wop-memory.index/v1";

/// Most archives an index lists; older lines fall off (their entries and archives stay until
/// their own retention).
pub const MAX_INDEX_LINES: usize = 100;

/// Most tags kept on one line.
pub const MAX_INDEX_TAGS: usize = 16;

const MAX_INDEX_TAG_BYTES: usize = 64;

/// The index of one agent workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryIndex {
    pub memory_ref: String,
    /// When the lines last changed (the caller's clock; never moves backwards).
    pub updated_at_ms: i64,
    /// Newest first: `createdAt` descending, then `archiveKey` ascending.
    pub entries: Vec<IndexLine>,
}

/// One archive in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexLine {
    pub archive_key: String,
    pub digest: String,
    pub output_entry_id: String,
    /// The output entry's `createdAt` (the archive's `outputCreatedAt`).
    pub created_at_ms: i64,
    pub source_count: u32,
    pub tokens_used: u32,
    pub token_budget: u32,
    /// Plain section tags of the summary, sorted (see the module docs).
    pub tags: Vec<String>,
}

fn plain_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= MAX_INDEX_TAG_BYTES
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The tags an index line may carry: plain names only, sorted, unique, at most
/// [`MAX_INDEX_TAGS`].
pub fn index_tags<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let set: BTreeSet<&str> = names.into_iter().filter(|t| plain_tag(t)).collect();
    set.into_iter()
        .take(MAX_INDEX_TAGS)
        .map(str::to_owned)
        .collect()
}

impl IndexLine {
    /// The line for `archive`: its key, ids and counts, and the plain names of the summary's
    /// `## ` sections.
    pub fn from_archive(archive: &Archive) -> Result<Self, DistillError> {
        let headings = archive
            .summary
            .lines()
            .filter_map(|line| line.strip_prefix("## "));
        Ok(Self {
            archive_key: archive.key()?,
            digest: archive.digest.clone(),
            output_entry_id: archive.output_entry_id.clone(),
            created_at_ms: archive.output_created_at_ms,
            source_count: archive.source_count,
            tokens_used: archive.tokens_used,
            token_budget: archive.token_budget,
            tags: index_tags(headings),
        })
    }
}

fn normalise(entries: &mut Vec<IndexLine>) {
    for line in entries.iter_mut() {
        line.tags = index_tags(line.tags.iter().map(String::as_str));
    }
    entries.sort_by(|a, b| {
        b.created_at_ms
            .cmp(&a.created_at_ms)
            .then_with(|| a.archive_key.cmp(&b.archive_key))
    });
    let mut seen = BTreeSet::new();
    entries.retain(|line| seen.insert(line.archive_key.clone()));
    entries.truncate(MAX_INDEX_LINES);
}

/// Adds (or replaces) the line for one archive and reports whether the index changed.
///
/// Idempotent: upserting a line that is already there returns the index unchanged — same lines,
/// same `updatedAt` — and `false`, so a rerun writes nothing and emits no `workspace.updated`.
/// A missing index (`None`) is created (`true`). The line must name an archive of `memory_ref`
/// and an existing index must belong to it (CTI-1), else [`DistillError::IndexRefMismatch`].
pub fn upsert(
    index: Option<MemoryIndex>,
    memory_ref: &str,
    line: IndexLine,
    now_ms: i64,
) -> Result<(MemoryIndex, bool), DistillError> {
    if keys::archive_key(memory_ref, &line.digest)? != line.archive_key {
        return Err(DistillError::IndexRefMismatch);
    }
    let (mut index, created) = match index {
        Some(existing) if existing.memory_ref != memory_ref => {
            return Err(DistillError::IndexRefMismatch);
        }
        Some(existing) => (existing, false),
        None => (
            MemoryIndex {
                memory_ref: memory_ref.to_owned(),
                updated_at_ms: now_ms,
                entries: Vec::new(),
            },
            true,
        ),
    };
    let before = index.entries.clone();
    index.entries.retain(|l| l.archive_key != line.archive_key);
    index.entries.push(line);
    normalise(&mut index.entries);
    let changed = created || index.entries != before;
    if changed {
        index.updated_at_ms = index.updated_at_ms.max(now_ms);
    } else {
        index.entries = before;
    }
    Ok((index, changed))
}

/// Drops every line `pred` selects (forget, retention pruning) and returns how many went.
/// `updatedAt` moves only when something was removed.
pub fn remove_where(
    mut index: MemoryIndex,
    mut pred: impl FnMut(&IndexLine) -> bool,
    now_ms: i64,
) -> (MemoryIndex, usize) {
    let before = index.entries.len();
    index.entries.retain(|line| !pred(line));
    let removed = before - index.entries.len();
    if removed > 0 {
        index.updated_at_ms = index.updated_at_ms.max(now_ms);
    }
    (index, removed)
}

/// Canonical JSON of the index (fixed field order, no whitespace, trailing `\n`).
pub fn to_json_bytes(index: &MemoryIndex) -> Vec<u8> {
    canonical_bytes(&WireIndex {
        format: INDEX_FORMAT.to_owned(),
        memory_ref: index.memory_ref.clone(),
        updated_at: time::format_rfc3339_ms(index.updated_at_ms),
        entries: index
            .entries
            .iter()
            .map(|line| WireLine {
                archive_key: line.archive_key.clone(),
                digest: line.digest.clone(),
                output_entry_id: line.output_entry_id.clone(),
                created_at: time::format_rfc3339_ms(line.created_at_ms),
                source_count: line.source_count,
                tokens_used: line.tokens_used,
                token_budget: line.token_budget,
                tags: line.tags.clone(),
            })
            .collect(),
    })
}

/// The document as stored; field order is byte order (see `json`).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireIndex {
    format: String,
    memory_ref: String,
    updated_at: String,
    entries: Vec<WireLine>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireLine {
    archive_key: String,
    digest: String,
    output_entry_id: String,
    created_at: String,
    source_count: u32,
    tokens_used: u32,
    token_budget: u32,
    tags: Vec<String>,
}

/// Reads stored index bytes back, checking the format, the ref and that every line names an
/// archive of that ref.
pub fn from_json_bytes(bytes: &[u8]) -> Result<MemoryIndex, DistillError> {
    let wire: WireIndex = serde_json::from_slice(bytes)
        .map_err(|_| DistillError::MalformedIndex("not an index document"))?;
    if wire.format != INDEX_FORMAT {
        return Err(DistillError::MalformedIndex("unknown format"));
    }
    keys::parse_memory_ref(&wire.memory_ref)
        .map_err(|_| DistillError::MalformedIndex("bad memoryRef"))?;
    let updated_at_ms = time::parse_rfc3339_ms(&wire.updated_at)
        .ok_or(DistillError::MalformedIndex("bad updatedAt"))?;
    let mut entries = Vec::with_capacity(wire.entries.len());
    for line in wire.entries {
        let key = keys::archive_key(&wire.memory_ref, &line.digest)
            .map_err(|_| DistillError::MalformedIndex("bad digest"))?;
        if key != line.archive_key {
            return Err(DistillError::MalformedIndex("archive of another memoryRef"));
        }
        entries.push(IndexLine {
            archive_key: line.archive_key,
            digest: line.digest,
            output_entry_id: line.output_entry_id,
            created_at_ms: time::parse_rfc3339_ms(&line.created_at)
                .ok_or(DistillError::MalformedIndex("bad createdAt"))?,
            source_count: line.source_count,
            tokens_used: line.tokens_used,
            token_budget: line.token_budget,
            tags: line.tags,
        });
    }
    Ok(MemoryIndex {
        memory_ref: wire.memory_ref,
        updated_at_ms,
        entries,
    })
}

fn cell(text: &str) -> String {
    text.replace('\\', "\\\\").replace('|', "\\|")
}

/// The human-readable MEMORY-INDEX.md: the same lines as a table. It is regenerated from the JSON
/// on every change (the JSON is normative), so hand edits to it do not survive an update.
pub fn render_markdown(index: &MemoryIndex) -> String {
    let mut out = String::from("# Memory index\n\n");
    out.push_str(&format!("- memoryRef: `{}`\n", cell(&index.memory_ref)));
    out.push_str(&format!(
        "- updated: {}\n",
        time::format_rfc3339_ms(index.updated_at_ms)
    ));
    out.push_str(&format!(
        "- archives: {} (newest first, at most {MAX_INDEX_LINES})\n\n",
        index.entries.len()
    ));
    if index.entries.is_empty() {
        out.push_str("_No distillation archives yet._\n");
        return out;
    }
    out.push_str("| created | output entry | sources | tokens used / budget | tags | archive |\n");
    out.push_str("| --- | --- | ---: | ---: | --- | --- |\n");
    for line in &index.entries {
        let tags = if line.tags.is_empty() {
            "—".to_owned()
        } else {
            cell(&line.tags.join(", "))
        };
        out.push_str(&format!(
            "| {} | `{}` | {} | {} / {} | {} | `{}` |\n",
            time::format_rfc3339_ms(line.created_at_ms),
            cell(&line.output_entry_id),
            line.source_count,
            line.tokens_used,
            line.token_budget,
            tags,
            cell(&line.archive_key),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_tags_survive() {
        let tags = index_tags([
            "preference",
            "billing",
            "customer:alice@example.com",
            "fact:prefers email",
            "has space",
            "[REDACTED:k1]",
            "",
            "preference",
            &"x".repeat(65),
        ]);
        assert_eq!(tags, vec!["billing", "preference"]);
        let many: Vec<String> = (0..40).map(|i| format!("t{i:02}")).collect();
        assert_eq!(
            index_tags(many.iter().map(String::as_str)).len(),
            MAX_INDEX_TAGS
        );
    }
}
