//! Behaviour of a planning pass: folding, supersession, corroboration, boundaries, expiry,
//! determinism, idempotency and transaction-sized chunking (openwop-agent-memory.md
//! §"Background consolidation (RFC 0068)", consolidation contract §1-2).

mod common;

use common::{corroboration, entry, run, shuffled, tagged, T0};
use consolidation::{apply, merged_id, plan, ConsolidationError, Entry, MergeKind, Plan, Settings};

fn settings() -> Settings {
    Settings::default()
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn duplicates_are_folded() {
    struct Case {
        name: &'static str,
        entries: Vec<Entry>,
        merges: usize,
        output: usize,
    }
    let cases = vec![
        Case {
            name: "three exact duplicates and a stranger",
            entries: vec![
                entry("a", "User prefers email."),
                entry("b", "user prefers email"),
                entry("c", "USER PREFERS EMAIL"),
                entry("d", "User lives in Paris"),
            ],
            merges: 1,
            output: 2,
        },
        Case {
            name: "two independent duplicate groups",
            entries: vec![
                entry("a", "User prefers email"),
                entry("b", "User lives in Paris"),
                entry("c", "user prefers email"),
                entry("d", "user lives in paris."),
            ],
            merges: 2,
            output: 2,
        },
        Case {
            name: "chain of filler variants folds as one group",
            entries: vec![
                entry("a", "During onboarding the user mentioned the team deploys every Thursday"),
                entry("b", "During onboarding the user also mentioned the team deploys every Thursday"),
                entry("c", "During onboarding the user also mentioned the team actually deploys every Thursday"),
                entry("d", "During onboarding the user also mentioned the team really deploys every Thursday"),
            ],
            merges: 1,
            output: 1,
        },
        Case {
            name: "nothing to do",
            entries: vec![entry("a", "User prefers email"), entry("b", "User prefers phone")],
            merges: 0,
            output: 2,
        },
        Case { name: "empty corpus", entries: vec![], merges: 0, output: 0 },
        Case {
            name: "empty texts are duplicates of each other",
            entries: vec![entry("a", ""), entry("b", "  "), entry("c", "...")],
            merges: 1,
            output: 1,
        },
    ];
    for case in cases {
        let (p, _) = run(&case.entries, &settings());
        assert_eq!(p.merges.len(), case.merges, "{}", case.name);
        assert_eq!(p.output_count, case.output, "{}", case.name);
        assert!(
            p.merges.iter().all(|m| m.kind == MergeKind::Duplicate),
            "{}",
            case.name
        );
    }
}

#[test]
fn duplicate_merge_fields() {
    let entries = vec![
        Entry {
            tags: strings(&["source:chat", "pinned"]),
            created_at_ms: T0 + 50,
            expires_at_ms: Some(T0 + 1_000),
            provenance: strings(&["old-1"]),
            ..entry("b", "user prefers email")
        },
        Entry {
            tags: strings(&["source:mail", "corroborated:2"]),
            created_at_ms: T0 + 10,
            expires_at_ms: Some(T0 + 5_000),
            provenance: strings(&["old-2", "old-3"]),
            ..entry("a", "User prefers phone")
        },
        Entry {
            tags: strings(&["source:chat"]),
            created_at_ms: T0 + 90,
            expires_at_ms: Some(T0 + 2_000),
            ..entry("c", "User prefers email.")
        },
    ];
    // "phone" is another fact than "email", so "a" stays apart.
    let (p, _) = run(&entries, &settings());
    assert_eq!(p.merges.len(), 1);
    let m = &p.merges[0];
    assert_eq!(m.replaced, strings(&["b", "c"]));
    assert_eq!(m.merged.content, "User prefers email.", "longest text wins");
    assert_eq!(m.merged.created_at_ms, T0 + 50, "earliest createdAt");
    assert_eq!(m.merged.expires_at_ms, Some(T0 + 2_000), "latest expiresAt");
    assert_eq!(
        m.merged.tags,
        strings(&["corroborated:2", "pinned", "source:chat"])
    );
    assert_eq!(m.merged.provenance, strings(&["b", "c", "old-1"]));
    assert_eq!(m.merged.subject, None);
}

#[test]
fn duplicate_content_choice_is_the_longest_then_smallest() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["user prefers email", "User prefers email."],
            "User prefers email.",
        ),
        (
            &["User prefers email", "user prefers email"],
            "User prefers email",
        ),
        (
            &["User  prefers   email", "User prefers email"],
            "User  prefers   email",
        ),
        (
            &[
                "The user prefers dark mode",
                "User prefers dark mode!",
                "user prefers dark mode",
            ],
            "The user prefers dark mode",
        ),
    ];
    for (texts, want) in cases {
        let entries: Vec<Entry> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| entry(&format!("e{i}"), t))
            .collect();
        let (p, _) = run(&entries, &settings());
        assert_eq!(p.merges.len(), 1, "{texts:?}");
        assert_eq!(p.merges[0].merged.content, *want, "{texts:?}");
    }
}

