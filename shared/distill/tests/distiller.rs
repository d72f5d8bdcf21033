//! The distiller against RFC 0062 run contract §2 (budget), §3 (SR-1 markers survive) and README
//! §Dreams (folds repeats, keeps recent and corroborated facts, groups by tag, deterministic).

mod common;

use common::*;
use distill::distiller::{min_budget_for, output_reserve, source_tokens, MAX_FACT_CHARS};
use distill::{
    count, DeterministicDistiller, DistillError, DistillInput, Distillation, Distiller,
    SourceEntry, MIN_TOKEN_BUDGET,
};
use proptest::prelude::*;

fn run(sources: Vec<SourceEntry>, token_budget: u32) -> Result<Distillation, DistillError> {
    DeterministicDistiller.distill(&DistillInput {
        sources,
        token_budget,
    })
}

fn summary(sources: Vec<SourceEntry>) -> String {
    match run(sources, 100_000) {
        Ok(d) => d.summary,
        Err(e) => panic!("distill failed: {e}"),
    }
}

/// The accounting invariant: exactly the tokenizer's count of the used inputs plus the summary,
/// and never above the budget.
fn assert_accounting(sources: &[SourceEntry], d: &Distillation, budget: u32) {
    let inputs: usize = sources
        .iter()
        .filter(|s| d.used_source_ids.contains(&s.id))
        .map(|s| count(&s.content))
        .sum();
    assert_eq!(d.input_tokens as usize, inputs);
    assert_eq!(d.output_tokens as usize, count(&d.summary));
    assert_eq!(d.tokens_used as usize, inputs + count(&d.summary));
    assert!(d.tokens_used <= budget, "{} > {budget}", d.tokens_used);
    assert_eq!(d.token_budget, budget);
}

