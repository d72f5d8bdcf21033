//! The SR-1 chokepoint and forget over the in-memory ports: exact, clock-driven, fast.

mod common;

use memory_core::events::EventType;
use memory_core::listing::ListOptions;
use memory_core::{CoreError, TenantId, TenantScope, Timestamp};
use serde_json::json;

use common::{request, world, NOW};

const REF_A: &str = "workspaces/tenant-a/agents/agent-1/memories";

#[tokio::test]
async fn put_redacts_content_and_tags_and_announces_without_content() {
    let w = world();
    let out = w.put(json!({
            "tenantId": "tenant-a", "runId": "run-1", "memoryRef": REF_A,
            "entries": [{"content": "token ghp_0123456789abcdef and short 1234567", "tags": ["t:ghp_0123456789abcdef"]}],
            "secrets": [{"secretId": "gh", "value": "ghp_0123456789abcdef"}, {"secretId": "pin", "value": "1234567"}],
            "attribution": {"nodeId": "n1"}
        }))
        .await
        .expect("put");
    assert_eq!(out.redactions, 2);
    let stored = w.ports.store.dump();
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].entry.content, "token [REDACTED:gh] and short 1234567",
        "7-char secret below the floor stays"
    );
    assert_eq!(stored[0].entry.tags, vec!["t:[REDACTED:gh]"]);
    assert_eq!(stored[0].entry.created_at, Timestamp::from_millis(NOW));
    let events = w.ports.events.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].event_type, EventType::MemoryWritten);
    let detail = events[0].detail_json().to_string();
    assert!(detail.contains(&out.written[0].id) && detail.contains("\"nodeId\":\"n1\""));
    assert!(
        !detail.contains("token") && !detail.contains("ghp_"),
        "content-free: {detail}"
    );
}

#[tokio::test]
async fn rejected_requests_store_nothing() {
    let w = world();
    let past = "2020-01-01T00:00:00.000Z";
    let cases = [
        json!({"tenantId": "tenant-a", "memoryRef": REF_A, "entries": []}),
        json!({"tenantId": "tenant-a", "memoryRef": REF_A, "entries": [{"content": "ok"}, {"content": "x", "expiresAt": past}]}),
        json!({"tenantId": "tenant-a", "memoryRef": REF_A, "entries": [{"content": "ok"}, {"content": "x".repeat(65_537)}]}),
        json!({"tenantId": "tenant-a", "memoryRef": REF_A, "entries": [{"content": "ok", "tier": "forever"}]}),
        json!({"tenantId": "tenant-a", "memoryRef": REF_A, "entries": [{"content": "ok", "subject": ""}]}),
        json!({"tenantId": "tenant-a", "runId": "bad/run", "memoryRef": REF_A, "entries": [{"content": "ok"}]}),
        json!({"tenantId": "bad tenant", "memoryRef": REF_A, "entries": [{"content": "ok"}]}),
    ];
    for case in cases {
        let err = w.put(case.clone()).await.expect_err("must be rejected");
        assert!(
            matches!(err, CoreError::Invalid { .. } | CoreError::RefNotAdmitted),
            "{case}: {err:?}"
        );
    }
    let foreign = w
        .put(json!({"tenantId": "tenant-b", "memoryRef": REF_A, "entries": [{"content": "ok"}]}))
        .await;
    assert_eq!(foreign, Err(CoreError::RefNotAdmitted));
    assert!(w.ports.store.dump().is_empty());
    assert_eq!(
        w.ports.store.calls.get("put_entries"),
        0,
        "validation happens before any store call"
    );
    assert!(w.ports.events.events().is_empty());
}

#[tokio::test]
async fn an_attribution_id_holding_a_secret_is_refused_and_nothing_is_stored() {
    let w = world();
    let secret = "sk_live_0123456789";
    for (field, request) in [
        ("runId", json!({"runId": secret})),
        ("runId", json!({"runId": format!("run-{secret}-1")})),
        (
            "attribution.nodeId",
            json!({"attribution": {"nodeId": secret}}),
        ),
        (
            "attribution.agentId",
            json!({"attribution": {"agentId": secret}}),
        ),
    ] {
        let mut body = json!({
            "tenantId": "tenant-a", "memoryRef": REF_A,
            "entries": [{"content": "ok"}],
            "secrets": [{"secretId": "stripe", "value": secret}]
        });
        for (k, v) in request.as_object().unwrap() {
            body[k] = v.clone();
        }
        let err = w.put(body).await.expect_err("refused");
        assert!(
            matches!(&err, CoreError::Invalid { field: f, .. } if f == field),
            "{field}: {err:?}"
        );
        assert!(!err.to_string().contains(secret));
    }
    assert!(w.ports.store.dump().is_empty());
    assert!(w.ports.events.events().is_empty());
    // An id that only resembles a secret below the length floor is kept as it is.
    w.put(json!({
        "tenantId": "tenant-a", "runId": "run-1234567", "memoryRef": REF_A,
        "entries": [{"content": "ok"}],
        "secrets": [{"secretId": "pin", "value": "1234567"}]
    }))
    .await
    .expect("an id is refused only for a value that would be redacted");
}

