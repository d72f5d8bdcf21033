//! The commitment events (RFC 0068): `commitment.fired` and the `run.requested` it triggers.
//! Like every constructor of `memory_core::events`, these take ids, kinds and instants only.

use commitments::Commitment;
use memory_core::events::{DomainEvent, EventType};
use memory_core::Timestamp;
use memory_guard::MemoryRef;
use serde_json::json;

/// RFC 0068 clause 3: ids, kind and instants only; never the intention or predicate text.
/// The id is the commitment's deterministic fire id, so duplicates dedupe.
pub fn commitment_fired(
    memory_ref: &MemoryRef,
    commitment: &Commitment,
    scheduled_for_ms: i64,
    fired_at: Timestamp,
    enqueued_run_id: Option<&str>,
) -> DomainEvent {
    let mut detail = json!({
        "commitmentId": commitment.id,
        "kind": commitment.condition.kind(),
        "scheduledFor": Timestamp::from_millis(scheduled_for_ms),
        "firedAt": fired_at,
    });
    if let Some(run_id) = enqueued_run_id {
        detail["enqueuedRunId"] = json!(run_id);
    }
    DomainEvent::for_ref(
        EventType::CommitmentFired,
        memory_ref,
        commitment.fire_event_id(scheduled_for_ms),
        detail,
    )
}

/// A run for the commitment's agent, in the same tenant (RFC 0068 clause 4).
pub fn run_requested(memory_ref: &MemoryRef, commitment_id: &str, run_id: &str) -> DomainEvent {
    DomainEvent::for_ref(
        EventType::RunRequested,
        memory_ref,
        format!("run.requested:{run_id}"),
        json!({
            "runId": run_id,
            "agentId": memory_ref.agent().as_str(),
            "trigger": {"kind": "commitment", "commitmentId": commitment_id},
        }),
    )
}
