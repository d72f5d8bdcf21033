//! The search engines at scale against the local emulator (docs/search.md "Against the
//! emulator"): what `search-engines-bench` measures in process, measured here through the real
//! adapters, so that store calls, read units and bytes fetched are counted and not estimated
//! from a model of the reader.
//!
//! Per size: the generated ref (the corpus of the in-process bench, same seed, a tag and a
//! vector per entry) is written with `DynamoEntryStore::put_entries` (90 entries a call, a few
//! calls at a time), the index pass builds its index (`IndexPass`, segments in the emulator's
//! S3), a 1% tail is written and a second pass folds it. Then, for text, semantic and hybrid:
//!
//! - `scan`: `MemoryReader` without an index (today's engine when a ref has none): every live
//!   entry read with Query pages and ranked in process. Slow on moto (each Query sorts the whole
//!   partition), so only a few queries at 100,000 entries;
//! - `index, warm`: one `MemoryReader::with_index` reused, its segments decoded and held;
//! - `index, cold`: a fresh reader per query, so its segments are fetched from S3 and decoded;
//! - `tantivy` (text only): built from the same entries with our analyzer's stemmed terms,
//!   its files uploaded to S3; warm = searcher open, cold = files downloaded to a fresh
//!   directory, opened and queried.
//!
//! Every scan query is also asked of the index, which must give the same ids and scores
//! (asserted). Store calls are counted with `aws_test_support::RequestCounter` on both clients;
//! a metering observer of this file adds the time spent in store calls (so "function time"
//! is wall time less the time some store call was in flight, which on moto is mostly the
//! emulator's Python; concurrent calls count once), the bytes each response carried and an
//! estimate of DynamoDB read units from those bytes.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_test_support::{
    emulator_config, operation_name, required_env, CallObserver, Observed, RequestCounter,
};
use memory_aws::{DynamoEntryStore, S3ArchiveStore};
use memory_core::events::DomainEvent;
use memory_core::model::{Attribution, Embedding, MemoryEntry, StoredEntry, Tier};
use memory_core::ports::{
    ArchiveStore, Clock, CorePorts, Embedder, EntryStore, EventPublisher, SystemClock,
    MAX_ENTRIES_PER_PUT,
};
use memory_core::reader::MemoryReader;
use memory_core::ref_index::{install_built_index, IndexPass, SearchPath};
use memory_core::search::{SearchMode, SearchOptions, SearchResults};
use memory_core::tag_filter::TagFilter;
use memory_core::{AgentId, MemoryRef, StoreError, TenantId, TenantScope, Timestamp};
use search_engines_bench::{generate, peak_rss_mib, percentile, Entry, Rng};
use text_search::Analyzer;

const MODEL: &str = "bench-model";
const LIMIT: u32 = 10;

// ---------------------------------------------------------------------------------------------
// Metering: time in store calls, bytes received, estimated read units.

/// What the store calls of one stretch cost, summed.
#[derive(Clone, Copy, Debug, Default)]
struct Metered {
    time: Duration,
    /// Of `time`, in S3 calls (the rest is DynamoDB).
    s3_time: Duration,
    bytes: u64,
    read_units: u64,
    /// Wall time with at least one store call in flight: what the function waited on the store.
    /// `time` sums the calls, so ranged GETs issued together count once here and many times there.
    in_store: Duration,
    in_flight: u32,
    busy_since: Option<Instant>,
}

/// An observer on both SDK clients. Time runs from the start of a call (before
/// serialization) to its end (after deserialization, or after the headers of a streamed S3
/// body: the body's download then counts as function time, so a cold query's function time
/// includes reading the segment bytes off the socket).
#[derive(Clone, Debug, Default)]
struct Meter(Arc<Mutex<Metered>>);

/// One store call while it runs: when it started and its operation (`s3` for S3's).
#[derive(Clone, Debug)]
struct StoreCall {
    started: Instant,
    op: String,
}

impl Meter {
    fn take(&self) -> Metered {
        let mut m = self.0.lock().expect("meter");
        std::mem::take(&mut *m)
    }
}

/// DynamoDB read units of one response, estimated from its JSON: a strongly consistent read
/// costs one unit per 4 KB, summed over a Query's items, per item in a BatchGetItem. JSON (type
/// tags, vectors in base64) is larger than DynamoDB's own item size, so this overestimates.
fn read_units(op: &str, body: &[u8]) -> u64 {
    let units = |len: usize| len.div_ceil(4096).max(1) as u64;
    match op {
        "Query" | "GetItem" => units(body.len()),
        "BatchGetItem" => serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| {
                v.get("Responses").and_then(|r| r.as_object()).map(|tables| {
                    tables
                        .values()
                        .filter_map(|items| items.as_array())
                        .flatten()
                        .map(|item| units(item.to_string().len()))
                        .sum()
                })
            })
            .unwrap_or(0),
        _ => 0,
    }
}

