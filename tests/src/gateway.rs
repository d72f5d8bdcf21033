//! A local stand-in for the two AWS front doors of wop-memory, in front of the real function
//! binaries (each run by [`LambdaProcess`], i.e. behind a local Lambda Runtime API):
//!
//! - **API Gateway HTTP API** (payload format 2.0) with the routes of `template.yaml`:
//!   `GET /v1/host/wop-memory/entries`, `GET /v1/host/wop-memory/entries/{id}` and
//!   `ANY /v1/host/wop-memory/forget`, `ANY /v1/host/wop-memory/mcp` and
//!   `ANY /v1/host/wop-memory/memory-tool` (memory-mcp) behind the JWT authorizer, `GET
//!   /v1/host/wop-memory/capabilities` without one. Any other method or path gets API Gateway's
//!   own `404 {"message":"Not Found"}`; a failed function `500 {"message":"Internal Server
//!   Error"}`; a function that does not answer within the integration timeout `503`.
//! - **Lambda Invoke API**: `POST /2015-03-31/functions/{name}/invocations`, so boto3's real
//!   `lambda` client (with `endpoint_url` = this gateway) can invoke the functions directly.
//!
//! Deviations from AWS are deliberate and documented where they are made: [`jwt_claims`]
//! (requests without a decodable token reach the function), `Gateway::invoke_api` (payloads
//! that are not JSON reach the function), no stage other than `$default`, no CORS, no
//! throttling, no payload size limits beyond a 10 MiB cap.
//!
//! The JWT authorizer stand-in decodes the token's payload and passes its claims as they are;
//! it verifies no signature, issuer, audience or expiry (on AWS the authorizer does, and a
//! request with a bad token never reaches the function). See [`jwt_claims`] for the one
//! deliberate difference in what reaches the function.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::apigw::{http_api_event, percent_decode, GatewayRequest};
use crate::{LambdaProcess, Outcome};

/// The function binaries the gateway starts, in `template.yaml` order.
pub const FUNCTIONS: [&str; 10] = [
    "memory-read",
    "memory-write",
    "memory-forget",
    "memory-dream",
    "memory-consolidate",
    "memory-commitments",
    "memory-mcp",
    "memory-intent",
    "memory-intent-auth",
    "memory-exchange",
];

/// The OpenIntent door's routes (`ANY /api/v1/{proxy+}` in `template.yaml`), behind the
/// Lambda authorizer `memory-intent-auth`.
const INTENT_PREFIX: &str = "/api/v1/";
const INTENT_AUTHORIZER: &str = "memory-intent-auth";
/// How long an authorizer answer is reused for one `X-API-Key` + `X-Agent-ID` pair: the
/// template's `AuthorizerResultTtlInSeconds`, unless `AUTHORIZER_CACHE_SECONDS` says otherwise
/// (tests of revocation shorten it).
const AUTHORIZER_CACHE_DEFAULT_SECONDS: u64 = 60;

/// An authorizer answer's cache key: the identity sources (`X-API-Key`, `X-Agent-ID`).
type Identity = (String, String);

/// API Gateway's maximum integration timeout for HTTP APIs.
const HTTP_INTEGRATION_TIMEOUT: Duration = Duration::from_secs(30);
/// A direct invoke waits as long as the longest function timeout in `template.yaml` allows.
const INVOKE_TIMEOUT: Duration = Duration::from_secs(120);
/// Request bodies above this are refused (API Gateway: 10 MB; Lambda payloads: 6 MB).
const MAX_BODY: usize = 10 * 1024 * 1024;
const MAX_HEADER_LINE: usize = 64 * 1024;
const MAX_HEADERS: usize = 200;
const BASE: &str = "/v1/host/wop-memory";

/// One parsed HTTP/1.1 request.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub method: String,
    /// The request target as sent: path and query string.
    pub target: String,
    /// Names lower-cased, in arrival order (repeats kept).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub http10: bool,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn keep_alive(&self) -> bool {
        let connection = self.header("connection").unwrap_or("").to_ascii_lowercase();
        if self.http10 {
            connection.contains("keep-alive")
        } else {
            !connection.contains("close")
        }
    }
}

