//! The read, write and forget functions end to end: real binaries, real event JSON (API Gateway
//! v2 requests and direct-invoke payloads), the emulated DynamoDB/S3/EventBridge behind them,
//! and events read back from SQS.

use std::path::PathBuf;
use std::time::Duration;

use aws_test_support::{emulator_config, of_type, required_env, EventTap};
use e2e::apigw::{event, now_ms, rfc3339, HttpEvent};
use e2e::scan::{bucket_text, table_text};
use e2e::{memory_ref, tenant, LambdaProcess};
use serde_json::{json, Value};

/// Keeps the exchange for the OpenAPI conformance check that `tests/run` runs afterwards.
fn record(method: &str, path: &str, status: u16, body: &Value) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/e2e-exchanges");
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join(format!("{}.json", ulid::Ulid::new()));
    let exchange = json!({"method": method, "path": path, "status": status, "body": body});
    let _ = std::fs::write(file, exchange.to_string());
}

struct Api {
    read: LambdaProcess,
}

impl Api {
    async fn start() -> Api {
        Api {
            read: LambdaProcess::start("memory-read", &[]).await,
        }
    }

    async fn call(&self, tenant: Option<&str>, path: &str, query: &[(&str, &str)]) -> (u16, Value) {
        let claims = tenant.map(|t| json!({"tenant_id": t, "sub": "user-1"}));
        let e = event(&HttpEvent {
            method: "GET",
            path,
            query,
            claims,
            body: None,
        });
        let response = self.read.respond(&e).await;
        let status = response["statusCode"].as_u64().unwrap_or(0) as u16;
        assert_eq!(response["headers"]["content-type"], "application/json");
        let body: Value = serde_json::from_str(response["body"].as_str().unwrap_or("null"))
            .unwrap_or_else(|e| panic!("body is not JSON: {e}"));
        record("GET", path, status, &body);
        (status, body)
    }

    async fn list(&self, tenant: &str, r: &str, extra: &[(&str, &str)]) -> (u16, Value) {
        let mut query = vec![("memoryRef", r)];
        query.extend_from_slice(extra);
        self.call(Some(tenant), "/v1/host/wop-memory/entries", &query)
            .await
    }

    async fn search(&self, tenant: &str, r: &str, q: &str) -> (u16, Value) {
        self.call(
            Some(tenant),
            "/v1/host/wop-memory/search",
            &[("memoryRef", r), ("q", q)],
        )
        .await
    }

    async fn get(&self, tenant: &str, r: &str, id: &str) -> (u16, Value) {
        self.call(
            Some(tenant),
            &format!("/v1/host/wop-memory/entries/{id}"),
            &[("memoryRef", r)],
        )
        .await
    }
}

fn put(tenant: &str, r: &str, entries: Value, secrets: Value) -> Value {
    json!({
        "op": "put",
        "tenantId": tenant,
        "runId": "run-1",
        "memoryRef": r,
        "entries": entries,
        "secrets": secrets,
        "attribution": {"nodeId": "node-7", "agentId": "agent-1"}
    })
}

/// `writer`'s direct-invoke `put` of `entries` (no secrets) into `r`: its answer.
async fn write(writer: &LambdaProcess, tenant: &str, r: &str, entries: Value) -> Value {
    writer.respond(&put(tenant, r, entries, json!([]))).await
}

