//! Scheduled passes end to end: the real `memory-consolidate` binary fans out through SQS,
//! processes the queued passes as an SQS event, and a direct invoke runs one ref.

use aws_test_support::{emulator_config, of_type, required_env, EventTap};
use e2e::apigw::{http_call, list_event};
use e2e::queue::drain_as_records;
use e2e::{memory_ref, tenant, LambdaProcess};
use serde_json::{json, Value};

async fn list(read: &LambdaProcess, tenant: &str, r: &str) -> Vec<Value> {
    let (_, body) = http_call(read, &list_event(tenant, r, &[])).await;
    body["entries"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn consolidation_fans_out_through_the_queue_and_is_idempotent() {
    let sdk = emulator_config().await;
    let queue_url = required_env("CONSOLIDATE_QUEUE_URL");
    let t = tenant("e2e-cons");
    let r = memory_ref(&t, "agent-1");
    let other = tenant("e2e-cons-b");
    let r_other = memory_ref(&other, "agent-1");
    let tap = EventTap::for_tenant(&sdk, &t).await;
    let write = LambdaProcess::start("memory-write", &[]).await;
    let read = LambdaProcess::start("memory-read", &[]).await;
    let consolidate =
        LambdaProcess::start("memory-consolidate", &[("PASS_QUEUE_URL", &queue_url)]).await;

    let entries = json!([
        {"content": "Prefers email follow-up", "tier": "long-term", "tags": ["preference"]},
        {"content": "prefers email follow-up.", "tier": "long-term"},
        {"content": "Lives in Oslo", "tier": "long-term", "tags": ["fact:city"]},
        {"content": "Prefers phone for urgent issues", "tier": "long-term"},
        {"content": "transactional chatter", "tags": []}
    ]);
    for (tenant, memory_ref) in [(&t, &r), (&other, &r_other)] {
        write
            .respond(&json!({"op": "put", "tenantId": tenant, "memoryRef": memory_ref, "entries": entries})).await;
    }
    write
        .respond(&json!({"op": "put", "tenantId": t, "memoryRef": r,
            "entries": [{"content": "Lives in Bergen", "tier": "long-term", "tags": ["fact:city"]}]})).await;
    assert_eq!(list(&read, &t, &r).await.len(), 6, "positive control");

    let fan_out = consolidate.respond(&json!({"action": "fan-out"})).await;
    assert!(fan_out["queued"].as_u64().unwrap_or(0) >= 2, "{fan_out}");
    let records = drain_as_records(&sdk, &queue_url).await;
    let ours: Vec<&Value> = records
        .iter()
        .filter(|m| {
            m["body"]
                .as_str()
                .is_some_and(|b| b.contains(&t) || b.contains(&other))
        })
        .collect();
    assert_eq!(
        ours.len(),
        2,
        "one queued pass per pending ref: {records:?}"
    );
    let batch = consolidate.respond(&json!({"Records": ours})).await;
    assert_eq!(batch["batchItemFailures"], json!([]));

    let after = list(&read, &t, &r).await;
    let contents: Vec<&str> = after.iter().filter_map(|e| e["content"].as_str()).collect();
    assert_eq!(after.len(), 4, "{contents:?}");
    assert!(contents.contains(&"Lives in Bergen") && !contents.contains(&"Lives in Oslo"));
    assert!(
        contents.contains(&"transactional chatter"),
        "transactional memory is not consolidated"
    );
    let merged = after
        .iter()
        .find(|e| {
            e["content"]
                .as_str()
                .is_some_and(|c| c.to_lowercase().contains("email"))
        })
        .expect("merged");
    assert!(
        merged["tags"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("corroborated:2"))),
        "{merged}"
    );
    assert_eq!(
        list(&read, &other, &r_other).await.len(),
        4,
        "the other tenant's pass did its own ref"
    );

    // Fan-out again: nothing pending any more for this tenant; a direct pass changes nothing.
    let again = consolidate
        .respond(&json!({"tenantId": t, "memoryRef": r}))
        .await;
    assert_eq!(again["mergesApplied"], 0);
    assert_eq!(
        (again["inputCount"].clone(), again["outputCount"].clone()),
        (json!(3), json!(3))
    );
    assert_eq!(list(&read, &t, &r).await.len(), 4);
    let foreign = consolidate
        .invoke(&json!({"tenantId": t, "memoryRef": r_other}))
        .await
        .error();
    assert_eq!(foreign["errorType"], "validation_error");

    let events = tap.finish(7).await;
    let consolidated = of_type(&events, "agent.memory.consolidated");
    assert_eq!(
        consolidated.len(),
        1,
        "one event for the one pass that changed something"
    );
    assert_eq!(consolidated[0]["detail"]["inputCount"], 5);
    assert_eq!(consolidated[0]["detail"]["outputCount"], 3);
    assert_eq!(consolidated[0]["detail"]["memoryRef"], r.as_str());
    let text = serde_json::to_string(&events).unwrap_or_default();
    assert!(
        !text.contains("email") && !text.contains("Bergen"),
        "content-free events"
    );
    assert!(!consolidate.logs().contains("Bergen"), "content-free logs");
}
