//! One search over one candidate set, in any mode (docs/search.md "Ranked text search" and
//! "Semantic search"): what the search route runs and what the retrieval benchmark measures, so the
//! two cannot drift. Text ranks by BM25, semantic by cosine, hybrid by a convex combination of the
//! two (`similarity::fuse`); in every mode a newer version of an answer then goes first
//! (`recency`). A query whose every word is a stop word has no results in any mode: it names
//! nothing to look for, and its embedding would only find whatever is nearest to "what is it".

use crate::recency::{prefer_newer, NEWER_WITHIN, SAME_ANSWER_COVERAGE};
use crate::similarity::{cosines, fused, positive};
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
    let similarity = match ranking {
        Ranking::Text => Vec::new(),
        Ranking::Semantic(q) | Ranking::Hybrid(q) => cosines(vectors, q),
    };
    rank_scored(documents, &similarity, text, ranking, limit)
}

/// The ranking of [`search_scored`] from each document's cosine similarity to the query vector
/// computed elsewhere (`None` without a comparable vector; empty for [`Ranking::Text`]): the
/// persisted index keeps its vectors' norms, so it computes them with one dot product each
/// (`similarity::cosine_normed`, the same bits as `similarity::cosine`). The query vector in
/// `ranking` is not read here.
pub fn rank_scored<D: Dated>(
    documents: &[D],
    similarity: &[Option<f64>],
    text: &TextScores,
    ranking: Ranking<'_>,
    limit: usize,
) -> Vec<Hit> {
    debug_assert_eq!(text.bm25.len(), documents.len());
    if text.terms == 0 || limit == 0 {
        return Vec::new();
    }
    let mut hits = match ranking {
        Ranking::Text => text.hits(),
        Ranking::Semantic(_) => positive(similarity),
        Ranking::Hybrid(_) => fused(&text.bm25, &text.coverage, similarity),
    };
    reachable(&mut hits, limit);
    sort_best_first(&mut hits, documents);
    let same_answer =
        |a: usize, b: usize| text.coverage[a] >= SAME_ANSWER_COVERAGE && text.same_terms(a, b);
    prefer_newer(hits, documents, same_answer, limit)
}

/// Keeps the hits the newer-first rule can reach with `limit` answers: every round of it picks
/// among hits scoring at least [`NEWER_WITHIN`] of the best one left, and the best one left is
/// never below the `limit`-th best score, so a hit below that share of the `limit`-th best score
/// is never looked at. Sorting only the rest leaves the answer as it was, bit for bit, while a
/// semantic query over 100,000 vectors sorts a few hundred hits instead of every positive one.
fn reachable(hits: &mut Vec<Hit>, limit: usize) {
    if hits.len() <= limit {
        return;
    }
    let mut scores: Vec<f64> = hits.iter().map(|h| h.score).collect();
    let (_, nth, _) = scores.select_nth_unstable_by(limit - 1, |a, b| b.total_cmp(a));
    let floor = *nth * NEWER_WITHIN;
    hits.retain(|h| h.score >= floor);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Document;

    /// A small deterministic generator (no test dependency for one stream of numbers).
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            self.0 >> 33
        }
    }

    #[test]
    fn dropping_unreachable_hits_leaves_every_answer_as_it_was() {
        let mut rng = Lcg(7);
        let ids: Vec<String> = (0..400).map(|i| format!("{i:04}")).collect();
        for round in 0..300 {
            let n = 1 + (rng.next() % 400) as usize;
            let documents: Vec<Document<'_>> = ids[..n]
                .iter()
                .map(|id| Document {
                    id,
                    text: "",
                    created_ms: (rng.next() % 50) as i64,
                })
                .collect();
            // Coarse scores, so ties and hits right at the 0.7 floor occur.
            let mut hits = Vec::new();
            for index in 0..n {
                if !rng.next().is_multiple_of(4) {
                    let score = (1 + rng.next() % 40) as f64 / 40.0;
                    hits.push(Hit { index, score });
                }
            }
            let groups = 1 + rng.next() % 8;
            let same_answer = |a: usize, b: usize| a as u64 % groups == b as u64 % groups;
            let limit = 1 + (rng.next() % 30) as usize;
            let mut all = hits.clone();
            sort_best_first(&mut all, &documents);
            let want = prefer_newer(all, &documents, same_answer, limit);
            let before = hits.len();
            reachable(&mut hits, limit);
            assert!(hits.len() <= before);
            sort_best_first(&mut hits, &documents);
            let got = prefer_newer(hits, &documents, same_answer, limit);
            assert_eq!(got, want, "round {round}, limit {limit}");
        }
    }
}
