//! Tenant-scoped delete-by-subject (RFC 0080 §A retention `forget: true`). Entries are found
//! through the subject index of the caller's tenant only, so an identical subject string in
//! another tenant is a different key and stays untouched. Data derived from entries (archives,
//! index lines, commitments) registers a `ForgetHook`, which sees the forgotten entry keys and
//! reports its own counts; the `memory.forgotten` event carries only the subject's digest.

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::CoreError;
use crate::events::{DomainEvent, ForgetCounts};
use crate::model::{EntryKey, SubjectKey};
use crate::ports::{Clock, EntryStore, EventPublisher};
use crate::writer::MAX_SUBJECT_BYTES;
use memory_guard::TenantId;

/// Something derived from entries that must forget with them.
#[async_trait]
pub trait ForgetHook: Send + Sync {
    /// Called before the subject's entries are deleted, with their keys and the keys of the
    /// entries they were derived from. Must be idempotent: a forget that failed halfway is
    /// simply called again. It must not delete the given keys themselves (forget does that last).
    async fn forget(
        &self,
        tenant: &TenantId,
        subject: &SubjectKey,
        forgotten: &[EntryKey],
    ) -> Result<ForgetCounts, CoreError>;
}

#[derive(Clone)]
pub struct Forgetter {
    store: Arc<dyn EntryStore>,
    publisher: Arc<dyn EventPublisher>,
    clock: Arc<dyn Clock>,
    hooks: Vec<Arc<dyn ForgetHook>>,
}

impl Forgetter {
    pub fn new(
        store: Arc<dyn EntryStore>,
        publisher: Arc<dyn EventPublisher>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Forgetter {
            store,
            publisher,
            clock,
            hooks: Vec::new(),
        }
    }

    pub fn with_hook(mut self, hook: Arc<dyn ForgetHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    pub async fn forget(&self, tenant_id: &str, subject: &str) -> Result<ForgetCounts, CoreError> {
        let tenant = TenantId::parse(tenant_id)
            .map_err(|_| CoreError::invalid("tenantId", "must be 1-128 of [A-Za-z0-9._-]"))?;
        if subject.is_empty() || subject.len() > MAX_SUBJECT_BYTES {
            return Err(CoreError::invalid(
                "subject",
                format!("1-{MAX_SUBJECT_BYTES} bytes"),
            ));
        }
        let key = SubjectKey::derive(&tenant, subject);
        let entries: Vec<EntryKey> = self
            .store
            .find_by_subject(&tenant, &key)
            .await?
            .into_iter()
            .filter(|k| k.memory_ref.tenant() == &tenant)
            .collect();
        // Lineage for the hooks: the forgotten entries and everything they were derived from
        // (a merged entry of the subject carries its sources' ids), read before deletion.
        let mut lineage = entries.clone();
        if !self.hooks.is_empty() {
            for k in &entries {
                if let Some(stored) = self.store.get(k).await? {
                    lineage.extend(stored.provenance.into_iter().map(|id| EntryKey {
                        memory_ref: k.memory_ref.clone(),
                        id,
                    }));
                }
            }
        }
        // Hooks first: if one fails, the subject's entries are still there, so a retried
        // forget finds them (and their lineage) again and finishes the job.
        let mut counts = ForgetCounts::default();
        for hook in &self.hooks {
            counts += hook.forget(&tenant, &key, &lineage).await?;
        }
        counts.deleted_entries += self.store.delete_many(&entries).await?;
        let event = DomainEvent::memory_forgotten(&tenant, &key, &counts, self.clock.now());
        if let Err(e) = self.publisher.publish(&[event]).await {
            tracing::error!(error = %e, "memory.forgotten not published");
        }
        tracing::info!(tenant = %tenant, deleted_entries = counts.deleted_entries, "subject forgotten");
        Ok(counts)
    }
}
