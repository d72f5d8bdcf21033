//! `ArchiveStore` on S3. Immutable archives use `If-None-Match: *` (put-if-absent); the memory
//! index uses `If-Match: <etag>` compare-and-swap, so two racing writers cannot lose an update.
//! Objects are tagged with their kind, which the bucket lifecycle uses to expire archives.

use futures_util::FutureExt as _;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_s3::operation::get_object::GetObjectOutput;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;

use memory_core::ports::{ArchiveStore, Expect, ObjectKey, ObjectPut, PutOutcome, StoredObject};
use memory_core::{StoreError, Timestamp};
use memory_guard::TenantId;

use crate::error::{backend, service_code};
use crate::tenant::TenantSessions;

/// Tag key the bucket lifecycle filters on (template.yaml).
pub const KIND_TAG: &str = "wop-memory-kind";

#[derive(Clone)]
pub struct S3ArchiveStore {
    /// The function's own client; with tenant-scoped credentials on (`tenant.rs`) every object
    /// call is signed by the acting tenant's session instead (objects are all per tenant).
    own: Client,
    tenants: Option<Arc<TenantSessions>>,
    bucket: String,
}

impl std::fmt::Debug for S3ArchiveStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3ArchiveStore")
            .field("bucket", &self.bucket)
            .field("tenant_scoped", &self.tenants.is_some())
            .finish()
    }
}

fn precondition_failed(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("PreconditionFailed" | "ConditionalRequestConflict")
    )
}

/// The whole body of a GetObject answer.
async fn body(op: &'static str, out: GetObjectOutput) -> Result<Vec<u8>, StoreError> {
    let bytes = out.body.collect().await.map_err(|_| StoreError::Backend {
        op,
        code: "BodyRead".into(),
    })?;
    Ok(bytes.into_bytes().to_vec())
}

impl S3ArchiveStore {
    pub fn new(client: Client, bucket: String) -> Self {
        S3ArchiveStore {
            own: client,
            tenants: None,
            bucket,
        }
    }

    /// Signs every object call with the acting tenant's vended credentials (`tenant.rs`).
    pub fn with_tenant_sessions(mut self, tenants: Option<Arc<TenantSessions>>) -> Self {
        self.tenants = tenants;
        self
    }

    /// The client of a call on the acting tenant's objects.
    /// The exchange door's bundles, in this bucket, on the function's own role.
    #[cfg(feature = "exchange")]
    pub fn bundles(&self) -> crate::exchange::S3BundleStore {
        crate::exchange::S3BundleStore::new(self.own.clone(), self.bucket.clone())
    }

    async fn client(&self, op: &'static str) -> Result<Client, StoreError> {
        match &self.tenants {
            None => Ok(self.own.clone()),
            Some(tenants) => Ok(tenants.current(op).await?.s3.clone()),
        }
    }

    /// Whether exactly `key` exists, by a listing of that prefix. Tenant-scoped credentials may
    /// list only under the tenant's prefix (`s3:prefix` condition), so S3 answers a GetObject of
    /// an absent key with 403 instead of 404; this tells "absent" from "denied".
    async fn exists(&self, client: &Client, key: &ObjectKey) -> Result<bool, StoreError> {
        const OP: &str = "get_exists";
        let request = client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(key.as_str())
            .max_keys(1);
        let out = crate::retry::counted(OP, &request)
            .await
            .map_err(|e| backend(OP, &e))?;
        Ok(out.contents().iter().any(|o| o.key() == Some(key.as_str())))
    }

    /// Version ids (and delete-marker ids) of exactly `key`, every page of them; the current
    /// version only when `with_latest`. An unversioned object's `null` version is included.
    async fn versions_of(
        &self,
        key: &ObjectKey,
        with_latest: bool,
    ) -> Result<Vec<String>, StoreError> {
        const OP: &str = "list_versions";
        let client = self.client(OP).await?;
        let mut ids = Vec::new();
        let (mut key_marker, mut version_marker): (Option<String>, Option<String>) = (None, None);
        loop {
            let request = client
                .list_object_versions()
                .bucket(&self.bucket)
                .prefix(key.as_str())
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take());
            let out = crate::retry::counted(OP, &request)
                .await
                .map_err(|e| backend(OP, &e))?;
            let wanted = |k: Option<&str>, latest: Option<bool>| {
                k == Some(key.as_str()) && (with_latest || latest != Some(true))
            };
            ids.extend(
                out.versions()
                    .iter()
                    .filter(|v| wanted(v.key(), v.is_latest()))
                    .filter_map(|v| v.version_id().map(str::to_owned)),
            );
            ids.extend(
                out.delete_markers()
                    .iter()
                    .filter(|m| wanted(m.key(), m.is_latest()))
                    .filter_map(|m| m.version_id().map(str::to_owned)),
            );
            if out.is_truncated() != Some(true) {
                return Ok(ids);
            }
            key_marker = out.next_key_marker().map(str::to_owned);
            version_marker = out.next_version_id_marker().map(str::to_owned);
            if key_marker.is_none() {
                return Ok(ids);
            }
        }
    }

    async fn delete_version(
        &self,
        key: &ObjectKey,
        version: Option<String>,
    ) -> Result<(), StoreError> {
        let client = self.client("delete").await?;
        let request = client
            .delete_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .set_version_id(version);
        crate::retry::counted("delete", &request)
            .await
            .map_err(|e| backend("delete", &e))?;
        Ok(())
    }

    /// One metered GetObject of `key` (of the byte `range` when one is given); `None` when there
    /// is no such object, a tenant-scoped denial told from absence by [`Self::exists`].
    async fn get_object(
        &self,
        op: &'static str,
        key: &ObjectKey,
        range: Option<String>,
    ) -> Result<Option<GetObjectOutput>, StoreError> {
        let client = self.client(op).await?;
        let request = client
            .get_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .set_range(range);
        match crate::retry::counted(op, &request).await {
            Ok(out) => Ok(Some(out)),
            Err(e) if matches!(service_code(&e), Some("NoSuchKey" | "NotFound")) => Ok(None),
            Err(e)
                if self.tenants.is_some()
                    && service_code(&e) == Some("AccessDenied")
                    && !self.exists(&client, key).await? =>
            {
                Ok(None)
            }
            Err(e) => Err(backend(op, &e)),
        }
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    fn put(
        &self,
        client: &Client,
        put: &ObjectPut<'_>,
    ) -> aws_sdk_s3::operation::put_object::builders::PutObjectFluentBuilder {
        client
            .put_object()
            .bucket(&self.bucket)
            .key(put.key.as_str())
            .content_type(put.content_type)
            .tagging(format!("{KIND_TAG}={}", put.kind.as_str()))
            .body(ByteStream::from(put.body.clone()))
    }
}

