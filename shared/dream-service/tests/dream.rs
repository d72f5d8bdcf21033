//! Dreams over the in-memory ports: byte-stable archives, budget rules, atomic failure, fault
//! injection at every step, SR-1 carry-forward, the index under racing writers, and forget.

use memory_core::derivation::{source_digests, source_ids};
use std::sync::Arc;

use async_trait::async_trait;
use distill::DeterministicDistiller;
use dream_service::dream::{Dreamer, MAX_TOKEN_BUDGET};
use dream_service::DerivedForgetHook;
use memory_core::events::EventType;
use memory_core::forget::Forgetter;
use memory_core::ports::{
    ArchiveStore, CorePorts, EntryStore, Expect, ObjectKey, ObjectKind, ObjectPut,
};
use memory_core::{CoreError, MemoryRef, SecretRegistry, StoreError, TenantId, Tier, Timestamp};
use memory_testkit::contract::{about, entry, memory_ref, T0};
use memory_testkit::in_memory::{
    everything_stored, CallCounter, InMemoryArchiveStore, InMemoryEntryStore, ManualClock,
    RecordingPublisher,
};
use memory_testkit::intercept::{ArchiveCall, BeforeArchiveCall, InterceptedArchives};

fn tenant() -> TenantId {
    TenantId::parse("t1").expect("tenant")
}

struct World {
    store: Arc<InMemoryEntryStore>,
    archives: Arc<InMemoryArchiveStore>,
    events: Arc<RecordingPublisher>,
    clock: Arc<ManualClock>,
    dreamer: Dreamer,
}

/// The test double a fault is armed on.
#[derive(Clone, Copy)]
enum Port {
    Archives,
    Store,
    Events,
}

impl Port {
    fn calls(self, w: &World) -> &CallCounter {
        match self {
            Port::Archives => &w.archives.calls,
            Port::Store => &w.store.calls,
            Port::Events => &w.events.calls,
        }
    }
}

impl World {
    /// A dream of tenant t1's ref `r()` with no secrets registered.
    async fn dream(
        &self,
        budget: Option<u64>,
    ) -> Result<dream_service::dream::DreamReport, CoreError> {
        self.dreamer
            .run("t1", &r().to_string(), budget, &none())
            .await
    }

    fn core(&self) -> CorePorts {
        CorePorts::new(self.store.clone(), self.events.clone(), self.clock.clone())
    }
}

fn world_with(archives_port: Arc<dyn ArchiveStore>, archives: Arc<InMemoryArchiveStore>) -> World {
    let store = Arc::new(InMemoryEntryStore::new());
    let events = Arc::new(RecordingPublisher::new());
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 10_000_000)));
    World {
        dreamer: Dreamer::new(
            CorePorts::new(store.clone(), events.clone(), clock.clone()),
            archives_port,
            Arc::new(DeterministicDistiller),
        ),
        store,
        archives,
        events,
        clock,
    }
}

fn world() -> World {
    let archives = Arc::new(InMemoryArchiveStore::new());
    world_with(archives.clone(), archives)
}

fn r() -> MemoryRef {
    memory_ref(&tenant(), "agent-1")
}

async fn seed(w: &World, n: u64) {
    let entries: Vec<_> = (0..n)
        .map(|i| {
            entry(
                &r(),
                i,
                &format!("Customer prefers email follow-up; order {} shipped", i % 7),
                &["preference"],
            )
        })
        .collect();
    for chunk in entries.chunks(25) {
        w.store.put_entries(chunk).await.expect("seed");
    }
}

fn none() -> memory_core::Redactor {
    SecretRegistry::new().redactor()
}

fn archives_of(w: &World) -> Vec<(ObjectKey, Vec<u8>)> {
    archive_objects(&w.archives)
}

fn archive_objects(archives: &InMemoryArchiveStore) -> Vec<(ObjectKey, Vec<u8>)> {
    let is_archive = |(k, _): &(ObjectKey, Vec<u8>)| k.as_str().contains("/archives/");
    archives.dump().into_iter().filter(is_archive).collect()
}

fn everything(w: &World) -> String {
    everything_stored(&w.store, &w.archives)
}

/// The dream's output entry (the one long-term entry).
fn output_of(w: &World) -> memory_core::model::StoredEntry {
    let output = w
        .store
        .dump()
        .into_iter()
        .find(|e| e.tier == Tier::LongTerm);
    output.expect("a dream output")
}

/// Dream outputs (long-term entries) in the store.
fn outputs_in(store: &InMemoryEntryStore) -> usize {
    let dump = store.dump();
    dump.iter().filter(|e| e.tier == Tier::LongTerm).count()
}

/// `memory.compacted` announcements published.
fn compacted_in(events: &RecordingPublisher) -> usize {
    let published = events.events();
    let compacted = published.iter().map(|e| e.event_type);
    compacted
        .filter(|t| *t == EventType::MemoryCompacted)
        .count()
}

