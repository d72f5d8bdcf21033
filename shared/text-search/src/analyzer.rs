//! Text to index terms (docs/search.md "Ranked text search"): Unicode word segmentation (UAX #29),
//! English possessives removed, English stop words dropped, identifiers indexed whole and by their
//! parts, case folding, accent folding, overlapping character bigrams for Han, Hiragana, Katakana
//! and Hangul runs, and optional English stemming (Snowball) for words of Latin letters.
//!
//! Stop words: a function word ("the", "what", "is") matches most entries and says nothing about
//! which one answers, yet summed over a question it outweighs the one word that matters and puts
//! every entry in the text ranking, which drowns what only semantic search found in a hybrid
//! ranking. The list is data, Snowball's English stop list plus the modal verbs "can" and "will"
//! (Lucene's and NLTK's English lists hold them), checked on the folded word before stemming.
//!
//! Identifiers: UAX #29 keeps `E_CONN_RESET`, `payments.retry.max_attempts` and `maxUploadSizeMb`
//! as one word, so a part of one ("E_CONN", "max_attempts", "UploadSize") would match nothing.
//! Such a word is indexed whole and, as code search analyzers do (Lucene's word delimiter filter
//! with the original preserved), by its parts: split at `_`, `.`, `'` and at camelCase humps. The
//! parts stand at the whole word's position, so they do not lengthen the document for BM25's
//! length normalisation (Lucene's discounted overlaps). The same split of an elided French word
//! ("l'école") makes "école" find it.
//! CJK text has no spaces, and UAX #29 gives one segment per ideograph, so a word of two or three
//! characters would otherwise match any text holding those characters anywhere. Bigrams of each
//! run (a single character stays a unigram) are what Lucene's CJK analyzer indexes, and match a
//! query word wherever the same characters stand together.

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

/// Longest text (in bytes) analysed per document: a bound on work per entry, far above the
/// 64 KiB an entry can hold.
const MAX_ANALYSED_BYTES: usize = 256 * 1024;

/// English stop words, folded, apostrophes as `'`, sorted (Snowball's English stop list, plus
/// "can" and "will").
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren't",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "can't",
    "cannot",
    "could",
    "couldn't",
    "did",
    "didn't",
    "do",
    "does",
    "doesn't",
    "doing",
    "don't",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn't",
    "has",
    "hasn't",
    "have",
    "haven't",
    "having",
    "he",
    "he'd",
    "he'll",
    "he's",
    "her",
    "here",
    "here's",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "how's",
    "i",
    "i'd",
    "i'll",
    "i'm",
    "i've",
    "if",
    "in",
    "into",
    "is",
    "isn't",
    "it",
    "it's",
    "its",
    "itself",
    "let's",
    "me",
    "more",
    "most",
    "mustn't",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "ought",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "shan't",
    "she",
    "she'd",
    "she'll",
    "she's",
    "should",
    "shouldn't",
    "so",
    "some",
    "such",
    "than",
    "that",
    "that's",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "there's",
    "these",
    "they",
    "they'd",
    "they'll",
    "they're",
    "they've",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "wasn't",
    "we",
    "we'd",
    "we'll",
    "we're",
    "we've",
    "were",
    "weren't",
    "what",
    "what's",
    "when",
    "when's",
    "where",
    "where's",
    "which",
    "while",
    "who",
    "who's",
    "whom",
    "why",
    "why's",
    "will",
    "with",
    "won't",
    "would",
    "wouldn't",
    "you",
    "you'd",
    "you'll",
    "you're",
    "you've",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '\u{2019}' | '\u{02BC}')
}

/// Whether a folded word is a stop word.
fn is_stop_word(folded: &str) -> bool {
    let word: String = folded
        .chars()
        .map(|c| if is_apostrophe(c) { '\'' } else { c })
        .collect();
    STOP_WORDS.binary_search(&word.as_str()).is_ok()
}

/// The word without an English possessive ending: "James's" and "James’s" are "James" (as
/// Lucene's English possessive filter does; "James'" is already "James", since UAX #29 leaves a
/// trailing apostrophe out of the word).
fn without_possessive(word: &str) -> &str {
    let mut tail = word.char_indices().rev();
    match (tail.next(), tail.next()) {
        (Some((_, 's' | 'S')), Some((at, c))) if is_apostrophe(c) && at > 0 => &word[..at],
        _ => word,
    }
}

