//! Canonical JSON — RFC 0062 run contract §4 ("byte-stable for a given source set + budget").
//!
//! The archive and index are plain `serde` structs written by `serde_json`'s compact writer: fields
//! in declaration order, no whitespace, integers only (no floats), strings escaped minimally
//! (`"` and `\\` as `\"` and `\\\\`, U+0000–U+001F as `\b \f \n \r \t` or lowercase `\u00xx`, every
//! other character as raw UTF-8), then one `\n` so the object is also a text file. The test below
//! pins those bytes, so a serializer change that would move a digest fails here first.

use serde::Serialize;

/// The document's canonical bytes. The documents are structs of strings, integers and string
/// lists, which `serde_json` always serializes; the fallback is never taken.
pub(crate) fn canonical_bytes(document: &impl Serialize) -> Vec<u8> {
    let mut out = serde_json::to_vec(document).unwrap_or_default();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Nested {
        n: i64,
    }

    #[derive(Serialize)]
    struct Doc<'a> {
        z: &'a str,
        a: i64,
        list: Vec<&'a str>,
        empty: Vec<&'a str>,
        nested: Nested,
    }

    #[test]
    fn writes_compact_ordered_minimally_escaped_json() {
        let doc = Doc {
            z: "a\"b\\c\n\u{1}\u{8}\u{c}\r\t\u{1f}\u{7f}/é😀",
            a: -3,
            list: vec!["x", "y"],
            empty: vec![],
            nested: Nested { n: 1 },
        };
        let text = String::from_utf8(canonical_bytes(&doc)).unwrap_or_default();
        assert_eq!(
            text,
            "{\"z\":\"a\\\"b\\\\c\\n\\u0001\\b\\f\\r\\t\\u001f\u{7f}/é😀\",\"a\":-3,\"list\":[\"x\",\"y\"],\"empty\":[],\"nested\":{\"n\":1}}\n"
        );
    }
}
