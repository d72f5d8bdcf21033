//! The overhead of metering (docs/metering.md "Accuracy and overhead"): p50 and p90 latency of a
//! one-entry put through the real memory-write binary with `METERING=on` beside the same binary
//! with `METERING=off` (the contender), and DynamoDB writes and write units per put, counted by
//! `tests/fault/proxy.py` in front of the emulator. Alternating blocks, so both modes see the
//! same emulator load; latency is measured straight to the emulator, counts through the proxy. Run with the emulator settings loaded (`eval "$(infra/local/up)"`):
//! `cargo build --release --bins && FUNCTION_BIN_DIR=$CARGO_TARGET_DIR/release cargo run --release -p e2e --bin metering_bench`
//! (`PUTS` per mode, default 400).

use std::time::{Duration, Instant};

use e2e::counting_proxy::CountingProxy;
use e2e::LambdaProcess;
use serde_json::{json, Value};

const BLOCK: usize = 50;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn sum(usage: &Value, names: &[&str]) -> f64 {
    names.iter().filter_map(|n| usage[*n].as_f64()).sum()
}

#[tokio::main]
async fn main() {
    let upstream = std::env::var("AWS_ENDPOINT_URL")
        .unwrap_or_else(|_| panic!("AWS_ENDPOINT_URL is not set: eval \"$(infra/local/up)\""));
    let puts: usize = std::env::var("PUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let proxy = CountingProxy::start(&upstream);
    let url = proxy.url();
    // Latency straight to the emulator (the proxy would add its own hop to every round trip);
    // writes and units through the proxy, by separate processes.
    let on = LambdaProcess::start("memory-write", &[("METERING", "on")]).await;
    let off = LambdaProcess::start("memory-write", &[("METERING", "off")]).await;
    let on_counted = LambdaProcess::start(
        "memory-write",
        &[("AWS_ENDPOINT_URL", &url), ("METERING", "on")],
    )
    .await;
    let off_counted = LambdaProcess::start(
        "memory-write",
        &[("AWS_ENDPOINT_URL", &url), ("METERING", "off")],
    )
    .await;
    let t = format!(
        "bench-meter-{}",
        ulid::Ulid::new().to_string().to_lowercase()
    );
    let r = format!("workspaces/{t}/agents/agent-1/memories");
    let put = |n: usize| {
        json!({"op": "put", "tenantId": t, "runId": "bench", "memoryRef": r, "entries": [
            {"content": format!("Customer {n} asked for the March invoice to be re-sent by e-mail; follow up Tuesday"),
             "tags": ["billing", "follow-up"]}]})
    };
    // Warm all four (connections, the tenant's first listing for the day).
    for n in 0..20 {
        for p in [&on, &off, &on_counted, &off_counted] {
            p.respond(&put(n)).await;
        }
    }
    let (mut lat_on, mut lat_off) = (Vec::new(), Vec::new());
    let mut n = 1000;
    while lat_on.len() < puts {
        for (process, latencies) in [(&off, &mut lat_off), (&on, &mut lat_on)] {
            for _ in 0..BLOCK {
                n += 1;
                let started = Instant::now();
                process.respond(&put(n)).await;
                latencies.push(started.elapsed());
            }
        }
    }
    let (mut use_on, mut use_off) = (Vec::<Value>::new(), Vec::<Value>::new());
    for (process, usages) in [(&off_counted, &mut use_off), (&on_counted, &mut use_on)] {
        proxy.reset();
        for _ in 0..BLOCK {
            n += 1;
            process.respond(&put(n)).await;
        }
        usages.push(proxy.usage());
    }
    for (mode, latencies, usages) in [
        ("off", &mut lat_off, &use_off),
        ("on", &mut lat_on, &use_on),
    ] {
        latencies.sort();
        let count = latencies.len() as f64;
        let counted = (usages.len() * BLOCK) as f64;
        let total = |names: &[&str]| // `+ 0.0` turns a negative zero into zero.
            usages.iter().map(|u| sum(u, names)).sum::<f64>() / counted + 0.0;
        println!(
            "METERING={mode:<3} puts {count:>5}  p50 {:>6.2} ms  p90 {:>6.2} ms  DynamoDB writes/put {:>5.2} (meter's {:>4.2})  \
             write units/put billed {:>5.2} (meter's {:>4.2})  as the emulator answered {:>5.2} (meter's {:>4.2})",
            percentile(latencies, 0.5),
            percentile(latencies, 0.9),
            total(&["writes", "meterWrites"]),
            total(&["meterWrites"]),
            total(&["billedWriteUnits", "meterBilledWriteUnits"]),
            total(&["meterBilledWriteUnits"]),
            total(&["writeUnits", "meterWriteUnits"]),
            total(&["meterWriteUnits"]),
        );
    }
}
