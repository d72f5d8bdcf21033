//! The consolidation pass over the in-memory ports: outcome tables, zero-write second pass,
//! racing writers, injected store failures, and two tenants with identical texts.

use std::collections::BTreeSet;
use std::sync::Arc;

use consolidation_service::pass::{ConsolidationReport, Consolidator};
use memory_core::derivation::{is_source_digest, source_digests};
use memory_core::events::EventType;
use memory_core::history::is_history;
use memory_core::listing::ListOptions;
use memory_core::model::{StoredEntry, SubjectKey};
use memory_core::ports::{CorePorts, EntryStore, PassKind};
use memory_core::reader::MemoryReader;
use memory_core::tag_filter::TagFilter;
use memory_core::{CoreError, MemoryRef, SecretRegistry, TenantId, TenantScope, Tier, Timestamp};
use memory_testkit::contract::{about, entry, memory_ref, T0};
use memory_testkit::in_memory::{InMemoryEntryStore, ManualClock, RecordingPublisher};

fn long(r: &MemoryRef, n: u64, content: &str, tags: &[&str]) -> StoredEntry {
    let mut e = entry(r, n, content, tags);
    e.tier = Tier::LongTerm;
    e
}

fn tenant(s: &str) -> TenantId {
    TenantId::parse(s).expect("tenant")
}

struct World {
    store: Arc<InMemoryEntryStore>,
    events: Arc<RecordingPublisher>,
    pass: Consolidator,
}

fn world_with(store: Arc<dyn EntryStore>, raw: Arc<InMemoryEntryStore>) -> World {
    let events = Arc::new(RecordingPublisher::new());
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 1_000_000)));
    World {
        pass: Consolidator::new(CorePorts::new(store, events.clone(), clock)),
        store: raw,
        events,
    }
}

fn world() -> World {
    let store = Arc::new(InMemoryEntryStore::new());
    world_with(store.clone(), store)
}

/// A fresh world and the ref most tests write to (tenant `t1`).
fn world_and_ref() -> (World, MemoryRef) {
    (world(), memory_ref(&tenant("t1"), "agent-1"))
}

/// The ref's entries a read would surface (history copies left out).
fn contents(store: &InMemoryEntryStore, r: &MemoryRef) -> Vec<(String, Vec<String>)> {
    let mut v: Vec<(String, Vec<String>)> = store
        .dump()
        .into_iter()
        .filter(|e| &e.memory_ref == r && !is_history(&e.entry.tags))
        .map(|e| (e.entry.content, e.entry.tags))
        .collect();
    v.sort();
    v
}

/// One pass over `r` (tenant t1) with no run secrets.
async fn pass_over(pass: &Consolidator, r: &MemoryRef) -> ConsolidationReport {
    pass.run("t1", &r.to_string(), &no_redaction())
        .await
        .expect("pass")
}

/// The history copies the store holds (`memory_core::history`).
fn history_in(store: &InMemoryEntryStore) -> Vec<StoredEntry> {
    store
        .dump()
        .into_iter()
        .filter(|e| is_history(&e.entry.tags))
        .collect()
}

fn no_redaction() -> memory_core::Redactor {
    SecretRegistry::new().redactor()
}

