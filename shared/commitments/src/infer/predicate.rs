//! Predicate commitments and their tag convention (RFC 0068: "a predicate commitment fires once
//! per state transition"; and "a documented predicate over memory, e.g. an entry with a
//! given tag appears in the ref").
//!
//! Convention. "when the invoice clears" becomes the predicate tag `when:invoice-clears`. The
//! predicate is TRUE for a memoryRef exactly while that ref holds at least one live entry (not
//! deleted, not past `expiresAt`) whose `tags` contain that exact string; FALSE otherwise. A
//! writer satisfies it by writing an entry tagged `when:invoice-clears`; deleting or expiring
//! every such entry makes it false again, which re-arms the commitment.
//!
//! Derivation (what a writer must reproduce — [`predicate_tag`] does it for them):
//! 1. the clause after the connector (`when`, `once`, `after`, `as soon as`), up to a comma, the
//!    end of the sentence, `then`/`so`/`but`/`because`, a time expression, an intention phrase,
//!    or (once two content words are in) an imperative verb such as `call` or `email`;
//! 2. lower-cased, apostrophes removed (`client's` → `clients`);
//! 3. [`STOPWORDS`] (articles, possessives, auxiliaries, common prepositions) removed;
//! 4. the remaining words joined with `-` and prefixed with `when:`.
//!
//! Inference also requires the clause to open with a determiner (`the`, `a`, `our`, `this`…) —
//! so "after lunch" or "when possible" are not predicates — and to leave 2 to 6 content words
//! of ASCII letters, digits and inner hyphens, with the whole tag at most 128 bytes (the
//! store's tag limit). Anything else infers no predicate rather than a surprising one.

use super::lexer::{sentences, COMMA};

/// Every predicate tag starts with this, so writers and readers can tell them apart from
/// ordinary tags.
pub const PREDICATE_TAG_PREFIX: &str = "when:";
/// The store's tag limit (memory-core `MAX_TAG_BYTES`).
const MAX_TAG_BYTES: usize = 128;
const MIN_CONTENT_WORDS: usize = 2;
const MAX_CONTENT_WORDS: usize = 6;
/// Longest clause walked, stopwords included.
const MAX_CLAUSE_WORDS: usize = 16;

/// Words dropped from a predicate clause: they vary between phrasings of the same event
/// ("is processed", "gets processed", "has been processed") without changing it.
pub const STOPWORDS: &[&str] = &[
    "the",
    "a",
    "an",
    "my",
    "our",
    "your",
    "their",
    "his",
    "her",
    "its",
    "this",
    "that",
    "these",
    "those",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "am",
    "get",
    "gets",
    "got",
    "gotten",
    "getting",
    "has",
    "have",
    "had",
    "will",
    "would",
    "shall",
    "should",
    "can",
    "could",
    "may",
    "might",
    "must",
    "do",
    "does",
    "did",
    "finally",
    "fully",
    "actually",
    "eventually",
    "and",
    "of",
    "for",
    "from",
    "to",
    "by",
    "with",
    "in",
    "on",
    "at",
    "all",
];

/// Words that open a predicate clause in inference.
pub(crate) const DETERMINERS: &[&str] = &[
    "the", "a", "an", "my", "our", "your", "their", "his", "her", "its", "this", "that", "these",
    "those",
];

/// Words that end a predicate clause.
const CLAUSE_END: &[&str] = &[COMMA, "then", "so", "but", "because"];

/// One word's slug form, or `None` if it is not ASCII letters/digits/inner hyphens.
fn slug_word(w: &str) -> Option<String> {
    let s: String = w.chars().filter(|&c| c != '\'').collect();
    let ok = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    ok.then_some(s)
}

/// Content words of a clause, or `None` if one of them cannot be put in a tag.
fn content_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Option<Vec<String>> {
    words
        .into_iter()
        .filter(|w| !STOPWORDS.contains(w))
        .map(slug_word)
        .collect()
}

fn tag_of(content: &[String]) -> Option<String> {
    if content.is_empty() {
        return None;
    }
    let tag = format!("{PREDICATE_TAG_PREFIX}{}", content.join("-"));
    (tag.len() <= MAX_TAG_BYTES).then_some(tag)
}

/// The predicate tag a phrase stands for, by the convention in the module doc: for writers who
/// need to tag the entry that makes a predicate true, and for documentation and tests.
/// `predicate_tag("the invoice clears")` and `predicate_tag("when the invoice clears")` are both
/// `Some("when:invoice-clears")`. Unlike inference, this does not insist on a determiner or a
/// minimum word count; it returns `None` only when no valid tag can be formed.
pub fn predicate_tag(phrase: &str) -> Option<String> {
    let words: Vec<String> = sentences(phrase)
        .into_iter()
        .flat_map(|s| s.words)
        .filter(|w| w != COMMA)
        .collect();
    let skip = connector_len(&words, 0).unwrap_or(0);
    let content = content_words(words.iter().skip(skip).map(String::as_str))?;
    tag_of(&content)
}

