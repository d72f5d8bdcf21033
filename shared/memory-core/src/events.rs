//! The OpenWOP events this host emits (docs/guarantees.md "Events"). Every
//! constructor takes ids, refs and counts only, so an event with entry text or a secret in it
//! cannot be built: content-free by construction rather than by review.

use serde_json::{json, Value};

use crate::model::{Attribution, SubjectKey, Tier};
use crate::time::Timestamp;
use memory_guard::{MemoryRef, TenantId};

/// EventBridge `source` of every event.
pub const EVENT_SOURCE: &str = "wop-memory";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    MemoryWritten,
    MemoryCompacted,
    WorkspaceUpdated,
    AgentMemoryConsolidated,
    CommitmentFired,
    MemoryForgotten,
    RunRequested,
    /// OpenIntent RFC-0015 §5 lifecycle events of the keyed door.
    MemoryCreated,
    MemoryUpdated,
    MemoryDeleted,
    MemoryArchived,
    MemoryEvicted,
    /// OAP RFC 0010 grant lifecycle of the exchange door.
    GrantIssued,
    GrantRevoked,
    GrantExpired,
}

impl EventType {
    /// The OpenWOP event type, used as the EventBridge `detail-type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::MemoryWritten => "memory.written",
            EventType::MemoryCompacted => "memory.compacted",
            EventType::WorkspaceUpdated => "workspace.updated",
            EventType::AgentMemoryConsolidated => "agent.memory.consolidated",
            EventType::CommitmentFired => "commitment.fired",
            EventType::MemoryForgotten => "memory.forgotten",
            EventType::RunRequested => "run.requested",
            EventType::MemoryCreated => "memory.created",
            EventType::MemoryUpdated => "memory.updated",
            EventType::MemoryDeleted => "memory.deleted",
            EventType::MemoryArchived => "memory.archived",
            EventType::MemoryEvicted => "memory.evicted",
            EventType::GrantIssued => "oap.memory.grant.issued",
            EventType::GrantRevoked => "oap.memory.grant.revoked",
            EventType::GrantExpired => "oap.memory.grant.expired",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct DomainEvent {
    pub event_type: EventType,
    pub tenant: TenantId,
    /// A deterministic id consumers dedupe on (retries publish the same id).
    pub event_id: String,
    pub detail: Value,
}

impl DomainEvent {
    /// An event about one ref: published in the ref's tenant, its detail naming both
    /// (`tenantId`, `memoryRef`) beside `detail`'s own fields, as consumers of every ref-scoped
    /// event read them.
    pub fn for_ref(
        event_type: EventType,
        memory_ref: &MemoryRef,
        event_id: String,
        mut detail: Value,
    ) -> Self {
        detail["tenantId"] = json!(memory_ref.tenant().as_str());
        detail["memoryRef"] = json!(memory_ref.to_string());
        DomainEvent {
            event_type,
            tenant: memory_ref.tenant().clone(),
            event_id,
            detail,
        }
    }

    /// The detail as published: the event's own fields plus `eventId` for consumer dedupe.
    pub fn detail_json(&self) -> Value {
        let mut detail = self.detail.clone();
        if let Some(map) = detail.as_object_mut() {
            map.insert("eventId".to_owned(), Value::String(self.event_id.clone()));
        }
        detail
    }

    /// RFC 0057 write attribution: which node/agent of which run wrote which entry, as the
    /// official client's `is_memory_written` reads it (`memoryRef`, `memoryId`; `nodeId`,
    /// `agentId`, `tags`, `runId` when known). `tags` are the stored, SR-1-redacted tags. The
    /// previous release also sent `entryId`; its only consumer (memory-commitments) reads
    /// `memoryId` first, so it is no longer sent.
    pub fn memory_written(
        memory_ref: &MemoryRef,
        entry_id: &str,
        created_at: Timestamp,
        tier: Tier,
        tags: &[String],
        attribution: &Attribution,
    ) -> Self {
        let mut detail = json!({
            "memoryId": entry_id,
            "createdAt": created_at,
            "tier": tier.as_str(),
        });
        if !tags.is_empty() {
            detail["tags"] = json!(tags);
        }
        if let Some(run_id) = &attribution.run_id {
            detail["runId"] = json!(run_id);
        }
        if let Some(node_id) = &attribution.node_id {
            detail["nodeId"] = json!(node_id);
        }
        if let Some(agent_id) = &attribution.agent_id {
            detail["agentId"] = json!(agent_id);
        }
        DomainEvent::for_ref(
            EventType::MemoryWritten,
            memory_ref,
            format!("memory.written:{}:{}", memory_ref, entry_id),
            detail,
        )
    }

