//! In-process cost of the read handler for a page of 100 entries, excluding the store: API
//! Gateway event decode -> routing, CTI-1 gate, cursor, TTL/tag re-checks -> response encode.
//! The store is a stub that hands back a prebuilt page, so only our code is measured.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memory_api::read_api::ReadApi;
use memory_core::capabilities::HOST_MODEL;
use memory_core::idempotency::{Claim, Completion, IdempotencyKey, KeyClaim};
use memory_core::model::{Attribution, EntryKey, MemoryEntry, StoredEntry, SubjectKey, Tier};
use memory_core::ports::{
    EntryStore, IdBound, MarkerState, Page, PageQuery, PassKind, SystemClock,
};
use memory_core::quota::QuotaCheck;
use memory_core::reader::MemoryReader;
use memory_core::{StoreError, Timestamp};
use memory_guard::MemoryRef;

struct PrebuiltPage(Page);

#[async_trait]
impl EntryStore for PrebuiltPage {
    async fn put_entries_checked(
        &self,
        _: &[StoredEntry],
        _: Option<&Completion>,
        _: &QuotaCheck,
    ) -> Result<(), StoreError> {
        Ok(())
    }
    async fn mark_pending(&self, _: &MemoryRef, _: PassKind, _: Timestamp) {}
    async fn claim_key(&self, _: &KeyClaim) -> Result<Claim, StoreError> {
        Err(StoreError::Conflict { op: "claim_key" })
    }
    async fn release_key(&self, _: &IdempotencyKey, _: &str) -> Result<(), StoreError> {
        Ok(())
    }
    async fn complete_key(&self, _: &Completion) -> Result<(), StoreError> {
        Ok(())
    }
    async fn delete_completing(&self, _: &EntryKey, _: &Completion) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn tombstone(&self, _: &[EntryKey], _: Timestamp) -> Result<(), StoreError> {
        Ok(())
    }
    async fn tombstones(&self, _: &MemoryRef) -> Result<BTreeSet<String>, StoreError> {
        Ok(BTreeSet::new())
    }
    async fn begin_pass(&self, _: &MemoryRef, _: PassKind) -> Result<MarkerState, StoreError> {
        Ok(MarkerState::default())
    }
    async fn list_page(&self, _: &MemoryRef, _: &PageQuery) -> Result<Page, StoreError> {
        Ok(self.0.clone())
    }
    async fn get(&self, _: &EntryKey) -> Result<Option<StoredEntry>, StoreError> {
        Ok(None)
    }
    async fn delete(&self, _: &EntryKey) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn set_embedding(
        &self,
        _: &StoredEntry,
        _: &memory_core::model::Embedding,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn find_by_subject(&self, _: &SubjectKey) -> Result<Vec<EntryKey>, StoreError> {
        Ok(Vec::new())
    }
    async fn delete_many(&self, _: &[EntryKey]) -> Result<usize, StoreError> {
        Ok(0)
    }
    async fn tag_postings(
        &self,
        _: &MemoryRef,
        _: &str,
        _: Option<&IdBound>,
        _: u32,
    ) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }
    async fn get_many(&self, _: &[EntryKey]) -> Result<Vec<StoredEntry>, StoreError> {
        Ok(Vec::new())
    }
    async fn replace(&self, _: &[StoredEntry], _: &[StoredEntry]) -> Result<(), StoreError> {
        Ok(())
    }
    async fn marker_state(&self, _: &MemoryRef, _: PassKind) -> Result<MarkerState, StoreError> {
        Ok(MarkerState::default())
    }
    async fn finish_pass(
        &self,
        _: &MemoryRef,
        _: PassKind,
        _: Option<u64>,
        _: Option<Timestamp>,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }
    async fn pending_refs(&self, _: PassKind, _: u8) -> Result<Vec<MemoryRef>, StoreError> {
        Ok(Vec::new())
    }
}

const REF: &str = "workspaces/tenant-bench/agents/agent-1/memories";

fn page() -> Page {
    let memory_ref = MemoryRef::parse(REF).unwrap_or_else(|_| panic!("ref"));
    let entries = (0..100u64)
        .map(|n| StoredEntry {
            memory_ref: memory_ref.clone(),
            entry: MemoryEntry {
                id: ulid::Ulid::from_parts(1_800_000_000_000 + n, u128::from(n)).to_string(),
                content: format!(
                    "Customer {n} prefers e-mail follow-up after a refund; order {n} shipped. "
                )
                .repeat(4),
                tags: vec!["preference".into(), format!("customer:{n}")],
                created_at: Timestamp::from_millis(1_800_000_000_000 + n as i64),
                expires_at: None,
            },
            tier: Tier::Transactional,
            subject: None,
            attribution: Attribution::default(),
            provenance: Vec::new(),
            embedding: None,
        })
        .rev()
        .collect();
    Page {
        entries,
        next_after: Some("01JZZZZZZZZZZZZZZZZZZZZZZZ".into()),
    }
}

fn event() -> serde_json::Value {
    let raw = serde_json::json!({
        "version": "2.0",
        "routeKey": "GET /v1/host/wop-memory/entries",
        "rawPath": "/v1/host/wop-memory/entries",
        "rawQueryString": "memoryRef=x&limit=100",
        "headers": {"accept": "application/json"},
        "queryStringParameters": {"memoryRef": REF, "limit": "100"},
        "requestContext": {
            "accountId": "123456789012", "apiId": "api", "domainName": "d", "domainPrefix": "d",
            "http": {"method": "GET", "path": "/v1/host/wop-memory/entries", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1", "userAgent": "bench"},
            "requestId": "r", "routeKey": "GET /v1/host/wop-memory/entries", "stage": "$default",
            "time": "22/Nov/2026:10:00:00 +0000", "timeEpoch": 0,
            "authorizer": {"jwt": {"claims": {"tenant_id": "tenant-bench"}, "scopes": null}}
        },
        "isBase64Encoded": false
    });
    raw
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let api = ReadApi::new(
        MemoryReader::new(Arc::new(PrebuiltPage(page())), Arc::new(SystemClock)),
        HOST_MODEL,
    );
    let raw_event = serde_json::to_vec(&event()).unwrap_or_default();
    let api = &api;
    let mut group = c.benchmark_group("read_handler");
    group.throughput(Throughput::Elements(100));
    group.bench_function("list_100_entries", |b| {
        b.to_async(&runtime).iter(|| async {
            let text = std::str::from_utf8(&raw_event).unwrap_or_default();
            let event = memory_api::decode::json(text).unwrap_or_else(|e| panic!("decode: {e:?}"));
            let request = lambda_adapter::http_request(event, "tenant_id");
            let response = lambda_adapter::serve_http(request, |request| async move {
                api.handle(&request.head).await
            })
            .await;
            let bytes = serde_json::to_vec(&response).unwrap_or_default();
            assert!(bytes.len() > 30_000);
            bytes
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
