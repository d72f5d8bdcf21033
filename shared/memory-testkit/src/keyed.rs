//! The OpenIntent door's store in memory, with the same all-or-nothing steps as the DynamoDB
//! adapter (one lock per step stands in for one transaction): the claim, counter and version
//! conditions hold exactly as there, so the service's race rules are tested here first.

use std::collections::BTreeMap;
use std::sync::Mutex;

use std::sync::Arc;

use async_trait::async_trait;
use intent_memory::model::{
    Caller, ClaimKey, CounterAt, CounterKey, Home, Location, StoredIntent, VersionRecord,
};
use intent_memory::store::{
    ArchiveKey, Capacity, CountRepair, CounterState, InsertOutcome, IntentStore, IntentUpdate,
    NewIntent, SubjectHit,
};
use memory_core::model::SubjectKey;
use memory_core::quota::Counter;
use memory_core::time::Timestamp;
use memory_core::StoreError;
use memory_guard::TenantId;

type PartKey = (TenantId, Home);

fn counter_key(at: &CounterAt) -> (PartKey, CounterKey) {
    ((at.tenant.clone(), at.home.clone()), at.counter.clone())
}

#[derive(Default)]
struct State {
    entries: BTreeMap<(PartKey, String), StoredIntent>,
    claims: BTreeMap<(PartKey, ClaimKey), String>,
    counters: BTreeMap<(PartKey, CounterKey), CounterState>,
    versions: BTreeMap<(PartKey, String, u64), (VersionRecord, Option<SubjectKey>)>,
    /// Archive index items: the subjects each archive is indexed under.
    archives: BTreeMap<ArchiveKey, Vec<SubjectKey>>,
    tombstones: std::collections::BTreeSet<Location>,
    /// The host's quota counters this door moves (docs/quotas.md "The OpenIntent door"), with
    /// the DynamoDB adapter's conditions (`crate::quota::QuotaState::apply_all`).
    quota: BTreeMap<Counter, i64>,
}

#[derive(Default)]
pub struct InMemoryIntentStore {
    state: Mutex<State>,
}

fn part(e: &StoredIntent) -> PartKey {
    (e.tenant.clone(), e.home())
}

fn lock_failed() -> StoreError {
    StoreError::Backend {
        op: "in-memory keyed store",
        code: "Poisoned".into(),
    }
}

impl InMemoryIntentStore {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> Result<T, StoreError> {
        let mut state = self.state.lock().map_err(|_| lock_failed())?;
        Ok(f(&mut state))
    }

    /// Every stored entry and version of one tenant, as text (for "no trace after forget"
    /// checks; archives are objects of the archive store).
    /// A quota counter's value (absent: 0).
    pub fn quota_counter(&self, counter: &Counter) -> i64 {
        self.state
            .lock()
            .ok()
            .and_then(|s| s.quota.get(counter).copied())
            .unwrap_or(0)
    }

    pub fn dump(&self, tenant: &TenantId) -> String {
        let Ok(s) = self.state.lock() else {
            return String::new();
        };
        let mut out = String::new();
        for ((p, _), e) in &s.entries {
            if &p.0 == tenant {
                out.push_str(&e.entry.to_json().to_string());
            }
        }
        for ((p, _, _), (r, _)) in &s.versions {
            if &p.0 == tenant {
                out.push_str(&r.to_json().to_string());
            }
        }
        out
    }

    /// What DynamoDB's TTL does: deletes the entry items expired at `now`, and nothing else
    /// (claims, counters and version records stay until the service repairs them).
    pub fn expire(&self, now: Timestamp) {
        if let Ok(mut s) = self.state.lock() {
            s.entries.retain(|_, e| !e.entry.is_expired(now));
        }
    }

    /// How many archives are indexed under some subject.
    pub fn indexed_archives(&self) -> usize {
        self.state.lock().map(|s| s.archives.len()).unwrap_or(0)
    }
}

impl State {
    /// A capacity counter as it stands (zero before its partition's first entry).
    fn count(&self, p: &PartKey, counter: &CounterKey) -> CounterState {
        self.counters
            .get(&(p.clone(), counter.clone()))
            .copied()
            .unwrap_or_default()
    }

