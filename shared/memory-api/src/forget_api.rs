//! Forget (DESIGN.md §Wire shapes): direct invoke `{"tenantId", "subject"}`, or the POST route
//! with `{"subject"}` and the tenant from the JWT. The subject is never logged.

use memory_core::forget::Forgetter;
use memory_core::CoreError;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::HttpResponse;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DirectForget {
    tenant_id: String,
    subject: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpForget {
    subject: String,
}

fn bad_payload(e: &serde_json::Error) -> CoreError {
    CoreError::invalid(
        "payload",
        format!(
            "expected {{\"subject\"}} (line {}, column {})",
            e.line(),
            e.column()
        ),
    )
}

fn emit(counts: &memory_core::events::ForgetCounts) {
    crate::metrics::emit(&[
        ("EntriesForgotten", counts.deleted_entries as u64),
        ("ArchivesForgotten", counts.deleted_archives as u64),
        ("IndexesRebuilt", counts.rebuilt_indexes as u64),
        ("CommitmentsCancelled", counts.cancelled_commitments as u64),
    ]);
}

pub async fn handle_direct(forgetter: &Forgetter, payload: Value) -> Result<Value, CoreError> {
    let request: DirectForget = serde_json::from_value(payload).map_err(|e| bad_payload(&e))?;
    let counts = forgetter
        .forget(&request.tenant_id, &request.subject)
        .await?;
    emit(&counts);
    Ok(json!(counts))
}

/// `POST /v1/host/wop-memory/forget`; `body` is the raw request body.
pub async fn handle_http(
    forgetter: &Forgetter,
    tenant_claim: Option<&str>,
    body: &str,
) -> HttpResponse {
    let run = async {
        let tenant = tenant_claim.ok_or(CoreError::NoTenant)?;
        if memory_guard::TenantId::parse(tenant).is_err() {
            return Err(CoreError::NoTenant);
        }
        let request: HttpForget = serde_json::from_str(body).map_err(|e| bad_payload(&e))?;
        let counts = forgetter.forget(tenant, &request.subject).await?;
        emit(&counts);
        Ok(json!(counts))
    };
    match run.await {
        Ok(body) => HttpResponse::ok(body),
        Err(e) => HttpResponse::error(&e),
    }
}
