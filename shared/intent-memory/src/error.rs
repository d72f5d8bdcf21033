//! The door's failures, each one of RFC-0015's error cases (its SDK names them
//! `VERSION_MISMATCH`, `CAPACITY_EXCEEDED`, `ACCESS_DENIED`, `ENTRY_NOT_FOUND`) or a bad
//! request. Messages name fields and counts, never a value, a key or a secret: they end up in
//! response bodies and logs. The HTTP status of each is chosen in one place, the function's
//! `api` module.

use memory_core::StoreError;
use serde_json::Value;

use crate::model::MemoryType;

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum IntentError {
    /// A request field broke a documented bound; `field` is its name in the request.
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    /// No entry the caller may see has this id (also: another agent's, another tenant's).
    #[error("memory entry not found")]
    NotFound,
    /// The request names an agent the caller is not.
    #[error("agent_id must be the calling agent (X-Agent-ID)")]
    NotCaller,
    /// §1.2: the key is taken in this scope.
    #[error("an entry with this namespace and key already exists")]
    KeyTaken { existing_id: String, version: u64 },
    /// §3.2: `If-Match` does not hold the current version. `current` is the entry as it is.
    #[error("version conflict: the entry is at version {}", current.get("version").and_then(Value::as_u64).unwrap_or(0))]
    VersionMismatch {
        current: Value,
        current_version: u64,
    },
    /// §3.2: an update without `If-Match`.
    #[error("If-Match header with the entry's current version is required")]
    PreconditionRequired,
    /// §9.4: working memory at capacity (or episodic with only pinned entries left).
    #[error("memory capacity exceeded: {current} of {max} {} entries", memory_type.as_str())]
    CapacityExceeded {
        memory_type: MemoryType,
        current: u64,
        max: u64,
    },
    /// §1.3: the value is larger than 64 KB.
    #[error("value is {size} bytes; at most {max} bytes are accepted")]
    ValueTooLarge { size: usize, max: usize },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl IntentError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        IntentError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }
}
