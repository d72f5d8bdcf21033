//! The fact check of the embedding stage (openwop-agent-memory.md §"Background consolidation
//! (RFC 0068)": "merge duplicates", never two different facts): two texts an embedding
//! proposed as duplicates ([`crate::semantic`]) are linked only when they state the same fact.
//! The same numbers, the same names (a capitalised word at the start of a sentence too, unless
//! it is a common word), the same identifiers (URLs, addresses, hosts, versions) whole, the
//! same value words, as many negations, no word negated by a prefix in the other, no WordNet
//! antonyms between the words that differ, neither text a strict subset of the other, not a
//! one- or two-word substitution that WordNet does not vouch for as the same meaning (a
//! synonym, a similar adjective, an adjective and its attribute; never a more general or more
//! specific word: "peanuts" / "tree nuts"), at least half of the shorter text's content words
//! in the other, and no phrase replaced by an unrelated one. Embeddings rate two sentences
//! about one thing as similar whether or not they agree, so these checks, not the score, keep
//! distinct facts apart.

use lexicon::wordnet;

use super::LinkRule;
use crate::names::name_words;
use crate::normalise::{content_words, tokens};
use crate::substitution::{is_value_word, matching};

/// The embedding stage's fact check.
pub(crate) struct FactCheck;

impl LinkRule for FactCheck {
    const NAME: &'static str = "embedding fact check";
    const MEET: &'static [(&'static str, &'static str)] = &[
        (
            "Javier owns the bakery on Calle Mayor.",
            "The bakery on Calle Mayor is owned by Javier.",
        ),
        (
            "Hugo is fluent in Portuguese.",
            "Hugo speaks fluent Portuguese.",
        ),
        (
            "Eun-ji is afraid of flying.",
            "Eun-ji has a fear of flying.",
        ),
    ];
    const APART: &'static [(&'static str, &'static str)] = &[
        (
            "Leo is allergic to peanuts.",
            "Leo is allergic to tree nuts.",
        ),
        (
            "Leo is allergic to shrimp.",
            "Leo is allergic to shellfish.",
        ),
        (
            "Mark's birthday is on 3 July.",
            "Mary's birthday is on 3 July.",
        ),
        (
            "The production dashboard is at https://app.example.com.",
            "The staging dashboard is at https://staging.app.example.com.",
        ),
        (
            "Send the contract to legal@example.org.",
            "Send the contract to legal@example.com.",
        ),
        (
            "The Oslo office has step-free access.",
            "The Oslo office does not have step-free access.",
        ),
        (
            "Customer support is available on holidays.",
            "Customer support is unavailable on holidays.",
        ),
        (
            "The leak in the attic came from the chimney flashing.",
            "The leak in the attic came from a cracked roof tile.",
        ),
        (
            "Kaito's flat is on the fourth floor.",
            "Kaito's manager's apartment is on the fourth floor.",
        ),
        ("Olga does not eat meat.", "Olga never eats pork."),
        (
            "The Mill Lane venue has no parking.",
            "Parking isn't unavailable at the Mill Lane venue.",
        ),
        (
            "Every three months the board holds a meeting.",
            "The board meets once a month.",
        ),
        (
            "Meat is something Olga doesn't eat.",
            "Olga never eats pork.",
        ),
        (
            "Visitors must sign the NDA before the visit.",
            "Signing the NDA is optional before the visit.",
        ),
        (
            "Gluten is off-limits for Priya.",
            "Priya can eat anything containing gluten.",
        ),
    ];

    fn links_normalised(older_raw: &str, older: &str, newer_raw: &str, newer: &str) -> bool {
        facts_agree(older_raw, older, newer_raw, newer)
    }
}

const NEGATORS: &[&str] = &[
    "neither", "never", "no", "nobody", "none", "nor", "not", "nothing", "without",
];

fn sorted<'t>(t: &[&'t str], keep: impl Fn(&str) -> bool) -> Vec<&'t str> {
    let mut v: Vec<&'t str> = t.iter().copied().filter(|w| keep(w)).collect();
    v.sort_unstable();
    v
}

