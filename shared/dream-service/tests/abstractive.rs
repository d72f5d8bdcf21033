//! Abstractive dreams over the in-memory ports with a scripted abstractive model: the model's
//! summary is kept only when it is non-empty, on time and within budget, always re-redacted; every
//! other outcome leaves exactly the deterministic dream's bytes in the entry; provenance, forget
//! and duplicate runs behave as with the deterministic distiller.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use distill::DeterministicDistiller;
use dream_service::abstractive::{Abstractive, ABSTRACTIVE_VERSION};
use dream_service::dream::{dream_run_id, DreamReport, Dreamer};
use dream_service::DerivedForgetHook;
use memory_core::forget::Forgetter;
use memory_core::model::{StoredEntry, SubjectKey};
use memory_core::ports::{AbstractiveModel, ArchiveStore, CorePorts, EntryStore};
use memory_core::{MemoryRef, Redactor, SecretRegistry, StoreError, TenantId, Tier, Timestamp};
use memory_testkit::contract::{entry, memory_ref, T0};
use memory_testkit::in_memory::{
    everything_stored, AbstractiveScript, InMemoryArchiveStore, InMemoryEntryStore, ManualClock,
    RecordingPublisher, ScriptedAbstractiveModel, SCRIPTED_MODEL,
};
use memory_testkit::intercept::{ArchiveCall, BeforeArchiveCall, InterceptedArchives};

const TIMEOUT: Duration = Duration::from_millis(200);

fn tenant() -> TenantId {
    TenantId::parse("t1").expect("tenant")
}

fn r() -> MemoryRef {
    memory_ref(&tenant(), "agent-1")
}

struct World {
    store: Arc<InMemoryEntryStore>,
    archives: Arc<InMemoryArchiveStore>,
    clock: Arc<ManualClock>,
    model: Arc<ScriptedAbstractiveModel>,
    dreamer: Dreamer,
}

fn dreamer(
    store: &Arc<InMemoryEntryStore>,
    archives: Arc<dyn ArchiveStore>,
    clock: &Arc<ManualClock>,
    model: Option<Arc<dyn AbstractiveModel>>,
) -> Dreamer {
    let ports = CorePorts::new(
        store.clone(),
        Arc::new(RecordingPublisher::new()),
        clock.clone(),
    );
    Dreamer::new(ports, archives, Arc::new(DeterministicDistiller))
        .with_abstractive(model.map(|s| Abstractive::new(s, TIMEOUT)))
}

fn world(script: AbstractiveScript) -> World {
    let store = Arc::new(InMemoryEntryStore::new());
    let archives = Arc::new(InMemoryArchiveStore::new());
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 10_000_000)));
    let model = Arc::new(ScriptedAbstractiveModel::new(script));
    World {
        dreamer: dreamer(&store, archives.clone(), &clock, Some(model.clone())),
        store,
        archives,
        clock,
        model,
    }
}

fn notes() -> Vec<StoredEntry> {
    vec![
        entry(&r(), 1, "Customer prefers email follow-up", &["preference"]),
        entry(&r(), 2, "Customer prefers email follow-up", &["preference"]),
        entry(
            &r(),
            3,
            "Invoice 88412 was paid three weeks late",
            &["billing"],
        ),
        entry(
            &r(),
            4,
            "Deploys are frozen in the last week of December",
            &[],
        ),
    ]
}

fn none() -> Redactor {
    SecretRegistry::new().redactor()
}

async fn dream(w: &World, entries: &[StoredEntry], redactor: &Redactor) -> DreamReport {
    dream_within(w, entries, None, redactor).await
}

/// Seeds `entries` and dreams over them with `budget`.
async fn dream_within(
    w: &World,
    entries: &[StoredEntry],
    budget: Option<u64>,
    redactor: &Redactor,
) -> DreamReport {
    w.store.put_entries(entries).await.expect("seed");
    w.dreamer
        .run("t1", &r().to_string(), budget, redactor)
        .await
        .expect("dream")
}

fn output_of(store: &InMemoryEntryStore) -> StoredEntry {
    let mut outputs: Vec<StoredEntry> = store
        .dump()
        .into_iter()
        .filter(|e| e.tier == Tier::LongTerm)
        .collect();
    assert_eq!(outputs.len(), 1, "one output entry");
    outputs.remove(0)
}

