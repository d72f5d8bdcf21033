//! Analysed documents kept across queries (docs/search.md "What a search costs"): analysis
//! (normalisation, segmentation, stemming) is most of a query's CPU time, and a warm function sees
//! the same entries again and again. Keyed by the analyzer's configuration and the text itself, so
//! a hit is exactly what analysing the text would give (no id, tenant or hash can alias two texts),
//! and results are identical with or without the cache. Bounded: when the kept texts and terms
//! exceed the budget the cache starts over.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::Analyzer;

/// A document's analysis as scoring needs it: distinct terms (sorted) with their counts, and
/// the document's length in terms.
#[derive(Debug, PartialEq, Eq)]
pub struct Analysed {
    pub length: u32,
    terms: Box<[(Box<str>, u32)]>,
}

impl Analysed {
    /// `length`: what BM25 normalises by ([`Analyzer::analyse`]).
    pub fn new(terms: Vec<String>, length: u32) -> Self {
        let mut counts: HashMap<String, u32> = HashMap::new();
        for t in terms {
            *counts.entry(t).or_default() += 1;
        }
        let mut terms: Vec<(Box<str>, u32)> = counts
            .into_iter()
            .map(|(t, n)| (t.into_boxed_str(), n))
            .collect();
        terms.sort_unstable();
        Analysed {
            length,
            terms: terms.into_boxed_slice(),
        }
    }

    /// How often `term` occurs.
    pub fn frequency(&self, term: &str) -> u32 {
        self.terms
            .binary_search_by(|(t, _)| (**t).cmp(term))
            .map_or(0, |i| self.terms[i].1)
    }

    fn bytes(&self) -> usize {
        self.terms.iter().map(|(t, _)| t.len() + 24).sum::<usize>() + 32
    }
}

/// Budget of a cache built with [`TermCache::default`]: 32 MiB of texts and terms (a function
/// has 256 MiB; about 100,000 entries of 150 bytes fit).
pub const DEFAULT_BUDGET_BYTES: usize = 32 * 1024 * 1024;

/// Analyses by text, one map per analyzer configuration (index: stemming on).
#[derive(Default)]
struct Kept {
    by_text: [HashMap<Box<str>, Arc<Analysed>>; 2],
    bytes: usize,
}

pub struct TermCache {
    kept: Mutex<Kept>,
    budget_bytes: usize,
}

impl Default for TermCache {
    fn default() -> Self {
        TermCache::with_budget(DEFAULT_BUDGET_BYTES)
    }
}

impl TermCache {
    pub fn with_budget(budget_bytes: usize) -> Self {
        TermCache {
            kept: Mutex::new(Kept::default()),
            budget_bytes,
        }
    }

    /// The analysis of `text`, from the cache or made (and kept) now.
    pub fn analysed(&self, analyzer: &Analyzer, text: &str) -> Arc<Analysed> {
        let made = || {
            let (terms, length) = analyzer.analyse(text);
            Arc::new(Analysed::new(terms, length))
        };
        if self.budget_bytes == 0 {
            return made(); // a cache that keeps nothing (plain `rank`) takes no lock
        }
        let map = usize::from(analyzer.stems());
        {
            let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(found) = kept.by_text[map].get(text) {
                return found.clone();
            }
        }
        let made = made();
        let cost = made.bytes() + text.len() + 48;
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.bytes + cost > self.budget_bytes {
            *kept = Kept::default();
        }
        if cost <= self.budget_bytes {
            kept.bytes += cost;
            kept.by_text[map].insert(text.into(), made.clone());
        }
        made
    }

    /// Texts kept now (for tests and figures).
    pub fn len(&self) -> usize {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.by_text.iter().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_is_what_analysis_gives_and_the_budget_holds() {
        let cache = TermCache::with_budget(4_096);
        let a = Analyzer::new(true);
        let first = cache.analysed(&a, "Refunds refunded quickly");
        assert_eq!(first.length, 3);
        assert_eq!(first.frequency("refund"), 2);
        assert_eq!(first.frequency("quick"), 1);
        assert_eq!(first.frequency("absent"), 0);
        let again = cache.analysed(&a, "Refunds refunded quickly");
        assert!(Arc::ptr_eq(&first, &again), "served from the cache");
        let plain = cache.analysed(&Analyzer::new(false), "Refunds refunded quickly");
        assert_eq!(
            plain.frequency("refunds"),
            1,
            "the analyzer's configuration is in the key"
        );
        assert_eq!(cache.len(), 2);
        for n in 0..200 {
            cache.analysed(&a, &format!("text number {n} with some words"));
        }
        let kept = cache.kept.lock().expect("lock");
        assert!(kept.bytes <= 4_096, "{} bytes kept", kept.bytes);
    }
}