#[tokio::test]
async fn same_sources_and_budget_give_the_same_bytes_at_the_same_key() {
    let (a, b) = (world(), world());
    seed(&a, 30).await;
    seed(&b, 30).await;
    let ra = a.dream(Some(50_000)).await.expect("dream a");
    let rb = b.dream(Some(50_000)).await.expect("dream b");
    assert_eq!(ra.status, "distilled");
    assert_eq!(ra.archive_key, rb.archive_key);
    assert!(
        archives_of(&a) == archives_of(&b),
        "byte-identical archives"
    );
    assert_eq!(archives_of(&a).len(), 1);
    let out = a
        .store
        .get(&memory_core::model::EntryKey {
            memory_ref: r(),
            id: ra.output_id.clone().expect("id"),
        })
        .await
        .expect("get")
        .expect("output entry");
    assert_eq!(out.tier, Tier::LongTerm);
    assert!(out.entry.tags[0].starts_with("compacted-from:dream-"));
    assert_eq!(source_ids(&out.provenance).count(), 30);
    assert_eq!(
        source_digests(&out.provenance).count(),
        30,
        "each source pinned"
    );
    // Nothing new: a second run distils nothing and writes nothing.
    a.store.calls.reset();
    let again = a.dream(Some(50_000)).await.expect("again");
    assert_eq!(again.status, "nothing-to-distill");
    assert_eq!(a.store.calls.writes(), 0);
    // One new entry: a new archive at a new key.
    a.store
        .put_entries(&[entry(&r(), 500, "Customer moved to Oslo", &["address"])])
        .await
        .expect("put");
    let third = a.dream(Some(50_000)).await.expect("third");
    assert_eq!(third.status, "distilled");
    assert_ne!(third.archive_key, ra.archive_key);
    assert_eq!(archives_of(&a).len(), 2);
    let compacted = a.events.of_type(EventType::MemoryCompacted);
    assert_eq!(compacted.len(), 2);
    let d = &compacted[0].detail;
    assert_eq!(d["sourceCount"], 30);
    assert_eq!(d["sourceIds"].as_array().map(Vec::len), Some(30));
    assert_eq!(d["trigger"], "host-managed");
    assert_eq!(d["distillation"]["tokenBudget"], 50_000);
    assert_eq!(d["distillation"]["indexUpdated"], true);
    assert!(
        !compacted[0].detail_json().to_string().contains("email"),
        "content-free"
    );
    assert_eq!(a.events.of_type(EventType::WorkspaceUpdated).len(), 2);
}

#[tokio::test]
async fn budget_is_clamped_defaulted_and_counted_honestly() {
    assert_eq!(Dreamer::budget(None), MAX_TOKEN_BUDGET);
    assert_eq!(Dreamer::budget(Some(10_000_000_000)), MAX_TOKEN_BUDGET);
    assert_eq!(Dreamer::budget(Some(2_000)), 2_000);
    let w = world();
    seed(&w, 200).await;
    let report = w.dream(Some(1_000)).await.expect("dream");
    assert!(report.tokens_used <= 1_000);
    assert_eq!(report.source_count, 200, "every source is consumed");
    assert!(
        report.sources_included > 0 && report.sources_included < 200,
        "not every fact fits: {report:?}"
    );
    let summary = output_of(&w);
    assert_eq!(source_ids(&summary.provenance).count(), 200);
    assert_eq!(source_digests(&summary.provenance).count(), 200);
    // Independent count with the tokenizer itself: per fact ("order N shipped") in the summary,
    // its newest statement (the one quoted; the others are counted duplicates), plus the summary.
    let bpe = tiktoken_rs::cl100k_base().expect("tokenizer");
    let text = &summary.entry.content;
    let mut newest: std::collections::BTreeMap<String, (Timestamp, String)> = Default::default();
    for e in w.store.dump() {
        if e.tier != Tier::Transactional {
            continue;
        }
        let slot = newest
            .entry(e.entry.content.clone())
            .or_insert((e.entry.created_at, e.entry.id.clone()));
        if (e.entry.created_at, std::cmp::Reverse(&e.entry.id))
            > (slot.0, std::cmp::Reverse(&slot.1))
        {
            *slot = (e.entry.created_at, e.entry.id.clone());
        }
    }
    let included: Vec<String> = newest
        .into_keys()
        .filter(|c| {
            let n = c.split("order ").nth(1).unwrap_or_default();
            text.contains(&format!(" {n} ("))
        })
        .collect();
    assert_eq!(included.len(), report.sources_included);
    let inputs: usize = included.iter().map(|c| bpe.encode_ordinary(c).len()).sum();
    let independent = inputs + bpe.encode_ordinary(text).len();
    let diff = (f64::from(report.tokens_used) - independent as f64).abs() / independent as f64;
    assert!(
        diff <= 0.10,
        "tokensUsed {} vs independent {independent}",
        report.tokens_used
    );
    let default = world();
    seed(&default, 5).await;
    assert_eq!(
        default.dream(None).await.expect("dream").token_budget,
        MAX_TOKEN_BUDGET
    );
}

