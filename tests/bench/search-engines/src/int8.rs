//! int8 scalar quantisation of the approximate index's vectors, measured beside the f32 lists it
//! would replace (docs/search.md "Vectors at scale"; not in the product): each stored vector as
//! one byte a dimension and its own scale (its largest magnitude over 127), the query quantised
//! the same way, compared by an integer dot product; the best `10 * r` by that score rescored
//! with the exact f32 cosine, the best 10 of those answered.
//!
//! Measured on vectors alone (no text, tail or newer-first rule, which quantisation does not
//! touch): recall@10 against the exact f32 scan of every vector of the segment and against the
//! f32 lists read (the same lists), CPU time of a warm query, bytes per vector and per list read.

use std::time::Duration;

use crate::{percentile, row};

use search_index::Segment;
use text_search::similarity::{cosine_normed, norm_squared};

/// The vectors of a segment as int8 codes, list by list as the lists store them.
pub struct Quantised {
    d: usize,
    lists: Vec<List>,
}

/// One list: its documents, their codes one after another, and per document the factor that
/// turns an integer dot product into its cosine with the query (the scale over the norm; the
/// query's own scale and norm do not change its order).
struct List {
    docs: Vec<u32>,
    codes: Vec<i8>,
    factors: Vec<f32>,
}

/// Codes of `v` and their scale: `v[i] ≈ codes[i] * scale`.
fn quantise(v: &[f32], codes: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 0.0 };
    codes.extend(v.iter().map(|x| if scale > 0.0 { (x / scale).round().clamp(-127.0, 127.0) as i8 } else { 0 }));
    scale
}

fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let mut sums = [0i32; 16];
    let (ac, bc) = (a.chunks_exact(16), b.chunks_exact(16));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for l in 0..16 {
            sums[l] += i32::from(x[l]) * i32::from(y[l]);
        }
    }
    for (x, y) in ar.iter().zip(br) {
        sums[0] += i32::from(*x) * i32::from(*y);
    }
    sums.iter().sum()
}

impl Quantised {
    pub fn of(segment: &Segment, d: usize) -> Self {
        let lists = (0..segment.list_count())
            .map(|l| {
                let mut list = List { docs: Vec::new(), codes: Vec::new(), factors: Vec::new() };
                for &doc in segment.list_docs(l) {
                    let Some((v, norm)) = segment.vector_normed(doc) else { continue };
                    let scale = quantise(v, &mut list.codes);
                    list.docs.push(doc);
                    list.factors.push(if norm > 0.0 { (f64::from(scale) / norm.sqrt()) as f32 } else { 0.0 });
                }
                list
            })
            .collect();
        Quantised { d, lists }
    }

    /// Stored bytes of one vector: its codes and its scale (f32 stores 4 a dimension).
    pub fn bytes_per_vector(&self) -> usize {
        self.d + 4
    }
}

/// The best `limit` of `scored` (doc, similarity), best first, ties to the lower doc.
fn best(mut scored: Vec<(u32, f64)>, limit: usize) -> Vec<u32> {
    let by = |a: &(u32, f64), b: &(u32, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if scored.len() > limit && limit > 0 {
        scored.select_nth_unstable_by(limit - 1, by);
        scored.truncate(limit);
    }
    scored.sort_unstable_by(by);
    scored.into_iter().map(|(doc, _)| doc).collect()
}

fn exact(segment: &Segment, docs: impl Iterator<Item = u32>, q: &[f32], qn: f64) -> Vec<(u32, f64)> {
    docs.filter_map(|doc| {
        let (v, n) = segment.vector_normed(doc)?;
        Some((doc, cosine_normed(v, n, q, qn)?))
    })
    .collect()
}

/// One query's top 10 over `lists` of `segment`: f32 (`rescore` `None`) or int8 with the best
/// `10 * r` rescored in f32.
pub fn top10(segment: &Segment, quantised: &Quantised, lists: &[usize], q: &[f32], rescore: Option<usize>) -> Vec<u32> {
    let qn = norm_squared(q);
    let docs = lists.iter().flat_map(|&l| segment.list_docs(l).iter().copied());
    let Some(r) = rescore else {
        return best(exact(segment, docs, q, qn), 10);
    };
    let mut qc = Vec::with_capacity(q.len());
    quantise(q, &mut qc);
    let d = quantised.d;
    let mut approximate: Vec<(u32, f64)> = Vec::new();
    for &l in lists {
        let list = &quantised.lists[l];
        for ((&doc, codes), &factor) in list.docs.iter().zip(list.codes.chunks_exact(d)).zip(&list.factors) {
            approximate.push((doc, f64::from(dot_i8(codes, &qc) as f32 * factor)));
        }
    }
    let shortlist = best(approximate, 10 * r);
    best(exact(segment, shortlist.into_iter(), q, qn), 10)
}

/// Recall of `got` against `want`, summed: (found, wanted).
pub fn overlap(got: &[u32], want: &[u32]) -> (usize, usize) {
    (got.iter().filter(|d| want.contains(d)).count(), want.len())
}

/// The thread's CPU time of `f`.
pub fn cpu<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = bench_support::thread_cpu().unwrap_or_default();
    let out = f();
    (out, bench_support::thread_cpu().unwrap_or_default().saturating_sub(start))
}

