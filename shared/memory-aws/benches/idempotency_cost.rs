//! What an idempotency key costs on a put (docs/guarantees.md "Idempotent writes"; figures in
//! docs/figures.md "The cost of an idempotency key"): DynamoDB requests, write
//! and read capacity and latency per put of `MemoryWriter::put` over `DynamoEntryStore`, for
//! (a) unkeyed puts, (b) keyed puts with fresh keys and (c) replays of (b) (same key, same
//! payload). Each put stores one entry of about 200 bytes to one ref. The contender, Powertools
//! for AWS Lambda (Python) idempotency, is measured the same way by
//! `benches/powertools_idempotency.py` against the same emulator, so the two tables can be read
//! side by side: a key should cost a bounded, explained number of extra write units, and a
//! replay should cost less than the put it answers for.
//!
//! Requests are counted per operation by `aws_test_support::RequestCounter`. Capacity: the
//! bench asks for it (an interceptor adds `ReturnConsumedCapacity: TOTAL` to every request and
//! sums what comes back, column "reported"), but moto reports a constant (1 per successful
//! PutItem/UpdateItem, 0.5 per GetItem, nothing for TransactWriteItems or a failed condition),
//! so the WCU/RCU columns are computed from DynamoDB's published rules instead: standard writes
//! 1 WCU per started KB, transactional writes 2 WCU per started KB per item, a write whose
//! condition fails still consumes WCU, strongly consistent reads 1 RCU per started 4 KB (0.5
//! eventually consistent). Item sizes follow DynamoDB's item-size rules; each write is sized by
//! the largest its item is in the run (from the request, and read back after each case with an
//! unmetered client), an upper bound that equals the exact charge while every item stays under
//! 1 KB (the table's note prints the largest item). Latency is wall time of one `put` call;
//! the per-operation times are from signing to the end of each attempt. Each case writes to a
//! fresh empty copy of the memory table (keys and indexes from `MEMORY_TABLE`, deleted at the
//! end): moto deep-copies a table on every TransactWriteItems, so a transaction's time there
//! grows with the table, and a shared, filling table would make later cases and runs slower.
//!
//! Run: `eval "$(infra/local/up)"; cargo bench -p memory-aws --bench idempotency_cost`
//! (`IDEMPOTENCY_BENCH_PUTS` sets the puts per case, default 200). A fresh tenant per run.
//! Entry content is never printed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use aws_config::retry::RetryConfig;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_test_support::{operation_name, CallObserver, Observed, RequestCounter};
use memory_core::ports::{CorePorts, SystemClock, UlidIds};
use memory_core::writer::{AttributionInput, EntryInput, MemoryWriter, PutRequest};
use memory_testkit::in_memory::RecordingPublisher;
use serde_json::{Map, Value};

const DEFAULT_PUTS: usize = 200;
const WARM_UP_PUTS: usize = 10;
const CONTENT_BYTES: usize = 200;

/// One DynamoDB call as it went over the wire.
struct Call {
    op: String,
    request: Value,
    /// From signing to the end of the call (one attempt: the SDK's retries are off): the
    /// emulator's time plus the wire.
    elapsed: Duration,
    /// The service's error code (`ConditionalCheckFailedException`, ...), if it failed.
    error: Option<String>,
    /// Capacity units the endpoint reported (`ConsumedCapacity`), 0 when it reported none.
    reported: f64,
}

#[derive(Default)]
struct MeterState {
    calls: Vec<Call>,
}

/// Records every request body and outcome, and asks the endpoint for consumed capacity. Each
/// call keeps its own request until its response (the observer's per-call state), so calls the
/// store sends at the same time are paired right.
#[derive(Clone, Debug, Default)]
struct Meter(Arc<Mutex<MeterState>>);

/// A call from its signing on: the operation, the request as sent (with the capacity ask) and
/// when it was signed.
#[derive(Clone)]
struct Sent {
    op: String,
    request: Value,
    at: Instant,
}

