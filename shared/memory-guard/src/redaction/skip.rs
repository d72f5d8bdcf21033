//! Wu-Manber style finder for large pattern sets.
//!
//! Beyond a few dozen patterns Aho-Corasick's SIMD prefilter gives up and its automaton walks
//! every byte through a table far larger than cache; building that automaton also costs more
//! than redacting a typical write. Every pattern here is at least [`MIN_WINDOW`] bytes, so a
//! shift table over the 4-byte gram ending a `window`-byte window proves for most positions in
//! one lookup that no pattern can start in the next few bytes. The remaining candidate starts
//! are confirmed through a hash of the window's last 8 bytes: patterns are chained by that key
//! (not by their first bytes, which whole key families share) and compared in full.
//!
//! Building is two table fills, linear in the patterns' first windows. Verification work is
//! charged to the caller's [`Budget`], so text built to make every position a candidate with a
//! long common prefix hands the text to the linear fallback instead of going quadratic.

use super::engine::{Bail, Budget, Found, Pattern, Search};

/// Bytes hashed per shift-table lookup.
const GRAM: usize = 4;
/// Bytes of the bucket key; the window must hold at least this many.
const MIN_WINDOW: usize = 8;
/// Longest window used; longer windows allow longer shifts but fill the table faster.
const MAX_WINDOW: usize = 32;
const NONE: u32 = u32::MAX;

pub(super) struct SkipIndex {
    shift_bits: u32,
    shift: Box<[u8]>,
    buckets: Buckets,
}

/// Patterns chained by the 8 bytes ending their first `window` bytes, to confirm a candidate
/// start: every occurrence starting there has the same 8 bytes at the same place.
pub(super) struct Buckets {
    pub(super) window: usize,
    bucket_bits: u32,
    heads: Box<[u32]>,
    next: Box<[u32]>,
    keys: Box<[u64]>,
}

impl Buckets {
    /// The window these patterns would be confirmed on: the shortest pattern's length, at
    /// most [`MAX_WINDOW`]. `None` if some pattern is shorter than [`MIN_WINDOW`] bytes (or
    /// there are none).
    pub(super) fn window_of(patterns: &[Pattern]) -> Option<usize> {
        let min_len = patterns.iter().map(|p| p.len as usize).min()?;
        (min_len >= MIN_WINDOW).then_some(min_len.min(MAX_WINDOW))
    }

    /// `None` if some pattern is shorter than [`MIN_WINDOW`] bytes.
    pub(super) fn new(bytes: &[u8], patterns: &[Pattern]) -> Option<Self> {
        let window = Self::window_of(patterns)?;
        let bucket_bits = bits_for(patterns.len() * 2, 4, 30);
        let mut heads = vec![NONE; 1 << bucket_bits].into_boxed_slice();
        let mut next = vec![NONE; patterns.len()].into_boxed_slice();
        let mut keys = vec![0u64; patterns.len()].into_boxed_slice();
        for (index, pattern) in patterns.iter().enumerate() {
            let key = read_u64(&bytes[pattern.range()], window - MIN_WINDOW);
            keys[index] = key;
            let bucket = &mut heads[key_slot(key, bucket_bits)];
            next[index] = *bucket;
            *bucket = u32::try_from(index).ok()?;
        }
        Some(Self {
            window,
            bucket_bits,
            heads,
            next,
            keys,
        })
    }

    /// The first of `candidates` (ascending starts) at which a pattern occurs ending by `s.to`,
    /// with the longest pattern there: the leftmost occurrence, when every occurrence's start
    /// is among the candidates.
    #[inline(always)]
    pub(super) fn first_confirmed(
        &self,
        candidates: impl Iterator<Item = usize>,
        s: &Search<'_>,
        budget: &mut Budget,
    ) -> Result<Option<Found>, Bail> {
        for pos in candidates {
            let found = self.longest_at(s, pos, budget)?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// The longest pattern occurring at `pos` and ending by `s.to`, if any (none if its window
    /// does not fit).
    #[inline]
    pub(super) fn longest_at(
        &self,
        s: &Search<'_>,
        pos: usize,
        budget: &mut Budget,
    ) -> Result<Option<Found>, Bail> {
        let Search {
            hay,
            bytes,
            patterns,
            to,
            ..
        } = *s;
        if pos + self.window > to {
            return Ok(None);
        }
        let key = read_u64(hay, pos + self.window - MIN_WINDOW);
        let mut index = self.heads[key_slot(key, self.bucket_bits)];
        let mut best: Option<Found> = None;
        while index != NONE {
            let i = index as usize;
            if self.keys[i] == key {
                let pattern = patterns[i];
                let len = pattern.len as usize;
                budget.charge(len)?;
                if pos + len <= to
                    && best.is_none_or(|b| len > b.end - b.start)
                    && hay[pos..pos + len] == bytes[pattern.range()]
                {
                    best = Some(Found {
                        start: pos,
                        end: pos + len,
                        pattern: index,
                    });
                }
            }
            index = self.next[i];
        }
        Ok(best)
    }
}

#[inline(always)]
fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

#[inline(always)]
fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[inline(always)]
fn gram_slot(gram: u32, bits: u32) -> usize {
    (gram.wrapping_mul(0x9E37_79B1) >> (32 - bits)) as usize
}

#[inline(always)]
fn key_slot(key: u64, bits: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

fn bits_for(items: usize, min: u32, max: u32) -> u32 {
    (usize::BITS - items.max(1).leading_zeros()).clamp(min, max)
}

impl SkipIndex {
    /// `None` if some pattern is shorter than [`MIN_WINDOW`] bytes.
    pub(super) fn new(bytes: &[u8], patterns: &[Pattern]) -> Option<Self> {
        let buckets = Buckets::new(bytes, patterns)?;
        let window = buckets.window;
        let grams_per = window - GRAM + 1;
        // About eight slots per gram keeps most slots at the longest shift.
        let shift_bits = bits_for(patterns.len() * grams_per * 8, 10, 16);
        let longest = u8::try_from(grams_per).ok()?;
        let mut shift = vec![longest; 1 << shift_bits].into_boxed_slice();
        for pattern in patterns {
            let head = &bytes[pattern.range()][..window];
            for at in 0..grams_per {
                let slot = &mut shift[gram_slot(read_u32(head, at), shift_bits)];
                // `at < grams_per <= 29`, so the distance fits a u8.
                *slot = (*slot).min((grams_per - 1 - at) as u8);
            }
        }
        Some(Self {
            shift_bits,
            shift,
            buckets,
        })
    }

    /// Leftmost start in `s.from..s.to` at which a pattern occurs inside it, with the
    /// longest pattern there.
    #[inline]
    pub(super) fn find(&self, s: &Search<'_>, budget: &mut Budget) -> Result<Option<Found>, Bail> {
        let (hay, to) = (s.hay, s.to);
        let window = self.buckets.window;
        let mut pos = s.from;
        // Positions the shift table cannot rule out, in order.
        let candidates = std::iter::from_fn(|| {
            while pos + window <= to {
                let gram = read_u32(hay, pos + window - GRAM);
                let shift = self.shift[gram_slot(gram, self.shift_bits)];
                if shift == 0 {
                    pos += 1;
                    return Some(pos - 1);
                }
                pos += usize::from(shift);
            }
            None
        });
        self.buckets.first_confirmed(candidates, s, budget)
    }
}
