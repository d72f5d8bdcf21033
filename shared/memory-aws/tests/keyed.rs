//! The OpenIntent door's DynamoDB adapter on the emulator, through the service, over the real
//! wire: the rules the in-memory store is tested with (shared/intent-memory/tests/keyed.rs) hold
//! when DynamoDB transactions enforce them, including under real races, and forget leaves no
//! byte of the subject in the table or the bucket.

use std::sync::Arc;

use aws_test_support::{emulator_config, required_env};
use intent_memory::forget::KeyedForgetHook;
use intent_memory::request::{CreateRequest, ListQuery, PatchRequest};
use intent_memory::{Caller, IntentError, IntentMemory, IntentPorts, Limits};
use memory_aws::keyed::DynamoKeyedStore;
use memory_aws::S3ArchiveStore;
use memory_core::events::EventType;
use memory_core::forget::ForgetHook;
use memory_core::model::SubjectKey;
use memory_core::ports::{SystemClock, UlidIds};
use memory_guard::{AgentId, SecretRegistry};
use memory_testkit::contract::fresh_tenant;
use memory_testkit::in_memory::RecordingPublisher;
use serde_json::{json, Value};

struct World {
    memory: IntentMemory,
    store: Arc<DynamoKeyedStore>,
    archives: Arc<S3ArchiveStore>,
    events: Arc<RecordingPublisher>,
    dynamo: aws_sdk_dynamodb::Client,
    s3: aws_sdk_s3::Client,
}

async fn world(limits: Limits) -> World {
    let sdk = emulator_config().await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    );
    let store = Arc::new(DynamoKeyedStore::new(
        dynamo.clone(),
        required_env("MEMORY_TABLE"),
    ));
    let archives = Arc::new(S3ArchiveStore::new(
        s3.clone(),
        required_env("ARCHIVE_BUCKET"),
    ));
    let events = Arc::new(RecordingPublisher::new());
    let memory = IntentMemory::new(
        IntentPorts {
            store: store.clone(),
            archives: archives.clone(),
            publisher: events.clone(),
            clock: Arc::new(SystemClock),
            ids: Arc::new(UlidIds::default()),
        },
        limits,
        Arc::new(SecretRegistry::new().redactor()),
    );
    World {
        memory,
        store,
        archives,
        events,
        dynamo,
        s3,
    }
}

fn caller(label: &str) -> Caller {
    Caller {
        tenant: fresh_tenant(label),
        agent: AgentId::parse("a1").expect("agent"),
    }
}

fn create(namespace: &str, key: &str, value: Value, extra: Value) -> CreateRequest {
    let mut body = json!({"agent_id": "a1", "namespace": namespace, "key": key, "value": value});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    CreateRequest::decode(&body.to_string()).expect("valid create")
}

fn patch(body: Value) -> PatchRequest {
    PatchRequest::decode(&body.to_string()).expect("valid patch")
}

/// Every item of the tenant in the table and every object (every version) under its prefix.
async fn everything(w: &World, tenant: &str) -> String {
    let mut out = String::new();
    let scan = w
        .dynamo
        .scan()
        .table_name(required_env("MEMORY_TABLE"))
        .send()
        .await
        .expect("scan");
    for item in scan.items() {
        let pk = item
            .get("pk")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        if pk.starts_with(&format!("{tenant}#")) {
            out.push_str(&format!("{item:?}"));
        }
    }
    let bucket = required_env("ARCHIVE_BUCKET");
    let versions =
        w.s3.list_object_versions()
            .bucket(&bucket)
            .prefix(format!("{tenant}/"))
            .send()
            .await
            .expect("list versions");
    for v in versions.versions() {
        let object =
            w.s3.get_object()
                .bucket(&bucket)
                .key(v.key().unwrap_or_default())
                .set_version_id(v.version_id().map(str::to_owned))
                .send()
                .await
                .expect("get version");
        let body = object.body.collect().await.expect("body").into_bytes();
        out.push_str(&String::from_utf8_lossy(&body));
    }
    out
}