fn ids(list_body: &Value) -> Vec<String> {
    list_body["entries"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn write_list_get_round_trip_and_cross_tenant_probes() {
    let (a, b) = (tenant("e2e-a"), tenant("e2e-b"));
    let (ra, rb) = (memory_ref(&a, "agent-1"), memory_ref(&b, "agent-1"));
    let writer = LambdaProcess::start("memory-write", &[]).await;
    let api = Api::start().await;

    let written = write(
        &writer,
        &a,
        &ra,
        json!([{"content": "prefers email follow-up", "tags": ["preference"]}]),
    )
    .await;
    let id = written["written"][0]["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    assert_eq!(id.len(), 26, "entry ids are ULIDs");
    write(
        &writer,
        &b,
        &rb,
        json!([{"content": "tenant b private fact"}]),
    )
    .await;

    // Positive controls: each owner reads its own entry straight after the write.
    let (status, body) = api.list(&a, &ra, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(ids(&body), vec![id.clone()]);
    assert_eq!(body["entries"][0]["content"], "prefers email follow-up");
    assert_eq!(body["entries"][0]["tags"], json!(["preference"]));
    assert!(body["nextCursor"].is_null());
    let (status, entry) = api.get(&a, &ra, &id).await;
    assert_eq!((status, entry["id"].as_str()), (200, Some(id.as_str())));
    let (status, body_b) = api.list(&b, &rb, &[]).await;
    assert_eq!((status, ids(&body_b).len()), (200, 1));
    let b_id = ids(&body_b)[0].clone();

    // Probes: tenant A's token with tenant B's ref.
    let (status, probe) = api.list(&a, &rb, &[]).await;
    assert_eq!((status, probe["entries"].clone()), (200, json!([])));
    let (status, err) = api.get(&a, &rb, &b_id).await;
    assert_eq!((status, err["error"].as_str()), (404, Some("not_found")));
    let (status, _) = api.get(&a, &ra, &b_id).await;
    assert_eq!(status, 404, "B's id under A's ref");
    // The tag list and the ranked search: B's words and tags, probed with A's token.
    let (status, probe) = api.list(&a, &rb, &[("tag", "preference")]).await;
    assert_eq!((status, probe["entries"].clone()), (200, json!([])));
    let (status, found) = api.search(&b, &rb, "private fact").await;
    assert_eq!(
        (status, found["results"][0]["entry"]["id"].as_str()),
        (200, Some(b_id.as_str())),
        "positive control: B finds its own entry"
    );
    for (token, r) in [(&a, &rb), (&a, &ra)] {
        let (status, probe) = api.search(token, r, "private fact").await;
        assert_eq!((status, probe), (200, json!({"results": []})), "{r}");
    }
    // Malformed refs: [] / 404, never an error that hints at data.
    for bad in [
        format!("{ra}/"),
        ra.replace("agent-1", ".."),
        format!("{ra}%00"),
        "mem://x".to_owned(),
    ] {
        let (status, body) = api.list(&a, &bad, &[]).await;
        assert_eq!((status, body["entries"].clone()), (200, json!([])), "{bad}");
        let (status, body) = api.search(&a, &bad, "email").await;
        assert_eq!((status, body), (200, json!({"results": []})), "{bad}");
    }

    // No tenant claim: 401 with the envelope.
    let (status, body) = api
        .call(None, "/v1/host/wop-memory/entries", &[("memoryRef", &ra)])
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("unauthenticated"))
    );

    // Capabilities come from the core's model.
    let (status, caps) = api
        .call(Some(&a), "/v1/host/wop-memory/capabilities", &[])
        .await;
    assert_eq!(status, 200);
    assert_eq!(caps["memory"]["retention"]["forget"], true);
    assert_eq!(caps["agents"]["memoryBackends"], json!(["long-term"]));

    // Delete through the write function; a foreign delete is a quiet false.
    let foreign = writer
        .respond(&json!({"op": "delete", "tenantId": a, "memoryRef": rb, "id": b_id}))
        .await;
    assert_eq!(foreign, json!({"deleted": false}));
    assert_eq!(
        api.list(&b, &rb, &[]).await.1["entries"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    let deleted = writer
        .respond(&json!({"op": "delete", "tenantId": a, "memoryRef": ra, "id": id}))
        .await;
    assert_eq!(deleted, json!({"deleted": true}));
    assert_eq!(api.get(&a, &ra, &id).await.0, 404);
}

#[tokio::test]
async fn limits_and_cursors_are_validated() {
    let a = tenant("e2e-page");
    let ra = memory_ref(&a, "agent-1");
    let rother = memory_ref(&a, "agent-2");
    let writer = LambdaProcess::start("memory-write", &[]).await;
    let api = Api::start().await;
    let mut all = Vec::new();
    for batch in 0..5 {
        let entries: Vec<Value> = (0..25)
            .map(|n| json!({"content": format!("fact {batch}-{n}")}))
            .collect();
        let out = write(&writer, &a, &ra, json!(entries)).await;
        all.extend(out["written"].as_array().cloned().unwrap_or_default());
    }
    assert_eq!(all.len(), 125);

    for bad in ["0", "ten", "-1", "", "1.5"] {
        let (status, body) = api.list(&a, &ra, &[("limit", bad)]).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("validation_error")),
            "limit={bad:?}"
        );
    }
    let (status, huge) = api
        .list(&a, &ra, &[("limit", "100000000000000000000")])
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        huge["entries"].as_array().map(Vec::len),
        Some(100),
        "clamped to the advertised maximum"
    );
    let cursor = huge["nextCursor"].as_str().expect("more pages").to_owned();
    let (status, rest) = api
        .list(&a, &ra, &[("limit", "100"), ("cursor", &cursor)])
        .await;
    assert_eq!(
        (status, ids(&rest).len()),
        (200, 25),
        "positive control: the cursor reads on"
    );
    let mut seen = ids(&huge);
    seen.extend(ids(&rest));
    let mut expected: Vec<String> = all
        .iter()
        .filter_map(|w| w["id"].as_str().map(str::to_owned))
        .collect();
    expected.reverse();
    assert_eq!(seen, expected, "newest first, every entry once");

    let (status, body) = api.list(&a, &rother, &[("cursor", &cursor)]).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("validation_error")),
        "cursor of another ref"
    );
    let b = tenant("e2e-page-b");
    let (status, _) = api
        .list(&b, &memory_ref(&b, "agent-1"), &[("cursor", &cursor)])
        .await;
    assert_eq!(status, 400, "cursor of another tenant");
    let mut tampered = cursor.clone();
    tampered.replace_range(5..6, if &cursor[5..6] == "A" { "B" } else { "A" });
    let (status, _) = api.list(&a, &ra, &[("cursor", &tampered)]).await;
    assert_eq!(status, 400, "tampered cursor");
}

