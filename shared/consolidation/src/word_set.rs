//! A fixed set of words with a membership test that rejects nearly every other word without a
//! string comparison: the notation and supersession rules ask it about every token of a pass.

use std::sync::OnceLock;

/// `words` must be sorted and free of repeats (unit tests of the users check it).
pub(crate) struct WordSet {
    words: &'static [&'static str],
    /// Per first byte (ASCII) and length (capped at 15): a bit per last byte modulo 64.
    shapes: OnceLock<Box<[[u64; 16]; 128]>>,
}

impl WordSet {
    pub(crate) const fn new(words: &'static [&'static str]) -> Self {
        WordSet {
            words,
            shapes: OnceLock::new(),
        }
    }

    #[cfg(test)]
    pub(crate) fn words(&self) -> &'static [&'static str] {
        self.words
    }

    #[inline]
    pub(crate) fn contains(&self, t: &str) -> bool {
        let b = t.as_bytes();
        let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
            return false;
        };
        if !first.is_ascii() {
            return false;
        }
        let shapes = self.shapes.get_or_init(|| {
            let mut table = Box::new([[0u64; 16]; 128]);
            for w in self.words {
                let b = w.as_bytes();
                table[usize::from(b[0] & 127)][b.len().min(15)] |= 1 << (b[b.len() - 1] & 63);
            }
            table
        });
        shapes[usize::from(first)][b.len().min(15)] & (1 << (last & 63)) != 0
            && self.words.binary_search(&t).is_ok()
    }
}
