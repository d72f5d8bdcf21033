//! Commitment inference and firing over the in-memory ports, driven by an injected clock.

use std::collections::BTreeSet;
use std::sync::Arc;

use commitment_service::firing::{
    CommitmentForgetHook, CommitmentService, ZoneConfig, OUTBOX_LEASE_MS,
};
use commitment_service::CommitmentStore;
use memory_core::events::EventType;
use memory_core::forget::Forgetter;
use memory_core::writer::{MemoryWriter, PutRequest};
use memory_core::Timestamp;
use memory_testkit::in_memory::{InMemoryCommitmentStore, TestPorts};
use serde_json::json;

/// 2026-11-20T15:00:00Z, a Friday.
const CREATED: i64 = 1_795_186_800_000;
/// 2026-11-21T09:00:00Z: "tomorrow at 9am" in UTC.
const TOMORROW_9: i64 = 1_795_251_600_000;
const REF: &str = "workspaces/t1/agents/agent-1/memories";

struct World {
    ports: TestPorts,
    commitments: Arc<InMemoryCommitmentStore>,
    writer: MemoryWriter,
    service: CommitmentService,
    forgetter: Forgetter,
}

fn world() -> World {
    let ports = TestPorts::at(CREATED);
    let commitments = Arc::new(InMemoryCommitmentStore::new());
    World {
        service: CommitmentService::new(
            ports.core(),
            commitments.clone(),
            ZoneConfig::default(),
            true,
        ),
        writer: ports.writer(),
        forgetter: Forgetter::new(ports.core())
            .with_hook(Arc::new(CommitmentForgetHook(commitments.clone()))),
        commitments,
        ports,
    }
}

async fn write(w: &World, content: &str, tags: &[&str], subject: Option<&str>) -> String {
    let request: PutRequest = serde_json::from_value(json!({
        "tenantId": "t1", "memoryRef": REF,
        "entries": [{"content": content, "tags": tags, "subject": subject}]
    }))
    .expect("request");
    let out = w.writer.put(&request).await.expect("put");
    let id = out.written[0].id.clone();
    w.service
        .on_written("t1", REF, &id)
        .await
        .expect("on_written");
    id
}

/// Event ids of every `commitment.fired` published (redeliveries keep theirs).
fn fired_event_ids(w: &World) -> BTreeSet<String> {
    w.ports
        .events
        .of_type(EventType::CommitmentFired)
        .into_iter()
        .map(|e| e.event_id)
        .collect()
}

fn fired(w: &World) -> Vec<serde_json::Value> {
    w.ports
        .events
        .of_type(EventType::CommitmentFired)
        .into_iter()
        .map(|e| e.detail_json())
        .collect()
}

#[tokio::test]
async fn a_time_commitment_fires_once_at_its_instant() {
    let w = world();
    write(
        &w,
        "Remind me tomorrow at 9am to call the supplier",
        &[],
        None,
    )
    .await;
    let stored = w.commitments.dump();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].commitment.condition.due_ms(), Some(TOMORROW_9));

    w.ports.clock.set(Timestamp::from_millis(TOMORROW_9 - 1));
    assert_eq!(
        w.service.tick().await.expect("tick").fired,
        0,
        "not before its instant"
    );
    w.ports.clock.set(Timestamp::from_millis(TOMORROW_9));
    assert_eq!(w.service.tick().await.expect("tick").fired, 1);
    // Duplicate scheduler deliveries and later ticks.
    for _ in 0..3 {
        assert_eq!(w.service.tick().await.expect("tick").fired, 0);
    }
    w.ports.clock.advance_millis(OUTBOX_LEASE_MS * 10);
    assert_eq!(w.service.tick().await.expect("tick").fired, 0);
    let events = fired(&w);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["scheduledFor"], "2026-11-21T09:00:00.000Z");
    assert_eq!(events[0]["kind"], "time");
    assert_eq!(events[0]["tenantId"], "t1");
    let text = events[0].to_string();
    assert!(
        !text.contains("supplier") && !text.contains("Remind"),
        "content-free: {text}"
    );
    let runs = w.ports.events.of_type(EventType::RunRequested);
    assert_eq!(runs.len(), 1);
    assert_eq!(
        runs[0].detail["tenantId"], "t1",
        "the run inherits the tenant"
    );
    assert_eq!(runs[0].detail["runId"], events[0]["enqueuedRunId"]);
    assert_eq!(w.commitments.dump()[0].commitment.fired, vec![TOMORROW_9]);
}

