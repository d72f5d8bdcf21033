//! The door's rules on the in-memory store: the shared keyed contract (the same checks the
//! DynamoDB adapter passes on the emulator), and the checks that move a clock (LRU order,
//! expiry, the backend's TTL, reads that move an entry in the eviction order). The official
//! client tries the same promises end to end (tests/python/test_k_openintent.py).

use std::sync::Arc;

use intent_memory::{IntentError, Limits, MemoryType};
use memory_core::events::EventType;
use memory_core::ports::Clock;
use memory_core::Timestamp;
use memory_testkit::in_memory::{InMemoryArchiveStore, ManualClock, SequentialIds};
use memory_testkit::keyed::{InMemoryBehind, InMemoryIntentStore};
use memory_testkit::keyed_contract::{
    caller, create, episodic_cap, patch, query, working_cap, KeyedWorld,
};
use serde_json::{json, Value};

struct World {
    keyed: KeyedWorld,
    store: Arc<InMemoryIntentStore>,
    clock: Arc<ManualClock>,
}

fn world(limits: Limits) -> (World, InMemoryBehind) {
    let store = Arc::new(InMemoryIntentStore::default());
    let archives = Arc::new(InMemoryArchiveStore::new());
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(1_800_000_000_000)));
    let keyed = KeyedWorld::new(
        store.clone(),
        archives.clone(),
        clock.clone(),
        Arc::new(SequentialIds::default()),
        limits,
        Arc::new(memory_testkit::in_memory::InMemoryEntryStore::new()),
    );
    let behind = InMemoryBehind {
        store: store.clone(),
        archives,
    };
    (
        World {
            keyed,
            store,
            clock,
        },
        behind,
    )
}

memory_testkit::keyed_suite!(world: |limits| async move {
    let (w, behind) = world(limits);
    (w.keyed, behind)
});

fn episodic(extra: Value) -> Value {
    let mut e = json!({"memory_type": "episodic"});
    if let (Some(m), Some(x)) = (e.as_object_mut(), extra.as_object()) {
        m.extend(x.clone());
    }
    e
}

#[tokio::test]
async fn working_memory_refuses_past_capacity_per_task() {
    let (w, _) = world(working_cap(3));
    let (k, a) = (&w.keyed, caller("working-full"));
    let task = json!({"scope": {"task_id": "task-1"}});
    for i in 0..3 {
        k.put(&a, "ns", &format!("k{i}"), json!({}), task.clone())
            .await;
    }
    assert_eq!(
        k.memory
            .create(&a, create(&a.agent, "ns", "k3", json!({}), task))
            .await,
        Err(IntentError::CapacityExceeded {
            memory_type: MemoryType::Working,
            current: 3,
            max: 3
        })
    );
    // Another task has its own capacity.
    k.put(
        &a,
        "ns",
        "k3",
        json!({}),
        json!({"scope": {"task_id": "task-2"}}),
    )
    .await;
}

#[tokio::test]
async fn episodic_memory_evicts_the_least_recently_used_lowest_priority_unpinned_entry() {
    let (w, _) = world(episodic_cap(3));
    let (k, a) = (&w.keyed, caller("lru"));
    let pinned = k
        .put(
            &a,
            "ns",
            "pinned",
            json!({}),
            episodic(json!({"pinned": true, "priority": "low"})),
        )
        .await;
    w.clock.advance_millis(61_000);
    let high = k
        .put(
            &a,
            "ns",
            "high",
            json!({}),
            episodic(json!({"priority": "high"})),
        )
        .await;
    w.clock.advance_millis(61_000);
    let old = k.put(&a, "ns", "old", json!({}), episodic(json!({}))).await;
    w.clock.advance_millis(61_000);
    // Reading `old` makes it recently used, but it is still the only normal-priority candidate.
    k.memory.get(&a, &old.id).await.expect("get");
    let new = k.put(&a, "ns", "new", json!({}), episodic(json!({}))).await;
    assert_eq!(k.memory.get(&a, &old.id).await, Err(IntentError::NotFound));
    w.clock.advance_millis(61_000);
    // Next: `new` (normal) goes before `high`; the pinned entry never goes.
    k.put(&a, "ns", "newer", json!({}), episodic(json!({})))
        .await;
    assert_eq!(k.memory.get(&a, &new.id).await, Err(IntentError::NotFound));
    assert!(k.memory.get(&a, &pinned.id).await.is_ok() && k.memory.get(&a, &high.id).await.is_ok());
    assert_eq!(k.announced(EventType::MemoryEvicted), [old.id, new.id]);
    assert_eq!(k.list_all(&a).await.len(), 3);
}

#[tokio::test]
async fn pinned_entries_are_never_evicted_so_a_full_pinned_memory_refuses() {
    let (w, _) = world(episodic_cap(2));
    let (k, a) = (&w.keyed, caller("pinned"));
    let pin = episodic(json!({"pinned": true}));
    k.put(&a, "ns", "a", json!({}), pin.clone()).await;
    k.put(&a, "ns", "b", json!({}), pin.clone()).await;
    assert!(matches!(
        k.memory
            .create(&a, create(&a.agent, "ns", "c", json!({}), pin))
            .await,
        Err(IntentError::CapacityExceeded {
            current: 2,
            max: 2,
            ..
        })
    ));
}

