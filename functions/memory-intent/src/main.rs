//! `memory-intent`: the OpenIntent door (RFC-0015) behind its API key authorizer, the task-end
//! archive (its route, or a direct invoke by the engine), and the operator's API key commands
//! (IAM-authorised direct invokes). docs/openintent.md.

mod api;

use std::sync::Arc;

use intent_memory::api_key::{self, KeyRegistry, SECRET_BYTES};
use intent_memory::{Caller, IntentMemory, IntentPorts, Limits};
use lambda_adapter::{Answer, HttpTrigger};
use lambda_runtime::Error;
use memory_api::{decode, HttpResponse, WireError};
use memory_aws::keyed::DynamoKeyRegistry;
use memory_aws::AwsPorts;
use memory_core::ports::{Clock, IdSource, SystemClock, UlidIds};
use memory_core::{AgentId, TenantId};
use serde_json::{json, Value};

fn main() -> Result<(), Error> {
    lambda_adapter::start(serve())
}

async fn serve() -> Result<(), Error> {
    let ports = AwsPorts::from_env().await?;
    let defaults = Limits::default();
    let limits = Limits {
        working_per_task: lambda_adapter::env_number(
            "INTENT_WORKING_CAPACITY",
            defaults.working_per_task,
        )?,
        episodic_per_agent: lambda_adapter::env_number(
            "INTENT_EPISODIC_CAPACITY",
            defaults.episodic_per_agent,
        )?,
        versions_kept: lambda_adapter::env_number("INTENT_VERSIONS_KEPT", defaults.versions_kept)?
            .max(1),
        ..defaults
    };
    let secrets = memory_api::decode::configured_secrets()?;
    let redactor = memory_core::writer::registry_from(&secrets)
        .map_err(|e| format!("REDACTION_SECRETS: {e}"))?
        .redactor();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let ids: Arc<dyn IdSource> = Arc::new(UlidIds::default());
    let store = Arc::new(ports.keyed_store());
    let memory = IntentMemory::new(
        IntentPorts {
            store,
            archives: ports.archives.clone(),
            publisher: ports.events.clone(),
            clock: clock.clone(),
            ids: ids.clone(),
        },
        limits,
        Arc::new(redactor),
    )
    // Creates and updates count against the tenant's writes per minute (docs/quotas.md
    // "Limits").
    .with_quotas(Some(
        ports.entries.clone() as Arc<dyn memory_core::ports::QuotaStore>
    ));
    let keys = DynamoKeyRegistry::new(ports.dynamo.clone(), ports.table.clone());
    let (memory, keys, clock, ids) = (&memory, &keys, clock.as_ref(), ids.as_ref());
    lambda_adapter::run(Trigger::decode, |trigger| async move {
        match trigger {
            Trigger::Http { caller, request } => {
                Ok(lambda_adapter::serve_http(request, |r| async move {
                    let Some(caller) = caller else {
                        return HttpResponse::error(&memory_core::CoreError::NoTenant);
                    };
                    let request = api::Request {
                        method: &r.head.method,
                        path: &r.head.path,
                        query: &r.head.query.0,
                        if_match: r.header("if-match"),
                        body: &r.body,
                    };
                    memory_core::acting_tenant::acting_for(
                        Some(caller.tenant.as_str()),
                        api::handle(memory, &caller, &request),
                    )
                    .await
                })
                .await)
            }
            Trigger::Archive {
                tenant,
                agent,
                task,
            } => {
                let out = memory_core::acting_tenant::acting_for(
                    Some(tenant.as_str()),
                    memory.archive_task(&tenant, &agent, &task),
                )
                .await
                .map_err(|e| wire_of(&e))?;
                Ok(Answer::Json(json!({
                    "entriesArchived": out.entries_archived,
                    "archive": out.archive,
                })))
            }
            Trigger::IssueKey {
                tenant,
                agents,
                days,
            } => {
                let mut random = [0u8; SECRET_BYTES];
                getrandom::fill(&mut random).map_err(|_| WireError::internal())?;
                let now = clock.now();
                let issued = api_key::issue(ids.next_id(now), random, tenant, agents, now, days);
                keys.put(&issued.record)
                    .await
                    .map_err(|e| WireError::from(&memory_core::CoreError::Store(e)))?;
                tracing::info!(key_id = %issued.record.key_id, "api key issued");
                Ok(Answer::Json(json!({
                    "apiKey": issued.api_key,
                    "keyId": issued.record.key_id,
                    "tenantId": issued.record.tenant.as_str(),
                    "agents": issued.record.agents,
                    "expiresAt": issued.record.expires_at,
                })))
            }
            Trigger::RevokeKey { key_id } => {
                let revoked = keys
                    .revoke(&key_id, clock.now())
                    .await
                    .map_err(|e| WireError::from(&memory_core::CoreError::Store(e)))?;
                tracing::info!(key_id = %key_id, revoked, "api key revocation");
                Ok(Answer::Json(json!({"revoked": revoked, "keyId": key_id})))
            }
        }
    })
    .await
}

