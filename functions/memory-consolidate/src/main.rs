//! `memory-consolidate`: RFC 0068 consolidation. Scheduled fan-out, queued per-ref passes (SQS),
//! or a direct invoke for one ref.

mod pass;

use std::sync::Arc;

use consolidation_service::pass::Consolidator;
use lambda_runtime::Error;
use memory_aws::AwsPorts;
use memory_core::ports::{PassQueue, QuotaStore};
use pass::ConsolidatePass;

fn main() -> Result<(), Error> {
    lambda_adapter::start(serve())
}

async fn serve() -> Result<(), Error> {
    let ports = AwsPorts::from_env().await?;
    let pass = ConsolidatePass(
        Consolidator::new(ports.core())
            .with_embedding_model(ports.embedding_model.clone())
            // Each pass recounts its ref's quota counters (docs/quotas.md "Counters").
            .with_quotas(Some(ports.entries.clone() as Arc<dyn QuotaStore>)),
    );
    let queue: Option<Arc<dyn PassQueue>> = ports.queue.clone().map(|q| q as Arc<dyn PassQueue>);
    let (pass, store, queue) = (&pass, ports.entries.as_ref(), queue.as_deref());
    lambda_adapter::run_pass(&[pass], store, queue).await
}
