//! The read API of README §The contracts (`openwop-agent-memory.md` MemoryAdapter list/get, the
//! RFC 0080 capability document), tenant taken from the JWT claim. Routing accepts any prefix
//! before `/v1/host/wop-memory/` so a named API Gateway stage in the path changes nothing.

use std::collections::HashMap;

use memory_core::capabilities::HostMemoryModel;
use memory_core::listing::{parse_limit, ListOptions};
use memory_core::reader::MemoryReader;
use memory_core::CoreError;
use memory_guard::{TenantId, TenantScope};
use serde_json::json;

use crate::{ref_hash, HttpResponse};

const BASE: &str = "/v1/host/wop-memory/";

/// What the handler extracted from the API Gateway event.
#[derive(Clone, Debug, Default)]
pub struct ReadRequest {
    pub method: String,
    pub path: String,
    pub query: HashMap<String, String>,
    /// The tenant claim of the verified JWT, if present.
    pub tenant_claim: Option<String>,
}

#[derive(Clone)]
pub struct ReadApi {
    reader: MemoryReader,
    model: HostMemoryModel,
}

enum Route<'a> {
    List,
    Get(&'a str),
    Capabilities,
}

fn route(path: &str) -> Option<Route<'_>> {
    let rest = &path[path.find(BASE)? + BASE.len()..];
    match rest.split_once('/') {
        None if rest == "entries" => Some(Route::List),
        None if rest == "capabilities" => Some(Route::Capabilities),
        Some(("entries", id)) if !id.is_empty() && !id.contains('/') => Some(Route::Get(id)),
        _ => None,
    }
}

impl ReadApi {
    pub fn new(reader: MemoryReader, model: HostMemoryModel) -> Self {
        ReadApi { reader, model }
    }

    pub async fn handle(&self, request: &ReadRequest) -> HttpResponse {
        match self.dispatch(request).await {
            Ok(response) => response,
            Err(e) => HttpResponse::error(&e),
        }
    }

    async fn dispatch(&self, request: &ReadRequest) -> Result<HttpResponse, CoreError> {
        let Some(route) = route(&request.path).filter(|_| request.method == "GET") else {
            return Err(CoreError::NotFound);
        };
        if let Route::Capabilities = route {
            return Ok(HttpResponse::ok(self.model.document()));
        }
        let tenant = request
            .tenant_claim
            .as_deref()
            .and_then(|t| TenantId::parse(t).ok())
            .ok_or(CoreError::NoTenant)?;
        let scope = TenantScope::new(tenant);
        let memory_ref = request
            .query
            .get("memoryRef")
            .ok_or_else(|| CoreError::invalid("memoryRef", "query parameter is required"))?;
        match route {
            Route::List => {
                let options = ListOptions {
                    limit: request
                        .query
                        .get("limit")
                        .map(|l| parse_limit(l))
                        .transpose()?,
                    tag: request.query.get("tag").cloned(),
                    cursor: request.query.get("cursor").cloned(),
                };
                let page = self.reader.list(&scope, memory_ref, &options).await?;
                tracing::info!(
                    tenant = %scope.tenant(),
                    memory_ref = %ref_hash(memory_ref),
                    entries = page.entries.len(),
                    more = page.next_cursor.is_some(),
                    "list"
                );
                Ok(HttpResponse::ok(json!(page)))
            }
            Route::Get(id) => {
                let entry = self.reader.get(&scope, memory_ref, id).await?;
                tracing::info!(
                    tenant = %scope.tenant(),
                    memory_ref = %ref_hash(memory_ref),
                    found = entry.is_some(),
                    "get"
                );
                entry
                    .map(|e| HttpResponse::ok(json!(e)))
                    .ok_or(CoreError::NotFound)
            }
            Route::Capabilities => Ok(HttpResponse::ok(self.model.document())),
        }
    }
}
