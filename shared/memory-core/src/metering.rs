//! Per-tenant metering (docs/metering.md "What is measured", "The items and the rollup", "The
//! usage API", "The operator view and the price table").
//!
//! Three parts, all without AWS types:
//! - [`Usage`], the counts one tenant caused: DynamoDB read and write units as the store
//!   answered them, S3 requests and bytes, events published, Bedrock tokens, function time.
//! - [`Meter`], a cheap handle the edge opens per invocation ([`metered`]); adapters report what
//!   each call consumed through the free functions ([`read_units`], [`write_units`], [`s3`],
//!   [`events`], [`bedrock_tokens`]) and the report lands on the tenant the task acts for
//!   ([`crate::acting_tenant`]). Outside a metered scope a report costs one task-local lookup
//!   and records nothing.
//! - The pure rollup arithmetic: hour and shard of an invocation's raw counts, the day of an hour,
//!   day ranges of the usage API, and estimated cost under a [`PriceTable`].
//!
//! The edge writes what a meter collected ([`UsageStore::add_hour`]); the background rollup sums a
//! day's hour items into the day item ([`roll_up_day`]), which is a SET of a sum and therefore
//! the same whatever number of times it runs.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, Datelike, Duration as Days, NaiveDate, Timelike, Utc};
use memory_guard::TenantId;
use serde::{Deserialize, Serialize};

use crate::acting_tenant;
use crate::error::{CoreError, StoreError};
use crate::time::Timestamp;

/// What one tenant consumed. Units are what DynamoDB answered (`ConsumedCapacity`), so they are
/// fractional (an eventually consistent read of up to 4 KB is half a unit).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub read_units: f64,
    pub write_units: f64,
    pub s3_requests: u64,
    pub s3_bytes_in: u64,
    pub s3_bytes_out: u64,
    pub events: u64,
    pub bedrock_tokens: u64,
    pub lambda_ms: u64,
    /// Invocations that did work for the tenant (one per invocation, however many passes of a
    /// queued batch were the tenant's).
    pub requests: u64,
}

impl Usage {
    /// Adds `other` into `self` (saturating: a count never wraps).
    pub fn add(&mut self, other: &Usage) {
        self.read_units += other.read_units;
        self.write_units += other.write_units;
        self.s3_requests = self.s3_requests.saturating_add(other.s3_requests);
        self.s3_bytes_in = self.s3_bytes_in.saturating_add(other.s3_bytes_in);
        self.s3_bytes_out = self.s3_bytes_out.saturating_add(other.s3_bytes_out);
        self.events = self.events.saturating_add(other.events);
        self.bedrock_tokens = self.bedrock_tokens.saturating_add(other.bedrock_tokens);
        self.lambda_ms = self.lambda_ms.saturating_add(other.lambda_ms);
        self.requests = self.requests.saturating_add(other.requests);
    }

    /// The sum of `parts`, in order (the same parts always give the same sum).
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a Usage>) -> Usage {
        let mut total = Usage::default();
        for part in parts {
            total.add(part);
        }
        total
    }

    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }
}

/// Whose usage a report is: a tenant, or work no tenant asked for (fan-out Queries over the
/// sparse indexes, start-up), which is emitted but never written into a tenant's items.
pub type Attribution = Option<TenantId>;

/// One invocation's meter: usage per tenant touched. Cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct Meter(Arc<Mutex<BTreeMap<Attribution, Usage>>>);

impl Meter {
    pub fn new() -> Self {
        Meter::default()
    }

    fn record(&self, to: Attribution, f: impl FnOnce(&mut Usage)) {
        if let Ok(mut m) = self.0.lock() {
            f(m.entry(to).or_default());
        }
    }

    /// Everything recorded so far, per attribution, leaving the meter empty. Every tenant
    /// touched counts one request.
    pub fn take(&self) -> Vec<(Attribution, Usage)> {
        let drained = match self.0.lock() {
            Ok(mut m) => std::mem::take(&mut *m),
            Err(_) => BTreeMap::new(),
        };
        drained
            .into_iter()
            .map(|(to, mut usage)| {
                usage.requests = 1;
                (to, usage)
            })
            .collect()
    }
}

tokio::task_local! {
    static METER: Meter;
    /// The tokens reported inside a [`counting_tokens`] scope: how the token quota learns what
    /// one model call spent from the same report the meter gets.
    static TOKEN_TAP: std::cell::Cell<u64>;
}

