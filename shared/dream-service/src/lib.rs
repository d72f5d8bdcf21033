//! Dreams: one distillation run over one ref (`dream`) and the forget hook that sweeps what
//! dreams derived (`derived`), over the ports. The distilling itself is the pure `distill` crate;
//! how `memory-dream` exposes a run (its wire contract, metrics) is the function's own.
//!
//! The `dreams` feature (default) brings the run and its distiller (with the tokenizer); without
//! it the crate holds forget's sweep of dream output alone ([`derived`]).

#[cfg(feature = "dreams")]
pub mod abstractive;
pub mod derived;
#[cfg(feature = "dreams")]
pub mod dream;

pub use derived::DerivedForgetHook;
#[cfg(feature = "dreams")]
pub use dream::{DreamReport, Dreamer, MAX_TOKEN_BUDGET};
