//! Metering end to end (docs/metering.md "Accuracy and overhead"): a scripted day of mixed work
//! through the real function binaries, behind `tests/fault/proxy.py` counting what the emulator
//! answered (consumed capacity, S3 requests and bytes, events), then the rollup, run more than
//! once and concurrently, and the usage API and the operator view with good and bad input.

use aws_sdk_dynamodb::types::AttributeValue;
use aws_test_support::{emulator_config, required_env};
use e2e::apigw::{event, http_call, now_ms, utc_date, HttpEvent};
use e2e::counting_proxy::CountingProxy;
use e2e::{memory_ref, tenant, LambdaProcess};
use serde_json::{json, Value};

async fn http(
    read: &LambdaProcess,
    tenant: Option<&str>,
    path: &str,
    query: &[(&str, &str)],
) -> (u64, Value) {
    let e = event(&HttpEvent {
        method: "GET",
        path,
        query,
        claims: tenant.map(|t| json!({"tenant_id": t})),
        body: None,
    });
    http_call(read, &e).await
}

fn number(item: &std::collections::HashMap<String, AttributeValue>, name: &str) -> f64 {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().unwrap_or(f64::NAN),
        _ => 0.0,
    }
}

/// The tenant's day items of the last two days, summed (the day can turn during the test).
async fn rolled_up(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    tenant: &str,
) -> std::collections::BTreeMap<String, f64> {
    let out = client
        .query()
        .table_name(table)
        .key_condition_expression("pk = :pk AND begins_with(sk, :d)")
        .expression_attribute_values(":pk", AttributeValue::S(format!("{tenant}#@usage")))
        .expression_attribute_values(":d", AttributeValue::S("D#".into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap_or_else(|e| panic!("query day items: {e:?}"));
    let mut sums = std::collections::BTreeMap::new();
    for item in out.items() {
        for name in [
            "readUnits",
            "writeUnits",
            "s3Requests",
            "s3BytesIn",
            "s3BytesOut",
            "events",
            "bedrockTokens",
            "lambdaMs",
            "requests",
        ] {
            *sums.entry(name.to_owned()).or_insert(0.0) += number(item, name);
        }
    }
    sums
}

fn within_one_percent(name: &str, metered: f64, reported: f64) {
    let tolerance = (reported.abs() * 0.01).max(1e-9);
    assert!(
        (metered - reported).abs() <= tolerance,
        "{name}: metered {metered}, the emulator answered {reported}"
    );
}

#[tokio::test]
async fn a_scripted_day_is_metered_within_one_percent_and_rolls_up_idempotently() {
    let sdk = emulator_config().await;
    let table = required_env("MEMORY_TABLE");
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let proxy = CountingProxy::start(&required_env("AWS_ENDPOINT_URL"));
    let endpoint = proxy.url();
    let env = [("AWS_ENDPOINT_URL", endpoint.as_str()), ("METERING", "on")];
    let write = LambdaProcess::start("memory-write", &env).await;
    let read = LambdaProcess::start("memory-read", &env).await;
    let dream = LambdaProcess::start("memory-dream", &env).await;
    let forget = LambdaProcess::start("memory-forget", &env).await;

    let t = tenant("e2e-meter");
    let refs: Vec<String> = (1..=2)
        .map(|a| memory_ref(&t, &format!("agent-{a}")))
        .collect();
    let mut invocations = 0u32;

    // The day: puts (one with a subject), lists, gets, searches, deletes, a dream, a forget.
    let mut ids = Vec::new();
    for (i, r) in refs.iter().cycle().take(6).enumerate() {
        let entries: Vec<Value> = (0..5)
            .map(|n| {
                json!({"content": format!("Order {i}-{n}: customer asked about invoice {} and delivery", n * 7),
                       "tags": ["orders", format!("batch-{i}")]})
            })
            .chain((i == 0).then(|| json!({"content": "Riley prefers morning calls", "subject": "riley"})))
            .collect();
        let answer = match write
            .invoke(&json!({"op": "put", "tenantId": t, "runId": "run-1", "memoryRef": r, "entries": entries}))
            .await
        {
            e2e::Outcome::Response(v) => v,
            e2e::Outcome::Error(e) => panic!("put failed: {e}\n{}", write.logs()),
        };
        invocations += 1;
        for w in answer["written"].as_array().into_iter().flatten() {
            ids.push((r.clone(), w["id"].as_str().unwrap_or_default().to_owned()));
        }
    }
    assert_eq!(ids.len(), 31, "positive control: every entry written");
    for r in &refs {
        // A page, a tag list and a search of each ref.
        for (path, query) in [
            ("/v1/host/wop-memory/entries", ("limit", "10")),
            ("/v1/host/wop-memory/entries", ("tag", "batch-1")),
            ("/v1/host/wop-memory/search", ("q", "invoice delivery")),
        ] {
            let (status, body) = http(&read, Some(&t), path, &[("memoryRef", r), query]).await;
            assert_eq!(status, 200, "{path} {query:?}: {body}");
            invocations += 1;
        }
    }
    for (r, id) in ids.iter().take(4) {
        let (status, _) = http(
            &read,
            Some(&t),
            &format!("/v1/host/wop-memory/entries/{id}"),
            &[("memoryRef", r)],
        )
        .await;
        assert_eq!(status, 200);
        invocations += 1;
    }
    for (r, id) in ids.iter().skip(10).take(2) {
        let deleted = write
            .respond(&json!({"op": "delete", "tenantId": t, "memoryRef": r, "id": id}))
            .await;
        assert_eq!(deleted["deleted"], true);
        invocations += 1;
    }
    let report = dream
        .respond(&json!({"tenantId": t, "memoryRef": refs[0], "tokenBudget": 100_000}))
        .await;
    assert_eq!(report["status"], "distilled", "{report}");
    invocations += 1;
    let counts = forget
        .respond(&json!({"tenantId": t, "subject": "riley"}))
        .await;
    assert!(
        counts["deletedEntries"].as_u64().unwrap_or(0) >= 1,
        "{counts}"
    );
    invocations += 1;

    // What the emulator answered, summed by the proxy (the meter's own calls apart).
    let answered = proxy.usage();
    assert!(
        answered["s3Requests"].as_f64().unwrap_or(0.0) > 0.0
            && answered["readUnits"].as_f64().unwrap_or(0.0) > 0.0
            && answered["writeUnits"].as_f64().unwrap_or(0.0) > 0.0
            && answered["events"].as_f64().unwrap_or(0.0) > 0.0,
        "positive control: the day touched every service: {answered}"
    );

    // The rollup (the schedule's input), then the day items.
    let rollup = dream.respond(&json!({"action": "usage-rollup"})).await;
    assert!(
        rollup["rollups"].as_array().is_some_and(|r| !r.is_empty()),
        "{rollup}"
    );
    let metered = rolled_up(&client, &table, &t).await;
    // The figures of docs/metering.md "Accuracy and overhead" (--nocapture prints them).
    eprintln!("metered (day items): {metered:?}\nthe emulator answered: {answered}");
    for (item, proxy_name) in [
        ("readUnits", "readUnits"),
        ("writeUnits", "writeUnits"),
        ("s3Requests", "s3Requests"),
        ("s3BytesIn", "s3BytesIn"),
        ("s3BytesOut", "s3BytesOut"),
        ("events", "events"),
    ] {
        within_one_percent(
            item,
            metered.get(item).copied().unwrap_or(0.0),
            answered[proxy_name].as_f64().unwrap_or(0.0),
        );
    }
    assert_eq!(
        metered["requests"],
        f64::from(invocations),
        "one per invocation"
    );
    assert!(metered["lambdaMs"] > 0.0);
    assert_eq!(metered["bedrockTokens"], 0.0, "no model configured");

    // Duplicate delivery: again, then twice at once (a second process), the same items.
    let second = LambdaProcess::start("memory-dream", &env).await;
    dream.respond(&json!({"action": "usage-rollup"})).await;
    let rollup_input = json!({"action": "usage-rollup"});
    let (a, b) = tokio::join!(dream.respond(&rollup_input), second.respond(&rollup_input));
    assert!(a["rollups"].is_array() && b["rollups"].is_array());
    assert_eq!(
        rolled_up(&client, &table, &t).await,
        metered,
        "rollups are idempotent"
    );

    // One EMF usage line per invocation and tenant, the tenant a property; no content.
    let logs = write.logs();
    let lines: Vec<Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["tenant"] == t.as_str())
        .collect();
    assert_eq!(lines.len(), 8, "six puts and two deletes");
    let spec = &lines[0]["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(spec["Dimensions"], json!([["Function"]]));
    assert!(lines[0]["WriteUnits"].as_f64().is_some() && lines[0]["DurationMs"].is_u64());
    assert!(!logs.contains("Riley prefers") && !logs.contains("riley"));

    // The usage API: the calling tenant's days, and what it stores now from the quota counters.
    for (sk, n) in [("Q#entries", "29"), ("Q#bytes", "4096")] {
        client
            .put_item()
            .table_name(&table)
            .item("pk", AttributeValue::S(format!("{t}#@quota")))
            .item("sk", AttributeValue::S(sk.into()))
            .item("n", AttributeValue::N(n.into()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("quota counter: {e:?}"));
    }
    let day = utc_date(now_ms());
    let usage_path = "/v1/host/wop-memory/usage";
    let (status, usage) = http(&read, Some(&t), usage_path, &[("from", &day), ("to", &day)]).await;
    assert_eq!(status, 200, "{usage}");
    let days = usage["days"].as_array().cloned().unwrap_or_default();
    let write_units: f64 = days.iter().filter_map(|d| d["writeUnits"].as_f64()).sum();
    within_one_percent("API writeUnits", write_units, metered["writeUnits"]);
    assert_eq!(usage["now"], json!({"entries": 29, "bytes": 4096}));

    // Another tenant's usage: nothing, whatever the query says.
    let other = tenant("e2e-meter-other");
    let (status, theirs) = http(
        &read,
        Some(&other),
        usage_path,
        &[
            ("from", &day),
            ("to", &day),
            ("tenantId", &t),
            ("tenant", &t),
        ],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(theirs["days"], json!([]), "{theirs}");
    assert_eq!(theirs["now"], json!({"entries": 0, "bytes": 0}));

    // Malformed ranges: 400 with the envelope, naming the parameter.
    for (query, field) in [
        (vec![("to", "2026-01-01")], "from"),
        (vec![("from", "2026-01-01")], "to"),
        (vec![("from", "2026-13-01"), ("to", "2026-12-31")], "from"),
        (vec![("from", "2026-02-30"), ("to", "2026-03-01")], "from"),
        (vec![("from", "20260101"), ("to", "2026-03-01")], "from"),
        (vec![("from", "2026-01-01"), ("to", "yesterday")], "to"),
        (vec![("from", "2026-03-02"), ("to", "2026-03-01")], "to"),
        (vec![("from", "2024-01-01"), ("to", "2025-01-01")], "to"),
        (
            vec![
                ("from", "2026-01-01"),
                ("from", "2026-01-02"),
                ("to", "2026-03-01"),
            ],
            "from",
        ),
    ] {
        let (status, body) = http(&read, Some(&t), usage_path, &query).await;
        assert_eq!(status, 400, "{query:?}: {body}");
        assert_eq!(body["error"], "validation_error");
        assert_eq!(body["details"]["field"], field, "{query:?}: {body}");
    }
    let (status, body) = http(
        &read,
        None,
        usage_path,
        &[("from", "2026-01-01"), ("to", "2026-01-02")],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("unauthenticated"))
    );

    // The operator view: the tenant among the top, with the price table it used.
    let top = dream
        .respond(&json!({"action": "usage-top", "from": day, "to": day, "limit": 1000}))
        .await;
    assert_eq!(top["prices"]["dynamoWritePerMillion"], 0.625);
    let line = top["tenants"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|l| l["tenantId"] == t.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("the tenant is listed: {top}"));
    assert!(
        line["estimatedCost"].as_f64().unwrap_or(0.0) > 0.0,
        "{line}"
    );
    assert_eq!(line["stored"], json!({"entries": 29, "bytes": 4096}));
    let bad = dream
        .invoke(&json!({"action": "usage-top", "from": day, "to": "2000-01-01"}))
        .await
        .error();
    assert_eq!(bad["errorType"], "validation_error");
}
