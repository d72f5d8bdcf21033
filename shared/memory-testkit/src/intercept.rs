//! An archive store a test can act inside: a hook runs before each call, then the call goes to
//! the in-memory store. Races (another writer, a forget, a second dream) are staged at an exact
//! step of a service this way, without one more hand-written `ArchiveStore`.

use std::sync::Arc;

use async_trait::async_trait;

use memory_core::error::StoreError;
use memory_core::ports::{ArchiveStore, Expect, ObjectKey, ObjectPut, PutOutcome, StoredObject};
use memory_guard::TenantId;

use crate::in_memory::InMemoryArchiveStore;

/// The archive call about to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveCall<'a> {
    PutIfAbsent(&'a ObjectKey),
    PutExpecting(&'a ObjectKey),
    Get(&'a ObjectKey),
    Delete(&'a ObjectKey),
    DeleteOldVersions(&'a ObjectKey),
    List,
}

/// What a test does before each archive call; an error fails the call with it.
#[async_trait]
pub trait BeforeArchiveCall: Send + Sync {
    async fn before(&self, call: ArchiveCall<'_>) -> Result<(), StoreError>;
}

/// `hook` first, then `inner`.
pub struct InterceptedArchives<H> {
    pub inner: Arc<InMemoryArchiveStore>,
    pub hook: H,
}

#[async_trait]
impl<H: BeforeArchiveCall> ArchiveStore for InterceptedArchives<H> {
    async fn put_if_absent(&self, put: ObjectPut<'_>) -> Result<PutOutcome, StoreError> {
        self.hook.before(ArchiveCall::PutIfAbsent(put.key)).await?;
        self.inner.put_if_absent(put).await
    }

    async fn put_expecting(
        &self,
        put: ObjectPut<'_>,
        expect: Expect,
    ) -> Result<String, StoreError> {
        self.hook.before(ArchiveCall::PutExpecting(put.key)).await?;
        self.inner.put_expecting(put, expect).await
    }

    async fn get(&self, key: &ObjectKey) -> Result<Option<StoredObject>, StoreError> {
        self.hook.before(ArchiveCall::Get(key)).await?;
        self.inner.get(key).await
    }

    async fn delete(&self, key: &ObjectKey) -> Result<(), StoreError> {
        self.hook.before(ArchiveCall::Delete(key)).await?;
        self.inner.delete(key).await
    }

    async fn delete_old_versions(&self, key: &ObjectKey) -> Result<(), StoreError> {
        self.hook
            .before(ArchiveCall::DeleteOldVersions(key))
            .await?;
        self.inner.delete_old_versions(key).await
    }

    async fn list(&self, tenant: &TenantId, prefix: &str) -> Result<Vec<ObjectKey>, StoreError> {
        self.hook.before(ArchiveCall::List).await?;
        self.inner.list(tenant, prefix).await
    }
}
