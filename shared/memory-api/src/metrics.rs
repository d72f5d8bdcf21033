//! CloudWatch Embedded Metric Format: one JSON line on stdout per call, which Lambda ships to
//! CloudWatch Logs and CloudWatch turns into metrics, with no API call and no extra latency.
//! Only counts and the function name are emitted, never ids of tenants or entries (that would
//! explode metric cardinality) and never content.

use std::io::Write;

use memory_core::metering::Usage;
use serde_json::{json, Map, Value};

pub const NAMESPACE: &str = "WopMemory";

/// The Lambda function name, which is the metric dimension.
fn function_name() -> String {
    std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "local".to_owned())
}

/// Builds the EMF document for `counts` (zero counts included: a zero is information).
pub fn document(function: &str, counts: &[(&str, u64)], timestamp_ms: i64) -> Value {
    let metrics: Vec<Value> = counts
        .iter()
        .map(|(name, _)| json!({"Name": name, "Unit": "Count"}))
        .collect();
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["Function"]],
                "Metrics": metrics,
            }]
        }),
    );
    doc.insert("Function".into(), json!(function));
    for (name, value) in counts {
        doc.insert((*name).to_owned(), json!(value));
    }
    Value::Object(doc)
}

/// Writes one EMF line. Failures to write stdout are ignored: metrics must never fail a call.
pub fn emit(counts: &[(&str, u64)]) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let line = document(&function_name(), counts, now).to_string();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
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
    let metrics: Vec<Value> = USAGE_METRICS
        .iter()
        .map(|name| {
            let unit = match *name {
                "S3BytesIn" | "S3BytesOut" => "Bytes",
                "DurationMs" => "Milliseconds",
                _ => "Count",
            };
            json!({"Name": name, "Unit": unit})
        })
        .collect();
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["Function"]],
                "Metrics": metrics,
            }]
        }),
    );
    doc.insert("Function".into(), json!(function));
    doc.insert("tenant".into(), json!(tenant));
    for (name, value) in USAGE_METRICS.iter().zip(values) {
        doc.insert((*name).to_owned(), value);
    }
    Value::Object(doc)
}

/// Writes one usage line per attribution (failures to write stdout are ignored).
pub fn emit_usage(lines: &[(Option<&str>, &Usage)]) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let function = function_name();
    let mut out = std::io::stdout().lock();
    for (tenant, usage) in lines {
        let doc = usage_document(&function, tenant.unwrap_or(UNATTRIBUTED), usage, now);
        let _ = writeln!(out, "{doc}");
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

    #[test]
    fn emf_shape() {
        let doc = document(
            "memory-write",
            &[("EntriesWritten", 3), ("RedactionsApplied", 0)],
            42,
        );
        assert_eq!(doc["_aws"]["Timestamp"], 42);
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Namespace"], NAMESPACE);
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Function"]])
        );
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Metrics"][1]["Name"],
            "RedactionsApplied"
        );
        assert_eq!(
            (doc["EntriesWritten"].clone(), doc["Function"].clone()),
            (json!(3), json!("memory-write"))
        );
    }
}
