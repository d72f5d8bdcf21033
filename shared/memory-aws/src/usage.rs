//! The usage store in the one table (docs/metering.md "The items and the rollup"):
//! - hour items `pk = {tenantId}#@usage`, `sk = H#{yyyy-mm-ddThh}#{shard}`, to which each
//!   invocation ADDs its counts (TTL'd after [`HOUR_ITEM_DAYS`] days, long after their rollup);
//! - day items `sk = D#{yyyy-mm-dd}` in the same partition, SET by the rollup to the sum of that
//!   day's hour items;
//! - the per-day tenant list `pk = @usage#{yyyy-mm-dd}`, `sk = {tenantId}`: written once per
//!   container, tenant and day by the meter (so the rollup knows whom to roll up without a
//!   Scan) and overwritten by the rollup with the day's totals (so the operator view reads one
//!   Query per day);
//! - the quota counters `pk = {tenantId}#@quota`, `sk = Q#entries` / `Q#bytes` (attribute `n`),
//!   read only.
//!
//! Every call runs on the function's own role: the meter writes after the request's work, outside
//! any tenant's scope, and the list partition does not lead with a tenant.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use memory_core::metering::{DayUsage, HourItem, StoredNow, Usage, UsageStore};
use memory_core::StoreError;
use memory_guard::TenantId;

use crate::dynamo::{get_n, get_s, n, query_all, s, Item, Table};
use crate::error::backend;

/// Hour items live this long (the rollup reads the last two days of them).
pub const HOUR_ITEM_DAYS: i64 = 35;

/// The counted attributes of hour, day and list items, in [`Usage`] order.
const ATTRIBUTES: [&str; 9] = [
    "readUnits",
    "writeUnits",
    "s3Requests",
    "s3BytesIn",
    "s3BytesOut",
    "events",
    "bedrockTokens",
    "lambdaMs",
    "requests",
];

fn usage_pk(tenant: &TenantId) -> String {
    format!("{}#@usage", tenant.as_str())
}

fn list_pk(day: &str) -> String {
    format!("@usage#{day}")
}

fn number(v: f64) -> AttributeValue {
    // Units are sums of halves and whole numbers; a short decimal keeps the item exact.
    AttributeValue::N(format!("{}", (v * 1000.0).round() / 1000.0))
}

fn values(u: &Usage) -> [AttributeValue; 9] {
    [
        number(u.read_units),
        number(u.write_units),
        n(i64::try_from(u.s3_requests).unwrap_or(i64::MAX)),
        n(i64::try_from(u.s3_bytes_in).unwrap_or(i64::MAX)),
        n(i64::try_from(u.s3_bytes_out).unwrap_or(i64::MAX)),
        n(i64::try_from(u.events).unwrap_or(i64::MAX)),
        n(i64::try_from(u.bedrock_tokens).unwrap_or(i64::MAX)),
        n(i64::try_from(u.lambda_ms).unwrap_or(i64::MAX)),
        n(i64::try_from(u.requests).unwrap_or(i64::MAX)),
    ]
}