#[tokio::test]
async fn folds_supersedes_and_counts_corroboration() {
    let (w, r) = world_and_ref();
    let corpus = vec![
        long(&r, 1, "Prefers email follow-up.", &["preference"]),
        long(&r, 2, "prefers  email follow-up", &["contact"]),
        long(&r, 3, "PREFERS EMAIL FOLLOW-UP", &[]),
        long(&r, 4, "Lives in Oslo", &["fact:city"]),
        long(&r, 5, "Lives in Bergen", &["fact:city"]),
        long(&r, 6, "Prefers phone calls", &["fact:channel"]),
        long(&r, 7, "Order 1234 shipped", &[]),
        long(&r, 8, "Order 1235 shipped", &[]),
    ];
    w.store.put_entries(&corpus).await.expect("put");
    let report = pass_over(&w.pass, &r).await;
    assert_eq!((report.input_count, report.output_count), (8, 5));
    let left = contents(&w.store, &r);
    assert_eq!(left.len(), 5, "{left:?}");
    let email = left
        .iter()
        .find(|(c, _)| c.to_lowercase().contains("email"))
        .expect("merged");
    assert!(email.1.contains(&"corroborated:3".to_owned()), "{email:?}");
    assert!(
        email.1.contains(&"preference".to_owned()) && email.1.contains(&"contact".to_owned()),
        "union of tags"
    );
    assert!(
        left.iter().any(|(c, _)| c == "Lives in Bergen"),
        "newest fact wins"
    );
    assert!(
        !left.iter().any(|(c, _)| c == "Lives in Oslo"),
        "stale fact stops surfacing"
    );
    assert!(
        left.iter().any(|(c, _)| c == "Order 1234 shipped")
            && left.iter().any(|(c, _)| c == "Order 1235 shipped")
    );
    let merged = w
        .store
        .dump()
        .into_iter()
        .find(|e| e.entry.content.to_lowercase().contains("email"))
        .expect("merged");
    assert_eq!(
        merged.entry.created_at, corpus[0].entry.created_at,
        "earliest createdAt kept"
    );
    let provenance: BTreeSet<String> = merged.provenance.iter().cloned().collect();
    assert!(corpus[..3].iter().all(|e| provenance.contains(&e.entry.id)));
    // Each source it read is pinned by the digest of the text it had then.
    let digests: BTreeSet<(String, String)> = source_digests(&merged.provenance)
        .map(|(id, d)| (id.to_owned(), d.to_owned()))
        .collect();
    assert!(
        corpus[..3]
            .iter()
            .all(|e| digests.contains(&(e.entry.id.clone(), sha256_hex(&e.entry.content)))),
        "{digests:?}"
    );

    // The stale fact is kept as history: hidden from reads, found by its tags.
    let bergen = w
        .store
        .dump()
        .into_iter()
        .find(|e| e.entry.content == "Lives in Bergen")
        .expect("winner");
    let history = history_in(&w.store);
    assert_eq!(
        history.len(),
        1,
        "only the superseded Oslo entry: {history:?}"
    );
    let oslo = &history[0];
    assert_eq!(oslo.entry.content, "Lives in Oslo");
    assert_eq!(oslo.entry.created_at, corpus[3].entry.created_at);
    assert!(oslo
        .entry
        .tags
        .contains(&format!("superseded-by:{}", bergen.entry.id)));
    assert!(oslo
        .entry
        .tags
        .contains(&format!("history-of:{}", corpus[3].entry.id)));
    assert!(
        oslo.provenance.contains(&corpus[3].entry.id) && oslo.provenance.contains(&bergen.entry.id)
    );
    let reader = MemoryReader::new(
        w.store.clone(),
        Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 2_000_000))),
    );
    let scope = TenantScope::new(tenant("t1"));
    let all = reader
        .list(&scope, &r.to_string(), &ListOptions::default())
        .await
        .expect("list");
    assert!(
        all.entries.iter().all(|e| e.content != "Lives in Oslo"),
        "history stays out of a listing"
    );
    let asked = ListOptions {
        tags: TagFilter::new(vec![format!("superseded-by:{}", bergen.entry.id)], vec![])
            .expect("filter"),
        ..ListOptions::default()
    };
    let found = reader
        .list(&scope, &r.to_string(), &asked)
        .await
        .expect("list history");
    assert_eq!(
        found
            .entries
            .iter()
            .map(|e| e.content.as_str())
            .collect::<Vec<_>>(),
        vec!["Lives in Oslo"]
    );
    let events = w.events.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].event_type, EventType::AgentMemoryConsolidated);
    assert_eq!(events[0].detail["inputCount"], 8);
    assert_eq!(events[0].detail["outputCount"], 5);
    assert!(
        !events[0].detail_json().to_string().contains("email"),
        "content-free"
    );
}

#[tokio::test]
async fn second_pass_makes_no_writes() {
    let (w, r) = world_and_ref();
    let corpus: Vec<StoredEntry> = (0..60)
        .map(|n| long(&r, n, &format!("fact number {} holds", n % 20), &[]))
        .collect();
    w.store.put_entries(&corpus).await.expect("put");
    let first = pass_over(&w.pass, &r).await;
    assert_eq!((first.input_count, first.output_count), (60, 20));
    w.store.calls.reset();
    let second = pass_over(&w.pass, &r).await;
    assert_eq!((second.input_count, second.output_count), (20, 20));
    assert_eq!(
        w.store.calls.writes(),
        0,
        "an unchanged corpus gets no store writes"
    );
    assert_eq!(w.events.events().len(), 1, "no second event either");
}

