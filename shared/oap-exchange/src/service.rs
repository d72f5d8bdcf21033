//! The exchange door's behaviour (OAP RFC 0010 §3.4-§3.6, §6): issuing and revoking grants,
//! answering a grantee's query from the grant's slice, and the receipt log behind both. The
//! memory it reads is the host's one store through memory-core, so deletes, forgets and TTL
//! take effect on every grant at once (§6) without any work here.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};
use sha2::Digest;

use crate::bundle::{self, BundleManifest, BundleStore, Digest256, Lines};
use crate::error::ExchangeError;
use crate::grant::{tenant_of_granter, CheckedFilter, Grant, GrantRecord, GrantRequest};
use crate::item::{self, ItemParts, Kind};
use crate::projection;
use crate::receipt::{self, Receipt, ReceiptFacts};
use crate::signing::HostKey;
use crate::store::{
    BundleHolding, ExchangeStore, ExpiryEntry, GrantChange, LogAppend, ReceiptPage,
};
use memory_core::events::{DomainEvent, EventType};
use memory_core::listing::snapshot;
use memory_core::ports::{Clock, EntryStore, EventPublisher, IdSource};
use memory_core::{MemoryRef, StoredEntry, SubjectKey, TenantId, Timestamp};
use text_search::{Ranking, TermCache};

/// Longest query text, in bytes (as the search route).
pub const MAX_QUERY_BYTES: usize = 1024;
/// `max_results` when the query names none (RFC example: 20) and its ceiling.
pub const DEFAULT_MAX_RESULTS: u32 = 20;
pub const MAX_RESULTS: u32 = 100;
/// Appends retried when another append moved the tip first.
const APPEND_ATTEMPTS: usize = 16;

/// A grantee's query (§3.5). Anything else in the body is refused: a grantee cannot send a
/// filter of its own, so it cannot widen the grant's.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryRequest {
    pub query: String,
    #[serde(default)]
    pub max_results: Option<u32>,
    #[serde(default)]
    pub include_embeddings: bool,
}

pub struct ExchangePorts {
    pub grants: Arc<dyn ExchangeStore>,
    pub bundles: Arc<dyn BundleStore>,
    pub entries: Arc<dyn EntryStore>,
    pub publisher: Arc<dyn EventPublisher>,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdSource>,
}

/// An export request (`POST /oap/memory/export`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportRequest {
    pub scope_id: String,
    /// How long the answer's download URL works, 60-3600 s (default 900).
    #[serde(default)]
    pub url_seconds: Option<u64>,
}

/// An import request (`POST /oap/memory/import`): the target ref and one source, either a
/// bundle's signed manifest (which names the bundle and is the capability to read it) or a
/// Letta agent file (its JSON, or its text).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    pub scope_id: String,
    #[serde(default)]
    pub manifest: Option<BundleManifest>,
    #[serde(default)]
    pub letta_agent_file: Option<Value>,
}

/// What a streamed export wrote.
struct Exported {
    items: u64,
    deleted: u64,
    bytes: u64,
    sha256: String,
    subjects: BTreeSet<String>,
}

/// Entries written per conditional put on import.
const IMPORT_BATCH: usize = 25;

pub struct Exchange {
    ports: ExchangePorts,
    key: HostKey,
    terms: TermCache,
    redactor: Arc<memory_core::Redactor>,
    /// Where the tenant's quota limits are read: imports are refused at a limit like the SR-1
    /// writer's puts (docs/quotas.md "Limits"); without it they are only counted.
    quotas: Option<Arc<dyn memory_core::ports::QuotaStore>>,
}

impl Exchange {
    /// `redactor` is the host's SR-1 redactor (its configured secrets): what imports pass
    /// every string through.
    pub fn new(ports: ExchangePorts, key: HostKey, redactor: Arc<memory_core::Redactor>) -> Self {
        Exchange {
            ports,
            key,
            terms: TermCache::default(),
            redactor,
            quotas: None,
        }
    }

    /// Refuses imports over the tenant's quotas (entries per ref, bytes per tenant, writes per
    /// minute: each batch of an import is one write).
    pub fn with_quotas(mut self, quotas: Option<Arc<dyn memory_core::ports::QuotaStore>>) -> Self {
        self.quotas = quotas;
        self
    }

    pub fn key(&self) -> &HostKey {
        &self.key
    }

