//! The byte conventions of OAP (`oap-sdk` 0.1.0 `canonicalize` and `sha256_hex`): everything this
//! door signs or hashes is canonical JSON, so a grantee recomputes every hash and verifies every
//! signature with the SDK's own functions, in any language that sorts keys the same way.
//!
//! Canonical JSON here is what Python's `json.dumps(obj, sort_keys=True, separators=(",", ":"),
//! ensure_ascii=False)` writes: keys sorted by code point (UTF-8 byte order is the same order),
//! no whitespace, non-ASCII characters as themselves, control characters escaped. serde_json's
//! map is ordered by key bytes and escapes exactly those characters, so its compact form is
//! canonical for every value without floats. Floats are the one place the two writers differ
//! (`1e-07` against `1e-7`), so the signed and hashed documents of this door carry none (a
//! query receipt hashes item ids and chain hashes, never an embedding's numbers).

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical JSON of `value`.
pub fn canonicalize(value: &Value) -> String {
    // A `Value` always serialises; the fallback is unreachable but keeps this total.
    serde_json::to_string(value).unwrap_or_default()
}

/// Lower-case hex SHA-256 of the UTF-8 bytes of `s`.
pub fn sha256_hex(s: &str) -> String {
    memory_core::model::hex(&Sha256::digest(s.as_bytes()))
}

/// `sha256:<hex>` of the canonical form of `value`: how receipts, grants and chain links name
/// one another.
pub fn hash_of(value: &Value) -> String {
    format!("sha256:{}", sha256_hex(&canonicalize(value)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_sorted_compact_and_unicode_kept() {
        let v = json!({"b": 1, "a": {"z": [1, "é\n\u{1}"], "A": null}, "ä": true});
        assert_eq!(
            canonicalize(&v),
            "{\"a\":{\"A\":null,\"z\":[1,\"é\\n\\u0001\"]},\"b\":1,\"ä\":true}"
        );
    }

    #[test]
    fn sha256_of_known_text() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
