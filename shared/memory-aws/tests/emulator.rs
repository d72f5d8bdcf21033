//! The adapters against the emulator over the real AWS wire protocol: the shared port contract
//! (the same checks the in-memory adapters pass), request counts at the floor, and EventBridge
//! delivery read back through SQS.

use std::sync::Arc;
use std::time::Duration;

use aws_test_support::{emulator_config, required_env, EventTap, Observed, RequestCounter};
use memory_aws::{DynamoEntryStore, EventBridgePublisher, S3ArchiveStore};
use memory_core::events::DomainEvent;
use memory_core::model::{Attribution, Tier};
use memory_core::ports::{ArchiveStore, EntryStore, EventPublisher};
use memory_core::Timestamp;
use memory_testkit::contract::{entry, first_page, fresh_ref, fresh_tenant, memory_ref, T0};

async fn dynamo(counter: Option<RequestCounter>) -> DynamoEntryStore {
    let sdk = emulator_config().await;
    let mut config = aws_sdk_dynamodb::config::Builder::from(&sdk);
    if let Some(counter) = counter {
        config = config.interceptor(Observed(counter));
    }
    DynamoEntryStore::new(
        aws_sdk_dynamodb::Client::from_conf(config.build()),
        required_env("MEMORY_TABLE"),
    )
}

async fn store() -> Arc<dyn EntryStore> {
    Arc::new(dynamo(None).await)
}

async fn archive() -> Arc<dyn ArchiveStore> {
    let sdk = emulator_config().await;
    let config = aws_sdk_s3::config::Builder::from(&sdk)
        .force_path_style(true)
        .build();
    Arc::new(S3ArchiveStore::new(
        aws_sdk_s3::Client::from_conf(config),
        required_env("ARCHIVE_BUCKET"),
    ))
}

memory_testkit::port_suite!(store: store(), archive: archive());

async fn path_stores() -> (Arc<dyn EntryStore>, Arc<dyn memory_core::paths::PathStore>) {
    let store = Arc::new(dynamo(None).await);
    (store.clone(), store)
}

memory_testkit::paths_suite!(path_stores());

async fn quota_store() -> Arc<DynamoEntryStore> {
    Arc::new(dynamo(None).await)
}

memory_testkit::quota_suite!(quota_store());

#[tokio::test]
async fn round_trips_are_at_the_floor() {
    let counter = RequestCounter::default();
    let store = dynamo(Some(counter.clone())).await;
    let (_, r) = fresh_ref("floor");
    let entries: Vec<_> = (0..25).map(|n| entry(&r, n, "x", &[])).collect();

    store.put_entries(&entries).await.expect("put");
    assert_eq!(
        (counter.get("TransactWriteItems"), counter.get("UpdateItem")),
        (1, 2),
        "a put of 25 entries is one transaction (its change record inside), then the conditional \
         updates of two markers outside it, the tier's pass and the index pass: {counter:?}"
    );
    assert_eq!(counter.total(), 3, "{counter:?}");

    counter.reset();
    let page = first_page(&store, &r, 10).await;
    assert_eq!(page.entries.len(), 10, "positive control: the page is full");
    assert_eq!(
        (counter.total(), counter.get("Query")),
        (1, 1),
        "one list page is one Query"
    );

    counter.reset();
    let got = store.get(&entries[3].key()).await.expect("get");
    assert_eq!(got.as_ref(), Some(&entries[3]));
    assert_eq!(
        (counter.total(), counter.get("GetItem")),
        (1, 1),
        "get is one GetItem"
    );
}

