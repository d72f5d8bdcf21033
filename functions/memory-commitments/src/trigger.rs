//! What invokes `memory-commitments`, decoded once into a [`CommitmentCommand`]: the
//! EventBridge rule on `memory.written` (the event itself), the every-minute schedule
//! `{"action": "tick"}`, an operator's `{"action": "backfill", "tenantId", "memoryRef"}`.

use crate::api::{CommitmentCommand, WrittenDetail};
use aws_lambda_events::eventbridge::EventBridgeEvent;
use memory_api::{decode, WireError};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Backfill {
    tenant_id: String,
    memory_ref: String,
}

pub fn decode(payload: Value) -> Result<CommitmentCommand, WireError> {
    if payload.get("detail-type").and_then(Value::as_str) == Some("memory.written") {
        let event: EventBridgeEvent<WrittenDetail> = decode::typed(payload, "").map_err(|_| {
            WireError::validation(
                "detail",
                "detail: memory.written needs tenantId, memoryRef and memoryId",
            )
        })?;
        event.detail.entry_id()?;
        return Ok(CommitmentCommand::Written(event.detail));
    }
    match payload.get("action").map(Value::as_str) {
        Some(Some("tick")) => Ok(CommitmentCommand::Tick),
        Some(Some("backfill")) => {
            let backfill: Backfill = decode::typed(payload, "").map_err(|_| {
                WireError::validation(
                    "payload",
                    "payload: backfill needs tenantId and memoryRef",
                )
            })?;
            Ok(CommitmentCommand::Backfill {
                tenant_id: backfill.tenant_id,
                memory_ref: backfill.memory_ref,
            })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn written(detail: Value) -> Value {
        json!({"version": "0", "id": "e1", "detail-type": "memory.written",
               "source": "wop-memory", "detail": detail})
    }

    #[test]
    fn a_written_event_names_its_entry_by_memory_id_or_the_older_entry_id() {
        let both = json!({"tenantId": "t1", "memoryRef": "r", "memoryId": "a", "entryId": "a"});
        let legacy = json!({"tenantId": "t1", "memoryRef": "r", "entryId": "b"});
        for (detail, id) in [(both, "a"), (legacy, "b")] {
            let Ok(CommitmentCommand::Written(detail)) = decode(written(detail)) else {
                panic!("a memory.written event is Written");
            };
            assert_eq!(detail.entry_id().ok(), Some(id));
        }
        let no_id = decode(written(json!({"tenantId": "t1", "memoryRef": "r"}))).err();
        assert_eq!(no_id.and_then(|e| e.field), Some("detail".to_owned()));
    }

    #[test]
    fn actions_are_tick_or_backfill() {
        assert!(matches!(
            decode(json!({"action": "tick"})),
            Ok(CommitmentCommand::Tick)
        ));
        let backfill = decode(json!({"action": "backfill", "tenantId": "t1", "memoryRef": "r"}));
        assert!(matches!(backfill, Ok(CommitmentCommand::Backfill { .. })));
        for bad in [
            json!({"action": "backfill"}),
            json!({"action": "fire"}),
            json!({"action": 3}),
            json!([]),
        ] {
            assert_eq!(decode(bad).err().map(|e| e.code), Some("validation_error"));
        }
    }
}
