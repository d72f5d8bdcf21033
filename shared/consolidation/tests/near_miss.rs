//! Distinct facts stay apart, true duplicates fold: two labelled tables
//! (openwop-agent-memory.md §"Background consolidation (RFC 0068)"; docs/consolidation.md "The
//! invariant: never lose a fact": distinct facts are never merged).

mod common;

use common::{entry, run};
use consolidation::normalise::{is_near_duplicate, shingle_jaccard};
use consolidation::{plan, Settings, DEFAULT_NEAR_DUPLICATE_THRESHOLD};

/// Pairs stating different facts. Each must stay two entries.
const NEAR_MISSES: &[(&str, &str)] = &[
    // different key word
    ("User prefers email", "User prefers phone"),
    ("User prefers dark mode", "User prefers light mode"),
    ("User lives in Paris", "User lives in London"),
    ("User speaks French", "User speaks German"),
    ("Use the staging database", "Use the production database"),
    ("Feature flag beta-search is enabled", "Feature flag beta-search is disabled"),
    ("User wants the report weekly", "User wants the report monthly"),
    ("Increase the limit to 10", "Decrease the limit to 10"),
    ("User's manager is Dana", "User's manager was Dana"),
    ("User is available in the morning", "User is unavailable in the morning"),
    ("User has two children", "User has three children"),
    (
        "The customer told us on the call that they prefer to be contacted by email for all billing questions",
        "The customer told us on the call that they prefer to be contacted by phone for all billing questions",
    ),
    (
        "Our agreed escalation contact for production incidents at the Berlin office is the on-call infrastructure lead",
        "Our agreed escalation contact for production incidents at the Munich office is the on-call infrastructure lead",
    ),
    // numbers, amounts, units, identifiers
    ("Order 1234 shipped", "Order 1235 shipped"),
    ("The budget is $5,000", "The budget is $50,000"),
    ("Discount is 5%", "Discount is $5"),
    ("Temperature is -5 degrees", "Temperature is 5 degrees"),
    ("Version 3.5 is installed", "Version 35 is installed"),
    ("Password rotates every 30 days", "Password rotates every 90 days"),
    ("Ship to 221B Baker Street", "Ship to 221A Baker Street"),
    ("Store the backups in us-east-1", "Store the backups in us-west-2"),
    ("Send invoices to billing@acme.com", "Send invoices to billing@acme.org"),
    ("Limit is >5", "Limit is <5"),
    ("Meeting moved from 3 to 5", "Meeting moved from 5 to 3"),
    (
        "The user said they would really like to receive the weekly sales report every Friday morning at 9",
        "The user said they would really like to receive the weekly sales report every Friday morning at 10",
    ),
    // negation
    ("User likes tea", "User does not like tea"),
    ("User likes tea", "User doesn't like tea"),
    ("User can attend the meeting", "User cannot attend the meeting"),
    ("User will come to the offsite", "User won't come to the offsite"),
    ("User is vegetarian", "User is not vegetarian"),
    ("User has a dog", "User has no dog"),
    ("User always drinks coffee", "User never drinks coffee"),
    // ("User smokes" then "User no longer smokes" is an update, not a near miss: see
    // plain_language_updates_supersede_only_forward.)
    ("User smokes", "User does not smoke"),
    ("Do not email the user on weekends", "Do email the user on weekends"),
    (
        "The customer confirmed during the renewal call that the legal team has approved the updated data processing agreement",
        "The customer confirmed during the renewal call that the legal team has not approved the updated data processing agreement",
    ),
    // dates and times
    ("Meeting on Monday", "Meeting on Tuesday"),
    ("Deadline is March 3", "Deadline is May 3"),
    ("Flight departs 2024-05-01", "Flight departs 2024-05-02"),
    ("Call me at 3pm", "Call me at 4pm"),
    ("The meeting is at 10:30", "The meeting is at 10:45"),
    ("User works remotely on Fridays", "User works remotely on Thursdays"),
    (
        "The quarterly planning review with the whole platform team takes place in the large meeting room every Monday",
        "The quarterly planning review with the whole platform team takes place in the large meeting room every Tuesday",
    ),
    // qualifiers, extensions, order
    ("User is allergic to nuts", "User is allergic to tree nuts"),
    ("User likes tea", "User likes tea, not coffee"),
    ("Alice paid Bob", "Bob paid Alice"),
    ("User prefers tea over coffee", "User prefers coffee over tea"),
    (
        "User prefers tea in the morning and coffee in the evening",
        "User prefers coffee in the morning and tea in the evening",
    ),
    ("User loves 🍕", "User loves 🍣"),
    // a filler swap in a short sentence is kept apart by the threshold
    ("User is the owner", "User is an owner"),
    ("User eats only fish", "User eats fish"),
];

