//! Tenant isolation (CTI-1) and secret redaction (SR-1) for the wop-memory host.
//!
//! Both invariants are enforced here, in a crate with no storage or AWS dependency, so the rules
//! can be tested exhaustively in isolation and every adapter and handler shares one
//! implementation instead of re-deriving them:
//!
//! - [`memory_ref`] accepts exactly one memoryRef spelling (CTI-1 §1);
//! - [`tenant`] gates every ref against the caller's tenant (CTI-1 §2);
//! - [`redaction`] replaces the run's secrets with `[REDACTED:<secretId>]` (SR-1).
//!
//! Nothing here formats a ref, id or secret value into an error, and secret-holding types never
//! print their values.
//!
//! ```
//! use memory_guard::{SecretRegistry, TenantId, TenantScope};
//!
//! let scope = TenantScope::new(TenantId::parse("acme")?);
//! assert!(scope.admit("workspaces/acme/agents/planner/memories").is_some());
//! assert!(scope.admit("workspaces/globex/agents/planner/memories").is_none());
//!
//! let mut secrets = SecretRegistry::new();
//! secrets.register("openai", "sk-live-0123456789")?;
//! let redactor = secrets.redactor();
//! assert_eq!(redactor.redact("key sk-live-0123456789"), "key [REDACTED:openai]");
//! # Ok::<(), memory_guard::GuardError>(())
//! ```

mod error;
pub mod memory_ref;
pub mod redaction;
pub mod tenant;

pub use error::GuardError;
pub use memory_ref::{AgentId, MemoryRef, TenantId, MAX_ID_BYTES, MAX_REF_BYTES};
pub use redaction::{
    Redactor, SecretRegistry, MAX_SECRET_BYTES, MAX_SECRET_ID_BYTES, MIN_SECRET_CHARS,
};
pub use tenant::TenantScope;
