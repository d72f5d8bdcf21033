//! memory-dream's usage actions (docs/metering.md "The items and the rollup", "The operator
//! view and the price table"), beside its passes:
//! - `{"action": "usage-rollup", "day"?: "YYYY-MM-DD"}`, the hourly schedule's input: sums each
//!   listed tenant's hour items of the day into its day item; without `day`, yesterday and
//!   today (UTC), so a day's last hour is rolled up after it ends. Idempotent: each day item is
//!   SET to a sum.
//! - `{"action": "usage-top", "from", "to", "limit"?}`, an operator's direct invoke (IAM): the
//!   top tenants by estimated cost over the days, with the price table it used (`USAGE_PRICES`).

use memory_api::background_api::PassCommand;
use memory_api::WireError;
use memory_core::metering::{self, PriceTable, UsageStore, MAX_RANGE_DAYS};
use memory_core::ports::{Clock, SystemClock};
use memory_core::CoreError;
use serde_json::{json, Value};

/// Tenants a `usage-top` answers when it names no `limit`.
pub const DEFAULT_TOP: usize = 20;
/// Most tenants one `usage-top` answers.
pub const MAX_TOP: usize = 1000;

/// What memory-dream is invoked with.
pub enum Trigger {
    Pass(PassCommand),
    Rollup(Option<String>),
    Top { days: Vec<String>, limit: usize },
}

fn text<'a>(payload: &'a Value, field: &str) -> Result<Option<&'a str>, WireError> {
    match payload.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(WireError::validation(field, format!("{field}: a string"))),
    }
}

/// Decodes a trigger: the usage actions here, everything else as a pass trigger.
pub fn decode(payload: Value) -> Result<Trigger, WireError> {
    match payload.get("action").and_then(Value::as_str) {
        Some("usage-rollup") => {
            let day = text(&payload, "day")?;
            if let Some(day) = day {
                if metering::parse_day(day).is_none() {
                    return Err(WireError::validation("day", "day: a date, YYYY-MM-DD"));
                }
            }
            Ok(Trigger::Rollup(day.map(str::to_owned)))
        }
        Some("usage-top") => {
            let days = metering::day_range(text(&payload, "from")?, text(&payload, "to")?)
                .map_err(WireError::from)?;
            let limit = match payload.get("limit") {
                None | Some(Value::Null) => DEFAULT_TOP,
                Some(v) => v
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|n| (1..=MAX_TOP).contains(n))
                    .ok_or_else(|| {
                        WireError::validation("limit", format!("limit: 1 to {MAX_TOP}"))
                    })?,
            };
            Ok(Trigger::Top { days, limit })
        }
        _ => lambda_adapter::pass_command(payload).map(Trigger::Pass),
    }
}

/// The price table of `USAGE_PRICES` (JSON; fields left out keep their defaults), or the
/// default; one that does not decode stops the function at start-up, naming the variable.
pub fn prices_from_env() -> Result<PriceTable, lambda_runtime::Error> {
    match std::env::var("USAGE_PRICES") {
        Ok(raw) if !raw.trim().is_empty() => PriceTable::from_json(&raw)
            .map_err(|_| "USAGE_PRICES must be a JSON price table".into()),
        _ => Ok(PriceTable::default()),
    }
}

/// Rolls up `day`, or yesterday and today.
pub async fn rollup(store: &dyn UsageStore, day: Option<String>) -> Result<Value, WireError> {
    let days = match day {
        Some(day) => vec![day],
        None => {
            let today = metering::day_of(SystemClock.now());
            metering::previous_day(&today)
                .into_iter()
                .chain([today])
                .collect()
        }
    };
    let mut reports = Vec::new();
    for day in days {
        let report = metering::roll_up(store, &day)
            .await
            .map_err(|e| WireError::from(CoreError::from(e)))?;
        lambda_runtime::tracing::info!(day = %report.day, tenants = report.tenants, failed = report.failed, "usage rollup");
        reports.push(report);
    }
    Ok(json!({ "rollups": reports }))
}

/// The operator view.
pub async fn top(
    store: &dyn UsageStore,
    days: &[String],
    limit: usize,
    prices: &PriceTable,
) -> Result<Value, WireError> {
    let tenants = metering::top_tenants(store, days, limit, prices)
        .await
        .map_err(|e| WireError::from(CoreError::from(e)))?;
    Ok(json!({
        "from": days.first(),
        "to": days.last(),
        "maxRangeDays": MAX_RANGE_DAYS,
        "prices": prices,
        "tenants": tenants,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_actions_decode_strictly_and_the_rest_are_passes() {
        assert!(matches!(
            decode(json!({"action": "usage-rollup"})),
            Ok(Trigger::Rollup(None))
        ));
        assert!(matches!(
            decode(json!({"action": "usage-rollup", "day": "2026-01-02"})),
            Ok(Trigger::Rollup(Some(_)))
        ));
        let bad_day = decode(json!({"action": "usage-rollup", "day": "2026-1-2"}));
        assert_eq!(bad_day.err().and_then(|e| e.field), Some("day".to_owned()));
        let Ok(Trigger::Top { days, limit }) =
            decode(json!({"action": "usage-top", "from": "2026-01-01", "to": "2026-01-03"}))
        else {
            panic!("a top");
        };
        assert_eq!((days.len(), limit), (3, DEFAULT_TOP));
        for (payload, field) in [
            (
                json!({"action": "usage-top", "from": "2026-01-03", "to": "2026-01-01"}),
                "to",
            ),
            (json!({"action": "usage-top", "to": "2026-01-01"}), "from"),
            (
                json!({"action": "usage-top", "from": 3, "to": "2026-01-01"}),
                "from",
            ),
            (
                json!({"action": "usage-top", "from": "2026-01-01", "to": "2026-01-01", "limit": 0}),
                "limit",
            ),
        ] {
            let e = decode(payload).err();
            assert_eq!(e.and_then(|e| e.field), Some(field.to_owned()));
        }
        assert!(matches!(
            decode(json!({"action": "fan-out"})),
            Ok(Trigger::Pass(PassCommand::FanOut(None)))
        ));
    }
}
