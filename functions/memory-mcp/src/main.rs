//! `memory-mcp`: the standard doors of agent memory, behind the HTTP API and its JWT authorizer
//! (tenant from the token, as on the read API): the Claude memory tool's backend,
//! `POST /v1/host/wop-memory/memory-tool` (README "The Claude memory tool").

use std::sync::Arc;

use lambda_runtime::Error;
use memory_api::WireError;
use memory_aws::AwsPorts;
use memory_core::ports::{SystemClock, UlidIds};
use memory_core::writer::{MemoryWriter, SecretInput};
use memory_tool::http::{ToolRequest, SUBJECT_HEADER};
use memory_tool::MemoryTool;

fn main() -> Result<(), Error> {
    lambda_adapter::start(serve())
}

async fn serve() -> Result<(), Error> {
    let ports = AwsPorts::from_env().await?;
    let secrets = configured_secrets()?;
    let writer = MemoryWriter::new(ports.core(), Arc::new(UlidIds::default()))
        .with_embedder(ports.embedder.clone());
    let tool = MemoryTool::new(
        writer,
        ports.entries.clone(),
        Arc::new(SystemClock),
        secrets,
    );
    let claim = lambda_adapter::tenant_claim_name();
    let (tool, claim) = (&tool, claim.as_str());
    lambda_adapter::run(
        |payload| Ok(lambda_adapter::http_request(payload, claim)),
        |request| async move {
            Ok(lambda_adapter::serve_http(request, |r| async move {
                if !r.head.path.ends_with("/v1/host/wop-memory/memory-tool") {
                    return memory_api::HttpResponse::wire_error(&WireError::no_route());
                }
                let request = ToolRequest {
                    method: &r.head.method,
                    query: &r.head.query,
                    tenant_claim: r.head.tenant_claim.as_deref(),
                    subject: r.header(SUBJECT_HEADER),
                    body: &r.body,
                };
                memory_tool::http::handle_http(tool, &request).await
            })
            .await)
        },
    )
    .await
}

/// The SR-1 secrets every write of this function redacts: `REDACTION_SECRETS`, a JSON list of
/// `{"secretId", "value"}` (README "Configuration"). A value that does not decode stops the
/// function at start-up, naming the variable and never the value.
fn configured_secrets() -> Result<Vec<SecretInput>, Error> {
    match std::env::var("REDACTION_SECRETS") {
        Ok(raw) if !raw.trim().is_empty() => {
            let value = memory_api::decode::json(&raw)
                .map_err(|_| "REDACTION_SECRETS must be a JSON list of {secretId, value}")?;
            let secrets: Vec<SecretInput> =
                memory_api::decode::typed(value, "REDACTION_SECRETS")
                    .map_err(|e| format!("REDACTION_SECRETS: {}", e.message))?;
            memory_core::writer::registry_from(&secrets)
                .map_err(|e| format!("REDACTION_SECRETS: {e}"))?;
            Ok(secrets)
        }
        _ => Ok(Vec::new()),
    }
}
