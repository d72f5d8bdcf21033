//! Memory items as they leave the host (OAP RFC 0010 §3.2) and their provenance chains (§3.6).
//!
//! A stored entry never changes after it is written: consolidation, distillation and import
//! make new entries that name what they came from. So an item's chain starts with the link that
//! made it (`capture`, or `derive` naming its sources) and gains one link per change on the way
//! out (`projection`, when the grant's profile took something out). Each link names the hash of
//! the one before (`prev`, `genesis` first) and the item carries the last link's hash as
//! `chain_hash`; a grantee recomputes every hash with `oap-sdk`'s `canonicalize` and
//! `sha256_hex`, and checks that the last link's `content_sha256` is the hash of the text it got.
//!
//! The first link carries a salt only the host can derive. Without it, the hash of a capture
//! link would let a grantee test guesses of what a projection took out (a phone number is a
//! small space); with it, a projected item shows that first link by its hash alone.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::canonical::{hash_of, sha256_hex};
use crate::projection::Projected;
use memory_core::derivation::{is_source_digest, source_digests};
use memory_core::model::hex;
use memory_core::StoredEntry;

/// §3.2 `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Fact,
    Preference,
    ConversationTurn,
    Summary,
    Observation,
    DocumentReference,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Fact,
        Kind::Preference,
        Kind::ConversationTurn,
        Kind::Summary,
        Kind::Observation,
        Kind::DocumentReference,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Fact => "fact",
            Kind::Preference => "preference",
            Kind::ConversationTurn => "conversation_turn",
            Kind::Summary => "summary",
            Kind::Observation => "observation",
            Kind::DocumentReference => "document_reference",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The kind of a stored entry (docs/oap.md "Items"): a `kind:<kind>` tag says it; else an
    /// entry made from others (consolidation, a dream) is a `summary`, anything else an
    /// `observation`, the RFC's kind for what an agent noted without further claim.
    pub fn of(entry: &StoredEntry) -> Kind {
        entry
            .entry
            .tags
            .iter()
            .find_map(|t| t.strip_prefix("kind:").and_then(Kind::parse))
            .unwrap_or(if derived_from(entry).is_empty() {
                Kind::Observation
            } else {
                Kind::Summary
            })
    }
}

/// Where an entry came from, as `provenance.source` says it.
pub fn source_of(entry: &StoredEntry) -> &'static str {
    if !derived_from(entry).is_empty() {
        "wop-memory:derived"
    } else if imported_from(entry).is_some() {
        "wop-memory:import"
    } else {
        "wop-memory:write"
    }
}

/// The entries this one was made from (consolidation, dreams), without import marks.
pub fn derived_from(entry: &StoredEntry) -> Vec<&str> {
    entry
        .provenance
        .iter()
        .map(String::as_str)
        .filter(|p| !p.starts_with(crate::bundle::IMPORT_MARK) && !is_source_digest(p))
        .collect()
}

/// The chain hash of the bundle item an imported entry continues.
pub fn imported_from(entry: &StoredEntry) -> Option<String> {
    entry
        .provenance
        .iter()
        .find_map(|p| p.strip_prefix(crate::bundle::IMPORT_MARK))
        .map(|hex| format!("sha256:{hex}"))
}

/// An item's labels: its tags without the `kind:` tag (the kind has its own field).
pub fn labels(entry: &StoredEntry) -> Vec<String> {
    entry
        .entry
        .tags
        .iter()
        .filter(|t| !t.starts_with("kind:"))
        .cloned()
        .collect()
}

/// The salt of an item's first link, by item id, within the scope being read.
pub type Salts<'a> = &'a dyn Fn(&str) -> [u8; 16];

