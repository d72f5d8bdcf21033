//! Substitution links: duplicates that differ by one word, a typo or a synonym
//! (openwop-agent-memory.md §"Background consolidation (RFC 0068)": "merge duplicates", while a
//! pass never merges two different facts).
//!
//! Two texts of one cohort are linked when their content words are the same multiset but for
//! up to three words on each side, and each pair of words is allowed by one word-pair rule:
//! a typo ([`crate::link::typo`]) or, as the only substitution, a synonym
//! ([`crate::link::synonym`]). With the substituted words aligned, the two must be near
//! duplicates: the meaning-neutral words agree and the rest of the sentence does not swap roles
//! ([`crate::normalise::role_swap`]).
//!
//! # Candidates
//!
//! While a text is tokenised, its [`KEYED_WORDS`] longest alphabetic content words are kept
//! ([`Longest`]). The guard fingerprint is a sum over the content words, so "the text minus one
//! of those words" is one subtraction: [`Longest::keys`]. Two texts that differ by one
//! substitution share a key whenever the substituted word is among the longest words of both,
//! which is where typos and synonyms live (short words are mostly function words). Only texts
//! sharing a key are compared, so a pass stays near-linear; a key shared by more than
//! [`MAX_SUBSTITUTION_RUN`] texts is not searched.
//!
//! Whether two texts are linked depends only on the two texts (plus the fixed word lists), so
//! consolidation stays idempotent and order-independent.

use crate::link::{synonym, typo};
use crate::minhash::fmix64;
use crate::normalise::{content_words, near_in_class, tokens};

const SKELETON_SALT: u64 = 0x3c6e_f372_fe94_f82b;

/// How many of a text's longest words are keyed.
pub(crate) const KEYED_WORDS: usize = 6;

/// Largest number of texts sharing one key that are compared pairwise.
pub(crate) const MAX_SUBSTITUTION_RUN: usize = 32;

/// A text's longest alphabetic content words (by length, ties by fingerprint term), tracked
/// during the one tokenising pass.
#[derive(Clone, Copy, Default)]
pub(crate) struct Longest {
    /// The kept words as [`rank`]s, in no order ([`Longest::keys`] sorts them): an unordered
    /// top-k costs one comparison per rejected word.
    words: [u128; KEYED_WORDS],
    n: usize,
    /// Index of the worst kept word once all [`KEYED_WORDS`] slots are full: the one a better
    /// word replaces.
    worst: usize,
    /// The guard fingerprint with every word of five letters or more replaced by its first
    /// two letters: texts that differ only by typos past the second letter share it.
    skeleton: u64,
}

/// A word's place in the order [`Longest`] keeps words by, as one integer (greater is
/// better): longer first, ties by the smaller term. Equal ranks are equal (length, term) pairs,
/// so the kept multiset is the top [`KEYED_WORDS`] of a text whatever the order its words come
/// in; and one integer comparison (no branch on the length, then the term) lets the worst slot
/// be chosen without mispredicted branches.
fn rank(len: usize, term: u64) -> u128 {
    (len as u128) << 64 | u128::from(!term)
}

fn term_of(rank: u128) -> u64 {
    !(rank as u64)
}

/// A long word's share of the skeleton: a fingerprint of its first two bytes.
const fn skeleton_term_of(first: u8, second: u8) -> u64 {
    fmix64(((first as u64) << 8 | second as u64) ^ SKELETON_SALT)
}

/// [`skeleton_term_of`] every pair of lowercase ASCII letters, the common case.
const LOWERCASE_SKELETON_TERMS: [u64; 26 * 26] = {
    let mut table = [0u64; 26 * 26];
    let mut i = 0;
    while i < 26 * 26 {
        table[i] = skeleton_term_of(b'a' + (i / 26) as u8, b'a' + (i % 26) as u8);
        i += 1;
    }
    table
};

fn skeleton_term(first: u8, second: u8) -> u64 {
    if first.is_ascii_lowercase() && second.is_ascii_lowercase() {
        LOWERCASE_SKELETON_TERMS[usize::from(first - b'a') * 26 + usize::from(second - b'a')]
    } else {
        skeleton_term_of(first, second)
    }
}

