//! The demo the README opens with (`infra/local/demo`, "run it locally"): starts the real function
//! binaries behind the local Lambda Runtime API and drives write -> list -> get -> cross-tenant
//! probe -> dream -> forget, then the OpenIntent door and the OAP exchange door, against the
//! emulator, printing what each step did.

use e2e::apigw::{
    get_event, http_api_event, http_call, list_event, now_ms, utc_date, GatewayRequest,
};
use e2e::LambdaProcess;
use serde_json::{json, Value};

async fn list(read: &LambdaProcess, tenant: &str, memory_ref: &str) -> (u64, Value) {
    let e = list_event(tenant, memory_ref, &[]);
    http_call(read, &e).await
}

fn show_entries(body: &Value) {
    for e in body["entries"].as_array().into_iter().flatten() {
        println!(
            "      {}  {}  tags={}",
            e["id"].as_str().unwrap_or("?"),
            e["content"],
            e["tags"]
        );
    }
}

/// A demo request as API Gateway hands it to a function: a JSON body (if any) from localhost,
/// with one more header when the door needs it.
fn demo_event(
    method: &str,
    path: &str,
    route_key: &str,
    header: Option<(&str, String)>,
    claims: Option<&Value>,
    body: Option<&Value>,
) -> Value {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    headers.extend(header.map(|(name, value)| (name.to_owned(), value)));
    let body = body.map(|b| b.to_string().into_bytes());
    http_api_event(&GatewayRequest {
        method,
        raw_path: path,
        raw_query: "",
        route_key,
        headers: &headers,
        cookies: &[],
        path_parameters: &[],
        claims,
        body: body.as_deref(),
        source_ip: "127.0.0.1",
        request_id: "demo",
        time_epoch_ms: 0,
    })
}

/// An OpenIntent door request as API Gateway hands it over after the API key authorizer said
/// yes (its context: the key's tenant and the agent).
fn keyed_event(
    method: &str,
    path: &str,
    if_match: Option<&str>,
    body: Option<&Value>,
    context: &Value,
) -> Value {
    let if_match = if_match.map(|v| ("if-match", v.to_owned()));
    let mut event = demo_event(method, path, "ANY /api/v1/{proxy+}", if_match, None, body);
    event["requestContext"]["authorizer"] = json!({"lambda": context});
    event
}

/// RFC 3339 (UTC, whole days) of `days` from now: a grant may live at most 180 days.
fn in_days(days: i64) -> String {
    format!("{}T00:00:00Z", utc_date(now_ms() + days * 86_400_000))
}

/// An exchange door request: with the JWT's claims (grant, receipts) or a grant as bearer.
fn exchange_event(
    method: &str,
    path: &str,
    claims: Option<&Value>,
    bearer: Option<&str>,
    body: &Value,
) -> Value {
    let bearer = bearer.map(|token| ("authorization", format!("Bearer {token}")));
    let body = (!body.is_null()).then_some(body);
    let route_key = format!("{method} {path}");
    demo_event(method, path, &route_key, bearer, claims, body)
}