/// Whether two texts an embedding proposed as duplicates state the same fact (module docs).
fn facts_agree(a_raw: &str, a: &str, b_raw: &str, b: &str) -> bool {
    let ta: Vec<&str> = tokens(a).collect();
    let tb: Vec<&str> = tokens(b).collect();
    let number = |w: &str| w.chars().any(|c| c.is_ascii_digit());
    let value = |w: &str| is_value_word(w) && !NEGATORS.contains(&w);
    if sorted(&ta, number) != sorted(&tb, number)
        || sorted(&ta, value) != sorted(&tb, value)
        || modalities(&ta) != modalities(&tb)
        || negations(&ta) != negations(&tb)
    {
        return false;
    }
    // A word negated by a prefix in one text and plain in the other ("available" /
    // "unavailable").
    let prefixed = |x: &[&str], y: &[&str]| {
        x.iter().any(|w| {
            ["un", "in", "im", "dis", "non"]
                .iter()
                .any(|p| w.strip_prefix(p).is_some_and(|rest| y.contains(&rest)))
        })
    };
    if prefixed(&ta, &tb) || prefixed(&tb, &ta) {
        return false;
    }
    // Names: every capitalised word of one text appears in the other (a possessive "Matteo's"
    // names Matteo).
    let named_in = |n: &str, t: &[&str]| {
        t.iter()
            .any(|w| *w == n || n.strip_suffix('s') == Some(w) || w.strip_suffix('s') == Some(n))
    };
    // A capital at the start of a sentence names someone too unless the word is a common
    // one ("Mark's birthday" / "Mary's birthday").
    if name_words(a_raw).iter().any(|n| !named_in(n, &tb))
        || name_words(b_raw).iter().any(|n| !named_in(n, &ta))
    {
        return false;
    }
    // Whose thing it is: a possessor in one text and not the other must be named in the
    // other ("Matteo's dogs" / "Matteo has dogs"), never new ("Kaito's flat" / "Kaito's
    // manager's flat").
    let (pa, pb) = (possessors(a_raw), possessors(b_raw));
    if pa
        .iter()
        .any(|p| !pb.contains(p) && !tb.contains(&p.as_str()))
        || pb
            .iter()
            .any(|p| !pa.contains(p) && !ta.contains(&p.as_str()))
    {
        return false;
    }
    // Identifiers (addresses, hosts, paths, versions, codes) are values, compared whole:
    // "https://app.example.com" is not "https://staging.app.example.com".
    if identifiers(a_raw) != identifiers(b_raw) {
        return false;
    }
    // In order for the alignment below, sorted and deduplicated for the word sets.
    let sa: Vec<&str> = content_words(a).collect();
    let sb: Vec<&str> = content_words(b).collect();
    let (mut ca, mut cb) = (sa.clone(), sb.clone());
    ca.sort_unstable();
    ca.dedup();
    cb.sort_unstable();
    cb.dedup();
    let only_a: Vec<&str> = ca
        .iter()
        .copied()
        .filter(|w| cb.binary_search(w).is_err())
        .collect();
    let only_b: Vec<&str> = cb
        .iter()
        .copied()
        .filter(|w| ca.binary_search(w).is_err())
        .collect();
    // Opposites ("arrived damaged" / "arrived intact", "open" / "closed").
    if only_a
        .iter()
        .any(|x| only_b.iter().any(|y| wordnet::opposed(x, y)))
    {
        return false;
    }
    // The same words in another order were judged by near-duplicate folding (role swaps); a
    // strict subset adds a qualifier ("nuts" / "tree nuts").
    if only_a.is_empty() || only_b.is_empty() {
        return false;
    }
    // A one- or two-word swap with everything else equal is a changed value ("tea" /
    // "coffee") unless WordNet puts each pair side by side ("tap" / "faucet", "enjoys" /
    // "likes", "meals" / "food": see `wordnet::neighbours`) or the two swaps are one
    // alternation of the same fact ("is afraid" / "has a fear").
    if only_a.len() == only_b.len() && only_a.len() <= 2 {
        return matching(&only_a, &only_b, |p, q| {
            !is_value_word(p) && !is_value_word(q) && wordnet::neighbours(p, q)
        })
        .is_some()
            || alternation(&only_a, a_raw, &only_b)
            || alternation(&only_b, b_raw, &only_a);
    }
    mostly_shared(&sa, &sb) && !replaced_somewhere(&sa, &sb) && replacements_vouched(&sa, &sb)
}

