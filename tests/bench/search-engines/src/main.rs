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
//! Segments past the approximate index's threshold (`--segment-docs` large enough) are also
//! measured per number of lists read (`--probes`), with recall@10 against the exact scan of the
//! same segments; a cold semantic or hybrid query reads the text part, the vector block's
//! directory and the lists it probes, as a function would by byte range. Beside wall time, the
//! index rows give the thread's CPU time, which a loaded machine inflates less.
//!
//! For each it prints p50 / p95 query time, build time, bytes a cold query fetches, and how far
//! the top 10 agree with the full scan: the index must agree exactly (asserted: same ids, same
//! scores); tantivy is compared on BM25 alone (it has no newer-first rule or fusion), as overlap
//! of the top 10.

use std::collections::HashSet;
use std::time::Instant;

mod int8;

use search_engines_bench::{generate, percentile, query_vectors, row, rss_mib, Entry, NOW, SEGMENT_DOCS};
use search_index::{indexed_doc, Segment, TagQuery, TailDoc, View};
use text_search::{searchable_text, Analyzer, Document, Ranking, TermCache};

struct Sizes {
    list: Vec<usize>,
    dims: usize,
    scan_queries_at_1m: usize,
    /// `--scan off`: the index and tantivy alone (no full scan, so no parity check).
    scan: bool,
    /// `--segment-docs`: documents per segment (the first pass builds one segment of the whole
    /// ref; merges keep at most a few).
    segment_docs: usize,
    /// `--probes 4,8,16`: the lists a semantic or hybrid query reads, measured against the
    /// exact scan of the same segments (segments past the approximate index's threshold only).
    probes: Vec<usize>,
    /// `--int8 on`: also the int8 quantisation study of the approximate segments' vectors.
    int8: bool,
}

