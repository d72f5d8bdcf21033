//! The `MemoryEntry` wire shape of `openwop-agent-memory.md` §MemoryAdapter and the host-side
//! record around it. The wire type is exactly `{id, content, tags, createdAt, expiresAt?}`; what
//! the host needs besides (tier, subject, attribution) lives on `StoredEntry` and never reaches
//! the read API.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::time::Timestamp;
use crate::CoreError;
use memory_guard::{MemoryRef, TenantId, TenantScope};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryEntry {
    pub id: String,
    pub content: String,
    pub tags: Vec<String>,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

impl MemoryEntry {
    /// TTL rule (spec §TTL semantics): an entry is live strictly before `expiresAt`, at
    /// millisecond granularity. At the instant itself it is already gone.
    pub fn is_live_at(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|exp| now < exp)
    }
}

/// Transactional memory is what runs write as they go; long-term memory is what a dream
/// distils or a writer explicitly promotes. Dreams read the former, consolidation the latter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    #[default]
    Transactional,
    LongTerm,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Transactional => "transactional",
            Tier::LongTerm => "long-term",
        }
    }

    pub fn parse(s: &str) -> Option<Tier> {
        match s {
            "transactional" => Some(Tier::Transactional),
            "long-term" => Some(Tier::LongTerm),
            _ => None,
        }
    }
}

/// Who caused a write (RFC 0057 attribution). Ids only.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attribution {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// A tenant-scoped digest of a data subject (a customer id, an e-mail address...). The store
/// indexes this instead of the subject itself, so forgetting a subject leaves no clear copy of
/// its identifier behind, and equal subjects in two tenants never share a key.
///
/// The key holds the tenant it was derived for beside the digest: every lookup by subject is a
/// lookup inside one tenant, and with the tenant inside the value a port cannot be handed a
/// key together with some other tenant (one value, no pair to mismatch). Only the digest
/// ([`SubjectKey::as_str`]) is stored or emitted; the tenant is already in every key and event
/// that carries it, and a key read back is rebuilt with the tenant of the record it came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubjectKey {
    tenant: TenantId,
    digest: String,
}

impl SubjectKey {
    pub fn derive(tenant: &TenantId, subject: &str) -> Self {
        let mut h = Sha256::new();
        h.update(b"wop-memory/subject/v1\0");
        h.update(tenant.as_str().as_bytes());
        h.update(b"\0");
        h.update(subject.as_bytes());
        SubjectKey {
            tenant: tenant.clone(),
            digest: hex(&h.finalize()),
        }
    }

    /// Rebuilds a digest read back from a record of `tenant`; only 64 lowercase hex characters
    /// are accepted.
    pub fn from_stored(tenant: &TenantId, s: &str) -> Option<Self> {
        (s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| SubjectKey {
            tenant: tenant.clone(),
            digest: s.to_owned(),
        })
    }

    /// The tenant the subject belongs to.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// The digest: what the store indexes and events carry.
    pub fn as_str(&self) -> &str {
        &self.digest
    }
}

/// The tenant a request names in `tenantId`, parsed once, with the one error every contract
/// answers for a malformed one.
pub fn tenant_of(tenant_id: &str) -> Result<TenantId, CoreError> {
    TenantId::parse(tenant_id)
        .map_err(|_| CoreError::invalid("tenantId", "must be 1-128 of [A-Za-z0-9._-]"))
}

/// The ref `tenant_id` may write or run a pass over (CTI-1). A malformed ref and another
/// tenant's ref get the same error, so the answer does not reveal whether the other exists.
pub fn admitted_ref(tenant_id: &str, raw_ref: &str) -> Result<MemoryRef, CoreError> {
    TenantScope::new(tenant_of(tenant_id)?)
        .admit(raw_ref)
        .ok_or(CoreError::RefNotAdmitted)
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// A ULID for an instant with the given random bits (the low 80 are used): how ids are made
/// that must come out the same on every retry or import of the same thing.
pub fn ulid_string(at: Timestamp, random: u128) -> String {
    let ms = u64::try_from(at.as_millis()).unwrap_or(0);
    ulid::Ulid::from_parts(ms, random).to_string()
}

/// Longest tag a write accepts; a list filter names tags under the same rule.
pub const MAX_TAG_BYTES: usize = 128;

/// A tag as a write stores it: 1-128 bytes, no control characters (which also keeps the
/// separators of a tag filter's canonical text unforgeable).
pub fn is_valid_tag(tag: &str) -> bool {
    !tag.is_empty() && tag.len() <= MAX_TAG_BYTES && !tag.chars().any(char::is_control)
}

/// Entry ids share the id alphabet of memoryRef segments, so they can be embedded in keys and
/// cursors without escaping.
pub fn is_valid_entry_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// An entry as the host stores it: the wire entry plus host-internal fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEntry {
    pub memory_ref: MemoryRef,
    pub entry: MemoryEntry,
    pub tier: Tier,
    pub subject: Option<SubjectKey>,
    pub attribution: Attribution,
    /// Ids of the entries this one was derived from (consolidation, distillation); empty for
    /// entries written directly. Host-internal: never on the read API.
    pub provenance: Vec<String>,
    /// The content's embedding when an embedder was configured at write time
    /// (docs/search.md "Semantic search"). Host-internal, and outside [`StoredEntry::revision`]: it
    /// is derived from the content, and a retried write may get a vector that differs in the last
    /// bits.
    pub embedding: Option<Embedding>,
}

