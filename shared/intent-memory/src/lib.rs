//! The OpenIntent door (OpenIntent RFC-0015, "Agent Memory & Persistent State"): structured
//! entries addressed by `(agent_id, namespace, key)`, three memory types with their own lifecycles,
//! optimistic concurrency by version, capacity limits with eviction, and archives of working
//! memory at task end. It is a second door onto the one memory: the same table and tenant
//! partitioning, the same SR-1 redactor, the same forget (docs/openintent.md).
//!
//! Pure domain and ports only: the DynamoDB / S3 adapter lives in `memory-aws` (`intent`), the
//! in-memory one in `memory-testkit`, the HTTP contract in the `memory-intent` function.

pub mod api_key;
pub mod archive;
pub mod error;
pub mod forget;
pub mod model;
pub mod quota;
pub mod redact;
pub mod request;
pub mod service;
pub mod store;

pub use error::IntentError;
pub use model::{Caller, Home, IntentEntry, Location, MemoryType, Priority, StoredIntent};
pub use service::{IntentMemory, IntentPorts, Limits};
pub use store::IntentStore;