/// One HTTP response.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    fn json(status: u16, body: &Value) -> Response {
        Response {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// API Gateway's own answers (they never reach a function).
pub fn not_found() -> Response {
    Response::json(404, &json!({"message": "Not Found"}))
}

fn internal_server_error() -> Response {
    Response::json(500, &json!({"message": "Internal Server Error"}))
}

fn service_unavailable() -> Response {
    Response::json(503, &json!({"message": "Service Unavailable"}))
}

/// A route of the HTTP API, as `template.yaml` declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub function: &'static str,
    /// `GET /v1/host/wop-memory/entries/{id}`, `ANY /v1/host/wop-memory/forget`, ...
    pub route_key: &'static str,
    /// Behind the JWT authorizer.
    pub authorized: bool,
    /// Behind the Lambda authorizer of the OpenIntent door instead.
    pub lambda_authorized: bool,
    /// Decoded values of the route's path variables.
    pub path_parameters: Vec<(String, String)>,
}

/// Matches a request against the HTTP API's routes. Matching is per path segment on the
/// decoded segment; `{id}` is exactly one non-empty segment (as API Gateway's path variables).
pub fn match_route(method: &str, raw_path: &str) -> Option<Route> {
    if let Some(rest) = raw_path.strip_prefix(INTENT_PREFIX) {
        return (!rest.is_empty()).then(|| Route {
            function: "memory-intent",
            route_key: "ANY /api/v1/{proxy+}",
            authorized: false,
            lambda_authorized: true,
            path_parameters: vec![("proxy".to_owned(), percent_decode(rest, false))],
        });
    }
    if let Some(route) = exchange_route(method, raw_path) {
        return Some(route);
    }
    let rest = raw_path.strip_prefix(BASE)?.strip_prefix('/')?;
    let segments: Vec<String> = rest.split('/').map(|s| percent_decode(s, false)).collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    let route = |function, route_key, authorized, path_parameters| Route {
        function,
        route_key,
        authorized,
        lambda_authorized: false,
        path_parameters,
    };
    match (method, segs.as_slice()) {
        ("GET", ["entries"]) => Some(route(
            "memory-read",
            "GET /v1/host/wop-memory/entries",
            true,
            vec![],
        )),
        ("GET", ["search"]) => Some(route(
            "memory-read",
            "GET /v1/host/wop-memory/search",
            true,
            vec![],
        )),
        ("GET", ["entries", id]) if !id.is_empty() => Some(route(
            "memory-read",
            "GET /v1/host/wop-memory/entries/{id}",
            true,
            vec![("id".to_owned(), (*id).to_owned())],
        )),
        (_, ["forget"]) => Some(route(
            "memory-forget",
            "ANY /v1/host/wop-memory/forget",
            true,
            vec![],
        )),
        (_, ["mcp"]) => Some(route(
            "memory-mcp",
            "ANY /v1/host/wop-memory/mcp",
            true,
            vec![],
        )),
        (_, ["memory-tool"]) => Some(route(
            "memory-mcp",
            "ANY /v1/host/wop-memory/memory-tool",
            true,
            vec![],
        )),
        ("GET", ["capabilities"]) => Some(route(
            "memory-read",
            "GET /v1/host/wop-memory/capabilities",
            false,
            vec![],
        )),
        _ => None,
    }
}

/// The OAP exchange door's routes (`memory-exchange` in `template.yaml`): the two public
/// documents and the grantee's query without an authorizer (the grant is the credential, checked
/// by the function), grant, revoke and receipts behind the JWT authorizer.
fn exchange_route(method: &str, raw_path: &str) -> Option<Route> {
    let route = |route_key, authorized, path_parameters| Route {
        function: "memory-exchange",
        route_key,
        authorized,
        lambda_authorized: false,
        path_parameters,
    };
    let segments: Vec<String> = raw_path
        .strip_prefix('/')?
        .split('/')
        .map(|s| percent_decode(s, false))
        .collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    match (method, segs.as_slice()) {
        ("GET", [".well-known", "oap-memory.json"]) => {
            Some(route("GET /.well-known/oap-memory.json", false, vec![]))
        }
        ("GET", [".well-known", "did.json"]) => {
            Some(route("GET /.well-known/did.json", false, vec![]))
        }
        ("POST", ["oap", "memory", "query"]) => {
            Some(route("POST /oap/memory/query", false, vec![]))
        }
        ("POST", ["oap", "memory", "grant"]) => Some(route("POST /oap/memory/grant", true, vec![])),
        ("POST", ["oap", "memory", "grant", id, "revoke"]) if !id.is_empty() => Some(route(
            "POST /oap/memory/grant/{id}/revoke",
            true,
            vec![("id".to_owned(), (*id).to_owned())],
        )),
        ("GET", ["oap", "memory", "receipts"]) => {
            Some(route("GET /oap/memory/receipts", true, vec![]))
        }
        ("POST", ["oap", "memory", "export"]) => {
            Some(route("POST /oap/memory/export", true, vec![]))
        }
        ("POST", ["oap", "memory", "import"]) => {
            Some(route("POST /oap/memory/import", true, vec![]))
        }
        _ => None,
    }
}

