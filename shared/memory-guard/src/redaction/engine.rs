//! The matching engine behind [`super::Redactor`]: one leftmost-longest scan over the run's
//! secret values and registered markers.
//!
//! Aho-Corasick alone is fast only while its SIMD prefilter applies, which stops at a few dozen
//! patterns; beyond that a DFA walks every byte through a table far larger than cache (about
//! 300 MB/s with 1,000 secrets). Every pattern here is at least 8 bytes, so large sets are
//! scanned with a Wu-Manber style skip table over 4-byte grams instead: most windows prove in
//! one lookup that no pattern can start in the next few bytes, and only the remaining candidate
//! positions are confirmed with an anchored Aho-Corasick search. Anchored leftmost-longest at
//! the first candidate that matches is exactly the unanchored leftmost-longest match, so both
//! paths produce identical output.

use aho_corasick::{
    AhoCorasick, AhoCorasickKind, Anchored, Input, Match, MatchError, MatchKind, StartKind,
};

/// Up to this many patterns Aho-Corasick's own packed prefilter stays effective (measured: it
/// gives up between 64 and 100), so the skip table would only slow things down.
const PREFILTER_PATTERNS: usize = 64;
/// Bytes hashed per skip-table lookup.
const GRAM: usize = 4;
const TABLE_BITS: u32 = 16;
/// Longest window considered; larger windows allow longer skips but fill the table faster, and
/// the shift must fit in a `u8`.
const WINDOW_CAP: usize = 32;
/// Candidate confirmations allowed before the skip scan counts as defeated (text built to make
/// every position a candidate) and the rest is handed to a plain linear scan: at most
/// `VERIFY_FLOOR` plus one per `VERIFY_SPACING` bytes.
const VERIFY_FLOOR: usize = 1024;
const VERIFY_SPACING: usize = 16;

/// What a matched pattern means.
#[derive(Debug, Clone, Copy)]
pub(super) enum Action {
    /// A registered marker already in the text: copy it through.
    Keep,
    /// A secret value: replace it with `markers[_]`.
    Replace(usize),
}

/// A rewritten text and how many values were replaced in it.
pub(super) type Rewritten = (String, usize);

#[derive(Clone)]
pub(super) struct Engine {
    automaton: AhoCorasick,
    actions: Vec<Action>,
    markers: Vec<String>,
    skip: Option<SkipTable>,
}

impl Engine {
    /// `patterns[i]` is acted on as `actions[i]`; `None` if no automaton could be built.
    pub(super) fn build(
        patterns: &[&str],
        actions: Vec<Action>,
        markers: Vec<String>,
    ) -> Option<Self> {
        let (skip, start, kinds): (_, _, &[AhoCorasickKind]) =
            if patterns.len() <= PREFILTER_PATTERNS {
                (
                    None,
                    StartKind::Unanchored,
                    &[
                        AhoCorasickKind::DFA,
                        AhoCorasickKind::ContiguousNFA,
                        AhoCorasickKind::NoncontiguousNFA,
                    ],
                )
            } else {
                // Confirmations touch only a few bytes each, so the compact NFA beats a DFA
                // (measured) at a fraction of the memory and build time.
                (
                    SkipTable::new(patterns),
                    StartKind::Both,
                    &[
                        AhoCorasickKind::ContiguousNFA,
                        AhoCorasickKind::NoncontiguousNFA,
                    ],
                )
            };
        let automaton = kinds.iter().find_map(|&kind| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .start_kind(start)
                .kind(Some(kind))
                .build(patterns)
                .ok()
        })?;
        Some(Self {
            automaton,
            actions,
            markers,
            skip,
        })
    }

    /// One scan. `Ok(None)` means no value matched and the text is already final; an error can
    /// only come from a search mode the automaton was not built for.
    pub(super) fn pass(&self, text: &str) -> Result<Option<Rewritten>, MatchError> {
        let mut rewrite = Rewrite::new(text);
        match &self.skip {
            Some(skip) => {
                self.skip_scan(skip, &mut rewrite)?;
            }
            None => self.linear_scan(Input::new(text), &mut rewrite)?,
        }
        Ok(rewrite.finish())
    }

    fn linear_scan(&self, input: Input<'_>, rewrite: &mut Rewrite<'_>) -> Result<(), MatchError> {
        for found in self.automaton.try_find_iter(input)? {
            rewrite.apply(&self.actions, &self.markers, found);
        }
        Ok(())
    }

    /// Returns whether the scan fell back to the linear scan.
    fn skip_scan(&self, skip: &SkipTable, rewrite: &mut Rewrite<'_>) -> Result<bool, MatchError> {
        let text = rewrite.text;
        let bytes = text.as_bytes();
        let len = bytes.len();
        let mut pos = 0;
        let mut verified = 0;
        while pos + skip.window <= len {
            let shift = skip.shift_before(bytes, pos + skip.window);
            if shift != 0 {
                pos += shift;
                continue;
            }
            verified += 1;
            if verified > VERIFY_FLOOR + pos / VERIFY_SPACING {
                self.linear_scan(Input::new(text).span(pos..len), rewrite)?;
                return Ok(true);
            }
            let input = Input::new(text).span(pos..len).anchored(Anchored::Yes);
            match self.automaton.try_find(input)? {
                Some(found) => {
                    rewrite.apply(&self.actions, &self.markers, found);
                    pos = found.end();
                }
                None => pos += 1,
            }
        }
        Ok(false)
    }
}

