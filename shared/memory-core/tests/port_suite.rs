//! The shared port contract, against the in-memory adapters.

use std::sync::Arc;

use memory_core::in_memory::{InMemoryArchiveStore, InMemoryEntryStore};
use memory_core::ports::{ArchiveStore, EntryStore};

async fn store() -> Arc<dyn EntryStore> {
    Arc::new(InMemoryEntryStore::new())
}

async fn archive() -> Arc<dyn ArchiveStore> {
    Arc::new(InMemoryArchiveStore::new())
}

memory_core::port_suite!(store: store(), archive: archive());

async fn commitments() -> Arc<dyn memory_core::ports::CommitmentStore> {
    Arc::new(memory_core::in_memory::InMemoryCommitmentStore::new())
}

memory_core::commitment_suite!(commitments());