    /// Issues a grant of `tenant`'s memory: checks it, cuts its slice, signs it, and records it
    /// with its receipt. Answers the signed grant, its bearer token and the slice's size.
    pub async fn grant(
        &self,
        tenant: &TenantId,
        request: GrantRequest,
    ) -> Result<Value, ExchangeError> {
        let now = self.ports.clock.now();
        let grant_id = format!("mgr_{}", self.ports.ids.next_id(now));
        let (mut grant, filter) = request.into_grant(self.key.did(), tenant, grant_id, now)?;
        let memory_ref = self.scope(tenant, &grant.scope_id)?;
        let mut admitted: Vec<StoredEntry> = self
            .live(&memory_ref, now)
            .await?
            .into_iter()
            .filter(|e| admits(&filter, e))
            .collect();
        // Newest first; the slice is the newest `max_items`.
        admitted.sort_by(|a, b| {
            (b.entry.created_at, &b.entry.id).cmp(&(a.entry.created_at, &a.entry.id))
        });
        admitted.truncate(grant.max_items as usize);
        grant.sign(&self.key);
        let token = self.key.compact_jws(&json!(grant));
        let record = GrantRecord {
            grant_id: grant.grant_id.clone(),
            tenant: tenant.clone(),
            scope_id: grant.scope_id.clone(),
            grantee: grant.grantee.clone(),
            grant_hash: grant.hash(),
            issued_at: now,
            expires_at: Timestamp::parse_rfc3339(&grant.expires_at)?,
            revocable: grant.revocable,
            revoked_at: None,
            slice: admitted.iter().map(|e| e.entry.id.clone()).collect(),
        };
        let slice_items = record.slice.len();
        let facts = ReceiptFacts {
            receipt_type: "memory.grant",
            principal_did: grant.granter.clone(),
            agent_did: grant.grantee.clone(),
            action_id: "oap.memory.grant",
            input: grant.unsigned(),
            output: json!({"grant_id": grant.grant_id, "slice_items": slice_items}),
            rule: "oap.memory.grant.issued",
            outcome: "allow",
        };
        let expiry = ExpiryEntry {
            tenant: tenant.clone(),
            grant_id: record.grant_id.clone(),
            expires_at: record.expires_at,
        };
        let change = GrantChange::Issue(record);
        let receipt = self.append(tenant, &facts, Some(&change)).await?;
        // Outside the grant's write (the index is not the tenant's): if it fails, the first
        // refused query still announces the expiry.
        if let Err(e) = self.ports.grants.index_expiry(&expiry).await {
            tracing::warn!(grant_id = %expiry.grant_id, error = %e, "grant not in the expiry index");
        }
        self.announce(
            EventType::GrantIssued,
            &memory_ref,
            &grant.grant_id,
            json!({
                "grantId": grant.grant_id,
                "grantee": grant.grantee,
                "expiresAt": grant.expires_at,
                "sliceItems": slice_items,
            }),
        )
        .await;
        tracing::info!(grant_id = %grant.grant_id, slice_items, "grant issued");
        Ok(json!({
            "grant": grant,
            "token": token,
            "slice_items": slice_items,
            "receipt": receipt.body,
        }))
    }

    /// Revokes one of `tenant`'s grants; the next query with it is refused. Revoking a revoked
    /// grant answers as the first revocation did, without a second receipt.
    pub async fn revoke(&self, tenant: &TenantId, grant_id: &str) -> Result<Value, ExchangeError> {
        for _ in 0..APPEND_ATTEMPTS {
            let record = self
                .ports
                .grants
                .grant(tenant, grant_id)
                .await?
                .ok_or(ExchangeError::NotFound)?;
            if let Some(at) = record.revoked_at {
                return Ok(
                    json!({"grant_id": grant_id, "revoked": true, "revoked_at": at.to_rfc3339()}),
                );
            }
            if !record.revocable {
                return Err(ExchangeError::NotRevocable);
            }
            let now = self.ports.clock.now();
            let facts = ReceiptFacts {
                receipt_type: "memory.revoke",
                principal_did: crate::grant::tenant_did(self.key.did(), tenant),
                agent_did: record.grantee.clone(),
                action_id: "oap.memory.revoke",
                input: json!({"grant_id": grant_id}),
                output: json!({"grant_id": grant_id, "revoked": true}),
                rule: "oap.memory.grant.revoked",
                outcome: "allow",
            };
            let change = GrantChange::Revoke {
                grant_id: grant_id.to_owned(),
                at: now,
            };
            match self.append_once(tenant, &facts, Some(&change)).await? {
                Some(receipt) => {
                    if let Some(memory_ref) =
                        memory_core::TenantScope::new(tenant.clone()).admit(&record.scope_id)
                    {
                        self.announce(
                            EventType::GrantRevoked,
                            &memory_ref,
                            grant_id,
                            json!({"grantId": grant_id}),
                        )
                        .await;
                    }
                    tracing::info!(grant_id = %grant_id, "grant revoked");
                    return Ok(json!({
                        "grant_id": grant_id,
                        "revoked": true,
                        "revoked_at": now.to_rfc3339(),
                        "receipt": receipt.body,
                    }));
                }
                None => continue,
            }
        }
        Err(contention())
    }