/// Wu-Manber shift table: for the 4-byte gram ending a `window`-byte window, how far the
/// window can move right without skipping the start of any pattern. Hash collisions only make
/// shifts smaller, never unsafe.
#[derive(Clone)]
struct SkipTable {
    window: usize,
    shift: Box<[u8]>,
}

impl SkipTable {
    fn new(patterns: &[&str]) -> Option<Self> {
        let window = patterns.iter().map(|p| p.len()).min()?.min(WINDOW_CAP);
        if window < GRAM {
            return None;
        }
        let longest_shift = u8::try_from(window - GRAM + 1).ok()?;
        let mut shift = vec![longest_shift; 1 << TABLE_BITS].into_boxed_slice();
        for pattern in patterns {
            let prefix = pattern.as_bytes().get(..window)?;
            for (at, gram) in prefix.windows(GRAM).enumerate() {
                let slot = &mut shift[gram_slot(gram)];
                let distance = u8::try_from(window - GRAM - at).ok()?;
                *slot = (*slot).min(distance);
            }
        }
        Some(Self { window, shift })
    }

    /// Shift for the window ending just before `end` (`end >= GRAM`, `end <= bytes.len()`).
    #[inline(always)]
    fn shift_before(&self, bytes: &[u8], end: usize) -> usize {
        usize::from(self.shift[gram_slot(&bytes[end - GRAM..end])])
    }
}

/// Multiplicative hash of a 4-byte gram into the table's index range.
#[inline(always)]
fn gram_slot(gram: &[u8]) -> usize {
    let mut word = [0u8; GRAM];
    word.copy_from_slice(&gram[..GRAM]);
    (u32::from_le_bytes(word).wrapping_mul(0x9E37_79B1) >> (32 - TABLE_BITS)) as usize
}

/// Builds the output lazily: nothing is allocated or copied until the first value matches.
struct Rewrite<'t> {
    text: &'t str,
    out: Option<String>,
    copied_to: usize,
    count: usize,
}

impl<'t> Rewrite<'t> {
    fn new(text: &'t str) -> Self {
        Self {
            text,
            out: None,
            copied_to: 0,
            count: 0,
        }
    }