#[tokio::test]
async fn events_are_published_in_batches_of_ten_and_arrive() {
    let sdk = emulator_config().await;
    let counter = RequestCounter::default();
    let client = aws_sdk_eventbridge::Client::from_conf(
        aws_sdk_eventbridge::config::Builder::from(&sdk)
            .interceptor(Observed(counter.clone()))
            .build(),
    );
    let publisher = EventBridgePublisher::new(client, required_env("EVENT_BUS_NAME"));
    let t = fresh_tenant("events");
    let tap = EventTap::for_tenant(&sdk, t.as_str()).await;
    let r = memory_ref(&t, "agent-1");
    let events: Vec<DomainEvent> = (0..23)
        .map(|n| {
            DomainEvent::memory_written(
                &r,
                &format!("entry-{n}"),
                Timestamp::from_millis(T0),
                Tier::Transactional,
                &[],
                &Attribution::default(),
            )
        })
        .collect();
    publisher.publish(&events).await.expect("publish");
    assert_eq!(
        counter.get("PutEvents"),
        3,
        "23 events = 3 calls of at most 10"
    );

    let arrived = tap.collect_settled(23, Duration::from_secs(20)).await;
    tap.remove().await;
    assert_eq!(arrived.len(), 23, "every event arrives exactly once");
    let mut ids: Vec<String> = arrived
        .iter()
        .map(|e| {
            e["detail"]["memoryId"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 23);
    for e in &arrived {
        assert_eq!(e["source"], "wop-memory");
        assert_eq!(e["detail-type"], "memory.written");
        assert_eq!(e["detail"]["tenantId"], t.as_str());
        assert!(e["detail"]["eventId"].is_string());
    }
}

/// Lists `r` with a tag filter through the core's reader, as memory-read does.
async fn tag_page(
    store: Arc<dyn EntryStore>,
    r: &memory_guard::MemoryRef,
    filter: &[&str],
    limit: u32,
) -> memory_core::listing::ListPage {
    let clock = Arc::new(memory_testkit::in_memory::ManualClock::at(
        Timestamp::from_millis(T0 + 3_600_000),
    ));
    let reader = memory_core::reader::MemoryReader::new(store, clock);
    reader
        .list(
            &memory_guard::TenantScope::new(r.tenant().clone()),
            &r.to_string(),
            &memory_core::listing::ListOptions {
                limit: Some(limit),
                tags: memory_testkit::contract::tags(filter, &[]),
                cursor: None,
            },
        )
        .await
        .expect("list")
}

/// docs/api.md "Tag lists": a rare tag in a large ref is one page in one call, and the page reads
/// one Query of at most `limit` postings and one BatchGetItem of the entries they name, whatever
/// the size of the ref. (The filter-after-Limit list it replaces needed 400 calls of 50 items
/// each to find 5 entries in 20,000.) The ref lives in a table of its own, deleted afterwards:
/// the emulator copies a whole table for every item of a transaction, so 20,000 items in the
/// shared table would slow every other test's writes.
#[tokio::test]
async fn a_rare_tag_in_a_large_ref_is_one_page_that_costs_what_it_returns() {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, PutRequest,
        ScalarAttributeType, WriteRequest,
    };
    let sdk = emulator_config().await;
    let raw = aws_sdk_dynamodb::Client::new(&sdk);
    let table = format!(
        "{}-scale-{}",
        required_env("MEMORY_TABLE"),
        ulid::Ulid::new().to_string().to_lowercase()
    );
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .expect("key schema")
    };
    let attr = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("attribute")
    };
    raw.create_table()
        .table_name(&table)
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .attribute_definitions(attr("pk"))
        .attribute_definitions(attr("sk"))
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .expect("create the scale table");
    let counter = RequestCounter::default();
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk)
        .interceptor(Observed(counter.clone()))
        .build();
    let store = Arc::new(DynamoEntryStore::new(
        aws_sdk_dynamodb::Client::from_conf(config),
        table.clone(),
    ));

    let (_, r) = fresh_ref("raretag");
    let rare: Vec<u64> = (0..5).map(|k| 17 + k * 4_001).collect();
    let common: Vec<u64> = (0..120).map(|k| 3 + k * 163).collect();
    let entries: Vec<_> = (0..20_000u64)
        .map(|n| {
            let tags: &[&str] = if rare.contains(&n) {
                &["rare-tag", "common"]
            } else if common.contains(&n) {
                &["common"]
            } else {
                &[]
            };
            entry(&r, n, "x", tags)
        })
        .collect();
    // The tagged entries through the adapter, the untagged rest as the same items in bulk.
    let (tagged, untagged): (Vec<_>, Vec<_>) = entries
        .iter()
        .cloned()
        .partition(|e| !e.entry.tags.is_empty());
    assert_eq!(tagged.len(), 125);
    for chunk in tagged.chunks(memory_core::ports::MAX_ENTRIES_PER_PUT) {
        store.put_entries(chunk).await.expect("put");
    }
    for chunk in untagged.chunks(25) {
        let writes: Vec<WriteRequest> = chunk
            .iter()
            .map(|e| {
                let put = PutRequest::builder()
                    .set_item(Some(memory_aws::dynamo::entry_item(e).expect("item")))
                    .build()
                    .expect("put request");
                WriteRequest::builder().put_request(put).build()
            })
            .collect();
        let out = raw
            .batch_write_item()
            .request_items(&table, writes)
            .send()
            .await
            .expect("bulk load");
        assert!(out.unprocessed_items().is_none_or(|u| u.is_empty()));
    }

    counter.reset();
    let page = tag_page(store.clone(), &r, &["rare-tag"], 50).await;
    let mut want: Vec<String> = rare
        .iter()
        .map(|&n| entries[n as usize].entry.id.clone())
        .collect();
    want.reverse();
    let got: Vec<String> = page.entries.iter().map(|e| e.id.clone()).collect();
    assert_eq!(
        got, want,
        "the five rare entries, newest first, in the first page"
    );
    assert_eq!(page.next_cursor, None, "and nothing more to read");
    assert_eq!(
        (
            counter.get("Query"),
            counter.get("BatchGetItem"),
            counter.total()
        ),
        (1, 1, 2),
        "one Query of postings, one BatchGetItem of entries: {counter:?}"
    );

    // A common tag: exactly `limit` entries, still one Query of `limit` postings and one batch.
    counter.reset();
    let page = tag_page(store.clone(), &r, &["common"], 50).await;
    assert_eq!(page.entries.len(), 50, "a full page");
    assert!(page.next_cursor.is_some());
    assert!(page
        .entries
        .iter()
        .all(|e| e.tags.iter().any(|t| t == "common")));
    assert_eq!(
        (
            counter.get("Query"),
            counter.get("BatchGetItem"),
            counter.total()
        ),
        (1, 1, 2),
        "{counter:?}"
    );
    // Both tags: the leapfrog walks one list and seeks in the other.
    let both = tag_page(store.clone(), &r, &["rare-tag", "common"], 50).await;
    assert_eq!(both.entries.len(), 5);
    // The positive control of the cost claim: an unfiltered page of the same size is one Query.
    counter.reset();
    let plain = first_page(store.as_ref(), &r, 50).await;
    assert_eq!((plain.entries.len(), counter.total()), (50, 1));

    raw.delete_table()
        .table_name(&table)
        .send()
        .await
        .expect("drop the scale table");
}

