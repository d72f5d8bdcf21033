//! One search over one candidate set, in any mode (docs/search.md "Ranked text search" and
//! "Semantic search"): what the search route runs and what the retrieval benchmark measures, so the
//! two cannot drift. Text ranks by BM25, semantic by cosine, hybrid by a convex combination of the
//! two (`similarity::fuse`); in every mode a newer version of an answer then goes first
//! (`recency`). A query whose every word is a stop word has no results in any mode: it names
//! nothing to look for, and its embedding would only find whatever is nearest to "what is it".

use crate::recency::{prefer_newer, SAME_ANSWER_COVERAGE};
use crate::similarity::{cosines, fuse, nearest};
use crate::{sort_best_first, Analyzer, Dated, Document, Hit, TermCache, TextScores};

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
    // Every mode analyses the query and the documents: which query terms an entry holds is
    // what tells two versions of one answer apart from two answers.
    let text = TextScores::new(analyzer, cache, documents, query);
    search_scored(documents, vectors, &text, ranking, limit)
}

/// The ranking of [`search`] from text scores computed elsewhere: the persisted index
/// (`search-index`) counts them from postings ([`TextScores::from_counts`]) and ranks through
/// here, so fusion, newer-first and tie-breaks exist once. `text` scores `documents` (parallel
/// to them); for [`Ranking::Text`] they may be the documents holding a query term alone, since
/// only hits are compared, and `vectors` may then be empty.
pub fn search_scored<D: Dated>(
    documents: &[D],
    vectors: &[Option<&[f32]>],
    text: &TextScores,
    ranking: Ranking<'_>,
    limit: usize,
) -> Vec<Hit> {
    debug_assert_eq!(text.bm25.len(), documents.len());
    if text.terms == 0 || limit == 0 {
        return Vec::new();
    }
    let hits = match ranking {
        Ranking::Text => {
            let mut hits = text.hits();
            sort_best_first(&mut hits, documents);
            hits
        }
        Ranking::Semantic(q) => {
            let ids: Vec<&str> = documents.iter().map(Dated::id).collect();
            nearest(&ids, vectors, q, ids.len())
        }
        Ranking::Hybrid(q) => fuse(documents, &text.bm25, &text.coverage, &cosines(vectors, q)),
    };
    let same_answer =
        |a: usize, b: usize| text.coverage[a] >= SAME_ANSWER_COVERAGE && text.same_terms(a, b);
    prefer_newer(hits, documents, same_answer, limit)
}