#[tokio::test]
async fn identical_texts_in_two_tenants_stay_apart() {
    let w = world();
    let ra = memory_ref(&tenant("ta"), "agent-1");
    let rb = memory_ref(&tenant("tb"), "agent-1");
    for r in [&ra, &rb] {
        w.store
            .put_entries(&[long(r, 1, "Same text", &[]), long(r, 2, "same text", &[])])
            .await
            .expect("put");
    }
    w.pass
        .run("ta", &ra.to_string(), &no_redaction())
        .await
        .expect("pass");
    assert_eq!(contents(&w.store, &ra).len(), 1);
    assert_eq!(
        contents(&w.store, &rb).len(),
        2,
        "tenant b untouched by tenant a's pass"
    );
    let foreign = w.pass.run("ta", &rb.to_string(), &no_redaction()).await;
    assert!(
        foreign.is_err(),
        "a pass cannot be pointed at another tenant's ref"
    );
    assert_eq!(contents(&w.store, &rb).len(), 2);
}

#[tokio::test]
async fn merged_text_is_redacted_and_subjects_never_mix() {
    let (w, r) = world_and_ref();
    let a = about("alice", long(&r, 1, "api key sk-live-123456789", &[]));
    let b = about("alice", long(&r, 2, "API key sk-live-123456789", &[]));
    let c = about("bob", long(&r, 3, "api key sk-live-123456789", &[]));
    w.store.put_entries(&[a, b, c]).await.expect("put");
    let mut secrets = SecretRegistry::new();
    secrets
        .register("stripe", "sk-live-123456789")
        .expect("register");
    w.pass
        .run("t1", &r.to_string(), &secrets.redactor())
        .await
        .expect("pass");
    let left = w.store.dump();
    assert_eq!(left.len(), 2, "alice's pair merged, bob's entry separate");
    let merged = left
        .iter()
        .find(|e| !e.provenance.is_empty())
        .expect("merged");
    assert!(
        merged.entry.content.contains("[REDACTED:stripe]")
            && !merged.entry.content.contains("sk-live")
    );
    assert_eq!(
        merged.subject,
        Some(SubjectKey::derive(r.tenant(), "alice"))
    );
}

#[tokio::test]
async fn writes_racing_a_pass_all_survive() {
    let inner = Arc::new(InMemoryEntryStore::new());
    let r = memory_ref(&tenant("t1"), "agent-1");
    let corpus = vec![
        long(&r, 1, "Likes jazz", &[]),
        long(&r, 2, "likes jazz", &[]),
        long(&r, 3, "Lives in Rome", &["fact:city"]),
        long(&r, 4, "Lives in Paris", &["fact:city"]),
    ];
    inner.put_entries(&corpus).await.expect("put");
    let fresh = long(&r, 5, "LIKES JAZZ", &[]);
    // On the pass's first `replace`, a concurrent writer adds a duplicate and changes a source.
    let (victim, racer) = (corpus[0].key(), fresh.clone());
    inner.before_next_replace(move |store| {
        Box::pin(async move {
            store
                .put_entries(std::slice::from_ref(&racer))
                .await
                .expect("racing put");
            let mut changed = store
                .get(&victim)
                .await
                .expect("get")
                .expect("victim exists");
            store.delete(&victim).await.expect("delete");
            changed.entry.tags.push("edited".into());
            store.put_entries(&[changed]).await.expect("racing change");
        })
    });
    let w = world_with(inner.clone(), inner.clone());
    let report = pass_over(&w.pass, &r).await;
    assert_eq!(
        report.merges_skipped, 1,
        "the merge touching the changed entry is skipped: {report:?}"
    );
    let ids: BTreeSet<String> = inner.dump().into_iter().map(|e| e.entry.id).collect();
    assert!(ids.contains(&fresh.entry.id), "the racing write survives");
    assert!(
        ids.contains(&corpus[0].entry.id) && ids.contains(&corpus[1].entry.id),
        "the changed entry and its partner survive"
    );
    assert!(
        inner
            .dump()
            .iter()
            .any(|e| e.entry.tags.contains(&"edited".to_owned())),
        "the change survives"
    );
    // The next pass folds everything that is now stable.
    let again = pass_over(&w.pass, &r).await;
    assert_eq!(again.merges_skipped, 0);
    assert_eq!(
        inner
            .dump()
            .iter()
            .filter(|e| e.entry.content.to_lowercase() == "likes jazz")
            .count(),
        1
    );
}

