//! The MCP server of wop-memory (Model Context Protocol, Streamable HTTP transport, docs/api.md
//! "The MCP server"), built on the official Rust SDK (`rmcp`): its `ServerHandler` trait, model
//! types and `StreamableHttpService`, the transport, in stateless mode with JSON responses (every
//! POST is answered whole, no session is kept, so any Lambda instance can answer any request).
//!
//! `rmcp` serves HTTP as a tower service; nothing here runs a server. The Lambda adapter hands
//! [`McpDoor::handle`] one API Gateway request at a time, this builds the `http::Request` the
//! service expects, with the tenant of the verified JWT in its extensions (never from a header
//! or the body, which the client controls), awaits the response and returns it whole.

mod tools;

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use memory_api::{HttpResponse, WireError};
use memory_core::CoreError;
use memory_guard::TenantId;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use tools::{tools, Services};

/// The largest request body the transport reads (API Gateway's own limit is 10 MB; a write of
/// 25 entries of 64 KiB with their JSON fits well below this).
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The tenant of the verified JWT, as the adapter put it into the request's extensions.
#[derive(Clone, Debug)]
struct VerifiedTenant(TenantId);

#[derive(Clone)]
struct MemoryServer(Arc<Services>);

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("wop-memory", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Agent memory of your tenant. Every tool takes the memoryRef \
                 workspaces/{tenantId}/agents/{agentId}/memories of the memory to use. Search \
                 before you write; give secrets to memory_write so they are redacted; pass a \
                 subject when an entry is about a person, so memory_forget can remove it.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tenant = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<VerifiedTenant>())
            .map(|t| t.0.clone());
        // Acts for the verified tenant here, inside whatever task the transport runs the call
        // on (task-locals do not cross a spawn): tenant-scoped credentials sign its data calls.
        let acting = tenant.as_ref().map(|t| t.as_str().to_owned());
        let result = memory_core::acting_tenant::acting_for(
            acting.as_deref(),
            self.0.call(
                tenant.as_ref(),
                &request.name,
                request.arguments.unwrap_or_default(),
            ),
        )
        .await;
        Ok(result.into())
    }
}

/// One request as the Lambda adapter decoded it.
pub struct McpRequest<'a> {
    pub method: &'a str,
    /// Names lower-cased.
    pub headers: &'a [(String, String)],
    pub body: &'a str,
    pub tenant_claim: Option<&'a str>,
}

/// The transport's answer, whole.
#[derive(Debug, PartialEq)]
pub struct McpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl McpResponse {
    fn envelope(e: &WireError) -> Self {
        let out = HttpResponse::wire_error(e);
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        headers.extend(
            out.headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone())),
        );
        McpResponse {
            status: out.status,
            headers,
            body: out.body.to_string(),
        }
    }
}

/// `/v1/host/wop-memory/mcp`: the MCP endpoint.
#[derive(Clone)]
pub struct McpDoor {
    service: StreamableHttpService<MemoryServer, NeverSessionManager>,
}

impl McpDoor {
    pub fn new(services: Services) -> Self {
        let server = MemoryServer(Arc::new(services));
        // Stateless with JSON responses: no session to route back to an instance, no stream to
        // keep open past the invocation. Host validation guards servers on a developer's
        // machine against DNS rebinding; this one sits behind API Gateway and a JWT authorizer
        // under the API's own domain names, so it is off.
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .with_max_request_body_bytes(MAX_BODY_BYTES)
            .disable_allowed_hosts();
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(NeverSessionManager::default()),
            config,
        );
        McpDoor { service }
    }

    /// Answers one request. Without a verified tenant the answer is the REST `401` envelope,
    /// before the transport sees anything, as on every other route.
    pub async fn handle(&self, request: &McpRequest<'_>) -> McpResponse {
        let Some(tenant) = request.tenant_claim.and_then(|t| TenantId::parse(t).ok()) else {
            return McpResponse::envelope(&WireError::from(CoreError::NoTenant));
        };
        let mut builder = http::Request::builder()
            .method(request.method)
            .uri("/v1/host/wop-memory/mcp");
        for (name, value) in request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        // The transport refuses a request without `Host`; API Gateway always sends one, a
        // direct test invoke may not.
        if !request.headers.iter().any(|(name, _)| name == "host") {
            builder = builder.header("host", "localhost");
        }
        let Ok(mut http_request) =
            builder.body(Full::<Bytes>::new(Bytes::from(request.body.to_owned())))
        else {
            return McpResponse::envelope(&WireError::validation(
                "headers",
                "the request line or a header is not valid HTTP",
            ));
        };
        http_request.extensions_mut().insert(VerifiedTenant(tenant));
        let response = self.service.handle(http_request).await;
        let (parts, body) = response.into_parts();
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(never) => match never {},
        };
        let mut headers: Vec<(String, String)> = parts
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        // The transport's own refusals (406, 415, ...) are a reason in plain text without a
        // media type; say which, as the OpenAPI does, so a client need not guess.
        if !bytes.is_empty() && !headers.iter().any(|(k, _)| k == "content-type") {
            headers.push((
                "content-type".to_owned(),
                "text/plain; charset=utf-8".to_owned(),
            ));
        }
        McpResponse {
            status: parts.status.as_u16(),
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }
}
