//! The manifest of a ref's index: which segments are live and how far they reach (docs/search.md
//! "The index"). One small object per ref, rewritten whole by the pass that changes the segment
//! set and written only if the manifest it read is still the current one (its `generation`), so
//! two passes can never both install a segment set: the loser rebuilds from what won.
//!
//! What the segments do not hold yet is the tail: the table keeps a content-free change record
//! for every entry mutation, which the pass deletes only after the manifest holding its result is
//! installed, so a query that reads the changes first and the manifest second always finds every
//! entry either in a segment or in the tail.

use serde::{Deserialize, Serialize};

/// The manifest format this code reads and writes.
pub const FORMAT: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub format: u32,
    /// Bumped by every change; the condition of the next write.
    pub generation: u64,
    /// Epoch milliseconds of the pass that wrote this manifest.
    pub built_ms: i64,
    /// The embedding model of the segments' vectors ("" when they hold none).
    pub vector_model: String,
    /// Oldest first: a later segment's copy of an id supersedes an earlier one's.
    pub segments: Vec<SegmentRef>,
    /// Segments taken out of the set by a merge, kept for a grace period so a query that read
    /// the previous manifest can still fetch them, then deleted by a later pass.
    #[serde(default)]
    pub retired: Vec<Retired>,
}

/// A segment no manifest names any more.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retired {
    pub name: String,
    pub at_ms: i64,
}

/// One live segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentRef {
    /// Object name within the ref's index prefix (content-addressed: `seg-<sha256>` of the
    /// object's bytes, vectors included, so a rebuild with other vectors is another object).
    pub name: String,
    pub docs: u32,
    /// Size of the segment's object.
    pub bytes: u64,
    /// Hex SHA-256 of the segment's text part: a fetched segment is checked against it (the
    /// vector block carries its own digest and the text part's).
    pub sha256: String,
    /// Whether a vector block goes with it.
    #[serde(default)]
    pub vectors: bool,
    /// Where the vector block starts in the segment's object: the text part is the bytes
    /// before, so a text query reads that range alone and a semantic one reads the whole object
    /// in the same single call. `None` with `vectors`: the block is an object of its own,
    /// `<name>.vec` (segments written before the block moved into the segment's object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors_at: Option<u64>,
    /// Bytes of the vector block's head (its magic, the directory's length and the directory:
    /// `Segment::vector_head_len`), named only for a segment whose vectors are in lists. A cold
    /// semantic query then reads the text part and the head in one ranged call and each list
    /// it probes by range; `None`: the whole object, as for an exact segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_head: Option<u64>,
    /// Ids whose copy here no longer stands: deleted since, or held again by a later segment.
    #[serde(default)]
    pub dead: Vec<String>,
}

impl Manifest {
    /// The manifest of a ref nothing has indexed yet: no segments, the whole ref is tail.
    pub fn empty() -> Self {
        Manifest {
            format: FORMAT,
            generation: 0,
            built_ms: 0,
            vector_model: String::new(),
            segments: Vec::new(),
            retired: Vec::new(),
        }
    }

    /// Live documents: the segments' documents less their dead ones.
    pub fn docs(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| u64::from(s.docs).saturating_sub(s.dead.len() as u64))
            .sum()
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
