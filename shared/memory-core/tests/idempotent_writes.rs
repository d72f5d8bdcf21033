//! Idempotency keys on put and delete (docs/guarantees.md "Idempotent writes") over the in-memory
//! ports: replay, mismatch, in-flight, a crash mid-request, a slow attempt overtaken after its
//! lease.

mod common;

use memory_core::events::EventType;
use memory_core::idempotency::{new_attempt, Claim, IdempotencyKey, KeyClaim, MAX_LEASE_MILLIS};
use memory_core::ports::{EntryStore, PassKind};
use memory_core::{CoreError, StoreError, TenantId, TenantScope, Timestamp};
use serde_json::{json, Value};

use common::{world, World, NOW};

const REF: &str = "workspaces/tenant-a/agents/agent-1/memories";

/// A put's body: `contents` as entries, under idempotency key `key`.
fn body(key: Option<&str>, contents: &[&str]) -> Value {
    let mut v = json!({
        "tenantId": "tenant-a", "runId": "run-1", "memoryRef": REF,
        "entries": contents.iter().map(|c| json!({"content": c, "tags": ["k"]})).collect::<Vec<Value>>(),
        "secrets": [{"secretId": "s", "value": "hunter2-secret"}],
    });
    if let Some(k) = key {
        v["idempotencyKey"] = json!(k);
    }
    v
}

fn written_events(w: &World) -> usize {
    w.ports.events.of_type(EventType::MemoryWritten).len()
}

/// A put of `alpha` under `key`, on a store set to fail it, fails (`failure`) and stores
/// nothing; the failed attempt gives its key back, so a retry at once (not after the lease)
/// stores it once.
async fn the_failed_attempt_gave_its_key_back(w: &World, key: &str, failure: &str) {
    w.put(body(Some(key), &["alpha"])).await.expect_err(failure);
    assert!(w.ports.store.dump().is_empty());
    let out = w
        .put(body(Some(key), &["alpha"]))
        .await
        .expect("the retry proceeds at once, not after the lease");
    assert!(!out.replayed);
    assert_eq!(w.ports.store.dump().len(), 1);
}

#[tokio::test]
async fn a_keyed_retry_stores_once_and_answers_the_same() {
    let w = world();
    let first = w
        .put(body(Some("op-1"), &["alpha", "beta"]))
        .await
        .expect("put");
    assert!(!first.replayed);
    w.ports.clock.advance_millis(5_000);
    let again = w
        .put(body(Some("op-1"), &["alpha", "beta"]))
        .await
        .expect("retry");
    assert!(again.replayed);
    assert_eq!(again.written, first.written, "same ids and createdAt");
    assert_eq!(w.ports.store.dump().len(), 2, "stored once");
    assert_eq!(written_events(&w), 2, "announced once");
    // Without a key, the same request is a new write (documented; the key is the cure).
    w.put(body(None, &["alpha", "beta"])).await.expect("put");
    assert_eq!(w.ports.store.dump().len(), 4);
}

#[tokio::test]
async fn the_same_key_with_another_payload_is_refused() {
    let w = world();
    w.put(body(Some("op-2"), &["alpha"])).await.expect("put");
    let err = w
        .put(body(Some("op-2"), &["something else"]))
        .await
        .expect_err("mismatch");
    assert_eq!(err, CoreError::IdempotencyKeyMismatch);
    assert!(
        !err.to_string().contains("something"),
        "no content in errors"
    );
    assert_eq!(w.ports.store.dump().len(), 1, "nothing written");
    let bad = w
        .put(body(Some("has space"), &["alpha"]))
        .await
        .expect_err("invalid key");
    assert!(matches!(bad, CoreError::Invalid { ref field, .. } if field == "idempotencyKey"));
}

