//! Decoding caller JSON at the edge, so every malformed request fails with a documented code
//! (`validation_error`) and a message that names the field by its schema path.
//!
//! serde's own messages are never passed on: they quote the caller's input (`invalid type:
//! string "sk-live-..."`, ``unknown field `<any key>` ``) and, after `from_value`, claim
//! "line 0, column 0". Instead the failure's kind is classified and re-worded, the path is
//! rebuilt from [`serde_path_to_error`] with every key that is not one of our schema's field
//! names shown as `*`, and the "expected ..." part (which serde derives from our types) is kept
//! only when it is plain text.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::wire::WireError;

/// serde_json's recursion limit; deeper payloads are rejected before any field is read.
pub const MAX_NESTING: usize = 128;

/// Every field name of every request schema this host accepts. A key outside this list is
/// caller-chosen and is never echoed.
const SCHEMA_FIELDS: &[&str] = &[
    "op",
    "tenantId",
    "runId",
    "memoryRef",
    "entries",
    "content",
    "tags",
    "expiresAt",
    "subject",
    "tier",
    "secrets",
    "secretId",
    "value",
    "attribution",
    "nodeId",
    "agentId",
    "id",
    "action",
    "tokenBudget",
    "detail",
    "detail-type",
    "source",
    "Records",
    "body",
    "messageId",
    "requestContext",
    "http",
    "method",
    "path",
    "rawPath",
    "queryStringParameters",
    "headers",
    "isBase64Encoded",
];

/// Parses a payload as JSON. Invalid JSON, lone UTF-16 surrogate escapes (`"\ud800"`, which
/// cannot become a Rust string) and nesting deeper than [`MAX_NESTING`] are all
/// `validation_error` on the whole payload.
pub fn json(text: &str) -> Result<Value, WireError> {
    serde_json::from_str(text).map_err(|e| {
        let message = if e.to_string().starts_with("recursion limit exceeded") {
            format!("payload nests deeper than {MAX_NESTING} levels")
        } else if e.is_eof() {
            "payload is truncated JSON".to_owned()
        } else {
            "payload is not valid JSON (RFC 8259, UTF-8, no lone surrogate escapes)".to_owned()
        };
        WireError::validation("payload", message)
    })
}

/// Decodes a JSON value into a request type. `root` prefixes paths (`""` for a top-level
/// payload, whose fields are then named bare, `entries[0].content`, as the writer's own
/// validation names them); an error on the value itself names `payload`.
pub fn typed<T: DeserializeOwned>(value: Value, root: &str) -> Result<T, WireError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = schema_path(root, e.path());
        let message = describe(&e.inner().to_string());
        WireError::validation(path.clone(), format!("{path}: {message}"))
    })
}

fn known(key: &str) -> Option<&'static str> {
    SCHEMA_FIELDS.iter().copied().find(|f| *f == key)
}

/// `entries[0].content`; a key that is not a schema field name shows as `*`.
fn schema_path(root: &str, path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = root.to_owned();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(known(key).unwrap_or("*"));
            }
            Segment::Enum { variant } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(known(variant).unwrap_or("*"));
            }
            Segment::Unknown => out.push('?'),
        }
    }
    if out.is_empty() {
        "payload".to_owned()
    } else {
        out
    }
}

/// What serde said, re-worded without anything of the input.
fn describe(serde_message: &str) -> String {
    let expected = serde_message
        .rsplit_once(", expected ")
        .map(|(_, e)| e)
        .filter(|e| plain(e));
    let with_expected = |what: &str| match expected {
        Some(e) => format!("{what}, expected {e}"),
        None => what.to_owned(),
    };
    if let Some(rest) = serde_message.strip_prefix("missing field `") {
        return match rest.split('`').next().and_then(known) {
            Some(name) => format!("missing field `{name}`"),
            None => "missing field".to_owned(),
        };
    }
    if serde_message.starts_with("unknown field") {
        return "unknown field (not part of the schema)".to_owned();
    }
    if serde_message.starts_with("duplicate field") {
        return "duplicate field".to_owned();
    }
    if serde_message.starts_with("unknown variant") {
        return with_expected("unsupported value");
    }
    if serde_message.starts_with("invalid type") {
        return with_expected("wrong type");
    }
    if serde_message.starts_with("invalid length") {
        return with_expected("wrong number of items");
    }
    with_expected("invalid value")
}