/// Runs `work` with `meter` collecting what the adapters report.
pub async fn metered<F: Future>(meter: &Meter, work: F) -> F::Output {
    METER.scope(meter.clone(), work).await
}

/// The meter of the current task, if any: for a task spawned from a request, which tokio does
/// not give the parent's task-locals ([`crate::acting_tenant::carried`]).
pub(crate) fn current_meter() -> Option<Meter> {
    METER.try_with(Meter::clone).ok()
}

/// Runs `work` on `meter` when there is one.
pub(crate) async fn within<F: Future>(meter: Option<Meter>, work: F) -> F::Output {
    match meter {
        Some(meter) => METER.scope(meter, work).await,
        None => work.await,
    }
}

/// Runs `work` and answers, beside its output, the Bedrock tokens the adapters reported while
/// it ran (on top of recording them on the meter): one report of what a model call spent feeds
/// both the usage and the token quota (docs/quotas.md "Bedrock tokens").
pub async fn counting_tokens<F: Future>(work: F) -> (F::Output, u64) {
    TOKEN_TAP
        .scope(std::cell::Cell::new(0), async move {
            let out = work.await;
            (out, TOKEN_TAP.with(std::cell::Cell::get))
        })
        .await
}

/// Records `f` on the current meter for the acting tenant; nothing outside a metered scope.
fn record(f: impl FnOnce(&mut Usage)) {
    let _ = METER.try_with(|meter| meter.record(acting_tenant::current(), f));
}

/// Read units DynamoDB answered for one call.
pub fn read_units(units: f64) {
    if units > 0.0 {
        record(|u| u.read_units += units);
    }
}

/// Write units DynamoDB answered for one call.
pub fn write_units(units: f64) {
    if units > 0.0 {
        record(|u| u.write_units += units);
    }
}

/// One S3 request with the bytes sent (`bytes_in`, stored) and received (`bytes_out`).
pub fn s3(bytes_in: u64, bytes_out: u64) {
    record(|u| {
        u.s3_requests += 1;
        u.s3_bytes_in = u.s3_bytes_in.saturating_add(bytes_in);
        u.s3_bytes_out = u.s3_bytes_out.saturating_add(bytes_out);
    });
}

/// Events accepted by the bus.
pub fn events(count: u64) {
    if count > 0 {
        record(|u| u.events = u.events.saturating_add(count));
    }
}

/// Tokens a Bedrock model answered it counted (input and output together).
pub fn bedrock_tokens(count: u64) {
    if count > 0 {
        let _ = TOKEN_TAP.try_with(|tap| tap.set(tap.get().saturating_add(count)));
        record(|u| u.bedrock_tokens = u.bedrock_tokens.saturating_add(count));
    }
}

/// Function time spent acting for the current tenant, measured by
/// [`crate::acting_tenant::acting_for`].
pub(crate) fn acted(started: Instant) {
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    record(|u| u.lambda_ms = u.lambda_ms.saturating_add(ms));
}

/// Whether metering is on: `METERING=off` (or `false`, `0`) turns it off; anything else, or
/// unset, leaves it on. Read by the edge once at start-up.
pub fn enabled_from(value: Option<&str>) -> bool {
    !matches!(
        value.map(|v| v.trim().to_ascii_lowercase()).as_deref(),
        Some("off" | "false" | "0")
    )
}

static SINK: std::sync::OnceLock<Arc<dyn UsageStore>> = std::sync::OnceLock::new();

/// Sets where the edge writes each invocation's usage; the composition root of a function does
/// it once at start-up (the first call wins). Without one, usage is only emitted as metrics.
pub fn install_sink(store: Arc<dyn UsageStore>) {
    let _ = SINK.set(store);
}

/// Where usage is written, once installed.
pub fn sink() -> Option<&'static Arc<dyn UsageStore>> {
    SINK.get()
}

/// Hour items per tenant and hour: concurrent invocations of one tenant spread their ADDs over
/// this many items, so one busy tenant does not serialise on one item.
pub const HOUR_SHARDS: u8 = 8;

/// Most days one usage request may cover.
pub const MAX_RANGE_DAYS: i64 = 366;

