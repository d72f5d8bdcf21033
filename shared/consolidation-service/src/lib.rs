//! Consolidation: one pass over one ref's long-term memory (`pass`), planned by the pure
//! `consolidation` crate and applied as conditional rewrites. How `memory-consolidate` exposes a
//! pass (its wire contract, metrics) is the function's own.

pub mod pass;

pub use pass::{ConsolidationReport, Consolidator};
