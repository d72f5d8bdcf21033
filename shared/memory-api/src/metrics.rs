//! CloudWatch Embedded Metric Format: one JSON line on stdout per call, which Lambda ships to
//! CloudWatch Logs and CloudWatch turns into metrics, with no API call and no extra latency.
//! Only counts and the function name are dimensions, never ids of tenants or entries (that would
//! explode metric cardinality); quota events carry the tenant as a property only. Never content.

use std::io::Write;

use memory_core::metering::Usage;
use serde_json::{json, Map, Value};

pub const NAMESPACE: &str = "WopMemory";

/// The Lambda function name, which is the metric dimension.
fn function_name() -> String {
    std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "local".to_owned())
}

/// One EMF document: `dimensions` name the metric dimensions and carry their values,
/// `metrics` are (name, unit, value), `properties` are log fields that are no dimension.
fn emf(
    timestamp_ms: i64,
    dimensions: &[(&str, &str)],
    metrics: Vec<(&str, &str, Value)>,
    properties: &[(&str, &str)],
) -> Value {
    let names: Vec<&str> = dimensions.iter().map(|(name, _)| *name).collect();
    let specs: Vec<Value> = metrics
        .iter()
        .map(|(name, unit, _)| json!({"Name": name, "Unit": unit}))
        .collect();
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [names],
                "Metrics": specs,
            }]
        }),
    );
    for (name, value) in dimensions.iter().chain(properties) {
        doc.insert((*name).to_owned(), json!(value));
    }
    for (name, _, value) in metrics {
        doc.insert(name.to_owned(), value);
    }
    Value::Object(doc)
}

/// Builds the EMF document for `counts` (zero counts included: a zero is information).
pub fn document(function: &str, counts: &[(&str, u64)], timestamp_ms: i64) -> Value {
    let metrics = counts
        .iter()
        .map(|(name, value)| (*name, "Count", json!(value)))
        .collect();
    emf(timestamp_ms, &[("Function", function)], metrics, &[])
}

