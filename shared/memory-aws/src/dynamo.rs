//! `EntryStore` on one DynamoDB table (docs/architecture.md "Storage layout (one DynamoDB table)").
//!
//! Item layout — every key starts with the tenant, so one Query can never span tenants and IAM
//! `dynamodb:LeadingKeys` can pin a principal to `"{tenant}#*"`:
//!   pk          `{tenantId}#{agentId}`      one partition per memoryRef
//!   sk          `E#{entryId}`               ULIDs, so a reverse scan is newest first
//!   subjectKey  `{tenantId}#{sha256}`       only on entries with a subject: the sparse
//!                                           `bySubject` index behind delete-by-subject
//!   ttl         epoch seconds (rounded up)  DynamoDB TTL; reads filter expiry themselves
//!   rev         revision digest             background passes delete only unchanged entries
//!
//! Work markers, one item per (ref, kind) at sk `W#dream` / `W#consolidate`: `dirtyVersion`
//! counts writes that made a pass pending; `dirtyPartition` (`{kind}#{shard}`) and `dirtySince` are
//! present only while a pass is pending, which makes `byDirtyRef` a sparse index of exactly the
//! refs a fan-out must visit; `watermarkMs` is the last finished pass's high-water mark;
//! `passRunning` is set while a pass reads the ref. A write marks the ref after its transaction,
//! with a conditional update that applies only when the ref is not pending or a pass is running,
//! so concurrent writers never put the marker into each other's transactions (on DynamoDB that
//! is a `TransactionConflict` for all but one) and a dirty period costs one marker write.
//!
//! Provenance (the ids an entry was derived from) is bounded inline: past
//! [`INLINE_PROVENANCE`] ids the rest moves to overflow items `P#{entryId}#{n}` of at most
//! [`PROVENANCE_CHUNK`] ids each in the same partition, written in the entry's transaction and
//! read back with it, so an entry distilled or merged from any number of sources stays far
//! below DynamoDB's 400 KB item limit and forget still sees every source id. Deleting an entry
//! deletes its overflow items.
//!
//! Tag postings (docs/api.md "Tag lists"): sk `G#{tagKey}#{entryId}`, one per distinct tag of an
//! entry, holding only keys and the entry's `ttl`, so a tag's entries are one newest-first key
//! range. They are written before the entry (in transactions of their own: an entry's tags do not
//! fit the entry's transaction beside 25 entries) and removed after it, so every live entry has its
//! postings; one left behind by a crash proposes an id that the read then finds missing.
//!
//! Change records (the search index's tail, docs/search.md "The index"): sk `U#{ULID}` (update) in the
//! ref's partition, `ids` the entry ids a mutation touched, nothing else. Puts, rewrites,
//! keyed deletes and vector backfills write theirs in the mutation's own transaction; a plain
//! delete writes its right after the item is gone (a crash in between leaves the deleted entry's
//! segment copy unmasked, which a query still never answers: hits are read back from the table).
//!
//! Tombstones (forget's fence, `memory_core::forget`): sk `T#{entryId}` in the entry's
//! partition, TTL'd. Idempotency records: pk `{tenantId}#K#{keyDigest}`, sk `K` (never a valid
//! ref partition, still under the tenant's leading key), TTL'd after the key's window.
//!
//! Reads are strongly consistent (read-your-writes); the `bySubject` index can only be read
//! eventually consistently, which forget accepts (docs/guarantees.md "Forget").

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::builders::DeleteItemFluentBuilder;
use aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, KeysAndAttributes, Put, ReturnValue, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;

use memory_core::idempotency::{Claim, Completion, IdempotencyKey, KeyClaim, KeyRecord};
use memory_core::listing::MAX_LIST_LIMIT;
use memory_core::model::{
    Attribution, Embedding, EntryKey, MemoryEntry, StoredEntry, SubjectKey, Tier,
};
use memory_core::ports::{
    pending_shard, within, Change, EntryStore, IdBound, MarkerState, Page, PageQuery, PassKind,
    MAX_ENTRIES_PER_PUT, MAX_ITEMS_PER_TRANSACTION,
};
use memory_core::quota::{stored_charges, QuotaCheck};
use memory_core::tag_filter::tag_key;
use memory_core::{StoreError, Timestamp};
use memory_guard::{AgentId, MemoryRef, TenantId};

use crate::error::backend;
use crate::tenant::{DynamoClients, TenantSessions};

/// Path keys of the Claude memory tool (`PathStore`), on this table and its item codec.
mod paths;
pub(crate) mod quota;

pub use quota::quota_partition;

pub const SUBJECT_INDEX: &str = "bySubject";
pub const DIRTY_INDEX: &str = "byDirtyRef";
const ENTRY_PREFIX: &str = "E#";
const TOMBSTONE_PREFIX: &str = "T#";
const PROVENANCE_PREFIX: &str = "P#";
const POSTING_PREFIX: &str = "G#";
const CHANGE_PREFIX: &str = "U#";
/// Provenance ids kept on the entry item itself.
pub const INLINE_PROVENANCE: usize = 100;
/// Provenance ids per overflow item: 8,000 ULIDs are about 220 KB, well under 400 KB.
pub const PROVENANCE_CHUNK: usize = 8_000;
const CONDITION_FAILED: &str = "ConditionalCheckFailedException";
/// Recording a key's result: only by the attempt that holds it, only once (in a transaction
/// with the entries, or alone).
const COMPLETE_UPDATE: &str = "SET #r = :r";
const COMPLETE_CONDITION: &str = "attempt = :a AND attribute_not_exists(#r)";

pub type Item = HashMap<String, AttributeValue>;

#[derive(Clone, Debug)]
pub struct DynamoEntryStore {
    /// The function's own client, or the acting tenant's when tenant-scoped credentials are on
    /// (`tenant.rs`): every call below on one tenant's keys takes `clients.data(op)`.
    clients: DynamoClients,
    table: String,
    /// The deployment's quota limits (docs/quotas.md "Limits"), before a tenant's override.
    quota_defaults: memory_core::quota::Limits,
    limits_cache: quota::LimitsCache,
}

pub fn partition_key(r: &MemoryRef) -> String {
    format!("{}#{}", r.tenant().as_str(), r.agent().as_str())
}

fn entry_sort_key(id: &str) -> String {
    format!("{ENTRY_PREFIX}{id}")
}

/// `subjectKey` of an item: the subject's tenant first, so one tenant's subject can never match
/// another's.
pub fn subject_attr(subject: &SubjectKey) -> String {
    format!("{}#{}", subject.tenant().as_str(), subject.as_str())
}

/// A string attribute. The item helpers below are the one attribute codec of the table, shared
/// with `commitment-aws`.
pub fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// A number attribute.
pub fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn key_item(key: &EntryKey) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(partition_key(&key.memory_ref))),
        ("sk".to_owned(), s(entry_sort_key(&key.id))),
    ])
}

/// A change record touching `ids` of `r`, under a fresh ULID (unique across writers, ordered by
/// time).
fn change_item<'a>(r: &MemoryRef, ids: impl IntoIterator<Item = &'a str>) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(partition_key(r))),
        (
            "sk".to_owned(),
            s(format!("{CHANGE_PREFIX}{}", ulid::Ulid::new())),
        ),
        (
            "ids".to_owned(),
            AttributeValue::L(ids.into_iter().map(s).collect()),
        ),
    ])
}

/// One change record per ref among `keys`.
fn change_items<'a>(keys: impl IntoIterator<Item = (&'a MemoryRef, &'a str)>) -> Vec<Item> {
    let mut by_ref: BTreeMap<&MemoryRef, Vec<&str>> = BTreeMap::new();
    for (r, id) in keys {
        by_ref.entry(r).or_default().push(id);
    }
    by_ref
        .into_iter()
        .map(|(r, ids)| change_item(r, ids))
        .collect()
}

/// An entry's attributes as the table stores them (docs/architecture.md "Storage layout (one
/// DynamoDB table)"), beside its `pk`/`sk`.
/// `serde_dynamo` maps this struct to and from DynamoDB attributes, so the struct is the codec;
/// absent optional attributes stay absent on the wire.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntryItem {
    #[serde(default)]
    id: String,
    content: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    created_at: String,
    created_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ttl: Option<i64>,
    #[serde(default)]
    tier: String,
    #[serde(default)]
    rev: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    provenance: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    provenance_chunks: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    agent_id: Option<String>,
    /// The model of the `embedding` attribute (a binary attribute written beside the struct:
    /// little-endian f32s, 4 bytes a dimension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    embedding_model: Option<String>,
}

/// The binary attribute holding an entry's embedding vector.
const EMBEDDING_ATTRIBUTE: &str = "embedding";

