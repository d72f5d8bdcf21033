//! The synonym resource of [`crate::substitution`]: which words share a WordNet synset.
//!
//! The table (`data/wordnet-synsets.tsv`, built from WordNet 3.1 by `data/build_wordnet.py`;
//! WordNet licence in `data/LICENSE-WordNet`) lists, per lemma, the synsets it shares with at
//! least one other single word. It is parsed on first use only: a pass asks it only about word
//! pairs that already agree on every other word, so most passes never load it.
//!
//! Lemmas are found with a few English inflection rules (plural, -s, -ed, -ing and irregular
//! pasts); two words are synonyms only in the same inflection ("bought"/"purchased" yes,
//! "buys"/"bought" no: tense is part of a fact).

use std::collections::HashMap;
use std::sync::OnceLock;

static TABLE: &str = include_str!("../data/wordnet-synsets.tsv");

/// A lemma's synsets (sorted) and its sides of antonym pairs (`pair * 2 + side`, sorted).
struct Lemma {
    synsets: Vec<u32>,
    sides: Vec<u32>,
}

fn table() -> &'static HashMap<&'static str, Lemma> {
    static MAP: OnceLock<HashMap<&'static str, Lemma>> = OnceLock::new();
    MAP.get_or_init(|| {
        TABLE
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let mut cols = l.split('\t');
                let lemma = cols.next()?;
                let synsets = cols
                    .next()
                    .unwrap_or("")
                    .split(' ')
                    .filter_map(|i| i.parse().ok())
                    .collect();
                let mut sides: Vec<u32> = cols
                    .next()
                    .unwrap_or("")
                    .split(' ')
                    .filter_map(|o| {
                        let (pair, side) = o.split_at(o.len().checked_sub(1)?);
                        Some(pair.parse::<u32>().ok()? * 2 + u32::from(side == "-"))
                    })
                    .collect();
                sides.sort_unstable();
                Some((lemma, Lemma { synsets, sides }))
            })
            .collect()
    })
}

/// Irregular past forms of common verbs, as (past, lemma).
const IRREGULAR_PAST: &[(&str, &str)] = &[
    ("bought", "buy"),
    ("brought", "bring"),
    ("built", "build"),
    ("came", "come"),
    ("chose", "choose"),
    ("drove", "drive"),
    ("found", "find"),
    ("gave", "give"),
    ("got", "get"),
    ("held", "hold"),
    ("kept", "keep"),
    ("left", "leave"),
    ("lost", "lose"),
    ("made", "make"),
    ("met", "meet"),
    ("paid", "pay"),
    ("said", "say"),
    ("sent", "send"),
    ("sold", "sell"),
    ("spent", "spend"),
    ("spoke", "speak"),
    ("stole", "steal"),
    ("stolen", "steal"),
    ("taken", "take"),
    ("thought", "think"),
    ("told", "tell"),
    ("took", "take"),
    ("went", "go"),
    ("won", "win"),
    ("wrote", "write"),
];

/// Inflection of a word form relative to its lemma.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inflection {
    Base,
    S,
    Past,
    Ing,
}

/// The (lemma, inflection) readings of a word form.
fn readings(w: &str) -> Vec<(String, Inflection)> {
    let mut out = vec![(w.to_owned(), Inflection::Base)];
    let mut add = |lemma: String, i: Inflection| {
        if lemma.len() >= 3 {
            out.push((lemma, i));
        }
    };
    if let Some(&(_, lemma)) = IRREGULAR_PAST.iter().find(|(past, _)| *past == w) {
        add(lemma.to_owned(), Inflection::Past);
    }
    if let Some(stem) = w.strip_suffix("ies") {
        add(format!("{stem}y"), Inflection::S);
    }
    if let Some(stem) = w.strip_suffix("es") {
        add(stem.to_owned(), Inflection::S);
    }
    if let Some(stem) = w.strip_suffix('s') {
        add(stem.to_owned(), Inflection::S);
    }
    if let Some(stem) = w.strip_suffix("ied") {
        add(format!("{stem}y"), Inflection::Past);
    }
    if let Some(stem) = w.strip_suffix("ed") {
        add(stem.to_owned(), Inflection::Past);
        add(format!("{stem}e"), Inflection::Past);
    }
    if let Some(stem) = w.strip_suffix("ing") {
        add(stem.to_owned(), Inflection::Ing);
        add(format!("{stem}e"), Inflection::Ing);
    }
    out
}

/// Whether two different words share a WordNet synset in the same inflection.
pub(crate) fn synonyms(a: &str, b: &str) -> bool {
    if a == b || !a.is_ascii() || !b.is_ascii() {
        return false;
    }
    let t = table();
    let ra = readings(a);
    let rb = readings(b);
    ra.iter().any(|(la, ia)| {
        let Some(sa) = t.get(la.as_str()) else {
            return false;
        };
        rb.iter().any(|(lb, ib)| {
            ia == ib
                && la != lb
                && t.get(lb.as_str()).is_some_and(|sb| {
                    sa.synsets
                        .iter()
                        .any(|s| sb.synsets.binary_search(s).is_ok())
                })
        })
    })
}

/// Whether two words stand on opposite sides of a WordNet antonym pair (directly, or as
/// satellites of opposed adjective heads: "intact" / "damaged"), in any reading.
pub(crate) fn opposed(a: &str, b: &str) -> bool {
    if a == b || !a.is_ascii() || !b.is_ascii() {
        return false;
    }
    let t = table();
    let (ra, rb) = (readings(a), readings(b));
    ra.iter().any(|(la, _)| {
        let Some(sa) = t.get(la.as_str()) else {
            return false;
        };
        rb.iter().any(|(lb, _)| {
            t.get(lb.as_str()).is_some_and(|sb| {
                sa.sides
                    .iter()
                    .any(|s| sb.sides.binary_search(&(s ^ 1)).is_ok())
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_synsets_in_the_same_inflection_only() {
        assert!(synonyms("flat", "apartment"));
        assert!(synonyms("bought", "purchased"));
        assert!(synonyms("elevator", "lift"));
        assert!(!synonyms("buys", "bought"));
        assert!(!synonyms("green", "blue"));
        assert!(!synonyms("front", "back"));
    }

    #[test]
    fn table_ids_are_sorted_per_lemma() {
        for lemma in table().values() {
            assert!(lemma.synsets.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn antonyms_direct_and_indirect() {
        assert!(opposed("damaged", "intact"));
        assert!(opposed("open", "closed"));
        assert!(!opposed("flat", "apartment"));
        assert!(!opposed("open", "open"));
    }
}
