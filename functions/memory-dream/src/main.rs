//! `memory-dream`: RFC 0062 distillation. Nightly fan-out, queued per-ref runs (SQS), or a
//! direct invoke for one ref with an optional `tokenBudget`. With an embedding model it also runs
//! the embed pass (`embed.rs`), and always the search index pass (`index.rs`): the same queue,
//! a sweep of their own.

mod embed;
mod index;
mod pass;
mod usage;

use std::sync::Arc;
use std::time::Duration;

use distill::DeterministicDistiller;
use dream_service::abstractive::{Abstractive, DEFAULT_TIMEOUT};
use dream_service::dream::Dreamer;
use embed::EmbedRefPass;
use index::IndexRefPass;
use lambda_runtime::Error;
use memory_api::background_api::{self, RefPass};
use memory_aws::AwsPorts;
use memory_core::embed_pass::EmbedPass;
use memory_core::ports::{ArchiveStore, PassQueue};
use memory_core::ref_index::IndexPass;
use pass::DreamPass;

fn main() -> Result<(), Error> {
    lambda_adapter::start(serve())
}

async fn serve() -> Result<(), Error> {
    // The tokenizer (~40 ms to build) is built by the first dream that counts tokens, not at
    // start-up: dreams are background passes, where a first run 40 ms slower costs nothing, while
    // every cold start (billed init included) would pay it (docs/figures.md "Overview").
    let ports = AwsPorts::from_env().await?;
    // Entries younger than this wait for the next run (see Dreamer::with_settle_millis);
    // default: twice the write function's timeout, since a keyed put taken over after its first
    // attempt's lease commits with the first attempt's `createdAt` (docs/guarantees.md
    // "Idempotent writes").
    let settle_seconds: i64 = lambda_adapter::env_number("DREAM_SETTLE_SECONDS", 30)?;
    // How long an archive must have stood before the orphan sweep may remove it (docs/dreams.md
    // "Orphan archives"): longer than any run of this function, so none is still finishing it.
    let orphan_grace_seconds: i64 = lambda_adapter::env_number(
        "DREAM_ORPHAN_GRACE_SECONDS",
        dream_service::dream::ORPHAN_GRACE_MILLIS / 1000,
    )?;
    // Abstractive dreams, only with ABSTRACTIVE_MODEL_ID set: how long a dream waits for the model.
    let timeout_ms: u64 = lambda_adapter::env_number(
        "ABSTRACTIVE_TIMEOUT_MS",
        u64::try_from(DEFAULT_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
    )?;
    let abstractive = ports
        .abstractive_model
        .clone()
        .map(|model| Abstractive::new(model, Duration::from_millis(timeout_ms)));
    let pass = DreamPass(
        Dreamer::new(
            ports.core(),
            ports.archives.clone(),
            Arc::new(DeterministicDistiller),
        )
        .with_settle_millis(settle_seconds * 1000)
        .with_orphan_grace_millis(orphan_grace_seconds.saturating_mul(1000))
        .with_abstractive(abstractive),
    );
    // The embed pass lives here rather than in a function of its own: it is one more pass over
    // one ref (work marker, fence, fan-out, queue), this function already consumes the pass
    // queue and links the Bedrock client, and a pass takes seconds (docs/search.md "Semantic
    // search").
    let embed = ports
        .embedder
        .clone()
        .map(|embedder| EmbedRefPass(EmbedPass::new(ports.core(), embedder)));
    // The index pass too: one more pass over one ref, and this function already writes to the
    // archive bucket (docs/search.md "The index").
    let archive: Arc<dyn ArchiveStore> = ports.archives.clone();
    let index = IndexRefPass(IndexPass::new(
        ports.core(),
        archive,
        ports.embedding_model.clone(),
    ));
    let mut passes: Vec<&dyn RefPass> = vec![&pass];
    if let Some(embed) = &embed {
        passes.push(embed);
    }
    passes.push(&index);
    let queue: Option<Arc<dyn PassQueue>> = ports.queue.clone().map(|q| q as Arc<dyn PassQueue>);
    let (store, queue) = (ports.entries.as_ref(), queue.as_deref());
    // The usage rollup and the operator view (docs/metering.md "The items and the rollup").
    let prices = usage::prices_from_env()?;
    let (usage_store, prices, passes) = (ports.usage.as_ref(), &prices, &passes);
    lambda_adapter::run(usage::decode, |trigger| async move {
        match trigger {
            usage::Trigger::Pass(command) => {
                let outcome = background_api::handle(passes, store, queue, command).await?;
                Ok(lambda_adapter::pass_answer(outcome))
            }
            usage::Trigger::Rollup(day) => Ok(lambda_adapter::Answer::Json(
                usage::rollup(usage_store, day).await?,
            )),
            usage::Trigger::Top { days, limit } => Ok(lambda_adapter::Answer::Json(
                usage::top(usage_store, &days, limit, prices).await?,
            )),
        }
    })
    .await
}
