//! The variable-length integers and prefix-shared strings of the segment and manifest byte forms.
//! Sorted keys share long prefixes (ULIDs of one ref share their time part, terms their stems), so
//! each key is stored as the length it shares with the one before plus the rest.

use crate::SegmentError;

#[derive(Default)]
pub(crate) struct Writer {
    out: Vec<u8>,
}

impl Writer {
    pub fn bytes(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }

    /// LEB128.
    pub fn uint(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.out.push(byte);
                return;
            }
            self.out.push(byte | 0x80);
        }
    }

    /// Zigzag, then LEB128.
    pub fn int(&mut self, v: i64) {
        self.uint(((v << 1) ^ (v >> 63)) as u64);
    }

    pub fn str(&mut self, s: &str) {
        self.uint(s.len() as u64);
        self.bytes(s.as_bytes());
    }

    /// `s` as the byte length it shares with `previous` (on a character boundary) and the rest.
    pub fn shared_prefix_str(&mut self, previous: &str, s: &str) {
        let mut shared = previous
            .bytes()
            .zip(s.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        while !s.is_char_boundary(shared) {
            shared -= 1;
        }
        self.uint(shared as u64);
        self.str(&s[shared..]);
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], SegmentError> {
        if n > self.rest.len() {
            return Err(SegmentError::Corrupt("truncated"));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    pub fn uint(&mut self) -> Result<u64, SegmentError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let [byte, tail @ ..] = self.rest else {
                return Err(SegmentError::Corrupt("truncated"));
            };
            self.rest = tail;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(SegmentError::Corrupt("varint"))
    }

    pub fn u32(&mut self) -> Result<u32, SegmentError> {
        u32::try_from(self.uint()?).map_err(|_| SegmentError::Corrupt("u32"))
    }

    /// A count of things that each take at least one byte: never more than the bytes left, so
    /// a corrupt count cannot make the decoder allocate without bound.
    pub fn count(&mut self) -> Result<usize, SegmentError> {
        let n = self.uint()?;
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= self.rest.len())
            .ok_or(SegmentError::Corrupt("count"))
    }

    pub fn int(&mut self) -> Result<i64, SegmentError> {
        let v = self.uint()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    pub fn str(&mut self) -> Result<String, SegmentError> {
        let n = self.count()?;
        let raw = self.bytes(n)?;
        String::from_utf8(raw.to_vec()).map_err(|_| SegmentError::Corrupt("utf-8"))
    }

    pub fn shared_prefix_str(&mut self, previous: &str) -> Result<String, SegmentError> {
        let shared = usize::try_from(self.uint()?).map_err(|_| SegmentError::Corrupt("prefix"))?;
        if shared > previous.len() || !previous.is_char_boundary(shared) {
            return Err(SegmentError::Corrupt("prefix"));
        }
        let rest = self.str()?;
        let mut s = String::with_capacity(shared + rest.len());
        s.push_str(&previous[..shared]);
        s.push_str(&rest);
        Ok(s)
    }

    /// The next key of a run stored in strictly ascending order, each as the prefix it shares
    /// with `previous` and the rest (`Writer::shared_prefix_str`): `previous` becomes it. A key
    /// not after `previous` is refused, unless it is the run's `first`.
    pub fn ascending_key(
        &mut self,
        previous: &mut String,
        first: bool,
    ) -> Result<Box<str>, SegmentError> {
        let key = self.shared_prefix_str(previous)?;
        if !first && key.as_str() <= previous.as_str() {
            return Err(SegmentError::Corrupt("keys out of order"));
        }
        previous.clone_from(&key);
        Ok(key.into_boxed_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_strings_round_trip() {
        let mut w = Writer::default();
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            w.uint(v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, 1_790_000_000_000] {
            w.int(v);
        }
        w.shared_prefix_str("", "01JD0A");
        w.shared_prefix_str("01JD0A", "01JD0B");
        w.shared_prefix_str("café", "cafés");
        w.shared_prefix_str("é", "ë");
        let bytes = w.finish();
        let mut r = Reader::new(&bytes);
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(r.uint().unwrap(), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, 1_790_000_000_000] {
            assert_eq!(r.int().unwrap(), v);
        }
        assert_eq!(r.shared_prefix_str("").unwrap(), "01JD0A");
        assert_eq!(r.shared_prefix_str("01JD0A").unwrap(), "01JD0B");
        assert_eq!(r.shared_prefix_str("café").unwrap(), "cafés");
        assert_eq!(r.shared_prefix_str("é").unwrap(), "ë");
        assert!(r.is_empty());
        assert!(Reader::new(&[0x80]).uint().is_err());
        assert!(
            Reader::new(&[5, b'a']).str().is_err(),
            "a count past the end"
        );
    }
}
