//! S3 object keys for archives and the memory index — RFC 0062 run contract §4 (an addressable
//! archive) and §5 (MEMORY-INDEX.json as a workspace file), CTI-1 (every key tenant-scoped).
//!
//! Layout (every key starts with the tenant, like every table key, so a listing or an IAM
//! prefix condition for one tenant can never reach another's objects):
//!
//! ```text
//! {tenantId}/agents/{agentId}/archives/{digest}.json        immutable, expires (lifecycle)
//! {tenantId}/agents/{agentId}/workspace/MEMORY-INDEX.json   mutable, kept
//! {tenantId}/agents/{agentId}/workspace/MEMORY-INDEX.md     mutable, kept
//! ```
//!
//! Archives are told apart from indexes for the bucket's lifecycle rule by an object tag
//! (`wop-memory-kind=archive`, set at write time), not by a key prefix, which keeps the tenant
//! first in every key.
//!
//! The memoryRef grammar is the guard's (`memory_guard::MemoryRef`, CTI-1 §1): parsed once
//! there and never re-spelled here, so a key can only be built from a ref the gate would accept.

use memory_guard::{MemoryRef, TenantId};

use crate::DistillError;

/// File name of the normative index inside an agent workspace.
pub const INDEX_JSON_NAME: &str = "MEMORY-INDEX.json";
/// File name of the human-readable sibling.
pub const INDEX_MD_NAME: &str = "MEMORY-INDEX.md";
/// Folder of the archives inside an agent's key space.
pub const ARCHIVE_FOLDER: &str = "archives/";

/// The canonical `workspaces/{tenantId}/agents/{agentId}/memories`, or `MalformedMemoryRef`.
pub fn parse_memory_ref(memory_ref: &str) -> Result<MemoryRef, DistillError> {
    MemoryRef::parse(memory_ref).map_err(|_| DistillError::MalformedMemoryRef)
}

/// Checks that `memory_ref` is canonical and belongs to `tenant_id` (CTI-1).
pub fn check_tenant(tenant_id: &str, memory_ref: &str) -> Result<MemoryRef, DistillError> {
    let parsed = parse_memory_ref(memory_ref)?;
    if parsed.tenant().as_str() != tenant_id {
        return Err(DistillError::TenantMismatch);
    }
    Ok(parsed)
}

/// True for 64 lowercase hex digits (a SHA-256 in the form [`crate::archive_digest`] writes).
pub fn is_digest(digest: &str) -> bool {
    digest.len() == 64
        && digest
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `{tenantId}/agents/{agentId}/archives/{digest}.json`.
pub fn archive_key(memory_ref: &str, digest: &str) -> Result<String, DistillError> {
    if !is_digest(digest) {
        return Err(DistillError::MalformedDigest);
    }
    Ok(format!("{}{digest}.json", archive_prefix(memory_ref)?))
}

/// `{tenantId}/agents/{agentId}/archives/` — the archives of one memoryRef (forget lists it).
pub fn archive_prefix(memory_ref: &str) -> Result<String, DistillError> {
    let parsed = parse_memory_ref(memory_ref)?;
    Ok(format!(
        "{}/agents/{}/{ARCHIVE_FOLDER}",
        parsed.tenant(),
        parsed.agent()
    ))
}

/// `{tenantId}/` — everything of one tenant.
pub fn tenant_prefix(tenant_id: &str) -> Result<String, DistillError> {
    let tenant = TenantId::parse(tenant_id).map_err(|_| DistillError::MalformedMemoryRef)?;
    Ok(format!("{tenant}/"))
}

/// `{tenantId}/agents/{agentId}/workspace/` — the agent workspace (RFC 0059) of a memoryRef.
pub fn workspace_prefix(memory_ref: &str) -> Result<String, DistillError> {
    let parsed = parse_memory_ref(memory_ref)?;
    Ok(format!(
        "{}/agents/{}/workspace/",
        parsed.tenant(),
        parsed.agent()
    ))
}

/// `{tenantId}/agents/{agentId}/workspace/MEMORY-INDEX.json`.
pub fn index_json_key(memory_ref: &str) -> Result<String, DistillError> {
    Ok(workspace_prefix(memory_ref)? + INDEX_JSON_NAME)
}

/// `{tenantId}/agents/{agentId}/workspace/MEMORY-INDEX.md`.
pub fn index_md_key(memory_ref: &str) -> Result<String, DistillError> {
    Ok(workspace_prefix(memory_ref)? + INDEX_MD_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REF: &str = "workspaces/t-1/agents/agent.a/memories";

    #[test]
    fn keys_for_a_canonical_ref() {
        let digest = "ab".repeat(32);
        assert_eq!(
            archive_key(REF, &digest).as_deref(),
            Ok(format!("t-1/agents/agent.a/archives/{digest}.json").as_str())
        );
        assert_eq!(
            index_json_key(REF).as_deref(),
            Ok("t-1/agents/agent.a/workspace/MEMORY-INDEX.json")
        );
        assert_eq!(
            index_md_key(REF).as_deref(),
            Ok("t-1/agents/agent.a/workspace/MEMORY-INDEX.md")
        );
        assert_eq!(tenant_prefix("t-1").as_deref(), Ok("t-1/"));
        assert_eq!(
            archive_prefix(REF).as_deref(),
            Ok("t-1/agents/agent.a/archives/")
        );
    }

    #[test]
    fn rejects_non_canonical_refs() {
        for bad in [
            "",
            "workspaces/t/agents/a/memories/",
            "/workspaces/t/agents/a/memories",
            "workspaces/../agents/a/memories",
            "workspaces/t/agents/./memories",
            "workspaces/t%2F/agents/a/memories",
            "workspaces/t/agents/a/memories/x",
            "Workspaces/t/agents/a/memories",
            "workspaces/t/agents//memories",
            "workspaces/t\0/agents/a/memories",
        ] {
            assert_eq!(
                parse_memory_ref(bad).err(),
                Some(DistillError::MalformedMemoryRef),
                "{bad:?}"
            );
        }
        let long = format!("workspaces/{}/agents/a/memories", "t".repeat(129));
        assert!(parse_memory_ref(&long).is_err());
    }

    #[test]
    fn tenant_must_own_the_ref() {
        let owned = check_tenant("t-1", REF).map(|r| r.as_string());
        assert_eq!(owned.as_deref(), Ok(REF));
        assert_eq!(
            check_tenant("t-2", REF).err(),
            Some(DistillError::TenantMismatch)
        );
    }

    #[test]
    fn digests_are_lowercase_sha256_hex() {
        assert!(is_digest(&"0f".repeat(32)));
        assert!(!is_digest(&"0F".repeat(32)));
        assert!(!is_digest(&"0f".repeat(31)));
        assert_eq!(
            archive_key(REF, "../../x"),
            Err(DistillError::MalformedDigest)
        );
    }
}
