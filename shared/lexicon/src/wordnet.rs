//! The word relations of consolidation: which words share a WordNet synset (synonyms, for its
//! substitution stage), which stand side by side (neighbours, for its embedding stage), which
//! oppose each other (antonyms), and which words WordNet knows as common words or only as names.
//!
//! The table (`data/wordnet-synsets.tsv`, built from WordNet 3.1 by `data/build_wordnet.py`;
//! WordNet licence in `data/LICENSE-WordNet`) lists, per lemma, its synsets, antonym sides and
//! neighbour synsets. It is parsed on first use only: a pass asks it only about word pairs that
//! already agree on every other word, so most passes never load it.
//!
//! Lemmas are found with a few English inflection rules (plural, -s, -ed, -ing and irregular
//! pasts); two words are synonyms only in the same inflection ("bought"/"purchased" yes,
//! "buys"/"bought" no: tense is part of a fact).

use std::sync::OnceLock;

static TABLE: &str = include_str!("../data/wordnet-synsets.tsv");

/// The parsed table in one flat pool: per lemma (sorted, as in the file) the pool offsets at
/// which its synsets, its antonym sides (`pair * 2 + side`) and its upward neighbours
/// (hypernyms and similar-to) start, and where they end. About 3 MB once loaded.
struct Table {
    lemmas: Vec<&'static str>,
    spans: Vec<[u32; 4]>,
    pool: Vec<u32>,
    /// Per lemma: whether WordNet writes it in lower case somewhere (a common word) rather
    /// than only with a capital (a proper name: "Mary", "Anne").
    common: Vec<bool>,
    /// Per lemma: whether its only part of speech is the noun.
    only_noun: Vec<bool>,
}

/// One lemma's three sorted lists.
struct Lemma<'t> {
    synsets: &'t [u32],
    sides: &'t [u32],
    neighbours: &'t [u32],
}

impl Table {
    fn get(&self, lemma: &str) -> Option<Lemma<'_>> {
        let i = self.lemmas.binary_search(&lemma).ok()?;
        let [a, b, c, d] = self.spans[i].map(|x| x as usize);
        Some(Lemma {
            synsets: &self.pool[a..b],
            sides: &self.pool[b..c],
            neighbours: &self.pool[c..d],
        })
    }
}

fn table() -> &'static Table {
    static TABLE_CELL: OnceLock<Table> = OnceLock::new();
    TABLE_CELL.get_or_init(|| {
        let mut t = Table {
            lemmas: Vec::new(),
            spans: Vec::new(),
            pool: Vec::new(),
            common: Vec::new(),
            only_noun: Vec::new(),
        };
        let pos = |pool: &Vec<u32>| u32::try_from(pool.len()).unwrap_or(u32::MAX);
        for line in TABLE.lines().filter(|l| !l.starts_with('#')) {
            let mut cols = line.split('\t');
            let Some(lemma) = cols.next() else {
                continue;
            };
            let mut span = [pos(&t.pool); 4];
            for (k, col) in (0..3).zip(cols.by_ref()) {
                span[k] = pos(&t.pool);
                let start = t.pool.len();
                t.pool.extend(col.split(' ').filter_map(|o| {
                    if k == 1 {
                        let (pair, side) = o.split_at(o.len().checked_sub(1)?);
                        Some(pair.parse::<u32>().ok()? * 2 + u32::from(side == "-"))
                    } else {
                        o.parse().ok()
                    }
                }));
                t.pool[start..].sort_unstable();
            }
            span[3] = pos(&t.pool);
            let kind = cols.next().unwrap_or("c");
            t.common.push(!kind.starts_with('p'));
            t.only_noun.push(kind.get(1..) == Some("n"));
            t.lemmas.push(lemma);
            t.spans.push(span);
        }
        t
    })
}

