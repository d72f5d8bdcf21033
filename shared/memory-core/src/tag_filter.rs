//! Tag-filtered listing (`MemoryListOptions.tag` of openwop-agent-memory.md, widened as
//! docs/api.md "Tag lists" says: `tag=a&tag=b` are entries carrying all of them,
//! `anyTag=a&anyTag=b` entries carrying any of them).
//!
//! A filter on the entries themselves would cost the whole ref for a rare tag (the store examines
//! `limit` items and keeps the few that match). Instead every entry has one small posting per tag
//! (the store writes them before the entry and removes them after it), and a page walks the
//! postings newest first: one list for one tag, a leapfrog intersection for `tag`s, a merge for
//! `anyTag`s. The postings only *propose* ids; each proposed entry is fetched and checked (it
//! exists, lives in the ref, is not expired, carries the tags), so a posting left behind by a
//! crash or a stale one is skipped, never shown. A page therefore costs what it returns: for one
//! tag, `limit` postings and `limit` entries, whatever the size of the ref.

use std::collections::{BTreeSet, HashMap};

use crate::error::{CoreError, StoreError};
use crate::model::{is_valid_tag, EntryKey, StoredEntry, MAX_TAG_BYTES};
use crate::ports::{EntryStore, IdBound, Page};
use crate::time::Timestamp;
use memory_guard::MemoryRef;

/// Most tags one filter may name (`tag` and `anyTag` together): each is a list walked per page.
pub const MAX_FILTER_TAGS: usize = 8;

/// A tag's name in store keys: a digest, so postings carry no tag text (tags can be personal
/// data that forget must be able to remove), every key has one length, and no tag can contain a
/// key separator.
pub fn tag_key(tag: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"wop-memory/tag/v1\0");
    h.update(tag.as_bytes());
    crate::model::hex(&h.finalize()[..16])
}

/// Which tags a listed entry must carry. Empty means no tag filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TagFilter {
    /// Every one of these.
    pub all: BTreeSet<String>,
    /// At least one of these (when not empty).
    pub any: BTreeSet<String>,
}

impl TagFilter {
    /// Builds a filter from the query's `tag` and `anyTag` values, with the write path's bounds on
    /// a tag (so a tag that could never be stored is a clear error, not an empty page).
    pub fn new(all: Vec<String>, any: Vec<String>) -> Result<TagFilter, CoreError> {
        for (field, tags) in [("tag", &all), ("anyTag", &any)] {
            if !tags.iter().all(|t| is_valid_tag(t)) {
                return Err(CoreError::invalid(
                    field,
                    format!("each tag 1-{MAX_TAG_BYTES} bytes without control characters"),
                ));
            }
        }
        let filter = TagFilter {
            all: all.into_iter().collect(),
            any: any.into_iter().collect(),
        };
        if filter.all.len() + filter.any.len() > MAX_FILTER_TAGS {
            return Err(CoreError::invalid(
                "tag",
                format!("at most {MAX_FILTER_TAGS} tags per filter (tag and anyTag together)"),
            ));
        }
        Ok(filter)
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty() && self.any.is_empty()
    }

    pub fn matches(&self, tags: &[String]) -> bool {
        self.all.iter().all(|t| tags.contains(t))
            && (self.any.is_empty() || self.any.iter().any(|t| tags.contains(t)))
    }

    /// Whether a read with this filter returns an entry with `tags`: it matches, and it is not
    /// a history copy unless the filter asks for history by one of its tags
    /// (`crate::history`).
    pub fn admits(&self, tags: &[String]) -> bool {
        self.matches(tags) && (!crate::history::is_history(tags) || self.asks_for_history())
    }

    /// Whether the filter names a history tag (`superseded-by:<id>` or `history-of:<id>`).
    pub fn asks_for_history(&self) -> bool {
        self.all
            .iter()
            .chain(&self.any)
            .any(|t| crate::history::is_history_tag(t))
    }

    /// A stable text of the filter, for binding a cursor to it (tags cannot hold control
    /// characters, so the separators cannot be forged by a tag).
    pub fn canonical(&self) -> String {
        let mut s = String::from("all");
        for t in &self.all {
            s.push('\u{1}');
            s.push_str(t);
        }
        s.push_str("\u{2}any");
        for t in &self.any {
            s.push('\u{1}');
            s.push_str(t);
        }
        s
    }
}

/// One tag's postings, read newest first in store pages as the walk needs them. Bounds only ever
/// move down, so a list found empty below one bound is empty below every later one.
struct Postings<'a> {
    tag: &'a str,
    /// Fetched ids not yet passed, newest first.
    buffered: std::collections::VecDeque<String>,
    /// The last id the store returned: the next fetch continues below it.
    last_fetched: Option<String>,
    /// The store has nothing more below `last_fetched` (or below the bound of the last fetch).
    exhausted: bool,
}

impl<'a> Postings<'a> {
    fn new(tag: &'a str) -> Self {
        Postings {
            tag,
            buffered: Default::default(),
            last_fetched: None,
            exhausted: false,
        }
    }