impl std::fmt::Debug for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sent")
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for MeterState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeterState")
            .field("calls", &self.calls.len())
            .finish_non_exhaustive()
    }
}

impl Meter {
    fn state(&self) -> MutexGuard<'_, MeterState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take(&self) -> Vec<Call> {
        std::mem::take(&mut self.state().calls)
    }
}

/// `ConsumedCapacity` is one object (single-item calls) or a list (transactions, batches).
fn reported_units(body: &Value) -> f64 {
    let units = |c: &Value| {
        c.get("CapacityUnits")
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
    };
    match body.get("ConsumedCapacity") {
        Some(Value::Array(list)) => list.iter().map(units).sum(),
        Some(c) => units(c),
        None => 0.0,
    }
}

impl CallObserver for Meter {
    type Call = Option<Sent>;

    fn start(&self) -> Option<Sent> {
        None
    }

    fn send(&self, call: &mut Option<Sent>, request: &mut HttpRequest) -> Result<(), BoxError> {
        let op = operation_name(request).unwrap_or("?").to_owned();
        let mut body: Value = request
            .body()
            .bytes()
            .and_then(|b| serde_json::from_slice(b).ok())
            .unwrap_or(Value::Null);
        if let Value::Object(fields) = &mut body {
            fields.insert("ReturnConsumedCapacity".into(), "TOTAL".into());
            let bytes = serde_json::to_vec(&body)?;
            request
                .headers_mut()
                .insert("content-length", bytes.len().to_string());
            *request.body_mut() = bytes.into();
        }
        *call = Some(Sent {
            op,
            request: body,
            at: Instant::now(),
        });
        Ok(())
    }

    fn end(&self, call: Option<Sent>, response: Option<&HttpResponse>) {
        let Some(Sent { op, request, at }) = call else {
            return;
        };
        let (error, reported) = match response {
            None => (Some("NoResponse".to_owned()), 0.0),
            Some(response) => {
                let body: Value = response
                    .body()
                    .bytes()
                    .and_then(|b| serde_json::from_slice(b).ok())
                    .unwrap_or(Value::Null);
                let error = (response.status().as_u16() >= 300).then(|| {
                    response
                        .headers()
                        .get("x-amzn-errortype")
                        .map(str::to_owned)
                        .or_else(|| {
                            body.get("__type")
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                        })
                        .map(|t| t.rsplit('#').next().unwrap_or_default().to_owned())
                        .map(|t| t.split(':').next().unwrap_or_default().to_owned())
                        .unwrap_or_else(|| format!("HTTP {}", response.status().as_u16()))
                });
                (error, reported_units(&body))
            }
        };
        self.state().calls.push(Call {
            op,
            request,
            elapsed: at.elapsed(),
            error,
            reported,
        });
    }
}

// ---- DynamoDB's item-size and capacity rules -------------------------------------------------

/// Bytes of a number: one per two significant digits, plus one.
fn number_size(n: &str) -> usize {
    let mantissa = n.split(['e', 'E']).next().unwrap_or(n);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
    significant.max(1).div_ceil(2) + 1
}

fn base64_len(b64: &str) -> usize {
    let trimmed = b64.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

/// The size of one attribute value in DynamoDB's JSON wire form (`{"S": ...}`, ...).
fn value_size(v: &Value) -> usize {
    let Some((kind, inner)) = v.as_object().and_then(|o| o.iter().next()) else {
        return 0;
    };
    let text = || inner.as_str().unwrap_or_default();
    let list = || inner.as_array().map(Vec::as_slice).unwrap_or_default();
    match kind.as_str() {
        "S" => text().len(),
        "N" => number_size(text()),
        "B" => base64_len(text()),
        "BOOL" | "NULL" => 1,
        "SS" => list()
            .iter()
            .map(|s| s.as_str().unwrap_or_default().len())
            .sum(),
        "NS" => list()
            .iter()
            .map(|s| number_size(s.as_str().unwrap_or_default()))
            .sum(),
        "BS" => list()
            .iter()
            .map(|s| base64_len(s.as_str().unwrap_or_default()))
            .sum(),
        "L" => 3 + list().iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        "M" => {
            3 + inner.as_object().map_or(0, |m| {
                m.iter()
                    .map(|(name, e)| 1 + name.len() + value_size(e))
                    .sum::<usize>()
            })
        }
        _ => 0,
    }
}

/// An item's size: the lengths of its attribute names plus its values.
fn item_size(item: &Map<String, Value>) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + value_size(value))
        .sum()
}

