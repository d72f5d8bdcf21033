//! Background consolidation (openwop-agent-memory.md §"Background consolidation (RFC 0068)") as
//! a pure planning algorithm: given one memoryRef's long-term entries, [`plan`] decides which
//! entries to fold together and what each surviving entry looks like. It reads no clock, draws
//! no randomness and does no I/O; the caller executes the [`Plan`] against the store (one
//! all-or-nothing transaction per [`Merge`], in order), redacts merged content like a fresh put
//! (the spec's consolidation contract, §3: SR-1 carry-forward) and emits
//! `agent.memory.consolidated` with [`Plan::input_count`] / [`Plan::output_count`] (§4).
//!
//! What a pass does (contract: "merge duplicates, supersede stale facts, strengthen
//! corroborated ones"):
//!
//! - **Duplicates** — entries whose normalised texts are equal, or near duplicates (same content
//!   words in the same order, word-shingle Jaccard ≥ [`Settings::near_duplicate_threshold`]),
//!   fold into one entry ([`MergeKind::Duplicate`]). See [`normalise`](mod@normalise) for the
//!   normalisation and the distinct-fact guard, [`minhash`] for the candidate search that keeps a
//!   pass near-linear.
//! - **Stale facts** — entries in the same `fact:<key>` slot fold into the newest one
//!   ([`MergeKind::Supersede`]); see [`tags`] for the convention.
//! - **Corroboration** — every merged entry carries `corroborated:<n>` (how many sources agreed)
//!   and the provenance of everything it replaced.
//! - **Boundaries** — entries of different subjects, different fact slots, or with a non-unique
//!   id are never merged.
//!
//! # Caller obligations
//!
//! - Pass exactly one memoryRef's (hence one tenant's) long-term entries (consolidation
//!   contract §1), and only live ones: the planner has no clock, so an expired entry passed in
//!   could lend its expiry or text to a merged entry.
//! - Execute merges in order; a merge's `replaced` may name the merged id of an earlier merge
//!   in the same plan (large groups, see [`merge`](mod@merge)). Condition each transaction on the
//!   replaced entries being unchanged and the merged id being absent; if a condition fails, skip
//!   that merge and every later merge that replaces its merged id, and let the next pass retry.
//!
//! # Idempotency (consolidation contract §2)
//!
//! Running [`plan`] on the corpus a plan leaves behind yields no merges:
//!
//! - a merged entry keeps its group's subject and fact-key set (duplicate groups have no fact
//!   keys; a supersede entry keeps the winner's tags), so it stays in its cohort;
//! - every fact slot ends with exactly one entry;
//! - a duplicate group's survivor carries the text of one of its members. Any two survivors
//!   therefore carry texts that were both present in the first pass, in different connected
//!   components, so the first pass found no verified link between them. Whether two texts
//!   are linked depends only on the two texts (normalisation, guard, LSH bucket keys from
//!   fixed hash functions, exact Jaccard), never on the rest of the corpus, so the second pass
//!   cannot link them either;
//! - a large group is folded as a tree inside one plan and leaves a single entry;
//! - a guard class too large for the near-duplicate search (hostile input) only folds exact
//!   duplicates, which leaves its number of distinct texts unchanged, so it is skipped again.
//!
//! Property tests in `tests/` check this over generated corpora.

mod canonical;
mod cluster;
mod error;
mod link;
pub mod merge;
pub mod minhash;
mod names;
pub mod normalise;
pub mod semantic;
mod substitution;
pub mod tags;

use std::collections::HashMap;
use std::fmt;

pub use error::ConsolidationError;
pub use merge::merged_id;
pub use normalise::normalise;
pub use semantic::{Semantic, DEFAULT_MIN_COSINE};

/// Default [`Settings::near_duplicate_threshold`].
///
/// The guard (identical content words, in order) decides *whether* two texts can state the same
/// fact; the Jaccard threshold on word 2-shingles (fillers included) only bounds how much
/// meaning-neutral filler may differ relative to the sentence length, as a margin against a
/// filler that carries nuance ("the owner" / "an owner"). With `n` tokens, one filler added at
/// either end scores `(n-1)/n` and one inside the sentence `(n-2)/(n+1)`; 0.6 therefore merges a
/// leading "The" from three words on and one inserted filler from seven words on, while a filler
/// *swap* inside a short sentence ("User is the owner" / "User is an owner": 0.2) stays apart.
/// A higher threshold such as the 0.8 often used for document near-duplicate detection would be
/// needed if the guard were weaker (a word substitution in a 20-word sentence scores about 0.8);
/// here it would only stop short sentences with a harmless article from folding.
pub const DEFAULT_NEAR_DUPLICATE_THRESHOLD: f64 = 0.6;

/// Default [`Settings::max_replaced_per_merge`]: one DynamoDB transaction holds 100 items: the
/// merged put, the ref's change record, four quota counters (docs/quotas.md "Counters") and one
/// more as headroom for a condition check.
pub const DEFAULT_MAX_REPLACED_PER_MERGE: usize = 93;

/// One long-term entry as the planner sees it.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Entry {
    pub id: String,
    pub content: String,
    pub tags: Vec<String>,
    pub created_at_ms: i64,
    /// `None`: never expires.
    pub expires_at_ms: Option<i64>,
    /// Opaque subject digest; entries with different subjects are never merged.
    pub subject: Option<String>,
    /// Ids this entry already stands for (from earlier consolidations).
    pub provenance: Vec<String>,
}

