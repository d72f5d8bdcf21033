//! Forget (docs/api.md "Forget (direct invoke)"): direct invoke `{"tenantId", "subject"}`, or the
//! POST route with `{"subject"}` and the tenant from the JWT. The subject is never logged.

use memory_core::acting_tenant::acting_for;
use memory_core::forget::Forgetter;
use memory_core::CoreError;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{decode, HttpResponse, WireError};

/// A direct invoke `{"tenantId", "subject"}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirectForget {
    tenant_id: String,
    subject: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpForget {
    subject: String,
}

fn emit(counts: &memory_core::events::ForgetCounts) {
    crate::metrics::emit(&[
        ("EntriesForgotten", counts.deleted_entries as u64),
        ("ArchivesForgotten", counts.deleted_archives as u64),
        ("IndexesRebuilt", counts.rebuilt_indexes as u64),
        ("CommitmentsCancelled", counts.cancelled_commitments as u64),
    ]);
}

pub async fn handle_direct(
    forgetter: &Forgetter,
    request: DirectForget,
) -> Result<Value, WireError> {
    let tenant = Some(request.tenant_id.as_str());
    let counts = acting_for(
        tenant,
        forgetter.forget(&request.tenant_id, &request.subject),
    )
    .await?;
    emit(&counts);
    Ok(json!(counts))
}

/// `POST /v1/host/wop-memory/forget`; `body` is the raw request body. The route answers 405 for
/// any other method (API Gateway routes `ANY` here so the answer is ours, in the envelope).
pub async fn handle_http(
    forgetter: &Forgetter,
    method: &str,
    tenant_claim: Option<&str>,
    body: &str,
) -> HttpResponse {
    if !method.eq_ignore_ascii_case("POST") {
        return HttpResponse::wire_error(&WireError::method_not_allowed("POST"));
    }
    let run = async {
        let tenant = tenant_claim.ok_or(CoreError::NoTenant)?;
        if memory_guard::TenantId::parse(tenant).is_err() {
            return Err(CoreError::NoTenant.into());
        }
        let request: HttpForget = decode::typed(decode::json(body)?, "")?;
        let counts = forgetter.forget(tenant, &request.subject).await?;
        emit(&counts);
        Ok::<_, WireError>(json!(counts))
    };
    match acting_for(tenant_claim, run).await {
        Ok(body) => HttpResponse::ok(body),
        Err(e) => HttpResponse::wire_error(&e),
    }
}
