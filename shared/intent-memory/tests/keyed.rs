//! The door's rules on the in-memory store (the same conditions as the DynamoDB adapter):
//! uniqueness, versions, capacity and eviction, memory types and visibility, SR-1, archives, forget,
//! content-free events. The emulator and the official client try the same promises end to end
//! (tests/python/test_k_openintent.py).

use std::sync::Arc;

use intent_memory::forget::KeyedForgetHook;
use intent_memory::request::{CreateRequest, ListQuery, PatchRequest};
use intent_memory::{Caller, IntentError, IntentMemory, IntentPorts, Limits};
use memory_core::events::EventType;
use memory_core::forget::ForgetHook;
use memory_core::model::SubjectKey;
use memory_core::ports::{Clock, IdSource};
use memory_core::Timestamp;
use memory_guard::{AgentId, SecretRegistry, TenantId};
use memory_testkit::in_memory::{
    InMemoryArchiveStore, ManualClock, RecordingPublisher, SequentialIds,
};
use memory_testkit::keyed::InMemoryIntentStore;
use serde_json::{json, Value};

const SECRET: &str = "sk-live-77aa88bb99cc";

struct World {
    memory: IntentMemory,
    store: Arc<InMemoryIntentStore>,
    archives: Arc<InMemoryArchiveStore>,
    events: Arc<RecordingPublisher>,
    clock: Arc<ManualClock>,
}

fn world(limits: Limits) -> World {
    let store = Arc::new(InMemoryIntentStore::default());
    let archives = Arc::new(InMemoryArchiveStore::new());
    let events = Arc::new(RecordingPublisher::new());
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(1_800_000_000_000)));
    let ids: Arc<dyn IdSource> = Arc::new(SequentialIds::default());
    let mut secrets = SecretRegistry::new();
    secrets.register("stripe", SECRET).expect("secret");
    let memory = IntentMemory::new(
        IntentPorts {
            store: store.clone(),
            archives: archives.clone(),
            publisher: events.clone(),
            clock: clock.clone(),
            ids,
        },
        limits,
        Arc::new(secrets.redactor()),
    );
    World {
        memory,
        store,
        archives,
        events,
        clock,
    }
}

fn caller(tenant: &str, agent: &str) -> Caller {
    Caller {
        tenant: TenantId::parse(tenant).expect("tenant"),
        agent: AgentId::parse(agent).expect("agent"),
    }
}

fn create(agent: &str, namespace: &str, key: &str, value: Value, extra: Value) -> CreateRequest {
    let mut body = json!({"agent_id": agent, "namespace": namespace, "key": key, "value": value});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    CreateRequest::decode(&body.to_string()).expect("valid create")
}

fn patch(body: Value) -> PatchRequest {
    PatchRequest::decode(&body.to_string()).expect("valid patch")
}

fn all() -> ListQuery {
    ListQuery::decode(&[]).expect("query")
}

#[tokio::test]
async fn create_get_update_delete_keep_every_version() {
    let w = world(Limits::default());
    let a = caller("t1", "a1");
    let e = w
        .memory
        .create(
            &a,
            create(
                "a1",
                "ns",
                "k",
                json!({"n": 1}),
                json!({"memory_type": "episodic", "tags": ["x"]}),
            ),
        )
        .await
        .expect("create");
    assert_eq!((e.version, e.id.starts_with("mem_")), (1, true));
    let got = w.memory.get(&a, &e.id).await.expect("get");
    assert_eq!(got, e);
    let v2 = w
        .memory
        .update(
            &a,
            &e.id,
            Some(1),
            patch(json!({"value": {"n": 2}, "pinned": true})),
        )
        .await
        .expect("update");
    assert_eq!(v2.version, 2);
    assert!(v2.pinned);
    let versions = w.memory.versions(&a, &e.id).await.expect("versions");
    for r in &versions {
        let back = intent_memory::model::VersionRecord::from_json(&r.to_json());
        assert_eq!(back.as_ref(), Some(r), "the stored form reads back whole");
    }
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[0].entry.value["n"], json!(1));
    assert_eq!(versions[1].changes, vec!["value", "pinned"]);
    assert_eq!(versions[1].changed_by, "a1");
    w.memory.delete(&a, &e.id).await.expect("delete");
    assert_eq!(w.memory.get(&a, &e.id).await, Err(IntentError::NotFound));
    assert_eq!(w.memory.delete(&a, &e.id).await, Err(IntentError::NotFound));
    assert!(
        w.store.dump(&a.tenant).is_empty(),
        "versions go with the entry"
    );
    let kinds: Vec<&str> = w
        .events
        .events()
        .iter()
        .map(|e| e.event_type.as_str())
        .collect();
    assert_eq!(
        kinds,
        ["memory.created", "memory.updated", "memory.deleted"]
    );
}