/// The embedding an item carries: none for an empty vector, which would not read back.
fn stored_embedding(e: &StoredEntry) -> Option<&Embedding> {
    e.embedding.as_ref().filter(|v| !v.vector.is_empty())
}

fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn vector_of(bytes: &[u8]) -> Option<Vec<f32>> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return None;
    }
    let floats = bytes.chunks_exact(4);
    Some(
        floats
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

/// An entry's item exactly as `put_entries` writes it (without its postings or overflow items);
/// public so scale tests can bulk-load real entry items.
pub fn entry_item(e: &StoredEntry) -> Result<Item, StoreError> {
    let chunks = overflow_chunks(e).count();
    let attributes = EntryItem {
        id: e.entry.id.clone(),
        content: e.entry.content.clone(),
        tags: e.entry.tags.clone(),
        created_at: e.entry.created_at.to_rfc3339(),
        created_at_ms: e.entry.created_at.as_millis(),
        expires_at_ms: e.entry.expires_at.map(Timestamp::as_millis),
        ttl: e.entry.expires_at.map(Timestamp::epoch_seconds_ceil),
        tier: e.tier.as_str().to_owned(),
        rev: e.revision(),
        provenance: e.provenance[..e.provenance.len().min(INLINE_PROVENANCE)].to_vec(),
        provenance_chunks: (chunks > 0).then_some(chunks as i64),
        subject_key: e.subject.as_ref().map(subject_attr),
        run_id: e.attribution.run_id.clone(),
        node_id: e.attribution.node_id.clone(),
        agent_id: e.attribution.agent_id.clone(),
        embedding_model: stored_embedding(e).map(|v| v.model.clone()),
    };
    let mut item: Item = serde_dynamo::to_item(attributes).map_err(|_| StoreError::Corrupt {
        key: format!(
            "{}/{}",
            partition_key(&e.memory_ref),
            entry_sort_key(&e.entry.id)
        ),
    })?;
    item.extend(key_item(&e.key()));
    if let Some(embedding) = stored_embedding(e) {
        let bytes = Blob::new(vector_bytes(&embedding.vector));
        item.insert(EMBEDDING_ATTRIBUTE.to_owned(), AttributeValue::B(bytes));
    }
    Ok(item)
}

fn posting_prefix(tag: &str) -> String {
    format!("{POSTING_PREFIX}{}#", tag_key(tag))
}

/// The items of an entry's tag postings as `put_entries` writes them beside its entry item;
/// public so scale tests can bulk-load real entries.
pub fn posting_items(e: &StoredEntry) -> Vec<Item> {
    let ttl = e.entry.expires_at.map(Timestamp::epoch_seconds_ceil);
    posting_keys(e)
        .into_iter()
        .map(|mut item| {
            if let Some(ttl) = ttl {
                item.insert("ttl".to_owned(), n(ttl));
            }
            item
        })
        .collect()
}

/// The keys of an entry's tag postings, one per distinct tag.
fn posting_keys(e: &StoredEntry) -> Vec<Item> {
    let pk = partition_key(&e.memory_ref);
    let tags: BTreeSet<&String> = e.entry.tags.iter().collect();
    tags.into_iter()
        .map(|t| {
            HashMap::from([
                ("pk".to_owned(), s(&pk)),
                (
                    "sk".to_owned(),
                    s(format!("{}{}", posting_prefix(t), e.entry.id)),
                ),
            ])
        })
        .collect()
}

/// The provenance ids past the inline bound, in overflow-item order.
fn overflow_chunks(e: &StoredEntry) -> std::slice::Chunks<'_, String> {
    e.provenance
        .get(INLINE_PROVENANCE..)
        .unwrap_or_default()
        .chunks(PROVENANCE_CHUNK)
}

fn provenance_chunk_prefix(id: &str) -> String {
    format!("{PROVENANCE_PREFIX}{id}#")
}

/// The memoryRef of a partition key written by [`partition_key`].
pub fn ref_from_pk(pk: &str) -> Option<MemoryRef> {
    let (tenant, agent) = pk.split_once('#')?;
    Some(MemoryRef::new(
        TenantId::parse(tenant).ok()?,
        AgentId::parse(agent).ok()?,
    ))
}

/// A string attribute of `item`, if present and a string.
pub fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

/// A number attribute of `item` that fits an `i64`.
pub fn get_n(item: &Item, name: &str) -> Option<i64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

fn key_of(item: &Item) -> Option<EntryKey> {
    let memory_ref = ref_from_pk(get_s(item, "pk")?)?;
    let id = get_s(item, "sk")?.strip_prefix(ENTRY_PREFIX)?.to_owned();
    Some(EntryKey { memory_ref, id })
}

/// An item this version cannot read, named by its keys (ids only, never content).
pub(crate) fn corrupt_item(item: &Item) -> StoreError {
    StoreError::Corrupt {
        key: format!(
            "{}/{}",
            get_s(item, "pk").unwrap_or("?"),
            get_s(item, "sk").unwrap_or("?")
        ),
    }
}

fn decode(item: &Item) -> Result<StoredEntry, StoreError> {
    let corrupt = || corrupt_item(item);
    let key = key_of(item).ok_or_else(corrupt)?;
    let stored: EntryItem = serde_dynamo::from_item(item.clone()).map_err(|_| corrupt())?;
    let tenant = key.memory_ref.tenant();
    let subject = match stored.subject_key {
        Some(raw) => Some(
            raw.strip_prefix(tenant.as_str())
                .and_then(|r| r.strip_prefix('#'))
                .and_then(|digest| SubjectKey::from_stored(tenant, digest))
                .ok_or_else(corrupt)?,
        ),
        None => None,
    };
    Ok(StoredEntry {
        entry: MemoryEntry {
            id: key.id,
            content: stored.content,
            tags: stored.tags,
            created_at: Timestamp::from_millis(stored.created_at_ms),
            expires_at: stored.expires_at_ms.map(Timestamp::from_millis),
        },
        memory_ref: key.memory_ref,
        tier: Tier::parse(&stored.tier).unwrap_or_default(),
        subject,
        attribution: Attribution {
            run_id: stored.run_id,
            node_id: stored.node_id,
            agent_id: stored.agent_id,
        },
        provenance: stored.provenance,
        embedding: match (stored.embedding_model, item.get(EMBEDDING_ATTRIBUTE)) {
            (Some(model), Some(AttributeValue::B(bytes))) => Some(Embedding {
                model,
                vector: vector_of(bytes.as_ref()).ok_or_else(corrupt)?,
            }),
            (None, None) => None,
            _ => return Err(corrupt()),
        },
    })
}

/// Which items of a cancelled transaction failed their condition (in request order); `None`
/// unless the transaction was cancelled for a failed condition.
fn failed_conditions(
    err: &SdkError<TransactWriteItemsError, impl std::fmt::Debug>,
) -> Option<Vec<bool>> {
    match err {
        SdkError::ServiceError(service) => match service.err() {
            TransactWriteItemsError::TransactionCanceledException(t) => {
                let failed: Vec<bool> = t
                    .cancellation_reasons()
                    .iter()
                    .map(|r| r.code() == Some("ConditionalCheckFailed"))
                    .collect();
                failed.iter().any(|f| *f).then_some(failed)
            }
            _ => None,
        },
        _ => None,
    }
}

/// A transaction that did not apply: cancelled by failed conditions (which items), or another
/// failure already mapped to the core's error.
pub(crate) enum TxError {
    Conditions(Vec<bool>),
    Store(StoreError),
}

impl TxError {
    pub(crate) fn into_store(self, op: &'static str) -> StoreError {
        match self {
            TxError::Conditions(_) => StoreError::Conflict { op },
            TxError::Store(e) => e,
        }
    }
}

/// A transaction cancelled because another transaction held one of its items
/// (`TransactionConflict`) or a partition throttled: the same transaction can succeed later.
fn is_transaction_race(err: &SdkError<TransactWriteItemsError, impl std::fmt::Debug>) -> bool {
    match err {
        SdkError::ServiceError(service) => match service.err() {
            TransactWriteItemsError::TransactionCanceledException(t) => {
                t.cancellation_reasons().iter().any(|r| {
                    matches!(
                        r.code(),
                        Some(
                            "TransactionConflict"
                                | "ThrottlingError"
                                | "ProvisionedThroughputExceeded"
                        )
                    )
                }) && !t
                    .cancellation_reasons()
                    .iter()
                    .any(|r| r.code() == Some("ConditionalCheckFailed"))
            }
            TransactWriteItemsError::TransactionInProgressException(_) => true,
            _ => false,
        },
        _ => false,
    }
}

