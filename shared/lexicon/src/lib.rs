//! The linguistic resources of the pure algorithms, as data: consolidation's notation,
//! substitution, supersession and fact checks (openwop-agent-memory.md §"Background
//! consolidation (RFC 0068)") and commitment inference's time expressions read their words
//! here, so a month, a unit or a change verb is written down once.
//!
//! One file per concept in `data/` (a comment header says what belongs in it and why);
//! `build.rs` turns each into a sorted constant, so a lookup is a binary search or a
//! [`WordSet`] test built at compile time, never a parse at run time. WordNet
//! ([`wordnet`]) is the exception: 1.8 MB parsed on first use, by the passes that meet a
//! candidate pair.

mod tables {
    /// How a calendar form reads.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Kind {
        /// The full name ("march", "monday").
        Name,
        /// An abbreviation ("mar", "mon").
        Short,
        /// Also an everyday word ("may", "sat", "sun"): a month or day only in context.
        Ambiguous,
    }

    include!(concat!(env!("OUT_DIR"), "/tables.rs"));
}

mod word_set;
pub mod wordnet;

pub use tables::{
    Kind, ABBREVIATIONS, CHANGE_VERBS, FUNCTION_WORDS, IRREGULAR_PAST, MODALITY, MONTHS,
    NOTATION_TRIGGERS, NUMBER_WORDS, SPELLINGS, UNITS, VALUE_WORDS, WEEKDAYS,
};
pub use word_set::WordSet;

static CHANGE_VERB_SET: WordSet = WordSet::new(CHANGE_VERBS);

fn lookup<T: Copy>(table: &[(&'static str, T)], key: &str) -> Option<T> {
    table
        .binary_search_by(|(k, _)| (*k).cmp(key))
        .ok()
        .map(|i| table[i].1)
}

fn calendar(table: &[(&'static str, u8, Kind)], key: &str) -> Option<(u8, Kind)> {
    table
        .binary_search_by(|(k, _, _)| (*k).cmp(key))
        .ok()
        .map(|i| (table[i].1, table[i].2))
}

/// The month a form names (1-12) and how it reads.
pub fn month(w: &str) -> Option<(u8, Kind)> {
    calendar(MONTHS, w)
}

/// The ISO weekday a form names (Monday 1 - Sunday 7) and how it reads.
pub fn weekday(w: &str) -> Option<(u8, Kind)> {
    calendar(WEEKDAYS, w)
}

/// The full name of a month or a weekday, never an everyday word ("may" is also a verb):
/// a word written with a capital that is not a name, and whose misspelling is still a date.
pub fn is_calendar_name(w: &str) -> bool {
    matches!(month(w), Some((_, Kind::Name))) || matches!(weekday(w), Some((_, Kind::Name)))
}

/// The digits of a number word with one meaning ("fifteen" -> "15").
pub fn number_word(w: &str) -> Option<&'static str> {
    lookup(NUMBER_WORDS, w)
}

/// The British spelling of an American one ("center" -> "centre").
pub fn british_spelling(w: &str) -> Option<&'static str> {
    lookup(SPELLINGS, w)
}

/// The expansion of an abbreviation that reads the same wherever it stands.
pub fn abbreviation(w: &str) -> Option<&'static str> {
    lookup(ABBREVIATIONS, w)
}

/// The one spelling of a unit written after a number ("km" -> "kilometres").
pub fn unit_after_number(w: &str) -> Option<&'static str> {
    lookup(UNITS, w)
}

/// Whether a word makes something obligatory, optional, prohibited or permitted, and which.
pub fn modality(w: &str) -> Option<&'static str> {
    lookup(MODALITY, w)
}

/// The lemma of an irregular past form ("bought" -> "buy").
pub fn irregular_past(w: &str) -> Option<&'static str> {
    lookup(IRREGULAR_PAST, w)
}

/// Whether a past form says a fact changed ("moved", "switched").
#[inline]
pub fn is_change_verb(w: &str) -> bool {
    CHANGE_VERB_SET.contains(w)
}

/// Whether `w` is a pronoun, determiner, preposition, conjunction or auxiliary.
pub fn is_function_word(w: &str) -> bool {
    FUNCTION_WORDS.binary_search(&w).is_ok()
}

/// Whether `w` carries the value of a fact (`data/value-words.txt`, or a weekday or month
/// name); plurals are read through their singular ("minutes", "inches").
pub fn is_value_word(w: &str) -> bool {
    let singular = w
        .strip_suffix("es")
        .filter(|s| s.ends_with(['s', 'x', 'h']))
        .or_else(|| w.strip_suffix('s'))
        .unwrap_or(w);
    is_calendar_name(w)
        || is_calendar_name(singular)
        || VALUE_WORDS.binary_search(&w).is_ok()
        || VALUE_WORDS.binary_search(&singular).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_list_is_sorted_and_free_of_repeats() {
        for list in [VALUE_WORDS, CHANGE_VERBS, FUNCTION_WORDS, NOTATION_TRIGGERS] {
            assert!(list.windows(2).all(|w| w[0] < w[1]));
        }
        for list in [
            IRREGULAR_PAST,
            NUMBER_WORDS,
            SPELLINGS,
            ABBREVIATIONS,
            UNITS,
            MODALITY,
        ] {
            assert!(list.windows(2).all(|w| w[0].0 < w[1].0));
        }
        for list in [MONTHS, WEEKDAYS] {
            assert!(list.windows(2).all(|w| w[0].0 < w[1].0));
        }
    }

    #[test]
    fn calendar_words() {
        assert_eq!(month("sept"), Some((9, Kind::Short)));
        assert_eq!(month("may"), Some((5, Kind::Ambiguous)));
        assert_eq!(weekday("thurs"), Some((4, Kind::Short)));
        assert_eq!(weekday("sunday"), Some((7, Kind::Name)));
        assert!(is_calendar_name("june") && is_calendar_name("friday"));
        assert!(!is_calendar_name("may") && !is_calendar_name("sun") && !is_calendar_name("jun"));
        // Every month and weekday has exactly one full name.
        for n in 1..=12 {
            let names = MONTHS
                .iter()
                .filter(|m| m.1 == n && m.2 != Kind::Short)
                .count();
            assert_eq!(names, 1, "month {n}");
        }
        for n in 1..=7 {
            let names = WEEKDAYS
                .iter()
                .filter(|d| d.1 == n && d.2 == Kind::Name)
                .count();
            assert_eq!(names, 1, "weekday {n}");
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(number_word("fifteen"), Some("15"));
        assert_eq!(number_word("one"), None);
        assert_eq!(british_spelling("center"), Some("centre"));
        assert_eq!(abbreviation("mgr"), Some("manager"));
        assert_eq!(unit_after_number("km"), Some("kilometres"));
        assert_eq!(irregular_past("bought"), Some("buy"));
        assert!(is_change_verb("switched") && !is_change_verb("switch") && !is_change_verb(""));
        assert!(is_function_word("we") && !is_function_word("team"));
        assert!(is_value_word("minutes") && is_value_word("inches") && is_value_word("monday"));
        assert!(!is_value_word("team"));
    }

    #[test]
    fn the_change_verb_set_holds_exactly_its_list() {
        for v in CHANGE_VERBS {
            assert!(is_change_verb(v), "{v}");
        }
    }
}
