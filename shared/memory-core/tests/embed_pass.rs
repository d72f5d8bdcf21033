//! The embed pass (docs/search.md "Semantic search") over the in-memory ports: a write that
//! leaves entries without a vector marks and queues the ref, and the pass fills them in,
//! idempotent under duplicate delivery, never undoing a concurrent delete, forget or rewrite,
//! fenced against forget, bounded per run, and leaving the ref pending while anything is missing.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::{request, world, World};
use memory_core::embed_pass::{lacks_vector, EmbedPass, EmbedReport};
use memory_core::forget::Forgetter;
use memory_core::model::{Embedding, StoredEntry};
use memory_core::ports::{Embedder, EntryStore, PassKind};
use memory_core::reader::MemoryReader;
use memory_core::search::{SearchMode, SearchOptions};
use memory_core::tag_filter::TagFilter;
use memory_core::{MemoryRef, StoreError, TenantScope};
use memory_testkit::in_memory::{InMemoryEntryStore, RecordingQueue, WordHashEmbedder};
use serde_json::json;

const TENANT: &str = "tenant-e";
const REF: &str = "workspaces/tenant-e/agents/agent-1/memories";

/// What the model does when asked to embed a given text: act on the store first, as a
/// concurrent writer or forget would between the pass's read and its write.
enum Meanwhile {
    Delete,
    /// The entry is replaced by one of the same id and other content (a change of revision).
    Change,
    Forget(&'static str),
}

/// A model that answers as `WordHashEmbedder` under a chosen model id, throttles a share of
/// calls (a fixed pattern, so runs repeat), and can play a concurrent change.
struct TestModel {
    inner: WordHashEmbedder,
    model: String,
    /// Calls whose number modulo 10 is below this are throttled (3: 30%).
    throttle_tenths: u64,
    calls: AtomicU64,
    throttled: AtomicU64,
    store: Arc<InMemoryEntryStore>,
    forgetter: Option<Forgetter>,
    meanwhile: Mutex<BTreeMap<String, Meanwhile>>,
    seen: Mutex<Vec<String>>,
}

impl TestModel {
    fn new(w: &World, model: &str, throttle_tenths: u64) -> Arc<Self> {
        Arc::new(TestModel {
            inner: WordHashEmbedder::default(),
            model: model.to_owned(),
            throttle_tenths,
            calls: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            store: w.ports.store.clone(),
            forgetter: Some(Forgetter::new(w.ports.core())),
            meanwhile: Mutex::default(),
            seen: Mutex::default(),
        })
    }