#[tokio::test]
async fn expired_entries_never_surface() {
    let a = tenant("e2e-ttl");
    let ra = memory_ref(&a, "agent-1");
    let writer = LambdaProcess::start("memory-write", &[]).await;
    let api = Api::start().await;
    // Generous, so a loaded machine cannot expire it before the positive control reads it.
    let soon = rfc3339(now_ms() + 6_000);
    let out = write(
        &writer,
        &a,
        &ra,
        json!([{"content": "short-lived", "expiresAt": soon}, {"content": "stays"}]),
    )
    .await;
    let short = out["written"][0]["id"].as_str().expect("id").to_owned();
    let (_, body) = api.list(&a, &ra, &[]).await;
    assert_eq!(
        ids(&body).len(),
        2,
        "positive control: visible before expiry"
    );
    assert_eq!(body["entries"][1]["expiresAt"], soon);
    // Wait out the expiry (clock reads, not a fixed sleep), then it must never surface again.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while rfc3339(now_ms()) <= soon {
        assert!(
            std::time::Instant::now() < deadline,
            "clock did not pass expiresAt"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, body) = api.list(&a, &ra, &[]).await;
    assert_eq!(body["entries"].as_array().map(Vec::len), Some(1));
    assert_eq!(body["entries"][0]["content"], "stays");
    assert_eq!(api.get(&a, &ra, &short).await.0, 404);
    // Past expiresAt is rejected at write time.
    let err = writer
        .invoke(&put(
            &a,
            &ra,
            json!([{"content": "x", "expiresAt": "2020-01-01T00:00:00.000Z"}]),
            json!([]),
        ))
        .await
        .error();
    assert_eq!(err["errorType"], "validation_error");
}

