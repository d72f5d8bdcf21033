//! Amazon Bedrock Runtime behind two core ports, each behind its own feature so a function links
//! the client only when it runs one: the `Embedder` over InvokeModel (`embeddings`, memory-read
//! and memory-write) and the `AbstractiveModel` over Converse (`abstractive`, memory-dream).

#[cfg(feature = "abstractive")]
mod abstractive;
#[cfg(feature = "embeddings")]
mod embedder;

#[cfg(feature = "abstractive")]
pub use abstractive::{BedrockAbstractiveModel, SYSTEM_PROMPT};
#[cfg(feature = "embeddings")]
pub use embedder::{BedrockEmbedder, MAX_INPUT_CHARS};
