//! The distiller against RFC 0062 run contract §2 (budget), §3 (SR-1 markers survive) and
//! docs/dreams.md "Dreams (RFC 0062)" (ranks facts — pinned first, then by information,
//! corroboration and recency — drops duplicates, merges bullets, fills any budget from the floor
//! up, deterministic). What a small budget keeps out of a chat log full of filler, and superseded
//! values, are in `information.rs`.

mod common;

use std::collections::BTreeSet;

use common::*;
use distill::distiller::{source_tokens, MAX_FACT_CHARS};
use distill::{
    count, summary_items, DeterministicDistiller, DistillError, DistillInput, Distillation,
    Distiller, SourceEntry, SummaryItem, MIN_TOKEN_BUDGET,
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

/// An earlier run's summary as the next run reads it: one long-term entry compacted from run 1.
fn earlier_summary(text: &str, at: i64) -> SourceEntry {
    entry("long-term-1", text, &["compacted-from:run-1"], at)
}

/// The accounting invariant: exactly the tokenizer's count of the included inputs plus the
/// summary, and never above the budget.
fn assert_accounting(sources: &[SourceEntry], d: &Distillation, budget: u32) {
    let ids: BTreeSet<&str> = sources.iter().map(|s| s.id.as_str()).collect();
    assert!(d.included_source_ids.windows(2).all(|p| p[0] < p[1]));
    assert!(d
        .included_source_ids
        .iter()
        .all(|id| ids.contains(id.as_str())));
    let inputs: usize = sources
        .iter()
        .filter(|s| d.included_source_ids.contains(&s.id))
        .map(|s| count(&s.content))
        .sum();
    assert_eq!(d.input_tokens as usize, inputs);
    assert_eq!(d.output_tokens as usize, count(&d.summary));
    assert_eq!(d.tokens_used as usize, inputs + count(&d.summary));
    assert!(d.tokens_used <= budget, "{} > {budget}", d.tokens_used);
    assert_eq!(d.token_budget, budget);
    assert!(d.facts_kept >= 1 && d.facts_kept <= d.facts_found);
    assert!(!d.included_source_ids.is_empty());
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
// Folding, merging, grouping

#[test]
fn folding_and_grouping_table() {
    let cases: Vec<(&str, Vec<SourceEntry>, &str)> =
        vec![
        (
            "repeats fold across case, spacing and trailing punctuation; newest wording wins; \
             facts sharing two leading words share a bullet",
            vec![
                entry("a", "Customer prefers email.", &["preference"], DAY0),
                entry("b", "customer  prefers EMAIL", &["preference"], DAY0 + DAY),
                entry("c", "Customer prefers e-mail", &["preference"], DAY0 + 2 * DAY),
                entry("d", "Customer prefers email!", &["preference"], DAY0 + 3 * DAY),
            ],
            "## preference\n\
             - Customer prefers: email! (x3, latest 2026-11-23); e-mail (latest 2026-11-22)\n",
        ),
        (
            "a line repeated inside one entry is one statement",
            vec![entry("a", "Paid invoice 12\nPaid invoice 12\nPaid invoice 12", &[], DAY0)],
            "## (untagged)\n- Paid invoice 12 (latest 2026-11-20)\n",
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
             - VAT id on file (latest 2026-11-20)\n\
             ## shipping\n\
             - Ships from Berlin (x2, latest 2026-11-20)\n\
             ## (untagged)\n\
             - Likes cats (latest 2026-11-20)\n",
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
             - Also new (latest 2026-11-25)\n\
             - Brand new (latest 2026-11-25)\n",
        ),
        (
            "the longest shared word prefix is factored out; one shared word is not enough; a \
             bullet sits where its best fact would",
            vec![
                entry("a", "Alice prefers quiet rooms", &[], DAY0),
                entry("b", "Alice prefers window seats", &[], DAY0 + DAY),
                entry("c", "alice prefers green tea", &[], DAY0 + 2 * DAY),
                entry("d", "Alice works from home on Tuesdays", &[], DAY0 + 3 * DAY),
                entry("e", "Bob asked for the invoice in PDF", &[], DAY0 + 4 * DAY),
                entry("f", "Bob asked for the invoice in print", &[], DAY0 + 4 * DAY),
            ],
            "## (untagged)\n\
             - Bob asked for the invoice in: PDF (latest 2026-11-24); print (latest 2026-11-24)\n\
             - Alice works from home on Tuesdays (latest 2026-11-23)\n\
             - alice prefers: green tea (latest 2026-11-22); window seats (latest 2026-11-21); \
             quiet rooms (latest 2026-11-20)\n",
        ),
        (
            "provenance tags and the pinned flag never name a section",
            vec![entry("a", "Renewal due in March", &["compacted-from:run-7", "Pinned"], DAY0)],
            "## (untagged)\n- Renewal due in March (pinned, latest 2026-11-20)\n",
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
             - Call after 5pm (latest 2026-11-20)\n\
             - Mobile preferred (latest 2026-11-20)\n\
             ## (untagged)\n\
             - Misc note (latest 2026-11-20)\n",
        ),
        (
            "whitespace and control characters collapse in text and headings",
            vec![entry("a", "Tabs\tand   spaces\u{7}here", &["  my\ttag "], DAY0)],
            "## my tag\n- Tabs and spaces here (latest 2026-11-20)\n",
        ),
    ];
    for (name, sources, expected) in cases {
        assert_eq!(summary(sources), expected, "case: {name}");
    }
}

#[test]
fn a_merged_bullet_holds_at_most_eight_facts() {
    let sources: Vec<SourceEntry> = (0..11)
        .map(|i| {
            entry(
                &format!("s{i:02}"),
                &format!("Dana visited site {i}"),
                &[],
                DAY0 + i64::from(i) * DAY,
            )
        })
        .collect();
    let s = summary(sources);
    let bullets: Vec<&str> = s.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(bullets.len(), 2, "{s}");
    assert_eq!(bullets[0].matches("(latest").count(), 8, "{s}");
    assert!(bullets[0].starts_with("- Dana visited site: 10 (latest 2026-11-30); 9 "));
    assert_eq!(bullets[1].matches("(latest").count(), 3, "{s}");
}

#[test]
fn distilling_a_summary_again_is_a_fixed_point() {
    let sources = vec![
        entry("a", "Customer prefers email", &["preference"], DAY0),
        entry("b", "Customer prefers email", &["preference"], DAY0 + DAY),
        entry("c", "Invoice 7 overdue", &["billing"], DAY0 + 2 * DAY),
        entry("d", "Met at the fair", &[], DAY0 + 3 * DAY),
        entry(
            "e",
            "Customer prefers calls after 5pm; never on Fridays",
            &["preference"],
            DAY0 + 3 * DAY,
        ),
        entry(
            "f",
            "customer prefers paper invoices",
            &["preference"],
            DAY0,
        ),
    ];
    let first = summary(sources);
    assert!(
        first.contains("- Customer prefers: email (x2, latest 2026-11-21); calls after 5pm; never on Fridays (latest 2026-11-23); paper invoices (latest 2026-11-20)\n"),
        "{first}"
    );
    let again = summary(vec![earlier_summary(&first, DAY0 + 4 * DAY)]);
    assert_eq!(again, first);
}

#[test]
fn recursive_counts_add_to_fresh_statements() {
    let earlier = "## preference\n\
                   - Customer prefers email (x3, latest 2026-11-20)\n\
                   - Alice prefers: tea (x2, latest 2026-11-19); coffee (latest 2026-11-18)\n";
    let sources = vec![
        entry("lt", earlier, &["compacted-from:run-1"], DAY0),
        entry(
            "n",
            "customer prefers email.",
            &["preference"],
            DAY0 + 2 * DAY,
        ),
        entry("m", "Alice prefers tea", &["preference"], DAY0 + 2 * DAY),
    ];
    assert_eq!(
        summary(sources),
        "## preference\n\
         - customer prefers email. (x4, latest 2026-11-22)\n\
         - Alice prefers: tea (x3, latest 2026-11-22); coffee (latest 2026-11-18)\n"
    );
    // A version 1 summary (`x1` spelled out) reads the same.
    let v1 = "## preference\n- Customer prefers email (x1, latest 2026-11-20)\n";
    assert_eq!(
        summary(vec![entry("lt", v1, &[], DAY0 + DAY)]),
        "## preference\n- Customer prefers email (latest 2026-11-20)\n"
    );
}

/// Distils `earlier` (a summary) as the only source of a run whose budget holds it plus exactly
/// `kept` (a heading and one bullet): what the second summary keeps is the top-ranked fact.
fn redistil_to_one_fact(earlier: &str, kept: &str) -> String {
    let sources = vec![earlier_summary(earlier, DAY0 + 30 * DAY)];
    let budget = u32::try_from(count(earlier) + count(kept)).unwrap_or(u32::MAX);
    let d = run(sources.clone(), budget).unwrap_or_else(|e| panic!("{e}"));
    assert_accounting(&sources, &d, budget);
    assert_eq!(d.facts_kept, 1, "{}", d.summary);
    d.summary
}

#[test]
fn a_pinned_fact_stays_pinned_and_first_through_redistillation() {
    let mut sources = vec![
        // Pinned, but old and stated once: without its pin it ranks last.
        entry(
            "pin",
            "Door code changes monthly",
            &["pinned", "office"],
            DAY0 - 3 * DAY,
        ),
        // The word, and even a whole pinned suffix, in the middle of a fact is text.
        entry(
            "word",
            "Note (pinned, latest 2026-11-01) on the fridge is outdated",
            &["office"],
            DAY0 + 5 * DAY,
        ),
        entry(
            "word-2",
            "The pinned tab (pinned) lists open tickets",
            &["office"],
            DAY0 + 5 * DAY,
        ),
    ];
    for i in 0..3 {
        sources.push(entry(
            &format!("note-{i}"),
            "Note (pinned, latest 2026-11-01) on the fridge is outdated",
            &["office"],
            DAY0 + i64::from(i) * DAY,
        ));
        sources.push(entry(
            &format!("tab-{i}"),
            "The pinned tab (pinned) lists open tickets",
            &["office"],
            DAY0 + i64::from(i) * DAY,
        ));
        sources.push(entry(
            &format!("pref-{i}"),
            "Customer prefers email",
            &["preference"],
            DAY0 + i64::from(i) * DAY,
        ));
    }
    let first = summary(sources);
    // Pinned facts lead their section (and their section leads the summary), whatever their
    // weight and age.
    assert_eq!(
        first,
        "## office\n\
         - Door code changes monthly (pinned, latest 2026-11-17)\n\
         - Note (pinned, latest 2026-11-01) on the fridge is outdated (x4, latest 2026-11-25)\n\
         - The pinned tab (pinned) lists open tickets (x4, latest 2026-11-25)\n\
         ## preference\n\
         - Customer prefers email (x3, latest 2026-11-22)\n"
    );
    let items = summary_items(&first);
    let pinned: Vec<(&str, bool)> = items.iter().map(|i| (i.text.as_str(), i.pinned)).collect();
    assert_eq!(
        pinned,
        vec![
            ("Door code changes monthly", true),
            (
                "Note (pinned, latest 2026-11-01) on the fridge is outdated",
                false
            ),
            ("The pinned tab (pinned) lists open tickets", false),
            ("Customer prefers email", false),
        ]
    );

    // Room for one fact: the pinned one, though every other fact is newer, and one of them (a
    // later line of the same summary) as informative and no dearer.
    let pinned_only = "## office\n- Door code changes monthly (pinned, latest 2026-11-17)\n";
    let rival = "## office\n- Alarm code rotates weekly (latest 2026-11-25)\n";
    let with_rival = format!("{first}{rival}");
    assert_eq!(redistil_to_one_fact(&with_rival, pinned_only), pinned_only);
    // And again: the mark carries on.
    let again = redistil_to_one_fact(pinned_only, pinned_only);
    assert_eq!(again, pinned_only);

    // Control: without the mark (a version 2 summary of the same facts) the fact is not pinned
    // and the rival takes the room.
    let unmarked = with_rival.replace(" (pinned, latest 2026-11-17)", " (latest 2026-11-17)");
    let lost = redistil_to_one_fact(&unmarked, pinned_only);
    assert_eq!(lost, rival);

    // A large budget gives the summary back unchanged, marks included.
    let fixed = summary(vec![earlier_summary(&first, DAY0 + 30 * DAY)]);
    assert_eq!(fixed, first);
}

#[test]
fn a_merged_bullet_keeps_each_items_pin() {
    let sources = vec![
        entry(
            "tea",
            "Alice prefers green tea",
            &["pinned", "preference"],
            DAY0,
        ),
        entry(
            "coffee-1",
            "Alice prefers black coffee",
            &["preference"],
            DAY0 + DAY,
        ),
        entry(
            "coffee-2",
            "Alice prefers black coffee",
            &["preference"],
            DAY0 + 2 * DAY,
        ),
        entry(
            "seats",
            "Alice prefers window seats",
            &["preference"],
            DAY0 + 2 * DAY,
        ),
        entry(
            "water",
            "Alice prefers sparkling water",
            &["preference", "PINNED"],
            DAY0 + DAY,
        ),
        entry(
            "water-2",
            "Alice prefers sparkling water",
            &["preference"],
            DAY0 + 2 * DAY,
        ),
    ];
    let first = summary(sources);
    // Pinned items lead the bullet, then weight and recency as for any fact.
    assert_eq!(
        first,
        "## preference\n\
         - Alice prefers: sparkling water (pinned, x2, latest 2026-11-22); \
         green tea (pinned, latest 2026-11-20); black coffee (x2, latest 2026-11-22); \
         window seats (latest 2026-11-22)\n"
    );
    let items: Vec<(String, u32, bool)> = summary_items(&first)
        .into_iter()
        .map(|i| (i.text, i.weight, i.pinned))
        .collect();
    assert_eq!(
        items,
        vec![
            ("Alice prefers sparkling water".to_owned(), 2, true),
            ("Alice prefers green tea".to_owned(), 1, true),
            ("Alice prefers black coffee".to_owned(), 2, false),
            ("Alice prefers window seats".to_owned(), 1, false),
        ]
    );
    // Room for one fact: a pinned item, not the unpinned black coffee, newer and corroborated.
    // Of the two pinned ones the line stated once wins: over a run of six statements a line
    // stated twice already says less each time (module docs, "Ranking").
    let tea = "## preference\n- Alice prefers green tea (pinned, latest 2026-11-20)\n";
    assert_eq!(redistil_to_one_fact(&first, tea), tea);
    // Unchanged at a large budget.
    assert_eq!(
        summary(vec![entry("lt", &first, &[], DAY0 + 30 * DAY)]),
        first
    );
}

#[test]
fn a_version_2_summary_still_reads_back() {
    // Written by version 2: no pinned marks, `xN` from two on, merged bullets.
    let v2 = "## preference\n\
              - Customer prefers email (x3, latest 2026-11-20)\n\
              - Alice prefers: window seats (x2, latest 2026-11-18); tea (latest 2026-11-19)\n\
              ## (untagged)\n\
              - Order 48213 shipped late (latest 2026-11-19)\n";
    let item = |section: Option<&str>, text: &str, weight: u32, latest_ms: i64| SummaryItem {
        section: section.map(str::to_owned),
        text: text.to_owned(),
        weight,
        latest_ms: Some(latest_ms),
        pinned: false,
        superseded: false,
    };
    let pref = Some("preference");
    assert_eq!(
        summary_items(v2),
        vec![
            item(pref, "Customer prefers email", 3, DAY0),
            item(pref, "Alice prefers window seats", 2, DAY0 - 2 * DAY),
            item(pref, "Alice prefers tea", 1, DAY0 - DAY),
            item(None, "Order 48213 shipped late", 1, DAY0 - DAY),
        ]
    );
    // Distilled again it comes back as it was (version 3 writes unpinned facts the same way),
    // its counts adding to fresh statements.
    assert_eq!(summary(vec![entry("lt", v2, &[], DAY0 + DAY)]), v2);
    let d = summary(vec![
        entry("lt", v2, &[], DAY0 + DAY),
        entry(
            "n",
            "Customer prefers email",
            &["preference", "pinned"],
            DAY0 + 2 * DAY,
        ),
    ]);
    assert!(
        d.contains("- Customer prefers email (pinned, x4, latest 2026-11-22)\n"),
        "{d}"
    );
}

// ---------------------------------------------------------------------------------------------
// Ranking

#[test]
fn a_tight_summary_keeps_pinned_then_corroborated_recent_and_unique_facts() {
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
    sources.push(entry(
        "pinned",
        "Door code changes monthly",
        &["pinned", "office"],
        DAY0 - 3 * DAY,
    ));
    let budget = 600;
    let d = run(sources.clone(), budget).unwrap_or_else(|e| panic!("{e}"));
    assert_accounting(&sources, &d, budget);
    assert!(
        d.facts_kept < d.facts_found,
        "the summary had to drop facts"
    );
    let s = &d.summary;
    assert!(
        s.contains("## office\n- Door code changes monthly (pinned, latest 2026-11-17)\n"),
        "{s}"
    );
    assert!(
        s.contains("- Customer prefers email (x5, latest 2026-11-19)\n"),
        "{s}"
    );
    assert!(
        s.contains("- Customer moved to Lisbon (latest 2026-11-30)\n"),
        "{s}"
    );
    // Among the fillers the newest are the ones kept, merged under their shared words.
    assert!(
        s.contains(
            "- Routine note number: 399 about ticket 1399 (latest 2026-11-20); \
             398 about ticket 1398 (latest 2026-11-20); "
        ),
        "{s}"
    );
    let ids = &d.included_source_ids;
    for id in ["pinned", "pref-0", "newest", "filler-399"] {
        assert!(ids.contains(&id.to_owned()), "{id} not in {ids:?}");
    }
    // One statement of a fact is quoted (the newest; ties by id), its duplicates only counted.
    assert!(!ids.contains(&"pref-4".to_owned()));
    assert!(!ids.contains(&"filler-000".to_owned()));
    assert_eq!(ids.len() as u32, d.facts_kept, "{ids:?}");
}

#[test]
fn a_fact_that_does_not_fit_is_skipped_and_cheaper_ones_still_fill() {
    let big = "alpha beta gamma delta ".repeat(200);
    let mut sources = vec![
        entry("pin", "Gate code is 4411", &["pinned"], DAY0),
        // Informative, so ranked next — but each statement costs ~800 input tokens.
        entry(
            "big-1",
            &format!("Contract renews yearly\n{big}"),
            &[],
            DAY0 + DAY,
        ),
        entry(
            "big-2",
            &format!("Contract renews yearly\n{big}"),
            &[],
            DAY0 + DAY,
        ),
    ];
    // Cheaper facts, each its own.
    const SMALL: &[&str] = &[
        "Parking permit renewed for the Lisbon visit",
        "Invoice copies go to accounting by post",
        "Warehouse closes early on public holidays",
        "Printer toner reorder threshold lowered",
        "Staging database restored from Sunday backup",
        "Quarterly review moved to the boardroom",
        "Courier pickup window starts at eleven",
        "Spare laptop chargers sit in locker nine",
    ];
    for (i, text) in SMALL.iter().enumerate() {
        sources.push(entry(&format!("small-{i:02}"), text, &[], DAY0 + i as i64));
    }
    // And boilerplate: one line stamped twenty times with another number.
    for i in 0..20 {
        sources.push(entry(
            &format!("visitor-{i:02}"),
            &format!("Visitor {i} signed in at reception"),
            &[],
            DAY0 + i64::from(i),
        ));
    }
    let d = run(sources.clone(), 300).unwrap_or_else(|e| panic!("{e}"));
    assert_accounting(&sources, &d, 300);
    assert!(!d.summary.contains("Contract renews"), "{}", d.summary);
    assert!(d.summary.contains("Gate code is 4411"));
    assert!(d.facts_kept >= 6, "{}", d.summary);
    assert!(!d.included_source_ids.iter().any(|id| id.starts_with("big")));
    // Leftover room goes to facts at least half as informative as the one left out, never to
    // boilerplate.
    assert!(!d.summary.contains("Visitor"), "{}", d.summary);
    // With room for everything but the dear fact, the boilerplate comes in last.
    let d = run(sources.clone(), 1_000).unwrap_or_else(|e| panic!("{e}"));
    assert!(!d.summary.contains("Contract renews"), "{}", d.summary);
    assert!(!d.summary.contains("Visitor"), "{}", d.summary);
    let d = run(sources.clone(), 4_000).unwrap_or_else(|e| panic!("{e}"));
    assert!(d.summary.contains("Contract renews"), "{}", d.summary);
    assert!(d.summary.contains("Visitor"), "{}", d.summary);
}

/// 100 short entries (8-15 words): 70 distinct statements, three corroborated ones (stated
/// 5, 4 and 3 times, the oldest in the set), two pinned ones among the oldest, and 3 more
/// duplicates: the set every ranking rule of the distiller is checked on.
fn hundred_short_entries() -> Vec<SourceEntry> {
    const PEOPLE: &[&str] = &[
        "Amelia", "Bruno", "Chiara", "Dmitri", "Esther", "Farid", "Greta", "Hiro", "Ines", "Jonas",
    ];
    const THINGS: &[&str] = &[
        "asked for the quarterly invoice to be resent by post",
        "booked the large meeting room for Thursday afternoon next week",
        "reported that the staging server was slow again this morning",
        "wants the onboarding checklist translated into Portuguese before Friday",
        "confirmed the vendor contract renewal at the same monthly price",
        "moved the weekly design review to Wednesdays at ten",
        "needs a parking permit for the Lisbon office visit",
    ];
    let mut rng = Rng(17);
    let mut sources = Vec::new();
    for i in 0..70_usize {
        let who = PEOPLE[i % PEOPLE.len()];
        let what = THINGS[(i / PEOPLE.len()) % THINGS.len()];
        sources.push(entry(
            &format!("n{i:03}"),
            &format!("{who} {what}"),
            &[["people", "office", "ops"][rng.below(3)]],
            DAY0 + 10 * DAY + i as i64 * 3_600_000,
        ));
    }
    let corroborated = [
        (
            "Customer Acme prefers email over phone calls for all billing questions",
            5,
        ),
        (
            "The backup job runs nightly at two and takes about forty minutes",
            4,
        ),
        (
            "Office wifi password rotates on the first Monday of each month",
            3,
        ),
    ];
    for (text, times) in corroborated {
        for k in 0..times {
            sources.push(entry(
                &format!("c{:03}", sources.len()),
                text,
                &["billing"],
                DAY0 + k as i64 * DAY,
            ));
        }
    }
    sources.push(entry(
        "pin-1",
        "Never schedule anything for Greta on Friday afternoons, she is on leave",
        &["pinned", "people"],
        DAY0,
    ));
    sources.push(entry(
        "pin-2",
        "The fire drill meeting point is the car park behind building B",
        &["pinned"],
        DAY0,
    ));
    while sources.len() < 100 {
        let again = sources[rng.below(70)].clone();
        let id = format!("d{:03}", sources.len());
        sources.push(SourceEntry {
            id,
            created_at_ms: again.created_at_ms + 60_000,
            ..again
        });
    }
    sources
}

#[test]
fn budget_256_over_100_short_entries_keeps_the_highest_ranked_facts() {
    let sources = hundred_short_entries();
    assert_eq!(sources.len(), 100);
    for s in &sources {
        let words = s.content.split_whitespace().count();
        assert!((8..=15).contains(&words), "{words}: {}", s.content);
    }
    let d = run(sources.clone(), 256).unwrap_or_else(|e| panic!("{e}"));
    assert_accounting(&sources, &d, 256);
    let s = &d.summary;
    // The pinned facts first, then the most corroborated.
    assert!(s.contains("Never schedule anything for Greta on Friday afternoons, she is on leave (pinned, latest 2026-11-20)"), "{s}");
    assert!(
        s.contains(
            "The fire drill meeting point is the car park behind building B (pinned, latest 2026-11-20)"
        ),
        "{s}"
    );
    assert!(s.contains("Customer Acme prefers email over phone calls for all billing questions (x5, latest 2026-11-24)"), "{s}");
    // Sources included: for each statement in the summary, its newest source (ties: the smaller
    // id). No two statements here share their first two words, so none is merged and each shows
    // whole.
    let mut quoted: BTreeSet<String> = BTreeSet::new();
    for src in &sources {
        if !s.contains(&format!("- {} (", src.content)) {
            continue;
        }
        let newest = sources
            .iter()
            .filter(|o| o.content == src.content)
            .max_by(|a, b| {
                a.created_at_ms
                    .cmp(&b.created_at_ms)
                    .then_with(|| b.id.cmp(&a.id))
            })
            .map(|o| o.id.clone());
        quoted.extend(newest);
    }
    assert_eq!(
        d.included_source_ids,
        quoted.into_iter().collect::<Vec<_>>()
    );
    assert_eq!(d.included_source_ids.len() as u32, d.facts_kept);
    assert!(d.facts_kept >= 6, "{s}");
}

#[test]
fn coverage_grows_with_the_budget_and_never_exceeds_it() {
    let sources = hundred_short_entries();
    let mut last = (0, 0);
    // The top fact is pinned (Greta's, the more informative of the two pinned ones): its entry
    // (16 tokens), its heading `## people` (3) and its bullet cut to one character, `- N…
    // (pinned, latest …)` (16, the mark 3 of them), make 35, just over the floor; so the floor
    // fails with the failure rule's `needed` and every budget from there on works.
    let mut budget = match run(sources.clone(), MIN_TOKEN_BUDGET) {
        Ok(_) => MIN_TOKEN_BUDGET,
        Err(DistillError::TokenBudgetExceeded { needed, budget }) => {
            assert_eq!(budget, MIN_TOKEN_BUDGET);
            assert_eq!(needed, 35);
            needed
        }
        Err(e) => panic!("floor: {e}"),
    };
    while budget <= 8_192 {
        let d = run(sources.clone(), budget).unwrap_or_else(|e| panic!("{budget}: {e}"));
        assert_accounting(&sources, &d, budget);
        let now = (d.included_source_ids.len(), d.facts_kept as usize);
        assert!(
            now.0 >= last.0 && now.1 >= last.1,
            "budget {budget}: {now:?} after {last:?}"
        );
        last = now;
        budget += budget / 4;
    }
    // A large budget keeps every fact: 75 distinct statements, each quoting one source.
    assert_eq!(last, (75, 75));
}

// ---------------------------------------------------------------------------------------------
// Determinism

#[test]
fn shuffled_input_gives_identical_output() {
    let sources = corpus(300, 400, 11);
    let expected = run(sources.clone(), 50_000).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng(99);
    for budget in [50_000, 2_000] {
        let expected = if budget == 50_000 {
            expected.clone()
        } else {
            run(sources.clone(), budget).unwrap_or_else(|e| panic!("{e}"))
        };
        for _ in 0..5 {
            let mut shuffled = sources.clone();
            rng.shuffle(&mut shuffled);
            for s in &mut shuffled {
                rng.shuffle(&mut s.tags);
            }
            assert_eq!(run(shuffled, budget), Ok(expected.clone()));
        }
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
fn budget_below_the_floor_is_a_request_error() {
    let sources = vec![entry("a", "Customer prefers email", &[], DAY0)];
    for budget in [0, 1, MIN_TOKEN_BUDGET - 1] {
        assert_eq!(
            run(sources.clone(), budget),
            Err(DistillError::BudgetBelowFloor {
                floor: MIN_TOKEN_BUDGET,
                budget
            })
        );
    }
    assert_eq!(
        run(vec![], 0),
        Err(DistillError::BudgetBelowFloor {
            floor: MIN_TOKEN_BUDGET,
            budget: 0
        }),
        "the request is checked before the sources"
    );
    let d = run(sources.clone(), MIN_TOKEN_BUDGET).unwrap_or_else(|e| panic!("{e}"));
    assert_accounting(&sources, &d, MIN_TOKEN_BUDGET);
    assert_eq!(
        d.summary,
        "## (untagged)\n- Customer prefers email (latest 2026-11-20)\n"
    );
}

#[test]
fn top_fact_too_large_fails_with_a_needed_budget_that_works() {
    let big = "alpha beta gamma delta ".repeat(400);
    let sources = vec![
        entry("small", "small old fact", &[], DAY0),
        entry("big", &format!("Top fact {big}"), &["pinned"], DAY0 + DAY),
    ];
    let t = source_tokens(&sources[1]);
    let err = run(sources.clone(), t).err();
    let Some(DistillError::TokenBudgetExceeded { needed, budget }) = err else {
        panic!("expected token_budget_exceeded, got {err:?}");
    };
    assert_eq!(budget, t);
    // Its source, the heading, and the top fact cut to one character: `- T… (pinned, latest …)`.
    let shortest = count("## (untagged)\n") + count("- T… (pinned, latest 2026-11-21)\n");
    assert_eq!(needed as usize, t as usize + shortest);
    assert!(run(sources.clone(), needed - 1).is_err());
    let d = run(sources.clone(), needed).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.included_source_ids, vec!["big"]);
    assert_accounting(&sources, &d, needed);
    // Every budget above works too, and a large one includes the small source as well.
    for more in [needed + 1, needed + 40, t * 2] {
        let d = run(sources.clone(), more).unwrap_or_else(|e| panic!("{more}: {e}"));
        assert_accounting(&sources, &d, more);
    }
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
    let floor = run(sources.clone(), 3).err();
    assert!(!format!("{floor:?}").contains("SECRET"));
    let dup = run(vec![sources[0].clone(), sources[0].clone()], 100_000);
    assert!(!format!("{dup:?}").contains("SECRET"));
}

#[test]
fn carry_forward_that_overflows_the_budget_fails() {
    let sources = vec![entry("a", "Customer prefers email", &[], DAY0)];
    let d = run(sources.clone(), 64).unwrap_or_else(|e| panic!("{e}"));
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
        Err(DistillError::TokenBudgetExceeded { budget, .. }) if budget == 64
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
    // length limit) costs over 512 tokens; at the smallest budget that takes it, its bullet must
    // be shortened — at marker boundaries.
    let unit =
        "[REDACTED:k-1]\u{13000}\u{13000}\u{13000}\u{13000}\u{13000}\u{13000}\u{13000}\u{13000}";
    let content = unit.repeat(14);
    assert!(content.chars().count() < MAX_FACT_CHARS);
    let sources = vec![entry("a", &content, &["t"], DAY0)];
    let t = source_tokens(&sources[0]);
    assert!(t > 512, "fixture too cheap: {t}");
    for budget in [t + 40, t + 200, 2 * t - 1] {
        let d = run(sources.clone(), budget).unwrap_or_else(|e| panic!("{budget}: {e}"));
        assert_accounting(&sources, &d, budget);
        assert_markers_whole(&d.summary, &sources);
        let line = d.summary.lines().nth(1).unwrap_or_default();
        let text = line
            .strip_prefix("- ")
            .and_then(|l| l.split(" (latest").next())
            .and_then(|l| l.strip_suffix('…'))
            .unwrap_or_else(|| panic!("line was not shortened: {line}"));
        assert!(!text.is_empty() && text.len() < content.len() && content.starts_with(text));
    }
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
    // The top fact here is stated by several ~100-token entries: about 1.4k tokens.
    for budget in [2_000, 3_000, 20_000, 200_000] {
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
                prop_assert!(budget >= MIN_TOKEN_BUDGET);
                assert_accounting(&sources, &d, budget);
                assert_markers_whole(&d.summary, &sources);
                prop_assert_eq!(
                    d.newest_source_ms,
                    sources.iter().map(|s| s.created_at_ms).max().unwrap_or(0)
                );
            }
            Err(DistillError::BudgetBelowFloor { floor, budget: b }) => {
                prop_assert_eq!((floor, b), (MIN_TOKEN_BUDGET, budget));
                prop_assert!(budget < MIN_TOKEN_BUDGET);
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
