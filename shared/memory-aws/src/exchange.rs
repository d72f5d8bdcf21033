//! The exchange door's items in the one table (docs/oap.md "Storage"), in one partition per
//! tenant, `{tenant}#@oap` (`@` is outside the agent id alphabet, so no agent's partition can be
//! named that; the tenant leads the key, so IAM's leading-key condition covers this door too):
//!
//! | sort key | item |
//! |---|---|
//! | `X#TIP` | the receipt log's tip: `seq` (the next receipt's number), `hash` |
//! | `X#R#{seq:020}` | one receipt (`doc`, the signed receipt JSON) |
//! | `X#G#{grantId}` | a grant record: scope, grantee, grant hash, expiry, revocation, slice |
//! | `X#S#{bundleId}#{subject}` | a bundle holding a subject (`subjectKey`, so forget's `bySubject` Query finds it) |
//! | `X#N#{noticeId}` | a forget's notice, until its receipt is in the log |
//!
//! The index of grants by expiry day lives outside every tenant, at `pk = @oap-expiry#{day}`
//! (`sk = {expiresMs:015}#{tenant}#{grantId}`), written and read with the function's own role
//! (as the other cross-tenant indexes): what the hourly sweep reads.
//!
//! Every append is one `TransactWriteItems`: the tip moves only from the state the receipt was
//! built on, the receipt item is new, and the grant change (if any) meets its condition. So two
//! appends can never both land on one tip, and no grant changes without its receipt.
//!
//! The signing seed is read once, at start, from Secrets Manager.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
#[cfg(feature = "archive")]
use futures_util::FutureExt as _;
use memory_core::SubjectKey;
use memory_core::{StoreError, TenantId, Timestamp};
use oap_exchange::receipt::Tip;
use oap_exchange::{
    BundleHolding, ExchangeStore, ExpiryEntry, ForgetNotice, GrantChange, GrantRecord, LogAppend,
    ReceiptPage,
};
use serde_json::Value;

use crate::dynamo::{
    build_error, get_n, get_s, n, s, transact_item, transact_with, Item, Table, TxError, Write,
};
#[cfg(any(feature = "archive", feature = "signing-key"))]
use crate::error::backend;
use crate::tenant::{DynamoClients, TenantSessions};

const TIP: &str = "X#TIP";
const RECEIPT: &str = "X#R#";
const GRANT: &str = "X#G#";
const BUNDLE_INDEX: &str = "X#S#";
const NOTICE: &str = "X#N#";
/// A grant record outlives its grant by this long, so an audit can still read what it was.
const RECORD_KEPT_AFTER_EXPIRY_MS: i64 = 90 * 86_400_000;

fn pk(tenant: &TenantId) -> String {
    format!("{}#@oap", tenant.as_str())
}

fn key(tenant: &TenantId, sk: String) -> Item {
    HashMap::from([("pk".to_owned(), s(pk(tenant))), ("sk".to_owned(), s(sk))])
}

fn expiry_pk(day: &str) -> String {
    format!("@oap-expiry#{day}")
}

fn expiry_sk(e: &ExpiryEntry) -> String {
    format!(
        "{:015}#{}#{}",
        e.expires_at.as_millis().max(0),
        e.tenant.as_str(),
        e.grant_id
    )
}

fn receipt_sk(seq: u64) -> String {
    format!("{RECEIPT}{seq:020}")
}

fn boolean(v: bool) -> AttributeValue {
    AttributeValue::Bool(v)
}

#[derive(Clone, Debug)]
pub struct DynamoExchangeStore {
    clients: DynamoClients,
    table: String,
}

impl DynamoExchangeStore {
    pub fn new(client: Client, table: String) -> Self {
        DynamoExchangeStore {
            clients: DynamoClients::new(client, None),
            table,
        }
    }

    pub fn with_tenant_sessions(mut self, tenants: Option<std::sync::Arc<TenantSessions>>) -> Self {
        self.clients = DynamoClients::new(self.clients.fan_out().clone(), tenants);
        self
    }

