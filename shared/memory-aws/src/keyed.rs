//! The OpenIntent door's items in the one table (docs/openintent.md "Storage"). Working and
//! episodic entries share their agent's partition with the OpenWOP ref of the same agent
//! (`{tenant}#{agent}`), semantic entries live in `{tenant}#@semantic` (`@` is outside the id
//! alphabet, so no agent's partition can be named that): every key still starts with the
//! tenant, so IAM's leading-key condition and CTI-1 cover this door unchanged.
//!
//! | sort key | item |
//! |---|---|
//! | `I#E#{id}` | the entry: its wire document, `version`, `accessedMs`, `subjectKey`?, `ttl`? |
//! | `I#K#{claim}` | the uniqueness claim (`id` of the holder) |
//! | `I#C#{counter}` | a capacity counter (`n`) |
//! | `I#V#{id}#{version}` | an immutable version record, `subjectKey`? |
//! | `I#L#{rank}#{accessedMs}#{id}` | an unpinned episodic entry's place in the eviction order |
//! | `I#A#{task}#{subject}` | a task archive's index item under one subject (`subjectKey`) |
//! | `I#T#{id}` | forget's tombstone of an entry, a day (`ttl`) |
//!
//! Every write of the door is one `TransactWriteItems`, whose conditions carry the rules.
//! API key records live at `pk = @apikey#{keyId}`, outside every tenant.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use intent_memory::api_key::{KeyRecord, KeyRegistry};
use intent_memory::model::{
    Caller, ClaimKey, CounterAt, CounterKey, Home, Location, StoredIntent, VersionRecord,
};
use intent_memory::store::{
    ArchiveKey, Capacity, CountRepair, CounterState, InsertOutcome, IntentStore, IntentUpdate,
    NewIntent, SubjectHit,
};
use memory_core::model::SubjectKey;
use memory_core::ports::MAX_ITEMS_PER_TRANSACTION;
use memory_core::quota::{Charge, Counter};
use memory_core::{StoreError, Timestamp};
use memory_guard::{AgentId, TenantId};

use crate::dynamo::quota::charge_refusal;
use crate::dynamo::{
    build_error, get_n, get_s, n, query_all, s, subject_attr, transact_item, transact_with, Item,
    Table, TxError, Values, Write,
};
use crate::tenant::{DynamoClients, TenantSessions};

const SEMANTIC: &str = "@semantic";
const ENTRY: &str = "I#E#";
const CLAIM: &str = "I#K#";
const COUNTER: &str = "I#C#";
const VERSION: &str = "I#V#";
const LRU: &str = "I#L#";
const ARCHIVE_INDEX: &str = "I#A#";
const TOMBSTONE: &str = "I#T#";
const KEY_PARTITION: &str = "@apikey#";

fn pk(tenant: &TenantId, home: &Home) -> String {
    match home {
        Home::Agent(agent) => format!("{}#{}", tenant.as_str(), agent.as_str()),
        Home::Semantic => format!("{}#{SEMANTIC}", tenant.as_str()),
    }
}

fn home_of(tenant: &TenantId, pk: &str) -> Option<Home> {
    let rest = pk.strip_prefix(tenant.as_str())?.strip_prefix('#')?;
    if rest == SEMANTIC {
        Some(Home::Semantic)
    } else {
        AgentId::parse(rest).ok().map(Home::Agent)
    }
}

fn key(pk: String, sk: String) -> Item {
    HashMap::from([("pk".to_owned(), s(pk)), ("sk".to_owned(), s(sk))])
}

fn version_sk(id: &str, version: u64) -> String {
    format!("{VERSION}{id}#{version:020}")
}

fn lru_sk(e: &StoredIntent) -> String {
    format!(
        "{LRU}{}#{:015}#{}",
        e.entry.priority.rank(),
        e.accessed_at.as_millis().max(0),
        e.entry.id
    )
}

fn corrupt(pk: &str, sk: &str) -> StoreError {
    StoreError::Corrupt {
        key: format!("{pk}/{sk}"),
    }
}

/// DynamoDB (and S3 through the archive store) behind the door's store port.
#[derive(Clone, Debug)]
pub struct DynamoKeyedStore {
    clients: DynamoClients,
    table: String,
}

/// The keyed store's writes, named as its errors name them.
fn put(table: &str, item: Item, condition: Option<&str>) -> Result<TransactWriteItem, StoreError> {
    transact_item("keyed put", table, Write::Put(item), condition, Vec::new())
}

