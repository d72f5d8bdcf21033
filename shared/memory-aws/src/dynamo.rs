//! `EntryStore` on one DynamoDB table (DESIGN.md §memoryRef and tenants).
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
//! counts writes that created work; `dirtyPartition` (`{kind}#{shard}`) and `dirtySince` are
//! present only while work is pending, which makes `byDirtyRef` a sparse index of exactly the
//! refs a fan-out must visit; `watermarkMs` is the last finished pass's high-water mark.
//!
//! Reads are strongly consistent (read-your-writes); the `bySubject` index can only be read
//! eventually consistently, which forget accepts (see README).

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, Put, ReturnValue, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;

use memory_core::model::{Attribution, EntryKey, MemoryEntry, StoredEntry, SubjectKey, Tier};
use memory_core::ports::{
    work_shard, EntryStore, Page, PageQuery, WorkKind, WorkState, MAX_ENTRIES_PER_PUT,
    MAX_ITEMS_PER_TRANSACTION,
};
use memory_core::{StoreError, Timestamp};
use memory_guard::{AgentId, MemoryRef, TenantId};

use crate::error::backend;

pub const SUBJECT_INDEX: &str = "bySubject";
pub const DIRTY_INDEX: &str = "byDirtyRef";
const ENTRY_PREFIX: &str = "E#";

type Item = HashMap<String, AttributeValue>;

#[derive(Clone, Debug)]
pub struct DynamoEntryStore {
    client: Client,
    table: String,
}

pub fn partition_key(r: &MemoryRef) -> String {
    format!("{}#{}", r.tenant().as_str(), r.agent().as_str())
}

fn entry_sort_key(id: &str) -> String {
    format!("{ENTRY_PREFIX}{id}")
}

fn subject_attr(tenant: &TenantId, subject: &SubjectKey) -> String {
    format!("{}#{}", tenant.as_str(), subject.as_str())
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn key_item(key: &EntryKey) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(partition_key(&key.memory_ref))),
        ("sk".to_owned(), s(entry_sort_key(&key.id))),
    ])
}

fn encode(e: &StoredEntry) -> Item {
    let mut item = key_item(&e.key());
    item.insert("id".into(), s(&e.entry.id));
    item.insert("content".into(), s(&e.entry.content));
    item.insert(
        "tags".into(),
        AttributeValue::L(e.entry.tags.iter().map(s).collect()),
    );
    item.insert("createdAt".into(), s(e.entry.created_at.to_rfc3339()));
    item.insert("createdAtMs".into(), n(e.entry.created_at.as_millis()));
    if let Some(exp) = e.entry.expires_at {
        item.insert("expiresAtMs".into(), n(exp.as_millis()));
        item.insert("ttl".into(), n(exp.epoch_seconds_ceil()));
    }
    item.insert("tier".into(), s(e.tier.as_str()));
    item.insert("rev".into(), s(e.revision()));
    if !e.provenance.is_empty() {
        item.insert(
            "provenance".into(),
            AttributeValue::L(e.provenance.iter().map(s).collect()),
        );
    }
    if let Some(subject) = &e.subject {
        item.insert(
            "subjectKey".into(),
            s(subject_attr(e.memory_ref.tenant(), subject)),
        );
    }
    let a = &e.attribution;
    for (name, value) in [
        ("runId", &a.run_id),
        ("nodeId", &a.node_id),
        ("agentId", &a.agent_id),
    ] {
        if let Some(v) = value {
            item.insert(name.into(), s(v));
        }
    }
    item
}

fn ref_from_pk(pk: &str) -> Option<MemoryRef> {
    let (tenant, agent) = pk.split_once('#')?;
    Some(MemoryRef::new(
        TenantId::parse(tenant).ok()?,
        AgentId::parse(agent).ok()?,
    ))
}

fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

fn get_n(item: &Item, name: &str) -> Option<i64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

fn key_of(item: &Item) -> Option<EntryKey> {
    let memory_ref = ref_from_pk(get_s(item, "pk")?)?;
    let id = get_s(item, "sk")?.strip_prefix(ENTRY_PREFIX)?.to_owned();
    Some(EntryKey { memory_ref, id })
}

