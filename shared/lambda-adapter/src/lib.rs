//! Translation between Lambda's event shapes and `memory-api`, shared by the function binaries
//! so each `main.rs` stays a few lines of wiring. API Gateway HTTP API events use payload
//! format 2.0; the tenant is read from the JWT authorizer's claims only (never from headers or
//! the body, which a client controls).
//!
//! Every payload is decoded here, by us, never by the runtime: the runtime's own deserializer
//! fails with an undocumented `DeserializeError` whose message quotes the caller's JSON keys. A
//! layer in front of the runtime hands the handler the raw payload text, and [`run`] decodes it
//! with `memory_api::decode`, so every failure is a documented `errorType`.

mod startup;

pub use startup::start;

use std::future::Future;

use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::tower::util::MapRequestLayer;
use lambda_runtime::{layers::TracingLayer, service_fn, Diagnostic, LambdaEvent, Runtime};
use memory_api::background_api::{self, PassCommand, PassMessage, PassOutcome, RefPass};
use memory_api::read_api::{Query, ReadRequest};
use memory_api::{decode, HttpResponse, WireError};
use memory_core::metering::{self, Meter, Usage};
use memory_core::ports::{Clock, EntryStore, PassKind, PassQueue, SystemClock};
use serde::Serialize;
use serde_json::Value;

/// The JWT claim holding the tenant id: `TENANT_CLAIM`, default `tenant_id`.
pub fn tenant_claim_name() -> String {
    std::env::var("TENANT_CLAIM")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "tenant_id".to_owned())
}

/// A numeric setting from the environment, `default` when unset or empty. A value that does not
/// parse fails the function's start-up with the variable's name, rather than running with a
/// default the operator did not choose.
pub fn env_number<T: std::str::FromStr>(
    name: &str,
    default: T,
) -> Result<T, lambda_runtime::Error> {
    match std::env::var(name) {
        Ok(raw) if !raw.trim().is_empty() => raw
            .trim()
            .parse()
            .map_err(|_| format!("{name} must be a number").into()),
        _ => Ok(default),
    }
}

/// Runs a scheduled pass's function (`background_api`): fan-out, batches of queued passes, direct
/// invokes. The first of `passes` is the function's own kind, what a trigger naming none runs.
pub async fn run_pass(
    passes: &[&dyn RefPass],
    store: &dyn EntryStore,
    queue: Option<&dyn PassQueue>,
) -> Result<(), lambda_runtime::Error> {
    run(pass_command, |command| async move {
        let outcome = background_api::handle(passes, store, queue, command).await?;
        Ok(pass_answer(outcome))
    })
    .await
}

/// What a function answers the runtime: an API Gateway response, an SQS partial batch
/// response, or a direct invoke's JSON result.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Answer {
    Http(Box<ApiGatewayV2httpResponse>),
    Batch(SqsBatchResponse),
    Json(Value),
}

/// Runs a function until the runtime stops: each payload is decoded once, by `decode`, into the
/// function's trigger type, which `handler` dispatches on with a `match`.
///
/// A payload that is not UTF-8, not JSON, holds a lone surrogate escape or nests deeper than
/// 128 levels fails the invoke with `validation_error` before `decode` runs; `decode` and
/// handler errors become function errors whose `errorType` is the wire code.
pub async fn run<T, D, F, Fut>(decode: D, handler: F) -> Result<(), lambda_runtime::Error>
where
    D: Fn(Value) -> Result<T, WireError>,
    F: Fn(T) -> Fut,
    Fut: Future<Output = Result<Answer, WireError>>,
{
    let (decode, handler) = (&decode, &handler);
    let metering_on = metering::enabled_from(std::env::var("METERING").ok().as_deref());
    let service = service_fn(move |event: LambdaEvent<Option<String>>| async move {
        // Adapter retries stop in time for this invocation to answer (typed, retryable).
        memory_core::deadline::set_invocation_deadline(event.context.deadline);
        let work = async move {
            let Some(text) = event.payload else {
                return Err(invoke_error(WireError::validation(
                    "payload",
                    "payload is not UTF-8",
                )));
            };
            let trigger = decode::json(&text).and_then(decode).map_err(invoke_error)?;
            handler(trigger).await.map_err(invoke_error)
        };
        let answer = if metering_on {
            let (meter, started) = (Meter::new(), std::time::Instant::now());
            let answer = metering::metered(&meter, work).await;
            flush_usage(&meter, started).await;
            answer
        } else {
            work.await
        };
        let retries = memory_core::deadline::take_retries();
        if retries > 0 {
            memory_api::metrics::emit(&[("StoreRetries", retries)]);
        }
        answer
    });
    Runtime::new(service)
        .layer(TracingLayer::new())
        .layer(MapRequestLayer::new(payload_as_text))
        .run()
        .await
}

