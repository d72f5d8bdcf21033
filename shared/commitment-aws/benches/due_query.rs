//! Due-query cost of the commitment tick: index items read when 10 commitments are
//! due, with few and with very many commitments stored. The in-memory store models the sparse
//! `byDue` index exactly (10 vs 1,000,000 stored); the DynamoDB run uses the emulator and reads
//! `ScannedCount` (10 vs 5,000 stored: each stored commitment is one PutItem over HTTP).
//! Run: `eval "$(infra/local/up)"; cargo bench -p commitment-aws --bench due_query`.

use std::sync::Arc;
use std::time::Instant;

use commitment_service::{CommitmentStore, StoredCommitment, DUE_SHARDS};
use commitments::{Commitment, Condition, Inferred};
use memory_core::Timestamp;
use memory_testkit::in_memory::InMemoryCommitmentStore;

const NOW: i64 = 1_800_000_000_000;

fn commitments(tenant: &str, total: usize) -> Vec<StoredCommitment> {
    let memory_ref = format!("workspaces/{tenant}/agents/agent-1/memories");
    (0..total)
        .map(|n| {
            // Ten are due now; the rest are spread over the next years.
            let due_ms = if n < 10 {
                NOW - 1_000
            } else {
                NOW + 60_000 * (1 + n as i64)
            };
            let inferred = Inferred {
                condition: Condition::At { due_ms },
                rule: "time.bench",
            };
            StoredCommitment {
                commitment: Commitment::new(
                    tenant,
                    &memory_ref,
                    &format!("e{n}"),
                    &inferred,
                    NOW - 10_000,
                ),
                version: 1,
                subject: None,
                outbox: None,
            }
        })
        .collect()
}

async fn due_cost(store: &dyn CommitmentStore, tenant: &str) -> (u64, usize) {
    let mut read = 0;
    let mut due = 0;
    for shard in 0..DUE_SHARDS {
        let r = store
            .due(shard, Timestamp::from_millis(NOW))
            .await
            .unwrap_or_default();
        read += r.items_read;
        due += r
            .keys
            .iter()
            .filter(|k| k.memory_ref.tenant().as_str() == tenant)
            .count();
    }
    (read, due)
}

#[tokio::main]
async fn main() {
    println!(
        "| store | commitments stored | due | index items read | time of the 16 shard queries |"
    );
    println!("|---|---|---|---|---|");
    for total in [10usize, 1_000_000] {
        let store = InMemoryCommitmentStore::new();
        for chunk in commitments("bench", total).chunks(10_000) {
            let _ = store.put_new(chunk).await;
        }
        let started = Instant::now();
        let (read, due) = due_cost(&store, "bench").await;
        println!(
            "| in-memory | {total} | {due} | {read} | {:.3} ms |",
            started.elapsed().as_secs_f64() * 1000.0
        );
    }
    if std::env::var("AWS_ENDPOINT_URL").is_err() {
        println!("(DynamoDB figures need the emulator: eval \"$(infra/local/up)\" first)");
        return;
    }
    let sdk = aws_test_support::emulator_config().await;
    let table = std::env::var("MEMORY_TABLE").unwrap_or_else(|_| "wop-memory-entries".into());
    let store = Arc::new(commitment_aws::DynamoCommitmentStore::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        table,
    ));
    for total in [10usize, 5_000] {
        // A fresh tenant per size; earlier runs' commitments are far in the future or fired.
        let tenant = format!("bench-{}", ulid::Ulid::new().to_string().to_lowercase());
        for chunk in commitments(&tenant, total).chunks(500) {
            let _ = store.put_new(chunk).await;
        }
        let started = Instant::now();
        let (read, due) = due_cost(store.as_ref(), &tenant).await;
        println!(
            "| DynamoDB (emulator) | {total} | {due} | {read} | {:.1} ms |",
            started.elapsed().as_secs_f64() * 1000.0
        );
        // Take this size's due ones out of the shared table so the next size reads only its own.
        for shard in 0..DUE_SHARDS {
            let due = store
                .due(shard, Timestamp::from_millis(NOW))
                .await
                .unwrap_or_default();
            for key in due.keys {
                let _ = store.delete(&key).await;
            }
        }
    }
}
