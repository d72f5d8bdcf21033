//! The OAP memory exchange door (OAP RFC 0010, `docs/spec/oap-rfc0010-memory-exchange.md`): a
//! tenant grants another agent a signed, bounded, expiring, revocable slice of one memoryRef;
//! the grantee queries it with the grant as bearer and gets projected items with provenance
//! chains; every grant, revocation and query lands in the tenant's signed, hash-chained receipt
//! log. The conventions (canonical JSON, SHA-256, Ed25519, receipts) are `oap-sdk` 0.1.0's, so a
//! grantee verifies everything with the SDK's own functions. docs/oap.md.
//!
//! Nothing here names an AWS type: the store adapter is memory-aws `exchange`, the routes are
//! functions/memory-exchange.

pub mod bundle;
pub mod canonical;
pub mod error;
pub mod forget;
pub mod grant;
pub mod item;
pub mod letta;
pub mod manifest;
pub mod projection;
pub mod receipt;
pub mod service;
pub mod signing;
pub mod store;

pub use bundle::{BundleManifest, BundleStore};
pub use error::ExchangeError;
pub use grant::{Grant, GrantRecord, GrantRequest};
pub use service::{Exchange, ExchangePorts, ExportRequest, ImportRequest, QueryRequest};
pub use signing::HostKey;
pub use store::{
    BundleHolding, ExchangeStore, ExpiryEntry, ForgetNotice, GrantChange, LogAppend, ReceiptPage,
};
