//! The contracts clients and the run engine use (docs/api.md), independent of how
//! requests arrive: the Lambda handlers decode API Gateway or direct-invoke events into these
//! types, call in, and encode what comes back. Keeping routing and parsing here, with no AWS or
//! Lambda type in sight, lets the whole API run in-process in tests and benchmarks.

pub mod background_api;
pub mod decode;
pub mod forget_api;
pub mod metrics;
pub mod read_api;
pub mod wire;
pub mod write_api;

pub use wire::WireError;

use sha2::{Digest, Sha256};

/// A short digest of a memoryRef for logs: correlates requests without writing tenant paths.
pub fn ref_hash(raw_ref: &str) -> String {
    Sha256::digest(raw_ref.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An HTTP answer: status, JSON body and any extra headers (`Retry-After`, `Allow`).
#[derive(Clone, Debug, PartialEq)]
pub struct HttpResponse {
    pub status: u16,
    pub body: serde_json::Value,
    pub headers: Vec<(&'static str, String)>,
}

impl HttpResponse {
    pub fn ok(body: serde_json::Value) -> Self {
        HttpResponse {
            status: 200,
            body,
            headers: Vec::new(),
        }
    }

    pub fn error(e: &memory_core::CoreError) -> Self {
        Self::wire_error(&WireError::from(e))
    }

    pub fn wire_error(e: &WireError) -> Self {
        if e.is_server_error() {
            metrics::emit(&[("Failures", 1)]);
        }
        metrics::emit_error(e.code);
        HttpResponse {
            status: e.status,
            body: e.envelope(),
            headers: e.headers(),
        }
    }
}
