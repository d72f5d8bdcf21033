//! Portable bundles (OAP RFC 0010 §7 "a portable export format", §2 vendor migration): a tenant
//! exports one memoryRef as JSON Lines of memory items with their content hashes and chains, plus
//! a manifest the host signs; another tenant (or ref) imports it. docs/oap.md "Export and import".
//!
//! Streaming both ways: the export reads the ref a page at a time and uploads parts of a few MiB
//! (no function holds the whole export); the import reads the object back in ranges, first to
//! check it against the manifest's digest (nothing is written from a changed bundle), then to
//! write it.
//!
//! An imported item keeps its item id, so importing a bundle twice adds nothing (every write is
//! conditional on the id being free) and a round trip export → import → export gives the same
//! items and hashes. Its chain continues the bundle's: the import link names the exported
//! `chain_hash` as its `prev`. Every string goes through SR-1 again.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::canonical::sha256_hex;
use crate::error::ExchangeError;
use crate::item::{self, Kind};
use crate::signing::HostKey;
use memory_core::model::{Attribution, MemoryEntry, StoredEntry, Tier};
use memory_core::ports::ObjectKey;
use memory_core::{StoreError, TenantId, Timestamp};

/// The bundle format this host writes and reads.
pub const FORMAT: &str = "oap.memory.bundle.v1";
/// Bytes uploaded per part (S3 wants at least 5 MiB for every part but the last).
pub const PART_BYTES: usize = 8 << 20;
/// Bytes read per range on import.
pub const READ_BYTES: u64 = 8 << 20;
/// A provenance mark naming the chain an imported entry continues: the id alphabet only, so it
/// is stored like any provenance id and can never name a live entry.
pub const IMPORT_MARK: &str = "oapimport.";

/// Where bundles are kept: a multipart object store that can hand out short-lived URLs.
#[async_trait]
pub trait BundleStore: Send + Sync {
    async fn begin(&self, key: &ObjectKey) -> Result<String, StoreError>;
    async fn part(
        &self,
        key: &ObjectKey,
        upload: &str,
        number: i32,
        bytes: Vec<u8>,
    ) -> Result<String, StoreError>;
    async fn complete(
        &self,
        key: &ObjectKey,
        upload: &str,
        parts: &[(i32, String)],
    ) -> Result<(), StoreError>;
    async fn abort(&self, key: &ObjectKey, upload: &str);
    async fn put(&self, key: &ObjectKey, bytes: Vec<u8>) -> Result<(), StoreError>;
    /// The object's size, `None` when it does not exist.
    async fn size(&self, key: &ObjectKey) -> Result<Option<u64>, StoreError>;
    async fn read(&self, key: &ObjectKey, start: u64, len: u64) -> Result<Vec<u8>, StoreError>;
    /// A GET URL valid for `seconds`.
    async fn presign(&self, key: &ObjectKey, seconds: u64) -> Result<String, StoreError>;
}

/// The signed description of a bundle. Importing needs it: its signature proves this host wrote
/// the bundle, its digest that nothing in the object changed since.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleManifest {
    pub format: String,
    pub bundle_id: String,
    pub issuer: String,
    pub owner_did: String,
    pub scope_id: String,
    pub created_at: String,
    pub items: u64,
    /// Deletion markers after the items: entries forget removed lately (tombstoned).
    pub deleted: u64,
    pub bytes: u64,
    pub sha256: String,
    pub object: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
}

impl BundleManifest {
    fn unsigned(&self) -> Value {
        let mut v = json!(self);
        if let Some(m) = v.as_object_mut() {
            m.remove("signature");
        }
        v
    }

    pub fn sign(&mut self, key: &HostKey) {
        self.signature = key.sign(&self.unsigned());
    }

    pub fn verified(self, key: &HostKey) -> Result<Self, ExchangeError> {
        if self.format != FORMAT
            || self.issuer != key.did()
            || !key.verifies(&self.unsigned(), &self.signature)
        {
            return Err(ExchangeError::invalid(
                "manifest",
                "not a bundle manifest signed by this host, or changed since",
            ));
        }
        Ok(self)
    }
}

/// One line of a bundle: an item with everything needed to restore it and verify its history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BundleLine {
    pub item_id: String,
    pub kind: Kind,
    pub content: Content,
    pub labels: Vec<String>,
    pub captured_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    pub tier: String,
    pub content_sha256: String,
    /// Entries never change after they are written, so an item has one version; the field is
    /// the RFC's, ready for stores that keep more.
    pub versions: Vec<Value>,
    pub chain: Vec<Value>,
    pub chain_hash: String,
    pub exportable: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Content {
    pub text: String,
}