/// `YYYY-MM-DDTHH` of `at` (UTC), the hour an invocation's counts are added to.
pub fn hour_of(at: Timestamp) -> String {
    let t = utc(at);
    format!(
        "{:04}-{:02}-{:02}T{:02}",
        t.year(),
        t.month(),
        t.day(),
        t.hour()
    )
}

/// `YYYY-MM-DD` of `at` (UTC).
pub fn day_of(at: Timestamp) -> String {
    utc(at).format("%Y-%m-%d").to_string()
}

/// The shard an invocation writes to: spread by the instant's sub-second part, which differs
/// between concurrent invocations without needing randomness.
pub fn shard_of(at: Timestamp) -> u8 {
    u8::try_from(at.as_millis().rem_euclid(i64::from(HOUR_SHARDS))).unwrap_or(0)
}

fn utc(at: Timestamp) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(at.as_millis()).unwrap_or_default()
}

/// A `YYYY-MM-DD` day, strictly: four-digit year, two-digit month and day, a real date.
pub fn parse_day(raw: &str) -> Option<NaiveDate> {
    let b = raw.as_bytes();
    let shape = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if !shape {
        return None;
    }
    NaiveDate::parse_from_str(raw, "%Y-%m-%d").ok()
}

/// The days `from..=to` of a usage request, checked: both well-formed, `from <= to`, at most
/// [`MAX_RANGE_DAYS`] days. Each failure names its parameter.
pub fn day_range(from: Option<&str>, to: Option<&str>) -> Result<Vec<String>, CoreError> {
    let day = |name: &str, raw: Option<&str>| -> Result<NaiveDate, CoreError> {
        let raw = raw.ok_or_else(|| CoreError::invalid(name, "query parameter is required"))?;
        parse_day(raw).ok_or_else(|| CoreError::invalid(name, "a date, YYYY-MM-DD"))
    };
    let (start, end) = (day("from", from)?, day("to", to)?);
    if end < start {
        return Err(CoreError::invalid("to", "must not be before from"));
    }
    let span = (end - start).num_days() + 1;
    if span > MAX_RANGE_DAYS {
        return Err(CoreError::invalid(
            "to",
            format!("a range covers at most {MAX_RANGE_DAYS} days"),
        ));
    }
    Ok((0..span)
        .map(|i| (start + Days::days(i)).format("%Y-%m-%d").to_string())
        .collect())
}

/// The day before `day` (`YYYY-MM-DD`), for the rollup of a day that just ended.
pub fn previous_day(day: &str) -> Option<String> {
    parse_day(day)
        .and_then(|d| d.pred_opt())
        .map(|d| d.format("%Y-%m-%d").to_string())
}

/// A tenant's usage on one day.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DayUsage {
    pub day: String,
    #[serde(flatten)]
    pub usage: Usage,
}

/// What a tenant stores now, from the quota counters (absent counters are 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredNow {
    pub entries: u64,
    pub bytes: u64,
}

/// One hour item of a tenant's usage partition: the hour (`YYYY-MM-DDTHH`, [`hour_of`]) and the
/// shard the edge spreads the hour's writes over ([`shard_of`]).
#[derive(Clone, Copy, Debug)]
pub struct HourItem<'a> {
    pub tenant: &'a TenantId,
    pub hour: &'a str,
    pub shard: u8,
}

impl HourItem<'_> {
    /// The day the hour belongs to (`YYYY-MM-DD`), whose tenant list names the tenant.
    pub fn day(&self) -> &str {
        self.hour.get(..10).unwrap_or(self.hour)
    }
}

