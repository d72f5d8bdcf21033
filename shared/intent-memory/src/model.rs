//! The RFC-0015 memory entry (§1) and where it lives. Working and episodic entries belong to one
//! agent and live in that agent's partition, the same one as the OpenWOP ref
//! `workspaces/{tenant}/agents/{agent}/memories`; semantic entries belong to the tenant's
//! namespaces and live in one partition per tenant (docs/openintent.md "One memory, two doors").

use memory_core::model::SubjectKey;
use memory_core::time::Timestamp;
use memory_guard::{AgentId, TenantId};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// RFC-0015 §2: the three memory types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryType {
    Working,
    Episodic,
    Semantic,
}

impl MemoryType {
    pub fn parse(s: &str) -> Option<MemoryType> {
        match s {
            "working" => Some(MemoryType::Working),
            "episodic" => Some(MemoryType::Episodic),
            "semantic" => Some(MemoryType::Semantic),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MemoryType::Working => "working",
            MemoryType::Episodic => "episodic",
            MemoryType::Semantic => "semantic",
        }
    }

    /// Semantic memory is namespace-scoped (§2.3), the other two agent-scoped.
    pub fn is_agent_scoped(self) -> bool {
        self != MemoryType::Semantic
    }
}

/// RFC-0015 §2.2: eviction prefers lower priorities first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    Low,
    Normal,
    High,
}

impl Priority {
    pub fn parse(s: &str) -> Option<Priority> {
        match s {
            "low" => Some(Priority::Low),
            "normal" => Some(Priority::Normal),
            "high" => Some(Priority::High),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
        }
    }

    /// Sort rank in the eviction order (lowest first).
    pub fn rank(self) -> u8 {
        match self {
            Priority::Low => 0,
            Priority::Normal => 1,
            Priority::High => 2,
        }
    }
}

/// RFC-0015 §9.2 classification labels.
pub const SENSITIVITIES: [&str; 4] = ["public", "internal", "confidential", "restricted"];

/// Which partition an entry lives in.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Home {
    /// Working and episodic entries of one agent.
    Agent(AgentId),
    /// The tenant's semantic memory.
    Semantic,
}

impl Home {
    pub fn of(memory_type: MemoryType, agent: &AgentId) -> Home {
        if memory_type.is_agent_scoped() {
            Home::Agent(agent.clone())
        } else {
            Home::Semantic
        }
    }

    /// The id prefix that names the home, so a get by id is one read (`mem_` / `sem_`).
    pub fn id_prefix(&self) -> &'static str {
        match self {
            Home::Agent(_) => "mem_",
            Home::Semantic => "sem_",
        }
    }
}

/// The caller, as the authorizer verified it: one tenant, one agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub tenant: TenantId,
    pub agent: AgentId,
}

/// An entry's address in the store.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    pub tenant: TenantId,
    pub home: Home,
    pub id: String,
}

impl Location {
    /// The location an entry id names for `caller`: `mem_` ids in the caller's own partition
    /// (another agent's entry is simply not there), `sem_` ids in the tenant's semantic
    /// partition. Anything else names nothing.
    pub fn for_id(caller: &Caller, id: &str) -> Option<Location> {
        let home = if id.starts_with("mem_") {
            Home::Agent(caller.agent.clone())
        } else if id.starts_with("sem_") {
            Home::Semantic
        } else {
            return None;
        };
        let ulid = &id[4..];
        (ulid.len() == 26 && ulid.bytes().all(|b| b.is_ascii_alphanumeric())).then(|| Location {
            tenant: caller.tenant.clone(),
            home,
            id: id.to_owned(),
        })
    }
}