#[tokio::test]
async fn expired_entries_are_invisible_and_make_way_for_their_key() {
    let (w, _) = world(Limits::default());
    let (k, a) = (&w.keyed, caller("expiry"));
    let e = k
        .put(&a, "ns", "k", json!({}), json!({"ttl": "duration:PT1M"}))
        .await;
    assert!(e.expires_at.is_some());
    w.clock.advance_millis(60_001);
    assert_eq!(k.memory.get(&a, &e.id).await, Err(IntentError::NotFound));
    assert!(k.list_all(&a).await.is_empty());
    let again = k.put(&a, "ns", "k", json!({}), json!({})).await;
    assert_ne!(again.id, e.id);
}

#[tokio::test]
async fn entries_the_backend_expired_free_their_key_and_their_place() {
    let (w, _) = world(working_cap(2));
    let (k, a) = (&w.keyed, caller("ttl"));
    let short = json!({"ttl": "duration:PT1M"});
    k.put(&a, "ns", "a", json!({}), short.clone()).await;
    k.put(&a, "ns", "b", json!({}), short).await;
    w.clock.advance_millis(120_000);
    // DynamoDB's TTL deletes the items, not their claims or the counter.
    w.store.expire(w.clock.now());
    k.put(&a, "ns", "a", json!({}), json!({})).await;
    k.put(&a, "ns", "c", json!({}), json!({})).await;
}

#[tokio::test]
async fn reads_that_move_an_entry_in_the_eviction_order_never_fail_a_write() {
    let (w, _) = world(episodic_cap(2));
    let (k, a) = (&w.keyed, caller("touch"));
    let e = k.put(&a, "ns", "k", json!({}), episodic(json!({}))).await;
    w.clock.advance_millis(61_000);
    k.memory.get(&a, &e.id).await.expect("read moves it");
    k.memory
        .update(&a, &e.id, Some(1), patch(json!({"tags": ["t"]})))
        .await
        .expect("same version after a read");
    w.clock.advance_millis(61_000);
    k.memory.get(&a, &e.id).await.expect("read moves it again");
    k.put(&a, "ns", "k2", json!({}), episodic(json!({}))).await;
    k.put(&a, "ns", "k3", json!({}), episodic(json!({}))).await;
    assert_eq!(k.list_all(&a).await.len(), 2);
}

#[tokio::test]
async fn lists_filter_as_the_rfc_says_and_page_in_creation_order() {
    let (w, _) = world(Limits::default());
    let (k, a) = (&w.keyed, caller("lists"));
    let rows = [
        ("billing.a", json!(["x", "y"])),
        ("billing.b", json!(["x"])),
        ("ops", json!(["y"])),
    ];
    for (i, (ns, tags)) in rows.iter().enumerate() {
        k.put(&a, ns, &format!("k{i}"), json!({}), json!({"tags": tags}))
            .await;
    }
    let a = &a;
    let keys = |pairs: &'static [(&'static str, &'static str)]| async move {
        k.memory
            .list(a, "a1", &query(pairs))
            .await
            .expect("list")
            .into_iter()
            .map(|e| e.key)
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&[("namespace", "billing*")]).await, ["k0", "k1"]);
    assert_eq!(keys(&[("tags", "x,y")]).await, ["k0"]);
    assert_eq!(keys(&[("tags_any", "y")]).await, ["k0", "k2"]);
    assert_eq!(keys(&[("limit", "1"), ("offset", "1")]).await, ["k1"]);
    assert!(keys(&[("memory_type", "semantic")]).await.is_empty());
}

#[tokio::test]
async fn version_records_read_back_whole() {
    let (w, _) = world(Limits::default());
    let (k, a) = (&w.keyed, caller("records"));
    let e = k
        .put(
            &a,
            "ns",
            "k",
            json!({"n": 1}),
            json!({"scope": {"task_id": "t"}, "tags": ["a"]}),
        )
        .await;
    k.memory
        .update(
            &a,
            &e.id,
            Some(1),
            patch(json!({"value": {"n": 2}, "pinned": true})),
        )
        .await
        .expect("update");
    let versions = k.memory.versions(&a, &e.id).await.expect("versions");
    assert_eq!(versions[1].changes, ["value", "pinned"]);
    for r in &versions {
        let back = intent_memory::model::VersionRecord::from_json(&r.to_json());
        assert_eq!(back.as_ref(), Some(r), "the stored form reads back whole");
    }
}

