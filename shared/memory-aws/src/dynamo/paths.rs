//! `PathStore` on the entries table: path keys of the Claude memory tool
//! (docs/architecture.md "Storage layout (one DynamoDB table)").
//!
//!   pk `{tenantId}#{agentId}`, sk `M#{key}`                 the path record: `path` (the exact
//!                                                           path), `entryId`, `subjects` (digests)
//!   pk `{tenantId}#{agentId}`, sk `M#{key}#S#{subjectHash}` one link per listed subject, carrying
//!                                                           `subjectKey`, so `bySubject` finds it
//!
//! A change is one `TransactWriteItems`: the entries (put if the id is free, delete if the
//! revision is unchanged), each path record put or deleted under `attribute_not_exists(sk)` or
//! `entryId = :e` (a `ConditionCheck` when the record must stay absent), and the links added or
//! removed. Keys (`[a-z0-9._/-]`, case-folded by the tool) hold no `#`, so a record and its links
//! never collide. A child of `dynamo` so it shares the entries' item codec and postings rule.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem};

use memory_core::model::SubjectKey;
use memory_core::paths::{LinkedPath, PathChange, PathRecord, PathStore, PathWrite};
use memory_core::ports::QuotaStore;
use memory_core::ports::{within, EntryStore, PassKind, MAX_ITEMS_PER_TRANSACTION};
use memory_core::quota::QuotaCheck;
use memory_core::{StoreError, Timestamp};
use memory_guard::{MemoryRef, TenantId};

use super::{
    build_error, get_s, partition_key, s, subject_attr, transact_item, DynamoEntryStore, Item,
    Write,
};

const PATH_PREFIX: &str = "M#";
const LINK_INFIX: &str = "#S#";

fn record_key(r: &MemoryRef, key: &str) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(partition_key(r))),
        ("sk".to_owned(), s(format!("{PATH_PREFIX}{key}"))),
    ])
}

fn link_key(r: &MemoryRef, key: &str, subject: &SubjectKey) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(partition_key(r))),
        (
            "sk".to_owned(),
            s(format!(
                "{PATH_PREFIX}{key}{LINK_INFIX}{}",
                subject.as_str()
            )),
        ),
    ])
}

fn record_item(r: &MemoryRef, key: &str, record: &PathRecord) -> Item {
    let mut item = record_key(r, key);
    item.insert("path".to_owned(), s(&record.path));
    item.insert("entryId".to_owned(), s(&record.entry_id));
    item.insert(
        "subjects".to_owned(),
        AttributeValue::L(record.subjects.iter().map(|k| s(k.as_str())).collect()),
    );
    item
}

/// The record of a path of `tenant` (its subjects are that tenant's).
fn decode_record(tenant: &TenantId, item: &Item) -> Result<PathRecord, StoreError> {
    let corrupt = || super::corrupt_item(item);
    let subjects = match item.get("subjects") {
        Some(AttributeValue::L(list)) => list
            .iter()
            .map(|v| {
                v.as_s()
                    .ok()
                    .and_then(|k| SubjectKey::from_stored(tenant, k))
            })
            .collect::<Option<BTreeSet<SubjectKey>>>()
            .ok_or_else(corrupt)?,
        None => BTreeSet::new(),
        Some(_) => return Err(corrupt()),
    };
    Ok(PathRecord {
        path: get_s(item, "path").ok_or_else(corrupt)?.to_owned(),
        entry_id: get_s(item, "entryId").ok_or_else(corrupt)?.to_owned(),
        subjects,
    })
}

impl DynamoEntryStore {
    /// The transaction items of one path write: the record (conditioned on what was read), then
    /// the links of subjects added and removed.
    fn path_items(
        &self,
        op: &'static str,
        r: &MemoryRef,
        w: &PathWrite,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let (condition, values) = match &w.expect {
            None => ("attribute_not_exists(sk)", Vec::new()),
            Some(id) => ("entryId = :e", vec![(":e", s(id))]),
        };
        let mut items = vec![match (&w.then, &w.expect) {
            (Some(record), _) => transact_item(
                op,
                &self.table,
                Write::Put(record_item(r, &w.key, record)),
                Some(condition),
                values,
            )?,
            (None, Some(_)) => transact_item(
                op,
                &self.table,
                Write::Delete(record_key(r, &w.key)),
                Some(condition),
                values,
            )?,
            (None, None) => TransactWriteItem::builder()
                .condition_check(
                    ConditionCheck::builder()
                        .table_name(&self.table)
                        .set_key(Some(record_key(r, &w.key)))
                        .condition_expression(condition)
                        .build()
                        .map_err(|_| build_error(op))?,
                )
                .build(),
        }];
        let after: BTreeSet<&SubjectKey> = w.then.iter().flat_map(|t| &t.subjects).collect();
        for gone in w.read_subjects.iter().filter(|k| !after.contains(k)) {
            items.push(transact_item(
                op,
                &self.table,
                Write::Delete(link_key(r, &w.key, gone)),
                None,
                Vec::new(),
            )?);
        }
        for added in after.iter().filter(|k| !w.read_subjects.contains(k)) {
            let mut link = link_key(r, &w.key, added);
            link.insert("subjectKey".to_owned(), s(subject_attr(added)));
            items.push(transact_item(
                op,
                &self.table,
                Write::Put(link),
                None,
                Vec::new(),
            )?);
        }
        Ok(items)
    }
}

