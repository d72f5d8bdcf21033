//! The OpenIntent door's behaviour, written once and run through the service over every store
//! adapter (`keyed_suite!`): in memory in `intent-memory`'s tests, on DynamoDB and S3 in
//! `memory-aws`'s emulator tests. Each check starts in a fresh tenant, so runs against a shared
//! backend never meet. Checks that need a clock they can move stay beside the in-memory store.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use intent_memory::forget::KeyedForgetHook;
use intent_memory::request::{CreateRequest, ListQuery, PatchRequest};
use intent_memory::store::IntentStore;
use intent_memory::{Caller, IntentEntry, IntentError, IntentMemory, IntentPorts, Limits};
use memory_core::events::{DomainEvent, EventType};
use memory_core::forget::ForgetHook;
use memory_core::model::SubjectKey;
use memory_core::ports::{ArchiveStore, Clock, IdSource, QuotaStore};
use memory_core::quota::Quota;
use memory_core::StoreError;
use memory_guard::{AgentId, SecretRegistry, TenantId};
use serde_json::{json, Value};

use crate::contract::fresh_tenant;
use crate::in_memory::RecordingPublisher;

/// The secret every keyed world redacts (`stripe`).
pub const SECRET: &str = "sk-live-77aa88bb99cc";

/// The service over one backend, and what a check needs to look behind it.
pub struct KeyedWorld {
    pub memory: IntentMemory,
    pub store: Arc<dyn IntentStore>,
    pub archives: Arc<dyn ArchiveStore>,
    pub events: Arc<RecordingPublisher>,
    pub clock: Arc<dyn Clock>,
    /// The host's quota limits the service reads (docs/quotas.md "The OpenIntent door").
    pub quotas: Arc<dyn QuotaStore>,
}

/// A backend's view of everything it holds for a tenant, as text: entries, versions, claims,
/// counters and every archive object version ("no trace" checks search it).
#[async_trait]
pub trait Behind: Send + Sync {
    async fn everything(&self, tenant: &TenantId) -> String;
}