/// The host's per-tenant quotas (docs/quotas.md "Limits"): creates and updates are writes
/// against `MaxWritesPerMinute`, refused with the quota's numbers once the minute's writes
/// reached the limit, and admitted again the next minute; another tenant is never refused.
#[tokio::test]
async fn creates_and_updates_count_against_writes_per_minute() {
    use intent_memory::{IntentMemory, IntentPorts};
    use memory_core::ports::QuotaStore;
    use memory_core::quota::Quota;
    use memory_testkit::in_memory::{InMemoryEntryStore, RecordingPublisher};

    let quotas = Arc::new(InMemoryEntryStore::new());
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(1_800_000_000_000)));
    let memory = IntentMemory::new(
        IntentPorts {
            store: Arc::new(InMemoryIntentStore::default()),
            archives: Arc::new(InMemoryArchiveStore::new()),
            publisher: Arc::new(RecordingPublisher::new()),
            clock: clock.clone(),
            ids: Arc::new(SequentialIds::default()),
        },
        Limits::default(),
        Arc::new(memory_guard::SecretRegistry::new().redactor()),
    )
    .with_quotas(Some(quotas.clone() as Arc<dyn QuotaStore>));
    let (a, b) = (caller("intent-quota"), caller("intent-other"));
    quotas
        .set_overrides(&a.tenant, &[(Quota::WritesPerMinute, 3)])
        .await
        .expect("limits");
    quotas
        .set_overrides(&b.tenant, &[(Quota::WritesPerMinute, 3)])
        .await
        .expect("limits");
    let first = memory
        .create(&a, create(&a.agent, "ns", "k0", json!({"n": 0}), json!({})))
        .await
        .expect("write 1");
    memory
        .create(&a, create(&a.agent, "ns", "k1", json!({"n": 1}), json!({})))
        .await
        .expect("write 2");
    memory
        .update(&a, &first.id, Some(1), patch(json!({"value": {"n": 9}})))
        .await
        .expect("write 3");
    match memory
        .create(&a, create(&a.agent, "ns", "k2", json!({}), json!({})))
        .await
    {
        Err(IntentError::Store(memory_core::StoreError::QuotaExceeded(r))) => {
            assert_eq!((r.quota, r.current, r.max), (Quota::WritesPerMinute, 3, 3));
            assert_eq!(r.retry_after_seconds, 60, "the minute just began");
        }
        other => panic!("expected a quota refusal, got {other:?}"),
    }
    match memory
        .update(&a, &first.id, Some(2), patch(json!({"value": {"n": 10}})))
        .await
    {
        Err(IntentError::Store(memory_core::StoreError::QuotaExceeded(r))) => {
            assert_eq!(r.quota, Quota::WritesPerMinute)
        }
        other => panic!("expected a quota refusal, got {other:?}"),
    }
    assert_eq!(
        memory.get(&a, &first.id).await.expect("get").version,
        2,
        "the refused update wrote nothing"
    );
    memory
        .create(&b, create(&b.agent, "ns", "k0", json!({}), json!({})))
        .await
        .expect("another tenant has its own minute");
    clock.advance_millis(60_000);
    memory
        .create(&a, create(&a.agent, "ns", "k2", json!({}), json!({})))
        .await
        .expect("the next minute");
}

#[tokio::test]
async fn entries_the_backend_expired_are_given_back_before_a_quota_refuses() {
    use memory_core::quota::{Counter, Quota};
    use memory_core::StoreError;
    let (w, _) = world(Limits::default());
    let (k, a) = (&w.keyed, caller("quota-ttl"));
    let value = json!({"v": "x".repeat(30)});
    let size = serde_json::to_vec(&value).map_or(0, |v| v.len()) as i64;
    k.quotas
        .set_overrides(
            &a.tenant,
            &[
                (Quota::EntriesPerRef, 2),
                (Quota::BytesPerTenant, 2 * size as u64),
            ],
        )
        .await
        .unwrap_or_else(|e| panic!("overrides: {e}"));
    let short = episodic(json!({"ttl": "duration:PT1M"}));
    k.put(&a, "ns", "a", value.clone(), short.clone()).await;
    k.put(&a, "ns", "b", value.clone(), short).await;
    match k
        .memory
        .create(
            &a,
            create(&a.agent, "ns", "c", value.clone(), episodic(json!({}))),
        )
        .await
    {
        Err(IntentError::Store(StoreError::QuotaExceeded(r))) => {
            assert_eq!(r.quota, Quota::EntriesPerRef)
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    w.clock.advance_millis(120_000);
    // DynamoDB's TTL deletes the items silently: no write gives their charges back.
    w.store.expire(w.clock.now());
    let entries = Counter::KeyedEntries(a.tenant.clone(), a.agent.as_str().to_owned());
    let bytes = Counter::TenantBytes(a.tenant.clone());
    assert_eq!(w.store.quota_counter(&entries), 2);
    // The create that would be refused recounts the partition first, and fits.
    k.put(&a, "ns", "c", value.clone(), episodic(json!({})))
        .await;
    assert_eq!(w.store.quota_counter(&entries), 1);
    assert_eq!(w.store.quota_counter(&bytes), size);
    k.put(&a, "ns", "d", value.clone(), episodic(json!({})))
        .await;
    match k
        .memory
        .create(&a, create(&a.agent, "ns", "e", value, episodic(json!({}))))
        .await
    {
        Err(IntentError::Store(StoreError::QuotaExceeded(r))) => {
            assert_eq!((r.current, r.max), (2, 2), "{r}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}