/// Every source id is either still stored or in the provenance of a stored entry.
fn nothing_lost(store: &InMemoryEntryStore, sources: &[StoredEntry]) {
    let now = store.dump();
    for s in sources {
        let present = now
            .iter()
            .any(|e| e.entry.id == s.entry.id || e.provenance.contains(&s.entry.id));
        assert!(present, "source {} vanished", s.entry.id);
    }
}

#[tokio::test]
async fn a_store_failure_mid_pass_loses_nothing_and_the_rerun_finishes() {
    let r = memory_ref(&tenant("t1"), "agent-1");
    let corpus: Vec<StoredEntry> = (0..30)
        .map(|n| {
            long(
                &r,
                n,
                &format!("statement {} is true", n % 6),
                if n % 10 == 0 { &["x"] } else { &[] },
            )
        })
        .collect();
    let reference = world();
    reference.store.put_entries(&corpus).await.expect("put");
    pass_over(&reference.pass, &r).await;
    let expected = contents(&reference.store, &r);
    for fail_at in 1..=6 {
        let w = world();
        w.store.put_entries(&corpus).await.expect("put");
        w.store.calls.fail_on("replace", fail_at);
        let result = w.pass.run("t1", &r.to_string(), &no_redaction()).await;
        assert!(
            result.is_err(),
            "fault {fail_at} surfaces as an error (the pass is retried)"
        );
        nothing_lost(&w.store, &corpus);
        pass_over(&w.pass, &r).await;
        assert_eq!(
            contents(&w.store, &r),
            expected,
            "after fault {fail_at} the rerun converges"
        );
    }
}

#[tokio::test]
async fn transactional_entries_are_left_alone() {
    let (w, r) = world_and_ref();
    w.store
        .put_entries(&[entry(&r, 1, "same", &[]), entry(&r, 2, "same", &[])])
        .await
        .expect("put");
    let report = pass_over(&w.pass, &r).await;
    assert_eq!((report.input_count, report.merges_applied), (0, 0));
    assert_eq!(w.store.dump().len(), 2);
}

#[tokio::test]
async fn the_consolidated_event_id_names_the_outcome_not_the_clock() {
    // The same store state consolidated at two different instants (a pass delivered twice, the
    // second time later): the events share one id, so consumers dedupe the redelivery.
    let mut ids = Vec::new();
    for at in [T0 + 1_000_000, T0 + 9_000_000] {
        let store = Arc::new(InMemoryEntryStore::new());
        let events = Arc::new(RecordingPublisher::new());
        let pass = Consolidator::new(CorePorts::new(
            store.clone(),
            events.clone(),
            Arc::new(ManualClock::at(Timestamp::from_millis(at))),
        ));
        let r = memory_ref(&tenant("t1"), "agent-1");
        // Writes two entries that fold into one, runs the pass, and returns every event so far.
        let fold = |n: u64, one: &'static str, other: &'static str| {
            let (store, pass, events, r) = (&store, &pass, &events, &r);
            async move {
                let pair = [long(r, n, one, &[]), long(r, n + 1, other, &[])];
                store.put_entries(&pair).await.expect("put");
                pass_over(pass, r).await;
                events.events()
            }
        };
        let first = fold(1, "Prefers email follow-up.", "prefers email follow-up").await;
        assert_eq!(first.len(), 1);
        ids.push(first[0].event_id.clone());
        // Another outcome on the same ref (a later write, another merge) gets another id.
        let both = fold(3, "Lives in Oslo.", "lives in oslo").await;
        assert_eq!(both.len(), 2);
        assert_ne!(
            both[1].event_id, both[0].event_id,
            "another outcome, another id"
        );
    }
    assert_eq!(ids[0], ids[1], "same outcome, same id");
}

