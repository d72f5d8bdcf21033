//! The core's one error enum. Messages carry field names, limits and
//! ids only: CTI-1 §3 forbids entry data in error envelopes, and SR-1 forbids secrets anywhere.

use thiserror::Error;

/// Failures of a port (store, archive, publisher). The message names the operation and the
/// backend's error code, never an item's attributes.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// A conditional write lost: the item changed or already existed.
    #[error("conditional write rejected during {op}")]
    Conflict { op: &'static str },
    /// The backend throttled, lost a transaction race (`TransactionConflict`), answered 5xx or
    /// could not be reached, and kept doing so through the adapter's retries until the
    /// invocation's deadline: the same request can succeed later. `code` is the backend's code.
    #[error("backend unavailable during {op}: {code}")]
    Unavailable { op: &'static str, code: String },
    /// A write was sent and no answer says whether it applied (its answer was lost, it timed
    /// out, or the store answered 5xx after accepting it), and the retries the deadline allowed
    /// did not settle it: it may or may not be stored (docs/api.md "Outcome unknown"). A keyed
    /// write's retry is answered from its key's record; `code` is the last backend code.
    #[error("outcome of the write during {op} is unknown: {code}")]
    OutcomeUnknown { op: &'static str, code: String },
    /// The backend failed in a way a retry does not fix; `code` is the backend's error code.
    #[error("backend failure during {op}: {code}")]
    Backend { op: &'static str, code: String },
    /// A stored item could not be decoded (schema drift or manual edit); `key` is the item key.
    #[error("stored item {key} is not in the expected shape")]
    Corrupt { key: String },
    /// The write would take a tenant past one of its quotas (docs/quotas.md "Quotas"); nothing
    /// was written. Numbers only.
    #[error(transparent)]
    QuotaExceeded(#[from] crate::quota::Refusal),
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CoreError {
    #[error("timestamp must be RFC 3339")]
    InvalidTimestamp,
    #[error("limit must be a positive integer")]
    BadLimit,
    #[error("cursor is not valid for this memoryRef")]
    BadCursor,
    /// A request field broke a documented bound; `field` is its schema path (`entries[2].tags`),
    /// `reason` states the bound, never the value.
    #[error("invalid {field}: {reason}")]
    Invalid { field: String, reason: String },
    /// Writes to a ref that is malformed or belongs to another tenant. Deliberately one message
    /// for both cases, so the answer does not reveal whether the other tenant exists.
    #[error("memoryRef is not writable by this tenant")]
    RefNotAdmitted,
    #[error("tenant could not be determined")]
    NoTenant,
    #[error("not found")]
    NotFound,
    /// Counts only (RFC 0062 `token_budget_exceeded`): the smallest budget that would have fitted
    /// and the budget asked for, so the caller can retry with a budget that works.
    #[error("token budget exceeded: at least {needed} tokens needed, budget is {budget}")]
    TokenBudgetExceeded { needed: u32, budget: u32 },
    /// A request with this idempotency key is still being processed.
    #[error("a request with this idempotency key is still in progress; retry after the delay")]
    IdempotencyInFlight,
    /// The idempotency key was used before with a different payload.
    #[error("this idempotency key was used with a different request")]
    IdempotencyKeyMismatch,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CoreError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        CoreError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Whether the caller can fix this by changing the request (as opposed to a store failure
    /// or a conflict that a retry resolves). HTTP statuses and wire codes are chosen at the edge
    /// (`memory_api::wire`), not here.
    pub fn is_caller_error(&self) -> bool {
        !matches!(self, CoreError::Store(_))
    }
}
