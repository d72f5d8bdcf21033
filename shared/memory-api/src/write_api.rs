//! The direct-invoke write contract (DESIGN.md §Wire shapes): `{"op": "put", ...}` and
//! `{"op": "delete", ...}`. Parsing failures are reported by field, never by echoing the
//! payload, which may carry secrets.

use memory_core::writer::{MemoryWriter, PutRequest};
use memory_core::CoreError;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::ref_hash;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteRequest {
    pub tenant_id: String,
    pub memory_ref: String,
    pub id: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum WriteRequest {
    Put(PutRequest),
    Delete(DeleteRequest),
}

/// serde's messages can quote input ("invalid type: string \"...\""), so only the position of
/// the problem is kept.
fn bad_payload(e: &serde_json::Error) -> CoreError {
    CoreError::invalid(
        "payload",
        format!(
            "not a valid write request (line {}, column {}); see the README for the shape",
            e.line(),
            e.column()
        ),
    )
}

pub async fn handle(writer: &MemoryWriter, payload: Value) -> Result<Value, CoreError> {
    let request: WriteRequest = serde_json::from_value(payload).map_err(|e| bad_payload(&e))?;
    match request {
        WriteRequest::Put(put) => {
            let out = match writer.put(&put).await {
                Ok(out) => out,
                Err(e) => {
                    crate::metrics::emit(&[("WritesRejected", u64::from(e.http_status() < 500))]);
                    return Err(e);
                }
            };
            crate::metrics::emit(&[
                ("EntriesWritten", out.written.len() as u64),
                ("RedactionsApplied", out.redactions as u64),
            ]);
            tracing::info!(
                memory_ref = %ref_hash(&put.memory_ref),
                written = out.written.len(),
                redactions = out.redactions,
                "put"
            );
            Ok(json!(out))
        }
        WriteRequest::Delete(delete) => {
            let deleted = writer
                .delete(&delete.tenant_id, &delete.memory_ref, &delete.id)
                .await?;
            tracing::info!(memory_ref = %ref_hash(&delete.memory_ref), deleted, "delete");
            Ok(json!({ "deleted": deleted }))
        }
    }
}
