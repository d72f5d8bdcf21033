//! `memory-exchange`: the OAP memory exchange door (RFC 0010). Public: the memory manifest and
//! the `did:web` document. Behind the JWT authorizer: issuing and revoking grants, reading the
//! tenant's receipt log. With a grant as bearer: the grantee's query. docs/oap.md.

mod api;

use std::sync::Arc;

use lambda_adapter::{Answer, HttpTrigger};
use lambda_runtime::Error;
use memory_api::{decode, WireError};
use memory_aws::exchange::signing_seed;
use memory_aws::AwsPorts;
use memory_core::ports::{SystemClock, UlidIds};
use memory_core::TenantId;
use oap_exchange::manifest::{manifest, EmbeddingProfile};
use oap_exchange::{
    Exchange, ExchangeError, ExchangePorts, ExportRequest, Grant, HostKey, ImportRequest,
};
use serde_json::Value;

fn main() -> Result<(), Error> {
    lambda_adapter::start(serve())
}

fn setting(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `did:web` of a base URL: its host, with a port percent-encoded (did:web's rule).
fn did_of(base_url: &str) -> Option<String> {
    let host = base_url.split("://").nth(1)?.split('/').next()?;
    (!host.is_empty()).then(|| format!("did:web:{}", host.replace(':', "%3A")))
}

/// The door as one deployment serves it: its identity and public documents are fixed by its
/// base URL, which is `OAP_PUBLIC_URL` or, unset, the API's own domain as the first request names
/// it (`requestContext.domainName`; the template cannot pass an API's URL to its own function).
struct Door {
    exchange: Exchange,
    docs: api::Documents,
}

fn build(
    ports: &AwsPorts,
    seed: &[u8],
    redactor: &Arc<memory_core::Redactor>,
    base_url: &str,
) -> Result<Door, String> {
    let base_url = base_url.trim_end_matches('/');
    let did = match setting("OAP_DID") {
        Some(d) => d,
        None => did_of(base_url).ok_or("the public URL must be an http(s) URL")?,
    };
    let key = HostKey::from_seed(&did, seed).map_err(|e| e.to_string())?;
    let embedding = ports.embedding_model.clone().map(|model| EmbeddingProfile {
        model,
        dimensions: ports.embedding_dimensions,
    });
    let docs = api::Documents {
        manifest: manifest(&did, base_url, embedding.as_ref()),
        did: key.did_document(base_url),
    };
    let exchange = Exchange::new(
        ExchangePorts {
            grants: Arc::new(ports.exchange_store()),
            bundles: Arc::new(ports.archives.bundles()),
            entries: ports.entries.clone(),
            publisher: ports.events.clone(),
            clock: Arc::new(SystemClock),
            ids: Arc::new(UlidIds::default()),
        },
        key,
        redactor.clone(),
    )
    // Imports are refused over the tenant's quotas (docs/quotas.md "Limits").
    .with_quotas(Some(
        ports.entries.clone() as Arc<dyn memory_core::ports::QuotaStore>
    ));
    Ok(Door { exchange, docs })
}

async fn serve() -> Result<(), Error> {
    let ports = AwsPorts::from_env().await?;
    let secret = setting("OAP_SIGNING_SECRET")
        .ok_or("OAP_SIGNING_SECRET is required (the signing seed's secret)")?;
    let seed = signing_seed(&ports.secrets, &secret)
        .await
        .map_err(|e| format!("signing key: {e}"))?;
    // Imports pass every string through SR-1 with the host's configured secrets.
    let secrets = memory_api::decode::configured_secrets()?;
    let redactor = Arc::new(
        memory_core::writer::registry_from(&secrets)
            .map_err(|e| format!("REDACTION_SECRETS: {e}"))?
            .redactor(),
    );
    let door = tokio::sync::OnceCell::new();
    if let Some(url) = setting("OAP_PUBLIC_URL") {
        let built = build(&ports, &seed, &redactor, &url)?;
        let _ = door.set(built);
    }
    let claim = lambda_adapter::tenant_claim_name();
    let (ports, seed, redactor, door, claim) =
        (&ports, seed.as_slice(), &redactor, &door, claim.as_str());
    lambda_adapter::run(Trigger::decode(claim), |trigger| async move {
        let domain = match &trigger {
            Trigger::Http { domain, .. } => domain.clone(),
            Trigger::Sweep { public_url } => public_url.clone(),
            _ => None,
        };
        let door = door
            .get_or_try_init(|| async {
                build(ports, seed, redactor, domain.as_deref().unwrap_or_default())
            })
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "exchange door not configured");
                memory_api::WireError::internal()
            })?;
        let (exchange, docs) = (&door.exchange, &door.docs);
        match trigger {
            Trigger::Http { request, .. } => {
                Ok(lambda_adapter::serve_http(request, |r| async move {
                    let bearer = r.header("authorization").and_then(|v| {
                        let v = v.trim();
                        v.get(..7)
                            .filter(|p| p.eq_ignore_ascii_case("bearer "))
                            .map(|_| v[7..].trim())
                    });
                    let request = api::Request {
                        method: &r.head.method,
                        path: &r.head.path,
                        query: &r.head.query.0,
                        tenant: r.head.tenant_claim.as_deref(),
                        bearer,
                        body: &r.body,
                    };
                    // Reads and writes run as the tenant the credential names: the JWT's, or the
                    // granter's of a grant this host signed (tenant-scoped credentials).
                    let acting = match (request.tenant, bearer) {
                        (Some(t), _) => Some(t.to_owned()),
                        (None, Some(token)) => Grant::from_bearer(exchange.key(), token)
                            .ok()
                            .and_then(|g| {
                                oap_exchange::grant::tenant_of_granter(
                                    exchange.key().did(),
                                    &g.granter,
                                )
                            })
                            .map(|t| t.as_str().to_owned()),
                        _ => None,
                    };
                    memory_core::acting_tenant::acting_for(
                        acting.as_deref(),
                        api::handle(exchange, docs, &request),
                    )
                    .await
                })
                .await)
            }
            Trigger::Export { tenant, request } => {
                let out = as_tenant(&tenant, exchange.export(&tenant, request)).await?;
                Ok(Answer::Json(out))
            }
            Trigger::Sweep { .. } => {
                let due = exchange.due_expiries().await.map_err(|e| api::wire(&e))?;
                for entry in &due {
                    as_tenant(&entry.tenant, exchange.expire(entry)).await?;
                }
                tracing::info!(expired = due.len(), "expiry sweep");
                Ok(Answer::Json(serde_json::json!({"expired": due.len()})))
            }
            Trigger::Import { tenant, request } => {
                let out = as_tenant(&tenant, exchange.import(&tenant, request)).await?;
                Ok(Answer::Json(out))
            }
        }
    })
    .await
}

