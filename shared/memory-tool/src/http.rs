//! `POST /v1/host/wop-memory/memory-tool?memoryRef=R`: the body is the tool call's `input`
//! object as the model emitted it, the answer `{"content", "is_error"}`, which the application
//! hands back as the `tool_result` of that tool use. The tenant comes from the JWT, as on every
//! route; the data subject of new files (so forget reaches them) from the `x-wop-subject`
//! header, which access logs do not record.
//!
//! What the model got wrong (a bad path, an unknown command, a missing field, text that does not
//! occur) is a 200 with `is_error: true`, so the model can correct itself; what the application
//! got wrong (no tenant, no `memoryRef`, a write to a ref that is not the caller's, a body that is
//! not a JSON object) and store failures are the usual error envelope.

use memory_api::read_api::Query;
use memory_api::{decode, ref_hash, HttpResponse, WireError};
use memory_core::CoreError;
use memory_guard::{TenantId, TenantScope};
use serde_json::json;

use crate::command::Command;
use crate::tool::{Call, MemoryTool, ToolResult};

/// The header naming the data subject of the files a call writes.
pub const SUBJECT_HEADER: &str = "x-wop-subject";

/// The route's request, as the Lambda adapter decoded it.
pub struct ToolRequest<'a> {
    pub method: &'a str,
    pub query: &'a Query,
    pub tenant_claim: Option<&'a str>,
    pub subject: Option<&'a str>,
    pub body: &'a str,
}

pub async fn handle_http(tool: &MemoryTool, request: &ToolRequest<'_>) -> HttpResponse {
    if !request.method.eq_ignore_ascii_case("POST") {
        return HttpResponse::wire_error(&WireError::method_not_allowed("POST"));
    }
    match run(tool, request).await {
        Ok(result) => HttpResponse::ok(json!(result)),
        Err(e) => HttpResponse::wire_error(&e),
    }
}

async fn run(tool: &MemoryTool, request: &ToolRequest<'_>) -> Result<ToolResult, WireError> {
    let tenant = request
        .tenant_claim
        .and_then(|t| TenantId::parse(t).ok())
        .ok_or(CoreError::NoTenant)?;
    let scope = TenantScope::new(tenant);
    let memory_ref = request
        .query
        .single("memoryRef")?
        .ok_or_else(|| CoreError::invalid("memoryRef", "query parameter is required"))?;
    let subject = match request.subject {
        Some(s) if s.is_empty() || s.len() > memory_core::writer::MAX_SUBJECT_BYTES => {
            return Err(WireError::validation(
                SUBJECT_HEADER,
                format!(
                    "{SUBJECT_HEADER}: 1-{} bytes",
                    memory_core::writer::MAX_SUBJECT_BYTES
                ),
            ))
        }
        other => other,
    };
    let input = decode::json(request.body)?;
    if !input.is_object() {
        return Err(WireError::validation(
            "payload",
            "payload: expected the tool call's input object",
        ));
    }
    let command: Command = match decode::typed::<Command>(input, "input") {
        Ok(command) => command,
        Err(e) => {
            return Ok(ToolResult {
                content: format!("Error: {}", e.message),
                is_error: true,
            })
        }
    };
    let call = Call {
        scope: &scope,
        memory_ref,
        subject,
    };
    let result = tool.execute(&call, &command).await;
    tracing::info!(
        tenant = %scope.tenant(),
        memory_ref = %ref_hash(memory_ref),
        command = command.name(),
        is_error = result.as_ref().map_or(None, |r| Some(r.is_error)),
        failed = result.is_err(),
        "memory tool"
    );
    Ok(result?)
}