fn embedded(r: &MemoryRef, n: u64, content: &str, model: &str, vector: &[f32]) -> StoredEntry {
    let mut e = long(r, n, content, &[]);
    e.embedding = Some(memory_core::model::Embedding {
        model: model.to_owned(),
        vector: vector.to_vec(),
    });
    e
}

/// The embedding stage, with the model configured: a reformulation whose stored vectors are
/// close folds and keeps the survivor's vector; a distinct fact as close as that stays (the fact
/// checks decide); vectors of another model are not compared; a second pass writes nothing.
#[tokio::test]
async fn stored_vectors_propose_merges_that_the_fact_checks_decide() {
    let r = memory_ref(&tenant("t1"), "agent-1");
    let near = [1.0f32, 0.1, 0.0];
    let close = [0.98f32, 0.15, 0.0];
    let corpus = vec![
        embedded(&r, 1, "Javier owns the bakery on Calle Mayor.", "m1", &near),
        embedded(
            &r,
            2,
            "The bakery on Calle Mayor belongs to Javier.",
            "m1",
            &close,
        ),
        embedded(&r, 3, "Oscar is allergic to nuts.", "m1", &near),
        embedded(&r, 4, "Oscar is allergic to tree nuts.", "m1", &close),
        embedded(&r, 5, "Hugo is fluent in Portuguese.", "m2", &near),
        embedded(&r, 6, "Hugo speaks fluent Portuguese.", "m2", &close),
    ];

    // Without a model: the deterministic stages only, nothing here folds.
    let plain = world();
    plain.store.put_entries(&corpus).await.expect("put");
    let report = pass_over(&plain.pass, &r).await;
    assert_eq!(report.merges_applied, 0);

    let w = world();
    let pass = w.pass.clone().with_embedding_model(Some("m1".to_owned()));
    w.store.put_entries(&corpus).await.expect("put");
    let report = pass_over(&pass, &r).await;
    assert_eq!(report.merges_applied, 1, "{report:?}");
    let left: Vec<StoredEntry> = w
        .store
        .dump()
        .into_iter()
        .filter(|e| e.memory_ref == r)
        .collect();
    assert_eq!(left.len(), 5);
    let merged = left
        .iter()
        .find(|e| e.entry.content.contains("Javier"))
        .expect("the bakery fact");
    let source_ids = merged
        .provenance
        .iter()
        .filter(|p| !is_source_digest(p))
        .count();
    assert!(source_ids == 2, "{:?}", merged.provenance);
    assert_eq!(source_digests(&merged.provenance).count(), 2);
    assert_eq!(
        merged.embedding.as_ref().map(|v| v.model.as_str()),
        Some("m1"),
        "the survivor keeps its text's vector"
    );
    for kept in [
        "Oscar is allergic to nuts.",
        "Oscar is allergic to tree nuts.",
        "Hugo is fluent in Portuguese.",
    ] {
        assert!(left.iter().any(|e| e.entry.content == kept), "{kept}");
    }

    let again = pass_over(&pass, &r).await;
    assert_eq!(again.merges_applied, 0);
}

/// A plain-language update supersedes the old statement; the old one is kept as history with
/// the subject, so forgetting the subject removes the current fact and its history alike, and
/// a second pass neither merges the history again nor writes anything.
#[tokio::test]
async fn superseded_statements_stay_as_history_until_forget() {
    let (w, r) = world_and_ref();
    let old = about("office", long(&r, 1, "Our office is in Paris.", &[]));
    let new = about("office", long(&r, 2, "The office moved to Berlin.", &[]));
    w.store
        .put_entries(&[old.clone(), new.clone()])
        .await
        .expect("put");
    let report = pass_over(&w.pass, &r).await;
    assert_eq!(report.merges_applied, 1, "{report:?}");
    assert_eq!(
        contents(&w.store, &r),
        vec![(
            "The office moved to Berlin.".to_owned(),
            vec!["corroborated:1".to_owned()]
        )]
    );
    let history = history_in(&w.store);
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].entry.content, "Our office is in Paris.");
    assert_eq!(history[0].subject, old.subject);

    let writes = w.store.dump();
    let again = pass_over(&w.pass, &r).await;
    assert_eq!(again.merges_applied, 0);
    assert_eq!(w.store.dump(), writes, "the second pass changes nothing");

    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 3_000_000)));
    let forgetter = memory_core::forget::Forgetter::new(CorePorts::new(
        w.store.clone(),
        w.events.clone(),
        clock,
    ));
    let counts = forgetter.forget("t1", "office").await.expect("forget");
    assert_eq!(
        counts.deleted_entries, 2,
        "the current fact and its history"
    );
    assert!(w.store.dump().into_iter().all(|e| e.memory_ref != r));
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    memory_core::model::hex(&sha2::Sha256::digest(text.as_bytes()))
}

