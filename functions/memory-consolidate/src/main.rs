//! `memory-consolidate`: RFC 0068 consolidation. Scheduled fan-out, queued per-ref jobs (SQS),
//! or a direct invoke for one ref.

use std::sync::Arc;

use lambda_runtime::{service_fn, Error, LambdaEvent};
use memory_api::background_api;
use memory_api::consolidate_api::ConsolidatePass;
use memory_aws::AwsPorts;
use memory_core::consolidation_pass::Consolidator;
use memory_core::ports::{JobQueue, SystemClock};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_adapter::init_logging();
    let ports = AwsPorts::from_env().await?;
    let pass = ConsolidatePass(Consolidator::new(
        ports.entries.clone(),
        ports.events.clone(),
        Arc::new(SystemClock),
    ));
    let queue: Option<Arc<dyn JobQueue>> = ports.jobs.clone().map(|q| q as Arc<dyn JobQueue>);
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| {
        let (pass, store, queue) = (&pass, ports.entries.as_ref(), queue.as_deref());
        async move {
            background_api::handle(pass, store, queue, event.payload)
                .await
                .map_err(lambda_adapter::invoke_error)
        }
    }))
    .await
}