/// Whether each text holds a word of content the other lacks and that no word the other
/// alone holds stands for: one thing replaced by another, wherever in the sentence ("Meat is
/// something Olga doesn't eat" / "Olga never eats pork"). A rewording may add words on one
/// side ("Hugo is fluent in" / "Hugo speaks fluent"), not trade one thing for another.
fn replaced_somewhere(a: &[&str], b: &[&str]) -> bool {
    let alone = |x: &[&str], y: &[&str]| -> Vec<String> {
        x.iter()
            .filter(|w| !is_structural(w) && !in_some_inflection(w, y))
            .map(|w| (*w).to_owned())
            .collect()
    };
    // Things only: a verb or adjective traded for another is how a rewording reads ("owns"
    // / "belongs to", "reports to" / "manages"); a noun traded for a noun is a new thing.
    let things = |x: Vec<String>| -> Vec<String> {
        x.into_iter().filter(|w| wordnet::is_only_noun(w)).collect()
    };
    let (xa, xb) = (alone(a, b), alone(b, a));
    let (ta, tb) = (things(xa.clone()), things(xb.clone()));
    if ta.is_empty() || tb.is_empty() {
        return false;
    }
    let unmatched = |x: &[String], y: &[String]| {
        x.iter().any(|p| {
            !y.iter()
                .any(|q| wordnet::neighbours(p, q) || wordnet::same_lemma(p, q))
        })
    };
    unmatched(&ta, &xb) && unmatched(&tb, &xa)
}

/// The modal classes of a text, sorted (`lexicon` `data/modality.tsv`): "must" and
/// "required" are one, "optional" another.
fn modalities(t: &[&str]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = t.iter().filter_map(|w| lexicon::modality(w)).collect();
    out.sort_unstable();
    out
}

/// How many negations a text holds: negating words, and words negated by "un" or "non"
/// whose stem is a common word ("unavailable", "unable"): "isn't unavailable" is two.
fn negations(t: &[&str]) -> usize {
    t.iter()
        .filter(|w| {
            NEGATORS.contains(w)
                || ["un", "non"].iter().any(|p| {
                    w.strip_prefix(p)
                        .is_some_and(|stem| stem.len() >= 4 && wordnet::is_common_word(stem))
                })
        })
        .count()
}

/// The possessors of a raw text ("Kaito's", "the manager's"), lower case.
fn possessors(raw: &str) -> Vec<String> {
    let mut out: Vec<String> = raw
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '\u{2019}' || c == '-'))
        .filter_map(|t| {
            t.strip_suffix("'s")
                .or_else(|| t.strip_suffix("\u{2019}s"))
                .filter(|p| !p.is_empty())
                .map(str::to_lowercase)
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// A text's identifier-like tokens, sorted: a run of non-space characters that, stripped of
/// the punctuation around it, keeps a `/`, `@`, `.`, `_`, `:` or `#` between two
/// alphanumerics (a URL, an email address, a host, a path, a version "2.4.1", a time "9:45").
fn identifiers(raw: &str) -> Vec<String> {
    let mut out: Vec<String> = raw
        .split_whitespace()
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|t| {
            let chars: Vec<char> = t.chars().collect();
            chars.windows(3).any(|w| {
                w[0].is_alphanumeric()
                    && matches!(w[1], '/' | '@' | '.' | '_' | ':' | '#')
                    && w[2].is_alphanumeric()
            })
        })
        .map(str::to_lowercase)
        .collect();
    out.sort_unstable();
    out
}

/// Whether at least half of the shorter text's words that carry content (not
/// [`is_structural`]) are in the other text, in some inflection. Two statements of one fact
/// rephrase it around the same things; two sentences that merely share a topic word ("The
/// quarterly review is in the large boardroom" / "Board meetings happen quarterly") do not,
/// however an embedding rates them.
fn mostly_shared(a: &[&str], b: &[&str]) -> bool {
    fn content<'t>(t: &[&'t str]) -> Vec<&'t str> {
        t.iter().copied().filter(|w| !is_structural(w)).collect()
    }
    let (ca, cb) = (content(a), content(b));
    let (short, long) = if ca.len() <= cb.len() {
        (&ca, &cb)
    } else {
        (&cb, &ca)
    };
    let shared = short.iter().filter(|w| in_some_inflection(w, long)).count();
    2 * shared >= short.len()
}

/// Whether `other` holds `w`, in this or another inflection ("reception" / "receptions").
fn in_some_inflection(w: &str, other: &[&str]) -> bool {
    other.iter().any(|o| *o == w || wordnet::same_lemma(w, o))
}

/// Tense of a form of "be" / "have" / "get" (`Some(true)`: past).
fn auxiliary_tense(w: &str) -> Option<bool> {
    match w {
        "is" | "are" | "am" | "has" | "have" | "gets" | "get" => Some(false),
        "was" | "were" | "had" | "got" => Some(true),
        _ => None,
    }
}