#[tokio::test]
async fn the_rules_hold_on_dynamodb() {
    let w = world(Limits {
        versions_kept: 3,
        ..Limits::default()
    })
    .await;
    let a = caller("keyed-rules");
    let e = w
        .memory
        .create(
            &a,
            create(
                "ns",
                "k",
                json!({"n": 0}),
                json!({"memory_type": "episodic", "tags": ["x"]}),
            ),
        )
        .await
        .expect("create");
    assert_eq!(w.memory.get(&a, &e.id).await.expect("get"), e);
    assert!(matches!(
        w.memory
            .create(&a, create("ns", "k", json!({}), json!({})))
            .await,
        Err(IntentError::KeyTaken { .. })
    ));
    for v in 1..=5u64 {
        w.memory
            .update(&a, &e.id, Some(v), patch(json!({"value": {"n": v}})))
            .await
            .expect("update");
    }
    match w.memory.update(&a, &e.id, Some(2), patch(json!({}))).await {
        Err(IntentError::VersionMismatch {
            current_version,
            current,
        }) => {
            assert_eq!(
                (current_version, current["value"]["n"].clone()),
                (6, json!(5))
            );
        }
        other => panic!("{other:?}"),
    }
    let kept: Vec<u64> = w
        .memory
        .versions(&a, &e.id)
        .await
        .expect("versions")
        .iter()
        .map(|r| r.entry.version)
        .collect();
    assert_eq!(kept, [4, 5, 6]);
    let listed = w
        .memory
        .list(&a, "a1", &ListQuery::decode(&[]).expect("q"))
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    w.memory.delete(&a, &e.id).await.expect("delete");
    assert_eq!(w.memory.get(&a, &e.id).await, Err(IntentError::NotFound));
    // Versions, claim and eviction place go with the entry; the counter stays, at zero.
    let left = everything(&w, a.tenant.as_str()).await;
    assert_eq!(
        left,
        format!(
            "{{\"pk\": S(\"{}#a1\"), \"sk\": S(\"I#C#episodic\"), \"n\": N(\"0\")}}",
            a.tenant
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_patches_of_one_version_one_wins_on_dynamodb() {
    let w = world(Limits::default()).await;
    let a = caller("keyed-race");
    for trial in 0..50 {
        let e = w
            .memory
            .create(&a, create("ns", &format!("k{trial}"), json!({}), json!({})))
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
            "trial {trial}: {x:?} {y:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_inserts_at_capacity_never_exceed_it_on_dynamodb() {
    let w = world(Limits {
        episodic_per_agent: 5,
        ..Limits::default()
    })
    .await;
    let a = caller("keyed-capacity");
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let (memory, a) = (w.memory.clone(), a.clone());
            let req = create(
                "ns",
                &format!("k{i}"),
                json!({}),
                json!({"memory_type": "episodic"}),
            );
            tokio::spawn(async move { memory.create(&a, req).await })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        // A create that kept losing races answers "retry later"; nothing else may fail.
        match t.await.expect("task") {
            Ok(_) => ok += 1,
            Err(IntentError::Store(memory_core::StoreError::Conflict { .. })) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    let listed = w
        .memory
        .list(&a, "a1", &ListQuery::decode(&[]).expect("q"))
        .await
        .expect("list");
    assert_eq!(listed.len(), 5, "{ok} inserted");
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
    assert_eq!(evicted.len(), unique.len(), "each eviction announced once");
    assert_eq!(
        evicted.len(),
        ok - 5,
        "every insert past capacity evicted exactly one entry"
    );
}

#[tokio::test]
async fn archive_then_forget_leaves_no_trace_on_dynamodb_and_s3() {
    let w = world(Limits::default()).await;
    let a = caller("keyed-forget");
    let task = json!({"scope": {"task_id": "t-1"}, "subject": "customer-42"});
    w.memory
        .create(
            &a,
            create("ns", "moved", json!({"city": "Lisbon-7731"}), task),
        )
        .await
        .expect("create");
    w.memory
        .create(
            &a,
            create(
                "ns",
                "kept",
                json!({"note": "unrelated-5512"}),
                json!({"scope": {"task_id": "t-1"}}),
            ),
        )
        .await
        .expect("create");
    let e = w
        .memory
        .create(
            &a,
            create(
                "ns",
                "allergy",
                json!({"a": "peanuts-9921"}),
                json!({"memory_type": "episodic", "subject": "customer-42"}),
            ),
        )
        .await
        .expect("create");
    w.memory
        .update(
            &a,
            &e.id,
            Some(1),
            patch(json!({"value": {"a": "peanuts-9921, shellfish"}})),
        )
        .await
        .expect("update");
    let out = w
        .memory
        .archive_task(&a.tenant, &a.agent, "t-1")
        .await
        .expect("archive");
    assert_eq!(out.entries_archived, 2);
    let before = everything(&w, a.tenant.as_str()).await;
    assert!(before.contains("Lisbon-7731") && before.contains("peanuts-9921"));
    let hook = KeyedForgetHook {
        store: w.store.clone(),
        archives: w.archives.clone(),
        clock: Arc::new(SystemClock),
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
    let after = everything(&w, a.tenant.as_str()).await;
    assert!(
        !after.contains("Lisbon-7731") && !after.contains("peanuts-9921"),
        "{after}"
    );
    assert!(
        after.contains("unrelated-5512"),
        "the archive keeps what is not the subject's"
    );
}

#[tokio::test]
async fn items_the_ttl_deleted_free_their_key_and_their_place_on_dynamodb() {
    let w = world(Limits {
        working_per_task: 1,
        ..Limits::default()
    })
    .await;
    let a = caller("keyed-ttl");
    let e = w
        .memory
        .create(&a, create("ns", "k", json!({}), json!({})))
        .await
        .expect("create");
    // What DynamoDB's TTL does: the entry item goes, its claim and counter stay.
    w.dynamo
        .delete_item()
        .table_name(required_env("MEMORY_TABLE"))
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("{}#a1", a.tenant)),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("I#E#{}", e.id)),
        )
        .send()
        .await
        .expect("delete item");
    w.memory
        .create(&a, create("ns", "k", json!({}), json!({})))
        .await
        .expect("the key is free and the counter repaired");
}
