//! The pure, deterministic half of scheduled distillation ("dreams", RFC 0062, built on RFC 0012
//! compaction) for the wop-memory host.
//!
//! Everything here is a function of its arguments — no clock, no randomness, no I/O, no iteration
//! order leaking from a hash map — so the properties the run contract asks for can be tested
//! without AWS: the same source set and budget give the same bytes (§4), `tokensUsed` never
//! exceeds the budget (§2), and `[REDACTED:…]` markers survive distillation whole (§3).
//!
//! - [`tokens`]: cl100k_base token counts (the advertised `tokenizerName`), offline;
//! - [`distiller`]: the [`Distiller`] trait, the budget rule and [`DeterministicDistiller`];
//! - [`archive`]: the immutable archive document, its digest and output entry id;
//! - [`keys`]: the S3 keys of archives and indexes (tenant-scoped, CTI-1);
//! - [`index`]: `MEMORY-INDEX.json` and its `MEMORY-INDEX.md` sibling (§5).
//!
//! The caller (the `memory-dream` function) owns everything with a side effect: reading the
//! snapshot, clamping the budget, SR-1 carry-forward redaction (via
//! [`Distillation::with_summary`] or [`archive::build_archive`]), put-if-absent of the archive,
//! the long-term entry with its `compacted-from:<runId>` tag, the conditional index update,
//! events and the watermark.

//!
//! The `distiller` feature (default) brings the distiller and the tokenizer; without it the
//! crate holds the archive and index formats and keys alone, which is all forget's sweep of
//! dream output needs.

pub mod archive;
#[cfg(feature = "distiller")]
pub mod distiller;
mod error;
pub mod index;
mod json;
pub mod keys;
#[cfg(feature = "distiller")]
mod marker;
mod time;
#[cfg(feature = "distiller")]
pub mod tokens;

#[cfg(feature = "distiller")]
pub use archive::archive_digest;
pub use archive::{output_entry_id, to_bytes, Archive, ARCHIVE_FORMAT, TOKENIZER_NAME};
#[cfg(feature = "distiller")]
pub use distiller::{
    check_input, summary_items, DeterministicDistiller, DistillInput, Distillation, Distiller,
    SourceEntry, SummaryItem, DETERMINISTIC_VERSION, MIN_TOKEN_BUDGET, PINNED_TAG,
};
pub use error::DistillError;
pub use index::{IndexLine, MemoryIndex, INDEX_FORMAT, MAX_INDEX_LINES};
#[cfg(feature = "distiller")]
pub use tokens::count;
