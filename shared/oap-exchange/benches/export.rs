//! Export and import at scale, in memory (docs/oap.md "Figures"): throughput (items/s) and the
//! heap an export and an import hold at once beyond what stays in the stores (the bundle object,
//! the imported entries: the bucket's and the table's in production), at 10,000 and 100,000
//! items of ~300 bytes. Bundles go to files (as they go to S3 in production: out of the
//! function's memory), entries to the in-memory store. Beside the streaming export, the same bundle written the obvious way
//! (every line collected into one buffer, then uploaded), which is what streaming saves.
//!
//!     cargo bench -p oap-exchange --bench export [-- 10000 100000]

use std::sync::Arc;
use std::time::Instant;

use memory_core::model::{MemoryEntry, StoredEntry, Tier};
use memory_core::ports::{Clock, EntryStore, IdSource};
use memory_core::{MemoryRef, TenantId, Timestamp};
use memory_testkit::exchange::InMemoryExchangeStore;
use memory_testkit::in_memory::{
    InMemoryEntryStore, ManualClock, RecordingPublisher, SequentialIds,
};
use oap_exchange::{Exchange, ExchangePorts, ExportRequest, HostKey, ImportRequest};
use serde_json::json;

#[global_allocator]
static ALLOC: bench_support::Counting = bench_support::Counting;

const REF: &str = "workspaces/acme/agents/assistant/memories";
const OTHER: &str = "workspaces/globex/agents/successor/memories";
const WORDS: &[&str] = &[
    "project",
    "allergy",
    "Lisbon",
    "meeting",
    "budget",
    "design",
    "birthday",
    "contract",
    "deadline",
    "preference",
];

fn text(i: usize) -> String {
    let mut s = format!("Fact {i}: ");
    for k in 0..40 {
        s.push_str(WORDS[(i * 7 + k * 3) % WORDS.len()]);
        s.push(' ');
    }
    s
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![10_000, 100_000]
    } else {
        sizes
    };
    println!("| items | export items/s | export holds | naive export holds | import items/s | import holds | bundle | round trip equal |");
    println!("|---|---|---|---|---|---|---|---|");
    for n in sizes {
        run(n).await;
    }
}

async fn run(n: usize) {
    let entries = Arc::new(InMemoryEntryStore::new());
    let bundles = Arc::new(FileBundles::new(n));
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(1_790_000_000_000)));
    let ids = Arc::new(SequentialIds::default());
    let exchange = Exchange::new(
        ExchangePorts {
            grants: Arc::new(InMemoryExchangeStore::new()),
            bundles: bundles.clone(),
            entries: entries.clone(),
            publisher: Arc::new(RecordingPublisher::new()),
            clock: clock.clone(),
            ids: ids.clone(),
        },
        HostKey::from_seed("did:web:bench.example", &[3u8; 32]).expect("key"),
        Arc::new(
            memory_core::writer::registry_from(&[])
                .expect("registry")
                .redactor(),
        ),
    );
    let memory_ref = MemoryRef::parse(REF).expect("ref");
    let mut batch = Vec::with_capacity(50);
    for i in 0..n {
        let at = Timestamp::from_millis(1_780_000_000_000 + i as i64);
        batch.push(StoredEntry::new(
            memory_ref.clone(),
            MemoryEntry {
                id: ids.next_id(at),
                content: text(i),
                tags: vec!["bench".into()],
                created_at: at,
                expires_at: None,
            },
            Tier::LongTerm,
        ));
        if batch.len() == 50 {
            entries.put_entries(&batch).await.expect("put");
            batch.clear();
        }
    }
    entries.put_entries(&batch).await.expect("put");
    let tenant = TenantId::parse("acme").expect("tenant");

    // The obvious way: every line in one buffer.
    let base = bench_support::restart_peak();
    let all = memory_core::listing::snapshot(entries.as_ref(), &memory_ref, clock.now())
        .await
        .expect("snapshot");
    let mut naive = Vec::new();
    for e in &all {
        serde_json::to_writer(
            &mut naive,
            &oap_exchange::bundle::line_of(e, &|_: &str| [0u8; 16]),
        )
        .expect("line");
        naive.push(b'\n');
    }
    let naive_heap = bench_support::peak() - base;
    drop((all, naive));

    let base = bench_support::restart_peak();
    let started = Instant::now();
    let request: ExportRequest = serde_json::from_value(json!({"scope_id": REF})).expect("request");
    let exported = exchange.export(&tenant, request).await.expect("export");
    let export_secs = started.elapsed().as_secs_f64();
    // What the export held at once: its peak over what stays afterwards (the object, which
    // is the bucket's in production, and the store as it was).
    let export_heap = bench_support::peak().saturating_sub(bench_support::live().max(base));
    let bytes = exported["bytes"].as_u64().unwrap_or(0) as usize;

    let base = bench_support::restart_peak();
    let started = Instant::now();
    let request: ImportRequest =
        serde_json::from_value(json!({"scope_id": OTHER, "manifest": exported["manifest"]}))
            .expect("request");
    let imported = exchange
        .import(&TenantId::parse("globex").expect("tenant"), request)
        .await
        .expect("import");
    let import_secs = started.elapsed().as_secs_f64();
    assert_eq!(imported["imported"].as_u64(), Some(n as u64));
    // Likewise: the imported entries stay (they are the table's in production).
    let import_heap = bench_support::peak().saturating_sub(bench_support::live().max(base));

    // The round trip: the second export holds the same items and hashes as the first.
    let request: ExportRequest =
        serde_json::from_value(json!({"scope_id": OTHER})).expect("request");
    let again = exchange
        .export(&TenantId::parse("globex").expect("tenant"), request)
        .await
        .expect("export again");
    let essence = |v: &serde_json::Value| -> Vec<String> {
        let object = v["manifest"]["object"].as_str().unwrap_or_default();
        let bytes = std::fs::read(bundles.path(object)).unwrap_or_default();
        let mut lines: Vec<String> = String::from_utf8_lossy(&bytes)
            .lines()
            .map(|l| {
                let l: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
                json!([
                    l["item_id"],
                    l["kind"],
                    l["content"],
                    l["labels"],
                    l["captured_at"],
                    l["content_sha256"]
                ])
                .to_string()
            })
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(
        essence(&exported),
        essence(&again),
        "the round trip changed items or hashes"
    );

    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    println!(
        "| {n} | {:.0} | {:.1} MiB | {:.1} MiB | {:.0} | {:.1} MiB | {:.1} MiB | yes |",
        n as f64 / export_secs,
        mib(export_heap),
        mib(naive_heap),
        n as f64 / import_secs,
        mib(import_heap),
        mib(bytes),
    );
}

