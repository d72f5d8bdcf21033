//! The memory domain of wop-memory: the OpenWOP `MemoryEntry` wire model, the read rules of
//! `openwop-agent-memory.md` (TTL, list options, CTI-1 gating through `memory-guard`), the ports the
//! AWS adapters implement, and in-memory port implementations for fast tests.
//!
//! Nothing here names an AWS type: adapters live in `memory-aws`, handlers in `functions/`.

pub mod acting_tenant;
pub mod background;
pub mod capabilities;
pub mod cursor;
pub mod deadline;
pub mod derivation;
pub mod embed_pass;
pub mod error;
pub mod events;
pub mod forget;
pub mod history;
pub mod idempotency;
pub mod listing;
pub mod metering;
pub mod model;
pub mod pass_report;
pub mod paths;
pub mod ports;
pub mod quota;
pub mod reader;
pub mod ref_index;
pub mod search;
pub mod tag_filter;
pub mod time;
pub mod token_quota;
pub mod writer;

pub use error::{CoreError, StoreError};
pub use memory_guard::{AgentId, MemoryRef, Redactor, SecretRegistry, TenantId, TenantScope};
pub use model::{EntryKey, MemoryEntry, NewEntry, StoredEntry, SubjectKey, Tier};
pub use time::Timestamp;
