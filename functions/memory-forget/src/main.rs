//! `memory-forget`: tenant-scoped delete-by-subject, by direct invoke (`{"tenantId",
//! "subject"}`) or through `POST /v1/host/wop-memory/forget` (tenant from the JWT).

use std::sync::Arc;

use commitment_aws::DynamoCommitmentStore;
use commitment_service::firing::CommitmentForgetHook;
use dream_service::dream::DerivedForgetHook;
use lambda_runtime::Error;
use memory_aws::AwsPorts;
use memory_core::forget::Forgetter;
use memory_core::ports::SystemClock;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_adapter::init_logging();
    let ports = AwsPorts::from_env().await?;
    let clock = Arc::new(SystemClock);
    let commitments = Arc::new(DynamoCommitmentStore::from_ports(&ports));
    let forgetter = Forgetter::new(ports.entries.clone(), ports.events, clock.clone())
        .with_hook(Arc::new(DerivedForgetHook {
            store: ports.entries,
            archives: ports.archives,
            clock,
        }))
        .with_hook(Arc::new(CommitmentForgetHook(commitments)));
    let claim = lambda_adapter::tenant_claim_name();
    let (forgetter, claim) = (&forgetter, claim.as_str());
    lambda_adapter::run(|payload| async move {
        // API Gateway events carry requestContext.http; direct invokes never do.
        if lambda_adapter::is_http_event(&payload) {
            return lambda_adapter::serve_http(payload, claim, |request| async move {
                memory_api::forget_api::handle_http(
                    forgetter,
                    &request.head.method,
                    request.head.tenant_claim.as_deref(),
                    &request.body,
                )
                .await
            })
            .await;
        }
        memory_api::forget_api::handle_direct(forgetter, payload).await
    })
    .await
}