    fn on(&self, text: &str, what: Meanwhile) {
        self.meanwhile
            .lock()
            .expect("lock")
            .insert(text.to_owned(), what);
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Embedder for TestModel {
    fn model(&self) -> &str {
        &self.model
    }

    async fn embed(&self, text: &str) -> Result<Embedding, StoreError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().expect("lock").push(text.to_owned());
        // A scrambled call number, so throttling is not tied to an entry's position.
        if (n.wrapping_mul(7) + 3) % 10 < self.throttle_tenths {
            self.throttled.fetch_add(1, Ordering::SeqCst);
            return Err(StoreError::Unavailable {
                op: "invoke_model",
                code: "ThrottlingException".into(),
            });
        }
        let what = self.meanwhile.lock().expect("lock").remove(text);
        if let Some(what) = what {
            let entry = self
                .store
                .dump()
                .into_iter()
                .find(|e| e.entry.content == text)
                .expect("the scripted entry exists");
            match what {
                Meanwhile::Delete => {
                    assert!(self.store.delete(&entry.key()).await?);
                }
                Meanwhile::Change => {
                    let mut changed = entry.clone();
                    changed.entry.content = format!("{text} (edited)");
                    self.store.delete(&entry.key()).await?;
                    self.store.put_entries(&[changed]).await?;
                }
                Meanwhile::Forget(subject) => {
                    let forgetter = self.forgetter.as_ref().expect("forgetter");
                    forgetter
                        .forget(TENANT, subject)
                        .await
                        .map_err(|_| StoreError::Backend {
                            op: "forget",
                            code: "Failed".into(),
                        })?;
                }
            }
        }
        let mut v = self.inner.embed(text).await?;
        v.model = self.model.clone();
        Ok(v)
    }
}

fn entries(n: usize, prefix: &str) -> Vec<serde_json::Value> {
    (0..n)
        .map(|i| json!({"content": format!("{prefix} note {i} about invoices and payments")}))
        .collect()
}

/// A world holding `n` notes written without a model, and the model a pass will embed them
/// with.
async fn unembedded_notes(n: usize, prefix: &str) -> (World, Arc<TestModel>) {
    let w = world();
    w.put(json!({"tenantId": TENANT, "memoryRef": REF, "entries": entries(n, prefix)}))
        .await
        .expect("put without a model");
    let model = TestModel::new(&w, "test.model-a", 0);
    (w, model)
}

fn memory_ref() -> MemoryRef {
    TenantScope::new(memory_core::TenantId::parse(TENANT).expect("tenant"))
        .admit(REF)
        .expect("ref")
}

fn stored(w: &World) -> Vec<StoredEntry> {
    w.ports.store.dump()
}

fn missing(w: &World, model: &str) -> usize {
    stored(w).iter().filter(|e| lacks_vector(e, model)).count()
}

async fn pending(w: &World) -> bool {
    w.ports
        .store
        .marker_state(&memory_ref(), PassKind::Embed)
        .await
        .expect("marker")
        .pending
}

/// What a semantic search answers about entries it could not compare.
async fn unembedded(w: &World, model: Arc<TestModel>, mode: SearchMode) -> Option<usize> {
    // The query is embedded by an unthrottled model of the same id.
    let query_model = TestModel::new(w, model.model(), 0);
    let reader = MemoryReader::new(w.ports.store.clone(), w.ports.clock.clone())
        .with_embedder(Some(query_model));
    let scope = TenantScope::new(memory_core::TenantId::parse(TENANT).expect("tenant"));
    let options = SearchOptions::new("invoices", TagFilter::default(), Some(5), true)
        .expect("options")
        .with_mode(mode);
    reader
        .search(&scope, REF, &options)
        .await
        .expect("search")
        .unembedded
}

/// Runs the pass until the ref is no longer pending (at most `runs` times).
async fn until_done(pass: &EmbedPass, runs: usize) -> Vec<EmbedReport> {
    let mut reports = Vec::new();
    for _ in 0..runs {
        let report = pass.run(TENANT, REF).await.expect("pass");
        let done = !report.pending;
        reports.push(report);
        if done {
            break;
        }
    }
    reports
}

#[tokio::test]
async fn a_throttled_write_marks_and_queues_the_ref_and_the_pass_completes_it() {
    let w = world();
    let model = TestModel::new(&w, "test.model-a", 3);
    let queue = Arc::new(RecordingQueue::new());
    let writer = w
        .ports
        .writer()
        .with_embedder(Some(model.clone()))
        .with_embed_queue(Some(queue.clone()));
    for batch in 0..4 {
        let body = json!({"tenantId": TENANT, "memoryRef": REF,
                          "entries": entries(25, &format!("batch {batch}"))});
        writer.put(&request(body)).await.expect("put");
    }
    let left = missing(&w, "test.model-a");
    assert!(left > 0 && left < 100, "30% throttled, no retries: {left}");
    assert!(pending(&w).await, "the write marked the ref");
    let queued = queue.passes();
    assert!(!queued.is_empty() && queued.iter().all(|q| q.kind == PassKind::Embed));
    assert_eq!(queued[0].memory_ref, REF);
    // Search says how many it could not compare, for semantic and hybrid, not for text.
    assert_eq!(
        unembedded(&w, model.clone(), SearchMode::Semantic).await,
        Some(left)
    );
    assert_eq!(
        unembedded(&w, model.clone(), SearchMode::Hybrid).await,
        Some(left)
    );
    assert_eq!(unembedded(&w, model.clone(), SearchMode::Text).await, None);
    // The pass meets the same throttling and still gets there; it says what it left.
    let pass = EmbedPass::new(w.ports.core(), model.clone());
    let reports = until_done(&pass, 10).await;
    assert!(reports.len() > 1, "30% throttling leaves some for a rerun");
    assert!(reports
        .iter()
        .rev()
        .skip(1)
        .all(|r| r.pending && r.failed > 0));
    let done = reports.last().expect("a run");
    assert_eq!((done.status, done.pending), ("complete", false));
    assert_eq!(reports.iter().map(|r| r.embedded).sum::<usize>(), left);
    assert_eq!(missing(&w, "test.model-a"), 0);
    assert!(!pending(&w).await);
    assert_eq!(
        unembedded(&w, model.clone(), SearchMode::Semantic).await,
        Some(0)
    );
}

#[tokio::test]
async fn duplicate_delivery_embeds_each_entry_once() {
    let (w, model) = unembedded_notes(20, "dup").await;
    let pass = EmbedPass::new(w.ports.core(), model.clone());
    // Two deliveries at once: every vector is written by exactly one of them.
    let (a, b) = tokio::join!(pass.run(TENANT, REF), pass.run(TENANT, REF));
    let (a, b) = (a.expect("a"), b.expect("b"));
    assert_eq!(a.embedded + b.embedded, 20, "{a:?} {b:?}");
    assert_eq!(missing(&w, "test.model-a"), 0);
    // A third, late delivery finds nothing: no model call, no write.
    let (calls, writes) = (model.calls(), w.ports.store.calls.writes());
    let late = pass.run(TENANT, REF).await.expect("late");
    assert_eq!(
        (late.missing, late.embedded, late.status),
        (0, 0, "complete")
    );
    assert_eq!(model.calls(), calls);
    assert_eq!(w.ports.store.calls.writes(), writes, "nothing written");
}

#[tokio::test]
async fn a_concurrent_delete_or_rewrite_is_never_undone() {
    let w = world();
    w.put(json!({"tenantId": TENANT, "memoryRef": REF, "entries": [
        {"content": "deleted while the model works"},
        {"content": "changed while the model works"},
        {"content": "left alone"},
    ]}))
    .await
    .expect("put");
    let model = TestModel::new(&w, "test.model-a", 0);
    model.on("deleted while the model works", Meanwhile::Delete);
    model.on("changed while the model works", Meanwhile::Change);
    let pass = EmbedPass::new(w.ports.core(), model.clone());
    let first = pass.run(TENANT, REF).await.expect("pass");
    assert_eq!((first.embedded, first.skipped), (1, 2), "{first:?}");
    let now = stored(&w);
    assert_eq!(now.len(), 2, "the deleted entry stays deleted");
    assert!(now
        .iter()
        .all(|e| e.entry.content != "deleted while the model works"));
    let changed = now
        .iter()
        .find(|e| e.entry.content.ends_with("(edited)"))
        .expect("the rewrite stands");
    assert!(
        changed.embedding.is_none(),
        "the old content's vector is not put on the new content"
    );
    // The rewrite marked nothing here (the test changed the store behind the writer's back),
    // so the operator's backfill, or the next write's mark, picks it up: run it again.
    let second = pass.run(TENANT, REF).await.expect("again");
    assert_eq!((second.missing, second.embedded), (1, 1));
    assert_eq!(missing(&w, "test.model-a"), 0);
}

#[tokio::test]
async fn forget_is_fenced_and_nothing_forgotten_is_sent_or_kept() {
    let w = world();
    w.put(json!({"tenantId": TENANT, "memoryRef": REF, "entries": [
        {"content": "Alice's old address", "subject": "alice"},
        {"content": "Bob's phone number", "subject": "bob"},
        {"content": "an unrelated note"},
    ]}))
    .await
    .expect("put");
    // Forgotten before the pass: never sent to the model.
    w.forgetter.forget(TENANT, "alice").await.expect("forget");
    // Forgotten during the pass: the pass is fenced and leaves the ref pending.
    let model = TestModel::new(&w, "test.model-a", 0);
    model.on("an unrelated note", Meanwhile::Forget("bob"));
    let pass = EmbedPass::new(w.ports.core(), model.clone());
    let fenced = pass.run(TENANT, REF).await.expect("pass");
    assert_eq!(
        (fenced.status, fenced.pending),
        ("fenced", true),
        "{fenced:?}"
    );
    let seen = model.seen.lock().expect("lock").clone();
    assert!(!seen.iter().any(|t| t.contains("Alice")), "{seen:?}");
    let left: Vec<String> = stored(&w).into_iter().map(|e| e.entry.content).collect();
    assert_eq!(
        left,
        vec!["an unrelated note".to_owned()],
        "nothing recreated"
    );
    // The next run sees the forget whole and ends the pass.
    let after = pass.run(TENANT, REF).await.expect("after");
    assert_eq!((after.status, after.pending), ("complete", false));
    assert_eq!(missing(&w, "test.model-a"), 0);
}

#[tokio::test]
async fn a_run_is_bounded_and_the_ref_stays_pending_until_all_are_done() {
    let (w, model) = unembedded_notes(25, "bound").await;
    let pass = EmbedPass::new(w.ports.core(), model.clone()).max_entries(10);
    // The operator's backfill of a ref no write marked: the first run marks it for the sweep.
    assert!(!pending(&w).await);
    let reports = until_done(&pass, 5).await;
    let embedded: Vec<usize> = reports.iter().map(|r| r.embedded).collect();
    assert_eq!(embedded, vec![10, 10, 5]);
    assert_eq!(reports[0].deferred, 15);
    assert!(reports[0].pending && reports[1].pending && !reports[2].pending);
    assert_eq!(model.calls(), 25);
}

#[tokio::test]
async fn entries_of_another_model_are_embedded_again_with_the_configured_one() {
    let w = world();
    let old = TestModel::new(&w, "test.model-old", 0);
    let writer = w.ports.writer().with_embedder(Some(old.clone()));
    writer
        .put(&request(
            json!({"tenantId": TENANT, "memoryRef": REF, "entries": entries(5, "old")}),
        ))
        .await
        .expect("put");
    assert_eq!(missing(&w, "test.model-old"), 0);
    assert!(!pending(&w).await, "every vector landed: nothing marked");
    let new = TestModel::new(&w, "test.model-new", 0);
    assert_eq!(
        unembedded(&w, new.clone(), SearchMode::Semantic).await,
        Some(5)
    );
    let report = EmbedPass::new(w.ports.core(), new.clone())
        .run(TENANT, REF)
        .await
        .expect("backfill");
    assert_eq!((report.missing, report.embedded), (5, 5));
    assert_eq!(missing(&w, "test.model-new"), 0);
    assert_eq!(unembedded(&w, new, SearchMode::Semantic).await, Some(0));
}

#[tokio::test]
async fn a_foreign_or_malformed_ref_is_refused_before_any_read() {
    let w = world();
    let model = TestModel::new(&w, "test.model-a", 0);
    let pass = EmbedPass::new(w.ports.core(), model);
    w.ports.store.calls.reset();
    assert!(pass
        .run("tenant-x", REF)
        .await
        .is_err_and(|e| e.to_string().contains("memoryRef")
            || matches!(e, memory_core::CoreError::RefNotAdmitted)));
    assert!(pass.run(TENANT, "workspaces/../memories").await.is_err());
    assert_eq!(w.ports.store.calls.total(), 0);
}
