//! `memory-write`: SR-1-redacted put and delete, invoked directly by the run engine. Its one
//! trigger is a [`WriteCommand`].

use std::sync::Arc;

use lambda_runtime::Error;
use memory_api::write_api::WriteCommand;
use memory_aws::AwsPorts;
use memory_core::ports::{PassQueue, QuotaStore, UlidIds};
use memory_core::writer::MemoryWriter;

fn main() -> Result<(), Error> {
    lambda_adapter::start(serve())
}

async fn serve() -> Result<(), Error> {
    let ports = AwsPorts::from_env().await?;
    // How long an idempotency key answers with its recorded result (docs/guarantees.md
    // "Idempotent writes").
    let key_ttl_seconds: i64 = lambda_adapter::env_number(
        "IDEMPOTENCY_TTL_SECONDS",
        memory_core::idempotency::DEFAULT_KEY_TTL_SECONDS,
    )?;
    let writer = MemoryWriter::new(ports.core(), Arc::new(UlidIds::default()))
        .with_key_ttl_seconds(key_ttl_seconds)
        .with_embedder(ports.embedder.clone())
        // Entries left without a vector get their embed pass queued at once (docs/search.md
        // "Semantic search").
        .with_embed_queue(ports.embed_queue.clone().map(|q| q as Arc<dyn PassQueue>))
        // Quotas (docs/quotas.md "Quotas"): defaults from the environment, a tenant's override
        // from the table.
        .with_quotas(Some(ports.entries.clone() as Arc<dyn QuotaStore>));
    let writer = &writer;
    lambda_adapter::run(WriteCommand::decode, |command| async move {
        let result = memory_api::write_api::handle(writer, command).await?;
        Ok(lambda_adapter::Answer::Json(result))
    })
    .await
}
