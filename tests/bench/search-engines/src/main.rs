//! Search engines side by side over one generated ref (docs/search.md "Choosing the engine"):
//!
//! - `scan`: today's engine, every live entry analysed per query (`text_search::search`), with
//!   the warm function's term cache (at most 32 MiB, as in memory-read) and without it;
//! - `index`: the persisted index (`search-index`): segments of 100,000 entries plus a 1% tail,
//!   warm (segments decoded and held) and cold (segments decoded from their bytes per query, as a
//!   fresh function would after fetching them);
//! - `tantivy`: the same stemmed terms of our analyzer fed to tantivy pre-tokenized (so the terms
//!   are identical), BM25 top 10, warm (searcher open) and cold (index opened from its files in a
//!   temporary directory, as a function would after downloading them to /tmp).
//!
//! For each it prints p50 / p95 query time, build time, bytes a cold query fetches, and how far
//! the top 10 agree with the full scan: the index must agree exactly (asserted: same ids, same
//! scores); tantivy is compared on BM25 alone (it has no newer-first rule or fusion), as overlap
//! of the top 10.

use std::collections::HashSet;
use std::time::Instant;

use search_engines_bench::{generate, row, rss_mib, Entry, NOW, SEGMENT_DOCS};
use search_index::{indexed_doc, Segment, TagQuery, TailDoc, View};
use text_search::{searchable_text, Analyzer, Document, Ranking, TermCache};

struct Sizes {
    list: Vec<usize>,
    dims: usize,
    scan_queries_at_1m: usize,
    /// `--scan off`: the index and tantivy alone (no full scan, so no parity check).
    scan: bool,
}

fn args() -> Sizes {
    let mut sizes = Sizes {
        list: vec![10_000, 100_000],
        dims: 384,
        scan_queries_at_1m: 3,
        scan: true,
    };
    let argv: Vec<String> = std::env::args().collect();
    for pair in argv[1..].chunks(2) {
        match (pair[0].as_str(), pair.get(1)) {
            ("--sizes", Some(v)) => {
                sizes.list = v.split(',').filter_map(|s| s.parse().ok()).collect()
            }
            ("--dims", Some(v)) => sizes.dims = v.parse().unwrap_or(384),
            ("--scan", Some(v)) => sizes.scan = v != "off",
            _ => {
                eprintln!("usage: search-engines-bench [--sizes 10000,100000,1000000] [--dims 384] [--scan off]");
                std::process::exit(2);
            }
        }
    }
    sizes
}

fn main() {
    let sizes = args();
    println!("| engine | mode | p50 ms | p95 ms | notes |");
    println!("|---|---|---:|---:|---|");
    for &n in &sizes.list {
        run(n, &sizes);
    }
}

