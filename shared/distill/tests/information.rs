//! What a dream keeps when the budget is small: the facts that tell something, not the filler a
//! chat log repeats; pinned facts first; a replaced value never shown as current; and a summary
//! that grows with the budget the caller gives. The fixture is a support chat log written for
//! these tests: 100 entries, 15 labelled facts (one pinned, one phone number changed later, a
//! second person with a phone number of their own) among acknowledgements and routine notes
//! that recur with small variations.

mod common;

use common::*;
use distill::distiller::MAX_SUMMARY_BYTES;
use distill::{
    summary_items, DeterministicDistiller, DistillError, DistillInput, Distillation, Distiller,
    SourceEntry, SummaryItem,
};

fn run(sources: Vec<SourceEntry>, token_budget: u32) -> Result<Distillation, DistillError> {
    DeterministicDistiller.distill(&DistillInput {
        sources,
        token_budget,
    })
}

fn ok(sources: &[SourceEntry], budget: u32) -> Distillation {
    run(sources.to_vec(), budget).unwrap_or_else(|e| panic!("budget {budget}: {e}"))
}

/// The pinned fact of the fixture.
const PINNED: &str = "Never share Maria's medical details with her employer.";
/// The phone number Maria replaced, and the one she replaced it with.
const STALE_PHONE: &str = "555-0101";
const CURRENT_PHONE: &str = "555-0199";

/// The labelled facts: (a phrase that identifies the fact in a summary, the entry's text, its
/// tags). The first is pinned; the old phone number is not among them (it is history).
const LABELLED: &[(&str, &str, &[&str])] = &[
    (
        "medical details",
        "Never share Maria's medical details with her employer.",
        &["support-chat", "pinned"],
    ),
    (
        "penicillin",
        "Maria is allergic to penicillin.",
        &["support-chat", "health"],
    ),
    (
        CURRENT_PHONE,
        "Maria's phone number is now 555-0199.",
        &["support-chat", "contact"],
    ),
    (
        "Rue des Lilas",
        "Maria's shipping address is 14 Rue des Lilas, 69003 Lyon.",
        &["support-chat", "contact"],
    ),
    (
        "12 March",
        "Maria's birthday is 12 March.",
        &["support-chat"],
    ),
    (
        "555-0142",
        "Tom Lopez's phone number is 555-0142 (Maria's husband, emergency contact).",
        &["support-chat", "contact"],
    ),
    (
        "15 January 2027",
        "The contract renewal deadline is 15 January 2027.",
        &["support-chat", "billing"],
    ),
    (
        "by email",
        "Maria wants to be contacted by email, never by phone before noon.",
        &["support-chat"],
    ),
    (
        "ACC-88231",
        "Maria's account number is ACC-88231.",
        &["support-chat", "billing"],
    ),
    (
        "peanuts",
        "Her daughter Sofia is allergic to peanuts; no nut snacks in the welcome box.",
        &["support-chat", "health"],
    ),
    (
        "order 7719",
        "Refund of 42.50 EUR for order 7719 was approved on 3 November.",
        &["support-chat", "billing"],
    ),
    (
        "night shifts",
        "Maria works night shifts at the hospital, so calls only after 2 pm.",
        &["support-chat"],
    ),
    (
        "Spanish",
        "Maria's preferred language for letters is Spanish.",
        &["support-chat"],
    ),
    (
        "PX-5520",
        "Insurance policy PX-5520 expires on 30 June 2027.",
        &["support-chat", "billing"],
    ),
    (
        "Okafor",
        "The spare key is with neighbour Mr. Okafor at number 16.",
        &["support-chat"],
    ),
];

/// Filler: (a phrase that identifies it, its wordings). Every wording recurs; the chat log
/// cycles through them.
const FILLER: &[(&str, &[&str])] = &[
    (
        "confirming",
        &[
            "No action needed; Maria was only confirming her details.",
            "No action needed; Maria was only confirming her details.",
            "No action needed, Maria was just confirming her details.",
            "No action needed; Tom was only confirming his details.",
            "No action needed; Maria was only confirming her address.",
            "No action needed; Maria was only confirming her details again.",
        ],
    ),
    ("Thank", &["Thanks!", "Thanks!", "Thank you!", "Thanks :)"]),
    ("noted", &["Okay, noted.", "Okay, noted.", "Ok, noted."]),
    (
        "security questions",
        &[
            "Verified Maria's identity with the usual security questions.",
            "Verified Maria's identity with the usual security questions.",
            "Verified identity with the usual security questions.",
        ],
    ),
    (
        "anything else",
        &[
            "Asked if there was anything else; Maria said no.",
            "Asked if there was anything else; Maria said no, thanks.",
        ],
    ),
    (
        "ended the chat",
        &[
            "Maria said thanks and ended the chat.",
            "Maria ended the chat.",
        ],
    ),
    ("Sounds good", &["Sounds good.", "Sounds good!"]),
];

