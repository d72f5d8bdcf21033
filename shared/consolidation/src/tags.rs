//! The two tag conventions consolidation reads and writes (openwop-agent-memory.md
//! §"Background consolidation (RFC 0068)": "supersede stale facts" and "strengthen corroborated
//! facts").
//!
//! - **Fact slots** — `fact:<key>` with a non-empty key. Entries that carry exactly the same set
//!   of fact keys (and the same subject) state the same fact slot; the newest one wins and the
//!   others stop surfacing. Keys are compared byte for byte (writers choose a stable key such as
//!   `fact:contact-channel`). An entry with several keys states a compound fact and is only
//!   reconciled with entries carrying that same key set. `fact:` with an empty key is an ordinary
//!   tag.
//! - **Corroboration** — `corroborated:<n>`, `n` a positive decimal integer: how many source
//!   entries agreed on this text. An entry without a valid tag counts as one source; merging
//!   sums the counts, so re-merging an already corroborated entry counts its `n` sources rather
//!   than one. Every tag starting with `corroborated:` (valid or not) is replaced on merge.

/// Prefix of the fact-slot tag.
pub const FACT_TAG_PREFIX: &str = "fact:";
/// Prefix of the corroboration tag.
pub const CORROBORATED_TAG_PREFIX: &str = "corroborated:";

/// The slot key of a `fact:<key>` tag, if the tag is one.
pub fn fact_key(tag: &str) -> Option<&str> {
    tag.strip_prefix(FACT_TAG_PREFIX).filter(|k| !k.is_empty())
}

/// The sorted, deduplicated fact keys of a tag list (empty: the entry is in no fact slot).
pub(crate) fn fact_keys(tags: &[String]) -> Vec<&str> {
    let mut keys: Vec<&str> = tags.iter().filter_map(|t| fact_key(t)).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Whether a tag is a (possibly malformed) corroboration tag, dropped when merging.
pub fn is_corroboration_tag(tag: &str) -> bool {
    tag.starts_with(CORROBORATED_TAG_PREFIX)
}

fn parse_count(tag: &str) -> Option<u64> {
    let digits = tag.strip_prefix(CORROBORATED_TAG_PREFIX)?;
    if digits.is_empty() || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok().filter(|n| *n > 0)
}

/// How many sources an entry stands for: the largest valid `corroborated:<n>` tag, else 1.
/// The maximum (not a sum) makes a hand-edited entry carrying two tags count conservatively.
pub fn source_count(tags: &[String]) -> u64 {
    tags.iter()
        .filter_map(|t| parse_count(t))
        .max()
        .unwrap_or(1)
}

/// The tag recording `n` corroborating sources.
pub fn corroboration_tag(n: u64) -> String {
    format!("{CORROBORATED_TAG_PREFIX}{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fact_keys_table() {
        assert_eq!(
            fact_keys(&tags(&["fact:b", "x", "fact:a", "fact:b"])),
            vec!["a", "b"]
        );
        assert!(fact_keys(&tags(&["fact:", "facts:x", "Fact:x"])).is_empty());
    }

    #[test]
    fn source_count_table() {
        let cases: &[(&[&str], u64)] = &[
            (&[], 1),
            (&["corroborated:3"], 3),
            (&["corroborated:3", "corroborated:7"], 7),
            (&["corroborated:0"], 1),
            (&["corroborated:-2"], 1),
            (&["corroborated:+2"], 1),
            (&["corroborated:"], 1),
            (&["corroborated:99999999999999999999999"], 1),
            (&["corroborated:18446744073709551615"], u64::MAX),
            (&["corroborated: 4"], 1),
        ];
        for (input, want) in cases {
            assert_eq!(source_count(&tags(input)), *want, "{input:?}");
        }
    }
}
