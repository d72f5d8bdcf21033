//! What the two search-engine benches share (docs/search.md "Choosing the engine"): the
//! generated corpus (one seed per size, so both benches rank the same entries), percentiles,
//! memory figures, the pre-tokenized form that feeds tantivy our analyzer's terms, and the
//! query both ask tantivy.

use std::collections::HashSet;
use std::time::Duration;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Schema, Value, STORED, STRING, TEXT};
use tantivy::{TantivyDocument, Term};
use text_search::Analyzer;

pub const SEGMENT_DOCS: usize = 100_000;
pub const NOW: i64 = 1_800_000_000_000;

pub use bench_support::Rng;

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

/// Topics of the generated vectors: an entry's vector is its topic's centre plus noise, as
/// embeddings of real text gather by subject (vectors drawn uniformly would have no nearest
/// neighbours to speak of, the worst case of any approximate index).
pub const VECTOR_TOPICS: usize = 1_000;

/// The generated vectors: per topic a centre, uniform in [-1, 1] per dimension; a vector is a
/// centre (topics Zipf-distributed) plus uniform noise of `NOISE` times that amplitude.
pub struct Vectors {
    centres: Vec<Vec<f32>>,
    rng: Rng,
}

const NOISE: f32 = 0.8;

impl Vectors {
    pub fn new(dims: usize, seed: u64) -> Self {
        let mut rng = Rng(seed ^ 0x7EC7_0125 | 1);
        let centres = (0..VECTOR_TOPICS)
            .map(|_| (0..dims).map(|_| unit_noise(&mut rng)).collect())
            .collect();
        Vectors { centres, rng }
    }

    pub fn next(&mut self) -> Vec<f32> {
        let topic = self.rng.zipf(VECTOR_TOPICS);
        let rng = &mut self.rng;
        self.centres[topic]
            .iter()
            .map(|c| c + NOISE * unit_noise(rng))
            .collect()
    }
}

fn unit_noise(rng: &mut Rng) -> f32 {
    (rng.below(2001) as f32 - 1000.0) / 1000.0
}

/// Query vectors for a corpus of `generate(_, dims, seed)`: drawn like its entries' (a topic's
/// centre plus noise), from a stream of their own.
pub fn query_vectors(count: usize, dims: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut vectors = Vectors::new(dims, seed);
    vectors.rng = Rng(seed ^ 0x0E1E_5EED | 1);
    (0..count).map(|_| vectors.next()).collect()
}

pub fn generate(n: usize, dims: usize, seed: u64) -> (Vec<Entry>, Vec<String>) {
    let mut rng = Rng(seed);
    let mut vectors = Vectors::new(dims, seed);
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
            let vector = (dims > 0).then(|| vectors.next());
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
    status_mib(None, "VmRSS")
}

/// `field` (a size in kB) of a process's `/proc` status, in MiB; 0 where it cannot be read.
/// `pid` None is this process.
fn status_mib(pid: Option<u32>, field: &str) -> f64 {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_owned(),
    };
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
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
    status_mib(pid, "VmHWM")
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

/// The ids of tantivy's best 10 for `q`, as both benches ask it: `q`'s terms (our analyzer's,
/// deduplicated) as one OR of term queries on `body`, BM25-scored; `id` is the stored id field.
pub fn tantivy_top10(
    searcher: &tantivy::Searcher,
    stem: &Analyzer,
    body: Field,
    id: Field,
    q: &str,
) -> Vec<String> {
    let mut terms = stem.terms(q);
    terms.sort();
    terms.dedup();
    let query = BooleanQuery::new(
        terms
            .into_iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(body, &t),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect(),
    );
    searcher
        .search(&query, &TopDocs::with_limit(10).order_by_score())
        .expect("search")
        .into_iter()
        .map(|(_, address)| {
            let doc: TantivyDocument = searcher.doc(address).expect("doc");
            doc.get_first(id)
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        })
        .collect()
}

/// A tantivy index of `entries` built in `dir` (emptied first), as both benches build it: the
/// id stored, the body our analyzer's terms of the searchable text, one writer thread. Answers
/// the index, its id and body fields, and the build time (from creating the index to its last
/// merge).
pub fn build_tantivy(
    dir: &std::path::Path,
    entries: &[Entry],
    stem: &Analyzer,
) -> (tantivy::Index, Field, Field, Duration) {
    let mut schema = Schema::builder();
    let id_field = schema.add_text_field("id", STRING | STORED);
    let body = schema.add_text_field("body", TEXT);
    let schema = schema.build();
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("temp dir");
    let started = std::time::Instant::now();
    let index = tantivy::Index::create_in_dir(dir, schema).expect("index");
    let mut writer: tantivy::IndexWriter = index
        .writer_with_num_threads(1, 200_000_000)
        .expect("writer");
    for e in entries {
        let mut doc = TantivyDocument::default();
        doc.add_text(id_field, &e.id);
        doc.add_pre_tokenized_text(
            body,
            tantivy_tokens(stem, &text_search::searchable_text(&e.content, &e.tags)),
        );
        writer.add_document(doc).expect("add");
    }
    writer.commit().expect("commit");
    writer.wait_merging_threads().expect("merge");
    (index, id_field, body, started.elapsed())
}