fn decode(item: &Item) -> Result<StoredEntry, StoreError> {
    let corrupt = || StoreError::Corrupt {
        key: format!(
            "{}/{}",
            get_s(item, "pk").unwrap_or("?"),
            get_s(item, "sk").unwrap_or("?")
        ),
    };
    let key = key_of(item).ok_or_else(corrupt)?;
    let tags = match item.get("tags") {
        Some(AttributeValue::L(list)) => list
            .iter()
            .map(|v| v.as_s().cloned().map_err(|_| corrupt()))
            .collect::<Result<Vec<_>, _>>()?,
        _ => Vec::new(),
    };
    let tenant = key.memory_ref.tenant().clone();
    let subject = match get_s(item, "subjectKey") {
        Some(raw) => Some(
            raw.strip_prefix(tenant.as_str())
                .and_then(|r| r.strip_prefix('#'))
                .and_then(SubjectKey::from_stored)
                .ok_or_else(corrupt)?,
        ),
        None => None,
    };
    let attr = |name| get_s(item, name).map(str::to_owned);
    Ok(StoredEntry {
        entry: MemoryEntry {
            id: key.id.clone(),
            content: get_s(item, "content").ok_or_else(corrupt)?.to_owned(),
            tags,
            created_at: Timestamp::from_millis(get_n(item, "createdAtMs").ok_or_else(corrupt)?),
            expires_at: get_n(item, "expiresAtMs").map(Timestamp::from_millis),
        },
        memory_ref: key.memory_ref,
        tier: get_s(item, "tier")
            .and_then(Tier::parse)
            .unwrap_or_default(),
        subject,
        attribution: Attribution {
            run_id: attr("runId"),
            node_id: attr("nodeId"),
            agent_id: attr("agentId"),
        },
        provenance: match item.get("provenance") {
            Some(AttributeValue::L(list)) => list
                .iter()
                .map(|v| v.as_s().cloned().map_err(|_| corrupt()))
                .collect::<Result<Vec<_>, _>>()?,
            _ => Vec::new(),
        },
    })
}

fn is_condition_failure(err: &SdkError<TransactWriteItemsError, impl std::fmt::Debug>) -> bool {
    match err {
        SdkError::ServiceError(service) => match service.err() {
            TransactWriteItemsError::TransactionCanceledException(t) => t
                .cancellation_reasons()
                .iter()
                .any(|r| r.code() == Some("ConditionalCheckFailed")),
            _ => false,
        },
        _ => false,
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

fn marker_key(r: &MemoryRef, kind: WorkKind) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(partition_key(r))),
        ("sk".to_owned(), s(format!("W#{}", kind.as_str()))),
    ])
}

fn dirty_partition(kind: WorkKind, shard: u8) -> String {
    format!("{}#{shard:02}", kind.as_str())
}

/// Every page of a Query, following `LastEvaluatedKey`; also the total `ScannedCount`, the
/// items DynamoDB read (what a Query costs).
pub(crate) async fn query_all(
    request: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
    op: &'static str,
) -> Result<(Vec<Item>, u64), StoreError> {
    let mut items = Vec::new();
    let mut scanned = 0u64;
    let mut start: Option<Item> = None;
    loop {
        let from = start.take();
        let out = crate::retry::send(op, || {
            request.clone().set_exclusive_start_key(from.clone()).send()
        })
        .await
        .map_err(|e| backend(op, &e))?;
        scanned += u64::try_from(out.scanned_count()).unwrap_or(0);
        items.extend(out.items().iter().cloned());
        match out.last_evaluated_key() {
            Some(k) if !k.is_empty() => start = Some(k.clone()),
            _ => return Ok((items, scanned)),
        }
    }
}

fn build_error(op: &'static str) -> StoreError {
    StoreError::Backend {
        op,
        code: "BuildRequest".into(),
    }
}

impl DynamoEntryStore {
    fn put_if_absent(
        &self,
        op: &'static str,
        e: &StoredEntry,
    ) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(encode(e)))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(|_| build_error(op))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }
}

impl DynamoEntryStore {
    pub fn new(client: Client, table: String) -> Self {
        DynamoEntryStore { client, table }
    }

    /// The marker update that records new work for `r` in the write's transaction.
    fn mark_work(
        &self,
        r: &MemoryRef,
        kind: WorkKind,
        since: Timestamp,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(marker_key(r, kind)))
            .update_expression(
                "SET dirtyPartition = :p, dirtySince = if_not_exists(dirtySince, :since) ADD dirtyVersion :one",
            )
            .expression_attribute_values(":p", s(dirty_partition(kind, work_shard(r))))
            .expression_attribute_values(":since", s(format!("{:013}", since.as_millis().max(0))))
            .expression_attribute_values(":one", n(1))
            .build()
            .map_err(|_| build_error("put_entries"))?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    async fn transact(
        &self,
        op: &'static str,
        items: Vec<TransactWriteItem>,
    ) -> Result<(), StoreError> {
        crate::retry::send_classified(
            op,
            || {
                self.client
                    .transact_write_items()
                    .set_transact_items(Some(items.clone()))
                    .send()
            },
            |err| is_transaction_race(err) || crate::retry::is_retryable(err),
        )
        .await
        .map_err(|err| {
            if is_condition_failure(&err) {
                StoreError::Conflict { op }
            } else if is_transaction_race(&err) {
                StoreError::Unavailable {
                    op,
                    code: "TransactionConflict".into(),
                }
            } else {
                backend(op, &err)
            }
        })?;
        Ok(())
    }

