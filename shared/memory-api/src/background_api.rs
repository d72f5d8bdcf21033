//! The three ways a scheduled pass (dream, consolidation) is started, decoded in one place:
//! - the schedule's input `{"action": "fan-out"}`: queue one job per ref with pending work;
//! - an SQS batch of those jobs (`{"Records": [...]}`): run each, and report the failed ones as
//!   `batchItemFailures` so only they are retried (and reach the dead-letter queue eventually);
//! - a direct invoke `{"tenantId", "memoryRef", ...}`: run one ref now and return its result.

use async_trait::async_trait;
use memory_core::background::fan_out;
use memory_core::ports::{EntryStore, Job, JobQueue, WorkKind};
use memory_core::CoreError;
use serde_json::{json, Value};

use crate::{ref_hash, WireError};

/// The redactor of a pass invoked with the run's BYOK secrets (`"secrets": [{"secretId",
/// "value"}]` in a direct invoke); queued jobs carry none and still keep existing markers whole.
pub fn run_redactor(options: &Value) -> Result<memory_guard::Redactor, CoreError> {
    let secrets: Vec<memory_core::writer::SecretInput> = match options.get("secrets") {
        Some(v) => crate::decode::typed(v.clone(), "secrets").map_err(|e| {
            CoreError::invalid(e.field.unwrap_or_else(|| "secrets".into()), e.message)
        })?,
        None => Vec::new(),
    };
    Ok(memory_core::writer::registry_from(&secrets)?.redactor())
}

/// One ref's pass, as the function binary wires it.
#[async_trait]
pub trait RefPass: Send + Sync {
    fn kind(&self) -> WorkKind;

    /// `options` is the direct-invoke payload (e.g. `tokenBudget`); jobs from the queue pass `{}`.
    async fn run(
        &self,
        tenant_id: &str,
        memory_ref: &str,
        options: &Value,
    ) -> Result<Value, CoreError>;
}

pub async fn handle(
    pass: &dyn RefPass,
    store: &dyn EntryStore,
    queue: Option<&dyn JobQueue>,
    payload: Value,
) -> Result<Value, WireError> {
    if !payload.is_object() {
        return Err(WireError::validation("payload", EXPECTED));
    }
    match payload.get("action") {
        None => {}
        Some(Value::String(a)) if a == "fan-out" => {}
        Some(_) => {
            return Err(WireError::validation(
                "action",
                "action: expected \"fan-out\"",
            ))
        }
    }
    if payload.get("action").is_some() {
        let queue = queue.ok_or_else(|| {
            CoreError::invalid("action", "no work queue configured (WORK_QUEUE_URL)")
        })?;
        let report = fan_out(store, queue, pass.kind()).await?;
        return Ok(json!(report));
    }
    if let Some(records) = payload.get("Records").and_then(Value::as_array) {
        let mut failures = Vec::new();
        for record in records {
            let id = record
                .get("messageId")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let job = record
                .get("body")
                .and_then(Value::as_str)
                .and_then(|b| serde_json::from_str::<Job>(b).ok());
            let Some(job) = job.filter(|j| j.kind == pass.kind()) else {
                // A job this function cannot read will never succeed: drop it loudly rather
                // than retry it forever.
                tracing::error!(message_id = id, "unreadable job dropped");
                continue;
            };
            if let Err(e) = pass.run(&job.tenant_id, &job.memory_ref, &json!({})).await {
                tracing::warn!(error = %e, memory_ref = %ref_hash(&job.memory_ref), "job failed, will retry");
                failures.push(json!({"itemIdentifier": id}));
            }
        }
        return Ok(json!({"batchItemFailures": failures}));
    }
    let text = |field: &'static str| match payload.get(field) {
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(_) => Err(WireError::validation(
            field,
            format!("{field}: expected a string"),
        )),
        None => Err(WireError::validation("payload", EXPECTED)),
    };
    let (tenant, memory_ref) = (text("tenantId")?, text("memoryRef")?);
    Ok(pass.run(tenant, memory_ref, &payload).await?)
}

const EXPECTED: &str =
    "payload: expected {\"tenantId\", \"memoryRef\"}, {\"action\": \"fan-out\"} or an SQS batch";