fn write_units(bytes: usize) -> f64 {
    bytes.div_ceil(1024).max(1) as f64
}

fn read_units(bytes: usize, consistent: bool) -> f64 {
    let units = bytes.div_ceil(4096).max(1) as f64;
    if consistent {
        units
    } else {
        units / 2.0
    }
}

/// A table and the key of one item, as text (attribute order fixed by the key schema).
type ItemId = (String, String);

struct Model {
    /// Key attribute names per table.
    schemas: HashMap<String, Vec<String>>,
    /// The largest size each item touched reaches in the run.
    sizes: HashMap<ItemId, usize>,
}

impl Model {
    fn item_id(&self, table: &str, item_or_key: &Map<String, Value>) -> ItemId {
        let key = self
            .schemas
            .get(table)
            .map(|names| {
                names
                    .iter()
                    .map(|n| format!("{n}={}", item_or_key.get(n).unwrap_or(&Value::Null)))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        (table.to_owned(), key)
    }

    /// The size an action's item is charged at: the largest it is in the run.
    fn largest(
        &self,
        table: &str,
        key: &Map<String, Value>,
        item: Option<&Map<String, Value>>,
    ) -> usize {
        let stored = self
            .sizes
            .get(&self.item_id(table, key))
            .copied()
            .unwrap_or(0);
        stored.max(item.map_or(0, item_size))
    }
}

/// One action: its table, its key (or whole item), and the item it writes (if a put).
type Action<'a> = (
    &'a str,
    &'a Map<String, Value>,
    Option<&'a Map<String, Value>>,
);

fn single(body: &Value) -> Option<Action<'_>> {
    let table = body.get("TableName")?.as_str()?;
    let item = body.get("Item").and_then(Value::as_object);
    let key = body.get("Key").and_then(Value::as_object).or(item)?;
    Some((table, key, item))
}

/// What the actions of one call touch.
fn actions(call: &Call) -> Vec<Action<'_>> {
    match call.op.as_str() {
        "TransactWriteItems" => call
            .request
            .get("TransactItems")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|action| action.as_object()?.values().next())
            .filter_map(single)
            .collect(),
        _ => single(&call.request).into_iter().collect(),
    }
}

#[derive(Default, Clone, Copy)]
struct Capacity {
    wcu: f64,
    rcu: f64,
    /// A call the model has no rule for (would make the figures incomplete).
    unmodelled: u64,
}

fn capacity(call: &Call, model: &Model) -> Capacity {
    let mut c = Capacity::default();
    for (table, key, item) in actions(call) {
        let bytes = model.largest(table, key, item);
        match call.op.as_str() {
            "PutItem" | "UpdateItem" | "DeleteItem" => c.wcu += write_units(bytes),
            "TransactWriteItems" => c.wcu += 2.0 * write_units(bytes),
            "GetItem" => {
                let consistent = call
                    .request
                    .get("ConsistentRead")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                c.rcu += read_units(bytes, consistent);
            }
            _ => c.unmodelled += 1,
        }
    }
    if actions(call).is_empty() {
        c.unmodelled += 1;
    }
    c
}

// ---- The cases --------------------------------------------------------------------------------

