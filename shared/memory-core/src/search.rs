//! Ranked text search over one memoryRef (docs/search.md "Ranked text search"; the spec's `search`
//! dimension, RFC 0080 §A, advertises `filter`; this host adds a ranked route as a host extension).
//! CTI-1 exactly as list: a malformed or foreign ref has no results. Every query reads the ref's
//! live entries (strongly consistent, so a write is found by the next search, and a deleted,
//! forgotten or expired entry never is) and ranks them with BM25 in process (`text_search`). With
//! an embedder configured, `semantic` ranks by cosine similarity of the stored vectors to the
//! query's, and `hybrid` combines the BM25 and cosine scores (`text_search::similarity::fuse`). In
//! every mode, of two versions of one answer the one written later ranks first
//! (`text_search::recency`, by each entry's createdAt: no clock is read while ranking).

use serde::Serialize;

use crate::error::CoreError;
use crate::listing::{snapshot, MAX_LIST_LIMIT};
use crate::model::{MemoryEntry, StoredEntry};
use crate::reader::MemoryReader;
use crate::ref_index::{IndexQuery, SearchPath, Unserved};
use crate::tag_filter::{tagged_page, TagFilter};
use memory_guard::TenantScope;
use text_search::{searchable_text, Analyzer, Document, Hit, Ranking, TermCache};

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Results when the request names no limit.
pub const DEFAULT_SEARCH_LIMIT: u32 = 10;

/// How results are ranked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SearchMode {
    /// BM25 over the analyzer's terms.
    #[default]
    Text,
    /// Cosine similarity of embeddings (needs an embedder).
    Semantic,
    /// `Text` and `Semantic` scores combined (needs an embedder).
    Hybrid,
}

impl SearchMode {
    pub fn parse(raw: &str) -> Result<Self, CoreError> {
        match raw {
            "text" => Ok(SearchMode::Text),
            "semantic" => Ok(SearchMode::Semantic),
            "hybrid" => Ok(SearchMode::Hybrid),
            _ => Err(CoreError::invalid("mode", "one of text, semantic, hybrid")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchOptions {
    pub query: String,
    pub tags: TagFilter,
    pub limit: Option<u32>,
    /// English stemming of query and entries (default on).
    pub stem: bool,
    pub mode: SearchMode,
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
            mode: SearchMode::Text,
        })
    }

    pub fn with_mode(mut self, mode: SearchMode) -> Self {
        self.mode = mode;
        self
    }
}

/// `entries` as the ranker reads them, `texts` being their [`searchable_text`] (parallel).
pub fn documents<'a>(entries: &'a [StoredEntry], texts: &'a [String]) -> Vec<Document<'a>> {
    entries
        .iter()
        .zip(texts)
        .map(|(e, text)| Document {
            id: &e.entry.id,
            text,
            created_ms: e.entry.created_at.as_millis(),
        })
        .collect()
}

/// The best `limit` of `entries` for `query`, best first: one ranking for every door that
/// searches (the search route, the exchange door's grant queries), so they cannot drift.
/// `vectors` is parallel to `entries` (empty for a text ranking).
pub fn rank(
    cache: &TermCache,
    entries: &[StoredEntry],
    vectors: &[Option<&[f32]>],
    query: &str,
    ranking: Ranking<'_>,
    stem: bool,
    limit: usize,
) -> Vec<Hit> {
    let texts: Vec<String> = entries
        .iter()
        .map(|e| searchable_text(&e.entry.content, &e.entry.tags))
        .collect();
    let documents = documents(entries, &texts);
    text_search::search(
        &Analyzer::new(stem),
        cache,
        &documents,
        vectors,
        query,
        ranking,
        limit,
    )
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchHit {
    pub entry: MemoryEntry,
    pub score: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SearchResults {
    pub results: Vec<SearchHit>,
    /// Semantic and hybrid searches only: how many of the live entries ranked have no vector
    /// of the configured model yet (the embed pass has not reached them, or they were written
    /// under another model), so semantic ranking could not see them. A host extension, additive
    /// (docs/search.md "Semantic search"); absent from text searches and from a foreign ref's
    /// empty answer.
    #[serde(
        rename = "x-wop-memory-unembedded",
        skip_serializing_if = "Option::is_none"
    )]
    pub unembedded: Option<usize>,
    /// How the answer was found, for the read function's metrics; not on the wire.
    #[serde(skip)]
    pub path: crate::ref_index::SearchPath,
    /// Not on the wire: the searches-per-minute quota, when this search left it near its limit
    /// (docs/quotas.md "Metrics").
    #[serde(skip)]
    pub pressure: Vec<crate::quota::Pressure>,
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
        // Refused before any read: a mode this host cannot serve is the caller's error.
        let embedder = match (options.mode, self.embedder()) {
            (SearchMode::Text, _) => None,
            (_, Some(embedder)) => Some(embedder),
            (_, None) => {
                return Err(CoreError::invalid(
                    "mode",
                    "semantic and hybrid search need an embedder; this host has none \
                     (capabilities: memory.search.modes)",
                ))
            }
        };
        let now = self.clock().now();
        // Counted (and refused at the tenant's limit) before anything is read.
        let pressure = self.charge_search(memory_ref.tenant(), now).await?;
        let mut results = self
            .search_admitted(&memory_ref, options, embedder, now)
            .await?;
        results.pressure = pressure;
        Ok(results)
    }