/// serde's "expected" text comes from our types (`a string`, ``one of `put`, `delete` ``), but a
/// custom visitor could echo input, so only short plain text passes.
fn plain(text: &str) -> bool {
    text.len() <= 120
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" `,._-".contains(&b))
}

/// The SR-1 secrets a door redacts on every write when no run engine hands them over (the MCP,
/// memory-tool and OpenIntent doors): `REDACTION_SECRETS`, a JSON list of `{"secretId",
/// "value"}` (docs/operating.md "Configuration"). A value that does not decode stops the
/// function at start-up, naming the variable and never the value.
pub fn configured_secrets() -> Result<Vec<memory_core::writer::SecretInput>, String> {
    match std::env::var("REDACTION_SECRETS") {
        Ok(raw) if !raw.trim().is_empty() => {
            let value = json(&raw)
                .map_err(|_| "REDACTION_SECRETS must be a JSON list of {secretId, value}")?;
            let secrets: Vec<memory_core::writer::SecretInput> = typed(value, "REDACTION_SECRETS")
                .map_err(|e| format!("REDACTION_SECRETS: {}", e.message))?;
            memory_core::writer::registry_from(&secrets)
                .map_err(|e| format!("REDACTION_SECRETS: {e}"))?;
            Ok(secrets)
        }
        _ => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct Entry {
        content: String,
        #[serde(default)]
        tags: Vec<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct Put {
        tenant_id: String,
        entries: Vec<Entry>,
    }

    fn fail(value: Value) -> WireError {
        typed::<Put>(value, "").expect_err("must fail")
    }

    #[test]
    fn wrong_type_names_the_path_not_the_value() {
        let e = fail(json!({"tenantId": "t", "entries": [{"content": "ok"}, {"content": 7}]}));
        assert_eq!(e.field.as_deref(), Some("entries[1].content"));
        assert_eq!(e.code, "validation_error");
        assert!(
            e.message.contains("wrong type, expected a string"),
            "{}",
            e.message
        );

        let e = fail(json!({"tenantId": ["sk-live-SECRET"], "entries": []}));
        assert!(!e.message.contains("SECRET"), "{}", e.message);
    }

    #[test]
    fn unknown_keys_are_never_echoed() {
        let e = fail(json!({"tenantId": "t", "entries": [], "sk_live_0123456789": 1}));
        assert!(!e.message.contains("sk_live"), "{}", e.message);
        assert!(e.message.contains("unknown field"), "{}", e.message);
        let e = fail(json!({"tenantId": "t", "entries": [{"content": "x", "ghp_abcdef": 1}]}));
        assert!(!e.message.contains("ghp_"), "{}", e.message);
    }

    #[test]
    fn missing_fields_are_named() {
        let e = fail(json!({"entries": []}));
        assert!(
            e.message.contains("missing field `tenantId`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn messages_never_claim_a_position() {
        for v in [json!(5), json!([]), json!({"tenantId": 1, "entries": 2})] {
            let e = fail(v);
            assert!(!e.message.contains("line 0"), "{}", e.message);
            assert!(!e.message.contains("column"), "{}", e.message);
        }
    }

    #[test]
    fn unparseable_json_is_a_validation_error() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for text in [
            "{\"content\": \"\\ud800\"}",
            "{\"a\": 1",
            "not json",
            deep.as_str(),
            "",
        ] {
            let e = json(text).expect_err(text);
            assert_eq!((e.status, e.code), (400, "validation_error"));
            assert_eq!(e.field.as_deref(), Some("payload"));
        }
        assert!(json(&deep).expect_err("deep").message.contains("128"));
    }
}