/// An embedding vector and the model that made it: vectors of different models are never
/// compared, so changing the configured model degrades semantic search to "not yet embedded"
/// instead of to nonsense.
#[derive(Clone, Debug)]
pub struct Embedding {
    pub model: String,
    pub vector: Vec<f32>,
}

/// Bitwise equality (so `StoredEntry` keeps `Eq`): a stored vector round-trips exactly.
impl PartialEq for Embedding {
    fn eq(&self, other: &Self) -> bool {
        self.model == other.model
            && self.vector.len() == other.vector.len()
            && self
                .vector
                .iter()
                .zip(&other.vector)
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }
}

impl Eq for Embedding {}

impl StoredEntry {
    /// `entry` in `memory_ref` at `tier`, about no subject, unattributed, derived from nothing
    /// and without a vector: the fields a writer fills in when it has them.
    pub fn new(memory_ref: MemoryRef, entry: MemoryEntry, tier: Tier) -> Self {
        StoredEntry {
            memory_ref,
            entry,
            tier,
            subject: None,
            attribution: Attribution::default(),
            provenance: Vec::new(),
            embedding: None,
        }
    }

    /// A digest of everything that makes up the entry. Background passes delete an entry only
    /// if its revision is still the one they read, so a concurrent change is never lost.
    pub fn revision(&self) -> String {
        let mut h = Sha256::new();
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_be_bytes());
            h.update(bytes);
        };
        field(self.entry.id.as_bytes());
        field(self.entry.content.as_bytes());
        field(&(self.entry.tags.len() as u64).to_be_bytes());
        for t in &self.entry.tags {
            field(t.as_bytes());
        }
        field(&self.entry.created_at.as_millis().to_be_bytes());
        field(
            &self
                .entry
                .expires_at
                .map_or(i64::MIN, |t| t.as_millis())
                .to_be_bytes(),
        );
        field(self.tier.as_str().as_bytes());
        field(self.subject.as_ref().map_or("", |s| s.as_str()).as_bytes());
        field(&(self.provenance.len() as u64).to_be_bytes());
        for p in &self.provenance {
            field(p.as_bytes());
        }
        hex(&h.finalize()[..12])
    }

    pub fn key(&self) -> EntryKey {
        EntryKey {
            memory_ref: self.memory_ref.clone(),
            id: self.entry.id.clone(),
        }
    }
}

/// Addresses one entry; the tenant is inside the ref, so a key can never point across tenants.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryKey {
    pub memory_ref: MemoryRef,
    pub id: String,
}

impl EntryKey {
    /// The keys of `ids`, all in `memory_ref`.
    pub fn all_in(memory_ref: &MemoryRef, ids: impl IntoIterator<Item = String>) -> Vec<EntryKey> {
        ids.into_iter()
            .map(|id| EntryKey {
                memory_ref: memory_ref.clone(),
                id,
            })
            .collect()
    }
}

/// A write request's entry after validation, before it has an id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEntry {
    pub content: String,
    pub tags: Vec<String>,
    pub expires_at: Option<Timestamp>,
    pub subject: Option<String>,
    pub tier: Tier,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shape_is_exact() {
        let e = MemoryEntry {
            id: "01J".into(),
            content: "c".into(),
            tags: vec!["t".into()],
            created_at: Timestamp::from_millis(1_700_000_000_123),
            expires_at: None,
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"id":"01J","content":"c","tags":["t"],"createdAt":"2023-11-14T22:13:20.123Z"}"#
        );
        let with_exp = MemoryEntry {
            expires_at: Some(Timestamp::from_millis(1_700_000_000_124)),
            ..e
        };
        let v = serde_json::to_value(&with_exp).unwrap();
        assert_eq!(v["expiresAt"], "2023-11-14T22:13:20.124Z");
    }

    #[test]
    fn expiry_is_exclusive_at_millisecond_floor() {
        let e = MemoryEntry {
            id: "a".into(),
            content: String::new(),
            tags: vec![],
            created_at: Timestamp::from_millis(0),
            expires_at: Some(Timestamp::from_millis(1_000)),
        };
        assert!(e.is_live_at(Timestamp::from_millis(999)));
        assert!(!e.is_live_at(Timestamp::from_millis(1_000)));
        assert!(!e.is_live_at(Timestamp::from_millis(1_001)));
    }

    #[test]
    fn subject_keys_are_tenant_scoped() {
        let a = TenantId::parse("tenant-a").unwrap();
        let b = TenantId::parse("tenant-b").unwrap();
        assert_ne!(
            SubjectKey::derive(&a, "alice@example.com"),
            SubjectKey::derive(&b, "alice@example.com")
        );
        let k = SubjectKey::derive(&a, "alice@example.com");
        assert!(!k.as_str().contains("alice"));
        assert_eq!(k.tenant(), &a);
        assert_eq!(SubjectKey::from_stored(&a, k.as_str()), Some(k.clone()));
        // The same digest read back under another tenant is another key.
        assert_ne!(SubjectKey::from_stored(&b, k.as_str()), Some(k));
        assert_eq!(SubjectKey::from_stored(&a, "nothex"), None);
    }

    #[test]
    fn entry_id_alphabet() {
        assert!(is_valid_entry_id("01JABCDEF-x_y.z"));
        for bad in ["", "a/b", "..%2f", "a b", "é", &"x".repeat(129)] {
            assert!(!is_valid_entry_id(bad), "{bad}");
        }
    }
}
