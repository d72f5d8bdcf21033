//! Store round trips per operation, measured with the counting in-memory ports (each port call
//! is one AWS request in the adapters: one DynamoDB call, one S3 call, one PutEvents per 10
//! events). docs/figures.md "Port calls per operation" shows them, and docs/cost.md is derived
//! from them.
//! Run: `cargo bench -p dream-service --bench request_counts`.

use std::sync::Arc;

use distill::DeterministicDistiller;
use dream_service::dream::Dreamer;
use memory_core::listing::ListOptions;
use memory_core::ports::CorePorts;
use memory_core::reader::MemoryReader;
use memory_core::writer::{MemoryWriter, PutRequest};
use memory_core::{SecretRegistry, TenantId, TenantScope, Timestamp};
use memory_testkit::in_memory::{
    InMemoryArchiveStore, InMemoryEntryStore, ManualClock, RecordingPublisher, SequentialIds,
};
use serde_json::json;

const REF: &str = "workspaces/t1/agents/agent-1/memories";

fn report(label: &str, store: &InMemoryEntryStore, archives: &InMemoryArchiveStore) {
    let ops = [
        "put_entries",
        "list_page",
        "get",
        "delete",
        "marker_state",
        "finish_pass",
        "replace",
    ];
    let dynamo: Vec<String> = ops
        .iter()
        .filter(|op| store.calls.get(op) > 0)
        .map(|op| format!("{op} {}", store.calls.get(op)))
        .collect();
    let s3_ops = ["put_if_absent", "put_expecting", "get", "delete", "list"];
    let s3: Vec<String> = s3_ops
        .iter()
        .filter(|op| archives.calls.get(op) > 0)
        .map(|op| format!("{op} {}", archives.calls.get(op)))
        .collect();
    println!(
        "| {label} | {} | {} |",
        if dynamo.is_empty() {
            "-".into()
        } else {
            dynamo.join(", ")
        },
        if s3.is_empty() {
            "-".into()
        } else {
            s3.join(", ")
        },
    );
    store.calls.reset();
    archives.calls.reset();
}

#[tokio::main]
async fn main() {
    let store = Arc::new(InMemoryEntryStore::new());
    let archives = Arc::new(InMemoryArchiveStore::new());
    let events = Arc::new(RecordingPublisher::new());
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(1_800_000_000_000)));
    let writer = MemoryWriter::new(
        CorePorts::new(store.clone(), events.clone(), clock.clone()),
        Arc::new(SequentialIds::default()),
    );
    let reader = MemoryReader::new(store.clone(), clock.clone());
    let dreamer = Dreamer::new(
        CorePorts::new(store.clone(), events.clone(), clock.clone()),
        archives.clone(),
        Arc::new(DeterministicDistiller),
    );
    let scope = TenantScope::new(TenantId::parse("t1").unwrap_or_else(|_| unreachable!()));

    println!("| operation (events published) | store port calls | archive port calls |");
    println!("|---|---|---|");
    for n in [1usize, 25] {
        let before = events.events().len();
        let entries: Vec<_> = (0..n)
            .map(|i| json!({"content": format!("fact {i}")}))
            .collect();
        let request: PutRequest =
            serde_json::from_value(json!({"tenantId": "t1", "memoryRef": REF, "entries": entries}))
                .unwrap_or_else(|e| panic!("{e}"));
        writer.put(&request).await.unwrap_or_else(|e| panic!("{e}"));
        let written = events.events().len() - before;
        report(
            &format!(
                "write {n} entr{} ({written} events)",
                if n == 1 { "y" } else { "ies" }
            ),
            &store,
            &archives,
        );
    }
    let page = reader
        .list(
            &scope,
            REF,
            &ListOptions {
                limit: Some(50),
                ..Default::default()
            },
        )
        .await
        .unwrap_or_default();
    report("list one page (50)", &store, &archives);
    let id = page
        .entries
        .first()
        .map(|e| e.id.clone())
        .unwrap_or_default();
    let _ = reader.get(&scope, REF, &id).await;
    report("get", &store, &archives);
    let before = events.events().len();
    let outcome = dreamer
        .run("t1", REF, None, &SecretRegistry::new().redactor())
        .await;
    let dream_events = events.events().len() - before;
    assert!(outcome.is_ok());
    report(
        &format!("dream of one ref with 26 new entries ({dream_events} events)"),
        &store,
        &archives,
    );
    let again = dreamer
        .run("t1", REF, None, &SecretRegistry::new().redactor())
        .await;
    assert!(again.is_ok());
    report("dream of a ref with nothing new", &store, &archives);
}
