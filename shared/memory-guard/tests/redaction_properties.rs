//! SR-1 properties over generated secrets and text.

use std::borrow::Cow;

use memory_guard::{Redactor, SecretRegistry};
use proptest::prelude::*;

/// Characters that can never occur in a marker (`[REDACTED:` + id charset + `]`). Requiring one
/// in every generated value is what makes "no value survives" exact: the only place a value may
/// legitimately remain is inside a marker (a value equal to a secret id, say), and such a value
/// cannot be generated here. Brackets are excluded for the same reason (see the redaction module
/// docs: only values containing `]` or marker substrings can survive inside a marker).
const NON_MARKER: &[&str] = &["~", " ", "!", "#", "é", "ß", "ж", "日", "本", "🔑", "🎉"];

/// Letters, digits, id punctuation and a few multibyte characters; no brackets.
const ALPHABET: &[&str] = &[
    "a", "b", "c", "x", "R", "E", "D", "A", "C", "T", "0", "1", "9", "-", "_", ".", ":", "/", "@",
    "~", " ", "é", "ж", "日", "🔑",
];

/// Filler may contain anything, including marker syntax and its fragments.
const FILLER: &[&str] = &[
    "a",
    "b",
    "x",
    "0",
    " ",
    "\n",
    "é",
    "日",
    "🎉",
    "[",
    "]",
    ":",
    "[REDACTED:",
    "[REDACTED:s0]",
    "REDACTED",
    "]]",
    "[[",
];

/// Filler for the marker-shaped values: few letters, so text often lines up with a value's head.
const HOSTILE_FILLER: &[&str] = &["a", "b", "[", "]", "[REDACTED:"];
const HEAD: &[&str] = &["a", "b"];
const TAIL: &[&str] = &["a", "b", "]"];

fn pick(set: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    proptest::sample::select(set)
}

fn joined(
    set: &'static [&'static str],
    len: std::ops::Range<usize>,
) -> impl Strategy<Value = String> {
    proptest::collection::vec(pick(set), len).prop_map(|parts| parts.concat())
}

/// A value of at least 8 chars with a non-marker character somewhere inside.
fn value() -> impl Strategy<Value = String> {
    (
        joined(ALPHABET, 4..12),
        pick(NON_MARKER),
        joined(ALPHABET, 3..12),
    )
        .prop_map(|(head, mid, tail)| format!("{head}{mid}{tail}"))
}

fn secret_id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._:/@-]{1,12}"
}

#[derive(Debug, Clone)]
enum Piece {
    Filler(String),
    Secret(usize),
    Marker(usize),
}

fn pieces() -> impl Strategy<Value = Vec<Piece>> {
    proptest::collection::vec(
        prop_oneof![
            3 => joined(FILLER, 0..8).prop_map(Piece::Filler),
            2 => any::<usize>().prop_map(Piece::Secret),
            1 => any::<usize>().prop_map(Piece::Marker),
        ],
        0..16,
    )
}

fn build(secrets: &[(String, String)]) -> (SecretRegistry, Redactor) {
    let mut reg = SecretRegistry::new();
    for (id, value) in secrets {
        reg.register(id.clone(), value.clone()).unwrap();
    }
    let r = reg.redactor();
    (reg, r)
}

/// Appends enough unrelated secrets to push the redactor past the pattern count where it
/// switches from Aho-Corasick's own prefilter to its skip-table scan, so both paths are checked.
fn padded(mut secrets: Vec<(String, String)>, pad: bool) -> Vec<(String, String)> {
    if pad {
        secrets.extend((0..40).map(|i| (format!("pad-{i}"), format!("pad~value~{i:03}"))));
    }
    secrets
}

/// Renders pieces, drawing secrets and markers only from the first `drawn` entries (the
/// generated ones, not the padding).
fn render(pieces: &[Piece], secrets: &[(String, String)], drawn: usize) -> (String, bool) {
    let mut text = String::new();
    let mut embedded = false;
    for piece in pieces {
        match piece {
            Piece::Filler(s) => text.push_str(s),
            Piece::Secret(i) => {
                text.push_str(&secrets[i % drawn].1);
                embedded = true;
            }
            Piece::Marker(i) => {
                text.push_str(&format!("[REDACTED:{}]", secrets[i % drawn].0));
            }
        }
    }
    (text, embedded)
}