/// Ends an invocation's metering (docs/metering.md "What is measured"): one EMF line per
/// tenant touched (and one for work no tenant asked for, with the rest of the invocation's
/// time), and each tenant's counts added to its hour item. The meter's own writes run outside
/// the meter, so they are not counted; a failed write is logged and never fails the
/// invocation, which has already done its work.
async fn flush_usage(meter: &Meter, started: std::time::Instant) {
    let mut taken = meter.take();
    let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let attributed: u64 = taken
        .iter()
        .filter(|(t, _)| t.is_some())
        .map(|(_, u)| u.lambda_ms)
        .sum();
    let rest = elapsed.saturating_sub(attributed);
    let nothing = taken.is_empty();
    match taken.iter_mut().find(|(t, _)| t.is_none()) {
        Some((_, shared)) => shared.lambda_ms = rest,
        None if rest > 0 || nothing => taken.push((
            None,
            Usage {
                lambda_ms: rest,
                requests: 1,
                ..Usage::default()
            },
        )),
        None => {}
    }
    let lines: Vec<(Option<&str>, &Usage)> = taken
        .iter()
        .map(|(t, u)| (t.as_ref().map(|t| t.as_str()), u))
        .collect();
    memory_api::metrics::emit_usage(&lines);
    let Some(sink) = metering::sink() else {
        return;
    };
    let now = SystemClock.now();
    let (hour, shard) = (metering::hour_of(now), metering::shard_of(now));
    for (tenant, usage) in &taken {
        let Some(tenant) = tenant else { continue };
        let at = metering::HourItem {
            tenant,
            hour: &hour,
            shard,
        };
        if let Err(e) = sink.add_hour(at, usage).await {
            tracing::warn!(tenant = %tenant, error = %e, "usage not recorded");
        }
    }
}

/// Re-encodes the invocation body as one JSON string (or `null` when it is not UTF-8), which
/// the runtime's deserializer cannot fail on; [`run`] then parses the text itself.
fn payload_as_text(
    mut invocation: lambda_runtime::LambdaInvocation,
) -> lambda_runtime::LambdaInvocation {
    let encoded = match std::str::from_utf8(&invocation.body) {
        Ok(text) => serde_json::to_vec(text).unwrap_or_else(|_| b"null".to_vec()),
        Err(_) => b"null".to_vec(),
    };
    invocation.body = encoded.into();
    invocation
}

/// Whether a payload is an API Gateway HTTP API event (direct invokes never carry one).
pub fn is_http_event(payload: &Value) -> bool {
    payload
        .get("requestContext")
        .and_then(|c| c.get("http"))
        .is_some()
}

/// An API Gateway request as the handlers use it: method, path, query and verified tenant
/// claim (what the read API routes on), and the body (what forget decodes).
#[derive(Clone, Debug, Default)]
pub struct HttpRequest {
    pub head: ReadRequest,
    pub body: String,
    /// Request headers, names lower-cased (what the MCP transport and the memory tool's
    /// subject header read).
    pub headers: Vec<(String, String)>,
}

