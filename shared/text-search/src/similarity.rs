//! Semantic and hybrid ranking (docs/search.md "Semantic search", `mode=semantic|hybrid`): cosine
//! similarity of embedding vectors, and reciprocal rank fusion of two rankings (Cormack, Clarke and
//! Büttcher, SIGIR 2009). Pure and deterministic like BM25: documents are scored in input order and
//! equal scores order by id, descending (newest first for time-ordered ids).

use std::collections::HashMap;

use crate::Hit;

/// RRF's rank constant: a document's fused score is the sum of `1 / (RRF_K + rank)` over the
/// rankings it appears in (rank counted from 1). 60 is the value of the paper and of most
/// engines that offer RRF.
pub const RRF_K: f64 = 60.0;

/// Cosine similarity; `None` when the lengths differ or either vector has no direction, so a
/// vector of another model (or a damaged one) is never compared.
///
/// The sums run in [`LANES`] independent accumulators, added together in a fixed order at the
/// end: a single running sum makes every addition wait for the one before (a 384-dimension
/// vector is a chain of 384 dependent additions), which bounded an exact scan of 100,000 vectors
/// to about 47 ms; independent lanes let the processor overlap them. Deterministic all the same:
/// the same inputs give the same bits.
pub fn cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let (mut dot, mut na, mut nb) = ([0f64; LANES], [0f64; LANES], [0f64; LANES]);
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (xs, ys) in a_chunks.zip(b_chunks) {
        for lane in 0..LANES {
            let (x, y) = (f64::from(xs[lane]), f64::from(ys[lane]));
            dot[lane] += x * y;
            na[lane] += x * x;
            nb[lane] += y * y;
        }
    }
    for (lane, (x, y)) in a_rest.iter().zip(b_rest).enumerate() {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot[lane] += x * y;
        na[lane] += x * x;
        nb[lane] += y * y;
    }
    let (dot, na, nb) = (total(&dot), total(&na), total(&nb));
    if na == 0.0 || nb == 0.0 || !dot.is_finite() {
        return None;
    }
    Some(dot / (na.sqrt() * nb.sqrt()))
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

/// The `limit` documents whose vectors are most similar to `query`, best first. Documents
/// without a comparable vector, or whose similarity is not positive (nothing in common with the
/// query, as a document sharing no term is no BM25 hit), are not hits.
pub fn nearest(ids: &[&str], vectors: &[Option<&[f32]>], query: &[f32], limit: usize) -> Vec<Hit> {
    let mut hits: Vec<Hit> = vectors
        .iter()
        .enumerate()
        .filter_map(|(index, v)| {
            let score = cosine((*v)?, query)?;
            (score > 0.0).then_some(Hit { index, score })
        })
        .collect();
    best_first(&mut hits, ids, limit);
    hits
}

/// Reciprocal rank fusion of `rankings` (each best first, indices into `ids`): the best
/// `limit` documents by fused score.
pub fn fuse(ids: &[&str], rankings: &[&[Hit]], limit: usize) -> Vec<Hit> {
    let mut fused: HashMap<usize, f64> = HashMap::new();
    for ranking in rankings {
        for (rank, hit) in ranking.iter().enumerate() {
            *fused.entry(hit.index).or_default() += 1.0 / (RRF_K + (rank + 1) as f64);
        }
    }
    // Summed in ranking order per document, so the scores are identical run to run.
    let mut hits: Vec<Hit> = fused
        .into_iter()
        .map(|(index, score)| Hit { index, score })
        .collect();
    best_first(&mut hits, ids, limit);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn fusion_rewards_agreement_and_is_the_rrf_sum() {
        let ids = ["a", "b", "c"];
        let text = [
            Hit {
                index: 0,
                score: 9.0,
            },
            Hit {
                index: 1,
                score: 5.0,
            },
        ];
        let semantic = [
            Hit {
                index: 1,
                score: 0.9,
            },
            Hit {
                index: 2,
                score: 0.8,
            },
        ];
        let hits = fuse(&ids, &[&text, &semantic], 10);
        let order: Vec<&str> = hits.iter().map(|h| ids[h.index]).collect();
        assert_eq!(order, ["b", "a", "c"], "b is in both rankings");
        let want_b = 1.0 / (RRF_K + 2.0) + 1.0 / (RRF_K + 1.0);
        assert!((hits[0].score - want_b).abs() < 1e-15);
        assert!(
            hits[1].score > hits[2].score,
            "rank 1 beats rank 2 of the other list"
        );
        assert!(fuse(&ids, &[], 10).is_empty());
    }
}