fn key_record_key(key: &IdempotencyKey) -> Item {
    HashMap::from([
        (
            "pk".to_owned(),
            s(format!("{}#K#{}", key.tenant().as_str(), key.digest())),
        ),
        ("sk".to_owned(), s("K")),
    ])
}

fn decode_key_record(item: &Item) -> Option<KeyRecord> {
    Some(KeyRecord {
        payload: get_s(item, "payload")?.to_owned(),
        attempt: get_s(item, "attempt")?.to_owned(),
        first_attempt_at: Timestamp::from_millis(get_n(item, "firstAttemptMs")?),
        lease_until: Timestamp::from_millis(get_n(item, "leaseUntilMs")?),
        result: get_s(item, "result").map(str::to_owned),
    })
}

fn marker_key(r: &MemoryRef, kind: PassKind) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(partition_key(r))),
        ("sk".to_owned(), s(format!("W#{}", kind.as_str()))),
    ])
}

fn marker_state_of(item: &Item) -> MarkerState {
    MarkerState {
        version: get_n(item, "dirtyVersion").and_then(|v| u64::try_from(v).ok()),
        pending: item.contains_key("dirtyPartition"),
        watermark: get_n(item, "watermarkMs").map(Timestamp::from_millis),
        running: item.contains_key("passRunning"),
    }
}

/// Wall-clock milliseconds, for the informational `passRunning` stamp only.
fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn dirty_partition(kind: PassKind, shard: u8) -> String {
    format!("{}#{shard:02}", kind.as_str())
}

/// One DynamoDB call, metered and retried like every call of this crate; a failure that is not
/// the caller's to interpret is [`backend`]'s answer.
pub async fn call<R: crate::meter::Metered>(
    op: &'static str,
    request: &R,
) -> Result<R::Output, StoreError> {
    crate::retry::metered(op, request)
        .await
        .map_err(|e| backend(op, &e))
}

/// Every page of a Query, following `LastEvaluatedKey`; also the total `ScannedCount`, the
/// items DynamoDB read (what a Query costs).
pub async fn query_all(
    request: QueryFluentBuilder,
    op: &'static str,
) -> Result<(Vec<Item>, u64), StoreError> {
    let mut items = Vec::new();
    let mut scanned = 0u64;
    let mut start: Option<Item> = None;
    loop {
        let page = request.clone().set_exclusive_start_key(start.take());
        let out = call(op, &page).await?;
        scanned += u64::try_from(out.scanned_count()).unwrap_or(0);
        items.extend(out.items().iter().cloned());
        match out.last_evaluated_key() {
            Some(k) if !k.is_empty() => start = Some(k.clone()),
            _ => return Ok((items, scanned)),
        }
    }
}

/// The table as one client reaches it, and the operation its calls report: what every plain
/// (untransacted) read, write and Query of the stores here goes through, so the client, the
/// table's name and the operation travel as one value. An SDK client is a cheap handle.
#[derive(Clone, Debug)]
pub struct Table<'a> {
    client: Client,
    name: &'a str,
    op: &'static str,
}

impl<'a> Table<'a> {
    pub fn new(client: Client, name: &'a str, op: &'static str) -> Self {
        Table { client, name, op }
    }

    /// The operation its calls report.
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// A PutItem of `item` into this table, for the caller to condition and send.
    pub fn put_item(&self, item: Item) -> PutItemFluentBuilder {
        self.client
            .put_item()
            .table_name(self.name)
            .set_item(Some(item))
    }

    /// An UpdateItem of the item at `key`, for the caller to complete and send.
    pub fn update_item(&self, key: Item) -> UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(self.name)
            .set_key(Some(key))
    }

    /// A DeleteItem of the item at `key`, for the caller to condition and send.
    pub fn delete_item(&self, key: Item) -> DeleteItemFluentBuilder {
        self.client
            .delete_item()
            .table_name(self.name)
            .set_key(Some(key))
    }

    /// A transaction's update (its key, expressions and condition) as one UpdateItem: for the
    /// writes that go alone or in a transaction.
    pub fn update_alone(&self, update: Update) -> UpdateItemFluentBuilder {
        self.update_item(update.key)
            .update_expression(update.update_expression)
            .set_condition_expression(update.condition_expression)
            .set_expression_attribute_names(update.expression_attribute_names)
            .set_expression_attribute_values(update.expression_attribute_values)
    }

    /// One conditional write under the shared retry policy: its output when applied, `None` when
    /// its condition failed (an answer for the caller to act on, not an error).
    pub async fn conditional<R: crate::meter::Metered>(
        &self,
        request: &R,
    ) -> Result<Option<R::Output>, StoreError> {
        match crate::retry::metered(self.op, request).await {
            Ok(out) => Ok(Some(out)),
            Err(e) if crate::error::service_code(&e) == Some(CONDITION_FAILED) => Ok(None),
            Err(e) => Err(backend(self.op, &e)),
        }
    }

    /// One strongly consistent `GetItem` (read-your-writes), under the shared retry policy.
    pub async fn read(&self, key: Item) -> Result<Option<Item>, StoreError> {
        let request = self
            .client
            .get_item()
            .table_name(self.name)
            .set_key(Some(key))
            .consistent_read(true);
        Ok(call(self.op, &request).await?.item)
    }

    /// Puts `item` unconditionally under the shared retry policy.
    pub async fn put(&self, item: Item) -> Result<(), StoreError> {
        call(self.op, &self.put_item(item)).await.map(drop)
    }

    /// Deletes the item at `key` unconditionally under the shared retry policy.
    pub async fn delete(&self, key: Item) -> Result<(), StoreError> {
        self.delete_one(key, ReturnValue::None).await.map(drop)
    }

    /// Deletes the item at `key` and answers what was there (`None`: nothing was), so the
    /// caller can clean up what hung off it without a read first.
    pub async fn delete_returning_old(&self, key: Item) -> Result<Option<Item>, StoreError> {
        self.delete_one(key, ReturnValue::AllOld).await
    }

    /// One unconditional DeleteItem under the shared retry policy; what was there when
    /// `returning` asks for it.
    async fn delete_one(
        &self,
        key: Item,
        returning: ReturnValue,
    ) -> Result<Option<Item>, StoreError> {
        let request = self.delete_item(key).return_values(returning);
        let out = call(self.op, &request).await?;
        Ok(out.attributes.filter(|a| !a.is_empty()))
    }

    /// A strongly consistent Query of partition `pk` for the sort keys that meet `sort_key`
    /// (a condition on `sk`, whose values the caller binds).
    pub fn partition_query(&self, pk: impl Into<String>, sort_key: &str) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(self.name)
            .consistent_read(true)
            .key_condition_expression(format!("pk = :pk AND {sort_key}"))
            .expression_attribute_values(":pk", s(pk))
    }

    /// A strongly consistent Query of partition `pk` for the sort keys that start with
    /// `prefix`: how every adapter reads one kind of item of a partition.
    pub fn prefix_query(
        &self,
        pk: impl Into<String>,
        prefix: impl Into<String>,
    ) -> QueryFluentBuilder {
        self.partition_query(pk, "begins_with(sk, :prefix)")
            .expression_attribute_values(":prefix", s(prefix))
    }

    /// Every item of [`Self::prefix_query`], every page of them.
    pub async fn prefix_items(
        &self,
        pk: impl Into<String>,
        prefix: impl Into<String>,
    ) -> Result<Vec<Item>, StoreError> {
        Ok(query_all(self.prefix_query(pk, prefix), self.op).await?.0)
    }

    /// Every item of the sparse index `index` whose partition attribute `attribute` is `value`.
    pub async fn index_items(
        &self,
        (index, attribute): (&str, &str),
        value: String,
    ) -> Result<Vec<Item>, StoreError> {
        let request = self
            .client
            .query()
            .table_name(self.name)
            .index_name(index)
            .key_condition_expression(format!("{attribute} = :v"))
            .expression_attribute_values(":v", s(value));
        Ok(query_all(request, self.op).await?.0)
    }

    /// Every item of one tenant's subject (the subject index), entries and commitments alike.
    pub async fn subject_items(&self, subject: &SubjectKey) -> Result<Vec<Item>, StoreError> {
        let value = subject_attr(subject);
        self.index_items((SUBJECT_INDEX, "subjectKey"), value).await
    }

    /// The ref and id of every item of one tenant's subject whose sort key is `prefix` and an id:
    /// the entries, commitments or path links of a subject, found through the subject index.
    /// An item whose partition is not one of that tenant's refs is passed over, so a key built
    /// from another tenant's partition can never be answered.
    pub async fn subject_ids(
        &self,
        subject: &SubjectKey,
        prefix: &str,
    ) -> Result<Vec<(MemoryRef, String)>, StoreError> {
        let tenant = subject.tenant();
        let items = self.subject_items(subject).await?;
        Ok(items
            .iter()
            .filter_map(|item| {
                let memory_ref =
                    ref_from_pk(get_s(item, "pk")?).filter(|r| r.tenant() == tenant)?;
                let id = get_s(item, "sk")?.strip_prefix(prefix)?;
                Some((memory_ref, id.to_owned()))
            })
            .collect())
    }
}

