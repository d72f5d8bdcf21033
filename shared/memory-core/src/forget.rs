//! Tenant-scoped delete-by-subject (RFC 0080 §A retention `forget: true`). Entries are found
//! through the subject index of the caller's tenant only, so an identical subject string in
//! another tenant is a different key and stays untouched. Data derived from entries (archives,
//! index lines, commitments) registers a `ForgetHook`, which sees the forgotten entry keys and
//! reports its own counts; the `memory.forgotten` event carries only the subject's digest.
//!
//! ## The fence: forget against passes running at the same time
//!
//! A dream, consolidation or commitment pass reads entries, then writes what it derived from
//! them (an entry, an archive, an index line, a commitment). A forget running meanwhile could
//! look for derived data before the pass wrote it, and delete the sources after the pass read
//! them: the derived data would keep the subject's text. Two rules close that window.
//!
//! - Forget (`F`) writes a tombstone for every entry it forgets *before* it looks for anything
//!   derived from it, and every derived entry it finds is tombstoned before it is deleted and
//!   before the next look (`forget_derived_entries` loops until a look finds nothing new).
//! - Every pass (`P`) reads the ref's tombstones before its first write and leaves tombstoned
//!   entries out of what it derives (the dream and consolidation read them before their
//!   snapshot, commitment inference only when it found something to store); after its last
//!   write it reads them again, and if any appeared it sweeps: it
//!   removes what it wrote from a tombstoned source and runs the same derived-data removal
//!   for every tombstoned id, then ends without moving its watermark (the next run redoes the
//!   work without the forgotten entries).
//!
//! Why nothing survives: let `A` be something `P` wrote from an entry `w` that `F` forgets, so
//! `P` derived from `w`, so `w` was not yet tombstoned when `P` read the tombstones (read 1).
//! `F` tombstones `w` (write `t_w`) and afterwards looks for what derives from `w` (look `l_w`).
//! All reads are strongly consistent (DynamoDB consistent reads, S3 strong read-after-write), so
//! either `A` was written before `l_w` read its location, and `F` finds and removes it, or it was
//! written after, which is after `t_w`; then `P`'s second tombstone read, which follows its last
//! write, sees `w`, and `P` removes `A` itself. The sweep tombstones what it removes, so a third
//! pass that read `A` meanwhile is caught by the same argument one level down.
//!
//! Tombstones live for [`TOMBSTONE_TTL_SECONDS`], far longer than a pass can run (Lambda stops
//! every invocation within 15 minutes).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::{CoreError, StoreError};
use crate::events::{DomainEvent, ForgetCounts};
use crate::listing::snapshot;
use crate::model::{EntryKey, StoredEntry, SubjectKey};
use crate::ports::{CorePorts, EntryStore};
use crate::time::Timestamp;
use crate::writer::MAX_SUBJECT_BYTES;
use memory_guard::MemoryRef;

/// How long a tombstone fences passes (see the module doc): a day, against passes that last
/// minutes at most.
pub const TOMBSTONE_TTL_SECONDS: i64 = 24 * 60 * 60;

/// Deletes every entry of `memory_ref` derived (through provenance, to any depth) from an id in
/// `gone`, tombstoning each before deleting it and looking again after every round, so the last
/// look comes after the last tombstone. Returns the ids removed and grows `gone` with them.
pub async fn forget_derived_entries(
    store: &dyn EntryStore,
    memory_ref: &MemoryRef,
    gone: &mut BTreeSet<String>,
    until: Timestamp,
) -> Result<usize, StoreError> {
    let mut deleted = 0;
    loop {
        let entries = snapshot(store, memory_ref, Timestamp::from_millis(i64::MIN)).await?;
        let derived: Vec<EntryKey> = entries
            .iter()
            .filter(|e| !gone.contains(&e.entry.id))
            .filter(|e| e.provenance.iter().any(|p| gone.contains(p)))
            .map(StoredEntry::key)
            .collect();
        if derived.is_empty() {
            return Ok(deleted);
        }
        store.tombstone(&derived, until).await?;
        deleted += store.delete_many(&derived).await?;
        gone.extend(derived.into_iter().map(|k| k.id));
    }
}

/// The tombstones a pass reads before its snapshot, and the check after its last write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fence {
    before: BTreeSet<String>,
}

impl Fence {
    pub async fn read(store: &dyn EntryStore, memory_ref: &MemoryRef) -> Result<Self, StoreError> {
        Ok(Fence {
            before: store.tombstones(memory_ref).await?,
        })
    }

    /// Whether a snapshot may use this entry.
    pub fn admits(&self, id: &str) -> bool {
        !self.before.contains(id)
    }

