//! Requests of the door, decoded once from the bodies and queries the official client sends
//! (`openintent` 0.17: `create_memory`, `update_memory`, `list_memory`), with RFC-0015's bounds:
//! §1.1 fields and enums, §1.3 value size, §4.1 query parameters. Unknown body fields are
//! ignored, as the reference server ignores them. Every error names the field, never its value.

use memory_core::time::Timestamp;
use serde_json::{Map, Value};

use crate::error::IntentError;
use crate::model::{MemoryType, Priority, SENSITIVITIES};

/// §1.3: values SHOULD NOT exceed 64 KB; this door refuses larger ones.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Namespace and key length (the reference server's columns are 255 characters).
pub const MAX_NAME_CHARS: usize = 255;
pub const MAX_TAGS: usize = 64;
pub const MAX_TAG_CHARS: usize = 255;
/// §4.1: default and maximum page size.
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 1000;

/// `POST /api/v1/memory`.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateRequest {
    pub agent_id: String,
    pub namespace: String,
    pub key: String,
    pub value: Map<String, Value>,
    pub memory_type: MemoryType,
    pub scope: Option<Map<String, Value>>,
    pub tags: Vec<String>,
    pub ttl: Option<String>,
    pub pinned: bool,
    pub priority: Priority,
    pub sensitivity: Option<String>,
    pub expires_at: Option<Timestamp>,
    /// Extension: the data subject the entry is about, so forget-by-subject reaches it.
    pub subject: Option<String>,
}

/// `PATCH /api/v1/memory/{id}`: only the fields present change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PatchRequest {
    pub value: Option<Map<String, Value>>,
    pub tags: Option<Vec<String>>,
    pub pinned: Option<bool>,
    pub priority: Option<Priority>,
    pub ttl: Option<Option<String>>,
    pub sensitivity: Option<Option<String>>,
    pub expires_at: Option<Option<Timestamp>>,
}

/// `GET /api/v1/agents/{agent_id}/memory` (§4.1).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListQuery {
    pub namespace: Option<String>,
    pub key: Option<String>,
    pub memory_type: Option<MemoryType>,
    pub tags_all: Vec<String>,
    pub tags_any: Vec<String>,
    pub task_id: Option<String>,
    pub intent_id: Option<String>,
    pub pinned: Option<bool>,
    pub updated_after: Option<Timestamp>,
    pub updated_before: Option<Timestamp>,
    pub limit: usize,
    pub offset: usize,
}

fn invalid(field: &str, reason: &str) -> IntentError {
    IntentError::invalid(field, reason)
}

fn body_object(body: &str) -> Result<Map<String, Value>, IntentError> {
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(invalid("body", "must be a JSON object")),
        Err(_) => Err(invalid("body", "must be valid JSON")),
    }
}

/// A namespace, key or tag: non-empty, bounded, no control characters (they break logs,
/// terminals and every mirror of the data a team might keep).
pub fn name(field: &str, value: &Value, max: usize) -> Result<String, IntentError> {
    let Value::String(s) = value else {
        return Err(invalid(field, "must be a string"));
    };
    if s.is_empty() || s.chars().count() > max {
        return Err(invalid(field, &format!("must be 1-{max} characters")));
    }
    if s.chars().any(char::is_control) {
        return Err(invalid(field, "must not contain control characters"));
    }
    Ok(s.clone())
}

fn required<'a>(map: &'a Map<String, Value>, field: &str) -> Result<&'a Value, IntentError> {
    map.get(field)
        .filter(|v| !v.is_null())
        .ok_or_else(|| invalid(field, "is required"))
}

fn value_object(v: &Value) -> Result<Map<String, Value>, IntentError> {
    let Value::Object(map) = v else {
        return Err(invalid("value", "must be a JSON object"));
    };
    let size = serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX);
    if size > MAX_VALUE_BYTES {
        return Err(IntentError::ValueTooLarge {
            size,
            max: MAX_VALUE_BYTES,
        });
    }
    Ok(map.clone())
}

fn tags(v: &Value) -> Result<Vec<String>, IntentError> {
    let Value::Array(items) = v else {
        return Err(invalid("tags", "must be a list of strings"));
    };
    if items.len() > MAX_TAGS {
        return Err(invalid("tags", &format!("at most {MAX_TAGS} tags")));
    }
    items
        .iter()
        .map(|t| name("tags", t, MAX_TAG_CHARS))
        .collect()
}

fn priority(v: &Value) -> Result<Priority, IntentError> {
    v.as_str()
        .and_then(Priority::parse)
        .ok_or_else(|| invalid("priority", "must be one of low, normal, high"))
}