fn archive_of(archives: &InMemoryArchiveStore) -> distill::Archive {
    let mut found: Vec<distill::Archive> = archives
        .dump()
        .into_iter()
        .filter(|(k, _)| k.as_str().contains("/archives/"))
        .map(|(_, body)| distill::Archive::from_bytes(&body).expect("archive"))
        .collect();
    assert_eq!(found.len(), 1, "one archive");
    found.remove(0)
}

/// What a dream without a model writes for the same entries and secrets.
async fn deterministic(entries: &[StoredEntry], redactor: &Redactor) -> (StoredEntry, DreamReport) {
    let store = Arc::new(InMemoryEntryStore::new());
    let archives = Arc::new(InMemoryArchiveStore::new());
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 10_000_000)));
    store.put_entries(entries).await.expect("seed");
    let report = dreamer(&store, archives, &clock, None)
        .run("t1", &r().to_string(), None, redactor)
        .await
        .expect("dream");
    (output_of(&store), report)
}

#[tokio::test]
async fn the_models_summary_is_written_with_the_deterministic_provenance() {
    let w = world(AbstractiveScript::Condense);
    let report = dream(&w, &notes(), &none()).await;
    let output = output_of(&w.store);
    let requests = w.model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        output.entry.content,
        ScriptedAbstractiveModel::condense(&requests[0])
    );
    assert!(output
        .entry
        .content
        .contains("Invoice 88412 was paid three weeks late"));
    assert_eq!(report.summary_model.as_deref(), Some(SCRIPTED_MODEL));
    assert_eq!(report.summary_fallback, None);

    // The facts sent are the deterministic summary's, the allowance its budget rule's.
    let (plain, plain_report) = deterministic(&notes(), &none()).await;
    let sent: Vec<&str> = requests[0].facts.iter().map(|f| f.text.as_str()).collect();
    assert!(
        sent.contains(&"Customer prefers email follow-up"),
        "{sent:?}"
    );
    assert_eq!(requests[0].facts.len(), 3);
    assert!(requests[0].facts.iter().any(|f| f.weight == 2));
    assert_eq!(requests[0].max_output_tokens, 4_096);

    // Provenance as the deterministic dream writes it: the run's tag, every source's id.
    let archive = archive_of(&w.archives);
    assert_eq!(
        output.entry.tags,
        vec![format!("compacted-from:{}", dream_run_id(&archive.digest))]
    );
    assert_eq!(plain.entry.tags.len(), 1);
    assert_eq!(output.provenance, plain.provenance);
    assert_eq!(
        memory_core::derivation::source_ids(&output.provenance).count(),
        4
    );
    assert_eq!(archive.summary, output.entry.content);
    assert_eq!(
        archive.distiller_version,
        format!(
            "{ABSTRACTIVE_VERSION};model={SCRIPTED_MODEL};facts={}",
            distill::DETERMINISTIC_VERSION
        )
    );
    assert_eq!(archive.output_entry_id, output.entry.id);
    // The model's tokens replace the summary's; the sources' are the same.
    assert_eq!(
        archive.input_tokens + archive.output_tokens,
        archive.tokens_used
    );
    assert_eq!(report.tokens_used, archive.tokens_used);
    assert_eq!(
        archive.output_tokens,
        distill::tokens::count_u32(&output.entry.content)
    );
    assert_eq!(
        report.tokens_used - archive.output_tokens,
        plain_report.tokens_used - distill::tokens::count_u32(&plain.entry.content)
    );
    // Another key than the deterministic dream's: the configured version is in the digest.
    assert_ne!(output.entry.id, plain.entry.id);
}

#[tokio::test]
async fn a_secret_the_model_reintroduces_is_redacted_and_none_is_sent() {
    let mut secrets = SecretRegistry::new();
    secrets
        .register("stripe", "sk-live-ABCDEFGH1234")
        .expect("register");
    let redactor = secrets.redactor();
    let w = world(AbstractiveScript::Reply(
        "## billing\n- The key is sk-live-ABCDEFGH1234, keep it safe.".into(),
    ));
    // A source holding the secret raw (it slipped in before it was registered).
    let mut entries = notes();
    entries.push(entry(
        &r(),
        5,
        "new key is sk-live-ABCDEFGH1234",
        &["billing"],
    ));
    let report = dream(&w, &entries, &redactor).await;
    assert_eq!(report.summary_model.as_deref(), Some(SCRIPTED_MODEL));
    let output = output_of(&w.store);
    assert_eq!(
        output.entry.content,
        "## billing\n- The key is [REDACTED:stripe], keep it safe."
    );
    let sent = format!("{:?}", w.model.requests());
    assert!(!sent.contains("sk-live-ABCDEFGH1234"), "never sent: {sent}");
    assert!(sent.contains("[REDACTED:stripe]"));
    let archive = archive_of(&w.archives);
    assert!(!String::from_utf8_lossy(&archive.to_bytes()).contains("sk-live-ABCDEFGH1234"));
}