    /// The newest id of this list within `bound`, fetching at most `batch` postings when the
    /// buffer has run out.
    async fn first_within(
        &mut self,
        store: &dyn EntryStore,
        memory_ref: &MemoryRef,
        bound: Option<&IdBound>,
        batch: u32,
    ) -> Result<Option<String>, StoreError> {
        while let Some(front) = self.buffered.front() {
            if bound.is_none_or(|b| b.admits(front)) {
                return Ok(Some(front.clone()));
            }
            self.buffered.pop_front();
        }
        if self.exhausted {
            return Ok(None);
        }
        // Continue below what was fetched, or below the bound if that is lower.
        let resume = self
            .last_fetched
            .as_ref()
            .map(|id| IdBound::Below(id.clone()));
        let effective = match (resume, bound) {
            (None, b) => b.cloned(),
            (Some(r), None) => Some(r),
            (Some(r), Some(b)) => Some(IdBound::tighter(r, b.clone())),
        };
        let ids = store
            .tag_postings(memory_ref, self.tag, effective.as_ref(), batch)
            .await?;
        self.exhausted = ids.len() < batch as usize;
        self.last_fetched = ids.last().cloned().or(self.last_fetched.take());
        self.buffered.extend(ids);
        Ok(self
            .buffered
            .front()
            .filter(|id| bound.is_none_or(|b| b.admits(id)))
            .cloned())
    }
}

/// Up to `want` ids that every `all` list holds (or, with no `all` tags, that any `any` list
/// holds), newest first, strictly below `bound`; moves `bound` past the last one returned.
/// Fewer than `want` means the lists are exhausted.
async fn next_candidates(
    store: &dyn EntryStore,
    memory_ref: &MemoryRef,
    lists: &mut [Postings<'_>],
    intersect: bool,
    bound: &mut Option<IdBound>,
    want: usize,
) -> Result<Vec<String>, StoreError> {
    let batch = u32::try_from(want.max(1)).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(want);
    'page: while out.len() < want {
        let candidate = if intersect {
            // Leapfrog: the newest id of the first list, then each list in turn jumps to its
            // newest id at or below the candidate; k lists agreeing in a row is a match.
            let Some(mut candidate) = lists[0]
                .first_within(store, memory_ref, bound.as_ref(), batch)
                .await?
            else {
                break 'page;
            };
            let mut agreeing = 1;
            let mut i = 1 % lists.len();
            while agreeing < lists.len() {
                let at_most = IdBound::AtMost(candidate.clone());
                let Some(id) = lists[i]
                    .first_within(store, memory_ref, Some(&at_most), batch)
                    .await?
                else {
                    break 'page;
                };
                if id == candidate {
                    agreeing += 1;
                } else {
                    candidate = id;
                    agreeing = 1;
                }
                i = (i + 1) % lists.len();
            }
            candidate
        } else {
            // Merge: the newest head of any list.
            let mut newest: Option<String> = None;
            for list in lists.iter_mut() {
                if let Some(id) = list
                    .first_within(store, memory_ref, bound.as_ref(), batch)
                    .await?
                {
                    if newest.as_ref().is_none_or(|n| id > *n) {
                        newest = Some(id);
                    }
                }
            }
            match newest {
                Some(id) => id,
                None => break 'page,
            }
        };
        *bound = Some(IdBound::Below(candidate.clone()));
        out.push(candidate);
    }
    Ok(out)
}

/// One page of a tag-filtered list: exactly `limit` live entries carrying the tags, newest first,
/// unless the matches run out (then `next_after` is `None`). `after` is the last id of the
/// previous page. The filter must not be empty.
pub async fn tagged_page(
    store: &dyn EntryStore,
    memory_ref: &MemoryRef,
    filter: &TagFilter,
    after: Option<String>,
    limit: u32,
    now: Timestamp,
) -> Result<Page, StoreError> {
    let limit = limit.max(1) as usize;
    let intersect = !filter.all.is_empty();
    let driving = if intersect { &filter.all } else { &filter.any };
    let mut lists: Vec<Postings<'_>> = driving.iter().map(|t| Postings::new(t)).collect();
    if lists.is_empty() {
        return Ok(Page::default());
    }
    let mut bound = after.map(IdBound::Below);
    let mut entries = Vec::with_capacity(limit);
    let mut last = None;
    loop {
        let want = limit - entries.len();
        let ids =
            next_candidates(store, memory_ref, &mut lists, intersect, &mut bound, want).await?;
        let exhausted = ids.len() < want;
        let keys: Vec<EntryKey> = ids
            .iter()
            .map(|id| EntryKey {
                memory_ref: memory_ref.clone(),
                id: id.clone(),
            })
            .collect();
        let mut found: HashMap<String, StoredEntry> = store
            .get_many(&keys)
            .await?
            .into_iter()
            .map(|e| (e.entry.id.clone(), e))
            .collect();
        for id in &ids {
            if let Some(e) = found.remove(id) {
                if e.memory_ref == *memory_ref
                    && e.entry.is_live_at(now)
                    && filter.admits(&e.entry.tags)
                {
                    entries.push(e);
                }
            }
        }
        last = ids.last().cloned().or(last);
        if exhausted {
            return Ok(Page {
                entries,
                next_after: None,
            });
        }
        if entries.len() >= limit {
            return Ok(Page {
                entries,
                next_after: last,
            });
        }
    }
}
