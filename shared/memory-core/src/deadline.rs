//! The current invocation's deadline, so retries inside adapters stop in time for the function
//! to answer (a typed retryable error) instead of being killed by the Lambda timeout with
//! nothing said.
//!
//! The Lambda adapter sets it from the invocation context before each handler call; a function
//! serves one invocation at a time, so one process-wide value is enough. Outside Lambda (tests,
//! tools) nothing sets it and [`retry_budget`] falls back to [`DEFAULT_RETRY_BUDGET`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The most a single store call may spend retrying when no deadline is known.
pub const DEFAULT_RETRY_BUDGET: Duration = Duration::from_secs(8);

/// Time kept back from the deadline for answering (encoding, the Runtime API round trip).
pub const ANSWER_MARGIN: Duration = Duration::from_millis(1500);

/// Epoch milliseconds; 0 = unknown.
static DEADLINE_MS: AtomicU64 = AtomicU64::new(0);

/// Store calls retried since the edge last asked: spent out of the same budget, and counted
/// here so the edge can publish them per invocation (a rising count is the first sign of
/// throttling, before any caller sees an error).
static RETRIES: AtomicU64 = AtomicU64::new(0);

/// Counts one retried store call (the adapters' retry policy calls it).
pub fn note_retry() {
    RETRIES.fetch_add(1, Ordering::Relaxed);
}

/// The retries counted since the last call, resetting the count.
pub fn take_retries() -> u64 {
    RETRIES.swap(0, Ordering::Relaxed)
}

/// Records the deadline of the invocation now starting (epoch milliseconds).
pub fn set_invocation_deadline(epoch_ms: u64) {
    DEADLINE_MS.store(epoch_ms, Ordering::Relaxed);
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The current invocation's deadline (epoch milliseconds), when a runtime set one.
pub fn invocation_deadline_ms() -> Option<i64> {
    match DEADLINE_MS.load(Ordering::Relaxed) {
        0 => None,
        ms => i64::try_from(ms).ok(),
    }
}

/// How long a store call may keep retrying from now: until the answer margin before the
/// invocation's deadline, and never more than [`DEFAULT_RETRY_BUDGET`].
pub fn retry_budget() -> Duration {
    let deadline = DEADLINE_MS.load(Ordering::Relaxed);
    if deadline == 0 {
        return DEFAULT_RETRY_BUDGET;
    }
    let left = Duration::from_millis(deadline.saturating_sub(now_ms()));
    left.saturating_sub(ANSWER_MARGIN).min(DEFAULT_RETRY_BUDGET)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_are_counted_until_taken() {
        take_retries();
        note_retry();
        note_retry();
        assert_eq!(take_retries(), 2);
        assert_eq!(take_retries(), 0);
    }

    #[test]
    fn budget_follows_the_deadline_and_is_capped() {
        set_invocation_deadline(0);
        assert_eq!(retry_budget(), DEFAULT_RETRY_BUDGET);
        set_invocation_deadline(now_ms() + 3_000);
        let b = retry_budget();
        assert!(
            b <= Duration::from_millis(1_500) && b > Duration::from_millis(1_000),
            "{b:?}"
        );
        set_invocation_deadline(now_ms() + 60_000);
        assert_eq!(retry_budget(), DEFAULT_RETRY_BUDGET);
        set_invocation_deadline(now_ms().saturating_sub(1));
        assert_eq!(retry_budget(), Duration::ZERO);
        set_invocation_deadline(0);
    }
}
