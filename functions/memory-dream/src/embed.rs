//! `memory-dream`'s embed pass (docs/search.md "Semantic search"), wired only with
//! `EMBEDDING_MODEL_ID`: a queued pass `{"kind": "embed", ...}` (memory-write queues one when it
//! stored entries without a vector), the sweep `{"action": "fan-out", "pass": "embed"}` (every
//! five minutes) and the operator's direct invoke `{"tenantId", "memoryRef", "pass": "embed"}`
//! (a ref written before a model was configured, or under another one). The answer is the run's
//! `EmbedReport`; metrics count vectors, never content.

use async_trait::async_trait;
use memory_core::embed_pass::EmbedPass;
use memory_core::ports::PassKind;
use memory_core::CoreError;
use serde_json::{json, Value};

use memory_api::background_api::{RefPass, RunRef};

pub struct EmbedRefPass(pub EmbedPass);

#[async_trait]
impl RefPass for EmbedRefPass {
    fn kind(&self) -> PassKind {
        PassKind::Embed
    }

    async fn run(&self, run: &RunRef) -> Result<Value, CoreError> {
        match self.0.run(&run.tenant_id, &run.memory_ref).await {
            Ok(report) => {
                memory_api::metrics::emit(&[
                    ("EmbedPasses", 1),
                    ("EmbeddingsBackfilled", report.embedded as u64),
                    ("EmbeddingsFailed", report.failed as u64),
                    (
                        "EmbeddingsStillMissing",
                        (report.failed + report.deferred) as u64,
                    ),
                ]);
                Ok(json!(report))
            }
            Err(e) => {
                memory_api::metrics::emit(&[("EmbedPassFailures", 1)]);
                Err(e)
            }
        }
    }
}
