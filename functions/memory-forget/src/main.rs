//! `memory-forget`: tenant-scoped delete-by-subject, by direct invoke (`{"tenantId",
//! "subject"}`) or through `POST /v1/host/wop-memory/forget` (tenant from the JWT).

use lambda_adapter::{Answer, HttpTrigger};
use lambda_runtime::Error;
use memory_api::forget_api::{self, DirectForget};
use memory_api::{decode, WireError};
use memory_aws::AwsPorts;
use serde_json::Value;

fn main() -> Result<(), Error> {
    lambda_adapter::start(serve())
}

async fn serve() -> Result<(), Error> {
    let ports = AwsPorts::from_env().await?;
    let forgetter = memory_forget::forgetter(&ports);
    let claim = lambda_adapter::tenant_claim_name();
    let (forgetter, claim) = (&forgetter, claim.as_str());
    lambda_adapter::run(
        |payload| Trigger::decode(payload, claim),
        |trigger| async move {
            Ok(match trigger {
                Trigger::Http(request) => {
                    lambda_adapter::serve_http(request, |r| async move {
                        forget_api::handle_http(
                            forgetter,
                            &r.head.method,
                            r.head.tenant_claim.as_deref(),
                            &r.body,
                        )
                        .await
                    })
                    .await
                }
                Trigger::Direct(request) => {
                    Answer::Json(forget_api::handle_direct(forgetter, request).await?)
                }
            })
        },
    )
    .await
}

/// What invokes this function.
enum Trigger {
    /// `POST /v1/host/wop-memory/forget`, tenant from the JWT.
    Http(HttpTrigger),
    /// The run engine's `{"tenantId", "subject"}`.
    Direct(DirectForget),
}

impl Trigger {
    fn decode(payload: Value, claim: &str) -> Result<Self, WireError> {
        // API Gateway events carry requestContext.http; direct invokes never do.
        if lambda_adapter::is_http_event(&payload) {
            Ok(Trigger::Http(lambda_adapter::http_request(payload, claim)))
        } else {
            Ok(Trigger::Direct(decode::typed(payload, "")?))
        }
    }
}