impl KeyedWorld {
    pub fn new(
        store: Arc<dyn IntentStore>,
        archives: Arc<dyn ArchiveStore>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdSource>,
        limits: Limits,
        quotas: Arc<dyn QuotaStore>,
    ) -> Self {
        let events = Arc::new(RecordingPublisher::new());
        let mut secrets = SecretRegistry::new();
        secrets
            .register("stripe", SECRET)
            .unwrap_or_else(|_| panic!("test secret must register"));
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
        )
        .with_quotas(Some(quotas.clone()));
        KeyedWorld {
            memory,
            store,
            archives,
            events,
            clock,
            quotas,
        }
    }

    /// Creates as agent `a1` of `caller`'s tenant; panics on failure.
    pub async fn put(
        &self,
        caller: &Caller,
        ns: &str,
        key: &str,
        value: Value,
        extra: Value,
    ) -> IntentEntry {
        self.memory
            .create(caller, create(&caller.agent, ns, key, value, extra))
            .await
            .unwrap_or_else(|e| panic!("create {ns}/{key}: {e:?}"))
    }

    pub async fn list_all(&self, caller: &Caller) -> Vec<IntentEntry> {
        self.memory
            .list(caller, caller.agent.as_str(), &query(&[]))
            .await
            .unwrap_or_else(|e| panic!("list: {e:?}"))
    }

    /// The entry ids of the events of one type, in publication order.
    pub fn announced(&self, kind: EventType) -> Vec<String> {
        self.events
            .events()
            .iter()
            .filter(|e| e.event_type == kind)
            .map(|e| e.detail["entryId"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    pub fn all_events(&self) -> Vec<DomainEvent> {
        self.events.events()
    }

    pub fn forget_hook(&self) -> KeyedForgetHook {
        KeyedForgetHook {
            store: self.store.clone(),
            archives: self.archives.clone(),
            clock: self.clock.clone(),
        }
    }
}

/// The default limits, but at most `n` working entries per agent and task.
pub fn working_cap(n: u64) -> Limits {
    Limits {
        working_per_task: n,
        ..Limits::default()
    }
}

/// The default limits, but at most `n` episodic entries per agent.
pub fn episodic_cap(n: u64) -> Limits {
    Limits {
        episodic_per_agent: n,
        ..Limits::default()
    }
}

/// A fresh tenant's agent `a1`.
pub fn caller(label: &str) -> Caller {
    Caller {
        tenant: fresh_tenant(label),
        agent: AgentId::parse("a1").unwrap_or_else(|_| panic!("agent id")),
    }
}

/// Another agent of the same tenant.
pub fn colleague(of: &Caller, agent: &str) -> Caller {
    Caller {
        tenant: of.tenant.clone(),
        agent: AgentId::parse(agent).unwrap_or_else(|_| panic!("agent id")),
    }
}

/// A create body as the client sends it, `extra` merged in.
pub fn create(agent: &AgentId, ns: &str, key: &str, value: Value, extra: Value) -> CreateRequest {
    let mut body = json!({"agent_id": agent.as_str(), "namespace": ns, "key": key, "value": value});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    CreateRequest::decode(&body.to_string()).unwrap_or_else(|e| panic!("create body: {e:?}"))
}

pub fn patch(body: Value) -> PatchRequest {
    PatchRequest::decode(&body.to_string()).unwrap_or_else(|e| panic!("patch body: {e:?}"))
}

pub fn query(pairs: &[(&str, &str)]) -> ListQuery {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    ListQuery::decode(&pairs).unwrap_or_else(|e| panic!("query: {e:?}"))
}

/// Create, get, update, versions within retention, stale versions, delete with everything
/// hanging off the entry.
pub async fn entries_live_and_die_whole(w: KeyedWorld, behind: &dyn Behind) {
    let a = caller("keyed-life");
    let e = w
        .put(
            &a,
            "ns",
            "k",
            json!({"n": 0}),
            json!({"memory_type": "episodic", "tags": ["x"]}),
        )
        .await;
    assert_eq!((e.version, e.id.starts_with("mem_")), (1, true));
    assert_eq!(w.memory.get(&a, &e.id).await, Ok(e.clone()));
    let kept = w.memory.limits().versions_kept;
    for v in 1..=kept + 2 {
        w.memory
            .update(&a, &e.id, Some(v), patch(json!({"value": {"n": v}})))
            .await
            .unwrap_or_else(|err| panic!("update {v}: {err:?}"));
    }
    let last = kept + 3;
    match w.memory.update(&a, &e.id, Some(2), patch(json!({}))).await {
        Err(IntentError::VersionMismatch {
            current_version,
            current,
        }) => assert_eq!(
            (current_version, current["value"]["n"].clone()),
            (last, json!(last - 1))
        ),
        other => panic!("{other:?}"),
    }
    let versions = w.memory.versions(&a, &e.id).await.unwrap_or_default();
    let numbers: Vec<u64> = versions.iter().map(|r| r.entry.version).collect();
    assert_eq!(numbers, (last + 1 - kept..=last).collect::<Vec<_>>());
    assert_eq!(
        versions.last().map(|r| r.changes.clone()),
        Some(vec!["value".to_owned()])
    );
    assert_eq!(
        w.memory.update(&a, &e.id, None, patch(json!({}))).await,
        Err(IntentError::PreconditionRequired)
    );
    w.memory
        .delete(&a, &e.id)
        .await
        .unwrap_or_else(|err| panic!("delete: {err:?}"));
    assert_eq!(w.memory.get(&a, &e.id).await, Err(IntentError::NotFound));
    assert_eq!(w.memory.delete(&a, &e.id).await, Err(IntentError::NotFound));
    let left = behind.everything(&a.tenant).await;
    assert!(
        !left.contains(&e.id),
        "versions, claim and eviction place go too: {left}"
    );
    let kinds: Vec<&str> = w
        .all_events()
        .iter()
        .map(|e| e.event_type.as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"memory.created"));
    assert_eq!(kinds.last(), Some(&"memory.deleted"));
}

/// §1.2 per agent across working and episodic, per tenant for semantic; tenants never meet.
pub async fn keys_are_unique_where_the_rfc_says(w: KeyedWorld) {
    let a1 = caller("keyed-unique");
    let a2 = colleague(&a1, "a2");
    let first = w.put(&a1, "ns", "k", json!({}), json!({})).await;
    match w
        .memory
        .create(
            &a1,
            create(
                &a1.agent,
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
    w.put(&a2, "ns", "k", json!({}), json!({})).await;
    let semantic = json!({"memory_type": "semantic"});
    w.put(&a1, "policy", "k", json!({}), semantic.clone()).await;
    assert!(matches!(
        w.memory
            .create(&a2, create(&a2.agent, "policy", "k", json!({}), semantic))
            .await,
        Err(IntentError::KeyTaken { .. })
    ));
    w.put(
        &caller("keyed-unique-other"),
        "ns",
        "k",
        json!({}),
        json!({}),
    )
    .await;
}

/// Private memory types are the owner's alone; semantic memory is the tenant's.
pub async fn only_owners_see_private_memory(w: KeyedWorld) {
    let a1 = caller("keyed-private");
    let a2 = colleague(&a1, "a2");
    let private = w
        .put(
            &a1,
            "ns",
            "p",
            json!({"s": "x"}),
            json!({"memory_type": "episodic"}),
        )
        .await;
    let shared = w
        .put(
            &a1,
            "policy",
            "s",
            json!({}),
            json!({"memory_type": "semantic"}),
        )
        .await;
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
    let seen = w
        .memory
        .get(&a2, &shared.id)
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(seen.curated_by.as_deref(), Some("a1"));
    let listed: Vec<String> = w
        .memory
        .list(&a2, "a1", &query(&[]))
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(listed, std::slice::from_ref(&shared.id));
    let stranger = caller("keyed-private-other");
    assert_eq!(
        w.memory.get(&stranger, &shared.id).await,
        Err(IntentError::NotFound)
    );
    assert!(w
        .memory
        .list(&stranger, "a1", &query(&[]))
        .await
        .unwrap_or_default()
        .is_empty());
    assert_eq!(
        w.memory
            .create(&a2, create(&a1.agent, "ns", "z", json!({}), json!({})))
            .await,
        Err(IntentError::NotCaller)
    );
    for bad in [
        "",
        "../a1",
        "sem_",
        "mem_../../x",
        "mem_01ARZ3NDEKTSV4RRFFQ69G5FA/",
    ] {
        assert_eq!(
            w.memory.get(&a1, bad).await,
            Err(IntentError::NotFound),
            "{bad}"
        );
    }
}

/// SR-1 over every string of a value, tags included; identifiers with a secret are refused;
/// events carry no value, namespace or key.
pub async fn secrets_never_reach_the_store(w: KeyedWorld, behind: &dyn Behind) {
    let a = caller("keyed-sr1");
    let e = w
        .put(
            &a,
            "ns",
            "k",
            json!({"token": SECRET, "list": [format!("x {SECRET}")]}),
            json!({"tags": [SECRET]}),
        )
        .await;
    w.memory
        .update(&a, &e.id, Some(1), patch(json!({"value": {SECRET: 1}})))
        .await
        .unwrap_or_else(|err| panic!("{err:?}"));
    let stored = behind.everything(&a.tenant).await;
    assert!(
        !stored.contains(SECRET) && stored.contains("[REDACTED:stripe]"),
        "{stored}"
    );
    for (ns, key) in [(SECRET, "k2"), ("ns", SECRET)] {
        assert!(matches!(
            w.memory
                .create(&a, create(&a.agent, ns, key, json!({}), json!({})))
                .await,
            Err(IntentError::Invalid { .. })
        ));
    }
    // The scope's ids are identifiers too (a counter, an archive); its other strings are data.
    for scope in [
        json!({"task_id": format!("t-{SECRET}")}),
        json!({"intent_id": SECRET}),
    ] {
        assert!(matches!(
            w.memory
                .create(
                    &a,
                    create(&a.agent, "ns", "k3", json!({}), json!({"scope": scope}))
                )
                .await,
            Err(IntentError::Invalid { .. })
        ));
    }
    let noted = w
        .put(
            &a,
            "ns",
            "k4",
            json!({}),
            json!({"scope": {"task_id": "t", "note": SECRET}}),
        )
        .await;
    assert_eq!(
        noted.scope.as_ref().map(|s| s["note"].clone()),
        Some(json!("[REDACTED:stripe]"))
    );
    assert!(matches!(
        w.memory
            .archive_task(&a.tenant, &a.agent, &format!("t-{SECRET}"))
            .await,
        Err(IntentError::Invalid { .. })
    ));
    for event in w.all_events() {
        let text = event.detail_json().to_string();
        assert!(
            !text.contains(SECRET) && !text.contains("token") && !text.contains("\"ns\""),
            "{text}"
        );
    }
}

/// §3.2 under real concurrency: of two updates of one version, exactly one wins, 50 times.
pub async fn one_of_two_patches_of_a_version_wins(w: KeyedWorld) {
    let a = caller("keyed-race");
    for trial in 0..50 {
        let e = w
            .put(&a, "ns", &format!("k{trial}"), json!({}), json!({}))
            .await;
        let spawn = |by: &str| {
            let (memory, a, id) = (w.memory.clone(), a.clone(), e.id.clone());
            let p = patch(json!({"value": {"by": by}}));
            tokio::spawn(async move { memory.update(&a, &id, Some(1), p).await })
        };
        let (x, y) = (spawn("x"), spawn("y"));
        let (x, y) = (joined(x).await, joined(y).await);
        assert_eq!(
            usize::from(x.is_ok()) + usize::from(y.is_ok()),
            1,
            "trial {trial}: {x:?} {y:?}"
        );
        let loser = if x.is_ok() { y } else { x };
        assert!(
            matches!(
                loser,
                Err(IntentError::VersionMismatch {
                    current_version: 2,
                    ..
                })
            ),
            "{loser:?}"
        );
    }
}

async fn joined<T>(task: tokio::task::JoinHandle<T>) -> T {
    task.await.unwrap_or_else(|e| panic!("task: {e}"))
}

/// §2.2 / §9.4 under real concurrency: 50 inserts into an episodic memory of capacity 5 never
/// leave more than 5, and every eviction is announced exactly once. Needs capacity 5.
pub async fn inserts_at_capacity_evict_one_each(w: KeyedWorld) {
    assert_eq!(w.memory.limits().episodic_per_agent, 5);
    let a = caller("keyed-capacity");
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let (memory, a) = (w.memory.clone(), a.clone());
            let req = create(
                &a.agent,
                "ns",
                &format!("k{i}"),
                json!({}),
                json!({"memory_type": "episodic"}),
            );
            tokio::spawn(async move { memory.create(&a, req).await })
        })
        .collect();
    let mut inserted = 0;
    for t in tasks {
        // A create that kept losing races is told to retry later; nothing else may fail.
        match joined(t).await {
            Ok(_) => inserted += 1,
            Err(IntentError::Store(StoreError::Conflict { .. })) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(w.list_all(&a).await.len(), 5, "{inserted} inserted");
    let evicted = w.announced(EventType::MemoryEvicted);
    let mut unique = evicted.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(evicted.len(), unique.len(), "each eviction announced once");
    assert_eq!(
        evicted.len(),
        inserted - 5,
        "every insert past capacity evicted one entry"
    );
}

/// §2.1 and forget: a task's working memory is archived once, then the subject's entries,
/// versions and archived entries go, and nothing of theirs is left anywhere.
pub async fn archive_then_forget_leaves_no_trace(w: KeyedWorld, behind: &dyn Behind) {
    let a = caller("keyed-forget");
    let task = json!({"scope": {"task_id": "t-1"}, "subject": "customer-42"});
    w.put(&a, "ns", "moved", json!({"city": "Lisbon-7731"}), task)
        .await;
    w.put(
        &a,
        "ns",
        "kept",
        json!({"note": "unrelated-5512"}),
        json!({"scope": {"task_id": "t-1"}}),
    )
    .await;
    let other = w
        .put(
            &a,
            "ns",
            "c",
            json!({}),
            json!({"scope": {"task_id": "t-2"}}),
        )
        .await;
    let e = w
        .put(
            &a,
            "ns",
            "allergy",
            json!({"a": "peanuts-9921"}),
            json!({"memory_type": "episodic", "subject": "customer-42"}),
        )
        .await;
    w.memory
        .update(
            &a,
            &e.id,
            Some(1),
            patch(json!({"value": {"a": "peanuts-9921, shellfish"}})),
        )
        .await
        .unwrap_or_else(|err| panic!("{err:?}"));
    let out = w
        .memory
        .archive_task(&a.tenant, &a.agent, "t-1")
        .await
        .unwrap_or_else(|err| panic!("{err:?}"));
    assert_eq!(out.entries_archived, 2);
    assert!(out
        .archive
        .as_deref()
        .is_some_and(|n| n.contains("/agents/a1/keyed-archives/")));
    let left: Vec<String> = w.list_all(&a).await.into_iter().map(|e| e.id).collect();
    assert_eq!(left, [other.id, e.id.clone()]);
    let again = w
        .memory
        .archive_task(&a.tenant, &a.agent, "t-1")
        .await
        .unwrap_or_else(|err| panic!("{err:?}"));
    assert_eq!(again, out, "a rerun changes nothing");
    let counter = intent_memory::model::CounterAt {
        tenant: a.tenant.clone(),
        home: intent_memory::Home::Agent(a.agent.clone()),
        counter: intent_memory::model::CounterKey::working("t-1"),
    };
    let left_behind = w
        .store
        .count(&counter)
        .await
        .unwrap_or_else(|err| panic!("{err:?}"));
    assert_eq!(
        left_behind,
        Default::default(),
        "the finished task's counter is gone"
    );
    let archived: Vec<String> = w
        .all_events()
        .into_iter()
        .filter(|e| e.event_type == EventType::MemoryArchived)
        .map(|e| e.event_id)
        .collect();
    assert_eq!(archived.len(), 2);
    assert_eq!(archived[0], archived[1], "consumers dedupe the rerun");
    let before = behind.everything(&a.tenant).await;
    assert!(before.contains("Lisbon-7731") && before.contains("peanuts-9921"));
    let subject = SubjectKey::derive(&a.tenant, "customer-42");
    let scope = memory_core::forget::ForgetScope {
        subject: &subject,
        forgotten: &[],
    };
    let counts = w
        .forget_hook()
        .forget(scope)
        .await
        .unwrap_or_else(|err| panic!("{err:?}"));
    assert_eq!((counts.deleted_entries, counts.deleted_archives), (1, 1));
    let after = behind.everything(&a.tenant).await;
    assert!(
        !after.contains("Lisbon-7731") && !after.contains("peanuts-9921"),
        "{after}"
    );
    assert!(
        after.contains("unrelated-5512"),
        "the archive keeps what is not the subject's"
    );
    let twice = w
        .forget_hook()
        .forget(scope)
        .await
        .unwrap_or_else(|err| panic!("{err:?}"));
    assert_eq!((twice.deleted_entries, twice.deleted_archives), (0, 0));
}

/// Two archivers of one task at once (a duplicate delivery of the task's end): neither loses
/// an entry the other archived, and nothing stays in the table.
pub async fn concurrent_archivers_lose_nothing(w: KeyedWorld, behind: &dyn Behind) {
    let a = caller("keyed-archivers");
    for trial in 0..10 {
        let task = format!("t-{trial}");
        let mut texts = Vec::new();
        for i in 0..3 {
            let text = format!("kept-{trial}-{i}-7731");
            let extra = json!({"scope": {"task_id": task}, "subject": format!("s-{i}")});
            w.put(
                &a,
                "ns",
                &format!("k{trial}-{i}"),
                json!({"t": text}),
                extra,
            )
            .await;
            texts.push(text);
        }
        let spawn = || {
            let (memory, a, task) = (w.memory.clone(), a.clone(), task.clone());
            tokio::spawn(async move { memory.archive_task(&a.tenant, &a.agent, &task).await })
        };
        let (x, y) = (spawn(), spawn());
        let (x, y) = (joined(x).await, joined(y).await);
        for out in [&x, &y] {
            // A run that kept losing races is told to retry; the other one finished.
            assert!(
                matches!(
                    out,
                    Ok(_) | Err(IntentError::Store(StoreError::Conflict { .. }))
                ),
                "{out:?}"
            );
        }
        assert!(x.is_ok() || y.is_ok());
        let stored = behind.everything(&a.tenant).await;
        for text in &texts {
            assert_eq!(
                stored.matches(text.as_str()).count(),
                1,
                "trial {trial}: {text} in {stored}"
            );
        }
    }
    assert!(
        w.list_all(&a).await.is_empty(),
        "every archived entry left the table"
    );
}

/// The door's entries count against `MaxEntriesPerRef` in their own scope per agent (and one
/// for semantic memory) and their value bytes against `MaxBytesPerTenant`, in the write itself:
/// exactly the limit is allowed, the next create is refused whole (nothing of it stored), a
/// delete gives its entry and bytes back, and an update is charged its growth of bytes.
pub async fn quotas_count_entries_and_bytes(w: KeyedWorld) {
    let a = caller("quota");
    let refused = |r: Result<IntentEntry, IntentError>, quota: Quota| match r {
        Err(IntentError::Store(StoreError::QuotaExceeded(refusal))) => {
            assert_eq!(refusal.quota, quota, "{refusal}");
        }
        other => panic!("expected a {quota} refusal, got {other:?}"),
    };
    // Entries: three allowed, the fourth refused; semantic memory has a scope of its own.
    w.quotas
        .set_overrides(&a.tenant, &[(Quota::EntriesPerRef, 3)])
        .await
        .unwrap_or_else(|e| panic!("overrides: {e}"));
    let epi = json!({"memory_type": "episodic"});
    let mut made = Vec::new();
    for i in 0..3 {
        made.push(
            w.put(&a, "q", &format!("k{i}"), json!({"i": i}), epi.clone())
                .await,
        );
    }
    refused(
        w.memory
            .create(
                &a,
                create(&a.agent, "q", "k3", json!({"i": 3}), epi.clone()),
            )
            .await,
        Quota::EntriesPerRef,
    );
    assert_eq!(
        w.list_all(&a).await.len(),
        3,
        "the refused create stored nothing"
    );
    w.put(&a, "q", "s0", json!({}), json!({"memory_type": "semantic"}))
        .await;
    // A delete gives its entry back: the fourth fits now.
    w.memory
        .delete(&a, &made[0].id)
        .await
        .unwrap_or_else(|e| panic!("delete: {e:?}"));
    w.put(&a, "q", "k3", json!({"i": 3}), epi.clone()).await;

    // Bytes: the tenant's limit counts every value (serialised) it holds.
    let b = caller("quota-bytes");
    let value = json!({"v": "x".repeat(90)});
    let size = serde_json::to_vec(&value).map_or(0, |v| v.len()) as u64;
    w.quotas
        .set_overrides(&b.tenant, &[(Quota::BytesPerTenant, 2 * size)])
        .await
        .unwrap_or_else(|e| panic!("overrides: {e}"));
    let first = w.put(&b, "q", "b0", value.clone(), epi.clone()).await;
    w.put(
        &b,
        "q",
        "b1",
        value.clone(),
        json!({"memory_type": "semantic"}),
    )
    .await;
    refused(
        w.memory
            .create(&b, create(&b.agent, "q", "b2", value.clone(), epi.clone()))
            .await,
        Quota::BytesPerTenant,
    );
    // An update that grows the value is charged the growth, and refused past the limit.
    let grown = patch(json!({"value": {"v": "x".repeat(91)}}));
    refused(
        w.memory.update(&b, &first.id, Some(1), grown).await,
        Quota::BytesPerTenant,
    );
    // One that shrinks it is never refused, and frees what it shrank.
    let shrunk = patch(json!({"value": {"v": "x".repeat(40)}}));
    w.memory
        .update(&b, &first.id, Some(1), shrunk)
        .await
        .unwrap_or_else(|e| panic!("shrink: {e:?}"));
    refused(
        w.memory
            .create(&b, create(&b.agent, "q", "b2", value.clone(), epi.clone()))
            .await,
        Quota::BytesPerTenant,
    );
    w.put(&b, "q", "b2", json!({"v": "x".repeat(40)}), epi.clone())
        .await;
    // A delete gives its bytes back.
    w.memory
        .delete(&b, &first.id)
        .await
        .unwrap_or_else(|e| panic!("delete: {e:?}"));
    w.put(&b, "q", "b3", json!({"v": "x".repeat(40)}), epi)
        .await;
}

/// Eight creates racing for the last three places of `MaxEntriesPerRef`: exactly three win.
pub async fn racing_creates_take_exactly_the_entries_quota(w: KeyedWorld) {
    let a = caller("quota-race");
    w.quotas
        .set_overrides(&a.tenant, &[(Quota::EntriesPerRef, 3)])
        .await
        .unwrap_or_else(|e| panic!("overrides: {e}"));
    let w = Arc::new(w);
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (w, a) = (w.clone(), a.clone());
            tokio::spawn(async move {
                w.memory
                    .create(
                        &a,
                        create(&a.agent, "r", &format!("k{i}"), json!({}), json!({})),
                    )
                    .await
            })
        })
        .collect();
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap_or_else(|e| panic!("task: {e}")) {
            Ok(_) => won += 1,
            Err(IntentError::Store(StoreError::QuotaExceeded(r))) => {
                assert_eq!(r.quota, Quota::EntriesPerRef);
                assert_eq!((r.current, r.max), (3, 3), "{r}");
            }
            Err(e) => panic!("unexpected: {e:?}"),
        }
    }
    assert_eq!(won, 3);
    assert_eq!(w.list_all(&a).await.len(), 3);
}

