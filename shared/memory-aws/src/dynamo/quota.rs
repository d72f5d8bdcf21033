//! Quota counters and limits on the entries table (docs/quotas.md "Counters"):
//!
//!   pk `{tenantId}#@quota`, sk `Q#bytes`                     `n`: content bytes stored now
//!   pk `{tenantId}#@quota`, sk `Q#entries`                   `n`: entries stored now
//!   pk `{tenantId}#@quota`, sk `Q#writes#{epochMinute}`      `n`, `ttl`
//!   pk `{tenantId}#@quota`, sk `Q#searches#{epochMinute}`    `n`, `ttl`
//!   pk `{tenantId}#@quota`, sk `Q#tokens#{yyyy-mm-dd}`       `n`, `ttl`
//!   pk `{tenantId}#@quota`, sk `Q#limits`                    the tenant's override: a number
//!                                                            attribute per quota name
//!   pk `{tenantId}#{agentId}`, sk `Q#entries`                `n`: entries the ref stores now
//!   pk `{tenantId}#{agentId}`, sk `Q#bytes`                  `n`: content bytes the ref stores now
//!   pk `{tenantId}#{agentId|@semantic}`, sk `Q#kentries`     `n`: the OpenIntent door's entries
//!   pk `{tenantId}#{agentId|@semantic}`, sk `Q#kbytes`       `n`: their value bytes
//!
//! Agent ids hold no `@`, so the tenant's quota partition is never a ref's. Every charge is an
//! `ADD` on `n`, conditional when it can refuse (`attribute_not_exists(n) OR n <= :room`), so
//! concurrent writers never both take the last unit. A child of `dynamo` so puts, rewrites and
//! deletes charge the counters in their own transactions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};

use memory_core::ports::QuotaStore;
use memory_core::quota::{
    Charge, Counter, Limits, Quota, QuotaCheck, Recount, Refusal, LIMITS_CACHE_MILLIS,
};
use memory_core::{StoreError, Timestamp};
use memory_guard::TenantId;

use super::{build_error, get_n, n, partition_key, s, DynamoEntryStore, Item, Table};

const LIMITS_SORT_KEY: &str = "Q#limits";

/// The partition of a tenant's own counters and limits.
pub fn quota_partition(tenant: &TenantId) -> String {
    format!("{}#@quota", tenant.as_str())
}

pub(crate) fn counter_key(counter: &Counter) -> Item {
    let pk = match counter {
        Counter::RefEntries(r) | Counter::RefBytes(r) => partition_key(r),
        // The keyed door's own partition of the agent (or `@semantic`), beside its items.
        Counter::KeyedEntries(t, scope) | Counter::KeyedBytes(t, scope) => {
            format!("{}#{scope}", t.as_str())
        }
        other => quota_partition(other.tenant()),
    };
    HashMap::from([
        ("pk".to_owned(), s(pk)),
        ("sk".to_owned(), s(counter.sort_key())),
    ])
}

fn limits_key(tenant: &TenantId) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(quota_partition(tenant))),
        ("sk".to_owned(), s(LIMITS_SORT_KEY)),
    ])
}

/// The update of one charge: `ADD n :d` (and the window's `ttl`), under its condition.
pub(crate) fn charge_update(
    op: &'static str,
    table: &str,
    charge: &Charge,
) -> Result<Update, StoreError> {
    let mut builder = Update::builder()
        .table_name(table)
        .set_key(Some(counter_key(&charge.counter)))
        .expression_attribute_names("#n", "n")
        .expression_attribute_values(":d", n(charge.delta));
    let expression = match charge.counter.expires_at() {
        Some(at) => {
            builder = builder
                .expression_attribute_names("#ttl", "ttl")
                .expression_attribute_values(":ttl", n(at.epoch_seconds_ceil()));
            "ADD #n :d SET #ttl = :ttl"
        }
        None => "ADD #n :d",
    };
    builder = builder.update_expression(expression);
    if let Some(room) = charge.room() {
        // A charge bigger than the limit by itself fails even on a counter not yet written.
        let condition = if room >= 0 {
            "attribute_not_exists(#n) OR #n <= :room"
        } else {
            "#n <= :room"
        };
        builder = builder
            .condition_expression(condition)
            .expression_attribute_values(":room", n(room));
    }
    builder.build().map_err(|_| build_error(op))
}

pub(crate) fn charge_item(
    op: &'static str,
    table: &str,
    charge: &Charge,
) -> Result<TransactWriteItem, StoreError> {
    Ok(TransactWriteItem::builder()
        .update(charge_update(op, table, charge)?)
        .build())
}