    async fn search_admitted(
        &self,
        memory_ref: &memory_guard::MemoryRef,
        options: &SearchOptions,
        embedder: Option<&dyn crate::ports::Embedder>,
        now: crate::time::Timestamp,
    ) -> Result<SearchResults, CoreError> {
        let memory_ref = memory_ref.clone();
        let store = self.store();
        let limit = options
            .limit
            .unwrap_or(DEFAULT_SEARCH_LIMIT)
            .clamp(1, MAX_LIST_LIMIT) as usize;
        let query_vector = match embedder {
            Some(embedder) => Some(embedder.embed(&options.query).await?),
            None => None,
        };
        let ranking = match (&query_vector, options.mode) {
            (Some(q), SearchMode::Semantic) => Ranking::Semantic(&q.vector),
            (Some(q), SearchMode::Hybrid) => Ranking::Hybrid(&q.vector),
            _ => Ranking::Text,
        };
        let mut path = SearchPath::Scan;
        if let Some(index) = self.index() {
            let query = IndexQuery {
                query: &options.query,
                tags: &options.tags,
                stem: options.stem,
                ranking,
                model: query_vector.as_ref().map_or("", |q| q.model.as_str()),
                limit,
                now,
            };
            match index
                .search(store, &memory_ref, &query, self.term_cache())
                .await
            {
                Ok(results) => return Ok(results),
                Err(Unserved::NoIndex) => {}
                Err(Unserved::Failed(reason)) => {
                    tracing::warn!(
                        tenant = %memory_ref.tenant(),
                        reason,
                        "search index unavailable, ranking the table"
                    );
                    path = SearchPath::Fallback;
                }
            }
        }
        // Both reads keep only live entries of this ref carrying the tags, and history copies
        // only when the filter asks for them, as a listing does (the tag postings' read applies
        // `TagFilter::admits` itself).
        let live: Vec<StoredEntry> = if options.tags.is_empty() {
            let mut all = snapshot(store, &memory_ref, now).await?;
            all.retain(|e| !crate::history::is_history(&e.entry.tags));
            all
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
        // Only vectors of the configured model are compared (an empty one is none).
        let vectors: Vec<Option<&[f32]>> = match &query_vector {
            Some(q) => live
                .iter()
                .map(|e| {
                    let v = e
                        .embedding
                        .as_ref()
                        .filter(|v| v.model == q.model && !v.vector.is_empty());
                    v.map(|v| v.vector.as_slice())
                })
                .collect(),
            None => Vec::new(),
        };
        let unembedded = query_vector
            .as_ref()
            .map(|_| vectors.iter().filter(|v| v.is_none()).count());
        let hits = rank(
            self.term_cache(),
            &live,
            &vectors,
            &options.query,
            ranking,
            options.stem,
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
            unembedded,
            path,
            pressure: Vec::new(),
        })
    }
}
