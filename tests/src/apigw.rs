//! Real API Gateway HTTP API (payload format 2.0) events, as the service sends them to the
//! function after the JWT authorizer has verified the token. [`event`] builds one from a test's
//! terms; [`http_api_event`] from a concrete HTTP request (the local gateway's path), so both
//! share one builder.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{json, Map, Value};

pub struct HttpEvent<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a [(&'a str, &'a str)],
    /// Claims of the verified JWT; `None` models a route reached without claims.
    pub claims: Option<Value>,
    pub body: Option<&'a str>,
}

/// Percent-encodes a query key or value (RFC 3986 unreserved characters stay as they are).
pub fn encode_query_component(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes `%XX` escapes (an incomplete or non-hex escape stays literal); with `plus_as_space`,
/// `+` becomes a space, as API Gateway decodes query parameters. Bytes that are not UTF-8 after
/// decoding become U+FFFD.
pub fn percent_decode(s: &str, plus_as_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => match (
                bytes.get(i + 1).copied().and_then(hex_value),
                bytes.get(i + 2).copied().and_then(hex_value),
            ) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            b'+' if plus_as_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `queryStringParameters` of payload 2.0: keys and values percent-decoded, the values of a
/// repeated key joined with commas in request order, a key without `=` maps to `""`. `None` for
/// an empty query string (API Gateway then omits the field).
pub fn query_string_parameters(raw_query: &str) -> Option<Map<String, Value>> {
    let mut out: Map<String, Value> = Map::new();
    for pair in raw_query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (percent_decode(k, true), percent_decode(v, true));
        match out.get_mut(&k) {
            Some(Value::String(existing)) => {
                existing.push(',');
                existing.push_str(&v);
            }
            _ => {
                out.insert(k, Value::String(v));
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Year, month (1-12) and day of a count of days since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`), so the harness needs no date crate.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The UTC date of `epoch_ms`, `YYYY-MM-DD`.
pub fn utc_date(epoch_ms: i64) -> String {
    let (y, m, d) = civil_from_days(epoch_ms.div_euclid(86_400_000));
    format!("{y:04}-{m:02}-{d:02}")
}

/// RFC 3339 (UTC, with milliseconds) of `epoch_ms`: the form an entry's `expiresAt` takes.
pub fn rfc3339(epoch_ms: i64) -> String {
    let ms = epoch_ms.rem_euclid(86_400_000);
    format!(
        "{}T{:02}:{:02}:{:02}.{:03}Z",
        utc_date(epoch_ms),
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// Common Log Format time of `requestContext.time`, e.g. `22/Nov/2026:10:00:00 +0000`.
pub fn clf_time(epoch_ms: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = epoch_ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{d:02}/{}/{y:04}:{:02}:{:02}:{:02} +0000",
        MONTHS[(m - 1) as usize],
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// One HTTP request as API Gateway has matched it to a route.
pub struct GatewayRequest<'a> {
    pub method: &'a str,
    /// The path as sent (still percent-encoded), without the query string.
    pub raw_path: &'a str,
    /// The query string as sent, without `?`.
    pub raw_query: &'a str,
    /// `GET /v1/host/wop-memory/entries/{id}`, `ANY /v1/host/wop-memory/forget`, ...
    pub route_key: &'a str,
    /// Lower-cased names; a repeated header's values already joined with commas.
    pub headers: &'a [(String, String)],
    /// The `cookie` header's cookies (payload 2.0 moves them out of `headers`).
    pub cookies: &'a [String],
    /// Decoded values of the route's `{name}` variables.
    pub path_parameters: &'a [(String, String)],
    /// The verified JWT's claims; `None` puts no `authorizer` block into the event.
    pub claims: Option<&'a Value>,
    pub body: Option<&'a [u8]>,
    pub source_ip: &'a str,
    pub request_id: &'a str,
    pub time_epoch_ms: i64,
}

/// The payload 2.0 event API Gateway sends for `r`.
pub fn http_api_event(r: &GatewayRequest<'_>) -> Value {
    let headers: Map<String, Value> = r
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let header = |name: &str| {
        r.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let user_agent = header("user-agent").unwrap_or("");
    let domain = header("host").unwrap_or("abc123.execute-api.us-east-1.amazonaws.com");
    let mut event = json!({
        "version": "2.0",
        "routeKey": r.route_key,
        "rawPath": r.raw_path,
        "rawQueryString": r.raw_query,
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": domain,
            "domainPrefix": domain.split('.').next().unwrap_or(domain),
            "http": {
                "method": r.method,
                "path": percent_decode(r.raw_path, false),
                "protocol": "HTTP/1.1",
                "sourceIp": r.source_ip,
                "userAgent": user_agent
            },
            "requestId": r.request_id,
            "routeKey": r.route_key,
            "stage": "$default",
            "time": clf_time(r.time_epoch_ms),
            "timeEpoch": r.time_epoch_ms
        },
        "isBase64Encoded": false
    });
    if !r.cookies.is_empty() {
        event["cookies"] = json!(r.cookies);
    }
    if let Some(query) = query_string_parameters(r.raw_query) {
        event["queryStringParameters"] = Value::Object(query);
    }
    if let Some(claims) = r.claims {
        event["requestContext"]["authorizer"] = json!({"jwt": {"claims": claims, "scopes": null}});
    }
    if !r.path_parameters.is_empty() {
        let params: Map<String, Value> = r
            .path_parameters
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        event["pathParameters"] = Value::Object(params);
    }
    match r.body {
        Some(body) if !body.is_empty() => match std::str::from_utf8(body) {
            Ok(text) => event["body"] = Value::String(text.to_owned()),
            Err(_) => {
                event["body"] =
                    Value::String(base64::engine::general_purpose::STANDARD.encode(body));
                event["isBase64Encoded"] = Value::Bool(true);
            }
        },
        _ => {}
    }
    event
}

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The event for a test's request: fixed client headers, `{id}` routes recognised by path.
pub fn event(e: &HttpEvent<'_>) -> Value {
    let raw_query = e
        .query
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                encode_query_component(k),
                encode_query_component(v)
            )
        })
        .collect::<Vec<_>>()
        .join("&");
    let id = e.path.rsplit_once("/entries/").map(|(_, id)| id);
    let route = if id.is_some() {
        format!("{} /v1/host/wop-memory/entries/{{id}}", e.method)
    } else {
        format!("{} {}", e.method, e.path)
    };
    let headers: Vec<(String, String)> = [
        ("accept", "application/json"),
        ("authorization", "Bearer eyJ-redacted-by-test"),
        ("content-type", "application/json"),
        ("host", "abc123.execute-api.us-east-1.amazonaws.com"),
        ("user-agent", "e2e-test"),
        ("x-forwarded-proto", "https"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let path_parameters: Vec<(String, String)> = id
        .map(|id| vec![("id".to_owned(), id.to_owned())])
        .unwrap_or_default();
    let request_id = format!("req-{}", ulid::Ulid::new());
    let mut event = http_api_event(&GatewayRequest {
        method: e.method,
        raw_path: e.path,
        raw_query: &raw_query,
        route_key: &route,
        headers: &headers,
        cookies: &[],
        path_parameters: &path_parameters,
        claims: e.claims.as_ref(),
        body: e.body.map(str::as_bytes),
        source_ip: "203.0.113.10",
        request_id: &request_id,
        time_epoch_ms: now_ms(),
    });
    // Test bodies are given as text: always sent verbatim (an empty body too).
    if let Some(body) = e.body {
        event["body"] = Value::String(body.to_owned());
    }
    event
}

/// Invokes `function` with an API Gateway event: the status it answered, and its body as JSON
/// (null when there is none or it is not JSON).
pub async fn http_call(function: &crate::LambdaProcess, event: &Value) -> (u64, Value) {
    let response = function.respond(event).await;
    let status = response["statusCode"].as_u64().unwrap_or(0);
    let body =
        serde_json::from_str(response["body"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
    (status, body)
}

/// `GET /v1/host/wop-memory/entries?memoryRef=…` (plus `extra` parameters) as `tenant`'s
/// authorizer would pass it.
pub fn list_event(tenant: &str, memory_ref: &str, extra: &[(&str, &str)]) -> Value {
    let mut query = vec![("memoryRef", memory_ref)];
    query.extend_from_slice(extra);
    event(&HttpEvent {
        method: "GET",
        path: "/v1/host/wop-memory/entries",
        query: &query,
        claims: Some(serde_json::json!({"tenant_id": tenant})),
        body: None,
    })
}

/// `GET /v1/host/wop-memory/entries/{id}?memoryRef=…` as `tenant`'s authorizer would pass it.
pub fn get_event(tenant: &str, memory_ref: &str, id: &str) -> Value {
    event(&HttpEvent {
        method: "GET",
        path: &format!("/v1/host/wop-memory/entries/{id}"),
        query: &[("memoryRef", memory_ref)],
        claims: Some(serde_json::json!({"tenant_id": tenant})),
        body: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_decoded_and_repeats_joined() {
        let q = query_string_parameters("a=1&b=x%20y&a=2&flag&c=1+2&d=%2")
            .unwrap_or_else(|| panic!("parameters"));
        assert_eq!(q["a"], "1,2");
        assert_eq!(q["b"], "x y");
        assert_eq!(q["flag"], "");
        assert_eq!(q["c"], "1 2");
        assert_eq!(q["d"], "%2", "an incomplete escape stays literal");
        assert!(query_string_parameters("").is_none());
        assert_eq!(
            query_string_parameters("r=a%00b").unwrap_or_default()["r"],
            "a\0b"
        );
    }

    #[test]
    fn times_read_like_api_gateway_and_rfc_3339() {
        for (epoch_ms, clf, rfc) in [
            (0, "01/Jan/1970:00:00:00 +0000", "1970-01-01T00:00:00.000Z"),
            (
                1_795_000_000_123,
                "18/Nov/2026:11:06:40 +0000",
                "2026-11-18T11:06:40.123Z",
            ),
            (
                951_868_799_999,
                "29/Feb/2000:23:59:59 +0000",
                "2000-02-29T23:59:59.999Z",
            ),
        ] {
            assert_eq!(clf_time(epoch_ms), clf);
            assert_eq!(rfc3339(epoch_ms), rfc);
            assert_eq!(utc_date(epoch_ms), rfc[..10]);
        }
        assert_eq!(utc_date(951_868_800_000), "2000-03-01", "the next day");
    }

    #[test]
    fn test_events_keep_their_shape() {
        let e = event(&HttpEvent {
            method: "GET",
            path: "/v1/host/wop-memory/entries/01ABC",
            query: &[("memoryRef", "workspaces/t/agents/a/memories")],
            claims: Some(json!({"tenant_id": "t"})),
            body: None,
        });
        assert_eq!(e["routeKey"], "GET /v1/host/wop-memory/entries/{id}");
        assert_eq!(e["pathParameters"]["id"], "01ABC");
        assert_eq!(
            e["queryStringParameters"]["memoryRef"],
            "workspaces/t/agents/a/memories"
        );
        assert_eq!(
            e["rawQueryString"],
            "memoryRef=workspaces%2Ft%2Fagents%2Fa%2Fmemories"
        );
        assert_eq!(
            e["requestContext"]["authorizer"]["jwt"]["claims"]["tenant_id"],
            "t"
        );
        assert!(e.get("body").is_none());
    }
}
