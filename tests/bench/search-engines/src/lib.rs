//! What the two search-engine benches share (docs/search.md "Choosing the engine"): the
//! generated corpus (one seed per size, so both benches rank the same entries), percentiles,
//! memory figures, and the pre-tokenized form that feeds tantivy our analyzer's terms.

use std::collections::HashSet;
use std::time::Duration;

use text_search::Analyzer;

pub const SEGMENT_DOCS: usize = 100_000;
pub const NOW: i64 = 1_800_000_000_000;

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        // xorshift64*: deterministic, no dependency.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Zipf-like: small ranks much more often (a word list's shape).
    pub fn zipf(&mut self, n: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((n as f64).powf(u) - 1.0) as usize % n
    }
}

pub struct Entry {
    pub id: String,
    pub content: String,
    pub tags: Vec<String>,
    pub created_at_ms: i64,
    pub vector: Option<Vec<f32>>,
}

pub fn vocabulary(rng: &mut Rng, n: usize) -> Vec<String> {
    const SYLLABLES: &[&str] = &[
        "ka", "lo", "mi", "ren", "sta", "vo", "qui", "der", "ton", "ber", "lin", "par", "is",
        "mo", "ved", "fac", "tur", "ing", "ed", "er", "al", "an", "cus", "tom", "re", "fund",
    ];
    let mut seen = HashSet::new();
    let mut words = Vec::with_capacity(n);
    while words.len() < n {
        let len = 2 + rng.below(3);
        let w: String = (0..len).map(|_| SYLLABLES[rng.below(SYLLABLES.len())]).collect();
        if seen.insert(w.clone()) {
            words.push(w);
        }
    }
    words
}

pub fn generate(n: usize, dims: usize, seed: u64) -> (Vec<Entry>, Vec<String>) {
    let mut rng = Rng(seed);
    let words = vocabulary(&mut rng, 30_000);
    const COMMON: &[&str] = &["the", "customer", "asked", "about", "and", "for", "with", "order"];
    let entries = (0..n)
        .map(|i| {
            let len = 8 + rng.below(25);
            let content: Vec<&str> = (0..len)
                .map(|_| {
                    if rng.below(3) == 0 {
                        COMMON[rng.below(COMMON.len())]
                    } else {
                        &words[rng.zipf(words.len())]
                    }
                })
                .collect();
            let vector = (dims > 0).then(|| {
                (0..dims)
                    .map(|_| (rng.below(2001) as f32 - 1000.0) / 1000.0)
                    .collect()
            });
            Entry {
                id: format!("01K{:023}", i),
                content: content.join(" "),
                tags: vec![format!("topic-{}", rng.below(50))],
                created_at_ms: NOW - (n - i) as i64 * 1000,
                vector,
            }
        })
        .collect();
    // Queries: one to three words, rare to common.
    let queries = (0..64)
        .map(|q| {
            let k = 1 + q % 3;
            (0..k)
                .map(|j| words[rng.zipf(if j == 0 { 3000 } else { words.len() })].clone())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    (entries, queries)
}

pub fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i].as_secs_f64() * 1000.0
}

pub fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

pub fn row(engine: &str, mode: &str, samples: &mut [Duration], extra: &str) {
    let p50 = percentile(samples, 0.5);
    let p95 = percentile(samples, 0.95);
    println!("| {engine} | {mode} | {p50:.2} | {p95:.2} | {extra} |");
}

/// The process's peak resident set (VmHWM), in MiB; `pid` None is this process.
pub fn peak_rss_mib(pid: Option<u32>) -> f64 {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_owned(),
    };
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Our analyzer's terms of `text` as tantivy's pre-tokenized input, so that tantivy indexes
/// exactly the terms we do (stemmed, stop words out, identifier parts).
pub fn tantivy_tokens(analyzer: &Analyzer, text: &str) -> tantivy::tokenizer::PreTokenizedString {
    let tokens = analyzer
        .terms(text)
        .into_iter()
        .enumerate()
        .map(|(position, text)| tantivy::tokenizer::Token {
            offset_from: 0,
            offset_to: 0,
            position,
            text,
            position_length: 1,
        })
        .collect();
    tantivy::tokenizer::PreTokenizedString {
        text: String::new(),
        tokens,
    }
}
