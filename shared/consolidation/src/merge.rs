//! Turning a group into merges: the merged entry's fields, its deterministic id, and the split
//! of groups larger than one transaction (openwop-agent-memory.md §"Background consolidation
//! (RFC 0068)": merge / supersede / corroborate, and "idempotent over a stable corpus").
//!
//! # Merged fields
//!
//! | field | [`MergeKind::Duplicate`] | [`MergeKind::Supersede`] |
//! |---|---|---|
//! | content | the longest member text (UTF-8 bytes, whitespace collapsed); ties: the smallest string | the winner's (newest by `createdAt`, then id) |
//! | createdAt | the earliest member's | the winner's |
//! | expiresAt | the latest; `None` (never) if any member has `None` | the same rule over the members agreeing with the winner |
//! | tags | union of all members' tags | the winner's tags |
//! | `corroborated:<n>` | sum of all members' source counts | sum over members whose normalised text equals the winner's |
//! | provenance | sorted union of member ids and member provenance | same |
//!
//! Why these choices:
//! - *Longest content* keeps the fullest phrasing (punctuation, articles) and, unlike "newest",
//!   is a property of the texts alone: folding chunk results gives the same answer as folding
//!   everything at once, and a rerun after a partial crash picks the same text.
//! - *Supersede keeps the winner's createdAt* (not the earliest): the slot's recency order must
//!   survive the merge, or a later pass could let an older, back-dated write of the same slot win
//!   over the value this pass chose. Stale members' tags and expiry describe a fact that no
//!   longer holds, so only the winner and the members that agree with it contribute.
//! - Old `corroborated:*` tags are dropped and one fresh tag is written.
//!
//! # Deterministic ids
//!
//! A merged entry's id is a ULID whose 48-bit time part is the merged `createdAt` (clamped to
//! `0..2^48`) and whose 80-bit random part is the first 80 bits of
//! `sha256("wop-memory/consolidate/v1\0" + sorted replaced ids joined by "\0")`: a rerun that
//! plans the same merge produces the same id, so the store's put-if-absent turns it into a
//! no-op, and ids still sort by time like every other entry id.
//!
//! # Groups larger than one transaction
//!
//! A merge must fit one DynamoDB transaction, so it may replace at most
//! `max_replaced_per_merge` entries. A larger group is folded as a tree, all within one
//! [`crate::Plan`], children before parents: members (sorted by `createdAt`, then id) are cut
//! into consecutive chunks of at most that size, each chunk of two or more becomes an
//! intermediate merge (a chunk of one passes through unchanged), and the chunk results are
//! folded again the same way until one final merge remains, whose `replaced` names the
//! intermediate ids. Every merge is all-or-nothing on its own; the final merged entry equals the
//! one a single flat merge would produce (corroboration 250 for 250 duplicates), except that its
//! provenance also lists the intermediate ids. Only that final entry survives, so a second pass
//! sees one entry and does nothing. For a supersede group, members agreeing with the winner are
//! chunked separately from the stale ones, so every intermediate either agrees with the winner
//! entirely (and carries its full count) or is stale entirely, and the counts compose exactly.

use std::borrow::Cow;

use sha2::{Digest, Sha256};
use ulid::Ulid;

use crate::cluster::{Digest256, MemberText};
use crate::tags::{corroboration_tag, is_corroboration_tag, source_count};
use crate::{Entry, Merge, MergeKind, Merged};

/// Domain-separation prefix of the merged-id hash; bump the version to change the scheme.
pub const MERGED_ID_DOMAIN: &[u8] = b"wop-memory/consolidate/v1\0";

const MAX_ULID_TIME_MS: i64 = (1 << 48) - 1;

/// The deterministic id of a merged entry (see the module documentation). `replaced` may be in
/// any order; it is sorted here.
pub fn merged_id<S: AsRef<str>>(created_at_ms: i64, replaced: &[S]) -> String {
    let mut ids: Vec<&str> = replaced.iter().map(AsRef::as_ref).collect();
    ids.sort_unstable();
    let mut h = Sha256::new();
    h.update(MERGED_ID_DOMAIN);
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            h.update(b"\0");
        }
        h.update(id.as_bytes());
    }
    let digest = h.finalize();
    let mut random = [0u8; 16];
    random[6..].copy_from_slice(&digest[..10]);
    let time = created_at_ms.clamp(0, MAX_ULID_TIME_MS) as u64;
    Ulid::from_parts(time, u128::from_be_bytes(random)).to_string()
}

/// A member of a merge: an input entry (borrowed) or the result of an earlier merge of the
/// same group (owned).
#[derive(Clone)]
struct Item<'a> {
    id: Cow<'a, str>,
    content: Cow<'a, str>,
    /// SHA-256 of the normalised content: supersession compares texts by it.
    digest: Digest256,
    tags: Cow<'a, [String]>,
    created_at_ms: i64,
    expires_at_ms: Option<i64>,
    provenance: Cow<'a, [String]>,
    /// Source count (`corroborated:<n>`, else 1).
    weight: u64,
    /// [`display_len`] of `content`.
    display_len: usize,
    /// Supersede order: `(createdAt, id)` of the input entry this item's content comes from.
    rank: (i64, Cow<'a, str>),
}

