//! In-memory implementations of every port, for fast unit tests and for the behavioural suite
//! that the AWS adapters must pass too. They keep the same contracts (all-or-nothing puts,
//! compare-and-swap, tenant-prefixed keys) and count calls, so tests can assert round trips.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use commitment_service::{due_shard, CommitmentKey, CommitmentStore, DueRead, StoredCommitment};
use memory_core::error::StoreError;
use memory_core::events::{DomainEvent, EventType};
use memory_core::idempotency::{Claim, Completion, IdempotencyKey, KeyClaim, KeyRecord};
use memory_core::model::{hex, Embedding, EntryKey, StoredEntry, SubjectKey};
use memory_core::ports::{
    pending_shard, within, AbstractiveModel, AbstractiveRequest, ArchiveStore, Change, Clock,
    Embedder, EntryStore, EventPublisher, Expect, IdBound, IdSource, MarkerState, ObjectKey,
    ObjectKind, ObjectPut, Page, PageQuery, PassKind, PassQueue, PutOutcome, QueuedPass,
    StoredObject, MAX_ENTRIES_PER_PUT, MAX_ITEMS_PER_TRANSACTION,
};
use memory_core::quota::{stored_charges, QuotaCheck};
use memory_core::time::Timestamp;
use memory_guard::{MemoryRef, TenantId};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Calls per operation name, shared by the in-memory adapters, plus fault injection: a test can
/// make the n-th next call of an operation fail, to prove a pass survives a crash at that step.
#[derive(Debug, Default)]
pub struct CallCounter(
    Mutex<HashMap<&'static str, u64>>,
    Mutex<Vec<(&'static str, u64)>>,
    Mutex<Vec<(&'static str, u64)>>,
    Mutex<HashMap<&'static str, u64>>,
);

/// Counts `op` down on every armed `(op, remaining)` and fails with `code` when one reaches
/// zero (that call is the armed nth); spent entries are dropped.
fn fire(
    armed: &mut Vec<(&'static str, u64)>,
    op: &'static str,
    code: &str,
) -> Result<(), StoreError> {
    let mut fired = false;
    for (armed_op, remaining) in armed.iter_mut() {
        if *armed_op == op && *remaining > 0 {
            *remaining -= 1;
            fired |= *remaining == 0;
        }
    }
    armed.retain(|(_, r)| *r > 0);
    if fired {
        return Err(StoreError::Backend {
            op,
            code: code.into(),
        });
    }
    Ok(())
}

impl CallCounter {
    fn hit(&self, op: &'static str) {
        *lock(&self.0).entry(op).or_default() += 1;
    }

    /// Items a read returned (`<op>_items`), kept apart from the call counts: what a page costs.
    fn add(&self, what: &'static str, items: u64) {
        *lock(&self.3).entry(what).or_default() += items;
    }

    /// Items read by `what` (`tag_postings_items`, `get_many_items`) since the last reset.
    pub fn items(&self, what: &str) -> u64 {
        lock(&self.3).get(what).copied().unwrap_or(0)
    }

    /// Counts the call and fails it if a fault was armed for it.
    pub(crate) fn call(&self, op: &'static str) -> Result<(), StoreError> {
        self.hit(op);
        fire(&mut lock(&self.1), op, "InjectedFault")
    }

    /// Makes the `nth` next call (1 = the very next) of `op` fail.
    pub fn fail_on(&self, op: &'static str, nth: u64) {
        lock(&self.1).push((op, nth.max(1)));
    }

    /// Makes the `nth` next call of `op` apply and then fail, as a write whose every answer
    /// was lost (only operations that check `answer` support it: `put_entries`, `claim_key`).
    pub fn lose_answer_on(&self, op: &'static str, nth: u64) {
        lock(&self.2).push((op, nth.max(1)));
    }

    /// The answer side of a call that was applied: fails it if a lost answer was armed, as
    /// the adapter reports a write it sent and never heard back from.
    fn answer(&self, op: &'static str) -> Result<(), StoreError> {
        fire(&mut lock(&self.2), op, "AnswerLost").map_err(|_| StoreError::OutcomeUnknown {
            op,
            code: "AnswerLost".into(),
        })
    }

    /// Calls of the write operations: what a no-op pass must leave at zero.
    pub fn writes(&self) -> u64 {
        [
            "put_entries",
            "replace",
            "delete",
            "delete_many",
            "finish_pass",
            "put_if_absent",
            "put_expecting",
            "publish",
            "enqueue",
            "set_embedding",
        ]
        .iter()
        .map(|op| self.get(op))
        .sum()
    }

    pub fn get(&self, op: &str) -> u64 {
        lock(&self.0).get(op).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        lock(&self.0).values().sum()
    }

    pub fn reset(&self) {
        lock(&self.0).clear();
        lock(&self.3).clear();
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct MarkerItem {
    version: u64,
    pending_since: Option<i64>,
    watermark: Option<Timestamp>,
    running: bool,
}

#[derive(Debug, Default)]
pub struct InMemoryEntryStore {
    refs: Mutex<BTreeMap<MemoryRef, BTreeMap<String, StoredEntry>>>,
    markers: Mutex<BTreeMap<(MemoryRef, PassKind), MarkerItem>>,
    keys: Mutex<BTreeMap<IdempotencyKey, (KeyRecord, Timestamp)>>,
    tombstones: Mutex<BTreeMap<MemoryRef, BTreeMap<String, Timestamp>>>,
    /// The change records (`EntryStore::changes`) by ref, by sequence.
    changes: Mutex<BTreeMap<MemoryRef, BTreeMap<String, Vec<String>>>>,
    change_seq: std::sync::atomic::AtomicU64,
    pub calls: CallCounter,
    /// Gives way to other tasks before each read and rewrite ([`InMemoryEntryStore::racing`]).
    racing: bool,
    /// [`InMemoryEntryStore::before_next_replace`]'s step, taken by the replace it runs before.
    before_replace: BeforeReplace,
    /// The quota counters and limits (`crate::quota`), kept by every put, delete and rewrite.
    pub(crate) quota: crate::quota::QuotaState,
}

/// A test's step inside the store: what a concurrent writer does at that moment.
type Step = Box<
    dyn for<'a> FnOnce(
            &'a InMemoryEntryStore,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>
        + Send,
>;

#[derive(Default)]
struct BeforeReplace(Mutex<Option<Step>>);

impl std::fmt::Debug for BeforeReplace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeReplace")
    }
}

/// Whether `completion` may be recorded: its attempt holds the key and has not finished.
fn completion_holds(
    keys: &BTreeMap<IdempotencyKey, (KeyRecord, Timestamp)>,
    completion: &Completion,
) -> bool {
    keys.get(&completion.key)
        .is_some_and(|(r, _)| r.attempt == completion.attempt && r.result.is_none())
}

fn record_completion(
    keys: &mut BTreeMap<IdempotencyKey, (KeyRecord, Timestamp)>,
    completion: &Completion,
) {
    if let Some((r, _)) = keys.get_mut(&completion.key) {
        r.result = Some(completion.result.clone());
    }
}

impl InMemoryEntryStore {
    /// A key claim as the store applies it, before its answer goes back.
    fn claim_key_applied(&self, claim: &KeyClaim) -> Result<Claim, StoreError> {
        let mut keys = lock(&self.keys);
        let fresh = (
            KeyRecord {
                payload: claim.payload.clone(),
                attempt: claim.attempt.clone(),
                first_attempt_at: claim.now,
                lease_until: claim.lease_until,
                result: None,
            },
            claim.expires_at,
        );
        match keys.get_mut(&claim.key) {
            None => {
                keys.insert(claim.key.clone(), fresh);
                Ok(Claim::Acquired {
                    first_attempt_at: claim.now,
                })
            }
            Some((_, expires)) if *expires <= claim.now => {
                keys.insert(claim.key.clone(), fresh);
                Ok(Claim::Acquired {
                    first_attempt_at: claim.now,
                })
            }
            Some((r, expires))
                if r.result.is_none()
                    && r.lease_until <= claim.now
                    && r.payload == claim.payload =>
            {
                r.attempt = claim.attempt.clone();
                r.lease_until = claim.lease_until;
                *expires = claim.expires_at;
                Ok(Claim::Acquired {
                    first_attempt_at: r.first_attempt_at,
                })
            }
            // The same attempt again (its answer was lost on the way): still its own.
            Some((r, _)) if r.attempt == claim.attempt && r.result.is_none() => {
                Ok(Claim::Acquired {
                    first_attempt_at: r.first_attempt_at,
                })
            }
            Some((r, _)) => Ok(Claim::Held(r.clone())),
        }
    }

    pub fn new() -> Self {
        Self::default()
    }

    /// A store whose calls yield to other tasks first, so concurrent passes in one test
    /// interleave at every store call as they would against a real table.
    pub fn racing() -> Self {
        InMemoryEntryStore {
            racing: true,
            ..Self::default()
        }
    }

    /// Runs `step` once, right before the next `replace` applies: a concurrent writer staged at
    /// that exact step of a pass, without a hand-written `EntryStore` around this one.
    pub fn before_next_replace(
        &self,
        step: impl for<'a> FnOnce(
                &'a InMemoryEntryStore,
            )
                -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>
            + Send
            + 'static,
    ) {
        *lock(&self.before_replace.0) = Some(Box::new(step));
    }

    async fn interleave(&self) {
        if self.racing {
            tokio::task::yield_now().await;
        }
    }

    /// Every stored entry, for tests that inspect the raw store (like a table scan).
    /// Only a ref not yet pending (or one a pass is reading) has its marker touched.
    fn mark(&self, memory_ref: &MemoryRef, kind: PassKind, since: Timestamp) {
        let mut markers = lock(&self.markers);
        let item = markers.entry((memory_ref.clone(), kind)).or_default();
        if item.pending_since.is_none() || item.running {
            self.calls.hit("marker_write");
            item.version += 1;
            item.pending_since = item.pending_since.or(Some(since.as_millis()));
        }
    }

    /// Records one change per ref touched, as the DynamoDB adapter does in the mutation's own
    /// transaction (called with the entries' lock held, so no query sees one without the other).
    fn record_changes<'a>(&self, keys: impl IntoIterator<Item = (&'a MemoryRef, &'a str)>) {
        let mut by_ref: BTreeMap<&MemoryRef, Vec<String>> = BTreeMap::new();
        for (r, id) in keys {
            by_ref.entry(r).or_default().push(id.to_owned());
        }
        let mut changes = lock(&self.changes);
        for (r, ids) in by_ref {
            let seq = self
                .change_seq
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            changes
                .entry(r.clone())
                .or_default()
                .insert(format!("{seq:020}"), ids);
        }
    }

    pub fn dump(&self) -> Vec<StoredEntry> {
        lock(&self.refs)
            .values()
            .flat_map(|m| m.values().cloned())
            .collect()
    }
}

#[async_trait]
impl EntryStore for InMemoryEntryStore {
    async fn put_entries_checked(
        &self,
        entries: &[StoredEntry],
        completion: Option<&Completion>,
        check: &QuotaCheck,
    ) -> Result<(), StoreError> {
        self.calls.call("put_entries")?;
        within("put_entries", entries.len(), MAX_ENTRIES_PER_PUT)?;
        let mut refs = lock(&self.refs);
        let mut keys = lock(&self.keys);
        let taken = entries.iter().any(|e| {
            refs.get(&e.memory_ref)
                .is_some_and(|m| m.contains_key(&e.entry.id))
        });
        let mut seen = std::collections::HashSet::new();
        let key_held = completion.is_none_or(|c| completion_holds(&keys, c));
        if taken || !key_held || !entries.iter().all(|e| seen.insert(e.key())) {
            return Err(StoreError::Conflict { op: "put_entries" });
        }
        // The put's charges land with its entries or the put is refused whole.
        crate::quota::QuotaState::apply_all(
            &mut self.quota.counters(),
            &check.charges,
            check.at.unwrap_or(Timestamp::from_millis(0)),
        )?;
        for e in entries {
            refs.entry(e.memory_ref.clone())
                .or_default()
                .insert(e.entry.id.clone(), e.clone());
        }
        self.record_changes(entries.iter().map(|e| (&e.memory_ref, e.entry.id.as_str())));
        if let Some(c) = completion {
            record_completion(&mut keys, c);
        }
        drop((refs, keys));
        // Applied, but the answer lost on every try (a fault a test armed): the caller sees an
        // error and nothing after the write runs, as when the function dies right here.
        self.calls.answer("put_entries")?;
        // After the write, like the DynamoDB adapter.
        let marks: std::collections::BTreeSet<(MemoryRef, PassKind)> = entries
            .iter()
            .flat_map(|e| {
                [PassKind::for_tier(e.tier), PassKind::Index].map(|k| (e.memory_ref.clone(), k))
            })
            .collect();
        if let Some(since) = entries.iter().map(|e| e.entry.created_at).min() {
            for (r, kind) in marks {
                self.mark(&r, kind, since);
            }
        }
        Ok(())
    }

    async fn mark_pending(&self, memory_ref: &MemoryRef, kind: PassKind, since: Timestamp) {
        self.mark(memory_ref, kind, since);
    }

    async fn claim_key(&self, claim: &KeyClaim) -> Result<Claim, StoreError> {
        self.interleave().await;
        self.calls.call("claim_key")?;
        let claimed = self.claim_key_applied(claim);
        self.calls.answer("claim_key")?;
        claimed
    }

    async fn complete_key(&self, completion: &Completion) -> Result<(), StoreError> {
        self.calls.call("complete_key")?;
        let mut keys = lock(&self.keys);
        let done_already = keys.get(&completion.key).is_some_and(|(r, _)| {
            r.attempt == completion.attempt && r.result.as_ref() == Some(&completion.result)
        });
        if done_already {
            return Ok(());
        }
        if !completion_holds(&keys, completion) {
            return Err(StoreError::Conflict { op: "complete_key" });
        }
        record_completion(&mut keys, completion);
        Ok(())
    }

    async fn release_key(&self, key: &IdempotencyKey, attempt: &str) -> Result<(), StoreError> {
        self.calls.call("release_key")?;
        let mut keys = lock(&self.keys);
        if keys
            .get(key)
            .is_some_and(|(r, _)| r.attempt == attempt && r.result.is_none())
        {
            keys.remove(key);
        }
        Ok(())
    }

    async fn delete_completing(
        &self,
        key: &EntryKey,
        completion: &Completion,
    ) -> Result<bool, StoreError> {
        self.calls.call("delete")?;
        let mut refs = lock(&self.refs);
        let mut keys = lock(&self.keys);
        let exists = refs
            .get(&key.memory_ref)
            .is_some_and(|m| m.contains_key(&key.id));
        if !exists {
            return Ok(false);
        }
        if !completion_holds(&keys, completion) {
            return Err(StoreError::Conflict { op: "delete" });
        }
        if let Some(gone) = refs
            .get_mut(&key.memory_ref)
            .and_then(|m| m.remove(&key.id))
        {
            self.quota
                .apply_unconditional(&stored_charges(&[], &[gone], None));
        }
        self.record_changes([(&key.memory_ref, key.id.as_str())]);
        record_completion(&mut keys, completion);
        Ok(true)
    }

    async fn tombstone(&self, keys: &[EntryKey], until: Timestamp) -> Result<(), StoreError> {
        self.calls.call("tombstone")?;
        let mut stones = lock(&self.tombstones);
        for k in keys {
            stones
                .entry(k.memory_ref.clone())
                .or_default()
                .insert(k.id.clone(), until);
        }
        Ok(())
    }

    async fn tombstones(
        &self,
        memory_ref: &MemoryRef,
    ) -> Result<std::collections::BTreeSet<String>, StoreError> {
        self.calls.call("tombstones")?;
        Ok(lock(&self.tombstones)
            .get(memory_ref)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default())
    }

    async fn list_page(
        &self,
        memory_ref: &MemoryRef,
        query: &PageQuery,
    ) -> Result<Page, StoreError> {
        self.calls.call("list_page")?;
        let refs = lock(&self.refs);
        let Some(entries) = refs.get(memory_ref) else {
            return Ok(Page::default());
        };
        let limit = usize::try_from(query.limit.max(1)).unwrap_or(usize::MAX);
        let mut examined = entries.range::<String, _>(..).rev().filter(|(id, _)| {
            query
                .after
                .as_ref()
                .is_none_or(|a| id.as_str() < a.as_str())
        });
        let mut page = Page::default();
        let mut last = None;
        for (id, e) in examined.by_ref().take(limit) {
            last = Some(id.clone());
            if e.entry.is_live_at(query.now) {
                page.entries.push(e.clone());
            }
        }
        if examined.next().is_some() {
            page.next_after = last;
        }
        Ok(page)
    }

    async fn get(&self, key: &EntryKey) -> Result<Option<StoredEntry>, StoreError> {
        self.interleave().await;
        self.calls.call("get")?;
        Ok(lock(&self.refs)
            .get(&key.memory_ref)
            .and_then(|m| m.get(&key.id))
            .cloned())
    }

    /// Postings derived from the entries themselves, so they are exact (the DynamoDB adapter's
    /// can outlive an entry; its suite covers that).
    async fn tag_postings(
        &self,
        memory_ref: &MemoryRef,
        tag: &str,
        bound: Option<&IdBound>,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        self.calls.call("tag_postings")?;
        let refs = lock(&self.refs);
        let Some(entries) = refs.get(memory_ref) else {
            return Ok(Vec::new());
        };
        let ids: Vec<String> = entries
            .iter()
            .rev()
            .filter(|(id, _)| bound.is_none_or(|b| b.admits(id)))
            .filter(|(_, e)| e.entry.tags.iter().any(|t| t == tag))
            .map(|(id, _)| id.clone())
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .collect();
        self.calls.add("tag_postings_items", ids.len() as u64);
        Ok(ids)
    }

    async fn get_many(&self, keys: &[EntryKey]) -> Result<Vec<StoredEntry>, StoreError> {
        self.interleave().await;
        self.calls.call("get_many")?;
        self.calls.add("get_many_items", keys.len() as u64);
        let refs = lock(&self.refs);
        Ok(keys
            .iter()
            .filter_map(|k| refs.get(&k.memory_ref).and_then(|m| m.get(&k.id)))
            .cloned()
            .collect())
    }

    async fn delete(&self, key: &EntryKey) -> Result<bool, StoreError> {
        self.calls.call("delete")?;
        let mut refs = lock(&self.refs);
        let gone = refs
            .get_mut(&key.memory_ref)
            .and_then(|m| m.remove(&key.id));
        let existed = gone.is_some();
        if let Some(gone) = gone {
            self.quota
                .apply_unconditional(&stored_charges(&[], &[gone], None));
            self.record_changes([(&key.memory_ref, key.id.as_str())]);
        }
        Ok(existed)
    }

    async fn set_embedding(
        &self,
        read: &StoredEntry,
        embedding: &Embedding,
    ) -> Result<bool, StoreError> {
        self.calls.call("set_embedding")?;
        let mut refs = lock(&self.refs);
        let Some(stored) = refs
            .get_mut(&read.memory_ref)
            .and_then(|m| m.get_mut(&read.entry.id))
        else {
            return Ok(false);
        };
        let has_model = stored
            .embedding
            .as_ref()
            .is_some_and(|v| v.model == embedding.model);
        if stored.revision() != read.revision() || has_model || embedding.vector.is_empty() {
            return Ok(false);
        }
        stored.embedding = Some(embedding.clone());
        self.record_changes([(&read.memory_ref, read.entry.id.as_str())]);
        Ok(true)
    }

    async fn find_by_subject(&self, subject: &SubjectKey) -> Result<Vec<EntryKey>, StoreError> {
        self.calls.call("find_by_subject")?;
        Ok(lock(&self.refs)
            .iter()
            .filter(|(r, _)| r.tenant() == subject.tenant())
            .flat_map(|(_, m)| m.values())
            .filter(|e| e.subject.as_ref() == Some(subject))
            .map(StoredEntry::key)
            .collect())
    }

    async fn delete_many(&self, keys: &[EntryKey]) -> Result<usize, StoreError> {
        self.calls.call("delete_many")?;
        let mut refs = lock(&self.refs);
        let mut removed = Vec::new();
        let gone: Vec<&EntryKey> = keys
            .iter()
            .filter(|k| {
                refs.get_mut(&k.memory_ref)
                    .and_then(|m| m.remove(&k.id))
                    .map(|e| removed.push(e))
                    .is_some()
            })
            .collect();
        self.quota
            .apply_unconditional(&stored_charges(&[], &removed, None));
        self.record_changes(gone.iter().map(|k| (&k.memory_ref, k.id.as_str())));
        Ok(gone.len())
    }

    async fn replace(&self, put: &[StoredEntry], delete: &[StoredEntry]) -> Result<(), StoreError> {
        self.interleave().await;
        let staged = lock(&self.before_replace.0).take();
        if let Some(step) = staged {
            step(self).await;
        }
        self.calls.call("replace")?;
        within(
            "replace",
            put.len() + delete.len(),
            MAX_ITEMS_PER_TRANSACTION,
        )?;
        let mut refs = lock(&self.refs);
        let lookup = |refs: &BTreeMap<MemoryRef, BTreeMap<String, StoredEntry>>, k: &EntryKey| {
            refs.get(&k.memory_ref).and_then(|m| m.get(&k.id)).cloned()
        };
        let puts_free = put.iter().all(|e| lookup(&refs, &e.key()).is_none());
        let deletes_unchanged = delete
            .iter()
            .all(|d| lookup(&refs, &d.key()).is_some_and(|e| e.revision() == d.revision()));
        if !puts_free || !deletes_unchanged {
            return Err(StoreError::Conflict { op: "replace" });
        }
        self.quota
            .apply_unconditional(&stored_charges(put, delete, None));
        for d in delete {
            if let Some(m) = refs.get_mut(&d.memory_ref) {
                m.remove(&d.entry.id);
            }
        }
        for e in put {
            refs.entry(e.memory_ref.clone())
                .or_default()
                .insert(e.entry.id.clone(), e.clone());
        }
        self.record_changes(
            put.iter()
                .chain(delete)
                .map(|e| (&e.memory_ref, e.entry.id.as_str())),
        );
        Ok(())
    }

    async fn marker_state(
        &self,
        memory_ref: &MemoryRef,
        kind: PassKind,
    ) -> Result<MarkerState, StoreError> {
        self.calls.call("marker_state")?;
        Ok(lock(&self.markers)
            .get(&(memory_ref.clone(), kind))
            .map(|w| MarkerState {
                version: Some(w.version),
                pending: w.pending_since.is_some(),
                watermark: w.watermark,
                running: w.running,
            })
            .unwrap_or_default())
    }

    async fn begin_pass(
        &self,
        memory_ref: &MemoryRef,
        kind: PassKind,
    ) -> Result<MarkerState, StoreError> {
        self.calls.call("begin_pass")?;
        let mut markers = lock(&self.markers);
        let w = markers.entry((memory_ref.clone(), kind)).or_default();
        w.running = true;
        Ok(MarkerState {
            version: Some(w.version),
            pending: w.pending_since.is_some(),
            watermark: w.watermark,
            running: true,
        })
    }

    async fn finish_pass(
        &self,
        memory_ref: &MemoryRef,
        kind: PassKind,
        version: Option<u64>,
        watermark: Option<Timestamp>,
    ) -> Result<bool, StoreError> {
        self.calls.call("finish_pass")?;
        let mut markers = lock(&self.markers);
        let item = markers.entry((memory_ref.clone(), kind)).or_default();
        // The watermark never moves back (a slow duplicate run must not lower it).
        if watermark > item.watermark {
            item.watermark = watermark;
        }
        let unchanged = version.is_none_or(|v| v == item.version);
        let left = unchanged && item.pending_since.is_some();
        if unchanged {
            item.pending_since = None;
            item.running = false;
        }
        Ok(left)
    }

    async fn pending_refs(&self, kind: PassKind, shard: u8) -> Result<Vec<MemoryRef>, StoreError> {
        self.calls.call("pending_refs")?;
        let markers = lock(&self.markers);
        let mut pending: Vec<(i64, MemoryRef)> = markers
            .iter()
            .filter(|((r, k), w)| {
                *k == kind && w.pending_since.is_some() && pending_shard(r) == shard
            })
            .map(|((r, _), w)| (w.pending_since.unwrap_or(0), r.clone()))
            .collect();
        pending.sort();
        Ok(pending.into_iter().map(|(_, r)| r).collect())
    }

    async fn changes(&self, memory_ref: &MemoryRef) -> Result<Vec<Change>, StoreError> {
        self.calls.call("changes")?;
        Ok(lock(&self.changes)
            .get(memory_ref)
            .map(|m| {
                m.iter()
                    .map(|(seq, ids)| Change {
                        seq: seq.clone(),
                        ids: ids.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn drop_changes(
        &self,
        memory_ref: &MemoryRef,
        seqs: &[String],
    ) -> Result<(), StoreError> {
        self.calls.call("drop_changes")?;
        if let Some(m) = lock(&self.changes).get_mut(memory_ref) {
            for seq in seqs {
                m.remove(seq);
            }
        }
        Ok(())
    }
}

#[derive(Default)]
pub struct InMemoryArchiveStore {
    objects: Mutex<BTreeMap<ObjectKey, (StoredObject, ObjectKind)>>,
    pub calls: CallCounter,
    /// Bytes answered by `get` and `get_range`, for tests of what a read fetches.
    pub bytes_read: std::sync::atomic::AtomicU64,
    /// Stamps `modified_at` on writes when set (as S3's `Last-Modified`); unset, objects carry
    /// no write time.
    clock: Option<Arc<dyn Clock>>,
}

impl std::fmt::Debug for InMemoryArchiveStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryArchiveStore")
            .field("objects", &lock(&self.objects).len())
            .finish_non_exhaustive()
    }
}

impl InMemoryArchiveStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Objects record when they were written, by `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        InMemoryArchiveStore {
            clock: Some(clock),
            ..Self::default()
        }
    }

    fn count_read(&self, bytes: usize) {
        self.bytes_read
            .fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
    }

    fn stamp(&self) -> Option<Timestamp> {
        self.clock.as_ref().map(|c| c.now())
    }

    /// Every object with its body, like a bucket-wide scan in tests.
    pub fn dump(&self) -> Vec<(ObjectKey, Vec<u8>)> {
        lock(&self.objects)
            .iter()
            .map(|(k, (o, _))| (k.clone(), o.body.clone()))
            .collect()
    }
}

/// Every entry's content and every object's bytes as one text: where a forgotten or redacted
/// value must not survive, whichever copy a dream or a forget left behind.
pub fn everything_stored(store: &InMemoryEntryStore, archives: &InMemoryArchiveStore) -> String {
    let mut text: String = store.dump().into_iter().map(|e| e.entry.content).collect();
    for (_, body) in archives.dump() {
        text.push_str(&String::from_utf8_lossy(&body));
    }
    text
}

fn etag_of(body: &[u8]) -> String {
    format!("\"{}\"", hex(&Sha256::digest(body)[..16]))
}

#[async_trait]
impl ArchiveStore for InMemoryArchiveStore {
    async fn put_if_absent(&self, put: ObjectPut<'_>) -> Result<PutOutcome, StoreError> {
        self.calls.call("put_if_absent")?;
        let (key, body, kind) = (put.key, put.body, put.kind);
        let mut objects = lock(&self.objects);
        if objects.contains_key(key) {
            return Ok(PutOutcome::AlreadyExists);
        }
        let etag = etag_of(&body);
        let modified_at = self.stamp();
        objects.insert(
            key.clone(),
            (
                StoredObject {
                    body,
                    etag,
                    modified_at,
                },
                kind,
            ),
        );
        Ok(PutOutcome::Created)
    }

    async fn put_expecting(
        &self,
        put: ObjectPut<'_>,
        expect: Expect,
    ) -> Result<String, StoreError> {
        self.calls.call("put_expecting")?;
        let (key, body, kind) = (put.key, put.body, put.kind);
        let mut objects = lock(&self.objects);
        let holds = match (&expect, objects.get(key)) {
            (Expect::Absent, None) => true,
            (Expect::ETag(want), Some((have, _))) => &have.etag == want,
            _ => false,
        };
        if !holds {
            return Err(StoreError::Conflict {
                op: "put_expecting",
            });
        }
        let etag = etag_of(&body);
        objects.insert(
            key.clone(),
            (
                StoredObject {
                    body,
                    etag: etag.clone(),
                    modified_at: self.stamp(),
                },
                kind,
            ),
        );
        Ok(etag)
    }

    async fn get(&self, key: &ObjectKey) -> Result<Option<StoredObject>, StoreError> {
        self.calls.call("get")?;
        let object = lock(&self.objects).get(key).map(|(o, _)| o.clone());
        self.count_read(object.as_ref().map_or(0, |o| o.body.len()));
        Ok(object)
    }

    /// One `get` call, as S3's ranged GetObject is one request.
    async fn get_range(
        &self,
        key: &ObjectKey,
        range: std::ops::Range<u64>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.calls.call("get")?;
        let part = lock(&self.objects).get(key).map(|(object, _)| {
            let end = usize::try_from(range.end)
                .unwrap_or(usize::MAX)
                .min(object.body.len());
            let start = usize::try_from(range.start).unwrap_or(usize::MAX).min(end);
            object.body[start..end].to_vec()
        });
        self.count_read(part.as_ref().map_or(0, Vec::len));
        Ok(part)
    }

    async fn delete(&self, key: &ObjectKey) -> Result<(), StoreError> {
        self.calls.call("delete")?;
        lock(&self.objects).remove(key);
        Ok(())
    }

    async fn delete_old_versions(&self, _key: &ObjectKey) -> Result<(), StoreError> {
        self.calls.call("delete_old_versions")
    }

    async fn list(&self, tenant: &TenantId, prefix: &str) -> Result<Vec<ObjectKey>, StoreError> {
        self.calls.call("list")?;
        let full = format!("{}/{}", tenant.as_str(), prefix);
        Ok(lock(&self.objects)
            .keys()
            .filter(|k| k.as_str().starts_with(&full))
            .cloned()
            .collect())
    }
}

/// Keeps everything sent to it, in order, and counts the calls: the event publisher and the
/// pass queue are the same double.
#[derive(Debug)]
pub struct Recording<T> {
    sent: Mutex<Vec<T>>,
    pub calls: CallCounter,
}

impl<T> Default for Recording<T> {
    fn default() -> Self {
        Recording {
            sent: Mutex::new(Vec::new()),
            calls: CallCounter::default(),
        }
    }
}

impl<T: Clone> Recording<T> {
    pub fn new() -> Self {
        Self::default()
    }

    fn record(&self, op: &'static str, items: &[T]) -> Result<(), StoreError> {
        self.calls.call(op)?;
        lock(&self.sent).extend_from_slice(items);
        Ok(())
    }

    fn sent(&self) -> Vec<T> {
        lock(&self.sent).clone()
    }
}

/// Keeps every published event, in order.
pub type RecordingPublisher = Recording<DomainEvent>;

impl RecordingPublisher {
    pub fn events(&self) -> Vec<DomainEvent> {
        self.sent()
    }

    /// The published events of one type, in order.
    pub fn of_type(&self, event_type: EventType) -> Vec<DomainEvent> {
        self.sent()
            .into_iter()
            .filter(|e| e.event_type == event_type)
            .collect()
    }
}

#[async_trait]
impl EventPublisher for RecordingPublisher {
    async fn publish(&self, events: &[DomainEvent]) -> Result<(), StoreError> {
        self.record("publish", events)
    }
}

/// Keeps every queued pass, in order.
pub type RecordingQueue = Recording<QueuedPass>;

impl RecordingQueue {
    pub fn passes(&self) -> Vec<QueuedPass> {
        self.sent()
    }
}

#[async_trait]
impl PassQueue for RecordingQueue {
    async fn enqueue(&self, passes: &[QueuedPass]) -> Result<(), StoreError> {
        self.record("enqueue", passes)
    }
}

/// A deterministic stand-in for an embedding model, for unit tests only (the emulator tests use
/// real MiniLM embeddings): each lowercase word is hashed into one of 64 dimensions, so texts
/// sharing words are similar and texts sharing none are orthogonal. Counts `embed` calls and
/// takes armed faults like the other doubles.
#[derive(Default)]
pub struct WordHashEmbedder {
    pub calls: CallCounter,
}

/// The model id [`WordHashEmbedder`] stamps on its vectors.
pub const WORD_HASH_MODEL: &str = "test.word-hash-64";

#[async_trait]
impl Embedder for WordHashEmbedder {
    fn model(&self) -> &str {
        WORD_HASH_MODEL
    }

    async fn embed(&self, text: &str) -> Result<Embedding, StoreError> {
        self.calls.call("embed")?;
        let mut vector = vec![0f32; 64];
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let digest = Sha256::digest(word.to_lowercase().as_bytes());
            vector[usize::from(digest[0]) % 64] += 1.0;
        }
        Ok(Embedding {
            model: WORD_HASH_MODEL.to_owned(),
            vector,
        })
    }
}

/// What a [`ScriptedAbstractiveModel`] does with the next requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AbstractiveScript {
    /// Joins the facts of each section on one line (the local Converse stand-in's rule).
    Condense,
    /// Answers exactly this text.
    Reply(String),
    /// Fails with a backend error of this code.
    Fail(&'static str),
    /// Answers `Condense` after this many milliseconds (tests of the caller's timeout).
    Sleep(u64),
}

/// A deterministic stand-in for an abstractive model, for unit tests (the end-to-end tests use
/// the local Converse stand-in): it follows its script, counts `rewrite` calls and keeps the
/// requests it saw.
pub struct ScriptedAbstractiveModel {
    pub calls: CallCounter,
    script: Mutex<AbstractiveScript>,
    requests: Mutex<Vec<AbstractiveRequest>>,
}

/// The model id [`ScriptedAbstractiveModel`] reports.
pub const SCRIPTED_MODEL: &str = "test.scripted-abstractive";

impl ScriptedAbstractiveModel {
    pub fn new(script: AbstractiveScript) -> Self {
        ScriptedAbstractiveModel {
            calls: CallCounter::default(),
            script: Mutex::new(script),
            requests: Mutex::new(Vec::new()),
        }
    }

    pub fn set(&self, script: AbstractiveScript) {
        *lock(&self.script) = script;
    }

    pub fn requests(&self) -> Vec<AbstractiveRequest> {
        lock(&self.requests).clone()
    }

    /// `Condense`'s answer to `request`.
    pub fn condense(request: &AbstractiveRequest) -> String {
        let mut sections: Vec<(&str, Vec<&str>)> = Vec::new();
        for fact in &request.facts {
            match sections.iter_mut().find(|(name, _)| *name == fact.section) {
                Some((_, facts)) => facts.push(&fact.text),
                None => sections.push((&fact.section, vec![&fact.text])),
            }
        }
        sections
            .iter()
            .map(|(name, facts)| format!("## {name}\n- {}.", facts.join("; ")))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[async_trait]
impl AbstractiveModel for ScriptedAbstractiveModel {
    fn model(&self) -> &str {
        SCRIPTED_MODEL
    }

    async fn rewrite(&self, request: &AbstractiveRequest) -> Result<String, StoreError> {
        self.calls.call("rewrite")?;
        lock(&self.requests).push(request.clone());
        let script = lock(&self.script).clone();
        match script {
            AbstractiveScript::Condense => Ok(Self::condense(request)),
            AbstractiveScript::Reply(text) => Ok(text),
            AbstractiveScript::Fail(code) => Err(StoreError::Backend {
                op: "rewrite",
                code: code.into(),
            }),
            AbstractiveScript::Sleep(ms) => {
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                Ok(Self::condense(request))
            }
        }
    }
}

/// A clock tests move by hand.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn at(t: Timestamp) -> Self {
        ManualClock(AtomicI64::new(t.as_millis()))
    }

    pub fn set(&self, t: Timestamp) {
        self.0.store(t.as_millis(), Ordering::SeqCst);
    }

    pub fn advance_millis(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.0.load(Ordering::SeqCst))
    }
}

/// Deterministic, time-ordered ids: a ULID whose random part is a counter, so replays are
/// byte-stable and ids still sort like their instants.
#[derive(Debug, Default)]
pub struct SequentialIds(AtomicU64);

impl IdSource for SequentialIds {
    fn next_id(&self, now: Timestamp) -> String {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        let ms = u64::try_from(now.as_millis()).unwrap_or(0);
        ulid::Ulid::from_parts(ms, u128::from(n)).to_string()
    }
}

/// Commitments with a real sparse due index (ordered by shard and instant), so tests and the
/// benchmark can count how many index items a due read touches.
#[derive(Debug, Default)]
pub struct InMemoryCommitmentStore {
    state: Mutex<CommitmentTables>,
    pub calls: CallCounter,
}

#[derive(Debug, Default)]
struct CommitmentTables {
    items: BTreeMap<CommitmentKey, StoredCommitment>,
    due: BTreeMap<(u8, i64), std::collections::BTreeSet<CommitmentKey>>,
}

impl CommitmentTables {
    fn unindex(&mut self, key: &CommitmentKey) {
        if let Some(old) = self.items.get(key) {
            if let Some(at) = old.due_at() {
                let slot = (due_shard(&key.id), at);
                if let Some(keys) = self.due.get_mut(&slot) {
                    keys.remove(key);
                    if keys.is_empty() {
                        self.due.remove(&slot);
                    }
                }
            }
        }
    }

    fn store(&mut self, key: CommitmentKey, c: StoredCommitment) {
        self.unindex(&key);
        if let Some(at) = c.due_at() {
            self.due
                .entry((due_shard(&key.id), at))
                .or_default()
                .insert(key.clone());
        }
        self.items.insert(key, c);
    }
}

fn commitment_key(c: &StoredCommitment) -> Option<CommitmentKey> {
    Some(CommitmentKey {
        memory_ref: MemoryRef::parse(&c.commitment.memory_ref).ok()?,
        id: c.commitment.id.clone(),
    })
}

impl InMemoryCommitmentStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn dump(&self) -> Vec<StoredCommitment> {
        lock(&self.state).items.values().cloned().collect()
    }
}

#[async_trait]
impl CommitmentStore for InMemoryCommitmentStore {
    async fn put_new(&self, commitments: &[StoredCommitment]) -> Result<usize, StoreError> {
        self.calls.call("put_new")?;
        let mut state = lock(&self.state);
        let mut added = 0;
        for c in commitments {
            let key = commitment_key(c).ok_or(StoreError::Corrupt {
                key: c.commitment.id.clone(),
            })?;
            if !state.items.contains_key(&key) {
                state.store(key, c.clone());
                added += 1;
            }
        }
        Ok(added)
    }

    async fn get(&self, key: &CommitmentKey) -> Result<Option<StoredCommitment>, StoreError> {
        self.calls.call("get")?;
        Ok(lock(&self.state).items.get(key).cloned())
    }

    async fn transition(
        &self,
        expected_version: u64,
        next: &StoredCommitment,
    ) -> Result<(), StoreError> {
        self.calls.call("transition")?;
        let key = commitment_key(next).ok_or(StoreError::Corrupt {
            key: next.commitment.id.clone(),
        })?;
        let mut state = lock(&self.state);
        if state.items.get(&key).map(|c| c.version) != Some(expected_version) {
            return Err(StoreError::Conflict { op: "transition" });
        }
        state.store(key, next.clone());
        Ok(())
    }

    async fn due(&self, shard: u8, now: Timestamp) -> Result<DueRead, StoreError> {
        self.calls.call("due")?;
        let state = lock(&self.state);
        let keys: Vec<CommitmentKey> = state
            .due
            .range((shard, i64::MIN)..=(shard, now.as_millis()))
            .flat_map(|(_, keys)| keys.iter().cloned())
            .collect();
        Ok(DueRead {
            items_read: keys.len() as u64,
            keys,
        })
    }

    async fn for_ref(&self, memory_ref: &MemoryRef) -> Result<Vec<StoredCommitment>, StoreError> {
        self.calls.call("for_ref")?;
        Ok(lock(&self.state)
            .items
            .iter()
            .filter(|(k, _)| &k.memory_ref == memory_ref)
            .map(|(_, c)| c.clone())
            .collect())
    }

    async fn find_by_subject(
        &self,
        subject: &SubjectKey,
    ) -> Result<Vec<CommitmentKey>, StoreError> {
        self.calls.call("find_by_subject")?;
        Ok(lock(&self.state)
            .items
            .iter()
            .filter(|(k, c)| {
                k.memory_ref.tenant() == subject.tenant() && c.subject.as_ref() == Some(subject)
            })
            .map(|(k, _)| k.clone())
            .collect())
    }

    async fn delete(&self, key: &CommitmentKey) -> Result<bool, StoreError> {
        self.calls.call("delete")?;
        let mut state = lock(&self.state);
        state.unindex(key);
        Ok(state.items.remove(key).is_some())
    }
}

/// The ports most service tests wire: one entry store, one event recorder, one manual clock.
pub struct TestPorts {
    pub store: Arc<InMemoryEntryStore>,
    pub events: Arc<RecordingPublisher>,
    pub clock: Arc<ManualClock>,
}

impl TestPorts {
    /// Fresh ports with the clock at `ms`.
    pub fn at(ms: i64) -> Self {
        TestPorts {
            store: Arc::new(InMemoryEntryStore::new()),
            events: Arc::new(RecordingPublisher::new()),
            clock: Arc::new(ManualClock::at(Timestamp::from_millis(ms))),
        }
    }

    /// The same ports as a service takes them.
    pub fn core(&self) -> memory_core::ports::CorePorts {
        memory_core::ports::CorePorts::new(
            self.store.clone(),
            self.events.clone(),
            self.clock.clone(),
        )
    }

    /// A writer over these ports; ids are sequential, so results are exact.
    pub fn writer(&self) -> memory_core::writer::MemoryWriter {
        memory_core::writer::MemoryWriter::new(self.core(), Arc::new(SequentialIds::default()))
    }
}