/// The parts of an identifier-like word: split at every character that is neither a letter nor
/// a digit (`_`, `.`, `'`), then at camelCase humps ("maxUploadSize" -> max, Upload, Size;
/// "HTTPServer" -> HTTP, Server). A word of one part gives one.
fn parts(word: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for piece in word.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<(usize, char)> = piece.char_indices().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (at, c) = chars[i];
            let previous = chars[i - 1].1;
            let next_lower = chars.get(i + 1).is_some_and(|(_, n)| n.is_lowercase());
            let hump = c.is_uppercase()
                && (previous.is_lowercase() || (previous.is_uppercase() && next_lower));
            if hump {
                out.push(&piece[start..at]);
                start = at;
            }
        }
        if start < piece.len() {
            out.push(&piece[start..]);
        }
    }
    out
}

/// How text becomes terms. The same analyzer must index documents and queries.
pub struct Analyzer {
    stemmer: Option<Stemmer>,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("stem", &self.stemmer.is_some())
            .finish()
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F  // Extensions B-F, compatibility supplement
    )
}

/// Lower case, compatibility forms unified (full-width letters, ligatures) and accents removed:
/// "Café", "CAFE" and "café" are one term. Recomposed afterwards, so a Hangul syllable, which
/// decomposition splits into its letters, stays one character.
fn fold(word: &str) -> String {
    word.nfkd()
        .filter(|c| !is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .nfc()
        .collect()
}

/// Whether the stemmer applies to a (folded) word: English words of ASCII letters only.
pub fn is_stemmable(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_ascii_alphabetic())
}

impl Analyzer {
    /// `stem`: reduce English words to their Snowball stem ("refunds", "refunded" -> "refund").
    pub fn new(stem: bool) -> Self {
        Analyzer {
            stemmer: stem.then(|| Stemmer::create(Algorithm::English)),
        }
    }

    /// Whether English stemming is on (part of a cached analysis's key).
    pub fn stems(&self) -> bool {
        self.stemmer.is_some()
    }

    /// What this analyzer makes of an unstemmed term: its stem when the analyzer stems it (an
    /// English word of ASCII letters, stemming on), else `None` (the term stands as it is). The
    /// terms of [`Analyzer::terms`] with stemming are those without, each mapped by this, which
    /// is what lets a persisted index keep unstemmed terms and answer both kinds of query.
    pub fn stem_term(&self, term: &str) -> Option<String> {
        match &self.stemmer {
            Some(stemmer) if is_stemmable(term) => Some(stemmer.stem(term).into_owned()),
            _ => None,
        }
    }

    /// The terms of `text`, in text order (repeats kept: term frequency counts them), an
    /// identifier's parts after it.
    pub fn terms(&self, text: &str) -> Vec<String> {
        self.analyse(text).0
    }

    /// The terms of `text` ([`Analyzer::terms`]) and the document length BM25 normalises by:
    /// the number of terms, an identifier's parts not counted.
    pub fn analyse(&self, text: &str) -> (Vec<String>, u32) {
        let mut text = text;
        if text.len() > MAX_ANALYSED_BYTES {
            let mut end = MAX_ANALYSED_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text = &text[..end];
        }
        let mut out = Vec::new();
        let mut overlaps = 0usize;
        // A run of CJK characters standing together, as (start, end) byte offsets of `text`.
        let mut run: Option<(usize, usize)> = None;
        for (at, segment) in text.split_word_bound_indices() {
            let cjk = segment.chars().all(is_cjk);
            if cjk {
                run = match run {
                    Some((start, end)) if end == at => Some((start, at + segment.len())),
                    Some(previous) => {
                        self.push_cjk(&text[previous.0..previous.1], &mut out);
                        Some((at, at + segment.len()))
                    }
                    None => Some((at, at + segment.len())),
                };
                continue;
            }
            if let Some((start, end)) = run.take() {
                self.push_cjk(&text[start..end], &mut out);
            }
            if !segment.chars().any(char::is_alphanumeric) {
                continue;
            }
            let segment = without_possessive(segment);
            if !self.push_word(segment, &mut out) {
                continue;
            }
            // Digits with separators are one number ("1,000", "3.14"), not an identifier.
            if segment.chars().any(char::is_alphabetic) {
                let parts = parts(segment);
                if parts.len() > 1 {
                    for part in parts {
                        overlaps += usize::from(self.push_word(part, &mut out));
                    }
                }
            }
        }
        if let Some((start, end)) = run {
            self.push_cjk(&text[start..end], &mut out);
        }
        let length = u32::try_from(out.len() - overlaps).unwrap_or(u32::MAX);
        (out, length)
    }

    /// Pushes the term of one word (folded, letters and digits only, stemmed), unless it is
    /// empty or a stop word; whether it pushed one.
    fn push_word(&self, word: &str, out: &mut Vec<String>) -> bool {
        let folded = fold(word);
        if is_stop_word(&folded) {
            return false;
        }
        // A word mixing CJK and other letters: its CJK part as bigrams, the rest as a word.
        let word: String = folded.chars().filter(|c| c.is_alphanumeric()).collect();
        if word.is_empty() {
            return false;
        }
        match &self.stemmer {
            Some(stemmer) if is_stemmable(&word) => {
                out.push(stemmer.stem(&word).into_owned());
            }
            _ => out.push(word),
        }
        true
    }

