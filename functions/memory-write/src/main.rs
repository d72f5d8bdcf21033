//! `memory-write`: SR-1-redacted put and delete, invoked directly by the run engine.

use std::sync::Arc;

use lambda_runtime::{service_fn, Error, LambdaEvent};
use memory_aws::AwsPorts;
use memory_core::ports::{SystemClock, UlidIds};
use memory_core::writer::MemoryWriter;
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_adapter::init_logging();
    let ports = AwsPorts::from_env().await?;
    let writer = MemoryWriter::new(
        ports.entries,
        ports.events,
        Arc::new(SystemClock),
        Arc::new(UlidIds::default()),
    );
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| {
        let writer = &writer;
        async move {
            memory_api::write_api::handle(writer, event.payload)
                .await
                .map_err(lambda_adapter::invoke_error)
        }
    }))
    .await
}
