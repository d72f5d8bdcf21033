//! `memory-read`: the read API behind API Gateway (list, get, search, capabilities). Its one trigger
//! is an API Gateway HTTP API request. Search reads each ref's index from the archive bucket.

use std::sync::Arc;

use lambda_runtime::Error;
use memory_api::read_api::ReadApi;
use memory_aws::AwsPorts;
use memory_core::capabilities::HOST_MODEL;
use memory_core::metering::UsageStore;
use memory_core::ports::{ArchiveStore, QuotaStore, SystemClock};
use memory_core::reader::MemoryReader;

fn main() -> Result<(), Error> {
    lambda_adapter::start(serve())
}

async fn serve() -> Result<(), Error> {
    let ports = AwsPorts::from_env().await?;
    let embedder = ports.embedder.clone();
    let model = embedder.as_ref().map(|e| e.model().to_owned());
    // Searches read a ref's index (docs/search.md "The index") from the archive bucket.
    let archive: Arc<dyn ArchiveStore> = ports.archives.clone();
    let api = ReadApi::new(
        MemoryReader::new(ports.entries.clone(), Arc::new(SystemClock))
            .with_embedder(embedder)
            .with_index(Some(archive))
            // Searches per minute (docs/quotas.md "Quotas").
            .with_quotas(Some(ports.entries.clone() as Arc<dyn QuotaStore>)),
        HOST_MODEL.with_embedding_model(model),
    )
    // The calling tenant's usage (docs/metering.md "The usage API").
    .with_usage(Some(ports.usage.clone() as Arc<dyn UsageStore>));
    let claim = lambda_adapter::tenant_claim_name();
    let (api, claim) = (&api, claim.as_str());
    lambda_adapter::run(
        |payload| Ok(lambda_adapter::http_request(payload, claim)),
        |request| async move {
            Ok(
                lambda_adapter::serve_http(request, |r| async move { api.handle(&r.head).await })
                    .await,
            )
        },
    )
    .await
}
