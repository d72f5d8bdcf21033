//! What a derived entry was made from, byte for byte: the provenance a merge or a dream records
//! so that a chain can show how an item was derived (OAP RFC 0010 §3.6, as the memory exchange
//! shows items; openwop-agent-memory.md keeps provenance host-internal).
//!
//! A merge or a dream names its sources by id in `provenance`, and forget follows those ids. An
//! id alone does not prove which text the source held when the derived entry was made, so the
//! deriving pass also records, per source it read, a mark carrying the SHA-256 of the source's
//! stored text. Whoever holds a source item can check that the derived item was made from that
//! very capture. A mark uses the id alphabet only, so it is stored like any provenance id, and
//! it can never equal a live entry's id (forget matches whole ids, so marks never widen it).

use sha2::{Digest, Sha256};

use crate::model::{hex, StoredEntry};

/// Prefix of a source digest mark: `srcsha256.<source id>.<hex SHA-256 of its stored text>`.
pub const SOURCE_DIGEST_MARK: &str = "srcsha256.";

/// The mark that pins `source`'s stored text.
pub fn source_digest_mark(source: &StoredEntry) -> String {
    let digest = Sha256::digest(source.entry.content.as_bytes());
    format!("{SOURCE_DIGEST_MARK}{}.{}", source.entry.id, hex(&digest))
}

/// `provenance` with a digest mark for each of `sources`, sorted and without repeats (the
/// provenance of a derived entry is a sorted set; a mark already there is kept once).
pub fn with_source_digests<'a>(
    mut provenance: Vec<String>,
    sources: impl IntoIterator<Item = &'a StoredEntry>,
) -> Vec<String> {
    provenance.extend(sources.into_iter().map(source_digest_mark));
    provenance.sort();
    provenance.dedup();
    provenance
}

/// The (source id, hex digest) pairs recorded in `provenance`.
pub fn source_digests(provenance: &[String]) -> impl Iterator<Item = (&str, &str)> {
    provenance.iter().filter_map(|p| {
        p.strip_prefix(SOURCE_DIGEST_MARK)?
            .rsplit_once('.')
            .filter(|(id, digest)| !id.is_empty() && digest.len() == 64)
    })
}

/// The source ids in `provenance`, without the digest marks.
pub fn source_ids(provenance: &[String]) -> impl Iterator<Item = &String> {
    provenance.iter().filter(|p| !is_source_digest(p))
}

/// Whether a provenance string is a digest mark rather than a source id.
pub fn is_source_digest(p: &str) -> bool {
    p.starts_with(SOURCE_DIGEST_MARK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MemoryEntry, Tier};
    use crate::{MemoryRef, Timestamp};

    fn entry(id: &str, content: &str) -> StoredEntry {
        StoredEntry::new(
            MemoryRef::parse("workspaces/t1/agents/a1/memories").expect("ref"),
            MemoryEntry {
                id: id.into(),
                content: content.into(),
                tags: vec![],
                created_at: Timestamp::from_millis(0),
                expires_at: None,
            },
            Tier::LongTerm,
        )
    }

    #[test]
    fn marks_round_trip_and_stay_apart_from_ids() {
        let a = entry("01A", "lives in Oslo");
        let b = entry("01B", "moved to Bergen");
        let provenance = with_source_digests(vec!["01B".into(), "01A".into()], [&a, &b, &a]);
        assert_eq!(provenance.len(), 4, "{provenance:?}");
        let pairs: Vec<_> = source_digests(&provenance).collect();
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[0].0, "01A");
        assert_eq!(
            pairs[0].1,
            hex(&Sha256::digest("lives in Oslo".as_bytes())),
            "the digest is of the stored text"
        );
        assert!(provenance.iter().filter(|p| is_source_digest(p)).count() == 2);
        assert!(!provenance
            .iter()
            .any(|p| is_source_digest(p) && (p == "01A" || p == "01B")));
    }

    #[test]
    fn malformed_marks_are_ignored() {
        let provenance = vec![
            format!("{SOURCE_DIGEST_MARK}01A.short"),
            format!("{SOURCE_DIGEST_MARK}.{}", "0".repeat(64)),
            "01A".into(),
        ];
        assert_eq!(source_digests(&provenance).count(), 0);
    }
}
