//! `memory-read`: the read API behind API Gateway (list, get, capabilities).

use std::sync::Arc;

use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use memory_api::read_api::ReadApi;
use memory_aws::AwsPorts;
use memory_core::capabilities::HOST_MODEL;
use memory_core::ports::SystemClock;
use memory_core::reader::MemoryReader;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_adapter::init_logging();
    let ports = AwsPorts::from_env().await?;
    let api = ReadApi::new(
        MemoryReader::new(ports.entries, Arc::new(SystemClock)),
        HOST_MODEL,
    );
    let claim = lambda_adapter::tenant_claim_name();
    lambda_runtime::run(service_fn(|event: LambdaEvent<ApiGatewayV2httpRequest>| {
        let (api, claim) = (&api, &claim);
        async move {
            let request = lambda_adapter::read_request(&event.payload, claim);
            let response = api.handle(&request).await;
            Ok::<ApiGatewayV2httpResponse, Error>(lambda_adapter::http_response(response))
        }
    }))
    .await
}
