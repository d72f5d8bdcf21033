//! Opaque list cursors bound to (tenant, memoryRef, tag filter). The position inside is only an
//! entry id within the partition the (already CTI-1-checked) ref selects, so even a forged cursor
//! cannot reach another tenant; the digest additionally makes a cursor minted for one tenant,
//! ref or filter, or edited by hand, fail loudly with 400 instead of silently reading from an odd
//! position. An unfiltered list binds no filter, so its cursors read the same as before filters
//! were bound.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::error::CoreError;
use crate::model::{hex, is_valid_entry_id};
use crate::tag_filter::TagFilter;
use memory_guard::MemoryRef;

const VERSION: &str = "c1";

fn binding(memory_ref: &MemoryRef, filter: &TagFilter, position: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"wop-memory/cursor/v1\0");
    h.update(memory_ref.tenant().as_str().as_bytes());
    h.update(b"\0");
    h.update(memory_ref.to_string().as_bytes());
    h.update(b"\0");
    h.update(position.as_bytes());
    if !filter.is_empty() {
        h.update(b"\0");
        h.update(filter.canonical().as_bytes());
    }
    hex(&h.finalize()[..16])
}

pub fn encode(memory_ref: &MemoryRef, filter: &TagFilter, position: &str) -> String {
    let raw = format!(
        "{VERSION}.{position}.{}",
        binding(memory_ref, filter, position)
    );
    URL_SAFE_NO_PAD.encode(raw)
}

/// Returns the position, or `BadCursor` for anything not minted by `encode` for this ref and
/// filter.
pub fn decode(
    memory_ref: &MemoryRef,
    filter: &TagFilter,
    token: &str,
) -> Result<String, CoreError> {
    if token.len() > 400 {
        return Err(CoreError::BadCursor);
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| CoreError::BadCursor)?;
    let raw = String::from_utf8(bytes).map_err(|_| CoreError::BadCursor)?;
    let mut parts = raw.split('.');
    let (Some(VERSION), Some(position), Some(mac), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(CoreError::BadCursor);
    };
    if !is_valid_entry_id(position) || position.contains('.') {
        return Err(CoreError::BadCursor);
    }
    if binding(memory_ref, filter, position) != mac {
        return Err(CoreError::BadCursor);
    }
    Ok(position.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> MemoryRef {
        MemoryRef::parse(s).unwrap()
    }

    fn filter(all: &[&str], any: &[&str]) -> TagFilter {
        let owned = |t: &[&str]| t.iter().map(|s| s.to_string()).collect();
        TagFilter::new(owned(all), owned(any)).unwrap()
    }

    #[test]
    fn round_trips_for_the_same_ref_and_filter() {
        let a = r("workspaces/t1/agents/a1/memories");
        let none = TagFilter::default();
        let c = encode(&a, &none, "01JX");
        assert_eq!(decode(&a, &none, &c).unwrap(), "01JX");
        let f = filter(&["b", "a"], &["c"]);
        let c = encode(&a, &f, "01JX");
        // The same filter however the query ordered it.
        assert_eq!(
            decode(&a, &filter(&["a", "b"], &["c"]), &c).unwrap(),
            "01JX"
        );
    }

    #[test]
    fn foreign_and_tampered_cursors_are_rejected() {
        let a = r("workspaces/t1/agents/a1/memories");
        let other_tenant = r("workspaces/t2/agents/a1/memories");
        let other_agent = r("workspaces/t1/agents/a2/memories");
        let none = TagFilter::default();
        let c = encode(&a, &none, "01JX");
        assert_eq!(decode(&other_tenant, &none, &c), Err(CoreError::BadCursor));
        assert_eq!(decode(&other_agent, &none, &c), Err(CoreError::BadCursor));
        let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(&c).unwrap()).unwrap();
        let edited = URL_SAFE_NO_PAD.encode(raw.replace("01JX", "01JY"));
        assert_eq!(decode(&a, &none, &edited), Err(CoreError::BadCursor));
        for junk in ["", "!!!", "YWJj", &"A".repeat(500)] {
            assert_eq!(decode(&a, &none, junk), Err(CoreError::BadCursor), "{junk}");
        }
    }

    #[test]
    fn a_cursor_is_bound_to_its_filter() {
        let a = r("workspaces/t1/agents/a1/memories");
        let tagged = encode(&a, &filter(&["x"], &[]), "01JX");
        for other in [
            TagFilter::default(),
            filter(&["y"], &[]),
            filter(&[], &["x"]),
            filter(&["x", "y"], &[]),
        ] {
            assert_eq!(
                decode(&a, &other, &tagged),
                Err(CoreError::BadCursor),
                "{other:?}"
            );
        }
        let plain = encode(&a, &TagFilter::default(), "01JX");
        assert_eq!(
            decode(&a, &filter(&["x"], &[]), &plain),
            Err(CoreError::BadCursor)
        );
    }
}
