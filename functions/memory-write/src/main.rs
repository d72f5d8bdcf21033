//! `memory-write`: SR-1-redacted put and delete, invoked directly by the run engine.

use std::sync::Arc;

use lambda_runtime::Error;
use memory_aws::AwsPorts;
use memory_core::ports::{SystemClock, UlidIds};
use memory_core::writer::MemoryWriter;

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
    let writer = &writer;
    lambda_adapter::run(|payload| memory_api::write_api::handle(writer, payload)).await
}