/// `work` run as `tenant` (tenant-scoped credentials), its error as the door answers it.
async fn as_tenant<T>(
    tenant: &TenantId,
    work: impl std::future::Future<Output = Result<T, ExchangeError>>,
) -> Result<T, WireError> {
    memory_core::acting_tenant::acting_for(Some(tenant.as_str()), work)
        .await
        .map_err(|e| api::wire(&e))
}

/// What invokes this function.
enum Trigger {
    /// A route of the door; `domain` is the API's own (`requestContext.domainName`).
    Http {
        domain: Option<String>,
        request: HttpTrigger,
    },
    /// `{"op": "export", "tenantId", "scope_id", "url_seconds"?}`, a direct invoke (IAM): an
    /// export of a ref too large for the HTTP API's 30 s, with the function's own timeout.
    Export {
        tenant: TenantId,
        request: ExportRequest,
    },
    /// `{"op": "import", "tenantId", "scope_id", "manifest" | "letta_agent_file"}`, likewise.
    Import {
        tenant: TenantId,
        request: ImportRequest,
    },
    /// `{"op": "sweep", "publicUrl"?}`, hourly from the scheduler: announces the expiry of
    /// grants nobody queried after it. `publicUrl` is the door's, for a container that has not
    /// served a request yet (the schedule names the API's URL).
    Sweep { public_url: Option<String> },
}

impl Trigger {
    fn decode(claim: &str) -> impl Fn(Value) -> Result<Trigger, WireError> + '_ {
        move |mut payload: Value| {
            if lambda_adapter::is_http_event(&payload) {
                let domain = payload
                    .pointer("/requestContext/domainName")
                    .and_then(Value::as_str)
                    .map(|d| format!("https://{d}"));
                return Ok(Trigger::Http {
                    domain,
                    request: lambda_adapter::http_request(payload, claim),
                });
            }
            let fields = payload
                .as_object_mut()
                .ok_or_else(|| WireError::validation("payload", "a JSON object"))?;
            let op = fields
                .remove("op")
                .and_then(|v| v.as_str().map(str::to_owned));
            if op.as_deref() == Some("sweep") {
                let public_url = fields
                    .remove("publicUrl")
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .filter(|u| u.starts_with("https://") || u.starts_with("http://"));
                return Ok(Trigger::Sweep { public_url });
            }
            let tenant = fields
                .remove("tenantId")
                .and_then(|v| v.as_str().and_then(|t| TenantId::parse(t).ok()))
                .ok_or_else(|| {
                    WireError::validation("tenantId", "must be 1-128 of [A-Za-z0-9._-]")
                })?;
            match op.as_deref() {
                Some("export") => Ok(Trigger::Export {
                    tenant,
                    request: decode::typed(payload, "payload")?,
                }),
                Some("import") => Ok(Trigger::Import {
                    tenant,
                    request: decode::typed(payload, "payload")?,
                }),
                _ => Err(WireError::validation(
                    "op",
                    "must be export, import or sweep",
                )),
            }
        }
    }
}