/// Bundles in files under the temp dir: the bytes leave the process's heap as they leave the
/// function for S3, so the heap figures are the export's and the import's own.
struct FileBundles {
    dir: std::path::PathBuf,
}

impl FileBundles {
    fn new(n: usize) -> Self {
        let dir = std::env::temp_dir().join(format!("oap-bench-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("bench dir");
        FileBundles { dir }
    }

    fn path(&self, key: &str) -> std::path::PathBuf {
        self.dir.join(key.replace('/', "_"))
    }
}

impl Drop for FileBundles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn io(op: &'static str) -> impl Fn(std::io::Error) -> memory_core::StoreError {
    move |_| memory_core::StoreError::Backend {
        op,
        code: "Io".into(),
    }
}

#[async_trait::async_trait]
impl oap_exchange::BundleStore for FileBundles {
    async fn begin(
        &self,
        key: &memory_core::ports::ObjectKey,
    ) -> Result<String, memory_core::StoreError> {
        let upload = format!("{}.upload", key.as_str());
        std::fs::File::create(self.path(&upload)).map_err(io("begin"))?;
        Ok(upload)
    }
    async fn part(
        &self,
        _key: &memory_core::ports::ObjectKey,
        upload: &str,
        number: i32,
        bytes: Vec<u8>,
    ) -> Result<String, memory_core::StoreError> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.path(upload))
            .map_err(io("part"))?;
        f.write_all(&bytes).map_err(io("part"))?;
        Ok(format!("etag-{number}"))
    }
    async fn complete(
        &self,
        key: &memory_core::ports::ObjectKey,
        upload: &str,
        _parts: &[(i32, String)],
    ) -> Result<(), memory_core::StoreError> {
        std::fs::rename(self.path(upload), self.path(key.as_str())).map_err(io("complete"))
    }
    async fn abort(&self, _key: &memory_core::ports::ObjectKey, upload: &str) {
        let _ = std::fs::remove_file(self.path(upload));
    }
    async fn put(
        &self,
        key: &memory_core::ports::ObjectKey,
        bytes: Vec<u8>,
    ) -> Result<(), memory_core::StoreError> {
        std::fs::write(self.path(key.as_str()), bytes).map_err(io("put"))
    }
    async fn size(
        &self,
        key: &memory_core::ports::ObjectKey,
    ) -> Result<Option<u64>, memory_core::StoreError> {
        Ok(std::fs::metadata(self.path(key.as_str()))
            .ok()
            .map(|m| m.len()))
    }
    async fn read(
        &self,
        key: &memory_core::ports::ObjectKey,
        start: u64,
        len: u64,
    ) -> Result<Vec<u8>, memory_core::StoreError> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(self.path(key.as_str())).map_err(io("read"))?;
        f.seek(SeekFrom::Start(start)).map_err(io("read"))?;
        let mut buf = vec![0u8; len as usize];
        f.read_exact(&mut buf).map_err(io("read"))?;
        Ok(buf)
    }
    async fn presign(
        &self,
        key: &memory_core::ports::ObjectKey,
        _seconds: u64,
    ) -> Result<String, memory_core::StoreError> {
        Ok(format!("file://{}", self.path(key.as_str()).display()))
    }
}
