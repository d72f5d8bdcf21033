//! `MaxBedrockTokensPerDay` over the in-memory ports (docs/quotas.md "Bedrock tokens"): the
//! writer's embeddings, the embed pass and the abstractive model go through `TokenQuota`, whose
//! admission and charges are the quota store's atomic counters. Exact: with a limit of 10 and 4
//! tokens a call, three calls are admitted (the third crosses the limit and completes), the
//! fourth is refused; the refused entry is stored without a vector and the embed pass gives it
//! one the next UTC day; another tenant is never refused.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use common::{request, NOW};
use memory_core::acting_tenant::acting_for;
use memory_core::embed_pass::EmbedPass;
use memory_core::model::Embedding;
use memory_core::ports::{
    AbstractiveModel, AbstractiveRequest, Clock, Embedder, EntryStore, PassKind, QuotaStore,
};
use memory_core::quota::{utc_day, Counter, Quota};
use memory_core::token_quota::TokenQuota;
use memory_core::writer::MemoryWriter;
use memory_core::{StoreError, TenantId, Timestamp};
use memory_testkit::in_memory::{
    AbstractiveScript, ScriptedAbstractiveModel, SequentialIds, TestPorts, WordHashEmbedder,
};
use serde_json::json;

const TOKENS_PER_CALL: u64 = 4;
const LIMIT: u64 = 10;

/// A model that reports [`TOKENS_PER_CALL`] tokens for every call, as the Bedrock adapter
/// reports what the model counted, and counts its calls.
#[derive(Default)]
struct Reporting {
    inner: WordHashEmbedder,
    calls: AtomicU64,
}

#[async_trait]
impl Embedder for Reporting {
    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn embed(&self, text: &str) -> Result<Embedding, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        memory_core::metering::bedrock_tokens(TOKENS_PER_CALL);
        self.inner.embed(text).await
    }
}

struct Setup {
    ports: TestPorts,
    model: Arc<Reporting>,
    embedder: Arc<dyn Embedder>,
    writer: MemoryWriter,
}

async fn setup() -> Setup {
    let ports = TestPorts::at(NOW);
    let model = Arc::new(Reporting::default());
    let embedder: Arc<dyn Embedder> = Arc::new(TokenQuota::new(
        model.clone(),
        ports.store.clone() as Arc<dyn QuotaStore>,
        ports.clock.clone() as Arc<dyn Clock>,
    ));
    for t in ["tenant-a", "tenant-b"] {
        ports
            .store
            .set_overrides(&tenant(t), &[(Quota::BedrockTokensPerDay, LIMIT)])
            .await
            .expect("limits");
    }
    let writer = MemoryWriter::new(ports.core(), Arc::new(SequentialIds::default()))
        .with_embedder(Some(embedder.clone()))
        .with_quotas(Some(ports.store.clone() as Arc<dyn QuotaStore>));
    Setup {
        ports,
        model,
        embedder,
        writer,
    }
}

fn tenant(t: &str) -> TenantId {
    TenantId::parse(t).expect("tenant")
}

fn memory_ref(t: &str) -> String {
    format!("workspaces/{t}/agents/agent-1/memories")
}

async fn put_one(s: &Setup, t: &str, n: usize) -> memory_core::writer::PutOutput {
    let body = json!({"tenantId": t, "memoryRef": memory_ref(t),
        "entries": [{"content": format!("note {n} about invoices")}]});
    acting_for(Some(t), s.writer.put(&request(body)))
        .await
        .expect("the put is stored whatever the token quota says")
}

fn tokens_today(s: &Setup, t: &str) -> i64 {
    s.ports
        .store
        .counter(&Counter::Tokens(tenant(t), utc_day(s.ports.clock.now())))
}

fn with_vector(s: &Setup, t: &str) -> (usize, usize) {
    let all: Vec<_> = s
        .ports
        .store
        .dump()
        .into_iter()
        .filter(|e| e.memory_ref.tenant().as_str() == t)
        .collect();
    let embedded = all.iter().filter(|e| e.embedding.is_some()).count();
    (embedded, all.len())
}

#[tokio::test]
async fn the_call_that_crosses_the_limit_completes_and_the_next_is_refused() {
    let s = setup().await;
    for n in 0..3 {
        let out = put_one(&s, "tenant-a", n).await;
        assert_eq!(out.embedding_refused, None, "call {n} admitted");
    }
    assert_eq!(
        tokens_today(&s, "tenant-a"),
        12,
        "4 + 4 + 4: the third crossed 10"
    );
    let refused = put_one(&s, "tenant-a", 3).await;
    let refusal = refused.embedding_refused.expect("refused");
    assert_eq!(
        (refusal.quota, refusal.current, refusal.max),
        (Quota::BedrockTokensPerDay, 12, LIMIT)
    );
    assert_eq!(
        refusal.to_string(),
        "quota MaxBedrockTokensPerDay reached: 12 of at most 10 Bedrock tokens today (UTC)"
    );
    assert_eq!(refused.written.len(), 1, "the entry is stored");
    assert_eq!(
        s.model.calls.load(Ordering::SeqCst),
        3,
        "no fourth model call"
    );
    assert_eq!(with_vector(&s, "tenant-a"), (3, 4));
    assert_eq!(tokens_today(&s, "tenant-a"), 12, "a refusal spends nothing");
    let r = memory_core::MemoryRef::parse(&memory_ref("tenant-a")).expect("ref");
    assert!(
        s.ports
            .store
            .marker_state(&r, PassKind::Embed)
            .await
            .expect("marker")
            .pending,
        "left to the embed pass"
    );

    // Another tenant is admitted all along.
    let other = put_one(&s, "tenant-b", 0).await;
    assert_eq!(other.embedding_refused, None);
    assert_eq!(with_vector(&s, "tenant-b"), (1, 1));
    assert_eq!(tokens_today(&s, "tenant-b"), 4);
}