#[tokio::test]
async fn a_repeat_while_the_first_is_in_flight_is_refused_then_served() {
    let w = world();
    let t = TenantId::parse("tenant-a").expect("tenant");
    // Another invocation holds the key (claimed, not finished, lease running).
    let digest_of_same_request = {
        // Learn the request's digest the way the writer records it: run it under a scratch key
        // on a scratch store, then read the record.
        let scratch = world();
        scratch
            .put(body(Some("probe"), &["alpha"]))
            .await
            .expect("put");
        let Claim::Held(rec) = scratch
            .ports
            .store
            .claim_key(&KeyClaim {
                key: IdempotencyKey::parse(&t, "probe").expect("key"),
                payload: String::new(),
                attempt: new_attempt(),
                now: Timestamp::from_millis(NOW),
                lease_until: Timestamp::from_millis(NOW),
                expires_at: Timestamp::from_millis(NOW + 1),
            })
            .await
            .expect("claim")
        else {
            panic!("recorded")
        };
        rec.payload
    };
    let key = IdempotencyKey::parse(&t, "op-3").expect("key");
    let holder = KeyClaim {
        key: key.clone(),
        payload: digest_of_same_request,
        attempt: "other-invocation".into(),
        now: Timestamp::from_millis(NOW),
        lease_until: Timestamp::from_millis(NOW + 30_000),
        expires_at: Timestamp::from_millis(NOW + 86_400_000),
    };
    assert!(matches!(
        w.ports.store.claim_key(&holder).await.expect("claim"),
        Claim::Acquired { .. }
    ));
    let err = w
        .put(body(Some("op-3"), &["alpha"]))
        .await
        .expect_err("in flight");
    assert_eq!(err, CoreError::IdempotencyInFlight);
    assert!(w.ports.store.dump().is_empty());
    // The holder died: after its lease, the retry proceeds, with the ids the holder would
    // have written (derived from the key and the first attempt's instant).
    w.ports.clock.advance_millis(31_000);
    let out = w
        .put(body(Some("op-3"), &["alpha"]))
        .await
        .expect("after the lease");
    assert_eq!(
        out.written[0].id,
        key.entry_id(Timestamp::from_millis(NOW), 0)
    );
    assert_eq!(out.written[0].created_at, Timestamp::from_millis(NOW));
    assert_eq!(w.ports.store.dump().len(), 1);
}

#[tokio::test]
async fn a_crash_mid_request_leaves_nothing_and_the_retry_proceeds() {
    let w = world();
    w.ports.store.calls.fail_on("put_entries", 1);
    the_failed_attempt_gave_its_key_back(&w, "op-4", "the store failed").await;
    // When even the release failed (the process died), the retry waits for the lease.
    w.ports.store.calls.fail_on("put_entries", 1);
    w.ports.store.calls.fail_on("release_key", 1);
    w.put(body(Some("op-5"), &["beta"]))
        .await
        .expect_err("failed");
    assert_eq!(
        w.put(body(Some("op-5"), &["beta"])).await,
        Err(CoreError::IdempotencyInFlight)
    );
    // Locked for the lease's bound and not a millisecond longer (no deadline is known here,
    // so the lease is the bound itself).
    w.ports.clock.advance_millis(MAX_LEASE_MILLIS - 1);
    assert_eq!(
        w.put(body(Some("op-5"), &["beta"])).await,
        Err(CoreError::IdempotencyInFlight)
    );
    w.ports.clock.advance_millis(1);
    w.put(body(Some("op-5"), &["beta"]))
        .await
        .expect("after the lease");
    assert_eq!(w.ports.store.dump().len(), 2);
}

#[tokio::test]
async fn a_claim_whose_answer_was_lost_is_given_back() {
    let w = world();
    // The claim lands and its answer is lost: the attempt fails before it holds the key, and
    // still gives back the claim it cannot know it made.
    w.ports.store.calls.lose_answer_on("claim_key", 1);
    the_failed_attempt_gave_its_key_back(&w, "op-6", "the claim's answer was lost").await;
}

#[tokio::test]
async fn a_release_never_removes_another_attempts_claim() {
    let w = world();
    let key = IdempotencyKey::parse(&TenantId::parse("tenant-a").unwrap(), "op-7").unwrap();
    let now = Timestamp::from_millis(NOW);
    let claim = |attempt: &str| KeyClaim {
        key: key.clone(),
        payload: "p".into(),
        attempt: attempt.into(),
        now,
        lease_until: now.plus_millis(MAX_LEASE_MILLIS),
        expires_at: now.plus_millis(86_400_000),
    };
    assert!(matches!(
        w.ports.store.claim_key(&claim("mine")).await.unwrap(),
        Claim::Acquired { .. }
    ));
    w.ports
        .store
        .release_key(&key, "someone-else")
        .await
        .unwrap();
    assert!(
        matches!(
            w.ports.store.claim_key(&claim("other")).await.unwrap(),
            Claim::Held(r) if r.attempt == "mine"
        ),
        "a release by another attempt id left the claim in place"
    );
}

