//! A persisted search index per memoryRef, as a pure algorithm (docs/search.md "The index"):
//! immutable segments holding the analysis of the ref's entries (terms, postings, lengths, tags,
//! vectors), a manifest naming the live ones, a query that ranks the segments' live documents
//! plus the tail the table gives with exactly the full scan's scores, and merging (compaction,
//! and the rewrite that takes forgotten entries out for good). No I/O: the adapters fetch and
//! store the bytes, the services decide when.
//!
//! The ranking is `text_search`'s: the index only changes where the per-document statistics come
//! from (postings instead of analysing every entry), so a search over the index and a search
//! over the table give the same results in the same order.

mod codec;
pub mod manifest;
pub mod merge;
pub mod query;
pub mod segment;

pub use manifest::{segment_name, Manifest, SegmentRef};
pub use query::{Candidates, Location, TagQuery, TailDoc, View};
pub use segment::{DocMeta, IndexedDoc, Posting, Segment};

use text_search::{rank_candidates, Analyzer, Hit, Ranking, TermCache};

/// Why segment bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    #[error("corrupt segment: {0}")]
    Corrupt(&'static str),
}

/// One search over a ref's index: the candidates (every live document the tags admit) and the
/// best `limit` of them for `query`, best first, as `text_search::search` ranks the same
/// documents. `model` is the embedding model of the query's vector ("" for text).
#[allow(clippy::too_many_arguments)]
pub fn search<'a>(
    view: &View<'a>,
    tags: &TagQuery<'_>,
    analyzer: &Analyzer,
    cache: &TermCache,
    query: &str,
    ranking: Ranking<'_>,
    model: &str,
    limit: usize,
) -> (Candidates<'a>, Vec<Hit>) {
    let mut candidates = Candidates::collect(view, tags, model);
    let text_hits = match ranking {
        Ranking::Semantic(_) => Vec::new(),
        _ => candidates.bm25(view, analyzer, cache, query),
    };
    let hits = rank_candidates(&candidates.ids, &candidates.vectors, ranking, limit, || {
        text_hits
    });
    (candidates, hits)
}

/// What a segment is built from for one entry: its searchable text analysed without stemming.
pub fn indexed_doc(
    id: &str,
    content: &str,
    tags: &[String],
    created_at_ms: i64,
    expires_at_ms: Option<i64>,
    vector: Option<Vec<f32>>,
) -> IndexedDoc {
    IndexedDoc {
        id: id.to_owned(),
        created_at_ms,
        expires_at_ms,
        tags: tags.to_vec(),
        terms: Analyzer::new(false).terms(&text_search::searchable_text(content, tags)),
        vector,
    }
}
