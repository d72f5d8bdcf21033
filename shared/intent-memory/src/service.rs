//! The door's operations (RFC-0015 API endpoints, §2 memory types, §3 concurrency, §9 security).
//! Every rule that two callers could race on is a condition of one store step (`store.rs`);
//! this module decides what to ask and what the answer means.

use std::sync::Arc;

use memory_core::events::{DomainEvent, KeyedChange};
use memory_core::model::SubjectKey;
use memory_core::ports::{ArchiveStore, Clock, EventPublisher, IdSource};
use memory_core::time::Timestamp;
use memory_core::StoreError;
use memory_guard::{AgentId, Redactor, TenantId};
use serde_json::{json, Map, Value};

use crate::archive;
use crate::error::IntentError;
use crate::model::{
    task_digest, Caller, CounterAt, CounterKey, Home, IntentEntry, Location, MemoryType,
    StoredIntent, VersionRecord,
};
use crate::redact::{holds_secret, redact_value};
use crate::request::{duration_millis, CreateRequest, ListQuery, PatchRequest, MAX_VALUE_BYTES};
use crate::store::{
    ArchiveKey, Capacity, CountRepair, InsertOutcome, IntentStore, IntentUpdate, NewIntent,
};

/// How many times a step that lost a race is tried again before the caller is told to retry.
const ATTEMPTS: usize = 8;

#[derive(Clone)]
pub struct IntentPorts {
    pub store: Arc<dyn IntentStore>,
    pub archives: Arc<dyn ArchiveStore>,
    pub publisher: Arc<dyn EventPublisher>,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdSource>,
}

/// Capacities and retention (docs/openintent.md "Configuration").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// §9.4 / RFC-0013 `max_working_memory_per_task`: working entries per agent and task.
    pub working_per_task: u64,
    /// §2.2: episodic entries per agent (RFC default 1,000).
    pub episodic_per_agent: u64,
    /// Version records kept per entry, newest first (the current version always among them).
    pub versions_kept: u64,
    /// A read refreshes an entry's LRU access time at most this often, so reads do not turn
    /// into a write each.
    pub touch_interval_ms: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            working_per_task: 100,
            episodic_per_agent: 1000,
            versions_kept: 20,
            touch_interval_ms: 60_000,
        }
    }
}

/// What archiving a task's working memory did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveOutcome {
    pub entries_archived: usize,
    /// The archive's object name; `None` when the task had no working memory.
    pub archive: Option<String>,
}

#[derive(Clone)]
pub struct IntentMemory {
    ports: IntentPorts,
    limits: Limits,
    redactor: Arc<Redactor>,
    /// The host's per-tenant quotas (docs/quotas.md "Limits"): each create and update is one
    /// write against `MaxWritesPerMinute`. Without it, writes are not limited.
    quotas: Option<Arc<dyn memory_core::ports::QuotaStore>>,
}

fn retry_later(op: &'static str) -> IntentError {
    IntentError::Store(StoreError::Conflict { op })
}

impl IntentMemory {
    pub fn new(ports: IntentPorts, limits: Limits, redactor: Arc<Redactor>) -> Self {
        IntentMemory {
            ports,
            limits,
            redactor,
            quotas: None,
        }
    }

    /// Counts this door's writes against the host's per-tenant quotas.
    pub fn with_quotas(mut self, quotas: Option<Arc<dyn memory_core::ports::QuotaStore>>) -> Self {
        self.quotas = quotas;
        self
    }

    /// Charges one write of `tenant` against `MaxWritesPerMinute` before anything is written:
    /// a conditional add on the minute's counter, refused (`QuotaExceeded`, answered 429
    /// `rate_limited` with `Retry-After`) once the minute's writes reached the limit.
    async fn charge_write(&self, tenant: &memory_core::TenantId) -> Result<(), IntentError> {
        let Some(quotas) = &self.quotas else {
            return Ok(());
        };
        let limits = quotas.limits(tenant).await?;
        let Some(max) = limits.get(memory_core::quota::Quota::WritesPerMinute) else {
            return Ok(());
        };
        let now = self.now();
        let check = memory_core::quota::QuotaCheck {
            charges: vec![memory_core::quota::Charge {
                counter: memory_core::quota::Counter::Writes(
                    tenant.clone(),
                    memory_core::quota::epoch_minute(now),
                ),
                delta: 1,
                limit: Some((memory_core::quota::Quota::WritesPerMinute, max)),
            }],
            at: Some(now),
        };
        quotas.charge(&check).await?;
        Ok(())
    }