impl CallObserver for Meter {
    type Call = StoreCall;

    fn start(&self) -> StoreCall {
        let now = Instant::now();
        let mut m = self.0.lock().expect("meter");
        if m.in_flight == 0 {
            m.busy_since = Some(now);
        }
        m.in_flight += 1;
        StoreCall {
            started: now,
            op: String::new(),
        }
    }

    fn send(&self, call: &mut StoreCall, request: &mut HttpRequest) -> Result<(), BoxError> {
        call.op = operation_name(request).unwrap_or("s3").to_owned();
        Ok(())
    }

    fn end(&self, call: StoreCall, response: Option<&HttpResponse>) {
        let op = call.op;
        let (bytes, units) = match response {
            Some(response) => {
                let body = response.body().bytes();
                let len = response
                    .headers()
                    .get("content-length")
                    .and_then(|v| v.parse::<u64>().ok())
                    .or_else(|| body.map(|b| b.len() as u64))
                    .unwrap_or(0);
                (len, body.map_or(0, |b| read_units(&op, b)))
            }
            None => (0, 0),
        };
        // Measured last, so the meter's own parsing is store time, not function time.
        let elapsed = call.started.elapsed();
        let mut m = self.0.lock().expect("meter");
        m.time += elapsed;
        if op == "s3" {
            m.s3_time += elapsed;
        }
        m.bytes += bytes;
        m.read_units += units;
        m.in_flight = m.in_flight.saturating_sub(1);
        if m.in_flight == 0 {
            if let Some(since) = m.busy_since.take() {
                m.in_store += since.elapsed();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Ports the bench supplies.

/// The index pass publishes nothing; CorePorts still wants a publisher.
struct NoEvents;

#[async_trait]
impl EventPublisher for NoEvents {
    async fn publish(&self, _events: &[DomainEvent]) -> Result<(), StoreError> {
        Ok(())
    }
}

/// A query's vector: generated from the text (deterministic), of the entries' model and size.
struct BenchEmbedder {
    dims: usize,
}

fn generated_vector(seed: u64, dims: usize) -> Vec<f32> {
    let mut rng = Rng(seed | 1);
    (0..dims)
        .map(|_| (rng.below(2001) as f32 - 1000.0) / 1000.0)
        .collect()
}

#[async_trait]
impl Embedder for BenchEmbedder {
    fn model(&self) -> &str {
        MODEL
    }

    async fn embed(&self, text: &str) -> Result<Embedding, StoreError> {
        let seed = text
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        Ok(Embedding {
            model: MODEL.to_owned(),
            vector: generated_vector(seed, self.dims),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Arguments.

struct Args {
    sizes: Vec<usize>,
    dims: usize,
    /// Scan queries per mode up to 10,000 entries, and above.
    scan_small: usize,
    scan_large: usize,
    /// No scan above this size (a scan of 1,000,000 entries on moto takes hours).
    scan_max: usize,
    /// The modes scanned above 10,000 entries (every one below).
    scan_modes_large: Vec<String>,
    warm_queries: usize,
    cold_queries: usize,
    concurrency: usize,
    /// Load the 99% with BatchWriteItem and build its index in process (`--load bulk`), not
    /// through `put_entries` and the first pass (`--load writes`, the default).
    bulk: bool,
    emulator_pid: Option<u32>,
}

fn args() -> Args {
    let mut a = Args {
        sizes: vec![10_000, 100_000],
        dims: 64,
        scan_small: 8,
        scan_large: 1,
        scan_max: 100_000,
        scan_modes_large: vec!["text".into(), "semantic".into(), "hybrid".into()],
        warm_queries: 64,
        cold_queries: 12,
        concurrency: 8,
        bulk: false,
        emulator_pid: std::env::var("EMULATOR_PID").ok().and_then(|p| p.parse().ok()),
    };
    let argv: Vec<String> = std::env::args().collect();
    let usage = || -> ! {
        eprintln!(
            "usage: emulator [--sizes 10000,100000] [--dims 64] [--scan-queries 8,3] \
             [--scan-max 100000] [--scan-modes-large text,semantic,hybrid] [--warm-queries 64] [--cold-queries 12] [--concurrency 8] [--load writes|bulk]\n\
             needs the emulator's settings in the environment (eval \"$(infra/local/up)\"); \
             tests/bench/search-scale starts one of its own"
        );
        std::process::exit(2)
    };
    for pair in argv[1..].chunks(2) {
        let Some(v) = pair.get(1) else { usage() };
        let num = |v: &str| v.parse::<usize>().unwrap_or_else(|_| usage());
        match pair[0].as_str() {
            "--sizes" => a.sizes = v.split(',').map(num).collect(),
            "--dims" => a.dims = num(v),
            "--scan-queries" => {
                let mut it = v.split(',').map(num);
                a.scan_small = it.next().unwrap_or(a.scan_small);
                a.scan_large = it.next().unwrap_or(a.scan_small);
            }
            "--scan-max" => a.scan_max = num(v),
            "--scan-modes-large" => a.scan_modes_large = v.split(',').map(str::to_owned).collect(),
            "--warm-queries" => a.warm_queries = num(v),
            "--cold-queries" => a.cold_queries = num(v),
            "--concurrency" => a.concurrency = num(v).max(1),
            "--load" => {
                a.bulk = match v.as_str() {
                    "bulk" => true,
                    "writes" => false,
                    _ => usage(),
                }
            }
            _ => usage(),
        }
    }
    a
}

// ---------------------------------------------------------------------------------------------
// The world: clients with counters, the ports.

struct World {
    store: Arc<DynamoEntryStore>,
    dynamo: aws_sdk_dynamodb::Client,
    table: String,
    archive: Arc<S3ArchiveStore>,
    s3: aws_sdk_s3::Client,
    bucket: String,
    dynamo_calls: RequestCounter,
    s3_calls: RequestCounter,
    meter: Meter,
    clock: Arc<SystemClock>,
    embedder: Arc<BenchEmbedder>,
}

/// What one measured stretch cost in the store.
#[derive(Clone, Copy, Default)]
struct Cost {
    wall: Duration,
    dynamo_calls: u64,
    s3_calls: u64,
    metered: Metered,
}

impl Cost {
    fn function(&self) -> Duration {
        self.wall.saturating_sub(self.metered.in_store)
    }
}

impl World {
    async fn new(dims: usize) -> World {
        let sdk = emulator_config().await;
        let dynamo_calls = RequestCounter::default();
        let s3_calls = RequestCounter::default();
        let meter = Meter::default();
        let dynamo = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&sdk)
                .interceptor(Observed(dynamo_calls.clone()))
                .interceptor(Observed(meter.clone()))
                .build(),
        );
        let s3 = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&sdk)
                .force_path_style(true)
                .interceptor(Observed(s3_calls.clone()))
                .interceptor(Observed(meter.clone()))
                .build(),
        );
        let bucket = required_env("ARCHIVE_BUCKET");
        let table = required_env("MEMORY_TABLE");
        World {
            store: Arc::new(DynamoEntryStore::new(dynamo.clone(), table.clone())),
            dynamo,
            table,
            archive: Arc::new(S3ArchiveStore::new(s3.clone(), bucket.clone())),
            s3,
            bucket,
            dynamo_calls,
            s3_calls,
            meter,
            clock: Arc::new(SystemClock),
            embedder: Arc::new(BenchEmbedder { dims }),
        }
    }

    fn reset(&self) {
        self.dynamo_calls.reset();
        self.s3_calls.reset();
        self.meter.take();
    }

    fn cost(&self, wall: Duration) -> Cost {
        let c = Cost {
            wall,
            dynamo_calls: self.dynamo_calls.total(),
            s3_calls: self.s3_calls.total(),
            metered: self.meter.take(),
        };
        self.dynamo_calls.reset();
        self.s3_calls.reset();
        c
    }

    fn reader(&self, indexed: bool) -> MemoryReader {
        let archive = indexed.then(|| self.archive.clone() as Arc<dyn ArchiveStore>);
        MemoryReader::new(self.store.clone(), self.clock.clone() as Arc<dyn Clock>)
            .with_embedder(Some(self.embedder.clone() as Arc<dyn Embedder>))
            .with_index(archive)
    }

    /// The whole object at `key` in the bench's bucket (`what` names it in a panic).
    async fn object(&self, key: &str, what: &str) -> Vec<u8> {
        let request = self.s3.get_object().bucket(&self.bucket).key(key);
        let out = request.send().await;
        let body = out.unwrap_or_else(|e| panic!("get {what}: {e}")).body;
        let bytes = body.collect().await.map(|b| b.to_vec());
        bytes.unwrap_or_else(|e| panic!("{what} body: {e}"))
    }

    /// The keys under `prefix` (one List: the bench's prefixes hold fewer than 1,000 objects).
    async fn keys(&self, prefix: &str) -> Result<Vec<String>, String> {
        let request = self.s3.list_objects_v2().bucket(&self.bucket);
        let listed = request.prefix(prefix).send().await;
        let listed = listed.map_err(|e| e.to_string())?;
        let keys = listed.contents().iter().filter_map(|o| o.key());
        Ok(keys.map(str::to_owned).collect())
    }

    fn pass(&self) -> IndexPass {
        IndexPass::new(
            CorePorts::new(self.store.clone(), Arc::new(NoEvents), self.clock.clone()),
            self.archive.clone(),
            Some(MODEL.to_owned()),
        )
    }
}

fn stored(r: &MemoryRef, e: &Entry) -> StoredEntry {
    StoredEntry {
        memory_ref: r.clone(),
        entry: MemoryEntry {
            id: e.id.clone(),
            content: e.content.clone(),
            tags: e.tags.clone(),
            created_at: Timestamp::from_millis(e.created_at_ms),
            expires_at: None,
        },
        tier: Tier::Transactional,
        subject: None,
        attribution: Attribution::default(),
        provenance: Vec::new(),
        embedding: e.vector.as_ref().map(|v| Embedding {
            model: MODEL.to_owned(),
            vector: v.clone(),
        }),
    }
}

/// Runs `work` (with a clone of `state`) on `range` in chunks of `step` entries, `concurrency`
/// chunks at a time (as several writers would), saying every `every` entries how many are
/// `done`; answers the wall time.
async fn in_chunks<S, F, Fut>(
    state: S,
    range: std::ops::Range<usize>,
    (step, concurrency): (usize, usize),
    (done_label, every): (&'static str, usize),
    work: F,
) -> Duration
where
    S: Clone + Send + 'static,
    F: Fn(S, std::ops::Range<usize>) -> Fut + Copy + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let started = Instant::now();
    let chunks: Arc<Vec<std::ops::Range<usize>>> = Arc::new(
        range
            .clone()
            .step_by(step)
            .map(|s| s..(s + step).min(range.end))
            .collect(),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (state, chunks, next, done) =
            (state.clone(), chunks.clone(), next.clone(), done.clone());
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(chunk) = chunks.get(i).cloned() else {
                    break;
                };
                let len = chunk.len();
                work(state.clone(), chunk).await;
                let d = done.fetch_add(len, Ordering::Relaxed) + len;
                if d % every < len {
                    eprintln!("  {done_label} {d} entries");
                }
            }
        });
    }
    while let Some(joined) = workers.join_next().await {
        joined.expect(done_label);
    }
    started.elapsed()
}

/// What a run writes its entries into the table with: the clients, the ref, the generated
/// corpus and how many calls go at a time. Each load writes one range of the corpus.
struct Loader<'a> {
    world: &'a World,
    r: &'a MemoryRef,
    entries: &'a Arc<Vec<Entry>>,
    concurrency: usize,
}