fn float(item: &Item, name: &str) -> f64 {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn count(item: &Item, name: &str) -> u64 {
    get_n(item, name)
        .and_then(|v| u64::try_from(v).ok())
        .unwrap_or(0)
}

fn usage_of(item: &Item) -> Usage {
    Usage {
        read_units: float(item, "readUnits"),
        write_units: float(item, "writeUnits"),
        s3_requests: count(item, "s3Requests"),
        s3_bytes_in: count(item, "s3BytesIn"),
        s3_bytes_out: count(item, "s3BytesOut"),
        events: count(item, "events"),
        bedrock_tokens: count(item, "bedrockTokens"),
        lambda_ms: count(item, "lambdaMs"),
        requests: count(item, "requests"),
    }
}

fn counted_item(pk: String, sk: String, u: &Usage) -> Item {
    let mut item: Item = HashMap::from([("pk".into(), s(pk)), ("sk".into(), s(sk))]);
    for (name, value) in ATTRIBUTES.iter().zip(values(u)) {
        item.insert((*name).to_owned(), value);
    }
    item
}

pub struct DynamoUsageStore {
    client: Client,
    table: String,
    /// (day, tenant) pairs this container has listed already.
    listed: Mutex<HashSet<(String, String)>>,
}

impl DynamoUsageStore {
    pub fn new(client: Client, table: String) -> Self {
        DynamoUsageStore {
            client,
            table,
            listed: Mutex::new(HashSet::new()),
        }
    }

    async fn put(&self, op: &'static str, item: Item) -> Result<(), StoreError> {
        Table::new(self.client.clone(), &self.table, op)
            .put(item)
            .await
    }

    async fn query(
        &self,
        op: &'static str,
        pk: String,
        between: Option<(String, String)>,
        prefix: Option<String>,
    ) -> Result<Vec<Item>, StoreError> {
        let request = self
            .client
            .query()
            .table_name(&self.table)
            .expression_attribute_values(":pk", s(pk));
        let request = match (between, prefix) {
            (Some((a, b)), _) => request
                .key_condition_expression("pk = :pk AND sk BETWEEN :a AND :b")
                .expression_attribute_values(":a", s(a))
                .expression_attribute_values(":b", s(b)),
            (None, Some(p)) => request
                .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
                .expression_attribute_values(":p", s(p)),
            (None, None) => request.key_condition_expression("pk = :pk"),
        };
        Ok(query_all(request, op).await?.0)
    }
}

#[async_trait]
impl UsageStore for DynamoUsageStore {
    async fn add_hour(&self, at: HourItem<'_>, usage: &Usage) -> Result<(), StoreError> {
        let HourItem {
            tenant,
            hour,
            shard,
        } = at;
        const OP: &str = "usage_add";
        let ttl = wall_clock_seconds() + HOUR_ITEM_DAYS * 86_400;
        let adds: Vec<String> = (0..ATTRIBUTES.len())
            .map(|i| format!("#a{i} :a{i}"))
            .collect();
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(usage_pk(tenant)))
            .key("sk", s(format!("H#{hour}#{shard}")))
            .update_expression(format!(
                "SET #ttl = if_not_exists(#ttl, :ttl) ADD {}",
                adds.join(", ")
            ))
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":ttl", n(ttl));
        for (i, (name, value)) in ATTRIBUTES.iter().zip(values(usage)).enumerate() {
            update = update
                .expression_attribute_names(format!("#a{i}"), *name)
                .expression_attribute_values(format!(":a{i}"), value);
        }
        let added = crate::retry::metered(OP, &update);
        let day = at.day().to_owned();
        let key = (day.clone(), tenant.as_str().to_owned());
        let known = self
            .listed
            .lock()
            .map(|l| l.contains(&key))
            .unwrap_or(false);
        if known {
            added.await.map_err(|e| backend(OP, &e))?;
            return Ok(());
        }
        // First time this container meters the tenant on this day: list it for the rollup. An
        // UPDATE that sets only the tenant id, so it never clobbers totals a rollup wrote.
        let listing = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(list_pk(&day)))
            .key("sk", s(tenant.as_str()))
            .update_expression("SET tenantId = :t")
            .expression_attribute_values(":t", s(tenant.as_str()));
        let list = crate::retry::metered(OP, &listing);
        let (added, list) = tokio::join!(added, list);
        added.map_err(|e| backend(OP, &e))?;
        list.map_err(|e| backend(OP, &e))?;
        if let Ok(mut l) = self.listed.lock() {
            l.insert(key);
        }
        Ok(())
    }

    async fn hours(&self, tenant: &TenantId, day: &str) -> Result<Vec<Usage>, StoreError> {
        let items = self
            .query(
                "usage_hours",
                usage_pk(tenant),
                None,
                Some(format!("H#{day}T")),
            )
            .await?;
        Ok(items.iter().map(usage_of).collect())
    }

    async fn set_day(&self, tenant: &TenantId, day: &str, usage: &Usage) -> Result<(), StoreError> {
        const OP: &str = "usage_set_day";
        let day_item = counted_item(usage_pk(tenant), format!("D#{day}"), usage);
        let mut list_item = counted_item(list_pk(day), tenant.as_str().to_owned(), usage);
        list_item.insert("tenantId".into(), s(tenant.as_str()));
        // In this order: a list line equal to the hours' sum means the day item is current
        // (`memory_core::metering::roll_up` skips such a tenant).
        self.put(OP, day_item).await?;
        self.put(OP, list_item).await
    }

    async fn days(
        &self,
        tenant: &TenantId,
        from: &str,
        to: &str,
    ) -> Result<Vec<DayUsage>, StoreError> {
        let items = self
            .query(
                "usage_days",
                usage_pk(tenant),
                Some((format!("D#{from}"), format!("D#{to}"))),
                None,
            )
            .await?;
        Ok(items
            .iter()
            .filter_map(|item| {
                let day = get_s(item, "sk")?.strip_prefix("D#")?.to_owned();
                Some(DayUsage {
                    day,
                    usage: usage_of(item),
                })
            })
            .collect())
    }

    async fn tenants_of_day(&self, day: &str) -> Result<Vec<(TenantId, Usage)>, StoreError> {
        let items = self
            .query("usage_tenants", list_pk(day), None, None)
            .await?;
        Ok(items
            .iter()
            .filter_map(|item| {
                let tenant = TenantId::parse(get_s(item, "sk")?).ok()?;
                Some((tenant, usage_of(item)))
            })
            .collect())
    }

    async fn stored_now(&self, tenant: &TenantId) -> Result<StoredNow, StoreError> {
        let items = self
            .query(
                "usage_stored",
                format!("{}#@quota", tenant.as_str()),
                Some(("Q#bytes".into(), "Q#entries".into())),
                None,
            )
            .await?;
        let counter = |sk: &str| {
            items
                .iter()
                .find(|i| get_s(i, "sk") == Some(sk))
                .map(|i| count(i, "n"))
                .unwrap_or(0)
        };
        Ok(StoredNow {
            entries: counter("Q#entries"),
            bytes: counter("Q#bytes"),
        })
    }
}

fn wall_clock_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
