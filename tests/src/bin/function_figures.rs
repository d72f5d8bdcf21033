//! Prints per-function figures for docs/figures.md "Overview": binary size, peak RSS
//! (VmHWM) after a representative invoke, and start-up through this harness (median of 15; the
//! harness is a debug build and adds about 3 ms: the start-up figure in docs/figures.md comes from
//! `tests/startup_figures.py`, which polls with a bare socket). Run against release binaries:
//! `cargo build --release --bins && FUNCTION_BIN_DIR=target/release cargo run -p e2e --bin function_figures`
//! with the emulator settings loaded (`eval "$(infra/local/up)"`).

use std::time::Duration;

use e2e::apigw::{http_api_event, list_event, GatewayRequest};
use e2e::runtime_api::binary_path;
use e2e::LambdaProcess;
use serde_json::{json, Value};

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// An MCP `tools/call` of `memory_search` as API Gateway hands it to memory-mcp.
fn mcp_search_event(tenant: &str, memory_ref: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "memory_search",
        "arguments": {"memoryRef": memory_ref, "query": "customer e-mail refunds", "limit": 25}}})
    .to_string();
    let headers: Vec<(String, String)> = [
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("host", "abc123.execute-api.us-east-1.amazonaws.com"),
        ("mcp-protocol-version", "2025-06-18"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let claims = json!({"tenant_id": tenant});
    http_api_event(&GatewayRequest {
        method: "POST",
        raw_path: "/v1/host/wop-memory/mcp",
        raw_query: "",
        route_key: "ANY /v1/host/wop-memory/mcp",
        headers: &headers,
        cookies: &[],
        path_parameters: &[],
        claims: Some(&claims),
        body: Some(body.as_bytes()),
        source_ip: "203.0.113.10",
        request_id: "req-figures",
        time_epoch_ms: 0,
    })
}

#[tokio::main]
async fn main() {
    let t = e2e::tenant("figures");
    let r = e2e::memory_ref(&t, "agent-1");
    let entries: Vec<Value> = (0..25)
        .map(|n| json!({"content": format!("Customer {n} prefers e-mail follow-up after refunds; remind me tomorrow at 9am"), "tags": ["preference"]}))
        .collect();
    let write_payload = json!({"op": "put", "tenantId": t, "memoryRef": r, "entries": entries,
        "secrets": [{"secretId": "k", "value": "sk-live-0123456789"}]});
    let read_payload = list_event(&t, &r, &[("limit", "100")]);
    let payloads: Vec<(&str, Value)> = vec![
        ("memory-write", write_payload),
        ("memory-read", read_payload),
        ("memory-mcp", mcp_search_event(&t, &r)),
        ("memory-forget", json!({"tenantId": t, "subject": "nobody"})),
        ("memory-consolidate", json!({"tenantId": t, "memoryRef": r})),
        (
            "memory-commitments",
            json!({"action": "backfill", "tenantId": t, "memoryRef": r}),
        ),
        ("memory-dream", json!({"tenantId": t, "memoryRef": r})),
    ];
    println!("| function | binary size | start-up (median of 15) | peak RSS after invoke |");
    println!("|---|---|---|---|");
    for (name, payload) in payloads {
        let path = binary_path(name);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let mut starts: Vec<Duration> = Vec::new();
        for _ in 0..15 {
            let p = LambdaProcess::start(name, &[]).await;
            starts.push(p.ready().await);
        }
        starts.sort();
        let p = LambdaProcess::start(name, &[]).await;
        p.ready().await;
        let _ = p.invoke(&payload).await;
        let rss = p.pid().map_or(0, peak_rss_kib);
        println!(
            "| {name} | {:.1} MiB | {:.1} ms | {:.1} MiB |",
            size as f64 / 1_048_576.0,
            starts[7].as_secs_f64() * 1000.0,
            rss as f64 / 1024.0
        );
    }
}