impl Loader<'_> {
    /// Writes `entries[range]` through the adapter, `MAX_ENTRIES_PER_PUT` a call, `concurrency`
    /// calls at a time.
    async fn load(&self, range: std::ops::Range<usize>) -> Duration {
        let state = (self.world.store.clone(), self.entries.clone(), self.r.clone());
        let shape = (MAX_ENTRIES_PER_PUT, self.concurrency);
        in_chunks(
            state,
            range,
            shape,
            ("loaded", 20_000),
            |(store, entries, r), chunk| async move {
                let batch: Vec<StoredEntry> =
                    entries[chunk].iter().map(|e| stored(&r, e)).collect();
                let mut attempt = 0;
                loop {
                    match store.put_entries(&batch).await {
                        Ok(()) => break,
                        Err(e) if attempt < 5 => {
                            attempt += 1;
                            eprintln!("put retried ({e})");
                            tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                        }
                        Err(e) => panic!("put failed: {e}"),
                    }
                }
            },
        )
        .await
    }

    /// Writes `entries[range]` as the items `put_entries` writes for them (the entry item and its
    /// tag postings: `memory_aws::dynamo::entry_item`, `posting_items`), with BatchWriteItem, 25
    /// items a call, `concurrency` calls at a time, and no change records: the index of these
    /// entries is built in process (`install_built_index`), not folded from the table.
    async fn bulk_load(&self, range: std::ops::Range<usize>) -> Duration {
        use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
        const BATCH_ITEMS: usize = 25;
        // Entries per worker task step: enough for a few batches each.
        const STEP: usize = 200;
        let state = (
            self.world.dynamo.clone(),
            self.world.table.clone(),
            self.entries.clone(),
            self.r.clone(),
        );
        let shape = (STEP, self.concurrency);
        let progress = ("bulk-loaded", 50_000);
        in_chunks(
            state,
            range,
            shape,
            progress,
            |(client, table, entries, r), chunk| async move {
                let mut items = Vec::new();
                for e in &entries[chunk] {
                    let s = stored(&r, e);
                    items.push(memory_aws::dynamo::entry_item(&s).expect("entry item"));
                    items.extend(memory_aws::dynamo::posting_items(&s));
                }
                for batch in items.chunks(BATCH_ITEMS) {
                    let mut requests: Vec<WriteRequest> = batch
                        .iter()
                        .map(|item| {
                            WriteRequest::builder()
                                .put_request(
                                    PutRequest::builder()
                                        .set_item(Some(item.clone()))
                                        .build()
                                        .expect("put request"),
                                )
                                .build()
                        })
                        .collect();
                    let mut attempt = 0u64;
                    while !requests.is_empty() {
                        match client
                            .batch_write_item()
                            .request_items(&table, requests.clone())
                            .send()
                            .await
                        {
                            Ok(out) => {
                                requests = out
                                    .unprocessed_items()
                                    .and_then(|u| u.get(&table))
                                    .cloned()
                                    .unwrap_or_default();
                            }
                            Err(e) if attempt < 5 => {
                                eprintln!("batch write retried ({e})");
                            }
                            Err(e) => panic!("batch write failed: {e}"),
                        }
                        if !requests.is_empty() {
                            attempt += 1;
                            tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
                        }
                    }
                }
            },
        )
        .await
    }
}

