//! `EntryStore` on one DynamoDB table (DESIGN.md §memoryRef and tenants).
//!
//! Item layout — every key starts with the tenant, so one Query can never span tenants and IAM
//! `dynamodb:LeadingKeys` can pin a principal to `"{tenant}#*"`:
//!   pk          `{tenantId}#{agentId}`      one partition per memoryRef
//!   sk          `E#{entryId}`               ULIDs, so a reverse scan is newest first
//!   subjectKey  `{tenantId}#{sha256}`       only on entries with a subject: the sparse
//!                                           `bySubject` index behind delete-by-subject
//!   ttl         epoch seconds (rounded up)  DynamoDB TTL; reads filter expiry themselves
//!
//! Reads are strongly consistent (read-your-writes); the `bySubject` index can only be read
//! eventually consistently, which forget accepts (see README).

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, ReturnValue, TransactWriteItem};
use aws_sdk_dynamodb::Client;

use memory_core::model::{Attribution, EntryKey, MemoryEntry, StoredEntry, SubjectKey, Tier};
use memory_core::ports::{EntryStore, Page, PageQuery, MAX_ENTRIES_PER_PUT};
use memory_core::{StoreError, Timestamp};
use memory_guard::{AgentId, MemoryRef, TenantId};

use crate::error::backend;

pub const SUBJECT_INDEX: &str = "bySubject";
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
    if let Some(subject) = &e.subject {
        item.insert(
            "subjectKey".into(),
            s(subject_attr(e.memory_ref.tenant(), subject)),
        );
    }
    let a = &e.attribution;
    for (name, value) in [("runId", &a.run_id), ("nodeId", &a.node_id), ("agentId", &a.agent_id)] {
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
    item.get(name).and_then(|v| v.as_s().ok()).map(String::as_str)
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

impl DynamoEntryStore {
    pub fn new(client: Client, table: String) -> Self {
        DynamoEntryStore { client, table }
    }

    pub fn table(&self) -> &str {
        &self.table
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
        let mut items = Vec::with_capacity(entries.len());
        for e in entries {
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(encode(e)))
                .condition_expression("attribute_not_exists(pk)")
                .build()
                .map_err(|_| StoreError::Backend {
                    op: OP,
                    code: "BuildRequest".into(),
                })?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        self.client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map_err(|err| {
                if is_condition_failure(&err) {
                    StoreError::Conflict { op: OP }
                } else {
                    backend(OP, &err)
                }
            })?;
        Ok(())
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
        let out = request
            .filter_expression(filter)
            .send()
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
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key_item(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| backend("get", &e))?;
        out.item().map(decode).transpose()
    }

    async fn delete(&self, key: &EntryKey) -> Result<bool, StoreError> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key_item(key)))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| backend("delete", &e))?;
        Ok(out.attributes().is_some_and(|a| !a.is_empty()))
    }

    async fn find_by_subject(
        &self,
        tenant: &TenantId,
        subject: &SubjectKey,
    ) -> Result<Vec<EntryKey>, StoreError> {
        let mut keys = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(SUBJECT_INDEX)
                .key_condition_expression("subjectKey = :s")
                .expression_attribute_values(":s", s(subject_attr(tenant, subject)))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| backend("find_by_subject", &e))?;
            keys.extend(
                out.items()
                    .iter()
                    .filter_map(key_of)
                    .filter(|k| k.memory_ref.tenant() == tenant),
            );
            match out.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => return Ok(keys),
            }
        }
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
