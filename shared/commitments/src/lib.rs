//! Inferred commitments (openwop-agent-memory §"Inferred commitments", RFC 0068): the pure,
//! deterministic half of the feature.
//!
//! - [`infer()`] turns one memory entry's (already SR-1-redacted) content into zero or more
//!   [`Inferred`] conditions — a time instant or a memory predicate — by a fixed, documented rule
//!   table (contract clause 1: every commitment is bound to the memory it came from, so the rules
//!   must be reproducible from the entry alone);
//! - [`commitment`] holds the commitment record and its state machine: which evaluation fires,
//!   re-arms or does nothing (clause 2: at most once per scheduled instant / per false-to-true
//!   transition);
//! - [`ids`] derives the commitment id, the `commitment.fired` dedupe id and the enqueued run id
//!   from stable inputs, so replays and duplicate deliveries collapse (clause 2, "MUST NOT re-fire
//!   on replay").
//!
//! Nothing here reads a clock or the host's time-zone settings: the instant (epoch milliseconds)
//! and the tenant's IANA zone are arguments, so the same inputs give the same answer on every host
//! and in every replay. Nothing here stores intention text either: a commitment carries only its
//! condition, and even a predicate's tag is hidden from `Debug` (see [`Condition`]).

pub mod commitment;
mod error;
pub mod ids;
pub mod infer;
mod zone;

pub use commitment::{Commitment, State, Transition, MAX_FIRED_HISTORY};
pub use error::CommitmentError;
pub use ids::{commitment_id, fire_event_id, run_id};
pub use infer::{
    infer, infer_in, predicate_holds, predicate_tag, Condition, Inferred, MAX_INFERRED_PER_ENTRY,
    PREDICATE_TAG_PREFIX,
};
pub use zone::TimeZoneSpec;