#[test]
fn supersession_picks_the_newest() {
    struct Case {
        name: &'static str,
        entries: Vec<Entry>,
        content: &'static str,
        created: i64,
        corroborated: u64,
    }
    let slot = "fact:contact-channel";
    let cases = vec![
        Case {
            name: "newest createdAt wins",
            entries: vec![
                tagged("a", "Prefers email", &[slot], T0 + 1),
                tagged("b", "Prefers phone", &[slot], T0 + 3),
                tagged("c", "Prefers post", &[slot], T0 + 2),
            ],
            content: "Prefers phone",
            created: T0 + 3,
            corroborated: 1,
        },
        Case {
            name: "same millisecond: larger id wins",
            entries: vec![
                tagged("a", "Prefers email", &[slot], T0),
                tagged("b", "Prefers phone", &[slot], T0),
            ],
            content: "Prefers phone",
            created: T0,
            corroborated: 1,
        },
        Case {
            name: "older statements of the winning value corroborate it",
            entries: vec![
                tagged("a", "prefers phone", &[slot], T0 + 1),
                tagged("b", "Prefers email", &[slot], T0 + 2),
                tagged("c", "Prefers phone.", &[slot], T0 + 3),
                tagged("d", "PREFERS PHONE", &[slot, "corroborated:4"], T0),
            ],
            content: "Prefers phone.",
            created: T0 + 3,
            corroborated: 6,
        },
        Case {
            name: "a stale value that was corroborated still loses",
            entries: vec![
                tagged("a", "Prefers email", &[slot, "corroborated:9"], T0 + 1),
                tagged("b", "Prefers phone", &[slot], T0 + 2),
            ],
            content: "Prefers phone",
            created: T0 + 2,
            corroborated: 1,
        },
    ];
    for case in cases {
        let (p, after) = run(&case.entries, &settings());
        assert_eq!(p.merges.len(), 1, "{}", case.name);
        let m = &p.merges[0];
        assert_eq!(m.kind, MergeKind::Supersede, "{}", case.name);
        assert_eq!(m.merged.content, case.content, "{}", case.name);
        assert_eq!(m.merged.created_at_ms, case.created, "{}", case.name);
        assert_eq!(
            corroboration(&m.merged.tags),
            Some(case.corroborated),
            "{}",
            case.name
        );
        assert!(m.merged.tags.contains(&slot.to_string()), "{}", case.name);
        let mut ids: Vec<String> = case.entries.iter().map(|e| e.id.clone()).collect();
        ids.sort();
        assert_eq!(m.replaced, ids, "{}", case.name);
        assert_eq!(m.merged.provenance, ids, "{}", case.name);
        assert_eq!(after.len(), 1, "{}", case.name);
    }
}

