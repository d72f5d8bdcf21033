//! The one retry policy of every AWS call this crate makes.
//!
//! Throttling (`ThrottlingException`, `ProvisionedThroughputExceededException`, `SlowDown`, ...),
//! a DynamoDB transaction cancelled by a concurrent transaction (`TransactionConflict`), a 5xx
//! answer, a timeout or a connection that broke are retried with full-jitter exponential
//! backoff for as long as the invocation's deadline allows (`memory_core::deadline`). The SDK's
//! own retry layer is turned off (`config.rs`), so this is the only place attempts are counted,
//! and a call that still fails comes back as `StoreError::Unavailable`, which the edge answers
//! as retryable (429 / 503 with `Retry-After`, or a failed SQS record that returns to its queue)
//! instead of a 500.
//!
//! A retried write whose first attempt did apply (the response was lost) meets its own
//! condition; the callers that write conditionally re-read to recognise that case. Whether a
//! failed attempt may have applied is [`may_have_applied`] (docs/api.md "Outcome unknown"): a
//! write that still fails after any such attempt is `StoreError::OutcomeUnknown`, never a
//! "not stored" answer.

use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use memory_core::deadline;

/// First backoff ceiling; doubles per attempt up to [`MAX_BACKOFF`].
const BASE_BACKOFF: Duration = Duration::from_millis(25);
const MAX_BACKOFF: Duration = Duration::from_millis(1_000);

/// Service codes of a throttled request: refused before it was applied, and worth another
/// attempt.
const THROTTLED_CODES: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "ThrottledException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "TooManyRequestsException",
    "SlowDown",
];

/// Service error codes other than throttling a later attempt can succeed on.
const RETRYABLE_CODES: &[&str] = &[
    "ModelNotReadyException",
    "ModelTimeoutException",
    "TransactionConflictException",
    "TransactionInProgressException",
    "InternalServerError",
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "ServiceUnavailableException",
];

/// Whether a later attempt of the same call can succeed.
pub fn is_retryable<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(service) => {
            service
                .err()
                .code()
                .is_some_and(|c| THROTTLED_CODES.contains(&c) || RETRYABLE_CODES.contains(&c))
                || service.raw().status().as_u16() >= 500
        }
        _ => false,
    }
}

/// Service codes other than throttling that say the request was refused before it was
/// applied: cancelled (a condition or a concurrent transaction), malformed, denied. Any other
/// failure of a sent request may have been applied.
const NOT_APPLIED_CODES: &[&str] = &[
    "TransactionCanceledException",
    "TransactionConflictException",
    "ConditionalCheckFailedException",
    "ValidationException",
    "ResourceNotFoundException",
    "AccessDeniedException",
    "AccessDenied",
    "UnrecognizedClientException",
    "ItemCollectionSizeLimitExceededException",
];

/// Whether a failed attempt of a write may nevertheless have been applied by the store:
/// a timeout or a broken connection (the SDK cannot say whether the request left or was
/// processed), an answer that could not be read, and a 5xx or a code not known to refuse
/// before applying (DynamoDB documents a 500 as "may or may not have succeeded";
/// `TransactionInProgressException` means a transaction like it is still running). Throttling
/// and cancellations are answers of a store that applied nothing. docs/api.md "Outcome unknown"
/// holds the same table.
pub fn may_have_applied<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> bool {
    match err {
        SdkError::ConstructionFailure(_) => false,
        SdkError::ServiceError(service) => !service
            .err()
            .code()
            .is_some_and(|c| THROTTLED_CODES.contains(&c) || NOT_APPLIED_CODES.contains(&c)),
        _ => true,
    }
}

/// Full jitter: uniform in `[0, min(MAX, BASE * 2^attempt)]`.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let ceiling = BASE_BACKOFF
        .saturating_mul(1u32 << attempt.min(10))
        .min(MAX_BACKOFF);
    let random = RandomState::new().hash_one((attempt, Instant::now()));
    let millis = u64::try_from(ceiling.as_millis()).unwrap_or(1).max(1);
    Duration::from_millis(random % (millis + 1))
}