#[tokio::test]
async fn a_secret_marker_that_grows_past_the_bound_is_rejected() {
    let w = world();
    let secret = "s3cr3t-value";
    let long_id = "x".repeat(120);
    // Separated occurrences: adjacent ones merge into a single marker (SR-1 spans).
    let content = format!("{secret} ").repeat(65_536 / (secret.len() + 1));
    let err = w
        .put(json!({
            "tenantId": "tenant-a", "memoryRef": REF_A,
            "entries": [{"content": content}],
            "secrets": [{"secretId": long_id, "value": secret}]
        }))
        .await
        .expect_err("redaction makes it oversize");
    assert!(err.to_string().contains("after redaction"));
    assert!(!err.to_string().contains(secret));
    assert!(w.ports.store.dump().is_empty());
}

#[tokio::test]
async fn expiry_through_the_writer_and_reader() {
    let w = world();
    let exp = Timestamp::from_millis(NOW + 10_000);
    let out = w
        .put(json!({"tenantId": "tenant-a", "memoryRef": REF_A,
            "entries": [{"content": "soon gone", "expiresAt": exp.to_rfc3339()}]}))
        .await
        .expect("put");
    let scope = TenantScope::new(TenantId::parse("tenant-a").expect("tenant"));
    let id = &out.written[0].id;
    // (ms after NOW, visible): a millisecond before expiry, and one after.
    for (at, visible) in [(9_999, true), (10_001, false)] {
        w.ports.clock.set(Timestamp::from_millis(NOW + at));
        let got = w.reader.get(&scope, REF_A, id).await.expect("get");
        assert_eq!(got.is_some(), visible, "at +{at} ms");
    }
    assert!(w
        .reader
        .list(&scope, REF_A, &ListOptions::default())
        .await
        .expect("list")
        .entries
        .is_empty());
}

#[tokio::test]
async fn forget_is_tenant_scoped_and_content_free() {
    let w = world();
    let ref_a2 = "workspaces/tenant-a/agents/agent-2/memories";
    let ref_b = "workspaces/tenant-b/agents/agent-1/memories";
    for (tenant, r, content) in [
        ("tenant-a", REF_A, "bob likes jazz"),
        ("tenant-a", ref_a2, "bob moved to Oslo"),
        ("tenant-b", ref_b, "bob in tenant b"),
    ] {
        w.put(json!({"tenantId": tenant, "memoryRef": r,
                "entries": [{"content": content, "subject": "bob"}, {"content": "unrelated"}]}))
            .await
            .expect("put");
    }
    assert_eq!(w.ports.store.dump().len(), 6);
    let counts = w.forgetter.forget("tenant-a", "bob").await.expect("forget");
    assert_eq!(counts.deleted_entries, 2);
    let left: Vec<String> = w
        .ports
        .store
        .dump()
        .into_iter()
        .map(|e| e.entry.content)
        .collect();
    assert_eq!(left.len(), 4);
    assert!(left.contains(&"bob in tenant b".to_owned()));
    assert!(!left
        .iter()
        .any(|c| c.contains("jazz") || c.contains("Oslo")));
    let forgotten = w
        .ports
        .events
        .of_type(EventType::MemoryForgotten)
        .into_iter()
        .next()
        .expect("event");
    let text = forgotten.detail_json().to_string();
    assert!(
        !text.contains("bob") && text.contains("\"deletedEntries\":2"),
        "{text}"
    );
    assert_eq!(
        w.forgetter
            .forget("tenant-a", "bob")
            .await
            .expect("again")
            .deleted_entries,
        0
    );
    assert!(w.forgetter.forget("tenant-a", "").await.is_err());
}

