//! The linear fallback: a standard (all-matches) Aho-Corasick walk, one byte at a time.
//!
//! Used for a whole text when the fast scan meets something it does not handle cheaply: many
//! occurrences starting inside one another, an occurrence running into a marker, or
//! verification work beyond its budget. It visits every byte once whatever the patterns: at
//! each end position only the longest pattern ending there matters (it covers every shorter
//! one), and that is cached per automaton state, so even `a{8}`, `a{9}`, ... `a{1000}` over a
//! run of `a` costs one transition and one cache hit per byte.

use std::collections::HashMap;

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::nfa::noncontiguous::NFA;
use aho_corasick::{Anchored, MatchKind};

use super::engine::Found;
use super::marker::{marker_id_at, MARKER_PREFIX};

pub(super) struct Slow {
    nfa: NFA,
    start: StateID,
}

/// A marker's byte range in the text.
pub(super) type MarkerRange = (usize, usize);

impl Slow {
    pub(super) fn build(patterns: &[&[u8]]) -> Option<Self> {
        let nfa = aho_corasick::nfa::noncontiguous::Builder::new()
            .match_kind(MatchKind::Standard)
            .prefilter(false)
            .build(patterns)
            .ok()?;
        let start = nfa.start_state(Anchored::No).ok()?;
        Some(Self { nfa, start })
    }

    /// Longest pattern ending in each match state, computed once per state per call.
    fn longest(&self, cache: &mut HashMap<StateID, (u32, u32)>, sid: StateID) -> (u32, u32) {
        *cache.entry(sid).or_insert_with(|| {
            let mut best = (0u32, 0u32);
            for index in 0..self.nfa.match_len(sid) {
                let pid = self.nfa.match_pattern(sid, index);
                let len = self.nfa.pattern_len(pid) as u32;
                if len > best.0 {
                    best = (len, pid.as_u32());
                }
            }
            best
        })
    }

    /// Whether any pattern occurs inside `hay[from..to]`.
    pub(super) fn contains(&self, hay: &[u8], from: usize, to: usize) -> bool {
        let mut sid = self.start;
        for &byte in &hay[from..to] {
            sid = self.nfa.next_state(Anchored::No, sid, byte);
            if self.nfa.is_match(sid) {
                return true;
            }
        }
        false
    }

    /// Every well-formed marker in the text, in order (they cannot overlap).
    pub(super) fn markers(&self, hay: &[u8]) -> Vec<MarkerRange> {
        memchr::memmem::find_iter(hay, MARKER_PREFIX.as_bytes())
            .filter_map(|at| {
                let (id_start, id_end) = marker_id_at(hay, at)?;
                (!self.contains(hay, id_start, id_end)).then_some((at, id_end + 1))
            })
            .collect()
    }

    /// Calls `found` with the longest occurrence ending at each end position of the segment
    /// `from..to`, in order of end; every occurrence lies inside the segment.
    pub(super) fn scan_segment(
        &self,
        hay: &[u8],
        from: usize,
        to: usize,
        cache: &mut HashMap<StateID, (u32, u32)>,
        mut found: impl FnMut(Found),
    ) {
        let mut sid = self.start;
        for (at, &byte) in hay[from..to].iter().enumerate() {
            sid = self.nfa.next_state(Anchored::No, sid, byte);
            if self.nfa.is_match(sid) {
                let (len, pattern) = self.longest(cache, sid);
                let end = from + at + 1;
                found(Found {
                    start: end - len as usize,
                    end,
                    pattern,
                });
            }
        }
    }
}
