//! `CommitmentStore` on the memory table. Commitments live in their ref's partition at
//! `sk = C#{commitmentId}`, so they share the tenant-leading key of everything else. Two sparse
//! indexes make the hot paths cheap: `byDue` (`duePartition = due#{shard}`, `dueAt`) holds only
//! armed time commitments and pending outboxes, so the every-minute tick reads exactly the due
//! items whatever the number stored; `bySubject` (the entries' subject index) lets forget find
//! commitments inferred from a subject's entries.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use commitments::{Commitment, Condition, State};
use serde::{Deserialize, Serialize};

use commitment_service::{
    due_shard, CommitmentKey, CommitmentStore, DueRead, Outbox, StoredCommitment,
};
use memory_core::model::SubjectKey;
use memory_core::{StoreError, Timestamp};
use memory_guard::MemoryRef;

use memory_aws::dynamo::{get_s, n, partition_key, query_all, ref_from_pk, s, subject_attr};
use memory_aws::DynamoClients;

pub const DUE_INDEX: &str = "byDue";
const PREFIX: &str = "C#";

type Item = HashMap<String, AttributeValue>;

#[derive(Clone, Debug)]
pub struct DynamoCommitmentStore {
    /// The function's own client, or the acting tenant's session when tenant-scoped
    /// credentials are on (`memory_aws::tenant`); the `byDue` Query always on the own role.
    clients: DynamoClients,
    table: String,
}

fn due_key(at_ms: i64) -> String {
    format!("{:015}", at_ms.max(0))
}

fn key_item(key: &CommitmentKey) -> Item {
    HashMap::from([
        ("pk".to_owned(), s(partition_key(&key.memory_ref))),
        ("sk".to_owned(), s(format!("{PREFIX}{}", key.id))),
    ])
}

fn key_of(item: &Item) -> Option<CommitmentKey> {
    Some(CommitmentKey {
        memory_ref: ref_from_pk(get_s(item, "pk")?)?,
        id: get_s(item, "sk")?.strip_prefix(PREFIX)?.to_owned(),
    })
}

/// A commitment's attributes as the table stores them, beside its `pk`/`sk`; `serde_dynamo`
/// maps the struct to and from DynamoDB attributes. The due attributes exist only while the
/// commitment is armed or its outbox is pending, which keeps the `byDue` index sparse.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommitmentItem {
    tenant_id: String,
    memory_ref: String,
    #[serde(default)]
    sources: Vec<String>,
    condition: String,
    state: String,
    #[serde(default)]
    fired: Vec<i64>,
    created_at_ms: i64,
    version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outbox_instant: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outbox_lease: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    due_partition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    due_at: Option<String>,
}

fn encode(c: &StoredCommitment) -> Result<Item, StoreError> {
    let k = &c.commitment;
    let corrupt = || StoreError::Corrupt { key: k.id.clone() };
    let memory_ref = MemoryRef::parse(&k.memory_ref).map_err(|_| corrupt())?;
    let due_at = c.due_at();
    let attributes = CommitmentItem {
        tenant_id: k.tenant_id.clone(),
        memory_ref: k.memory_ref.clone(),
        sources: k.source_entry_ids.clone(),
        condition: k.condition.encode(),
        state: k.state.as_str().to_owned(),
        fired: k.fired.clone(),
        created_at_ms: k.created_at_ms,
        version: c.version,
        subject_key: c.subject.as_ref().map(subject_attr),
        outbox_instant: c.outbox.map(|o| o.instant_ms),
        outbox_lease: c.outbox.map(|o| o.lease_until_ms),
        due_partition: due_at.map(|_| format!("due#{:02}", due_shard(&k.id))),
        due_at: due_at.map(due_key),
    };
    let mut item: Item = serde_dynamo::to_item(attributes).map_err(|_| corrupt())?;
    item.extend(key_item(&CommitmentKey {
        memory_ref,
        id: k.id.clone(),
    }));
    Ok(item)
}

