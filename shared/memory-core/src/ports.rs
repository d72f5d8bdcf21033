//! The ports of the hexagon. Adapters (DynamoDB, S3, EventBridge, in-memory) implement these;
//! everything with behaviour is written against them. Every method takes a tenant-bearing key
//! (`MemoryRef`, `TenantId`, `SubjectKey`, `ObjectKey`), so no call can be phrased that spans
//! tenants (CTI-1).

use async_trait::async_trait;

use crate::error::StoreError;
use crate::events::DomainEvent;
use crate::idempotency::{Claim, Completion, IdempotencyKey, KeyClaim};
use crate::model::{Embedding, EntryKey, StoredEntry, SubjectKey, Tier};
use crate::quota::{Counter, Limits, Quota, QuotaCheck};

use crate::time::Timestamp;
use memory_guard::{MemoryRef, TenantId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Upper bound the store accepts in one `put_entries` call: it must be a single all-or-nothing
/// write (one DynamoDB `TransactWriteItems`, whose ceiling is 100 items, leaving room for the
/// per-ref work markers written in the same transaction).
pub const MAX_ENTRIES_PER_PUT: usize = 90;

/// Most items one all-or-nothing store write may touch (DynamoDB `TransactWriteItems`).
pub const MAX_ITEMS_PER_TRANSACTION: usize = 100;

/// `Backend { code: "TooManyItems" }` when `items` exceed `max`: the one answer every store
/// gives to a write that cannot be a single all-or-nothing call.
pub fn within(op: &'static str, items: usize, max: usize) -> Result<(), StoreError> {
    if items > max {
        return Err(StoreError::Backend {
            op,
            code: "TooManyItems".into(),
        });
    }
    Ok(())
}

/// The kinds of pass a ref can be waiting for. Writes of transactional entries make a ref wait
/// for a dream; writes of long-term entries (including a dream's output) for consolidation; a
/// write that stored an entry without a vector of the configured embedding model, for an embed
/// pass (docs/search.md "Semantic search"); every write, for an index pass (docs/search.md "The
/// index").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PassKind {
    Dream,
    Consolidate,
    Embed,
    Index,
}

impl PassKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PassKind::Dream => "dream",
            PassKind::Consolidate => "consolidate",
            PassKind::Embed => "embed",
            PassKind::Index => "index",
        }
    }

    /// The kind a wire name (`as_str`) stands for.
    pub fn parse(raw: &str) -> Option<PassKind> {
        [
            PassKind::Dream,
            PassKind::Consolidate,
            PassKind::Embed,
            PassKind::Index,
        ]
        .into_iter()
        .find(|k| k.as_str() == raw)
    }

    /// The pass a new entry of `tier` makes pending.
    pub fn for_tier(tier: Tier) -> PassKind {
        match tier {
            Tier::Transactional => PassKind::Dream,
            Tier::LongTerm => PassKind::Consolidate,
        }
    }
}

/// The pending-pass index is split into this many shards so no index partition gets hot
/// and a fan-out reads exactly the refs with a pending pass, never the whole table.
pub const PENDING_SHARDS: u8 = 16;

/// The shard of a ref in the pending-pass index (stable across processes and releases).
pub fn pending_shard(memory_ref: &MemoryRef) -> u8 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(memory_ref.to_string().as_bytes());
    digest[0] % PENDING_SHARDS
}

/// Where a ref stands with one kind of pass, as its work marker records it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarkerState {
    /// Bumped by every write that makes a pass pending; `None` when no write ever did.
    pub version: Option<u64>,
    /// Whether a pass is pending (the ref is in the pending-pass index).
    pub pending: bool,
    /// The newest source instant a finished pass has covered.
    pub watermark: Option<Timestamp>,
    /// A pass has begun and not finished cleanly: every write bumps `version` meanwhile.
    pub running: bool,
}

/// One page request against one memoryRef, newest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageQuery {
    /// Items the store examines for this page (before TTL filtering), at least 1.
    pub limit: u32,
    /// Exclusive start: the id of the last entry examined by the previous page.
    pub after: Option<String>,
    /// Entries expiring at or before this instant are filtered out.
    pub now: Timestamp,
}

