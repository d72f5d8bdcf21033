//! Ranked text search over one memoryRef (README "Search"; the spec's `search` dimension, RFC 0080
//! §A, advertises `filter`; this host adds a ranked route as a host extension). CTI-1 exactly as
//! list: a malformed or foreign ref has no results. Every query reads the ref's live entries
//! (strongly consistent, so a write is found by the next search, and a deleted, forgotten or
//! expired entry never is) and ranks them with BM25 in process (`text_search`).

use serde::Serialize;

use crate::error::CoreError;
use crate::listing::{snapshot, MAX_LIST_LIMIT};
use crate::model::{MemoryEntry, StoredEntry};
use crate::reader::MemoryReader;
use crate::tag_filter::{tagged_page, TagFilter};
use memory_guard::TenantScope;
use text_search::{rank, Analyzer, Document};

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Results when the request names no limit.
pub const DEFAULT_SEARCH_LIMIT: u32 = 10;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchOptions {
    pub query: String,
    pub tags: TagFilter,
    pub limit: Option<u32>,
    /// English stemming of query and entries (default on).
    pub stem: bool,
}

impl SearchOptions {
    /// Checks the query text: present, not blank, at most [`MAX_QUERY_BYTES`].
    pub fn new(
        query: &str,
        tags: TagFilter,
        limit: Option<u32>,
        stem: bool,
    ) -> Result<Self, CoreError> {
        if query.trim().is_empty() {
            return Err(CoreError::invalid(
                "q",
                "query parameter is required and not blank",
            ));
        }
        if query.len() > MAX_QUERY_BYTES {
            return Err(CoreError::invalid(
                "q",
                format!("at most {MAX_QUERY_BYTES} bytes"),
            ));
        }
        Ok(SearchOptions {
            query: query.to_owned(),
            tags,
            limit,
            stem,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchHit {
    pub entry: MemoryEntry,
    pub score: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SearchResults {
    pub results: Vec<SearchHit>,
}

/// An entry's searchable text: its content and its tags.
fn searchable(e: &StoredEntry) -> String {
    let mut text = e.entry.content.clone();
    for t in &e.entry.tags {
        text.push('\n');
        text.push_str(t);
    }
    text
}

impl MemoryReader {
    /// The best entries of the ref for `options.query`, best first; ties by id, newest first.
    pub async fn search(
        &self,
        scope: &TenantScope,
        raw_ref: &str,
        options: &SearchOptions,
    ) -> Result<SearchResults, CoreError> {
        let Some(memory_ref) = scope.admit(raw_ref) else {
            return Ok(SearchResults::default());
        };
        let now = self.clock().now();
        let store = self.store();
        // Both reads already keep only live entries of this ref carrying the tags.
        let live: Vec<StoredEntry> = if options.tags.is_empty() {
            snapshot(store, &memory_ref, now).await?
        } else {
            // The tag postings bound the read to the entries carrying the tags.
            let mut all = Vec::new();
            let mut after = None;
            loop {
                let page = tagged_page(
                    store,
                    &memory_ref,
                    &options.tags,
                    after,
                    MAX_LIST_LIMIT,
                    now,
                )
                .await?;
                all.extend(page.entries);
                match page.next_after {
                    Some(next) => after = Some(next),
                    None => break all,
                }
            }
        };
        let texts: Vec<String> = live.iter().map(searchable).collect();
        let documents: Vec<Document<'_>> = live
            .iter()
            .zip(&texts)
            .map(|(e, text)| Document {
                id: &e.entry.id,
                text,
            })
            .collect();
        let limit = options
            .limit
            .unwrap_or(DEFAULT_SEARCH_LIMIT)
            .clamp(1, MAX_LIST_LIMIT) as usize;
        let hits = rank(
            &Analyzer::new(options.stem),
            &documents,
            &options.query,
            limit,
        );
        Ok(SearchResults {
            results: hits
                .into_iter()
                .map(|h| SearchHit {
                    entry: live[h.index].entry.clone(),
                    score: h.score,
                })
                .collect(),
        })
    }
}