/// A recount's writes of an `(entries, bytes)` counter pair: each set to what the listing
/// `counted`, fenced on it still holding what was `seen` before the listing (so a write that
/// charged it meanwhile makes the repair fail, to be recounted again). One rule for the entry
/// store's refs and the keyed door's partitions.
pub(crate) fn recount_items(
    op: &'static str,
    table: &str,
    [entries, bytes]: [Counter; 2],
    seen: (i64, i64),
    counted: (i64, i64),
) -> Result<Vec<TransactWriteItem>, StoreError> {
    [(entries, seen.0, counted.0), (bytes, seen.1, counted.1)]
        .into_iter()
        .map(|(counter, seen, counted)| {
            let condition = if seen == 0 {
                "attribute_not_exists(#n) OR #n = :seen"
            } else {
                "#n = :seen"
            };
            let update = Update::builder()
                .table_name(table)
                .set_key(Some(counter_key(&counter)))
                .update_expression("SET #n = :counted")
                .condition_expression(condition)
                .expression_attribute_names("#n", "n")
                .expression_attribute_values(":seen", n(seen))
                .expression_attribute_values(":counted", n(counted))
                .build()
                .map_err(|_| build_error(op))?;
            Ok(TransactWriteItem::builder().update(update).build())
        })
        .collect()
}

/// The cached limits of the tenants one container served: read again after
/// [`LIMITS_CACHE_MILLIS`].
#[derive(Clone, Debug, Default)]
pub(crate) struct LimitsCache {
    entries: Arc<Mutex<HashMap<TenantId, (i64, Limits)>>>,
}

impl LimitsCache {
    fn fresh(&self, tenant: &TenantId, now_ms: i64) -> Option<Limits> {
        let map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        map.get(tenant)
            .filter(|(at, _)| now_ms.saturating_sub(*at) < LIMITS_CACHE_MILLIS)
            .map(|(_, l)| *l)
    }

    fn keep(&self, tenant: &TenantId, now_ms: i64, limits: Limits) {
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        // Bounded: a container serving very many tenants forgets them all rather than grow.
        if map.len() >= 10_000 {
            map.clear();
        }
        map.insert(tenant.clone(), (now_ms, limits));
    }

    fn forget(&self, tenant: &TenantId) {
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(tenant);
    }
}

/// The overrides an override item names (numbers only; other attributes ignored).
fn overrides_of(item: &Item) -> Vec<(Quota, u64)> {
    Quota::ALL
        .into_iter()
        .filter_map(|q| {
            get_n(item, q.name())
                .and_then(|v| u64::try_from(v).ok())
                .map(|v| (q, v))
        })
        .collect()
}

impl DynamoEntryStore {
    /// Applies unconditional charges one `UpdateItem` each (the counters of a delete that was no
    /// transaction). A failure is logged, not returned: the entry is gone either way, and the
    /// recount repairs the counter.
    pub(crate) async fn apply_uncounted(&self, op: &'static str, charges: &[Charge]) {
        for charge in charges {
            if let Err(e) = self.send_charge(op, charge, None).await {
                tracing::warn!(error = %e, "quota counter not updated; the recount repairs it");
            }
        }
    }

    /// One charge, alone; the counter's value after. A refusal's retry hint is reckoned from
    /// `at`, the instant that chose the charge's window (now when not given).
    async fn send_charge(
        &self,
        op: &'static str,
        charge: &Charge,
        at: Option<Timestamp>,
    ) -> Result<i64, StoreError> {
        let table = self.clients.table(&self.table, op).await?;
        let request = table
            .update_alone(charge_update(op, &self.table, charge)?)
            .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew);
        match table.conditional(&request).await? {
            Some(out) => Ok(out
                .attributes
                .as_ref()
                .and_then(|a| get_n(a, "n"))
                .unwrap_or(0)),
            None => {
                let current = counter_value(&table, &charge.counter).await?;
                let at = at.unwrap_or_else(|| Timestamp::from_millis(super::wall_clock_ms()));
                Err(refusal(op, charge, current, at))
            }
        }
    }

    /// A counter's value now, strongly consistent (absent: 0).
    pub(crate) async fn counter_value(
        &self,
        op: &'static str,
        counter: &Counter,
    ) -> Result<i64, StoreError> {
        counter_value(&self.clients.table(&self.table, op).await?, counter).await
    }

    /// Why a transaction carrying `charges` (its items from `first` on) was cancelled by the
    /// conditions `failed`: the refusal of the first failed charge, with the counter read now,
    /// or a conflict when no charge refused (something else changed); the read's own error
    /// when it failed.
    pub(crate) async fn refused(
        &self,
        op: &'static str,
        failed: &[bool],
        first: usize,
        charges: &[Charge],
        at: Timestamp,
    ) -> StoreError {
        let table = match self.clients.table(&self.table, op).await {
            Ok(table) => table,
            Err(e) => return e,
        };
        match charge_refusal(&table, failed, first, charges, at).await {
            Ok(refusal) => refusal.unwrap_or(StoreError::Conflict { op }),
            Err(e) => e,
        }
    }

    /// The deployment's default limits, which a tenant's override item adjusts.
    pub fn with_quota_defaults(mut self, defaults: Limits) -> Self {
        self.quota_defaults = defaults;
        self
    }
}