/// Where a walk down one tag's postings continues. Entry ids sort like their time, so "below"
/// is "older".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdBound {
    /// Ids strictly below this one.
    Below(String),
    /// This id and those below it.
    AtMost(String),
}

impl IdBound {
    pub fn admits(&self, id: &str) -> bool {
        match self {
            IdBound::Below(b) => id < b.as_str(),
            IdBound::AtMost(b) => id <= b.as_str(),
        }
    }

    /// The lower of two bounds (the one admitting fewer ids).
    pub fn tighter(a: IdBound, b: IdBound) -> IdBound {
        fn rank(x: &IdBound) -> (&str, u8) {
            match x {
                IdBound::Below(s) => (s, 0),
                IdBound::AtMost(s) => (s, 1),
            }
        }
        if rank(&a) <= rank(&b) {
            a
        } else {
            b
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub entries: Vec<StoredEntry>,
    /// Where the next page starts; `None` when the ref has nothing older.
    pub next_after: Option<String>,
}

/// A content-free record of one entry mutation (docs/search.md "The index"): the ids a put,
/// delete, rewrite or vector backfill touched, written in the mutation's own request. The search
/// index's tail is the set of these not yet folded into segments: a query re-reads each id from
/// the table and masks its segment copies, so what a pass has not indexed yet is found, and a
/// delete is masked at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Orders the ref's changes (a ULID of the write); the name the pass deletes it by.
    pub seq: String,
    pub ids: Vec<String>,
}

/// What `changes` answers for a store that keeps no change records: the index then never
/// serves, and searches read the table.
pub const NO_CHANGE_LOG: &str = "NoChangeLog";

#[async_trait]
pub trait EntryStore: Send + Sync {
    /// Writes all entries or none, each only if its id is not taken yet (a retry of the same
    /// ids cannot duplicate or overwrite), then marks each ref as waiting for the pass its
    /// entries' tiers make pending. At most `MAX_ENTRIES_PER_PUT` entries.
    async fn put_entries(&self, entries: &[StoredEntry]) -> Result<(), StoreError> {
        self.put_entries_completing(entries, None).await
    }

    /// `put_entries`, recording `completion` on its idempotency key in the same all-or-nothing
    /// write, conditional on the key still being held by `completion.attempt` (`Conflict`
    /// otherwise, and then nothing was written). A failed condition caused by an earlier
    /// attempt of this very call (its answer lost) is success.
    ///
    /// Marking the ref pending happens after the write, outside its transaction and only when the
    /// ref is not pending yet or a pass is running (`begin_pass`), so writers to one ref do not
    /// contend on one item: N puts in one dirty period touch the marker once.
    ///
    /// Only the writer's checked puts can be refused, so this charges the stored counters
    /// without a limit ([`QuotaCheck::unconditional`]).
    async fn put_entries_completing(
        &self,
        entries: &[StoredEntry],
        completion: Option<&Completion>,
    ) -> Result<(), StoreError> {
        let check = QuotaCheck::unconditional(entries);
        self.put_entries_checked(entries, completion, &check).await
    }

    /// `put_entries_completing` that also applies `check` (the put's quota charges,
    /// [`QuotaCheck::for_put`]) in the same all-or-nothing write: `QuotaExceeded` when a
    /// conditional charge would pass its limit, and then nothing was written. A store that keeps
    /// no quota counters ignores the check.
    async fn put_entries_checked(
        &self,
        entries: &[StoredEntry],
        completion: Option<&Completion>,
        check: &QuotaCheck,
    ) -> Result<(), StoreError>;

    /// Marks `memory_ref` as waiting for a `kind` pass since `since`, touching its marker only
    /// when it is not pending yet or a pass is reading it. `put_entries_completing` does this
    /// itself; a replayed keyed put calls it again because the attempt that stored the
    /// entries may have lost every answer, or died, between its transaction and its marker.
    /// A failure is logged, not returned: the entries are stored either way.
    async fn mark_pending(&self, memory_ref: &MemoryRef, kind: PassKind, since: Timestamp);