/// Whether a two-word swap is one of three alternations English states one fact with, where
/// each swapped pair alone would be a changed value ("is" / "has", "we" / "gets", "pay" /
/// "paid") but the two together only change the construction. `x` holds the words only in the
/// text `x_raw`, `y` those only in the other (two each):
///
/// - **be + adjective / have + its attribute**: "Eun-ji *is afraid* of flying" / "Eun-ji *has* a
///   *fear* of flying" — a form of "be" against a form of "have" in the same tense, and an
///   adjective against a noun WordNet relates to it ([`wordnet::neighbours`]);
/// - **possessive / have**: "*Matteo's* two dogs *are* a beagle and a collie" / "*Matteo has*
///   two dogs, a beagle and a collie" — `x` holds a possessive the raw text writes with an
///   apostrophe and a form of "be", `y` the owner and a form of "have" in the same tense;
/// - **active with a generic subject / passive without agent**: "*We pay* the cleaning
///   service …" / "The cleaning service *gets paid* …" — `x` holds "we", "they" or "you" and a
///   verb, `y` a form of "be" / "get" in the verb's tense and the verb's past participle.
fn alternation(x: &[&str], x_raw: &str, y: &[&str]) -> bool {
    let ([x1, x2], [y1, y2]) = (x, y) else {
        return false;
    };
    let be = |w: &str| matches!(w, "is" | "are" | "am" | "was" | "were");
    let have = |w: &str| matches!(w, "has" | "have" | "had");
    let same_tense =
        |p: &str, q: &str| auxiliary_tense(p).is_some() && auxiliary_tense(p) == auxiliary_tense(q);
    let raw = x_raw.to_lowercase().replace('\u{2019}', "'");
    [(*x1, *x2), (*x2, *x1)].into_iter().any(|(xa, xb)| {
        [(*y1, *y2), (*y2, *y1)].into_iter().any(|(ya, yb)| {
            // be + adjective / have + attribute noun.
            let attribute = be(xa)
                && have(ya)
                && same_tense(xa, ya)
                && !is_value_word(xb)
                && !is_value_word(yb)
                && wordnet::neighbours(xb, yb);
            // possessive + be / owner + have.
            let possessive = be(xb)
                && have(yb)
                && same_tense(xb, yb)
                && xa.strip_suffix('s') == Some(ya)
                && raw.contains(&format!("{ya}'s"));
            // generic subject + verb / be-or-get + participle.
            let passive = matches!(xa, "we" | "they" | "you")
                && auxiliary_tense(ya).is_some_and(|past| past == wordnet::is_past_form(xb))
                && !matches!(ya, "has" | "have" | "had")
                && wordnet::participle_of(yb, xb);
            attribute || possessive || passive
        })
    })
}

/// Words that build a sentence rather than state its content: auxiliaries and copulas,
/// pronouns, prepositions, conjunctions and relative words. A reformulation moves these around
/// ("Hugo *is* fluent *in* Portuguese" / "Hugo *speaks* fluent Portuguese"). Negations count
/// too: how many there are is compared on its own ("never" / "does not"). Quantifiers are not
/// here: they are compared as values.
fn is_structural(w: &str) -> bool {
    NEGATORS.contains(&w)
        || matches!(
            w,
            "am" | "is"
                | "are"
                | "was"
                | "were"
                | "be"
                | "been"
                | "being"
                | "has"
                | "have"
                | "had"
                | "having"
                | "do"
                | "does"
                | "did"
                | "get"
                | "gets"
                | "got"
                | "will"
                | "would"
                | "shall"
                | "should"
                | "can"
                | "could"
                | "may"
                | "might"
                | "must"
                | "i"
                | "you"
                | "he"
                | "she"
                | "it"
                | "we"
                | "they"
                | "me"
                | "him"
                | "her"
                | "us"
                | "them"
                | "my"
                | "your"
                | "his"
                | "its"
                | "our"
                | "their"
                | "hers"
                | "ours"
                | "theirs"
                | "in"
                | "on"
                | "at"
                | "to"
                | "for"
                | "of"
                | "with"
                | "by"
                | "from"
                | "about"
                | "into"
                | "as"
                | "and"
                | "or"
                | "but"
                | "so"
                | "that"
                | "which"
                | "who"
                | "whom"
                | "whose"
                | "there"
                | "this"
                | "these"
                | "those"
                | "something"
        )
}

