//! The core's one error enum and its one mapping to HTTP. Messages carry field names, limits and
//! ids only: CTI-1 §3 forbids entry data in error envelopes, and SR-1 forbids secrets anywhere.

use thiserror::Error;

/// Failures of a port (store, archive, publisher). The message names the operation and the
/// backend's error code, never an item's attributes.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// A conditional write lost: the item changed or already existed.
    #[error("conditional write rejected during {op}")]
    Conflict { op: &'static str },
    /// The backend failed or is unreachable; `code` is the backend's error code.
    #[error("backend failure during {op}: {code}")]
    Backend { op: &'static str, code: String },
    /// A stored item could not be decoded (schema drift or manual edit); `key` is the item key.
    #[error("stored item {key} is not in the expected shape")]
    Corrupt { key: String },
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CoreError {
    #[error("timestamp must be RFC 3339")]
    InvalidTimestamp,
    #[error("limit must be a positive integer")]
    BadLimit,
    #[error("cursor is not valid for this memoryRef")]
    BadCursor,
    /// A request field broke a documented bound; `reason` states the bound, never the value.
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    /// Writes to a ref that is malformed or belongs to another tenant. Deliberately one message
    /// for both cases, so the answer does not reveal whether the other tenant exists.
    #[error("memoryRef is not writable by this tenant")]
    RefNotAdmitted,
    #[error("tenant could not be determined")]
    NoTenant,
    #[error("not found")]
    NotFound,
    #[error("token budget exceeded")]
    TokenBudgetExceeded,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CoreError {
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        CoreError::Invalid {
            field,
            reason: reason.into(),
        }
    }

    /// The single place errors become HTTP statuses.
    pub fn http_status(&self) -> u16 {
        match self {
            CoreError::InvalidTimestamp
            | CoreError::BadLimit
            | CoreError::BadCursor
            | CoreError::Invalid { .. }
            | CoreError::RefNotAdmitted => 400,
            CoreError::NoTenant => 401,
            CoreError::NotFound => 404,
            CoreError::TokenBudgetExceeded => 422,
            CoreError::Store(StoreError::Conflict { .. }) => 409,
            CoreError::Store(_) => 500,
        }
    }

    /// Stable machine-readable code for the error envelope.
    pub fn code(&self) -> &'static str {
        match self {
            CoreError::InvalidTimestamp => "invalid_timestamp",
            CoreError::BadLimit => "invalid_limit",
            CoreError::BadCursor => "invalid_cursor",
            CoreError::Invalid { .. } => "invalid_request",
            CoreError::RefNotAdmitted => "invalid_memory_ref",
            CoreError::NoTenant => "unauthorized",
            CoreError::NotFound => "not_found",
            CoreError::TokenBudgetExceeded => "token_budget_exceeded",
            CoreError::Store(StoreError::Conflict { .. }) => "conflict",
            CoreError::Store(_) => "internal",
        }
    }

    /// The message safe to show a client: backend details stay in the logs.
    pub fn public_message(&self) -> String {
        match self {
            CoreError::Store(StoreError::Conflict { .. }) => "concurrent update, retry".to_owned(),
            CoreError::Store(_) => "internal error".to_owned(),
            other => other.to_string(),
        }
    }

    /// The `{"error": {"code", "message"}}` envelope of DESIGN.md.
    pub fn envelope(&self) -> serde_json::Value {
        serde_json::json!({"error": {"code": self.code(), "message": self.public_message()}})
    }
}
