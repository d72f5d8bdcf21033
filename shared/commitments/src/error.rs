//! The crate's one error enum. Messages name the rule that was broken, never entry content or a
//! predicate tag (both derive from what a user wrote; observability.md and SR-1 keep that out of
//! logs and error envelopes).

use thiserror::Error;

use crate::commitment::State;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CommitmentError {
    /// The tenant's configured zone is not an IANA name known to the bundled tz database. The
    /// value is not echoed: tenant configuration is the caller's to log, not ours.
    #[error("unknown time zone: expected an IANA zone name such as UTC or Europe/Oslo")]
    UnknownTimeZone,
    /// A transition that the state machine does not allow from the record's current state
    /// (e.g. firing a cancelled commitment, or firing a time commitment at another instant).
    #[error("transition {transition} is not allowed from state {from}")]
    InvalidTransition {
        from: State,
        transition: &'static str,
    },
    /// A stored field could not be decoded (schema drift or a manual edit); `field` names it.
    #[error("stored commitment field {field} is not in the expected shape")]
    Corrupt { field: &'static str },
}
