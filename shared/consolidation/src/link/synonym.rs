//! The synonym rule of duplicate folding: two texts that differ by one word, the two words
//! sharing a WordNet synset in the same inflection ("apartment" / "flat", "lift" / "elevator",
//! "bought" / "purchased"), state one fact. Never a value word (units, times, weekdays,
//! colours, number words, quantifiers, negations: "5 minutes" / "5 seconds" share WordNet's
//! "instant"), and only one substitution: two at once drift from the fact.

use lexicon::wordnet;

use super::LinkRule;
use crate::substitution::{is_value_word, linked_with};

/// The synonym rule (a pass applies it through [`crate::substitution`], beside typos).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Synonym;

/// Whether `p` and `q`, the one word two texts differ by (`substituted` words in all), are
/// synonyms.
pub(crate) fn allows(p: &str, q: &str, substituted: usize) -> bool {
    substituted == 1 && !is_value_word(p) && !is_value_word(q) && wordnet::synonyms(p, q)
}

impl LinkRule for Synonym {
    const NAME: &'static str = "synonym";
    const MEET: &'static [(&'static str, &'static str)] = &[
        (
            "Kaito's apartment is on the fourth floor.",
            "Kaito's flat is on the fourth floor.",
        ),
        (
            "Ines wants a room away from the lift.",
            "Ines wants a room away from the elevator.",
        ),
        ("Priya bought a new sofa.", "Priya purchased a new sofa."),
    ];
    const APART: &'static [(&'static str, &'static str)] = &[
        ("The cooldown is 5 minutes.", "The cooldown is 5 seconds."),
        (
            "Leave parcels at the front door.",
            "Leave parcels at the back door.",
        ),
        (
            "Chen's favourite colour is green.",
            "Chen's favourite colour is blue.",
        ),
        (
            "Dieter reports to Marguerite.",
            "Marguerite reports to Dieter.",
        ),
        // Another tense is another fact.
        ("Priya buys a new sofa.", "Priya purchased a new sofa."),
        // A more general word is another fact.
        ("Leo is allergic to peanuts.", "Leo is allergic to nuts."),
    ];

    fn links_normalised(_: &str, older: &str, _: &str, newer: &str) -> bool {
        linked_with(older, newer, allows)
    }
}
