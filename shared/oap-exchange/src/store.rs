//! The exchange's port onto the table: grant records and each tenant's receipt log. Every change
//! of a grant travels in the same conditional write as the receipt that records it, so the log
//! and the grants never disagree, and a log can never fork.

use async_trait::async_trait;
use serde_json::Value;

use crate::grant::GrantRecord;
use crate::receipt::{Receipt, Tip};
use memory_core::{StoreError, TenantId, Timestamp};

/// A change of a grant, made together with its receipt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrantChange {
    /// A new grant (fails if its id exists).
    Issue(GrantRecord),
    /// Revokes a revocable, unrevoked grant (fails otherwise).
    Revoke { grant_id: String, at: Timestamp },
    /// Marks a grant's expiry as announced (fails if it already was).
    AnnounceExpiry { grant_id: String },
}

#[async_trait]
pub trait ExchangeStore: Send + Sync {
    /// The tenant's log tip (genesis for a tenant with no receipt yet).
    async fn tip(&self, tenant: &TenantId) -> Result<Tip, StoreError>;

    /// Appends `receipt` at `at` (the tip it was built on) and makes `change`, all or nothing.
    /// `Conflict` when the tip moved or the change's condition does not hold.
    async fn append(
        &self,
        tenant: &TenantId,
        at: &Tip,
        receipt: &Receipt,
        change: Option<&GrantChange>,
    ) -> Result<(), StoreError>;

    async fn grant(
        &self,
        tenant: &TenantId,
        grant_id: &str,
    ) -> Result<Option<GrantRecord>, StoreError>;

    /// Receipts from sequence number `from`, in order, at most `limit`.
    async fn receipts(
        &self,
        tenant: &TenantId,
        from: u64,
        limit: u32,
    ) -> Result<Vec<Value>, StoreError>;
}