/// The summary is not held to a fixed token cap: it grows with the budget the caller gives,
/// up to the distiller's byte bound for one entry.
#[tokio::test]
async fn a_large_budget_gives_a_summary_beyond_four_thousand_tokens() {
    const WORDS: &[&str] = &[
        "invoice",
        "refund",
        "warehouse",
        "Berlin",
        "courier",
        "pallet",
        "renewal",
        "contract",
        "Monday",
        "discount",
        "ticket",
        "escalated",
        "printer",
        "laptop",
        "badge",
        "parking",
    ];
    let w = world();
    let entries: Vec<_> = (0..1_200_u64)
        .map(|i| {
            let pick = |k: u64| WORDS[((i / 16_u64.pow(k as u32)) % 16) as usize];
            let text = format!(
                "Note {i}: {} {} {} checked by desk {}",
                pick(0),
                pick(1),
                pick(2),
                i % 37
            );
            entry(&r(), i, &text, &["notes"])
        })
        .collect();
    for chunk in entries.chunks(25) {
        w.store.put_entries(chunk).await.expect("seed");
    }
    let report = w.dream(Some(20_000)).await.expect("dream");
    assert!(report.tokens_used <= 20_000);
    let summary = output_of(&w).entry.content;
    let bpe = tiktoken_rs::cl100k_base().expect("tokenizer");
    let tokens = bpe.encode_ordinary(&summary).len();
    assert!(tokens > 4_096, "{tokens}");
    assert!(summary.len() <= distill::distiller::MAX_SUMMARY_BYTES);
}

/// 100 short entries (8-15 words): 80 statements, a few stated again, two pinned.
async fn seed_hundred_short(w: &World) -> Vec<String> {
    const WHO: &[&str] = &[
        "Amelia", "Bruno", "Chiara", "Dmitri", "Esther", "Farid", "Greta", "Hiro",
    ];
    const WHAT: &[&str] = &[
        "asked for the quarterly invoice to be resent by post",
        "booked the large meeting room for Thursday afternoon",
        "reported that the staging server was slow again",
        "wants the onboarding checklist translated into Portuguese",
        "confirmed the vendor contract renewal at the same price",
        "moved the weekly design review to Wednesdays at ten",
        "needs a parking permit for the Lisbon office visit",
        "prefers short written updates over long status calls",
        "is out of office from the third to the tenth",
        "will present the roadmap at the next all hands",
    ];
    let mut entries = Vec::new();
    for n in 0..100_u64 {
        let i = n as usize;
        let (content, tags): (String, &[&str]) = match i {
            0 => (
                "Never schedule anything for Greta on Friday afternoons".to_owned(),
                &["pinned", "people"],
            ),
            1 => (
                "The fire drill meeting point is the car park behind building B".to_owned(),
                &["pinned"],
            ),
            // Stated again: the first statements, once or twice more.
            80..=99 => (
                format!("{} {}", WHO[(i - 78) % 8], WHAT[((i - 78) / 8) % 10]),
                &["people"],
            ),
            _ => (
                format!("{} {}", WHO[i % 8], WHAT[(i / 8) % 10]),
                &["people"],
            ),
        };
        entries.push(entry(&r(), n * 1_000, &content, tags));
    }
    for e in &entries {
        let words = e.entry.content.split_whitespace().count();
        assert!((8..=15).contains(&words), "{}", e.entry.content);
    }
    let mut ids: Vec<String> = entries.iter().map(|e| e.entry.id.clone()).collect();
    ids.sort();
    for chunk in entries.chunks(25) {
        w.store.put_entries(chunk).await.expect("seed");
    }
    ids
}