// ---------------------------------------------------------------------------------------------
// Rows.

struct Row {
    engine: String,
    mode: &'static str,
    costs: Vec<Cost>,
    notes: String,
}

fn print_row(n: usize, row: &Row) {
    let mut wall: Vec<Duration> = row.costs.iter().map(|c| c.wall).collect();
    let mut function: Vec<Duration> = row.costs.iter().map(Cost::function).collect();
    let q = row.costs.len().max(1) as f64;
    let sum = |f: &dyn Fn(&Cost) -> u64| row.costs.iter().map(f).sum::<u64>() as f64 / q;
    let dynamo = sum(&|c| c.dynamo_calls);
    let s3 = sum(&|c| c.s3_calls);
    let units = sum(&|c| c.metered.read_units);
    let kib = sum(&|c| c.metered.bytes) / 1024.0;
    let mut dynamo_time: Vec<Duration> =
        row.costs.iter().map(|c| c.metered.time - c.metered.s3_time).collect();
    let mut s3_time: Vec<Duration> = row.costs.iter().map(|c| c.metered.s3_time).collect();
    let (p50, p95, f50, f95, d50, s50) = if row.costs.is_empty() {
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    } else {
        (
            percentile(&mut wall, 0.5),
            percentile(&mut wall, 0.95),
            percentile(&mut function, 0.5),
            percentile(&mut function, 0.95),
            percentile(&mut dynamo_time, 0.5),
            percentile(&mut s3_time, 0.5),
        )
    };
    println!(
        "| {n} | {} | {} | {} | {p50:.1} / {p95:.1} | {f50:.1} / {f95:.1} | {d50:.1} / {s50:.1} | {:.1} ({dynamo:.1} + {s3:.1}) | {units:.0} | {} | {} |",
        row.engine,
        row.mode,
        row.costs.len(),
        dynamo + s3,
        human_kib(kib),
        row.notes
    );
}