/// Pairs stating the same fact. Each must fold into one entry.
const MUST_MERGE: &[(&str, &str)] = &[
    ("User prefers email", "user prefers email."),
    ("User prefers email", "  User   prefers\temail\n"),
    ("USER PREFERS EMAIL!", "user prefers email"),
    ("**User prefers email**", "User prefers email"),
    ("(User likes tea)", "\"User likes tea\""),
    ("User likes tea...", "User likes tea"),
    ("User prefers email — not phone", "User prefers email, not phone"),
    ("User doesn't like tea", "User does not like tea"),
    ("User doesn’t like tea", "User doesn't like tea"),
    ("User can't attend", "User cannot attend"),
    ("User’s car is red", "User's car is red"),
    ("Version 3.5 installed.", "version 3.5 installed"),
    ("ÉCOLE PRIMAIRE SAINT-MARTIN", "école primaire saint martin"),
    ("The user prefers dark mode", "User prefers dark mode"),
    ("User prefers email", "The user prefers email."),
    ("User wants invoices by email please", "User wants invoices by email"),
    (
        "User said they would like the weekly report on Friday morning",
        "User said they would really like the weekly report on Friday morning",
    ),
    (
        "The account is actually managed by the finance team in Berlin",
        "The account is really managed by the finance team in Berlin",
    ),
    (
        "User very very much likes green tea in the morning",
        "User very much likes green tea in the morning",
    ),
    (
        "The customer told us on the call that they prefer to be contacted by email for all billing questions",
        "The customer told us on the call that they definitely prefer to be contacted by email for all billing questions.",
    ),
    (
        "During onboarding the user mentioned that the team deploys to production every Thursday after the standup",
        "During onboarding the user also mentioned that the team deploys to production every Thursday after the standup",
    ),
    (
        "Customer Jane Roe (ACME Corp) asked to be invoiced quarterly, in EUR, with PO number 88-1934 on every invoice",
        "customer jane roe acme corp asked to be invoiced quarterly in eur with po number 88-1934 on every invoice",
    ),
];

fn folds(a: &str, b: &str) -> bool {
    let entries = vec![entry("id-a", a), entry("id-b", b)];
    let (p, after) = run(&entries, &Settings::default());
    match p.merges.len() {
        0 => {
            assert_eq!(after.len(), 2);
            false
        }
        1 => {
            assert_eq!(after.len(), 1);
            true
        }
        n => panic!("two entries produced {n} merges"),
    }
}

#[test]
fn near_miss_pairs_stay_apart() {
    assert!(
        NEAR_MISSES.len() >= 30,
        "at least 30 near misses, one per way two facts can look alike"
    );
    for (a, b) in NEAR_MISSES {
        assert!(!folds(a, b), "merged distinct facts: {a:?} / {b:?}");
        assert!(!is_near_duplicate(a, b, DEFAULT_NEAR_DUPLICATE_THRESHOLD));
    }
}

#[test]
fn the_guard_not_the_threshold_keeps_long_near_misses_apart() {
    // Several near misses are textually very similar: a similarity threshold alone would fold
    // them. This pins that the guard is doing real work.
    let above = |t: f64| {
        NEAR_MISSES
            .iter()
            .filter(|(a, b)| shingle_jaccard(a, b) >= t)
            .count()
    };
    let (default, high) = (above(DEFAULT_NEAR_DUPLICATE_THRESHOLD), above(0.8));
    println!("near misses scoring >= default threshold: {default}, >= 0.8: {high}");
    assert!(
        default >= 8,
        "only {default} near misses score >= the default threshold"
    );
    assert!(high >= 4, "only {high} near misses score >= 0.8");
}

#[test]
fn must_merge_pairs_fold() {
    assert!(MUST_MERGE.len() >= 15);
    for (a, b) in MUST_MERGE {
        assert!(folds(a, b), "kept a duplicate apart: {a:?} / {b:?}");
        assert!(is_near_duplicate(a, b, DEFAULT_NEAR_DUPLICATE_THRESHOLD));
    }
}

#[test]
fn near_misses_stay_apart_inside_a_crowded_corpus() {
    // Every near-miss text and every must-merge text in one corpus: each must-merge pair folds,
    // and no merge ever joins the two sides of a near miss.
    let mut entries = Vec::new();
    for (i, (a, b)) in NEAR_MISSES.iter().enumerate() {
        entries.push(entry(&format!("n{i:03}a"), a));
        entries.push(entry(&format!("n{i:03}b"), b));
    }
    for (i, (a, b)) in MUST_MERGE.iter().enumerate() {
        entries.push(entry(&format!("m{i:03}a"), a));
        entries.push(entry(&format!("m{i:03}b"), b));
    }
    let p = plan(&entries, &Settings::default());
    for m in &p.merges {
        for (i, _) in NEAR_MISSES.iter().enumerate() {
            let (ia, ib) = (format!("n{i:03}a"), format!("n{i:03}b"));
            assert!(
                !(m.replaced.contains(&ia) && m.replaced.contains(&ib)),
                "near miss {i} merged"
            );
        }
    }
    for (i, _) in MUST_MERGE.iter().enumerate() {
        let (ia, ib) = (format!("m{i:03}a"), format!("m{i:03}b"));
        assert!(
            p.merges
                .iter()
                .any(|m| m.replaced.contains(&ia) && m.replaced.contains(&ib)),
            "must-merge pair {i} not folded together"
        );
    }
    run(&entries, &Settings::default());
}

#[test]
fn plain_language_updates_supersede_only_forward() {
    use consolidation::MergeKind;
    let at = |id: &str, text: &str, ms: i64| consolidation::Entry {
        created_at_ms: ms,
        ..entry(id, text)
    };
    // The newer text says the older one stopped holding: the newer wins, as a supersession.
    let forward = plan(
        &[
            at("a", "User smokes", 1_000),
            at("b", "User no longer smokes", 2_000),
        ],
        &Settings::default(),
    );
    assert_eq!(forward.merges.len(), 1);
    assert_eq!(forward.merges[0].kind, MergeKind::Supersede);
    assert_eq!(forward.merges[0].merged.content, "User no longer smokes");
    assert_eq!(forward.output_count, 1);
    // A newer plain statement carries no update language: the two stay side by side.
    let backward = plan(
        &[
            at("a", "User no longer smokes", 1_000),
            at("b", "User smokes", 2_000),
        ],
        &Settings::default(),
    );
    assert!(backward.merges.is_empty());
    // A second pass over what the first left is a no-op.
    let survivor = consolidation::Entry {
        provenance: forward.merges[0].merged.provenance.clone(),
        ..forward.merges[0].merged.clone()
    };
    assert!(plan(&[survivor], &Settings::default()).merges.is_empty());
}