/// Every `[REDACTED:` in `text` opens a whole marker that some source contains verbatim.
fn assert_markers_whole(text: &str, sources: &[SourceEntry]) {
    for (at, _) in text.match_indices("[REDACTED:") {
        let rest = &text[at..];
        let end = rest
            .find(']')
            .unwrap_or_else(|| panic!("unclosed marker in {text:?}"));
        let marker = &rest[..=end];
        let id = &marker["[REDACTED:".len()..marker.len() - 1];
        assert!(
            !id.is_empty()
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._:/@-".contains(&b)),
            "broken marker {marker:?}"
        );
        assert!(
            sources
                .iter()
                .any(|s| s.content.contains(marker) || s.tags.iter().any(|t| t.contains(marker))),
            "marker {marker:?} not from a source"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Folding, ranking, grouping

#[test]
fn folding_and_grouping_table() {
    let cases: Vec<(&str, Vec<SourceEntry>, &str)> =
        vec![
        (
            "repeats fold across case, spacing and trailing punctuation; newest wording wins",
            vec![
                entry("a", "Customer prefers email.", &["preference"], DAY0),
                entry("b", "customer  prefers EMAIL", &["preference"], DAY0 + DAY),
                entry("c", "Customer prefers e-mail", &["preference"], DAY0 + 2 * DAY),
                entry("d", "Customer prefers email!", &["preference"], DAY0 + 3 * DAY),
            ],
            "## preference\n\
             - Customer prefers email! (x3, latest 2026-11-23)\n\
             - Customer prefers e-mail (x1, latest 2026-11-22)\n",
        ),
        (
            "a line repeated inside one entry is one statement",
            vec![entry("a", "Paid invoice 12\nPaid invoice 12\nPaid invoice 12", &[], DAY0)],
            "## (untagged)\n- Paid invoice 12 (x1, latest 2026-11-20)\n",
        ),
        (
            "sections sorted by name, untagged last; majority tag wins, ties to the smaller name",
            vec![
                entry("a", "Ships from Berlin", &["shipping"], DAY0),
                entry("b", "Ships from Berlin", &["shipping", "billing"], DAY0),
                entry("c", "VAT id on file", &["zeta", "billing"], DAY0),
                entry("d", "Likes cats", &[], DAY0),
            ],
            "## billing\n\
             - VAT id on file (x1, latest 2026-11-20)\n\
             ## shipping\n\
             - Ships from Berlin (x2, latest 2026-11-20)\n\
             ## (untagged)\n\
             - Likes cats (x1, latest 2026-11-20)\n",
        ),
        (
            "within a section: weight, then recency, then key",
            vec![
                entry("a", "Old but corroborated", &["t"], DAY0),
                entry("b", "Old but corroborated", &["t"], DAY0),
                entry("c", "Brand new", &["t"], DAY0 + 5 * DAY),
                entry("d", "Also new", &["t"], DAY0 + 5 * DAY),
            ],
            "## t\n\
             - Old but corroborated (x2, latest 2026-11-20)\n\
             - Also new (x1, latest 2026-11-25)\n\
             - Brand new (x1, latest 2026-11-25)\n",
        ),
        (
            "provenance tags never name a section",
            vec![entry("a", "Renewal due in March", &["compacted-from:run-7"], DAY0)],
            "## (untagged)\n- Renewal due in March (x1, latest 2026-11-20)\n",
        ),
        (
            "bullets stripped, blank and punctuation-only lines skipped, headings name sections",
            vec![entry(
                "a",
                "# Contact\n- Call after 5pm\n\n---\n* Mobile preferred\n## (untagged)\nMisc note",
                &["other"],
                DAY0,
            )],
            "## Contact\n\
             - Call after 5pm (x1, latest 2026-11-20)\n\
             - Mobile preferred (x1, latest 2026-11-20)\n\
             ## (untagged)\n\
             - Misc note (x1, latest 2026-11-20)\n",
        ),
        (
            "whitespace and control characters collapse in text and headings",
            vec![entry("a", "Tabs\tand   spaces\u{7}here", &["  my\ttag "], DAY0)],
            "## my tag\n- Tabs and spaces here (x1, latest 2026-11-20)\n",
        ),
    ];
    for (name, sources, expected) in cases {
        assert_eq!(summary(sources), expected, "case: {name}");
    }
}

#[test]
fn distilling_a_summary_again_is_a_fixed_point() {
    let sources = vec![
        entry("a", "Customer prefers email", &["preference"], DAY0),
        entry("b", "Customer prefers email", &["preference"], DAY0 + DAY),
        entry("c", "Invoice 7 overdue", &["billing"], DAY0 + 2 * DAY),
        entry("d", "Met at the fair", &[], DAY0 + 3 * DAY),
    ];
    let first = summary(sources);
    let again = summary(vec![entry(
        "long-term-1",
        &first,
        &["compacted-from:run-1"],
        DAY0 + 4 * DAY,
    )]);
    assert_eq!(again, first);
}

#[test]
fn recursive_counts_add_to_fresh_statements() {
    let earlier = "## preference\n- Customer prefers email (x3, latest 2026-11-20)\n";
    let sources = vec![
        entry("lt", earlier, &["compacted-from:run-1"], DAY0),
        entry(
            "n",
            "customer prefers email.",
            &["preference"],
            DAY0 + 2 * DAY,
        ),
    ];
    assert_eq!(
        summary(sources),
        "## preference\n- customer prefers email. (x4, latest 2026-11-22)\n"
    );
}

#[test]
fn a_tight_summary_keeps_the_most_corroborated_and_the_most_recent() {
    let mut sources: Vec<SourceEntry> = (0..400)
        .map(|i| {
            entry(
                &format!("filler-{i:03}"),
                &format!("Routine note number {i} about ticket {}", 1000 + i),
                &["notes"],
                DAY0 + i64::from(i) * 1_000,
            )
        })
        .collect();
    for i in 0..5 {
        sources.push(entry(
            &format!("pref-{i}"),
            "Customer prefers email",
            &["preference"],
            DAY0 - DAY,
        ));
    }
    sources.push(entry(
        "newest",
        "Customer moved to Lisbon",
        &["contact"],
        DAY0 + 10 * DAY,
    ));
    let budget = 12_000;
    let d = run(sources.clone(), budget).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.used_source_ids.len(), sources.len(), "all inputs fit");
    assert!(
        d.facts_kept < d.facts_found,
        "the summary had to drop facts"
    );
    assert!(d
        .summary
        .contains("- Customer prefers email (x5, latest 2026-11-19)"));
    assert!(d
        .summary
        .contains("- Customer moved to Lisbon (x1, latest 2026-11-30)"));
    // Among the fillers the newest are the ones kept.
    assert!(d.summary.contains("Routine note number 399 "));
    assert!(!d.summary.contains("Routine note number 0 "));
    assert_accounting(&sources, &d, budget);
}

// ---------------------------------------------------------------------------------------------
// Determinism

#[test]
fn shuffled_input_gives_identical_output() {
    let sources = corpus(300, 400, 11);
    let expected = run(sources.clone(), 50_000).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng(99);
    for _ in 0..5 {
        let mut shuffled = sources.clone();
        rng.shuffle(&mut shuffled);
        for s in &mut shuffled {
            rng.shuffle(&mut s.tags);
        }
        assert_eq!(run(shuffled, 50_000), Ok(expected.clone()));
    }
}

#[test]
fn equal_timestamps_break_ties_by_id() {
    let a = vec![
        entry("b", "Second wording", &[], DAY0),
        entry("a", "second wording", &[], DAY0),
    ];
    let mut b = a.clone();
    b.reverse();
    assert_eq!(summary(a.clone()), summary(b));
    assert_eq!(
        summary(a),
        "## (untagged)\n- second wording (x2, latest 2026-11-20)\n"
    );
}

// ---------------------------------------------------------------------------------------------
// Budget

#[test]
fn budget_below_the_floor_fails() {
    let sources = vec![entry("a", "Customer prefers email", &[], DAY0)];
    assert_eq!(
        run(sources.clone(), MIN_TOKEN_BUDGET - 1),
        Err(DistillError::TokenBudgetExceeded {
            needed: MIN_TOKEN_BUDGET,
            budget: MIN_TOKEN_BUDGET - 1
        })
    );
    assert_eq!(
        run(sources.clone(), 0),
        Err(DistillError::TokenBudgetExceeded {
            needed: MIN_TOKEN_BUDGET,
            budget: 0
        })
    );
    let d = run(sources.clone(), MIN_TOKEN_BUDGET).unwrap_or_else(|e| panic!("{e}"));
    assert_accounting(&sources, &d, MIN_TOKEN_BUDGET);
}

#[test]
fn newest_entry_alone_too_large_fails_with_the_exact_needed_budget() {
    let big = "alpha beta gamma delta ".repeat(400);
    let sources = vec![
        entry("old", "small old fact", &[], DAY0),
        entry("new", &big, &[], DAY0 + DAY),
    ];
    let t = source_tokens(&sources[1]);
    let needed = min_budget_for(t);
    assert_eq!(needed, (2 * t - 1).max(MIN_TOKEN_BUDGET));
    assert_eq!(
        run(sources.clone(), needed - 1),
        Err(DistillError::TokenBudgetExceeded {
            needed,
            budget: needed - 1
        })
    );
    let d = run(sources.clone(), needed).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.used_source_ids, vec!["new"]);
    assert_accounting(&sources, &d, needed);
}

#[test]
fn inputs_are_a_newest_first_prefix_of_whole_entries() {
    let body = "one two three four five six seven eight nine ten ".repeat(140);
    let mut sources: Vec<SourceEntry> = (0..6)
        .map(|i| {
            entry(
                &format!("e{i}"),
                &format!("{i} {body}"),
                &[],
                DAY0 + i64::from(i) * DAY,
            )
        })
        .collect();
    // A tiny entry older than a large one: not taken once the large one did not fit.
    sources.push(entry("tiny-oldest", "x", &[], DAY0 - DAY));
    let per = source_tokens(&sources[0]) as u64;
    // Room for exactly three entries' inputs.
    let budget = (3 * per + u64::from(distill::distiller::MAX_SUMMARY_TOKENS)) as u32;
    assert_eq!(
        output_reserve(budget),
        distill::distiller::MAX_SUMMARY_TOKENS
    );
    let d = run(sources.clone(), budget).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.used_source_ids, vec!["e3", "e4", "e5"]);
    assert_eq!(d.newest_source_ms, DAY0 + 5 * DAY);
    assert_accounting(&sources, &d, budget);

    let d = run(sources.clone(), budget - 1).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.used_source_ids, vec!["e4", "e5"]);
}