fn intersect(a: &[u32], b: &[u32]) -> bool {
    a.iter().any(|x| b.binary_search(x).is_ok())
}

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
    if let Some(lemma) = crate::irregular_past(w) {
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
pub fn synonyms(a: &str, b: &str) -> bool {
    related(a, b, Agreement::Same, |x, y| {
        intersect(x.synsets, y.synsets)
    })
}

/// Whether two different words are WordNet neighbours in the same tense: synonyms, similar
/// adjectives ("lengthy" / "long"), or an adjective and the attribute it values ("afraid" /
/// "fear"); a plural may meet a singular. Never a hypernym: a more general word states another
/// fact ("allergic to nuts" is not "allergic to peanuts", "food" is not "meals"). Looser than
/// [`synonyms`]: only the embedding stage uses it, where an embedding has already judged the
/// two sentences alike.
pub fn neighbours(a: &str, b: &str) -> bool {
    related(a, b, Agreement::Tense, |x, y| {
        intersect(x.synsets, y.synsets)
            || intersect(x.neighbours, y.synsets)
            || intersect(y.neighbours, x.synsets)
    })
}

/// Whether `w` is an English word WordNet knows as a common word, in some inflection ("marks",
/// "grandma"); a name WordNet only knows with a capital ("marys") is not.
pub fn is_common_word(w: &str) -> bool {
    let t = table();
    known_lemmas(w).any(|i| t.common[i])
}

/// Whether every reading of `w` WordNet knows is a noun and nothing else ("meat", "pork",
/// "manager"; not "report", "own", "belong"): a word that names a thing.
pub fn is_only_noun(w: &str) -> bool {
    let t = table();
    let mut known = known_lemmas(w).peekable();
    known.peek().is_some() && known.all(|i| t.only_noun[i])
}

/// Whether WordNet knows `w` in some inflection, as a common word or as a name.
pub fn is_known(w: &str) -> bool {
    known_lemmas(w).next().is_some()
}

/// The table rows of the lemmas `w` reads as (see [`readings`]) that WordNet lists.
fn known_lemmas(w: &str) -> impl Iterator<Item = usize> {
    let t = table();
    let readings = if w.is_ascii() {
        readings(w)
    } else {
        Vec::new()
    };
    readings
        .into_iter()
        .filter_map(move |(lemma, _)| t.lemmas.binary_search(&lemma.as_str()).ok())
}

/// Whether two different forms read as one lemma ("paid" / "pay", "meetings" / "meeting"): the
/// same word in another inflection, which a reformulation may need ("we pay" / "gets paid").
pub fn same_lemma(a: &str, b: &str) -> bool {
    if a == b {
        return false;
    }
    let (ra, rb) = (readings(a), readings(b));
    ra.iter().any(|(la, _)| rb.iter().any(|(lb, _)| la == lb))
}

/// Whether `w` reads as a past form ("paid", "cleaned") and not as a present one.
pub fn is_past_form(w: &str) -> bool {
    let r = readings(w);
    r.iter().any(|(_, i)| *i == Inflection::Past) && !w.ends_with('s')
}

/// Whether `participle` is the past participle of the verb form `verb` ("paid" / "pay",
/// "cleaned" / "cleans", "stolen" / "steals"): the same lemma, read as a past form.
pub fn participle_of(participle: &str, verb: &str) -> bool {
    let (rp, rv) = (readings(participle), readings(verb));
    rp.iter().any(|(lp, ip)| {
        *ip == Inflection::Past
            && rv.iter().any(|(lv, iv)| {
                lv == lp && matches!(iv, Inflection::Base | Inflection::S | Inflection::Past)
            })
    })
}

/// Whether two words stand on opposite sides of a WordNet antonym pair (directly, or as
/// satellites of opposed adjective heads: "intact" / "damaged"), in any reading.
pub fn opposed(a: &str, b: &str) -> bool {
    related(a, b, Agreement::Any, |x, y| {
        x.sides
            .iter()
            .any(|s| y.sides.binary_search(&(s ^ 1)).is_ok())
    })
}

/// Which inflections of two different lemmas [`related`] lets meet.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Agreement {
    /// Any: antonyms oppose in every form.
    Any,
    /// The same inflection: "bought" / "purchased", never "buys" / "bought".
    Same,
    /// The same tense, while a plural may meet a singular: a mass noun has no plural
    /// ("with meals" / "with food").
    Tense,
}