    pub fn table(&self) -> &str {
        &self.table
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
    async fn put_entries(&self, entries: &[StoredEntry]) -> Result<(), StoreError> {
        const OP: &str = "put_entries";
        if entries.is_empty() {
            return Ok(());
        }
        if entries.len() > MAX_ENTRIES_PER_PUT {
            return Err(StoreError::Backend {
                op: OP,
                code: "TooManyItems".into(),
            });
        }
        let mut items = Vec::with_capacity(entries.len() + 2);
        for e in entries {
            items.push(self.put_if_absent(OP, e)?);
        }
        let mut marks: BTreeMap<(MemoryRef, WorkKind), Timestamp> = BTreeMap::new();
        for e in entries {
            let since = marks
                .entry((e.memory_ref.clone(), WorkKind::for_tier(e.tier)))
                .or_insert(e.entry.created_at);
            *since = (*since).min(e.entry.created_at);
        }
        for ((r, kind), since) in &marks {
            items.push(self.mark_work(r, *kind, *since)?);
        }
        match self.transact(OP, items).await {
            // New ids are never taken, so a failed "not exists" condition on every entry with
            // this very revision means an earlier attempt of this same call was applied and
            // its answer lost (a broken connection, then a retry): that is success.
            Err(StoreError::Conflict { .. }) if self.all_present(entries).await? => {
                tracing::info!(
                    entries = entries.len(),
                    "put already applied by an earlier attempt"
                );
                Ok(())
            }
            other => other,
        }
    }

    async fn list_page(
        &self,
        memory_ref: &MemoryRef,
        query: &PageQuery,
    ) -> Result<Page, StoreError> {
        const OP: &str = "list_page";
        let pk = partition_key(memory_ref);
        let mut filter = String::from("(attribute_not_exists(expiresAtMs) OR expiresAtMs > :now)");
        let mut request = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .expression_attribute_values(":pk", s(&pk))
            .expression_attribute_values(":prefix", s(ENTRY_PREFIX))
            .expression_attribute_values(":now", n(query.now.as_millis()))
            .scan_index_forward(false)
            .consistent_read(true)
            .limit(i32::try_from(query.limit.max(1)).unwrap_or(i32::MAX));
        if let Some(tag) = &query.tag {
            filter.push_str(" AND contains(tags, :tag)");
            request = request.expression_attribute_values(":tag", s(tag));
        }
        if let Some(after) = &query.after {
            request = request
                .exclusive_start_key("pk", s(&pk))
                .exclusive_start_key("sk", s(entry_sort_key(after)));
        }
        let request = request.filter_expression(filter);
        let out = crate::retry::send(OP, || request.clone().send())
            .await
            .map_err(|e| backend(OP, &e))?;
        let entries = out
            .items()
            .iter()
            .map(decode)
            .collect::<Result<Vec<_>, _>>()?;
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
        let out = crate::retry::send("get", || {
            self.client
                .get_item()
                .table_name(&self.table)
                .set_key(Some(key_item(key)))
                .consistent_read(true)
                .send()
        })
        .await
        .map_err(|e| backend("get", &e))?;
        out.item().map(decode).transpose()
    }

    async fn delete(&self, key: &EntryKey) -> Result<bool, StoreError> {
        let out = crate::retry::send("delete", || {
            self.client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key_item(key)))
                .return_values(ReturnValue::AllOld)
                .send()
        })
        .await
        .map_err(|e| backend("delete", &e))?;
        Ok(out.attributes().is_some_and(|a| !a.is_empty()))
    }

    async fn find_by_subject(
        &self,
        tenant: &TenantId,
        subject: &SubjectKey,
    ) -> Result<Vec<EntryKey>, StoreError> {
        let request = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(SUBJECT_INDEX)
            .key_condition_expression("subjectKey = :s")
            .expression_attribute_values(":s", s(subject_attr(tenant, subject)));
        let (items, _) = query_all(request, "find_by_subject").await?;
        Ok(items
            .iter()
            .filter_map(key_of)
            .filter(|k| k.memory_ref.tenant() == tenant)
            .collect())
    }

    async fn replace(
        &self,
        put: &[StoredEntry],
        delete: &[(EntryKey, String)],
    ) -> Result<(), StoreError> {
        const OP: &str = "replace";
        if put.len() + delete.len() > MAX_ITEMS_PER_TRANSACTION {
            return Err(StoreError::Backend {
                op: OP,
                code: "TooManyItems".into(),
            });
        }
        let mut items = Vec::with_capacity(put.len() + delete.len());
        for e in put {
            items.push(self.put_if_absent(OP, e)?);
        }
        for (key, rev) in delete {
            let delete = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(key_item(key)))
                .condition_expression("rev = :rev")
                .expression_attribute_values(":rev", s(rev))
                .build()
                .map_err(|_| build_error(OP))?;
            items.push(TransactWriteItem::builder().delete(delete).build());
        }
        if items.is_empty() {
            return Ok(());
        }
        self.transact(OP, items).await
    }

    async fn work_state(
        &self,
        memory_ref: &MemoryRef,
        kind: WorkKind,
    ) -> Result<WorkState, StoreError> {
        let out = crate::retry::send("work_state", || {
            self.client
                .get_item()
                .table_name(&self.table)
                .set_key(Some(marker_key(memory_ref, kind)))
                .consistent_read(true)
                .send()
        })
        .await
        .map_err(|e| backend("work_state", &e))?;
        Ok(out
            .item()
            .map(|item| WorkState {
                version: get_n(item, "dirtyVersion").and_then(|v| u64::try_from(v).ok()),
                pending: item.contains_key("dirtyPartition"),
                watermark: get_n(item, "watermarkMs").map(Timestamp::from_millis),
            })
            .unwrap_or_default())
    }

    async fn finish_work(
        &self,
        memory_ref: &MemoryRef,
        kind: WorkKind,
        version: Option<u64>,
        watermark: Option<Timestamp>,
    ) -> Result<bool, StoreError> {
        const OP: &str = "finish_work";
        // 1. The watermark, first and never backwards: a slow duplicate run must not lower
        //    it, and a crash after this step leaves the ref pending, so nothing is skipped.
        if let Some(w) = watermark {
            match crate::retry::send(OP, || {
                self.client
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(marker_key(memory_ref, kind)))
                    .update_expression("SET watermarkMs = :w")
                    .condition_expression("attribute_not_exists(watermarkMs) OR watermarkMs < :w")
                    .expression_attribute_values(":w", n(w.as_millis()))
                    .send()
            })
            .await
            {
                Ok(_) => {}
                Err(e)
                    if crate::error::service_code(&e)
                        == Some("ConditionalCheckFailedException") => {}
                Err(e) => return Err(backend(OP, &e)),
            }
        }
        // 2. Out of the pending index, only if no write arrived since the pass read the marker.
        let clear = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(marker_key(memory_ref, kind)))
            .update_expression("REMOVE dirtyPartition, dirtySince");
        let clear = match version {
            Some(v) => clear
                .condition_expression("dirtyVersion = :v")
                .expression_attribute_values(":v", n(i64::try_from(v).unwrap_or(i64::MAX))),
            None => clear.condition_expression("attribute_not_exists(dirtyVersion)"),
        };
        match crate::retry::send(OP, || clear.clone().send()).await {
            Ok(_) => Ok(true),
            Err(e) if crate::error::service_code(&e) == Some("ConditionalCheckFailedException") => {
                Ok(false)
            }
            Err(e) => Err(backend(OP, &e)),
        }
    }

    async fn pending_refs(&self, kind: WorkKind, shard: u8) -> Result<Vec<MemoryRef>, StoreError> {
        let request = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(DIRTY_INDEX)
            .key_condition_expression("dirtyPartition = :p")
            .expression_attribute_values(":p", s(dirty_partition(kind, shard)));
        let (items, _) = query_all(request, "pending_refs").await?;
        Ok(items
            .iter()
            .filter_map(|i| get_s(i, "pk"))
            .filter_map(ref_from_pk)
            .collect())
    }

    async fn delete_many(&self, keys: &[EntryKey]) -> Result<usize, StoreError> {
        // One DeleteItem each: BatchWriteItem cannot say which items existed, and forget must
        // report honest counts. Forget is rare, so round trips matter less than the answer.
        let mut deleted = 0;
        for key in keys {
            if self.delete(key).await? {
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}