impl HttpRequest {
    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An API Gateway request, or the 400 a malformed event is answered with (as an HTTP
/// response, never as a failed invoke).
pub type HttpTrigger = Result<HttpRequest, WireError>;

/// Decodes a payload 2.0 event. The claims are read from the raw JSON first: API Gateway sends
/// them as strings, but a claim that is a number, list, object or null must mean "no tenant"
/// (401), not a failed decode (500), so the authorizer block is taken out before the rest is
/// decoded into the typed event.
pub fn http_request(mut event: Value, claim: &str) -> HttpTrigger {
    let authorizer = event
        .get_mut("requestContext")
        .and_then(|c| c.get_mut("authorizer"))
        .map(Value::take);
    let tenant_claim = authorizer
        .as_ref()
        .and_then(|a| a.get("jwt"))
        .and_then(|jwt| jwt.get("claims"))
        .and_then(|claims| claims.get(claim))
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    let typed: ApiGatewayV2httpRequest = decode::typed(event, "event")?;
    // The raw query string keeps repeated parameters apart (`tag=a&tag=b`); API Gateway's
    // parsed map joins them with commas. The map is the fallback for events built without it.
    let query: Query = match typed.raw_query_string.as_deref() {
        Some(raw) if !raw.is_empty() => form_urlencoded::parse(raw.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
        _ => typed
            .query_string_parameters
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    };
    // Base64 bodies are not expected on these JSON routes and count as empty, which then fails
    // validation with a clear 400.
    let body = if typed.is_base64_encoded {
        String::new()
    } else {
        typed.body.clone().unwrap_or_default()
    };
    let headers = typed
        .headers
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    Ok(HttpRequest {
        headers,
        head: ReadRequest {
            method: typed.request_context.http.method.as_str().to_owned(),
            path: typed
                .raw_path
                .clone()
                .or_else(|| typed.request_context.http.path.clone())
                .unwrap_or_default(),
            query,
            tenant_claim,
        },
        body,
    })
}

/// The function's answer to API Gateway.
pub fn http_response(response: HttpResponse) -> Answer {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (name, value) in &response.headers {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    let mut out = ApiGatewayV2httpResponse::default();
    out.status_code = i64::from(response.status);
    out.headers = headers;
    out.body = Some(Body::Text(response.body.to_string()));
    Answer::Http(Box::new(out))
}

/// An answer whose body is not one of our JSON documents (the MCP transport's own responses):
/// status, headers and text as given; a header that is not valid HTTP is dropped.
pub fn raw_http_response(status: u16, headers: &[(String, String)], body: String) -> Answer {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            map.insert(name, value);
        }
    }
    let mut out = ApiGatewayV2httpResponse::default();
    out.status_code = i64::from(status);
    out.headers = map;
    out.body = Some(Body::Text(body));
    Answer::Http(Box::new(out))
}

/// Answers an HTTP trigger: a malformed event gets its 400, a decoded one `handle`'s response.
pub async fn serve_http<F, Fut>(request: HttpTrigger, handle: F) -> Answer
where
    F: FnOnce(HttpRequest) -> Fut,
    Fut: Future<Output = HttpResponse>,
{
    http_response(match request {
        Ok(request) => handle(request).await,
        Err(e) => HttpResponse::wire_error(&e),
    })
}

/// Decodes a scheduled pass's trigger (`background_api`): the schedule's `{"action":
/// "fan-out"}`, an SQS batch of queued passes, or a direct invoke naming one ref.
pub fn pass_command(payload: Value) -> Result<PassCommand, WireError> {
    let Value::Object(fields) = &payload else {
        return Err(WireError::validation("payload", PASS_EXPECTED));
    };
    if let Some(action) = fields.get("action") {
        if action.as_str() != Some("fan-out") {
            return Err(WireError::validation(
                "action",
                "action: expected \"fan-out\"",
            ));
        }
        return match fields.get("pass") {
            None => Ok(PassCommand::FanOut(None)),
            Some(kind) => kind
                .as_str()
                .and_then(PassKind::parse)
                .map(|kind| PassCommand::FanOut(Some(kind)))
                .ok_or_else(|| {
                    WireError::validation(
                        "pass",
                        "pass: expected \"dream\", \"consolidate\" or \"embed\"",
                    )
                }),
        };
    }
    if fields.contains_key("Records") {
        let batch: SqsEvent = decode::typed(payload, "")?;
        let messages = batch
            .records
            .into_iter()
            .map(|message| PassMessage {
                pass: message
                    .body
                    .as_deref()
                    .and_then(|body| serde_json::from_str(body).ok()),
                message_id: message.message_id.unwrap_or_default(),
            })
            .collect();
        return Ok(PassCommand::Queued(messages));
    }
    if !fields.contains_key("tenantId") || !fields.contains_key("memoryRef") {
        return Err(WireError::validation("payload", PASS_EXPECTED));
    }
    Ok(PassCommand::Run(decode::typed(payload, "")?))
}

const PASS_EXPECTED: &str =
    "payload: expected {\"tenantId\", \"memoryRef\"}, {\"action\": \"fan-out\"} or an SQS batch";

/// A pass's answer: its report, or the partial batch failure SQS retries from.
pub fn pass_answer(outcome: PassOutcome) -> Answer {
    match outcome {
        PassOutcome::Report(report) => Answer::Json(report),
        PassOutcome::FailedMessages(ids) => {
            let mut response = SqsBatchResponse::default();
            for id in ids {
                response.add_failure(id);
            }
            Answer::Batch(response)
        }
    }
}

/// Direct-invoke failures become Lambda function errors whose `errorType` is the envelope
/// code and `errorMessage` the safe message, so callers see a failed invoke, never a payload
/// that could be mistaken for success. A function error holds those two fields only, so the
/// delay an HTTP answer gives in `Retry-After` ends the message of a retryable error in a fixed
/// form a caller can read: ` (retryAfterSeconds: <n>)` ([`RETRY_AFTER_SUFFIX`]).
pub fn invoke_error(e: WireError) -> Diagnostic {
    if e.is_server_error() {
        memory_api::metrics::emit(&[("Failures", 1)]);
    }
    memory_api::metrics::emit_error(e.code);
    let error_message = match e.retry_after {
        Some(seconds) => format!("{}{RETRY_AFTER_SUFFIX}{seconds})", e.message),
        None => e.message,
    };
    Diagnostic {
        error_type: e.code.to_owned(),
        error_message,
    }
}

/// How a retryable direct-invoke error's message ends, before the seconds and `)`.
pub const RETRY_AFTER_SUFFIX: &str = " (retryAfterSeconds: ";

/// The code whose log level follows the configured one: this project's crates (their events
/// carry ids and counts only, never content or secret values; the log scans of the end-to-end
/// suites check it). Every other crate is held at [`DEPENDENCY_LEVEL`] whatever is configured:
/// third-party crates log whole payloads at debug and trace (the invocation event, SDK request
/// and response bodies, an MCP request's arguments), and turning the level up to debug an issue
/// must never put entry content or a run's secrets into CloudWatch. An allowlist, so a new
/// dependency is held down without anyone having to know that it logs payloads.
const OWN_CRATES: [&str; 28] = [
    "lambda_adapter",
    "memory_api",
    "memory_core",
    "memory_aws",
    "memory_guard",
    "dream_service",
    "consolidation_service",
    "commitment_service",
    "commitment_aws",
    "mcp_server",
    "memory_tool",
    "intent_memory",
    "oap_exchange",
    "distill",
    "consolidation",
    "commitments",
    "text_search",
    "search_index",
    "memory_read",
    "memory_write",
    "memory_forget",
    "memory_dream",
    "memory_consolidate",
    "memory_commitments",
    "memory_mcp",
    "memory_intent",
    "memory_intent_auth",
    "memory_exchange",
];

/// The most any other crate may log. WARN keeps the runtime's and the SDKs' failure reports.
const DEPENDENCY_LEVEL: lambda_runtime::tracing::subscriber::filter::LevelFilter =
    lambda_runtime::tracing::subscriber::filter::LevelFilter::WARN;

/// Crates whose warnings quote what a peer sent (the MCP library warns with a rejected
/// request's method name and an error's text): errors only.
const PEER_ECHOING: [&str; 1] = ["rmcp"];

/// Longest log line written, in bytes: a line past it is cut (on a character boundary) and says
/// how much was cut. A log line's size must not be the caller's to choose.
pub const MAX_LOG_LINE_BYTES: usize = 8 * 1024;

/// The filter for a configured `level`: this project's crates at it, everything else at
/// [`DEPENDENCY_LEVEL`] or below, peer-echoing crates at errors only.
fn log_filter(level: &str) -> lambda_runtime::tracing::subscriber::filter::EnvFilter {
    use lambda_runtime::tracing::subscriber::filter::{EnvFilter, LevelFilter};
    let level = level.parse::<LevelFilter>().unwrap_or(LevelFilter::INFO);
    let dependencies = level.min(DEPENDENCY_LEVEL);
    let mut filter = EnvFilter::builder()
        .with_default_directive(dependencies.into())
        .parse_lossy("");
    let own = OWN_CRATES.iter().map(|c| format!("{c}={level}"));
    let echoing = PEER_ECHOING.iter().map(|c| format!("{c}=error"));
    for directive in own.chain(echoing) {
        if let Ok(directive) = directive.parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

/// A writer that cuts each log line at [`MAX_LOG_LINE_BYTES`] (the formatter writes one event
/// per `write_all`).
pub struct BoundedLines<W>(pub W);

impl<W: std::io::Write> std::io::Write for BoundedLines<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if buf.len() <= MAX_LOG_LINE_BYTES {
            return self.0.write_all(buf);
        }
        let mut end = MAX_LOG_LINE_BYTES;
        // Back to a character boundary (a continuation byte is 0b10xx_xxxx).
        while end > 0 && buf[end] & 0xC0 == 0x80 {
            end -= 1;
        }
        self.0.write_all(&buf[..end])?;
        writeln!(self.0, " [log line cut: {} bytes]", buf.len() - end)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// JSON logs through tracing. The level comes from `AWS_LAMBDA_LOG_LEVEL` (Lambda's advanced
/// logging controls) or `RUST_LOG` as a plain level; per-crate directives from the environment
/// are deliberately not read, so the level of dependencies cannot be turned up ([`OWN_CRATES`]).
pub fn init_logging() {
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_default();
    let collector = lambda_runtime::tracing::subscriber::fmt()
        .with_target(false)
        .without_time()
        .with_writer(|| BoundedLines(std::io::stdout()))
        .with_env_filter(log_filter(&level));
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    if json {
        collector.json().init();
    } else {
        collector.init();
    }
    // Seen only at DEBUG: tells a log scan that it read the most verbose level.
    tracing::debug!("logging at debug");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What reaches the log at `level` from events of these targets and levels.
    fn logged(level: &str, events: &[(&str, lambda_runtime::tracing::Level)]) -> String {
        use lambda_runtime::tracing::Level;
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0
                    .lock()
                    .map_err(|_| std::io::Error::other("poisoned"))?
                    .extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let writer = sink.clone();
        let subscriber = lambda_runtime::tracing::subscriber::fmt()
            .with_writer(move || BoundedLines(writer.clone()))
            .with_env_filter(log_filter(level))
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            for (target, lvl) in events {
                // `event!` needs constant targets: one arm per target used below.
                macro_rules! at {
                    ($t:literal) => {
                        match *lvl {
                            Level::ERROR => tracing::error!(target: $t, "{}", $t),
                            Level::WARN => tracing::warn!(target: $t, "{}", $t),
                            Level::INFO => tracing::info!(target: $t, "{}", $t),
                            Level::DEBUG => tracing::debug!(target: $t, "{}", $t),
                            Level::TRACE => tracing::trace!(target: $t, "{}", $t),
                        }
                    };
                }
                match *target {
                    "memory_core::writer" => at!("memory_core::writer"),
                    "aws_smithy_runtime::client" => at!("aws_smithy_runtime::client"),
                    "rmcp::service" => at!("rmcp::service"),
                    "some_new_dependency" => at!("some_new_dependency"),
                    _ => unreachable!("a target the test does not know"),
                }
            }
        });
        let out = sink
            .0
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        out.unwrap_or_default()
    }

    #[test]
    fn only_our_crates_follow_the_level_and_peer_echoing_crates_log_errors_only() {
        use lambda_runtime::tracing::Level;
        let out = logged(
            "debug",
            &[
                ("memory_core::writer", Level::DEBUG),
                ("aws_smithy_runtime::client", Level::DEBUG),
                ("some_new_dependency", Level::INFO),
                ("some_new_dependency", Level::WARN),
                ("rmcp::service", Level::WARN),
                ("rmcp::service", Level::ERROR),
            ],
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(lines[0].contains("DEBUG") && lines[0].contains("memory_core::writer"));
        assert!(lines[1].contains("WARN") && lines[1].contains("some_new_dependency"));
        assert!(lines[2].contains("ERROR") && lines[2].contains("rmcp::service"));
        // At the default level our own debug lines are off too.
        assert!(logged("", &[("memory_core::writer", Level::DEBUG)]).is_empty());
    }

    #[test]
    fn a_retryable_direct_invoke_error_ends_with_its_delay() {
        let busy = WireError::from(memory_core::CoreError::Store(
            memory_core::StoreError::Unavailable {
                op: "put",
                code: "ThrottlingException".into(),
            },
        ));
        let seconds = busy.retry_after.expect("a retryable error has a delay");
        let d = invoke_error(busy);
        assert!(
            d.error_message
                .ends_with(&format!("{RETRY_AFTER_SUFFIX}{seconds})")),
            "{}",
            d.error_message
        );
        let bad = invoke_error(WireError::from(memory_core::CoreError::BadLimit));
        assert!(!bad.error_message.contains("retryAfterSeconds"));
    }

    #[test]
    fn a_long_line_is_cut_on_a_character_boundary() {
        use std::io::Write;
        let mut out = BoundedLines(Vec::new());
        let line = format!("{}\n", "é".repeat(MAX_LOG_LINE_BYTES));
        out.write_all(line.as_bytes()).unwrap();
        let written = String::from_utf8(out.0).expect("still UTF-8");
        assert!(written.len() < MAX_LOG_LINE_BYTES + 64, "{}", written.len());
        assert!(written.ends_with(&format!(
            " [log line cut: {} bytes]\n",
            line.len() - MAX_LOG_LINE_BYTES
        )));
        let mut short = BoundedLines(Vec::new());
        short.write_all(b"short\n").unwrap();
        assert_eq!(short.0, b"short\n");
    }
    use memory_api::background_api::RunRef;
    use serde_json::json;

    #[test]
    fn a_numeric_setting_that_does_not_parse_fails_start_up_by_name() {
        // Names no other test or the process uses.
        std::env::set_var("WOP_TEST_SETTING_A", "45");
        std::env::set_var("WOP_TEST_SETTING_B", "4s");
        std::env::set_var("WOP_TEST_SETTING_C", " ");
        assert_eq!(env_number("WOP_TEST_SETTING_A", 30).ok(), Some(45));
        let bad = env_number("WOP_TEST_SETTING_B", 30)
            .err()
            .map(|e| e.to_string());
        assert_eq!(bad.as_deref(), Some("WOP_TEST_SETTING_B must be a number"));
        assert_eq!(env_number("WOP_TEST_SETTING_C", 30).ok(), Some(30));
        assert_eq!(env_number("WOP_TEST_SETTING_UNSET", 7).ok(), Some(7));
    }

    #[test]
    fn a_pass_trigger_is_decoded_once_into_its_command() {
        assert!(matches!(
            pass_command(json!({"action": "fan-out"})),
            Ok(PassCommand::FanOut(None))
        ));
        assert!(matches!(
            pass_command(json!({"action": "fan-out", "pass": "embed"})),
            Ok(PassCommand::FanOut(Some(PassKind::Embed)))
        ));
        let unknown = pass_command(json!({"action": "fan-out", "pass": "nap"})).err();
        assert_eq!(unknown.and_then(|e| e.field), Some("pass".to_owned()));
        let embed = pass_command(json!({"tenantId": "t1", "memoryRef": "r", "pass": "embed"}));
        assert!(matches!(
            embed,
            Ok(PassCommand::Run(RunRef {
                pass: Some(PassKind::Embed),
                ..
            }))
        ));
        let bad = pass_command(json!({"action": "sweep"})).err();
        assert_eq!(bad.and_then(|e| e.field), Some("action".to_owned()));
        let run = pass_command(json!({"tenantId": "t1", "memoryRef": "r", "tokenBudget": 300}));
        let Ok(PassCommand::Run(run)) = run else {
            panic!("a direct invoke is a run");
        };
        assert_eq!(
            (run.tenant_id.as_str(), run.token_budget),
            ("t1", Some(300))
        );
        let missing = pass_command(json!({"tenantId": "t1"})).err();
        assert_eq!(missing.map(|e| e.code), Some("validation_error"));
        let negative = pass_command(json!({"tenantId": "t1", "memoryRef": "r", "tokenBudget": -1}));
        assert_eq!(
            negative.err().and_then(|e| e.field),
            Some("tokenBudget".to_owned())
        );
    }

    #[test]
    fn an_sqs_batch_becomes_jobs_and_failures_a_partial_batch_response() {
        let queued = json!({"kind": "dream", "tenantId": "t1", "memoryRef": "r"}).to_string();
        let batch = json!({"Records": [
            {"messageId": "m1", "body": queued},
            {"messageId": "m2", "body": "not a queued pass"},
        ]});
        let Ok(PassCommand::Queued(messages)) = pass_command(batch) else {
            panic!("a batch is queued passes");
        };
        assert_eq!(messages.len(), 2);
        assert_eq!(
            messages[0].pass.as_ref().map(|j| j.tenant_id.as_str()),
            Some("t1")
        );
        assert!(messages[1].pass.is_none());
        let answer = pass_answer(PassOutcome::FailedMessages(vec!["m1".into()]));
        assert_eq!(
            serde_json::to_value(answer).ok(),
            Some(json!({"batchItemFailures": [{"itemIdentifier": "m1"}]}))
        );
        let none = pass_answer(PassOutcome::FailedMessages(Vec::new()));
        assert_eq!(
            serde_json::to_value(none).ok(),
            Some(json!({"batchItemFailures": []}))
        );
    }
}
