//! SR-1 marker awareness — RFC 0012 §D (SR-1 carry-forward) and RFC 0062 run contract §3 ("a
//! distilled archive MUST NOT re-expose a secret the sources had redacted").
//!
//! Sources reach the distiller already redacted: each secret is a `[REDACTED:<secretId>]` marker.
//! A summary that cut such a marker in half (`[REDACTED:cust`) would be neither a marker nor text
//! the carry-forward redactor can recognise, so every place that shortens text here cuts only
//! at character boundaries outside markers. The id grammar mirrors the redactor's
//! (`[A-Za-z0-9._:/@-]{1,128}`); anything else that merely starts with `[REDACTED:` is ordinary
//! text, which may be cut anywhere because it carries no secret reference.

use std::ops::Range;

const PREFIX: &str = "[REDACTED:";
const MAX_ID_BYTES: usize = 128;

fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'@' | b'-')
}

/// Byte ranges of the well-formed markers in `text`, in order, non-overlapping.
pub(crate) fn spans(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = text.get(from..).and_then(|rest| rest.find(PREFIX)) {
        let start = from + found;
        let id_start = start + PREFIX.len();
        let mut end = id_start;
        while end < bytes.len() && end - id_start < MAX_ID_BYTES && is_id_byte(bytes[end]) {
            end += 1;
        }
        if end > id_start && bytes.get(end) == Some(&b']') {
            out.push(start..end + 1);
            from = end + 1;
        } else {
            from = id_start;
        }
    }
    out
}

/// True when cutting `text` at byte `at` would split a marker or a character.
pub(crate) fn splits_marker(spans: &[Range<usize>], at: usize) -> bool {
    spans.iter().any(|span| span.start < at && at < span.end)
}

/// Byte offsets where `text` may be cut: every character boundary in `1..=len` that is not
/// inside a marker. A marker is one indivisible unit.
pub(crate) fn cut_points(text: &str) -> Vec<usize> {
    let spans = spans(text);
    text.char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .filter(|&at| !splits_marker(&spans, at))
        .collect()
}

/// `text` shortened to at most `max_chars` characters at a cut point, and whether it was cut.
///
/// If the very first unit is a marker longer than `max_chars`, that whole marker is kept: a line
/// that is a bare marker still says "a secret was here", and an empty line says nothing.
pub(crate) fn truncate_chars(text: &str, max_chars: usize) -> (&str, bool) {
    let Some((limit, _)) = text.char_indices().nth(max_chars) else {
        return (text, false);
    };
    let points = cut_points(text);
    let cut = points
        .iter()
        .copied()
        .take_while(|&p| p <= limit)
        .last()
        .or_else(|| points.first().copied())
        .unwrap_or(text.len());
    (&text[..cut], cut < text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_well_formed_markers_only() {
        let text = "a [REDACTED:k1] b [REDACTED:] c [REDACTED:x y] [REDACTED:api/key@v2.1-x]";
        let found: Vec<&str> = spans(text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(found, vec!["[REDACTED:k1]", "[REDACTED:api/key@v2.1-x]"]);
    }

    #[test]
    fn nested_prefix_resynchronises() {
        let text = "[REDACTED:[REDACTED:k]";
        let found: Vec<&str> = spans(text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(found, vec!["[REDACTED:k]"]);
    }

    #[test]
    fn overlong_ids_are_not_markers() {
        let text = format!("[REDACTED:{}]", "a".repeat(129));
        assert!(spans(&text).is_empty());
        let text = format!("[REDACTED:{}]", "a".repeat(128));
        assert_eq!(spans(&text), vec![0..text.len()]);
    }

    #[test]
    fn truncation_never_splits_a_marker() {
        let text = "key is [REDACTED:stripe-live] and more";
        for max in 0..text.chars().count() + 2 {
            let (cut, _) = truncate_chars(text, max);
            let opens = cut.matches("[REDACTED:").count();
            let whole = spans(cut).len();
            assert_eq!(opens, whole, "max {max} gave {cut:?}");
        }
        assert_eq!(truncate_chars(text, 10), ("key is ", true));
    }

    #[test]
    fn leading_marker_is_kept_whole() {
        let text = "[REDACTED:k-123] tail";
        assert_eq!(truncate_chars(text, 3), ("[REDACTED:k-123]", true));
        assert_eq!(truncate_chars(text, 100), (text, false));
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let (cut, was) = truncate_chars("日本語のテキスト", 3);
        assert_eq!((cut, was), ("日本語", true));
    }
}