#[test]
fn empty_and_duplicate_inputs_are_rejected() {
    assert_eq!(run(vec![], 100_000), Err(DistillError::NothingToDistill));
    assert_eq!(
        run(vec![entry("a", "  \n---\n", &[], DAY0)], 100_000),
        Err(DistillError::NothingToDistill)
    );
    assert_eq!(
        run(
            vec![
                entry("a", "one", &[], DAY0),
                entry("a", "two", &[], DAY0 + 1)
            ],
            100_000
        ),
        Err(DistillError::DuplicateSourceId)
    );
}

#[test]
fn errors_carry_no_content() {
    let secret_like = "sk_live_SECRETVALUE_1234567890";
    let sources = vec![entry(
        secret_like,
        &secret_like.repeat(500),
        &[secret_like],
        DAY0,
    )];
    let err = run(sources.clone(), 2_000)
        .err()
        .unwrap_or(DistillError::NothingToDistill);
    assert_eq!(err.code(), "token_budget_exceeded");
    assert!(!format!("{err} {err:?}").contains("SECRET"));
    let dup = run(vec![sources[0].clone(), sources[0].clone()], 100_000);
    assert!(!format!("{dup:?}").contains("SECRET"));
}

#[test]
fn carry_forward_that_overflows_the_budget_fails() {
    let sources = vec![entry("a", "Customer prefers email", &[], DAY0)];
    let d = run(sources.clone(), MIN_TOKEN_BUDGET).unwrap_or_else(|e| panic!("{e}"));
    let redacted = d.summary.replace("email", "[REDACTED:contact-1]");
    let ok = d
        .clone()
        .with_summary(redacted.clone())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ok.summary, redacted);
    assert_eq!(
        ok.tokens_used as usize,
        ok.input_tokens as usize + count(&redacted)
    );
    let huge = "[REDACTED:k] ".repeat(2_000);
    assert!(matches!(
        d.with_summary(huge),
        Err(DistillError::TokenBudgetExceeded { budget, .. }) if budget == MIN_TOKEN_BUDGET
    ));
}