#[async_trait]
impl ArchiveStore for S3ArchiveStore {
    async fn put_if_absent(&self, put: ObjectPut<'_>) -> Result<PutOutcome, StoreError> {
        let client = self.client("put_if_absent").await?;
        match crate::retry::send("put_if_absent", || {
            self.put(&client, &put)
                .if_none_match("*")
                .send()
                .inspect(|r| crate::meter::s3_answered(r, put.body.len() as u64, |_| 0))
        })
        .await
        {
            Ok(_) => Ok(PutOutcome::Created),
            Err(e) if precondition_failed(service_code(&e)) => Ok(PutOutcome::AlreadyExists),
            Err(e) => Err(backend("put_if_absent", &e)),
        }
    }

    async fn put_expecting(
        &self,
        put: ObjectPut<'_>,
        expect: Expect,
    ) -> Result<String, StoreError> {
        const OP: &str = "put_expecting";
        let client = self.client(OP).await?;
        let attempt = || {
            let request = self.put(&client, &put);
            match &expect {
                Expect::Absent => request.if_none_match("*"),
                Expect::ETag(etag) => request.if_match(etag),
            }
            .send()
            .inspect(|r| crate::meter::s3_answered(r, put.body.len() as u64, |_| 0))
        };
        match crate::retry::send(OP, attempt).await {
            Ok(out) => out.e_tag().map(str::to_owned).ok_or(StoreError::Backend {
                op: OP,
                code: "MissingETag".into(),
            }),
            Err(e) if precondition_failed(service_code(&e)) => Err(StoreError::Conflict { op: OP }),
            Err(e) => Err(backend(OP, &e)),
        }
    }

    async fn get(&self, key: &ObjectKey) -> Result<Option<StoredObject>, StoreError> {
        const OP: &str = "get";
        let Some(out) = self.get_object(OP, key, None).await? else {
            return Ok(None);
        };
        let etag = out.e_tag().unwrap_or_default().to_owned();
        let modified_at = out
            .last_modified()
            .and_then(|t| t.to_millis().ok())
            .map(Timestamp::from_millis);
        Ok(Some(StoredObject {
            body: body(OP, out).await?,
            etag,
            modified_at,
        }))
    }

    async fn get_range(
        &self,
        key: &ObjectKey,
        range: std::ops::Range<u64>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        const OP: &str = "get_range";
        if range.is_empty() {
            return Ok(self.get(key).await?.map(|_| Vec::new()));
        }
        let header = format!("bytes={}-{}", range.start, range.end - 1);
        match self.get_object(OP, key, Some(header)).await? {
            Some(out) => Ok(Some(body(OP, out).await?)),
            None => Ok(None),
        }
    }

    async fn delete(&self, key: &ObjectKey) -> Result<(), StoreError> {
        // In a versioned bucket a plain delete only hides the bytes behind a delete marker;
        // forget must remove them, so every version of exactly this key is deleted.
        for version in self.versions_of(key, true).await? {
            self.delete_version(key, Some(version)).await?;
        }
        self.delete_version(key, None).await
    }

    async fn delete_old_versions(&self, key: &ObjectKey) -> Result<(), StoreError> {
        for version in self.versions_of(key, false).await? {
            self.delete_version(key, Some(version)).await?;
        }
        Ok(())
    }

    async fn list(&self, tenant: &TenantId, prefix: &str) -> Result<Vec<ObjectKey>, StoreError> {
        let full = format!("{}/{}", tenant.as_str(), prefix);
        let client = self.client("list").await?;
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let request = client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&full)
                .set_continuation_token(token.take());
            let out = crate::retry::counted("list", &request)
                .await
                .map_err(|e| backend("list", &e))?;
            keys.extend(
                out.contents()
                    .iter()
                    .filter_map(|o| o.key())
                    .filter_map(|k| ObjectKey::from_listed(tenant, k)),
            );
            match out.next_continuation_token() {
                Some(t) if out.is_truncated() == Some(true) => token = Some(t.to_owned()),
                _ => return Ok(keys),
            }
        }
    }
}
