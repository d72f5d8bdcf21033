//! Ranked text search over one memoryRef's entries (docs/search.md "Ranked text search"): the
//! analyzer turns text into terms, BM25 (Robertson/Sparck Jones weights with Lucene's non-negative
//! IDF) scores each document against the query's terms. Pure and deterministic: the same documents
//! and query give the same order and the same scores, bit for bit (documents are scored in input
//! order, ties broken by id, newest first for time-ordered ids). No clock is read: what time an
//! entry was written comes in with it.

pub mod analyzer;
pub mod cache;
pub mod recency;
pub mod search;
pub mod similarity;

pub use analyzer::Analyzer;
pub use cache::TermCache;
pub use search::{rank_scored, search, search_scored, searchable_text, Ranking};

/// BM25 term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25 document-length normalisation.
pub const B: f64 = 0.75;

/// One searchable document: an id (ties are broken by it), its text, and when it was written
/// (milliseconds since the Unix epoch: of two versions of one answer, the later ranks first,
/// `recency`).
#[derive(Clone, Copy, Debug)]
pub struct Document<'a> {
    pub id: &'a str,
    pub text: &'a str,
    pub created_ms: i64,
}

/// A ranked hit: the document's index in the input and its score (BM25, cosine or fused).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub index: usize,
    pub score: f64,
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
    if limit == 0 {
        return Vec::new();
    }
    let mut hits = TextScores::new(analyzer, cache, documents, query).hits();
    sort_best_first(&mut hits, documents);
    hits.truncate(limit);
    hits
}

/// What ordering needs of a ranked document: its id (equal scores order by it) and when it was
/// written (newer versions first, `recency`). Implemented by [`Document`] for the full scan and
/// by [`Candidate`] for callers that never hold the text (the persisted index).
pub trait Dated {
    fn id(&self) -> &str;
    fn created_ms(&self) -> i64;
}

impl Dated for Document<'_> {
    fn id(&self) -> &str {
        self.id
    }

    fn created_ms(&self) -> i64 {
        self.created_ms
    }
}

/// A document known by its id and time alone: the persisted index has its statistics from
/// postings and never the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate<'a> {
    pub id: &'a str,
    pub created_ms: i64,
}

impl Dated for Candidate<'_> {
    fn id(&self) -> &str {
        self.id
    }

    fn created_ms(&self) -> i64 {
        self.created_ms
    }
}

/// Best first; equal scores by id, descending (newest first for time-ordered ids).
pub(crate) fn sort_best_first<D: Dated>(hits: &mut [Hit], documents: &[D]) {
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| documents[b.index].id().cmp(documents[a.index].id()))
    });
}

/// A query's distinct terms, sorted: the order of every per-term array below (and of the
/// matched-term bit sets), so whoever counts statistics for [`TextScores::from_counts`] must
/// count them in this order.
pub fn query_terms(analyzer: &Analyzer, query: &str) -> Vec<String> {
    let mut terms = analyzer.terms(query);
    terms.sort();
    terms.dedup();
    terms
}

/// BM25's collection statistics for one query over one candidate set: the set's size, its total
/// length (each document's BM25 length, [`Analyzer::analyse`]) and, per query term, how many
/// documents hold it. The full scan counts them by analysing every document; the persisted index
/// (`search-index`) from segment totals and postings. Lengths are whole numbers, so their sum is
/// exact in any order and equal inputs give equal scores bit for bit.
#[derive(Clone, Debug)]
pub struct Bm25 {
    average_length: f64,
    idf: Vec<f64>,
    idf_total: f64,
}

