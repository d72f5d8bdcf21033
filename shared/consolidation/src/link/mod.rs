//! The link rules (openwop-agent-memory.md §"Background consolidation (RFC 0068)": "merge
//! duplicates, supersede stale facts", and never two different facts): each is one type in its
//! own file with the pairs it must link and the pairs it must keep apart, so a rule and the
//! evidence for it are read together, and one test holds every rule to its tables.
//!
//! A link is a claim that two texts state the same fact (or that the newer one updates it);
//! every rule asks for proof of sameness (the same names, values, polarity, and for a
//! supersession the same subject and attribute) and keeps both texts when in doubt: a kept
//! duplicate costs a line, a lost fact costs the user.

use crate::normalise::normalise;

pub(crate) mod fact_check;
pub(crate) mod supersession;
pub(crate) mod synonym;
pub(crate) mod typo;
pub(crate) mod word_order;

/// One link rule. (Its tables are read by the tests only.)
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) trait LinkRule {
    /// The rule's name in a failure message.
    const NAME: &'static str;
    /// Pairs of texts (older first) the rule must link.
    const MEET: &'static [(&'static str, &'static str)];
    /// Pairs it must never link: each differs from a linked pair by one fact.
    const APART: &'static [(&'static str, &'static str)];

    /// Whether the rule, alone, links `older` to `newer`, given each raw (for capitals) and
    /// normalised ([`normalise`]: what a pass has at hand).
    fn links_normalised(older_raw: &str, older: &str, newer_raw: &str, newer: &str) -> bool;

    /// [`LinkRule::links_normalised`] for two raw texts.
    fn links(older: &str, newer: &str) -> bool {
        Self::links_normalised(older, &normalise(older), newer, &normalise(newer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds<R: LinkRule>() {
        for (a, b) in R::MEET {
            assert!(R::links(a, b), "{} must link {a:?} / {b:?}", R::NAME);
        }
        for (a, b) in R::APART {
            assert!(!R::links(a, b), "{} must keep {a:?} / {b:?} apart", R::NAME);
        }
    }

    #[test]
    fn every_rule_links_its_meet_pairs_and_keeps_its_apart_pairs() {
        holds::<typo::Typo>();
        holds::<synonym::Synonym>();
        holds::<word_order::WordOrder>();
        holds::<fact_check::FactCheck>();
        holds::<supersession::Supersession>();
    }
}
