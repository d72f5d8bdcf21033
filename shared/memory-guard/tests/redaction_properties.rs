//! SR-1 properties over generated secrets and text, checked against the reference model in
//! `tests/reference/mod.rs`.
//!
//! Each property runs 512 cases by default; set `PROPTEST_CASES` to run more.

use std::borrow::Cow;

use memory_guard::SecretRegistry;
use proptest::prelude::*;

mod reference;

/// Characters values and text are built from: id characters (so values can sit inside marker
/// ids), marker syntax, multi-byte characters and combining accents in both normalisation
/// forms.
const ALPHABET: &[&str] = &[
    "a", "b", "c", "x", "0", "1", "9", "-", "_", ".", ":", "/", "@", "R", "E", "D", "A", " ", "~",
    "[", "]", "é", "e\u{301}", "\u{301}", "ж", "日", "🔑",
];

/// Text filler: the alphabet plus marker fragments.
const FILLER: &[&str] = &[
    "a",
    "b",
    "x",
    "0",
    " ",
    "\n",
    "é",
    "e\u{301}",
    "日",
    "🔑",
    "[",
    "]",
    ":",
    "REDACTED",
    "[REDACTED:",
    "[REDACTED:]",
    "[REDACTED:s0]",
    "[REDACTED:[REDACTED:x]",
    "]]",
    "[[",
];

const FAMILIES: &[&str] = &["sk-live-", "ghp_", "AKIA"];

fn pick(set: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    proptest::sample::select(set)
}

fn joined(
    set: &'static [&'static str],
    len: std::ops::Range<usize>,
) -> impl Strategy<Value = String> {
    proptest::collection::vec(pick(set), len).prop_map(|parts| parts.concat())
}

/// A secret value: random, a key family member, or (applied later) related to another value.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => joined(ALPHABET, 6..14),
        2 => (pick(FAMILIES), joined(&["a", "b", "0", "1", "x"], 2..10))
            .prop_map(|(family, tail)| format!("{family}{tail}")),
        1 => joined(&["a", "b"], 7..12),
    ]
}

fn secret_id() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Za-z0-9._:/@-]{1,12}",
        1 => "[ab]{1,10}",
    ]
}

/// How a generated secret relates to the previous one: independent, or sharing text with it
/// so that occurrences overlap, nest or extend each other.
#[derive(Debug, Clone)]
enum Relation {
    Independent,
    /// The previous value's tail followed by new text: occurrences overlap.
    Overlap(usize),
    /// A piece of the previous value (possibly too short to be active).
    Inside(usize, usize),
    /// The previous value with text around it.
    Around(String, String),
    /// The previous value in the other normalisation form.
    OtherForm,
}

fn relation() -> impl Strategy<Value = Relation> {
    prop_oneof![
        4 => Just(Relation::Independent),
        2 => (1usize..16).prop_map(Relation::Overlap),
        1 => (0usize..8, 0usize..8).prop_map(|(a, b)| Relation::Inside(a, b)),
        2 => (joined(ALPHABET, 0..3), joined(ALPHABET, 0..3))
            .prop_map(|(a, b)| Relation::Around(a, b)),
        1 => Just(Relation::OtherForm),
    ]
}