#[tokio::main]
async fn main() {
    let run = ulid::Ulid::new().to_string().to_lowercase();
    let (acme, globex) = (format!("acme-{run}"), format!("globex-{run}"));
    let acme_ref = e2e::memory_ref(&acme, "support-bot");
    let globex_ref = e2e::memory_ref(&globex, "support-bot");

    println!(
        "Starting memory-write, memory-read and memory-forget behind a local Lambda Runtime API"
    );
    let write = LambdaProcess::start("memory-write", &[]).await;
    let read = LambdaProcess::start("memory-read", &[]).await;
    let forget = LambdaProcess::start("memory-forget", &[]).await;
    for p in [&write, &read, &forget] {
        p.ready().await;
    }

    println!("\n1. write: two memories for tenant {acme}; one mentions a BYOK secret");
    let out = write
        .invoke(&json!({
            "op": "put", "tenantId": acme, "runId": "run-42", "memoryRef": acme_ref,
            "entries": [
                {"content": "Customer prefers email follow-up", "tags": ["preference"], "subject": "customer-7"},
                {"content": "Refund issued with key sk-live-51HqDemoSecret", "tags": ["billing"], "subject": "customer-7"}
            ],
            "secrets": [{"secretId": "stripe-key", "value": "sk-live-51HqDemoSecret"}],
            "attribution": {"nodeId": "resolve-refund", "agentId": "support-bot"}
        }))
        .await
        .response();
    println!("   -> written: {}", out["written"]);
    write
        .invoke(&json!({
            "op": "put", "tenantId": globex, "memoryRef": globex_ref,
            "entries": [{"content": "Globex private note"}]
        }))
        .await
        .response();
    println!("   (and one memory for tenant {globex})");

    println!("\n2. list as {acme} (newest first; the secret is stored redacted):");
    let (status, body) = list(&read, &acme, &acme_ref).await;
    println!("   -> HTTP {status}");
    show_entries(&body);

    let id = out["written"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    println!("\n3. get {id} as {acme}:");
    let e = get_event(&acme, &acme_ref, &id);
    let (status, body) = http_call(&read, &e).await;
    println!("   -> HTTP {status} {body}");

    println!("\n4. cross-tenant probe: {acme}'s token asks for {globex}'s memoryRef");
    let (status, body) = list(&read, &acme, &globex_ref).await;
    println!(
        "   -> HTTP {status} entries={} (CTI-1: nothing, although the store holds Globex's entry)",
        body["entries"]
    );

    println!("\n5. dream (RFC 0062): distil {acme}'s transactional memory now");
    let dream = LambdaProcess::start("memory-dream", &[]).await;
    let report = dream
        .invoke(&json!({"tenantId": acme, "memoryRef": acme_ref, "tokenBudget": 4000}))
        .await
        .response();
    println!(
        "   -> {}: {} sources, {} of {} tokens, archive {}",
        report["status"].as_str().unwrap_or("?"),
        report["sourceCount"],
        report["tokensUsed"],
        report["tokenBudget"],
        report["archiveKey"].as_str().unwrap_or("-")
    );
    if let Some(output) = report["outputId"].as_str() {
        let e = get_event(&acme, &acme_ref, output);
        let (_, body) = http_call(&read, &e).await;
        println!("   long-term summary {output} (tags {}):", body["tags"]);
        for line in body["content"].as_str().unwrap_or_default().lines() {
            println!("      {line}");
        }
    }

    println!("\n6. forget subject customer-7 for {acme} (entries, the summary derived from them, archive, index line)");
    let counts = forget
        .invoke(&json!({"tenantId": acme, "subject": "customer-7"}))
        .await
        .response();
    println!("   -> {counts}");
    let (_, body) = list(&read, &acme, &acme_ref).await;
    println!(
        "   list afterwards: {} entries",
        body["entries"].as_array().map_or(0, Vec::len)
    );
    let (_, body) = list(&read, &globex, &globex_ref).await;
    println!(
        "   {globex} still has {} entry",
        body["entries"].as_array().map_or(0, Vec::len)
    );

    println!("\n7. the OpenIntent door (RFC-0015): an API key for {acme}'s support-bot, keyed memory, versions");
    // The door's configured SR-1 secrets (REDACTION_SECRETS), as the template passes them.
    let intent = LambdaProcess::start(
        "memory-intent",
        &[(
            "REDACTION_SECRETS",
            r#"[{"secretId": "stripe-key", "value": "sk-live-51HqDemoSecret"}]"#,
        )],
    )
    .await;
    let auth = LambdaProcess::start("memory-intent-auth", &[]).await;
    let issued = intent
        .invoke(&json!({"op": "issueApiKey", "tenantId": acme, "agents": ["support-bot"]}))
        .await
        .response();
    let key = issued["apiKey"].as_str().unwrap_or_default().to_owned();
    println!(
        "   key {} issued (the store keeps only its digest)",
        issued["keyId"]
    );
    for agent in ["support-bot", "billing-bot"] {
        let decision = auth
            .invoke(&json!({"version": "2.0", "type": "REQUEST",
                            "headers": {"x-api-key": key, "x-agent-id": agent}}))
            .await
            .response();
        println!(
            "   authorizer, X-Agent-ID {agent}: isAuthorized={}",
            decision["isAuthorized"]
        );
    }
    let context = json!({"tenantId": acme, "agentId": "support-bot"});
    let created = json!({"agent_id": "support-bot", "namespace": "tickets", "key": "refund-123",
                         "value": {"status": "open", "card": "sk-live-51HqDemoSecret"},
                         "memory_type": "episodic", "subject": "customer-9"});
    let (status, entry) = http_call(
        &intent,
        &keyed_event("POST", "/api/v1/memory", None, Some(&created), &context),
    )
    .await;
    let keyed_id = entry["id"].as_str().unwrap_or_default().to_owned();
    println!(
        "   create -> HTTP {status} {keyed_id} version {} value {}",
        entry["version"], entry["value"]
    );
    let path = format!("/api/v1/memory/{keyed_id}");
    let patch = json!({"value": {"status": "refunded"}});
    for attempt in ["first", "second, same If-Match"] {
        let (status, body) = http_call(
            &intent,
            &keyed_event("PATCH", &path, Some("1"), Some(&patch), &context),
        )
        .await;
        println!(
            "   patch If-Match 1 ({attempt}) -> HTTP {status} {}",
            if status == 200 {
                format!("version {}", body["version"])
            } else {
                format!(
                    "{} current_version {}",
                    body["error"], body["current_version"]
                )
            }
        );
    }
    let (_, versions) = http_call(
        &intent,
        &keyed_event("GET", &format!("{path}/versions"), None, None, &context),
    )
    .await;
    println!(
        "   versions kept: {}",
        versions["versions"].as_array().map_or(0, Vec::len)
    );
    let counts = forget
        .invoke(&json!({"tenantId": acme, "subject": "customer-9"}))
        .await
        .response();
    let (status, _) = http_call(&intent, &keyed_event("GET", &path, None, None, &context)).await;
    println!("   forget customer-9 -> {counts}; get afterwards -> HTTP {status}");

    println!("\n8. the OAP exchange door (RFC 0010): {acme} grants a contractor's agent a slice of support-bot's memory");
    let exchange = LambdaProcess::start(
        "memory-exchange",
        &[("OAP_PUBLIC_URL", "https://memory.example")],
    )
    .await;
    write
        .invoke(&json!({
            "op": "put", "tenantId": acme, "memoryRef": acme_ref,
            "entries": [{"content": "Call the customer back on +44 20 7946 0958 about the late refund",
                         "tags": ["refunds"]}]
        }))
        .await
        .response();
    let claims = json!({"tenant_id": acme});
    let grant_body = json!({
        "grantee": "did:web:contractor.example", "purpose": "Handle the refund backlog.",
        "scope_id": acme_ref, "filter": {"labels_any": ["refunds"]}, "max_items": 20,
        "expires_at": in_days(30)
    });
    let (status, granted) = http_call(
        &exchange,
        &exchange_event(
            "POST",
            "/oap/memory/grant",
            Some(&claims),
            None,
            &grant_body,
        ),
    )
    .await;
    let token = granted["token"].as_str().unwrap_or_default().to_owned();
    println!(
        "   grant -> HTTP {status} {} over {} item(s), signed by {}",
        granted["grant"]["grant_id"], granted["slice_items"], granted["grant"]["issuer"]
    );
    let (status, answer) = http_call(
        &exchange,
        &exchange_event(
            "POST",
            "/oap/memory/query",
            None,
            Some(&token),
            &json!({"query": "refund call back"}),
        ),
    )
    .await;
    for item in answer["items"].as_array().into_iter().flatten() {
        println!(
            "   grantee query -> HTTP {status}: {} (kind {}, chain of {} links)",
            item["content"]["text"],
            item["kind"],
            item["chain"].as_array().map_or(0, Vec::len)
        );
    }
    let (_, receipts) = http_call(
        &exchange,
        &exchange_event(
            "GET",
            "/oap/memory/receipts",
            Some(&claims),
            None,
            &json!(null),
        ),
    )
    .await;
    let types: Vec<&str> = receipts["receipts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["type"].as_str())
        .collect();
    println!("   receipt log (signed, hash-chained): {types:?}");

    let logs = format!(
        "{}{}{}{}{}{}{}",
        write.logs(),
        read.logs(),
        forget.logs(),
        dream.logs(),
        intent.logs(),
        auth.logs(),
        exchange.logs()
    );
    println!(
        "\nFunction logs: {} lines, secret plaintext present: {}, entry text present: {}",
        logs.lines().count(),
        logs.contains("sk-live-51HqDemoSecret") || logs.contains(&key),
        logs.contains("prefers email") || logs.contains("refunded") || logs.contains("7946")
    );
    println!("Events went to the bus (source wop-memory); the tap queue is in EVENTS_QUEUE_URL.");
}
