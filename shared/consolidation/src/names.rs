//! Which words of a text are names (openwop-agent-memory.md §"Background consolidation (RFC
//! 0068)": a pass never merges two different facts, and a name is the fact of whom a statement
//! is about). A one-letter change of a name is another person ("Mark" / "Mary"), and a subject
//! made of names is an entity whose attributes a change must name; every link rule asks here.

use lexicon::wordnet;

/// The words of `raw` written with a capital, wherever they stand (lower case, apostrophes
/// dropped, as normalised tokens are), but for function words ("We", "The", "On"), which a
/// capital at the start of a sentence does not make a name. The parts of a hyphenated word carry
/// its first part's capital ("Eun-ji" is the name "eun" "ji", as normalisation splits it).
pub(crate) fn capitalised_words(raw: &str) -> Vec<String> {
    let mut out = scan(raw).capitalised;
    out.retain(|w| !lexicon::is_function_word(w));
    out
}

/// The words a reader takes for names in one raw text: written with a capital mid-sentence,
/// or with a capital anywhere and not a common English word ("Kwame", "Mensah"; "Timesheets"
/// is a common word).
pub(crate) fn name_words(raw: &str) -> Vec<String> {
    let Scan {
        mut mid_sentence,
        capitalised,
    } = scan(raw);
    mid_sentence.extend(
        capitalised
            .into_iter()
            .filter(|w| !lexicon::is_function_word(w) && !wordnet::is_common_word(w)),
    );
    mid_sentence
}

/// The capitalised words of a text, read once: those capitalised mid-sentence (each word's own
/// first letter), and those capitalised anywhere (a hyphenated word's parts carrying its first
/// part's capital).
struct Scan {
    mid_sentence: Vec<String>,
    capitalised: Vec<String>,
}

fn scan(raw: &str) -> Scan {
    let mut out = Scan {
        mid_sentence: Vec::new(),
        capitalised: Vec::new(),
    };
    let mut word = String::new();
    let (mut first_upper, mut carried) = (false, false);
    let (mut sentence_start, mut joined) = (true, false);
    for c in raw.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() {
            if word.is_empty() {
                first_upper = c.is_uppercase();
                if !joined {
                    carried = first_upper;
                }
            }
            joined = false;
            word.extend(c.to_lowercase());
        } else if c == '\'' || c == '\u{2019}' {
            joined = false;
        } else {
            if word.is_empty() {
                joined = false;
            } else {
                if first_upper && !sentence_start {
                    out.mid_sentence.push(word.clone());
                }
                if carried {
                    out.capitalised.push(word.clone());
                }
                sentence_start = false;
                word.clear();
                joined = c == '-';
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
        let mut out: Vec<String> = raws.iter().flat_map(|raw| name_words(raw)).collect();
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