    /// After the pass's last write: the ref's tombstones if a forget began since `read`
    /// (the pass must sweep), `None` if not.
    pub async fn breached(
        &self,
        store: &dyn EntryStore,
        memory_ref: &MemoryRef,
    ) -> Result<Option<BTreeSet<String>>, StoreError> {
        let now = store.tombstones(memory_ref).await?;
        Ok((!now.is_subset(&self.before)).then_some(now))
    }
}

/// One forget as a [`ForgetHook`] sees it: the subject (its key names the tenant), and the keys
/// of the subject's entries and of the entries they were derived from.
#[derive(Clone, Copy, Debug)]
pub struct ForgetScope<'a> {
    pub subject: &'a SubjectKey,
    pub forgotten: &'a [EntryKey],
}

/// Something derived from entries that must forget with them.
#[async_trait]
pub trait ForgetHook: Send + Sync {
    /// Called before the subject's entries are deleted (`scope.forgotten`). Must be idempotent:
    /// a forget that failed halfway is simply called again. It must not delete the forgotten
    /// keys themselves (forget does that last).
    async fn forget(&self, scope: ForgetScope<'_>) -> Result<ForgetCounts, CoreError>;

    /// Entries the subject contributed to that the subject index does not name (an entry keeps
    /// one subject, but a file another subject edited later still holds the first one's
    /// words). Asked before anything is tombstoned, so these entries are forgotten exactly as the
    /// subject's own: fenced, their derived data swept by every hook, then deleted.
    async fn contributed(&self, _subject: &SubjectKey) -> Result<Vec<EntryKey>, CoreError> {
        Ok(Vec::new())
    }

    /// Called after the entries are deleted, to remove what only pointed at them (the memory
    /// tool's path keys). Last, so a forget that fails before it still finds every entry again
    /// through what this would remove. Must be idempotent.
    async fn after_delete(
        &self,
        _subject: &SubjectKey,
        _forgotten: &[EntryKey],
    ) -> Result<(), CoreError> {
        Ok(())
    }
}

#[derive(Clone)]
pub struct Forgetter {
    ports: CorePorts,
    hooks: Vec<Arc<dyn ForgetHook>>,
}

impl Forgetter {
    pub fn new(ports: CorePorts) -> Self {
        Forgetter {
            ports,
            hooks: Vec::new(),
        }
    }

    pub fn with_hook(mut self, hook: Arc<dyn ForgetHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    pub async fn forget(&self, tenant_id: &str, subject: &str) -> Result<ForgetCounts, CoreError> {
        let tenant = crate::model::tenant_of(tenant_id)?;
        if subject.is_empty() || subject.len() > MAX_SUBJECT_BYTES {
            return Err(CoreError::invalid(
                "subject",
                format!("1-{MAX_SUBJECT_BYTES} bytes"),
            ));
        }
        let key = SubjectKey::derive(&tenant, subject);
        let mut found: BTreeSet<EntryKey> = self
            .ports
            .store
            .find_by_subject(&key)
            .await?
            .into_iter()
            .collect();
        for hook in &self.hooks {
            found.extend(hook.contributed(&key).await?);
        }
        let entries: Vec<EntryKey> = found
            .into_iter()
            .filter(|k| k.memory_ref.tenant() == &tenant)
            .collect();
        // Lineage for the hooks: the forgotten entries and everything they were derived from
        // (a merged entry of the subject carries its sources' ids), read before deletion.
        let mut lineage = entries.clone();
        if !self.hooks.is_empty() {
            for k in &entries {
                if let Some(stored) = self.ports.store.get(k).await? {
                    lineage.extend(stored.provenance.into_iter().map(|id| EntryKey {
                        memory_ref: k.memory_ref.clone(),
                        id,
                    }));
                }
            }
        }
        // The fence (module doc): tombstones before any look for derived data.
        let until = self
            .ports
            .clock
            .now()
            .plus_millis(TOMBSTONE_TTL_SECONDS.saturating_mul(1000));
        self.ports.store.tombstone(&entries, until).await?;
        // Hooks first: if one fails, the subject's entries are still there, so a retried
        // forget finds them (and their lineage) again and finishes the job.
        let mut counts = ForgetCounts::default();
        for hook in &self.hooks {
            counts += hook
                .forget(ForgetScope {
                    subject: &key,
                    forgotten: &lineage,
                })
                .await?;
        }
        counts.deleted_entries += self.ports.store.delete_many(&entries).await?;
        for hook in &self.hooks {
            hook.after_delete(&key, &entries).await?;
        }
        let event = DomainEvent::memory_forgotten(&key, &counts, self.ports.clock.now());
        if let Err(e) = self.ports.publisher.publish(&[event]).await {
            tracing::error!(error = %e, "memory.forgotten not published");
        }
        tracing::info!(tenant = %tenant, deleted_entries = counts.deleted_entries, "subject forgotten");
        Ok(counts)
    }
}