#[tokio::test]
async fn a_dream_at_budget_256_over_100_short_entries_consumes_every_source() {
    let w = world();
    let ids = seed_hundred_short(&w).await;
    let report = w.dream(Some(256)).await.expect("dream");
    assert_eq!(report.status, "distilled");
    assert_eq!(report.token_budget, 256);
    assert!(report.tokens_used <= 256, "{report:?}");
    assert_eq!(report.source_count, 100);
    assert!(
        report.sources_included >= 2 && report.sources_included < 100,
        "{report:?}"
    );
    assert!(report.facts_kept >= 2 && report.facts_kept < report.facts_found);
    // The highest-ranked facts: the pinned ones.
    let out = output_of(&w);
    assert!(out
        .entry
        .content
        .contains("Never schedule anything for Greta on Friday afternoons"));
    assert!(out
        .entry
        .content
        .contains("The fire drill meeting point is the car park behind building B"));
    // Every source archived and provenance-tagged, whether its facts made it in or not.
    let archives = archives_of(&w);
    assert_eq!(archives.len(), 1);
    let archive = distill::Archive::from_bytes(&archives[0].1).expect("archive");
    assert_eq!(archive.source_ids, ids);
    assert_eq!(archive.sources_included as usize, report.sources_included);
    assert_eq!(archive.tokens_used, report.tokens_used);
    let mut provenance: Vec<String> = source_ids(&out.provenance).cloned().collect();
    provenance.sort();
    assert_eq!(provenance, ids);
    let compacted = w.events.of_type(EventType::MemoryCompacted);
    assert_eq!(compacted[0].detail["sourceCount"], 100);
    // The watermark passed all of them: nothing is left for a later dream.
    let again = w.dream(Some(256)).await.expect("again");
    assert_eq!(again.status, "nothing-to-distill");
    assert_eq!(again.input_count, 0);
}

#[tokio::test]
async fn a_budget_too_small_fails_and_changes_nothing() {
    let w = world();
    seed(&w, 10).await;
    // A pinned entry of some 300 tokens: the top-ranked fact, which a budget of 100 cannot hold.
    let runbook = format!(
        "Escalation runbook: {}",
        "call the on-duty lead ".repeat(60)
    );
    w.store
        .put_entries(&[entry(&r(), 50, &runbook, &["pinned"])])
        .await
        .expect("put");
    let (entries, objects, calls) = (w.store.dump(), w.archives.dump(), w.store.calls.writes());
    match w.dream(Some(100)).await {
        Err(CoreError::TokenBudgetExceeded { needed, budget }) => {
            assert_eq!(budget, 100);
            assert!(
                needed > budget,
                "needed {needed} is a budget that would fit"
            );
        }
        other => panic!("expected token_budget_exceeded, got {other:?}"),
    }
    assert!(w.store.dump() == entries, "table as before");
    assert!(w.archives.dump() == objects, "bucket and index as before");
    assert!(w.events.events().is_empty());
    // Below the floor: a request error naming the field, refused before the ref is read.
    let writes = w.store.calls.writes();
    for tiny in [1, u64::from(distill::MIN_TOKEN_BUDGET) - 1] {
        match w.dream(Some(tiny)).await {
            Err(CoreError::Invalid { field, reason }) => {
                assert_eq!(field, "tokenBudget");
                assert!(
                    reason.contains(&distill::MIN_TOKEN_BUDGET.to_string()),
                    "{reason}"
                );
                assert!(
                    !reason.contains(&format!(" {tiny} ")),
                    "the bound, not the value"
                );
            }
            other => panic!("expected a validation error, got {other:?}"),
        }
    }
    assert_eq!(w.store.calls.writes(), writes, "not even the work marker");
    assert!(w.store.dump() == entries && w.archives.dump() == objects);
    assert!(calls <= writes);
    // The watermark did not move: a run with a fitting budget still sees all eleven.
    assert_eq!(w.dream(None).await.expect("dream").source_count, 11);
}

#[tokio::test]
async fn a_failure_at_any_step_leaves_nothing_partial_and_the_next_run_completes() {
    let reference = world();
    seed(&reference, 12).await;
    reference.dream(None).await.expect("reference");
    let want_objects = reference.archives.dump();
    let want_entries = reference.store.dump();
    // (label, which double fails, the call, its nth occurrence)
    let faults = [
        ("archive put", Port::Archives, "put_if_absent", 1),
        ("entry put", Port::Store, "put_entries", 1),
        ("index read", Port::Archives, "get", 1),
        ("index write", Port::Archives, "put_expecting", 1),
        ("markdown write", Port::Archives, "put_expecting", 2),
        ("publish", Port::Events, "publish", 1),
        ("watermark", Port::Store, "finish_pass", 1),
    ];
    for (label, port, call, nth) in faults {
        let w = world();
        seed(&w, 12).await;
        port.calls(&w).fail_on(call, nth);
        let failed = w.dream(None).await;
        assert!(failed.is_err(), "{label}: the failure surfaces");
        let archives = archives_of(&w).len();
        let outputs = outputs_in(&w.store);
        if !matches!(label, "publish" | "watermark" | "markdown write") {
            assert_eq!(
                (archives, outputs),
                (0, 0),
                "{label}: no partial archive, no orphan entry"
            );
        }
        let done = w.dream(None).await.expect("the next run completes");
        assert_eq!(done.status, "distilled", "{label}");
        assert!(
            w.archives.dump() == want_objects,
            "{label}: same objects as an undisturbed run"
        );
        assert!(
            w.store.dump() == want_entries,
            "{label}: same entries as an undisturbed run"
        );
        let _ = &w.clock;
    }
}