/// One entry as RFC-0015 §1.1 defines it (values already SR-1 redacted).
#[derive(Clone, Debug, PartialEq)]
pub struct IntentEntry {
    pub id: String,
    pub agent_id: AgentId,
    pub namespace: String,
    pub key: String,
    /// Always a JSON object (§1.1 `value: object`).
    pub value: Map<String, Value>,
    pub memory_type: MemoryType,
    pub version: u64,
    pub scope: Option<Map<String, Value>>,
    pub tags: Vec<String>,
    /// The `ttl` policy as given: `task_lifetime`, `duration:<ISO 8601>` or none.
    pub ttl: Option<String>,
    pub pinned: bool,
    pub priority: Priority,
    pub sensitivity: Option<String>,
    pub curated_by: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub expires_at: Option<Timestamp>,
}

impl IntentEntry {
    /// The task a working entry belongs to (`scope.task_id`).
    pub fn task_id(&self) -> Option<&str> {
        self.scope
            .as_ref()
            .and_then(|s| s.get("task_id"))
            .and_then(Value::as_str)
    }

    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// The body the official client's `MemoryEntry.from_dict` reads: every field, nulls where
    /// unset, timestamps RFC 3339 UTC.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "agent_id": self.agent_id.as_str(),
            "namespace": self.namespace,
            "key": self.key,
            "value": self.value,
            "memory_type": self.memory_type.as_str(),
            "version": self.version,
            "scope": self.scope,
            "tags": self.tags,
            "ttl": self.ttl,
            "pinned": self.pinned,
            "priority": self.priority.as_str(),
            "sensitivity": self.sensitivity,
            "curated_by": self.curated_by,
            "created_at": wire_time(self.created_at),
            "updated_at": wire_time(self.updated_at),
            "expires_at": self.expires_at.map(wire_time),
        })
    }
}

impl IntentEntry {
    /// Reads back what [`IntentEntry::to_json`] wrote (the stored form is the wire form), so
    /// adapters keep one document per entry; `None` for anything else.
    pub fn from_json(v: &Value) -> Option<IntentEntry> {
        let text = |f: &str| v.get(f).and_then(Value::as_str).map(str::to_owned);
        let time = |f: &str| {
            v.get(f)
                .and_then(Value::as_str)
                .and_then(|t| Timestamp::parse_rfc3339(t).ok())
        };
        Some(IntentEntry {
            id: text("id")?,
            agent_id: AgentId::parse(v.get("agent_id")?.as_str()?).ok()?,
            namespace: text("namespace")?,
            key: text("key")?,
            value: v.get("value")?.as_object()?.clone(),
            memory_type: MemoryType::parse(v.get("memory_type")?.as_str()?)?,
            version: v.get("version")?.as_u64()?,
            scope: v.get("scope").and_then(Value::as_object).cloned(),
            tags: v
                .get("tags")?
                .as_array()?
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
            ttl: text("ttl"),
            pinned: v.get("pinned")?.as_bool()?,
            priority: Priority::parse(v.get("priority")?.as_str()?)?,
            sensitivity: text("sensitivity"),
            curated_by: text("curated_by"),
            created_at: time("created_at")?,
            updated_at: time("updated_at")?,
            expires_at: time("expires_at"),
        })
    }
}

/// An instant as this door writes it: RFC 3339 UTC with milliseconds and a `+00:00` offset, not
/// `Z`. The official client parses timestamps with `datetime.fromisoformat`, which reads `Z` only
/// from Python 3.11 on, and the client supports 3.10.
pub fn wire_time(at: Timestamp) -> String {
    let text = at.to_rfc3339();
    match text.strip_suffix('Z') {
        Some(rest) => format!("{rest}+00:00"),
        None => text,
    }
}

/// An entry with what the store keeps beside it.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredIntent {
    pub tenant: TenantId,
    pub entry: IntentEntry,
    /// Last create, update or read, for LRU eviction (§2.2 "least recently accessed").
    pub accessed_at: Timestamp,
    /// The forget key of the data subject the entry is about, when the writer named one.
    pub subject: Option<SubjectKey>,
}

impl StoredIntent {
    pub fn home(&self) -> Home {
        Home::of(self.entry.memory_type, &self.entry.agent_id)
    }

    pub fn location(&self) -> Location {
        Location {
            tenant: self.tenant.clone(),
            home: self.home(),
            id: self.entry.id.clone(),
        }
    }

