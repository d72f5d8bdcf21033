//! The `Embedder` port over Amazon Bedrock's InvokeModel (docs/search.md "Semantic search"): Titan
//! Text Embeddings V2 by default (`EMBEDDING_MODEL_ID`), whose body is `{"inputText",
//! "dimensions"?, "normalize"}` in and `{"embedding": [..], "inputTextTokenCount"}` out. Other
//! models with the same body (any Titan text embedding model) work by configuration. Errors carry
//! the operation and the service's code only: the text sent is never logged.

use async_trait::async_trait;
use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::Client;
use memory_core::model::Embedding;
use memory_core::ports::Embedder;
use memory_core::StoreError;
use serde::{Deserialize, Serialize};

use crate::error::backend;

/// Titan V2 takes at most 8,192 tokens (and 50,000 characters); text is cut to its first 8,000
/// characters, which stays within the token limit for every script whose characters take at
/// most one token each, so a long entry has its head embedded instead of no vector at all.
pub const MAX_INPUT_CHARS: usize = 8_000;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Request<'a> {
    input_text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
    normalize: bool,
}

#[derive(Deserialize)]
struct Response {
    embedding: Vec<f32>,
    /// What the model counted (Titan answers it; metered as the tenant's Bedrock tokens).
    #[serde(default, rename = "inputTextTokenCount")]
    input_text_token_count: u64,
}

pub struct BedrockEmbedder {
    client: Client,
    model: String,
    dimensions: Option<u32>,
}

impl BedrockEmbedder {
    pub fn new(client: Client, model: String, dimensions: Option<u32>) -> Self {
        BedrockEmbedder {
            client,
            model,
            dimensions,
        }
    }
}

#[async_trait]
impl Embedder for BedrockEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    async fn embed(&self, text: &str) -> Result<Embedding, StoreError> {
        const OP: &str = "invoke_model";
        let input_text = match text.char_indices().nth(MAX_INPUT_CHARS) {
            Some((cut, _)) => &text[..cut],
            None => text,
        };
        let body = serde_json::to_vec(&Request {
            input_text,
            dimensions: self.dimensions,
            normalize: true,
        })
        .map_err(|_| StoreError::Backend {
            op: OP,
            code: "BuildRequest".into(),
        })?;
        let out = crate::retry::send(OP, || {
            self.client
                .invoke_model()
                .model_id(&self.model)
                .content_type("application/json")
                .accept("application/json")
                .body(Blob::new(body.clone()))
                .send()
        })
        .await
        .map_err(|e| backend(OP, &e))?;
        let answer: Response =
            serde_json::from_slice(out.body().as_ref()).map_err(|_| StoreError::Corrupt {
                key: format!("{OP} answer of {}", self.model),
            })?;
        memory_core::metering::bedrock_tokens(answer.input_text_token_count);
        if answer.embedding.is_empty() || answer.embedding.iter().any(|x| !x.is_finite()) {
            return Err(StoreError::Corrupt {
                key: format!("{OP} answer of {}", self.model),
            });
        }
        Ok(Embedding {
            model: self.model.clone(),
            vector: answer.embedding,
        })
    }
}