/// Seven hours apart, from DAY0 on.
fn at(slot: usize) -> i64 {
    DAY0 + slot as i64 * 7 * 3_600_000
}

/// The fixture: 100 entries. Labelled facts sit at fixed slots spread over the log (the old
/// phone number early, its replacement late, the pinned fact first); the other slots cycle
/// through the filler wordings.
fn chat_log() -> Vec<SourceEntry> {
    const FACT_SLOTS: [usize; 15] = [3, 9, 71, 16, 22, 28, 35, 41, 47, 53, 59, 65, 77, 83, 90];
    let mut out = Vec::with_capacity(100);
    let mut filler = FILLER
        .iter()
        .flat_map(|(_, wordings)| wordings.iter())
        .cycle();
    for slot in 0..100 {
        let (content, tags): (String, Vec<&str>) =
            if let Some(i) = FACT_SLOTS.iter().position(|&s| s == slot) {
                let (_, text, tags) = LABELLED[i];
                (text.to_owned(), tags.to_vec())
            } else if slot == 12 {
                (
                    format!("Maria's phone number is {STALE_PHONE}."),
                    vec!["support-chat", "contact"],
                )
            } else if slot % 10 == 5 {
                // Some turns carry two lines: an acknowledgement and a routine note.
                let a = filler.next().copied().unwrap_or_default();
                let b = filler.next().copied().unwrap_or_default();
                (format!("{a}\n{b}"), vec!["support-chat"])
            } else {
                let a = filler.next().copied().unwrap_or_default();
                (a.to_owned(), vec!["support-chat"])
            };
        out.push(SourceEntry {
            id: format!("chat-{slot:03}"),
            content,
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            created_at_ms: at(slot),
        });
    }
    out
}

fn is_filler(item: &SummaryItem) -> bool {
    FILLER.iter().any(|(phrase, _)| item.text.contains(phrase))
}

/// (labelled facts kept, filler items kept) of a summary.
fn tally(summary: &str) -> (usize, usize) {
    let items = summary_items(summary);
    let labelled = LABELLED
        .iter()
        .filter(|(phrase, _, _)| {
            items
                .iter()
                .any(|i| i.text.contains(phrase) && !i.superseded)
        })
        .count();
    (labelled, items.iter().filter(|i| is_filler(i)).count())
}

#[test]
fn the_fixture_is_what_it_says() {
    let log = chat_log();
    assert_eq!(log.len(), 100);
    let mut ids: Vec<&str> = log.iter().map(|s| s.id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 100);
    for (phrase, text, _) in LABELLED {
        let n = log.iter().filter(|s| s.content.contains(text)).count();
        assert_eq!(n, 1, "{phrase}");
    }
    let filler_entries = log
        .iter()
        .filter(|s| FILLER.iter().any(|(p, _)| s.content.contains(p)))
        .count();
    assert!(filler_entries >= 80, "{filler_entries}");
    // The boilerplate the report was about: one acknowledgement stated nine times and more.
    let confirming = log
        .iter()
        .filter(|s| s.content.contains("confirming"))
        .count();
    assert!(confirming >= 9, "{confirming}");
}

#[test]
fn a_small_budget_keeps_facts_not_filler() {
    let log = chat_log();
    for budget in [256, 400, 600, 1_000] {
        let d = ok(&log, budget);
        let (labelled, filler) = tally(&d.summary);
        assert!(d.tokens_used <= budget);
        if labelled < LABELLED.len() {
            assert_eq!(
                filler,
                0,
                "budget {budget}: filler kept while {} labelled facts are left out:\n{}",
                LABELLED.len() - labelled,
                d.summary
            );
        }
        // The pinned fact leads the summary.
        let items = summary_items(&d.summary);
        let first = items.first().map(|i| (i.text.as_str(), i.pinned));
        assert_eq!(
            first,
            Some((PINNED, true)),
            "budget {budget}:\n{}",
            d.summary
        );
    }
    // At 256 tokens the summary holds facts, several of them.
    let (labelled, filler) = tally(&ok(&log, 256).summary);
    assert!(labelled >= 5, "{labelled}");
    assert_eq!(filler, 0);
    // A budget that holds everything holds every labelled fact (and the filler, last).
    let (labelled, _) = tally(&ok(&log, 100_000).summary);
    assert_eq!(labelled, LABELLED.len());
}

