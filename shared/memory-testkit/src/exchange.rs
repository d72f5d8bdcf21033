//! The exchange door's store in memory, with the DynamoDB adapter's semantics: a receipt is
//! appended only at the tip it was built on, together with its grant change, all or nothing.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;

use crate::in_memory::{lock, CallCounter};
use memory_core::ports::ObjectKey;
use memory_core::SubjectKey;
use memory_core::Timestamp;
use memory_core::{StoreError, TenantId};
use oap_exchange::receipt::Tip;
use oap_exchange::{
    BundleHolding, ExchangeStore, ExpiryEntry, ForgetNotice, GrantChange, GrantRecord, LogAppend,
    ReceiptPage,
};

#[derive(Debug, Default)]
struct TenantLog {
    tip: Option<Tip>,
    receipts: Vec<Value>,
    grants: BTreeMap<String, (GrantRecord, bool)>,
    /// (subject, bundle) -> holding.
    bundle_index: BTreeMap<(String, String), BundleHolding>,
    notices: BTreeMap<String, ForgetNotice>,
}

/// One day of the expiry index: (expires ms, tenant, grant id), in expiry order.
type ExpiryDay = std::collections::BTreeSet<(i64, TenantId, String)>;

#[derive(Debug, Default)]
pub struct InMemoryExchangeStore {
    state: Mutex<BTreeMap<TenantId, TenantLog>>,
    /// The expiry index: day -> (expires ms, tenant, grant id).
    expiries: Mutex<BTreeMap<String, ExpiryDay>>,
    /// Suspend after reading a tip, so appends polled together really race for it.
    racing: bool,
    pub calls: CallCounter,
}

impl InMemoryExchangeStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// A store whose `tip` yields to other tasks before answering.
    pub fn racing() -> Self {
        InMemoryExchangeStore {
            racing: true,
            ..Self::default()
        }
    }

    /// Whether a grant's expiry was announced.
    pub fn expiry_announced(&self, tenant: &TenantId, grant_id: &str) -> bool {
        self.read_log(tenant, |l| {
            l.grants
                .get(grant_id)
                .is_some_and(|(_, announced)| *announced)
        })
    }

    /// What `read` finds in the tenant's log; nothing (the default) before its first write.
    fn read_log<T: Default>(&self, tenant: &TenantId, read: impl FnOnce(&TenantLog) -> T) -> T {
        lock(&self.state).get(tenant).map(read).unwrap_or_default()
    }
}

const CONFLICT: StoreError = StoreError::Conflict {
    op: "append_receipt",
};

/// An expiry's place in its day's set: ordered by instant, then tenant and grant.
fn expiry_slot(entry: &ExpiryEntry) -> (i64, TenantId, String) {
    (
        entry.expires_at.as_millis(),
        entry.tenant.clone(),
        entry.grant_id.clone(),
    )
}

#[async_trait]
impl ExchangeStore for InMemoryExchangeStore {
    async fn tip(&self, tenant: &TenantId) -> Result<Tip, StoreError> {
        self.calls.call("tip")?;
        let tip = self
            .read_log(tenant, |l| l.tip.clone())
            .unwrap_or_else(Tip::genesis);
        if self.racing {
            tokio::task::yield_now().await;
        }
        Ok(tip)
    }

    async fn append(&self, tenant: &TenantId, append: LogAppend<'_>) -> Result<(), StoreError> {
        self.calls.call("append")?;
        let (at, receipt, change) = (append.at, append.receipt, append.change);
        let mut state = lock(&self.state);
        let log = state.entry(tenant.clone()).or_default();
        if log.tip.clone().unwrap_or_else(Tip::genesis) != *at {
            return Err(CONFLICT);
        }
        match change {
            None => {}
            Some(GrantChange::Issue(record)) => {
                if log.grants.contains_key(&record.grant_id) {
                    return Err(CONFLICT);
                }
                log.grants
                    .insert(record.grant_id.clone(), (record.clone(), false));
            }
            Some(GrantChange::Revoke { grant_id, at }) => match log.grants.get_mut(grant_id) {
                Some((r, _)) if r.revocable && r.revoked_at.is_none() => r.revoked_at = Some(*at),
                _ => return Err(CONFLICT),
            },
            Some(GrantChange::AnnounceExpiry { grant_id }) => match log.grants.get_mut(grant_id) {
                Some((_, announced)) if !*announced => *announced = true,
                _ => return Err(CONFLICT),
            },
            Some(GrantChange::ConsumeNotice { notice_id }) => {
                log.notices.remove(notice_id).ok_or(CONFLICT)?;
            }
        }
        log.receipts.push(receipt.body.clone());
        log.tip = Some(receipt.next_tip());
        Ok(())
    }

