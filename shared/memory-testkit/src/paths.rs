//! The in-memory `PathStore`: path records beside an [`InMemoryEntryStore`], changed together
//! with its entries under one lock, so a change is all-or-nothing exactly as the DynamoDB
//! adapter's one transaction is.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Mutex;

use memory_core::error::StoreError;
use memory_core::model::SubjectKey;
use memory_core::paths::{LinkedPath, PathChange, PathRecord, PathStore};
use memory_core::ports::{within, EntryStore, PassKind, MAX_ITEMS_PER_TRANSACTION};
use memory_guard::MemoryRef;

use crate::in_memory::InMemoryEntryStore;

pub struct InMemoryPathStore {
    entries: Arc<InMemoryEntryStore>,
    records: Mutex<BTreeMap<(MemoryRef, String), PathRecord>>,
}

impl InMemoryPathStore {
    pub fn new(entries: Arc<InMemoryEntryStore>) -> Self {
        InMemoryPathStore {
            entries,
            records: Mutex::new(BTreeMap::new()),
        }
    }

    /// Every path record, for tests that inspect the raw store.
    pub async fn dump(&self) -> Vec<(MemoryRef, String, PathRecord)> {
        self.records
            .lock()
            .await
            .iter()
            .map(|((r, k), v)| (r.clone(), k.clone(), v.clone()))
            .collect()
    }
}

#[async_trait]
impl PathStore for InMemoryPathStore {
    async fn path(
        &self,
        memory_ref: &MemoryRef,
        key: &str,
    ) -> Result<Option<PathRecord>, StoreError> {
        tokio::task::yield_now().await;
        self.entries.calls.call("path")?;
        Ok(self
            .records
            .lock()
            .await
            .get(&(memory_ref.clone(), key.to_owned()))
            .cloned())
    }

    async fn change_paths(
        &self,
        memory_ref: &MemoryRef,
        change: &PathChange,
    ) -> Result<(), StoreError> {
        const OP: &str = "change_paths";
        tokio::task::yield_now().await;
        self.entries.calls.call(OP)?;
        within(OP, change.items(), MAX_ITEMS_PER_TRANSACTION)?;
        let mut records = self.records.lock().await;
        let holds = change.paths.iter().all(|w| {
            let now = records
                .get(&(memory_ref.clone(), w.key.clone()))
                .map(|r| &r.entry_id);
            now == w.expect.as_ref()
        });
        if !holds {
            return Err(StoreError::Conflict { op: OP });
        }
        if !change.put.is_empty() || !change.delete.is_empty() {
            self.entries.replace(&change.put, &change.delete).await?;
        }
        if let Some(since) = change.put.iter().map(|e| e.entry.created_at).min() {
            self.entries
                .mark_pending(memory_ref, PassKind::Index, since)
                .await;
        }
        for w in &change.paths {
            let at = (memory_ref.clone(), w.key.clone());
            match &w.then {
                Some(record) => records.insert(at, record.clone()),
                None => records.remove(&at),
            };
        }
        Ok(())
    }

    async fn paths_of_subject(&self, subject: &SubjectKey) -> Result<Vec<LinkedPath>, StoreError> {
        self.entries.calls.call("paths_of_subject")?;
        let tenant = subject.tenant();
        Ok(self
            .records
            .lock()
            .await
            .iter()
            .filter(|((r, _), record)| r.tenant() == tenant && record.subjects.contains(subject))
            .map(|((r, key), record)| LinkedPath {
                memory_ref: r.clone(),
                key: key.clone(),
                record: record.clone(),
            })
            .collect())
    }
}