    /// Whether `victim` is stored exactly as the caller read it and still evictable: the
    /// condition of evicting it.
    fn unchanged(&self, victim: &StoredIntent) -> bool {
        self.entries
            .get(&(part(victim), victim.entry.id.clone()))
            .is_some_and(|v| *victim == *v && v.evictable())
    }

    fn remove(&mut self, e: &StoredIntent) -> bool {
        let p = part(e);
        let current = self.entries.get(&(p.clone(), e.entry.id.clone()));
        if current.map(|c| (c.entry.version, c.accessed_at))
            != Some((e.entry.version, e.accessed_at))
        {
            return false;
        }
        self.entries.remove(&(p.clone(), e.entry.id.clone()));
        // The claim goes only if it still names this entry, as in the DynamoDB adapter.
        if self.claims.get(&(p.clone(), e.claim())) == Some(&e.entry.id) {
            self.claims.remove(&(p.clone(), e.claim()));
        }
        if let Some(c) = e.counter() {
            let state = self.counters.entry((p.clone(), c)).or_default();
            state.n = state.n.saturating_sub(1);
            state.rev += 1;
        }
        self.versions
            .retain(|(vp, id, _), _| !(vp == &p && id == &e.entry.id));
        true
    }
}

#[async_trait]
impl IntentStore for InMemoryIntentStore {
    async fn insert(&self, new: NewIntent<'_>) -> Result<InsertOutcome, StoreError> {
        let (entry, first, capacity) = (new.entry, new.first, new.capacity);
        self.with(|s| {
            let p = part(entry);
            if let Some(id) = s.claims.get(&(p.clone(), entry.claim())) {
                return Ok(InsertOutcome::KeyTaken {
                    existing_id: id.clone(),
                });
            }
            // Every other condition first (as the adapter reports them): the quota refuses
            // only a write that would otherwise land, and nothing moves when it does.
            match capacity {
                Capacity::Unbounded => {}
                Capacity::Count { counter, max } => {
                    if s.count(&p, counter).n >= *max {
                        return Ok(InsertOutcome::AtCapacity);
                    }
                }
                Capacity::Evict {
                    counter,
                    max,
                    victim,
                } => {
                    if s.count(&p, counter).n < *max || !s.unchanged(victim) {
                        return Ok(InsertOutcome::Raced);
                    }
                }
            }
            crate::quota::QuotaState::apply_all(&mut s.quota, new.quota, entry.entry.created_at)?;
            // Every condition held (the quota moved nothing else): the writes.
            match capacity {
                Capacity::Unbounded => {}
                Capacity::Count { counter, .. } => {
                    let state = s.counters.entry((p.clone(), counter.clone())).or_default();
                    state.n += 1;
                    state.rev += 1;
                }
                Capacity::Evict {
                    counter, victim, ..
                } => {
                    let before = s.count(&p, counter);
                    s.remove(victim);
                    // One out, one in: the count and revision as they were.
                    s.counters.insert((p.clone(), counter.clone()), before);
                }
            }
            s.claims
                .insert((p.clone(), entry.claim()), entry.entry.id.clone());
            s.entries
                .insert((p.clone(), entry.entry.id.clone()), entry.clone());
            s.versions.insert(
                (p, entry.entry.id.clone(), 1),
                (first.clone(), entry.subject.clone()),
            );
            Ok(InsertOutcome::Inserted)
        })?
    }

    async fn get(&self, at: &Location) -> Result<Option<StoredIntent>, StoreError> {
        self.with(|s| {
            s.entries
                .get(&((at.tenant.clone(), at.home.clone()), at.id.clone()))
                .cloned()
        })
    }

    async fn list(&self, tenant: &TenantId, home: &Home) -> Result<Vec<StoredIntent>, StoreError> {
        self.with(|s| {
            s.entries
                .iter()
                .filter(|((p, _), _)| p.0 == *tenant && p.1 == *home)
                .map(|(_, e)| e.clone())
                .collect()
        })
    }