#[test]
fn supersede_keeps_only_the_winners_tags_and_agreeing_expiry() {
    let slot = "fact:home-city";
    let entries = vec![
        Entry {
            expires_at_ms: None,
            ..tagged("a", "Lives in Paris", &[slot, "source:old"], T0 + 1)
        },
        Entry {
            expires_at_ms: Some(T0 + 500),
            ..tagged("b", "Lives in London", &[slot, "source:new"], T0 + 9)
        },
        Entry {
            expires_at_ms: Some(T0 + 900),
            ..tagged("c", "lives in london", &[slot, "source:chat"], T0 + 5)
        },
    ];
    let (p, _) = run(&entries, &settings());
    let m = &p.merges[0];
    assert_eq!(m.merged.content, "Lives in London");
    assert_eq!(
        m.merged.tags,
        strings(&["corroborated:2", slot, "source:new"])
    );
    // "a" never expires but is stale: its expiry does not keep London alive forever.
    assert_eq!(m.merged.expires_at_ms, Some(T0 + 900));
}

#[test]
fn fact_slots_are_boundaries() {
    let cases: Vec<(&str, Vec<Entry>, usize)> = vec![
        (
            "same text, different slots",
            vec![
                tagged("a", "Prefers email", &["fact:billing-contact"], T0),
                tagged("b", "Prefers email", &["fact:support-contact"], T0),
            ],
            0,
        ),
        (
            "similar text, different slots",
            vec![
                tagged("a", "User prefers email", &["fact:billing-contact"], T0),
                tagged("b", "User prefers phone", &["fact:support-contact"], T0 + 1),
            ],
            0,
        ),
        (
            "slot entry and slot-less duplicate",
            vec![
                tagged("a", "Prefers email", &["fact:contact"], T0),
                tagged("b", "Prefers email", &[], T0),
            ],
            0,
        ),
        (
            "compound slot vs single slot",
            vec![
                tagged("a", "Prefers email", &["fact:contact", "fact:billing"], T0),
                tagged("b", "Prefers email", &["fact:contact"], T0 + 1),
            ],
            0,
        ),
        (
            "same compound slot, tags in any order",
            vec![
                tagged("a", "Prefers email", &["fact:contact", "fact:billing"], T0),
                tagged(
                    "b",
                    "Prefers phone",
                    &["fact:billing", "fact:contact"],
                    T0 + 1,
                ),
            ],
            1,
        ),
        (
            "empty fact key is an ordinary tag",
            vec![tagged("a", "x", &["fact:"], T0), tagged("b", "X.", &[], T0)],
            1,
        ),
    ];
    for (name, entries, merges) in cases {
        let (p, _) = run(&entries, &settings());
        assert_eq!(p.merges.len(), merges, "{name}");
    }
}

#[test]
fn subjects_are_boundaries() {
    let with_subject = |id: &str, text: &str, subject: Option<&str>| Entry {
        subject: subject.map(str::to_string),
        ..entry(id, text)
    };
    let cases: Vec<(&str, Vec<Entry>, usize)> = vec![
        (
            "different subjects",
            vec![
                with_subject("a", "Prefers email", Some("s1")),
                with_subject("b", "Prefers email", Some("s2")),
            ],
            0,
        ),
        (
            "subject vs none",
            vec![
                with_subject("a", "Prefers email", Some("s1")),
                with_subject("b", "Prefers email", None),
            ],
            0,
        ),
        (
            "same subject",
            vec![
                with_subject("a", "Prefers email", Some("s1")),
                with_subject("b", "prefers email.", Some("s1")),
            ],
            1,
        ),
        (
            "fact slot split by subject",
            vec![
                Entry {
                    subject: Some("s1".into()),
                    ..tagged("a", "email", &["fact:c"], T0)
                },
                Entry {
                    subject: Some("s2".into()),
                    ..tagged("b", "phone", &["fact:c"], T0 + 1)
                },
            ],
            0,
        ),
    ];
    for (name, entries, merges) in cases {
        let (p, _) = run(&entries, &settings());
        assert_eq!(p.merges.len(), merges, "{name}");
        for m in &p.merges {
            let subjects: Vec<&Option<String>> = entries
                .iter()
                .filter(|e| m.replaced.contains(&e.id))
                .map(|e| &e.subject)
                .collect();
            assert!(subjects.iter().all(|s| **s == m.merged.subject), "{name}");
        }
    }
}

