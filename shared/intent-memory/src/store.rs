//! The door's store port. Each write is one atomic step of the backend (one DynamoDB
//! transaction), so uniqueness (§1.2), versions (§3) and capacity (§9.4) are conditions the
//! store enforces, never a read followed by a write: two clients racing for one key, one
//! version or the last free slot cannot both win.

use async_trait::async_trait;
use memory_core::model::SubjectKey;
use memory_core::ports::ObjectKey;
use memory_core::quota::Charge;
use memory_core::time::Timestamp;
use memory_core::StoreError;
use memory_guard::{AgentId, TenantId};

use crate::model::{
    Caller, ClaimKey, CounterAt, CounterKey, Home, Location, StoredIntent, VersionRecord,
};

/// A capacity counter: the count, and a revision every change of it bumps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterState {
    pub n: u64,
    pub rev: u64,
}

/// How an insert is counted against its memory type's capacity.
#[derive(Clone, Debug, PartialEq)]
pub enum Capacity {
    /// Semantic memory: no capacity.
    Unbounded,
    /// The counter goes up by one, only while it is below `max`.
    Count { counter: CounterKey, max: u64 },
    /// At capacity: `victim` (read just before, at its version) is deleted in the same step,
    /// which holds only while the counter is still at `max` or above and the victim unchanged.
    Evict {
        counter: CounterKey,
        max: u64,
        victim: Box<StoredIntent>,
    },
}

/// A new entry as [`IntentStore::insert`] writes it: the entry, its first version record, how
/// it counts against its memory type's capacity, and its charges on the host's quota counters
/// (`crate::quota::charges`, net of an evicted victim), applied in the same step: a charge
/// that does not fit refuses the insert with `StoreError::QuotaExceeded`.
#[derive(Clone, Copy, Debug)]
pub struct NewIntent<'a> {
    pub entry: &'a StoredIntent,
    pub first: &'a VersionRecord,
    pub capacity: &'a Capacity,
    pub quota: &'a [Charge],
}

/// One update as [`IntentStore::update`] writes it: `previous` (as read) replaced by `next`,
/// with the version record `record`, dropping the version record `drop_version` (retention),
/// and applying `quota` (the value's change of bytes) in the same step.
#[derive(Clone, Copy, Debug)]
pub struct IntentUpdate<'a> {
    pub previous: &'a StoredIntent,
    pub next: &'a StoredIntent,
    pub record: &'a VersionRecord,
    pub drop_version: Option<u64>,
    pub quota: &'a [Charge],
}

/// A repair of a capacity counter: set it `to`, only if it is still as `seen`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountRepair {
    pub at: CounterAt,
    pub seen: CounterState,
    pub to: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum InsertOutcome {
    Inserted,
    /// The uniqueness claim is held by this entry id.
    KeyTaken {
        existing_id: String,
    },
    /// The counter is at `max` (a `Count` insert).
    AtCapacity,
    /// The victim changed or the count fell below `max` meanwhile (an `Evict` insert): look
    /// again.
    Raced,
}

/// What a subject's forget finds of this door's data.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SubjectHit {
    Entry(Location),
    /// A version record whose entry may already be gone.
    Version(Location, u64),
    /// A working-memory archive holding an entry of the subject.
    Archive(ArchiveKey),
}

/// A task's working-memory archive of one agent.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ArchiveKey {
    pub tenant: TenantId,
    pub agent: AgentId,
    /// `model::task_digest` of the task id.
    pub task: String,
}

impl ArchiveKey {
    /// The archive's object: beside the agent's dream archives, under the tenant's prefix.
    pub fn object(&self) -> Option<ObjectKey> {
        ObjectKey::new(
            &self.tenant,
            &format!(
                "agents/{}/keyed-archives/{}.json",
                self.agent.as_str(),
                self.task
            ),
        )
    }
}

