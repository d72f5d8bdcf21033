//! `memory-commitments` contract: the every-minute schedule sends `{"action": "tick"}`; the
//! EventBridge rule on `memory.written` delivers the event itself; an operator can backfill a
//! ref with `{"action": "backfill", "tenantId", "memoryRef"}`.

use commitment_service::firing::{CommitmentReport, CommitmentService};
use memory_core::acting_tenant::acting_for;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use memory_api::{ref_hash, WireError};

fn emit(report: &CommitmentReport) {
    memory_api::metrics::emit(&[
        ("CommitmentsInferred", report.inferred as u64),
        ("CommitmentsFired", report.fired as u64),
        ("OutboxesRecovered", report.recovered as u64),
        ("DueItemsRead", report.due_items_read),
    ]);
}

/// What invokes the commitments function, decoded once at the edge.
#[derive(Debug)]
pub enum CommitmentCommand {
    /// The every-minute schedule: fire what is due.
    Tick,
    /// An operator's backfill of one ref.
    Backfill {
        tenant_id: String,
        memory_ref: String,
    },
    /// A `memory.written` event: infer from the entry and evaluate predicates.
    Written(WrittenDetail),
}

/// The fields of a `memory.written` detail that inference reads.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WrittenDetail {
    pub tenant_id: String,
    pub memory_ref: String,
    #[serde(default)]
    memory_id: Option<String>,
    /// `memoryId` is the RFC 0057 name; `entryId` is read too so events published by the
    /// previous release, still in flight during a deploy, are not dropped.
    #[serde(default)]
    entry_id: Option<String>,
}

impl WrittenDetail {
    /// The written entry's id, or the validation error of a detail that names none.
    pub fn entry_id(&self) -> Result<&str, WireError> {
        self.memory_id
            .as_deref()
            .or(self.entry_id.as_deref())
            .ok_or_else(|| {
                WireError::validation(
                    "detail",
                    "detail: memory.written needs tenantId, memoryRef and memoryId",
                )
            })
    }
}

pub async fn handle(
    service: &CommitmentService,
    command: CommitmentCommand,
) -> Result<Value, WireError> {
    match command {
        CommitmentCommand::Written(detail) => {
            // Acts for the event's tenant (tenant-scoped credentials, docs/guarantees.md "Tenant
            // isolation in three layers").
            let report = acting_for(
                Some(&detail.tenant_id),
                service.on_written(&detail.tenant_id, &detail.memory_ref, detail.entry_id()?),
            )
            .await?;
            emit(&report);
            tracing::info!(memory_ref = %ref_hash(&detail.memory_ref), inferred = report.inferred, fired = report.fired, "memory.written evaluated");
            Ok(json!(report))
        }
        CommitmentCommand::Tick => {
            let report = service.tick().await?;
            emit(&report);
            Ok(json!(report))
        }
        CommitmentCommand::Backfill {
            tenant_id,
            memory_ref,
        } => Ok(json!(
            acting_for(Some(&tenant_id), service.backfill(&tenant_id, &memory_ref)).await?
        )),
    }
}