#[test]
fn corroboration_is_counted() {
    let cases: Vec<(&str, Vec<Entry>, u64)> = vec![
        (
            "two fresh duplicates",
            vec![entry("a", "x y"), entry("b", "X Y")],
            2,
        ),
        (
            "re-merging an already corroborated entry counts its sources",
            vec![
                tagged("m", "User prefers email", &["corroborated:3"], T0),
                entry("n1", "user prefers email"),
                entry("n2", "User prefers email!"),
            ],
            5,
        ),
        (
            "two corroborated entries",
            vec![
                tagged("m1", "User prefers email", &["corroborated:3"], T0),
                tagged("m2", "user prefers email", &["corroborated:4"], T0),
            ],
            7,
        ),
        (
            "malformed corroboration tags count as one source",
            vec![
                tagged("m1", "User prefers email", &["corroborated:x"], T0),
                tagged("m2", "user prefers email", &["corroborated:0"], T0),
            ],
            2,
        ),
    ];
    for (name, entries, want) in cases {
        let (p, _) = run(&entries, &settings());
        assert_eq!(p.merges.len(), 1, "{name}");
        let m = &p.merges[0];
        assert_eq!(corroboration(&m.merged.tags), Some(want), "{name}");
        assert_eq!(
            m.merged
                .tags
                .iter()
                .filter(|t| t.starts_with("corroborated:"))
                .count(),
            1,
            "{name}"
        );
    }
}

#[test]
fn provenance_accumulates_across_passes() {
    let first = vec![entry("a", "x y z"), entry("b", "X y z")];
    let (_, after) = run(&first, &settings());
    let mut second = after.clone();
    second.push(entry("c", "x Y z."));
    let (p, _) = run(&second, &settings());
    assert_eq!(p.merges.len(), 1);
    let m = &p.merges[0];
    assert_eq!(corroboration(&m.merged.tags), Some(3));
    for id in ["a", "b", "c", after[0].id.as_str()] {
        assert!(m.merged.provenance.contains(&id.to_string()), "{id}");
    }
}

#[test]
fn expiry_rules() {
    let cases: &[(&[Option<i64>], Option<i64>)] = &[
        (&[Some(T0 + 10), Some(T0 + 20)], Some(T0 + 20)),
        (
            &[Some(T0 + 20), Some(T0 + 10), Some(T0 + 15)],
            Some(T0 + 20),
        ),
        (&[Some(T0 + 10), None], None),
        (&[None, Some(T0 + 10)], None),
        (&[None, None], None),
    ];
    for (expiries, want) in cases {
        let entries: Vec<Entry> = expiries
            .iter()
            .enumerate()
            .map(|(i, exp)| Entry {
                expires_at_ms: *exp,
                ..entry(&format!("e{i}"), "User prefers email")
            })
            .collect();
        let (p, _) = run(&entries, &settings());
        assert_eq!(p.merges[0].merged.expires_at_ms, *want, "{expiries:?}");
    }
}