fn run(n: usize, sizes: &Sizes) {
    println!("| **{n} entries** | | | | |");
    let (entries, queries) = generate(n, sizes.dims, 0x5EED ^ n as u64);
    let stem = Analyzer::new(true);
    let model = "bench-model";
    let query_vector: Vec<f32> = (0..sizes.dims).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();

    // --- the index: segments of SEGMENT_DOCS, the newest 1% as tail.
    let tail_len = n / 100;
    let indexed = n - tail_len;
    let started = Instant::now();
    let segments: Vec<Segment> = entries[..indexed]
        .chunks(SEGMENT_DOCS)
        .map(|chunk| {
            let docs = chunk
                .iter()
                .map(|e| {
                    indexed_doc(&e.id, &e.content, &e.tags, e.created_at_ms, None, e.vector.clone())
                })
                .collect();
            Segment::build(docs, model, &stem)
        })
        .collect();
    let build = started.elapsed();
    let bytes: Vec<search_index::segment::Encoded> = segments.iter().map(Segment::encode).collect();
    let text_bytes: usize = bytes.iter().map(|b| b.text.len()).sum();
    let vector_bytes: usize = bytes.iter().map(|b| b.vectors.as_ref().map_or(0, Vec::len)).sum();
    let tail_texts: Vec<String> = entries[indexed..]
        .iter()
        .map(|e| searchable_text(&e.content, &e.tags))
        .collect();
    let tail: Vec<TailDoc<'_>> = entries[indexed..]
        .iter()
        .zip(&tail_texts)
        .map(|(e, text)| TailDoc {
            id: &e.id,
            text,
            tags: &e.tags,
            created_at_ms: e.created_at_ms,
            vector: e.vector.as_deref(),
        })
        .collect();
    let masked = HashSet::new();
    let no_tags = TagQuery::default();
    let cache = TermCache::default();
    let seg_refs: Vec<&Segment> = segments.iter().collect();
    let view = View {
        segments: &seg_refs,
        masked: &masked,
        dead: &[],
        tail: &tail,
        now_ms: NOW,
    };
    let modes: Vec<(&str, Ranking<'_>)> = if sizes.dims > 0 {
        vec![
            ("text", Ranking::Text),
            ("semantic", Ranking::Semantic(&query_vector)),
            ("hybrid", Ranking::Hybrid(&query_vector)),
        ]
    } else {
        vec![("text", Ranking::Text)]
    };

    // --- the full scan over the same live entries (the reference answers).
    let texts: Vec<String> = entries
        .iter()
        .map(|e| searchable_text(&e.content, &e.tags))
        .collect();
    let documents: Vec<Document<'_>> = entries
        .iter()
        .zip(&texts)
        .map(|(e, t)| Document { id: &e.id, text: t, created_ms: e.created_at_ms })
        .collect();
    let vectors: Vec<Option<&[f32]>> = entries.iter().map(|e| e.vector.as_deref()).collect();
    let scan_queries = if !sizes.scan {
        0
    } else if n >= 1_000_000 {
        sizes.scan_queries_at_1m
    } else {
        queries.len().min(24)
    };
    let scan_cache = TermCache::default();
    for (mode, ranking) in &modes {
        let mut warm = Vec::new();
        let mut cold = Vec::new();
        let mut agree = 0usize;
        for q in &queries[..scan_queries] {
            let t = Instant::now();
            let want = text_search::search(&stem, &TermCache::with_budget(0), &documents, &vectors, q, *ranking, 10);
            cold.push(t.elapsed());
            let t = Instant::now();
            let again = text_search::search(&stem, &scan_cache, &documents, &vectors, q, *ranking, 10);
            warm.push(t.elapsed());
            assert_eq!(want, again);
            let hits = search_index::search(&view, &no_tags, &stem, &cache, q, *ranking, model, 10);
            let got: Vec<(&str, u64)> = hits.iter().map(|h| (h.id, h.score.to_bits())).collect();
            let want: Vec<(&str, u64)> = want.iter().map(|h| (documents[h.index].id, h.score.to_bits())).collect();
            assert_eq!(got, want, "the index ranks as the scan ({mode}, {q:?})");
            agree += 1;
        }
        if scan_queries == 0 {
            continue;
        }
        row("scan (warm cache)", mode, &mut warm, &format!("{scan_queries} queries; the index agreed on {agree}/{scan_queries}, ids and scores"));
        row("scan (cold)", mode, &mut cold, "every entry analysed");
    }

    for (mode, ranking) in &modes {
        let mut warm = Vec::new();
        for q in &queries {
            let t = Instant::now();
            let _ = search_index::search(&view, &no_tags, &stem, &cache, q, *ranking, model, 10);
            warm.push(t.elapsed());
        }
        row("index (warm)", mode, &mut warm, &format!("{} segments + {} tail; build {:.1} s", segments.len(), tail_len, build.as_secs_f64()));
        let mut cold = Vec::new();
        for q in queries.iter().take(8) {
            let t = Instant::now();
            let decoded: Vec<Segment> = bytes
                .iter()
                .map(|b| {
                    let vectors = match ranking {
                        Ranking::Text => None,
                        _ => b.vectors.as_deref(),
                    };
                    Segment::decode(&b.text, vectors).expect("decodes")
                })
                .collect();
            let refs: Vec<&Segment> = decoded.iter().collect();
            let view = View { segments: &refs, ..view };
            let _ = search_index::search(&view, &no_tags, &stem, &TermCache::with_budget(0), q, *ranking, model, 10);
            cold.push(t.elapsed());
        }
        let fetched = text_bytes + if *mode == "text" { 0 } else { vector_bytes };
        row("index (cold)", mode, &mut cold, &format!("decodes {:.1} MiB of segments", fetched as f64 / 1048576.0));
    }

    tantivy_engine::run(&entries, &queries, &stem, &documents);
    println!("| | | | | RSS now {:.0} MiB |", rss_mib());
}

mod tantivy_engine {
    use super::*;
    use tantivy::Index;

    pub fn run(entries: &[Entry], queries: &[String], stem: &Analyzer, documents: &[Document<'_>]) {
        let dir = std::env::temp_dir().join(format!("search-engines-bench-{}-{}", std::process::id(), entries.len()));
        let (index, id_field, body, build) = search_engines_bench::build_tantivy(&dir, entries, stem);
        let bytes: u64 = std::fs::read_dir(&dir)
            .map(|d| d.flatten().filter_map(|f| f.metadata().ok()).map(|m| m.len()).sum())
            .unwrap_or(0);
        let top10 = |searcher: &tantivy::Searcher, q: &str| {
            search_engines_bench::tantivy_top10(searcher, stem, body, id_field, q)
        };
        let reader = index.reader().expect("reader");
        let searcher = reader.searcher();
        let mut warm = Vec::new();
        let mut overlap = 0usize;
        let mut compared = 0usize;
        for (i, q) in queries.iter().enumerate() {
            let t = Instant::now();
            let ids = top10(&searcher, q);
            warm.push(t.elapsed());
            if i < 8 && documents.len() <= 100_000 {
                // BM25 alone (no newer-first rule) over the same terms, from the full scan.
                let want: HashSet<&str> = text_search::rank(stem, documents, q, 10)
                    .iter()
                    .map(|h| documents[h.index].id)
                    .collect();
                overlap += ids.iter().filter(|id| want.contains(String::as_str(id))).count();
                compared += want.len();
            }
        }
        let agreement = if compared == 0 {
            "not compared at this size".to_owned()
        } else {
            format!("top-10 overlap with BM25 {:.0}%", 100.0 * overlap as f64 / compared as f64)
        };
        row("tantivy (warm)", "text", &mut warm, &format!("build {:.1} s; {agreement}", build.as_secs_f64()));
        drop(searcher);
        drop(reader);
        drop(index);
        let mut cold = Vec::new();
        for q in queries.iter().take(8) {
            let t = Instant::now();
            let index = Index::open_in_dir(&dir).expect("open");
            let reader = index.reader().expect("reader");
            let _ = top10(&reader.searcher(), q);
            cold.push(t.elapsed());
        }
        row("tantivy (cold)", "text", &mut cold, &format!("opens {:.1} MiB of files (page cache warm: a lower bound)", bytes as f64 / 1048576.0));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
