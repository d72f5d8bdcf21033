//! Working-memory archives (RFC-0015 §2.1) as objects of the host's `ArchiveStore`: one JSON
//! document per agent and task, rewritten by compare-and-swap on its ETag so two archivers (or
//! an archiver and a forget) never overwrite each other's work, every older object version
//! removed after a rewrite, and indexed under the subjects whose entries it holds so forget
//! finds it. Archives carry the `archive` object kind, so the bucket's archive retention
//! applies to them as to dream archives.

use std::collections::BTreeMap;

use memory_core::model::SubjectKey;
use memory_core::ports::{ArchiveStore, Expect, ObjectKind, ObjectPut};
use memory_core::time::Timestamp;
use memory_core::StoreError;
use serde_json::{json, Value};

use crate::store::{ArchiveKey, IntentStore};

/// The archive document's format tag.
pub const ARCHIVE_FORMAT: &str = "wop-memory/openintent-working-archive/v1";

/// An archive as read: its entries by id, when it was first written, and the ETag to swap on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ArchiveDoc {
    pub task_id: String,
    pub agent_id: String,
    pub archived_at: Option<Timestamp>,
    pub entries: BTreeMap<String, Value>,
    pub etag: Option<String>,
}

fn corrupt() -> StoreError {
    StoreError::Corrupt {
        key: "openintent archive".into(),
    }
}

fn bad_key() -> StoreError {
    StoreError::Backend {
        op: "archive key",
        code: "InvalidKey".into(),
    }
}

pub async fn read(
    archives: &dyn ArchiveStore,
    key: &ArchiveKey,
) -> Result<Option<ArchiveDoc>, StoreError> {
    let object = key.object().ok_or_else(bad_key)?;
    let Some(stored) = archives.get(&object).await? else {
        return Ok(None);
    };
    let doc: Value = serde_json::from_slice(&stored.body).map_err(|_| corrupt())?;
    let mut entries = BTreeMap::new();
    for e in doc["entries"].as_array().into_iter().flatten() {
        if let Some(id) = e["id"].as_str() {
            entries.insert(id.to_owned(), e.clone());
        }
    }
    Ok(Some(ArchiveDoc {
        task_id: doc["task_id"].as_str().unwrap_or_default().to_owned(),
        agent_id: doc["agent_id"].as_str().unwrap_or_default().to_owned(),
        archived_at: doc["archived_at"]
            .as_str()
            .and_then(|t| Timestamp::parse_rfc3339(t).ok()),
        entries,
        etag: Some(stored.etag),
    }))
}

/// Writes `doc` if the object is still as `doc.etag` says (absent when `None`), then removes
/// older versions and re-indexes subjects; an empty document deletes the archive instead.
/// `StoreError::Conflict` when another writer got there first: read again and redo.
pub async fn write(
    archives: &dyn ArchiveStore,
    store: &dyn IntentStore,
    key: &ArchiveKey,
    doc: &ArchiveDoc,
    now: Timestamp,
) -> Result<String, StoreError> {
    let object = key.object().ok_or_else(bad_key)?;
    let subjects: Vec<SubjectKey> = {
        let mut s: Vec<SubjectKey> = doc
            .entries
            .values()
            .filter_map(|e| e["subject_key"].as_str())
            .filter_map(|s| SubjectKey::from_stored(&key.tenant, s))
            .collect();
        s.sort();
        s.dedup();
        s
    };
    if doc.entries.is_empty() && doc.etag.is_none() {
        return Ok(object.as_str().to_owned());
    }
    // Index first: a forget that runs between the two finds the index and the object. An
    // archive emptied by forget stays as an empty document, swapped on its ETag like any other
    // write (a delete could not be conditional, and would drop a concurrent archiver's work).
    store.index_archive(key, &subjects).await?;
    let body = json!({
        "format": ARCHIVE_FORMAT,
        "task_id": doc.task_id,
        "agent_id": doc.agent_id,
        "archived_at": doc.archived_at.unwrap_or(now),
        "entries_archived": doc.entries.len(),
        "entries": doc.entries.values().collect::<Vec<_>>(),
    });
    let body = serde_json::to_vec(&body).map_err(|_| corrupt())?;
    let expect = match &doc.etag {
        Some(etag) => Expect::ETag(etag.clone()),
        None => Expect::Absent,
    };
    archives
        .put_expecting(ObjectPut::json(&object, ObjectKind::Archive, body), expect)
        .await?;
    archives.delete_old_versions(&object).await?;
    Ok(object.as_str().to_owned())
}
