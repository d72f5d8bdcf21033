//! The in-memory usage store and the usage store's contract (docs/metering.md "The items and the
//! rollup"), run against it here and against the DynamoDB adapter in `memory-aws`'s emulator
//! suite.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use memory_core::metering::{self, DayUsage, HourItem, PriceTable, StoredNow, Usage, UsageStore};
use memory_core::{StoreError, TenantId};

/// Hour items, day items, the per-day tenant lists and quota counters, in maps.
#[derive(Default)]
pub struct InMemoryUsageStore {
    hours: Mutex<BTreeMap<(TenantId, String, u8), Usage>>,
    days: Mutex<BTreeMap<(TenantId, String), Usage>>,
    listed: Mutex<BTreeMap<(String, TenantId), Usage>>,
    stored: Mutex<BTreeMap<TenantId, StoredNow>>,
}

impl InMemoryUsageStore {
    /// Sets the quota counters the usage answer reads.
    pub fn set_stored(&self, tenant: &TenantId, stored: StoredNow) {
        if let Ok(mut m) = self.stored.lock() {
            m.insert(tenant.clone(), stored);
        }
    }
}

fn poisoned() -> StoreError {
    StoreError::Backend {
        op: "usage",
        code: "Poisoned".into(),
    }
}

#[async_trait]
impl UsageStore for InMemoryUsageStore {
    async fn add_hour(&self, at: HourItem<'_>, usage: &Usage) -> Result<(), StoreError> {
        let (tenant, hour, shard) = (at.tenant, at.hour, at.shard);
        let day = at.day().to_owned();
        self.hours
            .lock()
            .map_err(|_| poisoned())?
            .entry((tenant.clone(), hour.to_owned(), shard))
            .or_default()
            .add(usage);
        self.listed
            .lock()
            .map_err(|_| poisoned())?
            .entry((day, tenant.clone()))
            .or_default();
        Ok(())
    }

    async fn hours(&self, tenant: &TenantId, day: &str) -> Result<Vec<Usage>, StoreError> {
        Ok(self
            .hours
            .lock()
            .map_err(|_| poisoned())?
            .iter()
            .filter(|((t, hour, _), _)| t == tenant && hour.starts_with(day))
            .map(|(_, u)| u.clone())
            .collect())
    }

    async fn set_day(&self, tenant: &TenantId, day: &str, usage: &Usage) -> Result<(), StoreError> {
        self.days
            .lock()
            .map_err(|_| poisoned())?
            .insert((tenant.clone(), day.to_owned()), usage.clone());
        self.listed
            .lock()
            .map_err(|_| poisoned())?
            .insert((day.to_owned(), tenant.clone()), usage.clone());
        Ok(())
    }

    async fn days(
        &self,
        tenant: &TenantId,
        from: &str,
        to: &str,
    ) -> Result<Vec<DayUsage>, StoreError> {
        Ok(self
            .days
            .lock()
            .map_err(|_| poisoned())?
            .iter()
            .filter(|((t, day), _)| t == tenant && day.as_str() >= from && day.as_str() <= to)
            .map(|((_, day), usage)| DayUsage {
                day: day.clone(),
                usage: usage.clone(),
            })
            .collect())
    }

    async fn tenants_of_day(&self, day: &str) -> Result<Vec<(TenantId, Usage)>, StoreError> {
        Ok(self
            .listed
            .lock()
            .map_err(|_| poisoned())?
            .iter()
            .filter(|((d, _), _)| d == day)
            .map(|((_, t), u)| (t.clone(), u.clone()))
            .collect())
    }

    async fn stored_now(&self, tenant: &TenantId) -> Result<StoredNow, StoreError> {
        Ok(self
            .stored
            .lock()
            .map_err(|_| poisoned())?
            .get(tenant)
            .copied()
            .unwrap_or_default())
    }
}

fn tenant(t: &str) -> TenantId {
    TenantId::parse(t).unwrap_or_else(|_| panic!("test tenant {t}"))
}

fn some(read: f64, write: f64, bytes: u64) -> Usage {
    Usage {
        read_units: read,
        write_units: write,
        s3_requests: 1,
        s3_bytes_in: bytes,
        s3_bytes_out: bytes / 2,
        events: 2,
        bedrock_tokens: 3,
        lambda_ms: 4,
        requests: 1,
    }
}

