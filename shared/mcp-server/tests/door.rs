//! The MCP door in process, over the in-memory ports: the transport answers JSON without a
//! session, the tenant comes only from the verified claim, and tool failures carry the REST codes.

use mcp_server::{McpDoor, McpRequest, Services};
use memory_core::forget::Forgetter;
use memory_core::reader::MemoryReader;
use memory_testkit::in_memory::TestPorts;
use serde_json::{json, Value};

const REF: &str = "workspaces/acme/agents/bot/memories";

fn door() -> McpDoor {
    let ports = TestPorts::at(1_800_000_000_000);
    McpDoor::new(Services {
        reader: MemoryReader::new(ports.store.clone(), ports.clock.clone()),
        writer: ports.writer(),
        forgetter: Forgetter::new(ports.core()),
    })
}

async fn post(
    door: &McpDoor,
    tenant: Option<&str>,
    message: Value,
) -> (u16, Value, Vec<(String, String)>) {
    let headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        (
            "accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("mcp-protocol-version".to_owned(), "2025-06-18".to_owned()),
        // A client cannot name its tenant: only the verified claim counts.
        ("x-tenant-id".to_owned(), "other".to_owned()),
    ];
    let body = message.to_string();
    let out = door
        .handle(&McpRequest {
            method: "POST",
            headers: &headers,
            body: &body,
            tenant_claim: tenant,
        })
        .await;
    let value = serde_json::from_str(&out.body).unwrap_or(Value::String(out.body.clone()));
    (out.status, value, out.headers)
}

/// The answer body of `memory_get` of entry `id` in [`REF`], as `tenant`'s call number `call_id`.
async fn get_entry(door: &McpDoor, tenant: &str, call_id: u32, id: &str) -> Value {
    let message = call(call_id, "memory_get", json!({"memoryRef": REF, "id": id}));
    post(door, Some(tenant), message).await.1
}

fn call(id: u32, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

#[tokio::test]
async fn stateless_json_answers_scoped_to_the_verified_tenant() {
    let door = door();
    let (status, body, _) = post(
        &door,
        None,
        call(1, "memory_list", json!({"memoryRef": REF})),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("unauthenticated"))
    );

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let (status, body, headers) = post(&door, Some("acme"), init).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["serverInfo"]["name"], "wop-memory");
    assert!(headers.iter().all(|(k, _)| k != "mcp-session-id"));

    let (_, body, _) = post(
        &door,
        Some("acme"),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let names: Vec<&str> = body["result"]["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        names,
        [
            "memory_search",
            "memory_list",
            "memory_get",
            "memory_write",
            "memory_delete",
            "memory_forget"
        ]
    );

    let write = call(
        3,
        "memory_write",
        json!({"memoryRef": REF, "entries": [{"content": "key s3cr3t-value-42"}],
                                               "secrets": [{"secretId": "k", "value": "s3cr3t-value-42"}]}),
    );
    let (_, body, _) = post(&door, Some("acme"), write).await;
    let id = body["result"]["structuredContent"]["written"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let body = get_entry(&door, "acme", 4, &id).await;
    assert_eq!(
        body["result"]["structuredContent"]["content"],
        "key [REDACTED:k]"
    );

    // Another tenant naming the same ref: nothing (CTI-1), with the REST codes.
    let body = get_entry(&door, "other", 5, &id).await;
    assert_eq!(body["result"]["isError"], true);
    assert_eq!(body["result"]["structuredContent"]["error"], "not_found");
    let (_, body, _) = post(
        &door,
        Some("other"),
        call(
            6,
            "memory_write",
            json!({"memoryRef": REF, "entries": [{"content": "x"}]}),
        ),
    )
    .await;
    assert_eq!(
        body["result"]["structuredContent"]["details"]["field"],
        "memoryRef"
    );
}

/// The door's configured secrets are redacted from every write, and do not count against the
/// caller's documented maximum: a call may bring all 10,000 of its own beside them.
#[tokio::test]
async fn configured_secrets_do_not_count_against_the_callers_maximum() {
    let ports = TestPorts::at(1_800_000_000_000);
    let configured: Vec<memory_core::writer::SecretInput> = serde_json::from_value(json!([
        {"secretId": "deploy", "value": "configured-9f8e7d6c"}
    ]))
    .expect("secret");
    let door = McpDoor::new(Services {
        reader: MemoryReader::new(ports.store.clone(), ports.clock.clone()),
        writer: ports.writer().with_configured_secrets(configured),
        forgetter: Forgetter::new(ports.core()),
    });
    let max = memory_core::writer::MAX_SECRETS_PER_REQUEST;
    let own: Vec<Value> = (0..max)
        .map(|i| json!({"secretId": format!("s{i}"), "value": format!("caller-secret-{i:05}")}))
        .collect();
    let write = call(
        1,
        "memory_write",
        json!({"memoryRef": REF, "secrets": own,
               "entries": [{"content": "configured-9f8e7d6c and caller-secret-00042"}]}),
    );
    let (_, body, _) = post(&door, Some("acme"), write).await;
    let id = body["result"]["structuredContent"]["written"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!id.is_empty(), "the maximum is the caller's own: {body}");
    let body = get_entry(&door, "acme", 2, &id).await;
    assert_eq!(
        body["result"]["structuredContent"]["content"],
        "[REDACTED:deploy] and [REDACTED:s42]"
    );
    // One more of the caller's own is refused, naming the caller's field.
    let mut over: Vec<Value> = (0..=max)
        .map(|i| json!({"secretId": format!("s{i}"), "value": format!("caller-secret-{i:05}")}))
        .collect();
    over.truncate(max + 1);
    let write = call(
        3,
        "memory_write",
        json!({"memoryRef": REF, "secrets": over, "entries": [{"content": "x"}]}),
    );
    let (_, body, _) = post(&door, Some("acme"), write).await;
    assert_eq!(body["result"]["isError"], true, "{body}");
    assert_eq!(
        body["result"]["structuredContent"]["error"],
        "validation_error"
    );
}
