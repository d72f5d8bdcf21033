//! The adapters against the emulator over the real AWS wire protocol: the shared port contract
//! (the same checks the in-memory adapters pass), request counts at the floor, and EventBridge
//! delivery read back through SQS.

use std::sync::Arc;
use std::time::Duration;

use aws_test_support::{emulator_config, required_env, EventTap, RequestCounter};
use memory_aws::{DynamoEntryStore, EventBridgePublisher, S3ArchiveStore};
use memory_core::events::DomainEvent;
use memory_core::model::{Attribution, Tier};
use memory_core::ports::{ArchiveStore, EntryStore, EventPublisher};
use memory_core::Timestamp;
use memory_testkit::contract::{entry, first_page, fresh_tenant, memory_ref, T0};

async fn dynamo(counter: Option<RequestCounter>) -> DynamoEntryStore {
    let sdk = emulator_config().await;
    let mut config = aws_sdk_dynamodb::config::Builder::from(&sdk);
    if let Some(counter) = counter {
        config = config.interceptor(counter);
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

#[tokio::test]
async fn round_trips_are_at_the_floor() {
    let counter = RequestCounter::default();
    let store = dynamo(Some(counter.clone())).await;
    let t = fresh_tenant("floor");
    let r = memory_ref(&t, "agent-1");
    let entries: Vec<_> = (0..25).map(|n| entry(&r, n, "x", &[])).collect();

    store.put_entries(&entries).await.expect("put");
    assert_eq!(
        (counter.get("TransactWriteItems"), counter.get("UpdateItem")),
        (1, 1),
        "a put of 25 entries is one transaction, then one conditional marker update outside it: {counter:?}"
    );
    assert_eq!(counter.total(), 2, "{counter:?}");

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
            .interceptor(counter.clone())
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
