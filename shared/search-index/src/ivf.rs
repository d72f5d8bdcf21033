//! The approximate vector index of a large segment: an inverted file (IVF) of spherical k-means
//! lists (docs/search.md "Vectors at scale"). A segment holding at least
//! [`Ann::min_vectors`] vectors groups them into lists by their nearest centroid and stores each
//! list contiguously in its vector block, so a semantic query compares the query with the
//! centroids, then exactly with the vectors of the [`Ann::probes`] nearest lists only, and a
//! cold query needs only the block's directory and those lists' byte ranges. Below the
//! threshold a segment holds one list and no centroid: the exact scan, bit for bit the full
//! scan's answers.
//!
//! Why IVF and not a graph (HNSW): a graph is walked node by node across the whole vector set,
//! so a cold query must fetch all of it; IVF's lists are byte ranges. Why k-means by hand: Lloyd
//! iterations over a sample are a few dozen lines, and the clustering crates bring a matrix
//! library into every function's build for them.

/// When a segment gets lists, and how many a query reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ann {
    /// A segment with fewer vectors than this is scanned exactly.
    pub min_vectors: usize,
    /// Vectors per list, on average (the number of lists is the vectors over this).
    pub list_size: usize,
    /// Lists a query compares exactly, per segment, at least: the nearest to the query vector
    /// (an eighth of the lists where that is more, [`Ann::probes_for`]).
    pub probes: usize,
}

impl Default for Ann {
    /// Exact up to 150,000 vectors a segment (the exact scan meets the 100,000-entry targets),
    /// lists of about 4,096 above, at least 16 of them or an eighth read by a query (recall@10
    /// about 0.97-0.98 against the exact scan from 200,000 to 1,000,000 vectors: docs/search.md
    /// "Vectors at scale").
    fn default() -> Self {
        Ann {
            min_vectors: 150_000,
            list_size: 4_096,
            probes: 16,
        }
    }
}

impl Ann {
    /// The lists a query reads of a segment holding `lists`: recall at a fixed number of lists
    /// falls as a segment grows, at a fixed share it holds.
    pub fn probes_for(&self, lists: usize) -> usize {
        self.probes.max(lists.div_ceil(8))
    }

    /// The number of lists for `vectors` vectors: 1 (exact) below the threshold.
    pub fn lists_for(&self, vectors: usize) -> usize {
        if vectors < self.min_vectors.max(2) {
            1
        } else {
            vectors.div_ceil(self.list_size.max(1)).max(2)
        }
    }
}

/// Lloyd iterations on the training sample.
const ITERATIONS: usize = 10;
/// Training vectors per list: enough for stable centroids, bounded so that training stays a
/// fraction of assigning every vector.
const SAMPLE_PER_LIST: usize = 64;

/// `lists` unit centroids of `vectors` (rows of `d`), by spherical k-means (cosine is the
/// similarity searched): trained on an evenly spaced sample, seeded farthest first, so the
/// same vectors always give the same centroids (no randomness: a rebuild is the same object).
pub(crate) fn train(vectors: &[f32], d: usize, lists: usize) -> Vec<f32> {
    let n = vectors.len() / d;
    let m = n.min(lists * SAMPLE_PER_LIST);
    let sample: Vec<f32> = (0..m)
        .flat_map(|i| unit(&vectors[(i * n / m) * d..(i * n / m + 1) * d]))
        .collect();
    // Seeds: farthest first (each next seed the sample vector least similar to its nearest
    // seed so far), so that seeds spread over the clusters whatever order the vectors came in.
    let mut centroids: Vec<f32> = sample[..d].to_vec();
    let mut closest: Vec<f32> = sample
        .chunks_exact(d)
        .map(|v| dot(v, &sample[..d]))
        .collect();
    while centroids.len() < lists * d {
        let far = (0..m)
            .min_by(|&a, &b| closest[a].total_cmp(&closest[b]))
            .unwrap_or(0);
        let seed = sample[far * d..(far + 1) * d].to_vec();
        for (i, c) in closest.iter_mut().enumerate() {
            *c = c.max(dot(&sample[i * d..(i + 1) * d], &seed));
        }
        centroids.extend(seed);
    }
    let mut assigned = vec![0usize; m];
    for _ in 0..ITERATIONS {
        for (i, a) in assigned.iter_mut().enumerate() {
            *a = nearest(&centroids, d, &sample[i * d..(i + 1) * d]);
        }
        let mut sums = vec![0f32; lists * d];
        let mut counts = vec![0usize; lists];
        for (i, &a) in assigned.iter().enumerate() {
            counts[a] += 1;
            for (s, x) in sums[a * d..(a + 1) * d]
                .iter_mut()
                .zip(&sample[i * d..(i + 1) * d])
            {
                *s += x;
            }
        }
        for c in 0..lists {
            // An empty list keeps its centroid (it may win vectors outside the sample).
            if counts[c] > 0 {
                let mean = unit(&sums[c * d..(c + 1) * d]);
                centroids[c * d..(c + 1) * d].copy_from_slice(&mean);
            }
        }
    }
    centroids
}

