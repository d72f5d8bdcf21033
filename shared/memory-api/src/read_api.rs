//! The read API of docs/api.md "The read API (HTTP)" (`openwop-agent-memory.md` MemoryAdapter
//! list/get, the RFC 0080 capability document), tenant taken from the JWT claim. Routing accepts
//! any prefix before `/v1/host/wop-memory/` so a named API Gateway stage in the path changes
//! nothing.

use memory_core::acting_tenant::acting_for;
use memory_core::capabilities::HostMemoryModel;
use memory_core::listing::{parse_limit, ListOptions};
use memory_core::metering::{self, UsageStore};
use memory_core::reader::MemoryReader;
use memory_core::ref_index::SearchPath;
use memory_core::search::{SearchMode, SearchOptions};
use memory_core::tag_filter::TagFilter;
use memory_core::CoreError;
use memory_guard::{TenantId, TenantScope};
use serde_json::json;
use std::sync::Arc;

use crate::{ref_hash, HttpResponse};

const BASE: &str = "/v1/host/wop-memory/";

/// The query string's parameters in request order, names and values percent-decoded. A name can
/// repeat (`tag=a&tag=b`), which is why this is not a map: API Gateway's own
/// `queryStringParameters` joins repeated values with commas, and a tag may contain a comma.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    /// A parameter that means one value; given twice it is a client error, not a guess.
    pub fn single(&self, name: &str) -> Result<Option<&str>, CoreError> {
        let mut values = self.0.iter().filter(|(k, _)| k == name).map(|(_, v)| v);
        match (values.next(), values.next()) {
            (first, None) => Ok(first.map(String::as_str)),
            (Some(_), Some(_)) => Err(CoreError::invalid(name, "give this parameter once")),
            (None, Some(_)) => Ok(None),
        }
    }

    /// Every value of a repeatable parameter, in request order.
    pub fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Query {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        Query(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

/// What the handler extracted from the API Gateway event.
#[derive(Clone, Debug, Default)]
pub struct ReadRequest {
    pub method: String,
    pub path: String,
    pub query: Query,
    /// The tenant claim of the verified JWT, if present.
    pub tenant_claim: Option<String>,
}

#[derive(Clone)]
pub struct ReadApi {
    reader: MemoryReader,
    model: HostMemoryModel,
    /// The usage route's store (docs/metering.md "The usage API"); `None`: the route is absent.
    usage: Option<Arc<dyn UsageStore>>,
}

enum Route<'a> {
    List,
    Search,
    Get(&'a str),
    Capabilities,
    Usage,
}

fn route(path: &str) -> Option<Route<'_>> {
    let rest = &path[path.find(BASE)? + BASE.len()..];
    match rest.split_once('/') {
        None if rest == "entries" => Some(Route::List),
        None if rest == "search" => Some(Route::Search),
        None if rest == "capabilities" => Some(Route::Capabilities),
        None if rest == "usage" => Some(Route::Usage),
        Some(("entries", id)) if !id.is_empty() && !id.contains('/') => Some(Route::Get(id)),
        _ => None,
    }
}

impl ReadApi {
    pub fn new(reader: MemoryReader, model: HostMemoryModel) -> Self {
        ReadApi {
            reader,
            model,
            usage: None,
        }
    }

    /// Serves `GET .../usage` from `store`.
    pub fn with_usage(mut self, store: Option<Arc<dyn UsageStore>>) -> Self {
        self.usage = store;
        self
    }

    /// Acts for the verified claim's tenant (tenant-scoped credentials sign the reads with it).
    pub async fn handle(&self, request: &ReadRequest) -> HttpResponse {
        let tenant = request.tenant_claim.as_deref();
        match acting_for(tenant, self.dispatch(request)).await {
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
        let query = &request.query;
        if let Route::Usage = route {
            return self.usage(&tenant, query).await;
        }
        let scope = TenantScope::new(tenant);
        let memory_ref = query
            .single("memoryRef")?
            .ok_or_else(|| CoreError::invalid("memoryRef", "query parameter is required"))?;
        match route {
            Route::List => {
                let options = ListOptions {
                    limit: query.single("limit")?.map(parse_limit).transpose()?,
                    tags: TagFilter::new(query.all("tag"), query.all("anyTag"))?,
                    cursor: query.single("cursor")?.map(str::to_owned),
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
            Route::Search => {
                let stem = match query.single("stem")? {
                    None | Some("true") => true,
                    Some("false") => false,
                    Some(_) => return Err(CoreError::invalid("stem", "true or false")),
                };
                let tags = TagFilter::new(query.all("tag"), query.all("anyTag"))?;
                let limit = query.single("limit")?.map(parse_limit).transpose()?;
                let q = query.single("q")?.unwrap_or_default();
                let mode = query.single("mode")?.map(SearchMode::parse).transpose()?;
                let options =
                    SearchOptions::new(q, tags, limit, stem)?.with_mode(mode.unwrap_or_default());
                let results = self.reader.search(&scope, memory_ref, &options).await?;
                tracing::info!(
                    tenant = %scope.tenant(),
                    memory_ref = %ref_hash(memory_ref),
                    results = results.results.len(),
                    mode = ?options.mode,
                    unembedded = results.unembedded,
                    path = ?results.path,
                    "search"
                );
                // Which way the search went (docs/search.md "The index"): a fallback means an
                // index that could not be read or verified, the figure an alarm watches.
                crate::metrics::emit(&[match results.path {
                    SearchPath::Index => ("SearchIndexServed", 1),
                    SearchPath::Scan => ("SearchScans", 1),
                    SearchPath::Fallback => ("SearchIndexFallbacks", 1),
                }]);
                crate::metrics::emit_pressure(&results.pressure);
                // Semantic and hybrid only: entries the ranking could not compare, the figure
                // an alarm on a stalled embed pass watches (docs/operating.md).
                if let Some(unembedded) = results.unembedded {
                    crate::metrics::emit(&[
                        ("SemanticSearches", 1),
                        ("SearchUnembedded", unembedded as u64),
                    ]);
                }
                Ok(HttpResponse::ok(json!(results)))
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
            Route::Usage => Err(CoreError::NotFound),
        }
    }

    /// The calling tenant's usage by day and what it stores now. The tenant is the verified
    /// claim's and nothing else: the route takes no tenant parameter, so there is no way to ask
    /// for another tenant's.
    async fn usage(&self, tenant: &TenantId, query: &Query) -> Result<HttpResponse, CoreError> {
        let Some(store) = &self.usage else {
            return Err(CoreError::NotFound);
        };
        let days = metering::day_range(query.single("from")?, query.single("to")?)?;
        let now = self.reader.now();
        let (used, stored) = metering::usage_of(store.as_ref(), tenant, &days, now).await?;
        tracing::info!(tenant = %tenant, days = days.len(), reported = used.len(), "usage");
        Ok(HttpResponse::ok(json!({
            "from": days.first(),
            "to": days.last(),
            "days": used,
            "now": stored,
        })))
    }
}
