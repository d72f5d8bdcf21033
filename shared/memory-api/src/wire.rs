//! The OpenWOP error envelope, as the official client parses it (`openwop_client.WopError`,
//! `ErrorEnvelope`, `HTTP_ERROR_CODES`): a flat `{"error": "<code>", "message": "<text>",
//! "details": {...}?}`. This is the one place a [`CoreError`] becomes an HTTP status and a wire
//! code; direct invokes use the same code as their Lambda `errorType`.
//!
//! Codes come only from the client's `HTTP_ERROR_CODES`, plus `token_budget_exceeded`, which
//! RFC 0062 names for a dream that cannot fit its budget, and `outcome_unknown` (docs/api.md
//! "Outcome unknown"), which no client code can stand for: every other retryable code promises
//! that nothing was written. `details` names the offending field by
//! its schema path, never a value: CTI-1 §3 keeps entry data out of envelopes, SR-1 keeps secrets
//! out of everything.

use memory_core::{CoreError, StoreError};
use serde_json::{json, Value};

/// Seconds a client should wait before retrying a write that lost a race on the same items.
pub const CONFLICT_RETRY_AFTER_SECONDS: u32 = 1;

/// Seconds to wait after the store throttled through the adapter's retries.
pub const THROTTLE_RETRY_AFTER_SECONDS: u32 = 2;

/// Seconds to wait after the store answered 5xx or could not be reached through the retries.
pub const UNAVAILABLE_RETRY_AFTER_SECONDS: u32 = 5;

/// Seconds to wait before retrying a write whose outcome is unknown: its key's record (or, for
/// a keyless write, a read) settles it once the store answers again.
pub const OUTCOME_UNKNOWN_RETRY_AFTER_SECONDS: u32 = 2;

fn is_throttle(code: &str) -> bool {
    code.contains("Throttl")
        || code.contains("ProvisionedThroughput")
        || code.contains("RequestLimit")
        || code == "SlowDown"
        || code == "TransactionConflict"
}

/// A failure as it goes on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// The schema path of the offending field, when one field is to blame.
    pub field: Option<String>,
    /// `Retry-After` seconds, on retryable answers.
    pub retry_after: Option<u32>,
    /// `Allow`, on 405.
    pub allow: Option<&'static str>,
}

impl WireError {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        WireError {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after: None,
            allow: None,
        }
    }

    fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// The same error, answered with `Retry-After: seconds`.
    fn retrying_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// 400 `validation_error` for a request that could not be decoded; `field` is a schema path.
    pub fn validation(field: impl Into<String>, message: impl Into<String>) -> Self {
        WireError::new(400, "validation_error", message).field(field)
    }

    /// 405 for a route that exists but not for this method. The client's code list has no
    /// method code; `validation_error` with the status and `Allow` says what to change.
    pub fn method_not_allowed(allow: &'static str) -> Self {
        let mut e = WireError::new(
            405,
            "validation_error",
            format!("method not allowed; use {allow}"),
        );
        e.allow = Some(allow);
        e
    }

    /// 500 for a failure of our own making (an answer that could not be encoded).
    pub fn internal() -> Self {
        WireError::new(500, "internal_error", "internal error")
    }

    /// 401 for a request whose credential (a JWT, a grant) is missing or not accepted.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        WireError::new(401, "unauthenticated", message)
    }

    /// 403 for a credential that is valid but does not cover the request.
    pub fn forbidden(message: impl Into<String>) -> Self {
        WireError::new(403, "forbidden", message)
    }

    /// 404 for something of the caller's that does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        WireError::new(404, "not_found", message)
    }

    /// 404 for a path no route serves.
    pub fn no_route() -> Self {
        WireError::new(404, "not_found", "no such route")
    }

    pub fn is_server_error(&self) -> bool {
        self.status >= 500
    }

    /// The envelope body.
    pub fn envelope(&self) -> Value {
        let mut body = json!({"error": self.code, "message": self.message});
        let mut details = serde_json::Map::new();
        if let Some(field) = &self.field {
            details.insert("field".into(), Value::String(field.clone()));
        }
        if let Some(seconds) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(seconds));
        }
        if let Some(allow) = self.allow {
            details.insert("allow".into(), json!([allow]));
        }
        if !details.is_empty() {
            body["details"] = Value::Object(details);
        }
        body
    }

    /// Extra response headers this error calls for.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = Vec::new();
        if let Some(seconds) = self.retry_after {
            headers.push(("retry-after", seconds.to_string()));
        }
        if let Some(allow) = self.allow {
            headers.push(("allow", allow.to_owned()));
        }
        headers
    }
}

