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
use memory_core::{CoreError, StoreError};
use memory_guard::TenantId;
use serde_json::Value;

use crate::store::{IntentStore, SubjectHit};

pub struct KeyedForgetHook(pub Arc<dyn IntentStore>);

#[async_trait]
impl ForgetHook for KeyedForgetHook {
    async fn forget(
        &self,
        tenant: &TenantId,
        subject: &SubjectKey,
        _forgotten: &[EntryKey],
    ) -> Result<ForgetCounts, CoreError> {
        let store = &self.0;
        let mut counts = ForgetCounts::default();
        for hit in store.subject_hits(tenant, subject).await? {
            match hit {
                SubjectHit::Entry(at) => {
                    // Removal is conditional on the version read; an update in between is read
                    // again, so the loop ends with the entry gone.
                    for _ in 0..16 {
                        match store.get(&at).await? {
                            None => break,
                            Some(e) => {
                                if store.remove(&e).await? {
                                    counts.deleted_entries += 1;
                                    break;
                                }
                            }
                        }
                    }
                    if store.get(&at).await?.is_some() {
                        return Err(StoreError::Conflict {
                            op: "forget keyed entry",
                        }
                        .into());
                    }
                }
                SubjectHit::Version(at, version) => store.delete_version(&at, version).await?,
                SubjectHit::Archive(key) => {
                    let Some(body) = store.read_archive(&key).await? else {
                        store.delete_archive(&key).await?;
                        continue;
                    };
                    let mut doc: Value =
                        serde_json::from_slice(&body).map_err(|_| StoreError::Corrupt {
                            key: "openintent archive".into(),
                        })?;
                    let entries: Vec<Value> = doc["entries"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|e| e["subject_key"].as_str() != Some(subject.as_str()))
                        .collect();
                    counts.deleted_archives += 1;
                    if entries.is_empty() {
                        store.delete_archive(&key).await?;
                        continue;
                    }
                    let mut subjects: Vec<SubjectKey> = entries
                        .iter()
                        .filter_map(|e| e["subject_key"].as_str())
                        .filter_map(SubjectKey::from_stored)
                        .collect();
                    subjects.sort();
                    subjects.dedup();
                    doc["entries_archived"] = Value::from(entries.len());
                    doc["entries"] = Value::Array(entries);
                    let body = serde_json::to_vec(&doc).map_err(|_| StoreError::Corrupt {
                        key: "openintent archive".into(),
                    })?;
                    store.write_archive(&key, body, &subjects).await?;
                }
            }
        }
        Ok(counts)
    }
}