fn decode(item: &Item) -> Result<StoredCommitment, StoreError> {
    let key = key_of(item);
    let corrupt = || StoreError::Corrupt {
        key: key
            .as_ref()
            .map_or_else(|| "?".to_owned(), |k| k.id.clone()),
    };
    let key = key.clone().ok_or_else(corrupt)?;
    let stored: CommitmentItem = serde_dynamo::from_item(item.clone()).map_err(|_| corrupt())?;
    let tenant = key.memory_ref.tenant();
    let subject = stored
        .subject_key
        .as_deref()
        .and_then(|raw| raw.strip_prefix(tenant.as_str()))
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|digest| SubjectKey::from_stored(tenant, digest));
    let outbox = match (stored.outbox_instant, stored.outbox_lease) {
        (Some(instant_ms), Some(lease_until_ms)) => Some(Outbox {
            instant_ms,
            lease_until_ms,
        }),
        _ => None,
    };
    Ok(StoredCommitment {
        commitment: Commitment {
            id: key.id.clone(),
            tenant_id: stored.tenant_id,
            memory_ref: stored.memory_ref,
            source_entry_ids: stored.sources,
            condition: Condition::decode(&stored.condition).map_err(|_| corrupt())?,
            state: stored.state.parse::<State>().map_err(|_| corrupt())?,
            fired: stored.fired,
            created_at_ms: stored.created_at_ms,
        },
        version: stored.version,
        subject,
        outbox,
    })
}

impl DynamoCommitmentStore {
    /// Puts `item` if `condition` holds (`:v` bound to `value`); `Ok(false)` when it does not.
    async fn put_if(
        &self,
        op: &'static str,
        item: Item,
        condition: &str,
        value: Option<AttributeValue>,
    ) -> Result<bool, StoreError> {
        let values = value.map(|v| HashMap::from([(":v".to_owned(), v)]));
        let table = self.clients.table(&self.table, op).await?;
        let request = table
            .put_item(item)
            .condition_expression(condition)
            .set_expression_attribute_values(values);
        Ok(table.conditional(&request).await?.is_some())
    }

    /// The store in the table the function's other adapters use.
    pub fn from_ports(ports: &memory_aws::AwsPorts) -> Self {
        DynamoCommitmentStore {
            clients: DynamoClients::new(ports.dynamo.clone(), ports.tenant_sessions.clone()),
            table: ports.table.clone(),
        }
    }

    pub fn new(client: Client, table: String) -> Self {
        DynamoCommitmentStore {
            clients: DynamoClients::new(client, None),
            table,
        }
    }
}

#[async_trait]
impl CommitmentStore for DynamoCommitmentStore {
    async fn put_new(&self, commitments: &[StoredCommitment]) -> Result<usize, StoreError> {
        let mut added = 0;
        for c in commitments {
            let new = self.put_if("put_new", encode(c)?, "attribute_not_exists(pk)", None);
            added += usize::from(new.await?);
        }
        Ok(added)
    }

    async fn get(&self, key: &CommitmentKey) -> Result<Option<StoredCommitment>, StoreError> {
        let table = self.clients.table(&self.table, "get_commitment").await?;
        let item = table.read(key_item(key)).await?;
        item.as_ref().map(decode).transpose()
    }

    async fn transition(
        &self,
        expected_version: u64,
        next: &StoredCommitment,
    ) -> Result<(), StoreError> {
        let version = n(i64::try_from(expected_version).unwrap_or(i64::MAX));
        let put = self.put_if("transition", encode(next)?, "version = :v", Some(version));
        if put.await? {
            Ok(())
        } else {
            Err(StoreError::Conflict { op: "transition" })
        }
    }

    async fn due(&self, shard: u8, now: Timestamp) -> Result<DueRead, StoreError> {
        // Across tenants by design (`due#{shard}` partitions): the function's own role.
        let request = self
            .clients
            .fan_out()
            .query()
            .table_name(&self.table)
            .index_name(DUE_INDEX)
            .key_condition_expression("duePartition = :p AND dueAt <= :now")
            .expression_attribute_values(":p", s(format!("due#{shard:02}")))
            .expression_attribute_values(":now", s(due_key(now.as_millis())));
        let (items, items_read) = query_all(request, "due").await?;
        Ok(DueRead {
            keys: items.iter().filter_map(key_of).collect(),
            items_read,
        })
    }
    async fn for_ref(&self, memory_ref: &MemoryRef) -> Result<Vec<StoredCommitment>, StoreError> {
        let table = self.clients.table(&self.table, "for_ref").await?;
        let items = table
            .prefix_items(partition_key(memory_ref), PREFIX)
            .await?;
        items.iter().map(decode).collect()
    }
    async fn find_by_subject(
        &self,
        subject: &SubjectKey,
    ) -> Result<Vec<CommitmentKey>, StoreError> {
        let op = "find_commitments_by_subject";
        let table = self.clients.table(&self.table, op).await?;
        let found = table.subject_ids(subject, PREFIX).await?;
        Ok(found
            .into_iter()
            .map(|(memory_ref, id)| CommitmentKey { memory_ref, id })
            .collect())
    }
    async fn delete(&self, key: &CommitmentKey) -> Result<bool, StoreError> {
        let table = self.clients.table(&self.table, "delete_commitment").await?;
        Ok(table.delete_returning_old(key_item(key)).await?.is_some())
    }
}