fn wire_of(e: &intent_memory::IntentError) -> WireError {
    match e {
        intent_memory::IntentError::Store(s) => {
            WireError::from(&memory_core::CoreError::Store(s.clone()))
        }
        other => WireError::validation("taskId", other.to_string()),
    }
}

/// What invokes this function.
enum Trigger {
    /// A route of the door; `caller` is what the authorizer verified (`None`: no context).
    Http {
        caller: Option<Caller>,
        request: HttpTrigger,
    },
    /// Task end, invoked by the engine: `{"op": "archiveTask", "tenantId", "agentId", "taskId"}`.
    Archive {
        tenant: TenantId,
        agent: AgentId,
        task: String,
    },
    /// `{"op": "issueApiKey", "tenantId", "agents": [...], "expiresInDays"?}`.
    IssueKey {
        tenant: TenantId,
        agents: Vec<String>,
        days: i64,
    },
    /// `{"op": "revokeApiKey", "keyId"}`.
    RevokeKey { key_id: String },
}

fn text<'a>(v: &'a Value, field: &str) -> Result<&'a str, WireError> {
    v.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| WireError::validation(field.to_owned(), format!("{field} is required")))
}

impl Trigger {
    fn decode(mut payload: Value) -> Result<Self, WireError> {
        if lambda_adapter::is_http_event(&payload) {
            // The authorizer's context, set by our own authorizer only (a client cannot
            // reach it): one tenant and one agent, both re-validated here.
            let context = payload
                .pointer_mut("/requestContext/authorizer/lambda")
                .map(Value::take)
                .unwrap_or(Value::Null);
            let caller = match (
                context.get("tenantId").and_then(Value::as_str),
                context.get("agentId").and_then(Value::as_str),
            ) {
                (Some(t), Some(a)) => match (TenantId::parse(t), AgentId::parse(a)) {
                    (Ok(tenant), Ok(agent)) => Some(Caller { tenant, agent }),
                    _ => None,
                },
                _ => None,
            };
            return Ok(Trigger::Http {
                caller,
                request: lambda_adapter::http_request(payload, ""),
            });
        }
        let (op, fields) = (text(&payload, "op")?, &payload);
        let tenant = |v: &Value| {
            TenantId::parse(text(v, "tenantId")?)
                .map_err(|_| WireError::validation("tenantId", "must be 1-128 of [A-Za-z0-9._-]"))
        };
        match op {
            "archiveTask" => Ok(Trigger::Archive {
                tenant: tenant(fields)?,
                agent: AgentId::parse(text(fields, "agentId")?).map_err(|_| {
                    WireError::validation("agentId", "must be 1-128 of [A-Za-z0-9._-]")
                })?,
                task: intent_memory::request::name("taskId", &json!(text(fields, "taskId")?), 255)
                    .map_err(|e| WireError::validation("taskId", e.to_string()))?,
            }),
            "issueApiKey" => {
                let agents: Vec<String> = decode::typed(
                    payload.get("agents").cloned().unwrap_or(Value::Null),
                    "agents",
                )?;
                let valid = !agents.is_empty()
                    && agents.len() <= 100
                    && agents
                        .iter()
                        .all(|a| a == api_key::ANY_AGENT || AgentId::parse(a).is_ok());
                if !valid {
                    return Err(WireError::validation(
                        "agents",
                        "1-100 agent ids ([A-Za-z0-9._-]) or \"*\"",
                    ));
                }
                let days = match payload.get("expiresInDays") {
                    None | Some(Value::Null) => 90,
                    Some(v) => v
                        .as_i64()
                        .filter(|d| (1..=api_key::MAX_KEY_DAYS).contains(d))
                        .ok_or_else(|| {
                            WireError::validation("expiresInDays", "an integer from 1 to 366")
                        })?,
                };
                Ok(Trigger::IssueKey {
                    tenant: tenant(&payload)?,
                    agents,
                    days,
                })
            }
            "revokeApiKey" => {
                // A pasted key is read for its id, so the secret part never reaches a log.
                let given = text(&payload, "keyId")?;
                let key_id = api_key::key_id_of(given).unwrap_or(given);
                if key_id.len() != 26 || !key_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    return Err(WireError::validation(
                        "keyId",
                        "a key id: 26 letters and digits",
                    ));
                }
                Ok(Trigger::RevokeKey {
                    key_id: key_id.to_owned(),
                })
            }
            _ => Err(WireError::validation(
                "op",
                "must be archiveTask, issueApiKey or revokeApiKey",
            )),
        }
    }
}