    /// Answers a grantee's query (§3.5): the grant's slice as it is now, ranked for the query,
    /// projected by the grant's profile, each item with its chain, and the query's receipt.
    pub async fn query(
        &self,
        bearer: Option<&str>,
        request: QueryRequest,
    ) -> Result<Value, ExchangeError> {
        let token = bearer.ok_or(ExchangeError::GrantRefused(
            "a grant is required as the bearer token",
        ))?;
        let grant = Grant::from_bearer(&self.key, token)?;
        let tenant = tenant_of_granter(self.key.did(), &grant.granter).ok_or(
            ExchangeError::GrantRefused("not a grant signed by this host"),
        )?;
        let now = self.ports.clock.now();
        let record = self
            .ports
            .grants
            .grant(&tenant, &grant.grant_id)
            .await?
            .filter(|r| r.grant_hash == grant.hash())
            .ok_or(ExchangeError::GrantRefused(
                "not a grant signed by this host",
            ))?;
        if record.revoked_at.is_some() {
            return Err(ExchangeError::GrantRefused("the grant was revoked"));
        }
        if now >= record.expires_at {
            self.announce_expiry(&tenant, &record).await;
            return Err(ExchangeError::GrantRefused("the grant has expired"));
        }
        if request.query.trim().is_empty() || request.query.len() > MAX_QUERY_BYTES {
            return Err(ExchangeError::invalid(
                "query",
                format!("1-{MAX_QUERY_BYTES} bytes, not blank"),
            ));
        }
        let max_results = request.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
        if !(1..=MAX_RESULTS).contains(&max_results) {
            return Err(ExchangeError::invalid(
                "max_results",
                format!("1 to {MAX_RESULTS}"),
            ));
        }
        if request.include_embeddings && !grant.allows_embeddings() {
            return Err(ExchangeError::NotCovered(
                "embeddings (the grant has no embeddings scope)",
            ));
        }
        let mut filter_source = grant.filter.clone();
        let filter = filter_source.checked(&tenant)?;
        let memory_ref = self.scope(&tenant, &grant.scope_id)?;
        let slice: BTreeSet<&str> = record.slice.iter().map(String::as_str).collect();
        let candidates: Vec<StoredEntry> = self
            .live(&memory_ref, now)
            .await?
            .into_iter()
            .filter(|e| slice.contains(e.entry.id.as_str()) && admits(&filter, e))
            .collect();
        let limit = max_results.min(grant.max_items) as usize;
        let hits = memory_core::search::rank(
            &self.terms,
            &candidates,
            &[],
            &request.query,
            Ranking::Text,
            true,
            limit,
        );
        let parts = ItemParts {
            owner_did: &grant.granter,
            subject_entity_id: None,
            now,
            embedding: request.include_embeddings,
        };
        let mut items = Vec::with_capacity(hits.len());
        let mut heads = Vec::with_capacity(hits.len());
        for hit in &hits {
            let entry = &candidates[hit.index];
            let projected = projection::apply(&grant.redaction_profile, &entry.entry.content);
            let salts = |id: &str| self.key.chain_salt(&grant.scope_id, id);
            let chain = item::chain(entry, &salts, &grant.redaction_profile, &projected);
            heads.push(json!({"item_id": entry.entry.id, "chain_hash": chain.1}));
            let parts = ItemParts {
                subject_entity_id: filter.subject_name(entry.subject.as_ref()),
                ..parts
            };
            items.push(item::item(entry, &parts, &projected, chain));
        }
        let facts = ReceiptFacts {
            receipt_type: "memory.query",
            principal_did: grant.granter.clone(),
            agent_did: grant.grantee.clone(),
            action_id: "oap.memory.query",
            input: json!({"grant_id": grant.grant_id, "query_sha256": crate::canonical::sha256_hex(&request.query), "max_results": max_results, "include_embeddings": request.include_embeddings}),
            output: json!({"items": heads}),
            rule: "oap.memory.grant.valid",
            outcome: "allow",
        };
        let receipt = self.append(&tenant, &facts, None).await?;
        tracing::info!(grant_id = %grant.grant_id, items = items.len(), "grant query answered");
        Ok(json!({
            "grant_id": grant.grant_id,
            "items": items,
            "receipt": receipt.body,
        }))
    }

