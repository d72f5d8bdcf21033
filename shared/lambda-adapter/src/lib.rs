//! Translation between Lambda's event shapes and `memory-api`, shared by the function binaries
//! so each `main.rs` stays a few lines of wiring. API Gateway HTTP API events use payload
//! format 2.0; the tenant is read from the JWT authorizer's claims only (never from headers or
//! the body, which a client controls).
//!
//! Every payload is decoded here, by us, never by the runtime: the runtime's own deserializer
//! fails with an undocumented `DeserializeError` whose message quotes the caller's JSON keys. A
//! layer in front of the runtime hands the handler the raw payload text, and [`run`] decodes it
//! with `memory_api::decode`, so every failure is a documented `errorType`.

use std::collections::HashMap;
use std::future::Future;

use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use lambda_runtime::tower::util::MapRequestLayer;
use lambda_runtime::{layers::TracingLayer, service_fn, Diagnostic, LambdaEvent, Runtime};
use memory_api::read_api::ReadRequest;
use memory_api::{decode, HttpResponse, WireError};
use serde_json::Value;

/// The JWT claim holding the tenant id: `TENANT_CLAIM`, default `tenant_id`.
pub fn tenant_claim_name() -> String {
    std::env::var("TENANT_CLAIM")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "tenant_id".to_owned())
}

/// Runs a handler over decoded JSON payloads until the runtime stops.
///
/// The handler sees a `serde_json::Value` that parsed; a payload that is not UTF-8, not JSON,
/// holds a lone surrogate escape or nests deeper than 128 levels fails the invoke with
/// `validation_error` before the handler runs. Handler errors become function errors whose
/// `errorType` is the wire code.
pub async fn run<F, Fut>(handler: F) -> Result<(), lambda_runtime::Error>
where
    F: Fn(Value) -> Fut,
    Fut: Future<Output = Result<Value, WireError>>,
{
    let handler = &handler;
    let service = service_fn(move |event: LambdaEvent<Option<String>>| async move {
        // Adapter retries stop in time for this invocation to answer (typed, retryable).
        memory_core::deadline::set_invocation_deadline(event.context.deadline);
        let Some(text) = event.payload else {
            return Err(invoke_error(WireError::validation(
                "payload",
                "payload is not UTF-8",
            )));
        };
        let value = decode::json(&text).map_err(invoke_error)?;
        handler(value).await.map_err(invoke_error)
    });
    Runtime::new(service)
        .layer(TracingLayer::new())
        .layer(MapRequestLayer::new(payload_as_text))
        .run()
        .await
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
}

/// Decodes a payload 2.0 event. The claims are read from the raw JSON first: API Gateway sends
/// them as strings, but a claim that is a number, list, object or null must mean "no tenant"
/// (401), not a failed decode (500), so the authorizer block is taken out before the rest is
/// decoded into the typed event.
pub fn http_request(mut event: Value, claim: &str) -> Result<HttpRequest, WireError> {
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
    let query: HashMap<String, String> = typed
        .query_string_parameters
        .iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    // Base64 bodies are not expected on these JSON routes and count as empty, which then fails
    // validation with a clear 400.
    let body = if typed.is_base64_encoded {
        String::new()
    } else {
        typed.body.clone().unwrap_or_default()
    };
    Ok(HttpRequest {
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
pub fn http_response(response: HttpResponse) -> Result<Value, WireError> {
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
    serde_json::to_value(out).map_err(|_| WireError::internal())
}

/// Decodes an HTTP event, answering a malformed one with its 400 instead of failing the invoke.
pub async fn serve_http<F, Fut>(event: Value, claim: &str, handle: F) -> Result<Value, WireError>
where
    F: FnOnce(HttpRequest) -> Fut,
    Fut: Future<Output = HttpResponse>,
{
    let response = match http_request(event, claim) {
        Ok(request) => handle(request).await,
        Err(e) => HttpResponse::wire_error(&e),
    };
    http_response(response)
}

/// Direct-invoke failures become Lambda function errors whose `errorType` is the envelope
/// code and `errorMessage` the safe message, so callers see a failed invoke, never a payload
/// that could be mistaken for success.
pub fn invoke_error(e: WireError) -> Diagnostic {
    if e.is_server_error() {
        memory_api::metrics::emit(&[("Failures", 1)]);
    }
    Diagnostic {
        error_type: e.code.to_owned(),
        error_message: e.message,
    }
}

/// Crates that log whole payloads (the invocation event, SDK request and response bodies) at
/// debug or trace. They stay at INFO whatever level is configured: raising the log level to
/// debug an issue must never put entry content or a run's secrets into CloudWatch.
const PAYLOAD_LOGGERS: [&str; 12] = [
    "lambda_runtime",
    "lambda_runtime_api_client",
    "aws_smithy_runtime",
    "aws_smithy_runtime_api",
    "aws_smithy_http_client",
    "aws_smithy_http",
    "aws_config",
    "aws_sdk_dynamodb",
    "aws_sdk_s3",
    "aws_sdk_eventbridge",
    "aws_sdk_sqs",
    "hyper",
];

/// JSON logs through tracing. The level comes from `AWS_LAMBDA_LOG_LEVEL` (Lambda's advanced
/// logging controls) or `RUST_LOG` as a plain level; per-crate directives from the environment
/// are deliberately not read, so the payload loggers above cannot be turned up.
pub fn init_logging() {
    use lambda_runtime::tracing::subscriber::filter::{EnvFilter, LevelFilter};
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|l| l.parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    let mut filter = EnvFilter::builder()
        .with_default_directive(level.into())
        .parse_lossy("");
    for target in PAYLOAD_LOGGERS {
        if let Ok(directive) = format!("{target}=info").parse() {
            filter = filter.add_directive(directive);
        }
    }
    let collector = lambda_runtime::tracing::subscriber::fmt()
        .with_target(false)
        .without_time()
        .with_env_filter(filter);
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    if json {
        collector.json().init();
    } else {
        collector.init();
    }
}