    async fn data(&self, op: &'static str) -> Result<Table<'_>, StoreError> {
        self.clients.table(&self.table, op).await
    }

    /// The table with the function's own role, for the cross-tenant expiry index.
    fn fan_out(&self, op: &'static str) -> Table<'_> {
        Table::new(self.clients.fan_out().clone(), &self.table, op)
    }

    fn grant_item(&self, r: &GrantRecord) -> Item {
        let mut item = key(&r.tenant, format!("{GRANT}{}", r.grant_id));
        item.insert("scopeId".into(), s(r.scope_id.clone()));
        item.insert("grantee".into(), s(r.grantee.clone()));
        item.insert("grantHash".into(), s(r.grant_hash.clone()));
        item.insert("issuedMs".into(), n(r.issued_at.as_millis()));
        item.insert("expiresMs".into(), n(r.expires_at.as_millis()));
        item.insert("revocable".into(), boolean(r.revocable));
        // Ids are of the id alphabet, so a comma joins them unambiguously; one string keeps a
        // 10,000-item slice well inside an item's 400 KB.
        item.insert("slice".into(), s(r.slice.join(",")));
        let keep_until = r.expires_at.plus_millis(RECORD_KEPT_AFTER_EXPIRY_MS);
        item.insert("ttl".into(), n(keep_until.epoch_seconds_ceil()));
        item
    }

    fn decode_grant(
        tenant: &TenantId,
        grant_id: &str,
        item: &Item,
    ) -> Result<GrantRecord, StoreError> {
        let corrupt = || StoreError::Corrupt {
            key: format!("{}/{GRANT}{grant_id}", pk(tenant)),
        };
        let text = |name: &str| get_s(item, name).map(str::to_owned).ok_or_else(corrupt);
        let slice = text("slice")?;
        Ok(GrantRecord {
            grant_id: grant_id.to_owned(),
            tenant: tenant.clone(),
            scope_id: text("scopeId")?,
            grantee: text("grantee")?,
            grant_hash: text("grantHash")?,
            issued_at: Timestamp::from_millis(get_n(item, "issuedMs").ok_or_else(corrupt)?),
            expires_at: Timestamp::from_millis(get_n(item, "expiresMs").ok_or_else(corrupt)?),
            revocable: matches!(item.get("revocable"), Some(AttributeValue::Bool(true))),
            revoked_at: get_n(item, "revokedMs").map(Timestamp::from_millis),
            slice: if slice.is_empty() {
                Vec::new()
            } else {
                slice.split(',').map(str::to_owned).collect()
            },
        })
    }

    fn change_item(
        &self,
        tenant: &TenantId,
        change: &GrantChange,
    ) -> Result<TransactWriteItem, StoreError> {
        let t = &self.table;
        match change {
            GrantChange::Issue(record) => transact_item(
                "grant put",
                t,
                Write::Put(self.grant_item(record)),
                Some("attribute_not_exists(pk)"),
                Vec::new(),
            ),
            GrantChange::Revoke { grant_id, at } => transact_item(
                "grant revoke",
                t,
                Write::Update(
                    key(tenant, format!("{GRANT}{grant_id}")),
                    "SET revokedMs = :at",
                ),
                Some(
                    "attribute_exists(pk) AND revocable = :yes AND attribute_not_exists(revokedMs)",
                ),
                vec![(":at", n(at.as_millis())), (":yes", boolean(true))],
            ),
            GrantChange::ConsumeNotice { notice_id } => transact_item(
                "notice consume",
                t,
                Write::Delete(key(tenant, format!("{NOTICE}{notice_id}"))),
                Some("attribute_exists(pk)"),
                Vec::new(),
            ),
            GrantChange::AnnounceExpiry { grant_id } => transact_item(
                "grant expiry",
                t,
                Write::Update(
                    key(tenant, format!("{GRANT}{grant_id}")),
                    "SET expiryAnnounced = :yes",
                ),
                Some("attribute_exists(pk) AND attribute_not_exists(expiryAnnounced)"),
                vec![(":yes", boolean(true))],
            ),
        }
    }
}

#[async_trait]
impl ExchangeStore for DynamoExchangeStore {
    async fn tip(&self, tenant: &TenantId) -> Result<Tip, StoreError> {
        let table = self.data("receipt tip").await?;
        let Some(item) = table.read(key(tenant, TIP.to_owned())).await? else {
            return Ok(Tip::genesis());
        };
        let corrupt = || StoreError::Corrupt {
            key: format!("{}/{TIP}", pk(tenant)),
        };
        Ok(Tip {
            seq: get_n(&item, "seq")
                .and_then(|v| u64::try_from(v).ok())
                .ok_or_else(corrupt)?,
            hash: get_s(&item, "hash").ok_or_else(corrupt)?.to_owned(),
        })
    }

    async fn append(&self, tenant: &TenantId, append: LogAppend<'_>) -> Result<(), StoreError> {
        const OP: &str = "receipt append";
        let (at, receipt, change) = (append.at, append.receipt, append.change);
        let next = receipt.next_tip();
        let mut tip = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key(tenant, TIP.to_owned())))
            .update_expression("SET seq = :next, #h = :hash")
            .expression_attribute_names("#h", "hash")
            .expression_attribute_values(":next", n(i64::try_from(next.seq).unwrap_or(i64::MAX)))
            .expression_attribute_values(":hash", s(next.hash.clone()));
        tip = if at.seq == 0 {
            tip.condition_expression("attribute_not_exists(pk)")
        } else {
            tip.condition_expression("seq = :at AND #h = :prev")
                .expression_attribute_values(":at", n(i64::try_from(at.seq).unwrap_or(i64::MAX)))
                .expression_attribute_values(":prev", s(at.hash.clone()))
        };
        let tip = tip.build().map_err(|_| build_error(OP))?;
        let doc = serde_json::to_string(&receipt.body).map_err(|_| build_error(OP))?;
        let mut item = key(tenant, receipt_sk(receipt.seq));
        item.insert("doc".into(), s(doc));
        let mut items = vec![
            TransactWriteItem::builder().update(tip).build(),
            transact_item(
                OP,
                &self.table,
                Write::Put(item),
                Some("attribute_not_exists(pk)"),
                Vec::new(),
            )?,
        ];
        if let Some(change) = change {
            items.push(self.change_item(tenant, change)?);
        }
        let client = self.clients.data(OP).await?;
        transact_with(&client, OP, items)
            .await
            .map_err(|e: TxError| e.into_store(OP))
    }

