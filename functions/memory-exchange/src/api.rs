//! The exchange door's routes (docs/oap.md "Routes") and the one place its errors become HTTP
//! statuses. Errors use the host's envelope (`{"error", "message", "details"?}`); messages name
//! fields and fixed reasons, never a token, a value or content.

use memory_api::{HttpResponse, WireError};
use memory_core::TenantId;
use oap_exchange::{Exchange, ExchangeError};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub const MANIFEST_PATH: &str = "/.well-known/oap-memory.json";
pub const DID_PATH: &str = "/.well-known/did.json";
pub const GRANT_PATH: &str = "/oap/memory/grant";
pub const QUERY_PATH: &str = "/oap/memory/query";
pub const RECEIPTS_PATH: &str = "/oap/memory/receipts";
pub const EXPORT_PATH: &str = "/oap/memory/export";
pub const IMPORT_PATH: &str = "/oap/memory/import";

/// What a route needs of the request.
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a [(String, String)],
    /// The tenant of a verified JWT (grant, revoke, receipts).
    pub tenant: Option<&'a str>,
    /// `Authorization: Bearer <grant>` (query).
    pub bearer: Option<&'a str>,
    pub body: &'a str,
}

/// The public documents, built once at start.
pub struct Documents {
    pub manifest: Value,
    pub did: Value,
}

pub fn wire(e: &ExchangeError) -> WireError {
    match e {
        ExchangeError::Invalid { field, reason } => {
            WireError::validation(field.clone(), reason.clone())
        }
        ExchangeError::GrantRefused(_) => WireError::unauthenticated(e.to_string()),
        ExchangeError::NotCovered(_) | ExchangeError::NotRevocable => {
            WireError::forbidden(e.to_string())
        }
        ExchangeError::NotFound => WireError::not_found(e.to_string()),
        ExchangeError::Config(_) => WireError::internal(),
        ExchangeError::Store(s) => WireError::from(&memory_core::CoreError::Store(s.clone())),
    }
}

fn body<T: DeserializeOwned>(raw: &str) -> Result<T, WireError> {
    memory_api::decode::typed(
        serde_json::from_str(raw).map_err(|_| WireError::validation("body", "a JSON object"))?,
        "body",
    )
}

fn tenant(r: &Request<'_>) -> Result<TenantId, WireError> {
    r.tenant
        .and_then(|t| TenantId::parse(t).ok())
        .ok_or_else(|| WireError::from(&memory_core::CoreError::NoTenant))
}

fn number(r: &Request<'_>, name: &str, default: u64) -> Result<u64, WireError> {
    match r.query.iter().find(|(k, _)| k == name) {
        None => Ok(default),
        Some((_, v)) => v
            .parse()
            .map_err(|_| WireError::validation(name.to_owned(), "a whole number")),
    }
}

/// Answers one request of the door.
pub async fn handle(exchange: &Exchange, docs: &Documents, r: &Request<'_>) -> HttpResponse {
    match route(exchange, docs, r).await {
        Ok(body) => HttpResponse::ok(body),
        Err(e) => HttpResponse::wire_error(&e),
    }
}

async fn route(exchange: &Exchange, docs: &Documents, r: &Request<'_>) -> Result<Value, WireError> {
    let revoke_id = r
        .path
        .strip_prefix(GRANT_PATH)
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.strip_suffix("/revoke"))
        .filter(|id| !id.is_empty() && !id.contains('/'));
    let answer = match (r.method, r.path) {
        ("GET", MANIFEST_PATH) => return Ok(docs.manifest.clone()),
        ("GET", DID_PATH) => return Ok(docs.did.clone()),
        ("POST", GRANT_PATH) => {
            let tenant = tenant(r)?;
            exchange.grant(&tenant, body(r.body)?).await
        }
        ("POST", QUERY_PATH) => exchange.query(r.bearer, body(r.body)?).await,
        ("POST", EXPORT_PATH) => {
            let tenant = tenant(r)?;
            exchange.export(&tenant, body(r.body)?).await
        }
        ("POST", IMPORT_PATH) => {
            let tenant = tenant(r)?;
            exchange.import(&tenant, body(r.body)?).await
        }
        ("GET", RECEIPTS_PATH) => {
            let tenant = tenant(r)?;
            let from = number(r, "from", 0)?;
            let limit = number(r, "limit", 100)?;
            if !(1..=1000).contains(&limit) {
                return Err(WireError::validation("limit", "1 to 1000"));
            }
            exchange.receipts(&tenant, from, limit as u32).await
        }
        ("POST", _) if revoke_id.is_some() => {
            let tenant = tenant(r)?;
            exchange
                .revoke(&tenant, revoke_id.unwrap_or_default())
                .await
        }
        (_, MANIFEST_PATH | DID_PATH | RECEIPTS_PATH) => {
            return Err(WireError::method_not_allowed("GET"))
        }
        (_, GRANT_PATH | QUERY_PATH | EXPORT_PATH | IMPORT_PATH) => {
            return Err(WireError::method_not_allowed("POST"))
        }
        _ => return Err(WireError::no_route()),
    };
    answer.map_err(|e| wire(&e))
}
