//! The crate's single error type, returned only by [`crate::apply`] (planning itself cannot
//! fail: every input corpus has a plan, possibly empty).
//!
//! Messages are fixed strings plus the merge's position in the plan: never an entry id, text or
//! tag, because callers log errors and entry data must not reach a log line.

/// Why a plan could not be applied to a corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ConsolidationError {
    /// A merge names a replaced id that is not (or no longer) in the corpus: the plan was made
    /// for a different corpus, or the entry changed since.
    #[error("merge {merge} replaces an entry that is not in the corpus")]
    ReplacedMissing {
        /// Position of the merge in [`crate::Plan::merges`].
        merge: usize,
    },
    /// A merge names a replaced id that occurs more than once in the corpus.
    #[error("merge {merge} replaces an id that is not unique in the corpus")]
    AmbiguousReplaced {
        /// Position of the merge in [`crate::Plan::merges`].
        merge: usize,
    },
    /// The merged entry's id is already present in the corpus.
    #[error("merge {merge} produces an id that already exists")]
    MergedIdExists {
        /// Position of the merge in [`crate::Plan::merges`].
        merge: usize,
    },
}