/// The list whose centroid is nearest to `v` by cosine (centroids are unit length, so the
/// largest dot product; ties to the first).
pub(crate) fn nearest(centroids: &[f32], d: usize, v: &[f32]) -> usize {
    let mut best = (0, f32::NEG_INFINITY);
    for (c, centroid) in centroids.chunks_exact(d).enumerate() {
        let s = dot(centroid, v);
        if s > best.1 {
            best = (c, s);
        }
    }
    best.0
}

/// The `probes` lists nearest to `query`, by list number.
pub(crate) fn probe(centroids: &[f32], d: usize, query: &[f32], probes: usize) -> Vec<usize> {
    let mut scored: Vec<(f32, usize)> = centroids
        .chunks_exact(d)
        .enumerate()
        .map(|(c, centroid)| (dot(centroid, query), c))
        .collect();
    let k = probes.min(scored.len());
    if k == 0 {
        return Vec::new();
    }
    scored.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut lists: Vec<usize> = scored[..k].iter().map(|&(_, c)| c).collect();
    lists.sort_unstable();
    lists
}

fn unit(v: &[f32]) -> Vec<f32> {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter().map(|x| x / norm).collect()
    } else {
        v.to_vec()
    }
}

/// An f32 dot product in eight independent lanes (vectorised by the compiler): clustering and
/// probing only choose lists, the scores a query ranks by are `similarity::cosine_normed`'s.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for l in 0..8 {
            sums[l] += x[l] * y[l];
        }
    }
    for (x, y) in ar.iter().zip(br) {
        sums[0] += x * y;
    }
    sums.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separated_clusters_get_one_list_each_and_probing_finds_the_query_s() {
        // Four tight clusters around the axes of a 4-dimensional space.
        let d = 4;
        let mut vectors = Vec::new();
        for i in 0..400 {
            let axis = i % 4;
            for j in 0..d {
                let jitter = ((i * 7 + j * 13) % 10) as f32 / 100.0;
                vectors.push(if j == axis { 1.0 } else { jitter });
            }
        }
        let centroids = train(&vectors, d, 4);
        let lists: Vec<usize> = vectors
            .chunks_exact(d)
            .map(|v| nearest(&centroids, d, v))
            .collect();
        for axis in 0..4 {
            let mine: Vec<usize> = (0..400)
                .filter(|i| i % 4 == axis)
                .map(|i| lists[i])
                .collect();
            assert!(
                mine.iter().all(|&l| l == mine[0]),
                "a cluster split: {mine:?}"
            );
        }
        let mut distinct: Vec<usize> = (0..4).map(|a| lists[a]).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "two clusters share a list");
        assert_eq!(
            probe(&centroids, d, &[0.0, 0.0, 1.0, 0.0], 1),
            vec![lists[2]]
        );
        assert_eq!(probe(&centroids, d, &[0.0, 0.0, 1.0, 0.0], 9).len(), 4);
    }

    #[test]
    fn lists_only_above_the_threshold() {
        let ann = Ann {
            min_vectors: 1_000,
            list_size: 100,
            probes: 2,
        };
        assert_eq!(ann.lists_for(999), 1);
        assert_eq!(ann.lists_for(1_000), 10);
        assert_eq!(ann.lists_for(1_001), 11);
        // At least `probes`, an eighth of the lists past that.
        assert_eq!(ann.probes_for(10), 2);
        assert_eq!(ann.probes_for(245), 31);
    }
}
