//! Opaque list cursors bound to (tenant, memoryRef). The position inside is only an entry id
//! within the partition the (already CTI-1-checked) ref selects, so even a forged cursor cannot
//! reach another tenant; the digest additionally makes a cursor minted for one tenant or ref, or
//! edited by hand, fail loudly with 400 instead of silently reading from an odd position.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::error::CoreError;
use crate::model::{hex, is_valid_entry_id};
use memory_guard::MemoryRef;

const VERSION: &str = "c1";

fn binding(memory_ref: &MemoryRef, position: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"wop-memory/cursor/v1\0");
    h.update(memory_ref.tenant().as_str().as_bytes());
    h.update(b"\0");
    h.update(memory_ref.to_string().as_bytes());
    h.update(b"\0");
    h.update(position.as_bytes());
    hex(&h.finalize()[..16])
}

pub fn encode(memory_ref: &MemoryRef, position: &str) -> String {
    let raw = format!("{VERSION}.{position}.{}", binding(memory_ref, position));
    URL_SAFE_NO_PAD.encode(raw)
}

/// Returns the position, or `BadCursor` for anything not minted by `encode` for this ref.
pub fn decode(memory_ref: &MemoryRef, token: &str) -> Result<String, CoreError> {
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
    if binding(memory_ref, position) != mac {
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

    #[test]
    fn round_trips_for_the_same_ref() {
        let a = r("workspaces/t1/agents/a1/memories");
        let c = encode(&a, "01JX");
        assert_eq!(decode(&a, &c).unwrap(), "01JX");
    }

    #[test]
    fn foreign_and_tampered_cursors_are_rejected() {
        let a = r("workspaces/t1/agents/a1/memories");
        let other_tenant = r("workspaces/t2/agents/a1/memories");
        let other_agent = r("workspaces/t1/agents/a2/memories");
        let c = encode(&a, "01JX");
        assert_eq!(decode(&other_tenant, &c), Err(CoreError::BadCursor));
        assert_eq!(decode(&other_agent, &c), Err(CoreError::BadCursor));
        let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(&c).unwrap()).unwrap();
        let edited = URL_SAFE_NO_PAD.encode(raw.replace("01JX", "01JY"));
        assert_eq!(decode(&a, &edited), Err(CoreError::BadCursor));
        for junk in ["", "!!!", "YWJj", &"A".repeat(500)] {
            assert_eq!(decode(&a, junk), Err(CoreError::BadCursor), "{junk}");
        }
    }
}
