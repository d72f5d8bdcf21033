//! The rule table as a test: every row is a phrasing, a zone, a createdAt and the exact outcome.

use super::*;
use chrono::DateTime;

enum Want {
    /// Due instant (RFC 3339) and the rule that must have produced it.
    At(&'static str, &'static str),
    /// Predicate tag.
    Pred(&'static str),
    Nothing,
}
use Want::{At, Nothing, Pred};

/// Friday 2026-11-20 15:00 UTC: 16:00 in Oslo, 10:00 in New York, Saturday 00:00 in Tokyo.
const FRI: &str = "2026-11-20T15:00:00Z";

fn ms(rfc3339: &str) -> i64 {
    DateTime::parse_from_rfc3339(rfc3339)
        .expect("test timestamps are valid")
        .timestamp_millis()
}

#[rustfmt::skip]
const CASES: &[(&str, &str, &str, Want)] = &[
    // --- UTC: time commitments ---
    ("UTC", FRI, "Follow up next Monday", At("2026-11-23T09:00:00Z", "time.next_weekday")),
    ("UTC", FRI, "Remind me on 2026-12-01", At("2026-12-01T09:00:00Z", "time.date_iso")),
    ("UTC", FRI, "Remind me on December 1st", At("2026-12-01T09:00:00Z", "time.date_named")),
    ("UTC", FRI, "Check back in 3 days", At("2026-11-23T15:00:00Z", "time.in_days")),
    ("UTC", FRI, "Remind me in 2 hours", At("2026-11-20T17:00:00Z", "time.in_hours")),
    ("UTC", FRI, "Call Bob tomorrow at 9am", At("2026-11-21T09:00:00Z", "time.tomorrow")),
    ("UTC", FRI, "I will send the report tomorrow", At("2026-11-21T09:00:00Z", "time.tomorrow")),
    ("UTC", FRI, "We'll review the budget next week", At("2026-11-23T09:00:00Z", "time.next_week")),
    ("UTC", FRI, "I'll call the supplier tonight at 8pm", At("2026-11-20T20:00:00Z", "time.tonight")),
    ("UTC", FRI, "Remind me at 14:30", At("2026-11-21T14:30:00Z", "time.at")),
    ("UTC", FRI, "Remind me at 4:45 pm", At("2026-11-20T16:45:00Z", "time.at")),
    ("UTC", FRI, "Don't forget to email Alice on Monday morning", At("2026-11-23T09:00:00Z", "time.weekday")),
    ("UTC", FRI, "Remind me in 90 minutes", At("2026-11-20T16:30:00Z", "time.in_minutes")),
    ("UTC", FRI, "Follow up in 2 weeks", At("2026-12-04T15:00:00Z", "time.in_weeks")),
    ("UTC", FRI, "I need to renew the domain in 1 month", At("2026-12-20T15:00:00Z", "time.in_months")),
    ("UTC", FRI, "Ping Carol the day after tomorrow", At("2026-11-22T09:00:00Z", "time.day_after_tomorrow")),
    ("UTC", FRI, "Let's touch base on Friday at 5pm", At("2026-11-20T17:00:00Z", "time.weekday")),
    ("UTC", FRI, "Remind me on Friday", At("2026-11-27T09:00:00Z", "time.weekday")),
    ("UTC", FRI, "Remind me next Friday", At("2026-11-27T09:00:00Z", "time.next_weekday")),
    ("UTC", FRI, "Remind me on 1 January", At("2027-01-01T09:00:00Z", "time.date_named")),
    ("UTC", FRI, "Remind me on December 1, 2027 at 10:30", At("2027-12-01T10:30:00Z", "time.date_named")),
    ("UTC", FRI, "Can you remind me tomorrow at 9:30am?", At("2026-11-21T09:30:00Z", "time.tomorrow")),
    ("UTC", FRI, "Please call Bob at 10am on Monday", At("2026-11-23T10:00:00Z", "time.weekday")),
    ("UTC", FRI, "Check in next month", At("2026-12-01T09:00:00Z", "time.next_month")),
    ("UTC", FRI, "Remind me this evening", At("2026-11-20T18:00:00Z", "time.today")),
    ("UTC", FRI, "Remind me in half an hour", At("2026-11-20T15:30:00Z", "time.in_minutes")),
    ("UTC", FRI, "Tomorrow at 9am, call the bank", At("2026-11-21T09:00:00Z", "time.tomorrow")),
    ("UTC", FRI, "I'm going to call the landlord at 9 a.m. tomorrow", At("2026-11-21T09:00:00Z", "time.tomorrow")),
    ("UTC", FRI, "Reminder: pay rent today", At("2026-11-20T17:00:00Z", "time.today")),
    ("UTC", FRI, "Remind me in an hour", At("2026-11-20T16:00:00Z", "time.in_hours")),
    ("UTC", FRI, "The meeting moved. Follow up with Dana by Wednesday.", At("2026-11-25T09:00:00Z", "time.weekday")),
    ("UTC", FRI, "Tomorrow morning at 10am I should chase the courier", At("2026-11-21T10:00:00Z", "time.tomorrow")),
    ("UTC", FRI, "I will tell Bob what happened on 2026-11-02 next Tuesday", At("2026-11-24T09:00:00Z", "time.next_weekday")),
    ("UTC", FRI, "Draft the proposal by next Friday", At("2026-11-27T09:00:00Z", "time.next_weekday")),
    ("UTC", FRI, "on monday I will call Bob", At("2026-11-23T09:00:00Z", "time.weekday")),
    ("UTC", FRI, "Remember to call mom on Sunday", At("2026-11-22T09:00:00Z", "time.weekday")),
    // --- UTC: predicate commitments ---
    ("UTC", FRI, "Remind me when the invoice clears", Pred("when:invoice-clears")),
    ("UTC", FRI, "Follow up once the refund is processed", Pred("when:refund-processed")),
    ("UTC", FRI, "After the contract is signed, email the client", Pred("when:contract-signed")),
    ("UTC", FRI, "We'll ship as soon as the payment has arrived", Pred("when:payment-arrived")),
    ("UTC", FRI, "When the invoice clears call Alice tomorrow", Pred("when:invoice-clears")),
    ("UTC", FRI, "Remind me once the check clears", Pred("when:check-clears")),
    ("UTC", FRI, "Let me know when the package arrives", Pred("when:package-arrives")),
    ("UTC", FRI, "Notify me as soon as the build is green", Pred("when:build-green")),
    ("UTC", FRI, "Once the PR is merged, deploy to staging", Pred("when:pr-merged")),
    // --- must NOT produce a commitment ---
    ("UTC", FRI, "The invoice was paid on 2026-11-02", Nothing),
    ("UTC", FRI, "Alice was born in 1990", Nothing),
    ("UTC", FRI, "The meeting happened yesterday", Nothing),
    ("UTC", FRI, "I will summarize what happened on 2026-11-02", Nothing),
    ("UTC", FRI, "I will call Bob on 2025-12-01", Nothing),
    ("UTC", FRI, "Should I follow up tomorrow?", Nothing),
    ("UTC", FRI, "Don't remind me tomorrow", Nothing),
    ("UTC", FRI, "I will not call Bob next week", Nothing),
    ("UTC", FRI, "We won't follow up tomorrow", Nothing),
    ("UTC", FRI, "No need to follow up next week", Nothing),
    ("UTC", FRI, "Remind me every Monday", Nothing),
    ("UTC", FRI, "Bob said he will call us tomorrow", Nothing),
    ("UTC", FRI, "The meeting was on Monday, I will write it up", Nothing),
    ("UTC", FRI, "Remind me about the invoice", Nothing),
    ("UTC", FRI, "The call tomorrow is cancelled", Nothing),
    ("UTC", FRI, "Follow up after lunch", Nothing),
    ("UTC", FRI, "Remind me when possible", Nothing),
    ("UTC", FRI, "I followed up with Bob on Monday", Nothing),
    ("UTC", FRI, "Remind me on 2026-02-30", Nothing),
    ("UTC", FRI, "We had to call the bank last Monday", Nothing),
    ("UTC", FRI, "Remind me of what we discussed 3 days ago", Nothing),
    ("UTC", FRI, "Remind me today at 9am", Nothing),
    ("UTC", FRI, "Remind me at 9", Nothing),
    ("UTC", FRI, "I will be away until Friday", Nothing),
    ("UTC", FRI, "Dentist appointment on December 3rd at 10am", Nothing),
    ("UTC", FRI, "Once the check clears, the balance updates", Nothing),
    ("UTC", FRI, "Check: the backup ran on Monday", Nothing),
    ("UTC", FRI, "The report is due on Friday", Nothing),
    ("UTC", FRI, "The server will restart at 3am", Nothing),
    ("UTC", FRI, "We need to pay the supplier before December 1st", Nothing),
    // --- Europe/Oslo (CET, UTC+1): createdAt is 16:00 local ---
    ("Europe/Oslo", FRI, "Follow up next Monday", At("2026-11-23T08:00:00Z", "time.next_weekday")),
    ("Europe/Oslo", FRI, "Remind me at 14:30", At("2026-11-21T13:30:00Z", "time.at")),
    ("Europe/Oslo", FRI, "Remind me at 16:30", At("2026-11-20T15:30:00Z", "time.at")),
    ("Europe/Oslo", FRI, "Remind me in 2 hours", At("2026-11-20T17:00:00Z", "time.in_hours")),
    ("Europe/Oslo", FRI, "Call Bob tomorrow", At("2026-11-21T08:00:00Z", "time.tomorrow")),
    ("Europe/Oslo", FRI, "I'll call the supplier tonight at 8pm", At("2026-11-20T19:00:00Z", "time.tonight")),
    ("Europe/Oslo", FRI, "Check back in 3 days", At("2026-11-23T15:00:00Z", "time.in_days")),
    ("Europe/Oslo", FRI, "Remind me on 2026-12-01", At("2026-12-01T08:00:00Z", "time.date_iso")),
    // --- America/New_York (EST, UTC-5): createdAt is 10:00 local ---
    ("America/New_York", FRI, "Remind me at 14:30", At("2026-11-20T19:30:00Z", "time.at")),
    ("America/New_York", FRI, "Call Bob tomorrow at 9am", At("2026-11-21T14:00:00Z", "time.tomorrow")),
    ("America/New_York", FRI, "We'll review the budget next week", At("2026-11-23T14:00:00Z", "time.next_week")),
    ("America/New_York", FRI, "Remind me on December 1st", At("2026-12-01T14:00:00Z", "time.date_named")),
    ("America/New_York", FRI, "I'll call the supplier tonight at 8pm", At("2026-11-21T01:00:00Z", "time.tonight")),
    ("America/New_York", FRI, "Remind me on Friday", At("2026-11-27T14:00:00Z", "time.weekday")),
    ("America/New_York", FRI, "Remind me on Friday at 11am", At("2026-11-20T16:00:00Z", "time.weekday")),
    ("America/New_York", FRI, "Remind me today", At("2026-11-20T22:00:00Z", "time.today")),
    // --- Asia/Tokyo (UTC+9): createdAt is Saturday 00:00 local ---
    ("Asia/Tokyo", FRI, "Remind me tomorrow", At("2026-11-22T00:00:00Z", "time.tomorrow")),
    ("Asia/Tokyo", FRI, "Follow up next week", At("2026-11-23T00:00:00Z", "time.next_week")),
    ("Asia/Tokyo", FRI, "Remind me tonight at 8pm", At("2026-11-21T11:00:00Z", "time.tonight")),
    ("Asia/Tokyo", FRI, "Remind me on Friday", At("2026-11-27T00:00:00Z", "time.weekday")),
    // --- DST: New York falls back on Sunday 2026-11-01 (created Friday 12:00 EDT) ---
    ("America/New_York", "2026-10-30T16:00:00Z", "Remind me on Sunday", At("2026-11-01T14:00:00Z", "time.weekday")),
    ("America/New_York", "2026-10-30T16:00:00Z", "Remind me in 2 days", At("2026-11-01T17:00:00Z", "time.in_days")),
    ("America/New_York", "2026-10-30T16:00:00Z", "Remind me in 48 hours", At("2026-11-01T16:00:00Z", "time.in_hours")),
    // 01:30 happens twice that night: the earlier (EDT) one.
    ("America/New_York", "2026-10-30T16:00:00Z", "Remind me on Sunday at 1:30am", At("2026-11-01T05:30:00Z", "time.weekday")),
    // New York springs forward on Sunday 2027-03-14: "in 1 day" keeps the wall time (23 h).
    ("America/New_York", "2027-03-13T17:00:00Z", "Remind me in 1 day", At("2027-03-14T16:00:00Z", "time.in_days")),
    // Oslo falls back on Sunday 2026-10-25 (created Saturday 12:00 CEST).
    ("Europe/Oslo", "2026-10-24T10:00:00Z", "Remind me tomorrow", At("2026-10-25T08:00:00Z", "time.tomorrow")),
    ("Europe/Oslo", "2026-10-24T10:00:00Z", "Remind me tomorrow at 2:30am", At("2026-10-25T00:30:00Z", "time.tomorrow")),
    // Oslo springs forward on Sunday 2027-03-28: 02:30 does not exist and becomes 03:30 CEST.
    ("Europe/Oslo", "2027-03-27T12:00:00Z", "Remind me tomorrow at 2:30am", At("2027-03-28T01:30:00Z", "time.tomorrow")),
    ("Europe/Oslo", "2027-03-27T12:00:00Z", "Remind me tomorrow at 9am", At("2027-03-28T07:00:00Z", "time.tomorrow")),
    ("Europe/Oslo", "2027-03-25T01:30:00Z", "Check back in 3 days", At("2027-03-28T01:30:00Z", "time.in_days")),
];

#[test]
fn rule_table() {
    let mut failures = Vec::new();
    let (mut positive, mut negative) = (0, 0);
    for (zone, created, text, want) in CASES {
        let zone_spec = TimeZoneSpec::parse(zone).expect("test zones are valid");
        let got = infer_in(text, ms(created), zone_spec);
        let expected: Vec<(Condition, Option<&str>)> = match want {
            At(due, rule) => vec![(Condition::At { due_ms: ms(due) }, Some(*rule))],
            Pred(tag) => vec![(
                Condition::Predicate {
                    tag: tag.to_string(),
                },
                Some("predicate.when"),
            )],
            Nothing => vec![],
        };
        match want {
            Nothing => negative += 1,
            _ => positive += 1,
        }
        let got_cmp: Vec<(Condition, Option<&str>)> = got
            .iter()
            .map(|i| (i.condition.clone(), Some(i.rule)))
            .collect();
        if got_cmp != expected {
            let show = |v: &[(Condition, Option<&str>)]| {
                v.iter()
                    .map(|(c, r)| match c {
                        Condition::At { due_ms } => format!(
                            "At({} via {:?})",
                            DateTime::from_timestamp_millis(*due_ms)
                                .map(|d| d.to_rfc3339())
                                .unwrap_or_default(),
                            r
                        ),
                        Condition::Predicate { tag } => format!("Pred({tag})"),
                    })
                    .collect::<Vec<_>>()
            };
            failures.push(format!(
                "[{zone} @ {created}] {text:?}: got {:?}, want {:?}",
                show(&got_cmp),
                show(&expected)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} rows failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(positive >= 20 && negative >= 10 && CASES.len() >= 30);
}

#[test]
fn one_commitment_per_sentence_and_distinct_conditions() {
    let text = "Remind me tomorrow. Also follow up next Monday! Call Bob tomorrow; and the \
                sky is blue. Remind me when the invoice clears.";
    let got = infer(text, ms(FRI), "UTC");
    let want = vec![
        Condition::At {
            due_ms: ms("2026-11-21T09:00:00Z"),
        },
        Condition::At {
            due_ms: ms("2026-11-23T09:00:00Z"),
        },
        Condition::Predicate {
            tag: "when:invoice-clears".into(),
        },
    ];
    assert_eq!(
        got.into_iter().map(|i| i.condition).collect::<Vec<_>>(),
        want
    );
}

#[test]
fn fan_out_is_capped() {
    let text: String = (1..=20)
        .map(|n| format!("Remind me in {n} days. "))
        .collect();
    assert_eq!(infer(&text, ms(FRI), "UTC").len(), MAX_INFERRED_PER_ENTRY);
}

#[test]
fn unknown_or_empty_zone_falls_back_to_utc() {
    let utc = infer("Remind me tomorrow", ms(FRI), "UTC");
    assert_eq!(infer("Remind me tomorrow", ms(FRI), "Mars/Olympus"), utc);
    assert_eq!(infer("Remind me tomorrow", ms(FRI), ""), utc);
    assert_ne!(infer("Remind me tomorrow", ms(FRI), "Europe/Oslo"), utc);
}

#[test]
fn out_of_range_created_at_and_hostile_input_are_harmless() {
    assert!(infer("Remind me tomorrow", i64::MAX, "UTC").is_empty());
    assert!(infer("Remind me tomorrow", i64::MIN, "UTC").is_empty());
    assert!(infer("Remind me in 9999 months", ms(FRI), "UTC").len() == 1);
    assert!(infer("Remind me on 9999-12-31 at 23:59", ms(FRI), "UTC").len() == 1);
    let noise = "remind me in in in at at on on the the when when , , 99:99 13pm 0am 2026-13-01 \
                 december 32nd 00:60 - – — ! ; : ' \u{0}";
    assert!(infer(noise, ms(FRI), "UTC").is_empty());
    let big = "Remind me tomorrow and ".repeat(20_000);
    assert_eq!(infer(&big, ms(FRI), "UTC").len(), 1);
    // Shapes that would be quadratic with naive look-backs and clause walks: must stay fast.
    for hostile in [
        "tomorrow ".repeat(40_000) + "call bob",
        "remind me when the ".repeat(20_000),
        "don't ".repeat(40_000) + "remind me tomorrow",
        "once the the the ".repeat(20_000),
    ] {
        let started = std::time::Instant::now();
        let _ = infer(&hostile, ms(FRI), "UTC");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}

#[test]
fn debug_hides_predicate_tags() {
    let got = infer("Remind me when the secret merger closes", ms(FRI), "UTC");
    assert_eq!(got.len(), 1);
    let printed = format!("{got:?}");
    assert!(!printed.contains("merger"), "{printed}");
    assert!(printed.contains("tag_bytes"), "{printed}");
    let at = format!("{:?}", Condition::At { due_ms: 5 });
    assert_eq!(at, "At { due_ms: 5 }");
}

#[test]
fn condition_encoding_round_trips_and_rejects_junk() {
    for c in [
        Condition::At { due_ms: 0 },
        Condition::At {
            due_ms: 1_795_000_000_000,
        },
        Condition::At { due_ms: -5 },
        Condition::Predicate {
            tag: "when:invoice-clears".into(),
        },
    ] {
        assert_eq!(Condition::decode(&c.encode()), Ok(c));
    }
    for bad in [
        "",
        "at:",
        "at:+5",
        "at:05",
        "at:-0",
        "at:x",
        "pred:",
        "pred:when:",
        "pred:x",
        "x",
    ] {
        assert!(Condition::decode(bad).is_err(), "{bad:?}");
    }
    assert_eq!(Condition::At { due_ms: 1 }.kind(), "time");
    assert_eq!(
        Condition::Predicate {
            tag: "when:a-b".into()
        }
        .kind(),
        "predicate"
    );
}