impl Bm25 {
    pub fn new(documents: u64, total_length: u64, document_frequency: &[u32]) -> Self {
        let n = documents as f64;
        let average_length = (total_length as f64 / n).max(1.0);
        let idf: Vec<f64> = document_frequency
            .iter()
            .map(|&df| {
                let df = f64::from(df);
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        let idf_total = idf.iter().sum();
        Bm25 {
            average_length,
            idf,
            idf_total,
        }
    }

    /// The number of query terms.
    pub fn terms(&self) -> usize {
        self.idf.len()
    }
}

/// How each document matches a query's terms: its BM25 score, which of the query's terms it
/// holds, and what share of the query's weight those are.
pub struct TextScores {
    /// The query's distinct terms (none when every word of it is a stop word).
    pub terms: usize,
    /// Per document: BM25, 0 when it holds no query term.
    pub bm25: Vec<f64>,
    /// Per document: the share of the query's IDF mass (the sum of its terms' IDF) that the
    /// document holds, in [0, 1]. A query word no document holds counts against every document:
    /// the text ranking then explains the query less well.
    pub coverage: Vec<f64>,
    /// Per document, `words` words: a bit set of the query terms it holds.
    matched: Vec<u64>,
    words: usize,
}

impl TextScores {
    pub fn new(
        analyzer: &Analyzer,
        cache: &TermCache,
        documents: &[Document<'_>],
        query: &str,
    ) -> Self {
        let query_terms = query_terms(analyzer, query);
        if query_terms.is_empty() || documents.is_empty() {
            return TextScores::empty(query_terms.len(), documents.len());
        }
        // Per document: its length and the frequency of each query term.
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
        let total_length = lengths.iter().map(|&l| u64::from(l)).sum();
        let statistics = Bm25::new(documents.len() as u64, total_length, &document_frequency);
        TextScores::from_counts(
            &statistics,
            documents.len(),
            frequencies
                .iter()
                .enumerate()
                .map(|(index, tf)| (index, lengths[index], tf.as_slice())),
        )
    }

    fn empty(terms: usize, documents: usize) -> Self {
        let words = terms.div_ceil(64);
        TextScores {
            terms,
            bm25: vec![0.0; documents],
            coverage: vec![0.0; documents],
            matched: vec![0; documents * words],
            words,
        }
    }

    /// The scores of `documents` documents from statistics counted elsewhere: `counts` gives,
    /// for the documents holding a query term (any others may be left out), their index, BM25
    /// length and frequency of each query term (in [`query_terms`] order). The documents need
    /// not be the whole candidate set `statistics` was counted over: a text ranking reads hits
    /// only, so the index scores just the documents its postings name.
    pub fn from_counts<'t>(
        statistics: &Bm25,
        documents: usize,
        counts: impl IntoIterator<Item = (usize, u32, &'t [u32])>,
    ) -> Self {
        let mut scores = TextScores::empty(statistics.terms(), documents);
        let words = scores.words;
        for (index, length, tf) in counts {
            if tf.iter().all(|&f| f == 0) {
                continue;
            }
            let norm = K1 * (1.0 - B + B * f64::from(length) / statistics.average_length);
            let (mut score, mut held) = (0.0, 0.0);
            for (term, (&f, idf)) in tf.iter().zip(&statistics.idf).enumerate() {
                if f == 0 {
                    continue;
                }
                let f = f64::from(f);
                score += idf * f * (K1 + 1.0) / (f + norm);
                held += idf;
                scores.matched[index * words + term / 64] |= 1u64 << (term % 64);
            }
            scores.bm25[index] = score;
            scores.coverage[index] = held / statistics.idf_total;
        }
        scores
    }

    /// The documents holding a query term, in input order.
    pub fn hits(&self) -> Vec<Hit> {
        self.bm25
            .iter()
            .enumerate()
            .filter(|(_, s)| **s > 0.0)
            .map(|(index, &score)| Hit { index, score })
            .collect()
    }

    /// Whether two documents hold exactly the same query terms.
    pub fn same_terms(&self, a: usize, b: usize) -> bool {
        let w = self.words;
        self.matched[a * w..(a + 1) * w] == self.matched[b * w..(b + 1) * w]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs<'a>(texts: &'a [(&'a str, &'a str)]) -> Vec<Document<'a>> {
        texts
            .iter()
            .map(|&(id, text)| Document {
                id,
                text,
                created_ms: 0,
            })
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

    #[test]
    fn scores_from_counts_over_the_hits_alone_rank_as_the_full_scan() {
        let corpus = [
            ("01A", "the office is in Paris"),
            ("01B", "lunch at noon"),
            ("01C", "the office moved to Berlin"),
            ("01D", "Paris office closed; the Paris team moved"),
        ];
        let times = [4, 1, 2, 3];
        let d: Vec<Document<'_>> = corpus
            .iter()
            .zip(times)
            .map(|(&(id, text), created_ms)| Document {
                id,
                text,
                created_ms,
            })
            .collect();
        let a = Analyzer::new(true);
        let cache = TermCache::with_budget(0);
        let query = "office Paris";
        let full = search(&a, &cache, &d, &[], query, Ranking::Text, 10);
        // What the index counts: statistics of the whole set, frequencies of the hits only.
        let terms = query_terms(&a, query);
        let analysed: Vec<(Vec<String>, u32)> = d.iter().map(|d| a.analyse(d.text)).collect();
        let tf = |terms_of: &[String]| -> Vec<u32> {
            terms
                .iter()
                .map(|t| terms_of.iter().filter(|x| *x == t).count() as u32)
                .collect()
        };
        let df: Vec<u32> = terms
            .iter()
            .map(|t| analysed.iter().filter(|(ts, _)| ts.contains(t)).count() as u32)
            .collect();
        let total: u64 = analysed.iter().map(|(_, l)| u64::from(*l)).sum();
        let statistics = Bm25::new(d.len() as u64, total, &df);
        let hits: Vec<usize> = (0..d.len())
            .filter(|&i| tf(&analysed[i].0).iter().any(|&f| f > 0))
            .collect();
        let counts: Vec<(u32, Vec<u32>)> = hits
            .iter()
            .map(|&i| (analysed[i].1, tf(&analysed[i].0)))
            .collect();
        let scores = TextScores::from_counts(
            &statistics,
            hits.len(),
            counts
                .iter()
                .enumerate()
                .map(|(k, (l, tf))| (k, *l, tf.as_slice())),
        );
        let candidates: Vec<Candidate<'_>> = hits
            .iter()
            .map(|&i| Candidate {
                id: d[i].id,
                created_ms: d[i].created_ms,
            })
            .collect();
        let sparse = search_scored(&candidates, &[], &scores, Ranking::Text, 10);
        let ids = |hits: &[Hit], id: &dyn Fn(usize) -> &'static str| -> Vec<(&'static str, u64)> {
            hits.iter()
                .map(|h| (id(h.index), h.score.to_bits()))
                .collect()
        };
        assert_eq!(
            ids(&sparse, &|i| corpus[hits[i]].0),
            ids(&full, &|i| corpus[i].0)
        );
        assert_eq!(full.len(), 3);
    }
}