impl<'a> Item<'a> {
    fn from_entry(e: &'a Entry, text: MemberText) -> Item<'a> {
        Item {
            id: Cow::Borrowed(&e.id),
            content: Cow::Borrowed(&e.content),
            digest: text.digest,
            tags: Cow::Borrowed(&e.tags),
            created_at_ms: e.created_at_ms,
            expires_at_ms: e.expires_at_ms,
            provenance: Cow::Borrowed(&e.provenance),
            weight: source_count(&e.tags),
            display_len: text.display_len,
            rank: (e.created_at_ms, Cow::Borrowed(&e.id)),
        }
    }
}

/// Appends the merges that fold the group `members` (input indices) into one entry; `texts` is
/// parallel to `members` (measured here if missing).
pub(crate) fn plan_group(
    kind: MergeKind,
    members: &[usize],
    texts: &[MemberText],
    entries: &[Entry],
    max_replaced: usize,
    out: &mut Vec<Merge>,
) {
    let max_replaced = max_replaced.max(2);
    let subject = members
        .first()
        .and_then(|&m| entries.get(m))
        .and_then(|e| e.subject.as_deref());
    let mut level: Vec<Item> = members
        .iter()
        .enumerate()
        .filter_map(|(k, &m)| {
            let e = entries.get(m)?;
            let text = texts
                .get(k)
                .copied()
                .unwrap_or_else(|| MemberText::of(&e.content));
            Some(Item::from_entry(e, text))
        })
        .collect();
    level.sort_by(|a, b| a.rank.cmp(&b.rank));
    let winner_digest = level.last().map(|w| w.digest).unwrap_or_default();
    loop {
        if level.len() <= max_replaced {
            if let Some((merge, _)) = merge_items(kind, subject, &level) {
                out.push(merge);
            }
            return;
        }
        let segments = match kind {
            MergeKind::Duplicate => vec![level],
            MergeKind::Supersede => {
                let (agreeing, stale): (Vec<Item>, Vec<Item>) =
                    level.into_iter().partition(|i| i.digest == winner_digest);
                vec![stale, agreeing]
            }
        };
        let mut next = Vec::new();
        for segment in segments {
            for chunk in segment.chunks(max_replaced) {
                match merge_items(kind, subject, chunk) {
                    Some((merge, carry)) => {
                        next.push(carry.into_item(&merge.merged));
                        out.push(merge);
                    }
                    None => next.extend_from_slice(chunk),
                }
            }
        }
        level = next;
    }
}

/// Length used to pick the fullest duplicate text: UTF-8 bytes after collapsing whitespace
/// (runs of whitespace count as one byte, leading and trailing whitespace not at all), with
/// whitespace as `str::split_whitespace` defines it.
pub(crate) fn display_len(s: &str) -> usize {
    if s.is_ascii() {
        // Same result from branch-free counts over blocks of 64 bytes, with 8-bit counters so
        // the compiler vectorises them (this runs for every entry of a pass): the
        // non-whitespace bytes, and the words, each starting at a non-whitespace byte that is
        // first or follows whitespace.
        let space = |c: u8| c == b' ' || c.wrapping_sub(b'\t') < 5; // \t \n \v \f \r
        let (mut bytes, mut words, mut after_space) = (0usize, 0usize, true);
        for block in s.as_bytes().chunks(64) {
            let mut spaces = [false; 64];
            for (sp, &c) in spaces.iter_mut().zip(block) {
                *sp = space(c);
            }
            let spaces = &spaces[..block.len()];
            let non_space: u8 = spaces.iter().map(|&sp| u8::from(!sp)).sum();
            let starts: u8 = spaces
                .iter()
                .zip(&spaces[1..])
                .map(|(&before, &sp)| u8::from(before & !sp))
                .sum();
            let first = spaces.first().is_some_and(|&sp| after_space & !sp);
            bytes += usize::from(non_space);
            words += usize::from(starts) + usize::from(first);
            after_space = spaces.last().copied().unwrap_or(after_space);
        }
        return bytes + words.saturating_sub(1);
    }
    let (mut bytes, mut words) = (0usize, 0usize);
    for w in s.split_whitespace() {
        bytes += w.len();
        words += 1;
    }
    bytes + words.saturating_sub(1)
}

/// `None` (never expires) if any item never expires, else the latest expiry.
fn latest_expiry<'a, 'b: 'a>(items: impl Iterator<Item = &'a Item<'b>>) -> Option<i64> {
    let mut latest: Option<i64> = None;
    for item in items {
        let exp = item.expires_at_ms?;
        latest = Some(latest.map_or(exp, |l| l.max(exp)));
    }
    latest
}