/// Each way the model fails leaves the deterministic dream's text, figures and provenance, and
/// the reason.
#[tokio::test]
async fn every_failure_keeps_the_deterministic_summary() {
    let huge = "word ".repeat(5_000);
    let cases: Vec<(AbstractiveScript, &str)> = vec![
        (
            AbstractiveScript::Fail("ThrottlingException"),
            "model-error",
        ),
        (AbstractiveScript::Sleep(5_000), "timeout"),
        (AbstractiveScript::Reply(String::new()), "empty"),
        (AbstractiveScript::Reply(" \n\t ".into()), "empty"),
        (AbstractiveScript::Reply(huge), "over-budget"),
        (
            AbstractiveScript::Reply("x".repeat(40 * 1024)),
            "over-budget",
        ),
    ];
    let (plain, plain_report) = deterministic(&notes(), &none()).await;
    for (script, reason) in cases {
        let w = world(script.clone());
        let started = std::time::Instant::now();
        let report = dream(&w, &notes(), &none()).await;
        assert!(started.elapsed() < Duration::from_secs(3), "{script:?}");
        assert_eq!(report.summary_fallback, Some(reason), "{script:?}");
        assert_eq!(report.summary_model, None);
        let output = output_of(&w.store);
        assert_eq!(output.entry.content, plain.entry.content, "{script:?}");
        assert_eq!(output.provenance, plain.provenance);
        assert_eq!(report.tokens_used, plain_report.tokens_used);
        let archive = archive_of(&w.archives);
        // The key is the configured pipeline's, whichever summary is kept (so a duplicate run
        // that got the model's answer lands on the same key).
        assert_ne!(output.entry.tags, plain.entry.tags);
        assert_eq!(
            output.entry.tags,
            vec![format!("compacted-from:{}", dream_run_id(&archive.digest))]
        );
        assert_eq!(archive.distiller_version, distill::DETERMINISTIC_VERSION);
        assert_eq!(archive.summary, plain.entry.content);
        assert_eq!(w.model.calls.get("rewrite"), 1);
    }
}

/// The allowance is what the budget leaves after the included sources: an answer within 4,096
/// tokens but beyond that is over budget.
#[tokio::test]
async fn the_allowance_follows_the_budget() {
    let w = world(AbstractiveScript::Reply("word ".repeat(300)));
    let report = dream_within(&w, &notes(), Some(200), &none()).await;
    let request = &w.model.requests()[0];
    assert!(
        request.max_output_tokens < 200,
        "{}",
        request.max_output_tokens
    );
    assert_eq!(report.summary_fallback, Some("over-budget"));
    assert!(report.tokens_used <= 200);

    let fits = world(AbstractiveScript::Reply(
        "- Email first; invoices paid late.".into(),
    ));
    let report = dream_within(&fits, &notes(), Some(200), &none()).await;
    assert_eq!(report.summary_model.as_deref(), Some(SCRIPTED_MODEL));
    assert!(report.tokens_used <= 200);
}

#[tokio::test]
async fn forget_reaches_the_abstractive_output() {
    let w = world(AbstractiveScript::Condense);
    let t = tenant();
    let mut entries = notes();
    entries[2].subject = Some(SubjectKey::derive(&t, "zelda"));
    dream(&w, &entries, &none()).await;
    assert!(
        output_of(&w.store).entry.content.contains("88412"),
        "positive control"
    );
    let forgetter = Forgetter::new(CorePorts::new(
        w.store.clone(),
        Arc::new(RecordingPublisher::new()),
        w.clock.clone(),
    ))
    .with_hook(Arc::new(DerivedForgetHook {
        store: w.store.clone(),
        archives: w.archives.clone(),
        clock: w.clock.clone(),
    }));
    let counts = forgetter.forget("t1", "zelda").await.expect("forget");
    assert_eq!((counts.deleted_entries, counts.deleted_archives), (2, 1));
    let everything = everything_stored(&w.store, &w.archives);
    assert!(!everything.contains("88412"), "{everything}");
    assert!(w.store.dump().iter().all(|e| e.tier != Tier::LongTerm));
}