struct CaseResult {
    name: &'static str,
    puts: usize,
    /// Requests per operation (from the request counter) and their summed time.
    by_op: BTreeMap<String, (u64, Duration)>,
    requests: u64,
    failed_conditions: u64,
    wcu: f64,
    rcu: f64,
    reported: f64,
    unmodelled: u64,
    largest_item: usize,
    latencies: Vec<Duration>,
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1000.0
}

/// About `CONTENT_BYTES` of filler text (never printed).
fn content(n: usize) -> String {
    let mut text = format!("benchmark entry {n:06}: ");
    while text.len() < CONTENT_BYTES {
        text.push_str("lorem ipsum dolor sit amet ");
    }
    text.truncate(CONTENT_BYTES);
    text
}

fn request(tenant: &str, agent: &str, n: usize, key: Option<String>) -> PutRequest {
    PutRequest {
        tenant_id: tenant.to_owned(),
        run_id: None,
        memory_ref: format!("workspaces/{tenant}/agents/{agent}/memories"),
        entries: vec![EntryInput {
            content: content(n),
            tags: Vec::new(),
            expires_at: None,
            subject: None,
            tier: None,
        }],
        secrets: Vec::new(),
        attribution: AttributionInput::default(),
        idempotency_key: key,
    }
}

struct Bench {
    /// Counted and metered; every writer of the run uses it.
    metered: aws_sdk_dynamodb::Client,
    counter: RequestCounter,
    meter: Meter,
    /// No interceptors: reads back item sizes without being counted.
    plain: aws_sdk_dynamodb::Client,
    schemas: HashMap<String, Vec<String>>,
}