/// The usage store's contract. `unique` keeps the tenants and days of one run apart from
/// others sharing the store (the emulator's table).
pub async fn usage_contract(store: &dyn UsageStore, unique: &str) {
    let (a, b) = (
        tenant(&format!("ua{unique}")),
        tenant(&format!("ub{unique}")),
    );
    // A day of its own per run: the per-day tenant list is shared by every tenant.
    let day = "2001-02-03";
    let before_a = store.hours(&a, day).await.expect("hours");
    assert!(before_a.is_empty(), "a fresh tenant has no hour items");
    for (tenant, hour, shard, usage, what) in [
        (&a, "2001-02-03T04", 0, some(1.5, 2.0, 100), "add"),
        (
            &a,
            "2001-02-03T04",
            0,
            some(0.5, 1.0, 10),
            "add to the same item",
        ),
        (&a, "2001-02-03T23", 7, some(1.0, 0.0, 1), "add"),
        (&a, "2001-02-04T00", 1, some(9.0, 9.0, 9), "add, next day"),
        (
            &b,
            "2001-02-03T05",
            3,
            some(0.0, 4.0e5, 0),
            "add, other tenant",
        ),
    ] {
        let at = HourItem {
            tenant,
            hour,
            shard,
        };
        store.add_hour(at, &usage).await.expect(what);
    }
    let hours = store.hours(&a, day).await.expect("hours");
    assert_eq!(hours.len(), 2, "two hour items of the day: {hours:?}");
    let want = Usage::sum(&[some(1.5, 2.0, 100), some(0.5, 1.0, 10), some(1.0, 0.0, 1)]);
    assert_eq!(Usage::sum(&hours), want);

    let listed: Vec<TenantId> = store
        .tenants_of_day(day)
        .await
        .expect("tenants")
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert!(listed.contains(&a) && listed.contains(&b), "{listed:?}");

    // Idempotent under duplicate delivery: twice in a row, then twice at once, one item.
    let first = metering::roll_up_day(store, &a, day).await.expect("rollup");
    assert_eq!(first, want);
    metering::roll_up_day(store, &a, day).await.expect("again");
    let (x, y) = tokio::join!(
        metering::roll_up_day(store, &a, day),
        metering::roll_up_day(store, &a, day)
    );
    assert_eq!((x.ok(), y.ok()), (Some(want.clone()), Some(want.clone())));
    let days = store
        .days(&a, "2001-02-01", "2001-02-28")
        .await
        .expect("days");
    assert_eq!(
        days,
        vec![DayUsage {
            day: day.to_owned(),
            usage: want.clone()
        }]
    );
    // Another tenant's items never show.
    assert!(store
        .days(&b, "2001-02-01", "2001-02-28")
        .await
        .expect("days")
        .is_empty());

    // The whole day's rollup: a's totals are current, b's are written; a rerun writes nothing.
    let first_run = metering::roll_up(store, day)
        .await
        .expect("roll up the day");
    let again = metering::roll_up(store, day)
        .await
        .expect("roll up the day again");
    assert!(
        first_run.tenants >= 1 && again.failed == 0,
        "{first_run:?} {again:?}"
    );
    assert_eq!(again.tenants, 0, "nothing changed since: {again:?}");
    assert_eq!(
        store.days(&b, day, day).await.expect("days")[0]
            .usage
            .write_units,
        4.0e5
    );
    let top = metering::top_tenants(store, &[day.to_owned()], 1000, &PriceTable::default())
        .await
        .expect("top");
    let mine: Vec<&str> = top
        .iter()
        .map(|l| l.tenant_id.as_str())
        .filter(|t| t.ends_with(unique))
        .collect();
    assert_eq!(mine, [b.as_str(), a.as_str()], "b wrote more: {top:?}");
    let none = store.stored_now(&a).await.expect("stored");
    assert_eq!(none, StoredNow::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn in_memory_usage_store_keeps_the_contract() {
        usage_contract(&InMemoryUsageStore::default(), "1").await;
    }

    #[tokio::test]
    async fn the_usage_answer_is_current_for_today_and_reads_the_counters() {
        let store = InMemoryUsageStore::default();
        let t = tenant("now");
        let at = memory_core::Timestamp::parse_rfc3339("2026-05-06T07:08:09Z")
            .unwrap_or_else(|_| panic!("instant"));
        store
            .add_hour(
                HourItem {
                    tenant: &t,
                    hour: &metering::hour_of(at),
                    shard: 2,
                },
                &some(1.0, 1.0, 1),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        store.set_stored(
            &t,
            StoredNow {
                entries: 3,
                bytes: 40,
            },
        );
        let days = metering::day_range(Some("2026-05-01"), Some("2026-05-06"))
            .unwrap_or_else(|e| panic!("{e}"));
        let (answer, stored) = metering::usage_of(&store, &t, &days, at)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.len(), 1, "not rolled up yet, still there");
        assert_eq!(answer[0].day, "2026-05-06");
        assert_eq!(
            stored,
            StoredNow {
                entries: 3,
                bytes: 40
            }
        );
        let other = tenant("other");
        let (none, nothing) = metering::usage_of(&store, &other, &days, at)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(none.is_empty());
        assert_eq!(nothing, StoredNow::default());
    }
}