/// Runs another dream of the same snapshot, with another script, before this dream's archive
/// write: a redelivered pass whose model answered differently (or not at all).
struct DuplicateFirst {
    other: Dreamer,
    done: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl BeforeArchiveCall for DuplicateFirst {
    async fn before(&self, call: ArchiveCall<'_>) -> Result<(), StoreError> {
        let ArchiveCall::PutIfAbsent(_) = call else {
            return Ok(());
        };
        let first = !self.done.swap(true, std::sync::atomic::Ordering::SeqCst);
        if first {
            self.other
                .run("t1", &r().to_string(), None, &none())
                .await
                .map_err(|_| StoreError::Backend {
                    op: "duplicate",
                    code: "DuplicateFailed".into(),
                })?;
        }
        Ok(())
    }
}

/// Two runs of one dream whose models answer differently converge on the first archive: one
/// archive, one output entry holding that archive's summary, one announcement.
#[tokio::test]
async fn a_duplicate_run_adopts_the_first_stored_summary() {
    for (first_script, second_script, want_model) in [
        (
            AbstractiveScript::Reply("- first answer.".into()),
            AbstractiveScript::Reply("- second answer.".into()),
            true,
        ),
        (
            AbstractiveScript::Fail("ModelTimeoutException"),
            AbstractiveScript::Reply("- second answer.".into()),
            false,
        ),
        (
            AbstractiveScript::Reply("- first answer.".into()),
            AbstractiveScript::Fail("ModelTimeoutException"),
            true,
        ),
    ] {
        let store = Arc::new(InMemoryEntryStore::new());
        let archives = Arc::new(InMemoryArchiveStore::new());
        let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 10_000_000)));
        let events = Arc::new(RecordingPublisher::new());
        let make = |archives: Arc<dyn ArchiveStore>, script: AbstractiveScript| {
            Dreamer::new(
                CorePorts::new(store.clone(), events.clone(), clock.clone()),
                archives,
                Arc::new(DeterministicDistiller),
            )
            .with_abstractive(Some(Abstractive::new(
                Arc::new(ScriptedAbstractiveModel::new(script)),
                TIMEOUT,
            )))
        };
        let racing = Arc::new(InterceptedArchives {
            inner: archives.clone(),
            hook: DuplicateFirst {
                other: make(archives.clone(), first_script.clone()),
                done: Default::default(),
            },
        });
        store.put_entries(&notes()).await.expect("seed");
        let report = make(racing, second_script.clone())
            .run("t1", &r().to_string(), None, &none())
            .await
            .expect("dream");
        let archive = archive_of(&archives);
        let output = output_of(&store);
        assert_eq!(output.entry.content, archive.summary, "{first_script:?}");
        assert!(!report.archive_created);
        if want_model {
            assert_eq!(archive.summary, "- first answer.");
            assert_eq!(report.summary_model.as_deref(), Some(SCRIPTED_MODEL));
        } else {
            assert_eq!(archive.distiller_version, distill::DETERMINISTIC_VERSION);
            assert_eq!(report.summary_fallback, Some("earlier-run"));
        }
        assert_eq!(report.tokens_used, archive.tokens_used);
        let compacted = events
            .of_type(memory_core::events::EventType::MemoryCompacted)
            .len();
        assert_eq!(compacted, 1, "{first_script:?}: one announcement");
    }
}

#[tokio::test]
async fn without_a_model_nothing_changes() {
    let store = Arc::new(InMemoryEntryStore::new());
    let archives = Arc::new(InMemoryArchiveStore::new());
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 10_000_000)));
    store.put_entries(&notes()).await.expect("seed");
    let report = dreamer(&store, archives.clone(), &clock, None)
        .run("t1", &r().to_string(), None, &none())
        .await
        .expect("dream");
    assert_eq!(
        (report.summary_model.clone(), report.summary_fallback),
        (None, None)
    );
    let json = serde_json::to_value(&report).expect("json");
    assert!(json.get("summaryModel").is_none() && json.get("summaryFallback").is_none());
    assert_eq!(
        archive_of(&archives).distiller_version,
        distill::DETERMINISTIC_VERSION
    );
}
