//! The word-order and filler rule of duplicate folding: two texts with the same content words
//! (fillers aside) state one fact when the order is the same and the word-pair Jaccard is at
//! least the threshold, or when the order differs with the same filler words and no two roles
//! swapped around a verb or preposition ("Yuki paid Samir" / "Samir paid Yuki"). See
//! [`crate::normalise`] for the guard, the shingles and the role-swap test.

use super::LinkRule;
use crate::normalise::{near_in_class, same_content_words};

/// The word-order and filler rule (a pass applies it to each guard class, see
/// [`crate::cluster`], at the configured threshold).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct WordOrder;

impl LinkRule for WordOrder {
    const NAME: &'static str = "word order and fillers";
    const MEET: &'static [(&'static str, &'static str)] = &[
        (
            "On Tuesdays, Clara works from home.",
            "Clara works from home on Tuesdays.",
        ),
        (
            "The canteen closes early on Fridays.",
            "On Fridays the canteen closes early.",
        ),
        (
            "Kindly send the signed lease to the landlord by post.",
            "Send the signed lease to the landlord by post.",
        ),
    ];
    const APART: &'static [(&'static str, &'static str)] = &[
        ("Yuki paid Samir.", "Samir paid Yuki."),
        (
            "Dieter reports to Marguerite.",
            "Marguerite reports to Dieter.",
        ),
        ("User is the owner.", "User is an owner."),
    ];

    fn links_normalised(_: &str, older: &str, _: &str, newer: &str) -> bool {
        same_content_words(older, newer)
            && near_in_class(older, newer, crate::DEFAULT_NEAR_DUPLICATE_THRESHOLD)
    }
}