/// Runs a check in a multi-threaded runtime, so spawned requests really race.
pub fn racing<F: Future<Output = ()>>(check: F) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
        .block_on(check);
}

/// The suite over one backend: `world` is `|limits| async { (KeyedWorld, impl Behind) }`.
///
/// One line per generated test: how it runs (`tokio`, or `racing` on a multi-threaded runtime
/// for checks whose spawned requests must really race), the check, `(behind)` when it looks
/// behind the service, and `limits:` when it needs other limits than the suite's.
#[macro_export]
macro_rules! keyed_suite {
    (world: $world:expr) => {
        $crate::keyed_suite!(@suite $world;
            tokio entries_live_and_die_whole(behind);
            tokio keys_are_unique_where_the_rfc_says();
            tokio only_owners_see_private_memory();
            tokio secrets_never_reach_the_store(behind);
            racing one_of_two_patches_of_a_version_wins();
            racing inserts_at_capacity_evict_one_each()
                limits: intent_memory::Limits { episodic_per_agent: 5, ..limits() };
            racing concurrent_archivers_lose_nothing(behind);
            tokio quotas_count_entries_and_bytes();
            racing racing_creates_take_exactly_the_entries_quota();
            tokio archive_then_forget_leaves_no_trace(behind);
        );
    };
    (@suite $world:expr;
        $($run:ident $check:ident ($($behind:ident)?) $(limits: $limits:expr)?;)*) => {
        mod keyed_contract_suite {
            use super::*;

            fn limits() -> intent_memory::Limits {
                intent_memory::Limits {
                    versions_kept: 3,
                    ..intent_memory::Limits::default()
                }
            }

            $($crate::keyed_suite!(@test $run $check ($($behind)?) $world,
                $crate::keyed_suite!(@limits $($limits)?));)*
        }
    };
    (@limits) => {
        limits()
    };
    (@limits $limits:expr) => {
        $limits
    };
    (@test tokio $check:ident ($($behind:ident)?) $world:expr, $limits:expr) => {
        #[tokio::test]
        async fn $check() {
            $crate::keyed_suite!(@check $check ($($behind)?) $world, $limits);
        }
    };
    (@test racing $check:ident ($($behind:ident)?) $world:expr, $limits:expr) => {
        #[test]
        fn $check() {
            $crate::keyed_contract::racing(async {
                $crate::keyed_suite!(@check $check ($($behind)?) $world, $limits);
            });
        }
    };
    (@check $check:ident () $world:expr, $limits:expr) => {
        let (w, _) = ($world)($limits).await;
        $crate::keyed_contract::$check(w).await;
    };
    (@check $check:ident (behind) $world:expr, $limits:expr) => {
        let (w, behind) = ($world)($limits).await;
        $crate::keyed_contract::$check(w, &behind).await;
    };
}