    async fn grant(
        &self,
        tenant: &TenantId,
        grant_id: &str,
    ) -> Result<Option<GrantRecord>, StoreError> {
        let valid = (1..=64).contains(&grant_id.len())
            && grant_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Ok(None);
        }
        self.data("grant read")
            .await?
            .read(key(tenant, format!("{GRANT}{grant_id}")))
            .await?
            .map(|item| Self::decode_grant(tenant, grant_id, &item))
            .transpose()
    }

    async fn index_expiry(&self, entry: &ExpiryEntry) -> Result<(), StoreError> {
        let item = HashMap::from([
            ("pk".to_owned(), s(expiry_pk(&entry.day()))),
            ("sk".to_owned(), s(expiry_sk(entry))),
            // Gone from the table a month after the day it indexes, swept or not.
            (
                "ttl".to_owned(),
                n(entry
                    .expires_at
                    .plus_millis(30 * 86_400_000)
                    .epoch_seconds_ceil()),
            ),
        ]);
        self.fan_out("expiry index").put(item).await
    }

    async fn due_expiries(
        &self,
        day: &str,
        now: Timestamp,
    ) -> Result<Vec<ExpiryEntry>, StoreError> {
        const OP: &str = "expiry index read";
        let request = self
            .fan_out(OP)
            .partition_query(expiry_pk(day), "sk <= :upto")
            .expression_attribute_values(":upto", s(format!("{:015}#~", now.as_millis().max(0))));
        let (items, _) = crate::dynamo::query_all(request, OP).await?;
        Ok(items
            .iter()
            .filter_map(|i| {
                let mut parts = get_s(i, "sk")?.splitn(3, '#');
                let ms: i64 = parts.next()?.parse().ok()?;
                let tenant = TenantId::parse(parts.next()?).ok()?;
                Some(ExpiryEntry {
                    tenant,
                    grant_id: parts.next()?.to_owned(),
                    expires_at: Timestamp::from_millis(ms),
                })
            })
            .collect())
    }

    async fn drop_expiry(&self, entry: &ExpiryEntry) -> Result<(), StoreError> {
        let k = HashMap::from([
            ("pk".to_owned(), s(expiry_pk(&entry.day()))),
            ("sk".to_owned(), s(expiry_sk(entry))),
        ]);
        self.fan_out("expiry index drop").delete(k).await
    }

    async fn index_bundle(
        &self,
        tenant: &TenantId,
        holding: &BundleHolding,
        subjects: &[SubjectKey],
    ) -> Result<(), StoreError> {
        const OP: &str = "bundle index";
        let client = self.clients.data(OP).await?;
        for chunk in subjects.chunks(memory_core::ports::MAX_ITEMS_PER_TRANSACTION) {
            let mut items = Vec::with_capacity(chunk.len());
            for subject in chunk {
                let mut item = key(
                    tenant,
                    format!("{BUNDLE_INDEX}{}#{}", holding.bundle_id, subject.as_str()),
                );
                item.insert("subjectKey".into(), s(crate::dynamo::subject_attr(subject)));
                items.push(transact_item(
                    OP,
                    &self.table,
                    Write::Put(item),
                    None,
                    Vec::new(),
                )?);
            }
            transact_with(&client, OP, items)
                .await
                .map_err(|e: TxError| e.into_store(OP))?;
        }
        Ok(())
    }

    async fn bundles_holding(
        &self,
        subject: &SubjectKey,
    ) -> Result<Vec<BundleHolding>, StoreError> {
        const OP: &str = "bundles holding";
        let tenant = subject.tenant();
        let items = self.data(OP).await?.subject_items(subject).await?;
        let partition = pk(tenant);
        Ok(items
            .iter()
            .filter(|i| get_s(i, "pk") == Some(partition.as_str()))
            .filter_map(|i| {
                // The index projects keys only: the bundle id is in the sort key, and the object
                // key follows from it.
                let rest = get_s(i, "sk")?.strip_prefix(BUNDLE_INDEX)?;
                let (bundle_id, _) = rest.split_once('#')?;
                let object = oap_exchange::bundle::object_key(tenant, bundle_id)?;
                Some(BundleHolding {
                    bundle_id: bundle_id.to_owned(),
                    object: object.as_str().to_owned(),
                })
            })
            .collect())
    }

    async fn unindex_bundle(
        &self,
        bundle_id: &str,
        subject: &SubjectKey,
    ) -> Result<(), StoreError> {
        const OP: &str = "bundle unindex";
        let k = key(
            subject.tenant(),
            format!("{BUNDLE_INDEX}{bundle_id}#{}", subject.as_str()),
        );
        self.data(OP).await?.delete(k).await
    }

    async fn add_notice(&self, tenant: &TenantId, notice: &ForgetNotice) -> Result<(), StoreError> {
        const OP: &str = "forget notice";
        let mut item = key(tenant, format!("{NOTICE}{}", notice.notice_id));
        item.insert("bundles".into(), s(notice.bundles.join(",")));
        item.insert("atMs".into(), n(notice.at.as_millis()));
        self.data(OP).await?.put(item).await
    }

    async fn notices(&self, tenant: &TenantId) -> Result<Vec<ForgetNotice>, StoreError> {
        let table = self.data("forget notices").await?;
        let items = table.prefix_items(pk(tenant), NOTICE).await?;
        let mut out: Vec<ForgetNotice> = items
            .iter()
            .filter_map(|i| {
                Some(ForgetNotice {
                    notice_id: get_s(i, "sk")?.strip_prefix(NOTICE)?.to_owned(),
                    bundles: get_s(i, "bundles")?
                        .split(',')
                        .filter(|v| !v.is_empty())
                        .map(str::to_owned)
                        .collect(),
                    at: Timestamp::from_millis(get_n(i, "atMs")?),
                })
            })
            .collect();
        out.sort_by_key(|n| n.at);
        Ok(out)
    }

    async fn receipts(
        &self,
        tenant: &TenantId,
        page: ReceiptPage,
    ) -> Result<Vec<Value>, StoreError> {
        const OP: &str = "receipt list";
        let table = self.data(OP).await?;
        let request = table
            .partition_query(pk(tenant), "sk BETWEEN :a AND :b")
            .expression_attribute_values(":a", s(receipt_sk(page.from)))
            .expression_attribute_values(":b", s(receipt_sk(u64::MAX)))
            .limit(i32::try_from(page.limit).unwrap_or(i32::MAX));
        let out = crate::dynamo::call(OP, &request).await?;
        out.items()
            .iter()
            .map(|item| {
                get_s(item, "doc")
                    .and_then(|d| serde_json::from_str(d).ok())
                    .ok_or_else(|| StoreError::Corrupt {
                        key: format!("{}/{}", pk(tenant), get_s(item, "sk").unwrap_or("?")),
                    })
            })
            .collect()
    }
}