fn optional_string(map: &Map<String, Value>, field: &str) -> Result<Option<Value>, IntentError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::String(_)) => Ok(Some(v.clone())),
        Some(_) => Err(invalid(field, "must be a string or null")),
    }
}

fn ttl(v: Option<Value>) -> Result<Option<String>, IntentError> {
    let Some(Value::String(s)) = v else {
        return Ok(None);
    };
    if s == "task_lifetime"
        || s.strip_prefix("duration:")
            .and_then(duration_millis)
            .is_some()
    {
        Ok(Some(s))
    } else {
        Err(invalid(
            "ttl",
            "must be task_lifetime, duration:<ISO 8601 duration> (e.g. duration:PT24H) or null",
        ))
    }
}

fn sensitivity(v: Option<Value>) -> Result<Option<String>, IntentError> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) if SENSITIVITIES.contains(&s.as_str()) => Ok(Some(s)),
        Some(_) => Err(invalid(
            "sensitivity",
            "must be one of public, internal, confidential, restricted",
        )),
    }
}

fn timestamp(field: &str, v: Option<Value>) -> Result<Option<Timestamp>, IntentError> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) => Timestamp::parse_rfc3339(&s)
            .map(Some)
            .map_err(|_| invalid(field, "must be an RFC 3339 timestamp with an offset")),
        Some(_) => Err(invalid(field, "must be an RFC 3339 timestamp")),
    }
}

fn boolean(field: &str, v: &Value) -> Result<bool, IntentError> {
    v.as_bool()
        .ok_or_else(|| invalid(field, "must be true or false"))
}

fn scope(v: Option<&Value>) -> Result<Option<Map<String, Value>>, IntentError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => {
            for field in ["task_id", "intent_id"] {
                if let Some(v) = map.get(field).filter(|v| !v.is_null()) {
                    name(&format!("scope.{field}"), v, MAX_NAME_CHARS)?;
                }
            }
            let size = serde_json::to_vec(map)
                .map(|b| b.len())
                .unwrap_or(usize::MAX);
            if size > 4096 {
                return Err(invalid("scope", "at most 4096 bytes"));
            }
            Ok((!map.is_empty()).then(|| map.clone()))
        }
        Some(_) => Err(invalid("scope", "must be an object")),
    }
}

impl CreateRequest {
    pub fn decode(body: &str) -> Result<Self, IntentError> {
        let map = body_object(body)?;
        let memory_type = match map.get("memory_type") {
            None | Some(Value::Null) => MemoryType::Working,
            Some(v) => v.as_str().and_then(MemoryType::parse).ok_or_else(|| {
                invalid("memory_type", "must be one of working, episodic, semantic")
            })?,
        };
        let agent_id = match required(&map, "agent_id")? {
            Value::String(s) => s.clone(),
            _ => return Err(invalid("agent_id", "must be a string")),
        };
        let subject = match map.get("subject") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => Some(s.clone()),
            Some(_) => return Err(invalid("subject", "must be 1-256 bytes")),
        };
        Ok(CreateRequest {
            agent_id,
            namespace: name("namespace", required(&map, "namespace")?, MAX_NAME_CHARS)?,
            key: name("key", required(&map, "key")?, MAX_NAME_CHARS)?,
            value: value_object(required(&map, "value")?)?,
            memory_type,
            scope: scope(map.get("scope"))?,
            tags: match map.get("tags") {
                None | Some(Value::Null) => Vec::new(),
                Some(v) => tags(v)?,
            },
            ttl: ttl(optional_string(&map, "ttl")?)?,
            pinned: match map.get("pinned") {
                None | Some(Value::Null) => false,
                Some(v) => boolean("pinned", v)?,
            },
            priority: match map.get("priority") {
                None | Some(Value::Null) => Priority::Normal,
                Some(v) => priority(v)?,
            },
            sensitivity: sensitivity(optional_string(&map, "sensitivity")?)?,
            expires_at: timestamp("expires_at", optional_string(&map, "expires_at")?)?,
            subject,
        })
    }
}

