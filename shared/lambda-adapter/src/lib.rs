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

/// JSON logs through tracing (level from `AWS_LAMBDA_LOG_LEVEL` / `RUST_LOG`).
pub fn init_logging() {
    lambda_runtime::tracing::init_default_subscriber();
}
