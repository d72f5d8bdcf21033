//! `memory-mcp`: the standard doors of agent memory, behind the HTTP API and its JWT authorizer
//! (tenant from the token, as on the read API): the MCP server, `/v1/host/wop-memory/mcp`
//! (docs/api.md "The MCP server"), and the Claude memory tool's backend,
//! `POST /v1/host/wop-memory/memory-tool` (docs/api.md "The Claude memory tool"). Both call the
//! services the REST functions call, wired here the same way.

use std::sync::Arc;

use lambda_adapter::HttpRequest;
use lambda_runtime::Error;
use mcp_server::{McpDoor, McpRequest, Services};
use memory_api::{HttpResponse, WireError};
use memory_aws::AwsPorts;
use memory_core::ports::{QuotaStore, SystemClock, UlidIds};
use memory_core::reader::MemoryReader;
use memory_core::writer::MemoryWriter;
use memory_tool::http::{ToolRequest, SUBJECT_HEADER};
use memory_tool::MemoryTool;

fn main() -> Result<(), Error> {
    lambda_adapter::start(serve())
}

/// The two routes, by the path's end (any stage prefix before it changes nothing).
const MCP_PATH: &str = "/v1/host/wop-memory/mcp";
const TOOL_PATH: &str = "/v1/host/wop-memory/memory-tool";

async fn serve() -> Result<(), Error> {
    let ports = AwsPorts::from_env().await?;
    let secrets = memory_api::decode::configured_secrets()?;
    let clock = Arc::new(SystemClock);
    // Quotas (docs/quotas.md "Quotas") on the MCP server's writes and searches; the memory
    // tool's edits are charged by the store in their own transaction.
    let quotas = Some(ports.entries.clone() as Arc<dyn QuotaStore>);
    let writer = MemoryWriter::new(ports.core(), Arc::new(UlidIds::default()))
        .with_embedder(ports.embedder.clone())
        .with_quotas(quotas.clone());
    let forgetter = memory_forget::forgetter(&ports);
    let tool = MemoryTool::new(
        writer.clone(),
        ports.entries.clone(),
        ports.entries.clone(),
        clock.clone(),
        secrets.clone(),
    );
    let mcp = McpDoor::new(Services {
        reader: MemoryReader::new(ports.entries.clone(), clock)
            .with_embedder(ports.embedder)
            .with_quotas(quotas),
        writer: writer.with_configured_secrets(secrets),
        forgetter,
    });
    let claim = lambda_adapter::tenant_claim_name();
    let (tool, mcp, claim) = (&tool, &mcp, claim.as_str());
    lambda_adapter::run(
        |payload| Ok(lambda_adapter::http_request(payload, claim)),
        |request| async move {
            Ok(match request {
                Ok(r) if r.head.path.ends_with(MCP_PATH) => {
                    let out = mcp.handle(&mcp_request(&r)).await;
                    lambda_adapter::raw_http_response(out.status, &out.headers, out.body)
                }
                other => {
                    lambda_adapter::serve_http(other, |r| async move {
                        if !r.head.path.ends_with(TOOL_PATH) {
                            return HttpResponse::wire_error(&WireError::no_route());
                        }
                        let request = ToolRequest {
                            method: &r.head.method,
                            query: &r.head.query,
                            tenant_claim: r.head.tenant_claim.as_deref(),
                            subject: r.header(SUBJECT_HEADER),
                            body: &r.body,
                        };
                        memory_core::acting_tenant::acting_for(
                            request.tenant_claim,
                            memory_tool::http::handle_http(tool, &request),
                        )
                        .await
                    })
                    .await
                }
            })
        },
    )
    .await
}

fn mcp_request(r: &HttpRequest) -> McpRequest<'_> {
    McpRequest {
        method: &r.head.method,
        headers: &r.headers,
        body: &r.body,
        tenant_claim: r.head.tenant_claim.as_deref(),
    }
}
