//! Ranked search latency in process (docs/figures.md "Overview"), at 1,000 and 10,000 entries of
//! one ref: p50 and p99 over 200 queries, beside the `bm25` crate (the most used BM25 search engine
//! on crates.io) doing the same job on the same texts in the same run.
//!
//! Rows:
//! - `search, warm function`: `MemoryReader::search` over the in-memory store: the snapshot
//!   read, entries' analyses from the reader's term cache (filled by the warm-up query, as a
//!   warm Lambda container has it), BM25, newer versions first, the results cloned (what the route
//!   does per query, without the store's network round trips).
//! - `rank, cold`: `text_search::rank` over prepared documents, every entry analysed (a cold
//!   container's first search).
//! - `bm25 crate, build + query`: `SearchEngineBuilder::with_corpus(English).build()` and one
//!   `search`: the contender doing what the route does, an index built for the query.
//! - `bm25 crate, query only`: `search` on an engine built beforehand: what a kept index buys.
//!
//! `cargo bench -p memory-core --bench search` (`SEARCH_BENCH_QUERIES` changes the query count).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bm25::{Language, SearchEngineBuilder};
use memory_core::ports::EntryStore;
use memory_core::reader::MemoryReader;
use memory_core::search::SearchOptions;
use memory_core::tag_filter::TagFilter;
use memory_core::{EntryKey, TenantScope, Timestamp};
use memory_testkit::contract::{entry, fresh_tenant, memory_ref, T0};
use memory_testkit::in_memory::{InMemoryEntryStore, ManualClock};
use text_search::{rank, Analyzer};

/// A deterministic stream of choices (Knuth's MMIX linear congruential generator, high bits):
/// the same corpus and queries every run.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// Words of support-desk notes (function words included, as real entries have them).
const VOCABULARY: &[&str] = &[
    "ticket",
    "shipment",
    "voucher",
    "complaint",
    "callback",
    "hotline",
    "parcel",
    "courier",
    "invoice",
    "tariff",
    "meeting",
    "agenda",
    "deadline",
    "manager",
    "supplier",
    "quote",
    "delayed",
    "urgent",
    "confirmed",
    "cancelled",
    "pending",
    "approved",
    "moved",
    "renewed",
    "Lisbon",
    "Oslo",
    "Monday",
    "Friday",
    "morning",
    "evening",
    "a",
    "the",
    "was",
    "for",
    "with",
    "after",
    "before",
    "to",
    "and",
    "of",
];

/// Entry texts of about 150 bytes: common words plus one of 2,000 rarer terms (ids, names).
fn corpus(n: usize, draws: &mut Draws) -> Vec<String> {
    (0..n)
        .map(|i| {
            let mut text = format!("Case {} ref-{}:", i % 997, draws.next() % 2_000);
            while text.len() < 150 {
                text.push(' ');
                text.push_str(draws.pick(VOCABULARY));
            }
            text
        })
        .collect()
}

/// A third each: a rare reference and a word, two words, three words.
fn queries(count: usize, draws: &mut Draws) -> Vec<String> {
    (0..count)
        .map(|i| {
            let mut q = match i % 3 {
                0 => format!("ref-{}", draws.next() % 2_000),
                _ => draws.pick(VOCABULARY).to_owned(),
            };
            for _ in 0..1 + usize::from(i % 3 == 2) {
                q.push(' ');
                q.push_str(draws.pick(VOCABULARY));
            }
            q
        })
        .collect()
}

struct Figures {
    p50: Duration,
    p99: Duration,
}

fn percentiles(mut samples: Vec<Duration>) -> Figures {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Figures {
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn timed(queries: &[String], mut run: impl FnMut(&str)) -> Figures {
    // One untimed pass warms caches and the allocator.
    run(&queries[0]);
    let samples = queries
        .iter()
        .map(|q| {
            let started = Instant::now();
            run(q);
            started.elapsed()
        })
        .collect();
    percentiles(samples)
}

fn row(size: usize, label: &str, f: &Figures) {
    println!(
        "{size:>6} entries  {label:<28} p50 {:>9.3} ms   p99 {:>9.3} ms",
        f.p50.as_secs_f64() * 1e3,
        f.p99.as_secs_f64() * 1e3
    );
}

fn main() {
    let count: usize = std::env::var("SEARCH_BENCH_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
        .max(2);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    println!("ranked search in process: p50 / p99 over {count} queries (1 warm-up)");
    for size in [1_000usize, 10_000] {
        let mut draws = Draws(0x5EED ^ size as u64);
        let texts = corpus(size, &mut draws);
        let queries = queries(count, &mut draws);

        let tenant = fresh_tenant("bench");
        let r = memory_ref(&tenant, "agent-1");
        let store = Arc::new(InMemoryEntryStore::default());
        let entries: Vec<_> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| entry(&r, i as u64, t, &[]))
            .collect();
        runtime.block_on(async {
            for chunk in entries.chunks(90) {
                store.put_entries(chunk).await.expect("load");
            }
            let key = EntryKey {
                memory_ref: r.clone(),
                id: entries[0].entry.id.clone(),
            };
            assert!(store.get(&key).await.expect("get").is_some());
        });
        let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 1_000_000)));
        let reader = MemoryReader::new(store, clock);
        let scope = TenantScope::new(tenant);
        let raw = r.to_string();
        let route = timed(&queries, |q| {
            let options =
                SearchOptions::new(q, TagFilter::default(), Some(10), true).expect("options");
            let found = runtime
                .block_on(reader.search(&scope, &raw, &options))
                .expect("search");
            black_box(found);
        });
        row(size, "search, warm function", &route);

        let analyzer = Analyzer::new(true);
        let documents = memory_core::search::documents(&entries, &texts);
        let ours = timed(&queries, |q| {
            black_box(rank(&analyzer, &documents, q, 10));
        });
        row(size, "rank, cold (all analysed)", &ours);

        let built = timed(&queries, |q| {
            let engine =
                SearchEngineBuilder::<u32>::with_corpus(Language::English, texts.iter().cloned())
                    .build();
            black_box(engine.search(q, 10));
        });
        row(size, "bm25 crate, build + query", &built);

        let engine =
            SearchEngineBuilder::<u32>::with_corpus(Language::English, texts.iter().cloned())
                .build();
        let kept = timed(&queries, |q| {
            black_box(engine.search(q, 10));
        });
        row(size, "bm25 crate, query only", &kept);
    }
}