fn floor_char(s: &str, at: usize) -> usize {
    (0..=at.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

fn other_form(value: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let nfc: String = value.nfc().collect();
    if nfc == value {
        value.nfd().collect()
    } else {
        nfc
    }
}

fn secrets() -> impl Strategy<Value = Vec<(String, String)>> {
    proptest::collection::vec((secret_id(), value(), relation()), 1..7).prop_map(|specs| {
        let mut out: Vec<(String, String)> = Vec::new();
        for (id, fresh, relation) in specs {
            let value = match (out.last(), relation) {
                (Some((_, prev)), Relation::Overlap(keep)) => {
                    let cut = floor_char(prev, prev.len().saturating_sub(keep));
                    format!("{}{fresh}", &prev[cut..])
                }
                (Some((_, prev)), Relation::Inside(a, b)) => {
                    let start = floor_char(prev, a);
                    let end = floor_char(prev, prev.len().saturating_sub(b)).max(start);
                    prev[start..end].to_owned()
                }
                (Some((_, prev)), Relation::Around(a, b)) => format!("{a}{prev}{b}"),
                (Some((_, prev)), Relation::OtherForm) => other_form(prev),
                _ => fresh,
            };
            out.push((id, value));
        }
        out
    })
}

#[derive(Debug, Clone)]
enum Piece {
    Filler(String),
    /// A secret value, possibly in its other normalisation form.
    Secret(usize, bool),
    /// A piece of a secret value (a near miss or an overlap with what follows).
    Fragment(usize, usize, bool),
    /// `[REDACTED:<id>]` for a secret's id.
    Marker(usize),
    /// `[REDACTED:<value>]` for a secret's value (a marker hiding a secret if the value is
    /// made of id characters).
    Smuggled(usize),
}

fn pieces() -> impl Strategy<Value = Vec<Piece>> {
    proptest::collection::vec(
        prop_oneof![
            4 => joined(FILLER, 0..6).prop_map(Piece::Filler),
            3 => (any::<usize>(), any::<bool>()).prop_map(|(i, f)| Piece::Secret(i, f)),
            2 => (any::<usize>(), 1usize..12, any::<bool>())
                .prop_map(|(i, n, head)| Piece::Fragment(i, n, head)),
            2 => any::<usize>().prop_map(Piece::Marker),
            1 => any::<usize>().prop_map(Piece::Smuggled),
        ],
        0..20,
    )
}

/// Padding added to the generated secrets, so every finder is exercised: 1 pattern (memmem),
/// up to 64 (packed Teddy), more (skip table), a family sharing a rare byte (rare-byte finder)
/// and families sharing a literal prefix (prefix finder, one prefix or several).
#[derive(Debug, Clone, Copy)]
enum Pad {
    /// Distinct alphanumeric values with no shared rare byte or prefix.
    Unrelated(u32),
    /// A `sk-live-` family; the text draws on it too.
    Family(u32),
    /// Every generated value gets the prefix [`SHARED`] (one prefix for all), and the padding
    /// alternates between that prefix and a second one; the text draws on it too.
    Shared(u32),
}

const SHARED: &str = "wallet";

impl Pad {
    /// Whether the text draws on the padding as well as on the generated secrets.
    fn drawn(self) -> bool {
        !matches!(self, Pad::Unrelated(_))
    }
}

const PADS: &[Pad] = &[
    Pad::Unrelated(0),
    Pad::Unrelated(12),
    Pad::Family(12),
    Pad::Unrelated(70),
    Pad::Family(70),
    Pad::Shared(0),
    Pad::Shared(12),
    Pad::Shared(70),
];

fn padded(mut secrets: Vec<(String, String)>, pad: Pad) -> Vec<(String, String)> {
    let (count, value): (u32, fn(u32) -> String) = match pad {
        Pad::Unrelated(count) => (count, |i| {
            let mixed = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
            format!("{mixed:x}Zq{i}").chars().rev().collect()
        }),
        Pad::Family(count) => (count, |i| format!("sk-live-pad{i:03}x")),
        Pad::Shared(count) => {
            for (_, value) in &mut secrets {
                value.insert_str(0, SHARED);
            }
            (count, |i| {
                let head = if i % 2 == 0 { SHARED } else { "pursey" };
                let mixed = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                format!("{head}{mixed:x}{i}")
            })
        }
    };
    secrets.extend((0..count).map(|i| (format!("pad-{i}"), value(i))));
    secrets
}

fn render(pieces: &[Piece], secrets: &[(String, String)], drawn: usize) -> String {
    let mut text = String::new();
    for piece in pieces {
        match piece {
            Piece::Filler(s) => text.push_str(s),
            Piece::Secret(i, other) => {
                let value = &secrets[i % drawn].1;
                if *other {
                    text.push_str(&other_form(value));
                } else {
                    text.push_str(value);
                }
            }
            Piece::Fragment(i, n, head) => {
                let value = &secrets[i % drawn].1;
                let n = (*n).min(value.len());
                if *head {
                    text.push_str(&value[..floor_char(value, n)]);
                } else {
                    text.push_str(&value[floor_char(value, value.len() - n)..]);
                }
            }
            Piece::Marker(i) => text.push_str(&format!("[REDACTED:{}]", secrets[i % drawn].0)),
            Piece::Smuggled(i) => {
                text.push_str(&format!("[REDACTED:{}]", secrets[i % drawn].1));
            }
        }
    }
    text
}

fn build(secrets: &[(String, String)]) -> memory_guard::Redactor {
    let mut reg = SecretRegistry::new();
    for (id, value) in secrets {
        reg.register(id.as_str(), value.as_str()).unwrap();
    }
    reg.redactor()
}

/// Generated secrets, padded as a [`Pad`] says, and a text of pieces drawn from the generated
/// ones (or from all, padding included, when the pad is drawn from too).
#[derive(Debug)]
struct Case {
    secrets: Vec<(String, String)>,
    text: String,
}

fn case() -> impl Strategy<Value = Case> {
    (secrets(), proptest::sample::select(PADS), pieces()).prop_map(|(generated, pad, pieces)| {
        let generated_len = generated.len();
        let secrets = padded(generated, pad);
        let drawn = if pad.drawn() {
            secrets.len()
        } else {
            generated_len
        };
        let text = render(&pieces, &secrets, drawn);
        Case { secrets, text }
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Engine (fast path and fallback alone) against the reference model: same output, same
    /// count; borrowed exactly when nothing was replaced; no active value left outside
    /// markers.
    #[test]
    fn engine_matches_the_reference_model(
        case in case(),
    ) {
        let Case { secrets, text } = case;
        let r = build(&secrets);
        let expected = reference::redact(&secrets, &text);

        let (out, n) = r.redact_counting(&text);
        prop_assert_eq!((out.as_ref(), n), (expected.0.as_str(), expected.1));
        prop_assert_eq!(n == 0, matches!(out, Cow::Borrowed(_)));
        // A redactor's second text takes the overlap-reach shortcut: same answer.
        let (again, again_n) = r.redact_counting(&text);
        prop_assert_eq!((again.as_ref(), again_n), (expected.0.as_str(), expected.1));

        let (slow, slow_n) = r.redact_counting_fallback(&text);
        prop_assert_eq!((slow.as_ref(), slow_n), (expected.0.as_str(), expected.1));

        prop_assert_eq!(reference::survivor(&secrets, &out), None);
    }

    /// `redact(redact(x)) == redact(x)`, whatever the ids (rule 6); the second pass borrows.
    #[test]
    fn redaction_is_idempotent(
        case in case(),
    ) {
        let Case { secrets, text } = case;
        let r = build(&secrets);
        let once = r.redact(&text).into_owned();
        let twice = r.redact(&once);
        prop_assert_eq!(reference::survivor(&secrets, &twice), None);
        prop_assert!(matches!(twice, Cow::Borrowed(_)));
        prop_assert_eq!(twice.as_ref(), once.as_str());
    }

    /// Secrets registered under ids made of values (equal to their own value, containing it,
    /// contained in it, or holding another secret's value): the output equals the model's, no
    /// marker name holds an active form, and nothing survives outside markers.
    #[test]
    fn no_marker_carries_a_value(
        values in proptest::collection::vec(
            proptest::collection::vec(pick(&["a", "b", "k", "9", "-", "_", "é", "e\u{301}"]), 8..16)
                .prop_map(|p| p.concat()),
            1..4,
        ),
        shapes in proptest::collection::vec((0usize..5, 0usize..4), 4),
        filler in proptest::collection::vec(pick(&["x", " ", "[REDACTED:", "]", "a"]), 0..12),
    ) {
        let id_of = |i: usize, shape: usize, other: usize| -> String {
            let v = &values[i];
            let w = &values[other % values.len()];
            let raw = match shape {
                0 => v.clone(),
                1 => format!("vault/{v}/v2"),
                2 => v.chars().take(4).collect(),
                3 => format!("id-{w}"),
                _ => format!("plain-{i}"),
            };
            // Only id characters: the registry refuses the rest.
            raw.chars().filter(|c| c.is_ascii_alphanumeric() || "._:/@-".contains(*c)).collect()
        };
        let secrets: Vec<(String, String)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (id_of(i, shapes[i].0, shapes[i].1), v.clone()))
            .filter(|(id, _)| !id.is_empty())
            .collect();
        let r = build(&secrets);
        let mut text = String::new();
        for (i, v) in values.iter().enumerate() {
            text.push_str(filler.get(i).copied().unwrap_or(" "));
            text.push_str(v);
        }
        for (id, _) in &secrets {
            text.push_str(&format!(" [REDACTED:{id}] "));
        }
        let out = r.redact(&text).into_owned();
        let expected = reference::redact(&secrets, &text);
        prop_assert_eq!(&out, &expected.0);
        prop_assert_eq!(reference::value_in_a_marker_name(&secrets, &out), None);
        prop_assert_eq!(reference::survivor(&secrets, &out), None);
        let again = r.redact(&out).into_owned();
        prop_assert_eq!(again, out);
    }

    /// Nested and repeated values over runs of few letters: the inputs that make the fast path
    /// give up, checked against the model.
    #[test]
    fn dense_nested_values_match_the_reference_model(
        lens in proptest::collection::vec(8usize..24, 1..8),
        letters in proptest::collection::vec(pick(&["a", "b", "[REDACTED:a]", "é"]), 0..400),
        // The shared prefix never occurs in a text of these letters.
        pad in proptest::sample::select(&PADS[..5]),
    ) {
        let generated: Vec<(String, String)> = lens
            .iter()
            .enumerate()
            .map(|(i, &len)| (format!("n{i}"), format!("{}b", "a".repeat(len - 1))))
            .chain(lens.iter().map(|&len| (format!("m{len}"), "a".repeat(len))))
            .collect();
        let secrets = padded(generated, pad);
        let r = build(&secrets);
        let text = letters.concat();
        let expected = reference::redact(&secrets, &text);
        for _ in 0..2 {
            let (out, n) = r.redact_counting(&text);
            prop_assert_eq!((out.as_ref(), n), (expected.0.as_str(), expected.1));
        }
    }
}
