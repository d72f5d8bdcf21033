//! Dreams: one distillation run over one ref (`dream`), the forget hook that sweeps what dreams
//! derived, and the run as `memory-dream` exposes it (`api`). The distilling itself is the pure
//! `distill` crate; this crate wires it to the ports.

//!
//! The `dreams` feature (default) brings the run and its distiller (with the tokenizer); without
//! it the crate holds forget's sweep of dream output alone ([`derived`]).

#[cfg(feature = "dreams")]
pub mod abstractive;
#[cfg(feature = "dreams")]
pub mod api;
pub mod derived;
#[cfg(feature = "dreams")]
pub mod dream;

#[cfg(feature = "dreams")]
pub use api::DreamPass;
pub use derived::DerivedForgetHook;
#[cfg(feature = "dreams")]
pub use dream::{DreamReport, Dreamer, MAX_TOKEN_BUDGET};
