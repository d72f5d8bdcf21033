//! SR-1 for structured values: every string inside a value (object keys included) passes the
//! same redactor the OpenWOP writer uses, so a registered secret never reaches the store
//! through this door either. Numbers, booleans and nulls carry no text and pass as they are.

use memory_guard::Redactor;
use serde_json::{Map, Value};

/// The value with every string redacted, and how many spans were replaced (a count is
/// content-free, for metrics). Two object keys that redact to the same marker keep both
/// values: the later one gets a `#2`, `#3`... suffix, so redaction never drops data.
pub fn redact_value(
    redactor: &Redactor,
    value: &Map<String, Value>,
) -> (Map<String, Value>, usize) {
    let mut count = 0;
    let out = redact_object(redactor, value, &mut count);
    (out, count)
}

fn redact_object(
    redactor: &Redactor,
    map: &Map<String, Value>,
    count: &mut usize,
) -> Map<String, Value> {
    let mut out = Map::with_capacity(map.len());
    for (k, v) in map {
        let (key, n) = redactor.redact_counting(k);
        *count += n;
        let mut key = key.into_owned();
        if out.contains_key(&key) {
            let base = key.clone();
            let mut i = 2;
            while out.contains_key(&key) {
                key = format!("{base}#{i}");
                i += 1;
            }
        }
        out.insert(key, redact(redactor, v, count));
    }
    out
}

fn redact(redactor: &Redactor, value: &Value, count: &mut usize) -> Value {
    match value {
        Value::String(s) => {
            let (text, n) = redactor.redact_counting(s);
            *count += n;
            Value::String(text.into_owned())
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| redact(redactor, v, count)).collect())
        }
        Value::Object(map) => Value::Object(redact_object(redactor, map, count)),
        other => other.clone(),
    }
}

/// Whether `text` holds a registered secret (identifiers are refused rather than rewritten:
/// a redacted namespace or key would address a different entry than the caller named).
pub fn holds_secret(redactor: &Redactor, text: &str) -> bool {
    redactor.redact_counting(text).1 > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_guard::SecretRegistry;
    use serde_json::json;

    fn redactor() -> Redactor {
        let mut r = SecretRegistry::new();
        r.register("api", "sk-live-0123456789").expect("secret");
        r.redactor()
    }

    #[test]
    fn every_string_inside_a_value_is_redacted() {
        let value = json!({
            "note": "key sk-live-0123456789 here",
            "nested": {"list": ["a", "sk-live-0123456789", 3, null, {"deep": "sk-live-0123456789"}]},
            "sk-live-0123456789": true,
            "n": 4.5
        });
        let (out, n) = redact_value(&redactor(), value.as_object().expect("object"));
        let text = serde_json::to_string(&out).expect("json");
        assert!(!text.contains("sk-live-0123456789"), "{text}");
        assert_eq!(n, 4);
        assert_eq!(out["n"], json!(4.5));
        assert_eq!(out["nested"]["list"][2], json!(3));
        assert_eq!(out["[REDACTED:api]"], json!(true));
    }

    #[test]
    fn keys_that_redact_alike_keep_both_values() {
        let value = json!({"[REDACTED:api]": 1, "sk-live-0123456789": 2});
        let (out, _) = redact_value(&redactor(), value.as_object().expect("object"));
        assert_eq!(out.len(), 2);
        assert_eq!(out["[REDACTED:api]"], json!(1));
        assert_eq!(out["[REDACTED:api]#2"], json!(2));
    }

    #[test]
    fn identifiers_holding_a_secret_are_recognised() {
        assert!(holds_secret(&redactor(), "ns.sk-live-0123456789"));
        assert!(!holds_secret(&redactor(), "ns.plain"));
    }
}