fn delete(
    table: &str,
    k: Item,
    condition: Option<(&str, Values<'_>)>,
) -> Result<TransactWriteItem, StoreError> {
    let (condition, values) = condition.unzip();
    transact_item(
        "keyed delete",
        table,
        Write::Delete(k),
        condition,
        values.unwrap_or_default(),
    )
}

impl DynamoKeyedStore {
    pub fn new(client: Client, table: String) -> Self {
        DynamoKeyedStore {
            clients: DynamoClients::new(client, None),
            table,
        }
    }

    pub fn with_tenant_sessions(mut self, tenants: Option<std::sync::Arc<TenantSessions>>) -> Self {
        self.clients = DynamoClients::new(self.clients.fan_out().clone(), tenants);
        self
    }

    fn entry_item(&self, e: &StoredIntent) -> Result<Item, StoreError> {
        let doc =
            serde_json::to_string(&e.entry.to_json()).map_err(|_| build_error("keyed doc"))?;
        let mut item = key(pk(&e.tenant, &e.home()), format!("{ENTRY}{}", e.entry.id));
        item.insert("doc".into(), s(doc));
        item.insert("version".into(), n(e.entry.version as i64));
        item.insert("accessedMs".into(), n(e.accessed_at.as_millis()));
        self.decorate(&mut item, e);
        Ok(item)
    }

    /// Forget key and TTL, on every item that holds the entry's data.
    fn decorate(&self, item: &mut Item, e: &StoredIntent) {
        if let Some(subject) = &e.subject {
            item.insert("subjectKey".into(), s(subject_attr(subject)));
        }
        if let Some(at) = e.entry.expires_at {
            item.insert("ttl".into(), n(at.epoch_seconds_ceil()));
        }
    }

    fn version_item(&self, e: &StoredIntent, record: &VersionRecord) -> Result<Item, StoreError> {
        let doc = serde_json::to_string(&record.to_json()).map_err(|_| build_error("keyed doc"))?;
        let mut item = key(
            pk(&e.tenant, &e.home()),
            version_sk(&e.entry.id, record.entry.version),
        );
        item.insert("doc".into(), s(doc));
        self.decorate(&mut item, e);
        Ok(item)
    }

    fn claim_key(&self, e: &StoredIntent) -> Item {
        key(
            pk(&e.tenant, &e.home()),
            format!("{CLAIM}{}", e.claim().as_str()),
        )
    }

    fn lru_item(&self, e: &StoredIntent) -> Item {
        let mut item = key(pk(&e.tenant, &e.home()), lru_sk(e));
        item.insert("id".into(), s(e.entry.id.clone()));
        if let Some(at) = e.entry.expires_at {
            item.insert("ttl".into(), n(at.epoch_seconds_ceil()));
        }
        item
    }

    fn counter_key(&self, at: &CounterAt) -> Item {
        key(
            pk(&at.tenant, &at.home),
            format!("{COUNTER}{}", at.counter.as_str()),
        )
    }

    /// The counter `counter` in `e`'s partition.
    fn counter_of(e: &StoredIntent, counter: &CounterKey) -> CounterAt {
        CounterAt {
            tenant: e.tenant.clone(),
            home: e.home(),
            counter: counter.clone(),
        }
    }

    fn decode(&self, tenant: &TenantId, item: &Item) -> Result<StoredIntent, StoreError> {
        let (p, sk) = (
            get_s(item, "pk").unwrap_or("?"),
            get_s(item, "sk").unwrap_or("?"),
        );
        let doc: serde_json::Value = get_s(item, "doc")
            .and_then(|d| serde_json::from_str(d).ok())
            .ok_or_else(|| corrupt(p, sk))?;
        let entry = intent_memory::IntentEntry::from_json(&doc).ok_or_else(|| corrupt(p, sk))?;
        let subject = get_s(item, "subjectKey")
            .and_then(|v| v.rsplit_once('#'))
            .and_then(|(_, h)| SubjectKey::from_stored(tenant, h));
        Ok(StoredIntent {
            tenant: tenant.clone(),
            entry,
            accessed_at: Timestamp::from_millis(get_n(item, "accessedMs").unwrap_or(0)),
            subject,
        })
    }

    async fn client(&self, op: &'static str) -> Result<Client, StoreError> {
        self.clients.data(op).await
    }

    async fn data(&self, op: &'static str) -> Result<Table<'_>, StoreError> {
        self.clients.table(&self.table, op).await
    }

    async fn transact(
        &self,
        op: &'static str,
        items: Vec<TransactWriteItem>,
    ) -> Result<(), TxError> {
        let client = self.client(op).await.map_err(TxError::Store)?;
        transact_with(&client, op, items).await
    }

    async fn query_prefix(
        &self,
        op: &'static str,
        pk: String,
        prefix: String,
        limit: Option<i32>,
    ) -> Result<Vec<Item>, StoreError> {
        let request = self
            .data(op)
            .await?
            .prefix_query(pk, prefix)
            .set_limit(limit);
        if limit.is_some() {
            let out = crate::dynamo::call(op, &request).await?;
            return Ok(out.items().to_vec());
        }
        Ok(query_all(request, op).await?.0)
    }

    async fn version_keys(&self, e: &StoredIntent) -> Result<Vec<Item>, StoreError> {
        let p = pk(&e.tenant, &e.home());
        let items = self
            .query_prefix(
                "keyed versions",
                p.clone(),
                format!("{VERSION}{}#", e.entry.id),
                None,
            )
            .await?;
        Ok(items
            .iter()
            .filter_map(|i| get_s(i, "sk").map(|sk| key(p.clone(), sk.to_owned())))
            .collect())
    }

    /// The transaction items that delete `e` and everything hanging off it.
    fn removal(
        &self,
        e: &StoredIntent,
        versions: &[Item],
        holds_claim: bool,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        // Unchanged since read, access time included: the eviction place deleted below is
        // named by it, so a stale copy must not leave the current place behind.
        let mut items = vec![delete(
            &self.table,
            key(pk(&e.tenant, &e.home()), format!("{ENTRY}{}", e.entry.id)),
            Some((
                "version = :v AND accessedMs = :a",
                vec![
                    (":v", n(e.entry.version as i64)),
                    (":a", n(e.accessed_at.as_millis())),
                ],
            )),
        )?];
        // The claim goes only if it still names this entry (read just before): a claim that
        // already moved on to a newer entry of the key is that entry's.
        if holds_claim {
            items.push(delete(
                &self.table,
                self.claim_key(e),
                Some(("id = :id", vec![(":id", s(e.entry.id.clone()))])),
            )?);
        }
        if e.evictable() {
            items.push(delete(
                &self.table,
                key(pk(&e.tenant, &e.home()), lru_sk(e)),
                None,
            )?);
        }
        for v in versions {
            items.push(delete(&self.table, v.clone(), None)?);
        }
        Ok(items)
    }

    /// Gives every kept version record of `e` the entry's current expiry: records carry the
    /// entry's content, so the table's TTL must take them no later than the entry (and no
    /// earlier, while the entry is kept longer).
    async fn retime_versions(&self, e: &StoredIntent) -> Result<(), StoreError> {
        const OP: &str = "keyed retime versions";
        let table = self.data(OP).await?;
        for k in self.version_keys(e).await? {
            let mut u = table.update_item(k);
            u = match e.entry.expires_at {
                Some(at) => u
                    .update_expression("SET #t = :t")
                    .expression_attribute_values(":t", n(at.epoch_seconds_ceil())),
                None => u.update_expression("REMOVE #t"),
            };
            let u = u.expression_attribute_names("#t", "ttl");
            crate::dynamo::call(OP, &u).await?;
        }
        Ok(())
    }

    /// Whether the uniqueness claim still names this entry.
    async fn holds_claim(&self, e: &StoredIntent) -> Result<bool, StoreError> {
        const OP: &str = "keyed claim";
        let claim = self.data(OP).await?.read(self.claim_key(e)).await?;
        Ok(claim.as_ref().and_then(|i| get_s(i, "id")) == Some(e.entry.id.as_str()))
    }

    /// Version records beyond what fits in the entry's transaction go right after it.
    async fn delete_items(&self, op: &'static str, keys: &[Item]) -> Result<(), StoreError> {
        let table = self.data(op).await?;
        for k in keys {
            table.delete(k.clone()).await?;
        }
        Ok(())
    }

    /// The quota charges' transaction items (docs/quotas.md "The OpenIntent door").
    fn quota_items(
        &self,
        op: &'static str,
        charges: &[Charge],
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        charges
            .iter()
            .map(|c| crate::dynamo::quota::charge_item(op, &self.table, c))
            .collect()
    }

    fn counter_update(
        &self,
        e: &StoredIntent,
        counter: &CounterKey,
        expr: &str,
        condition: Option<&str>,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<TransactWriteItem, StoreError> {
        transact_item(
            "keyed counter",
            &self.table,
            Write::Update(self.counter_key(&Self::counter_of(e, counter)), expr),
            condition,
            values,
        )
    }
}

/// Room in one transaction for the removal of a victim beside the insert (entry, claim, its
/// version, eviction place, counter check, victim entry, claim and place, three quota charges).
const VICTIM_VERSIONS_IN_TX: usize = MAX_ITEMS_PER_TRANSACTION - 11;

#[async_trait]
impl IntentStore for DynamoKeyedStore {
    async fn insert(&self, new: NewIntent<'_>) -> Result<InsertOutcome, StoreError> {
        const OP: &str = "keyed insert";
        let (entry, first, capacity) = (new.entry, new.first, new.capacity);
        let t = &self.table;
        let mut items = vec![
            put(t, self.entry_item(entry)?, Some("attribute_not_exists(pk)"))?,
            put(
                t,
                {
                    // No TTL on a claim: it must not change holder while its entry exists
                    // (an expired holder is removed by the service, an orphan released).
                    let mut c = self.claim_key(entry);
                    c.insert("id".into(), s(entry.entry.id.clone()));
                    c
                },
                Some("attribute_not_exists(pk)"),
            )?,
            put(t, self.version_item(entry, first)?, None)?,
        ];
        if entry.evictable() {
            items.push(put(t, self.lru_item(entry), None)?);
        }
        let counter_at = items.len();
        let mut victim_at = None;
        let mut overflow = Vec::new();
        match capacity {
            Capacity::Unbounded => {}
            Capacity::Count { counter, max } => items.push(self.counter_update(
                entry,
                counter,
                "SET n = if_not_exists(n, :zero) + :one, rev = if_not_exists(rev, :zero) + :one",
                Some("attribute_not_exists(n) OR n < :max"),
                vec![(":zero", n(0)), (":one", n(1)), (":max", n(*max as i64))],
            )?),
            Capacity::Evict {
                counter,
                max,
                victim,
            } => {
                let c = ConditionCheck::builder()
                    .table_name(t)
                    .set_key(Some(self.counter_key(&Self::counter_of(entry, counter))))
                    .condition_expression("n >= :max")
                    .expression_attribute_values(":max", n(*max as i64))
                    .build()
                    .map_err(|_| build_error(OP))?;
                items.push(TransactWriteItem::builder().condition_check(c).build());
                let versions = self.version_keys(victim).await?;
                let split = versions.len().min(VICTIM_VERSIONS_IN_TX);
                overflow = versions[split..].to_vec();
                victim_at = Some(items.len());
                // Removal requires the victim unchanged since it was chosen.
                let holds = self.holds_claim(victim).await?;
                items.extend(self.removal(victim, &versions[..split], holds)?);
            }
        }
        let quota_at = items.len();
        items.extend(self.quota_items(OP, new.quota)?);
        match self.transact(OP, items).await {
            Ok(()) => {
                self.delete_items(OP, &overflow).await?;
                Ok(InsertOutcome::Inserted)
            }
            Err(TxError::Conditions(failed)) => {
                // Any other failed condition is a race the service resolves first; a quota
                // refuses only when the rest of the write would have landed.
                let others = failed.iter().take(quota_at).any(|f| *f);
                if !others {
                    let table = self.data(OP).await?;
                    let at = entry.entry.created_at;
                    if let Some(refused) =
                        charge_refusal(&table, &failed, quota_at, new.quota, at).await?
                    {
                        return Err(refused);
                    }
                }
                if failed.get(1).copied().unwrap_or(false) {
                    let claim = self.data(OP).await?.read(self.claim_key(entry)).await?;
                    return Ok(match claim.as_ref().and_then(|i| get_s(i, "id")) {
                        Some(id) => InsertOutcome::KeyTaken {
                            existing_id: id.to_owned(),
                        },
                        None => InsertOutcome::Raced,
                    });
                }
                let counter_failed = failed.get(counter_at).copied().unwrap_or(false);
                let victim_failed = victim_at.is_some_and(|at| failed.iter().skip(at).any(|f| *f));
                Ok(match capacity {
                    Capacity::Count { .. } if counter_failed => InsertOutcome::AtCapacity,
                    _ if counter_failed || victim_failed => InsertOutcome::Raced,
                    // The entry id itself was taken: ids are unique, so this is a replayed
                    // insert; treat it as a race and let the service read again.
                    _ => InsertOutcome::Raced,
                })
            }
            Err(TxError::Store(e)) => Err(e),
        }
    }

    async fn get(&self, at: &Location) -> Result<Option<StoredIntent>, StoreError> {
        const OP: &str = "keyed get";
        let k = key(pk(&at.tenant, &at.home), format!("{ENTRY}{}", at.id));
        let item = self.data(OP).await?.read(k).await?;
        item.map(|i| self.decode(&at.tenant, &i)).transpose()
    }

    async fn list(&self, tenant: &TenantId, home: &Home) -> Result<Vec<StoredIntent>, StoreError> {
        let items = self
            .query_prefix("keyed list", pk(tenant, home), ENTRY.to_owned(), None)
            .await?;
        items.iter().map(|i| self.decode(tenant, i)).collect()
    }

    async fn update(&self, update: IntentUpdate<'_>) -> Result<bool, StoreError> {
        const OP: &str = "keyed update";
        let (previous, next) = (update.previous, update.next);
        let t = &self.table;
        let mut items = vec![
            transact_item(
                OP,
                t,
                Write::Put(self.entry_item(next)?),
                Some("version = :v AND accessedMs = :a"),
                vec![
                    (":v", n(previous.entry.version as i64)),
                    (":a", n(previous.accessed_at.as_millis())),
                ],
            )?,
            put(t, self.version_item(next, update.record)?, None)?,
        ];
        if let Some(v) = update.drop_version {
            items.push(delete(
                t,
                key(
                    pk(&next.tenant, &next.home()),
                    version_sk(&next.entry.id, v),
                ),
                None,
            )?);
        }
        let (old_place, new_place) = (lru_sk(previous), lru_sk(next));
        if !(previous.evictable() && next.evictable() && old_place == new_place) {
            if previous.evictable() {
                items.push(delete(
                    t,
                    key(pk(&previous.tenant, &previous.home()), old_place),
                    None,
                )?);
            }
            if next.evictable() {
                items.push(put(t, self.lru_item(next), None)?);
            }
        }
        let quota_at = items.len();
        items.extend(self.quota_items(OP, update.quota)?);
        match self.transact(OP, items).await {
            Ok(()) => {
                if previous.entry.expires_at != next.entry.expires_at {
                    self.retime_versions(next).await?;
                }
                Ok(true)
            }
            Err(TxError::Conditions(failed)) if !failed.iter().take(quota_at).any(|f| *f) => {
                let table = self.data(OP).await?;
                let at = next.entry.updated_at;
                match charge_refusal(&table, &failed, quota_at, update.quota, at).await? {
                    Some(refused) => Err(refused),
                    None => Ok(false),
                }
            }
            Err(TxError::Conditions(_)) => Ok(false),
            Err(TxError::Store(e)) => Err(e),
        }
    }

    async fn touch(&self, entry: &StoredIntent, at: Timestamp) -> Result<(), StoreError> {
        const OP: &str = "keyed touch";
        let t = &self.table;
        let mut touched = entry.clone();
        touched.accessed_at = at;
        let mut items = vec![transact_item(
            OP,
            t,
            Write::Update(
                key(
                    pk(&entry.tenant, &entry.home()),
                    format!("{ENTRY}{}", entry.entry.id),
                ),
                "SET accessedMs = :new",
            ),
            Some("version = :v AND accessedMs = :old"),
            vec![
                (":new", n(at.as_millis())),
                (":v", n(entry.entry.version as i64)),
                (":old", n(entry.accessed_at.as_millis())),
            ],
        )?];
        if entry.evictable() && lru_sk(entry) != lru_sk(&touched) {
            items.push(delete(
                t,
                key(pk(&entry.tenant, &entry.home()), lru_sk(entry)),
                None,
            )?);
            items.push(put(t, self.lru_item(&touched), None)?);
        }
        match self.transact(OP, items).await {
            Ok(()) | Err(TxError::Conditions(_)) => Ok(()),
            Err(TxError::Store(e)) => Err(e),
        }
    }

    async fn quota_scope(&self, tenant: &TenantId, home: &Home) -> Result<(i64, i64), StoreError> {
        const OP: &str = "keyed quota scope";
        let scope = intent_memory::quota::scope(home);
        let table = self.data(OP).await?;
        let mut out = [0i64; 2];
        for (slot, counter) in out.iter_mut().zip([
            Counter::KeyedEntries(tenant.clone(), scope.clone()),
            Counter::KeyedBytes(tenant.clone(), scope),
        ]) {
            *slot = crate::dynamo::quota::counter_value(&table, &counter).await?;
        }
        Ok((out[0], out[1]))
    }

    async fn repair_quota(
        &self,
        recount: &intent_memory::quota::ScopeRecount,
    ) -> Result<bool, StoreError> {
        const OP: &str = "keyed quota repair";
        let scope = intent_memory::quota::scope(&recount.home);
        let t = &recount.tenant;
        let mut items = crate::dynamo::quota::recount_items(
            OP,
            &self.table,
            [
                Counter::KeyedEntries(t.clone(), scope.clone()),
                Counter::KeyedBytes(t.clone(), scope),
            ],
            recount.seen,
            recount.counted,
        )?;
        let delta = recount.counted.1 - recount.seen.1;
        if delta != 0 {
            items.extend(self.quota_items(
                OP,
                &[Charge {
                    counter: Counter::TenantBytes(t.clone()),
                    delta,
                    limit: None,
                }],
            )?);
        }
        match self.transact(OP, items).await {
            Ok(()) => Ok(true),
            Err(TxError::Conditions(_)) => Ok(false),
            Err(TxError::Store(e)) => Err(e),
        }
    }

    async fn remove(&self, entry: &StoredIntent) -> Result<bool, StoreError> {
        const OP: &str = "keyed remove";
        let versions = self.version_keys(entry).await?;
        // Room for the entry, its claim and place, its capacity counter and three quota counters.
        let split = versions.len().min(MAX_ITEMS_PER_TRANSACTION - 7);
        let holds = self.holds_claim(entry).await?;
        let mut items = self.removal(entry, &versions[..split], holds)?;
        items.extend(self.quota_items(OP, &intent_memory::quota::released(entry))?);
        if let Some(counter) = entry.counter() {
            items.push(self.counter_update(
                entry,
                &counter,
                "SET n = if_not_exists(n, :one) - :one, rev = if_not_exists(rev, :zero) + :one",
                None,
                vec![(":one", n(1)), (":zero", n(0))],
            )?);
        }
        match self.transact(OP, items).await {
            Ok(()) => {
                self.delete_items(OP, &versions[split..]).await?;
                Ok(true)
            }
            Err(TxError::Conditions(_)) => Ok(false),
            Err(TxError::Store(e)) => Err(e),
        }
    }

    async fn release_claim(&self, holder: &Location, claim: &ClaimKey) -> Result<(), StoreError> {
        const OP: &str = "keyed release claim";
        let item = delete(
            &self.table,
            key(
                pk(&holder.tenant, &holder.home),
                format!("{CLAIM}{}", claim.as_str()),
            ),
            Some(("id = :id", vec![(":id", s(&holder.id))])),
        )?;
        match self.transact(OP, vec![item]).await {
            Ok(()) | Err(TxError::Conditions(_)) => Ok(()),
            Err(TxError::Store(e)) => Err(e),
        }
    }

    async fn set_count(&self, repair: &CountRepair) -> Result<bool, StoreError> {
        const OP: &str = "keyed set count";
        let item = transact_item(
            OP,
            &self.table,
            Write::Update(self.counter_key(&repair.at), "SET n = :to, rev = :next"),
            Some("rev = :rev"),
            vec![
                (":to", n(repair.to as i64)),
                (":next", n(repair.seen.rev as i64 + 1)),
                (":rev", n(repair.seen.rev as i64)),
            ],
        )?;
        match self.transact(OP, vec![item]).await {
            Ok(()) => Ok(true),
            Err(TxError::Conditions(_)) => Ok(false),
            Err(TxError::Store(e)) => Err(e),
        }
    }

    async fn drop_counter_if_zero(&self, at: &CounterAt) -> Result<(), StoreError> {
        const OP: &str = "keyed drop counter";
        let item = delete(
            &self.table,
            self.counter_key(at),
            Some(("n = :zero", vec![(":zero", n(0))])),
        )?;
        match self.transact(OP, vec![item]).await {
            Ok(()) | Err(TxError::Conditions(_)) => Ok(()),
            Err(TxError::Store(e)) => Err(e),
        }
    }

    async fn versions(&self, at: &Location) -> Result<Vec<VersionRecord>, StoreError> {
        let p = pk(&at.tenant, &at.home);
        let items = self
            .query_prefix(
                "keyed versions",
                p.clone(),
                format!("{VERSION}{}#", at.id),
                None,
            )
            .await?;
        items
            .iter()
            .map(|i| {
                get_s(i, "doc")
                    .and_then(|d| serde_json::from_str(d).ok())
                    .and_then(|d| VersionRecord::from_json(&d))
                    .ok_or_else(|| corrupt(&p, get_s(i, "sk").unwrap_or("?")))
            })
            .collect()
    }

    async fn eviction_candidate(&self, agent: &Caller) -> Result<Option<Location>, StoreError> {
        const OP: &str = "keyed eviction";
        let (tenant, home) = (&agent.tenant, Home::Agent(agent.agent.clone()));
        let p = pk(tenant, &home);
        // A place whose entry is gone (deleted by the table's TTL before its place) is removed
        // and the next one read, so a stale place never stands in front of a real victim.
        for _ in 0..16 {
            let items = self
                .query_prefix(OP, p.clone(), LRU.to_owned(), Some(1))
                .await?;
            let Some((place, id)) = items
                .first()
                .and_then(|i| Some((get_s(i, "sk")?.to_owned(), get_s(i, "id")?.to_owned())))
            else {
                return Ok(None);
            };
            let at = Location {
                tenant: tenant.clone(),
                home: home.clone(),
                id,
            };
            if self.get(&at).await?.is_some() {
                return Ok(Some(at));
            }
            self.delete_items(OP, &[key(p.clone(), place)]).await?;
        }
        Err(StoreError::Conflict { op: OP })
    }

    async fn count(&self, at: &CounterAt) -> Result<CounterState, StoreError> {
        const OP: &str = "keyed count";
        let k = self.counter_key(at);
        let item = self.data(OP).await?.read(k).await?;
        let number = |name: &str| {
            item.as_ref()
                .and_then(|i| get_n(i, name))
                .map_or(0, |v| u64::try_from(v).unwrap_or(0))
        };
        Ok(CounterState {
            n: number("n"),
            rev: number("rev"),
        })
    }

    async fn index_archive(
        &self,
        archive: &ArchiveKey,
        subjects: &[SubjectKey],
    ) -> Result<(), StoreError> {
        const OP: &str = "keyed archive index";
        let p = pk(&archive.tenant, &Home::Agent(archive.agent.clone()));
        for subject in subjects {
            let mut item = key(
                p.clone(),
                format!("{ARCHIVE_INDEX}{}#{}", archive.task, subject.as_str()),
            );
            item.insert("subjectKey".into(), s(subject_attr(subject)));
            self.data(OP).await?.put(item).await?;
        }
        Ok(())
    }

    async fn unindex_archive(
        &self,
        archive: &ArchiveKey,
        subject: &SubjectKey,
    ) -> Result<(), StoreError> {
        const OP: &str = "keyed archive unindex";
        let p = pk(&archive.tenant, &Home::Agent(archive.agent.clone()));
        let k = key(
            p,
            format!("{ARCHIVE_INDEX}{}#{}", archive.task, subject.as_str()),
        );
        self.delete_items(OP, &[k]).await
    }

    async fn tombstone(&self, at: &Location, until: Timestamp) -> Result<(), StoreError> {
        const OP: &str = "keyed tombstone";
        let mut item = key(pk(&at.tenant, &at.home), format!("{TOMBSTONE}{}", at.id));
        item.insert("ttl".into(), n(until.epoch_seconds_ceil()));
        self.data(OP).await?.put(item).await
    }

    async fn tombstoned(&self, at: &Location) -> Result<bool, StoreError> {
        const OP: &str = "keyed tombstoned";
        let k = key(pk(&at.tenant, &at.home), format!("{TOMBSTONE}{}", at.id));
        Ok(self.data(OP).await?.read(k).await?.is_some())
    }

    async fn subject_hits(&self, subject: &SubjectKey) -> Result<Vec<SubjectHit>, StoreError> {
        const OP: &str = "keyed forget";
        let tenant = subject.tenant();
        let items = self.data(OP).await?.subject_items(subject).await?;
        let mut hits = Vec::new();
        for item in &items {
            let (Some(p), Some(sk)) = (get_s(item, "pk"), get_s(item, "sk")) else {
                continue;
            };
            let Some(home) = home_of(tenant, p) else {
                continue;
            };
            if let Some(id) = sk.strip_prefix(ENTRY) {
                hits.push(SubjectHit::Entry(Location {
                    tenant: tenant.clone(),
                    home,
                    id: id.to_owned(),
                }));
            } else if let Some(rest) = sk.strip_prefix(VERSION) {
                if let Some((id, v)) = rest.rsplit_once('#') {
                    if let Ok(v) = v.parse() {
                        hits.push(SubjectHit::Version(
                            Location {
                                tenant: tenant.clone(),
                                home,
                                id: id.to_owned(),
                            },
                            v,
                        ));
                    }
                }
            } else if let Some(rest) = sk.strip_prefix(ARCHIVE_INDEX) {
                if let (Home::Agent(agent), Some((task, _))) = (home, rest.split_once('#')) {
                    hits.push(SubjectHit::Archive(ArchiveKey {
                        tenant: tenant.clone(),
                        agent,
                        task: task.to_owned(),
                    }));
                }
            }
        }
        hits.sort();
        hits.dedup();
        Ok(hits)
    }

    async fn delete_version(&self, at: &Location, version: u64) -> Result<(), StoreError> {
        self.delete_items(
            "keyed delete version",
            &[key(pk(&at.tenant, &at.home), version_sk(&at.id, version))],
        )
        .await
    }
}

/// API key records (`@apikey#{keyId}`), read by the authorizer and written by the operator
/// command, on the function's own role: no tenant is known before the key is read.
#[derive(Clone, Debug)]
pub struct DynamoKeyRegistry {
    client: Client,
    table: String,
}

impl DynamoKeyRegistry {
    pub fn new(client: Client, table: String) -> Self {
        DynamoKeyRegistry { client, table }
    }

    fn table(&self, op: &'static str) -> Table<'_> {
        Table::new(self.client.clone(), &self.table, op)
    }

    fn key_of(key_id: &str) -> Item {
        key(format!("{KEY_PARTITION}{key_id}"), "K".to_owned())
    }
}

#[async_trait]
impl KeyRegistry for DynamoKeyRegistry {
    async fn get(&self, key_id: &str) -> Result<Option<KeyRecord>, StoreError> {
        const OP: &str = "api key get";
        let table = self.table(OP);
        let item = table.read(Self::key_of(key_id)).await?;
        let Some(item) = item.as_ref() else {
            return Ok(None);
        };
        let bad = || corrupt("@apikey", key_id);
        let agents = match item.get("agents") {
            Some(AttributeValue::L(list)) => {
                list.iter().filter_map(|a| a.as_s().ok().cloned()).collect()
            }
            _ => return Err(bad()),
        };
        Ok(Some(KeyRecord {
            key_id: key_id.to_owned(),
            tenant: get_s(item, "tenantId")
                .and_then(|t| TenantId::parse(t).ok())
                .ok_or_else(bad)?,
            agents,
            secret_digest: get_s(item, "secretDigest").ok_or_else(bad)?.to_owned(),
            created_at: Timestamp::from_millis(get_n(item, "createdMs").ok_or_else(bad)?),
            expires_at: Timestamp::from_millis(get_n(item, "expiresMs").ok_or_else(bad)?),
            revoked_at: get_n(item, "revokedMs").map(Timestamp::from_millis),
        }))
    }

    async fn put(&self, record: &KeyRecord) -> Result<(), StoreError> {
        const OP: &str = "api key put";
        let mut item = Self::key_of(&record.key_id);
        item.insert("tenantId".into(), s(record.tenant.as_str()));
        item.insert(
            "agents".into(),
            AttributeValue::L(record.agents.iter().map(|a| s(a.clone())).collect()),
        );
        item.insert("secretDigest".into(), s(record.secret_digest.clone()));
        item.insert("createdMs".into(), n(record.created_at.as_millis()));
        item.insert("expiresMs".into(), n(record.expires_at.as_millis()));
        // Kept a day past expiry, so a late check still reads "expired", then removed.
        item.insert(
            "ttl".into(),
            n(record
                .expires_at
                .plus_millis(86_400_000)
                .epoch_seconds_ceil()),
        );
        let table = self.table(OP);
        let request = table
            .put_item(item)
            .condition_expression("attribute_not_exists(pk)");
        match table.conditional(&request).await? {
            Some(_) => Ok(()),
            None => Err(StoreError::Conflict { op: OP }),
        }
    }

    async fn revoke(&self, key_id: &str, at: Timestamp) -> Result<bool, StoreError> {
        const OP: &str = "api key revoke";
        let table = self.table(OP);
        let request = table
            .update_item(Self::key_of(key_id))
            .update_expression("SET revokedMs = if_not_exists(revokedMs, :at)")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":at", n(at.as_millis()));
        Ok(table.conditional(&request).await?.is_some())
    }
}