    /// The uniqueness claim of §1.2.
    pub fn claim(&self) -> ClaimKey {
        ClaimKey::of(
            self.entry.memory_type,
            &self.entry.namespace,
            &self.entry.key,
        )
    }

    /// The capacity counter this entry counts against, if its memory type has one (§9.4).
    pub fn counter(&self) -> Option<CounterKey> {
        CounterKey::of(&self.entry)
    }

    /// [`StoredIntent::counter`] with the partition it counts in.
    pub fn counter_at(&self) -> Option<CounterAt> {
        Some(CounterAt {
            tenant: self.tenant.clone(),
            home: self.home(),
            counter: self.counter()?,
        })
    }

    /// Whether the entry takes part in LRU eviction: unpinned episodic entries only.
    pub fn evictable(&self) -> bool {
        self.entry.memory_type == MemoryType::Episodic && !self.entry.pinned
    }
}

/// The uniqueness claim of an entry: `(agent_id, namespace, key)` for working and episodic
/// together (one key names one piece of an agent's state whichever memory type holds it), `(namespace,
/// key)` for semantic. Stored as a digest, in the entry's partition, so the claim is one
/// conditional put in the same transaction as the entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimKey(String);

impl ClaimKey {
    pub fn of(memory_type: MemoryType, namespace: &str, key: &str) -> ClaimKey {
        let mut h = Sha256::new();
        h.update(if memory_type.is_agent_scoped() {
            b"agent\0".as_slice()
        } else {
            b"semantic\0".as_slice()
        });
        h.update(namespace.as_bytes());
        h.update(b"\0");
        h.update(key.as_bytes());
        ClaimKey(memory_core::model::hex(&h.finalize()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A capacity counter: episodic entries per agent, working entries per agent and task.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CounterKey(String);

impl CounterKey {
    pub fn of(entry: &IntentEntry) -> Option<CounterKey> {
        match entry.memory_type {
            MemoryType::Episodic => Some(CounterKey("episodic".to_owned())),
            MemoryType::Working => Some(match entry.task_id() {
                Some(task) => CounterKey::working(task),
                None => CounterKey("working#-".to_owned()),
            }),
            MemoryType::Semantic => None,
        }
    }

    /// The working-memory counter of one task.
    pub fn working(task_id: &str) -> CounterKey {
        CounterKey(format!("working#{}", task_digest(task_id)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A capacity counter's address in the store: a counter counts within one partition, so the
/// partition's tenant and home always go with its key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CounterAt {
    pub tenant: TenantId,
    pub home: Home,
    pub counter: CounterKey,
}

/// A task id as it appears in keys: a digest, so any string the caller chose is a safe key.
pub fn task_digest(task_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"wop-memory/intent-task/v1\0");
    h.update(task_id.as_bytes());
    memory_core::model::hex(&h.finalize()[..16])
}

/// One immutable version of an entry (`GET /api/v1/memory/{id}/versions`): who changed what,
/// when, and the entry as it stood afterwards.
#[derive(Clone, Debug, PartialEq)]
pub struct VersionRecord {
    pub entry: IntentEntry,
    pub changed_by: String,
    pub changed_at: Timestamp,
    /// The fields this version changed (`created` for version 1).
    pub changes: Vec<String>,
}

impl VersionRecord {
    pub fn from_json(v: &Value) -> Option<VersionRecord> {
        Some(VersionRecord {
            entry: IntentEntry::from_json(v.get("entry")?)?,
            changed_by: v.get("changed_by")?.as_str()?.to_owned(),
            changed_at: Timestamp::parse_rfc3339(v.get("changed_at")?.as_str()?).ok()?,
            changes: v
                .get("changes")?
                .as_array()?
                .iter()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect(),
        })
    }

    pub fn to_json(&self) -> Value {
        json!({
            "version": self.entry.version,
            "changed_by": self.changed_by,
            "changed_at": wire_time(self.changed_at),
            "changes": self.changes,
            "entry": self.entry.to_json(),
        })
    }
}
