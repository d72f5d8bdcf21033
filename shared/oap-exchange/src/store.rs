//! The exchange's port onto the table: grant records and each tenant's receipt log. Every change
//! of a grant travels in the same conditional write as the receipt that records it, so the log
//! and the grants never disagree, and a log can never fork.

use async_trait::async_trait;
use serde_json::Value;

use crate::grant::GrantRecord;
use crate::receipt::{Receipt, Tip};
use memory_core::{StoreError, SubjectKey, TenantId, Timestamp};

/// A change of a grant, made together with its receipt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrantChange {
    /// A new grant (fails if its id exists).
    Issue(GrantRecord),
    /// Revokes a revocable, unrevoked grant (fails otherwise).
    Revoke { grant_id: String, at: Timestamp },
    /// Marks a grant's expiry as announced (fails if it already was).
    AnnounceExpiry { grant_id: String },
    /// Takes a forget notice off the list once its receipt is in the log (fails if it is gone).
    ConsumeNotice { notice_id: String },
}

/// A receipt to append: built on the tip `at`, recording `change` (made in the same write).
#[derive(Clone, Copy, Debug)]
pub struct LogAppend<'a> {
    pub at: &'a Tip,
    pub receipt: &'a Receipt,
    pub change: Option<&'a GrantChange>,
}

/// A page of a receipt log: from sequence number `from`, at most `limit` receipts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiptPage {
    pub from: u64,
    pub limit: u32,
}

/// A bundle that holds a subject: what the export indexes under the subject's digest (the
/// same index forget finds entries by), so a forget finds every bundle holding its subject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleHolding {
    pub bundle_id: String,
    pub object: String,
}

/// A grant's place in the index of grants by expiry day: what the expiry sweep reads, so an
/// expiry is announced even when no grantee asks after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpiryEntry {
    pub tenant: TenantId,
    pub grant_id: String,
    pub expires_at: Timestamp,
}

impl ExpiryEntry {
    /// The UTC day of the expiry, `YYYY-MM-DD`: the index's partition.
    pub fn day(&self) -> String {
        day_of(self.expires_at)
    }
}

/// The UTC day of an instant, `YYYY-MM-DD`.
pub fn day_of(t: Timestamp) -> String {
    t.to_rfc3339().chars().take(10).collect()
}

/// A forget's note for the receipt log: which bundles held the subject (and were deleted). The
/// forget writes it without the signing key; the door turns it into a signed `memory.forget`
/// receipt the next time it reads or appends to the tenant's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForgetNotice {
    pub notice_id: String,
    pub bundles: Vec<String>,
    pub at: Timestamp,
}

#[async_trait]
pub trait ExchangeStore: Send + Sync {
    /// The tenant's log tip (genesis for a tenant with no receipt yet).
    async fn tip(&self, tenant: &TenantId) -> Result<Tip, StoreError>;

    /// Appends `append.receipt` at `append.at` (the tip it was built on) and makes
    /// `append.change`, all or nothing. `Conflict` when the tip moved or the change's condition
    /// does not hold.
    async fn append(&self, tenant: &TenantId, append: LogAppend<'_>) -> Result<(), StoreError>;

    async fn grant(
        &self,
        tenant: &TenantId,
        grant_id: &str,
    ) -> Result<Option<GrantRecord>, StoreError>;

    /// Puts a grant in the expiry index.
    async fn index_expiry(&self, entry: &ExpiryEntry) -> Result<(), StoreError>;

    /// The grants of the expiry index's `day` that expire at or before `now`.
    async fn due_expiries(&self, day: &str, now: Timestamp)
        -> Result<Vec<ExpiryEntry>, StoreError>;

    /// Takes a grant out of the expiry index (absent is fine).
    async fn drop_expiry(&self, entry: &ExpiryEntry) -> Result<(), StoreError>;

    /// Indexes a bundle under each subject it holds.
    async fn index_bundle(
        &self,
        tenant: &TenantId,
        holding: &BundleHolding,
        subjects: &[SubjectKey],
    ) -> Result<(), StoreError>;

    /// The bundles indexed under `subject`.
    async fn bundles_holding(&self, subject: &SubjectKey)
        -> Result<Vec<BundleHolding>, StoreError>;

    /// Removes a bundle's index item under `subject` (absent is fine).
    async fn unindex_bundle(&self, bundle_id: &str, subject: &SubjectKey)
        -> Result<(), StoreError>;

    /// Writes a forget notice (the same id again overwrites it: a retried forget).
    async fn add_notice(&self, tenant: &TenantId, notice: &ForgetNotice) -> Result<(), StoreError>;

    /// The tenant's forget notices not yet in the log, oldest first.
    async fn notices(&self, tenant: &TenantId) -> Result<Vec<ForgetNotice>, StoreError>;

    /// The receipts of one page, in order.
    async fn receipts(
        &self,
        tenant: &TenantId,
        page: ReceiptPage,
    ) -> Result<Vec<Value>, StoreError>;
}
