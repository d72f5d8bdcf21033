//! `memory-commitments`: RFC 0068 inferred commitments. `memory.written` events infer and
//! evaluate predicates; the every-minute schedule fires what is due.
//!
//! Configuration: `DEFAULT_TIME_ZONE` (IANA, default UTC), `TENANT_TIME_ZONES` (JSON object
//! tenant -> IANA zone), `ENQUEUE_RUNS` (`false` to announce fires without `run.requested`).

mod api;
mod trigger;

use std::collections::BTreeMap;
use std::sync::Arc;

use commitment_aws::DynamoCommitmentStore;
use commitment_service::firing::{CommitmentService, ZoneConfig};
use lambda_runtime::Error;
use memory_aws::AwsPorts;

fn main() -> Result<(), Error> {
    lambda_adapter::start(serve())
}

async fn serve() -> Result<(), Error> {
    let ports = AwsPorts::from_env().await?;
    let tenants: BTreeMap<String, String> = match std::env::var("TENANT_TIME_ZONES") {
        Ok(raw) if !raw.is_empty() => serde_json::from_str(&raw).map_err(|_| {
            Error::from("TENANT_TIME_ZONES must be a JSON object of tenant -> zone")
        })?,
        _ => BTreeMap::new(),
    };
    let zones = ZoneConfig::new(
        &std::env::var("DEFAULT_TIME_ZONE").unwrap_or_default(),
        &tenants,
    )
    .map_err(|e| Error::from(e.to_string()))?;
    let service = CommitmentService::new(
        ports.core(),
        Arc::new(DynamoCommitmentStore::from_ports(&ports)),
        zones,
        std::env::var("ENQUEUE_RUNS").map_or(true, |v| v != "false"),
    );
    let service = &service;
    lambda_adapter::run(trigger::decode, |command| async move {
        let report = api::handle(service, command).await?;
        Ok(lambda_adapter::Answer::Json(report))
    })
    .await
}
