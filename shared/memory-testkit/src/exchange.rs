//! The exchange door's store in memory, with the DynamoDB adapter's semantics: a receipt is
//! appended only at the tip it was built on, together with its grant change, all or nothing.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;

use crate::in_memory::{lock, CallCounter};
use memory_core::{StoreError, TenantId};
use oap_exchange::receipt::{Receipt, Tip};
use oap_exchange::{ExchangeStore, GrantChange, GrantRecord};

#[derive(Debug, Default)]
struct TenantLog {
    tip: Option<Tip>,
    receipts: Vec<Value>,
    grants: BTreeMap<String, (GrantRecord, bool)>,
}

#[derive(Debug, Default)]
pub struct InMemoryExchangeStore {
    state: Mutex<BTreeMap<TenantId, TenantLog>>,
    pub calls: CallCounter,
}

impl InMemoryExchangeStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a grant's expiry was announced.
    pub fn expiry_announced(&self, tenant: &TenantId, grant_id: &str) -> bool {
        lock(&self.state)
            .get(tenant)
            .and_then(|l| l.grants.get(grant_id))
            .is_some_and(|(_, announced)| *announced)
    }
}

const CONFLICT: StoreError = StoreError::Conflict {
    op: "append_receipt",
};

#[async_trait]
impl ExchangeStore for InMemoryExchangeStore {
    async fn tip(&self, tenant: &TenantId) -> Result<Tip, StoreError> {
        self.calls.call("tip")?;
        Ok(lock(&self.state)
            .get(tenant)
            .and_then(|l| l.tip.clone())
            .unwrap_or_else(Tip::genesis))
    }

    async fn append(
        &self,
        tenant: &TenantId,
        at: &Tip,
        receipt: &Receipt,
        change: Option<&GrantChange>,
    ) -> Result<(), StoreError> {
        self.calls.call("append")?;
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
        Ok(lock(&self.state)
            .get(tenant)
            .and_then(|l| l.grants.get(grant_id))
            .map(|(r, _)| r.clone()))
    }

    async fn receipts(
        &self,
        tenant: &TenantId,
        from: u64,
        limit: u32,
    ) -> Result<Vec<Value>, StoreError> {
        self.calls.call("receipts")?;
        Ok(lock(&self.state)
            .get(tenant)
            .map(|l| {
                l.receipts
                    .iter()
                    .skip(usize::try_from(from).unwrap_or(usize::MAX))
                    .take(limit as usize)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }
}
