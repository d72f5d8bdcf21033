//! The OpenIntent door's DynamoDB adapter on the emulator, over the real wire: the shared keyed
//! contract (the checks the in-memory store passes) with DynamoDB transactions enforcing the
//! rules, including under real races, and "no trace" read back from every item and every S3
//! object version of the tenant; plus what only a real table shows (items deleted by its TTL).

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_test_support::{emulator_config, required_env};
use intent_memory::{Caller, Limits};
use memory_aws::keyed::DynamoKeyedStore;
use memory_aws::S3ArchiveStore;
use memory_core::ports::{SystemClock, UlidIds};
use memory_guard::TenantId;
use memory_testkit::keyed_contract::{caller, episodic_cap, working_cap, Behind, KeyedWorld};
use serde_json::json;

/// Everything of a tenant in the table and the bucket, read with the SDK directly.
struct Emulator {
    dynamo: aws_sdk_dynamodb::Client,
    s3: aws_sdk_s3::Client,
}

#[async_trait]
impl Behind for Emulator {
    async fn everything(&self, tenant: &TenantId) -> String {
        let mut out = String::new();
        let partition = format!("{tenant}#");
        // Every page: a long-lived emulator's table is larger than one Scan page (1 MB).
        let mut start = None;
        loop {
            let scan = self
                .dynamo
                .scan()
                .table_name(required_env("MEMORY_TABLE"))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .expect("scan");
            for item in scan.items() {
                if item
                    .get("pk")
                    .and_then(|v| v.as_s().ok())
                    .is_some_and(|pk| pk.starts_with(&partition))
                {
                    out.push_str(&format!("{item:?}"));
                }
            }
            match scan.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => break,
            }
        }
        let bucket = required_env("ARCHIVE_BUCKET");
        let versions = self
            .s3
            .list_object_versions()
            .bucket(&bucket)
            .prefix(format!("{tenant}/"))
            .send()
            .await
            .expect("list versions");
        for v in versions.versions() {
            let object = self
                .s3
                .get_object()
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
}

async fn world(limits: Limits) -> (KeyedWorld, Emulator) {
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
    let keyed = KeyedWorld::new(
        store,
        archives,
        Arc::new(SystemClock),
        Arc::new(UlidIds::default()),
        limits,
        Arc::new(memory_aws::DynamoEntryStore::new(
            dynamo.clone(),
            required_env("MEMORY_TABLE"),
        )),
    );
    (keyed, Emulator { dynamo, s3 })
}

memory_testkit::keyed_suite!(world: world);

impl Emulator {
    /// What DynamoDB's TTL does to an expired entry: deletes its item, and nothing else (the
    /// claim, counter, place in the eviction order and version records stay).
    async fn expire_entry(&self, owner: &Caller, id: &str) {
        self.dynamo
            .delete_item()
            .table_name(required_env("MEMORY_TABLE"))
            .key("pk", AttributeValue::S(format!("{}#a1", owner.tenant)))
            .key("sk", AttributeValue::S(format!("I#E#{id}")))
            .send()
            .await
            .expect("delete item");
    }
}

#[tokio::test]
async fn items_the_ttl_deleted_free_their_key_and_their_place() {
    let (k, emulator) = world(working_cap(1)).await;
    let a = caller("keyed-ttl");
    let e = k.put(&a, "ns", "k", json!({}), json!({})).await;
    // What DynamoDB's TTL does: the entry item goes, its claim and counter stay.
    emulator.expire_entry(&a, &e.id).await;
    // The key is free again and the counter is repaired.
    k.put(&a, "ns", "k", json!({}), json!({})).await;
}

#[tokio::test]
async fn entries_the_ttl_deleted_are_given_back_before_a_quota_refuses() {
    use memory_core::quota::Quota;
    let (k, emulator) = world(Limits::default()).await;
    let a = caller("keyed-quota-ttl");
    k.quotas
        .set_overrides(&a.tenant, &[(Quota::EntriesPerRef, 2)])
        .await
        .expect("overrides");
    let ep = json!({"memory_type": "episodic"});
    let gone = k.put(&a, "ns", "a", json!({}), ep.clone()).await;
    k.put(&a, "ns", "b", json!({}), ep.clone()).await;
    // What DynamoDB's TTL does: the entry item goes, its charges stay.
    emulator.expire_entry(&a, &gone.id).await;
    // The create recounts the partition before it is refused, and fits.
    k.put(&a, "ns", "c", json!({}), ep.clone()).await;
    let over = k
        .memory
        .create(
            &a,
            memory_testkit::keyed_contract::create(&a.agent, "ns", "d", json!({}), ep),
        )
        .await;
    assert!(
        matches!(
            over,
            Err(intent_memory::IntentError::Store(memory_core::StoreError::QuotaExceeded(ref r)))
                if (r.current, r.max) == (2, 2)
        ),
        "{over:?}"
    );
}

#[tokio::test]
async fn a_place_whose_entry_the_ttl_deleted_never_blocks_eviction() {
    let (k, emulator) = world(episodic_cap(2)).await;
    let a = caller("keyed-stale-place");
    let ep = json!({"memory_type": "episodic"});
    let old = k.put(&a, "ns", "old", json!({}), ep.clone()).await;
    k.put(&a, "ns", "mid", json!({}), ep.clone()).await;
    // The table's TTL took the oldest entry's item and left its place in the eviction order.
    emulator.expire_entry(&a, &old.id).await;
    for i in 0..4 {
        k.put(&a, "ns", &format!("new{i}"), json!({}), ep.clone())
            .await;
    }
    assert_eq!(k.list_all(&a).await.len(), 2);
}

#[tokio::test]
async fn version_records_expire_with_their_entry() {
    let (k, emulator) = world(Limits::default()).await;
    let a = caller("keyed-version-ttl");
    let e = k.put(&a, "ns", "k", json!({"v": 1}), json!({})).await;
    k.memory
        .update(
            &a,
            &e.id,
            Some(1),
            memory_testkit::keyed_contract::patch(json!({"ttl": "duration:PT1H"})),
        )
        .await
        .expect("update");
    let versions = emulator
        .dynamo
        .query()
        .table_name(required_env("MEMORY_TABLE"))
        .key_condition_expression("pk = :p AND begins_with(sk, :s)")
        .expression_attribute_values(":p", AttributeValue::S(format!("{}#a1", a.tenant)))
        .expression_attribute_values(":s", AttributeValue::S(format!("I#V#{}#", e.id)))
        .send()
        .await
        .expect("query");
    let ttls: Vec<Option<&AttributeValue>> =
        versions.items().iter().map(|i| i.get("ttl")).collect();
    assert_eq!(ttls.len(), 2);
    assert!(
        ttls.iter().all(|t| t.is_some()),
        "version 1 was written without an expiry: {ttls:?}"
    );
}