/// Records what it was asked to embed, so a test can prove no secret left for the model.
struct Recording {
    inner: memory_testkit::in_memory::WordHashEmbedder,
    seen: std::sync::Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl memory_core::ports::Embedder for Recording {
    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn embed(
        &self,
        text: &str,
    ) -> Result<memory_core::model::Embedding, memory_core::StoreError> {
        self.seen.lock().expect("lock").push(text.to_owned());
        self.inner.embed(text).await
    }
}

#[tokio::test]
async fn writes_embed_redacted_content_and_survive_a_failed_embedding() {
    use memory_core::ports::Embedder;
    let w = world();
    let embedder = std::sync::Arc::new(Recording {
        inner: Default::default(),
        seen: Default::default(),
    });
    let writer = w.ports.writer().with_embedder(Some(embedder.clone()));
    let secret = "sk_live_0123456789abcdef";
    // The second of three embeddings fails: that entry is stored without a vector.
    embedder.inner.calls.fail_on("embed", 2);
    let out = writer
        .put(&request(json!({
            "tenantId": "tenant-a", "memoryRef": REF_A,
            "entries": [{"content": format!("stripe key {secret} rotated")},
                        {"content": "second entry"}, {"content": "third entry"}],
            "secrets": [{"secretId": "stripe", "value": secret}]
        })))
        .await
        .expect("the write does not fail with the embedding");
    assert_eq!(out.written.len(), 3);
    let seen = embedder.seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|t| !t.contains(secret)), "{seen:?}");
    assert!(seen.iter().any(|t| t.contains("[REDACTED:stripe]")));
    let stored = w.ports.store.dump();
    let with_vector = stored.iter().filter(|e| e.embedding.is_some()).count();
    assert_eq!(with_vector, 2, "one embedding failed, two stored");
    for e in stored.iter().filter(|e| e.embedding.is_some()) {
        let v = e.embedding.as_ref().expect("vector");
        assert_eq!(v.model, embedder.model());
        assert_eq!(
            v,
            &embedder.inner.embed(&e.entry.content).await.expect("embed"),
            "the vector of the stored (redacted) content"
        );
    }
    // Without an embedder nothing is embedded.
    writer
        .clone()
        .with_embedder(None)
        .put(&request(json!({"tenantId": "tenant-a", "memoryRef": REF_A,
            "entries": [{"content": "plain"}]})))
        .await
        .expect("put");
    let plain = w.ports.store.dump();
    let plain = plain.iter().find(|e| e.entry.content == "plain");
    assert!(plain.expect("stored").embedding.is_none());
}

/// A model that never answers in time.
struct Stalled;

#[async_trait::async_trait]
impl memory_core::ports::Embedder for Stalled {
    fn model(&self) -> &str {
        "stalled"
    }

    async fn embed(
        &self,
        _text: &str,
    ) -> Result<memory_core::model::Embedding, memory_core::StoreError> {
        tokio::time::sleep(std::time::Duration::from_secs(600)).await;
        Err(memory_core::StoreError::Unavailable {
            op: "embed",
            code: "Timeout".into(),
        })
    }
}

#[tokio::test]
async fn a_stalled_model_costs_a_write_its_embedding_budget_not_the_write() {
    let w = world();
    let writer = w
        .ports
        .writer()
        .with_embedder(Some(std::sync::Arc::new(Stalled)));
    let started = std::time::Instant::now();
    let out = writer
        .put(&request(json!({"tenantId": "tenant-a", "memoryRef": REF_A,
            "entries": [{"content": "one"}, {"content": "two"}]})))
        .await
        .expect("stored without vectors");
    let took = started.elapsed();
    assert_eq!(out.written.len(), 2);
    assert!(w.ports.store.dump().iter().all(|e| e.embedding.is_none()));
    // Bounded by the budget, not by the model: a correctness bound with wide slack, not a
    // performance target.
    assert!(
        took >= memory_core::writer::EMBED_BUDGET && took < std::time::Duration::from_secs(60),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_conditional_rewrite_is_redacted_keeps_the_subject_and_loses_a_race_whole() {
    let w = world();
    let first = w
        .put(json!({
            "tenantId": "tenant-a", "memoryRef": REF_A,
            "entries": [{"content": "v1", "tags": ["file"], "subject": "customer-9"}]
        }))
        .await
        .expect("put");
    let old = w.ports.store.dump();
    let edit = |content: &str| {
        request(json!({
            "tenantId": "tenant-a", "memoryRef": REF_A,
            "entries": [{"content": content, "tags": ["file"]}],
            "secrets": [{"secretId": "k", "value": "sk-live-abcdef0123"}]
        }))
    };
    let out = w
        .writer
        .put_replacing(&edit("v2 sk-live-abcdef0123"), &old)
        .await
        .expect("first edit lands");
    assert_eq!(out.redactions, 1);
    // The second edit read the same revision: it must not land, and nothing changes.
    let lost = w.writer.put_replacing(&edit("v3"), &old).await;
    assert!(matches!(lost, Err(CoreError::Store(_))), "{lost:?}");
    let stored = w.ports.store.dump();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].entry.id, out.written[0].id);
    assert_ne!(stored[0].entry.id, first.written[0].id);
    assert_eq!(stored[0].entry.content, "v2 [REDACTED:k]");
    assert_eq!(
        stored[0].subject, old[0].subject,
        "forget reaches the new version"
    );
    // Forget of the subject removes the rewritten entry.
    let scope = TenantScope::new(TenantId::parse("tenant-a").expect("tenant"));
    w.forgetter
        .forget("tenant-a", "customer-9")
        .await
        .expect("forget");
    let page = w
        .reader
        .list(&scope, REF_A, &ListOptions::default())
        .await
        .expect("list");
    assert!(page.entries.is_empty());
    // Another tenant's entries cannot be named as the replaced ones.
    let foreign = w
        .writer
        .put_replacing(
            &request(
                json!({"tenantId": "tenant-b", "memoryRef": "workspaces/tenant-b/agents/x/memories",
                            "entries": [{"content": "x"}]}),
            ),
            &old,
        )
        .await;
    assert_eq!(foreign.err(), Some(CoreError::RefNotAdmitted));
}
