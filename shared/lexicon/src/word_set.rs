//! A fixed set of words with a membership test that rejects nearly every other word without a
//! string comparison: the notation and supersession rules ask it about every token of a pass.

/// `words` must be sorted, free of repeats and of empty words (unit tests of the users check
/// it; an empty word fails the build).
pub struct WordSet {
    words: &'static [&'static str],
    /// Per first byte (ASCII) and length (capped at 15): a bit per last byte modulo 64. Built at
    /// compile time, so a lookup is two loads and a bit test.
    shapes: [[u64; 16]; 128],
}

impl WordSet {
    pub const fn new(words: &'static [&'static str]) -> Self {
        let mut shapes = [[0u64; 16]; 128];
        let mut i = 0;
        while i < words.len() {
            let b = words[i].as_bytes();
            let len = if b.len() < 15 { b.len() } else { 15 };
            shapes[(b[0] & 127) as usize][len] |= 1 << (b[b.len() - 1] & 63);
            i += 1;
        }
        WordSet { words, shapes }
    }

    pub fn words(&self) -> &'static [&'static str] {
        self.words
    }

    #[inline]
    pub fn contains(&self, t: &str) -> bool {
        let b = t.as_bytes();
        let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
            return false;
        };
        if !first.is_ascii() {
            return false;
        }
        self.shapes[usize::from(first)][b.len().min(15)] & (1 << (last & 63)) != 0
            && self.words.binary_search(&t).is_ok()
    }
}