    async fn grant(
        &self,
        tenant: &TenantId,
        grant_id: &str,
    ) -> Result<Option<GrantRecord>, StoreError> {
        self.calls.call("grant")?;
        Ok(self.read_log(tenant, |l| l.grants.get(grant_id).map(|(r, _)| r.clone())))
    }

    async fn index_expiry(&self, entry: &ExpiryEntry) -> Result<(), StoreError> {
        self.calls.call("index_expiry")?;
        lock(&self.expiries)
            .entry(entry.day())
            .or_default()
            .insert(expiry_slot(entry));
        Ok(())
    }

    async fn due_expiries(
        &self,
        day: &str,
        now: Timestamp,
    ) -> Result<Vec<ExpiryEntry>, StoreError> {
        self.calls.call("due_expiries")?;
        Ok(lock(&self.expiries)
            .get(day)
            .map(|set| {
                set.iter()
                    .filter(|(ms, _, _)| *ms <= now.as_millis())
                    .map(|(ms, tenant, grant_id)| ExpiryEntry {
                        tenant: tenant.clone(),
                        grant_id: grant_id.clone(),
                        expires_at: Timestamp::from_millis(*ms),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn drop_expiry(&self, entry: &ExpiryEntry) -> Result<(), StoreError> {
        self.calls.call("drop_expiry")?;
        if let Some(set) = lock(&self.expiries).get_mut(&entry.day()) {
            set.remove(&expiry_slot(entry));
        }
        Ok(())
    }

    async fn index_bundle(
        &self,
        tenant: &TenantId,
        holding: &BundleHolding,
        subjects: &[SubjectKey],
    ) -> Result<(), StoreError> {
        self.calls.call("index_bundle")?;
        let mut state = lock(&self.state);
        let log = state.entry(tenant.clone()).or_default();
        for s in subjects {
            log.bundle_index.insert(
                (s.as_str().to_owned(), holding.bundle_id.clone()),
                holding.clone(),
            );
        }
        Ok(())
    }

    async fn bundles_holding(
        &self,
        subject: &SubjectKey,
    ) -> Result<Vec<BundleHolding>, StoreError> {
        self.calls.call("bundles_holding")?;
        Ok(self.read_log(subject.tenant(), |l| {
            l.bundle_index
                .iter()
                .filter(|((s, _), _)| s == subject.as_str())
                .map(|(_, h)| h.clone())
                .collect()
        }))
    }

    async fn unindex_bundle(
        &self,
        bundle_id: &str,
        subject: &SubjectKey,
    ) -> Result<(), StoreError> {
        self.calls.call("unindex_bundle")?;
        if let Some(l) = lock(&self.state).get_mut(subject.tenant()) {
            l.bundle_index
                .remove(&(subject.as_str().to_owned(), bundle_id.to_owned()));
        }
        Ok(())
    }

    async fn add_notice(&self, tenant: &TenantId, notice: &ForgetNotice) -> Result<(), StoreError> {
        self.calls.call("add_notice")?;
        lock(&self.state)
            .entry(tenant.clone())
            .or_default()
            .notices
            .insert(notice.notice_id.clone(), notice.clone());
        Ok(())
    }

    async fn notices(&self, tenant: &TenantId) -> Result<Vec<ForgetNotice>, StoreError> {
        self.calls.call("notices")?;
        let mut out: Vec<ForgetNotice> =
            self.read_log(tenant, |l| l.notices.values().cloned().collect());
        out.sort_by_key(|n| n.at);
        Ok(out)
    }

    async fn receipts(
        &self,
        tenant: &TenantId,
        page: ReceiptPage,
    ) -> Result<Vec<Value>, StoreError> {
        self.calls.call("receipts")?;
        Ok(self.read_log(tenant, |l| {
            l.receipts
                .iter()
                .skip(usize::try_from(page.from).unwrap_or(usize::MAX))
                .take(page.limit as usize)
                .cloned()
                .collect()
        }))
    }
}

/// Bundles in memory: multipart uploads assembled on completion, objects readable by range,
/// "presigned" URLs that name the object.
#[derive(Debug, Default)]
pub struct InMemoryBundleStore {
    objects: Mutex<BTreeMap<String, Vec<u8>>>,
    uploads: Mutex<BTreeMap<String, BTreeMap<i32, Vec<u8>>>>,
    pub calls: CallCounter,
}

impl InMemoryBundleStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// The object's bytes, for tests that change a bundle behind the host's back.
    pub fn object(&self, key: &str) -> Option<Vec<u8>> {
        lock(&self.objects).get(key).cloned()
    }

    pub fn replace(&self, key: &str, bytes: Vec<u8>) {
        lock(&self.objects).insert(key.to_owned(), bytes);
    }

    /// Multipart uploads begun and neither completed nor aborted.
    pub fn open_uploads(&self) -> usize {
        lock(&self.uploads).len()
    }
}

#[async_trait]
impl oap_exchange::BundleStore for InMemoryBundleStore {
    async fn begin(&self, key: &ObjectKey) -> Result<String, StoreError> {
        self.calls.call("begin")?;
        let id = format!("upload-{}", key.as_str());
        lock(&self.uploads).insert(id.clone(), BTreeMap::new());
        Ok(id)
    }

    async fn part(
        &self,
        _key: &ObjectKey,
        upload: &str,
        number: i32,
        bytes: Vec<u8>,
    ) -> Result<String, StoreError> {
        self.calls.call("part")?;
        let mut uploads = lock(&self.uploads);
        let parts = uploads.get_mut(upload).ok_or(StoreError::Backend {
            op: "part",
            code: "NoSuchUpload".into(),
        })?;
        parts.insert(number, bytes);
        Ok(format!("etag-{number}"))
    }

    async fn complete(
        &self,
        key: &ObjectKey,
        upload: &str,
        parts: &[(i32, String)],
    ) -> Result<(), StoreError> {
        self.calls.call("complete")?;
        let stored = lock(&self.uploads)
            .remove(upload)
            .ok_or(StoreError::Backend {
                op: "complete",
                code: "NoSuchUpload".into(),
            })?;
        let mut object = Vec::new();
        for (n, _) in parts {
            object.extend(stored.get(n).cloned().unwrap_or_default());
        }
        lock(&self.objects).insert(key.as_str().to_owned(), object);
        Ok(())
    }

    async fn abort(&self, _key: &ObjectKey, upload: &str) {
        lock(&self.uploads).remove(upload);
    }

    async fn put(&self, key: &ObjectKey, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.calls.call("put")?;
        lock(&self.objects).insert(key.as_str().to_owned(), bytes);
        Ok(())
    }

    async fn size(&self, key: &ObjectKey) -> Result<Option<u64>, StoreError> {
        self.calls.call("size")?;
        Ok(lock(&self.objects)
            .get(key.as_str())
            .map(|o| o.len() as u64))
    }

    async fn read(&self, key: &ObjectKey, start: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        self.calls.call("read")?;
        let objects = lock(&self.objects);
        let o = objects.get(key.as_str()).ok_or(StoreError::Backend {
            op: "read",
            code: "NoSuchKey".into(),
        })?;
        let start = usize::try_from(start).unwrap_or(usize::MAX).min(o.len());
        let end = start
            .saturating_add(usize::try_from(len).unwrap_or(usize::MAX))
            .min(o.len());
        Ok(o[start..end].to_vec())
    }

    async fn presign(&self, key: &ObjectKey, seconds: u64) -> Result<String, StoreError> {
        Ok(format!("memory://{}?expires={seconds}", key.as_str()))
    }
}
