//! Amazon Bedrock Runtime behind two core ports, each behind its own feature so a function links
//! the client only when it runs one: the `Embedder` over InvokeModel (`embeddings`, memory-read
//! and memory-write) and the `Summariser` over Converse (`summaries`, memory-dream).

#[cfg(feature = "embeddings")]
mod embedder;
#[cfg(feature = "summaries")]
mod summariser;

#[cfg(feature = "embeddings")]
pub use embedder::{BedrockEmbedder, MAX_INPUT_CHARS};
#[cfg(feature = "summaries")]
pub use summariser::{BedrockSummariser, SYSTEM_PROMPT};