/// Longest texts (in content words) whose replacements are aligned; a longer proposal is not
/// merged (an entry is a note, not a document: losing a fold there costs little).
const MAX_ALIGNED_WORDS: usize = 256;

/// Whether every phrase of one text that stands where the other text has a different phrase is
/// vouched for. The two content-word sequences are aligned by their longest common
/// subsequence; between two aligned words, a gap with words on both sides is a *replacement*
/// (words the other text has elsewhere were moved, not replaced, and are left out of it).
/// A replacement whose words on either side are all structural ([`is_structural`]) is a change
/// of sentence structure, one whose two sides spell the same letters is a compound written
/// apart ("standup" / "stand up"). In any other replacement every word of content on either
/// side needs a word on the other side that WordNet relates to it (the same lemma, a synonym,
/// a similar adjective, an adjective and its attribute): "came from the chimney flashing" /
/// "came from a cracked roof tile" replaces one thing with an unrelated one, and "does not eat
/// meat" / "never eats pork" relates its verbs but not its objects, which is how a different
/// value reads however close the embeddings are.
fn replacements_vouched(a: &[&str], b: &[&str]) -> bool {
    let (n, m) = (a.len(), b.len());
    if n > MAX_ALIGNED_WORDS || m > MAX_ALIGNED_WORDS {
        return false;
    }
    // lcs[i][j]: longest common subsequence of a[i..] and b[j..].
    let width = m + 1;
    let mut lcs = vec![0u16; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * width + j] = if a[i] == b[j] {
                lcs[(i + 1) * width + j + 1] + 1
            } else {
                lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
            };
        }
    }
    let related =
        |x: &str, y: &str| x == y || wordnet::same_lemma(x, y) || wordnet::neighbours(x, y);
    let covered = |from: &[&str], to: &[&str]| {
        from.iter()
            .filter(|w| !is_structural(w))
            .all(|x| to.iter().any(|y| related(x, y)))
    };
    let replaced_by_kin = |ga: &[&str], gb: &[&str]| {
        ga.is_empty()
            || gb.is_empty()
            // One compound in two spellings: "standup" / "stand up".
            || ga.concat() == gb.concat()
            || ga.iter().all(|w| is_structural(w))
            || gb.iter().all(|w| is_structural(w))
            // Every word of content on either side stands for a related word on the other:
            // "medicine" for "medication" is a rewording, while "does not eat meat" / "never
            // eats pork" relates "eat" / "eats" and replaces "meat" with "pork".
            || (covered(ga, gb) && covered(gb, ga))
    };
    let vouched = |ga: &[&str], gb: &[&str]| {
        // A word the other text has elsewhere (in any inflection) was moved, not replaced.
        let ga_kept: Vec<&str> = ga
            .iter()
            .copied()
            .filter(|w| !in_some_inflection(w, b))
            .collect();
        let gb_kept: Vec<&str> = gb
            .iter()
            .copied()
            .filter(|w| !in_some_inflection(w, a))
            .collect();
        replaced_by_kin(ga, gb) || replaced_by_kin(&ga_kept, &gb_kept)
    };
    let (mut i, mut j) = (0, 0);
    let (mut gap_a, mut gap_b) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            if !vouched(&a[gap_a..i], &b[gap_b..j]) {
                return false;
            }
            i += 1;
            j += 1;
            (gap_a, gap_b) = (i, j);
        } else if j == m || (i < n && lcs[(i + 1) * width + j] >= lcs[i * width + j + 1]) {
            i += 1;
        } else {
            j += 1;
        }
    }
    vouched(&a[gap_a..], &b[gap_b..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalise::normalise;

    fn agree(a: &str, b: &str) -> bool {
        facts_agree(a, &normalise(a), b, &normalise(b))
    }

    #[test]
    fn reformulations_agree() {
        assert!(agree(
            "Javier owns the bakery on Calle Mayor.",
            "The bakery on Calle Mayor belongs to Javier."
        ));
        assert!(agree(
            "Hugo is fluent in Portuguese.",
            "Hugo speaks fluent Portuguese."
        ));
        assert!(agree("Olga never eats meat.", "Olga does not eat meat."));
    }

    #[test]
    fn alternations_of_one_fact_agree() {
        assert!(agree(
            "Eun-ji has a fear of flying.",
            "Eun-ji is afraid of flying."
        ));
        assert!(agree(
            "Matteo's two dogs are a beagle and a collie.",
            "Matteo has two dogs, a beagle and a collie."
        ));
        assert!(agree(
            "We pay the cleaning service on the first of each month.",
            "The cleaning service gets paid on the first of every month."
        ));
        assert!(agree(
            "They clean the staff kitchen every evening.",
            "The staff kitchen gets cleaned every evening."
        ));
    }

    #[test]
    fn alternations_keep_their_tense_and_roles() {
        for (a, b) in [
            // be / have alone is another fact.
            ("Ana is a doctor.", "Ana has a doctor."),
            // Tense.
            (
                "Eun-ji had a fear of flying.",
                "Eun-ji is afraid of flying.",
            ),
            (
                "We paid the cleaning service.",
                "The cleaning service gets paid.",
            ),
            (
                "We pay the cleaning service.",
                "The cleaning service was paid.",
            ),
            // A plural is not a possessive.
            (
                "The dogs are a beagle and a collie.",
                "The dog has a beagle and a collie.",
            ),
            // A named subject is not generic: who pays is the fact.
            (
                "Lena pays the cleaning service.",
                "The cleaning service gets paid.",
            ),
        ] {
            assert!(!agree(a, b), "{a} / {b}");
        }
    }

    #[test]
    fn different_facts_do_not() {
        for (a, b) in [
            (
                "Oscar is allergic to nuts.",
                "Oscar is allergic to tree nuts.",
            ),
            (
                "The Oslo office has step-free access.",
                "The Oslo office does not have step-free access.",
            ),
            (
                "Customer support is available on holidays.",
                "Customer support is unavailable on holidays.",
            ),
            ("The parcel weighs 5 kg.", "The parcel weighs 5 lb."),
            (
                "Chen's favourite colour is green.",
                "Chen's favourite colour is blue.",
            ),
            ("Naledi grew up in Pretoria.", "Naledi grew up in Durban."),
            (
                "Book a table for 6 at Nordlys.",
                "Book a table for 8 at Nordlys.",
            ),
            (
                "The cooldown is 5 minutes.",
                "The cooldown is five seconds.",
            ),
            // One thing replaced by an unrelated one.
            (
                "The leak in the attic came from the chimney flashing.",
                "The leak in the attic came from a cracked roof tile.",
            ),
            (
                "Ana keeps her passport in the desk drawer at home.",
                "Ana keeps her passport in a locked safe at the office.",
            ),
        ] {
            assert!(!agree(a, b), "{a} / {b}");
        }
    }

    #[test]
    fn replacements_need_a_related_pair_unless_they_only_move_structure() {
        let words =
            |t: &str| -> Vec<String> { content_words(&normalise(t)).map(str::to_owned).collect() };
        let vouched = |a: &str, b: &str| {
            let (x, y) = (words(a), words(b));
            let x: Vec<&str> = x.iter().map(String::as_str).collect();
            let y: Vec<&str> = y.iter().map(String::as_str).collect();
            replacements_vouched(&x, &y)
        };
        assert!(
            vouched(
                "Grandma's medicine should be taken with meals",
                "Grandma's medication should be taken with food"
            ) == (wordnet::neighbours("meals", "food") || wordnet::same_lemma("meals", "food"))
        );
        assert!(vouched(
            "Hugo is fluent in Portuguese",
            "Hugo speaks fluent Portuguese"
        ));
        assert!(vouched(
            "we pay the cleaner monthly",
            "the cleaner gets paid monthly"
        ));
        assert!(!vouched(
            "it came from the chimney flashing",
            "it came from a cracked roof tile"
        ));
        assert!(vouched("the standup is at 9:30", "the stand-up is at 9:30"));
        let shared = |a: &str, b: &str| {
            let (x, y) = (words(a), words(b));
            let x: Vec<&str> = x.iter().map(String::as_str).collect();
            let y: Vec<&str> = y.iter().map(String::as_str).collect();
            mostly_shared(&x, &y)
        };
        assert!(!shared(
            "The quarterly review is in the large boardroom.",
            "Board meetings happen quarterly."
        ));
        assert!(shared(
            "Olga never eats meat",
            "Meat is something Olga doesn't eat"
        ));
        assert!(shared(
            "Every three months the board holds a meeting",
            "Board meetings happen quarterly"
        ));
        assert!(vouched("", ""));
        let long: String = ["word"; MAX_ALIGNED_WORDS + 1].join(" ");
        assert!(!vouched(&long, &long));
    }
}