    /// Claims an idempotency key for one attempt: acquires it when it is new, expired, or held
    /// by an attempt whose lease ran out with the same payload; otherwise returns the record.
    async fn claim_key(&self, claim: &KeyClaim) -> Result<Claim, StoreError>;

    /// Records the result of a claim held by `completion.attempt`; `Conflict` when another
    /// attempt holds it now. Recording the same result again is success.
    async fn complete_key(&self, completion: &Completion) -> Result<(), StoreError>;

    /// Gives a key back after its holder failed without writing, so a retry need not wait for
    /// the lease (Powertools deletes its in-progress record the same way). Only the holding
    /// attempt's unfinished record is removed; anything else is left alone.
    async fn release_key(&self, key: &IdempotencyKey, attempt: &str) -> Result<(), StoreError>;

    /// Deletes one entry and records `completion` in the same all-or-nothing write. `Ok(false)`
    /// when the entry did not exist (nothing recorded; the caller records that answer).
    async fn delete_completing(
        &self,
        key: &EntryKey,
        completion: &Completion,
    ) -> Result<bool, StoreError>;

    /// Forget's fence (`forget.rs`): records that these entries are being forgotten, before
    /// anything derived from them is looked for. Kept until `until`.
    async fn tombstone(&self, keys: &[EntryKey], until: Timestamp) -> Result<(), StoreError>;

    /// The ids of one ref that forget has tombstoned, read-your-writes consistent.
    async fn tombstones(&self, memory_ref: &MemoryRef) -> Result<BTreeSet<String>, StoreError>;

    /// One page of one ref, newest first, read-your-writes consistent. A page examines at most
    /// `limit` items, so it may hold fewer entries than `limit` and still have a next page.
    async fn list_page(
        &self,
        memory_ref: &MemoryRef,
        query: &PageQuery,
    ) -> Result<Page, StoreError>;

    /// One entry, read-your-writes consistent. Expiry is the caller's rule to apply.
    async fn get(&self, key: &EntryKey) -> Result<Option<StoredEntry>, StoreError>;

    /// The ids of one ref's entries that carry `tag`, by the store's tag postings: newest first,
    /// within `bound`, at most `limit`; fewer than `limit` only when no more lie within the
    /// bound. Every write stores an entry's postings before the entry and removes them after
    /// it, so a live entry is always found; a posting can outlive its entry (a crash between
    /// the two), so postings only propose ids (`tag_filter` fetches and checks each).
    async fn tag_postings(
        &self,
        memory_ref: &MemoryRef,
        tag: &str,
        bound: Option<&IdBound>,
        limit: u32,
    ) -> Result<Vec<String>, StoreError>;

    /// The entries among `keys` that exist (at most `MAX_LIST_LIMIT` keys), read-your-writes
    /// consistent, in any order. Expiry is the caller's rule to apply.
    async fn get_many(&self, keys: &[EntryKey]) -> Result<Vec<StoredEntry>, StoreError>;

    /// Deletes one entry; `true` when it existed.
    async fn delete(&self, key: &EntryKey) -> Result<bool, StoreError>;

    /// Stores `embedding` on the entry `read` (the embed pass's backfill), only if that entry
    /// still exists with the revision read and carries no vector of `embedding.model` yet, so a
    /// concurrent delete, forget or rewrite is never undone and an entry is never recreated.
    /// `Ok(false)` when the condition failed (nothing changed), also when an earlier attempt of
    /// this very call applied and its answer was lost.
    async fn set_embedding(
        &self,
        read: &StoredEntry,
        embedding: &Embedding,
    ) -> Result<bool, StoreError>;

    /// Every entry of the tenant written with this subject, across all its refs.
    async fn find_by_subject(&self, subject: &SubjectKey) -> Result<Vec<EntryKey>, StoreError>;

    /// Deletes the given entries (absent ones are skipped); returns how many existed.
    async fn delete_many(&self, keys: &[EntryKey]) -> Result<usize, StoreError>;

    /// One all-or-nothing rewrite: puts `put` (each only if its id is free) and deletes each of
    /// `delete` (the entries as the caller read them) only if its revision is still the one
    /// read. `StoreError::Conflict` when any condition fails, and then nothing changed. At most
    /// `MAX_ITEMS_PER_TRANSACTION` items. Background rewrites do not mark a pass pending: they
    /// add no new information.
    async fn replace(&self, put: &[StoredEntry], delete: &[StoredEntry]) -> Result<(), StoreError>;