    fn push_cjk(&self, run: &str, out: &mut Vec<String>) {
        let chars: Vec<char> = fold(run).chars().collect();
        if chars.len() == 1 {
            out.push(chars[0].to_string());
            return;
        }
        for pair in chars.windows(2) {
            out.push(pair.iter().collect());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(stem: bool, text: &str) -> Vec<String> {
        Analyzer::new(stem).terms(text)
    }

    #[test]
    fn case_accents_and_compatibility_forms_fold() {
        assert_eq!(terms(false, "Café CAFE café"), ["cafe", "cafe", "cafe"]);
        assert_eq!(terms(false, "Ｒｅｆｕｎｄ Müller"), ["refund", "muller"]);
        assert_eq!(terms(false, "São Paulo, naïve"), ["sao", "paulo", "naive"]);
    }

    #[test]
    fn words_split_on_unicode_boundaries_and_keep_numbers() {
        assert_eq!(
            terms(
                false,
                "Order #A-1042 ships 2026-12-01; e-mail: bob@example.com"
            ),
            [
                "order",
                "1042", // "A" is the article's spelling: a stop word
                "ships",
                "2026",
                "12",
                "01",
                "e",
                "mail",
                "bob",
                "examplecom",
                "example",
                "com"
            ]
        );
        // Digit groups stay one number.
        assert_eq!(terms(false, "1,000 units"), ["1000", "units"]);
        assert_eq!(terms(false, "3.14"), ["314"]);
        assert_eq!(terms(false, "O'Brien"), ["obrien", "o", "brien"]);
        assert!(terms(false, "  ,.;!  ").is_empty());
    }

    #[test]
    fn stop_words_are_dropped_and_a_question_keeps_its_content() {
        assert_eq!(
            terms(true, "What is the address of the Lisbon office?"),
            ["address", "lisbon", "offic"]
        );
        assert!(terms(true, "what is it, and where are they").is_empty());
        assert!(terms(false, "Can’t you? It's THEIRS.").is_empty());
    }

    #[test]
    fn possessives_match_the_name() {
        for text in ["James's", "James’s", "James'", "JAMES’S", "James"] {
            assert_eq!(terms(true, text), ["jame"], "{text}");
            assert_eq!(terms(false, text), ["james"], "{text}");
        }
        assert_eq!(terms(false, "Dana's phone"), ["dana", "phone"]);
        assert_eq!(terms(false, "'s"), ["s"]);
    }

    #[test]
    fn identifiers_are_indexed_whole_and_by_their_parts() {
        assert_eq!(
            terms(false, "E_CONN_RESET"),
            ["econnreset", "e", "conn", "reset"]
        );
        assert_eq!(
            terms(false, "payments.retry.max_attempts"),
            [
                "paymentsretrymaxattempts",
                "payments",
                "retry",
                "max",
                "attempts"
            ]
        );
        assert_eq!(
            terms(false, "maxUploadSizeMb"),
            ["maxuploadsizemb", "max", "upload", "size", "mb"]
        );
        assert_eq!(terms(false, "HTTPServer"), ["httpserver", "http", "server"]);
        assert_eq!(terms(false, "is_active"), ["isactive", "active"]);
        assert_eq!(terms(false, "l'école"), ["lecole", "l", "ecole"]);
        assert_eq!(
            terms(false, "iPhone v1.2"),
            ["iphone", "phone", "v12", "v1", "2"]
        );
        // The parts do not lengthen the document.
        assert_eq!(Analyzer::new(false).analyse("E_CONN_RESET twice").1, 2);
    }

    #[test]
    fn cjk_runs_become_overlapping_bigrams() {
        assert_eq!(terms(false, "東京都"), ["東京", "京都"]);
        assert_eq!(terms(false, "東京 へ"), ["東京", "へ"]);
        assert_eq!(terms(false, "我喜欢咖啡"), ["我喜", "喜欢", "欢咖", "咖啡"]);
        assert_eq!(terms(false, "회의 일정"), ["회의", "일정"]);
        assert_eq!(terms(false, "VIP客户"), ["vip", "客户"]);
    }

    #[test]
    fn stemming_is_optional_and_only_for_latin_words() {
        assert_eq!(
            terms(true, "Refunds refunded refunding"),
            ["refund", "refund", "refund"]
        );
        assert_eq!(terms(false, "Refunds"), ["refunds"]);
        assert_eq!(terms(true, "东京 1042"), ["东京", "1042"]);
    }
}