/// RFC 3339 UTC with milliseconds, `ms` from now.
#[tokio::test]
async fn bad_writes_are_rejected_whole() {
    let a = tenant("e2e-bad");
    let ra = memory_ref(&a, "agent-1");
    let writer = LambdaProcess::start("memory-write", &[]).await;
    let api = Api::start().await;
    let big = "x".repeat(64 * 1024 + 1);
    let many_tags: Vec<String> = (0..33).map(|n| format!("t{n}")).collect();
    let too_many: Vec<Value> = (0..26).map(|_| json!({"content": "x"})).collect();
    let cases = vec![
        (
            "oversize content",
            put(
                &a,
                &ra,
                json!([{"content": "fine"}, {"content": big}]),
                json!([]),
            ),
        ),
        (
            "too many tags",
            put(
                &a,
                &ra,
                json!([{"content": "fine"}, {"content": "x", "tags": many_tags}]),
                json!([]),
            ),
        ),
        (
            "long tag",
            put(
                &a,
                &ra,
                json!([{"content": "x", "tags": ["y".repeat(129)]}]),
                json!([]),
            ),
        ),
        ("batch too large", put(&a, &ra, json!(too_many), json!([]))),
        (
            "malformed expiresAt",
            put(
                &a,
                &ra,
                json!([{"content": "fine"}, {"content": "x", "expiresAt": "tomorrow"}]),
                json!([]),
            ),
        ),
        (
            "empty content",
            put(&a, &ra, json!([{"content": ""}]), json!([])),
        ),
        (
            "unknown field",
            put(
                &a,
                &ra,
                json!([{"content": "x", "colour": "red"}]),
                json!([]),
            ),
        ),
        (
            "bad secret id",
            put(
                &a,
                &ra,
                json!([{"content": "x"}]),
                json!([{"secretId": "a]b", "value": "supersecretvalue"}]),
            ),
        ),
        ("not an object", json!("put everything")),
        ("unknown op", json!({"op": "merge", "tenantId": a})),
    ];
    for (name, payload) in cases {
        let err = writer.invoke(&payload).await.error();
        assert_eq!(err["errorType"], "validation_error", "{name}: {err}");
        assert!(
            err["errorMessage"].as_str().is_some_and(|m| !m.is_empty()),
            "{name}"
        );
        assert!(!err.to_string().contains("supersecretvalue"), "{name}");
    }
    let foreign = writer
        .invoke(&put(
            &a,
            &memory_ref("someone-else", "agent-1"),
            json!([{"content": "x"}]),
            json!([]),
        ))
        .await
        .error();
    assert_eq!(foreign["errorType"], "validation_error");
    let (_, body) = api.list(&a, &ra, &[]).await;
    assert_eq!(
        body["entries"],
        json!([]),
        "nothing of any rejected request was stored"
    );
    // Positive control: a valid write to the same ref lands.
    write(&writer, &a, &ra, json!([{"content": "fine"}])).await;
    assert_eq!(
        api.list(&a, &ra, &[]).await.1["entries"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

#[tokio::test]
async fn secrets_are_redacted_everywhere() {
    let sdk = emulator_config().await;
    let a = tenant("e2e-sr1");
    let ra = memory_ref(&a, "agent-1");
    let tap = EventTap::for_tenant(&sdk, &a).await;
    let writer = LambdaProcess::start("memory-write", &[]).await;
    let api = Api::start().await;
    let forget = LambdaProcess::start("memory-forget", &[]).await;
    let secret = format!("sk-live-{}", ulid::Ulid::new());
    let inner = "pa55word-XYZ";
    let out = writer
        .respond(&put(
            &a,
            &ra,
            json!([{
                "content": format!("api key is {secret}; db pw {inner}; marker [REDACTED:old] stays"),
                "tags": [format!("key:{secret}"), "plain"],
                "subject": "customer-42"
            }]),
            json!([{"secretId": "stripe-key", "value": secret}, {"secretId": "db-pw", "value": inner}]),
        )).await;
    let id = out["written"][0]["id"].as_str().expect("id").to_owned();
    let (_, entry) = api.get(&a, &ra, &id).await;
    assert_eq!(
        entry["content"],
        "api key is [REDACTED:stripe-key]; db pw [REDACTED:db-pw]; marker [REDACTED:old] stays"
    );
    assert_eq!(entry["tags"], json!(["key:[REDACTED:stripe-key]", "plain"]));
    forget
        .respond(&json!({"tenantId": a, "subject": "customer-nobody"}))
        .await;

    let events = tap.finish(2).await;
    assert_eq!(
        events.len(),
        2,
        "memory.written + memory.forgotten: {events:?}"
    );
    let written = events
        .iter()
        .find(|e| e["detail-type"] == "memory.written")
        .expect("written event");
    assert_eq!(written["detail"]["memoryId"], id.as_str());
    assert!(
        written["detail"].get("entryId").is_none(),
        "entryId is no longer sent"
    );
    assert_eq!(written["detail"]["runId"], "run-1");
    assert_eq!(written["detail"]["nodeId"], "node-7");
    assert_eq!(written["detail"]["memoryRef"], ra.as_str());

    let table = table_text(&sdk, &required_env("MEMORY_TABLE")).await;
    let bucket = bucket_text(&sdk, &required_env("ARCHIVE_BUCKET")).await;
    assert!(
        table.contains(&id),
        "positive control: the scan sees the entry"
    );
    let logs = format!("{}{}{}", writer.logs(), api.read.logs(), forget.logs());
    assert!(
        logs.contains("entries written"),
        "positive control: logs were captured"
    );
    assert!(
        writer.logs().contains(r#""RedactionsApplied":3"#)
            && writer.logs().contains(r#""Namespace":"WopMemory""#),
        "EMF metrics carry the redaction count"
    );
    for (place, text) in [
        ("DynamoDB", &table),
        ("S3", &bucket),
        (
            "events",
            &serde_json::to_string(&events).unwrap_or_default(),
        ),
        ("logs", &logs),
    ] {
        assert!(!text.contains(&secret), "secret plaintext found in {place}");
        assert!(
            !text.contains(inner),
            "inner secret plaintext found in {place}"
        );
    }
    for (place, text) in [
        (
            "events",
            &serde_json::to_string(&events).unwrap_or_default(),
        ),
        ("logs", &logs),
    ] {
        assert!(
            !text.contains("api key is"),
            "entry content found in {place}"
        );
        assert!(!text.contains("customer-42"), "subject found in {place}");
    }
    assert!(
        !table.contains("customer-42"),
        "subjects are stored as digests only"
    );
}

#[tokio::test]
async fn forget_removes_the_subject_in_one_tenant_only() {
    let sdk = emulator_config().await;
    let (a, b) = (tenant("e2e-fa"), tenant("e2e-fb"));
    let (ra1, ra2, rb) = (
        memory_ref(&a, "agent-1"),
        memory_ref(&a, "agent-2"),
        memory_ref(&b, "agent-1"),
    );
    let tap = EventTap::for_tenant(&sdk, &a).await;
    let writer = LambdaProcess::start("memory-write", &[]).await;
    let api = Api::start().await;
    let forget = LambdaProcess::start("memory-forget", &[]).await;
    let subject = "alice@example.com";
    for (t, r, entries) in [
        (
            &a,
            &ra1,
            json!([{"content": "alice likes tea", "subject": subject}, {"content": "unrelated"}]),
        ),
        (
            &a,
            &ra2,
            json!([{"content": "alice ordered twice", "subject": subject}]),
        ),
        (
            &b,
            &rb,
            json!([{"content": "tenant b alice", "subject": subject}]),
        ),
    ] {
        write(&writer, t, r, entries).await;
    }

    // Through the HTTP route: the tenant comes from the JWT, not the body.
    let e = event(&HttpEvent {
        method: "POST",
        path: "/v1/host/wop-memory/forget",
        query: &[],
        claims: Some(json!({"tenant_id": a})),
        body: Some(&json!({"subject": subject}).to_string()),
    });
    let response = forget.respond(&e).await;
    assert_eq!(response["statusCode"], 200);
    let counts: Value =
        serde_json::from_str(response["body"].as_str().unwrap_or("{}")).unwrap_or_default();
    record("POST", "/v1/host/wop-memory/forget", 200, &counts);
    assert_eq!(
        counts,
        json!({"deletedEntries": 2, "deletedArchives": 0, "rebuiltIndexes": 0, "cancelledCommitments": 0})
    );
    assert_eq!(
        ids(&api.list(&a, &ra1, &[]).await.1).len(),
        1,
        "the unrelated entry stays"
    );
    assert_eq!(
        api.list(&a, &ra1, &[]).await.1["entries"][0]["content"],
        "unrelated"
    );
    assert_eq!(api.list(&a, &ra2, &[]).await.1["entries"], json!([]));
    assert_eq!(
        api.list(&b, &rb, &[]).await.1["entries"][0]["content"],
        "tenant b alice",
        "the same subject in another tenant is untouched"
    );
    // Direct invoke: idempotent, nothing left.
    let again = forget
        .respond(&json!({"tenantId": a, "subject": subject}))
        .await;
    assert_eq!(again["deletedEntries"], 0);
    // No claim: 401.
    let unauth = event(&HttpEvent {
        method: "POST",
        path: "/v1/host/wop-memory/forget",
        query: &[],
        claims: None,
        body: Some(r#"{"subject":"x"}"#),
    });
    assert_eq!(forget.respond(&unauth).await["statusCode"], 401);

    let events = tap.finish(5).await;
    let forgotten = of_type(&events, "memory.forgotten");
    assert_eq!(forgotten.len(), 2);
    assert_eq!(
        forgotten[0]["detail"]["deletedEntries"]
            .as_u64()
            .unwrap_or(9)
            + forgotten[1]["detail"]["deletedEntries"]
                .as_u64()
                .unwrap_or(9),
        2
    );
    let text = serde_json::to_string(&events).unwrap_or_default();
    assert!(
        !text.contains(subject) && !text.contains("alice"),
        "no clear subject or content in events"
    );
    assert!(forgotten[0]["detail"]["subjectHash"]
        .as_str()
        .is_some_and(|h| h.len() == 64));
}