#[async_trait]
impl PathStore for DynamoEntryStore {
    async fn path(
        &self,
        memory_ref: &MemoryRef,
        key: &str,
    ) -> Result<Option<PathRecord>, StoreError> {
        const OP: &str = "path";
        let table = self.clients.table(&self.table, OP).await?;
        match table.read(record_key(memory_ref, key)).await? {
            Some(item) => Ok(Some(decode_record(memory_ref.tenant(), &item)?)),
            None => Ok(None),
        }
    }

    async fn change_paths(
        &self,
        memory_ref: &MemoryRef,
        change: &PathChange,
    ) -> Result<(), StoreError> {
        const OP: &str = "change_paths";
        within(OP, change.items(), MAX_ITEMS_PER_TRANSACTION)?;
        if change
            .put
            .iter()
            .chain(&change.delete)
            .any(|e| &e.memory_ref != memory_ref)
        {
            return Err(StoreError::Conflict { op: OP });
        }
        let mut items = Vec::with_capacity(change.items());
        for e in &change.put {
            items.extend(self.put_if_absent(OP, e)?);
        }
        items.extend(self.revision_deletes(OP, &change.delete)?);
        for w in &change.paths {
            items.extend(self.path_items(OP, memory_ref, w)?);
        }
        items.extend(self.change_record_items(OP, &change.put, &change.delete)?);
        if items.is_empty() {
            return Ok(());
        }
        // The memory tool is a user's door: what an edit adds is charged against the tenant's
        // quotas in the same transaction (docs/quotas.md "Quotas").
        let now = Timestamp::from_millis(super::wall_clock_ms());
        let limits = QuotaStore::limits(self, memory_ref.tenant()).await?;
        let check = QuotaCheck::for_rewrite(&limits, &change.put, &change.delete, now);
        let first_charge = items.len();
        for charge in &check.charges {
            items.push(super::quota::charge_item(OP, &self.table, charge)?);
        }
        within(OP, items.len(), MAX_ITEMS_PER_TRANSACTION)?;
        self.put_postings(OP, &change.put).await?;
        match self.transact(OP, items).await {
            Ok(()) => {}
            Err(super::TxError::Conditions(failed)) => {
                return Err(self
                    .refused(OP, &failed, first_charge, &check.charges, now)
                    .await)
            }
            Err(e) => return Err(e.into_store(OP)),
        }
        for e in &change.delete {
            self.delete_overflow(&e.key()).await?;
        }
        self.remove_postings(OP, &change.delete).await;
        if let Some(since) = change.put.iter().map(|e| e.entry.created_at).min() {
            self.mark_pending(memory_ref, PassKind::Index, since).await;
        }
        Ok(())
    }

    async fn paths_of_subject(&self, subject: &SubjectKey) -> Result<Vec<LinkedPath>, StoreError> {
        const OP: &str = "paths_of_subject";
        let table = self.clients.table(&self.table, OP).await?;
        let mut found = Vec::new();
        for (memory_ref, link) in table.subject_ids(subject, PATH_PREFIX).await? {
            let Some(key) = link
                .strip_suffix(subject.as_str())
                .and_then(|rest| rest.strip_suffix(LINK_INFIX))
            else {
                continue;
            };
            let item = table.read(record_key(&memory_ref, key)).await?;
            let record = item
                .map(|i| decode_record(memory_ref.tenant(), &i))
                .transpose()?;
            let Some(record) = record else {
                continue;
            };
            // A link outlives nothing it names: a record that no longer lists the subject is
            // another file now.
            if record.subjects.contains(subject) {
                found.push(LinkedPath {
                    memory_ref,
                    key: key.to_owned(),
                    record,
                });
            }
        }
        Ok(found)
    }
}
