//! Translation between Lambda's event shapes and `memory-api`, shared by the function binaries
//! so each `main.rs` stays a few lines of wiring. API Gateway HTTP API events use payload
//! format 2.0; the tenant is read from the JWT authorizer's claims only (never from headers or
//! the body, which a client controls).

use std::collections::HashMap;

use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use lambda_runtime::Diagnostic;
use memory_api::read_api::ReadRequest;
use memory_api::HttpResponse;
use memory_core::CoreError;

/// The JWT claim holding the tenant id: `TENANT_CLAIM`, default `tenant_id`.
pub fn tenant_claim_name() -> String {
    std::env::var("TENANT_CLAIM")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "tenant_id".to_owned())
}

/// The verified tenant claim of the request, if the authorizer supplied one.
pub fn tenant_claim(event: &ApiGatewayV2httpRequest, claim: &str) -> Option<String> {
    event
        .request_context
        .authorizer
        .as_ref()
        .and_then(|a| a.jwt.as_ref())
        .and_then(|jwt| jwt.claims.get(claim))
        .filter(|v| !v.is_empty())
        .cloned()
}

pub fn read_request(event: &ApiGatewayV2httpRequest, claim: &str) -> ReadRequest {
    let query: HashMap<String, String> = event
        .query_string_parameters
        .iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    ReadRequest {
        method: event.request_context.http.method.as_str().to_owned(),
        path: event
            .raw_path
            .clone()
            .or_else(|| event.request_context.http.path.clone())
            .unwrap_or_default(),
        query,
        tenant_claim: tenant_claim(event, claim),
    }
}

/// The request body as text; base64 bodies are not expected on these JSON routes and are
/// treated as empty (which then fails validation with a clear 400).
pub fn body_text(event: &ApiGatewayV2httpRequest) -> &str {
    if event.is_base64_encoded {
        ""
    } else {
        event.body.as_deref().unwrap_or("")
    }
}

pub fn http_response(response: HttpResponse) -> ApiGatewayV2httpResponse {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let mut out = ApiGatewayV2httpResponse::default();
    out.status_code = i64::from(response.status);
    out.headers = headers;
    out.body = Some(Body::Text(response.body.to_string()));
    out
}

/// Direct-invoke failures become Lambda function errors whose `errorType` is the envelope
/// code and `errorMessage` the safe message, so callers see a failed invoke, never a payload
/// that could be mistaken for success.
pub fn invoke_error(e: CoreError) -> Diagnostic {
    if e.http_status() >= 500 {
        tracing::error!(error = %e, "invoke failed");
        memory_api::metrics::emit(&[("Failures", 1)]);
    }
    Diagnostic {
        error_type: e.code().to_owned(),
        error_message: e.public_message(),
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