    /// Exports one of `tenant`'s refs as a bundle (docs/oap.md "Export and import"): streamed
    /// to the bundle store a part at a time, described by a signed manifest, answered with a
    /// short-lived download URL.
    pub async fn export(
        &self,
        tenant: &TenantId,
        request: ExportRequest,
    ) -> Result<Value, ExchangeError> {
        let seconds = request.url_seconds.unwrap_or(900);
        if !(60..=3600).contains(&seconds) {
            return Err(ExchangeError::invalid("url_seconds", "60 to 3600"));
        }
        let memory_ref = self.scope(tenant, &request.scope_id)?;
        let now = self.ports.clock.now();
        let bundle_id = format!("mbx_{}", self.ports.ids.next_id(now));
        let object = bundle::object_key(tenant, &bundle_id)
            .ok_or_else(|| ExchangeError::invalid("scope_id", "unusable"))?;
        let upload = self.ports.bundles.begin(&object).await?;
        let written = self.stream_export(&memory_ref, &object, &upload, now).await;
        let Exported {
            items,
            deleted,
            bytes,
            sha256,
            subjects,
        } = match written {
            Ok(w) => w,
            Err(e) => {
                self.ports.bundles.abort(&object, &upload).await;
                return Err(e);
            }
        };
        let mut manifest = BundleManifest {
            format: bundle::FORMAT.to_owned(),
            bundle_id: bundle_id.clone(),
            issuer: self.key.did().to_owned(),
            owner_did: crate::grant::tenant_did(self.key.did(), tenant),
            scope_id: memory_ref.to_string(),
            created_at: now.to_rfc3339(),
            items,
            deleted,
            bytes,
            sha256,
            object: object.as_str().to_owned(),
            signature: String::new(),
        };
        manifest.sign(&self.key);
        let facts = ReceiptFacts {
            receipt_type: "memory.export",
            principal_did: manifest.owner_did.clone(),
            agent_did: manifest.owner_did.clone(),
            action_id: "oap.memory.export",
            input: json!({"scope_id": manifest.scope_id}),
            output: json!({"bundle_id": bundle_id, "items": items, "sha256": manifest.sha256}),
            rule: "oap.memory.export.owner",
            outcome: "allow",
        };
        // Indexed before the receipt: a forget from now on finds the bundle.
        let subjects: Vec<SubjectKey> = subjects
            .iter()
            .filter_map(|s| SubjectKey::from_stored(tenant, s))
            .collect();
        let holding = BundleHolding {
            bundle_id: bundle_id.clone(),
            object: object.as_str().to_owned(),
        };
        self.ports
            .grants
            .index_bundle(tenant, &holding, &subjects)
            .await?;
        let receipt = self.append(tenant, &facts, None).await?;
        let url = self.ports.bundles.presign(&object, seconds).await?;
        tracing::info!(bundle_id = %bundle_id, items, bytes, "bundle exported");
        Ok(json!({
            "bundle_id": bundle_id,
            "items": items,
            "bytes": bytes,
            "url": url,
            "url_expires_at": now.plus_millis(seconds as i64 * 1000).to_rfc3339(),
            "manifest": manifest,
            "receipt": receipt.body,
        }))
    }

    /// Uploads `part` as the next part of the object and notes its number and ETag, which
    /// completing the upload names.
    async fn upload_part(
        &self,
        object: &memory_core::ports::ObjectKey,
        upload: &str,
        parts: &mut Vec<(i32, String)>,
        part: Vec<u8>,
    ) -> Result<(), ExchangeError> {
        let number = parts.len() as i32 + 1;
        let etag = self
            .ports
            .bundles
            .part(object, upload, number, part)
            .await?;
        parts.push((number, etag));
        Ok(())
    }