#[test]
fn a_replaced_phone_number_is_never_shown_as_current() {
    let log = chat_log();
    for budget in [256, 600, 1_000, 2_000, 100_000] {
        let d = ok(&log, budget);
        let items = summary_items(&d.summary);
        for item in items.iter().filter(|i| i.text.contains(STALE_PHONE)) {
            assert!(item.superseded, "budget {budget}: {item:?}");
        }
        // The new number and the husband's number are current wherever they show.
        for item in items
            .iter()
            .filter(|i| i.text.contains(CURRENT_PHONE) || i.text.contains("555-0142"))
        {
            assert!(!item.superseded, "budget {budget}: {item:?}");
        }
    }
    // With room for all, the old number is there, marked as history, after the current one.
    let s = ok(&log, 100_000).summary;
    assert!(
        s.contains(
            "- Maria's phone number is: now 555-0199. (latest 2026-12-10); \
             555-0101. (superseded, latest 2026-11-23)\n"
        ),
        "{s}"
    );
}

#[test]
fn superseded_values_follow_the_newest_statement_of_the_same_attribute() {
    let summary_of = |sources: Vec<SourceEntry>| ok(&sources, 100_000).summary;
    // `changed to` sets the same attribute as `is`; a value stated again later is current
    // again; different subjects, vague subjects, bare names and different prepositions are
    // different attributes.
    let s = summary_of(vec![
        entry("a", "Door code is 4411", &["office", "pinned"], DAY0),
        entry("b", "Door code changed to 5522", &["office"], DAY0 + DAY),
        entry("c", "The office wifi password is tulip", &["office"], DAY0),
        entry(
            "d",
            "The office wifi password is daffodil",
            &["office"],
            DAY0 + DAY,
        ),
        entry(
            "e",
            "The office wifi password is tulip",
            &["office"],
            DAY0 + 2 * DAY,
        ),
        entry("f", "Her phone number is 555-0101", &[], DAY0),
        entry("g", "Her phone number is 555-0177", &[], DAY0 + DAY),
        entry("h", "Tom Lopez is on holiday", &[], DAY0),
        entry("i", "Tom Lopez is the account owner", &[], DAY0 + DAY),
        entry("j", "The design review is on Tuesday", &[], DAY0),
        entry("k", "The design review is in room B", &[], DAY0 + DAY),
        entry("l", "The design review is on Thursday", &[], DAY0 + 2 * DAY),
        entry("m", "Ivan is vegetarian", &["food"], DAY0),
        entry("n", "Ivan is no longer vegetarian", &["food"], DAY0 + DAY),
        entry("o", "Ivan is left-handed", &["food"], DAY0),
        entry("p", "Greta is vegetarian", &["food"], DAY0),
    ]);
    let marks: Vec<(String, bool, bool)> = summary_items(&s)
        .into_iter()
        .map(|i| (i.text, i.pinned, i.superseded))
        .collect();
    let mark = |text: &str| {
        marks
            .iter()
            .find(|(t, _, _)| t == text)
            .map(|(_, p, s)| (*p, *s))
            .unwrap_or_else(|| panic!("{text} missing from\n{s}"))
    };
    // The pin belongs to the attribute: it moves to the current value.
    assert_eq!(mark("Door code changed to 5522"), (true, false));
    assert_eq!(mark("Door code is 4411"), (false, true));
    assert_eq!(mark("The office wifi password is tulip"), (false, false));
    assert_eq!(mark("The office wifi password is daffodil"), (false, true));
    for current in [
        "Her phone number is 555-0101",
        "Her phone number is 555-0177",
        "Tom Lopez is on holiday",
        "Tom Lopez is the account owner",
        "The design review is in room B",
        "The design review is on Thursday",
        "Ivan is no longer vegetarian",
        "Ivan is left-handed",
        "Greta is vegetarian",
    ] {
        assert_eq!(mark(current), (false, false), "{current}");
    }
    assert_eq!(mark("The design review is on Tuesday"), (false, true));
    // `no longer` names the value it ends, so a one-word subject will do.
    assert_eq!(mark("Ivan is vegetarian"), (false, true));
    assert!(
        s.starts_with(
            "## office\n- Door code: changed to 5522 (pinned, latest 2026-11-21); \
             is 4411 (superseded, latest 2026-11-20)\n"
        ),
        "{s}"
    );

    // Read back, the mark holds (distilling the summary again gives it back), and a fresh
    // statement of the old value after the mark makes it current again.
    assert_eq!(
        summary_of(vec![entry("lt", &s, &[], DAY0 + 5 * DAY)]),
        s,
        "fixed point"
    );
    let again = summary_of(vec![
        entry("lt", &s, &[], DAY0 + 5 * DAY),
        entry("n", "Door code is 4411", &["office"], DAY0 + 6 * DAY),
    ]);
    assert!(
        again.starts_with(
            "## office\n- Door code: is 4411 (pinned, x2, latest 2026-11-26); \
             changed to 5522 (superseded, latest 2026-11-21)\n"
        ),
        "{again}"
    );
}