fn args() -> Sizes {
    let mut sizes = Sizes {
        list: vec![10_000, 100_000],
        dims: 384,
        scan_queries_at_1m: 3,
        scan: true,
        segment_docs: SEGMENT_DOCS,
        probes: vec![4, 8, 16, 32, 64],
        int8: false,
    };
    let argv: Vec<String> = std::env::args().collect();
    for pair in argv[1..].chunks(2) {
        match (pair[0].as_str(), pair.get(1)) {
            ("--sizes", Some(v)) => {
                sizes.list = v.split(',').filter_map(|s| s.parse().ok()).collect()
            }
            ("--dims", Some(v)) => sizes.dims = v.parse().unwrap_or(384),
            ("--scan", Some(v)) => sizes.scan = v != "off",
            ("--segment-docs", Some(v)) => sizes.segment_docs = v.parse().unwrap_or(SEGMENT_DOCS),
            ("--int8", Some(v)) => sizes.int8 = v == "on",
            ("--probes", Some(v)) => {
                sizes.probes = v.split(',').filter_map(|s| s.parse().ok()).collect()
            }
            _ => {
                eprintln!("usage: search-engines-bench [--sizes 10000,100000,1000000] [--dims 384] [--scan off] [--segment-docs 100000] [--probes 4,8,16,32,64] [--int8 on]");
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

/// Query `text` as memory-read asks it (no tags, the best 10), reading `probes` lists.
fn query<'q>(analyzer: &'q Analyzer, text: &'q str, ranking: Ranking<'q>, cache: &'q TermCache, probes: Option<usize>) -> search_index::Query<'q> {
    search_index::Query { tags: TagQuery::default(), analyzer, cache, text, ranking, model: MODEL, limit: 10, probes }
}

/// The embedding model the bench's vectors are of.
const MODEL: &str = "bench-model";

fn run(n: usize, sizes: &Sizes) {
    println!("| **{n} entries** | | | | |");
    let (entries, queries) = generate(n, sizes.dims, 0x5EED ^ n as u64);
    let stem = Analyzer::new(true);
    let model = MODEL;
    let query_vectors = query_vectors(queries.len(), sizes.dims, 0x5EED ^ n as u64);

    // --- the index: segments of SEGMENT_DOCS, the newest 1% as tail.
    let tail_len = n / 100;
    let indexed = n - tail_len;
    let started = Instant::now();
    let segments: Vec<Segment> = entries[..indexed]
        .chunks(sizes.segment_docs)
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
    let cache = TermCache::default();
    let seg_refs: Vec<&Segment> = segments.iter().collect();
    let view = View {
        segments: &seg_refs,
        masked: &masked,
        dead: &[],
        tail: &tail,
        now_ms: NOW,
    };
    // Each mode's ranking of query `i` (its own query vector).
    let mode_names: &[&str] = if sizes.dims > 0 { &["text", "semantic", "hybrid"] } else { &["text"] };
    let ranking_of = |mode: &str, i: usize| -> Ranking<'_> {
        match mode {
            "semantic" => Ranking::Semantic(&query_vectors[i]),
            "hybrid" => Ranking::Hybrid(&query_vectors[i]),
            _ => Ranking::Text,
        }
    };
    let approximate = segments.iter().any(Segment::is_approximate);

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
    for &mode in mode_names {
        let mut warm = Vec::new();
        let mut cold = Vec::new();
        let mut agree = 0usize;
        for (i, q) in queries[..scan_queries].iter().enumerate() {
            let ranking = &ranking_of(mode, i);
            let t = Instant::now();
            let want = text_search::search(&stem, &TermCache::with_budget(0), &documents, &vectors, q, *ranking, 10);
            cold.push(t.elapsed());
            let t = Instant::now();
            let again = text_search::search(&stem, &scan_cache, &documents, &vectors, q, *ranking, 10);
            warm.push(t.elapsed());
            assert_eq!(want, again);
            // The exact path of the index (every list read) is the scan's answer bit for bit.
            let hits = search_index::search(&view, &query(&stem, q, *ranking, &cache, Some(usize::MAX))).hits;
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

    for &mode in mode_names {
        let mut warm = Vec::new();
        let mut warm_cpu = Vec::new();
        let mut exact_top: Vec<Vec<&str>> = Vec::new();
        for (i, q) in queries.iter().enumerate() {
            let t = Instant::now();
            let cpu = bench_support::thread_cpu().unwrap_or_default();
            let hits = search_index::search(&view, &query(&stem, q, ranking_of(mode, i), &cache, Some(usize::MAX))).hits;
            warm.push(t.elapsed());
            warm_cpu.push(bench_support::thread_cpu().unwrap_or_default().saturating_sub(cpu));
            exact_top.push(hits.iter().map(|h| h.id).collect());
        }
        let what = if approximate && mode != "text" { "index exact (warm)" } else { "index (warm)" };
        row(what, mode, &mut warm, &format!("{} segments + {} tail; build {:.1} s; CPU p50 {:.1} ms", segments.len(), tail_len, build.as_secs_f64(), search_engines_bench::percentile(&mut warm_cpu, 0.5)));
        if approximate && mode != "text" {
            for &probes in &sizes.probes {
                let mut warm = Vec::new();
                let mut warm_cpu = Vec::new();
                let (mut found, mut wanted) = (0usize, 0usize);
                for (i, q) in queries.iter().enumerate() {
                    let t = Instant::now();
                    let cpu = bench_support::thread_cpu().unwrap_or_default();
                    let hits = search_index::search(&view, &query(&stem, q, ranking_of(mode, i), &cache, Some(probes))).hits;
                    warm.push(t.elapsed());
                    warm_cpu.push(bench_support::thread_cpu().unwrap_or_default().saturating_sub(cpu));
                    found += hits.iter().filter(|h| exact_top[i].contains(&h.id)).count();
                    wanted += exact_top[i].len();
                }
                let recall = found as f64 / wanted.max(1) as f64;
                row(&format!("index ANN {probes} lists (warm)"), mode, &mut warm, &format!("recall@10 vs exact {recall:.3} ({} queries); CPU p50 {:.1} ms", queries.len(), search_engines_bench::percentile(&mut warm_cpu, 0.5)));
            }
        }
        let mut cold = Vec::new();
        let (mut decode_cpu, mut query_cpu) = (Vec::new(), Vec::new());
        let mut fetched = 0usize;
        for (i, q) in queries.iter().take(8).enumerate() {
            let ranking = ranking_of(mode, i);
            fetched = 0;
            // A fresh function's term cache: empty, then what this query's tail analyses fill.
            let cold_cache = TermCache::default();
            let t = Instant::now();
            let cpu = bench_support::thread_cpu().unwrap_or_default();
            let mut decoded: Vec<Segment> = bytes
                .iter()
                .map(|b| {
                    fetched += b.text.len();
                    match (ranking, b.vectors.as_deref()) {
                        (Ranking::Semantic(_) | Ranking::Hybrid(_), Some(block)) => {
                            // What a cold function fetches by byte range: the text part, the
                            // vector block's directory, then the lists the query compares.
                            let head = Segment::vector_head_len(block).expect("head") as usize;
                            fetched += head;
                            Segment::decode_head(&b.text, &block[..head]).expect("decodes")
                        }
                        _ => Segment::decode(&b.text, None).expect("decodes"),
                    }
                })
                .collect();
            if !matches!(ranking, Ranking::Text) {
                // The same rule the query follows (nearest lists, and for hybrid the lists of
                // its best text hits), from the text parts and directories alone.
                let lists = {
                    let refs: Vec<&Segment> = decoded.iter().collect();
                    let view = View { segments: &refs, ..view };
                    search_index::probe_lists(&view, &query(&stem, q, ranking, &cold_cache, None))
                };
                for ((s, b), lists) in decoded.iter_mut().zip(&bytes).zip(&lists) {
                    let Some(block) = b.vectors.as_deref() else { continue };
                    for &list in lists {
                        let r = s.list_range(list);
                        let r = r.start as usize..r.end as usize;
                        fetched += r.len();
                        s.load_list(list, &block[r]).expect("list verifies");
                    }
                }
            }
            let decoded_at = bench_support::thread_cpu().unwrap_or_default();
            decode_cpu.push(decoded_at.saturating_sub(cpu));
            let refs: Vec<&Segment> = decoded.iter().collect();
            let view = View { segments: &refs, ..view };
            let _ = search_index::search(&view, &query(&stem, q, ranking, &cold_cache, None));
            cold.push(t.elapsed());
            query_cpu.push(bench_support::thread_cpu().unwrap_or_default().saturating_sub(decoded_at));
        }
        let all = text_bytes + if mode == "text" { 0 } else { vector_bytes };
        row("index (cold)", mode, &mut cold, &format!(
            "decodes {:.1} of {:.1} MiB of segments; CPU p50 decode {:.0} ms + query {:.0} ms",
            fetched as f64 / 1048576.0,
            all as f64 / 1048576.0,
            search_engines_bench::percentile(&mut decode_cpu, 0.5),
            search_engines_bench::percentile(&mut query_cpu, 0.5),
        ));
    }

    if approximate && sizes.int8 {
        int8::study(&segments, &bytes, &query_vectors, sizes.dims);
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