fn human_kib(kib: f64) -> String {
    if kib >= 1024.0 {
        format!("{:.1} MiB", kib / 1024.0)
    } else {
        format!("{kib:.0} KiB")
    }
}

fn key(r: &SearchResults) -> Vec<(String, u64)> {
    r.results
        .iter()
        .map(|h| (h.entry.id.clone(), h.score.to_bits()))
        .collect()
}

async fn search(
    world: &World,
    reader: &MemoryReader,
    scope: &TenantScope,
    raw_ref: &str,
    q: &str,
    mode: SearchMode,
) -> (SearchResults, Cost) {
    let options = SearchOptions::new(q, TagFilter::default(), Some(LIMIT), true)
        .expect("query")
        .with_mode(mode);
    world.reset();
    let started = Instant::now();
    let results = reader.search(scope, raw_ref, &options).await.expect("search");
    let cost = world.cost(started.elapsed());
    (results, cost)
}

// ---------------------------------------------------------------------------------------------

#[tokio::main]
async fn main() {
    let args = args();
    let world = World::new(args.dims).await;
    println!(
        "| entries | engine | mode | queries | p50 / p95 ms | function p50 / p95 ms | DynamoDB / S3 p50 ms | store calls / query (DynamoDB + S3) | read units / query | fetched / query | notes |"
    );
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut summaries = Vec::new();
    for &n in &args.sizes {
        summaries.push(run(&world, n, &args).await);
    }
    println!();
    for s in summaries {
        println!("{s}");
    }
}

