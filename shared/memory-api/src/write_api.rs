//! The direct-invoke write contract (docs/api.md "Write (direct invoke)"): `{"op": "put", ...}` and
//! `{"op": "delete", ...}`. Parsing failures are reported by schema path, never by echoing
//! the payload, which may carry secrets (`decode`).

use memory_core::acting_tenant::acting_for;
use memory_core::writer::{MemoryWriter, PutRequest};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{decode, ref_hash, WireError};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteRequest {
    pub tenant_id: String,
    pub memory_ref: String,
    pub id: String,
    /// Makes the delete's answer stable across retries (docs/guarantees.md "Idempotent writes").
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// A write invoke, decoded once: `op` is read first and the rest decoded as that operation's
/// request, so a field error names its path in the put or delete schema.
#[derive(Debug)]
pub enum WriteCommand {
    Put(PutRequest),
    Delete(DeleteRequest),
}

impl WriteCommand {
    pub fn decode(payload: Value) -> Result<Self, WireError> {
        let Value::Object(mut fields) = payload else {
            return Err(WireError::validation(
                "payload",
                "payload: expected an object with \"op\": \"put\" or \"delete\"",
            ));
        };
        let op = fields.remove("op");
        match op.as_ref().and_then(Value::as_str) {
            Some("put") => Ok(WriteCommand::Put(decode::typed(Value::Object(fields), "")?)),
            Some("delete") => Ok(WriteCommand::Delete(decode::typed(
                Value::Object(fields),
                "",
            )?)),
            _ => Err(WireError::validation(
                "op",
                "op: expected \"put\" or \"delete\"",
            )),
        }
    }
}

/// Acts for the invoke's `tenantId` (tenant-scoped credentials sign the writes with it).
pub async fn handle(writer: &MemoryWriter, command: WriteCommand) -> Result<Value, WireError> {
    let tenant = match &command {
        WriteCommand::Put(put) => put.tenant_id.clone(),
        WriteCommand::Delete(delete) => delete.tenant_id.clone(),
    };
    acting_for(Some(&tenant), handle_as(writer, command)).await
}

async fn handle_as(writer: &MemoryWriter, command: WriteCommand) -> Result<Value, WireError> {
    match command {
        WriteCommand::Put(put) => {
            let out = match writer.put(&put).await {
                Ok(out) => out,
                Err(e) => {
                    crate::metrics::emit(&[("WritesRejected", u64::from(e.is_caller_error()))]);
                    return Err(e.into());
                }
            };
            crate::metrics::emit(&[
                ("EntriesWritten", out.written.len() as u64),
                ("RedactionsApplied", out.redactions as u64),
            ]);
            crate::metrics::emit_pressure(&out.pressure);
            // Stored, but some without a vector: the token quota refused the embedding
            // (docs/quotas.md "Bedrock tokens"); the embed pass gives them one later.
            if let Some(refusal) = &out.embedding_refused {
                crate::metrics::quota_event(
                    crate::metrics::QUOTA_REFUSED,
                    refusal.tenant.as_str(),
                    refusal.quota.name(),
                );
            }
            tracing::info!(
                memory_ref = %ref_hash(&put.memory_ref),
                written = out.written.len(),
                redactions = out.redactions,
                replayed = out.replayed,
                embedding_refused = out.embedding_refused.is_some(),
                "put"
            );
            Ok(json!(out))
        }
        WriteCommand::Delete(delete) => {
            let deleted = writer
                .delete(
                    &delete.tenant_id,
                    &delete.memory_ref,
                    &delete.id,
                    delete.idempotency_key.as_deref(),
                )
                .await?;
            tracing::info!(memory_ref = %ref_hash(&delete.memory_ref), deleted, "delete");
            Ok(json!({ "deleted": deleted }))
        }
    }
}