fn mixed_corpus() -> Vec<Entry> {
    let mut entries = vec![
        entry("a1", "User prefers email"),
        entry("a2", "user prefers email."),
        entry("a3", "The user prefers email"),
        entry("b1", "User lives in Paris"),
        entry("b2", "User lives in London"),
        tagged("f1", "Prefers tea", &["fact:drink"], T0 + 5),
        tagged("f2", "Prefers coffee", &["fact:drink"], T0 + 7),
        tagged("f3", "prefers coffee", &["fact:drink"], T0 + 2),
        Entry {
            subject: Some("s1".into()),
            ..entry("s1a", "User prefers email")
        },
        Entry {
            subject: Some("s1".into()),
            ..entry("s1b", "USER PREFERS EMAIL")
        },
        entry("dup", "twin"),
        entry("dup", "twin"),
    ];
    for i in 0..120 {
        entries.push(Entry {
            created_at_ms: T0 + (i % 7),
            ..entry(
                &format!("big{i:03}"),
                "The weekly report goes out on Friday",
            )
        });
    }
    entries
}

#[test]
fn plans_do_not_depend_on_input_order() {
    let entries = mixed_corpus();
    let reference = plan(&entries, &settings());
    assert!(!reference.merges.is_empty());
    for seed in 0..20 {
        let p = plan(&shuffled(&entries, seed), &settings());
        assert_eq!(p, reference, "seed {seed}");
        assert_eq!(format!("{p:?}"), format!("{reference:?}"), "seed {seed}");
    }
    let mut reversed = entries.clone();
    reversed.reverse();
    assert_eq!(plan(&reversed, &settings()), reference);
}

#[test]
fn second_pass_is_a_no_op() {
    let entries = mixed_corpus();
    let (p, after) = run(&entries, &settings());
    // a1-a3, big*, f*, s1*: four groups (big is chunked), the twins are left alone.
    assert!(after.iter().filter(|e| e.id == "dup").count() == 2);
    assert_eq!(p.output_count, after.len());
    let third = plan(&after, &settings());
    assert_eq!(
        third,
        Plan {
            merges: vec![],
            input_count: after.len(),
            output_count: after.len()
        }
    );
}

#[test]
fn entries_with_a_duplicated_id_are_left_alone() {
    let entries = vec![entry("x", "same"), entry("x", "same"), entry("y", "same")];
    let (p, after) = run(&entries, &settings());
    assert!(p.merges.is_empty());
    assert_eq!(after.len(), 3);
}

#[test]
fn a_group_larger_than_a_transaction_is_folded_as_a_tree() {
    let entries: Vec<Entry> = (0..250)
        .map(|i| Entry {
            created_at_ms: T0 + i64::from(i % 13),
            tags: vec![format!("source:{}", i % 3)],
            ..entry(
                &format!("e{i:03}"),
                if i % 2 == 0 {
                    "Likes tea"
                } else {
                    "likes tea."
                },
            )
        })
        .collect();
    let s = settings();
    let (p, after) = run(&entries, &s);
    assert!(p
        .merges
        .iter()
        .all(|m| m.replaced.len() <= consolidation::DEFAULT_MAX_REPLACED_PER_MERGE));
    assert_eq!(
        p.merges.len(),
        4,
        "93 + 93 + 64, then the final merge of three"
    );
    assert_eq!(after.len(), 1);
    assert_eq!(p.output_count, 1);
    let survivor = &after[0];
    assert_eq!(survivor, &p.merges[3].merged.clone());
    assert_eq!(corroboration(&survivor.tags), Some(250));
    assert_eq!(survivor.created_at_ms, T0);
    assert_eq!(
        survivor.tags,
        strings(&["corroborated:250", "source:0", "source:1", "source:2"])
    );
    for i in 0..250 {
        assert!(survivor.provenance.contains(&format!("e{i:03}")));
    }
    // The final merge replaces exactly the intermediate merged entries, which precede it.
    let intermediate: Vec<String> = p.merges[..3].iter().map(|m| m.merged.id.clone()).collect();
    let mut sorted = intermediate.clone();
    sorted.sort();
    assert_eq!(p.merges[3].replaced, sorted);
}

