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
use memory_core::forget::ForgetHook;
use memory_core::model::{EntryKey, SubjectKey};
use memory_core::ports::{ArchiveStore, Clock};
use memory_core::{CoreError, StoreError};
use memory_guard::TenantId;

use crate::archive;
use crate::store::{IntentStore, SubjectHit};

/// Attempts before a forget that keeps losing races reports a retryable failure.
const ATTEMPTS: usize = 16;

pub struct KeyedForgetHook {
    pub store: Arc<dyn IntentStore>,
    pub archives: Arc<dyn ArchiveStore>,
    pub clock: Arc<dyn Clock>,
}

#[async_trait]
impl ForgetHook for KeyedForgetHook {
    async fn forget(
        &self,
        tenant: &TenantId,
        subject: &SubjectKey,
        _forgotten: &[EntryKey],
    ) -> Result<ForgetCounts, CoreError> {
        let store = self.store.as_ref();
        let mut counts = ForgetCounts::default();
        for hit in store.subject_hits(tenant, subject).await? {
            match hit {
                SubjectHit::Entry(at) => {
                    // Removal is conditional on the version read; an update in between is read
                    // again, so the loop ends with the entry gone.
                    let mut gone = false;
                    for _ in 0..ATTEMPTS {
                        match store.get(&at).await? {
                            None => {
                                gone = true;
                                break;
                            }
                            Some(e) => {
                                if store.remove(&e).await? {
                                    counts.deleted_entries += 1;
                                    gone = true;
                                    break;
                                }
                            }
                        }
                    }
                    if !gone {
                        return Err(StoreError::Conflict {
                            op: "forget keyed entry",
                        }
                        .into());
                    }
                }
                SubjectHit::Version(at, version) => store.delete_version(&at, version).await?,
                SubjectHit::Archive(key) => {
                    let mut done = false;
                    for _ in 0..ATTEMPTS {
                        let Some(mut doc) = archive::read(self.archives.as_ref(), &key).await?
                        else {
                            store.index_archive(&key, &[], true).await?;
                            done = true;
                            break;
                        };
                        let before = doc.entries.len();
                        doc.entries
                            .retain(|_, e| e["subject_key"].as_str() != Some(subject.as_str()));
                        if doc.entries.len() == before {
                            // Nothing of the subject inside: only the index item was stale.
                            archive::write(
                                self.archives.as_ref(),
                                store,
                                &key,
                                &doc,
                                self.clock.now(),
                            )
                            .await
                            .ok();
                            done = true;
                            break;
                        }
                        match archive::write(
                            self.archives.as_ref(),
                            store,
                            &key,
                            &doc,
                            self.clock.now(),
                        )
                        .await
                        {
                            Err(StoreError::Conflict { .. }) => continue,
                            other => {
                                other?;
                                counts.deleted_archives += 1;
                                done = true;
                                break;
                            }
                        }
                    }
                    if !done {
                        return Err(StoreError::Conflict {
                            op: "forget keyed archive",
                        }
                        .into());
                    }
                }
            }
        }
        Ok(counts)
    }
}