/// Two deliveries of one queued pass run at once (at-least-once delivery), interleaving at every
/// store call, with the second starting a different number of steps later in each trial: the
/// merges happen once, and one `agent.memory.consolidated` announces them with the counts of
/// the final state.
#[tokio::test]
async fn two_deliveries_of_one_pass_announce_once_with_the_final_counts() {
    for trial in 0..20 {
        let store = Arc::new(InMemoryEntryStore::racing());
        let r = memory_ref(&tenant("t1"), "agent-1");
        let corpus = vec![
            long(&r, 1, "Likes jazz", &[]),
            long(&r, 2, "likes jazz", &[]),
            long(&r, 3, "LIKES JAZZ", &[]),
            long(&r, 4, "Prefers tea over coffee", &[]),
            long(&r, 5, "prefers tea over coffee", &[]),
            long(&r, 6, "Order 1234 shipped", &[]),
            long(&r, 7, "Lives in Rome", &["fact:city"]),
            long(&r, 8, "Lives in Paris", &["fact:city"]),
        ];
        store.put_entries(&corpus).await.expect("put");
        store
            .mark_pending(&r, PassKind::Consolidate, Timestamp::from_millis(T0))
            .await;
        let w = world_with(store.clone(), store.clone());
        let (raw_ref, none) = (r.to_string(), no_redaction());
        let run = || w.pass.run("t1", &raw_ref, &none);
        let second = async {
            for _ in 0..trial % 7 {
                tokio::task::yield_now().await;
            }
            run().await
        };
        let (a, b) = tokio::join!(run(), second);
        // One delivery runs the job; the other finds it running (and is redelivered later) or
        // done (and answers with its report).
        // A delivery that started after the job finished is a pass over the final state.
        let done: Vec<&ConsolidationReport> = [&a, &b].into_iter().flatten().collect();
        let job = **done
            .iter()
            .max_by_key(|r| r.merges_applied)
            .expect("some delivery ran the job");
        assert!(job.merges_applied > 0, "trial {trial}");
        for r in &done {
            assert!(
                **r == job || (r.merges_applied == 0 && r.output_count == job.output_count),
                "trial {trial}: {a:?} {b:?}"
            );
        }
        for e in [&a, &b].into_iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(e, &CoreError::IdempotencyInFlight, "trial {trial}");
        }
        let a = job;
        // A redelivery after the job finished (the ref no longer pending) merges nothing more.
        let writes = store.calls.get("replace");
        let late = run().await.expect("a late delivery");
        assert_eq!(late.merges_applied, 0, "trial {trial}");
        assert_eq!(late.output_count, a.output_count, "trial {trial}");
        assert_eq!(store.calls.get("replace"), writes, "trial {trial}");
        let live = contents(&store, &r).len();
        let events = w.events.events();
        assert_eq!(events.len(), 1, "trial {trial}: {a:?} {b:?}");
        assert_eq!(events[0].event_type, EventType::AgentMemoryConsolidated);
        assert_eq!(
            events[0].detail["inputCount"],
            corpus.len(),
            "trial {trial}"
        );
        assert_eq!(
            events[0].detail["outputCount"], live,
            "trial {trial}: {a:?} {b:?}"
        );
        assert!(live < corpus.len(), "something was merged");
        // Each merge happened once: one merged entry per group, no duplicate of it.
        let jazz = store
            .dump()
            .into_iter()
            .filter(|e| {
                !is_history(&e.entry.tags) && e.entry.content.eq_ignore_ascii_case("likes jazz")
            })
            .count();
        assert_eq!(jazz, 1, "trial {trial}");
    }
}