#[tokio::test]
async fn a_put_of_many_entries_stops_calling_once_refused() {
    let s = setup().await;
    let body = json!({"tenantId": "tenant-a", "memoryRef": memory_ref("tenant-a"),
        "entries": (0..20).map(|n| json!({"content": format!("entry {n}")})).collect::<Vec<_>>()});
    let out = acting_for(Some("tenant-a"), s.writer.put(&request(body)))
        .await
        .expect("stored");
    assert_eq!(out.written.len(), 20);
    assert!(out.embedding_refused.is_some());
    let calls = s.model.calls.load(Ordering::SeqCst);
    // The first batch of eight calls runs side by side: each is admitted while the counter is
    // below the limit, so up to all eight complete; no later batch starts.
    assert!(
        (3..=8).contains(&calls),
        "{calls} calls: at least the three the limit admits, at most one batch"
    );
    assert_eq!(with_vector(&s, "tenant-a").0 as u64, calls);
    assert_eq!(tokens_today(&s, "tenant-a") as u64, calls * TOKENS_PER_CALL);
}

#[tokio::test]
async fn the_embed_pass_defers_a_refused_tenant_until_the_day_turns() {
    let s = setup().await;
    for n in 0..4 {
        put_one(&s, "tenant-a", n).await;
    }
    let pass = EmbedPass::new(s.ports.core(), s.embedder.clone());
    let report = acting_for(
        Some("tenant-a"),
        pass.run("tenant-a", &memory_ref("tenant-a")),
    )
    .await
    .expect("pass");
    assert!(report.refused.is_some(), "{report:?}");
    assert_eq!((report.embedded, report.deferred), (0, 1));
    assert!(report.pending, "stays pending");
    assert_eq!(
        s.model.calls.load(Ordering::SeqCst),
        3,
        "refused at admission"
    );

    s.ports
        .clock
        .set(Timestamp::from_millis(NOW + 24 * 60 * 60 * 1000));
    let report = acting_for(
        Some("tenant-a"),
        pass.run("tenant-a", &memory_ref("tenant-a")),
    )
    .await
    .expect("pass");
    assert_eq!((report.embedded, report.refused), (1, None));
    assert_eq!(with_vector(&s, "tenant-a"), (4, 4));
    assert_eq!(tokens_today(&s, "tenant-a"), 4, "the new day's counter");
}

#[tokio::test]
async fn work_no_tenant_asked_for_is_neither_admitted_nor_charged() {
    let s = setup().await;
    for _ in 0..5 {
        s.embedder.embed("shared work").await.expect("embedded");
    }
    assert_eq!(s.model.calls.load(Ordering::SeqCst), 5);
    assert_eq!(tokens_today(&s, "tenant-a"), 0);
}

/// A model that answers and reports 600 tokens a call.
struct Summariser(ScriptedAbstractiveModel);

#[async_trait]
impl AbstractiveModel for Summariser {
    fn model(&self) -> &str {
        self.0.model()
    }

    async fn rewrite(&self, request: &AbstractiveRequest) -> Result<String, StoreError> {
        memory_core::metering::bedrock_tokens(600);
        self.0.rewrite(request).await
    }
}

#[tokio::test]
async fn the_abstractive_model_is_refused_once_the_day_is_spent() {
    let ports = TestPorts::at(NOW);
    let t = tenant("tenant-a");
    ports
        .store
        .set_overrides(&t, &[(Quota::BedrockTokensPerDay, 1000)])
        .await
        .expect("limits");
    let inner = Arc::new(Summariser(ScriptedAbstractiveModel::new(
        AbstractiveScript::Reply("a summary".into()),
    )));
    let model = TokenQuota::new(
        inner.clone(),
        ports.store.clone() as Arc<dyn QuotaStore>,
        ports.clock.clone() as Arc<dyn Clock>,
    );
    let request = AbstractiveRequest {
        facts: vec![],
        max_output_tokens: 100,
    };
    for _ in 0..2 {
        acting_for(Some("tenant-a"), model.rewrite(&request))
            .await
            .expect("admitted: 0, then 600 of 1000");
    }
    match acting_for(Some("tenant-a"), model.rewrite(&request)).await {
        Err(StoreError::QuotaExceeded(r)) => {
            assert_eq!(
                (r.quota, r.current, r.max),
                (Quota::BedrockTokensPerDay, 1200, 1000)
            )
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        inner.0.requests().len(),
        2,
        "the refused call never reached the model"
    );
}