/// The entry a merge writes: an [`Entry`] whose `provenance` is the sorted union of the replaced
/// ids and their own provenance.
pub type Merged = Entry;

/// Entry text never reaches a log line through `{:?}`: only its length is printed.
struct Redacted<'a>(&'a str);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("id", &self.id)
            .field("content", &Redacted(&self.content))
            .field("tags", &self.tags)
            .field("created_at_ms", &self.created_at_ms)
            .field("expires_at_ms", &self.expires_at_ms)
            .field("subject", &self.subject)
            .field("provenance", &self.provenance)
            .finish()
    }
}

/// Why entries were folded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MergeKind {
    /// Exact or near duplicates.
    Duplicate,
    /// Versions of one `fact:<key>` slot; the newest wins.
    Supersede,
}

/// One all-or-nothing step: delete `replaced`, put `merged`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merge {
    pub kind: MergeKind,
    /// Ids this merge removes, sorted; input ids or merged ids of earlier merges in the plan.
    /// Never more than [`Settings::max_replaced_per_merge`].
    pub replaced: Vec<String>,
    pub merged: Merged,
}

/// The outcome of a planning pass.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Plan {
    /// In execution order.
    pub merges: Vec<Merge>,
    pub input_count: usize,
    /// `input_count - Σ replaced + merges`: the corpus size once every merge has run.
    pub output_count: usize,
}

/// Tuning of a pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// Minimum exact Jaccard similarity of word 2-shingles for two guard-equal texts to fold;
    /// see [`DEFAULT_NEAR_DUPLICATE_THRESHOLD`]. Values are clamped to `0..=1`; NaN acts as 1.
    /// The LSH banding is tuned for thresholds of 0.5 and up (see [`minhash`]); below about 0.3
    /// some qualifying pairs are never offered as candidates (consistently, on every pass).
    pub near_duplicate_threshold: f64,
    /// Largest `replaced` list of one merge; values below 2 act as 2.
    pub max_replaced_per_merge: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            near_duplicate_threshold: DEFAULT_NEAR_DUPLICATE_THRESHOLD,
            max_replaced_per_merge: DEFAULT_MAX_REPLACED_PER_MERGE,
        }
    }
}

impl Settings {
    fn threshold(&self) -> f64 {
        if self.near_duplicate_threshold.is_nan() {
            1.0
        } else {
            self.near_duplicate_threshold.clamp(0.0, 1.0)
        }
    }
}

/// Plans one consolidation pass over a memoryRef's live long-term entries. The result depends
/// only on the set of entries, not on their order in the slice.
pub fn plan(entries: &[Entry], settings: &Settings) -> Plan {
    plan_with(entries, settings, None)
}

/// [`plan`] with the embedding stage ([`semantic`]): `semantic.vectors` holds one optional
/// vector per entry of `entries` (same index), all of one model.
pub fn plan_with(entries: &[Entry], settings: &Settings, semantic: Option<&Semantic<'_>>) -> Plan {
    let groups = cluster::find_groups(entries, settings.threshold(), semantic);
    // A group that fits one transaction (nearly all of them) is one merge: sized for that, the
    // plan is not left with up to half its capacity unused by the last doubling.
    let mut merges = Vec::with_capacity(groups.len());
    // Each group is freed once merged, so the groups and the growing plan are not both whole.
    for group in groups {
        merge::plan_group(
            group.kind,
            &group.members,
            &group.texts,
            entries,
            settings.max_replaced_per_merge,
            &mut merges,
        );
    }
    let replaced: usize = merges.iter().map(|m| m.replaced.len()).sum();
    Plan {
        input_count: entries.len(),
        output_count: (entries.len() + merges.len()).saturating_sub(replaced),
        merges,
    }
}

/// Executes a plan against an in-memory corpus, exactly as the store adapter must: merges in
/// order, each one removing its replaced entries and adding its merged entry. Untouched entries
/// keep their order; merged entries follow in plan order. Meant for tests and in-memory stores.
pub fn apply(entries: &[Entry], plan: &Plan) -> Result<Vec<Entry>, ConsolidationError> {
    let mut slots: Vec<Option<Entry>> = entries.iter().cloned().map(Some).collect();
    let mut live: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        live.entry(e.id.clone()).or_default().push(i);
    }
    for (k, merge) in plan.merges.iter().enumerate() {
        for id in &merge.replaced {
            match live.get(id).map(Vec::as_slice) {
                Some([_]) => {}
                Some([]) | None => return Err(ConsolidationError::ReplacedMissing { merge: k }),
                Some(_) => return Err(ConsolidationError::AmbiguousReplaced { merge: k }),
            }
        }
        if live.get(&merge.merged.id).is_some_and(|v| !v.is_empty()) {
            return Err(ConsolidationError::MergedIdExists { merge: k });
        }
        for id in &merge.replaced {
            if let Some(positions) = live.remove(id) {
                for p in positions {
                    slots[p] = None;
                }
            }
        }
        live.insert(merge.merged.id.clone(), vec![slots.len()]);
        slots.push(Some(merge.merged.clone()));
    }
    Ok(slots.into_iter().flatten().collect())
}