/// The JWT authorizer stand-in: the claims of `Authorization: Bearer <jwt>` (the `Bearer`
/// prefix is optional, as for API Gateway), with every value as the token carries it (numbers,
/// lists, objects and null stay non-strings, so the functions are tested against claims they
/// must not trust blindly; as far as we know, API Gateway's JWT authorizer hands claims on as
/// strings, but a function must not depend on that, and a direct invoke of the function can carry
/// anything). The signature is not verified.
///
/// DELIBERATE DEVIATION from API Gateway: when the header is missing or the token cannot be
/// decoded (not three segments, header or payload not base64url JSON objects), API Gateway
/// answers `401 {"message":"Unauthorized"}` itself. This stand-in returns `None` instead and
/// the request is forwarded WITHOUT an `authorizer` block, so the tests see (and check) the
/// function's own 401 answer for a request that carries no verified tenant.
pub fn jwt_claims(authorization: Option<&str>) -> Option<Map<String, Value>> {
    let value = authorization?.trim();
    let token = match value.get(..7) {
        Some(prefix) if prefix.eq_ignore_ascii_case("bearer ") => value[7..].trim(),
        _ => value,
    };
    let mut parts = token.split('.');
    let (header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let decode = |segment: &str| -> Option<Map<String, Value>> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(segment.trim_end_matches('='))
            .ok()?;
        match serde_json::from_slice(&bytes).ok()? {
            Value::Object(m) => Some(m),
            _ => None,
        }
    };
    decode(header)?;
    decode(payload)
}

/// Headers as API Gateway forwards them in payload 2.0: names lower-cased, a repeated header's
/// values joined with commas, cookies moved to `cookies`, hop-by-hop headers dropped, and the
/// `x-forwarded-*` / trace headers API Gateway adds.
fn forwarded_headers(
    request: &Request,
    peer: &SocketAddr,
    trace_id: &str,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut cookies = Vec::new();
    for (k, v) in &request.headers {
        match k.as_str() {
            "cookie" => cookies.extend(
                v.split(';')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned),
            ),
            "connection" | "keep-alive" | "transfer-encoding" | "te" | "upgrade" | "expect"
            | "proxy-connection" => {}
            _ => match headers.iter_mut().find(|(name, _)| name == k) {
                Some((_, existing)) => {
                    existing.push(',');
                    existing.push_str(v);
                }
                None => headers.push((k.clone(), v.clone())),
            },
        }
    }
    if request.body.is_empty() {
        headers.retain(|(k, _)| k != "content-length");
    } else if !headers.iter().any(|(k, _)| k == "content-length") {
        headers.push(("content-length".into(), request.body.len().to_string()));
    }
    headers.push(("x-amzn-trace-id".into(), format!("Root={trace_id}")));
    headers.push(("x-forwarded-for".into(), peer.ip().to_string()));
    headers.push(("x-forwarded-port".into(), peer.port().to_string()));
    headers.push(("x-forwarded-proto".into(), "http".into()));
    (headers, cookies)
}

/// Translates the function's answer (payload 2.0 response) into the HTTP response API Gateway
/// sends: a JSON object with `statusCode` is the structured format (`headers`,
/// `multiValueHeaders`, `cookies`, `body`, `isBase64Encoded`); anything else is a 200 whose body
/// is the returned JSON. An unusable structured answer is API Gateway's 500.
pub fn translate_response(outcome: &Value) -> Response {
    let Some(status) = outcome.get("statusCode") else {
        return Response::json(200, outcome);
    };
    let Some(status) = status
        .as_u64()
        .or_else(|| status.as_str().and_then(|s| s.parse().ok()))
        .filter(|s| (100..=599).contains(s))
    else {
        return internal_server_error();
    };
    let mut headers: Vec<(String, String)> = Vec::new();
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if let Some(map) = outcome.get("headers").and_then(Value::as_object) {
        for (k, v) in map {
            headers.push((k.to_ascii_lowercase(), text(v)));
        }
    }
    if let Some(map) = outcome.get("multiValueHeaders").and_then(Value::as_object) {
        for (k, values) in map {
            let name = k.to_ascii_lowercase();
            if headers.iter().any(|(n, _)| *n == name) {
                continue;
            }
            for v in values.as_array().into_iter().flatten() {
                headers.push((name.clone(), text(v)));
            }
        }
    }
    for cookie in outcome
        .get("cookies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        headers.push(("set-cookie".into(), text(cookie)));
    }
    let body = match outcome.get("body") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) if outcome["isBase64Encoded"] == true => {
            match base64::engine::general_purpose::STANDARD.decode(s) {
                Ok(bytes) => bytes,
                Err(_) => return internal_server_error(),
            }
        }
        Some(Value::String(s)) => s.clone().into_bytes(),
        Some(other) => other.to_string().into_bytes(),
    };
    Response {
        status: status as u16,
        headers,
        body,
    }
}

