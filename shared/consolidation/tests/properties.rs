//! Generated corpora (duplicates, filler variants, near misses, fact slots, subjects,
//! corroborated entries): every plan is valid, order-independent, respects the boundaries, and
//! a second pass is a no-op (openwop-agent-memory.md §"Background consolidation (RFC 0068)",
//! consolidation contract §2).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{run, T0};
use consolidation::normalise::{is_filler, normalise};
use consolidation::tags::{fact_key, source_count};
use consolidation::{plan, Entry, MergeKind, Plan, Settings};
use proptest::prelude::*;

const SUBJECTS: &[&str] = &["Alice", "The customer", "Our user", "Bob"];
const VERBS: &[&str] = &["prefers", "does not like", "asked for", "mentioned"];
const OBJECTS: &[&str] = &[
    "email",
    "phone calls",
    "the weekly report",
    "dark mode",
    "invoices in EUR",
];
const FILLERS: &[&str] = &["really", "the", "also", "very", "actually"];

/// A base fact: a few templates, each slot a distinct fact; numbers make near misses.
fn base_text(base: usize) -> String {
    let s = SUBJECTS[base % SUBJECTS.len()];
    let v = VERBS[(base / 4) % VERBS.len()];
    let o = OBJECTS[(base / 16) % OBJECTS.len()];
    let n = base % 3;
    format!("{s} {v} {o} on ticket {n} from the onboarding call")
}

fn variant(text: &str, ops: u8, filler: usize, pos: usize) -> String {
    let mut words: Vec<String> = text.split(' ').map(str::to_string).collect();
    if ops & 1 != 0 {
        let at = pos % (words.len() + 1);
        words.insert(at, FILLERS[filler % FILLERS.len()].to_string());
    }
    let mut out = words.join(if ops & 2 != 0 { "  " } else { " " });
    if ops & 4 != 0 {
        out = out.to_uppercase();
    }
    if ops & 8 != 0 {
        out.push('.');
    }
    if ops & 16 != 0 {
        out = format!("**{out}**");
    }
    out
}

#[derive(Debug, Clone)]
struct Spec {
    base: usize,
    ops: u8,
    filler: usize,
    pos: usize,
    fact: Option<usize>,
    corroborated: Option<u64>,
    subject: usize,
    created: i64,
    expires: Option<i64>,
    extra_tag: Option<usize>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        (0usize..40, any::<u8>(), 0usize..5, 0usize..16),
        (
            prop::option::weighted(0.25, 0usize..3),
            prop::option::weighted(0.15, 1u64..6),
        ),
        (
            0usize..3,
            0i64..25,
            prop::option::weighted(0.6, 0i64..1_000),
            prop::option::of(0usize..3),
        ),
    )
        .prop_map(
            |(
                (base, ops, filler, pos),
                (fact, corroborated),
                (subject, created, expires, extra_tag),
            )| Spec {
                base,
                ops,
                filler,
                pos,
                fact,
                corroborated,
                subject,
                created,
                expires,
                extra_tag,
            },
        )
}

fn corpus(specs: &[Spec]) -> Vec<Entry> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut tags = Vec::new();
            if let Some(k) = s.fact {
                tags.push(format!("fact:slot-{k}"));
            }
            if let Some(n) = s.corroborated {
                tags.push(format!("corroborated:{n}"));
            }
            if let Some(t) = s.extra_tag {
                tags.push(format!("source:{t}"));
            }
            Entry {
                id: format!("e{i:04}"),
                content: variant(&base_text(s.base), s.ops, s.filler, s.pos),
                tags,
                created_at_ms: T0 + s.created,
                expires_at_ms: s.expires.map(|e| T0 + e),
                subject: match s.subject {
                    0 => None,
                    n => Some(format!("subject-{n}")),
                },
                provenance: Vec::new(),
            }
        })
        .collect()
}

fn fact_set(e: &Entry) -> BTreeSet<&str> {
    e.tags.iter().filter_map(|t| fact_key(t)).collect()
}

fn content_words(text: &str) -> Vec<String> {
    normalise(text)
        .split(' ')
        .filter(|t| !t.is_empty() && !is_filler(t))
        .map(str::to_string)
        .collect()
}