    fn apply(&mut self, actions: &[Action], markers: &[String], found: Match) {
        let Some(Action::Replace(marker)) = actions.get(found.pattern().as_usize()) else {
            return;
        };
        let Some(marker) = markers.get(*marker) else {
            return;
        };
        let text = self.text;
        let out = self
            .out
            .get_or_insert_with(|| String::with_capacity(text.len() + text.len() / 8));
        // Patterns are non-empty UTF-8, so a match in UTF-8 text starts on a lead byte and ends
        // after a complete character: both offsets are char boundaries and slicing cannot panic.
        out.push_str(&text[self.copied_to..found.start()]);
        out.push_str(marker);
        self.copied_to = found.end();
        self.count += 1;
    }

    fn finish(self) -> Option<Rewritten> {
        let mut out = self.out?;
        out.push_str(&self.text[self.copied_to..]);
        Some((out, self.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(values: &[String], markers: &[&str]) -> Engine {
        let markers: Vec<String> = markers.iter().map(|m| (*m).to_owned()).collect();
        let mut patterns: Vec<&str> = markers.iter().map(String::as_str).collect();
        patterns.extend(values.iter().map(String::as_str));
        let mut actions = vec![Action::Keep; markers.len()];
        actions.extend(values.iter().map(|_| Action::Replace(0)));
        Engine::build(&patterns, actions, markers.clone()).unwrap()
    }

    fn many_values() -> Vec<String> {
        (0..100).map(|i| format!("value-{i:03}-padding")).collect()
    }

    #[test]
    fn small_sets_use_a_dfa_and_large_sets_the_skip_table() {
        let small = engine(&["0123456789".to_owned()], &["[REDACTED:a]"]);
        assert!(small.skip.is_none());
        assert_eq!(small.automaton.kind(), AhoCorasickKind::DFA);
        assert_eq!(small.automaton.match_kind(), MatchKind::LeftmostLongest);

        let large = engine(&many_values(), &["[REDACTED:a]"]);
        let skip = large.skip.as_ref().unwrap();
        assert_eq!(skip.window, "[REDACTED:a]".len());
        assert_eq!(large.automaton.kind(), AhoCorasickKind::ContiguousNFA);
        assert_eq!(large.automaton.match_kind(), MatchKind::LeftmostLongest);
    }

    #[test]
    fn skip_scan_finds_matches_at_every_alignment() {
        let e = engine(&many_values(), &["[REDACTED:a]"]);
        for lead in 0..40 {
            let text = format!("{}value-042-padding{}", "x".repeat(lead), "y".repeat(lead));
            let (out, n) = e.pass(&text).unwrap().unwrap();
            assert_eq!(n, 1);
            assert_eq!(
                out,
                format!("{}[REDACTED:a]{}", "x".repeat(lead), "y".repeat(lead))
            );
        }
        // Shorter than the window: nothing can match, nothing is rewritten.
        assert!(e.pass("value-04").unwrap().is_none());
    }

    #[test]
    fn dense_candidates_fall_back_to_the_linear_scan_with_the_same_result() {
        let mut values = many_values();
        values.push(format!("{}Z", "a".repeat(20)));
        let e = engine(&values, &["[REDACTED:a]"]);
        let skip = e.skip.as_ref().unwrap();
        // Every position of a run of 'a' is a candidate, defeating the skip table.
        let text = format!("{}Z tail value-007-padding", "a".repeat(64 * 1024));
        let mut rewrite = Rewrite::new(&text);
        assert!(e.skip_scan(skip, &mut rewrite).unwrap());
        let (out, n) = rewrite.finish().unwrap();
        assert_eq!(n, 2);
        assert_eq!(
            out,
            format!(
                "{}[REDACTED:a] tail [REDACTED:a]",
                "a".repeat(64 * 1024 - 20)
            )
        );

        // Ordinary text never needs the fallback.
        let plain = "lorem ipsum dolor sit amet ".repeat(4096);
        let mut rewrite = Rewrite::new(&plain);
        assert!(!e.skip_scan(skip, &mut rewrite).unwrap());
        assert!(rewrite.finish().is_none());
    }
}
