//! Semantic and hybrid ranking (docs/search.md "Semantic search", `mode=semantic|hybrid`): cosine
//! similarity of embedding vectors, and a convex combination of normalised text and cosine scores
//! whose text weight follows how much of the query the text ranking explains. Pure and
//! deterministic like BM25: documents are scored in input order and equal scores order by id,
//! descending (newest first for time-ordered ids).
//!
//! Why not reciprocal rank fusion (which this crate used before): RRF adds `1 / (60 + rank)` per
//! list, so anything both lists hold outranks the first entry only one list holds, however weak
//! its text match. A question shares a word or two with many entries, so what only semantic
//! search found (a paraphrase sharing no word with the query) sank below everything both lists
//! held: on the project's corpus hybrid found fewer paraphrases than semantic alone. Fusing
//! normalised scores (Bruch, Gai and Ingber, "An Analysis of Fusion Functions for Hybrid
//! Retrieval", TOIS 2023, found a convex combination better than RRF) keeps how good each match
//! is; weighting the text score by the query's coverage lets an exact match of the query's rare
//! terms (a number, a name, an identifier, CJK) lead, and a partial one mostly give way to the
//! vectors.

use crate::{sort_best_first, Dated, Hit};

/// The text score's weight in the hybrid when the best text match holds every query term:
/// half. It falls with the square of the best match's coverage (a quarter of the weight at half
/// the query), the rest going to the cosine score. Chosen on the project's corpus: with it (and
/// with 0.6–0.7 and a cube) hybrid is at least as good as either mode alone on every query kind;
/// the settings next to it miss one kind by 0.02–0.08 of MRR (numbers when the text weight is
/// lower, paraphrases when it is higher).
pub const TEXT_WEIGHT: f64 = 0.5;

/// Cosine similarity; `None` when the lengths differ or either vector has no direction, so a
/// vector of another model (or a damaged one) is never compared.
///
/// The sums run in [`LANES`] independent accumulators, added together in a fixed order at the
/// end: a single running sum makes every addition wait for the one before (a 384-dimension
/// vector is a chain of 384 dependent additions), which bounded an exact scan of 100,000 vectors
/// to about 47 ms; independent lanes let the processor overlap them. Deterministic all the same:
/// the same inputs give the same bits.
pub fn cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    cosine_normed(a, norm_squared(a), b, norm_squared(b))
}

/// [`cosine`] with both squared norms given ([`norm_squared`]): an index computes a stored
/// vector's norm once, not per query, so a query's scan is one dot product per vector. The
/// same bits as [`cosine`]: every lane adds the same products in the same order.
pub fn cosine_normed(a: &[f32], na: f64, b: &[f32], nb: f64) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let dot = dot(a, b);
    if na == 0.0 || nb == 0.0 || !dot.is_finite() {
        return None;
    }
    Some(dot / (na.sqrt() * nb.sqrt()))
}

/// The squared length of `v`, summed as [`cosine`] sums it.
pub fn norm_squared(v: &[f32]) -> f64 {
    dot(v, v)
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    let mut sums = [0f64; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (xs, ys) in a_chunks.zip(b_chunks) {
        for lane in 0..LANES {
            sums[lane] += f64::from(xs[lane]) * f64::from(ys[lane]);
        }
    }
    for (lane, (x, y)) in a_rest.iter().zip(b_rest).enumerate() {
        sums[lane] += f64::from(*x) * f64::from(*y);
    }
    total(&sums)
}

/// Independent partial sums of [`cosine`].
const LANES: usize = 8;

/// The lanes added pairwise, always in the same order.
fn total(lanes: &[f64; LANES]) -> f64 {
    ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6]))
        + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]))
}

fn best_first(hits: &mut Vec<Hit>, ids: &[&str], limit: usize) {
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| ids[b.index].cmp(ids[a.index]))
    });
    hits.truncate(limit);
}

/// Each document's cosine similarity to `query`, `None` without a comparable vector.
pub fn cosines(vectors: &[Option<&[f32]>], query: &[f32]) -> Vec<Option<f64>> {
    vectors.iter().map(|v| cosine((*v)?, query)).collect()
}

/// The `limit` documents whose vectors are most similar to `query`, best first. Documents
/// without a comparable vector, or whose similarity is not positive (nothing in common with the
/// query, as a document sharing no term is no BM25 hit), are not hits.
pub fn nearest(ids: &[&str], vectors: &[Option<&[f32]>], query: &[f32], limit: usize) -> Vec<Hit> {
    let mut hits = positive(&cosines(vectors, query));
    best_first(&mut hits, ids, limit);
    hits
}

/// The documents with a positive similarity, in input order, unsorted: what [`nearest`] ranks.
pub fn positive(similarity: &[Option<f64>]) -> Vec<Hit> {
    similarity
        .iter()
        .enumerate()
        .filter_map(|(index, s)| {
            let score = (*s)?;
            (score > 0.0).then_some(Hit { index, score })
        })
        .collect()
}