impl Bench {
    async fn key_schema(&mut self, table: &str) {
        if self.schemas.contains_key(table) {
            return;
        }
        let out = self
            .plain
            .describe_table()
            .table_name(table)
            .send()
            .await
            .expect("describe the table (is the emulator provisioned?)");
        let names = out
            .table()
            .map(|t| {
                t.key_schema()
                    .iter()
                    .map(|k| k.attribute_name().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        self.schemas.insert(table.to_owned(), names);
    }

    fn writer(&self, table: &str) -> MemoryWriter {
        MemoryWriter::new(
            CorePorts::new(
                Arc::new(memory_aws::DynamoEntryStore::new(
                    self.metered.clone(),
                    table.to_owned(),
                )),
                Arc::new(RecordingPublisher::new()),
                Arc::new(SystemClock),
            ),
            Arc::new(UlidIds::default()),
        )
    }

    /// A new empty table defined like `source` (keys, indexes), for one case. Moto copies the
    /// whole table on every TransactWriteItems, so a transaction's latency there grows with
    /// what the table holds; an empty table per case keeps the cases (and runs) comparable.
    async fn clone_table(&self, source: &str, name: &str) {
        use aws_sdk_dynamodb::types::{BillingMode, GlobalSecondaryIndex, TableStatus};
        let described = self
            .plain
            .describe_table()
            .table_name(source)
            .send()
            .await
            .expect("describe the memory table (is the emulator provisioned?)");
        let t = described.table().expect("a table description");
        let mut create = self
            .plain
            .create_table()
            .table_name(name)
            .billing_mode(BillingMode::PayPerRequest)
            .set_key_schema(Some(t.key_schema().to_vec()))
            .set_attribute_definitions(Some(t.attribute_definitions().to_vec()));
        for g in t.global_secondary_indexes() {
            create = create.global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(g.index_name().unwrap_or_default())
                    .set_key_schema(Some(g.key_schema().to_vec()))
                    .set_projection(g.projection().cloned())
                    .build()
                    .expect("an index definition"),
            );
        }
        create.send().await.expect("create the bench table");
        for _ in 0..100 {
            let status = self
                .plain
                .describe_table()
                .table_name(name)
                .send()
                .await
                .expect("describe the bench table")
                .table()
                .and_then(|t| t.table_status().cloned());
            if status == Some(TableStatus::Active) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("bench table {name} did not become active");
    }

    async fn drop_table(&self, name: &str) {
        if let Err(e) = self.plain.delete_table().table_name(name).send().await {
            eprintln!("could not delete bench table {name}: {e}");
        }
    }

    /// Runs the puts, then reads back every item they touched to size it.
    async fn case(
        &mut self,
        name: &'static str,
        table: &str,
        requests: &[PutRequest],
        replay: bool,
    ) -> CaseResult {
        let writer = self.writer(table);
        self.counter.reset();
        let _ = self.meter.take();
        let mut latencies = Vec::with_capacity(requests.len());
        for r in requests {
            let started = Instant::now();
            let out = writer.put(r).await.expect("put");
            latencies.push(started.elapsed());
            assert_eq!(out.replayed, replay, "{name}: replayed flag");
            assert_eq!(out.written.len(), 1, "{name}: one entry per put");
        }
        let calls = self.meter.take();
        assert_eq!(
            calls.len() as u64,
            self.counter.total(),
            "the meter and the request counter saw the same calls"
        );
        let tables: BTreeSet<String> = calls
            .iter()
            .flat_map(|c| actions(c).into_iter().map(|(t, _, _)| t.to_owned()))
            .collect();
        for t in &tables {
            self.key_schema(t).await;
        }
        let mut model = Model {
            schemas: self.schemas.clone(),
            sizes: HashMap::new(),
        };
        let mut touched: BTreeMap<ItemId, Map<String, Value>> = BTreeMap::new();
        for call in &calls {
            for (table, key, _) in actions(call) {
                let id = model.item_id(table, key);
                let key_only: Map<String, Value> = model
                    .schemas
                    .get(table)
                    .into_iter()
                    .flatten()
                    .filter_map(|n| Some((n.clone(), key.get(n)?.clone())))
                    .collect();
                touched.insert(id, key_only);
            }
        }
        for ((table, text), key) in touched {
            let key = key
                .iter()
                .map(|(n, v)| (n.clone(), attribute(v)))
                .collect::<HashMap<_, _>>();
            let out = self
                .plain
                .get_item()
                .table_name(&table)
                .set_key(Some(key))
                .consistent_read(true)
                .send()
                .await
                .expect("read an item back to size it");
            let size = out.item().map_or(0, |item| item_size(&to_json(item)));
            model.sizes.insert((table, text), size);
        }
        let mut by_op: BTreeMap<String, (u64, Duration)> = BTreeMap::new();
        for call in &calls {
            by_op
                .entry(call.op.clone())
                .or_insert_with(|| (self.counter.get(&call.op), Duration::ZERO))
                .1 += call.elapsed;
        }
        let mut result = CaseResult {
            name,
            puts: requests.len(),
            requests: self.counter.total(),
            by_op,
            failed_conditions: 0,
            wcu: 0.0,
            rcu: 0.0,
            reported: 0.0,
            unmodelled: 0,
            largest_item: 0,
            latencies,
        };
        for call in &calls {
            let c = capacity(call, &model);
            result.wcu += c.wcu;
            result.rcu += c.rcu;
            result.unmodelled += c.unmodelled;
            result.reported += call.reported;
            if matches!(
                call.error.as_deref(),
                Some("ConditionalCheckFailedException" | "TransactionCanceledException")
            ) {
                result.failed_conditions += 1;
            }
            for (table, key, item) in actions(call) {
                result.largest_item = result.largest_item.max(model.largest(table, key, item));
            }
        }
        result
    }
}

/// The SDK's `AttributeValue` of one wire-form value (keys are strings or numbers here).
fn attribute(v: &Value) -> aws_sdk_dynamodb::types::AttributeValue {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    match (text("S"), text("N")) {
        (Some(s), _) => A::S(s),
        (_, Some(n)) => A::N(n),
        _ => A::Null(true),
    }
}

/// The wire form of an item the SDK decoded, for sizing.
fn to_json(item: &HashMap<String, aws_sdk_dynamodb::types::AttributeValue>) -> Map<String, Value> {
    item.iter()
        .map(|(k, v)| (k.clone(), value_json(v)))
        .collect()
}

fn value_json(v: &aws_sdk_dynamodb::types::AttributeValue) -> Value {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    let one = |k: &str, inner: Value| Value::Object(Map::from_iter([(k.to_owned(), inner)]));
    match v {
        A::S(s) => one("S", s.clone().into()),
        A::N(n) => one("N", n.clone().into()),
        A::B(b) => one("B", "A".repeat(encode_len(b.as_ref().len())).into()),
        A::Bool(_) => one("BOOL", true.into()),
        A::Null(_) => one("NULL", true.into()),
        A::Ss(list) => one("SS", list.clone().into()),
        A::Ns(list) => one("NS", list.clone().into()),
        A::Bs(list) => one(
            "BS",
            list.iter()
                .map(|b| Value::from("A".repeat(encode_len(b.as_ref().len()))))
                .collect(),
        ),
        A::L(list) => one("L", list.iter().map(value_json).collect()),
        A::M(map) => one("M", Value::Object(to_json(map))),
        _ => one("NULL", true.into()),
    }
}

/// Only lengths matter for sizing: the unpadded base64 length of `n` raw bytes, which
/// [`base64_len`] maps back to `n`.
fn encode_len(n: usize) -> usize {
    (4 * n).div_ceil(3)
}

fn row(tool: &str, r: &CaseResult) -> String {
    let per = |x: f64| x / r.puts.max(1) as f64;
    let mut sorted = r.latencies.clone();
    sorted.sort();
    let ops = r
        .by_op
        .iter()
        .map(|(op, (n, time))| {
            format!(
                "{op} {:.2} × {:.1} ms",
                per(*n as f64),
                time.as_secs_f64() * 1000.0 / (*n).max(1) as f64
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "| {tool} | {} | {} | {:.2} | {ops} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
        r.name,
        r.puts,
        per(r.requests as f64),
        per(r.failed_conditions as f64),
        per(r.wcu),
        per(r.rcu),
        per(r.reported),
        percentile(&sorted, 0.50),
        percentile(&sorted, 0.95),
    )
}

fn delta_row(tool: &str, name: &str, a: &CaseResult, b: &CaseResult) -> String {
    let per = |r: &CaseResult, x: f64| x / r.puts.max(1) as f64;
    let p = |r: &CaseResult, q: f64| {
        let mut s = r.latencies.clone();
        s.sort();
        percentile(&s, q)
    };
    format!(
        "| {tool} | {name} | | {:+.2} | | {:+.2} | {:+.2} | {:+.2} | {:+.2} | {:+.2} | {:+.2} |",
        per(b, b.requests as f64) - per(a, a.requests as f64),
        per(b, b.failed_conditions as f64) - per(a, a.failed_conditions as f64),
        per(b, b.wcu) - per(a, a.wcu),
        per(b, b.rcu) - per(a, a.rcu),
        per(b, b.reported) - per(a, a.reported),
        p(b, 0.50) - p(a, 0.50),
        p(b, 0.95) - p(a, 0.95),
    )
}

#[tokio::main]
async fn main() {
    let Ok(endpoint) = std::env::var("AWS_ENDPOINT_URL") else {
        eprintln!("idempotency_cost needs the emulator: eval \"$(infra/local/up)\" first");
        std::process::exit(2);
    };
    let puts = std::env::var("IDEMPOTENCY_BENCH_PUTS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_PUTS);
    let table = std::env::var("MEMORY_TABLE").unwrap_or_else(|_| "wop-memory-entries".into());
    let sdk = aws_test_support::emulator_config().await;
    let counter = RequestCounter::default();
    let meter = Meter::default();
    // As in production (`config.rs`): the SDK's retries off, `retry.rs` is the only policy.
    let metered = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&sdk)
            .retry_config(RetryConfig::disabled())
            .interceptor(Observed(counter.clone()))
            .interceptor(Observed(meter.clone()))
            .build(),
    );
    let mut bench = Bench {
        metered,
        counter,
        meter,
        plain: aws_sdk_dynamodb::Client::new(&sdk),
        schemas: HashMap::new(),
    };
    let run = ulid::Ulid::new().to_string().to_lowercase();
    let tenant = format!("bench-idem-{run}");
    let [warm_table, unkeyed_table, keyed_table] =
        ["warm-up", "unkeyed", "keyed"].map(|case| format!("idem-bench-{run}-{case}"));
    for t in [&warm_table, &unkeyed_table, &keyed_table] {
        bench.clone_table(&table, t).await;
    }

    // Warm-up (connections, the emulator's code paths), in a table of its own; not reported.
    let warm: Vec<PutRequest> = (0..WARM_UP_PUTS)
        .map(|n| request(&tenant, "warm-up", n, Some(format!("warm-{n}"))))
        .collect();
    let _ = bench.case("warm-up", &warm_table, &warm, false).await;
    let _ = bench.case("warm-up replay", &warm_table, &warm, true).await;

    let unkeyed: Vec<PutRequest> = (0..puts)
        .map(|n| request(&tenant, "unkeyed", n, None))
        .collect();
    let keyed: Vec<PutRequest> = (0..puts)
        .map(|n| request(&tenant, "keyed", n, Some(format!("bench-{run}-{n}"))))
        .collect();
    let a = bench
        .case("(a) unkeyed", &unkeyed_table, &unkeyed, false)
        .await;
    let b = bench
        .case("(b) keyed, fresh keys", &keyed_table, &keyed, false)
        .await;
    let c = bench
        .case("(c) keyed replay", &keyed_table, &keyed, true)
        .await;
    for t in [&warm_table, &unkeyed_table, &keyed_table] {
        bench.drop_table(t).await;
    }

    let tool = "wop-memory";
    println!(
        "#### wop-memory: `MemoryWriter::put` over `DynamoEntryStore` ({puts} puts per case, 1 entry of {CONTENT_BYTES} bytes, one ref, a fresh copy of {table} per case, {endpoint})\n"
    );
    println!(
        "| tool | case | puts | requests/put | by operation: calls/put × mean time | failed conditions/put | WCU/put (computed) | RCU/put (computed) | CU/put reported by emulator | p50 ms | p95 ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in [&a, &b, &c] {
        println!("{}", row(tool, r));
    }
    println!("{}", delta_row(tool, "Δ (b) − (a): a key's extra", &a, &b));
    println!(
        "{}",
        delta_row(tool, "Δ (c) − (a): replay vs unkeyed", &a, &c)
    );
    let largest = [&a, &b, &c]
        .iter()
        .map(|r| r.largest_item)
        .max()
        .unwrap_or(0);
    let unmodelled: u64 = [&a, &b, &c].iter().map(|r| r.unmodelled).sum();
    println!(
        "\nWCU/RCU computed from DynamoDB's published rules (standard write 1 WCU/KB, transactional write 2 WCU/KB per item, failed conditional write still charged, consistent read 1 RCU/4 KB); largest item touched: {largest} bytes. Index writes are not included: only a case's first marker write enters `byDirtyRef` (KEYS_ONLY, 1 WCU per case, the same in every case).{}",
        if unmodelled > 0 {
            format!(" {unmodelled} calls had no capacity rule and are missing from the figures.")
        } else {
            String::new()
        }
    );
    println!(
        "\"Reported\" is what the endpoint returned for ReturnConsumedCapacity=TOTAL (moto: a constant per successful single-item call, nothing for transactions or failed conditions), shown to explain why the computed columns are the ones to read."
    );
    println!(
        "Latency is the emulator's: moto deep-copies the table once per transaction item on every TransactWriteItems, so a transaction's time grows with the table (each case starts from an empty copy) and a 2-item transaction pays two copies; read the per-operation times with that in mind."
    );
}