#[tokio::test]
async fn versions_are_kept_up_to_the_retention_setting() {
    let w = world(Limits {
        versions_kept: 3,
        ..Limits::default()
    });
    let a = caller("t1", "a1");
    let e = w
        .memory
        .create(&a, create("a1", "ns", "k", json!({"n": 0}), json!({})))
        .await
        .expect("create");
    for v in 1..=6u64 {
        w.memory
            .update(&a, &e.id, Some(v), patch(json!({"value": {"n": v}})))
            .await
            .expect("update");
    }
    let kept: Vec<u64> = w
        .memory
        .versions(&a, &e.id)
        .await
        .expect("versions")
        .iter()
        .map(|r| r.entry.version)
        .collect();
    assert_eq!(kept, [5, 6, 7]);
}

#[tokio::test]
async fn a_key_is_unique_per_agent_and_semantic_keys_per_tenant() {
    let w = world(Limits::default());
    let (a1, a2) = (caller("t1", "a1"), caller("t1", "a2"));
    let first = w
        .memory
        .create(&a1, create("a1", "ns", "k", json!({}), json!({})))
        .await
        .expect("create");
    // Working and episodic share one key space per agent.
    match w
        .memory
        .create(
            &a1,
            create(
                "a1",
                "ns",
                "k",
                json!({}),
                json!({"memory_type": "episodic"}),
            ),
        )
        .await
    {
        Err(IntentError::KeyTaken {
            existing_id,
            version,
        }) => assert_eq!((existing_id, version), (first.id, 1)),
        other => panic!("{other:?}"),
    }
    // Another agent's key space is its own.
    w.memory
        .create(&a2, create("a2", "ns", "k", json!({}), json!({})))
        .await
        .expect("other agent");
    let sem = json!({"memory_type": "semantic"});
    w.memory
        .create(&a1, create("a1", "policy", "k", json!({}), sem.clone()))
        .await
        .expect("semantic");
    assert!(matches!(
        w.memory
            .create(&a2, create("a2", "policy", "k", json!({}), sem))
            .await,
        Err(IntentError::KeyTaken { .. })
    ));
    // Another tenant is another world.
    let b = caller("t2", "a1");
    w.memory
        .create(&b, create("a1", "ns", "k", json!({}), json!({})))
        .await
        .expect("other tenant");
}

