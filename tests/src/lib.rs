//! Harness for end-to-end tests: a local implementation of the Lambda Runtime API that runs the
//! real `bootstrap` binaries (as built by cargo) exactly as Lambda would, captures their logs,
//! builds real API Gateway v2 events, and puts a local API Gateway + Lambda Invoke API in front of
//! the binaries (`gateway`, served by the `local_gateway` bin) for HTTP clients.

pub mod apigw;
pub mod bedrock_standin;
pub mod counting_proxy;
pub mod gateway;
pub mod queue;
pub mod runtime_api;
pub mod scan;

pub use runtime_api::{LambdaProcess, Outcome};

/// A tenant id of one test's own: `label` and a fresh ULID in lower case, so suites and runs
/// sharing the emulator's table, bucket and bus never see each other's data.
pub fn tenant(label: &str) -> String {
    format!("{label}-{}", ulid::Ulid::new().to_string().to_lowercase())
}

/// The memory ref of `agent` in `tenant`.
pub fn memory_ref(tenant: &str, agent: &str) -> String {
    format!("workspaces/{tenant}/agents/{agent}/memories")
}