#[cfg(feature = "signing-key")]
/// The host's signing seed, read from Secrets Manager (`OAP_SIGNING_SECRET`, a secret name or
/// ARN whose string is 64 hex characters or base64 of 32 bytes).
pub async fn signing_seed(
    client: &aws_sdk_secretsmanager::Client,
    secret_id: &str,
) -> Result<Vec<u8>, StoreError> {
    const OP: &str = "signing key read";
    let out = crate::retry::send(OP, || client.get_secret_value().secret_id(secret_id).send())
        .await
        .map_err(|e| backend(OP, &e))?;
    let text = out.secret_string().ok_or(StoreError::Backend {
        op: OP,
        code: "NoSecretString".into(),
    })?;
    oap_exchange::HostKey::decode_seed(text).map_err(|_| StoreError::Backend {
        op: OP,
        code: "InvalidSigningSeed".into(),
    })
}

/// Bundles in the archive bucket, under `{tenant}/oap/exports/`, written and read with the
/// function's own role: a bundle's signed manifest is the capability to import it into another
/// tenant, which that tenant's own credentials could not read.
#[cfg(feature = "archive")]
#[derive(Clone, Debug)]
pub struct S3BundleStore {
    client: aws_sdk_s3::Client,
    bucket: String,
}

#[cfg(feature = "archive")]
impl S3BundleStore {
    pub fn new(client: aws_sdk_s3::Client, bucket: String) -> Self {
        S3BundleStore { client, bucket }
    }
}

