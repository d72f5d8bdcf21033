//! The quota contract (docs/quotas.md "Counters", "Bedrock tokens"), written once and run
//! against the in-memory store and the DynamoDB adapter through `quota_suite!`: a store that
//! keeps entries and their quota counters (`EntryStore + QuotaStore`). Each check uses a fresh
//! tenant whose limits it sets through the port, as an operator does, so it runs against a
//! long-lived emulator; every refusal is preceded by the accepted charges that fill the limit.

use std::sync::Arc;

use memory_core::model::{EntryKey, StoredEntry};
use memory_core::ports::{EntryStore, QuotaStore};
use memory_core::quota::{self, Counter, Limits, Quota, QuotaCheck, Refusal};
use memory_core::{StoreError, Timestamp};

use crate::contract::{entry, fresh_ref, memory_ref, T0};

/// A store of entries that keeps their quota counters.
pub trait QuotaPorts: EntryStore + QuotaStore {}
impl<S: EntryStore + QuotaStore + ?Sized> QuotaPorts for S {}

const AT: Timestamp = Timestamp::from_millis(T0 + 30_000);

fn refusal(result: Result<impl std::fmt::Debug, StoreError>) -> Refusal {
    match result {
        Err(StoreError::QuotaExceeded(r)) => r,
        other => panic!("expected a quota refusal, got {other:?}"),
    }
}

async fn value(store: &dyn QuotaStore, counter: Counter) -> i64 {
    store
        .counters_consistent(std::slice::from_ref(&counter))
        .await
        .expect("counters")[0]
        .1
}

async fn stored(store: &dyn EntryStore, r: &memory_guard::MemoryRef) -> usize {
    crate::contract::first_page(store, r, 100)
        .await
        .entries
        .len()
}

/// Limits come from the defaults with the tenant's override; an override takes effect on the
/// next read and its removal returns the tenant to the defaults.
pub async fn overrides_replace_only_what_they_name<S: QuotaPorts>(store: Arc<S>) {
    let (t, _) = fresh_ref("qlim");
    let before = store.limits(&t).await.expect("limits");
    store
        .set_overrides(
            &t,
            &[(Quota::EntriesPerRef, 3), (Quota::WritesPerMinute, 0)],
        )
        .await
        .expect("override");
    let after = store.limits(&t).await.expect("limits");
    assert_eq!(after.get(Quota::EntriesPerRef), Some(3));
    assert_eq!(after.get(Quota::WritesPerMinute), None, "0 lifts the limit");
    assert_eq!(
        after.get(Quota::SearchesPerMinute),
        before.get(Quota::SearchesPerMinute)
    );
    store.set_overrides(&t, &[]).await.expect("remove");
    assert_eq!(store.limits(&t).await.expect("limits"), before);
}

/// A checked put is refused whole at the limit (entries and counters unchanged), with the quota,
/// the counter and the limit in the refusal; the stored counters count what was stored.
pub async fn a_checked_put_is_refused_whole_at_the_limit<S: QuotaPorts>(store: Arc<S>) {
    let (t, r) = fresh_ref("qput");
    let limits = Limits::unlimited()
        .with(Quota::EntriesPerRef, 3)
        .with(Quota::BytesPerTenant, 1_000);
    for n in 0..3 {
        let e = entry(&r, n, "four", &[]);
        let check = QuotaCheck::for_put(&limits, std::slice::from_ref(&e), AT);
        store
            .put_entries_checked(std::slice::from_ref(&e), None, &check)
            .await
            .expect("within the limit");
    }
    let over = [entry(&r, 3, "four", &[])];
    let check = QuotaCheck::for_put(&limits, &over, AT);
    let refused = refusal(store.put_entries_checked(&over, None, &check).await);
    assert_eq!(
        (refused.quota, refused.current, refused.max),
        (Quota::EntriesPerRef, 3, 3)
    );
    assert_eq!(refused.tenant, t);
    assert_eq!(stored(&*store, &r).await, 3, "nothing of the refused put");
    assert_eq!(value(&*store, Counter::RefEntries(r.clone())).await, 3);
    assert_eq!(value(&*store, Counter::RefBytes(r.clone())).await, 12);
    assert_eq!(value(&*store, Counter::TenantEntries(t.clone())).await, 3);
    assert_eq!(value(&*store, Counter::TenantBytes(t.clone())).await, 12);
    // A put bigger than the whole limit is refused even where no counter exists yet.
    let other = memory_ref(&t, "agent-2");
    let big: Vec<StoredEntry> = (0..4).map(|n| entry(&other, n, "x", &[])).collect();
    let check = QuotaCheck::for_put(&limits, &big, AT);
    let refused = refusal(store.put_entries_checked(&big, None, &check).await);
    assert_eq!((refused.quota, refused.current), (Quota::EntriesPerRef, 0));
    assert_eq!(stored(&*store, &other).await, 0);
}