#[tokio::test]
async fn concurrent_ticks_fire_once() {
    for _ in 0..20 {
        let w = world();
        write(&w, "Remind me tomorrow at 9am", &[], None).await;
        w.ports.clock.set(Timestamp::from_millis(TOMORROW_9 + 5));
        let (a, b, c) = tokio::join!(w.service.tick(), w.service.tick(), w.service.tick());
        let total = a.expect("a").fired + b.expect("b").fired + c.expect("c").fired;
        assert_eq!(total, 1);
        assert_eq!(fired(&w).len(), 1);
    }
}

#[tokio::test]
async fn predicates_fire_on_each_false_to_true_transition() {
    let w = world();
    write(
        &w,
        "Follow up with the customer when the invoice clears",
        &[],
        None,
    )
    .await;
    let tag = w.commitments.dump()[0]
        .commitment
        .condition
        .tag()
        .expect("predicate")
        .to_owned();
    assert_eq!(tag, "when:invoice-clears");
    assert!(fired(&w).is_empty(), "false at first");

    w.ports.clock.advance_millis(1_000);
    let first = write(&w, "payment received", &[&tag], None).await;
    assert_eq!(fired(&w).len(), 1, "false -> true fires");
    w.ports.clock.advance_millis(1_000);
    write(&w, "second confirmation", &[&tag], None).await;
    assert_eq!(fired(&w).len(), 1, "true -> true does not");

    // The predicate turns false: both tagged entries go away; the next evaluation re-arms.
    let tagged: Vec<String> = w.writer_ids_with_tag(&tag).await;
    assert!(tagged.contains(&first));
    for id in &tagged {
        assert!(w.writer.delete("t1", REF, id, None).await.expect("delete"));
    }
    w.ports.clock.advance_millis(1_000);
    write(&w, "unrelated note", &[], None).await;
    assert_eq!(fired(&w).len(), 1);
    w.ports.clock.advance_millis(1_000);
    write(&w, "cleared again after a chargeback", &[&tag], None).await;
    let events = fired(&w);
    assert_eq!(events.len(), 2, "fires again after re-arming");
    let ids = fired_event_ids(&w);
    assert_eq!(ids.len(), 2, "each transition has its own event id");
    assert!(
        !events[0].to_string().contains("invoice"),
        "no predicate words on the event"
    );
}

impl World {
    async fn writer_ids_with_tag(&self, tag: &str) -> Vec<String> {
        let scope =
            memory_core::TenantScope::new(memory_core::TenantId::parse("t1").expect("tenant"));
        let reader =
            memory_core::reader::MemoryReader::new(self.writer_store(), self.ports.clock.clone());
        let page = reader
            .list(
                &scope,
                REF,
                &memory_core::listing::ListOptions {
                    limit: Some(100),
                    tags: memory_core::tag_filter::TagFilter::new(vec![tag.to_owned()], vec![])
                        .expect("tag"),
                    cursor: None,
                },
            )
            .await
            .expect("list");
        page.entries.into_iter().map(|e| e.id).collect()
    }

    fn writer_store(&self) -> Arc<dyn memory_core::ports::EntryStore> {
        self.ports.store.clone()
    }
}

