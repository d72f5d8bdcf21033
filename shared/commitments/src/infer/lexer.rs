//! Sentence and word splitting for the inference rules (RFC 0068 clause 1 needs rules that are
//! reproducible from the entry text alone, so the lexer is deliberately small and total).
//!
//! - Text is lower-cased; typographic apostrophes become `'`.
//! - A word is a run of letters and digits; `'`, `-`, `:`, `.` and `/` stay inside a word only
//!   between two letters/digits, so `don't`, `2026-12-01`, `14:30`, `9:30am` and `a.m` are one
//!   word each. `a.m`/`p.m` are then spelled `am`/`pm`.
//! - `.`, `!`, `?`, `;` and line breaks end a sentence; `?` marks it as a question. A `.` right
//!   after `a.m`, `p.m`, a month abbreviation (`Dec.`) or a title (`Dr.`) does not.
//! - `,`, `:`, `(`, `)`, `[`, `]`, dashes standing alone become one `,` token (a clause break).
//!   Every other character (quotes, symbols, emoji) separates words and is dropped.

/// One sentence: its words (and `,` clause-break tokens) and whether it ended in `?`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Sentence {
    pub words: Vec<String>,
    pub question: bool,
}

/// The clause-break token.
pub(crate) const COMMA: &str = ",";

/// Whether a `.` after `w` is an abbreviation mark, not a full stop: "a.m", titles, and the
/// short forms of months (`lexicon` `data/months.tsv`).
fn is_abbreviation(w: &str) -> bool {
    matches!(w, "a.m" | "p.m" | "mr" | "mrs" | "ms" | "dr")
        || matches!(lexicon::month(w), Some((_, lexicon::Kind::Short)))
}

fn is_joiner(c: char) -> bool {
    matches!(c, '\'' | '-' | ':' | '.' | '/')
}

fn is_clause_break(c: char) -> bool {
    matches!(
        c,
        ',' | ':' | '(' | ')' | '[' | ']' | '-' | '\u{2013}' | '\u{2014}'
    )
}

fn normalize_word(raw: String) -> String {
    match raw.as_str() {
        "a.m" => "am".to_string(),
        "p.m" => "pm".to_string(),
        _ => raw,
    }
}

#[derive(Default)]
struct Builder {
    out: Vec<Sentence>,
    current: Sentence,
    word: String,
    /// Whether the word flushed last was an abbreviation (so a following `.` is not a stop).
    last_abbreviation: bool,
}

impl Builder {
    fn flush_word(&mut self) {
        if self.word.is_empty() {
            return;
        }
        let raw = std::mem::take(&mut self.word);
        self.last_abbreviation = is_abbreviation(&raw);
        self.current.words.push(normalize_word(raw));
    }

    fn clause_break(&mut self) {
        self.last_abbreviation = false;
        if self.current.words.last().is_some_and(|w| w != COMMA) {
            self.current.words.push(COMMA.to_string());
        }
    }

    fn end_sentence(&mut self, question: bool) {
        self.last_abbreviation = false;
        while self.current.words.last().is_some_and(|w| w == COMMA) {
            self.current.words.pop();
        }
        if !self.current.words.is_empty() {
            let mut done = std::mem::take(&mut self.current);
            done.question = question;
            self.out.push(done);
        }
    }
}

/// Splits `content` into sentences of normalized words.
pub(crate) fn sentences(content: &str) -> Vec<Sentence> {
    let chars: Vec<char> = content
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{02bc}' => '\'',
            other => other,
        })
        .collect();
    let mut b = Builder::default();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_alphanumeric() {
            b.word.push(c);
            continue;
        }
        let prev_alnum = b.word.chars().last().is_some_and(char::is_alphanumeric);
        let next_alnum = chars.get(i + 1).is_some_and(|n| n.is_alphanumeric());
        if is_joiner(c) && prev_alnum && next_alnum {
            b.word.push(c);
            continue;
        }
        let word_just_ended = !b.word.is_empty();
        b.flush_word();
        match c {
            '.' if word_just_ended && b.last_abbreviation => b.last_abbreviation = false,
            '.' | '!' | ';' | '\n' | '\r' => b.end_sentence(false),
            '?' => b.end_sentence(true),
            c if is_clause_break(c) => b.clause_break(),
            _ => {}
        }
    }
    b.flush_word();
    b.end_sentence(false);
    b.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<Vec<String>> {
        sentences(s).into_iter().map(|s| s.words).collect()
    }

    #[test]
    fn keeps_dates_times_and_contractions_whole() {
        assert_eq!(
            words("Don't forget: call Bob on 2026-12-01 at 9:30am, or 14:30."),
            vec![vec![
                "don't",
                "forget",
                ",",
                "call",
                "bob",
                "on",
                "2026-12-01",
                "at",
                "9:30am",
                ",",
                "or",
                "14:30"
            ]]
        );
    }

    #[test]
    fn splits_sentences_and_marks_questions() {
        let s = sentences("Remind me tomorrow. Should I call? Yes!\nNext line");
        assert_eq!(s.len(), 4);
        assert!(!s[0].question);
        assert!(s[1].question);
        assert_eq!(s[3].words, vec!["next", "line"]);
    }

    #[test]
    fn abbreviations_do_not_end_sentences() {
        assert_eq!(
            words("Call Dr. Who at 9 a.m. on Dec. 1st"),
            vec![vec![
                "call", "dr", "who", "at", "9", "am", "on", "dec", "1st"
            ]]
        );
        assert_eq!(words("I am. Done"), vec![vec!["i", "am"], vec!["done"]]);
    }

    #[test]
    fn typographic_apostrophes_and_noise() {
        assert_eq!(
            words("  \u{201c}I\u{2019}ll call\u{201d} \u{1f600} -- (tomorrow)  "),
            vec![vec!["i'll", "call", ",", "tomorrow"]]
        );
        assert!(sentences("").is_empty());
        assert!(sentences(" . ; ? !").is_empty());
    }
}