/// The EMF document counting one answered error under its wire code: `ErrorAnswered` by
/// `Function` and `Code`. The codes are the envelope's fixed set (about a dozen), so the extra
/// dimension stays small, and the dashboard shows each function's errors by code.
pub fn error_document(function: &str, code: &str, timestamp_ms: i64) -> Value {
    emf(
        timestamp_ms,
        &[("Function", function), ("Code", code)],
        vec![("ErrorAnswered", "Count", json!(1))],
        &[],
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn write_line(doc: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{doc}");
}

/// Writes one EMF line. Failures to write stdout are ignored: metrics must never fail a call.
pub fn emit(counts: &[(&str, u64)]) {
    write_line(&document(&function_name(), counts, now_ms()));
}

/// Writes the `ErrorAnswered` line of one error answer (HTTP or direct invoke).
pub fn emit_error(code: &str) {
    write_line(&error_document(&function_name(), code, now_ms()));
}

/// A request refused by a quota (docs/quotas.md "Metrics").
pub const QUOTA_REFUSED: &str = "QuotaRefused";
/// An accepted request that left a quota at or above its warning share.
pub const QUOTA_NEAR_LIMIT: &str = "QuotaNearLimit";

/// The EMF document of one quota event: the count `name` = 1 by function, with the tenant and
/// the quota as properties (not dimensions, so there is no metric per tenant; CloudWatch
/// Contributor Insights ranks tenants from the log line).
pub fn quota_document(function: &str, name: &str, tenant: &str, quota: &str, ts: i64) -> Value {
    emf(
        ts,
        &[("Function", function)],
        vec![(name, "Count", json!(1))],
        &[("tenant", tenant), ("quota", quota)],
    )
}

/// Writes one quota event line.
pub fn quota_event(name: &str, tenant: &str, quota: &str) {
    write_line(&quota_document(
        &function_name(),
        name,
        tenant,
        quota,
        now_ms(),
    ));
}

/// `QuotaNearLimit` for each quota a put left under pressure.
pub fn emit_pressure(pressure: &[memory_core::quota::Pressure]) {
    for p in pressure {
        quota_event(QUOTA_NEAR_LIMIT, p.tenant.as_str(), p.quota.name());
    }
}

/// The metric names of a usage line, in [`Usage`] order (the Contributor Insights rules key on
/// them and on `$.tenant`).
pub const USAGE_METRICS: [&str; 8] = [
    "ReadUnits",
    "WriteUnits",
    "S3Requests",
    "S3BytesIn",
    "S3BytesOut",
    "EventsPublished",
    "BedrockTokens",
    "DurationMs",
];

/// What an invocation's usage line names a tenant no work was attributed to (fan-out Queries
/// over the sparse indexes); tenant ids cannot contain `@`.
pub const UNATTRIBUTED: &str = "@shared";

/// The usage line of one tenant (docs/metering.md "The EMF line"): the tenant is a property,
/// never a dimension, so the metrics stay per function and Contributor Insights ranks tenants.
pub fn usage_document(function: &str, tenant: &str, usage: &Usage, timestamp_ms: i64) -> Value {
    let values = [
        json!(usage.read_units),
        json!(usage.write_units),
        json!(usage.s3_requests),
        json!(usage.s3_bytes_in),
        json!(usage.s3_bytes_out),
        json!(usage.events),
        json!(usage.bedrock_tokens),
        json!(usage.lambda_ms),
    ];
    let metrics = USAGE_METRICS
        .iter()
        .zip(values)
        .map(|(name, value)| {
            let unit = match *name {
                "S3BytesIn" | "S3BytesOut" => "Bytes",
                "DurationMs" => "Milliseconds",
                _ => "Count",
            };
            (*name, unit, value)
        })
        .collect();
    emf(
        timestamp_ms,
        &[("Function", function)],
        metrics,
        &[("tenant", tenant)],
    )
}

/// Writes one usage line per attribution (failures to write stdout are ignored).
pub fn emit_usage(lines: &[(Option<&str>, &Usage)]) {
    let (now, function) = (now_ms(), function_name());
    for (tenant, usage) in lines {
        write_line(&usage_document(
            &function,
            tenant.unwrap_or(UNATTRIBUTED),
            usage,
            now,
        ));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_usage_line_names_the_tenant_as_a_property_only() {
        let usage = Usage {
            read_units: 1.5,
            write_units: 4.0,
            s3_bytes_in: 10,
            lambda_ms: 7,
            ..Usage::default()
        };
        let doc = usage_document("memory-write", "acme", &usage, 42);
        let spec = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(spec["Dimensions"], json!([["Function"]]));
        let names: Vec<&str> = spec["Metrics"]
            .as_array()
            .map(|m| m.iter().filter_map(|x| x["Name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(names, USAGE_METRICS);
        assert_eq!(doc["tenant"], "acme");
        assert_eq!(
            (doc["ReadUnits"].clone(), doc["WriteUnits"].clone()),
            (json!(1.5), json!(4.0))
        );
        assert_eq!(
            (doc["S3BytesIn"].clone(), doc["DurationMs"].clone()),
            (json!(10), json!(7))
        );
        assert_eq!(spec["Metrics"][3]["Unit"], "Bytes");
    }

    use super::*;

    /// The `_aws` block of a line with one dimension set and these metrics.
    fn aws(timestamp: i64, dimensions: Value, metrics: Value) -> Value {
        json!({
            "Timestamp": timestamp,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [dimensions],
                "Metrics": metrics,
            }]
        })
    }

    #[test]
    fn error_shape_counts_by_function_and_code() {
        let expected = json!({
            "_aws": aws(
                7,
                json!(["Function", "Code"]),
                json!([{"Name": "ErrorAnswered", "Unit": "Count"}])
            ),
            "Function": "memory-write",
            "Code": "rate_limited",
            "ErrorAnswered": 1,
        });
        assert_eq!(error_document("memory-write", "rate_limited", 7), expected);
    }

    #[test]
    fn quota_events_carry_tenant_and_quota_as_properties() {
        let expected = json!({
            "_aws": aws(
                7,
                json!(["Function"]),
                json!([{"Name": "QuotaRefused", "Unit": "Count"}])
            ),
            "Function": "memory-write",
            "QuotaRefused": 1,
            "tenant": "acme",
            "quota": "MaxEntriesPerRef",
        });
        let doc = quota_document("memory-write", QUOTA_REFUSED, "acme", "MaxEntriesPerRef", 7);
        assert_eq!(doc, expected);
    }

    #[test]
    fn emf_shape() {
        let expected = json!({
            "_aws": aws(
                42,
                json!(["Function"]),
                json!([
                    {"Name": "EntriesWritten", "Unit": "Count"},
                    {"Name": "RedactionsApplied", "Unit": "Count"},
                ])
            ),
            "Function": "memory-write",
            "EntriesWritten": 3,
            "RedactionsApplied": 0,
        });
        let counts = [("EntriesWritten", 3), ("RedactionsApplied", 0)];
        assert_eq!(document("memory-write", &counts, 42), expected);
    }
}
