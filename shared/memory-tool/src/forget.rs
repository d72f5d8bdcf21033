//! Forget reaches every file a subject contributed to. A file's entry carries the subject of
//! its own version only, but an edit keeps the earlier text, so the path record lists every
//! subject whose words reached the file and the store links each of them to it: forget asks
//! those links for the files ([`ForgetHook::contributed`]), so they are fenced, swept of
//! derived data and deleted with the subject's own entries, and then releases their path keys.
//!
//! What forget does to a file several subjects wrote: it erases the whole file (every subject's
//! words in it), since an edit history is not kept to tell whose words are whose.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;

use memory_core::events::ForgetCounts;
use memory_core::forget::{ForgetHook, ForgetScope};
use memory_core::model::{EntryKey, SubjectKey};
use memory_core::paths::{PathChange, PathStore, PathWrite};
use memory_core::{CoreError, StoreError};

pub struct PathForgetHook {
    pub paths: Arc<dyn PathStore>,
}

#[async_trait]
impl ForgetHook for PathForgetHook {
    async fn forget(&self, _scope: ForgetScope<'_>) -> Result<ForgetCounts, CoreError> {
        Ok(ForgetCounts::default())
    }

    async fn contributed(&self, subject: &SubjectKey) -> Result<Vec<EntryKey>, CoreError> {
        Ok(self
            .paths
            .paths_of_subject(subject)
            .await?
            .into_iter()
            .map(|linked| EntryKey {
                memory_ref: linked.memory_ref,
                id: linked.record.entry_id,
            })
            .collect())
    }

    /// Releases each path key still naming a forgotten entry (its links with it), so no name
    /// of the subject's files is left. A key a create took over meanwhile names another entry
    /// and is left alone (its condition fails).
    async fn after_delete(
        &self,
        subject: &SubjectKey,
        forgotten: &[EntryKey],
    ) -> Result<(), CoreError> {
        let gone: BTreeSet<&EntryKey> = forgotten.iter().collect();
        for linked in self.paths.paths_of_subject(subject).await? {
            let key = EntryKey {
                memory_ref: linked.memory_ref.clone(),
                id: linked.record.entry_id.clone(),
            };
            if !gone.contains(&key) {
                continue;
            }
            let release = PathChange {
                paths: vec![PathWrite {
                    key: linked.key.clone(),
                    expect: Some(linked.record.entry_id.clone()),
                    read_subjects: linked.record.subjects.clone(),
                    then: None,
                }],
                ..PathChange::default()
            };
            match self.paths.change_paths(&linked.memory_ref, &release).await {
                Ok(()) | Err(StoreError::Conflict { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}
