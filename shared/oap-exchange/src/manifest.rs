//! The memory manifest (OAP RFC 0010 §3.3, with the §3.7 declaration), served without
//! authentication at `/.well-known/oap-memory.json`. Every field is read from what the
//! deployment runs, so the manifest cannot promise what the host does not do.

use serde_json::{json, Value};

use crate::grant::{MAX_GRANT_DURATION_DAYS, MAX_GRANT_SIZE_ITEMS, SUPPORTED_PROFILES};
use crate::item::Kind;

/// The template of a scope id: scopes are memoryRefs, and the manifest cannot list a tenant's
/// refs to the public (CTI-1), so it states their form.
pub const SCOPE_FORM: &str = "workspaces/{tenantId}/agents/{agentId}/memories";

/// The configured embedding model, if any, and its dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbeddingProfile {
    pub model: String,
    pub dimensions: Option<u32>,
}

pub fn manifest(host_did: &str, base_url: &str, embedding: Option<&EmbeddingProfile>) -> Value {
    let profiles: Vec<Value> = embedding
        .map(|e| {
            let mut p = json!({"model": e.model});
            if let Some(d) = e.dimensions {
                p["dimensions"] = json!(d);
            }
            p
        })
        .into_iter()
        .collect();
    json!({
        "principal": host_did,
        "scopes": [SCOPE_FORM],
        "embedding_profiles": profiles,
        "kinds_supported": Kind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        "endpoints": {
            "query": format!("{base_url}/oap/memory/query"),
            "grant": format!("{base_url}/oap/memory/grant"),
            "revoke": format!("{base_url}/oap/memory/grant/{{grant_id}}/revoke"),
            "receipts": format!("{base_url}/oap/memory/receipts"),
            "export": format!("{base_url}/oap/memory/export"),
            "import": format!("{base_url}/oap/memory/import"),
            "did": format!("{base_url}/.well-known/did.json"),
        },
        "max_grant_size_items": MAX_GRANT_SIZE_ITEMS,
        "memory_exchange": {
            "supported": true,
            "max_grant_duration_days": MAX_GRANT_DURATION_DAYS,
            "max_grant_size_items": MAX_GRANT_SIZE_ITEMS,
            "supported_redaction_profiles": SUPPORTED_PROFILES,
        },
    })
}
