//! The shared port contract, against the in-memory adapters.

use std::sync::Arc;

use memory_core::ports::{ArchiveStore, EntryStore};
use memory_testkit::in_memory::{InMemoryArchiveStore, InMemoryEntryStore};

async fn store() -> Arc<dyn EntryStore> {
    Arc::new(InMemoryEntryStore::new())
}

async fn archive() -> Arc<dyn ArchiveStore> {
    Arc::new(InMemoryArchiveStore::new())
}

memory_testkit::port_suite!(store: store(), archive: archive());

async fn commitments() -> Arc<dyn commitment_service::CommitmentStore> {
    Arc::new(memory_testkit::in_memory::InMemoryCommitmentStore::new())
}

memory_testkit::commitment_suite!(commitments());

async fn path_stores() -> (Arc<dyn EntryStore>, Arc<dyn memory_core::paths::PathStore>) {
    let entries = Arc::new(InMemoryEntryStore::new());
    let paths = Arc::new(memory_testkit::paths::InMemoryPathStore::new(
        entries.clone(),
    ));
    (entries, paths)
}

memory_testkit::paths_suite!(path_stores());

async fn quota_store() -> Arc<InMemoryEntryStore> {
    Arc::new(InMemoryEntryStore::racing())
}

memory_testkit::quota_suite!(quota_store());