/// The bundle line of a stored entry.
pub fn line_of(entry: &StoredEntry, salts: item::Salts<'_>) -> BundleLine {
    let chain = item::full_chain(entry, salts);
    BundleLine {
        item_id: entry.entry.id.clone(),
        kind: Kind::of(entry),
        content: Content {
            text: entry.entry.content.clone(),
        },
        labels: item::labels(entry),
        captured_at: entry.entry.created_at.to_rfc3339(),
        expires_at: entry.entry.expires_at.map(Timestamp::to_rfc3339),
        tier: entry.tier.as_str().to_owned(),
        content_sha256: sha256_hex(&entry.entry.content),
        versions: vec![json!({
            "version": 1,
            "captured_at": entry.entry.created_at.to_rfc3339(),
            "content_sha256": sha256_hex(&entry.entry.content),
        })],
        chain_hash: chain.1,
        chain: chain.0,
        exportable: true,
    }
}

/// A deletion marker: an item the exporting ref no longer has because forget removed it. An
/// import deletes the item where an earlier import had put it, so a successor's copy follows the
/// original's deletions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeletionMarker {
    pub deleted: String,
}

/// One line of a bundle: an item, or a deletion marker.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Line {
    Deleted(DeletionMarker),
    Item(Box<BundleLine>),
}

/// The entry an imported line becomes in `memory_ref`: the same id, text through SR-1, the
/// kind kept as a tag where it would not be inferred again, and the provenance mark that
/// continues its chain. `None` for a line that is not restorable (an id or label outside the
/// host's rules, an expiry already past): the import reports it as skipped.
pub fn entry_of(
    line: &BundleLine,
    memory_ref: &memory_core::MemoryRef,
    redact: &dyn Fn(&str) -> String,
    now: Timestamp,
) -> Option<StoredEntry> {
    if !memory_core::model::is_valid_entry_id(&line.item_id) {
        return None;
    }
    let captured = Timestamp::parse_rfc3339(&line.captured_at).ok()?;
    let expires_at = match &line.expires_at {
        Some(t) => Some(Timestamp::parse_rfc3339(t).ok()?),
        None => None,
    };
    if expires_at.is_some_and(|t| t <= now) {
        return None;
    }
    let mut tags: Vec<String> = Vec::with_capacity(line.labels.len() + 1);
    for l in &line.labels {
        let l = redact(l);
        if !memory_core::model::is_valid_tag(&l) {
            return None;
        }
        if !tags.contains(&l) {
            tags.push(l);
        }
    }
    let head = line.chain_hash.strip_prefix("sha256:")?;
    if head.len() != 64 || !head.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut entry = StoredEntry {
        memory_ref: memory_ref.clone(),
        entry: MemoryEntry {
            id: line.item_id.clone(),
            content: redact(&line.content.text),
            tags,
            created_at: captured,
            expires_at,
        },
        tier: Tier::parse(&line.tier).unwrap_or(Tier::LongTerm),
        subject: None,
        attribution: Attribution::default(),
        provenance: vec![format!("{IMPORT_MARK}{head}")],
        embedding: None,
    };
    if Kind::of(&entry) != line.kind {
        entry
            .entry
            .tags
            .push(format!("kind:{}", line.kind.as_str()));
    }
    Some(entry)
}

/// Splits a byte stream into lines across reads: what is left after the last newline waits for
/// the next read.
#[derive(Default)]
pub struct Lines {
    rest: Vec<u8>,
}

impl Lines {
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.rest.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut start = 0;
        for (i, b) in self.rest.iter().enumerate() {
            if *b == b'\n' {
                out.push(self.rest[start..i].to_vec());
                start = i + 1;
            }
        }
        self.rest.drain(..start);
        out
    }

    /// What is left after the last read (a last line without a newline).
    pub fn finish_take(&mut self) -> Option<Vec<u8>> {
        (!self.rest.is_empty()).then(|| std::mem::take(&mut self.rest))
    }
}

/// SHA-256 of a stream, fed as it is read.
#[derive(Default)]
pub struct Digest256(Sha256);

impl Digest256 {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn hex(self) -> String {
        memory_core::model::hex(&self.0.finalize())
    }
}

/// The object key of a bundle of `tenant`.
pub fn object_key(tenant: &TenantId, bundle_id: &str) -> Option<ObjectKey> {
    ObjectKey::new(tenant, &format!("oap/exports/{bundle_id}.jsonl"))
}