/// Whether the predicate tagged `tag` holds, given the tags of the ref's live entries (the
/// caller has already dropped deleted and expired entries).
pub fn predicate_holds<'a, I, T>(tag: &str, live_entry_tags: I) -> bool
where
    I: IntoIterator<Item = T>,
    T: IntoIterator<Item = &'a str>,
{
    live_entry_tags
        .into_iter()
        .any(|tags| tags.into_iter().any(|t| t == tag))
}

/// Length of the connector at `i` ("when", "once", "after", "as soon as"), if any.
fn connector_len(w: &[String], i: usize) -> Option<usize> {
    match w.get(i).map(String::as_str)? {
        "when" | "once" | "after" => Some(1),
        "as" if w.get(i + 1).map(String::as_str) == Some("soon")
            && w.get(i + 2).map(String::as_str) == Some("as") =>
        {
            Some(3)
        }
        _ => None,
    }
}

/// A predicate clause found in a sentence: the tag and the words `[start, end)` it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Clause {
    pub tag: String,
    pub start: usize,
    pub end: usize,
}

/// The first predicate clause in `w`. `stops_at(i)` says whether word `i` starts a time
/// expression or an intention phrase (both end the clause); `imperative(i)` whether it is an
/// imperative verb (ends the clause once subject and verb are in).
pub(crate) fn find(
    w: &[String],
    stops_at: impl Fn(usize) -> bool,
    imperative: impl Fn(usize) -> bool,
) -> Option<Clause> {
    for start in 0..w.len() {
        let Some(n) = connector_len(w, start) else {
            continue;
        };
        let first = start + n;
        if !w
            .get(first)
            .is_some_and(|d| DETERMINERS.contains(&d.as_str()))
        {
            continue;
        }
        let mut end = first;
        let mut content = 0usize;
        while let Some(x) = w.get(end) {
            let x = x.as_str();
            let at_stop = end > first && stops_at(end);
            let at_verb = content >= MIN_CONTENT_WORDS && imperative(end);
            if CLAUSE_END.contains(&x) || at_stop || at_verb {
                break;
            }
            if !STOPWORDS.contains(&x) {
                content += 1;
            }
            end += 1;
            // Too long to be a crisp event: stop walking (keeps a hostile entry linear).
            if content > MAX_CONTENT_WORDS || end - first > MAX_CLAUSE_WORDS {
                break;
            }
        }
        if end - first > MAX_CLAUSE_WORDS {
            continue;
        }
        let words = content_words(w[first..end].iter().map(String::as_str));
        let Some(words) = words else { continue };
        if !(MIN_CONTENT_WORDS..=MAX_CONTENT_WORDS).contains(&words.len()) {
            continue;
        }
        if let Some(tag) = tag_of(&words) {
            return Some(Clause { tag, start, end });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_derivation_examples() {
        let cases = [
            ("the invoice clears", Some("when:invoice-clears")),
            ("when the invoice clears", Some("when:invoice-clears")),
            (
                "once the refund is processed",
                Some("when:refund-processed"),
            ),
            ("the refund gets processed", Some("when:refund-processed")),
            (
                "after the contract has been signed",
                Some("when:contract-signed"),
            ),
            (
                "as soon as our client's payment arrives",
                Some("when:clients-payment-arrives"),
            ),
            ("The Invoice CLEARS.", Some("when:invoice-clears")),
            (
                "the re-signed lease is filed",
                Some("when:re-signed-lease-filed"),
            ),
            ("the", None),
            ("", None),
            ("the café opens", None),
        ];
        for (phrase, want) in cases {
            assert_eq!(predicate_tag(phrase).as_deref(), want, "{phrase}");
        }
        let long = "the ".to_string() + &"word ".repeat(40);
        assert_eq!(predicate_tag(&long), None, "over the 128-byte tag limit");
    }

    #[test]
    fn holds_iff_a_live_entry_carries_the_tag() {
        let entries: Vec<Vec<&str>> = vec![vec!["x"], vec!["y", "when:invoice-clears"]];
        assert!(predicate_holds(
            "when:invoice-clears",
            entries.iter().map(|t| t.iter().copied())
        ));
        assert!(!predicate_holds(
            "when:invoice",
            entries.iter().map(|t| t.iter().copied())
        ));
        let none: Vec<Vec<&str>> = vec![];
        assert!(!predicate_holds(
            "when:invoice-clears",
            none.iter().map(|t| t.iter().copied())
        ));
    }
}