#[async_trait]
impl QuotaStore for DynamoEntryStore {
    async fn limits(&self, tenant: &TenantId) -> Result<Limits, StoreError> {
        const OP: &str = "quota_limits";
        let now = super::wall_clock_ms();
        if let Some(limits) = self.limits_cache.fresh(tenant, now) {
            return Ok(limits);
        }
        let table = self.clients.table(&self.table, OP).await?;
        let item = table.read(limits_key(tenant)).await?;
        let limits = self
            .quota_defaults
            .overridden(&item.as_ref().map(overrides_of).unwrap_or_default());
        self.limits_cache.keep(tenant, now, limits);
        Ok(limits)
    }

    async fn charge(&self, check: &QuotaCheck) -> Result<Vec<(Counter, i64)>, StoreError> {
        let mut values = Vec::with_capacity(check.charges.len());
        for charge in &check.charges {
            let value = self.send_charge("quota_charge", charge, check.at).await?;
            values.push((charge.counter.clone(), value));
        }
        Ok(values)
    }

    async fn counters_consistent(
        &self,
        counters: &[Counter],
    ) -> Result<Vec<(Counter, i64)>, StoreError> {
        // Side by side: a put's read-back of up to four counters costs one round trip of
        // latency, not four (docs/quotas.md "Overhead").
        let values = futures_util::future::try_join_all(
            counters
                .iter()
                .map(|c| self.counter_value("quota_counters", c)),
        )
        .await?;
        Ok(counters.iter().cloned().zip(values).collect())
    }

    async fn repair(&self, recount: &Recount) -> Result<bool, StoreError> {
        const OP: &str = "quota_repair";
        let r = &recount.memory_ref;
        let mut items = recount_items(
            OP,
            &self.table,
            [Counter::RefEntries(r.clone()), Counter::RefBytes(r.clone())],
            recount.seen,
            recount.counted,
        )?;
        for (counter, delta) in [
            (
                Counter::TenantEntries(r.tenant().clone()),
                recount.counted.0 - recount.seen.0,
            ),
            (
                Counter::TenantBytes(r.tenant().clone()),
                recount.counted.1 - recount.seen.1,
            ),
        ] {
            if delta != 0 {
                let charge = Charge {
                    counter,
                    delta,
                    limit: None,
                };
                items.push(charge_item(OP, &self.table, &charge)?);
            }
        }
        match self.transact(OP, items).await {
            Ok(()) => Ok(true),
            Err(super::TxError::Conditions(_)) => Ok(false),
            Err(e) => Err(e.into_store(OP)),
        }
    }

    async fn set_overrides(
        &self,
        tenant: &TenantId,
        overrides: &[(Quota, u64)],
    ) -> Result<(), StoreError> {
        const OP: &str = "quota_set_overrides";
        let table = self.clients.table(&self.table, OP).await?;
        if overrides.is_empty() {
            table.delete(limits_key(tenant)).await?;
        } else {
            let mut item = limits_key(tenant);
            for (quota, max) in overrides {
                item.insert(quota.name().to_owned(), AttributeValue::N(max.to_string()));
            }
            table.put(item).await?;
        }
        self.limits_cache.forget(tenant);
        Ok(())
    }
}

/// A counter's value now, strongly consistent (absent: 0).
pub(crate) async fn counter_value(table: &Table<'_>, counter: &Counter) -> Result<i64, StoreError> {
    let item = table.read(counter_key(counter)).await?;
    Ok(item.as_ref().and_then(|i| get_n(i, "n")).unwrap_or(0))
}

/// Why a transaction carrying `charges` (its items from `first` on) was cancelled by the
/// conditions `failed`: the refusal of the first failed charge, its counter read now; `None` when
/// no charge failed (something else in the transaction did). One rule for every transaction that
/// carries charges, the entry store's and the keyed door's.
pub(crate) async fn charge_refusal(
    table: &Table<'_>,
    failed: &[bool],
    first: usize,
    charges: &[Charge],
    at: Timestamp,
) -> Result<Option<StoreError>, StoreError> {
    for (i, charge) in charges.iter().enumerate() {
        if failed.get(first + i).copied().unwrap_or(false) {
            let current = counter_value(table, &charge.counter).await?;
            return Ok(Some(refusal(table.op(), charge, current, at)));
        }
    }
    Ok(None)
}

/// A failed charge against its counter's value now: `QuotaExceeded`, or a conflict when the
/// counter has room again (another write released some in between).
fn refusal(op: &'static str, charge: &Charge, current: i64, at: Timestamp) -> StoreError {
    Refusal::of(charge, u64::try_from(current).unwrap_or(0), at)
        .map_or(StoreError::Conflict { op }, StoreError::QuotaExceeded)
}
