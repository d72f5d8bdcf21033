//! Text to index terms (docs/search.md "Ranked text search"): Unicode word segmentation (UAX #29),
//! case folding, accent folding, overlapping character bigrams for Han, Hiragana, Katakana and
//! Hangul runs, and optional English stemming (Snowball) for words of Latin letters.
//!
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

    /// The terms of `text`, in text order (repeats kept: term frequency counts them).
    pub fn terms(&self, text: &str) -> Vec<String> {
        let mut text = text;
        if text.len() > MAX_ANALYSED_BYTES {
            let mut end = MAX_ANALYSED_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text = &text[..end];
        }
        let mut out = Vec::new();
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
            // A word mixing CJK and other letters: its CJK part as bigrams, the rest as a word.
            let folded = fold(segment);
            let word: String = folded.chars().filter(|c| c.is_alphanumeric()).collect();
            if word.is_empty() {
                continue;
            }
            match &self.stemmer {
                Some(stemmer) if is_stemmable(&word) => {
                    out.push(stemmer.stem(&word).into_owned());
                }
                _ => out.push(word),
            }
        }
        if let Some((start, end)) = run {
            self.push_cjk(&text[start..end], &mut out);
        }
        out
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
                "a",
                "1042",
                "ships",
                "2026",
                "12",
                "01",
                "e",
                "mail",
                "bob",
                "examplecom"
            ]
        );
        // Digit groups stay one number.
        assert_eq!(terms(false, "1,000 units"), ["1000", "units"]);
        assert_eq!(terms(false, "can't"), ["cant"]);
        assert!(terms(false, "  ,.;!  ").is_empty());
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