/// For every merge, the input entries it ultimately stands for.
fn originals(entries: &[Entry], p: &Plan) -> Vec<Vec<usize>> {
    let index: BTreeMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id.as_str(), i))
        .collect();
    let mut by_merged: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut out = Vec::new();
    for m in &p.merges {
        let mut members = Vec::new();
        for id in &m.replaced {
            if let Some(inner) = by_merged.get(id) {
                members.extend(inner.iter().copied());
            } else {
                members.push(index[id.as_str()]);
            }
        }
        by_merged.insert(m.merged.id.clone(), members.clone());
        out.push(members);
    }
    out
}

fn non_fact_sources(entries: &[Entry]) -> u64 {
    entries
        .iter()
        .filter(|e| fact_set(e).is_empty())
        .map(|e| source_count(&e.tags))
        .sum()
}

proptest! {
    // 256 cases by default; PROPTEST_CASES=<n> runs more.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    #[test]
    fn plans_are_valid_idempotent_and_respect_boundaries(
        specs in prop::collection::vec(spec(), 0..120),
        max in prop::sample::select(vec![2usize, 3, 5, 98]),
    ) {
        let entries = corpus(&specs);
        let settings = Settings { max_replaced_per_merge: max, ..Settings::default() };
        // Valid, applies, and the second pass is a no-op (asserted inside `run`).
        let (p, after) = run(&entries, &settings);

        // Order independence.
        let mut reversed = entries.clone();
        reversed.reverse();
        prop_assert_eq!(&plan(&reversed, &settings), &p);

        // Boundaries: one subject and one fact-key set per merge; duplicates share content words.
        for (m, members) in p.merges.iter().zip(originals(&entries, &p)) {
            let first = &entries[members[0]];
            for &i in &members {
                prop_assert_eq!(&entries[i].subject, &first.subject);
                prop_assert_eq!(fact_set(&entries[i]), fact_set(first));
                if m.kind == MergeKind::Duplicate {
                    prop_assert_eq!(content_words(&entries[i].content), content_words(&first.content));
                }
            }
            prop_assert_eq!(&m.merged.subject, &first.subject);
        }

        // Duplicate folding conserves the number of corroborating sources.
        prop_assert_eq!(non_fact_sources(&after), non_fact_sources(&entries));

        // Every fact slot ends with exactly one entry.
        let mut slots: BTreeMap<(Option<String>, BTreeSet<&str>), usize> = BTreeMap::new();
        for e in &after {
            let keys = fact_set(e);
            if !keys.is_empty() {
                *slots.entry((e.subject.clone(), keys)).or_default() += 1;
            }
        }
        prop_assert!(slots.values().all(|&n| n == 1));
    }

    #[test]
    fn consolidating_in_two_steps_is_stable(
        first in prop::collection::vec(spec(), 0..60),
        second in prop::collection::vec(spec(), 0..60),
    ) {
        // Consolidate, then new writes arrive, then consolidate again: still valid and the
        // third pass is a no-op.
        let settings = Settings::default();
        let (_, after) = run(&corpus(&first), &settings);
        let mut grown = after.clone();
        grown.extend(corpus(&second).into_iter().map(|mut e| {
            e.id = format!("late-{}", e.id);
            e.created_at_ms += 100;
            e
        }));
        run(&grown, &settings);
    }
}

#[test]
fn the_generator_exercises_every_path() {
    // Guards against a vacuous property test: a typical generated corpus has near and exact
    // duplicates, supersessions and (with a tiny transaction size) tree-folded groups.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let specs = prop::collection::vec(spec(), 110..120)
        .new_tree(&mut runner)
        .expect("generate")
        .current();
    let entries = corpus(&specs);
    let settings = Settings {
        max_replaced_per_merge: 2,
        ..Settings::default()
    };
    let (p, _) = run(&entries, &settings);
    assert!(p.merges.iter().any(|m| m.kind == MergeKind::Duplicate));
    assert!(p.merges.iter().any(|m| m.kind == MergeKind::Supersede));
    let merged_ids: BTreeSet<&str> = p.merges.iter().map(|m| m.merged.id.as_str()).collect();
    assert!(p
        .merges
        .iter()
        .any(|m| m.replaced.iter().any(|id| merged_ids.contains(id.as_str()))));
    let near = p.merges.iter().any(|m| {
        let texts: BTreeSet<String> = entries
            .iter()
            .filter(|e| m.merged.provenance.contains(&e.id))
            .map(|e| normalise(&e.content))
            .collect();
        m.kind == MergeKind::Duplicate && texts.len() > 1
    });
    assert!(near, "no near-duplicate merge");
}