    async fn update(&self, update: IntentUpdate<'_>) -> Result<bool, StoreError> {
        let (previous, next) = (update.previous, update.next);
        self.with(|s| {
            let p = part(previous);
            let k = (p.clone(), previous.entry.id.clone());
            if s.entries.get(&k).map(|e| (e.entry.version, e.accessed_at))
                != Some((previous.entry.version, previous.accessed_at))
            {
                return Ok(false);
            }
            crate::quota::QuotaState::apply_all(&mut s.quota, update.quota, next.entry.updated_at)?;
            s.entries.insert(k, next.clone());
            s.versions.insert(
                (p.clone(), next.entry.id.clone(), next.entry.version),
                (update.record.clone(), next.subject.clone()),
            );
            if let Some(v) = update.drop_version {
                s.versions.remove(&(p, next.entry.id.clone(), v));
            }
            Ok(true)
        })?
    }

    async fn touch(&self, entry: &StoredIntent, at: Timestamp) -> Result<(), StoreError> {
        self.with(|s| {
            if let Some(e) = s.entries.get_mut(&(part(entry), entry.entry.id.clone())) {
                if e.entry.version == entry.entry.version && e.accessed_at == entry.accessed_at {
                    e.accessed_at = at;
                }
            }
        })
    }

    async fn quota_scope(&self, tenant: &TenantId, home: &Home) -> Result<(i64, i64), StoreError> {
        let scope = intent_memory::quota::scope(home);
        self.with(|s| {
            let get = |c: Counter| s.quota.get(&c).copied().unwrap_or(0);
            (
                get(Counter::KeyedEntries(tenant.clone(), scope.clone())),
                get(Counter::KeyedBytes(tenant.clone(), scope.clone())),
            )
        })
    }

    async fn repair_quota(
        &self,
        recount: &intent_memory::quota::ScopeRecount,
    ) -> Result<bool, StoreError> {
        let scope = intent_memory::quota::scope(&recount.home);
        let t = &recount.tenant;
        let (entries, bytes) = (
            Counter::KeyedEntries(t.clone(), scope.clone()),
            Counter::KeyedBytes(t.clone(), scope),
        );
        self.with(|s| {
            let get = |c: &Counter| s.quota.get(c).copied().unwrap_or(0);
            if (get(&entries), get(&bytes)) != recount.seen {
                return false;
            }
            s.quota.insert(entries, recount.counted.0);
            s.quota.insert(bytes, recount.counted.1);
            *s.quota.entry(Counter::TenantBytes(t.clone())).or_insert(0) +=
                recount.counted.1 - recount.seen.1;
            true
        })
    }

    async fn remove(&self, entry: &StoredIntent) -> Result<bool, StoreError> {
        self.with(|s| {
            let removed = s.remove(entry);
            if removed {
                for c in intent_memory::quota::released(entry) {
                    *s.quota.entry(c.counter).or_insert(0) += c.delta;
                }
            }
            removed
        })
    }

    async fn release_claim(&self, holder: &Location, claim: &ClaimKey) -> Result<(), StoreError> {
        self.with(|s| {
            let k = ((holder.tenant.clone(), holder.home.clone()), claim.clone());
            if s.claims.get(&k) == Some(&holder.id) {
                s.claims.remove(&k);
            }
        })
    }

    async fn set_count(&self, repair: &CountRepair) -> Result<bool, StoreError> {
        self.with(|s| {
            let state = s.counters.entry(counter_key(&repair.at)).or_default();
            if state.rev != repair.seen.rev {
                return false;
            }
            *state = CounterState {
                n: repair.to,
                rev: repair.seen.rev + 1,
            };
            true
        })
    }

    async fn drop_counter_if_zero(&self, at: &CounterAt) -> Result<(), StoreError> {
        self.with(|s| {
            let k = counter_key(at);
            if s.counters.get(&k).is_some_and(|c| c.n == 0) {
                s.counters.remove(&k);
            }
        })
    }

