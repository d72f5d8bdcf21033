//! Ranked text search over one memoryRef's entries (docs/search.md "Ranked text search"): the
//! analyzer turns text into terms, BM25 (Robertson/Sparck Jones weights with Lucene's non-negative
//! IDF) scores each document against the query's terms. Pure and deterministic: the same documents
//! and query give the same order and the same scores, bit for bit (documents are scored in input
//! order, ties broken by id, newest first for time-ordered ids).

pub mod analyzer;
pub mod cache;
pub mod recency;
pub mod search;
pub mod similarity;

pub use analyzer::Analyzer;
pub use cache::TermCache;
pub use search::{rank_candidates, search, searchable_text, Ranking};

/// BM25 term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25 document-length normalisation.
pub const B: f64 = 0.75;

/// One searchable document: an id (ties are broken by it) and its text.
#[derive(Clone, Copy, Debug)]
pub struct Document<'a> {
    pub id: &'a str,
    pub text: &'a str,
}

/// A ranked hit: the document's index in the input and its score (BM25, cosine or fused).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub index: usize,
    pub score: f64,
}

/// BM25 over one candidate set: its size, its total length in terms and, per query term, how
/// many candidates hold it. Shared by the full scan below and by the persisted index
/// (`search-index`), which counts the same statistics from postings: with equal inputs the scores
/// are equal bit for bit (lengths are whole numbers, so their sum is exact in any order).
#[derive(Clone, Debug)]
pub struct Bm25 {
    average_length: f64,
    idf: Vec<f64>,
}

