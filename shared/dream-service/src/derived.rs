//! Forget's sweep of what dreams derived (openwop-agent-memory.md §"Forget"; RFC 0062): the
//! distilled entries, archives and MEMORY-INDEX lines that carry a forgotten subject's content,
//! and the index formats both the sweep and a dream write. It needs the archive and index
//! formats of `distill` and no distiller or tokenizer, so memory-forget and memory-mcp link this
//! without the `dreams` feature.

use std::collections::BTreeSet;
use std::sync::Arc;

use distill::DistillError;

use memory_core::error::{CoreError, StoreError};
use memory_core::events::ForgetCounts;
use memory_core::forget::{ForgetHook, ForgetScope};
use memory_core::model::EntryKey;
use memory_core::ports::{
    ArchiveStore, Clock, EntryStore, Expect, ObjectKey, ObjectKind, ObjectPut,
};
use memory_core::time::Timestamp;
use memory_guard::{MemoryRef, TenantId};

/// Tries of the index compare-and-swap before the run gives up (and is retried).
const INDEX_ATTEMPTS: usize = 8;

/// Rewrites the index JSON at `key` by compare-and-swap on its ETag. `change` is given the
/// index as it stands (`None` when there is none) and answers the index to write, or `None`
/// when nothing changes; a lost race reads again, [`INDEX_ATTEMPTS`] times at most, so dreams
/// and forgets racing on one index lose no update. Answers the index written, if any; `op`
/// names the conflict when every attempt lost.
pub(crate) async fn swap_index(
    archives: &dyn ArchiveStore,
    key: &ObjectKey,
    op: &'static str,
    mut change: impl FnMut(
        Option<distill::MemoryIndex>,
    ) -> Result<Option<distill::MemoryIndex>, CoreError>,
) -> Result<Option<distill::MemoryIndex>, CoreError> {
    for _ in 0..INDEX_ATTEMPTS {
        let (current, expect) = match archives.get(key).await? {
            Some(o) => (
                Some(distill::index::from_json_bytes(&o.body).map_err(distill_error)?),
                Expect::ETag(o.etag),
            ),
            None => (None, Expect::Absent),
        };
        let Some(index) = change(current)? else {
            return Ok(None);
        };
        match archives
            .put_expecting(
                ObjectPut::json(
                    key,
                    ObjectKind::Index,
                    distill::index::to_json_bytes(&index),
                ),
                expect,
            )
            .await
        {
            Ok(_) => return Ok(Some(index)),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(CoreError::Store(StoreError::Conflict { op }))
}
/// Every distill failure gets its own meaning here; the edge (memory_api::wire) picks the status.
pub(crate) fn distill_error(e: DistillError) -> CoreError {
    match e {
        DistillError::TokenBudgetExceeded { needed, budget } => {
            CoreError::TokenBudgetExceeded { needed, budget }
        }
        // The bound only, never the value asked for (`CoreError::Invalid`'s rule).
        DistillError::BudgetBelowFloor { floor, .. } => CoreError::invalid(
            "tokenBudget",
            format!("must be at least {floor}, the fixed overhead of a summary"),
        ),
        DistillError::MalformedMemoryRef | DistillError::TenantMismatch => {
            CoreError::RefNotAdmitted
        }
        // Stored archives and indexes this version cannot read back: data, not a caller error.
        DistillError::MalformedArchive(_)
        | DistillError::MalformedIndex(_)
        | DistillError::MalformedDigest
        | DistillError::IndexRefMismatch => CoreError::Store(StoreError::Corrupt {
            key: e.code().to_owned(),
        }),
        // A store snapshot never repeats an id and empty runs are skipped before distilling:
        // reaching these is a defect of ours, reported by code.
        DistillError::NothingToDistill | DistillError::DuplicateSourceId => {
            CoreError::Store(StoreError::Backend {
                op: "distill",
                code: e.code().to_owned(),
            })
        }
    }
}

/// The bucket key of a `distill` key, which always starts with the tenant.
pub(crate) fn object_key(tenant: &TenantId, key: &str) -> Result<ObjectKey, CoreError> {
    ObjectKey::from_listed(tenant, key).ok_or(CoreError::Store(StoreError::Corrupt {
        key: "object key".into(),
    }))
}

/// Every archive object of `memory_ref` (under its `distill` archive prefix).
pub(crate) async fn list_archives(
    archives: &dyn ArchiveStore,
    memory_ref: &MemoryRef,
) -> Result<Vec<ObjectKey>, CoreError> {
    let tenant = memory_ref.tenant();
    let prefix = distill::keys::archive_prefix(&memory_ref.to_string()).map_err(distill_error)?;
    let relative = prefix
        .strip_prefix(tenant.as_str())
        .and_then(|p| p.strip_prefix('/'))
        .unwrap_or_default();
    Ok(archives.list(tenant, relative).await?)
}

/// The bucket key of a ref's MEMORY-INDEX.json.
pub(crate) fn index_json_object(
    tenant: &TenantId,
    reference: &str,
) -> Result<ObjectKey, CoreError> {
    object_key(
        tenant,
        &distill::keys::index_json_key(reference).map_err(distill_error)?,
    )
}

/// The bucket key of a ref's MEMORY-INDEX.md.
pub(crate) fn index_md_object(tenant: &TenantId, reference: &str) -> Result<ObjectKey, CoreError> {
    object_key(
        tenant,
        &distill::keys::index_md_key(reference).map_err(distill_error)?,
    )
}

/// Rewrites MEMORY-INDEX.md from `index`. Best effort against racing writers: the JSON is the
/// normative index (RFC 0062 §5); the Markdown sibling may lag one update behind under a race.
pub(crate) async fn write_markdown(
    archives: &dyn ArchiveStore,
    tenant: &TenantId,
    reference: &str,
    index: &distill::MemoryIndex,
) -> Result<(), CoreError> {
    let md_key = index_md_object(tenant, reference)?;
    let body = distill::index::render_markdown(index).into_bytes();
    let current = archives.get(&md_key).await?;
    if current.as_ref().is_some_and(|o| o.body == body) {
        return Ok(());
    }
    let expect = match current {
        Some(o) => Expect::ETag(o.etag),
        None => Expect::Absent,
    };
    match archives
        .put_expecting(
            ObjectPut {
                key: &md_key,
                body,
                kind: ObjectKind::Index,
                content_type: "text/markdown; charset=utf-8",
            },
            expect,
        )
        .await
    {
        Ok(_) | Err(StoreError::Conflict { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Forget for derived data: distilled and merged entries whose provenance
/// includes a forgotten entry are deleted (their text mixes the subject's content in), archives
/// whose sources include one are deleted with every version, and index lines pointing at
/// those archives are removed (the index is rewritten).
pub struct DerivedForgetHook {
    pub store: Arc<dyn EntryStore>,
    pub archives: Arc<dyn ArchiveStore>,
    pub clock: Arc<dyn Clock>,
}

#[async_trait::async_trait]
impl ForgetHook for DerivedForgetHook {
    async fn forget(&self, scope: ForgetScope<'_>) -> Result<ForgetCounts, CoreError> {
        let (tenant, forgotten) = (scope.subject.tenant(), scope.forgotten);
        let mut counts = ForgetCounts::default();
        let refs: BTreeSet<MemoryRef> = forgotten
            .iter()
            .map(|k| k.memory_ref.clone())
            .filter(|r| r.tenant() == tenant)
            .collect();
        for memory_ref in refs {
            let mut gone: BTreeSet<String> = forgotten
                .iter()
                .filter(|k| k.memory_ref == memory_ref)
                .map(|k| k.id.clone())
                .collect();
            counts += self.forget_in_ref(&memory_ref, &mut gone).await?;
        }
        Ok(counts)
    }
}

impl DerivedForgetHook {
    /// Everything of one ref derived from `gone`: entries (to any depth, tombstoned first, see
    /// `forget.rs`), then archives built from any of them, then their index lines.
    pub async fn forget_in_ref(
        &self,
        memory_ref: &MemoryRef,
        gone: &mut BTreeSet<String>,
    ) -> Result<ForgetCounts, CoreError> {
        let tenant = memory_ref.tenant();
        let now = self.clock.now();
        let until =
            now.plus_millis(memory_core::forget::TOMBSTONE_TTL_SECONDS.saturating_mul(1000));
        let mut counts = ForgetCounts {
            deleted_entries: memory_core::forget::forget_derived_entries(
                self.store.as_ref(),
                memory_ref,
                gone,
                until,
            )
            .await?,
            ..Default::default()
        };
        let reference = memory_ref.to_string();
        let mut removed_keys: BTreeSet<String> = BTreeSet::new();
        for key in list_archives(self.archives.as_ref(), memory_ref).await? {
            let Some(object) = self.archives.get(&key).await? else {
                continue;
            };
            let Ok(archive) = distill::Archive::from_bytes(&object.body) else {
                continue;
            };
            if archive.source_ids.iter().any(|id| gone.contains(id))
                || gone.contains(&archive.output_entry_id)
            {
                self.archives.delete(&key).await?;
                counts.deleted_archives += 1;
                if let Ok(k) = archive.key() {
                    removed_keys.insert(k);
                }
            }
        }
        if !removed_keys.is_empty()
            && self
                .prune_index(tenant, &reference, &removed_keys, now)
                .await?
        {
            counts.rebuilt_indexes += 1;
        }
        Ok(counts)
    }

    /// A dream's own sweep after its fence was breached (`forget.rs`): if any of its sources is
    /// tombstoned, what it wrote goes (output entry, archive, index line), whether or not a
    /// forget already took some of it; then everything else derived from the tombstoned ids.
    #[cfg(feature = "dreams")]
    pub(crate) async fn sweep(
        &self,
        memory_ref: &MemoryRef,
        tombstoned: &BTreeSet<String>,
        own: &distill::Archive,
        own_key: &ObjectKey,
    ) -> Result<ForgetCounts, CoreError> {
        let mut gone = tombstoned.clone();
        let mut counts = ForgetCounts::default();
        if own.source_ids.iter().any(|id| gone.contains(id)) {
            let output = EntryKey {
                memory_ref: memory_ref.clone(),
                id: own.output_entry_id.clone(),
            };
            let until = self
                .clock
                .now()
                .plus_millis(memory_core::forget::TOMBSTONE_TTL_SECONDS.saturating_mul(1000));
            self.store
                .tombstone(std::slice::from_ref(&output), until)
                .await?;
            counts.deleted_entries += usize::from(self.store.delete(&output).await?);
            gone.insert(output.id);
            self.archives.delete(own_key).await?;
            if let Ok(k) = own.key() {
                let removed = BTreeSet::from([k]);
                if self
                    .prune_index(
                        memory_ref.tenant(),
                        &memory_ref.to_string(),
                        &removed,
                        self.clock.now(),
                    )
                    .await?
                {
                    counts.rebuilt_indexes += 1;
                }
            }
        }
        counts += self.forget_in_ref(memory_ref, &mut gone).await?;
        Ok(counts)
    }

    async fn prune_index(
        &self,
        tenant: &TenantId,
        reference: &str,
        removed: &BTreeSet<String>,
        now: Timestamp,
    ) -> Result<bool, CoreError> {
        let json_key = index_json_object(tenant, reference)?;
        let pruned = swap_index(
            self.archives.as_ref(),
            &json_key,
            "index prune",
            |current| {
                let Some(index) = current else {
                    return Ok(None);
                };
                let (pruned, n) = distill::index::remove_where(
                    index,
                    |l| removed.contains(&l.archive_key),
                    now.as_millis(),
                );
                Ok((n > 0).then_some(pruned))
            },
        )
        .await?;
        let Some(pruned) = pruned else {
            return Ok(false);
        };
        // Old versions of the index still list the removed lines: drop them too.
        self.archives.delete_old_versions(&json_key).await?;
        write_markdown(self.archives.as_ref(), tenant, reference, &pruned).await?;
        self.archives
            .delete_old_versions(&index_md_object(tenant, reference)?)
            .await?;
        Ok(true)
    }
}