impl PatchRequest {
    pub fn decode(body: &str) -> Result<Self, IntentError> {
        let map = body_object(body)?;
        let present = |field: &str| map.get(field).filter(|v| !v.is_null());
        Ok(PatchRequest {
            value: present("value").map(value_object).transpose()?,
            tags: present("tags").map(tags).transpose()?,
            pinned: present("pinned")
                .map(|v| boolean("pinned", v))
                .transpose()?,
            priority: present("priority").map(priority).transpose()?,
            ttl: match map.get("ttl") {
                None => None,
                Some(_) => Some(ttl(optional_string(&map, "ttl")?)?),
            },
            sensitivity: match map.get("sensitivity") {
                None => None,
                Some(_) => Some(sensitivity(optional_string(&map, "sensitivity")?)?),
            },
            expires_at: match map.get("expires_at") {
                None => None,
                Some(_) => Some(timestamp(
                    "expires_at",
                    optional_string(&map, "expires_at")?,
                )?),
            },
        })
    }
}

/// `If-Match: <version>` (a quoted or weak ETag form is read the same way). `None`: the
/// header is missing.
pub fn if_match(header: Option<&str>) -> Result<Option<u64>, IntentError> {
    let Some(raw) = header else { return Ok(None) };
    let trimmed = raw.trim();
    let trimmed = trimmed
        .strip_prefix("W/")
        .unwrap_or(trimmed)
        .trim_matches('"');
    trimmed
        .parse::<u64>()
        .ok()
        .filter(|v| *v >= 1)
        .map(Some)
        .ok_or_else(|| {
            invalid(
                "If-Match",
                "must be the entry's version, a positive integer",
            )
        })
}

fn csv(raw: &str, field: &str) -> Result<Vec<String>, IntentError> {
    raw.split(',')
        .filter(|t| !t.is_empty())
        .map(|t| name(field, &Value::String(t.to_owned()), MAX_TAG_CHARS))
        .collect()
}

impl ListQuery {
    /// From the decoded query pairs; a parameter given twice counts once (the last).
    pub fn decode(pairs: &[(String, String)]) -> Result<Self, IntentError> {
        let mut q = ListQuery {
            limit: DEFAULT_LIMIT,
            ..ListQuery::default()
        };
        for (k, v) in pairs {
            let text = |field: &str| name(field, &Value::String(v.clone()), MAX_NAME_CHARS);
            match k.as_str() {
                "namespace" => q.namespace = Some(text("namespace")?),
                "key" => q.key = Some(text("key")?),
                "memory_type" => {
                    q.memory_type = Some(MemoryType::parse(v).ok_or_else(|| {
                        invalid("memory_type", "must be one of working, episodic, semantic")
                    })?)
                }
                "tags" => q.tags_all = csv(v, "tags")?,
                "tags_any" => q.tags_any = csv(v, "tags_any")?,
                "scope.task_id" => q.task_id = Some(text("scope.task_id")?),
                "scope.intent_id" => q.intent_id = Some(text("scope.intent_id")?),
                "pinned" => {
                    q.pinned = Some(match v.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => return Err(invalid("pinned", "must be true or false")),
                    })
                }
                "updated_after" => {
                    q.updated_after = timestamp("updated_after", Some(Value::String(v.clone())))?
                }
                "updated_before" => {
                    q.updated_before = timestamp("updated_before", Some(Value::String(v.clone())))?
                }
                "limit" => {
                    q.limit = v
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or_else(|| invalid("limit", "must be an integer from 1 to 1000"))?
                }
                "offset" => {
                    q.offset = v
                        .parse::<usize>()
                        .map_err(|_| invalid("offset", "must be a non-negative integer"))?
                }
                _ => {}
            }
        }
        Ok(q)
    }

    /// Whether `namespace` matches the filter: exact, or a prefix ending in `*` (§4.1).
    pub fn namespace_matches(&self, namespace: &str) -> bool {
        match &self.namespace {
            None => true,
            Some(f) => match f.strip_suffix('*') {
                Some(prefix) => namespace.starts_with(prefix),
                None => namespace == f,
            },
        }
    }
}

