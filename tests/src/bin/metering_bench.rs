//! The overhead of metering and quotas (docs/metering.md "Accuracy and overhead", docs/quotas.md
//! "Overhead"): p50 and p90 latency of a one-entry put through the real memory-write binary in
//! four modes, metering on or off by quotas on or off, and DynamoDB writes and write units per
//! put, counted by `tests/fault/proxy.py` in front of the emulator. Both off is the contender.
//! "Quotas off" is every limit 0: no condition, no per-minute counter, no read-back, but the
//! stored entries and bytes counters are still kept (the usage API and the recount read them);
//! "quotas on" sets every limit, high enough never to refuse. Alternating blocks, so every mode
//! sees the same emulator load; latency is measured straight to the emulator, counts through the
//! proxy. Run with the emulator settings loaded (`eval "$(infra/local/up)"`):
//! `cargo build --bins && cargo run -p e2e --bin metering_bench` (`PUTS` per mode, default 400).

use std::time::{Duration, Instant};

use e2e::counting_proxy::CountingProxy;
use e2e::LambdaProcess;
use serde_json::{json, Value};

const BLOCK: usize = 50;

/// Limits that apply (so every check and counter is exercised) and never refuse in a run.
const LIMITS_ON: [(&str, &str); 4] = [
    ("MaxEntriesPerRef", "100000000"),
    ("MaxBytesPerTenant", "100000000000"),
    ("MaxWritesPerMinute", "100000000"),
    ("MaxSearchesPerMinute", "100000000"),
];
const LIMITS_OFF: [(&str, &str); 4] = [
    ("MaxEntriesPerRef", "0"),
    ("MaxBytesPerTenant", "0"),
    ("MaxWritesPerMinute", "0"),
    ("MaxSearchesPerMinute", "0"),
];

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

/// One mode: its label and the two processes (latency straight to the emulator, counts
/// through the proxy).
struct Mode {
    label: &'static str,
    timed: LambdaProcess,
    counted: LambdaProcess,
    latencies: Vec<Duration>,
    usages: Vec<Value>,
}

async fn mode(label: &'static str, metering: &str, quotas: bool, proxy: &str) -> Mode {
    let limits = if quotas { LIMITS_ON } else { LIMITS_OFF };
    let mut env: Vec<(&str, &str)> = limits.to_vec();
    env.push(("METERING", metering));
    let timed = LambdaProcess::start("memory-write", &env).await;
    env.push(("AWS_ENDPOINT_URL", proxy));
    let counted = LambdaProcess::start("memory-write", &env).await;
    Mode {
        label,
        timed,
        counted,
        latencies: Vec::new(),
        usages: Vec::new(),
    }
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
    let mut modes = vec![
        mode("metering off, quotas off", "off", false, &url).await,
        mode("metering on,  quotas off", "on", false, &url).await,
        mode("metering off, quotas on ", "off", true, &url).await,
        mode("metering on,  quotas on ", "on", true, &url).await,
    ];
    let t = e2e::tenant("bench-meter");
    let r = e2e::memory_ref(&t, "agent-1");
    let put = |n: usize| {
        json!({"op": "put", "tenantId": t, "runId": "bench", "memoryRef": r, "entries": [
            {"content": format!("Customer {n} asked for the March invoice to be re-sent by e-mail; follow up Tuesday"),
             "tags": ["billing", "follow-up"]}]})
    };
    // Warm every process (connections, the tenant's first listing for the day, its limits).
    let mut n = 0;
    for _ in 0..20 {
        for m in &modes {
            for p in [&m.timed, &m.counted] {
                n += 1;
                p.respond(&put(n)).await;
            }
        }
    }
    while modes[0].latencies.len() < puts {
        for m in modes.iter_mut() {
            for _ in 0..BLOCK {
                n += 1;
                let started = Instant::now();
                m.timed.respond(&put(n)).await;
                m.latencies.push(started.elapsed());
            }
        }
    }
    for m in modes.iter_mut() {
        proxy.reset();
        for _ in 0..BLOCK {
            n += 1;
            m.counted.respond(&put(n)).await;
        }
        m.usages.push(proxy.usage());
    }
    for m in modes.iter_mut() {
        m.latencies.sort();
        let count = m.latencies.len() as f64;
        let counted = (m.usages.len() * BLOCK) as f64;
        let total = |names: &[&str]| // `+ 0.0` turns a negative zero into zero.
            m.usages.iter().map(|u| sum(u, names)).sum::<f64>() / counted + 0.0;
        println!(
            "{:<25} puts {count:>5}  p50 {:>6.2} ms  p90 {:>6.2} ms  DynamoDB calls/put {:>5.2} (meter's {:>4.2}, reads {:>4.2})  \
             write units/put billed {:>5.2} (meter's {:>4.2})  read units/put {:>4.2}",
            m.label,
            percentile(&m.latencies, 0.5),
            percentile(&m.latencies, 0.9),
            total(&["writes", "meterWrites"]) + total(&["reads"]),
            total(&["meterWrites"]),
            total(&["reads"]),
            total(&["billedWriteUnits", "meterBilledWriteUnits"]),
            total(&["meterBilledWriteUnits"]),
            total(&["readUnits"]),
        );
    }
}