#[tokio::test]
async fn a_stale_version_gets_the_current_entry_and_a_missing_one_is_required() {
    let w = world(Limits::default());
    let a = caller("t1", "a1");
    let e = w
        .memory
        .create(&a, create("a1", "ns", "k", json!({"n": 1}), json!({})))
        .await
        .expect("create");
    w.memory
        .update(&a, &e.id, Some(1), patch(json!({"tags": ["t"]})))
        .await
        .expect("update");
    match w
        .memory
        .update(&a, &e.id, Some(1), patch(json!({"value": {}})))
        .await
    {
        Err(IntentError::VersionMismatch {
            current,
            current_version,
        }) => {
            assert_eq!(current_version, 2);
            assert_eq!(current["tags"], json!(["t"]));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        w.memory.update(&a, &e.id, None, patch(json!({}))).await,
        Err(IntentError::PreconditionRequired)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_patches_of_one_version_one_wins() {
    for _ in 0..50 {
        let w = world(Limits::default());
        let a = caller("t1", "a1");
        let e = w
            .memory
            .create(&a, create("a1", "ns", "k", json!({}), json!({})))
            .await
            .expect("create");
        let spawn = |by: &str| {
            let (memory, a, id, p) = (
                w.memory.clone(),
                a.clone(),
                e.id.clone(),
                patch(json!({"value": {"by": by}})),
            );
            tokio::spawn(async move { memory.update(&a, &id, Some(1), p).await })
        };
        let (x, y) = (spawn("x"), spawn("y"));
        let (x, y) = (x.await.expect("task"), y.await.expect("task"));
        assert_eq!(
            usize::from(x.is_ok()) + usize::from(y.is_ok()),
            1,
            "{x:?} {y:?}"
        );
        let loser = if x.is_ok() { y } else { x };
        assert!(matches!(
            loser,
            Err(IntentError::VersionMismatch {
                current_version: 2,
                ..
            })
        ));
    }
}

#[tokio::test]
async fn working_memory_refuses_past_capacity_per_task() {
    let w = world(Limits {
        working_per_task: 3,
        ..Limits::default()
    });
    let a = caller("t1", "a1");
    let task = json!({"scope": {"task_id": "task-1"}});
    for i in 0..3 {
        w.memory
            .create(
                &a,
                create("a1", "ns", &format!("k{i}"), json!({}), task.clone()),
            )
            .await
            .expect("create");
    }
    assert_eq!(
        w.memory
            .create(&a, create("a1", "ns", "k3", json!({}), task))
            .await,
        Err(IntentError::CapacityExceeded {
            memory_type: intent_memory::MemoryType::Working,
            current: 3,
            max: 3
        })
    );
    // Another task has its own capacity.
    w.memory
        .create(
            &a,
            create(
                "a1",
                "ns",
                "k3",
                json!({}),
                json!({"scope": {"task_id": "task-2"}}),
            ),
        )
        .await
        .expect("other task");
}

#[tokio::test]
async fn episodic_memory_evicts_the_least_recently_used_lowest_priority_unpinned_entry() {
    let w = world(Limits {
        episodic_per_agent: 3,
        ..Limits::default()
    });
    let a = caller("t1", "a1");
    let ep = |extra: Value| {
        let mut e = json!({"memory_type": "episodic"});
        if let (Some(m), Some(x)) = (e.as_object_mut(), extra.as_object()) {
            m.extend(x.clone());
        }
        e
    };
    let pinned = w
        .memory
        .create(
            &a,
            create(
                "a1",
                "ns",
                "pinned",
                json!({}),
                ep(json!({"pinned": true, "priority": "low"})),
            ),
        )
        .await
        .expect("create");
    w.clock.advance_millis(61_000);
    let high = w
        .memory
        .create(
            &a,
            create(
                "a1",
                "ns",
                "high",
                json!({}),
                ep(json!({"priority": "high"})),
            ),
        )
        .await
        .expect("create");
    w.clock.advance_millis(61_000);
    let old = w
        .memory
        .create(&a, create("a1", "ns", "old", json!({}), ep(json!({}))))
        .await
        .expect("create");
    w.clock.advance_millis(61_000);
    // Reading `old` makes it recently used, but it is still the only normal-priority candidate.
    w.memory.get(&a, &old.id).await.expect("get");
    let new = w
        .memory
        .create(&a, create("a1", "ns", "new", json!({}), ep(json!({}))))
        .await
        .expect("evicting create");
    assert_eq!(w.memory.get(&a, &old.id).await, Err(IntentError::NotFound));
    w.clock.advance_millis(61_000);
    // Next: `new` (normal) goes before `high`; the pinned entry never goes.
    w.memory
        .create(&a, create("a1", "ns", "newer", json!({}), ep(json!({}))))
        .await
        .expect("evicting create");
    assert_eq!(w.memory.get(&a, &new.id).await, Err(IntentError::NotFound));
    assert!(w.memory.get(&a, &pinned.id).await.is_ok() && w.memory.get(&a, &high.id).await.is_ok());
    let evicted: Vec<String> = w
        .events
        .events()
        .iter()
        .filter(|e| e.event_type == EventType::MemoryEvicted)
        .map(|e| e.detail["entryId"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(evicted, [old.id, new.id]);
    let listed = w.memory.list(&a, "a1", &all()).await.expect("list");
    assert_eq!(listed.len(), 3);
}

#[tokio::test]
async fn pinned_entries_are_never_evicted_so_a_full_pinned_tier_refuses() {
    let w = world(Limits {
        episodic_per_agent: 2,
        ..Limits::default()
    });
    let a = caller("t1", "a1");
    let pin = json!({"memory_type": "episodic", "pinned": true});
    for k in ["a", "b"] {
        w.memory
            .create(&a, create("a1", "ns", k, json!({}), pin.clone()))
            .await
            .expect("create");
    }
    assert!(matches!(
        w.memory
            .create(&a, create("a1", "ns", "c", json!({}), pin))
            .await,
        Err(IntentError::CapacityExceeded {
            current: 2,
            max: 2,
            ..
        })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_inserts_at_capacity_never_exceed_it_and_announce_each_eviction_once() {
    let w = world(Limits {
        episodic_per_agent: 5,
        ..Limits::default()
    });
    let a = caller("t1", "a1");
    let ep = json!({"memory_type": "episodic"});
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let (memory, a, req) = (
                w.memory.clone(),
                a.clone(),
                create("a1", "ns", &format!("k{i}"), json!({}), ep.clone()),
            );
            tokio::spawn(async move { memory.create(&a, req).await })
        })
        .collect();
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.expect("task"));
    }
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(
        w.memory.list(&a, "a1", &all()).await.expect("list").len(),
        5
    );
    let evicted: Vec<String> = w
        .events
        .events()
        .iter()
        .filter(|e| e.event_type == EventType::MemoryEvicted)
        .map(|e| e.detail["entryId"].as_str().unwrap_or_default().to_owned())
        .collect();
    let mut unique = evicted.clone();
    unique.sort();
    unique.dedup();
    assert_eq!((evicted.len(), unique.len()), (45, 45));
}

#[tokio::test]
async fn another_agents_private_tiers_are_invisible_and_semantic_is_shared() {
    let w = world(Limits::default());
    let (a1, a2) = (caller("t1", "a1"), caller("t1", "a2"));
    let private = w
        .memory
        .create(
            &a1,
            create(
                "a1",
                "ns",
                "p",
                json!({"s": "x"}),
                json!({"memory_type": "episodic"}),
            ),
        )
        .await
        .expect("create");
    let shared = w
        .memory
        .create(
            &a1,
            create(
                "a1",
                "policy",
                "s",
                json!({}),
                json!({"memory_type": "semantic"}),
            ),
        )
        .await
        .expect("create");
    assert_eq!(
        w.memory.get(&a2, &private.id).await,
        Err(IntentError::NotFound)
    );
    assert_eq!(
        w.memory.delete(&a2, &private.id).await,
        Err(IntentError::NotFound)
    );
    assert_eq!(
        w.memory
            .update(&a2, &private.id, Some(1), patch(json!({})))
            .await,
        Err(IntentError::NotFound)
    );
    assert_eq!(
        w.memory
            .get(&a2, &shared.id)
            .await
            .expect("semantic")
            .curated_by
            .as_deref(),
        Some("a1")
    );
    let seen: Vec<String> = w
        .memory
        .list(&a2, "a1", &all())
        .await
        .expect("list")
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(seen, [shared.id.clone()]);
    // Another tenant sees nothing, whatever the id.
    let t2 = caller("t2", "a1");
    assert_eq!(
        w.memory.get(&t2, &shared.id).await,
        Err(IntentError::NotFound)
    );
    assert!(w
        .memory
        .list(&t2, "a1", &all())
        .await
        .expect("list")
        .is_empty());
    // Writing as another agent is refused outright.
    assert_eq!(
        w.memory
            .create(&a2, create("a1", "ns", "z", json!({}), json!({})))
            .await,
        Err(IntentError::NotCaller)
    );
    for bad in ["", "../a1", "a1/../x", "sem_", "mem_../../x"] {
        assert_eq!(
            w.memory.get(&a1, bad).await,
            Err(IntentError::NotFound),
            "{bad}"
        );
        assert!(
            w.memory
                .list(&a1, bad, &all())
                .await
                .expect("list")
                .is_empty()
                || !bad.is_empty()
        );
    }
}

#[tokio::test]
async fn secrets_never_reach_the_store_and_identifiers_holding_one_are_refused() {
    let w = world(Limits::default());
    let a = caller("t1", "a1");
    let e = w
        .memory
        .create(
            &a,
            create(
                "a1",
                "ns",
                "k",
                json!({"token": SECRET, "list": [format!("x {SECRET}")]}),
                json!({"tags": [SECRET]}),
            ),
        )
        .await
        .expect("create");
    w.memory
        .update(&a, &e.id, Some(1), patch(json!({"value": {SECRET: 1}})))
        .await
        .expect("update");
    let dump = w.store.dump(&a.tenant);
    assert!(
        !dump.contains(SECRET) && dump.contains("[REDACTED:stripe]"),
        "{dump}"
    );
    for (ns, key) in [(SECRET, "k2"), ("ns", SECRET)] {
        assert!(matches!(
            w.memory
                .create(&a, create("a1", ns, key, json!({}), json!({})))
                .await,
            Err(IntentError::Invalid { .. })
        ));
    }
    for event in w.events.events() {
        let text = event.detail_json().to_string();
        assert!(
            !text.contains(SECRET) && !text.contains("token") && !text.contains("\"ns\""),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_tasks_working_memory_is_archived_once_and_cleared() {
    let w = world(Limits::default());
    let a = caller("t1", "a1");
    let task = json!({"scope": {"task_id": "task-9"}});
    for k in ["a", "b"] {
        w.memory
            .create(&a, create("a1", "ns", k, json!({"k": k}), task.clone()))
            .await
            .expect("create");
    }
    let other = w
        .memory
        .create(
            &a,
            create(
                "a1",
                "ns",
                "c",
                json!({}),
                json!({"scope": {"task_id": "task-10"}}),
            ),
        )
        .await
        .expect("create");
    let out = w
        .memory
        .archive_task(&a.tenant, &a.agent, "task-9")
        .await
        .expect("archive");
    assert_eq!(out.entries_archived, 2);
    assert!(out
        .archive
        .as_deref()
        .is_some_and(|n| n.starts_with("t1/agents/a1/")));
    let left: Vec<String> = w
        .memory
        .list(&a, "a1", &all())
        .await
        .expect("list")
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(left, [other.id]);
    // A rerun (duplicate delivery) changes nothing and announces the same archive.
    let again = w
        .memory
        .archive_task(&a.tenant, &a.agent, "task-9")
        .await
        .expect("rerun");
    assert_eq!(again, out);
    assert_eq!(w.archives.dump().len(), 1);
    let archived: Vec<_> = w
        .events
        .events()
        .into_iter()
        .filter(|e| e.event_type == EventType::MemoryArchived)
        .collect();
    assert_eq!(archived.len(), 2);
    assert_eq!(
        archived[0].event_id, archived[1].event_id,
        "consumers dedupe the rerun"
    );
    let none = w
        .memory
        .archive_task(&a.tenant, &a.agent, "no-such-task")
        .await
        .expect("empty");
    assert_eq!((none.entries_archived, none.archive), (0, None));
}

#[tokio::test]
async fn forget_reaches_entries_versions_and_archives_of_the_subject_only() {
    let w = world(Limits::default());
    let a = caller("t1", "a1");
    let subj = json!({"subject": "customer-42", "scope": {"task_id": "t"}});
    let e = w
        .memory
        .create(
            &a,
            create(
                "a1",
                "ns",
                "live",
                json!({"allergy": "peanuts"}),
                json!({"subject": "customer-42", "memory_type": "episodic"}),
            ),
        )
        .await
        .expect("create");
    w.memory
        .update(
            &a,
            &e.id,
            Some(1),
            patch(json!({"value": {"allergy": "peanuts, shellfish"}})),
        )
        .await
        .expect("update");
    w.memory
        .create(
            &a,
            create("a1", "ns", "archived", json!({"moved_to": "Lisbon"}), subj),
        )
        .await
        .expect("create");
    w.memory
        .create(
            &a,
            create(
                "a1",
                "ns",
                "kept",
                json!({"note": "unrelated"}),
                json!({"scope": {"task_id": "t"}}),
            ),
        )
        .await
        .expect("create");
    w.memory
        .create(
            &a,
            create(
                "a1",
                "ns",
                "other",
                json!({"birthday": "May 3"}),
                json!({"subject": "customer-7"}),
            ),
        )
        .await
        .expect("create");
    let out = w
        .memory
        .archive_task(&a.tenant, &a.agent, "t")
        .await
        .expect("archive");
    assert_eq!(out.entries_archived, 2);
    let hook = KeyedForgetHook {
        store: w.store.clone(),
        archives: w.archives.clone(),
        clock: w.clock.clone(),
    };
    let counts = hook
        .forget(
            &a.tenant,
            &SubjectKey::derive(&a.tenant, "customer-42"),
            &[],
        )
        .await
        .expect("forget");
    assert_eq!((counts.deleted_entries, counts.deleted_archives), (1, 1));
    let mut dump = w.store.dump(&a.tenant);
    for (_, body) in w.archives.dump() {
        dump.push_str(&String::from_utf8_lossy(&body));
    }
    assert!(
        !dump.contains("peanuts") && !dump.contains("Lisbon"),
        "{dump}"
    );
    assert!(
        dump.contains("unrelated") && dump.contains("May 3"),
        "{dump}"
    );
    // Idempotent: a second forget finds nothing more.
    let again = hook
        .forget(
            &a.tenant,
            &SubjectKey::derive(&a.tenant, "customer-42"),
            &[],
        )
        .await
        .expect("forget");
    assert_eq!((again.deleted_entries, again.deleted_archives), (0, 0));
}

#[tokio::test]
async fn expired_entries_are_invisible_and_make_way_for_their_key() {
    let w = world(Limits::default());
    let a = caller("t1", "a1");
    let e = w
        .memory
        .create(
            &a,
            create("a1", "ns", "k", json!({}), json!({"ttl": "duration:PT1M"})),
        )
        .await
        .expect("create");
    assert!(e.expires_at.is_some());
    w.clock.advance_millis(60_001);
    assert_eq!(w.memory.get(&a, &e.id).await, Err(IntentError::NotFound));
    assert!(w
        .memory
        .list(&a, "a1", &all())
        .await
        .expect("list")
        .is_empty());
    let again = w
        .memory
        .create(&a, create("a1", "ns", "k", json!({}), json!({})))
        .await
        .expect("key free again");
    assert_ne!(again.id, e.id);
}

#[tokio::test]
async fn lists_filter_as_the_rfc_says_and_page_in_creation_order() {
    let w = world(Limits::default());
    let a = caller("t1", "a1");
    for (i, (ns, tags)) in [
        ("billing.a", vec!["x", "y"]),
        ("billing.b", vec!["x"]),
        ("ops", vec!["y"]),
    ]
    .iter()
    .enumerate()
    {
        w.memory
            .create(
                &a,
                create("a1", ns, &format!("k{i}"), json!({}), json!({"tags": tags})),
            )
            .await
            .expect("create");
    }
    let q = |pairs: &[(&str, &str)]| {
        ListQuery::decode(
            &pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<Vec<_>>(),
        )
        .expect("query")
    };
    let keys = |q: ListQuery| {
        let m = &w.memory;
        let a = &a;
        async move {
            m.list(a, "a1", &q)
                .await
                .expect("list")
                .into_iter()
                .map(|e| e.key)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(keys(q(&[("namespace", "billing*")])).await, ["k0", "k1"]);
    assert_eq!(keys(q(&[("tags", "x,y")])).await, ["k0"]);
    assert_eq!(keys(q(&[("tags_any", "y")])).await, ["k0", "k2"]);
    assert_eq!(keys(q(&[("limit", "1"), ("offset", "1")])).await, ["k1"]);
    assert_eq!(
        keys(q(&[("memory_type", "semantic")])).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn entries_the_backend_expired_free_their_key_and_their_place() {
    let w = world(Limits {
        working_per_task: 2,
        ..Limits::default()
    });
    let a = caller("t1", "a1");
    let short = json!({"ttl": "duration:PT1M"});
    w.memory
        .create(&a, create("a1", "ns", "a", json!({}), short.clone()))
        .await
        .expect("create");
    w.memory
        .create(&a, create("a1", "ns", "b", json!({}), short))
        .await
        .expect("create");
    w.clock.advance_millis(120_000);
    // DynamoDB's TTL deletes the items, not their claims or the counter.
    w.store.expire(w.clock.now());
    w.memory
        .create(&a, create("a1", "ns", "a", json!({}), json!({})))
        .await
        .expect("key free");
    w.memory
        .create(&a, create("a1", "ns", "c", json!({}), json!({})))
        .await
        .expect("room again");
}

#[tokio::test]
async fn reads_that_move_an_entry_in_the_eviction_order_never_fail_a_write() {
    let w = world(Limits {
        episodic_per_agent: 2,
        ..Limits::default()
    });
    let a = caller("t1", "a1");
    let ep = json!({"memory_type": "episodic"});
    let e = w
        .memory
        .create(&a, create("a1", "ns", "k", json!({}), ep.clone()))
        .await
        .expect("create");
    w.clock.advance_millis(61_000);
    w.memory.get(&a, &e.id).await.expect("read moves it");
    w.memory
        .update(&a, &e.id, Some(1), patch(json!({"tags": ["t"]})))
        .await
        .expect("same version after a read");
    w.clock.advance_millis(61_000);
    w.memory.get(&a, &e.id).await.expect("read moves it again");
    w.memory
        .create(&a, create("a1", "ns", "k2", json!({}), ep.clone()))
        .await
        .expect("create");
    w.memory
        .create(&a, create("a1", "ns", "k3", json!({}), ep))
        .await
        .expect("evicts");
    assert_eq!(
        w.memory.list(&a, "a1", &all()).await.expect("list").len(),
        2
    );
}
