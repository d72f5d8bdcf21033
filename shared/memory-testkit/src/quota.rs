//! The in-memory quota counters and limits (docs/quotas.md "Counters"), kept by
//! [`InMemoryEntryStore`] as the DynamoDB adapter keeps them in the entries table: a put's
//! charges apply with its entries or not at all, deletes and rewrites move the stored counters
//! in the same step, and the windowed charges (searches, tokens) go through [`QuotaStore`]. The
//! conditions are the adapter's (`attribute_not_exists(n) OR n <= room`), so the quota rules run
//! in the fast tier through the same port contract (`quota_suite!`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use memory_core::ports::QuotaStore;
use memory_core::quota::{Charge, Counter, Limits, Quota, QuotaCheck, Recount, Refusal};
use memory_core::{StoreError, Timestamp};
use memory_guard::TenantId;

use crate::in_memory::{lock, InMemoryEntryStore};

/// Counters by identity, the deployment's defaults and the tenants' overrides.
#[derive(Debug, Default)]
pub struct QuotaState {
    counters: Mutex<BTreeMap<Counter, i64>>,
    overrides: Mutex<BTreeMap<TenantId, Vec<(Quota, u64)>>>,
    defaults: Mutex<Limits>,
}

/// Whether `charge` may apply to a counter holding `value` (`None`: never written), as the
/// adapter's condition says: a charge over the whole limit fails even on a fresh counter.
fn admits(charge: &Charge, value: Option<i64>) -> bool {
    match (charge.room(), value) {
        (None, _) => true,
        (Some(room), None) => room >= 0,
        (Some(room), Some(n)) => n <= room,
    }
}

impl QuotaState {
    /// Applies `charges` all or nothing: the refusal of the first that may not apply, with the
    /// counter's value, or every counter's value after.
    pub(crate) fn apply_all(
        counters: &mut BTreeMap<Counter, i64>,
        charges: &[Charge],
        at: Timestamp,
    ) -> Result<Vec<(Counter, i64)>, StoreError> {
        // The same counter twice in one write is not something a transaction allows either.
        let mut staged: BTreeMap<&Counter, Option<i64>> = BTreeMap::new();
        for charge in charges {
            let value = *staged
                .entry(&charge.counter)
                .or_insert_with(|| counters.get(&charge.counter).copied());
            if !admits(charge, value) {
                let current = u64::try_from(value.unwrap_or(0)).unwrap_or(0);
                return Err(Refusal::of(charge, current, at)
                    .map_or(StoreError::Conflict { op: "quota_charge" }, |r| {
                        StoreError::QuotaExceeded(r)
                    }));
            }
            staged.insert(&charge.counter, Some(value.unwrap_or(0) + charge.delta));
        }
        Ok(staged
            .into_iter()
            .map(|(c, v)| {
                let v = v.unwrap_or(0);
                counters.insert(c.clone(), v);
                (c.clone(), v)
            })
            .collect())
    }

    /// Applies unconditional charges (deletes, rewrites that keep or shrink what is stored).
    pub(crate) fn apply_unconditional(&self, charges: &[Charge]) {
        let mut counters = lock(&self.counters);
        for charge in charges {
            *counters.entry(charge.counter.clone()).or_insert(0) += charge.delta;
        }
    }

    pub(crate) fn counters(&self) -> std::sync::MutexGuard<'_, BTreeMap<Counter, i64>> {
        lock(&self.counters)
    }
}

fn at_of(check: &QuotaCheck) -> Timestamp {
    check.at.unwrap_or(Timestamp::from_millis(0))
}

impl InMemoryEntryStore {
    /// The deployment's default limits, which a tenant's override adjusts (the adapter's
    /// `with_quota_defaults`).
    pub fn with_quota_defaults(self, defaults: Limits) -> Self {
        *lock(&self.quota.defaults) = defaults;
        self
    }

    /// A counter's value now (absent: 0), for tests that look at the raw counters.
    pub fn counter(&self, counter: &Counter) -> i64 {
        self.quota.counters().get(counter).copied().unwrap_or(0)
    }
}

#[async_trait]
impl QuotaStore for InMemoryEntryStore {
    async fn limits(&self, tenant: &TenantId) -> Result<Limits, StoreError> {
        self.calls.call("quota_limits")?;
        let defaults = *lock(&self.quota.defaults);
        let overrides = lock(&self.quota.overrides);
        Ok(defaults.overridden(overrides.get(tenant).map_or(&[][..], Vec::as_slice)))
    }

    async fn charge(&self, check: &QuotaCheck) -> Result<Vec<(Counter, i64)>, StoreError> {
        self.calls.call("quota_charge")?;
        // One conditional add each, in order, like the adapter's one UpdateItem per charge: the
        // ones before a refusal stay applied.
        let mut values = Vec::with_capacity(check.charges.len());
        let mut counters = self.quota.counters();
        for charge in &check.charges {
            let value =
                QuotaState::apply_all(&mut counters, std::slice::from_ref(charge), at_of(check))?;
            values.extend(value);
        }
        Ok(values)
    }

    async fn counters_consistent(
        &self,
        counters: &[Counter],
    ) -> Result<Vec<(Counter, i64)>, StoreError> {
        self.calls.call("quota_counters")?;
        let held = self.quota.counters();
        Ok(counters
            .iter()
            .map(|c| (c.clone(), held.get(c).copied().unwrap_or(0)))
            .collect())
    }

    async fn repair(&self, recount: &Recount) -> Result<bool, StoreError> {
        self.calls.call("quota_repair")?;
        let r = &recount.memory_ref;
        let mut counters = self.quota.counters();
        let entries = Counter::RefEntries(r.clone());
        let bytes = Counter::RefBytes(r.clone());
        let value = |c: &Counter| counters.get(c).copied().unwrap_or(0);
        if (value(&entries), value(&bytes)) != recount.seen {
            return Ok(false);
        }
        counters.insert(entries, recount.counted.0);
        counters.insert(bytes, recount.counted.1);
        *counters
            .entry(Counter::TenantEntries(r.tenant().clone()))
            .or_insert(0) += recount.counted.0 - recount.seen.0;
        *counters
            .entry(Counter::TenantBytes(r.tenant().clone()))
            .or_insert(0) += recount.counted.1 - recount.seen.1;
        Ok(true)
    }

    async fn set_overrides(
        &self,
        tenant: &TenantId,
        overrides: &[(Quota, u64)],
    ) -> Result<(), StoreError> {
        self.calls.call("quota_set_overrides")?;
        let mut held = lock(&self.quota.overrides);
        if overrides.is_empty() {
            held.remove(tenant);
        } else {
            held.insert(tenant.clone(), overrides.to_vec());
        }
        Ok(())
    }
}
