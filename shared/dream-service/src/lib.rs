//! Dreams: one distillation run over one ref (`dream`), the forget hook that sweeps what dreams
//! derived, and the run as `memory-dream` exposes it (`api`). The distilling itself is the pure
//! `distill` crate; this crate wires it to the ports.

pub mod abstractive;
pub mod api;
pub mod dream;

pub use api::DreamPass;
pub use dream::{DerivedForgetHook, DreamReport, Dreamer, MAX_TOKEN_BUDGET};