#[test]
fn superseded_values_rank_after_every_current_fact() {
    // The old value is the more informative line, yet at every budget that shows it, the
    // current facts are shown too.
    let sources = vec![
        entry(
            "old",
            "Maria's phone number is 555-0101 (old landline, kitchen, rarely answered)",
            &[],
            DAY0,
        ),
        entry("new", "Maria's phone number is 555-0199", &[], DAY0 + DAY),
        entry("other", "Maria likes window seats", &[], DAY0),
    ];
    let full = ok(&sources, 100_000);
    assert!(full.summary.contains("555-0101"), "{}", full.summary);
    let mut shown_without_old = false;
    for budget in 32..=full.tokens_used {
        let Ok(d) = run(sources.clone(), budget) else {
            continue;
        };
        if d.summary.contains("555-0101") {
            assert!(d.summary.contains("555-0199"), "{budget}: {}", d.summary);
            assert!(
                d.summary.contains("window seats"),
                "{budget}: {}",
                d.summary
            );
        } else if d.summary.contains("555-0199") && d.summary.contains("window seats") {
            shown_without_old = true;
        }
    }
    assert!(shown_without_old);
}

#[test]
fn the_summary_grows_to_the_budget_given() {
    // 1,500 short distinct facts: far more than 4,096 tokens of summary.
    let mut rng = Rng(41);
    let sources: Vec<SourceEntry> = (0..1_500)
        .map(|i| {
            let words: Vec<&str> = (0..7).map(|_| WORDS[rng.below(WORDS.len())]).collect();
            entry(
                &format!("f{i:05}"),
                &format!("{} {}", PEOPLE[i % PEOPLE.len()], words.join(" ")),
                &[TAGS[i % TAGS.len()]],
                DAY0 + i as i64 * 60_000,
            )
        })
        .collect();
    // Below the byte bound the budget is what binds: the run uses nearly all of it.
    let d = ok(&sources, 12_000);
    assert!(d.output_tokens > 4_096, "{}", d.output_tokens);
    assert!(d.tokens_used > 11_900, "{}", d.tokens_used);
    // Above it the summary stops at the entry's byte bound, however large the budget.
    for budget in [20_000, 128_000] {
        let d = ok(&sources, budget);
        assert!(d.output_tokens > 8_000, "{}", d.output_tokens);
        assert!(d.summary.len() <= MAX_SUMMARY_BYTES, "{}", d.summary.len());
        assert!(
            d.summary.len() > MAX_SUMMARY_BYTES - 200,
            "{}",
            d.summary.len()
        );
    }
}

const PEOPLE: &[&str] = &[
    "Amelia", "Bruno", "Chiara", "Dmitri", "Esther", "Farid", "Greta", "Hiro", "Ines", "Jonas",
    "Kofi", "Lena", "Mateo",
];

#[test]
fn the_same_log_in_any_order_gives_the_same_bytes() {
    let log = chat_log();
    let mut rng = Rng(7);
    for budget in [256, 1_000, 100_000] {
        let expected = ok(&log, budget);
        for _ in 0..6 {
            let mut shuffled = log.clone();
            rng.shuffle(&mut shuffled);
            for s in &mut shuffled {
                rng.shuffle(&mut s.tags);
            }
            assert_eq!(ok(&shuffled, budget), expected, "budget {budget}");
        }
    }
}

/// Prints the fixture's figures (`cargo test -p distill --test information -- --ignored
/// --nocapture`): what docs/dreams.md quotes ("What a small budget keeps, measured").
#[test]
#[ignore]
fn print_figures() {
    let log = chat_log();
    for budget in [256, 400, 600, 800, 1_000, 4_000] {
        let d = ok(&log, budget);
        let (labelled, filler) = tally(&d.summary);
        println!(
            "budget {budget}: labelled {labelled}/{}, filler items {filler}, facts {}/{}, tokens {}",
            LABELLED.len(),
            d.facts_kept,
            d.facts_found,
            d.tokens_used
        );
        if budget == 256 {
            println!("{}", d.summary);
        }
    }
}
