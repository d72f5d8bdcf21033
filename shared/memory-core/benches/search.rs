//! Ranked search latency in process (README "Search"), at 1,000 and 10,000 entries of one ref:
//! p50 and p99 over 200 queries, beside the `bm25` crate (the most used BM25 search engine on
//! crates.io) doing the same job on the same texts in the same run.
//!
//! Rows:
//! - `search, warm function`: `MemoryReader::search` over the in-memory store: the snapshot
//!   read, entries' analyses from the reader's term cache (filled by the warm-up query, as a
//!   warm Lambda container has it), BM25, the recency prior, the results cloned (what the route
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
use text_search::{rank, Analyzer, Document};

/// xorshift64*: deterministic fixtures without a rand dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const COMMON: &[&str] = &[
    "customer",
    "prefers",
    "email",
    "invoice",
    "refund",
    "order",
    "shipped",
    "late",
    "billing",
    "address",
    "phone",
    "follow-up",
    "monday",
    "account",
    "upgrade",
    "plan",
    "support",
    "ticket",
    "resolved",
    "escalated",
    "warehouse",
    "berlin",
    "discount",
    "renewal",
    "contract",
    "the",
    "was",
    "and",
    "after",
    "before",
    "asked",
    "about",
    "their",
    "new",
    "delivery",
    "window",
    "meeting",
    "moved",
    "office",
    "team",
];

/// Entry texts of about 150 bytes: common words plus one of 2,000 rarer terms (ids, names).
fn corpus(n: usize, rng: &mut Rng) -> Vec<String> {
    (0..n)
        .map(|i| {
            let mut text = format!("Case {} ref-{}:", i % 997, rng.below(2_000));
            while text.len() < 150 {
                text.push(' ');
                text.push_str(COMMON[rng.below(COMMON.len())]);
            }
            text
        })
        .collect()
}

fn queries(count: usize, rng: &mut Rng) -> Vec<String> {
    (0..count)
        .map(|i| match i % 3 {
            0 => format!(
                "ref-{} {}",
                rng.below(2_000),
                COMMON[rng.below(COMMON.len())]
            ),
            1 => format!(
                "{} {}",
                COMMON[rng.below(COMMON.len())],
                COMMON[rng.below(COMMON.len())]
            ),
            _ => format!(
                "{} {} {}",
                COMMON[rng.below(COMMON.len())],
                COMMON[rng.below(COMMON.len())],
                COMMON[rng.below(COMMON.len())]
            ),
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
        let mut rng = Rng(0x5EED ^ size as u64);
        let texts = corpus(size, &mut rng);
        let queries = queries(count, &mut rng);

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
        let ids: Vec<String> = entries.iter().map(|e| e.entry.id.clone()).collect();
        let documents: Vec<Document<'_>> = ids
            .iter()
            .zip(&texts)
            .map(|(id, text)| Document { id, text })
            .collect();
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