/// The first link of an entry's chain: how it came to be. An imported entry's first link
/// continues the exported item's chain (its `prev` is that item's `chain_hash`).
///
/// A derived entry's link commits to each source's text as it was when read, where the deriving
/// pass recorded it: `sources` maps a source id to the hash of `{content_sha256, salt}` of that
/// source's own first link. A grantee holding the source item recomputes it from that link; the
/// salt keeps the commitment from letting anyone test guesses of a source's text (a source may be
/// projected in the grant, its first link withheld).
pub fn origin_link(entry: &StoredEntry, salts: Salts<'_>) -> Value {
    let salt = salts(&entry.entry.id);
    let derived = derived_from(entry);
    let imported = imported_from(entry);
    let op = match (&imported, derived.is_empty()) {
        (_, false) => "derive",
        (Some(_), true) => "import",
        (None, true) => "capture",
    };
    let mut link = json!({
        "seq": 0,
        "op": op,
        "item_id": entry.entry.id,
        "scope_id": entry.memory_ref.to_string(),
        "captured_at": entry.entry.created_at.to_rfc3339(),
        "content_sha256": sha256_hex(&entry.entry.content),
        "labels": labels(entry),
        "salt": hex(&salt),
        "prev": imported.as_deref().unwrap_or("genesis"),
    });
    if !derived.is_empty() {
        link["derived_from"] = json!(derived);
        let sources: Map<String, Value> = source_digests(&entry.provenance)
            .map(|(id, digest)| {
                let commitment = json!({"content_sha256": digest, "salt": hex(&salts(id))});
                (id.to_owned(), json!(hash_of(&commitment)))
            })
            .collect();
        if !sources.is_empty() {
            link["sources"] = Value::Object(sources);
        }
    }
    link
}

/// The chain as the owner exports it: every link shown.
pub fn full_chain(entry: &StoredEntry, salts: Salts<'_>) -> (Vec<Value>, String) {
    let origin = origin_link(entry, salts);
    let hash = hash_of(&origin);
    (vec![origin], hash)
}

/// An item's chain as a grantee gets it, and its head hash. With nothing projected out the
/// origin link is shown whole; otherwise it is shown by its hash and a `projection` link follows.
pub fn chain(
    entry: &StoredEntry,
    salts: Salts<'_>,
    profile: &str,
    projected: &Projected,
) -> (Vec<Value>, String) {
    let origin = origin_link(entry, salts);
    let origin_hash = hash_of(&origin);
    if projected.removed == 0 {
        return (vec![origin], origin_hash);
    }
    let projection = json!({
        "seq": 1,
        "op": "projection",
        "profile": profile,
        "removed": projected.removed,
        "content_sha256": sha256_hex(&projected.text),
        "prev": origin_hash,
    });
    let head = hash_of(&projection);
    (
        vec![
            json!({"seq": 0, "hash": origin_hash, "withheld": "salted origin of a projected item"}),
            projection,
        ],
        head,
    )
}

/// What an item shows besides its content (RFC §3.2), built by the service.
pub struct ItemParts<'a> {
    pub owner_did: &'a str,
    pub subject_entity_id: Option<&'a str>,
    pub now: memory_core::Timestamp,
    pub embedding: bool,
}

/// The §3.2 item for `entry`, with its chain.
pub fn item(
    entry: &StoredEntry,
    parts: &ItemParts<'_>,
    projected: &Projected,
    chain: (Vec<Value>, String),
) -> Value {
    let mut item = Map::new();
    item.insert("item_id".into(), json!(entry.entry.id));
    item.insert("owner_did".into(), json!(parts.owner_did));
    item.insert("scope_id".into(), json!(entry.memory_ref.to_string()));
    item.insert("kind".into(), json!(Kind::of(entry).as_str()));
    if let Some(subject) = parts.subject_entity_id {
        item.insert("subject_entity_id".into(), json!(subject));
    }
    item.insert("content".into(), json!({"text": projected.text}));
    if parts.embedding {
        if let Some(e) = &entry.embedding {
            item.insert(
                "embedding".into(),
                json!({"model": e.model, "dimensions": e.vector.len(), "vector": e.vector}),
            );
        }
    }
    item.insert(
        "provenance".into(),
        json!({
            "captured_at": entry.entry.created_at.to_rfc3339(),
            "source": source_of(entry),
        }),
    );
    item.insert("labels".into(), json!(labels(entry)));
    if let Some(exp) = entry.entry.expires_at {
        let ms = (exp.as_millis() - parts.now.as_millis()).max(0);
        item.insert("ttl_days".into(), json!((ms + 86_399_999) / 86_400_000));
    }
    item.insert("exportable".into(), json!(true));
    item.insert("chain".into(), json!(chain.0));
    item.insert("chain_hash".into(), json!(chain.1));
    Value::Object(item)
}
