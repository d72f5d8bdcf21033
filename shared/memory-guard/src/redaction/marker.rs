//! Recognising well-formed markers (rule 2 of the module docs).

/// Opening of every marker; it is also what the marker scans look for.
pub(crate) const MARKER_PREFIX: &str = "[REDACTED:";
pub(crate) const MARKER_SUFFIX: &str = "]";

/// Longest well-formed marker: prefix, a 128-byte id and the closing bracket.
pub(crate) const MAX_MARKER_BYTES: usize =
    MARKER_PREFIX.len() + super::MAX_SECRET_ID_BYTES + MARKER_SUFFIX.len();

/// The secret-id charset `[A-Za-z0-9._:/@-]`; it has no `[`, `]` or whitespace, so a marker
/// parses back unambiguously and no marker can start inside another.
#[inline]
pub(crate) fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'@' | b'-')
}

/// If `[REDACTED:<id>]` with an id in the secret-id grammar starts at `at`, the byte range of
/// the id. Whether the id is clean of secrets (the second half of rule 2) is the caller's check.
#[inline]
pub(crate) fn marker_id_at(hay: &[u8], at: usize) -> Option<(usize, usize)> {
    let rest = hay.get(at..)?;
    if !rest.starts_with(MARKER_PREFIX.as_bytes()) {
        return None;
    }
    let id_start = at + MARKER_PREFIX.len();
    let limit = hay.len().min(id_start + super::MAX_SECRET_ID_BYTES + 1);
    let mut id_end = id_start;
    while id_end < limit && is_id_byte(hay[id_end]) {
        id_end += 1;
    }
    let id_len = id_end - id_start;
    let closed = hay.get(id_end) == Some(&b']');
    (closed && (1..=super::MAX_SECRET_ID_BYTES).contains(&id_len)).then_some((id_start, id_end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_grammar() {
        assert_eq!(marker_id_at(b"[REDACTED:a]", 0), Some((10, 11)));
        assert_eq!(marker_id_at(b"x[REDACTED:a-b]y", 1), Some((11, 14)));
        assert_eq!(marker_id_at(b"[REDACTED:]", 0), None);
        assert_eq!(marker_id_at(b"[REDACTED:a", 0), None);
        assert_eq!(marker_id_at(b"[REDACTED:a b]", 0), None);
        assert_eq!(marker_id_at(b"[REDACTED:[REDACTED:x]", 0), None);
        assert_eq!(marker_id_at(b"[REDACTED:[REDACTED:x]", 10), Some((20, 21)));
        let max = format!("[REDACTED:{}]", "a".repeat(128));
        assert!(marker_id_at(max.as_bytes(), 0).is_some());
        assert_eq!(max.len(), MAX_MARKER_BYTES);
        let over = format!("[REDACTED:{}]", "a".repeat(129));
        assert_eq!(marker_id_at(over.as_bytes(), 0), None);
    }
}