/// The function an Invoke API name addresses: a binary name, or any name or ARN ending with
/// one (`wop-memory-dev-memory-write`, `arn:aws:lambda:...:function:memory-write`), optionally
/// with a `:qualifier`.
pub fn function_for_name(name: &str) -> Option<&'static str> {
    let matches = |n: &str| FUNCTIONS.iter().copied().find(|f| n.ends_with(f));
    matches(name).or_else(|| name.rsplit_once(':').and_then(|(n, _)| matches(n)))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The running gateway: the six functions and where to record exchanges.
pub struct Gateway {
    functions: HashMap<&'static str, LambdaProcess>,
    exchanges: Option<PathBuf>,
    /// Lambda authorizer answers by identity source, with when they were given.
    authorizer_cache: std::sync::Mutex<HashMap<Identity, (std::time::Instant, Option<Value>)>>,
    authorizer_ttl: Duration,
}

impl Gateway {
    /// Starts every function with the inherited environment (`extra_env` on top) and waits
    /// until each polls its Runtime API.
    pub async fn start(
        exchanges: Option<PathBuf>,
        extra_env: &[(&str, &str)],
    ) -> Result<Gateway, String> {
        let mut functions = HashMap::new();
        for name in FUNCTIONS {
            functions.insert(name, LambdaProcess::start(name, extra_env).await);
        }
        for (name, process) in &functions {
            if process
                .ready_within(Duration::from_secs(60))
                .await
                .is_none()
            {
                return Err(format!(
                    "{name} never polled its Runtime API; logs:\n{}",
                    process.logs()
                ));
            }
        }
        if let Some(dir) = &exchanges {
            std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        }
        let ttl = std::env::var("AUTHORIZER_CACHE_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(AUTHORIZER_CACHE_DEFAULT_SECONDS);
        Ok(Gateway {
            functions,
            exchanges,
            authorizer_cache: std::sync::Mutex::new(HashMap::new()),
            authorizer_ttl: Duration::from_secs(ttl),
        })
    }

    /// Every function's captured stdout and stderr, one section per function.
    pub fn logs(&self) -> String {
        FUNCTIONS
            .iter()
            .filter_map(|name| self.functions.get(name).map(|p| (name, p.logs())))
            .map(|(name, logs)| format!("===== {name} =====\n{logs}\n"))
            .collect()
    }

    /// Accepts connections until the listener fails; each connection is served concurrently.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        while let Ok((stream, peer)) = listener.accept().await {
            let gateway = self.clone();
            tokio::spawn(async move {
                if let Err(e) = gateway.serve_connection(stream, peer).await {
                    if e.kind() != std::io::ErrorKind::UnexpectedEof {
                        eprintln!("local_gateway: connection from {peer}: {e}");
                    }
                }
            });
        }
    }

    async fn serve_connection(&self, stream: TcpStream, peer: SocketAddr) -> std::io::Result<()> {
        let mut stream = BufReader::new(stream);
        loop {
            let request = match read_request(&mut stream).await {
                Ok(Some(r)) => r,
                Ok(None) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    let response = Response::json(400, &json!({"message": "Bad Request"}));
                    write_response(stream.get_mut(), &response, false, false).await?;
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            let keep_alive = request.keep_alive();
            let response = self.handle(&request, &peer).await;
            let path = request.target.split('?').next().unwrap_or("");
            eprintln!(
                "local_gateway: access {} {} {}",
                request.method, path, response.status
            );
            write_response(
                stream.get_mut(),
                &response,
                keep_alive,
                request.method == "HEAD",
            )
            .await?;
            if !keep_alive {
                return Ok(());
            }
        }
    }

    /// Answers one request: the Invoke API, a route of the HTTP API, or API Gateway's 404.
    pub async fn handle(&self, request: &Request, peer: &SocketAddr) -> Response {
        let (raw_path, raw_query) = request
            .target
            .split_once('?')
            .unwrap_or((request.target.as_str(), ""));
        if let Some(name) = raw_path
            .strip_prefix("/2015-03-31/functions/")
            .and_then(|rest| rest.strip_suffix("/invocations"))
        {
            return self.invoke_api(request, &percent_decode(name, false)).await;
        }
        let Some(route) = match_route(&request.method, raw_path) else {
            return not_found();
        };
        let Some(process) = self.functions.get(route.function) else {
            return internal_server_error();
        };
        let claims = if route.authorized {
            jwt_claims(request.header("authorization")).map(Value::Object)
        } else {
            None
        };
        let request_id = format!("{}", ulid::Ulid::new());
        let trace_id = format!("1-{:08x}-{}", now_ms() / 1000, &request_id[..24]);
        let (headers, cookies) = forwarded_headers(request, peer, &trace_id);
        let lambda_context = if route.lambda_authorized {
            match self.lambda_authorize(&route, raw_path, &headers).await {
                Ok(context) => Some(context),
                Err(response) => {
                    self.record(&request.method, raw_path, &response);
                    return response;
                }
            }
        } else {
            None
        };
        let mut event = http_api_event(&GatewayRequest {
            method: &request.method,
            raw_path,
            raw_query,
            route_key: route.route_key,
            headers: &headers,
            cookies: &cookies,
            path_parameters: &route.path_parameters,
            claims: claims.as_ref(),
            body: Some(&request.body),
            source_ip: &peer.ip().to_string(),
            request_id: &request_id,
            time_epoch_ms: now_ms(),
        });
        if let Some(context) = lambda_context {
            event["requestContext"]["authorizer"] = json!({"lambda": context});
        }
        let payload = serde_json::to_vec(&event).unwrap_or_default();
        let mut response = match process
            .invoke_bytes(payload, HTTP_INTEGRATION_TIMEOUT)
            .await
        {
            Some(Outcome::Response(answer)) => translate_response(&answer),
            Some(Outcome::Error(_)) => internal_server_error(),
            None => service_unavailable(),
        };
        self.record(&request.method, raw_path, &response);
        response
            .headers
            .push(("apigw-requestid".into(), request_id));
        response
    }

    /// API Gateway's Lambda authorizer (HTTP API, payload 2.0, simple responses): no identity
    /// source header is 401 without a call; a refusal is 403; an authorizer that fails is 500;
    /// answers are cached per identity source for the TTL. The context goes to the function.
    async fn lambda_authorize(
        &self,
        route: &Route,
        raw_path: &str,
        headers: &[(String, String)],
    ) -> Result<Value, Response> {
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        let (Some(key), Some(agent)) = (header("x-api-key"), header("x-agent-id")) else {
            return Err(Response::json(401, &json!({"message": "Unauthorized"})));
        };
        let identity = (key.clone(), agent.clone());
        let cached = self
            .authorizer_cache
            .lock()
            .ok()
            .and_then(|c| c.get(&identity).cloned())
            .filter(|(at, _)| at.elapsed() < self.authorizer_ttl)
            .map(|(_, answer)| answer);
        let answer = match cached {
            Some(answer) => answer,
            None => {
                let Some(process) = self.functions.get(INTENT_AUTHORIZER) else {
                    return Err(internal_server_error());
                };
                let event = json!({
                    "version": "2.0",
                    "type": "REQUEST",
                    "routeArn": format!("arn:aws:execute-api:us-east-1:123456789012:abc123/$default/{}", route.route_key.replace(' ', "")),
                    "identitySource": [key, agent],
                    "routeKey": route.route_key,
                    "rawPath": raw_path,
                    "headers": headers.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<Map<String, Value>>(),
                });
                let payload = serde_json::to_vec(&event).unwrap_or_default();
                let answer = match process
                    .invoke_bytes(payload, HTTP_INTEGRATION_TIMEOUT)
                    .await
                {
                    Some(Outcome::Response(v)) if v["isAuthorized"] == true => {
                        Some(v.get("context").cloned().unwrap_or(json!({})))
                    }
                    Some(Outcome::Response(v)) if v["isAuthorized"] == false => None,
                    _ => return Err(internal_server_error()),
                };
                if let Ok(mut cache) = self.authorizer_cache.lock() {
                    cache.insert(identity, (std::time::Instant::now(), answer.clone()));
                }
                answer
            }
        };
        answer.ok_or_else(|| Response::json(403, &json!({"message": "Forbidden"})))
    }

    /// Keeps an HTTP API exchange with a JSON body for `tests/openapi_check.py`.
    fn record(&self, method: &str, raw_path: &str, response: &Response) {
        let Some(dir) = &self.exchanges else { return };
        let Ok(body) = serde_json::from_slice::<Value>(&response.body) else {
            return;
        };
        let exchange =
            json!({"method": method, "path": raw_path, "status": response.status, "body": body});
        let file = dir.join(format!("{}.json", ulid::Ulid::new()));
        if let Err(e) = std::fs::write(&file, exchange.to_string()) {
            eprintln!("local_gateway: cannot record {}: {e}", file.display());
        }
    }

    /// `POST /2015-03-31/functions/{name}/invocations`: the body is the payload, untouched.
    ///
    /// DEVIATION from the Lambda service: Lambda refuses an `Invoke` whose body is not JSON with
    /// `400 InvalidRequestContentException` before any function runs. The stand-in passes every
    /// byte through, so the tests can check the functions' own decoding of such payloads
    /// (defence in depth; payloads that ARE JSON for Lambda, such as a lone surrogate escape or
    /// deep nesting, reach the function on AWS too).
    async fn invoke_api(&self, request: &Request, name: &str) -> Response {
        let Some(process) = function_for_name(name).and_then(|f| self.functions.get(f)) else {
            let mut r = Response::json(
                404,
                &json!({"Type": "User", "message": "Function not found"}),
            );
            r.headers.push((
                "x-amzn-errortype".into(),
                "ResourceNotFoundException".into(),
            ));
            return r;
        };
        if request.method != "POST" {
            return not_found();
        }
        let request_id = ulid::Ulid::new().to_string();
        let mut headers = vec![
            ("x-amzn-requestid".to_owned(), request_id),
            ("x-amz-executed-version".to_owned(), "$LATEST".to_owned()),
        ];
        match request.header("x-amz-invocation-type").unwrap_or("") {
            "DryRun" => {
                return Response {
                    status: 204,
                    headers,
                    body: Vec::new(),
                }
            }
            "Event" => {
                // Asynchronous: queued, the caller gets 202 at once (LambdaProcess runs it).
                let (payload, function) = (request.body.clone(), process.name().to_owned());
                let outcome = process.invoke_bytes(payload, Duration::ZERO);
                drop(outcome);
                eprintln!("local_gateway: event invoke of {function} queued");
                return Response {
                    status: 202,
                    headers,
                    body: Vec::new(),
                };
            }
            _ => {}
        }
        headers.push(("content-type".into(), "application/json".into()));
        let (body, error) = match process
            .invoke_bytes(request.body.clone(), INVOKE_TIMEOUT)
            .await
        {
            Some(Outcome::Response(v)) => (v, false),
            Some(Outcome::Error(e)) => (e, true),
            None => (
                json!({"errorType": "Sandbox.Timedout", "errorMessage": "Task timed out"}),
                true,
            ),
        };
        if error {
            headers.push(("x-amz-function-error".into(), "Unhandled".into()));
        }
        Response {
            status: 200,
            headers,
            body: serde_json::to_vec(&body).unwrap_or_default(),
        }
    }
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned())
}