    async fn marker_state(
        &self,
        memory_ref: &MemoryRef,
        kind: PassKind,
    ) -> Result<MarkerState, StoreError>;

    /// Starts a pass: from now on every write to the ref bumps the version (so `finish_pass`
    /// with the version returned here fails if any write landed during the pass), then returns
    /// the state. A successful `finish_pass` ends the pass.
    async fn begin_pass(
        &self,
        memory_ref: &MemoryRef,
        kind: PassKind,
    ) -> Result<MarkerState, StoreError>;

    /// Records a finished pass: moves the watermark (when given) and, only if no write arrived
    /// since `version` was read, ends the pass (`begin_pass`) and takes the ref out of the
    /// pending-pass index. Returns whether the ref left the index (`false` when it was not in
    /// it, so of two duplicate passes only one sees `true`).
    async fn finish_pass(
        &self,
        memory_ref: &MemoryRef,
        kind: PassKind,
        version: Option<u64>,
        watermark: Option<Timestamp>,
    ) -> Result<bool, StoreError>;

    /// The refs of one shard with a pending pass of `kind`, oldest pending first.
    async fn pending_refs(&self, kind: PassKind, shard: u8) -> Result<Vec<MemoryRef>, StoreError>;

    /// The ref's change records (every put, delete, rewrite and vector backfill writes one in
    /// its own request), oldest first, read-your-writes consistent. A store without them
    /// answers `Backend` with code [`NO_CHANGE_LOG`].
    async fn changes(&self, memory_ref: &MemoryRef) -> Result<Vec<Change>, StoreError> {
        let _ = memory_ref;
        Err(StoreError::Backend {
            op: "changes",
            code: NO_CHANGE_LOG.to_owned(),
        })
    }

    /// Deletes the named change records once the index holds what they recorded.
    async fn drop_changes(
        &self,
        memory_ref: &MemoryRef,
        seqs: &[String],
    ) -> Result<(), StoreError> {
        let _ = (memory_ref, seqs);
        Ok(())
    }
}

/// Where quota limits and counters live (docs/quotas.md "Quotas"). The entry store charges a
/// put's stored counters itself, in the put's own write; this port serves the rest: limits,
/// the windowed charges that go with no entry write (searches, tokens), reading counters back,
/// and the recount that repairs them.
#[async_trait]
pub trait QuotaStore: Send + Sync {
    /// The limits of `tenant`: the deployment's defaults with the tenant's override applied,
    /// read at most [`crate::quota::LIMITS_CACHE_MILLIS`] ago.
    async fn limits(&self, tenant: &TenantId) -> Result<Limits, StoreError>;

    /// Applies each charge of `check` (one conditional add each, in order, stopping at the first
    /// refusal: `QuotaExceeded`) and answers the counters' values after.
    async fn charge(&self, check: &QuotaCheck) -> Result<Vec<(Counter, i64)>, StoreError>;

    /// The counters' values now (an absent counter is 0), read-your-writes consistent: what
    /// a put left (the near-limit warning) and the recount's fence.
    async fn counters_consistent(
        &self,
        counters: &[Counter],
    ) -> Result<Vec<(Counter, i64)>, StoreError>;

    /// Applies a recount in one all-or-nothing write: sets the ref's counters to what was
    /// counted and moves the tenant's by the difference, only if the ref's counters still hold
    /// what was seen. `Ok(false)` when they moved (nothing changed; the next pass repairs).
    async fn repair(&self, recount: &crate::quota::Recount) -> Result<bool, StoreError>;

    /// Replaces a tenant's override of the defaults (an operator action); an empty list
    /// removes it.
    async fn set_overrides(
        &self,
        tenant: &TenantId,
        overrides: &[(Quota, u64)],
    ) -> Result<(), StoreError>;
}

/// One pass over one ref, as queued between the fan-out and the function that runs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedPass {
    pub kind: PassKind,
    pub tenant_id: String,
    pub memory_ref: String,
}