/// One transaction under the shared retry policy: races and throttles are retried until the
/// deadline, a cancellation by failed conditions says which items failed.
pub(crate) async fn transact_with(
    client: &Client,
    op: &'static str,
    items: Vec<TransactWriteItem>,
) -> Result<(), TxError> {
    let request = client
        .transact_write_items()
        .set_transact_items(Some(items));
    crate::retry::send_tracked(
        op,
        || crate::meter::Metered::send_metered(request.clone()),
        |err| is_transaction_race(err) || crate::retry::is_retryable(err),
    )
    .await
    .map_err(
        |crate::retry::Failed {
             error: err,
             maybe_applied,
         }| {
            if let Some(failed) = failed_conditions(&err) {
                // The callers re-read: their own earlier attempt or another writer.
                TxError::Conditions(failed)
            } else if maybe_applied {
                TxError::Store(StoreError::OutcomeUnknown {
                    op,
                    code: crate::error::code_of(&err),
                })
            } else if is_transaction_race(&err) {
                TxError::Store(StoreError::Unavailable {
                    op,
                    code: "TransactionConflict".into(),
                })
            } else {
                TxError::Store(backend(op, &err))
            }
        },
    )?;
    Ok(())
}

/// A write cancelled by its conditions whose check read (was it this call's own earlier
/// attempt?) failed: its outcome is unknown, whatever the read's error.
fn unknown_after(op: &'static str, read: StoreError) -> StoreError {
    let code = match read {
        StoreError::Unavailable { code, .. }
        | StoreError::Backend { code, .. }
        | StoreError::OutcomeUnknown { code, .. } => code,
        StoreError::Conflict { .. } | StoreError::Corrupt { .. } | StoreError::QuotaExceeded(_) => {
            return read
        }
    };
    StoreError::OutcomeUnknown { op, code }
}

pub(crate) fn build_error(op: &'static str) -> StoreError {
    StoreError::Backend {
        op,
        code: "BuildRequest".into(),
    }
}

/// The values a write's expressions name, `(":name", value)`.
pub(crate) type Values<'a> = Vec<(&'a str, AttributeValue)>;

/// One write of a transaction: an item written whole, or the item at a key deleted or updated.
pub(crate) enum Write<'a> {
    Put(Item),
    Delete(Item),
    /// Only the doors' counters update inside a transaction.
    #[cfg_attr(not(any(feature = "keyed", feature = "exchange")), allow(dead_code))]
    Update(Item, &'a str),
}

/// The SDK's put, delete and update builders share these methods but no trait.
macro_rules! conditioned {
    ($builder:expr, $condition:expr, $values:expr) => {{
        let mut builder = $builder.set_condition_expression($condition.map(str::to_owned));
        for (name, v) in $values {
            builder = builder.expression_attribute_values(name, v);
        }
        builder
    }};
}

/// A transaction item for `write`, under `condition` when there is one. The stores here build
/// every transaction write through it, so a condition and the values it names travel together.
pub(crate) fn transact_item(
    op: &'static str,
    table: &str,
    write: Write<'_>,
    condition: Option<&str>,
    values: Values<'_>,
) -> Result<TransactWriteItem, StoreError> {
    let item = TransactWriteItem::builder();
    let item = match write {
        Write::Put(i) => item.put(
            conditioned!(Put::builder().set_item(Some(i)), condition, values)
                .table_name(table)
                .build()
                .map_err(|_| build_error(op))?,
        ),
        Write::Delete(key) => item.delete(
            conditioned!(Delete::builder().set_key(Some(key)), condition, values)
                .table_name(table)
                .build()
                .map_err(|_| build_error(op))?,
        ),
        Write::Update(key, update) => item.update(
            conditioned!(Update::builder().set_key(Some(key)), condition, values)
                .table_name(table)
                .update_expression(update)
                .build()
                .map_err(|_| build_error(op))?,
        ),
    };
    Ok(item.build())
}

impl DynamoEntryStore {
    /// A transaction item that writes `item` as it is (side items: overflow, postings).
    fn unconditional_put(
        &self,
        op: &'static str,
        item: Item,
    ) -> Result<TransactWriteItem, StoreError> {
        transact_item(op, &self.table, Write::Put(item), None, Vec::new())
    }

    /// The transaction items that write `e` only if its id is free: the entry, then its
    /// provenance overflow items (if any).
    fn put_if_absent(
        &self,
        op: &'static str,
        e: &StoredEntry,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let mut items = vec![transact_item(
            op,
            &self.table,
            Write::Put(entry_item(e)?),
            Some("attribute_not_exists(pk)"),
            Vec::new(),
        )?];
        let pk = partition_key(&e.memory_ref);
        for (i, chunk) in overflow_chunks(e).enumerate() {
            let item = HashMap::from([
                ("pk".to_owned(), s(&pk)),
                (
                    "sk".to_owned(),
                    s(format!("{}{i:05}", provenance_chunk_prefix(&e.entry.id))),
                ),
                (
                    "ids".to_owned(),
                    AttributeValue::L(chunk.iter().map(s).collect()),
                ),
            ]);
            items.push(self.unconditional_put(op, item)?);
        }
        Ok(items)
    }

    /// Decodes an entry item, reading its provenance overflow items when it has any.
    async fn decode_full(&self, item: &Item) -> Result<StoredEntry, StoreError> {
        let mut e = decode(item)?;
        if get_n(item, "provenanceChunks").unwrap_or(0) > 0 {
            for chunk in self.overflow_items(&e.key()).await? {
                if let Some(AttributeValue::L(ids)) = chunk.get("ids") {
                    e.provenance
                        .extend(ids.iter().filter_map(|v| v.as_s().ok()).cloned());
                }
            }
        }
        Ok(e)
    }

    async fn overflow_items(&self, key: &EntryKey) -> Result<Vec<Item>, StoreError> {
        let table = self
            .clients
            .table(&self.table, "provenance_overflow")
            .await?;
        table
            .prefix_items(
                partition_key(&key.memory_ref),
                provenance_chunk_prefix(&key.id),
            )
            .await
    }

    /// Deletes the overflow items of an entry that is gone.
    async fn delete_overflow(&self, key: &EntryKey) -> Result<(), StoreError> {
        let table = self.clients.table(&self.table, "delete_overflow").await?;
        for item in self.overflow_items(key).await? {
            let Some(sk) = get_s(&item, "sk") else {
                continue;
            };
            let item_key = HashMap::from([
                ("pk".to_owned(), s(partition_key(&key.memory_ref))),
                ("sk".to_owned(), s(sk)),
            ]);
            table.delete(item_key).await?;
        }
        Ok(())
    }
}

impl DynamoEntryStore {
    /// Deletes of `entries`, each only while it is still at the revision that was read.
    fn revision_deletes(
        &self,
        op: &'static str,
        entries: &[StoredEntry],
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        entries
            .iter()
            .map(|e| {
                transact_item(
                    op,
                    &self.table,
                    Write::Delete(key_item(&e.key())),
                    Some("rev = :rev"),
                    vec![(":rev", s(e.revision()))],
                )
            })
            .collect()
    }

    /// The search index's change records of a write that puts `put` and deletes `delete`, for
    /// the same transaction as the entries they name.
    fn change_record_items(
        &self,
        op: &'static str,
        put: &[StoredEntry],
        delete: &[StoredEntry],
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        change_items(
            put.iter()
                .chain(delete)
                .map(|e| (&e.memory_ref, e.entry.id.as_str())),
        )
        .into_iter()
        .map(|change| self.unconditional_put(op, change))
        .collect()
    }

    /// Commits a rewrite that puts `put` and deletes `delete` (`items`, one transaction): the
    /// new entries' postings first, and the deleted entries' overflow items (ids only) and
    /// postings after it.
    async fn swap(
        &self,
        op: &'static str,
        items: Vec<TransactWriteItem>,
        put: &[StoredEntry],
        delete: &[StoredEntry],
    ) -> Result<(), StoreError> {
        self.put_postings(op, put).await?;
        self.transact(op, items)
            .await
            .map_err(|e| e.into_store(op))?;
        for e in delete {
            self.delete_overflow(&e.key()).await?;
        }
        self.remove_postings(op, delete).await;
        Ok(())
    }

