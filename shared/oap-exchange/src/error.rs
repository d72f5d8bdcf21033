//! The door's failures. Messages name fields and counts, never a value, a grant token, a key or
//! content: they reach response bodies and logs. The HTTP status of each is chosen in one place,
//! the function's `api` module.

use memory_core::StoreError;

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ExchangeError {
    /// A request field broke a documented bound; `field` is its name in the request.
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    /// No usable grant: missing, malformed, signed by another key, changed, expired, revoked or
    /// unknown. One kind for all, so the answer does not tell a forger which check failed; the
    /// reason is a fixed phrase, never a token.
    #[error("grant not accepted: {0}")]
    GrantRefused(&'static str),
    /// The grant is valid but does not cover what was asked (embeddings without that scope).
    #[error("the grant does not cover {0}")]
    NotCovered(&'static str),
    /// No grant of the caller's tenant has this id.
    #[error("grant not found")]
    NotFound,
    /// The grant exists but cannot be revoked (`revocable: false`).
    #[error("the grant is not revocable")]
    NotRevocable,
    /// Deployment configuration (the signing key, the DID) is unusable.
    #[error("exchange configuration: {0}")]
    Config(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ExchangeError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ExchangeError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl From<memory_core::CoreError> for ExchangeError {
    fn from(e: memory_core::CoreError) -> Self {
        match e {
            memory_core::CoreError::Store(s) => ExchangeError::Store(s),
            other => ExchangeError::invalid("request", other.to_string()),
        }
    }
}