#[async_trait]
pub trait PassQueue: Send + Sync {
    async fn enqueue(&self, passes: &[QueuedPass]) -> Result<(), StoreError>;
}

/// A key in the archive bucket. It always begins with the tenant id, so a listing or an IAM
/// prefix condition on one tenant can never reach another's objects.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(String);

impl ObjectKey {
    /// `rest` is a relative path of non-empty segments from the id alphabet plus `/`.
    pub fn new(tenant: &TenantId, rest: &str) -> Option<Self> {
        let ok = !rest.is_empty()
            && rest.len() <= 900
            && rest.split('/').all(|seg| {
                !seg.is_empty()
                    && seg != "."
                    && seg != ".."
                    && seg
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
            });
        ok.then(|| ObjectKey(format!("{}/{}", tenant.as_str(), rest)))
    }

    /// Rebuilds a key listed back from the bucket; `None` unless it lies under the tenant.
    pub fn from_listed(tenant: &TenantId, key: &str) -> Option<Self> {
        let rest = key.strip_prefix(tenant.as_str())?.strip_prefix('/')?;
        ObjectKey::new(tenant, rest)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What an object is, so storage rules (S3 lifecycle by tag) can tell archives from indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    Archive,
    Index,
}

impl ObjectKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Archive => "archive",
            ObjectKind::Index => "index",
        }
    }
}

/// One object to write: its key, its bytes, what it is and its content type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectPut<'a> {
    pub key: &'a ObjectKey,
    pub body: Vec<u8>,
    pub kind: ObjectKind,
    pub content_type: &'a str,
}

impl<'a> ObjectPut<'a> {
    /// A JSON document: archives and the normative MEMORY-INDEX.
    pub fn json(key: &'a ObjectKey, kind: ObjectKind, body: Vec<u8>) -> Self {
        ObjectPut {
            key,
            body,
            kind,
            content_type: "application/json",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    Created,
    /// Something already lives at the key; immutable archives treat this as success.
    AlreadyExists,
}

/// Precondition of a compare-and-swap put.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    Absent,
    ETag(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredObject {
    pub body: Vec<u8>,
    pub etag: String,
    /// When the object was last written, where the backend says (S3's `Last-Modified`): how
    /// a sweep tells an object a run may still be finishing from one left long ago.
    pub modified_at: Option<Timestamp>,
}

#[async_trait]
pub trait ArchiveStore: Send + Sync {
    /// Writes only if nothing is at `key` yet (immutable archives).
    async fn put_if_absent(&self, put: ObjectPut<'_>) -> Result<PutOutcome, StoreError>;

    /// Compare-and-swap: writes only if the precondition holds, returning the new ETag;
    /// `StoreError::Conflict` when another writer got there first.
    async fn put_expecting(&self, put: ObjectPut<'_>, expect: Expect)
        -> Result<String, StoreError>;

    async fn get(&self, key: &ObjectKey) -> Result<Option<StoredObject>, StoreError>;

    /// The bytes `range` of the object (fewer at its end), `None` when it is absent: a text
    /// search reads a segment's text part without the vectors stored after it in the same
    /// object. Backends without ranged reads get the whole object and cut it.
    async fn get_range(
        &self,
        key: &ObjectKey,
        range: std::ops::Range<u64>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.get(key).await?.map(|object| {
            let end = usize::try_from(range.end)
                .unwrap_or(usize::MAX)
                .min(object.body.len());
            let start = usize::try_from(range.start).unwrap_or(usize::MAX).min(end);
            object.body[start..end].to_vec()
        }))
    }

    /// Removes the object (every version, where the backend keeps versions). Absent is fine.
    async fn delete(&self, key: &ObjectKey) -> Result<(), StoreError>;

    /// Removes every non-current version of the object (a no-op where the backend keeps
    /// none), so rewritten objects keep no history of what forget removed.
    async fn delete_old_versions(&self, key: &ObjectKey) -> Result<(), StoreError>;

    /// Keys under `tenant/prefix`, in key order.
    async fn list(&self, tenant: &TenantId, prefix: &str) -> Result<Vec<ObjectKey>, StoreError>;
}

#[async_trait]
pub trait EventPublisher: Send + Sync {
    /// Publishes every event or reports failure; partial failures are retried inside.
    async fn publish(&self, events: &[DomainEvent]) -> Result<(), StoreError>;
}

pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// Issues entry ids. Implementations must be time-ordered (ids sort like their `now`) so a
/// newest-first listing is a reverse key scan.
pub trait IdSource: Send + Sync {
    fn next_id(&self, now: Timestamp) -> String;
}

/// Wall clock for production.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(chrono::Utc::now().timestamp_millis())
    }
}

/// ULIDs, monotonic within a process even when two ids share a millisecond.
#[derive(Default)]
pub struct UlidIds {
    generator: std::sync::Mutex<ulid::Generator>,
}

impl std::fmt::Debug for UlidIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UlidIds")
    }
}

