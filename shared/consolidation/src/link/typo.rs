//! The typo rule of duplicate folding: two texts that differ by up to three words, each pair a
//! misspelling ("recieve" / "receive"), state one fact. Only a word nobody writes on purpose is
//! a typo: one edit apart (insert, delete, change, swap two neighbours), the shorter at least
//! four letters, never two value words ("minute" / "minutes"), never two words WordNet knows
//! ("grandpa" / "grandma", "week" / "weak": two meanings), and never a word written with a
//! capital, at the start of a sentence too (a name: "Mark's" / "Mary's", "Holt" / "Holm"), but
//! for a misspelt weekday or month.

use lexicon::wordnet;

use super::LinkRule;
use crate::names::capitalised_words;
use crate::substitution::{is_calendar_word, is_value_word, linked_with};

/// The typo rule (a pass applies it through [`crate::substitution`], beside synonyms).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Typo;

/// Whether `p` (in the text `a_raw`) and `q` (in `b_raw`) are one word and its misspelling.
pub(crate) fn allows(p: &str, q: &str, a_raw: &str, b_raw: &str) -> bool {
    let calendar = is_calendar_word(p) || is_calendar_word(q);
    is_typo(p, q)
        && (calendar || (!capitalised(a_raw, p) && !capitalised(b_raw, q)))
        && (calendar || !both_words(p, q))
}

/// Whether `token` is written with a capital anywhere in `raw`, the start of a sentence
/// included: it may be a name, whose one-letter variants are other names.
fn capitalised(raw: &str, token: &str) -> bool {
    capitalised_words(raw).iter().any(|n| n == token)
}

/// Whether both words of a one-edit pair are words WordNet knows (in some inflection, as a
/// common word or a name): "grandpa" / "grandma", "marks" / "mary's", "robs" / "bobs". A typo
/// makes a word nobody writes on purpose; two real words one letter apart are two meanings.
fn both_words(p: &str, q: &str) -> bool {
    wordnet::is_known(p) && wordnet::is_known(q)
}

/// One edit apart (optimal string alignment distance 1), both alphabetic, the shorter at
/// least four letters, and not two different value words ("minute"/"minutes" is a typo-sized
/// difference between two value words and stays apart).
fn is_typo(p: &str, q: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (p.chars().collect(), q.chars().collect());
    if a.len().min(b.len()) < 4
        || !a.iter().all(|c| c.is_alphabetic())
        || !b.iter().all(|c| c.is_alphabetic())
        || (is_value_word(p) && is_value_word(q))
    {
        return false;
    }
    one_edit(&a, &b)
}

fn one_edit(a: &[char], b: &[char]) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    match long.len() - short.len() {
        0 => {
            let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
            match diff.as_slice() {
                [_] => true,
                [i, j] => *j == i + 1 && a[*i] == b[*j] && a[*j] == b[*i],
                _ => false,
            }
        }
        1 => {
            let k = short.iter().zip(long).take_while(|(x, y)| x == y).count();
            short[k..] == long[k + 1..]
        }
        _ => false,
    }
}

impl LinkRule for Typo {
    const NAME: &'static str = "typo";
    const MEET: &'static [(&'static str, &'static str)] = &[
        (
            "Amara is allergic to penicillin.",
            "Amara is alergic to penicillin.",
        ),
        (
            "The quarterly report is due next Wednesday.",
            "The quarterly report is due next Wendesday.",
        ),
        (
            "The accountant needs the receipts by Friday.",
            "The accountant needs the reciepts by Friday.",
        ),
        (
            "the quarterly budget review is on thursday",
            "the quartely budget reveiw is on thursday",
        ),
    ];
    const APART: &'static [(&'static str, &'static str)] = &[
        // A name opening a sentence is a name; two real words are two meanings.
        ("Mark's birthday is 3 July.", "Mary's birthday is 3 July."),
        ("Anna is allergic to cats.", "Anne is allergic to cats."),
        ("Bob's flight lands at noon.", "Rob's flight lands at noon."),
        (
            "Grandpa's birthday is 3 July.",
            "Grandma's birthday is 3 July.",
        ),
        (
            "Remind me of grandpa's birthday.",
            "Remind me of grandma's birthday.",
        ),
        (
            "The office plants need watering twice a week.",
            "The office plants need watering twice a weak.",
        ),
        (
            "Lukas Bergen is a vegetarian.",
            "Lukas Berger is a vegetarian.",
        ),
        (
            "Ship the hinge to Greta Holt.",
            "Ship the hinge to Greta Holm.",
        ),
        ("The cooldown is 5 minutes.", "The cooldown is 5 seconds."),
        ("Customer 48213 called.", "Customer 48218 called."),
        (
            "Yoga is on Mondays at 18:30.",
            "Yoga is on Wednesdays at 18:30.",
        ),
        (
            "The cooldown lasts one minute.",
            "The cooldown lasts one minutes.",
        ),
    ];

    fn links_normalised(older_raw: &str, older: &str, newer_raw: &str, newer: &str) -> bool {
        linked_with(older, newer, |p, q, _| allows(p, q, older_raw, newer_raw))
    }
}