impl From<&CoreError> for WireError {
    /// Store failures are logged here, the one place they are turned into a generic answer, so
    /// the backend's code reaches the logs whichever handler met it. (Store error messages carry
    /// operation names and backend codes only, never item attributes.)
    fn from(e: &CoreError) -> Self {
        match e {
            CoreError::Store(
                StoreError::Conflict { .. }
                | StoreError::Unavailable { .. }
                | StoreError::OutcomeUnknown { .. },
            ) => {
                tracing::warn!(error = %e, "answered as retryable")
            }
            CoreError::Store(StoreError::QuotaExceeded(_)) => {
                tracing::info!(error = %e, "refused by a quota")
            }
            CoreError::Store(_) => tracing::error!(error = %e, "store failure"),
            _ => {}
        }
        match e {
            CoreError::InvalidTimestamp => WireError::validation("timestamp", e.to_string()),
            CoreError::BadLimit => WireError::validation("limit", e.to_string()),
            CoreError::BadCursor => WireError::validation("cursor", e.to_string()),
            CoreError::Invalid { field, .. } => WireError::validation(field.clone(), e.to_string()),
            // One answer for malformed and foreign refs: it must not reveal another tenant.
            CoreError::RefNotAdmitted => WireError::validation("memoryRef", e.to_string()),
            CoreError::NoTenant => WireError::new(401, "unauthenticated", e.to_string()),
            CoreError::NotFound => WireError::new(404, "not_found", "not found"),
            CoreError::TokenBudgetExceeded { .. } => {
                WireError::new(422, "token_budget_exceeded", e.to_string())
            }
            CoreError::IdempotencyInFlight => {
                WireError::new(409, "idempotency_in_flight", e.to_string())
                    .retrying_after(CONFLICT_RETRY_AFTER_SECONDS)
            }
            CoreError::IdempotencyKeyMismatch => {
                WireError::new(409, "idempotency_key_mismatch", e.to_string())
            }
            // A conditional write lost a race: the same request succeeds after a short wait.
            CoreError::Store(StoreError::Conflict { .. }) => WireError::new(
                429,
                "rate_limited",
                "concurrent update of the same items; retry after the delay",
            )
            .retrying_after(CONFLICT_RETRY_AFTER_SECONDS),
            // Throttled or raced through every retry the deadline allowed: rate limiting, as
            // far as the caller can act on it.
            CoreError::Store(StoreError::Unavailable { code, .. }) if is_throttle(code) => {
                WireError::new(
                    429,
                    "rate_limited",
                    "the store is throttling or busy with the same items; retry after the delay",
                )
                .retrying_after(THROTTLE_RETRY_AFTER_SECONDS)
            }
            // Sent, and no answer said whether it applied: not "not stored" (a 429/503 promises
            // nothing was written), so a caller can tell that a keyless retry may store twice.
            CoreError::Store(StoreError::OutcomeUnknown { .. }) => WireError::new(
                503,
                "outcome_unknown",
                "the write may or may not have been stored; retry with the same idempotencyKey \
                 after the delay",
            )
            .retrying_after(OUTCOME_UNKNOWN_RETRY_AFTER_SECONDS),
            // A quota refused the request (docs/quotas.md "The refusal"): the message names the
            // quota and its numbers; the delay is when the window turns or a limit change lands.
            CoreError::Store(StoreError::QuotaExceeded(refusal)) => {
                crate::metrics::quota_event(
                    crate::metrics::QUOTA_REFUSED,
                    refusal.tenant.as_str(),
                    refusal.quota.name(),
                );
                WireError::new(429, "rate_limited", refusal.to_string())
                    .retrying_after(refusal.retry_after_seconds)
            }
            CoreError::Store(StoreError::Unavailable { .. }) => WireError::new(
                503,
                "internal_error",
                "the store is temporarily unavailable; retry after the delay",
            )
            .retrying_after(UNAVAILABLE_RETRY_AFTER_SECONDS),
            // Backend detail stays in the logs.
            CoreError::Store(_) => WireError::internal(),
        }
    }
}

