//! Inferred commitments: the store port (`store`), their events (`events`), inference, firing
//! and forget's hook (`firing`). The inference
//! and condition rules are the pure `commitments` crate. The `memory-commitments` contract
//! (decoding its triggers, the wire errors, metrics) is the function's own.

pub mod events;
pub mod firing;
pub mod store;

pub use firing::{CommitmentForgetHook, CommitmentService, ZoneConfig};
pub use store::{
    due_shard, CommitmentKey, CommitmentStore, DueRead, Outbox, StoredCommitment, DUE_SHARDS,
};
