//! Which words of a text are names (openwop-agent-memory.md §"Background consolidation (RFC
//! 0068)": a pass never merges two different facts, and a name is the fact of whom a statement
//! is about). A one-letter change of a name is another person ("Mark" / "Mary"), and a subject
//! made of names is an entity whose attributes a change must name; every link rule asks here.

use lexicon::wordnet;

/// The words of `raw` written with a capital, wherever they stand (lower case, apostrophes
/// dropped, as normalised tokens are), but for function words ("We", "The", "On"), which a
/// capital at the start of a sentence does not make a name.
pub(crate) fn capitalised_words(raw: &str) -> Vec<String> {
    let mut out = capitals(raw);
    out.retain(|w| !lexicon::is_function_word(w));
    out
}

/// The parts of a hyphenated word carry its first part's capital ("Eun-ji" is the name "eun"
/// "ji", as normalisation splits it).
fn capitals(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut capital = false;
    let mut joined = false;
    for c in raw.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() {
            if word.is_empty() && !joined {
                capital = c.is_uppercase();
            }
            joined = false;
            word.extend(c.to_lowercase());
        } else if c != '\'' && c != '\u{2019}' && !word.is_empty() {
            if capital {
                out.push(std::mem::take(&mut word));
            }
            word.clear();
            joined = c == '-';
        } else {
            joined = false;
        }
    }
    out
}

/// The words of `raw` written with a capital other than at the start of a sentence (lower
/// case, apostrophes dropped, as normalised tokens are).
pub(crate) fn names(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut sentence_start = true;
    let mut word = String::new();
    let mut capital = false;
    for c in raw.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() {
            if word.is_empty() {
                capital = c.is_uppercase();
            }
            word.extend(c.to_lowercase());
        } else if c != '\'' && c != '\u{2019}' {
            if !word.is_empty() {
                if capital && !sentence_start {
                    out.push(std::mem::take(&mut word));
                }
                sentence_start = false;
                word.clear();
            }
            if matches!(c, '.' | '!' | '?' | ':' | '\n') {
                sentence_start = true;
            }
        }
    }
    out
}

/// Words a reader takes for names in either raw text: written with a capital mid-sentence, or
/// with a capital at the start of a sentence and not a common English word ("Kwame", "Mensah";
/// "Timesheets" is a common word). A subject made only of names is an *entity* (a person, a
/// company), whose attributes its statements must name.
pub(crate) struct Names(Vec<String>);

impl Names {
    pub(crate) fn of(raws: &[&str]) -> Names {
        let mut out = Vec::new();
        for raw in raws {
            out.extend(names(raw));
            out.extend(
                capitalised_words(raw)
                    .into_iter()
                    .filter(|w| !wordnet::is_common_word(w)),
            );
        }
        // Months and weekdays are written with a capital and are values, not names.
        out.retain(|w| !lexicon::is_value_word(w));
        out.sort_unstable();
        out.dedup();
        Names(out)
    }

    pub(crate) fn contains(&self, w: &str) -> bool {
        self.0.binary_search_by(|n| n.as_str().cmp(w)).is_ok()
    }

    #[cfg(test)]
    pub(crate) fn none() -> Names {
        Names(Vec::new())
    }
}