#[test]
fn tree_folding_equals_flat_folding() {
    // With a tiny transaction size the tree is several levels deep; the survivor must equal
    // the survivor of a flat merge except for the intermediate ids in its provenance.
    let slot = "fact:drink";
    let mut entries: Vec<Entry> = Vec::new();
    for i in 0..40i64 {
        let text = match i % 4 {
            0 => "Prefers coffee",
            1 => "prefers tea",
            2 => "Prefers coffee.",
            _ => "PREFERS WATER",
        };
        entries.push(Entry {
            expires_at_ms: Some(T0 + 1_000 + i),
            ..tagged(&format!("s{i:02}"), text, &[slot], T0 + (i * 7) % 40)
        });
        entries.push(Entry {
            expires_at_ms: if i == 17 { None } else { Some(T0 + 5_000 - i) },
            ..tagged(
                &format!("d{i:02}"),
                if i % 2 == 0 { "x y" } else { "X Y!" },
                &[],
                T0 + i,
            )
        });
    }
    let flat = Settings {
        max_replaced_per_merge: 1_000,
        ..settings()
    };
    let (flat_plan, flat_after) = run(&entries, &flat);
    assert_eq!(flat_plan.merges.len(), 2);
    for max in [2usize, 3, 5, 7, 39] {
        let s = Settings {
            max_replaced_per_merge: max,
            ..settings()
        };
        let (p, after) = run(&entries, &s);
        assert!(p.merges.len() > 2, "max {max}");
        assert_eq!(after.len(), 2, "max {max}");
        for (tree, flat) in after.iter().zip(flat_after.iter()) {
            assert_eq!(tree.content, flat.content, "max {max}");
            assert_eq!(tree.tags, flat.tags, "max {max}");
            assert_eq!(tree.created_at_ms, flat.created_at_ms, "max {max}");
            assert_eq!(tree.expires_at_ms, flat.expires_at_ms, "max {max}");
            let originals = |e: &Entry| -> Vec<String> {
                e.provenance
                    .iter()
                    .filter(|id| entries.iter().any(|x| &x.id == *id))
                    .cloned()
                    .collect()
            };
            assert_eq!(originals(tree), originals(flat), "max {max}");
        }
    }
}

#[test]
fn merged_ids_are_deterministic_ulids() {
    let replaced = strings(&["b", "a", "c"]);
    let id = merged_id(T0, &replaced);
    assert_eq!(
        id,
        merged_id(T0, &strings(&["a", "b", "c"])),
        "order independent"
    );
    assert_ne!(id, merged_id(T0, &strings(&["a", "b"])));
    assert_ne!(id, merged_id(T0 + 1, &replaced));
    let ulid = ulid::Ulid::from_string(&id).expect("valid ULID");
    assert_eq!(ulid.timestamp_ms(), T0 as u64);
    // Random part: the first 80 bits of sha256(domain || "a\0b\0c").
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(b"wop-memory/consolidate/v1\0a\0b\0c");
    let mut bytes = [0u8; 16];
    bytes[6..].copy_from_slice(&digest[..10]);
    assert_eq!(ulid.random(), u128::from_be_bytes(bytes));
    assert_eq!(id.len(), 26);
    assert!(id
        .chars()
        .all(|c| "0123456789ABCDEFGHJKMNPQRSTVWXYZ".contains(c)));
    // Out-of-range times clamp instead of wrapping.
    assert_eq!(
        ulid::Ulid::from_string(&merged_id(-5, &replaced)).map(|u| u.timestamp_ms()),
        Ok(0)
    );
    assert_eq!(
        ulid::Ulid::from_string(&merged_id(i64::MAX, &replaced)).map(|u| u.timestamp_ms()),
        Ok((1u64 << 48) - 1)
    );
}

#[test]
fn a_rerun_plans_the_same_ids() {
    let entries = mixed_corpus();
    let a = plan(&entries, &settings());
    let b = plan(&entries.clone(), &settings());
    let ids = |p: &Plan| {
        p.merges
            .iter()
            .map(|m| m.merged.id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&a), ids(&b));
}