#[tokio::test]
async fn secrets_never_reach_archive_entry_or_index() {
    let w = world();
    let entries = vec![
        about(
            "x",
            entry(&r(), 1, "token [REDACTED:gh] was rotated", &["ops"]),
        ),
        entry(
            &r(),
            2,
            "new key is sk-live-ABCDEFGH1234 for billing",
            &["ops"],
        ),
        entry(
            &r(),
            3,
            "near miss sk-live-ABCDEFGH123 and [REDACTED:gh",
            &["ops"],
        ),
    ];
    w.store.put_entries(&entries).await.expect("put");
    let mut secrets = SecretRegistry::new();
    secrets
        .register("stripe", "sk-live-ABCDEFGH1234")
        .expect("register");
    secrets.register("gh", "ghp_1234567890").expect("register");
    w.dreamer
        .run("t1", &r().to_string(), None, &secrets.redactor())
        .await
        .expect("dream");
    let output = output_of(&w);
    assert!(output.entry.content.contains("[REDACTED:stripe]"));
    assert!(
        output.entry.content.contains("[REDACTED:gh]"),
        "existing markers kept whole"
    );
    let mut everything = output.entry.content.clone();
    for (_, body) in w.archives.dump() {
        everything.push_str(&String::from_utf8_lossy(&body));
    }
    assert!(!everything.contains("sk-live-ABCDEFGH1234"), "{everything}");
    assert!(everything.contains("[REDACTED:stripe]"));
}

