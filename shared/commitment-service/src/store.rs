//! The commitment store port: commitments as stored, the sparse due index, and the operations
//! firing, inference and forget need. Adapters: `commitment-aws` (DynamoDB) and the in-memory
//! one in `memory-testkit`.

use async_trait::async_trait;
use memory_core::model::SubjectKey;
use memory_core::{StoreError, Timestamp};
use memory_guard::MemoryRef;

/// A commitment as stored: the pure record plus what the store needs to decide races.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCommitment {
    pub commitment: commitments::Commitment,
    /// Bumped by every write; transitions are conditional on it, so one of two racing
    /// evaluations wins and the other re-reads.
    pub version: u64,
    /// The subject of the source entry, so forget can find the commitment.
    pub subject: Option<SubjectKey>,
    /// A fire recorded but not yet announced (the outbox). While set, the commitment stays in
    /// the due index so a crash between recording and publishing is finished by the next tick.
    pub outbox: Option<Outbox>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outbox {
    pub instant_ms: i64,
    /// Until then, the recorder is presumed alive and still publishing; others leave it alone.
    pub lease_until_ms: i64,
}

impl StoredCommitment {
    /// The due-index position: armed time commitments at their instant, pending outboxes at
    /// their instant; absent otherwise (the index is sparse).
    pub fn due_at(&self) -> Option<i64> {
        self.outbox
            .map(|o| o.instant_ms)
            .or_else(|| self.commitment.scheduled_for())
    }
}

/// Addresses one commitment; the tenant is in the ref.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommitmentKey {
    pub memory_ref: MemoryRef,
    pub id: String,
}

/// The due index is split like the pending-pass index so no index partition gets hot.
pub const DUE_SHARDS: u8 = 16;

pub fn due_shard(commitment_id: &str) -> u8 {
    use sha2::Digest;
    sha2::Sha256::digest(commitment_id.as_bytes())[0] % DUE_SHARDS
}

/// What one due-index read examined: the keys due now and how many index items were read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DueRead {
    pub keys: Vec<CommitmentKey>,
    pub items_read: u64,
}

#[async_trait]
pub trait CommitmentStore: Send + Sync {
    /// Stores commitments that do not exist yet (ids are deterministic, so re-inference of the
    /// same entry is a no-op); returns how many were new.
    async fn put_new(&self, commitments: &[StoredCommitment]) -> Result<usize, StoreError>;

    async fn get(&self, key: &CommitmentKey) -> Result<Option<StoredCommitment>, StoreError>;

    /// Writes `next` only if the stored version is still `expected_version`; `Conflict`
    /// otherwise. `next.version` must be `expected_version + 1`.
    async fn transition(
        &self,
        expected_version: u64,
        next: &StoredCommitment,
    ) -> Result<(), StoreError>;

    /// Commitments of one shard due at or before `now`, read from the sparse due index: the
    /// cost is the number of due items, whatever the number of commitments stored.
    async fn due(&self, shard: u8, now: Timestamp) -> Result<DueRead, StoreError>;

    async fn for_ref(&self, memory_ref: &MemoryRef) -> Result<Vec<StoredCommitment>, StoreError>;

    async fn find_by_subject(&self, subject: &SubjectKey)
        -> Result<Vec<CommitmentKey>, StoreError>;

    async fn delete(&self, key: &CommitmentKey) -> Result<bool, StoreError>;
}
