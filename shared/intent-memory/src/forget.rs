//! Forget-by-subject reaches this door too: an entry written with a `subject` carries the
//! subject's forget key on the entry, on every version record and on the index items of any
//! working-memory archive holding it, so the one forget (`memory_core::forget`) finds them
//! all through the same subject index and removes them: entries with their versions, version
//! records left behind, and the subject's entries inside archives (the archive is rewritten
//! without them, or deleted when nothing else is left, every older object version with it).
//!
//! A task archive racing a forget cannot keep the subject's value: the archive deletes each
//! entry it archived conditionally, and takes back out of the document any entry that vanished
//! meanwhile (`service::IntentMemory::archive_task`); an archive written before the forget
//! looked is found through its index items.

use std::sync::Arc;

use async_trait::async_trait;
use memory_core::events::ForgetCounts;
use memory_core::forget::{ForgetHook, ForgetScope, TOMBSTONE_TTL_SECONDS};
use memory_core::model::SubjectKey;
use memory_core::ports::{ArchiveStore, Clock};
use memory_core::{CoreError, StoreError};

use crate::archive;
use crate::model::Location;
use crate::store::{ArchiveKey, IntentStore, SubjectHit};

/// Attempts before a forget that keeps losing races reports a retryable failure.
const ATTEMPTS: usize = 16;

pub struct KeyedForgetHook {
    pub store: Arc<dyn IntentStore>,
    pub archives: Arc<dyn ArchiveStore>,
    pub clock: Arc<dyn Clock>,
}

#[async_trait]
impl ForgetHook for KeyedForgetHook {
    async fn forget(&self, scope: ForgetScope<'_>) -> Result<ForgetCounts, CoreError> {
        let subject = scope.subject;
        let mut counts = ForgetCounts::default();
        for hit in self.store.subject_hits(subject).await? {
            match hit {
                SubjectHit::Entry(at) => {
                    counts.deleted_entries += usize::from(self.remove_entry(&at).await?);
                }
                SubjectHit::Version(at, version) => self.store.delete_version(&at, version).await?,
                SubjectHit::Archive(key) => {
                    counts.deleted_archives +=
                        usize::from(self.strip_archive(&key, subject).await?);
                }
            }
        }
        Ok(counts)
    }
}

impl KeyedForgetHook {
    /// Removes the entry; `true` if this call removed it. Removal is conditional on the state
    /// read, so an update in between is read again and the loop ends with the entry gone.
    async fn remove_entry(&self, at: &Location) -> Result<bool, StoreError> {
        // Tombstone first: an archiver that read the entry and then finds it gone takes it back
        // out of its archive (`IntentMemory::archive_task`).
        let until = self.clock.now().plus_millis(TOMBSTONE_TTL_SECONDS * 1000);
        self.store.tombstone(at, until).await?;
        for _ in 0..ATTEMPTS {
            match self.store.get(at).await? {
                None => return Ok(false),
                Some(e) if self.store.remove(&e).await? => return Ok(true),
                Some(_) => {}
            }
        }
        Err(StoreError::Conflict {
            op: "forget keyed entry",
        })
    }

    /// Takes the subject's entries out of the archive (deleting it when nothing is left);
    /// `true` if the archive held any. Swapped on the archive's ETag, read again after a race.
    async fn strip_archive(
        &self,
        key: &ArchiveKey,
        subject: &SubjectKey,
    ) -> Result<bool, StoreError> {
        let (archives, store) = (self.archives.as_ref(), self.store.as_ref());
        for _ in 0..ATTEMPTS {
            let Some(mut doc) = archive::read(archives, key).await? else {
                store.unindex_archive(key, subject).await?;
                return Ok(false);
            };
            let before = doc.entries.len();
            doc.entries
                .retain(|_, e| e["subject_key"].as_str() != Some(subject.as_str()));
            if doc.entries.len() == before {
                // Nothing of the subject inside: only its index item was stale.
                store.unindex_archive(key, subject).await?;
                return Ok(false);
            }
            match archive::write(archives, store, key, &doc, self.clock.now()).await {
                Err(StoreError::Conflict { .. }) => continue,
                other => {
                    other?;
                    store.unindex_archive(key, subject).await?;
                    return Ok(true);
                }
            }
        }
        Err(StoreError::Conflict {
            op: "forget keyed archive",
        })
    }
}