/// On its first index write, lets another dream's index write land first.
struct RacingIndex {
    inner: Arc<InMemoryArchiveStore>,
    raced: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl BeforeArchiveCall for RacingIndex {
    async fn before(&self, call: ArchiveCall<'_>) -> Result<(), StoreError> {
        let ArchiveCall::PutExpecting(k) = call else {
            return Ok(());
        };
        let first = !self.raced.swap(true, std::sync::atomic::Ordering::SeqCst);
        if first && k.as_str().ends_with("MEMORY-INDEX.json") {
            // The other dream: a line for another archive of the same ref.
            let mut other = distill::index::upsert(
                None,
                &memory_ref(&tenant(), "agent-1").to_string(),
                distill::IndexLine {
                    archive_key: format!("t1/agents/agent-1/archives/{}.json", "e".repeat(64)),
                    digest: "e".repeat(64),
                    output_entry_id: "01OTHER".into(),
                    created_at_ms: T0,
                    source_count: 1,
                    tokens_used: 10,
                    token_budget: 100,
                    tags: vec![],
                },
                T0,
            )
            .expect("other line")
            .0;
            other.updated_at_ms = T0;
            self.inner
                .put_expecting(
                    ObjectPut::json(k, ObjectKind::Index, distill::index::to_json_bytes(&other)),
                    Expect::Absent,
                )
                .await?;
        }
        Ok(())
    }
}

#[tokio::test]
async fn racing_index_writers_lose_no_update() {
    let inner = Arc::new(InMemoryArchiveStore::new());
    let w = world_with(
        Arc::new(InterceptedArchives {
            inner: inner.clone(),
            hook: RacingIndex {
                inner: inner.clone(),
                raced: false.into(),
            },
        }),
        inner.clone(),
    );
    seed(&w, 5).await;
    w.dream(None).await.expect("dream");
    let index = inner
        .dump()
        .into_iter()
        .find(|(k, _)| k.as_str().ends_with("MEMORY-INDEX.json"))
        .expect("index");
    let parsed = distill::index::from_json_bytes(&index.1).expect("parse");
    assert_eq!(
        parsed.entries.len(),
        2,
        "both dreams' lines survive the race"
    );
    assert!(inner
        .dump()
        .iter()
        .any(|(k, _)| k.as_str().ends_with("MEMORY-INDEX.md")));
}

#[tokio::test]
async fn forget_after_a_dream_leaves_no_trace_of_the_subject() {
    let w = world();
    let entries = vec![
        about(
            "zelda",
            entry(&r(), 1, "Zelda's allergy is peanuts", &["health"]),
        ),
        entry(&r(), 2, "Office closes at 6pm", &["ops"]),
    ];
    w.store.put_entries(&entries).await.expect("put");
    w.dream(None).await.expect("dream");
    assert!(everything(&w).contains("peanuts"), "positive control");
    let forgetter = Forgetter::new(w.core()).with_hook(Arc::new(DerivedForgetHook {
        store: w.store.clone(),
        archives: w.archives.clone(),
        clock: w.clock.clone(),
    }));
    let counts = forgetter.forget("t1", "zelda").await.expect("forget");
    assert_eq!(
        (
            counts.deleted_entries,
            counts.deleted_archives,
            counts.rebuilt_indexes
        ),
        (2, 1, 1)
    );
    assert!(!everything(&w).contains("peanuts") && !everything(&w).contains("Zelda"));
    assert!(
        everything(&w).contains("Office closes"),
        "unrelated entries stay"
    );
}

#[tokio::test]
async fn entries_younger_than_the_settle_time_wait_and_keep_the_ref_pending() {
    use memory_core::ports::{pending_shard, PassKind};
    let w = world();
    let dreamer = Dreamer::new(
        w.core(),
        w.archives.clone(),
        Arc::new(DeterministicDistiller),
    )
    .with_settle_millis(60_000);
    let now = T0 + 10_000_000;
    let mut old = entry(&r(), 1, "settled fact", &[]);
    old.entry.created_at = Timestamp::from_millis(now - 120_000);
    let mut young = entry(&r(), 2, "fresh fact", &[]);
    young.entry.created_at = Timestamp::from_millis(now - 1_000);
    w.store.put_entries(&[old, young]).await.expect("put");
    let first = dreamer
        .run("t1", &r().to_string(), None, &none())
        .await
        .expect("dream");
    assert_eq!(first.source_count, 1, "only the settled entry");
    assert!(
        w.store
            .pending_refs(PassKind::Dream, pending_shard(&r()))
            .await
            .expect("pending")
            .contains(&r()),
        "still pending for the young one"
    );
    w.clock.advance_millis(120_000);
    let second = dreamer
        .run("t1", &r().to_string(), None, &none())
        .await
        .expect("dream");
    assert_eq!(second.source_count, 1, "the young entry, once settled");
    assert!(!w
        .store
        .pending_refs(PassKind::Dream, pending_shard(&r()))
        .await
        .expect("pending")
        .contains(&r()));
}

#[tokio::test]
async fn a_forget_whose_hook_fails_is_finished_by_the_retry() {
    let w = world();
    let secret = about("yara", entry(&r(), 1, "Yara's PIN is 4711", &[]));
    w.store
        .put_entries(&[secret, entry(&r(), 2, "unrelated", &[])])
        .await
        .expect("put");
    w.dream(None).await.expect("dream");
    let forgetter = Forgetter::new(w.core()).with_hook(Arc::new(DerivedForgetHook {
        store: w.store.clone(),
        archives: w.archives.clone(),
        clock: w.clock.clone(),
    }));
    w.archives.calls.fail_on("delete", 1);
    assert!(
        forgetter.forget("t1", "yara").await.is_err(),
        "the hook's failure surfaces"
    );
    assert!(
        forgetter.forget("t1", "yara").await.is_ok(),
        "the retry runs"
    );
    assert!(
        !everything(&w).contains("4711"),
        "nothing of the subject survives the retried forget"
    );
    assert!(everything(&w).contains("unrelated"));
}

/// What runs inside the dream's `n`-th archive call (so at every point between the dream's
/// snapshot and its last write), on the undisturbed ports.
enum During {
    Forget(Forgetter),
    Dream(
        Dreamer,
        std::sync::Mutex<Option<Result<&'static str, CoreError>>>,
    ),
}

struct ForgetDuring {
    at_call: usize,
    calls: std::sync::atomic::AtomicUsize,
    during: During,
}

impl ForgetDuring {
    async fn tick(&self) {
        let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if n != self.at_call {
            return;
        }
        match &self.during {
            During::Forget(f) => {
                f.forget("t1", "zelda")
                    .await
                    .expect("forget during the dream");
            }
            During::Dream(d, outcome) => {
                let got = d
                    .run("t1", &r().to_string(), None, &none())
                    .await
                    .map(|rep| rep.status);
                *outcome.lock().expect("lock") = Some(got);
            }
        }
    }