#[async_trait]
pub trait IntentStore: Send + Sync {
    /// Writes a new entry with its claim, its first version record and (for episodic,
    /// unpinned) its place in the eviction order, counted as `capacity` says; all or nothing.
    async fn insert(&self, new: NewIntent<'_>) -> Result<InsertOutcome, StoreError>;

    /// The entry at `at`, strongly consistent (read-your-writes).
    async fn get(&self, at: &Location) -> Result<Option<StoredIntent>, StoreError>;

    /// Every entry of one partition, in id (creation) order.
    async fn list(&self, tenant: &TenantId, home: &Home) -> Result<Vec<StoredIntent>, StoreError>;

    /// Replaces `previous` by `next` (version + 1) and adds `record`, only if the stored entry
    /// is still at `previous`'s version; drops the version record `drop_version` (retention).
    /// `Ok(false)`: the version moved (someone else updated or deleted it first); a quota
    /// charge that does not fit: `StoreError::QuotaExceeded`, nothing written.
    async fn update(&self, update: IntentUpdate<'_>) -> Result<bool, StoreError>;

    /// Records an access for LRU (§2.2), only if the entry is still at `entry`'s version and
    /// access time; losing that race is fine (someone else touched it).
    async fn touch(&self, entry: &StoredIntent, at: Timestamp) -> Result<(), StoreError>;

    /// Deletes the entry, its claim, its place in the eviction order and every version
    /// record, and counts it out of its counter and the quota counters
    /// (`crate::quota::released`), if it is still at `entry`'s version.
    /// `Ok(false)`: it changed or was gone.
    async fn remove(&self, entry: &StoredIntent) -> Result<bool, StoreError>;

    /// Releases a uniqueness claim of `holder`'s partition still held by `holder`'s id, whose
    /// entry is gone (the backend's TTL deleted an expired entry and left its claim).
    async fn release_claim(&self, holder: &Location, claim: &ClaimKey) -> Result<(), StoreError>;

    /// Sets a capacity counter to `repair.to`, only if it has not moved since `repair.seen` was
    /// read (its revision, which every insert and removal bumps: a delete and an insert in
    /// between bring the count back to the same value, never the revision). Repairs a count
    /// that entries deleted by the backend's TTL left too high. `Ok(false)`: it moved.
    async fn set_count(&self, repair: &CountRepair) -> Result<bool, StoreError>;

    /// Deletes a capacity counter that stands at zero (a finished task's), and nothing else:
    /// a create that counts after it starts a fresh counter.
    async fn drop_counter_if_zero(&self, at: &CounterAt) -> Result<(), StoreError>;

    /// The version records of one entry, oldest first.
    async fn versions(&self, at: &Location) -> Result<Vec<VersionRecord>, StoreError>;

    /// The next eviction victim of an agent's episodic memory: lowest priority first, then
    /// least recently accessed; pinned entries are never candidates.
    async fn eviction_candidate(&self, agent: &Caller) -> Result<Option<Location>, StoreError>;

    /// A capacity counter as it stands (for the error a full memory type answers, and repairs).
    async fn count(&self, at: &CounterAt) -> Result<CounterState, StoreError>;

    /// Indexes a task archive under each subject whose entries it holds (the archive itself
    /// is an object of the `ArchiveStore`). Items are only ever added here: an item of a subject
    /// the archive no longer holds is harmless (forget finds nothing of it inside), while
    /// pruning would race a concurrent archiver that just indexed a new subject.
    async fn index_archive(
        &self,
        key: &ArchiveKey,
        subjects: &[SubjectKey],
    ) -> Result<(), StoreError>;

    /// Drops the archive's index item of one subject, once the archive holds nothing of it.
    async fn unindex_archive(
        &self,
        key: &ArchiveKey,
        subject: &SubjectKey,
    ) -> Result<(), StoreError>;

    /// Marks an entry as forgotten before forget removes it, so a task archiver that read it
    /// and then finds it gone knows to take it back out of the archive (and not an entry
    /// another archiver of the same task removed). Kept a day.
    async fn tombstone(&self, at: &Location, until: Timestamp) -> Result<(), StoreError>;

    /// Whether the entry was forgotten (a live tombstone).
    async fn tombstoned(&self, at: &Location) -> Result<bool, StoreError>;

    /// Everything of this door indexed under the subject, in the caller's tenant only.
    async fn subject_hits(&self, subject: &SubjectKey) -> Result<Vec<SubjectHit>, StoreError>;

    /// The quota counters of one partition's keyed entries, `(entries, bytes)`, strongly
    /// consistent (absent: 0).
    async fn quota_scope(&self, tenant: &TenantId, home: &Home) -> Result<(i64, i64), StoreError>;

    /// Sets a partition's quota counters to what `recount` counted, only if both still hold
    /// what it saw, and moves the tenant's bytes by the difference, in one step. Repairs what
    /// entries the backend's TTL deleted left charged. `Ok(false)`: they moved.
    async fn repair_quota(&self, recount: &crate::quota::ScopeRecount) -> Result<bool, StoreError>;

    /// Deletes one version record (forget of an entry already gone).
    async fn delete_version(&self, at: &Location, version: u64) -> Result<(), StoreError>;
}