    /// Writes the tag postings of `entries` (before the entries themselves): unconditional puts
    /// in transactions of up to 100 items, so a usual write adds one round trip and the
    /// function needs no bulk-write permission.
    async fn put_postings(
        &self,
        op: &'static str,
        entries: &[StoredEntry],
    ) -> Result<(), StoreError> {
        let mut items = Vec::new();
        for e in entries {
            for item in posting_items(e) {
                items.push(self.unconditional_put(op, item)?);
            }
        }
        for chunk in items.chunks(MAX_ITEMS_PER_TRANSACTION) {
            self.transact(op, chunk.to_vec())
                .await
                .map_err(|e| e.into_store(op))?;
        }
        Ok(())
    }

    /// Removes the tag postings of entries that are gone. A failure is logged, not returned:
    /// the entries are deleted either way, and a posting left behind only proposes an id that
    /// reads then find missing.
    async fn remove_postings(&self, op: &'static str, entries: &[StoredEntry]) {
        let mut items = Vec::new();
        for key in entries.iter().flat_map(posting_keys) {
            match transact_item(op, &self.table, Write::Delete(key), None, Vec::new()) {
                Ok(delete) => items.push(delete),
                Err(_) => return,
            }
        }
        for chunk in items.chunks(MAX_ITEMS_PER_TRANSACTION) {
            if let Err(e) = self.transact(op, chunk.to_vec()).await {
                tracing::warn!(
                    error = %e.into_store(op),
                    postings = chunk.len(),
                    "tag postings of deleted entries left behind; reads skip them"
                );
            }
        }
    }

    pub fn new(client: Client, table: String) -> Self {
        DynamoEntryStore {
            clients: DynamoClients::new(client, None),
            table,
            quota_defaults: memory_core::quota::Limits::unlimited(),
            limits_cache: quota::LimitsCache::default(),
        }
    }

    /// Signs every tenant data call with the acting tenant's vended credentials (`tenant.rs`).
    pub fn with_tenant_sessions(mut self, tenants: Option<Arc<TenantSessions>>) -> Self {
        self.clients = DynamoClients::new(self.clients.fan_out().clone(), tenants);
        self
    }

    /// The conditional update that records `completion` on its key: one transaction item of a
    /// completing write, or sent alone by `complete_key`.
    fn complete_update(
        &self,
        op: &'static str,
        completion: &Completion,
    ) -> Result<Update, StoreError> {
        Update::builder()
            .table_name(&self.table)
            .set_key(Some(key_record_key(&completion.key)))
            .update_expression(COMPLETE_UPDATE)
            .condition_expression(COMPLETE_CONDITION)
            .expression_attribute_names("#r", "result")
            .expression_attribute_values(":r", s(&completion.result))
            .expression_attribute_values(":a", s(&completion.attempt))
            .build()
            .map_err(|_| build_error(op))
    }