impl Agreement {
    fn allows(self, a: Inflection, b: Inflection) -> bool {
        match self {
            Agreement::Any => true,
            Agreement::Same => a == b,
            Agreement::Tense => {
                a == b
                    || matches!(
                        (a, b),
                        (Inflection::Base, Inflection::S) | (Inflection::S, Inflection::Base)
                    )
            }
        }
    }
}

fn related(a: &str, b: &str, agreement: Agreement, test: impl Fn(&Lemma, &Lemma) -> bool) -> bool {
    if a == b || !a.is_ascii() || !b.is_ascii() {
        return false;
    }
    let t = table();
    let (ra, rb) = (readings(a), readings(b));
    ra.iter().any(|(la, ia)| {
        let Some(x) = t.get(la) else {
            return false;
        };
        rb.iter().any(|(lb, ib)| {
            agreement.allows(*ia, *ib) && la != lb && t.get(lb).is_some_and(|y| test(&x, &y))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs<'a> = &'a [(&'a str, &'a str)];

    /// `relation` (named `name`) holds for every pair of `meet` and for none of `apart`.
    fn holds(name: &str, relation: fn(&str, &str) -> bool, meet: Pairs<'_>, apart: Pairs<'_>) {
        for (a, b) in meet {
            assert!(relation(a, b), "{name} must hold for {a} / {b}");
        }
        for (a, b) in apart {
            assert!(!relation(a, b), "{name} must not hold for {a} / {b}");
        }
    }

    #[test]
    fn shares_synsets_in_the_same_inflection_only() {
        let meet = [
            ("flat", "apartment"),
            ("bought", "purchased"),
            ("elevator", "lift"),
        ];
        let apart = [("buys", "bought"), ("green", "blue"), ("front", "back")];
        holds("synonyms", synonyms, &meet, &apart);
    }

    #[test]
    fn table_is_sorted_and_whole() {
        let t = table();
        assert!(t.lemmas.windows(2).all(|w| w[0] < w[1]));
        assert!(t.lemmas.len() > 60_000, "{}", t.lemmas.len());
        assert!(t
            .spans
            .iter()
            .all(|s| s[0] <= s[1] && s[1] <= s[2] && s[2] <= s[3]));
    }

    #[test]
    fn neighbours_are_looser_than_synonyms() {
        let meet = [("lengthy", "long"), ("afraid", "fear")];
        let apart = [("tea", "coffee"), ("green", "blue"), ("bought", "buy")];
        holds("neighbours", neighbours, &meet, &apart);
        assert!(!synonyms("lengthy", "long"));
    }

    #[test]
    fn a_general_word_is_not_a_neighbour_of_a_specific_one() {
        for (specific, general) in [
            ("peanuts", "nuts"),
            ("shrimp", "shellfish"),
            ("meals", "food"),
            ("apples", "fruit"),
            ("faucet", "tap"),
        ] {
            assert!(!neighbours(specific, general), "{specific} / {general}");
        }
    }

    #[test]
    fn names_are_told_from_common_words() {
        for w in ["marks", "grandma", "grandpas", "anna", "robs", "bobs"] {
            assert!(is_common_word(w), "{w}");
        }
        for w in ["marys", "anne", "mensah"] {
            assert!(!is_common_word(w), "{w}");
        }
        assert!(is_known("anne") && is_known("marys") && !is_known("mensah"));
    }

    #[test]
    fn nouns_that_are_only_nouns() {
        for w in ["meat", "pork", "manager", "suitcase"] {
            assert!(is_only_noun(w), "{w}");
        }
        for w in ["reports", "owns", "belongs", "fast", "mensah"] {
            assert!(!is_only_noun(w), "{w}");
        }
    }

    #[test]
    fn same_lemma_across_inflections() {
        let meet = [
            ("paid", "pay"),
            ("meetings", "meeting"),
            ("cleans", "cleaned"),
        ];
        let apart = [("pay", "pay"), ("tea", "coffee")];
        holds("same_lemma", same_lemma, &meet, &apart);
    }

    #[test]
    fn antonyms_direct_and_indirect() {
        let meet = [("damaged", "intact"), ("open", "closed")];
        let apart = [("flat", "apartment"), ("open", "open")];
        holds("opposed", opposed, &meet, &apart);
    }
}