    fn forgetter(&self) -> &Forgetter {
        match &self.during {
            During::Forget(f) => f,
            During::Dream(..) => panic!("not a forget"),
        }
    }
}

#[async_trait]
impl BeforeArchiveCall for ForgetDuring {
    async fn before(&self, call: ArchiveCall<'_>) -> Result<(), StoreError> {
        if matches!(
            call,
            ArchiveCall::PutIfAbsent(_) | ArchiveCall::PutExpecting(_) | ArchiveCall::Get(_)
        ) {
            self.tick().await;
        }
        Ok(())
    }
}

/// Fenced forget: a forget that lands anywhere inside a running dream leaves no byte of the
/// subject's content (entries, the dream's output, archive, index), and the next dream still
/// distils what was not forgotten.
#[tokio::test]
async fn forget_racing_a_dream_at_every_step_leaves_no_trace() {
    for at_call in 1..=8 {
        let archives = Arc::new(InMemoryArchiveStore::new());
        let store = Arc::new(InMemoryEntryStore::new());
        let events = Arc::new(RecordingPublisher::new());
        let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 10_000_000)));
        let forgetter =
            Forgetter::new(CorePorts::new(store.clone(), events.clone(), clock.clone())).with_hook(
                Arc::new(DerivedForgetHook {
                    store: store.clone(),
                    archives: archives.clone(),
                    clock: clock.clone(),
                }),
            );
        let racing = Arc::new(InterceptedArchives {
            inner: archives.clone(),
            hook: ForgetDuring {
                at_call,
                calls: Default::default(),
                during: During::Forget(forgetter),
            },
        });
        let dreamer = Dreamer::new(
            CorePorts::new(store.clone(), events.clone(), clock.clone()),
            racing.clone(),
            Arc::new(DeterministicDistiller),
        );
        let entries = vec![
            about(
                "zelda",
                entry(&r(), 1, "Zelda's allergy is peanuts", &["health"]),
            ),
            entry(&r(), 2, "Office closes at 6pm", &["ops"]),
        ];
        store.put_entries(&entries).await.expect("put");
        let report = dreamer
            .run("t1", &r().to_string(), None, &none())
            .await
            .expect("dream");
        let forgot_during = racing.hook.calls.load(std::sync::atomic::Ordering::SeqCst) >= at_call;
        if !forgot_during {
            // The dream made fewer archive calls than `at_call`: forget after it instead.
            racing
                .hook
                .forgetter()
                .forget("t1", "zelda")
                .await
                .expect("forget");
        }
        let everything = || everything_stored(&store, &archives);
        assert!(
            !everything().contains("peanuts") && !everything().contains("Zelda"),
            "forget at archive call {at_call} (dream status {}): a trace survived",
            report.status
        );
        // What was not forgotten is distilled by the next run. (A forget after a finished dream
        // removes the output and leaves the other sources undistilled: docs/guarantees.md
        // "Forget is fenced against running passes".)
        dreamer
            .run("t1", &r().to_string(), None, &none())
            .await
            .expect("next dream");
        assert!(
            !forgot_during
                || store
                    .dump()
                    .iter()
                    .any(|e| e.tier == Tier::LongTerm && e.entry.content.contains("Office closes")),
            "forget at archive call {at_call}: the rest is distilled"
        );
        assert!(!everything().contains("peanuts"));
    }
}

/// Duplicate delivery: the same dream delivered twice, the duplicate running inside any step of
/// the first, yields one archive, one output entry, one index line and one `memory.compacted`.
#[tokio::test]
async fn a_concurrent_duplicate_dream_announces_once() {
    for at_call in 1..=8 {
        let archives = Arc::new(InMemoryArchiveStore::new());
        let store = Arc::new(InMemoryEntryStore::new());
        let events = Arc::new(RecordingPublisher::new());
        let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 10_000_000)));
        let make = |archives: Arc<dyn ArchiveStore>| {
            Dreamer::new(
                CorePorts::new(store.clone(), events.clone(), clock.clone()),
                archives,
                Arc::new(DeterministicDistiller),
            )
        };
        let racing = Arc::new(InterceptedArchives {
            inner: archives.clone(),
            hook: ForgetDuring {
                at_call,
                calls: Default::default(),
                during: During::Dream(make(archives.clone()), Default::default()),
            },
        });
        let first = make(racing.clone());
        let entries: Vec<_> = (0..5)
            .map(|i| entry(&r(), i, &format!("note {i} about the launch"), &["ops"]))
            .collect();
        store.put_entries(&entries).await.expect("put");
        let outcome = first.run("t1", &r().to_string(), None, &none()).await;
        let During::Dream(_, second) = &racing.hook.during else {
            unreachable!()
        };
        let second = second.lock().expect("lock").take();
        // Either run may be the one told to come back later (the other holds the announcement).
        let statuses = [
            outcome.map(|r| r.status),
            second.unwrap_or(Ok("did not run")),
        ];
        assert!(
            statuses.iter().any(|s| s == &Ok("distilled")),
            "at call {at_call}: {statuses:?}"
        );
        for s in &statuses {
            assert!(
                matches!(s, Ok(_) | Err(CoreError::IdempotencyInFlight)),
                "at call {at_call}: {s:?}"
            );
        }
        assert_eq!(
            compacted_in(&events),
            1,
            "at call {at_call}: one announcement"
        );
        assert_eq!(outputs_in(&store), 1, "at call {at_call}: one output entry");
        let archived = archive_objects(&archives).len();
        assert_eq!(archived, 1, "at call {at_call}: one archive");
    }
}

#[test]
fn the_capability_document_advertises_the_distillers_tokenizer() {
    // memory-read answers the capability document without linking the distiller; the name it
    // advertises must be the one dreams count with.
    assert_eq!(
        memory_core::capabilities::TOKENIZER_NAME,
        distill::TOKENIZER_NAME
    );
}