/// Eight callers race for a windowed limit: exactly the limit is charged, every other charge is
/// refused and leaves the counter alone.
pub async fn racing_charges_take_exactly_the_limit<S: QuotaPorts + 'static>(store: Arc<S>) {
    let (t, _) = fresh_ref("qrace");
    let limits = Limits::unlimited().with(Quota::SearchesPerMinute, 5);
    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (store, t) = (store.clone(), t.clone());
        callers.spawn(async move {
            let mut accepted = 0usize;
            for _ in 0..3 {
                let check = QuotaCheck::for_search(&limits, &t, AT);
                match store.charge(&check).await {
                    Ok(_) => accepted += 1,
                    Err(StoreError::QuotaExceeded(r)) => {
                        assert_eq!((r.quota, r.max), (Quota::SearchesPerMinute, 5));
                        assert!(r.retry_after_seconds <= 60, "{r:?}");
                    }
                    Err(e) => panic!("charge: {e:?}"),
                }
            }
            accepted
        });
    }
    let mut accepted = 0;
    while let Some(done) = callers.join_next().await {
        accepted += done.expect("caller");
    }
    assert_eq!(accepted, 5, "exactly the limit of 24 tries");
    let minute = quota::epoch_minute(AT);
    assert_eq!(value(&*store, Counter::Searches(t, minute)).await, 5);
}

/// Every delete path and a rewrite move the stored counters back.
pub async fn deletes_and_rewrites_return_the_counters<S: QuotaPorts>(store: Arc<S>) {
    let (t, r) = fresh_ref("qdel");
    let entries: Vec<StoredEntry> = (0..4).map(|n| entry(&r, n, "abcde", &[])).collect();
    store.put_entries(&entries).await.expect("put");
    assert_eq!(value(&*store, Counter::RefEntries(r.clone())).await, 4);
    assert!(store.delete(&entries[0].key()).await.expect("delete"));
    assert_eq!(
        store
            .delete_many(&[
                entries[1].key(),
                EntryKey {
                    memory_ref: r.clone(),
                    id: "absent".to_owned()
                }
            ])
            .await
            .expect("delete many"),
        1
    );
    assert_eq!(value(&*store, Counter::RefEntries(r.clone())).await, 2);
    // A merge: two entries become one shorter one.
    let merged = entry(&r, 9, "ab", &[]);
    store
        .replace(std::slice::from_ref(&merged), &entries[2..])
        .await
        .expect("replace");
    assert_eq!(stored(&*store, &r).await, 1);
    assert_eq!(value(&*store, Counter::RefEntries(r.clone())).await, 1);
    assert_eq!(value(&*store, Counter::RefBytes(r.clone())).await, 2);
    assert_eq!(value(&*store, Counter::TenantEntries(t.clone())).await, 1);
    assert_eq!(value(&*store, Counter::TenantBytes(t.clone())).await, 2);
}