    /// The tenant's stored quotas (entries per ref, bytes per tenant), which the store applies
    /// in the write itself; without a quota store, none (the counters are still kept).
    async fn quota_limits(
        &self,
        tenant: &TenantId,
    ) -> Result<memory_core::quota::Limits, IntentError> {
        match &self.quotas {
            Some(quotas) => Ok(quotas.limits(tenant).await?),
            None => Ok(memory_core::quota::Limits::unlimited()),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn now(&self) -> Timestamp {
        self.ports.clock.now()
    }

    async fn publish(&self, events: Vec<DomainEvent>) {
        // Announcements follow the committed write; a failed publish is logged (ids only)
        // and the write stands, as for every other event of this host.
        if let Err(e) = self.ports.publisher.publish(&events).await {
            tracing::error!(error = %e, events = events.len(), "keyed memory events not published");
        }
    }

    fn changed(kind: KeyedChange, e: &StoredIntent, at: Timestamp) -> DomainEvent {
        DomainEvent::keyed_entry(
            kind,
            &e.tenant,
            e.entry.agent_id.as_str(),
            &e.entry.id,
            e.entry.memory_type.as_str(),
            e.entry.version,
            at,
        )
    }

    /// The value as stored: redacted, and still within §1.3's bound once markers replaced
    /// the secrets (a marker can be longer than the secret it replaces).
    fn redacted_value(
        &self,
        value: &Map<String, Value>,
    ) -> Result<Map<String, Value>, IntentError> {
        let redacted = redact_value(&self.redactor, value).0;
        let size = serde_json::to_vec(&redacted)
            .map(|b| b.len())
            .unwrap_or(usize::MAX);
        if size > MAX_VALUE_BYTES {
            return Err(IntentError::ValueTooLarge {
                size,
                max: MAX_VALUE_BYTES,
            });
        }
        Ok(redacted)
    }

    fn refuse_secret(&self, field: &str, text: &str) -> Result<(), IntentError> {
        if holds_secret(&self.redactor, text) {
            return Err(IntentError::invalid(
                field,
                "contains a registered secret; identifiers are never redacted, choose another",
            ));
        }
        Ok(())
    }

    fn expiry(
        now: Timestamp,
        ttl: Option<&str>,
        expires_at: Option<Timestamp>,
    ) -> Result<Option<Timestamp>, IntentError> {
        // §1.1: an absolute expiry takes precedence over the ttl policy.
        let at = expires_at.or_else(|| {
            ttl.and_then(|t| t.strip_prefix("duration:"))
                .and_then(duration_millis)
                .map(|ms| now.plus_millis(ms))
        });
        if at.is_some_and(|at| at <= now) {
            return Err(IntentError::invalid("expires_at", "must be in the future"));
        }
        Ok(at)
    }

    /// `POST /api/v1/memory`.
    pub async fn create(
        &self,
        caller: &Caller,
        req: CreateRequest,
    ) -> Result<IntentEntry, IntentError> {
        if req.agent_id != caller.agent.as_str() {
            return Err(IntentError::NotCaller);
        }
        self.refuse_secret("namespace", &req.namespace)?;
        self.refuse_secret("key", &req.key)?;
        // The scope's ids name a capacity counter and an archive: refused like the key; every
        // other string of the scope is redacted like the value.
        let scope = match &req.scope {
            Some(scope) => {
                for field in ["task_id", "intent_id"] {
                    if let Some(id) = scope.get(field).and_then(Value::as_str) {
                        self.refuse_secret(&format!("scope.{field}"), id)?;
                    }
                }
                Some(redact_value(&self.redactor, scope).0)
            }
            None => None,
        };
        let now = self.now();
        let value = self.redacted_value(&req.value)?;
        let tags = self.redactor.redact_tags(&req.tags);
        let expires_at = Self::expiry(now, req.ttl.as_deref(), req.expires_at)?;
        let home = Home::of(req.memory_type, &caller.agent);
        let entry = IntentEntry {
            id: format!("{}{}", home.id_prefix(), self.ports.ids.next_id(now)),
            agent_id: caller.agent.clone(),
            namespace: req.namespace,
            key: req.key,
            value,
            memory_type: req.memory_type,
            version: 1,
            scope,
            tags,
            ttl: req.ttl,
            pinned: req.pinned,
            priority: req.priority,
            sensitivity: req.sensitivity,
            curated_by: (req.memory_type == MemoryType::Semantic)
                .then(|| caller.agent.as_str().to_owned()),
            created_at: now,
            updated_at: now,
            expires_at,
        };
        let stored = StoredIntent {
            tenant: caller.tenant.clone(),
            entry,
            accessed_at: now,
            subject: req
                .subject
                .as_deref()
                .map(|s| SubjectKey::derive(&caller.tenant, s)),
        };
        let first = VersionRecord {
            entry: stored.entry.clone(),
            changed_by: caller.agent.as_str().to_owned(),
            changed_at: now,
            changes: vec!["created".to_owned()],
        };
        let max = match stored.entry.memory_type {
            MemoryType::Working => self.limits.working_per_task,
            MemoryType::Episodic => self.limits.episodic_per_agent,
            MemoryType::Semantic => 0,
        };
        let counted = || match stored.counter() {
            Some(counter) => Capacity::Count { counter, max },
            None => Capacity::Unbounded,
        };
        let mut capacity = counted();
        let mut repaired = false;
        self.charge_write(&caller.tenant).await?;
        let quota_limits = self.quota_limits(&caller.tenant).await?;
        let mut quota_repaired = false;
        for _ in 0..ATTEMPTS {
            let victim = match &capacity {
                Capacity::Evict { victim, .. } => Some(victim.as_ref()),
                _ => None,
            };
            let quota = crate::quota::charges(Some(&stored), victim, Some(&quota_limits));
            let outcome = match self
                .ports
                .store
                .insert(NewIntent {
                    entry: &stored,
                    first: &first,
                    capacity: &capacity,
                    quota: &quota,
                })
                .await
            {
                // Before a stored quota refuses: what the backend's TTL deleted is given back.
                Err(StoreError::QuotaExceeded(r))
                    if !quota_repaired
                        && matches!(
                            r.quota,
                            memory_core::quota::Quota::EntriesPerRef
                                | memory_core::quota::Quota::BytesPerTenant
                        ) =>
                {
                    quota_repaired = true;
                    self.recount_quota(&caller.tenant, &home, now).await?;
                    continue;
                }
                other => other?,
            };
            match outcome {
                InsertOutcome::Inserted => {
                    let mut events = Vec::with_capacity(2);
                    if let Capacity::Evict { victim, .. } = &capacity {
                        tracing::info!(tenant = %caller.tenant, "episodic entry evicted");
                        events.push(Self::changed(KeyedChange::Evicted, victim, now));
                    }
                    events.push(Self::changed(KeyedChange::Created, &stored, now));
                    self.publish(events).await;
                    return Ok(stored.entry);
                }
                InsertOutcome::KeyTaken { existing_id } => {
                    let at = Location {
                        tenant: caller.tenant.clone(),
                        home: home.clone(),
                        id: existing_id.clone(),
                    };
                    match self.ports.store.get(&at).await? {
                        // An expired entry is as good as gone (§9.3): it makes way.
                        Some(old) if old.entry.is_expired(now) => {
                            self.ports.store.remove(&old).await?;
                        }
                        Some(old) => {
                            return Err(IntentError::KeyTaken {
                                existing_id,
                                version: old.entry.version,
                            })
                        }
                        // The entry is gone but its claim stayed (the backend's TTL): release it.
                        None => self.ports.store.release_claim(&at, &stored.claim()).await?,
                    }
                    capacity = counted();
                }
                InsertOutcome::AtCapacity if !repaired => {
                    repaired = true;
                    self.repair_count(&stored, now).await?;
                }
                InsertOutcome::AtCapacity => {
                    let counter = stored.counter_at().ok_or_else(|| retry_later("insert"))?;
                    let full = || async {
                        let current = self.ports.store.count(&counter).await?.n;
                        Ok::<_, IntentError>(IntentError::CapacityExceeded {
                            memory_type: stored.entry.memory_type,
                            current: current.max(max),
                            max,
                        })
                    };
                    if stored.entry.memory_type != MemoryType::Episodic {
                        return Err(full().await?);
                    }
                    let Some(at) = self.ports.store.eviction_candidate(caller).await? else {
                        // Only pinned entries left: pinned entries are never evicted.
                        return Err(full().await?);
                    };
                    capacity = match self.ports.store.get(&at).await? {
                        // The victim holds this very key (a concurrent create of it): the key
                        // is taken, and one transaction cannot free and claim it at once.
                        Some(victim) if victim.claim() == stored.claim() => {
                            return Err(IntentError::KeyTaken {
                                existing_id: victim.entry.id,
                                version: victim.entry.version,
                            })
                        }
                        Some(victim) => Capacity::Evict {
                            counter: counter.counter.clone(),
                            max,
                            victim: Box::new(victim),
                        },
                        None => counted(),
                    };
                }
                InsertOutcome::Raced => capacity = counted(),
            }
        }
        Err(retry_later("insert"))
    }

    /// Before a full memory type refuses or evicts: expired entries of the same counter are removed
    /// (§9.3), and a counter left higher than the entries that exist (entries the backend's TTL
    /// deleted behind the counter's back) is set back to the count, by compare-and-set.
    async fn repair_count(&self, new: &StoredIntent, now: Timestamp) -> Result<(), IntentError> {
        let Some(at) = new.counter_at() else {
            return Ok(());
        };
        let store = self.ports.store.as_ref();
        let home = new.home();
        let entries = store.list(&new.tenant, &home).await?;
        for e in entries
            .iter()
            .filter(|e| e.counter().as_ref() == Some(&at.counter))
        {
            if e.entry.is_expired(now) {
                store.remove(e).await?;
            }
        }
        // Read the counter, then count what exists: any insert or removal in between moves the
        // revision and the repair does not apply.
        let seen = store.count(&at).await?;
        let live = store
            .list(&new.tenant, &home)
            .await?
            .iter()
            .filter(|e| e.counter().as_ref() == Some(&at.counter))
            .count() as u64;
        if seen.n > live && store.set_count(&CountRepair { at, seen, to: live }).await? {
            tracing::warn!(tenant = %new.tenant, counted = seen.n, live, "capacity counter repaired");
        }
        Ok(())
    }

    /// Recounts one partition's keyed entries against its quota counters: expired entries are
    /// removed (each removal gives its charges back), then the counters are read, the live
    /// entries counted, and the counters set to the count only if they did not move meanwhile
    /// (docs/quotas.md "The OpenIntent door").
    async fn recount_quota(
        &self,
        tenant: &TenantId,
        home: &Home,
        now: Timestamp,
    ) -> Result<(), IntentError> {
        let store = self.ports.store.as_ref();
        for e in store.list(tenant, home).await? {
            if e.entry.is_expired(now) {
                store.remove(&e).await?;
            }
        }
        let seen = store.quota_scope(tenant, home).await?;
        let live = store.list(tenant, home).await?;
        let counted = (
            i64::try_from(live.len()).unwrap_or(i64::MAX),
            live.iter().map(crate::quota::value_bytes).sum(),
        );
        if seen != counted {
            let recount = crate::quota::ScopeRecount {
                tenant: tenant.clone(),
                home: home.clone(),
                seen,
                counted,
            };
            if store.repair_quota(&recount).await? {
                tracing::warn!(%tenant, seen_entries = seen.0, live = counted.0, "keyed quota counters repaired");
            }
        }
        Ok(())
    }

    /// The live entry at `id` as the caller may see it.
    async fn visible(&self, caller: &Caller, id: &str) -> Result<StoredIntent, IntentError> {
        let at = Location::for_id(caller, id).ok_or(IntentError::NotFound)?;
        match self.ports.store.get(&at).await? {
            Some(e) if !e.entry.is_expired(self.now()) => Ok(e),
            _ => Err(IntentError::NotFound),
        }
    }

    /// `GET /api/v1/memory/{id}`.
    pub async fn get(&self, caller: &Caller, id: &str) -> Result<IntentEntry, IntentError> {
        let stored = self.visible(caller, id).await?;
        let now = self.now();
        if stored.evictable()
            && now.as_millis() - stored.accessed_at.as_millis() >= self.limits.touch_interval_ms
        {
            if let Err(e) = self.ports.store.touch(&stored, now).await {
                tracing::warn!(error = %e, "access time not recorded");
            }
        }
        Ok(stored.entry)
    }

    /// `GET /api/v1/memory/{id}/versions`, oldest first.
    pub async fn versions(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<Vec<VersionRecord>, IntentError> {
        let stored = self.visible(caller, id).await?;
        Ok(self.ports.store.versions(&stored.location()).await?)
    }

    /// `PATCH /api/v1/memory/{id}` with `If-Match: <version>`.
    pub async fn update(
        &self,
        caller: &Caller,
        id: &str,
        if_match: Option<u64>,
        patch: PatchRequest,
    ) -> Result<IntentEntry, IntentError> {
        let expected = if_match.ok_or(IntentError::PreconditionRequired)?;
        let mut previous = self.visible(caller, id).await?;
        self.charge_write(&caller.tenant).await?;
        let quota_limits = self.quota_limits(&caller.tenant).await?;
        for _ in 0..ATTEMPTS {
            if previous.entry.version != expected {
                return Err(Self::mismatch(&previous));
            }
            let (next, record, drop_version) = self.patched(caller, &previous, &patch)?;
            let quota = crate::quota::charges(Some(&next), Some(&previous), Some(&quota_limits));
            if self
                .ports
                .store
                .update(IntentUpdate {
                    previous: &previous,
                    next: &next,
                    record: &record,
                    drop_version,
                    quota: &quota,
                })
                .await?
            {
                self.publish(vec![Self::changed(
                    KeyedChange::Updated,
                    &next,
                    next.entry.updated_at,
                )])
                .await;
                return Ok(next.entry);
            }
            // The entry moved: another update won (the caller gets the state that won, §3.2),
            // or only its access time moved (a read), and the same version is tried again.
            previous = match self.ports.store.get(&previous.location()).await? {
                Some(current) if !current.entry.is_expired(self.now()) => current,
                _ => return Err(IntentError::NotFound),
            };
        }
        Err(retry_later("update"))
    }

    /// The entry after `patch`, its version record, and the version record retention drops.
    fn patched(
        &self,
        caller: &Caller,
        previous: &StoredIntent,
        patch: &PatchRequest,
    ) -> Result<(StoredIntent, VersionRecord, Option<u64>), IntentError> {
        let now = self.now();
        let mut next = previous.clone();
        let mut changes = Vec::new();
        let e = &mut next.entry;
        if let Some(value) = &patch.value {
            e.value = self.redacted_value(value)?;
            changes.push("value");
        }
        if let Some(tags) = &patch.tags {
            e.tags = self.redactor.redact_tags(tags);
            changes.push("tags");
        }
        if let Some(pinned) = patch.pinned {
            e.pinned = pinned;
            changes.push("pinned");
        }
        if let Some(priority) = patch.priority {
            e.priority = priority;
            changes.push("priority");
        }
        if let Some(sensitivity) = &patch.sensitivity {
            e.sensitivity = sensitivity.clone();
            changes.push("sensitivity");
        }
        if let Some(ttl) = &patch.ttl {
            e.ttl = ttl.clone();
            changes.push("ttl");
        }
        if patch.ttl.is_some() || patch.expires_at.is_some() {
            e.expires_at = Self::expiry(now, e.ttl.as_deref(), patch.expires_at.flatten())?;
            changes.push("expires_at");
        }
        e.version = previous.entry.version + 1;
        e.updated_at = now;
        next.accessed_at = now;
        let record = VersionRecord {
            entry: next.entry.clone(),
            changed_by: caller.agent.as_str().to_owned(),
            changed_at: now,
            changes: changes.into_iter().map(str::to_owned).collect(),
        };
        let drop_version = next
            .entry
            .version
            .checked_sub(self.limits.versions_kept)
            .filter(|v| *v >= 1);
        Ok((next, record, drop_version))
    }

    fn mismatch(current: &StoredIntent) -> IntentError {
        IntentError::VersionMismatch {
            current: current.entry.to_json(),
            current_version: current.entry.version,
        }
    }

    /// `DELETE /api/v1/memory/{id}`: immediate and irreversible (§9.3), versions included.
    pub async fn delete(&self, caller: &Caller, id: &str) -> Result<(), IntentError> {
        let at = Location::for_id(caller, id).ok_or(IntentError::NotFound)?;
        let now = self.now();
        for _ in 0..ATTEMPTS {
            let Some(stored) = self.ports.store.get(&at).await? else {
                return Err(IntentError::NotFound);
            };
            if self.ports.store.remove(&stored).await? {
                if stored.entry.is_expired(now) {
                    return Err(IntentError::NotFound);
                }
                self.publish(vec![Self::changed(KeyedChange::Deleted, &stored, now)])
                    .await;
                return Ok(());
            }
        }
        Err(retry_later("delete"))
    }

    /// `GET /api/v1/agents/{agent_id}/memory` (§4): the agent's own working and episodic
    /// entries when the caller is that agent, and the semantic entries that agent wrote, which
    /// every agent of the tenant may read. Another agent's private memory types are never listed.
    pub async fn list(
        &self,
        caller: &Caller,
        agent_id: &str,
        q: &ListQuery,
    ) -> Result<Vec<IntentEntry>, IntentError> {
        let Ok(agent) = AgentId::parse(agent_id) else {
            return Ok(Vec::new());
        };
        let mut homes = Vec::new();
        if agent == caller.agent && q.memory_type != Some(MemoryType::Semantic) {
            homes.push(Home::Agent(agent.clone()));
        }
        if q.memory_type.is_none() || q.memory_type == Some(MemoryType::Semantic) {
            homes.push(Home::Semantic);
        }
        let now = self.now();
        let mut found: Vec<IntentEntry> = Vec::new();
        for home in &homes {
            for s in self.ports.store.list(&caller.tenant, home).await? {
                let e = s.entry;
                if e.agent_id == agent && !e.is_expired(now) && matches(&e, q) {
                    found.push(e);
                }
            }
        }
        // Creation order across both partitions (ids are time-ordered after their prefix).
        found.sort_by(|a, b| a.id[4..].cmp(&b.id[4..]));
        Ok(found.into_iter().skip(q.offset).take(q.limit).collect())
    }

    /// Working memory of one agent and task, archived and cleared (§2.1): one document per
    /// agent and task holding every entry's final state, then the entries (and their versions)
    /// deleted. Safe to run twice, concurrently or after a crash: a rerun merges what the
    /// archive already holds with what is left, and the archive is swapped on its ETag.
    pub async fn archive_task(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        task_id: &str,
    ) -> Result<ArchiveOutcome, IntentError> {
        self.refuse_secret("task_id", task_id)?;
        let now = self.now();
        let key = ArchiveKey {
            tenant: tenant.clone(),
            agent: agent.clone(),
            task: task_digest(task_id),
        };
        let archives = self.ports.archives.as_ref();
        let store = self.ports.store.as_ref();
        let mut remaining: Vec<StoredIntent> = store
            .list(tenant, &Home::Agent(agent.clone()))
            .await?
            .into_iter()
            .filter(|s| {
                s.entry.memory_type == MemoryType::Working && s.entry.task_id() == Some(task_id)
            })
            .collect();
        for _ in 0..ATTEMPTS {
            let mut doc = archive::read(archives, &key).await?.unwrap_or_default();
            if remaining.is_empty() && doc.entries.is_empty() {
                return Ok(ArchiveOutcome {
                    entries_archived: 0,
                    archive: None,
                });
            }
            doc.task_id = task_id.to_owned();
            doc.agent_id = agent.as_str().to_owned();
            doc.archived_at = doc.archived_at.or(Some(now));
            // Expired entries are gone as far as the RFC is concerned (§9.3): removed below,
            // never archived.
            for s in remaining.iter().filter(|s| !s.entry.is_expired(now)) {
                doc.entries.insert(s.entry.id.clone(), archived_entry(s));
            }
            let name = match archive::write(archives, store, &key, &doc, now).await {
                Err(StoreError::Conflict { .. }) => continue,
                other => other?,
            };
            // Delete what was archived; an entry that changed meanwhile is archived again in
            // its new state, one that vanished (forgotten meanwhile) leaves the archive.
            let mut again = Vec::new();
            let mut vanished = false;
            for s in &remaining {
                if !store.remove(s).await? {
                    match store.get(&s.location()).await? {
                        Some(current) => again.push(current),
                        None => vanished = true,
                    }
                }
            }
            if vanished {
                self.drop_vanished(&key, &remaining).await?;
            }
            if again.is_empty() {
                // The task's working counter is back at zero: it goes, so finished tasks leave
                // no item behind.
                let at = CounterAt {
                    tenant: tenant.clone(),
                    home: Home::Agent(agent.clone()),
                    counter: CounterKey::working(task_id),
                };
                store.drop_counter_if_zero(&at).await?;
                let count = archive::read(archives, &key)
                    .await?
                    .map_or(0, |d| d.entries.len());
                self.publish(vec![DomainEvent::keyed_archived(
                    tenant,
                    agent.as_str(),
                    &key.task,
                    &name,
                    count,
                    now,
                )])
                .await;
                tracing::info!(tenant = %tenant, entries = count, "working memory archived");
                return Ok(ArchiveOutcome {
                    entries_archived: count,
                    archive: (count > 0).then_some(name),
                });
            }
            remaining = again;
        }
        Err(retry_later("archive"))
    }

    /// Takes entries that were deleted under the archiver (a forget) back out of the archive.
    async fn drop_vanished(
        &self,
        key: &ArchiveKey,
        archived: &[StoredIntent],
    ) -> Result<(), IntentError> {
        let store = self.ports.store.as_ref();
        for _ in 0..ATTEMPTS {
            let Some(mut doc) = archive::read(self.ports.archives.as_ref(), key).await? else {
                return Ok(());
            };
            let mut changed = false;
            for s in archived {
                // Gone because forget took it (its tombstone), not because another archiver
                // of the task archived and removed it.
                if store.tombstoned(&s.location()).await? {
                    changed |= doc.entries.remove(&s.entry.id).is_some();
                }
            }
            if !changed {
                return Ok(());
            }
            match archive::write(self.ports.archives.as_ref(), store, key, &doc, self.now()).await {
                Err(StoreError::Conflict { .. }) => continue,
                other => {
                    other?;
                    return Ok(());
                }
            }
        }
        Err(retry_later("archive"))
    }
}

fn archived_entry(s: &StoredIntent) -> Value {
    let e = &s.entry;
    let mut v = json!({
        "id": e.id,
        "namespace": e.namespace,
        "key": e.key,
        "value": e.value,
        "tags": e.tags,
        "version": e.version,
        "scope": e.scope,
        "updated_at": e.updated_at,
    });
    if let Some(subject) = &s.subject {
        v["subject_key"] = json!(subject.as_str());
    }
    v
}

fn matches(e: &IntentEntry, q: &ListQuery) -> bool {
    let tag = |t: &String| e.tags.contains(t);
    let scope = |field: &str| {
        e.scope
            .as_ref()
            .and_then(|s| s.get(field))
            .and_then(Value::as_str)
    };
    q.memory_type.is_none_or(|t| t == e.memory_type)
        && q.namespace_matches(&e.namespace)
        && q.key.as_ref().is_none_or(|k| *k == e.key)
        && q.tags_all.iter().all(tag)
        && (q.tags_any.is_empty() || q.tags_any.iter().any(tag))
        && q.task_id
            .as_deref()
            .is_none_or(|t| scope("task_id") == Some(t))
        && q.intent_id
            .as_deref()
            .is_none_or(|t| scope("intent_id") == Some(t))
        && q.pinned.is_none_or(|p| p == e.pinned)
        && q.updated_after.is_none_or(|t| e.updated_at > t)
        && q.updated_before.is_none_or(|t| e.updated_at < t)
}