/// Sends, retrying what [`is_retryable`] says a later attempt can succeed on while the deadline
/// allows; the last error is returned as it came, for the caller to map (conditions,
/// not-found, ...).
pub async fn send<T, E, F, Fut>(
    op: &'static str,
    attempt: F,
) -> Result<T, SdkError<E, HttpResponse>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata,
{
    send_tracked(op, attempt, is_retryable)
        .await
        .map_err(|failed| failed.error)
}

/// One metered DynamoDB request ([`crate::meter::Metered`]) under [`send`].
pub async fn metered<R: crate::meter::Metered>(
    op: &'static str,
    request: &R,
) -> Result<R::Output, SdkError<R::Error, HttpResponse>> {
    send(op, || request.clone().send_metered()).await
}

/// One counted S3 request ([`crate::meter::Counted`]) under [`send`].
#[cfg(feature = "archive")]
pub async fn counted<R: crate::meter::Counted>(
    op: &'static str,
    request: &R,
) -> Result<R::Output, SdkError<R::Error, HttpResponse>> {
    send(op, || request.clone().send_counted()).await
}

/// The last error of a call that failed, and whether any of its attempts may have been applied
/// ([`may_have_applied`]): a later attempt that was throttled does not undo an earlier one
/// whose answer was lost.
pub(crate) struct Failed<E, R> {
    pub error: SdkError<E, R>,
    pub maybe_applied: bool,
}

/// Sends, retrying while `retryable` says so and the deadline allows; a failure also says
/// whether the call may have been applied.
pub(crate) async fn send_tracked<T, E, R, F, Fut, C>(
    op: &'static str,
    mut attempt: F,
    retryable: C,
) -> Result<T, Failed<E, R>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, R>>>,
    E: ProvideErrorMetadata,
    C: Fn(&SdkError<E, R>) -> bool,
{
    let budget = deadline::retry_budget();
    let started = Instant::now();
    let mut n: u32 = 0;
    let mut maybe_applied = false;
    loop {
        match attempt().await {
            Ok(out) => return Ok(out),
            Err(error) => {
                maybe_applied |= may_have_applied(&error);
                let delay = backoff(n);
                if !retryable(&error) || started.elapsed() + delay > budget {
                    return Err(Failed {
                        error,
                        maybe_applied,
                    });
                }
                let code = crate::error::code_of(&error);
                tracing::warn!(op, code = %code, attempt = n + 1, "retrying");
                deadline::note_retry();
                tokio::time::sleep(delay).await;
                n += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
    use aws_smithy_runtime_api::client::result::ConnectorError;

    fn service(code: &str, status: u16) -> SdkError<TransactWriteItemsError, HttpResponse> {
        let raw = HttpResponse::new(
            status.try_into().expect("status"),
            aws_smithy_types::body::SdkBody::empty(),
        );
        SdkError::service_error(
            TransactWriteItemsError::generic(ErrorMetadata::builder().code(code).build()),
            raw,
        )
    }

    #[test]
    fn refusals_are_known_not_applied_and_lost_answers_are_not() {
        for code in [
            "ThrottlingException",
            "ProvisionedThroughputExceededException",
            "TransactionCanceledException",
            "ConditionalCheckFailedException",
            "ValidationException",
        ] {
            assert!(!may_have_applied(&service(code, 400)), "{code}");
        }
        for (code, status) in [
            ("InternalServerError", 500),
            ("TransactionInProgressException", 400),
            ("ServiceUnavailable", 503),
        ] {
            assert!(may_have_applied(&service(code, status)), "{code}");
        }
        let timeout: SdkError<TransactWriteItemsError, HttpResponse> =
            SdkError::timeout_error("attempt timed out");
        assert!(may_have_applied(&timeout));
        let dropped: SdkError<TransactWriteItemsError, HttpResponse> = SdkError::dispatch_failure(
            ConnectorError::io("connection closed before message completed".into()),
        );
        assert!(may_have_applied(&dropped));
    }

    #[test]
    fn backoff_is_bounded_and_grows() {
        for attempt in 0..20 {
            let d = backoff(attempt);
            assert!(d <= MAX_BACKOFF, "{attempt}: {d:?}");
        }
        let early: u128 = (0..200).map(|_| backoff(0).as_millis()).sum();
        let late: u128 = (0..200).map(|_| backoff(8).as_millis()).sum();
        assert!(late > early * 4, "{early} vs {late}");
    }
}