/// The recount sets a ref's counters to what it stores and moves the tenant's by the
/// difference, only while they still hold what it read first.
pub async fn a_recount_repairs_behind_its_fence<S: QuotaPorts>(store: Arc<S>) {
    let (t, r) = fresh_ref("qrec");
    store
        .put_entries(&[entry(&r, 0, "abc", &[]), entry(&r, 1, "de", &[])])
        .await
        .expect("put");
    // Drift, as a lost decrement leaves it: two entries and ten bytes too many.
    let drift = QuotaCheck {
        charges: quota::stored_charges(
            &[entry(&r, 7, "12345", &[]), entry(&r, 8, "12345", &[])],
            &[],
            None,
        ),
        at: Some(AT),
    };
    store.charge(&drift).await.expect("drift");
    assert_eq!(value(&*store, Counter::TenantEntries(t.clone())).await, 4);
    // A stale fence changes nothing.
    let stale = quota::Recount {
        memory_ref: r.clone(),
        seen: (2, 5),
        counted: (2, 5),
    };
    assert!(!store.repair(&stale).await.expect("repair"));
    assert_eq!(value(&*store, Counter::RefEntries(r.clone())).await, 4);
    let repaired = quota::recount(&*store, &*store, &r, AT)
        .await
        .expect("recount")
        .expect("off, so repaired");
    assert_eq!((repaired.seen, repaired.counted), ((4, 15), (2, 5)));
    assert_eq!(value(&*store, Counter::RefEntries(r.clone())).await, 2);
    assert_eq!(value(&*store, Counter::RefBytes(r.clone())).await, 5);
    assert_eq!(value(&*store, Counter::TenantEntries(t.clone())).await, 2);
    assert_eq!(value(&*store, Counter::TenantBytes(t.clone())).await, 5);
    assert_eq!(
        quota::recount(&*store, &*store, &r, AT)
            .await
            .expect("recount"),
        None,
        "right now"
    );
}

/// Tokens: admission passes while the day's counter is below the limit; spent tokens are added
/// whatever the limit (the call that crosses completes); the next admission is refused until the
/// UTC day turns.
pub async fn tokens_are_admitted_below_the_limit_only<S: QuotaPorts>(store: Arc<S>) {
    let (t, _) = fresh_ref("qtok");
    let limits = Limits::unlimited().with(Quota::BedrockTokensPerDay, 100);
    let admit = QuotaCheck::before_tokens(&limits, &t, AT);
    store.charge(&admit).await.expect("nothing spent yet");
    store
        .charge(&QuotaCheck::for_tokens(&t, 99, AT))
        .await
        .expect("spent");
    store.charge(&admit).await.expect("99 of 100: admitted");
    store
        .charge(&QuotaCheck::for_tokens(&t, 30, AT))
        .await
        .expect("the crossing call is charged in full");
    let refused = refusal(store.charge(&admit).await);
    assert_eq!(
        (refused.quota, refused.current, refused.max),
        (Quota::BedrockTokensPerDay, 129, 100)
    );
    let rest_of_day = 86_400 - AT.as_millis().rem_euclid(86_400_000) / 1000;
    assert_eq!(i64::from(refused.retry_after_seconds), rest_of_day);
    let tomorrow = Timestamp::from_millis(AT.as_millis() + 86_400_000);
    store
        .charge(&QuotaCheck::before_tokens(&limits, &t, tomorrow))
        .await
        .expect("a new day");
    assert_eq!(
        value(&*store, Counter::Tokens(t.clone(), quota::utc_day(AT))).await,
        129
    );
}

/// Runs every quota contract check against `$store` (an expression giving a future of an
/// `Arc<S>`, `S: EntryStore + QuotaStore`).
#[macro_export]
macro_rules! quota_suite {
    ($store:expr) => {
        $crate::quota_suite!(@each $store; overrides_replace_only_what_they_name,
            a_checked_put_is_refused_whole_at_the_limit, racing_charges_take_exactly_the_limit,
            deletes_and_rewrites_return_the_counters, a_recount_repairs_behind_its_fence,
            tokens_are_admitted_below_the_limit_only);
    };
    (@each $store:expr; $($name:ident),*) => {
        $(
            #[tokio::test]
            async fn $name() {
                $crate::quota_contract::$name($store.await).await;
            }
        )*
    };
}
