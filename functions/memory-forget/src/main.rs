//! `memory-forget`: tenant-scoped delete-by-subject, by direct invoke (`{"tenantId",
//! "subject"}`) or through `POST /v1/host/wop-memory/forget` (tenant from the JWT).

use std::sync::Arc;

use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use lambda_runtime::{service_fn, Diagnostic, Error, LambdaEvent};
use memory_aws::AwsPorts;
use memory_core::commitment_firing::CommitmentForgetHook;
use memory_core::dream::DerivedForgetHook;
use memory_core::forget::Forgetter;
use memory_core::ports::SystemClock;
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_adapter::init_logging();
    let ports = AwsPorts::from_env().await?;
    let clock = Arc::new(SystemClock);
    let forgetter = Forgetter::new(ports.entries.clone(), ports.events, clock.clone())
        .with_hook(Arc::new(DerivedForgetHook {
            store: ports.entries,
            archives: ports.archives,
            clock,
        }))
        .with_hook(Arc::new(CommitmentForgetHook(ports.commitments)));
    let claim = lambda_adapter::tenant_claim_name();
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| {
        let (forgetter, claim) = (&forgetter, &claim);
        async move {
            // API Gateway events carry a requestContext; direct invokes never do.
            if event.payload.get("requestContext").is_some() {
                let http: ApiGatewayV2httpRequest =
                    serde_json::from_value(event.payload).map_err(|_| Diagnostic {
                        error_type: "invalid_request".into(),
                        error_message: "malformed API Gateway event".into(),
                    })?;
                let response = memory_api::forget_api::handle_http(
                    forgetter,
                    lambda_adapter::tenant_claim(&http, claim).as_deref(),
                    lambda_adapter::body_text(&http),
                )
                .await;
                return serde_json::to_value(lambda_adapter::http_response(response)).map_err(
                    |_| Diagnostic {
                        error_type: "internal".into(),
                        error_message: "response encoding failed".into(),
                    },
                );
            }
            memory_api::forget_api::handle_direct(forgetter, event.payload)
                .await
                .map_err(lambda_adapter::invoke_error)
        }
    }))
    .await
}