// ---------------------------------------------------------------------------------------------
// SR-1 markers

#[test]
fn truncation_at_the_fact_limit_keeps_markers_whole() {
    for offset in 0..24 {
        // Place a marker across the MAX_FACT_CHARS boundary at varying offsets.
        let lead = "word ".repeat((MAX_FACT_CHARS - 12 + offset) / 5);
        let text = format!("{lead}[REDACTED:api-key.v2] and a tail that is cut");
        let sources = vec![entry("a", &text, &[], DAY0)];
        let s = summary(sources.clone());
        assert!(s.contains('…'), "{s}");
        assert_markers_whole(&s, &sources);
    }
}

#[test]
fn a_first_line_shortened_to_fit_the_budget_keeps_markers_whole() {
    // Egyptian hieroglyphs cost four tokens each, so this 308-character entry (under the fact
    // length limit) costs over 512 tokens; at the smallest accepted budget the output allowance
    // is one token less than the entry, so its line must be shortened — at marker boundaries.
    let unit =
        "[REDACTED:k-1]\u{13000}\u{13000}\u{13000}\u{13000}\u{13000}\u{13000}\u{13000}\u{13000}";
    let content = unit.repeat(14);
    assert!(content.chars().count() < MAX_FACT_CHARS);
    let sources = vec![entry("a", &content, &["t"], DAY0)];
    let t = source_tokens(&sources[0]);
    assert!(t > MIN_TOKEN_BUDGET / 2, "fixture too cheap: {t}");
    let budget = min_budget_for(t);
    let d = run(sources.clone(), budget).unwrap_or_else(|e| panic!("{e}"));
    assert_accounting(&sources, &d, budget);
    assert_markers_whole(&d.summary, &sources);
    let line = d.summary.lines().nth(1).unwrap_or_default();
    let text = line
        .strip_prefix("- ")
        .and_then(|l| l.split(" (x1, latest").next())
        .and_then(|l| l.strip_suffix('…'))
        .unwrap_or_else(|| panic!("line was not shortened: {line}"));
    assert!(!text.is_empty() && text.len() < content.len() && content.starts_with(text));
}

#[test]
fn long_headings_are_cut_outside_markers() {
    let tag = format!("{}[REDACTED:tag-secret]{}", "t".repeat(55), "u".repeat(20));
    let sources = vec![entry("a", "fact", &[&tag], DAY0)];
    let s = summary(sources.clone());
    assert_eq!(
        s.lines().next(),
        Some(format!("## {}…", "t".repeat(55)).as_str())
    );
    assert_markers_whole(&s, &sources);
}

#[test]
fn markers_in_a_corpus_survive_whole() {
    let sources = corpus(500, 400, 5);
    for budget in [MIN_TOKEN_BUDGET, 3_000, 20_000, 200_000] {
        let d = run(sources.clone(), budget).unwrap_or_else(|e| panic!("{e}"));
        assert_markers_whole(&d.summary, &sources);
        assert_accounting(&sources, &d, budget);
    }
}

// ---------------------------------------------------------------------------------------------
// Property: accounting holds for every budget

fn arb_sources() -> impl Strategy<Value = Vec<SourceEntry>> {
    (1_usize..30, 20_usize..600, any::<u64>()).prop_map(|(n, bytes, seed)| corpus(n, bytes, seed))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn tokens_used_is_exact_and_within_budget(sources in arb_sources(), budget in 0_u32..40_000) {
        match run(sources.clone(), budget) {
            Ok(d) => {
                assert_accounting(&sources, &d, budget);
                prop_assert!(u64::from(d.input_tokens) <= u64::from(budget - output_reserve(budget)));
                // The used set is the newest-first prefix.
                let mut order = sources.clone();
                order.sort_by(|a, b| b.created_at_ms.cmp(&a.created_at_ms).then(a.id.cmp(&b.id)));
                let mut prefix: Vec<String> =
                    order.iter().take(d.used_source_ids.len()).map(|s| s.id.clone()).collect();
                prefix.sort();
                prop_assert_eq!(&prefix, &d.used_source_ids);
                assert_markers_whole(&d.summary, &sources);
            }
            Err(DistillError::TokenBudgetExceeded { needed, budget: b }) => {
                prop_assert_eq!(b, budget);
                prop_assert!(needed > budget);
                let ok = run(sources.clone(), needed);
                prop_assert!(ok.is_ok(), "needed budget {} failed: {:?}", needed, ok);
            }
            Err(other) => prop_assert!(false, "unexpected {other:?}"),
        }
    }
}