async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    let n = (&mut *reader)
        .take(MAX_HEADER_LINE as u64 + 1)
        .read_until(b'\n', &mut line)
        .await?;
    if n == 0 {
        return Ok(None);
    }
    if line.len() > MAX_HEADER_LINE {
        return Err(invalid("header line too long"));
    }
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

/// Reads one HTTP/1.1 request (`Content-Length` or chunked body). `Ok(None)` at a clean end
/// of the connection; `InvalidData` for a request that cannot be parsed.
pub async fn read_request(stream: &mut BufReader<TcpStream>) -> std::io::Result<Option<Request>> {
    let line = loop {
        match read_line(stream).await? {
            None => return Ok(None),
            // Tolerate empty lines between requests (RFC 9112 §2.2).
            Some(l) if l.is_empty() => continue,
            Some(l) => break l,
        }
    };
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next(), parts.next(), parts.next());
    let (Some(method), Some(target), Some(version)) = (method, target, version) else {
        return Err(invalid("malformed request line"));
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Err(invalid("malformed request line"));
    }
    let mut request = Request {
        method: method.to_owned(),
        target: target.to_owned(),
        http10: version == "HTTP/1.0",
        ..Request::default()
    };
    loop {
        let Some(h) = read_line(stream).await? else {
            return Err(invalid("connection closed inside the headers"));
        };
        if h.is_empty() {
            break;
        }
        if request.headers.len() >= MAX_HEADERS {
            return Err(invalid("too many headers"));
        }
        let Some((k, v)) = h.split_once(':') else {
            return Err(invalid("malformed header"));
        };
        request
            .headers
            .push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    if request
        .header("expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    {
        stream
            .get_mut()
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await?;
    }
    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
    if chunked {
        loop {
            let size_line = read_line(stream)
                .await?
                .ok_or_else(|| invalid("connection closed inside a chunked body"))?;
            let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| invalid("bad chunk size"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while read_line(stream).await?.is_some_and(|l| !l.is_empty()) {}
                break;
            }
            if request.body.len() + size > MAX_BODY {
                return Err(invalid("body too large"));
            }
            let start = request.body.len();
            request.body.resize(start + size, 0);
            stream.read_exact(&mut request.body[start..]).await?;
            let mut crlf = [0u8; 2];
            stream.read_exact(&mut crlf).await?;
        }
    } else if let Some(len) = request.header("content-length") {
        let len: usize = len.parse().map_err(|_| invalid("bad content-length"))?;
        if len > MAX_BODY {
            return Err(invalid("body too large"));
        }
        request.body.resize(len, 0);
        stream.read_exact(&mut request.body).await?;
    }
    Ok(Some(request))
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

async fn write_response(
    stream: &mut TcpStream,
    response: &Response,
    keep_alive: bool,
    head: bool,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        response.status,
        reason(response.status)
    );
    for (k, v) in &response.headers {
        if k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("connection") {
            continue;
        }
        // Header values must not smuggle a line break.
        let v: String = v.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!("content-length: {}\r\n", response.body.len()));
    out.push_str(if keep_alive {
        "connection: keep-alive\r\n\r\n"
    } else {
        "connection: close\r\n\r\n"
    });
    let mut bytes = out.into_bytes();
    if !head {
        bytes.extend_from_slice(&response.body);
    }
    stream.write_all(&bytes).await?;
    stream.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(v: &Value) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    }

    fn jwt(claims: &Value) -> String {
        format!(
            "Bearer {}.{}.c2ln",
            b64(&json!({"alg": "HS256", "typ": "JWT"})),
            b64(claims)
        )
    }

    #[test]
    fn routes_mirror_the_template() {
        let r = match_route("GET", "/v1/host/wop-memory/entries").unwrap_or_else(|| panic!());
        assert_eq!(
            (r.function, r.route_key, r.authorized),
            ("memory-read", "GET /v1/host/wop-memory/entries", true)
        );
        let r =
            match_route("GET", "/v1/host/wop-memory/entries/01A%20B").unwrap_or_else(|| panic!());
        assert_eq!(
            r.path_parameters,
            vec![("id".to_owned(), "01A B".to_owned())]
        );
        for m in ["GET", "PUT", "DELETE", "POST"] {
            let r = match_route(m, "/v1/host/wop-memory/forget").unwrap_or_else(|| panic!());
            assert_eq!((r.function, r.authorized), ("memory-forget", true));
        }
        let r = match_route("GET", "/v1/host/wop-memory/capabilities").unwrap_or_else(|| panic!());
        assert!(!r.authorized);
        for (m, p) in [
            ("POST", "/v1/host/wop-memory/entries"),
            ("GET", "/v1/host/wop-memory/entries/"),
            ("GET", "/v1/host/wop-memory/entries/a/b"),
            ("GET", "/v1/host/wop-memory/nope"),
            ("POST", "/v1/host/wop-memory/capabilities"),
            ("GET", "/v1/host/wop-memoryx/entries"),
            ("GET", "/"),
        ] {
            assert_eq!(match_route(m, p), None, "{m} {p}");
        }
    }

    #[test]
    fn claims_pass_through_as_they_are() {
        let claims = json!({"tenant_id": 5, "groups": ["a"], "o": {"k": null}, "n": null});
        let got = jwt_claims(Some(&jwt(&claims))).unwrap_or_default();
        assert_eq!(Value::Object(got), claims);
        let bare = jwt(&json!({"tenant_id": "t"}))[7..].to_owned();
        assert!(
            jwt_claims(Some(&bare)).is_some(),
            "the Bearer prefix is optional"
        );
        for bad in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer a.b"),
            Some("Bearer !!.??.x"),
        ] {
            assert_eq!(jwt_claims(bad), None, "{bad:?}");
        }
        let list = format!(
            "Bearer {}.{}.x",
            b64(&json!({"alg": "none"})),
            b64(&json!([1]))
        );
        assert_eq!(jwt_claims(Some(&list)), None, "claims must be an object");
    }

    #[test]
    fn structured_responses_are_translated() {
        let r = translate_response(&json!({
            "statusCode": 405,
            "headers": {"Content-Type": "application/json", "Allow": "POST"},
            "multiValueHeaders": {"allow": ["POST"], "x-extra": ["1", "2"]},
            "body": "{\"error\":\"validation_error\"}",
            "isBase64Encoded": false
        }));
        assert_eq!(r.status, 405);
        assert_eq!(r.header("allow"), Some("POST"));
        assert_eq!(r.headers.iter().filter(|(k, _)| k == "allow").count(), 1);
        assert_eq!(r.headers.iter().filter(|(k, _)| k == "x-extra").count(), 2);
        assert_eq!(r.body, b"{\"error\":\"validation_error\"}");
        let limited = translate_response(&json!({
            "statusCode": 429,
            "headers": {"content-type": "application/json", "retry-after": "1"},
            "body": "{}"
        }));
        assert_eq!(
            (limited.status, limited.header("Retry-After")),
            (429, Some("1"))
        );
        let b = translate_response(
            &json!({"statusCode": 200, "body": "aGk=", "isBase64Encoded": true}),
        );
        assert_eq!(b.body, b"hi");
        assert_eq!(translate_response(&json!({"a": 1})).status, 200);
        assert_eq!(translate_response(&json!({"statusCode": "x"})).status, 500);
        assert_eq!(translate_response(&json!({"statusCode": 99})).status, 500);
    }

    #[test]
    fn requests_become_payload_2_events() {
        let request = Request {
            method: "GET".into(),
            target: "/v1/host/wop-memory/entries?memoryRef=a%2Fb&tag=x&tag=y".into(),
            headers: vec![
                ("host".into(), "127.0.0.1:9".into()),
                ("accept".into(), "a".into()),
                ("accept".into(), "b".into()),
                ("cookie".into(), "c1=1; c2=2".into()),
                ("connection".into(), "keep-alive".into()),
            ],
            ..Request::default()
        };
        let peer: SocketAddr = "127.0.0.1:5000".parse().unwrap_or_else(|_| panic!());
        let (headers, cookies) = forwarded_headers(&request, &peer, "1-abc");
        assert!(headers.contains(&("accept".to_owned(), "a,b".to_owned())));
        assert!(!headers
            .iter()
            .any(|(k, _)| k == "connection" || k == "cookie"));
        assert_eq!(cookies, vec!["c1=1", "c2=2"]);
        let (raw_path, raw_query) = request.target.split_once('?').unwrap_or_default();
        let claims = json!({"tenant_id": 7});
        let event = http_api_event(&GatewayRequest {
            method: "GET",
            raw_path,
            raw_query,
            route_key: "GET /v1/host/wop-memory/entries",
            headers: &headers,
            cookies: &cookies,
            path_parameters: &[],
            claims: Some(&claims),
            body: Some(b""),
            source_ip: "127.0.0.1",
            request_id: "r",
            time_epoch_ms: 0,
        });
        assert_eq!(event["rawQueryString"], "memoryRef=a%2Fb&tag=x&tag=y");
        assert_eq!(
            event["queryStringParameters"],
            json!({"memoryRef": "a/b", "tag": "x,y"})
        );
        assert_eq!(
            event["requestContext"]["authorizer"]["jwt"]["claims"]["tenant_id"],
            7
        );
        assert_eq!(event["cookies"], json!(["c1=1", "c2=2"]));
        assert!(event.get("body").is_none() && event.get("pathParameters").is_none());
    }

    #[test]
    fn invoke_names_resolve_by_suffix() {
        assert_eq!(function_for_name("memory-write"), Some("memory-write"));
        assert_eq!(
            function_for_name("wop-memory-dev-memory-write"),
            Some("memory-write")
        );
        assert_eq!(
            function_for_name("arn:aws:lambda:us-east-1:1:function:memory-dream:$LATEST"),
            Some("memory-dream")
        );
        assert_eq!(function_for_name("memory-nope"), None);
    }
}