/// A posting whose entry is gone (a crash between the entry's delete and its postings') only
/// proposes an id: the page skips it and is still full.
#[tokio::test]
async fn a_posting_left_behind_is_skipped_and_the_page_stays_full() {
    let dynamo_store = dynamo(None).await;
    let sdk = emulator_config().await;
    let raw = aws_sdk_dynamodb::Client::new(&sdk);
    let store: Arc<dyn EntryStore> = Arc::new(dynamo_store);
    let (_, r) = fresh_ref("orphan");
    let entries: Vec<_> = (0..4u64).map(|n| entry(&r, n, "x", &["t"])).collect();
    store.put_entries(&entries).await.expect("put");
    // Remove the newest entry's item behind the adapter's back, leaving its posting.
    raw.delete_item()
        .table_name(required_env("MEMORY_TABLE"))
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(memory_aws::dynamo::partition_key(&r)),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("E#{}", entries[3].entry.id)),
        )
        .send()
        .await
        .expect("raw delete");
    let page = tag_page(store.clone(), &r, &["t"], 2).await;
    let got: Vec<&str> = page.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        got,
        [entries[2].entry.id.as_str(), entries[1].entry.id.as_str()]
    );
    // Deleting through the adapter removes the postings too: nothing is proposed any more.
    for e in &entries[..3] {
        assert!(store.delete(&e.key()).await.expect("delete"));
    }
    let left = store
        .tag_postings(&r, "t", None, 10)
        .await
        .expect("postings");
    assert_eq!(
        left,
        [entries[3].entry.id.clone()],
        "only the one left behind by the raw delete"
    );
}

#[tokio::test]
async fn the_usage_store_keeps_the_usage_contract() {
    let sdk = emulator_config().await;
    let store = memory_aws::usage::DynamoUsageStore::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        required_env("MEMORY_TABLE"),
    );
    let unique = ulid::Ulid::new().to_string().to_lowercase();
    memory_testkit::usage::usage_contract(&store, &unique).await;
}

#[tokio::test]
async fn the_store_reports_what_dynamodb_answered_to_the_acting_tenants_meter() {
    use memory_core::acting_tenant::acting_for;
    use memory_core::metering::{metered, Meter};
    let store = dynamo(None).await;
    let (tenant, r) = fresh_ref("meter");
    let e = entry(&r, 1, "metered", &[]);
    let meter = Meter::new();
    metered(
        &meter,
        acting_for(Some(tenant.as_str()), async {
            store
                .put_entries(std::slice::from_ref(&e))
                .await
                .expect("put");
            store.get(&e.key()).await.expect("get");
        }),
    )
    .await;
    // Outside a metered scope nothing is recorded.
    store.get(&e.key()).await.expect("get");
    let taken = meter.take();
    assert_eq!(taken.len(), 1, "{taken:?}");
    let (who, usage) = &taken[0];
    assert_eq!(who.as_ref().map(|t| t.as_str()), Some(tenant.as_str()));
    // The emulator answers half a unit for a GetItem.
    assert!(usage.read_units >= 0.5, "{usage:?}");
    assert_eq!(usage.requests, 1);
}
