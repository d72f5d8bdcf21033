//! Dreams end to end: the real `memory-dream` binary against the emulated DynamoDB, S3 and
//! EventBridge — archive, output entry, index, events, budget failure that changes nothing,
//! queued fan-out, and a forget afterwards that leaves no trace in the whole bucket and table.

use std::time::Duration;

use aws_test_support::{emulator_config, of_type, required_env, EventTap};
use e2e::apigw::{get_event, http_call};
use e2e::queue::drain_as_records;
use e2e::scan::{bucket_text, table_text};
use e2e::{memory_ref, tenant, LambdaProcess};
use serde_json::{json, Value};

#[tokio::test]
async fn a_dream_distils_archives_indexes_and_forgets() {
    let sdk = emulator_config().await;
    let (table, bucket) = (required_env("MEMORY_TABLE"), required_env("ARCHIVE_BUCKET"));
    let t = tenant("e2e-dream");
    let r = memory_ref(&t, "agent-1");
    let tap = EventTap::for_tenant(&sdk, &t).await;
    let write = LambdaProcess::start("memory-write", &[]).await;
    let read = LambdaProcess::start("memory-read", &[]).await;
    let dream = LambdaProcess::start("memory-dream", &[]).await;
    let forget = LambdaProcess::start("memory-forget", &[]).await;

    let mut entries: Vec<Value> = (0..12)
        .map(|n| json!({"content": format!("Customer prefers email follow-up; ticket {} closed", n % 4), "tags": ["preference"]}))
        .collect();
    // Unique per run, so a scan of the whole (shared) bucket and table is a fair check.
    let allergy = format!("hazelnut-{}", ulid::Ulid::new());
    entries.push(json!({"content": format!("Quinn's allergy is {allergy}"), "tags": ["health"], "subject": "quinn"}));
    entries.push(
        json!({"content": "API key pk-test-9f8e7d6c5b4a rotated [REDACTED:old]", "tags": ["ops"]}),
    );
    write
        .respond(&json!({"op": "put", "tenantId": t, "memoryRef": r, "entries": entries}))
        .await;

    // Too small a budget: fails, and nothing in the bucket or the table changes.
    // (Other tests write to the same table concurrently, so compare this tenant's part.)
    // (The meter's usage items change with every invocation: docs/metering.md.)
    let ours = |text: String| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains(&t) && !l.contains("@usage"))
            .map(str::to_owned)
            .collect()
    };
    let (table_before, bucket_before) = (
        ours(table_text(&sdk, &table).await),
        ours(bucket_text(&sdk, &bucket).await),
    );
    assert_eq!(
        table_before.len(),
        14 + 14 + 2 + 1 + 4,
        "positive control: 14 entries, their 14 tag postings (one tag each), the work markers \
         of the dream and of the search index, the put's change record, and the quota counters \
         of the ref and of the tenant (entries and bytes each: docs/quotas.md)"
    );
    // (A budget below the floor, the fixed overhead of a summary, is a request error; a budget
    // that cannot hold the top-ranked fact with its sources is `token_budget_exceeded`, tested
    // over the in-memory ports in dream-service.)
    let err = dream
        .invoke(&json!({"tenantId": t, "memoryRef": r, "tokenBudget": 10}))
        .await
        .error();
    assert_eq!(err["errorType"], "validation_error");
    // The message names the field and the bound, 32 (`distill::MIN_TOKEN_BUDGET`); no content.
    let message = err["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("tokenBudget") && message.contains("at least 32"),
        "{message}"
    );
    // Entries unchanged; the work marker only records that a pass began (`passRunning`), and
    // the ref is still pending.
    let data = |lines: Vec<String>| -> Vec<String> {
        lines
            .into_iter()
            .filter(|l| !l.contains("S(\"W#"))
            .collect()
    };
    let table_after = ours(table_text(&sdk, &table).await);
    assert!(
        data(table_after.clone()) == data(table_before.clone()),
        "entries unchanged"
    );
    assert!(
        table_after
            .iter()
            .any(|l| l.contains("S(\"W#dream\")") && l.contains("dirtyPartition")),
        "the ref is still pending"
    );
    assert!(
        ours(bucket_text(&sdk, &bucket).await) == bucket_before,
        "bucket unchanged"
    );

    // A real run, with a secret registered for the dream run.
    let report = dream
        .respond(
            &json!({"tenantId": t, "memoryRef": r, "tokenBudget": 1_000_000,
            "secrets": [{"secretId": "pk", "value": "pk-test-9f8e7d6c5b4a"}]}),
        )
        .await;
    assert_eq!(report["status"], "distilled", "{report}");
    assert_eq!(
        report["tokenBudget"], 128_000,
        "clamped to the advertised maximum"
    );
    assert_eq!(report["sourceCount"], 14);
    let output_id = report["outputId"].as_str().expect("output id").to_owned();
    let archive_key = report["archiveKey"]
        .as_str()
        .expect("archive key")
        .to_owned();
    assert!(archive_key.starts_with(&format!("{t}/agents/agent-1/archives/")));

    let (status, output) = http_call(&read, &get_event(&t, &r, &output_id)).await;
    assert_eq!(status, 200);
    let summary = output["content"].as_str().unwrap_or_default().to_owned();
    assert!(summary.contains("prefers email"), "{summary}");
    assert!(summary.contains("[REDACTED:pk]") && !summary.contains("pk-test-9f8e7d6c5b4a"));
    assert!(
        summary.contains("[REDACTED:old]"),
        "existing markers kept whole"
    );
    assert!(output["tags"][0]
        .as_str()
        .is_some_and(|t| t.starts_with("compacted-from:dream-")));

    // tokensUsed against an independent count with the same tokenizer.
    let bpe = tiktoken_rs::cl100k_base().expect("tokenizer");
    let bucket_now = bucket_text(&sdk, &bucket).await;
    assert!(bucket_now.contains(&format!("{t}/agents/agent-1/workspace/MEMORY-INDEX.json")));
    assert!(bucket_now.contains(&format!("{t}/agents/agent-1/workspace/MEMORY-INDEX.md")));
    let used = report["tokensUsed"].as_u64().unwrap_or(0) as f64;
    let inputs: usize = table_text(&sdk, &table)
        .await
        .lines()
        .filter(|l| l.contains(&format!("{t}#agent-1")) && l.contains("transactional"))
        .count();
    assert_eq!(inputs, 14, "positive control on the table scan");
    let independent = bpe.encode_ordinary(&summary).len() as f64;
    assert!(
        used >= independent && used <= 128_000.0,
        "output tokens alone {independent}, used {used}"
    );

    // Nothing new: the rerun distils nothing and writes no second archive.
    let again = dream.respond(&json!({"tenantId": t, "memoryRef": r})).await;
    assert_eq!(again["status"], "nothing-to-distill");
    assert_eq!(
        bucket_text(&sdk, &bucket)
            .await
            .matches(&archive_key)
            .count(),
        bucket_now.matches(&archive_key).count()
    );

    let events = tap.collect_settled(16, Duration::from_secs(20)).await;
    let compacted = of_type(&events, "memory.compacted");
    assert_eq!(compacted.len(), 1);
    let d = &compacted[0]["detail"];
    assert_eq!(
        (
            d["outputId"].as_str(),
            d["sourceCount"].as_u64(),
            d["trigger"].as_str()
        ),
        (Some(output_id.as_str()), Some(14), Some("host-managed"))
    );
    assert_eq!(d["distillation"]["tokenBudget"], 128_000);
    assert_eq!(d["distillation"]["indexUpdated"], true);
    assert_eq!(d["byteSize"].as_u64(), Some(summary.len() as u64));
    assert_eq!(
        events
            .iter()
            .filter(|e| e["detail-type"] == "workspace.updated")
            .count(),
        1
    );
    let text = serde_json::to_string(&events).unwrap_or_default();
    assert!(
        !text.contains(&allergy) && !text.contains("prefers email") && !text.contains("pk-test")
    );

    // Forget the subject: entries, the distilled entry, the archive and the index line go.
    assert!(
        bucket_text(&sdk, &bucket).await.contains(&allergy),
        "positive control"
    );
    let counts = forget
        .respond(&json!({"tenantId": t, "subject": "quinn"}))
        .await;
    assert_eq!(counts["deletedEntries"], 2, "{counts}");
    assert_eq!(counts["deletedArchives"], 1);
    assert_eq!(counts["rebuiltIndexes"], 1);
    let (table_after, bucket_after) = (
        table_text(&sdk, &table).await,
        bucket_text(&sdk, &bucket).await,
    );
    assert!(
        !table_after.contains(&allergy) && !bucket_after.contains(&allergy),
        "no trace of the subject anywhere"
    );
    assert!(
        table_after.contains(&t),
        "the rest of the tenant's memory stays"
    );
    assert_eq!(
        http_call(&read, &get_event(&t, &r, &output_id)).await.0,
        404
    );
    for logs in [dream.logs(), forget.logs(), write.logs()] {
        assert!(
            !logs.contains("hazelnut")
                && !logs.contains("pk-test-9f8e7d6c5b4a")
                && !logs.contains("prefers email")
        );
        assert!(!logs.contains("Quinn"));
    }
    tap.remove().await;
}