#[test]
fn settings_are_sanitised() {
    let entries = vec![
        entry("a", "The user prefers dark mode"),
        entry("b", "User prefers dark mode"),
    ];
    let cases: &[(f64, usize)] = &[(f64::NAN, 0), (1.5, 0), (1.0, 0), (-3.0, 1), (0.6, 1)];
    for (threshold, merges) in cases {
        let s = Settings {
            near_duplicate_threshold: *threshold,
            ..settings()
        };
        assert_eq!(
            plan(&entries, &s).merges.len(),
            *merges,
            "threshold {threshold}"
        );
    }
    let many: Vec<Entry> = (0..5).map(|i| entry(&format!("e{i}"), "same")).collect();
    for max in [0usize, 1, 2] {
        let s = Settings {
            max_replaced_per_merge: max,
            ..settings()
        };
        let (p, after) = run(&many, &s);
        assert!(p.merges.iter().all(|m| m.replaced.len() <= 2), "max {max}");
        assert_eq!(after.len(), 1);
    }
}

#[test]
fn apply_rejects_a_plan_for_another_corpus() {
    let entries = vec![entry("a", "x"), entry("b", "X")];
    let p = plan(&entries, &settings());
    assert_eq!(
        apply(&entries[..1], &p),
        Err(ConsolidationError::ReplacedMissing { merge: 0 })
    );
    let twice = vec![entry("a", "x"), entry("b", "X"), entry("b", "y")];
    assert_eq!(
        apply(&twice, &p),
        Err(ConsolidationError::AmbiguousReplaced { merge: 0 })
    );
    let mut with_merged = entries.clone();
    with_merged.push(p.merges[0].merged.clone());
    assert_eq!(
        apply(&with_merged, &p),
        Err(ConsolidationError::MergedIdExists { merge: 0 })
    );
}

#[test]
fn debug_output_never_contains_entry_text() {
    let secret = "the launch code is hunter2";
    let entries = vec![
        entry("a", secret),
        entry("b", "The launch code is hunter2."),
    ];
    let p = plan(&entries, &settings());
    let text = format!("{p:?} {:?}", entries);
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("bytes"));
}

#[test]
fn a_hostile_class_of_phrasings_is_bounded_and_still_idempotent() {
    // 600 distinct filler arrangements of one sentence (more than the near-duplicate class
    // limit of 512) plus exact copies of two of them: only the exact copies fold.
    let words: Vec<&str> =
        "the quarterly planning review with the platform team takes place in the large room"
            .split(' ')
            .collect();
    let fillers = [
        "really",
        "very",
        "actually",
        "also",
        "quite",
        "indeed",
        "truly",
        "basically",
        "kindly",
        "literally",
    ];
    let mut entries = Vec::new();
    for i in 0..600usize {
        let mut text: Vec<&str> = Vec::new();
        for (pos, w) in words.iter().enumerate() {
            text.push(w);
            if (i >> (pos % 10)) & 1 == 1 {
                text.push(fillers[(i / 7 + pos) % fillers.len()]);
            }
        }
        if i >= 512 {
            text.push(fillers[i % fillers.len()]);
            text.push(fillers[(i / 3) % fillers.len()]);
        }
        entries.push(entry(&format!("v{i:03}"), &text.join(" ")));
    }
    let distinct: std::collections::BTreeSet<String> = entries
        .iter()
        .map(|e| consolidation::normalise(&e.content))
        .collect();
    assert!(distinct.len() > 512, "{} distinct", distinct.len());
    entries.push(entry("copy-a", &entries[0].content.to_uppercase()));
    entries.push(entry("copy-b", &format!("{}.", entries[1].content)));
    let start = std::time::Instant::now();
    let (p, _) = run(&entries, &settings());
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    let exact_groups = 600 - distinct.len() + 2;
    assert_eq!(p.merges.len(), exact_groups, "only exact duplicates fold");
}
