//! `memory-dream`'s index pass (docs/search.md "The index"): folds a ref's change records into
//! its search index. Started by the sweep `{"action": "fan-out", "pass": "index"}` (every five
//! minutes, over the refs a write marked), a queued pass `{"kind": "index", ...}`, or the
//! operator's direct invoke `{"tenantId", "memoryRef", "pass": "index"}`. The answer is the
//! run's `IndexReport`; metrics count changes and documents, never content.

use async_trait::async_trait;
use memory_core::ports::PassKind;
use memory_core::ref_index::IndexPass;
use memory_core::CoreError;
use serde_json::{json, Value};

use memory_api::background_api::{RefPass, RunRef};

pub struct IndexRefPass(pub IndexPass);

#[async_trait]
impl RefPass for IndexRefPass {
    fn kind(&self) -> PassKind {
        PassKind::Index
    }

    async fn run(&self, run: &RunRef) -> Result<Value, CoreError> {
        match self.0.run(&run.tenant_id, &run.memory_ref).await {
            Ok(report) => {
                memory_api::metrics::emit(&[
                    ("IndexPasses", 1),
                    ("IndexChangesFolded", report.changes as u64),
                    ("IndexDocuments", report.documents),
                    ("IndexSegments", report.segments as u64),
                ]);
                Ok(json!(report))
            }
            Err(e) => {
                memory_api::metrics::emit(&[("IndexPassFailures", 1)]);
                Err(e)
            }
        }
    }
}