/// The dream saga's own cases: an archive whose answer was lost is adopted, an orphan left by
/// a failed run is swept once no run can still be finishing it, and a run that failed past its
/// index line is finished by the next one instead of distilled again.
mod saga {
    use super::*;
    use dream_service::dream::ORPHAN_GRACE_MILLIS;

    fn clocked_world() -> World {
        let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 10_000_000)));
        let archives = Arc::new(InMemoryArchiveStore::with_clock(clock.clone()));
        let mut w = world_with(archives.clone(), archives);
        w.clock = clock.clone();
        w.dreamer = Dreamer::new(
            w.core(),
            w.archives.clone(),
            Arc::new(DeterministicDistiller),
        );
        w
    }

    /// A seeded world whose first dream failed after writing its archive: the entry write
    /// fails and so does the compensation's delete, so the archive stays, as when the
    /// archive's own answer was lost and the run could not know it wrote it.
    async fn world_with_a_left_archive() -> World {
        let w = clocked_world();
        seed(&w, 4).await;
        w.store.calls.fail_on("put_entries", 1);
        w.archives.calls.fail_on("delete", 1);
        w.dream(None).await.expect_err("failed after its archive");
        w
    }

    async fn write(w: &World, n: u64) {
        w.store
            .put_entries(&[entry(
                &r(),
                n,
                &format!("Note {n}: ship by Friday"),
                &["ops"],
            )])
            .await
            .expect("write");
    }

    fn sources_in_archives(w: &World) -> Vec<String> {
        let mut ids: Vec<String> = archives_of(w)
            .iter()
            .flat_map(|(_, body)| {
                distill::Archive::from_bytes(body)
                    .expect("archive")
                    .source_ids
            })
            .collect();
        ids.sort();
        ids
    }

    #[tokio::test]
    async fn an_archive_left_by_a_failed_run_is_adopted_by_the_same_dream() {
        let w = world_with_a_left_archive().await;
        assert_eq!(archives_of(&w).len(), 1, "left behind");
        let done = w.dream(None).await.expect("the retry");
        assert_eq!(done.status, "distilled");
        assert!(
            !done.archive_created,
            "adopted: the same digest is the same dream"
        );
        assert_eq!(archives_of(&w).len(), 1);
        assert_eq!(outputs_in(&w.store), 1);
    }

    #[tokio::test]
    async fn an_orphan_archive_is_swept_after_the_grace_and_never_before() {
        let w = world_with_a_left_archive().await;
        let orphan = archives_of(&w)[0].0.clone();
        // A write arrives before the retry: the next dream has another digest, and the first
        // archive is an orphan (no entry, no index line).
        write(&w, 50).await;
        let next = w.dream(None).await.expect("next dream");
        assert_eq!(next.status, "distilled");
        assert_eq!(
            next.orphans_removed, 0,
            "within the grace: a run may be finishing it"
        );
        assert!(archives_of(&w).iter().any(|(k, _)| *k == orphan));
        w.clock.advance_millis(ORPHAN_GRACE_MILLIS);
        let clean = w.dream(None).await.expect("clean pass");
        assert_eq!(clean.status, "nothing-to-distill");
        assert_eq!(clean.orphans_removed, 1);
        let left = archives_of(&w);
        assert_eq!(left.len(), 1, "the distilled archive stays");
        assert!(left.iter().all(|(k, _)| *k != orphan));
        // Every source in exactly one archive.
        let ids = sources_in_archives(&w);
        let mut unique = ids.clone();
        unique.dedup();
        assert_eq!(ids, unique);
        assert_eq!(ids.len(), 5);
    }

    #[tokio::test]
    async fn a_run_interrupted_past_its_index_line_is_finished_not_distilled_again() {
        let w = clocked_world();
        seed(&w, 4).await;
        // Past the pivot: archive, entry and index line are written; the announcement fails.
        w.events.calls.fail_on("publish", 1);
        w.dream(None).await.expect_err("announce failed");
        // A write before the retry, which would otherwise distil the four again beside it.
        write(&w, 50).await;
        let next = w.dream(None).await.expect("retry");
        assert_eq!(next.status, "distilled");
        assert_eq!(next.source_count, 1, "only the new entry");
        let ids = sources_in_archives(&w);
        let mut unique = ids.clone();
        unique.dedup();
        assert_eq!(ids, unique, "no source in two archives");
        assert_eq!(ids.len(), 5);
        assert_eq!(
            w.events.of_type(EventType::MemoryCompacted).len(),
            2,
            "each archive announced once"
        );
        assert_eq!(
            w.dream(None).await.expect("again").status,
            "nothing-to-distill"
        );
    }
}