async fn run(world: &World, n: usize, args: &Args) -> String {
    eprintln!("== {n} entries: generating");
    // The in-process bench's corpus and seed, so both benches rank the same entries.
    let (entries, queries) = generate(n, args.dims, 0x5EED ^ n as u64);
    let entries = Arc::new(entries);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let tenant = TenantId::parse(&format!("scale-{n}-{stamp}")).expect("tenant id");
    let r = MemoryRef::new(tenant.clone(), AgentId::parse("agent-1").expect("agent id"));
    let raw_ref = r.to_string();
    let scope = TenantScope::new(tenant.clone());

    // --- load the 99%, build; write the 1% tail, fold.
    let tail = n / 100;
    let base = n - tail;
    let pass = world.pass();
    let loader = Loader {
        world,
        r: &r,
        entries: &entries,
        concurrency: args.concurrency,
    };
    let (load_base, build, built) = if args.bulk {
        eprintln!("== {n}: bulk-loading {base} entries (BatchWriteItem)");
        let load_base = loader.bulk_load(0..base).await;
        eprintln!("   loaded in {:.1} s; index built in process", load_base.as_secs_f64());
        let stored_base: Vec<StoredEntry> = entries[..base].iter().map(|e| stored(&r, e)).collect();
        world.reset();
        let t = Instant::now();
        let built = install_built_index(&*world.archive, &r, &stored_base, MODEL, world.clock.now())
            .await
            .expect("index built in process");
        (load_base, world.cost(t.elapsed()), built)
    } else {
        eprintln!("== {n}: loading {base} entries");
        let load_base = loader.load(0..base).await;
        eprintln!("   loaded in {:.1} s; index pass (build)", load_base.as_secs_f64());
        world.reset();
        let t = Instant::now();
        let built = pass.run(tenant.as_str(), &raw_ref).await.expect("index pass");
        (load_base, world.cost(t.elapsed()), built)
    };
    eprintln!("   {built:?} in {:.1} s; loading the 1% tail", build.wall.as_secs_f64());
    let load_tail = loader.load(base..n).await;
    world.reset();
    let t = Instant::now();
    let folded = pass.run(tenant.as_str(), &raw_ref).await.expect("index pass");
    let fold = world.cost(t.elapsed());
    eprintln!("   {folded:?} in {:.1} s", fold.wall.as_secs_f64());
    let segment_bytes = segment_sizes(world, &r).await;

    let modes = [
        ("text", SearchMode::Text),
        ("semantic", SearchMode::Semantic),
        ("hybrid", SearchMode::Hybrid),
    ];
    let scan_queries = if n > args.scan_max {
        0
    } else if n <= 10_000 {
        args.scan_small
    } else {
        args.scan_large
    };
    let mut rows = Vec::new();

    let index_reader = world.reader(true);
    // --- the index, warm: one reader, segments held (primed by one query per mode).
    for (name, mode) in modes {
        let (primed, _) = search(world, &index_reader, &scope, &raw_ref, &queries[0], mode).await;
        assert_eq!(primed.path, SearchPath::Index);
        let mut costs = Vec::new();
        for q in queries.iter().take(args.warm_queries) {
            let (res, cost) = search(world, &index_reader, &scope, &raw_ref, q, mode).await;
            assert_eq!(res.path, SearchPath::Index);
            costs.push(cost);
        }
        rows.push(Row {
            engine: "index, warm".to_owned(),
            mode: name,
            costs,
            notes: format!("{} segments held", folded.segments),
        });
    }
    // --- the index, cold: a fresh reader per query.
    for (name, mode) in modes {
        let mut costs = Vec::new();
        for q in queries.iter().skip(1).take(args.cold_queries) {
            let reader = world.reader(true);
            let (res, cost) = search(world, &reader, &scope, &raw_ref, q, mode).await;
            assert_eq!(res.path, SearchPath::Index);
            costs.push(cost);
        }
        let (text, vectors) = segment_bytes;
        let decodes = if mode == SearchMode::Text { text } else { text + vectors };
        rows.push(Row {
            engine: "index, cold".to_owned(),
            mode: name,
            costs,
            notes: format!(
                "fresh reader per query: fetches and decodes {} of segments",
                human_kib(decodes as f64 / 1024.0)
            ),
        });
    }

    // --- tantivy, text only.
    let (tantivy_rows, tantivy_build) = tantivy_engine::run(world, &entries, &queries, n, args).await;
    rows.extend(tantivy_rows);

    for row in &rows {
        print_row(n, row);
    }
    let summary = format!(
        "- {n} entries ({} dims, a tag each): {} {:.1} s ({:.0} entries/s, {} writers); {} {:.1} s, \
         of which {:.1} s in the pass itself ({} documents, {} segment, {} DynamoDB + {} S3 calls); \
         1% tail load {:.1} s, fold pass {:.1} s, {:.2} s in the pass itself ({} changes, {} segments after); tantivy build {:.1} s; \
         bench peak RSS {:.0} MiB{}",
        args.dims,
        if args.bulk { "bulk load (BatchWriteItem)" } else { "load (put_entries)" },
        load_base.as_secs_f64(),
        base as f64 / load_base.as_secs_f64(),
        args.concurrency,
        if args.bulk { "index built in process and uploaded" } else { "index build pass" },
        build.wall.as_secs_f64(),
        build.function().as_secs_f64(),
        built.documents,
        built.segments,
        build.dynamo_calls,
        build.s3_calls,
        load_tail.as_secs_f64(),
        fold.wall.as_secs_f64(),
        fold.function().as_secs_f64(),
        folded.changes,
        folded.segments,
        tantivy_build.as_secs_f64(),
        peak_rss_mib(None),
        args.emulator_pid.map_or(String::new(), |pid| format!(
            ", emulator peak RSS so far {:.0} MiB",
            peak_rss_mib(Some(pid))
        )),
    );
    eprintln!("{summary}");
    println!("<!-- {summary} -->");
    // --- the scan, last (slowest on moto), and parity of the index with it.
    let scan_reader = world.reader(false);
    let scan_modes: Vec<(&'static str, SearchMode)> = modes
        .iter()
        .copied()
        .filter(|(name, _)| n <= 10_000 || args.scan_modes_large.iter().any(|m| m == name))
        .collect();
    for (name, mode) in scan_modes {
        let mut costs = Vec::new();
        let mut agreed = 0;
        for (i, q) in queries.iter().take(scan_queries).enumerate() {
            eprintln!("   scan {name} {}/{scan_queries}", i + 1);
            let (scan, cost) = search(world, &scan_reader, &scope, &raw_ref, q, mode).await;
            assert_eq!(scan.path, SearchPath::Scan);
            costs.push(cost);
            let (index, _) = search(world, &index_reader, &scope, &raw_ref, q, mode).await;
            assert_eq!(index.path, SearchPath::Index, "served by the index");
            assert_eq!(key(&index), key(&scan), "the index ranks as the scan ({name}, {q:?})");
            assert_eq!(index.unembedded, scan.unembedded);
            agreed += 1;
        }
        let reader = if n > 10_000 {
            "one reader reused; its 32 MiB term cache cannot hold this ref, so warm = cold"
        } else {
            "one reader reused (warm term cache after the first query)"
        };
        let notes = if scan_queries == 0 {
            format!("not run: a scan of {n} entries on moto takes too long (each Query sorts the whole partition)")
        } else {
            format!("{reader}; the index answered the same ids and scores for {agreed} of {agreed}")
        };
        print_row(
            n,
            &Row {
                engine: "scan".to_owned(),
                mode: name,
                costs,
                notes,
            },
        );
    }
    println!(
        "<!-- {n}: bench peak RSS after the scans {:.0} MiB{} -->",
        peak_rss_mib(None),
        args.emulator_pid.map_or(String::new(), |pid| format!(
            ", emulator {:.0} MiB",
            peak_rss_mib(Some(pid))
        ))
    );
    summary
}

/// The bytes of the ref's live segments (text parts, vector blocks), from its manifest: a text
/// query reads the text range of each segment's object, a semantic one the whole object.
async fn segment_sizes(world: &World, r: &MemoryRef) -> (u64, u64) {
    let key = format!("{}/agents/{}/search/manifest.json", r.tenant().as_str(), r.agent().as_str());
    let body = world.object(&key, "manifest").await;
    let manifest: search_index::Manifest = serde_json::from_slice(&body).expect("manifest json");
    let mut text = 0;
    let mut vectors = 0;
    for s in &manifest.segments {
        let at = s.vectors_at.unwrap_or(s.bytes);
        text += at;
        vectors += s.bytes - at;
    }
    (text, vectors)
}

mod tantivy_engine {
    use super::*;
    use search_engines_bench::{build_tantivy, tantivy_top10 as top10};
    use tantivy::schema::Field;
    use tantivy::Index;

    fn fields(index: &Index) -> (Field, Field) {
        let schema = index.schema();
        (
            schema.get_field("id").expect("id field"),
            schema.get_field("body").expect("body field"),
        )
    }

    /// Downloads every object under `prefix` into `dir` (one List, one GET a file).
    async fn download(world: &World, prefix: &str, dir: &Path) {
        let keys = world.keys(prefix).await.expect("list tantivy files");
        for key in keys {
            let body = world.object(&key, "tantivy file").await;
            let name = key.rsplit('/').next().expect("file name");
            std::fs::write(dir.join(name), &body).expect("write tantivy file");
        }
    }

    pub async fn run(
        world: &World,
        entries: &[Entry],
        queries: &[String],
        n: usize,
        args: &Args,
    ) -> (Vec<Row>, Duration) {
        eprintln!("   tantivy: building");
        let stem = Analyzer::new(true);
        let root = std::env::temp_dir().join(format!("search-scale-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let built_dir = root.join("built");
        let (index, _, _, build) = build_tantivy(&built_dir, entries, &stem);
        drop(index);

        // Its files in the emulator's S3, as a function would find them.
        let prefix = format!("bench-tantivy/{}-{n}/", std::process::id());
        let mut files = 0;
        let mut bytes = 0u64;
        for f in std::fs::read_dir(&built_dir).expect("tantivy dir").flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.ends_with(".lock") {
                continue;
            }
            let data = std::fs::read(f.path()).expect("read tantivy file");
            bytes += data.len() as u64;
            files += 1;
            world
                .s3
                .put_object()
                .bucket(&world.bucket)
                .key(format!("{prefix}{name}"))
                .body(data.into())
                .send()
                .await
                .expect("upload tantivy file");
        }

        // Warm: the searcher open (opened from the downloaded files, as a warm function would).
        let warm_dir = root.join("warm");
        std::fs::create_dir_all(&warm_dir).expect("warm dir");
        download(world, &prefix, &warm_dir).await;
        let index = Index::open_in_dir(&warm_dir).expect("open");
        let (id, body) = fields(&index);
        let reader = index.reader().expect("reader");
        let searcher = reader.searcher();
        let mut warm = Vec::new();
        for q in queries.iter().take(args.warm_queries) {
            world.reset();
            let t = Instant::now();
            let _ = top10(&searcher, &stem, body, id, q);
            warm.push(world.cost(t.elapsed()));
        }
        drop(searcher);
        drop(reader);
        drop(index);

        // Cold: download to a fresh directory, open, query.
        let mut cold = Vec::new();
        for (i, q) in queries.iter().skip(1).take(args.cold_queries).enumerate() {
            let dir = root.join(format!("cold-{i}"));
            std::fs::create_dir_all(&dir).expect("cold dir");
            world.reset();
            let t = Instant::now();
            download(world, &prefix, &dir).await;
            let index = Index::open_in_dir(&dir).expect("open");
            let (id, body) = fields(&index);
            let reader = index.reader().expect("reader");
            let _ = top10(&reader.searcher(), &stem, body, id, q);
            cold.push(world.cost(t.elapsed()));
            drop(reader);
            drop(index);
            let _ = std::fs::remove_dir_all(&dir);
        }
        let _ = std::fs::remove_dir_all(&root);
        for key in world.keys(&prefix).await.unwrap_or_default() {
            let _ = world.s3.delete_object().bucket(&world.bucket).key(key).send().await;
        }
        let files_note = format!("{files} files, {}", human_kib(bytes as f64 / 1024.0));
        (
            vec![
                Row {
                    engine: "tantivy, warm".to_owned(),
                    mode: "text",
                    costs: warm,
                    notes: format!(
                        "searcher open; ids only (the hits' entries would be one BatchGetItem more); build {:.1} s",
                        build.as_secs_f64()
                    ),
                },
                Row {
                    engine: "tantivy, cold".to_owned(),
                    mode: "text",
                    costs: cold,
                    notes: format!("downloads {files_note} to a fresh directory, opens, queries"),
                },
            ],
            build,
        )
    }
}