#[cfg(feature = "archive")]
#[async_trait]
impl oap_exchange::BundleStore for S3BundleStore {
    async fn begin(&self, key: &memory_core::ports::ObjectKey) -> Result<String, StoreError> {
        const OP: &str = "bundle begin";
        let request = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key.as_str())
            .content_type("application/x-ndjson");
        let out = crate::retry::counted(OP, &request)
            .await
            .map_err(|e| backend(OP, &e))?;
        out.upload_id()
            .map(str::to_owned)
            .ok_or(StoreError::Backend {
                op: OP,
                code: "NoUploadId".into(),
            })
    }

    async fn part(
        &self,
        key: &memory_core::ports::ObjectKey,
        upload: &str,
        number: i32,
        bytes: Vec<u8>,
    ) -> Result<String, StoreError> {
        const OP: &str = "bundle part";
        let part_bytes = bytes.len() as u64;
        let body = aws_sdk_s3::primitives::ByteStream::from(bytes);
        // One attempt per part body: the stream is consumed by the send, and a failed part
        // fails the export (the upload is then aborted), which the caller may retry whole.
        let out = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(key.as_str())
            .upload_id(upload)
            .part_number(number)
            .body(body)
            .send()
            .inspect(|r| crate::meter::s3_answered(r, part_bytes, |_| 0))
            .await
            .map_err(|e| backend(OP, &e))?;
        out.e_tag().map(str::to_owned).ok_or(StoreError::Backend {
            op: OP,
            code: "NoETag".into(),
        })
    }

    async fn complete(
        &self,
        key: &memory_core::ports::ObjectKey,
        upload: &str,
        parts: &[(i32, String)],
    ) -> Result<(), StoreError> {
        use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
        const OP: &str = "bundle complete";
        let done = CompletedMultipartUpload::builder()
            .set_parts(Some(
                parts
                    .iter()
                    .map(|(n, etag)| CompletedPart::builder().part_number(*n).e_tag(etag).build())
                    .collect(),
            ))
            .build();
        let request = self
            .client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(key.as_str())
            .upload_id(upload)
            .multipart_upload(done);
        crate::retry::counted(OP, &request)
            .await
            .map_err(|e| backend(OP, &e))?;
        Ok(())
    }

    async fn abort(&self, key: &memory_core::ports::ObjectKey, upload: &str) {
        const OP: &str = "bundle abort";
        let request = self
            .client
            .abort_multipart_upload()
            .bucket(&self.bucket)
            .key(key.as_str())
            .upload_id(upload);
        if let Err(e) = crate::retry::counted(OP, &request).await {
            // The bucket's lifecycle rule removes incomplete uploads after a day.
            tracing::warn!(error = %backend(OP, &e), "bundle upload not aborted");
        }
    }

    async fn put(
        &self,
        key: &memory_core::ports::ObjectKey,
        bytes: Vec<u8>,
    ) -> Result<(), StoreError> {
        const OP: &str = "bundle put";
        crate::retry::send(OP, || {
            self.client
                .put_object()
                .bucket(&self.bucket)
                .key(key.as_str())
                .body(aws_sdk_s3::primitives::ByteStream::from(bytes.clone()))
                .send()
                .inspect(|r| crate::meter::s3_answered(r, bytes.len() as u64, |_| 0))
        })
        .await
        .map_err(|e| backend(OP, &e))?;
        Ok(())
    }

    async fn size(&self, key: &memory_core::ports::ObjectKey) -> Result<Option<u64>, StoreError> {
        const OP: &str = "bundle size";
        let request = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key.as_str());
        match crate::retry::counted(OP, &request).await {
            Ok(out) => Ok(out.content_length().and_then(|n| u64::try_from(n).ok())),
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => Ok(None),
            Err(e) => Err(backend(OP, &e)),
        }
    }

    async fn read(
        &self,
        key: &memory_core::ports::ObjectKey,
        start: u64,
        len: u64,
    ) -> Result<Vec<u8>, StoreError> {
        const OP: &str = "bundle read";
        if len == 0 {
            return Ok(Vec::new());
        }
        let range = format!("bytes={start}-{}", start + len - 1);
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .range(range);
        let out = crate::retry::counted(OP, &request)
            .await
            .map_err(|e| backend(OP, &e))?;
        let bytes = out
            .body
            .collect()
            .await
            .map_err(|_| StoreError::Unavailable {
                op: OP,
                code: "BodyRead".into(),
            })?;
        Ok(bytes.into_bytes().to_vec())
    }

    async fn presign(
        &self,
        key: &memory_core::ports::ObjectKey,
        seconds: u64,
    ) -> Result<String, StoreError> {
        const OP: &str = "bundle presign";
        let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(
            std::time::Duration::from_secs(seconds),
        )
        .map_err(|_| build_error(OP))?;
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .presigned(config)
            .await
            .map_err(|e| backend(OP, &e))?;
        Ok(request.uri().to_owned())
    }
}
