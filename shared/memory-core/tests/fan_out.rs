//! The scheduled fan-out over the in-memory ports: exactly the refs with a pending pass are queued.

use memory_core::background::{fan_out, FanOutReport};
use memory_core::ports::{EntryStore, PassKind, PENDING_SHARDS};
use memory_core::Tier;
use memory_guard::TenantId;
use memory_testkit::contract::{entry, memory_ref};
use memory_testkit::in_memory::{InMemoryEntryStore, RecordingQueue};

#[tokio::test]
async fn queues_exactly_the_pending_refs() {
    let store = InMemoryEntryStore::new();
    let queue = RecordingQueue::new();
    let t = TenantId::parse("t1").unwrap();
    let mut refs = Vec::new();
    for n in 0..40 {
        let r = memory_ref(&t, &format!("agent-{n}"));
        let mut e = entry(&r, n, "x", &[]);
        if n % 4 == 0 {
            e.tier = Tier::LongTerm;
        }
        store.put_entries(&[e]).await.unwrap();
        refs.push(r);
    }
    let report = fan_out(&store, &queue, PassKind::Consolidate)
        .await
        .unwrap();
    assert_eq!(
        report,
        FanOutReport {
            shards: PENDING_SHARDS,
            queued: 10
        }
    );
    let mut queued: Vec<String> = queue.passes().into_iter().map(|j| j.memory_ref).collect();
    queued.sort();
    let mut want: Vec<String> = refs.iter().step_by(4).map(|r| r.to_string()).collect();
    want.sort();
    assert_eq!(queued, want);
    assert!(queue.calls.get("enqueue") >= 1);
    assert_eq!(store.calls.get("pending_refs"), u64::from(PENDING_SHARDS));
}