impl IdSource for UlidIds {
    fn next_id(&self, now: Timestamp) -> String {
        let at = std::time::UNIX_EPOCH
            + std::time::Duration::from_millis(u64::try_from(now.as_millis()).unwrap_or(0));
        let mut generator = self
            .generator
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Overflow happens only after 2^80 ids in one millisecond; fall back to a fresh ULID.
        generator
            .generate_from_datetime(at)
            .unwrap_or_else(|_| ulid::Ulid::from_datetime(at))
            .to_string()
    }
}

/// Turns text into an embedding (docs/search.md "Semantic search"). Entries are sent after SR-1
/// redaction, so no registered secret of a write leaves for the model provider; a search query
/// is sent as the caller typed it (queries carry no secrets registry).
#[async_trait]
pub trait Embedder: Send + Sync {
    /// The model id stored beside every vector it makes.
    fn model(&self) -> &str;
    async fn embed(&self, text: &str) -> Result<Embedding, StoreError>;
}

/// One fact an abstractive summary is to cover, as the deterministic distiller chose and ranked
/// it. Everything in it is already SR-1 redacted with the dream run's secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbstractiveFact {
    /// The section the deterministic summary puts the fact in (a tag name, or `(untagged)`), so
    /// a model can keep related facts together.
    pub section: String,
    /// The fact as one line of text, without list markers.
    pub text: String,
    /// How many sources state it (the deterministic distiller's corroboration count).
    pub weight: u32,
}

/// What a [`AbstractiveModel`] is asked for: the facts, most important first, and the most
/// cl100k_base tokens the answer may take. The caller recounts the answer with its own
/// tokenizer and rejects it when it does not fit, since a model counts with another tokenizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbstractiveRequest {
    pub facts: Vec<AbstractiveFact>,
    pub max_output_tokens: u32,
}

/// Rewrites a dream's ranked facts as an abstractive summary with a language model
/// (docs/dreams.md "Abstractive dreams (optional)"). Optional: a dream without one writes the
/// deterministic summary.
///
/// Nothing an abstractive model answers is trusted: the dream re-redacts it with the run's SR-1
/// redactor, recounts it, and falls back to the deterministic summary when the call fails,
/// times out (the dream bounds it; implementations need not), or the answer is empty or over
/// budget. Errors name the operation and a code, never text of the request or the answer.
#[async_trait]
pub trait AbstractiveModel: Send + Sync {
    /// The model id, recorded in the archive's distiller version.
    fn model(&self) -> &str;
    /// The summary text: an error, too, when the model stopped before it finished (a cut
    /// summary reads as complete but is not).
    async fn rewrite(&self, request: &AbstractiveRequest) -> Result<String, StoreError>;
}

/// The ports every service writes through: the entry store, the event bus and the clock. One
/// value, so a service is wired with one argument and tests wire them all the same way.
#[derive(Clone)]
pub struct CorePorts {
    pub store: Arc<dyn EntryStore>,
    pub publisher: Arc<dyn EventPublisher>,
    pub clock: Arc<dyn Clock>,
}

impl CorePorts {
    pub fn new(
        store: Arc<dyn EntryStore>,
        publisher: Arc<dyn EventPublisher>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        CorePorts {
            store,
            publisher,
            clock,
        }
    }
}