#[tokio::test]
async fn the_nightly_fan_out_queues_refs_with_new_entries() {
    let sdk = emulator_config().await;
    let queue_url = required_env("DREAM_QUEUE_URL");
    let t = tenant("e2e-dream-fan");
    let refs: Vec<String> = (0..3)
        .map(|n| memory_ref(&t, &format!("agent-{n}")))
        .collect();
    let write = LambdaProcess::start("memory-write", &[]).await;
    let dream = LambdaProcess::start("memory-dream", &[("PASS_QUEUE_URL", &queue_url)]).await;
    for r in &refs {
        write
            .respond(&json!({"op": "put", "tenantId": t, "memoryRef": r, "entries": [{"content": "note one"}, {"content": "note two"}]})).await;
    }
    let fan_out = dream.respond(&json!({"action": "fan-out"})).await;
    assert!(fan_out["queued"].as_u64().unwrap_or(0) >= 3);
    let records = drain_as_records(&sdk, &queue_url).await;
    // Deliver our queued passes as the event source mapping would (other tests' queued passes in
    // the shared queue are dropped: their refs are test data of other runs).
    let ours: Vec<&Value> = records
        .iter()
        .filter(|m| m["body"].as_str().is_some_and(|b| b.contains(&t)))
        .collect();
    assert_eq!(ours.len(), 3);
    let batch = dream.respond(&json!({"Records": ours})).await;
    assert_eq!(batch["batchItemFailures"], json!([]));
    // Every ref was distilled: a direct run finds nothing new, and a second fan-out skips them.
    for r in &refs {
        assert_eq!(
            dream.respond(&json!({"tenantId": t, "memoryRef": r})).await["status"],
            "nothing-to-distill"
        );
    }
    dream.respond(&json!({"action": "fan-out"})).await;
    let second = drain_as_records(&sdk, &queue_url).await;
    assert_eq!(
        second
            .iter()
            .filter(|m| m["body"].as_str().is_some_and(|b| b.contains(&t)))
            .count(),
        0
    );
}
