//! Real API Gateway HTTP API (payload format 2.0) events, as the service sends them to the
//! function after the JWT authorizer has verified the token.

use serde_json::{json, Value};

pub struct HttpEvent<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a [(&'a str, &'a str)],
    /// Claims of the verified JWT; `None` models a route reached without claims.
    pub claims: Option<Value>,
    pub body: Option<&'a str>,
}

fn encode_query_component(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

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
    let query: serde_json::Map<String, Value> = e
        .query
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
        .collect();
    let route = if e.path.contains("/entries/") {
        format!("{} /v1/host/wop-memory/entries/{{id}}", e.method)
    } else {
        format!("{} {}", e.method, e.path)
    };
    let mut event = json!({
        "version": "2.0",
        "routeKey": route,
        "rawPath": e.path,
        "rawQueryString": raw_query,
        "headers": {
            "accept": "application/json",
            "authorization": "Bearer eyJ-redacted-by-test",
            "content-type": "application/json",
            "host": "abc123.execute-api.us-east-1.amazonaws.com",
            "user-agent": "e2e-test",
            "x-forwarded-proto": "https"
        },
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "abc123",
            "http": {
                "method": e.method,
                "path": e.path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.10",
                "userAgent": "e2e-test"
            },
            "requestId": format!("req-{}", ulid::Ulid::new()),
            "routeKey": route,
            "stage": "$default",
            "time": "22/Nov/2026:10:00:00 +0000",
            "timeEpoch": 1_795_000_000_000_i64
        },
        "isBase64Encoded": false
    });
    if !query.is_empty() {
        event["queryStringParameters"] = Value::Object(query);
    }
    if let Some(claims) = &e.claims {
        event["requestContext"]["authorizer"] = json!({"jwt": {"claims": claims, "scopes": null}});
    }
    if let Some(id) = e.path.rsplit_once("/entries/").map(|(_, id)| id) {
        event["pathParameters"] = json!({"id": id});
    }
    if let Some(body) = e.body {
        event["body"] = Value::String(body.to_owned());
    }
    event
}
