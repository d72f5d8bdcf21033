//! S3 object keys for archives and the memory index — RFC 0062 run contract §4 (an addressable
//! archive) and §5 (MEMORY-INDEX.json as a workspace file), CTI-1 (every key tenant-scoped).
//!
//! Layout:
//!
//! ```text
//! archives/{tenantId}/{agentId}/{digest}.json              immutable, expires (lifecycle)
//! workspaces/{tenantId}/agents/{agentId}/MEMORY-INDEX.json  mutable, kept
//! workspaces/{tenantId}/agents/{agentId}/MEMORY-INDEX.md    mutable, kept
//! ```
//!
//! Archives live under their own top-level `archives/` prefix because S3 lifecycle rules filter
//! by a literal key prefix: one rule on `archives/` expires every archive after
//! `archiveRetention` without touching the indexes, which could not be expressed if archives sat
//! under `workspaces/{tenantId}/…`. The tenant is the first segment after the fixed prefix in
//! both, so a listing of one tenant's objects can never include another's.
//!
//! The memoryRef grammar is the design notes' canonical form, checked here again (byte for byte,
//! as the guard crate does) because a key is built from its parts.

use crate::DistillError;

const MAX_REF_BYTES: usize = 512;
const MAX_ID_BYTES: usize = 128;

/// File name of the normative index inside an agent workspace.
pub const INDEX_JSON_NAME: &str = "MEMORY-INDEX.json";
/// File name of the human-readable sibling.
pub const INDEX_MD_NAME: &str = "MEMORY-INDEX.md";
/// Top-level prefix of every archive (the lifecycle rule's filter).
pub const ARCHIVE_PREFIX: &str = "archives/";

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_BYTES
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && id != "."
        && id != ".."
}

/// `(tenantId, agentId)` of a canonical `workspaces/{tenantId}/agents/{agentId}/memories`.
pub fn parse_memory_ref(memory_ref: &str) -> Result<(&str, &str), DistillError> {
    if memory_ref.len() > MAX_REF_BYTES {
        return Err(DistillError::MalformedMemoryRef);
    }
    let mut parts = memory_ref.split('/');
    match (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) {
        (Some("workspaces"), Some(tenant), Some("agents"), Some(agent), Some("memories"), None)
            if valid_id(tenant) && valid_id(agent) =>
        {
            Ok((tenant, agent))
        }
        _ => Err(DistillError::MalformedMemoryRef),
    }
}

/// Checks that `memory_ref` is canonical and belongs to `tenant_id` (CTI-1).
pub fn check_tenant<'a>(
    tenant_id: &str,
    memory_ref: &'a str,
) -> Result<(&'a str, &'a str), DistillError> {
    let (tenant, agent) = parse_memory_ref(memory_ref)?;
    if tenant != tenant_id {
        return Err(DistillError::TenantMismatch);
    }
    Ok((tenant, agent))
}

/// True for 64 lowercase hex digits (a SHA-256 in the form [`crate::archive_digest`] writes).
pub fn is_digest(digest: &str) -> bool {
    digest.len() == 64
        && digest
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `archives/{tenantId}/{agentId}/{digest}.json`.
pub fn archive_key(memory_ref: &str, digest: &str) -> Result<String, DistillError> {
    let (tenant, agent) = parse_memory_ref(memory_ref)?;
    if !is_digest(digest) {
        return Err(DistillError::MalformedDigest);
    }
    Ok(format!("{ARCHIVE_PREFIX}{tenant}/{agent}/{digest}.json"))
}

/// `archives/{tenantId}/` — the prefix to list when forgetting within one tenant.
pub fn tenant_archive_prefix(tenant_id: &str) -> Result<String, DistillError> {
    if !valid_id(tenant_id) {
        return Err(DistillError::MalformedMemoryRef);
    }
    Ok(format!("{ARCHIVE_PREFIX}{tenant_id}/"))
}

/// `workspaces/{tenantId}/agents/{agentId}/` — the agent workspace (RFC 0059) of a memoryRef.
pub fn workspace_prefix(memory_ref: &str) -> Result<String, DistillError> {
    let (tenant, agent) = parse_memory_ref(memory_ref)?;
    Ok(format!("workspaces/{tenant}/agents/{agent}/"))
}

/// `workspaces/{tenantId}/agents/{agentId}/MEMORY-INDEX.json`.
pub fn index_json_key(memory_ref: &str) -> Result<String, DistillError> {
    Ok(workspace_prefix(memory_ref)? + INDEX_JSON_NAME)
}

/// `workspaces/{tenantId}/agents/{agentId}/MEMORY-INDEX.md`.
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
            Ok(format!("archives/t-1/agent.a/{digest}.json").as_str())
        );
        assert_eq!(
            index_json_key(REF).as_deref(),
            Ok("workspaces/t-1/agents/agent.a/MEMORY-INDEX.json")
        );
        assert_eq!(
            index_md_key(REF).as_deref(),
            Ok("workspaces/t-1/agents/agent.a/MEMORY-INDEX.md")
        );
        assert_eq!(tenant_archive_prefix("t-1").as_deref(), Ok("archives/t-1/"));
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
                parse_memory_ref(bad),
                Err(DistillError::MalformedMemoryRef),
                "{bad:?}"
            );
        }
        let long = format!("workspaces/{}/agents/a/memories", "t".repeat(129));
        assert!(parse_memory_ref(&long).is_err());
    }

    #[test]
    fn tenant_must_own_the_ref() {
        assert_eq!(check_tenant("t-1", REF), Ok(("t-1", "agent.a")));
        assert_eq!(check_tenant("t-2", REF), Err(DistillError::TenantMismatch));
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