#[tokio::test]
async fn a_crash_at_any_step_never_double_fires_and_never_loses_the_fire() {
    for (label, step) in [("get", 0), ("record", 1), ("publish", 2), ("clear", 3)] {
        let w = world();
        write(&w, "Remind me tomorrow at 9am", &[], None).await;
        w.ports.clock.set(Timestamp::from_millis(TOMORROW_9));
        match step {
            0 => w.commitments.calls.fail_on("get", 1),
            1 => w.commitments.calls.fail_on("transition", 1),
            2 => w.ports.events.calls.fail_on("publish", 1),
            _ => w.commitments.calls.fail_on("transition", 2),
        }
        let first = w.service.tick().await;
        assert!(first.is_err(), "{label}: the crash surfaces");
        // Retries: immediately (inside the lease), then after the lease.
        w.service.tick().await.expect("retry");
        w.ports.clock.advance_millis(OUTBOX_LEASE_MS + 1);
        w.service.tick().await.expect("retry after lease");
        w.ports.clock.advance_millis(OUTBOX_LEASE_MS + 1);
        w.service.tick().await.expect("later tick");
        let c = &w.commitments.dump()[0];
        assert_eq!(
            c.commitment.fired,
            vec![TOMORROW_9],
            "{label}: recorded exactly once"
        );
        assert!(c.outbox.is_none(), "{label}: outbox finished");
        let ids = fired_event_ids(&w);
        assert_eq!(ids.len(), 1, "{label}: one fire, never lost");
        let deliveries = fired(&w).len();
        let max = if step == 3 { 2 } else { 1 };
        assert!(
            (1..=max).contains(&deliveries),
            "{label}: {deliveries} deliveries"
        );
    }
}

#[tokio::test]
async fn forget_removes_commitments_of_the_subject() {
    let w = world();
    write(
        &w,
        "Remind me tomorrow at 9am about the refund",
        &[],
        Some("customer-9"),
    )
    .await;
    write(&w, "Remind me tomorrow at 9am to water plants", &[], None).await;
    assert_eq!(w.commitments.dump().len(), 2);
    let counts = w
        .forgetter
        .forget("t1", "customer-9")
        .await
        .expect("forget");
    assert_eq!(
        (counts.deleted_entries, counts.cancelled_commitments),
        (1, 1)
    );
    assert_eq!(w.commitments.dump().len(), 1);
    w.ports.clock.set(Timestamp::from_millis(TOMORROW_9));
    assert_eq!(
        w.service.tick().await.expect("tick").fired,
        1,
        "only the other one fires"
    );
}

#[tokio::test]
async fn the_due_read_costs_the_same_with_ten_or_ten_thousand_commitments() {
    let mut reads = Vec::new();
    for total in [10usize, 10_000] {
        let store = InMemoryCommitmentStore::new();
        let zone_free: Vec<_> = (0..total)
            .map(|n| {
                let due = if n < 10 {
                    TOMORROW_9
                } else {
                    TOMORROW_9 + 86_400_000 * (1 + n as i64)
                };
                let inferred = commitments::Inferred {
                    condition: commitments::Condition::At { due_ms: due },
                    rule: "time.test",
                };
                commitment_service::StoredCommitment {
                    commitment: commitments::Commitment::new(
                        "t1",
                        REF,
                        &format!("e{n}"),
                        &inferred,
                        CREATED,
                    ),
                    version: 1,
                    subject: None,
                    outbox: None,
                }
            })
            .collect();
        store.put_new(&zone_free).await.expect("put");
        let mut read = 0;
        let mut due = 0;
        for shard in 0..commitment_service::DUE_SHARDS {
            let r = store
                .due(shard, Timestamp::from_millis(TOMORROW_9))
                .await
                .expect("due");
            read += r.items_read;
            due += r.keys.len();
        }
        assert_eq!(due, 10);
        reads.push(read);
    }
    assert_eq!(
        reads[0], reads[1],
        "items read do not grow with the number stored"
    );
}