/// The ISO 8601 durations `ttl: duration:<...>` accepts: `PnW` or `PnDTnHnMnS` (any part
/// optional, at least one present; seconds may have a fraction). Years and months are refused:
/// their length depends on the calendar, and an expiry must be one instant.
pub fn duration_millis(s: &str) -> Option<i64> {
    let rest = s.strip_prefix('P')?;
    if let Some(weeks) = rest.strip_suffix('W') {
        return weeks
            .parse::<i64>()
            .ok()
            .and_then(|w| w.checked_mul(7 * 86_400_000));
    }
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut total: i64 = 0;
    let mut any = false;
    let mut take = |part: &str, units: &[(char, i64)]| -> Option<()> {
        let mut number = String::new();
        let mut allowed = units.iter();
        for c in part.chars() {
            if c.is_ascii_digit() || c == '.' {
                number.push(c);
                continue;
            }
            let (_, ms) = allowed.by_ref().find(|(u, _)| *u == c)?;
            let value: f64 = number.parse().ok()?;
            if number.contains('.') && c != 'S' {
                return None;
            }
            let add = (value * *ms as f64).round();
            if !add.is_finite() || add > 1e15 {
                return None;
            }
            total = total.checked_add(add as i64)?;
            number.clear();
            any = true;
        }
        number.is_empty().then_some(())
    };
    take(date, &[('D', 86_400_000)])?;
    if let Some(t) = time {
        take(t, &[('H', 3_600_000), ('M', 60_000), ('S', 1000)])?;
    }
    any.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_read_as_the_rfc_writes_them() {
        assert_eq!(duration_millis("PT24H"), Some(86_400_000));
        assert_eq!(duration_millis("P1DT2H30M"), Some(95_400_000));
        assert_eq!(duration_millis("PT0.5S"), Some(500));
        assert_eq!(duration_millis("P2W"), Some(14 * 86_400_000));
        for bad in [
            "P", "PT", "P1M", "P1Y", "PT1D", "24H", "PT1H1H", "P1.5D", "PTH",
        ] {
            assert_eq!(duration_millis(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_create_body_is_read_with_the_rfc_defaults() {
        let r = CreateRequest::decode(
            r#"{"agent_id":"a1","namespace":"ns","key":"k","value":{"x":1}}"#,
        )
        .expect("valid");
        assert_eq!(r.memory_type, MemoryType::Working);
        assert_eq!(r.priority, Priority::Normal);
        assert!(!r.pinned && r.tags.is_empty() && r.ttl.is_none());
    }

    #[test]
    fn bad_fields_are_named_and_values_never_echoed() {
        let cases = [
            (
                r#"{"agent_id":"a","namespace":"ns","key":"k","value":{},"memory_type":"longterm"}"#,
                "memory_type",
            ),
            (
                r#"{"agent_id":"a","namespace":"ns","key":"k\u0007","value":{}}"#,
                "key",
            ),
            (
                r#"{"agent_id":"a","namespace":"","key":"k","value":{}}"#,
                "namespace",
            ),
            (
                r#"{"agent_id":"a","namespace":"ns","key":"k","value":[1]}"#,
                "value",
            ),
            (
                r#"{"agent_id":"a","namespace":"ns","key":"k","value":{},"ttl":"forever"}"#,
                "ttl",
            ),
            (
                r#"{"agent_id":"a","namespace":"ns","key":"k","value":{},"priority":"urgent"}"#,
                "priority",
            ),
            (
                r#"{"agent_id":"a","namespace":"ns","key":"k","value":{},"tags":["ok","bad\n"]}"#,
                "tags",
            ),
            (r#"{"agent_id":"a","namespace":"ns","key":"k"}"#, "value"),
        ];
        for (body, field) in cases {
            match CreateRequest::decode(body) {
                Err(IntentError::Invalid { field: f, reason }) => {
                    assert_eq!(f, field, "{body}");
                    assert!(!reason.contains("longterm") && !reason.contains("forever"));
                }
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn values_above_64_kb_are_refused() {
        let big = "x".repeat(MAX_VALUE_BYTES);
        let body =
            format!(r#"{{"agent_id":"a","namespace":"ns","key":"k","value":{{"v":"{big}"}}}}"#);
        assert!(matches!(
            CreateRequest::decode(&body),
            Err(IntentError::ValueTooLarge { .. })
        ));
    }

    #[test]
    fn if_match_accepts_plain_and_etag_forms() {
        assert_eq!(if_match(None), Ok(None));
        assert_eq!(if_match(Some("3")), Ok(Some(3)));
        assert_eq!(if_match(Some("\"3\"")), Ok(Some(3)));
        assert_eq!(if_match(Some("W/\"3\"")), Ok(Some(3)));
        for bad in ["", "abc", "0", "-1", "3.0"] {
            assert!(if_match(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn list_queries_are_bounded() {
        let q = ListQuery::decode(&[
            ("tags".into(), "a,b".into()),
            ("namespace".into(), "bill*".into()),
        ])
        .expect("valid");
        assert_eq!(q.tags_all, vec!["a", "b"]);
        assert!(q.namespace_matches("billing.x") && !q.namespace_matches("ops"));
        assert!(ListQuery::decode(&[("limit".into(), "1001".into())]).is_err());
        assert!(ListQuery::decode(&[("memory_type".into(), "x".into())]).is_err());
    }
}