    /// Writes the ref's live entries as bundle lines, a page of the store at a time, a part of
    /// the object at a time. Answers the item count, the byte count and the digest.
    async fn stream_export(
        &self,
        memory_ref: &MemoryRef,
        object: &memory_core::ports::ObjectKey,
        upload: &str,
        now: Timestamp,
    ) -> Result<Exported, ExchangeError> {
        let (mut items, mut bytes) = (0u64, 0u64);
        let mut subjects = BTreeSet::new();
        let mut digest = Digest256::default();
        let mut buffer: Vec<u8> = Vec::with_capacity(bundle::PART_BYTES + (256 << 10));
        let mut parts: Vec<(i32, String)> = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .ports
                .entries
                .list_page(
                    memory_ref,
                    &memory_core::ports::PageQuery {
                        limit: 500,
                        after: after.take(),
                        now,
                    },
                )
                .await?;
            for e in page
                .entries
                .iter()
                .filter(|e| !memory_core::history::is_history(&e.entry.tags))
            {
                let scope = e.memory_ref.to_string();
                let salts = |id: &str| self.key.chain_salt(&scope, id);
                let mut line = serde_json::to_vec(&bundle::line_of(e, &salts))
                    .map_err(|_| ExchangeError::Config("a bundle line did not encode"))?;
                line.push(b'\n');
                if let Some(subject) = &e.subject {
                    subjects.insert(subject.as_str().to_owned());
                }
                digest.update(&line);
                bytes += line.len() as u64;
                items += 1;
                buffer.extend_from_slice(&line);
                // Flushed line by line, so the buffer never grows past one part and a line;
                // the next buffer is made once the part is gone, so one part is held at a time.
                if buffer.len() >= bundle::PART_BYTES {
                    let part = std::mem::take(&mut buffer);
                    self.upload_part(object, upload, &mut parts, part).await?;
                    buffer.reserve(bundle::PART_BYTES + (256 << 10));
                }
            }
            match page.next_after {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let mut deleted = 0u64;
        for id in self.ports.entries.tombstones(memory_ref).await? {
            let mut line = serde_json::to_vec(&bundle::DeletionMarker { deleted: id })
                .map_err(|_| ExchangeError::Config("a bundle line did not encode"))?;
            line.push(b'\n');
            digest.update(&line);
            bytes += line.len() as u64;
            deleted += 1;
            buffer.extend_from_slice(&line);
        }
        if !buffer.is_empty() || parts.is_empty() {
            self.upload_part(object, upload, &mut parts, buffer).await?;
        }
        self.ports.bundles.complete(object, upload, &parts).await?;
        Ok(Exported {
            items,
            deleted,
            bytes,
            sha256: digest.hex(),
            subjects,
        })
    }

    /// Imports a bundle this host exported into one of `tenant`'s refs: checked whole against
    /// its signed manifest before anything is written, then written in conditional batches, so a
    /// second import of the same bundle adds nothing.
    pub async fn import(
        &self,
        tenant: &TenantId,
        request: ImportRequest,
    ) -> Result<Value, ExchangeError> {
        let memory_ref = self.scope(tenant, &request.scope_id)?;
        let manifest = match (request.manifest, request.letta_agent_file) {
            (Some(m), None) => m.verified(&self.key)?,
            (None, Some(af)) => return self.import_letta(tenant, &memory_ref, af).await,
            _ => {
                return Err(ExchangeError::invalid(
                    "manifest",
                    "exactly one of manifest and letta_agent_file",
                ))
            }
        };
        let source = tenant_of_granter(self.key.did(), &manifest.owner_did)
            .and_then(|t| memory_core::ports::ObjectKey::from_listed(&t, &manifest.object))
            .ok_or_else(|| ExchangeError::invalid("manifest", "names no bundle of this host"))?;
        let changed = || {
            ExchangeError::invalid(
                "manifest",
                "the bundle does not match its manifest (changed or gone)",
            )
        };
        if self.ports.bundles.size(&source).await? != Some(manifest.bytes) {
            return Err(changed());
        }
        let mut digest = Digest256::default();
        self.read_bundle(&source, manifest.bytes, |chunk| {
            digest.update(chunk);
            Ok(())
        })
        .await?;
        if digest.hex() != manifest.sha256 {
            return Err(changed());
        }
        let now = self.ports.clock.now();
        let redact = |s: &str| self.redactor.redact(s).into_owned();
        let (mut imported, mut present, mut skipped, mut deleted) = (0u64, 0u64, 0u64, 0u64);
        let mut lines = Lines::default();
        let mut batch: Vec<StoredEntry> = Vec::with_capacity(IMPORT_BATCH);
        let mut pending: Vec<Vec<u8>> = Vec::new();
        let mut offset = 0u64;
        while offset < manifest.bytes {
            let len = bundle::READ_BYTES.min(manifest.bytes - offset);
            let chunk = self.ports.bundles.read(&source, offset, len).await?;
            offset += len;
            pending.extend(lines.feed(&chunk));
            if offset >= manifest.bytes {
                pending.extend(lines.finish_take());
            }
            for raw in pending.drain(..) {
                let line: bundle::Line = serde_json::from_slice(&raw).map_err(|_| changed())?;
                let line = match line {
                    bundle::Line::Item(line) => line,
                    bundle::Line::Deleted(marker) => {
                        if memory_core::model::is_valid_entry_id(&marker.deleted) {
                            let key = memory_core::EntryKey {
                                memory_ref: memory_ref.clone(),
                                id: marker.deleted,
                            };
                            if self.ports.entries.delete(&key).await? {
                                deleted += 1;
                            }
                        }
                        continue;
                    }
                };
                match bundle::entry_of(&line, &memory_ref, &redact, now) {
                    Some(entry) => batch.push(entry),
                    None => skipped += 1,
                }
                if batch.len() == IMPORT_BATCH {
                    let (i, p) = self.put_absent(std::mem::take(&mut batch)).await?;
                    imported += i;
                    present += p;
                }
            }
        }
        let (i, p) = self.put_absent(batch).await?;
        imported += i;
        present += p;
        let facts = ReceiptFacts {
            receipt_type: "memory.import",
            principal_did: crate::grant::tenant_did(self.key.did(), tenant),
            agent_did: manifest.owner_did.clone(),
            action_id: "oap.memory.import",
            input: json!({"bundle_id": manifest.bundle_id, "sha256": manifest.sha256, "scope_id": memory_ref.to_string()}),
            output: json!({"imported": imported, "already_present": present, "skipped": skipped, "deleted": deleted}),
            rule: "oap.memory.import.signed_bundle",
            outcome: "allow",
        };
        let receipt = self.append(tenant, &facts, None).await?;
        tracing::info!(bundle_id = %manifest.bundle_id, imported, already_present = present, skipped, deleted, "bundle imported");
        Ok(json!({
            "bundle_id": manifest.bundle_id,
            "scope_id": memory_ref.to_string(),
            "imported": imported,
            "already_present": present,
            "skipped": skipped,
            "deleted": deleted,
            "receipt": receipt.body,
        }))
    }

    /// Imports the memory blocks of a Letta agent file, one entry per block (tags `letta` and
    /// `letta-block:<label>`), SR-1 applied. Ids derive from the file's instant and the block, so
    /// importing the same file twice adds nothing.
    async fn import_letta(
        &self,
        tenant: &TenantId,
        memory_ref: &MemoryRef,
        af: Value,
    ) -> Result<Value, ExchangeError> {
        let af = match af {
            Value::String(text) => serde_json::from_str(&text)
                .map_err(|_| ExchangeError::invalid("letta_agent_file", "not JSON"))?,
            other => other,
        };
        let blocks = crate::letta::blocks(&af)?;
        let at = crate::letta::captured_at(&af).unwrap_or(Timestamp::from_millis(0));
        let redact = |s: &str| self.redactor.redact(s).into_owned();
        let mut entries = Vec::with_capacity(blocks.len());
        let mut skipped = 0u64;
        for b in &blocks {
            let digest = sha2::Sha256::digest(
                format!("{}\0{}\0{}", b.agent, b.block_id, b.value).as_bytes(),
            );
            let mut random = [0u8; 16];
            random.copy_from_slice(&digest[..16]);
            let id = memory_core::model::ulid_string(at, u128::from_be_bytes(random));
            let tags: Vec<String> = [
                "letta".to_owned(),
                crate::letta::label_tag(&redact(&b.label)),
            ]
            .into_iter()
            .filter(|t| memory_core::model::is_valid_tag(t))
            .collect();
            let content = redact(&b.value);
            if content.len() > memory_core::writer::MAX_CONTENT_BYTES {
                skipped += 1;
                continue;
            }
            entries.push(StoredEntry {
                memory_ref: memory_ref.clone(),
                entry: memory_core::MemoryEntry {
                    id,
                    content,
                    tags,
                    created_at: at,
                    expires_at: None,
                },
                tier: memory_core::Tier::LongTerm,
                subject: None,
                attribution: memory_core::model::Attribution::default(),
                provenance: Vec::new(),
                embedding: None,
            });
        }
        let (mut imported, mut present) = (0u64, 0u64);
        for chunk in entries.chunks(IMPORT_BATCH) {
            let (i, p) = self.put_absent(chunk.to_vec()).await?;
            imported += i;
            present += p;
        }
        let facts = ReceiptFacts {
            receipt_type: "memory.import",
            principal_did: crate::grant::tenant_did(self.key.did(), tenant),
            agent_did: crate::grant::tenant_did(self.key.did(), tenant),
            action_id: "oap.memory.import",
            input: json!({"source": "letta-agent-file", "sha256": crate::canonical::sha256_hex(&crate::canonical::canonicalize(&af)), "scope_id": memory_ref.to_string()}),
            output: json!({"imported": imported, "already_present": present, "skipped": skipped}),
            rule: "oap.memory.import.letta",
            outcome: "allow",
        };
        let receipt = self.append(tenant, &facts, None).await?;
        tracing::info!(
            blocks = blocks.len(),
            imported,
            already_present = present,
            "letta agent file imported"
        );
        Ok(json!({
            "source": "letta-agent-file",
            "scope_id": memory_ref.to_string(),
            "blocks": blocks.len(),
            "imported": imported,
            "already_present": present,
            "skipped": skipped,
            "receipt": receipt.body,
        }))
    }

    async fn read_bundle(
        &self,
        key: &memory_core::ports::ObjectKey,
        size: u64,
        mut each: impl FnMut(&[u8]) -> Result<(), ExchangeError>,
    ) -> Result<(), ExchangeError> {
        let mut offset = 0u64;
        while offset < size {
            let len = bundle::READ_BYTES.min(size - offset);
            let chunk = self.ports.bundles.read(key, offset, len).await?;
            if chunk.len() as u64 != len {
                return Err(ExchangeError::invalid(
                    "manifest",
                    "the bundle does not match its manifest (changed or gone)",
                ));
            }
            each(&chunk)?;
            offset += len;
        }
        Ok(())
    }

    /// Writes the entries whose ids are free; answers (written, already there). A put that
    /// lost a race to a concurrent import of the same bundle is read again and counted as there.
    async fn put_absent(&self, batch: Vec<StoredEntry>) -> Result<(u64, u64), ExchangeError> {
        if batch.is_empty() {
            return Ok((0, 0));
        }
        for _ in 0..3 {
            let keys: Vec<memory_core::EntryKey> = batch.iter().map(StoredEntry::key).collect();
            let there: BTreeSet<String> = self
                .ports
                .entries
                .get_many(&keys)
                .await?
                .into_iter()
                .map(|e| e.entry.id)
                .collect();
            let fresh: Vec<StoredEntry> = batch
                .iter()
                .filter(|e| !there.contains(&e.entry.id))
                .cloned()
                .collect();
            // Charged in the batch's own write: a batch over a quota is refused whole, and
            // the batches before it stay (a repeated import adds only what is missing).
            let check = match (&self.quotas, fresh.first()) {
                (Some(quotas), Some(first)) => {
                    let limits = quotas.limits(first.memory_ref.tenant()).await?;
                    memory_core::quota::QuotaCheck::for_put(&limits, &fresh, self.ports.clock.now())
                }
                _ => memory_core::quota::QuotaCheck {
                    charges: memory_core::quota::stored_charges(&fresh, &[], None),
                    at: None,
                },
            };
            match self
                .ports
                .entries
                .put_entries_checked(&fresh, None, &check)
                .await
            {
                Ok(()) => return Ok((fresh.len() as u64, there.len() as u64)),
                Err(memory_core::StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(contention())
    }

    /// The tenant's receipt log from sequence number `from`.
    pub async fn receipts(
        &self,
        tenant: &TenantId,
        from: u64,
        limit: u32,
    ) -> Result<Value, ExchangeError> {
        self.fold_notices(tenant).await?;
        let page = ReceiptPage {
            from,
            limit: limit.clamp(1, 1000),
        };
        let receipts = self.ports.grants.receipts(tenant, page).await?;
        let next =
            (receipts.len() as u64 == u64::from(page.limit)).then(|| from + receipts.len() as u64);
        Ok(json!({"receipts": receipts, "next_from": next}))
    }

    fn scope(&self, tenant: &TenantId, scope_id: &str) -> Result<MemoryRef, ExchangeError> {
        memory_core::TenantScope::new(tenant.clone())
            .admit(scope_id)
            .ok_or_else(|| ExchangeError::invalid("scope_id", "a memoryRef of the caller's tenant"))
    }

    /// Live entries of the ref, without the history copies of superseded entries.
    async fn live(
        &self,
        memory_ref: &MemoryRef,
        now: Timestamp,
    ) -> Result<Vec<StoredEntry>, ExchangeError> {
        let mut all = snapshot(self.ports.entries.as_ref(), memory_ref, now).await?;
        all.retain(|e| !memory_core::history::is_history(&e.entry.tags));
        Ok(all)
    }

    /// Turns the forget notices waiting for the tenant into signed `memory.forget` receipts, in
    /// order, each taken off the list in the same write as its receipt (so each lands once).
    async fn fold_notices(&self, tenant: &TenantId) -> Result<(), ExchangeError> {
        for notice in self.ports.grants.notices(tenant).await? {
            let facts = ReceiptFacts {
                receipt_type: "memory.forget",
                principal_did: crate::grant::tenant_did(self.key.did(), tenant),
                agent_did: crate::grant::tenant_did(self.key.did(), tenant),
                action_id: "oap.memory.forget",
                input: json!({"notice_id": notice.notice_id, "at": notice.at.to_rfc3339()}),
                output: json!({"deleted_bundles": notice.bundles}),
                rule: "oap.core.data_policy.deletion",
                outcome: "allow",
            };
            let change = GrantChange::ConsumeNotice {
                notice_id: notice.notice_id.clone(),
            };
            for _ in 0..APPEND_ATTEMPTS {
                if self
                    .append_once(tenant, &facts, Some(&change))
                    .await?
                    .is_some()
                {
                    break;
                }
                let still = self.ports.grants.notices(tenant).await?;
                if !still.iter().any(|n| n.notice_id == notice.notice_id) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Appends a receipt, rebuilding it on the new tip whenever another append got there first.
    /// Forget notices waiting for the log go in first, so the log keeps their order.
    async fn append(
        &self,
        tenant: &TenantId,
        facts: &ReceiptFacts,
        change: Option<&GrantChange>,
    ) -> Result<Receipt, ExchangeError> {
        self.fold_notices(tenant).await?;
        for _ in 0..APPEND_ATTEMPTS {
            if let Some(receipt) = self.append_once(tenant, facts, change).await? {
                return Ok(receipt);
            }
        }
        Err(contention())
    }

    /// One attempt; `None` when the tip moved or the change's condition failed.
    async fn append_once(
        &self,
        tenant: &TenantId,
        facts: &ReceiptFacts,
        change: Option<&GrantChange>,
    ) -> Result<Option<Receipt>, ExchangeError> {
        let tip = self.ports.grants.tip(tenant).await?;
        let now = self.ports.clock.now();
        let receipt = receipt::build(&self.key, facts, &tip, &self.ports.ids.next_id(now), now);
        match self
            .ports
            .grants
            .append(
                tenant,
                LogAppend {
                    at: &tip,
                    receipt: &receipt,
                    change,
                },
            )
            .await
        {
            Ok(()) => Ok(Some(receipt)),
            Err(memory_core::StoreError::Conflict { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The grants that have expired and are still in the expiry index, over the last three
    /// days (a sweep runs hourly; one that missed more is caught up by refused queries).
    pub async fn due_expiries(&self) -> Result<Vec<ExpiryEntry>, ExchangeError> {
        let now = self.ports.clock.now();
        let mut due = Vec::new();
        for back in (0..3).rev() {
            let day = crate::store::day_of(now.plus_millis(-back * 86_400_000));
            due.extend(self.ports.grants.due_expiries(&day, now).await?);
        }
        Ok(due)
    }

    /// Announces one due grant's expiry (unless it was revoked first) and takes it out of the
    /// index. Idempotent: an expiry is recorded and announced once however often this runs.
    pub async fn expire(&self, entry: &ExpiryEntry) -> Result<(), ExchangeError> {
        if let Some(record) = self
            .ports
            .grants
            .grant(&entry.tenant, &entry.grant_id)
            .await?
        {
            if record.revoked_at.is_none() {
                self.announce_expiry(&entry.tenant, &record).await;
            }
        }
        self.ports.grants.drop_expiry(entry).await?;
        Ok(())
    }

    /// Announces a grant's expiry once: the first refused query after it, or the sweep, records
    /// it with a receipt; any later one finds it recorded.
    pub async fn announce_expiry(&self, tenant: &TenantId, record: &GrantRecord) {
        let facts = ReceiptFacts {
            receipt_type: "memory.expire",
            principal_did: crate::grant::tenant_did(self.key.did(), tenant),
            agent_did: record.grantee.clone(),
            action_id: "oap.memory.expire",
            input: json!({"grant_id": record.grant_id}),
            output: json!({"grant_id": record.grant_id, "expired_at": record.expires_at.to_rfc3339()}),
            rule: "oap.memory.grant.expired",
            outcome: "deny",
        };
        let change = GrantChange::AnnounceExpiry {
            grant_id: record.grant_id.clone(),
        };
        // A failed announcement is retried by the next refused query; the refusal stands.
        if let Ok(Some(_)) = self.append_once(tenant, &facts, Some(&change)).await {
            if let Some(memory_ref) =
                memory_core::TenantScope::new(tenant.clone()).admit(&record.scope_id)
            {
                self.announce(
                    EventType::GrantExpired,
                    &memory_ref,
                    &record.grant_id,
                    json!({"grantId": record.grant_id}),
                )
                .await;
            }
        }
    }

    async fn announce(
        &self,
        event_type: EventType,
        memory_ref: &MemoryRef,
        grant_id: &str,
        detail: Value,
    ) {
        let event = DomainEvent::for_ref(
            event_type,
            memory_ref,
            format!("{}:{grant_id}", event_type.as_str()),
            detail,
        );
        if let Err(e) = self.ports.publisher.publish(&[event]).await {
            tracing::warn!(grant_id = %grant_id, error = %e, "grant event not published");
        }
    }
}

fn admits(filter: &CheckedFilter, e: &StoredEntry) -> bool {
    filter.admits(
        e.subject.as_ref(),
        Kind::of(e),
        e.entry.created_at,
        &e.entry.tags,
    )
}

fn contention() -> ExchangeError {
    ExchangeError::Store(memory_core::StoreError::Conflict {
        op: "receipt append",
    })
}