/// Straightforward restatement of the documented semantics: at each position take the longest
/// registered value or registered marker starting there; replace values, keep markers.
fn oracle(secrets: &[(String, String)], text: &str) -> String {
    let mut patterns: Vec<(String, Option<String>)> = Vec::new();
    let mut values_seen: Vec<&str> = Vec::new();
    for (id, _) in secrets {
        patterns.push((format!("[REDACTED:{id}]"), None));
    }
    for (id, value) in secrets {
        if value.chars().count() >= 8 && !values_seen.contains(&value.as_str()) {
            values_seen.push(value);
            patterns.push((value.clone(), Some(format!("[REDACTED:{id}]"))));
        }
    }
    let mut out = String::new();
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        let best = patterns
            .iter()
            .filter(|(p, _)| rest.starts_with(p.as_str()))
            .max_by_key(|(p, _)| p.len());
        match best {
            Some((p, Some(marker))) => {
                out.push_str(marker);
                at += p.len();
            }
            Some((p, None)) => {
                out.push_str(p);
                at += p.len();
            }
            None => {
                let c = rest.chars().next().unwrap();
                out.push(c);
                at += c.len_utf8();
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_registered_value_survives(
        generated in proptest::collection::vec((secret_id(), value()), 1..6),
        pad in any::<bool>(),
        pieces in pieces(),
    ) {
        let drawn = generated.len();
        let secrets = padded(generated, pad);
        let (_, r) = build(&secrets);
        let (text, embedded) = render(&pieces, &secrets, drawn);
        let (out, n) = r.redact_counting(&text);
        for (_, v) in &secrets {
            prop_assert!(!out.contains(v.as_str()), "value survived: {v:?} in {out:?}");
        }
        if embedded {
            prop_assert!(n >= 1);
        }
        prop_assert_eq!(n == 0, matches!(out, Cow::Borrowed(_)));
    }

    #[test]
    fn matches_the_reference_semantics(
        generated in proptest::collection::vec((secret_id(), value()), 1..6),
        pad in any::<bool>(),
        pieces in pieces(),
    ) {
        let drawn = generated.len();
        let secrets = padded(generated, pad);
        let (_, r) = build(&secrets);
        let (text, _) = render(&pieces, &secrets, drawn);
        prop_assert_eq!(r.redact(&text).into_owned(), oracle(&secrets, &text));
    }

    #[test]
    fn redaction_is_idempotent(
        generated in proptest::collection::vec((secret_id(), value()), 1..6),
        pad in any::<bool>(),
        pieces in pieces(),
    ) {
        let drawn = generated.len();
        let secrets = padded(generated, pad);
        let (_, r) = build(&secrets);
        let (text, _) = render(&pieces, &secrets, drawn);
        let once = r.redact(&text).into_owned();
        let twice = r.redact(&once);
        prop_assert!(matches!(twice, Cow::Borrowed(_)));
        prop_assert_eq!(twice.as_ref(), once.as_str());
    }

    /// Values sharing a core (prefixes, extensions, affixes of each other) exercise the
    /// longest-match rule, which independent random values almost never do.
    #[test]
    fn related_values_match_the_reference_and_never_survive(
        core in value(),
        affixes in proptest::collection::vec(
            (secret_id(), joined(ALPHABET, 0..4), joined(ALPHABET, 0..4)),
            1..6,
        ),
        pad in any::<bool>(),
        pieces in pieces(),
    ) {
        let generated: Vec<(String, String)> = affixes
            .into_iter()
            .map(|(id, pre, post)| (id, format!("{pre}{core}{post}")))
            .collect();
        let drawn = generated.len();
        let secrets = padded(generated, pad);
        let (_, r) = build(&secrets);
        let (text, _) = render(&pieces, &secrets, drawn);
        let out = r.redact(&text);
        let expected = oracle(&secrets, &text);
        prop_assert_eq!(out.as_ref(), expected.as_str());
        for (_, v) in &secrets {
            prop_assert!(!out.contains(v.as_str()));
        }
    }

    /// Idempotence also for hostile values that embed (part of) a registered marker after some
    /// text, the ones that can straddle a marker left by the first scan and need the repeated
    /// scan.
    #[test]
    fn redaction_is_idempotent_for_marker_shaped_values(
        ids in proptest::collection::vec("[a-c]{1,2}", 1..4),
        specs in proptest::collection::vec(
            (joined(HEAD, 0..4), any::<usize>(), 0usize..20, joined(TAIL, 0..3)),
            1..4,
        ),
        pieces in proptest::collection::vec(
            prop_oneof![
                joined(HOSTILE_FILLER, 0..4).prop_map(Piece::Filler),
                any::<usize>().prop_map(Piece::Secret),
                any::<usize>().prop_map(Piece::Marker),
            ],
            0..16,
        ),
        pad in any::<bool>(),
    ) {
        let generated: Vec<(String, String)> = specs
            .iter()
            .enumerate()
            .map(|(i, (head, target, cut, tail))| {
                let marker = format!("[REDACTED:{}]", ids[target % ids.len()]);
                let cut = (*cut).min(marker.len());
                (ids[i % ids.len()].clone(), format!("{head}{}{tail}", &marker[..cut]))
            })
            .collect();
        let drawn = generated.len();
        let secrets = padded(generated, pad);
        let (_, r) = build(&secrets);
        let (text, _) = render(&pieces, &secrets, drawn);
        let once = r.redact(&text).into_owned();
        let twice = r.redact(&once);
        prop_assert_eq!(twice.as_ref(), once.as_str());
    }
}