/// Sorted, deduplicated owned copies; deduplicating before copying saves an allocation per
/// repeated string (member tags and provenance repeat a lot).
fn sorted_unique(mut refs: Vec<&str>) -> Vec<String> {
    refs.sort_unstable();
    refs.dedup();
    refs.into_iter().map(str::to_string).collect()
}

fn with_corroboration<'a>(tags: impl Iterator<Item = &'a String>, n: u64) -> Vec<String> {
    let fresh = corroboration_tag(n);
    let mut refs: Vec<&str> = tags
        .map(String::as_str)
        .filter(|t| !is_corroboration_tag(t))
        .collect();
    refs.push(&fresh);
    sorted_unique(refs)
}

/// What an intermediate merged entry carries into the next level besides its stored fields.
struct Carry<'a> {
    digest: Digest256,
    weight: u64,
    display_len: usize,
    rank: (i64, Cow<'a, str>),
}

impl<'a> Carry<'a> {
    fn into_item(self, m: &Merged) -> Item<'a> {
        Item {
            id: Cow::Owned(m.id.clone()),
            content: Cow::Owned(m.content.clone()),
            digest: self.digest,
            tags: Cow::Owned(m.tags.clone()),
            created_at_ms: m.created_at_ms,
            expires_at_ms: m.expires_at_ms,
            provenance: Cow::Owned(m.provenance.clone()),
            weight: self.weight,
            display_len: self.display_len,
            rank: self.rank,
        }
    }
}

/// One merge of `items` (two or more; fewer yields `None`) and what its result carries.
fn merge_items<'a>(
    kind: MergeKind,
    subject: Option<&str>,
    items: &[Item<'a>],
) -> Option<(Merge, Carry<'a>)> {
    if items.len() < 2 {
        return None;
    }
    let mut replaced: Vec<String> = items.iter().map(|i| i.id.to_string()).collect();
    replaced.sort_unstable();
    let provenance = sorted_unique(
        items
            .iter()
            .flat_map(|i| {
                std::iter::once(i.id.as_ref()).chain(i.provenance.iter().map(String::as_str))
            })
            .collect(),
    );

    let (source, created_at_ms, expires_at_ms, tags, weight) = match kind {
        MergeKind::Duplicate => {
            let source = items
                .iter()
                .map(|i| (i.display_len, i))
                .reduce(|(bl, best), (il, i)| {
                    if il > bl || (il == bl && i.content < best.content) {
                        (il, i)
                    } else {
                        (bl, best)
                    }
                })?
                .1;
            let weight = items
                .iter()
                .fold(0u64, |acc, i| acc.saturating_add(i.weight));
            let created = items.iter().map(|i| i.created_at_ms).min()?;
            let tags = with_corroboration(items.iter().flat_map(|i| i.tags.iter()), weight);
            (source, created, latest_expiry(items.iter()), tags, weight)
        }
        MergeKind::Supersede => {
            let winner = items.iter().max_by(|a, b| a.rank.cmp(&b.rank))?;
            let agreeing = || items.iter().filter(|i| i.digest == winner.digest);
            let weight = agreeing().fold(0u64, |acc, i| acc.saturating_add(i.weight));
            let tags = with_corroboration(winner.tags.iter(), weight);
            (
                winner,
                winner.created_at_ms,
                latest_expiry(agreeing()),
                tags,
                weight,
            )
        }
    };

    let id = merged_id(created_at_ms, &replaced);
    let rank = match kind {
        MergeKind::Supersede => source.rank.clone(),
        MergeKind::Duplicate => (created_at_ms, Cow::Owned(id.clone())),
    };
    let merged = Merged {
        id,
        content: source.content.to_string(),
        tags,
        created_at_ms,
        expires_at_ms,
        // All items share one subject: groups never cross a subject boundary.
        subject: subject.map(str::to_string),
        provenance,
    };
    let carry = Carry {
        digest: source.digest,
        weight,
        display_len: source.display_len,
        rank,
    };
    Some((
        Merge {
            kind,
            replaced,
            merged,
        },
        carry,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_len_fast_path_matches_the_general_definition() {
        let general = |s: &str| {
            let words: Vec<&str> = s.split_whitespace().collect();
            words.iter().map(|w| w.len()).sum::<usize>() + words.len().saturating_sub(1)
        };
        for s in [
            "",
            " ",
            "a",
            "  a  b\t\tc \n",
            "User prefers email.",
            "x\u{0b}y\u{0c}z\r\nw",
            "é  ü",
            "\u{a0}a\u{a0}",
        ] {
            assert_eq!(display_len(s), general(s), "{s:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn display_len_matches_the_general_definition_on_any_text(
            s in proptest::prop_oneof!["[ a-c\t\n\r\u{b}\u{c}]{0,300}", "\\PC{0,200}", "[ a\u{a0}é]{0,150}"],
        ) {
            let words: Vec<&str> = s.split_whitespace().collect();
            let general =
                words.iter().map(|w| w.len()).sum::<usize>() + words.len().saturating_sub(1);
            proptest::prop_assert_eq!(display_len(&s), general);
        }
    }
}
