//! Rare-byte finder for key families.
//!
//! Real secret sets are often families sharing a prefix (`sk-live-…`, `ghp_…`, `AKIA…`): many
//! patterns, but each contains one of at most three rare bytes at a fixed offset (`-` at 2,
//! `_` at 3, `K` at 1). `memchr3` over those bytes skips ordinary prose and CJK text at memory
//! speed, and each hit is confirmed through the [`Buckets`] of the skip-table finder.
//!
//! If the text turns out to be full of those bytes (a markdown table of `---`, say), the finder
//! reports [`Dense`] and the engine continues with its general finder for the rest of the text.

use super::engine::{Bail, Budget, Found, Pattern, Search};
use super::skip::Buckets;

/// At most this many distinct (byte, offset) pairs, so one `memchr3` finds every candidate.
const MAX_PAIRS: usize = 3;
/// Rarest acceptable byte rank (see [`rank`]): beyond it hits would be too frequent to help.
const MAX_RANK: u8 = 5;
/// Misses tolerated before the text counts as dense: more than this many, and more than one
/// per this many bytes scanned.
const DENSE_MISSES: usize = 64;
const DENSE_SPACING: usize = 32;

/// [`rank_of`] for every byte: a table, since random key bytes make a `match` mispredict.
static RANK: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = rank_of(byte as u8);
        byte += 1;
    }
    table
};

#[inline(always)]
fn rank(byte: u8) -> u8 {
    RANK[usize::from(byte)]
}

/// Rough frequency class of a byte in prose and code, lower is rarer.
const fn rank_of(byte: u8) -> u8 {
    match byte {
        b' ' => 9,
        b'e' | b't' | b'a' | b'o' | b'i' | b'n' | b's' | b'r' | b'h' => 8,
        b'.' | b',' | b'\n' | b'\t' | b'\r' => 7,
        b'q' | b'z' | b'x' | b'j' | b'k' | b'v' => 5,
        b'a'..=b'z' => 6,
        // Lead and continuation bytes of non-Latin text.
        0x80..=0xFF => 6,
        b'Q' | b'Z' | b'X' | b'J' | b'K' | b'V' => 3,
        b'A'..=b'Z' | b'0'..=b'9' => 4,
        b'-' | b'/' | b':' | b';' | b'!' | b'?' | b'\'' | b'"' | b'(' | b')' | b'[' | b']' => 2,
        _ => 1,
    }
}

/// Why [`Rare::find`] gave no answer.
pub(super) enum Miss {
    /// The text is too dense in the rare bytes; use the general finder.
    Dense,
    Bail,
}

impl From<Bail> for Miss {
    fn from(_: Bail) -> Self {
        Miss::Bail
    }
}

pub(super) struct Rare {
    needles: Vec<u8>,
    pairs: Vec<(u8, usize)>,
    min_offset: usize,
    max_offset: usize,
    buckets: Buckets,
}

impl Rare {
    /// `None` unless every pattern's rarest byte within its first window, at its first
    /// position, falls among at most [`MAX_PAIRS`] (byte, offset) pairs of rank at most
    /// [`MAX_RANK`].
    pub(super) fn new(bytes: &[u8], patterns: &[Pattern]) -> Option<Self> {
        let window = Buckets::window_of(patterns)?;
        let mut pairs: Vec<(u8, usize)> = Vec::with_capacity(MAX_PAIRS);
        for pattern in patterns {
            let head = &bytes[pattern.range()][..window];
            // The rarest byte, the first of equals.
            let (mut offset, mut byte) = (0, head[0]);
            for (at, &b) in head.iter().enumerate().skip(1) {
                if rank(b) < rank(byte) {
                    (offset, byte) = (at, b);
                }
            }
            if rank(byte) > MAX_RANK {
                return None;
            }
            if !pairs.contains(&(byte, offset)) {
                if pairs.len() == MAX_PAIRS {
                    return None;
                }
                pairs.push((byte, offset));
            }
        }
        let buckets = Buckets::new(bytes, patterns)?;
        let mut needles: Vec<u8> = pairs.iter().map(|&(b, _)| b).collect();
        needles.sort_unstable();
        needles.dedup();
        Some(Self {
            needles,
            min_offset: pairs.iter().map(|p| p.1).min()?,
            max_offset: pairs.iter().map(|p| p.1).max()?,
            pairs,
            buckets,
        })
    }

    /// Leftmost start in `s.from..s.to` at which a pattern occurs inside it, with the
    /// longest pattern there.
    #[inline]
    pub(super) fn find(&self, s: &Search<'_>, budget: &mut Budget) -> Result<Option<Found>, Miss> {
        let (hay, to) = (s.hay, s.to);
        let scan_from = s.from + self.min_offset;
        if scan_from >= to {
            return Ok(None);
        }
        let haystack = &hay[scan_from..to];
        // One monomorphised `confirm` per needle count: the hot loop stays free of dispatch.
        macro_rules! confirm_hits {
            ($hits:expr) => {
                self.confirm($hits.map(|hit| scan_from + hit), s, budget)
            };
        }
        match *self.needles.as_slice() {
            [a] => confirm_hits!(memchr::memchr_iter(a, haystack)),
            [a, b] => confirm_hits!(memchr::memchr2_iter(a, b, haystack)),
            [a, b, c] => confirm_hits!(memchr::memchr3_iter(a, b, c, haystack)),
            _ => Err(Miss::Dense),
        }
    }

    /// Confirms the candidate starts of `hits` (positions of rare bytes, ascending): the
    /// leftmost occurrence among them, with the longest pattern there.
    #[inline(always)]
    fn confirm(
        &self,
        hits: impl Iterator<Item = usize>,
        s: &Search<'_>,
        budget: &mut Budget,
    ) -> Result<Option<Found>, Miss> {
        let mut best: Option<Found> = None;
        for hit in hits {
            // Candidates from later hits start at or after `hit - max_offset`.
            if best.is_some_and(|b| hit > b.start + self.max_offset) {
                break;
            }
            let mut confirmed = false;
            for &(byte, offset) in &self.pairs {
                if s.hay[hit] != byte || hit < s.from + offset {
                    continue;
                }
                let start = hit - offset;
                if best.is_some_and(|b| start >= b.start) {
                    continue;
                }
                if let Some(found) = self.buckets.longest_at(s, start, budget)? {
                    best = Some(found);
                    confirmed = true;
                }
            }
            if !confirmed {
                budget.rare_misses += 1;
                if budget.rare_misses > DENSE_MISSES && budget.rare_misses * DENSE_SPACING > hit {
                    return Err(Miss::Dense);
                }
            }
        }
        Ok(best)
    }
}