/// Where metered usage is kept: the tenant's usage partition, and the per-day list of tenants
/// the rollup and the operator view walk instead of scanning the table.
#[async_trait]
pub trait UsageStore: Send + Sync {
    /// Adds one invocation's counts to the tenant's hour item `at`, and makes sure the tenant
    /// is listed for the hour's day.
    async fn add_hour(&self, at: HourItem<'_>, usage: &Usage) -> Result<(), StoreError>;

    /// Every hour item of `day` (all hours, all shards).
    async fn hours(&self, tenant: &TenantId, day: &str) -> Result<Vec<Usage>, StoreError>;

    /// Sets the tenant's day item to `usage`, then (only once that is written) its line in the
    /// day's tenant list.
    async fn set_day(&self, tenant: &TenantId, day: &str, usage: &Usage) -> Result<(), StoreError>;

    /// The tenant's day items from `from` to `to` (inclusive, `YYYY-MM-DD`).
    async fn days(
        &self,
        tenant: &TenantId,
        from: &str,
        to: &str,
    ) -> Result<Vec<DayUsage>, StoreError>;

    /// The tenants listed for `day`, each with the day's usage as last rolled up.
    async fn tenants_of_day(&self, day: &str) -> Result<Vec<(TenantId, Usage)>, StoreError>;

    /// What the tenant stores now (the quota counters).
    async fn stored_now(&self, tenant: &TenantId) -> Result<StoredNow, StoreError>;
}

/// Sums a tenant's hour items of `day` into its day item. A SET of a sum: run twice, or twice
/// at once, it writes the same item.
pub async fn roll_up_day(
    store: &dyn UsageStore,
    tenant: &TenantId,
    day: &str,
) -> Result<Usage, StoreError> {
    let hours = store.hours(tenant, day).await?;
    let total = Usage::sum(&hours);
    store.set_day(tenant, day, &total).await?;
    Ok(total)
}

/// What a rollup of one day did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RollupReport {
    pub day: String,
    /// Tenants whose day item was written.
    pub tenants: usize,
    /// Tenants whose hours still sum to what was rolled up last time: nothing written.
    pub unchanged: usize,
    pub failed: usize,
}

/// Rolls up every tenant listed for `day`; a tenant that fails is counted and left for the
/// next run (the rollup is idempotent, so a rerun finishes it). A tenant whose hours sum to the
/// totals its list line already holds is skipped: [`UsageStore::set_day`] writes that line only
/// after the day item, so equal totals mean the day item is current, and an idle tenant costs
/// the hourly schedule one Query and no write.
pub async fn roll_up(store: &dyn UsageStore, day: &str) -> Result<RollupReport, StoreError> {
    let tenants = store.tenants_of_day(day).await?;
    let mut report = RollupReport {
        day: day.to_owned(),
        ..RollupReport::default()
    };
    for (tenant, listed) in tenants {
        let summed = match store.hours(&tenant, day).await {
            Ok(hours) => Usage::sum(&hours),
            Err(e) => {
                tracing::warn!(tenant = %tenant, error = %e, "usage rollup failed for a tenant");
                report.failed += 1;
                continue;
            }
        };
        if summed == listed && !listed.is_empty() {
            report.unchanged += 1;
            continue;
        }
        match store.set_day(&tenant, day, &summed).await {
            Ok(()) => report.tenants += 1,
            Err(e) => {
                tracing::warn!(tenant = %tenant, error = %e, "usage rollup failed for a tenant");
                report.failed += 1;
            }
        }
    }
    Ok(report)
}

/// The usage answer of one tenant: its days in the range (hours not rolled up yet are summed
/// for today and yesterday, so the answer is current), and what it stores now.
pub async fn usage_of(
    store: &dyn UsageStore,
    tenant: &TenantId,
    days: &[String],
    now: Timestamp,
) -> Result<(Vec<DayUsage>, StoredNow), StoreError> {
    let (Some(from), Some(to)) = (days.first(), days.last()) else {
        return Ok((Vec::new(), store.stored_now(tenant).await?));
    };
    let mut rolled: BTreeMap<String, Usage> = store
        .days(tenant, from, to)
        .await?
        .into_iter()
        .map(|d| (d.day, d.usage))
        .collect();
    let today = day_of(now);
    let recent = [previous_day(&today), Some(today)];
    for day in recent.into_iter().flatten() {
        if day >= *from && day <= *to {
            let hours = store.hours(tenant, &day).await?;
            if !hours.is_empty() {
                rolled.insert(day, Usage::sum(&hours));
            }
        }
    }
    let days = rolled
        .into_iter()
        .map(|(day, usage)| DayUsage { day, usage })
        .collect();
    Ok((days, store.stored_now(tenant).await?))
}

