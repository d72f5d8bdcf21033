//! Inferred commitments: the store port (`store`), their events (`events`), inference, firing
//! and forget's hook (`firing`), and the `memory-commitments` contract (`api`). The inference
//! and condition rules are the pure `commitments` crate.

pub mod api;
pub mod events;
pub mod firing;
pub mod store;

pub use firing::{CommitmentForgetHook, CommitmentService, ZoneConfig};
pub use store::{
    due_shard, CommitmentKey, CommitmentStore, DueRead, Outbox, StoredCommitment, DUE_SHARDS,
};