/// The hybrid ranking of `documents`, best first, from each document's BM25 score and query
/// coverage (0 where it holds no query term) and cosine similarity: `a × T + (1 − a) × S`, where
/// `T` = coverage × BM25 / the best BM25, `S` = cosine / the best cosine (0 when not positive),
/// and `a` = [`TEXT_WEIGHT`] × (the best coverage)². Both scores are in [0, 1] whatever the
/// embedding model's cosine scale. A document found by neither is not a hit.
pub fn fuse<D: Dated>(
    documents: &[D],
    bm25: &[f64],
    coverage: &[f64],
    cosines: &[Option<f64>],
) -> Vec<Hit> {
    let mut hits = fused(bm25, coverage, cosines);
    sort_best_first(&mut hits, documents);
    hits
}

/// The hits of [`fuse`] in input order, unsorted.
pub fn fused(bm25: &[f64], coverage: &[f64], cosines: &[Option<f64>]) -> Vec<Hit> {
    let best_bm25 = bm25.iter().copied().fold(0.0, f64::max);
    let best_coverage = coverage.iter().copied().fold(0.0, f64::max);
    let best_cosine = cosines.iter().flatten().copied().fold(0.0, f64::max);
    let a = TEXT_WEIGHT * best_coverage * best_coverage;
    (0..bm25.len())
        .filter_map(|index| {
            let text = if bm25[index] > 0.0 {
                coverage[index] * bm25[index] / best_bm25
            } else {
                0.0
            };
            let semantic = match cosines.get(index).copied().flatten() {
                Some(c) if c > 0.0 => c / best_cosine,
                _ => 0.0,
            };
            let score = a * text + (1.0 - a) * semantic;
            (score > 0.0).then_some(Hit { index, score })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Document;

    #[test]
    fn cosine_refuses_what_it_cannot_compare() {
        assert_eq!(cosine(&[1.0, 0.0], &[1.0, 0.0]), Some(1.0));
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 2.0]), Some(0.0));
        assert_eq!(
            cosine(&[1.0, 0.0], &[1.0, 0.0, 0.0]),
            None,
            "other dimension"
        );
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), None, "no direction");
        assert_eq!(cosine(&[], &[]), None);
    }

    #[test]
    fn nearest_orders_by_similarity_then_id_and_skips_missing_vectors() {
        let ids = ["01A", "01B", "01C", "01D"];
        let a: &[f32] = &[1.0, 0.0];
        let b: &[f32] = &[0.6, 0.8];
        let vectors = [Some(b), Some(a), None, Some(a)];
        let hits = nearest(&ids, &vectors, &[1.0, 0.0], 10);
        let order: Vec<&str> = hits.iter().map(|h| ids[h.index]).collect();
        assert_eq!(
            order,
            ["01D", "01B", "01A"],
            "equal scores: newest id first"
        );
        assert!((hits[2].score - 0.6).abs() < 1e-6);
        assert_eq!(nearest(&ids, &vectors, &[1.0, 0.0], 1).len(), 1);
        let opposite = nearest(&ids, &vectors, &[-1.0, 0.0], 10);
        assert!(
            opposite.is_empty(),
            "no positive similarity, no hit: {opposite:?}"
        );
    }

    fn docs(n: usize) -> Vec<Document<'static>> {
        const IDS: [&str; 4] = ["01A", "01B", "01C", "01D"];
        IDS[..n]
            .iter()
            .map(|&id| Document {
                id,
                text: "",
                created_ms: 0,
            })
            .collect()
    }

    #[test]
    fn fusion_is_the_convex_combination_of_normalised_scores() {
        let d = docs(4);
        // 01A: a full text match only; 01B: half the query's weight and the best cosine;
        // 01C: the best cosine alone; 01D: nothing.
        let bm25 = [4.0, 2.0, 0.0, 0.0];
        let coverage = [1.0, 0.5, 0.0, 0.0];
        let cosines = [None, Some(0.8), Some(0.8), Some(-0.2)];
        let hits = fuse(&d, &bm25, &coverage, &cosines);
        let order: Vec<&str> = hits.iter().map(|h| d[h.index].id).collect();
        assert_eq!(order, ["01B", "01C", "01A"], "01D is found by neither");
        // a = 0.5 × 1²: 01B = 0.5 × (0.5 × 2 / 4) + 0.5 × 1; 01A = 0.5 × 1.
        assert!((hits[0].score - 0.625).abs() < 1e-12);
        assert!((hits[1].score - 0.5).abs() < 1e-12);
        assert!((hits[2].score - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_partial_text_match_gives_way_to_the_vectors() {
        let d = docs(2);
        // The best text match holds half the query's weight: the text weight is 0.5 × 0.5².
        let hits = fuse(&d, &[3.0, 0.0], &[0.5, 0.0], &[Some(0.3), Some(0.6)]);
        assert_eq!(hits[0].index, 1, "{hits:?}");
        let a = TEXT_WEIGHT * 0.25;
        assert!((hits[0].score - (1.0 - a)).abs() < 1e-12);
        assert!((hits[1].score - (a * 0.5 + (1.0 - a) * 0.5)).abs() < 1e-12);
        assert!(fuse(&d, &[0.0, 0.0], &[0.0, 0.0], &[None, Some(-0.1)]).is_empty());
    }
}