impl From<CoreError> for WireError {
    fn from(e: CoreError) -> Self {
        WireError::from(&e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_core_error_maps_to_a_client_code() {
        let cases = [
            (CoreError::BadLimit, 400, "validation_error", Some("limit")),
            (
                CoreError::BadCursor,
                400,
                "validation_error",
                Some("cursor"),
            ),
            (
                CoreError::invalid("entries[3].tags", "at most 32 tags"),
                400,
                "validation_error",
                Some("entries[3].tags"),
            ),
            (
                CoreError::RefNotAdmitted,
                400,
                "validation_error",
                Some("memoryRef"),
            ),
            (CoreError::NoTenant, 401, "unauthenticated", None),
            (CoreError::NotFound, 404, "not_found", None),
            (
                CoreError::TokenBudgetExceeded {
                    needed: 300,
                    budget: 200,
                },
                422,
                "token_budget_exceeded",
                None,
            ),
            (
                CoreError::IdempotencyInFlight,
                409,
                "idempotency_in_flight",
                None,
            ),
            (
                CoreError::IdempotencyKeyMismatch,
                409,
                "idempotency_key_mismatch",
                None,
            ),
            (
                CoreError::Store(StoreError::Conflict { op: "put" }),
                429,
                "rate_limited",
                None,
            ),
            (
                CoreError::Store(StoreError::Unavailable {
                    op: "query",
                    code: "ProvisionedThroughputExceededException".into(),
                }),
                429,
                "rate_limited",
                None,
            ),
            (
                CoreError::Store(StoreError::Unavailable {
                    op: "put_entries",
                    code: "TransactionConflict".into(),
                }),
                429,
                "rate_limited",
                None,
            ),
            (
                CoreError::Store(StoreError::Unavailable {
                    op: "get",
                    code: "InternalServerError".into(),
                }),
                503,
                "internal_error",
                None,
            ),
            (
                CoreError::Store(StoreError::OutcomeUnknown {
                    op: "put_entries",
                    code: "DispatchFailure".into(),
                }),
                503,
                "outcome_unknown",
                None,
            ),
            (
                CoreError::Store(StoreError::Backend {
                    op: "query",
                    code: "ValidationException".into(),
                }),
                500,
                "internal_error",
                None,
            ),
        ];
        for (error, status, code, field) in cases {
            let wire = WireError::from(&error);
            assert_eq!((wire.status, wire.code), (status, code), "{error:?}");
            let body = wire.envelope();
            assert_eq!(body["error"], code);
            assert!(body["message"].is_string());
            assert_eq!(body["details"]["field"].as_str(), field, "{error:?}");
        }
    }

    #[test]
    fn backend_detail_never_reaches_the_body() {
        let wire = WireError::from(&CoreError::Store(StoreError::Backend {
            op: "query",
            code: "SomeBackendCode".into(),
        }));
        assert!(!wire.envelope().to_string().contains("SomeBackendCode"));
    }

    #[test]
    fn an_unknown_outcome_is_retryable_and_never_a_not_stored_code() {
        let wire = WireError::from(&CoreError::Store(StoreError::OutcomeUnknown {
            op: "put_entries",
            code: "Timeout".into(),
        }));
        assert_eq!(wire.retry_after, Some(OUTCOME_UNKNOWN_RETRY_AFTER_SECONDS));
        assert_ne!(wire.code, "rate_limited");
        assert_ne!(wire.code, "internal_error");
    }

    #[test]
    fn retryable_and_method_errors_carry_their_headers() {
        let conflict = WireError::from(&CoreError::Store(StoreError::Conflict { op: "put" }));
        assert_eq!(conflict.headers(), vec![("retry-after", "1".to_owned())]);
        let method = WireError::method_not_allowed("POST");
        assert_eq!(method.status, 405);
        assert_eq!(method.headers(), vec![("allow", "POST".to_owned())]);
        assert_eq!(method.envelope()["details"]["allow"], json!(["POST"]));
    }
}