impl Bm25 {
    pub fn new(documents: u64, total_length: u64, document_frequency: &[u32]) -> Self {
        let n = documents as f64;
        let average_length = (total_length as f64 / n).max(1.0);
        let idf = document_frequency
            .iter()
            .map(|&df| {
                let df = f64::from(df);
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        Bm25 {
            average_length,
            idf,
        }
    }

    /// The score of a document of `length` terms holding the query terms `tf` times each
    /// (parallel to the document frequencies given to [`Bm25::new`]).
    pub fn score(&self, length: u32, tf: &[u32]) -> f64 {
        let norm = K1 * (1.0 - B + B * f64::from(length) / self.average_length);
        tf.iter()
            .zip(&self.idf)
            .filter(|(f, _)| **f > 0)
            .map(|(&f, idf)| {
                let f = f64::from(f);
                idf * f * (K1 + 1.0) / (f + norm)
            })
            .sum()
    }
}

/// The best `limit` documents for `query`, best first; documents sharing no term with the query
/// are not hits. Scores are BM25 with [`K1`] and [`B`]; equal scores order by id, descending.
pub fn rank(
    analyzer: &Analyzer,
    documents: &[Document<'_>],
    query: &str,
    limit: usize,
) -> Vec<Hit> {
    rank_cached(
        analyzer,
        &TermCache::with_budget(0),
        documents,
        query,
        limit,
    )
}

/// [`rank`], with documents' analyses taken from (and kept in) `cache`: the same hits and
/// scores, bit for bit.
pub fn rank_cached(
    analyzer: &Analyzer,
    cache: &TermCache,
    documents: &[Document<'_>],
    query: &str,
    limit: usize,
) -> Vec<Hit> {
    let mut query_terms = analyzer.terms(query);
    query_terms.sort();
    query_terms.dedup();
    if query_terms.is_empty() || documents.is_empty() || limit == 0 {
        return Vec::new();
    }
    // Per document: its length in terms and the frequency of each query term.
    let mut lengths = Vec::with_capacity(documents.len());
    let mut frequencies: Vec<Vec<u32>> = Vec::with_capacity(documents.len());
    let mut document_frequency = vec![0u32; query_terms.len()];
    for d in documents {
        let analysed = cache.analysed(analyzer, d.text);
        let tf: Vec<u32> = query_terms.iter().map(|t| analysed.frequency(t)).collect();
        for (i, f) in tf.iter().enumerate() {
            if *f > 0 {
                document_frequency[i] += 1;
            }
        }
        lengths.push(analysed.length);
        frequencies.push(tf);
    }
    let total_length: u64 = lengths.iter().map(|&l| u64::from(l)).sum();
    let bm25 = Bm25::new(documents.len() as u64, total_length, &document_frequency);
    let mut hits: Vec<Hit> = frequencies
        .iter()
        .enumerate()
        .filter(|(_, tf)| tf.iter().any(|&f| f > 0))
        .map(|(index, tf)| Hit {
            index,
            score: bm25.score(lengths[index], tf),
        })
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| documents[b.index].id.cmp(documents[a.index].id))
    });
    hits.truncate(limit);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs<'a>(texts: &'a [(&'a str, &'a str)]) -> Vec<Document<'a>> {
        texts
            .iter()
            .map(|&(id, text)| Document { id, text })
            .collect()
    }

    fn ids(hits: &[Hit], d: &[Document<'_>]) -> Vec<String> {
        hits.iter().map(|h| d[h.index].id.to_owned()).collect()
    }

    #[test]
    fn a_rare_term_outranks_a_common_one() {
        let corpus = [
            ("01", "customer asked about a refund"),
            ("02", "customer prefers email"),
            (
                "03",
                "customer account number 77-4410 for the zephyr contract",
            ),
            ("04", "customer called again"),
        ];
        let d = docs(&corpus);
        let a = Analyzer::new(true);
        let hits = rank(&a, &d, "customer zephyr", 10);
        assert_eq!(ids(&hits, &d)[0], "03");
        assert_eq!(hits.len(), 4, "every document holds 'customer'");
        assert!(hits[0].score > hits[1].score);
        assert!(rank(&a, &d, "nothing matches", 10).is_empty());
        assert!(rank(&a, &d, "  ,. ", 10).is_empty());
    }

    #[test]
    fn the_cache_changes_nothing_but_the_work() {
        let (a, cache) = (Analyzer::new(true), TermCache::default());
        let d = docs(&[
            ("01", "Customer asked about refunds twice"),
            ("02", "refund approved; the customer was happy"),
            ("03", "会议在东京举行"),
        ]);
        for q in ["refund customer", "东京", "happy"] {
            let plain = rank(&a, &d, q, 10);
            assert_eq!(rank_cached(&a, &cache, &d, q, 10), plain, "{q}: cold");
            assert_eq!(rank_cached(&a, &cache, &d, q, 10), plain, "{q}: warm");
        }
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn scores_match_the_bm25_formula() {
        // Two documents, one query term in the first only: df 1, N 2.
        let corpus = [("a", "apple pie"), ("b", "banana bread loaf")];
        let d = docs(&corpus);
        let hits = rank(&Analyzer::new(false), &d, "apple", 10);
        let idf = (1.0f64 + (2.0 - 1.0 + 0.5) / (1.0 + 0.5)).ln();
        let avg = (2.0 + 3.0) / 2.0;
        let want = idf * 1.0 * (K1 + 1.0) / (1.0 + K1 * (1.0 - B + B * 2.0 / avg));
        assert_eq!(hits.len(), 1);
        assert!(
            (hits[0].score - want).abs() < 1e-12,
            "{} vs {want}",
            hits[0].score
        );
    }

    #[test]
    fn ties_break_by_id_newest_first_and_runs_are_identical() {
        let corpus = [
            ("01A", "same text"),
            ("01C", "same text"),
            ("01B", "same text"),
        ];
        let d = docs(&corpus);
        let a = Analyzer::new(true);
        let first = rank(&a, &d, "text", 10);
        assert_eq!(ids(&first, &d), ["01C", "01B", "01A"]);
        let again = rank(&a, &d, "text", 10);
        assert_eq!(first, again);
        assert_eq!(rank(&a, &d, "text", 2).len(), 2);
    }

    #[test]
    fn accented_and_cjk_queries_find_their_documents() {
        let corpus = [
            ("1", "Rendez-vous au café à Montréal"),
            ("2", "Meeting in Montreal next week"),
            ("3", "会议在东京举行"),
            ("4", "京都的会议取消了"),
        ];
        let d = docs(&corpus);
        let a = Analyzer::new(true);
        assert_eq!(ids(&rank(&a, &d, "cafe montreal", 10), &d)[0], "1");
        assert_eq!(
            ids(&rank(&a, &d, "東京", 10), &d),
            Vec::<String>::new(),
            "traditional vs simplified: no match"
        );
        assert_eq!(ids(&rank(&a, &d, "东京", 10), &d), ["3"]);
        let meetings = ids(&rank(&a, &d, "会议", 10), &d);
        assert_eq!(meetings.len(), 2);
    }
}