    /// RFC 0068: counts only. `pass` names what the pass did (the consolidation service derives
    /// it from the marker version it read and the merges it applied, never from the clock), so a
    /// duplicate delivery of the same outcome carries the same id and consumers dedupe it.
    pub fn memory_consolidated(
        memory_ref: &MemoryRef,
        input_count: usize,
        output_count: usize,
        at: Timestamp,
        pass: &str,
    ) -> Self {
        DomainEvent::for_ref(
            EventType::AgentMemoryConsolidated,
            memory_ref,
            format!("agent.memory.consolidated:{memory_ref}:{pass}"),
            json!({
                "inputCount": input_count,
                "outputCount": output_count,
                "consolidatedAt": at,
            }),
        )
    }

    /// The subject appears only as its tenant-scoped digest, never in clear.
    pub fn memory_forgotten(subject: &SubjectKey, counts: &ForgetCounts, at: Timestamp) -> Self {
        let tenant = subject.tenant();
        DomainEvent {
            event_type: EventType::MemoryForgotten,
            tenant: tenant.clone(),
            event_id: format!("memory.forgotten:{}:{}:{}", tenant, subject.as_str(), at),
            detail: json!({
                "tenantId": tenant.as_str(),
                "subjectHash": subject.as_str(),
                "deletedEntries": counts.deleted_entries,
                "deletedArchives": counts.deleted_archives,
                "rebuiltIndexes": counts.rebuilt_indexes,
                "cancelledCommitments": counts.cancelled_commitments,
                "forgottenAt": at,
            }),
        }
    }
}

/// What happened to one entry of the OpenIntent door (RFC-0015 §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyedChange {
    Created,
    Updated,
    Deleted,
    Evicted,
}

impl DomainEvent {
    /// RFC-0015 §5.2 without `namespace`, `key` and `tags`: those are chosen by the writer and
    /// can carry what the entry is about, so the event names the entry by id, tier and
    /// version only (the value is excluded by the RFC itself).
    pub fn keyed_entry(
        change: KeyedChange,
        tenant: &TenantId,
        agent_id: &str,
        entry_id: &str,
        memory_type: &str,
        version: u64,
        at: Timestamp,
    ) -> Self {
        let event_type = match change {
            KeyedChange::Created => EventType::MemoryCreated,
            KeyedChange::Updated => EventType::MemoryUpdated,
            KeyedChange::Deleted => EventType::MemoryDeleted,
            KeyedChange::Evicted => EventType::MemoryEvicted,
        };
        let mut detail = json!({
            "tenantId": tenant.as_str(),
            "agentId": agent_id,
            "entryId": entry_id,
            "memoryType": memory_type,
            "version": version,
            "at": at,
        });
        if change == KeyedChange::Updated && version > 1 {
            detail["previousVersion"] = json!(version - 1);
        }
        DomainEvent {
            event_type,
            tenant: tenant.clone(),
            event_id: format!(
                "{}:{}:{}:{}",
                event_type.as_str(),
                tenant,
                entry_id,
                version
            ),
            detail,
        }
    }

    /// RFC-0015 §2.1 archival, as a count and the archive's object name (the snapshot itself
    /// is in the archive, never in the event).
    pub fn keyed_archived(
        tenant: &TenantId,
        agent_id: &str,
        task_digest: &str,
        archive: &str,
        entries_archived: usize,
        at: Timestamp,
    ) -> Self {
        DomainEvent {
            event_type: EventType::MemoryArchived,
            tenant: tenant.clone(),
            event_id: format!(
                "memory.archived:{tenant}:{agent_id}:{task_digest}:{entries_archived}"
            ),
            detail: json!({
                "tenantId": tenant.as_str(),
                "agentId": agent_id,
                "taskDigest": task_digest,
                "archive": archive,
                "entriesArchived": entries_archived,
                "at": at,
            }),
        }
    }
}

/// What a forget removed, per kind of derived data (docs/guarantees.md "Forget").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForgetCounts {
    pub deleted_entries: usize,
    pub deleted_archives: usize,
    pub rebuilt_indexes: usize,
    pub cancelled_commitments: usize,
}

impl std::ops::AddAssign for ForgetCounts {
    fn add_assign(&mut self, o: Self) {
        self.deleted_entries += o.deleted_entries;
        self.deleted_archives += o.deleted_archives;
        self.rebuilt_indexes += o.rebuilt_indexes;
        self.cancelled_commitments += o.cancelled_commitments;
    }
}