    async fn versions(&self, at: &Location) -> Result<Vec<VersionRecord>, StoreError> {
        self.with(|s| {
            let p = (at.tenant.clone(), at.home.clone());
            s.versions
                .iter()
                .filter(|((vp, id, _), _)| *vp == p && *id == at.id)
                .map(|(_, (r, _))| r.clone())
                .collect()
        })
    }

    async fn eviction_candidate(&self, agent: &Caller) -> Result<Option<Location>, StoreError> {
        let (tenant, home) = (&agent.tenant, Home::Agent(agent.agent.clone()));
        self.with(|s| {
            s.entries
                .iter()
                .filter(|((p, _), e)| p.0 == *tenant && p.1 == home && e.evictable())
                .min_by_key(|(_, e)| (e.entry.priority.rank(), e.accessed_at, e.entry.id.clone()))
                .map(|(_, e)| e.location())
        })
    }

    async fn count(&self, at: &CounterAt) -> Result<CounterState, StoreError> {
        self.with(|s| {
            s.counters
                .get(&counter_key(at))
                .copied()
                .unwrap_or_default()
        })
    }

    async fn index_archive(
        &self,
        key: &ArchiveKey,
        subjects: &[SubjectKey],
    ) -> Result<(), StoreError> {
        self.with(|s| {
            let indexed = s.archives.entry(key.clone()).or_default();
            for subject in subjects {
                if !indexed.contains(subject) {
                    indexed.push(subject.clone());
                }
            }
        })
    }

    async fn unindex_archive(
        &self,
        key: &ArchiveKey,
        subject: &SubjectKey,
    ) -> Result<(), StoreError> {
        self.with(|s| {
            if let Some(indexed) = s.archives.get_mut(key) {
                indexed.retain(|k| k != subject);
                if indexed.is_empty() {
                    s.archives.remove(key);
                }
            }
        })
    }

    async fn tombstone(&self, at: &Location, _until: Timestamp) -> Result<(), StoreError> {
        self.with(|s| {
            s.tombstones.insert(at.clone());
        })
    }

    async fn tombstoned(&self, at: &Location) -> Result<bool, StoreError> {
        self.with(|s| s.tombstones.contains(at))
    }

    async fn subject_hits(&self, subject: &SubjectKey) -> Result<Vec<SubjectHit>, StoreError> {
        let tenant = subject.tenant();
        self.with(|s| {
            let mut hits = Vec::new();
            for ((p, _), e) in &s.entries {
                if p.0 == *tenant && e.subject.as_ref() == Some(subject) {
                    hits.push(SubjectHit::Entry(e.location()));
                }
            }
            for ((p, id, v), (_, subj)) in &s.versions {
                if p.0 == *tenant && subj.as_ref() == Some(subject) {
                    hits.push(SubjectHit::Version(
                        Location {
                            tenant: p.0.clone(),
                            home: p.1.clone(),
                            id: id.clone(),
                        },
                        *v,
                    ));
                }
            }
            for (k, subjects) in &s.archives {
                if k.tenant == *tenant && subjects.contains(subject) {
                    hits.push(SubjectHit::Archive(k.clone()));
                }
            }
            hits
        })
    }

    async fn delete_version(&self, at: &Location, version: u64) -> Result<(), StoreError> {
        self.with(|s| {
            s.versions
                .remove(&((at.tenant.clone(), at.home.clone()), at.id.clone(), version));
        })
    }
}

/// What the in-memory backends hold for a tenant, for the keyed contract's "no trace" checks.
pub struct InMemoryBehind {
    pub store: Arc<InMemoryIntentStore>,
    pub archives: Arc<crate::in_memory::InMemoryArchiveStore>,
}

#[async_trait]
impl crate::keyed_contract::Behind for InMemoryBehind {
    async fn everything(&self, tenant: &TenantId) -> String {
        let mut out = self.store.dump(tenant);
        let prefix = format!("{}/", tenant.as_str());
        for (key, body) in self.archives.dump() {
            if key.as_str().starts_with(&prefix) {
                out.push_str(&String::from_utf8_lossy(&body));
            }
        }
        out
    }
}
