//! The optional second stage of duplicate folding: embeddings propose, the fact checks decide
//! (openwop-agent-memory.md §"Background consolidation (RFC 0068)": "merge duplicates", never
//! two different facts).
//!
//! When the caller has an embedding per entry (the same model for all of them: the host stores
//! one next to each entry when a model is configured), two entries of one cohort whose
//! vectors have a cosine similarity of at least [`Semantic::min_cosine`] are *proposed* as
//! duplicates. A proposal becomes a link only when the fact check agrees
//! ([`crate::link::fact_check`]): embeddings rate two sentences about one thing as similar
//! whether or not they agree, so the checks, not the score, keep distinct facts apart.
//!
//! Candidates: every pair of a cohort with at most [`ALL_PAIRS_VECTORS`] vectors; a larger
//! cohort is bucketed by sign-random-projection LSH ([`BANDS`] bands of [`BITS`] bits, fixed
//! projections), and a bucket of more than [`MAX_BUCKET`] entries is not searched.
//!
//! A link depends only on the two texts and their vectors; a merged entry keeps the vector of
//! the member whose text it keeps, so a second pass links nothing new.

use crate::minhash::fmix64;

/// Default [`Semantic::min_cosine`], chosen on the project's quality corpus with
/// all-MiniLM-L6-v2 vectors (docs/consolidation.md "The link rules"): the fact checks keep every
/// distinct fact apart down to 0.55 (at 0.5 one pair merges), and folding gains nothing below 0.7,
/// so 0.75 leaves the checks a margin.
pub const DEFAULT_MIN_COSINE: f32 = 0.75;

/// Largest number of vectors in a cohort compared all pairs.
pub const ALL_PAIRS_VECTORS: usize = 2_048;
const BANDS: usize = 16;
const BITS: usize = 8;
const MAX_BUCKET: usize = 64;

/// The embedding stage's input: one optional vector per entry (indexed like the entries).
#[derive(Clone, Copy, Debug)]
pub struct Semantic<'a> {
    pub vectors: &'a [Option<&'a [f32]>],
    pub min_cosine: f32,
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// Proposed pairs `(a, b)` (entry indices, `a < b`) among `members` with cosine at least the
/// threshold, in a deterministic order.
pub(crate) fn proposals(members: &[usize], semantic: &Semantic<'_>) -> Vec<(usize, usize)> {
    let with: Vec<(usize, &[f32])> = members
        .iter()
        .filter_map(|&m| semantic.vectors.get(m).copied().flatten().map(|v| (m, v)))
        .collect();
    let mut out = Vec::new();
    let mut check = |(a, va): (usize, &[f32]), (b, vb): (usize, &[f32])| {
        if cosine(va, vb) >= semantic.min_cosine {
            out.push((a.min(b), a.max(b)));
        }
    };
    if with.len() <= ALL_PAIRS_VECTORS {
        for (i, &x) in with.iter().enumerate() {
            for &y in &with[i + 1..] {
                check(x, y);
            }
        }
    } else {
        let sigs: Vec<u128> = with.iter().map(|(_, v)| signature(v)).collect();
        let mut keyed: Vec<(u64, usize)> = Vec::with_capacity(with.len());
        for band in 0..BANDS {
            keyed.clear();
            keyed.extend(sigs.iter().enumerate().map(|(i, s)| {
                let bits = (s >> (band * BITS)) as u64 & ((1 << BITS) - 1);
                ((band as u64) << 32 | bits, i)
            }));
            keyed.sort_unstable();
            for run in keyed.chunk_by(|a, b| a.0 == b.0) {
                if run.len() > MAX_BUCKET {
                    continue;
                }
                for (x, &(_, i)) in run.iter().enumerate() {
                    for &(_, j) in &run[x + 1..] {
                        check(with[i], with[j]);
                    }
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Sign random projections: bit `k` is the sign of the vector's dot product with a fixed
/// ±1 vector derived from `k` and the dimension index.
fn signature(v: &[f32]) -> u128 {
    let mut sig = 0u128;
    for k in 0..BANDS * BITS {
        let mut dot = 0.0f32;
        for (d, x) in v.iter().enumerate() {
            let r = fmix64(((k as u64) << 32) ^ d as u64 ^ 0x51a7_e3c9_0d2f_6b41);
            dot += if r & 1 == 0 { *x } else { -*x };
        }
        if dot >= 0.0 {
            sig |= 1 << k;
        }
    }
    sig
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_and_proposals() {
        let a = [1.0f32, 0.0, 0.0];
        let b = [0.9f32, 0.1, 0.0];
        let c = [0.0f32, 1.0, 0.0];
        let vectors = [Some(&a[..]), Some(&b[..]), Some(&c[..]), None];
        let s = Semantic {
            vectors: &vectors,
            min_cosine: 0.8,
        };
        assert_eq!(proposals(&[0, 1, 2, 3], &s), vec![(0, 1)]);
        assert!(cosine(&a, &c).abs() < 1e-6);
    }
}