/// The study over each approximate segment of `segments` (`bytes` their encodings), reading the
/// default number of lists, printed as rows of the bench's table (CPU time p50 / p95).
pub fn study(segments: &[Segment], bytes: &[search_index::Encoded], queries: &[Vec<f32>], dims: usize) {
    for (segment, encoded) in segments.iter().zip(bytes).filter(|(s, _)| s.is_approximate()) {
        let (quantised, quantise_cpu) = cpu(|| Quantised::of(segment, dims));
        let probes = search_index::Ann::default().probes_for(segment.list_count());
        let every: Vec<usize> = (0..segment.list_count()).collect();
        let (mut exact_cpu, mut f32_cpu) = (Vec::new(), Vec::new());
        let (mut exact_top, mut f32_top, mut read) = (Vec::new(), Vec::new(), 0usize);
        for q in queries {
            let lists = segment.probe(q, probes);
            read += lists.iter().map(|&l| segment.list_docs(l).len()).sum::<usize>();
            let (top, t) = cpu(|| top10(segment, &quantised, &every, q, None));
            exact_top.push(top);
            exact_cpu.push(t);
            let (top, t) = cpu(|| top10(segment, &quantised, &lists, q, None));
            f32_top.push(top);
            f32_cpu.push(t);
        }
        let recall = |tops: &[Vec<u32>], against: &[Vec<u32>]| {
            let (found, wanted) = tops.iter().zip(against).map(|(g, w)| overlap(g, w)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
            found as f64 / wanted.max(1) as f64
        };
        let per_list = read as f64 / (queries.len() * probes) as f64;
        let kib = |bytes_per_vector: usize| per_list * bytes_per_vector as f64 / 1024.0;
        // What a cold query's list reads cost in f32: fetch-sized bytes verified and decoded.
        let block = encoded.vectors.as_deref().unwrap_or_default();
        let head = Segment::vector_head_len(block).unwrap_or(0) as usize;
        let mut load_cpu = Vec::new();
        let mut list_bytes = 0usize;
        for q in queries.iter().take(8) {
            let Ok(mut cold) = Segment::decode_head(&encoded.text, &block[..head]) else { continue };
            let lists = cold.probe(q, probes);
            let ((), t) = cpu(|| {
                for &l in &lists {
                    let r = cold.list_range(l);
                    list_bytes += (r.end - r.start) as usize;
                    cold.load_list(l, &block[r.start as usize..r.end as usize]).expect("list verifies");
                }
            });
            load_cpu.push(t);
        }
        let cold_mib = list_bytes as f64 / load_cpu.len().max(1) as f64 / 1048576.0;
        row(
            "vectors exact f32 (CPU)",
            "semantic",
            &mut exact_cpu,
            &format!("{} vectors, {} dims, every list; {} B a vector", segment.docs().len(), dims, 4 * dims),
        );
        row(
            &format!("vectors IVF f32, {probes} lists (CPU)"),
            "semantic",
            &mut f32_cpu,
            &format!(
                "recall@10 vs exact {:.3}; {:.0} vectors a list read, {:.0} KiB; cold: {:.1} MiB of lists, load CPU p50 {:.1} ms",
                recall(&f32_top, &exact_top),
                per_list,
                kib(4 * dims),
                cold_mib,
                percentile(&mut load_cpu, 0.5)
            ),
        );
        for r in 1..=4 {
            let mut int8_cpu = Vec::new();
            let mut tops = Vec::new();
            for q in queries {
                let lists = segment.probe(q, probes);
                let (top, t) = cpu(|| top10(segment, &quantised, &lists, q, Some(r)));
                tops.push(top);
                int8_cpu.push(t);
            }
            row(
                &format!("vectors IVF int8, {probes} lists, rescore {} (CPU)", 10 * r),
                "semantic",
                &mut int8_cpu,
                &format!(
                    "recall@10 vs exact {:.3}, vs IVF f32 {:.3}; {} B a vector, {:.0} KiB a list read (cold lists about {:.1} MiB); quantising took {:.0} ms",
                    recall(&tops, &exact_top),
                    recall(&tops, &f32_top),
                    quantised.bytes_per_vector(),
                    kib(quantised.bytes_per_vector()),
                    cold_mib * quantised.bytes_per_vector() as f64 / (4 * dims) as f64,
                    quantise_cpu.as_secs_f64() * 1000.0
                ),
            );
        }
    }
}
