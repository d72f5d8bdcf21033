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
//! condition; the callers that write conditionally re-read to recognise that case.

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

/// Service error codes a later attempt can succeed on.
const RETRYABLE_CODES: &[&str] = &[
    "ThrottlingException",
    "ModelNotReadyException",
    "ModelTimeoutException",
    "Throttling",
    "ThrottledException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "TooManyRequestsException",
    "SlowDown",
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
                .is_some_and(|c| RETRYABLE_CODES.contains(&c))
                || service.raw().status().as_u16() >= 500
        }
        _ => false,
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

/// Sends with the default classification ([`is_retryable`]).
pub async fn send<T, E, F, Fut>(
    op: &'static str,
    attempt: F,
) -> Result<T, SdkError<E, HttpResponse>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata,
{
    send_classified(op, attempt, is_retryable).await
}

/// Sends, retrying while `retryable` says so and the deadline allows; the last error is
/// returned as it came, for the caller to map (conditions, not-found, ...).
pub(crate) async fn send_classified<T, E, R, F, Fut, C>(
    op: &'static str,
    mut attempt: F,
    retryable: C,
) -> Result<T, SdkError<E, R>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, R>>>,
    E: ProvideErrorMetadata,
    C: Fn(&SdkError<E, R>) -> bool,
{
    let budget = deadline::retry_budget();
    let started = Instant::now();
    let mut n: u32 = 0;
    loop {
        match attempt().await {
            Ok(out) => return Ok(out),
            Err(err) => {
                let delay = backoff(n);
                if !retryable(&err) || started.elapsed() + delay > budget {
                    return Err(err);
                }
                let code = crate::error::code_of(&err);
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
