//! Path keys: one store item per name in a ref, binding the name to the one entry that holds it
//! (the Claude memory tool's files, docs/api.md "The Claude memory tool"). A name is claimed,
//! moved or released only by a conditional write in the same all-or-nothing store write as the
//! entries it names, so two writers racing for one name cannot both win: one path is one item.
//!
//! A path record also lists every data subject whose words reached the entry it names, and the
//! store keeps one subject link per listed subject where forget's subject index finds it, so a
//! forget reaches a file another subject edited later (the entry itself carries only the subject
//! of its own version).

use std::collections::BTreeSet;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::model::{StoredEntry, SubjectKey};
use memory_guard::MemoryRef;

/// What a path key holds: the exact name (the key may be a folded form of it), the entry that
/// holds it now, and every subject that contributed to that entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRecord {
    pub path: String,
    pub entry_id: String,
    pub subjects: BTreeSet<SubjectKey>,
}

/// One conditional change of one path key: it applies only if the key is still as read
/// (`expect`: `None` = absent, `Some(id)` = held by that entry id), and leaves it holding `then`
/// (`None` = released). `read_subjects` are the subjects of the record as read, so the store can
/// remove the links of subjects the new record no longer lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathWrite {
    pub key: String,
    pub expect: Option<String>,
    pub read_subjects: BTreeSet<SubjectKey>,
    pub then: Option<PathRecord>,
}

impl PathWrite {
    /// Store items this write touches: the path item, plus one per subject link added or removed.
    pub fn items(&self) -> usize {
        let after: BTreeSet<&SubjectKey> = self.then.iter().flat_map(|r| &r.subjects).collect();
        let before: BTreeSet<&SubjectKey> = self.read_subjects.iter().collect();
        1 + after.symmetric_difference(&before).count()
    }
}

/// Entries put (each only if its id is free) and deleted (each only if its revision is still the
/// one read), and path keys changed, all in one ref and all or nothing.
#[derive(Clone, Debug, Default)]
pub struct PathChange {
    pub put: Vec<StoredEntry>,
    pub delete: Vec<StoredEntry>,
    pub paths: Vec<PathWrite>,
}

impl PathChange {
    /// Store items the change writes in its one transaction (entries carry no provenance here).
    pub fn items(&self) -> usize {
        self.put.len() + self.delete.len() + self.paths.iter().map(PathWrite::items).sum::<usize>()
    }
}

/// A path key found through a subject link: where it is, and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkedPath {
    pub memory_ref: MemoryRef,
    pub key: String,
    pub record: PathRecord,
}

#[async_trait]
pub trait PathStore: Send + Sync {
    /// The record at `key` in `memory_ref`, read-your-writes consistent.
    async fn path(
        &self,
        memory_ref: &MemoryRef,
        key: &str,
    ) -> Result<Option<PathRecord>, StoreError>;

    /// Applies `change` whole or not at all: `StoreError::Conflict` when any entry or path
    /// condition fails (nothing changed). At most `MAX_ITEMS_PER_TRANSACTION` items
    /// ([`PathChange::items`]); more is `TooManyItems`. Entries keep the store's tag postings
    /// rule (written before, removed after).
    async fn change_paths(
        &self,
        memory_ref: &MemoryRef,
        change: &PathChange,
    ) -> Result<(), StoreError>;

    /// Every path record of the tenant that lists `subject` (through its subject links; the
    /// index behind them may lag a write by moments, as forget's does).
    async fn paths_of_subject(&self, subject: &SubjectKey) -> Result<Vec<LinkedPath>, StoreError>;
}