    fn complete_item(
        &self,
        op: &'static str,
        completion: &Completion,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = self.complete_update(op, completion)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// One item by key, strongly consistent (read-your-writes).
    async fn get_item(&self, op: &'static str, key: Item) -> Result<Option<Item>, StoreError> {
        self.clients.table(&self.table, op).await?.read(key).await
    }

    async fn read_key(&self, key: &IdempotencyKey) -> Result<Option<KeyRecord>, StoreError> {
        match self
            .get_item("read_key", key_record_key(key))
            .await?
            .as_ref()
        {
            None => Ok(None),
            Some(item) => decode_key_record(item)
                .map(Some)
                .ok_or(StoreError::Corrupt {
                    key: format!("idempotency record {}", key.digest()),
                }),
        }
    }

    /// Whether `completion` is already recorded (an earlier attempt of this call applied it).
    async fn completed(&self, completion: &Completion) -> Result<bool, StoreError> {
        Ok(self.read_key(&completion.key).await?.is_some_and(|r| {
            r.attempt == completion.attempt && r.result.as_deref() == Some(&completion.result)
        }))
    }

    async fn transact(
        &self,
        op: &'static str,
        items: Vec<TransactWriteItem>,
    ) -> Result<(), TxError> {
        let client = self.clients.data(op).await.map_err(TxError::Store)?;
        transact_with(&client, op, items).await
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Deletes one entry with its overflow items and postings; `true` when it existed. The
    /// caller records the change.
    async fn delete_entry(&self, key: &EntryKey) -> Result<bool, StoreError> {
        let table = self.clients.table(&self.table, "delete").await?;
        let old = table.delete_returning_old(key_item(key)).await?;
        let old = old.as_ref();
        if old.is_some_and(|a| get_n(a, "provenanceChunks").unwrap_or(0) > 0) {
            self.delete_overflow(key).await?;
        }
        if let Some(e) = old.and_then(|a| decode(a).ok()) {
            // A DeleteItem is no transaction: the counters follow it, and the recount repairs
            // them if this process dies in between.
            self.apply_uncounted(
                "delete",
                &stored_charges(&[], std::slice::from_ref(&e), None),
            )
            .await;
            self.remove_postings("delete", &[e]).await;
        }
        Ok(old.is_some())
    }

    /// The change records of deletes already applied (one per ref).
    async fn record_changes<'a>(
        &self,
        op: &'static str,
        keys: impl IntoIterator<Item = &'a EntryKey>,
    ) -> Result<(), StoreError> {
        let table = self.clients.table(&self.table, op).await?;
        for item in change_items(keys.into_iter().map(|k| (&k.memory_ref, k.id.as_str()))) {
            table.put(item).await?;
        }
        Ok(())
    }

    /// Whether a put whose conditions failed was applied by an earlier attempt of the same
    /// call: new ids are never taken, so a failed "not exists" on every entry with this very
    /// revision (and this attempt's result on the key) means its answer was lost.
    async fn applied_already(
        &self,
        entries: &[StoredEntry],
        completion: Option<&Completion>,
    ) -> Result<bool, StoreError> {
        Ok(self.all_present(entries).await?
            && match completion {
                Some(c) => self.completed(c).await?,
                None => true,
            })
    }

    /// Whether every entry is stored exactly as given (same revision digest).
    async fn all_present(&self, entries: &[StoredEntry]) -> Result<bool, StoreError> {
        for e in entries {
            match self.get(&e.key()).await? {
                Some(stored) if stored.revision() == e.revision() => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }
}

#[async_trait]
impl EntryStore for DynamoEntryStore {
    async fn put_entries_checked(
        &self,
        entries: &[StoredEntry],
        completion: Option<&Completion>,
        check: &QuotaCheck,
    ) -> Result<(), StoreError> {
        const OP: &str = "put_entries";
        if entries.is_empty() {
            return Ok(());
        }
        within(OP, entries.len(), MAX_ENTRIES_PER_PUT)?;
        let mut items = Vec::with_capacity(entries.len() + 1);
        for e in entries {
            items.extend(self.put_if_absent(OP, e)?);
        }
        let changes = change_items(entries.iter().map(|e| (&e.memory_ref, e.entry.id.as_str())));
        within(
            OP,
            items.len() + usize::from(completion.is_some()) + changes.len() + check.charges.len(),
            MAX_ITEMS_PER_TRANSACTION,
        )?;
        if let Some(c) = completion {
            items.push(self.complete_item(OP, c)?);
        }
        for change in changes {
            items.push(self.unconditional_put(OP, change)?);
        }
        let first_charge = items.len();
        for charge in &check.charges {
            items.push(quota::charge_item(OP, &self.table, charge)?);
        }
        self.put_postings(OP, entries).await?;
        match self.transact(OP, items).await {
            Ok(()) => {}
            // New ids are never taken, so a failed "not exists" condition on every entry with
            // this very revision (and this attempt's result on the key) means an earlier
            // attempt of this same call was applied and its answer lost (a broken connection,
            // then a retry): that is success.
            Err(TxError::Conditions(failed)) => {
                match self.applied_already(entries, completion).await {
                    Ok(true) => tracing::info!(
                        entries = entries.len(),
                        "put already applied by an earlier attempt"
                    ),
                    // A quota's condition failed: refused, nothing written.
                    Ok(false) if check.charges.iter().any(|c| c.room().is_some()) => {
                        let at = check
                            .at
                            .unwrap_or_else(|| Timestamp::from_millis(wall_clock_ms()));
                        return Err(self
                            .refused(OP, &failed, first_charge, &check.charges, at)
                            .await);
                    }
                    Ok(false) => return Err(StoreError::Conflict { op: OP }),
                    // Cancelled by its own conditions, so perhaps applied by an earlier attempt,
                    // and the read that would tell failed.
                    Err(e) => return Err(unknown_after(OP, e)),
                }
            }
            Err(e) => return Err(e.into_store(OP)),
        }
        let mut marks: BTreeMap<(MemoryRef, PassKind), Timestamp> = BTreeMap::new();
        for e in entries {
            for kind in [PassKind::for_tier(e.tier), PassKind::Index] {
                let since = marks
                    .entry((e.memory_ref.clone(), kind))
                    .or_insert(e.entry.created_at);
                *since = (*since).min(e.entry.created_at);
            }
        }
        // Side by side: the tier's pass and the index pass are two marker items.
        futures_util::future::join_all(
            marks
                .iter()
                .map(|((r, kind), since)| self.mark_pending(r, *kind, *since)),
        )
        .await;
        Ok(())
    }

    async fn mark_pending(&self, r: &MemoryRef, kind: PassKind, since: Timestamp) {
        const OP: &str = "mark_pending";
        let client = match self.clients.data(OP).await {
            Ok(client) => client,
            Err(e) => {
                tracing::error!(error = %e, kind = kind.as_str(), "work marker not updated; the ref's next write marks it");
                return;
            }
        };
        let request = client
                .update_item()
            .table_name(&self.table)
            .set_key(Some(marker_key(r, kind)))
            .update_expression(
                "SET dirtyPartition = :p, dirtySince = if_not_exists(dirtySince, :since) ADD dirtyVersion :one",
            )
            .condition_expression(
                "attribute_not_exists(dirtyPartition) OR attribute_exists(passRunning)",
            )
            .expression_attribute_values(":p", s(dirty_partition(kind, pending_shard(r))))
            .expression_attribute_values(
                ":since",
                s(format!("{:013}", since.as_millis().max(0))),
            )
            .expression_attribute_values(":one", n(1));
        let result = crate::retry::metered(OP, &request).await;
        match result {
            Ok(_) => {}
            Err(e) if crate::error::service_code(&e) == Some(CONDITION_FAILED) => {}
            Err(e) => tracing::error!(
                code = %crate::error::code_of(&e),
                kind = kind.as_str(),
                "work marker not updated; the ref's next write marks it"
            ),
        }
    }

    async fn claim_key(&self, claim: &KeyClaim) -> Result<Claim, StoreError> {
        const OP: &str = "claim_key";
        let table = self.clients.table(&self.table, OP).await?;
        let ttl = claim.expires_at.epoch_seconds_ceil();
        for _ in 0..3 {
            // 1. A new key, or one whose window is over: a fresh record.
            let mut item = key_record_key(&claim.key);
            item.insert("payload".into(), s(&claim.payload));
            item.insert("attempt".into(), s(&claim.attempt));
            item.insert("firstAttemptMs".into(), n(claim.now.as_millis()));
            item.insert("leaseUntilMs".into(), n(claim.lease_until.as_millis()));
            item.insert("expiresAtMs".into(), n(claim.expires_at.as_millis()));
            item.insert("ttl".into(), n(ttl));
            let fresh = table
                .put_item(item)
                .condition_expression("attribute_not_exists(pk) OR expiresAtMs <= :now")
                .expression_attribute_values(":now", n(claim.now.as_millis()));
            if table.conditional(&fresh).await?.is_some() {
                return Ok(Claim::Acquired {
                    first_attempt_at: claim.now,
                });
            }
            // 2. Taking over a holder whose lease ran out, same payload, no result yet; the
            //    first attempt's instant stays, so the entries (and their ids) stay the same.
            let takeover = table
                .update_item(key_record_key(&claim.key))
                .update_expression(
                    "SET attempt = :a, leaseUntilMs = :l, expiresAtMs = :e, #ttl = :t",
                )
                .condition_expression(
                    "attribute_not_exists(#r) AND leaseUntilMs <= :now AND payload = :p",
                )
                .expression_attribute_names("#r", "result")
                .expression_attribute_names("#ttl", "ttl")
                .expression_attribute_values(":a", s(&claim.attempt))
                .expression_attribute_values(":l", n(claim.lease_until.as_millis()))
                .expression_attribute_values(":e", n(claim.expires_at.as_millis()))
                .expression_attribute_values(":t", n(ttl))
                .expression_attribute_values(":now", n(claim.now.as_millis()))
                .expression_attribute_values(":p", s(&claim.payload))
                .return_values(ReturnValue::AllNew);
            if let Some(out) = table.conditional(&takeover).await? {
                let first = out
                    .attributes()
                    .and_then(|a| get_n(a, "firstAttemptMs"))
                    .map_or(claim.now, Timestamp::from_millis);
                return Ok(Claim::Acquired {
                    first_attempt_at: first,
                });
            }
            // 3. Someone holds it; if that someone is this attempt (an answer was lost), it
            //    is ours. A record that vanished in between (TTL) is claimed afresh.
            match self.read_key(&claim.key).await? {
                Some(r) if r.attempt == claim.attempt && r.result.is_none() => {
                    return Ok(Claim::Acquired {
                        first_attempt_at: r.first_attempt_at,
                    })
                }
                Some(r) => return Ok(Claim::Held(r)),
                None => continue,
            }
        }
        Err(StoreError::Conflict { op: OP })
    }

    async fn complete_key(&self, completion: &Completion) -> Result<(), StoreError> {
        const OP: &str = "complete_key";
        let table = self.clients.table(&self.table, OP).await?;
        let request = table.update_alone(self.complete_update(OP, completion)?);
        match table.conditional(&request).await? {
            Some(_) => Ok(()),
            None if self.completed(completion).await? => Ok(()),
            None => Err(StoreError::Conflict { op: OP }),
        }
    }

    async fn release_key(&self, key: &IdempotencyKey, attempt: &str) -> Result<(), StoreError> {
        const OP: &str = "release_key";
        let table = self.clients.table(&self.table, OP).await?;
        let request = table
            .delete_item(key_record_key(key))
            .condition_expression("attempt = :a AND attribute_not_exists(#r)")
            .expression_attribute_names("#r", "result")
            .expression_attribute_values(":a", s(attempt));
        // Not this attempt's unfinished record (finished, taken over, gone): left alone.
        table.conditional(&request).await.map(drop)
    }

    async fn delete_completing(
        &self,
        key: &EntryKey,
        completion: &Completion,
    ) -> Result<bool, StoreError> {
        const OP: &str = "delete";
        // Entries never change in place, so the tags read now are the tags deleted below.
        let existing = match self.get_item(OP, key_item(key)).await? {
            Some(item) => decode(&item).ok(),
            None => None,
        };
        let items = vec![
            transact_item(
                OP,
                &self.table,
                Write::Delete(key_item(key)),
                Some("attribute_exists(pk)"),
                Vec::new(),
            )?,
            self.complete_item(OP, completion)?,
            self.unconditional_put(OP, change_item(&key.memory_ref, [key.id.as_str()]))?,
        ];
        let mut items = items;
        for charge in stored_charges(&[], existing.as_slice(), None) {
            items.push(quota::charge_item(OP, &self.table, &charge)?);
        }
        match self.transact(OP, items).await {
            Ok(()) => {
                self.delete_overflow(key).await?;
                if let Some(e) = existing {
                    self.remove_postings(OP, &[e]).await;
                }
                Ok(true)
            }
            Err(TxError::Conditions(failed)) => {
                // This attempt's result already recorded: an earlier try applied and its
                // answer was lost.
                if self
                    .completed(completion)
                    .await
                    .map_err(|e| unknown_after(OP, e))?
                {
                    return Ok(true);
                }
                if failed.get(1).copied().unwrap_or(false) {
                    // The key is held by another attempt now.
                    return Err(StoreError::Conflict { op: OP });
                }
                Ok(false)
            }
            Err(e) => Err(e.into_store(OP)),
        }
    }

    async fn tombstone(&self, keys: &[EntryKey], until: Timestamp) -> Result<(), StoreError> {
        let table = self.clients.table(&self.table, "tombstone").await?;
        for key in keys {
            let mut item = HashMap::from([
                ("pk".to_owned(), s(partition_key(&key.memory_ref))),
                ("sk".to_owned(), s(format!("{TOMBSTONE_PREFIX}{}", key.id))),
            ]);
            item.insert("ttl".into(), n(until.epoch_seconds_ceil()));
            table.put(item).await?;
        }
        Ok(())
    }

    async fn tombstones(
        &self,
        memory_ref: &MemoryRef,
    ) -> Result<std::collections::BTreeSet<String>, StoreError> {
        let table = self.clients.table(&self.table, "tombstones").await?;
        let request = table
            .prefix_query(partition_key(memory_ref), TOMBSTONE_PREFIX)
            .projection_expression("sk");
        let (items, _) = query_all(request, "tombstones").await?;
        Ok(items
            .iter()
            .filter_map(|i| get_s(i, "sk"))
            .filter_map(|sk| sk.strip_prefix(TOMBSTONE_PREFIX))
            .map(str::to_owned)
            .collect())
    }

    async fn list_page(
        &self,
        memory_ref: &MemoryRef,
        query: &PageQuery,
    ) -> Result<Page, StoreError> {
        const OP: &str = "list_page";
        let table = self.clients.table(&self.table, OP).await?;
        let pk = partition_key(memory_ref);
        let filter = "attribute_not_exists(expiresAtMs) OR expiresAtMs > :now";
        let mut request = table
            .prefix_query(&pk, ENTRY_PREFIX)
            .expression_attribute_values(":now", n(query.now.as_millis()))
            .scan_index_forward(false)
            .limit(i32::try_from(query.limit.max(1)).unwrap_or(i32::MAX));
        if let Some(after) = &query.after {
            request = request
                .exclusive_start_key("pk", s(&pk))
                .exclusive_start_key("sk", s(entry_sort_key(after)));
        }
        let request = request.filter_expression(filter);
        let out = call(OP, &request).await?;
        let mut entries = Vec::with_capacity(out.items().len());
        for item in out.items() {
            entries.push(self.decode_full(item).await?);
        }
        let next_after = out
            .last_evaluated_key()
            .and_then(|k| k.get("sk"))
            .and_then(|v| v.as_s().ok())
            .and_then(|sk| sk.strip_prefix(ENTRY_PREFIX))
            .map(str::to_owned);
        Ok(Page {
            entries,
            next_after,
        })
    }

    async fn get(&self, key: &EntryKey) -> Result<Option<StoredEntry>, StoreError> {
        match self.get_item("get", key_item(key)).await?.as_ref() {
            Some(item) => Ok(Some(self.decode_full(item).await?)),
            None => Ok(None),
        }
    }

    async fn tag_postings(
        &self,
        memory_ref: &MemoryRef,
        tag: &str,
        bound: Option<&IdBound>,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        const OP: &str = "tag_postings";
        let table = self.clients.table(&self.table, OP).await?;
        let pk = partition_key(memory_ref);
        let prefix = posting_prefix(tag);
        let limit = limit.max(1);
        // "At most" is an inclusive key range ending at the id; "below" starts after the id's
        // posting key, which need not exist.
        let request = match bound {
            Some(IdBound::AtMost(id)) => table
                .partition_query(&pk, "sk BETWEEN :lo AND :hi")
                .expression_attribute_values(":lo", s(&prefix))
                .expression_attribute_values(":hi", s(format!("{prefix}{id}"))),
            Some(IdBound::Below(id)) => table
                .prefix_query(&pk, &prefix)
                .exclusive_start_key("pk", s(&pk))
                .exclusive_start_key("sk", s(format!("{prefix}{id}"))),
            None => table.prefix_query(&pk, &prefix),
        };
        let mut request = request
            .projection_expression("sk")
            .scan_index_forward(false)
            .limit(i32::try_from(limit).unwrap_or(i32::MAX));
        let mut ids = Vec::new();
        loop {
            let out = call(OP, &request).await?;
            ids.extend(
                out.items()
                    .iter()
                    .filter_map(|i| get_s(i, "sk"))
                    .filter_map(|sk| sk.strip_prefix(prefix.as_str()))
                    .map(str::to_owned),
            );
            // Fewer items than the limit with a next key: the 1 MB page cap, read on.
            match out.last_evaluated_key() {
                Some(next) if ids.len() < limit as usize => {
                    let left = limit as usize - ids.len();
                    request = request
                        .set_exclusive_start_key(Some(next.clone()))
                        .limit(i32::try_from(left).unwrap_or(i32::MAX));
                }
                _ => return Ok(ids),
            }
        }
    }

    async fn get_many(&self, keys: &[EntryKey]) -> Result<Vec<StoredEntry>, StoreError> {
        const OP: &str = "get_many";
        let client = self.clients.data(OP).await?;
        within(OP, keys.len(), MAX_LIST_LIMIT as usize)?;
        // BatchGetItem rejects a request naming one key twice.
        let unique: BTreeSet<&EntryKey> = keys.iter().collect();
        if unique.is_empty() {
            return Ok(Vec::new());
        }
        let mut pending = KeysAndAttributes::builder()
            .set_keys(Some(unique.into_iter().map(key_item).collect()))
            .consistent_read(true)
            .build()
            .map_err(|_| build_error(OP))?;
        let budget = memory_core::deadline::retry_budget();
        let started = std::time::Instant::now();
        let mut found = Vec::new();
        for round in 0u32.. {
            let request = client
                .batch_get_item()
                .request_items(&self.table, pending.clone());
            let out = crate::dynamo::call(OP, &request).await?;
            for item in out
                .responses()
                .and_then(|r| r.get(&self.table))
                .into_iter()
                .flatten()
            {
                found.push(self.decode_full(item).await?);
            }
            // Keys DynamoDB did not get to (throughput): ask again after a backoff.
            match out.unprocessed_keys().and_then(|u| u.get(&self.table)) {
                Some(rest) if !rest.keys().is_empty() => {
                    let delay = crate::retry::backoff(round);
                    if started.elapsed() + delay > budget {
                        return Err(StoreError::Unavailable {
                            op: OP,
                            code: "UnprocessedKeys".into(),
                        });
                    }
                    tokio::time::sleep(delay).await;
                    pending = rest.clone();
                }
                _ => break,
            }
        }
        Ok(found)
    }

    async fn delete(&self, key: &EntryKey) -> Result<bool, StoreError> {
        let existed = self.delete_entry(key).await?;
        if existed {
            self.record_changes("delete", [key]).await?;
        }
        Ok(existed)
    }

    async fn set_embedding(
        &self,
        read: &StoredEntry,
        embedding: &Embedding,
    ) -> Result<bool, StoreError> {
        const OP: &str = "set_embedding";
        if embedding.vector.is_empty() {
            return Ok(false);
        }
        let bytes = Blob::new(vector_bytes(&embedding.vector));
        // `attribute_exists(sk)` keeps the update from creating the item: a deleted or
        // forgotten entry stays gone. `rev` pins the content the vector was computed from. The
        // change record goes in the same transaction, so the index refolds the entry with its
        // vector.
        let set = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key_item(&read.key())))
            .update_expression("SET #v = :v, #m = :m")
            .condition_expression(
                "attribute_exists(sk) AND rev = :rev AND (attribute_not_exists(#m) OR #m <> :m)",
            )
            .expression_attribute_names("#v", EMBEDDING_ATTRIBUTE)
            .expression_attribute_names("#m", "embeddingModel")
            .expression_attribute_values(":v", AttributeValue::B(bytes))
            .expression_attribute_values(":m", s(embedding.model.clone()))
            .expression_attribute_values(":rev", s(read.revision()))
            .build()
            .map_err(|_| build_error(OP))?;
        let set = TransactWriteItem::builder().update(set).build();
        let change =
            self.unconditional_put(OP, change_item(&read.memory_ref, [read.entry.id.as_str()]))?;
        match self.transact(OP, vec![set, change]).await {
            Ok(()) => Ok(true),
            Err(TxError::Conditions(_)) => Ok(false),
            Err(e) => Err(e.into_store(OP)),
        }
    }

    async fn find_by_subject(&self, subject: &SubjectKey) -> Result<Vec<EntryKey>, StoreError> {
        let table = self.clients.table(&self.table, "find_by_subject").await?;
        let found = table.subject_ids(subject, ENTRY_PREFIX).await?;
        Ok(found
            .into_iter()
            .map(|(memory_ref, id)| EntryKey { memory_ref, id })
            .collect())
    }

    async fn replace(&self, put: &[StoredEntry], delete: &[StoredEntry]) -> Result<(), StoreError> {
        const OP: &str = "replace";
        within(OP, put.len() + delete.len(), MAX_ITEMS_PER_TRANSACTION)?;
        let mut items = Vec::with_capacity(put.len() + delete.len());
        for e in put {
            items.extend(self.put_if_absent(OP, e)?);
        }
        within(OP, items.len() + delete.len(), MAX_ITEMS_PER_TRANSACTION)?;
        items.extend(self.revision_deletes(OP, delete)?);
        if items.is_empty() {
            return Ok(());
        }
        let changes = self.change_record_items(OP, put, delete)?;
        // Rewrites keep or shrink what is stored and are never refused; their counters move in
        // the same transaction.
        let charges = stored_charges(put, delete, None);
        within(
            OP,
            items.len() + changes.len() + charges.len(),
            MAX_ITEMS_PER_TRANSACTION,
        )?;
        items.extend(changes);
        for charge in &charges {
            items.push(quota::charge_item(OP, &self.table, charge)?);
        }
        self.swap(OP, items, put, delete).await
    }

    async fn marker_state(
        &self,
        memory_ref: &MemoryRef,
        kind: PassKind,
    ) -> Result<MarkerState, StoreError> {
        Ok(self
            .get_item("marker_state", marker_key(memory_ref, kind))
            .await?
            .as_ref()
            .map(marker_state_of)
            .unwrap_or_default())
    }

    async fn begin_pass(
        &self,
        memory_ref: &MemoryRef,
        kind: PassKind,
    ) -> Result<MarkerState, StoreError> {
        const OP: &str = "begin_pass";
        let table = self.clients.table(&self.table, OP).await?;
        let request = table
            .update_item(marker_key(memory_ref, kind))
            .update_expression("SET passRunning = :now")
            .expression_attribute_values(":now", n(wall_clock_ms()))
            .return_values(ReturnValue::AllNew);
        let out = call(OP, &request).await?;
        Ok(out.attributes().map(marker_state_of).unwrap_or_default())
    }

    async fn finish_pass(
        &self,
        memory_ref: &MemoryRef,
        kind: PassKind,
        version: Option<u64>,
        watermark: Option<Timestamp>,
    ) -> Result<bool, StoreError> {
        const OP: &str = "finish_pass";
        let table = self.clients.table(&self.table, OP).await?;
        // 1. The watermark, first and never backwards: a slow duplicate run must not lower
        //    it, and a crash after this step leaves the ref pending, so nothing is skipped.
        if let Some(w) = watermark {
            let forward = table
                .update_item(marker_key(memory_ref, kind))
                .update_expression("SET watermarkMs = :w")
                .condition_expression("attribute_not_exists(watermarkMs) OR watermarkMs < :w")
                .expression_attribute_values(":w", n(w.as_millis()));
            // Not applied: the watermark is already at or past `w`.
            table.conditional(&forward).await?;
        }
        // 2. Out of the pending index, only if no write arrived since the pass read the marker.
        let clear = table
            .update_item(marker_key(memory_ref, kind))
            .update_expression("REMOVE dirtyPartition, dirtySince, passRunning");
        let clear = match version {
            Some(v) => clear
                .condition_expression("dirtyVersion = :v")
                .expression_attribute_values(":v", n(i64::try_from(v).unwrap_or(i64::MAX))),
            None => clear.condition_expression("attribute_not_exists(dirtyVersion)"),
        };
        let clear = clear.return_values(ReturnValue::UpdatedOld);
        Ok(table.conditional(&clear).await?.is_some_and(|out| {
            out.attributes()
                .is_some_and(|old| old.contains_key("dirtyPartition"))
        }))
    }

    async fn pending_refs(&self, kind: PassKind, shard: u8) -> Result<Vec<MemoryRef>, StoreError> {
        // Across tenants by design (`{kind}#{shard}` partitions): the function's own role.
        let table = Table::new(self.clients.fan_out().clone(), &self.table, "pending_refs");
        let items = table
            .index_items(
                (DIRTY_INDEX, "dirtyPartition"),
                dirty_partition(kind, shard),
            )
            .await?;
        Ok(items
            .iter()
            .filter_map(|i| get_s(i, "pk"))
            .filter_map(ref_from_pk)
            .collect())
    }

    async fn delete_many(&self, keys: &[EntryKey]) -> Result<usize, StoreError> {
        // One DeleteItem each: BatchWriteItem cannot say which items existed, and forget must
        // report honest counts. Forget is rare, so round trips matter less than the answer.
        let mut deleted = Vec::new();
        for key in keys {
            if self.delete_entry(key).await? {
                deleted.push(key);
            }
        }
        self.record_changes("delete_many", deleted.iter().copied())
            .await?;
        Ok(deleted.len())
    }

    async fn changes(&self, memory_ref: &MemoryRef) -> Result<Vec<Change>, StoreError> {
        let table = self.clients.table(&self.table, "changes").await?;
        let items = table
            .prefix_items(partition_key(memory_ref), CHANGE_PREFIX)
            .await?;
        items
            .iter()
            .map(|item| {
                let seq = get_s(item, "sk").and_then(|sk| sk.strip_prefix(CHANGE_PREFIX));
                let ids = match item.get("ids") {
                    Some(AttributeValue::L(list)) => list
                        .iter()
                        .map(|v| v.as_s().ok().cloned())
                        .collect::<Option<Vec<String>>>(),
                    _ => None,
                };
                match (seq, ids) {
                    (Some(seq), Some(ids)) => Ok(Change {
                        seq: seq.to_owned(),
                        ids,
                    }),
                    _ => Err(StoreError::Corrupt {
                        key: format!("{}/{CHANGE_PREFIX}", partition_key(memory_ref)),
                    }),
                }
            })
            .collect()
    }

    async fn drop_changes(
        &self,
        memory_ref: &MemoryRef,
        seqs: &[String],
    ) -> Result<(), StoreError> {
        let table = self.clients.table(&self.table, "drop_changes").await?;
        for seq in seqs {
            let k = HashMap::from([
                ("pk".to_owned(), s(partition_key(memory_ref))),
                ("sk".to_owned(), s(format!("{CHANGE_PREFIX}{seq}"))),
            ]);
            table.delete(k).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(expires: bool, subject: bool) -> StoredEntry {
        let tenant = TenantId::parse("t-1").expect("tenant");
        let memory_ref = MemoryRef::new(tenant.clone(), AgentId::parse("a-1").expect("agent"));
        StoredEntry {
            memory_ref,
            entry: MemoryEntry {
                id: "01JD0000000000000000000001".into(),
                content: "Customer prefers email".into(),
                tags: vec!["preference".into(), "fact:contact".into()],
                created_at: Timestamp::from_millis(1_795_132_800_123),
                expires_at: expires.then(|| Timestamp::from_millis(1_795_132_900_001)),
            },
            tier: Tier::LongTerm,
            subject: subject.then(|| SubjectKey::derive(&tenant, "alice")),
            attribution: Attribution {
                run_id: Some("run-1".into()),
                node_id: None,
                agent_id: Some("agent-7".into()),
            },
            provenance: vec!["01JD0000000000000000000000".into()],
            embedding: None,
        }
    }

    /// The attributes other code and docs/architecture.md "Storage layout (one DynamoDB table)"
    /// rely on keep their names and types, absent options stay absent, and an item reads back as
    /// the entry it was written from.
    #[test]
    fn entry_items_keep_their_shape_and_round_trip() {
        let e = stored(true, true);
        let item = entry_item(&e).expect("encode");
        let text = |name: &str| get_s(&item, name).map(str::to_owned);
        assert_eq!(text("pk").as_deref(), Some("t-1#a-1"));
        assert_eq!(text("sk").as_deref(), Some("E#01JD0000000000000000000001"));
        assert_eq!(
            text("createdAt").as_deref(),
            Some("2026-11-20T00:00:00.123Z")
        );
        assert_eq!(get_n(&item, "createdAtMs"), Some(1_795_132_800_123));
        assert_eq!(get_n(&item, "expiresAtMs"), Some(1_795_132_900_001));
        assert_eq!(get_n(&item, "ttl"), Some(1_795_132_901));
        assert_eq!(text("tier").as_deref(), Some("long-term"));
        assert_eq!(text("rev"), Some(e.revision()));
        assert!(text("subjectKey").is_some_and(|s| s.starts_with("t-1#")));
        assert_eq!(
            item.get("tags"),
            Some(&AttributeValue::L(vec![s("preference"), s("fact:contact")]))
        );
        assert_eq!(
            item.get("provenance"),
            Some(&AttributeValue::L(vec![s("01JD0000000000000000000000")]))
        );
        assert!(!item.contains_key("nodeId") && !item.contains_key("provenanceChunks"));
        assert_eq!(decode(&item), Ok(e));

        let plain = stored(false, false);
        let item = entry_item(&plain).expect("encode");
        for absent in ["expiresAtMs", "ttl", "subjectKey"] {
            assert!(!item.contains_key(absent), "{absent}");
        }
        assert_eq!(decode(&item), Ok(plain));
    }

    #[test]
    fn a_damaged_item_is_corrupt_never_a_guess() {
        let mut item = entry_item(&stored(false, false)).expect("encode");
        item.insert("tags".into(), AttributeValue::L(vec![n(7)]));
        assert!(matches!(decode(&item), Err(StoreError::Corrupt { .. })));
        item.remove("tags");
        item.remove("createdAtMs");
        assert!(matches!(decode(&item), Err(StoreError::Corrupt { .. })));
    }
}