impl Longest {
    /// Offers a content word and its guard term.
    pub(crate) fn word(&mut self, token: &str, term: u64) {
        if token.len() < 3 {
            // Short words (most function words) are never keyed and keep their own term.
            self.skeleton = self.skeleton.wrapping_add(term);
            return;
        }
        // Most tokens are ASCII: decide on bytes, and only walk chars for the rest.
        let b = token.as_bytes();
        let (alphabetic, long) = if b.iter().all(u8::is_ascii_alphabetic) {
            (true, b.len() >= 5)
        } else if token.is_ascii() {
            (false, false)
        } else {
            (
                token.chars().all(char::is_alphabetic),
                token.chars().nth(4).is_some(),
            )
        };
        self.skeleton = self.skeleton.wrapping_add(if alphabetic && long {
            // The first two letters (as bytes: a non-ASCII letter contributes its lead
            // bytes, which is as good a prefix).
            skeleton_term(b[0], b[1])
        } else {
            term
        });
        if !alphabetic {
            return;
        }
        let item = rank(token.len(), term);
        if self.n < KEYED_WORDS {
            self.words[self.n] = item;
            self.n += 1;
        } else if item > self.words[self.worst] {
            self.words[self.worst] = item;
        } else {
            return;
        }
        if self.n == KEYED_WORDS {
            let mut worst = 0;
            for i in 1..KEYED_WORDS {
                if self.words[i] < self.words[worst] {
                    worst = i;
                }
            }
            self.worst = worst;
        }
    }

    /// The fingerprints of the text's content-word multiset minus each keyed word, and its
    /// skeleton.
    pub(crate) fn keys(&self, guard: u64) -> impl Iterator<Item = u64> {
        // Best rank first: which repeat the check below skips depends on the order (a repeat
        // leaves its `seen` slot 0, which a later term 0 matches).
        let mut words = self.words;
        words[..self.n].sort_unstable_by(|a, b| b.cmp(a));
        let mut seen: [u64; KEYED_WORDS] = [0; KEYED_WORDS];
        std::iter::once(self.skeleton ^ SKELETON_SALT).chain(
            words
                .into_iter()
                .take(self.n)
                .map(term_of)
                .enumerate()
                .filter_map(move |(i, term)| {
                    // A word keyed twice (it occurs twice) gives the same key twice; once is enough.
                    if seen[..i].contains(&term) {
                        return None;
                    }
                    seen[i] = term;
                    Some(guard.wrapping_sub(term))
                }),
        )
    }
}

/// Whether two normalised texts (with their raw forms, for capitalisation) differ by exactly one
/// typo or synonym substitution, as the module documentation describes.
pub(crate) fn linked(a_raw: &str, a: &str, b_raw: &str, b: &str, threshold: f64) -> bool {
    linked_by(a, b, threshold, |p, q, substituted| {
        typo::allows(p, q, a_raw, b_raw) || synonym::allows(p, q, substituted)
    })
}

/// [`linked`] with one word-pair rule alone (`allowed(p, q, substituted)`), at the default
/// threshold: how a rule's tables are checked.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn linked_with(a: &str, b: &str, allowed: impl Fn(&str, &str, usize) -> bool) -> bool {
    linked_by(a, b, crate::DEFAULT_NEAR_DUPLICATE_THRESHOLD, allowed)
}

fn linked_by(
    a: &str,
    b: &str,
    threshold: f64,
    allowed: impl Fn(&str, &str, usize) -> bool,
) -> bool {
    let mut x: Vec<&str> = content_words(a).collect();
    let mut y: Vec<&str> = content_words(b).collect();
    if x.len() != y.len() || x.is_empty() {
        return false;
    }
    x.sort_unstable();
    y.sort_unstable();
    let (mut i, mut j) = (0, 0);
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    while i < x.len() || j < y.len() {
        match (x.get(i), y.get(j)) {
            (Some(p), Some(q)) if p == q => {
                i += 1;
                j += 1;
            }
            (Some(p), Some(q)) if p < q => {
                only_a.push(*p);
                i += 1;
            }
            (Some(_), Some(q)) => {
                only_b.push(*q);
                j += 1;
            }
            (Some(p), None) => {
                only_a.push(*p);
                i += 1;
            }
            (None, Some(q)) => {
                only_b.push(*q);
                j += 1;
            }
            (None, None) => break,
        }
    }
    if only_a.is_empty() || only_a.len() != only_b.len() || only_a.len() > MAX_SUBSTITUTIONS {
        return false;
    }
    let substituted = only_a.len();
    let allowed = |p: &str, q: &str| allowed(p, q, substituted);
    let Some(pairing) = matching(&only_a, &only_b, allowed) else {
        return false;
    };
    // With the substituted words aligned, the two must be near duplicates: the same test as
    // for any two phrasings of one content-word multiset (fillers, order, roles).
    let b_aligned: String = tokens(b)
        .map(|t| pairing.iter().find(|(_, q)| *q == t).map_or(t, |(p, _)| *p))
        .collect::<Vec<_>>()
        .join(" ");
    a == b_aligned || near_in_class(a, &b_aligned, threshold)
}