/// Prices of the estimate, in US dollars (docs/metering.md "The operator view and the price
/// table"); the defaults are us-east-1 list prices, replaced by `USAGE_PRICES`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct PriceTable {
    pub currency: String,
    /// DynamoDB on-demand, per million read request units.
    pub dynamo_read_per_million: f64,
    /// DynamoDB on-demand, per million write request units.
    pub dynamo_write_per_million: f64,
    /// S3 requests, per thousand (PUT-class price: the dearer of the two).
    pub s3_requests_per_thousand: f64,
    /// S3 Standard storage, per GB-month (applied to the bytes a tenant stores now).
    pub s3_gb_month: f64,
    /// EventBridge custom events, per million.
    pub events_per_million: f64,
    /// Bedrock, per thousand tokens.
    pub bedrock_per_thousand_tokens: f64,
    /// Lambda, per GB-second.
    pub lambda_gb_second: f64,
    /// Lambda memory the GB-seconds are reckoned at.
    pub lambda_memory_mb: f64,
}

impl Default for PriceTable {
    fn default() -> Self {
        PriceTable {
            currency: "USD".into(),
            dynamo_read_per_million: 0.125,
            dynamo_write_per_million: 0.625,
            s3_requests_per_thousand: 0.005,
            s3_gb_month: 0.023,
            events_per_million: 1.0,
            bedrock_per_thousand_tokens: 0.0001,
            lambda_gb_second: 0.000_013_333_4,
            lambda_memory_mb: 256.0,
        }
    }
}

impl PriceTable {
    /// The table from its JSON form (`USAGE_PRICES`); fields left out keep their defaults.
    pub fn from_json(raw: &str) -> Result<PriceTable, serde_json::Error> {
        serde_json::from_str(raw)
    }

    /// Estimated dollars of `usage` over its period; `stored_bytes` are charged for
    /// `months` of storage.
    pub fn cost(&self, usage: &Usage, stored_bytes: u64, months: f64) -> f64 {
        let gb_seconds = usage.lambda_ms as f64 / 1000.0 * self.lambda_memory_mb / 1024.0;
        usage.read_units / 1e6 * self.dynamo_read_per_million
            + usage.write_units / 1e6 * self.dynamo_write_per_million
            + usage.s3_requests as f64 / 1e3 * self.s3_requests_per_thousand
            + stored_bytes as f64 / 1e9 * self.s3_gb_month * months
            + usage.events as f64 / 1e6 * self.events_per_million
            + usage.bedrock_tokens as f64 / 1e3 * self.bedrock_per_thousand_tokens
            + gb_seconds * self.lambda_gb_second
    }
}

/// One line of the operator view.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantCost {
    pub tenant_id: String,
    pub estimated_cost: f64,
    pub usage: Usage,
    pub stored: StoredNow,
}

