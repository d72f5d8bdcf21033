//! Harness for end-to-end tests: a local implementation of the Lambda Runtime API that runs the
//! real `bootstrap` binaries (as built by cargo) exactly as Lambda would, captures their logs,
//! and builds real API Gateway v2 events.

pub mod apigw;
pub mod queue;
pub mod runtime_api;
pub mod scan;

pub use runtime_api::{LambdaProcess, Outcome};