/// Most words substituted between two linked texts (typos; a synonym only alone).
const MAX_SUBSTITUTIONS: usize = 3;

/// A pairing of the words only in one text with the words only in the other in which every pair
/// is allowed; the first in a fixed order of permutations, so the choice is deterministic.
pub(crate) fn matching<'w>(
    only_a: &[&'w str],
    only_b: &[&'w str],
    allowed: impl Fn(&str, &str) -> bool,
) -> Option<Vec<(&'w str, &'w str)>> {
    let n = only_a.len();
    let perms: &[&[usize]] = match n {
        1 => &[&[0]],
        2 => &[&[0, 1], &[1, 0]],
        _ => &[
            &[0, 1, 2],
            &[0, 2, 1],
            &[1, 0, 2],
            &[1, 2, 0],
            &[2, 0, 1],
            &[2, 1, 0],
        ],
    };
    perms.iter().find_map(|perm| {
        let pairs: Vec<(&str, &str)> = (0..n).map(|i| (only_a[i], only_b[perm[i]])).collect();
        pairs.iter().all(|(p, q)| allowed(p, q)).then_some(pairs)
    })
}

pub(crate) fn is_calendar_word(w: &str) -> bool {
    lexicon::is_calendar_name(w)
}

pub(crate) use lexicon::is_value_word;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalise::normalise;

    fn link(a: &str, b: &str) -> bool {
        linked(
            a,
            &normalise(a),
            b,
            &normalise(b),
            crate::DEFAULT_NEAR_DUPLICATE_THRESHOLD,
        )
    }

    /// The typo and synonym rules together (a pass applies both at once) keep every pair
    /// either rule alone keeps apart.
    #[test]
    fn names_numbers_and_values_never_link() {
        use crate::link::{synonym::Synonym, typo::Typo, LinkRule};
        for (a, b) in Typo::APART.iter().chain(Synonym::APART) {
            assert!(!link(a, b), "{a} / {b}");
        }
    }

    /// The tracker as it was before the unordered top-k, kept as the reference: an array
    /// kept sorted by insertion, keyed in that order.
    fn keys_of_the_insertion_sorted_tracker(words: &[(String, u64)], guard: u64) -> Vec<u64> {
        let better = |a: (usize, u64), b: (usize, u64)| a.0 > b.0 || (a.0 == b.0 && a.1 < b.1);
        let mut kept: Vec<(usize, u64)> = Vec::new();
        for (w, term) in words {
            if w.len() < 3 || !w.bytes().all(|b| b.is_ascii_alphabetic()) {
                continue;
            }
            let item = (w.len(), *term);
            if kept.len() < KEYED_WORDS {
                kept.push(item);
            } else if better(item, kept[KEYED_WORDS - 1]) {
                kept[KEYED_WORDS - 1] = item;
            } else {
                continue;
            }
            let mut i = kept.len() - 1;
            while i > 0 && better(kept[i], kept[i - 1]) {
                kept.swap(i, i - 1);
                i -= 1;
            }
        }
        let mut seen = [0u64; KEYED_WORDS];
        let mut keys = Vec::new();
        for (i, &(_, term)) in kept.iter().enumerate() {
            if seen[..i].contains(&term) {
                continue;
            }
            seen[i] = term;
            keys.push(guard.wrapping_sub(term));
        }
        keys
    }

    proptest::proptest! {
        /// The unordered top-k gives exactly the keys, in the same order, that the insertion-
        /// sorted tracker gave (terms drawn from a small range, so ties, repeats and term 0
        /// occur).
        #[test]
        fn longest_keys_are_those_of_the_insertion_sorted_tracker(
            words in proptest::collection::vec(("[a-z0-9]{1,9}", 0u64..6), 0..24),
        ) {
            let mut l = Longest::default();
            for (w, t) in &words {
                l.word(w, *t);
            }
            let got: Vec<u64> = l.keys(100).skip(1).collect();
            proptest::prop_assert_eq!(got, keys_of_the_insertion_sorted_tracker(&words, 100));
        }
    }

    #[test]
    fn skeleton_table_holds_the_skeleton_terms() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(skeleton_term(a, b), skeleton_term_of(a, b), "{a} {b}");
            }
        }
    }

    #[test]
    fn keys_drop_one_of_the_longest_words() {
        let mut l = Longest::default();
        for (w, t) in [
            ("is", 1u64),
            ("penicillin", 2),
            ("amara", 3),
            ("allergic", 4),
            ("to", 5),
            ("drug", 6),
        ] {
            l.word(w, t);
        }
        let keys: Vec<u64> = l.keys(100).skip(1).collect();
        assert_eq!(keys, vec![98, 96, 97, 94]);
    }
}