/// The operator view: the top `limit` tenants by estimated cost over `days`, from the per-day
/// tenant lists (one Query per day, never a Scan), with the stored bytes of each priced for the
/// range's share of a month.
pub async fn top_tenants(
    store: &dyn UsageStore,
    days: &[String],
    limit: usize,
    prices: &PriceTable,
) -> Result<Vec<TenantCost>, StoreError> {
    let mut totals: BTreeMap<TenantId, Usage> = BTreeMap::new();
    for day in days {
        for (tenant, usage) in store.tenants_of_day(day).await? {
            totals.entry(tenant).or_default().add(&usage);
        }
    }
    let months = days.len() as f64 / 30.0;
    let mut lines = Vec::with_capacity(totals.len());
    for (tenant, usage) in totals {
        let stored = store.stored_now(&tenant).await?;
        lines.push(TenantCost {
            tenant_id: tenant.as_str().to_owned(),
            estimated_cost: prices.cost(&usage, stored.bytes, months),
            usage,
            stored,
        });
    }
    lines.sort_by(|a, b| {
        b.estimated_cost
            .total_cmp(&a.estimated_cost)
            .then_with(|| a.tenant_id.cmp(&b.tenant_id))
    });
    lines.truncate(limit);
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(t: &str) -> TenantId {
        TenantId::parse(t).unwrap()
    }

    #[tokio::test]
    async fn reports_land_on_the_acting_tenant_and_nothing_outside_a_scope() {
        read_units(5.0);
        let meter = Meter::new();
        metered(&meter, async {
            acting_tenant::acting_for(Some("a"), async {
                read_units(1.5);
                write_units(2.0);
                s3(10, 0);
                s3(0, 7);
            })
            .await;
            acting_tenant::acting_for(Some("b"), async { events(3) }).await;
            bedrock_tokens(4);
        })
        .await;
        let taken = meter.take();
        assert_eq!(taken.len(), 3, "{taken:?}");
        let (none, a, b) = (&taken[0], &taken[1], &taken[2]);
        assert_eq!((none.0.clone(), none.1.bedrock_tokens), (None, 4));
        assert_eq!(a.0, Some(tenant("a")));
        assert_eq!(
            (a.1.read_units, a.1.write_units, a.1.s3_requests),
            (1.5, 2.0, 2)
        );
        assert_eq!(
            (a.1.s3_bytes_in, a.1.s3_bytes_out, a.1.requests),
            (10, 7, 1)
        );
        assert_eq!((b.0.clone(), b.1.events), (Some(tenant("b")), 3));
        assert!(meter.take().is_empty());
    }

    #[tokio::test]
    async fn a_token_count_sees_the_tokens_reported_inside_it_and_the_meter_still_gets_them() {
        let meter = Meter::new();
        let ((inner, outer), after) = metered(&meter, async {
            let (inner, outer) = counting_tokens(async {
                bedrock_tokens(3);
                let (_, inner) = counting_tokens(async { bedrock_tokens(4) }).await;
                bedrock_tokens(0);
                inner
            })
            .await;
            bedrock_tokens(100);
            ((inner, outer), counting_tokens(async {}).await.1)
        })
        .await;
        assert_eq!((inner, outer, after), (4, 3, 0), "the nearest scope counts");
        assert_eq!(meter.take()[0].1.bedrock_tokens, 107);
    }

    #[test]
    fn hours_days_and_shards_are_utc_and_bounded() {
        let at = Timestamp::parse_rfc3339("2026-03-01T23:59:59.999+00:00").unwrap();
        assert_eq!(hour_of(at), "2026-03-01T23");
        assert_eq!(day_of(at), "2026-03-01");
        assert!(shard_of(at) < HOUR_SHARDS);
        assert_eq!(previous_day("2026-03-01").as_deref(), Some("2026-02-28"));
    }

    #[test]
    fn ranges_are_strict() {
        assert_eq!(
            day_range(Some("2024-02-28"), Some("2024-03-01")).unwrap(),
            ["2024-02-28", "2024-02-29", "2024-03-01"]
        );
        let field = |f: Option<&str>, t: Option<&str>| match day_range(f, t) {
            Err(CoreError::Invalid { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(None, Some("2024-01-01")), "from");
        assert_eq!(field(Some("2024-01-01"), None), "to");
        for bad in [
            "2024-1-01",
            "2024-02-30",
            "24-01-01",
            "2024-01-01T00",
            "２０２４-01-01",
            "+024-01-01",
        ] {
            assert_eq!(field(Some(bad), Some("2024-12-31")), "from", "{bad}");
        }
        assert_eq!(field(Some("2024-02-02"), Some("2024-02-01")), "to");
        assert_eq!(
            day_range(Some("2024-01-01"), Some("2024-12-31"))
                .unwrap()
                .len(),
            366
        );
        assert_eq!(field(Some("2023-01-01"), Some("2024-01-02")), "to");
    }

    #[test]
    fn sums_are_order_stable_and_prices_apply_per_unit() {
        let one = Usage {
            read_units: 0.5,
            write_units: 2.0,
            s3_requests: 1,
            events: 1,
            ..Usage::default()
        };
        let total = Usage::sum([&one, &one, &one]);
        assert_eq!((total.read_units, total.write_units), (1.5, 6.0));
        let prices = PriceTable::default();
        let million = Usage {
            write_units: 1e6,
            ..Usage::default()
        };
        assert!((prices.cost(&million, 0, 1.0) - 0.625).abs() < 1e-9);
        let gb = prices.cost(&Usage::default(), 1_000_000_000, 1.0);
        assert!((gb - 0.023).abs() < 1e-9);
        let custom = PriceTable::from_json(r#"{"dynamoWritePerMillion": 1.25}"#).unwrap();
        assert!((custom.cost(&million, 0, 1.0) - 1.25).abs() < 1e-9);
        assert!(PriceTable::from_json(r#"{"dynamoWrite": 1}"#).is_err());
    }

    #[test]
    fn the_switch_is_on_unless_turned_off() {
        assert!(enabled_from(None));
        assert!(enabled_from(Some("on")));
        assert!(!enabled_from(Some("off")));
        assert!(!enabled_from(Some(" FALSE ")));
        assert!(!enabled_from(Some("0")));
    }
}
