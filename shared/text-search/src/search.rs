//! One search over one candidate set, in any mode (docs/search.md "Ranked text search" and
//! "Semantic search"): what the search route runs and what the retrieval benchmark measures, so the
//! two cannot drift. Text ranks by BM25, semantic by cosine (both times the recency prior), hybrid
//! fuses the two rankings by reciprocal rank.

use crate::recency::prefer_recent;
use crate::similarity::{fuse, nearest};
use crate::{rank_cached, Analyzer, Document, Hit, TermCache};

/// How to rank, with the query's vector where one is needed.
#[derive(Clone, Copy, Debug)]
pub enum Ranking<'q> {
    Text,
    Semantic(&'q [f32]),
    Hybrid(&'q [f32]),
}

/// The text an entry is searched by: its content, then its tags, one per line.
pub fn searchable_text(content: &str, tags: &[String]) -> String {
    let mut text = content.to_owned();
    for t in tags {
        text.push('\n');
        text.push_str(t);
    }
    text
}

/// The best `limit` of `documents` for `query`, best first. `vectors` (parallel to
/// `documents`, `None` where a document has no comparable vector) is read by the semantic and
/// hybrid rankings only.
pub fn search(
    analyzer: &Analyzer,
    cache: &TermCache,
    documents: &[Document<'_>],
    vectors: &[Option<&[f32]>],
    query: &str,
    ranking: Ranking<'_>,
    limit: usize,
) -> Vec<Hit> {
    let ids: Vec<&str> = documents.iter().map(|d| d.id).collect();
    rank_candidates(&ids, vectors, ranking, limit, || {
        rank_cached(analyzer, cache, documents, query, documents.len())
    })
}

/// The ranking of [`search`] over candidates whose BM25 hits come from elsewhere: `text_hits`
/// gives every BM25 hit among `ids` (best first), as [`rank_cached`] would. The persisted index
/// counts them from postings and ranks through here, so the prior and the fusion cannot drift
/// from the full scan's.
pub fn rank_candidates(
    ids: &[&str],
    vectors: &[Option<&[f32]>],
    ranking: Ranking<'_>,
    limit: usize,
    text_hits: impl FnOnce() -> Vec<Hit>,
) -> Vec<Hit> {
    let by_text = || {
        let mut hits = text_hits();
        prefer_recent(&mut hits, ids);
        hits
    };
    let by_vector = |query: &[f32]| {
        let mut hits = nearest(ids, vectors, query, ids.len());
        prefer_recent(&mut hits, ids);
        hits
    };
    let mut hits = match ranking {
        Ranking::Text => by_text(),
        Ranking::Semantic(q) => by_vector(q),
        Ranking::Hybrid(q) => fuse(ids, &[&by_text(), &by_vector(q)], limit),
    };
    hits.truncate(limit);
    hits
}
