//! The manifest of a ref's index: which segments are live and how far they reach (docs/search.md
//! "The index"). One small object per ref, rewritten whole by the pass that changes the segment
//! set and written only if the manifest it read is still the current one (its `generation`), so
//! two passes can never both install a segment set: the loser rebuilds from what won.
//!
//! `covers` is what the segments hold: every entry written before it and still live when the
//! pass read the ref. A query reads the tail (entries written at or after `covers`) from the
//! table, so what a pass has not indexed yet is found all the same.

use serde::{Deserialize, Serialize};

/// The manifest format this code reads and writes.
pub const FORMAT: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub format: u32,
    /// Bumped by every change; the condition of the next write.
    pub generation: u64,
    /// Epoch milliseconds of the write time the segments cover up to (exclusive).
    pub covers_ms: i64,
    /// The embedding model of the segments' vectors ("" when they hold none).
    pub vector_model: String,
    pub segments: Vec<SegmentRef>,
}

/// One live segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentRef {
    /// Object name within the ref's index prefix (content-addressed: `seg-<sha256>`).
    pub name: String,
    pub docs: u32,
    pub bytes: u64,
    /// Hex SHA-256 of the segment's bytes: a fetched segment is checked against it.
    pub sha256: String,
}

impl Manifest {
    /// The manifest of a ref nothing has indexed yet: no segments, the whole ref is tail.
    pub fn empty() -> Self {
        Manifest {
            format: FORMAT,
            generation: 0,
            covers_ms: i64::MIN,
            vector_model: String::new(),
            segments: Vec::new(),
        }
    }

    pub fn docs(&self) -> u64 {
        self.segments.iter().map(|s| u64::from(s.docs)).sum()
    }
}

/// The object name of a segment with these bytes: named by content, so a retried or duplicate
/// pass writes the same object, never a second one.
pub fn segment_name(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    let mut name = String::with_capacity(4 + 64);
    name.push_str("seg-");
    for b in digest {
        name.push_str(&format!("{b:02x}"));
    }
    name
}
