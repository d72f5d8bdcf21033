//! Test-only support, a dev-dependency of every crate that tests against the ports: in-memory
//! adapters (real semantics: conditional writes, compare-and-swap, tenant-prefixed keys, call
//! counts and fault injection) and the behavioural contract of each port, written once and run
//! against every adapter through `port_suite!` and `commitment_suite!`. No function links it.

pub mod contract;
pub mod exchange;
pub mod in_memory;
pub mod intercept;
pub mod keyed;
pub mod keyed_contract;
pub mod paths;
pub mod paths_contract;
pub mod quota;
pub mod quota_contract;
pub mod usage;
