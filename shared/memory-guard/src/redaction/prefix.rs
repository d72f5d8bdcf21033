//! Shared-prefix finder.
//!
//! The secrets of one deployment are often many keys of a few providers, and a provider's keys
//! share a literal prefix (`sk_live_`, `ghp_`, `AKIA`, `xoxb-`). Any occurrence of any of them
//! starts with its group's prefix, so a substring search for the prefix finds every candidate
//! start: `memchr::memmem` (SIMD, vectorised over the needle's rarest bytes) for one prefix,
//! the packed Teddy searcher for a few. Both skip text that does not hold a prefix at memory
//! speed, where hashing windows ([`super::skip::SkipIndex`]) reads every few bytes and a
//! rare-byte scan ([`super::rare::Rare`]) stops at every such byte the text holds (`_` in
//! code, say). Each candidate is confirmed through the [`Buckets`] shared with those finders.
//!
//! The groups are found in one pass over the patterns: patterns are grouped by their first
//! [`KEY_BYTES`] bytes, and a group's prefix is the longest prefix all its patterns share (at
//! most the confirmation window). Prefixes of different groups differ within those first bytes,
//! so no prefix is a prefix of another and a leftmost-first search for them sees every
//! candidate start in order.

use aho_corasick::packed;
use memchr::memmem;

use super::engine::{Bail, Budget, Found, Pattern, Search};
use super::skip::Buckets;

/// Bytes that key a group: every group's prefix is at least this long.
const KEY_BYTES: usize = 4;
/// Most groups searched for at once; beyond that, candidates from so many prefixes are no
/// rarer than the general finders' and Teddy's buckets fill up.
const MAX_GROUPS: usize = 8;

/// How the patterns group by prefix; cheap to compute (one pass, no allocation beyond the
/// groups), so the engine asks it before choosing a finder.
pub(super) struct Groups {
    /// Per group: a pattern of the group and the length of the prefix the group shares.
    heads: Vec<(usize, usize)>,
}

impl Groups {
    /// `None` unless at most [`MAX_GROUPS`] groups hold all the patterns, fewer groups than
    /// patterns (some prefix is shared, so a single pattern never groups), and every pattern is
    /// long enough to confirm with [`Buckets`].
    pub(super) fn of(bytes: &[u8], patterns: &[Pattern]) -> Option<Self> {
        let window = Buckets::window_of(patterns)?;
        let mut keys: Vec<[u8; KEY_BYTES]> = Vec::with_capacity(MAX_GROUPS);
        let mut heads: Vec<(usize, usize)> = Vec::with_capacity(MAX_GROUPS);
        for (index, pattern) in patterns.iter().enumerate() {
            let pattern = &bytes[pattern.range()];
            let mut key = [0u8; KEY_BYTES];
            key.copy_from_slice(&pattern[..KEY_BYTES]);
            match keys.iter().position(|&k| k == key) {
                Some(group) => {
                    let (first, shared) = &mut heads[group];
                    let head = &bytes[patterns[*first].range()][..*shared];
                    *shared = head.iter().zip(pattern).take_while(|(a, b)| a == b).count();
                }
                None if keys.len() == MAX_GROUPS => return None,
                None => {
                    keys.push(key);
                    heads.push((index, window));
                }
            }
        }
        (heads.len() < patterns.len()).then_some(Self { heads })
    }

    /// Whether all patterns share one prefix.
    pub(super) fn is_single(&self) -> bool {
        self.heads.len() == 1
    }
}

enum Heads {
    One(memmem::Finder<'static>),
    Many(packed::Searcher),
}

pub(super) struct PrefixIndex {
    heads: Heads,
    buckets: Buckets,
}

impl PrefixIndex {
    /// `None` if the confirmation tables or the searcher cannot be built.
    pub(super) fn new(bytes: &[u8], patterns: &[Pattern], groups: &Groups) -> Option<Self> {
        let head = |&(first, shared): &(usize, usize)| &bytes[patterns[first].range()][..shared];
        let heads = match groups.heads.as_slice() {
            [one] => Heads::One(memmem::Finder::new(head(one)).into_owned()),
            many => {
                let mut config = packed::Config::new();
                config.match_kind(packed::MatchKind::LeftmostFirst);
                let mut builder = config.builder();
                for group in many {
                    builder.add(head(group));
                }
                Heads::Many(builder.build()?)
            }
        };
        Some(Self {
            heads,
            buckets: Buckets::new(bytes, patterns)?,
        })
    }

    /// Leftmost start in `s.from..s.to` at which a pattern occurs inside it, with the
    /// longest pattern there.
    #[inline]
    pub(super) fn find(&self, s: &Search<'_>, budget: &mut Budget) -> Result<Option<Found>, Bail> {
        let (hay, to) = (s.hay, s.to);
        // A pattern is at least `window` bytes, so none starts after `to - window`.
        let Some(last) = to.checked_sub(self.buckets.window) else {
            return Ok(None);
        };
        let mut at = s.from;
        let candidates = std::iter::from_fn(|| {
            if at > last {
                return None;
            }
            let hit = match &self.heads {
                Heads::One(finder) => finder.find(&hay[at..to]).map(|hit| at + hit),
                Heads::Many(searcher) => searcher
                    .find_in(hay, aho_corasick::Span { start: at, end: to })
                    .map(|m| m.start()),
            }?;
            at = hit + 1;
            Some(hit)
        });
        self.buckets.first_confirmed(candidates, s, budget)
    }
}
