//! `memory-commitments` contract: the every-minute schedule sends `{"action": "tick"}`; the
//! EventBridge rule on `memory.written` delivers the event itself; an operator can backfill a
//! ref with `{"action": "backfill", "tenantId", "memoryRef"}`.

use crate::firing::CommitmentService;
use serde_json::{json, Value};

use memory_api::{ref_hash, WireError};

fn emit(report: &crate::firing::CommitmentReport) {
    memory_api::metrics::emit(&[
        ("CommitmentsInferred", report.inferred as u64),
        ("CommitmentsFired", report.fired as u64),
        ("OutboxesRecovered", report.recovered as u64),
        ("DueItemsRead", report.due_items_read),
    ]);
}

pub async fn handle(service: &CommitmentService, payload: Value) -> Result<Value, WireError> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    if payload.get("detail-type").and_then(Value::as_str) == Some("memory.written") {
        let detail = payload.get("detail").cloned().unwrap_or_default();
        // `memoryId` is the RFC 0057 name; `entryId` is read too so events published by the
        // previous release, still in flight during a deploy, are not dropped.
        let entry_id = text(&detail, "memoryId").or_else(|| text(&detail, "entryId"));
        let (Some(tenant), Some(memory_ref), Some(entry_id)) = (
            text(&detail, "tenantId"),
            text(&detail, "memoryRef"),
            entry_id,
        ) else {
            return Err(WireError::validation(
                "detail",
                "detail: memory.written needs tenantId, memoryRef and memoryId",
            ));
        };
        let report = service.on_written(&tenant, &memory_ref, &entry_id).await?;
        emit(&report);
        tracing::info!(memory_ref = %ref_hash(&memory_ref), inferred = report.inferred, fired = report.fired, "memory.written evaluated");
        return Ok(json!(report));
    }
    match payload.get("action").and_then(Value::as_str) {
        Some("tick") => {
            let report = service.tick().await?;
            emit(&report);
            Ok(json!(report))
        }
        Some("backfill") => {
            let (Some(tenant), Some(memory_ref)) = (text(&payload, "tenantId"), text(&payload, "memoryRef")) else {
                return Err(WireError::validation("payload", "payload: backfill needs tenantId and memoryRef"));
            };
            Ok(json!(service.backfill(&tenant, &memory_ref).await?))
        }
        Some(_) => Err(WireError::validation(
            "action",
            "action: expected \"tick\" or \"backfill\"",
        )),
        None => Err(WireError::validation(
            "payload",
            "payload: expected {\"action\": \"tick\"}, {\"action\": \"backfill\", ...} or a memory.written event",
        )),
    }
}