#[tokio::test]
async fn an_unknown_outcome_is_said_and_the_keyed_retry_settles_it() {
    let w = world();
    // The transaction applies and every answer is lost.
    w.ports.store.calls.lose_answer_on("put_entries", 1);
    let err = w
        .put(body(Some("op-8"), &["alpha"]))
        .await
        .expect_err("answer lost");
    assert!(
        matches!(err, CoreError::Store(StoreError::OutcomeUnknown { .. })),
        "{err:?}"
    );
    assert_eq!(w.ports.store.dump().len(), 1, "it did land");
    let again = w.put(body(Some("op-8"), &["alpha"])).await.expect("retry");
    assert!(again.replayed, "answered from the record");
    assert_eq!(w.ports.store.dump().len(), 1, "never twice");
    // A failure that wrote nothing keeps its "not stored" error.
    w.ports.store.calls.fail_on("put_entries", 1);
    let err = w
        .put(body(Some("op-9"), &["beta"]))
        .await
        .expect_err("failed");
    assert!(
        !matches!(err, CoreError::Store(StoreError::OutcomeUnknown { .. })),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_keyed_delete_answers_the_same_on_retry() {
    let w = world();
    let out = w.put(body(None, &["alpha"])).await.expect("put");
    let id = out.written[0].id.clone();
    assert!(w
        .writer
        .delete("tenant-a", REF, &id, Some("del-1"))
        .await
        .expect("delete"));
    assert!(
        w.writer
            .delete("tenant-a", REF, &id, Some("del-1"))
            .await
            .expect("retry"),
        "the retry gets the first answer, not false"
    );
    assert!(!w
        .writer
        .delete("tenant-a", REF, &id, None)
        .await
        .expect("unkeyed"));
    assert_eq!(
        w.writer
            .delete("tenant-a", REF, "other", Some("del-1"))
            .await,
        Err(CoreError::IdempotencyKeyMismatch)
    );
    assert!(!w
        .writer
        .delete("tenant-a", REF, "missing", Some("del-2"))
        .await
        .expect("absent"));
    assert!(!w
        .writer
        .delete("tenant-a", REF, "missing", Some("del-2"))
        .await
        .expect("absent again"));
}

#[tokio::test]
async fn a_replay_marks_the_ref_its_lost_first_attempt_never_marked() {
    let w = world();
    let memory_ref = TenantScope::new(TenantId::parse("tenant-a").expect("tenant"))
        .admit(REF)
        .expect("ref");
    // The transaction applies, then every answer is lost: the call fails and nothing after the
    // write ran, so the ref is not pending although its entry is stored.
    w.ports.store.calls.lose_answer_on("put_entries", 1);
    w.put(body(Some("op-lost"), &["alpha"]))
        .await
        .expect_err("answer lost");
    assert_eq!(w.ports.store.dump().len(), 1, "the write applied");
    let dream_pending = || async {
        let state = w.ports.store.marker_state(&memory_ref, PassKind::Dream);
        state.await.expect("state").pending
    };
    assert!(!dream_pending().await, "nothing marked the ref");
    // The client's retry is answered from the record and marks the ref for the dream.
    let again = w
        .put(body(Some("op-lost"), &["alpha"]))
        .await
        .expect("retry");
    assert!(again.replayed);
    assert_eq!(w.ports.store.dump().len(), 1, "still one copy");
    assert!(dream_pending().await, "the replay marked the ref");
    // A further replay touches nothing: the ref is already pending.
    let marks = w.ports.store.calls.get("marker_write");
    w.put(body(Some("op-lost"), &["alpha"]))
        .await
        .expect("replay");
    assert_eq!(w.ports.store.calls.get("marker_write"), marks);
}
