//! Consolidation: one pass over one ref's long-term memory (`pass`), planned by the pure
//! `consolidation` crate and applied as conditional rewrites, and the pass as
//! `memory-consolidate` exposes it (`api`).

pub mod api;
pub mod pass;

pub use api::ConsolidatePass;
pub use pass::{ConsolidationReport, Consolidator};
