//! `memory-consolidate` contract: a direct invoke `{"tenantId", "memoryRef", "secrets"?}` runs one
//! pass now and answers `{"inputCount", "outputCount", "mergesApplied", "mergesSkipped"}`; the
//! schedule and queue paths go through `background_api`.

use async_trait::async_trait;
use consolidation_service::pass::Consolidator;
use memory_core::ports::PassKind;
use memory_core::CoreError;
use serde_json::{json, Value};

use memory_api::background_api::{RefPass, RunRef};

pub struct ConsolidatePass(pub Consolidator);

#[async_trait]
impl RefPass for ConsolidatePass {
    fn kind(&self) -> PassKind {
        PassKind::Consolidate
    }

    async fn run(&self, run: &RunRef) -> Result<Value, CoreError> {
        let report = self
            .0
            .run(&run.tenant_id, &run.memory_ref, &run.redactor()?)
            .await?;
        memory_api::metrics::emit(&[
            ("Consolidations", 1),
            (
                "EntriesMerged",
                (report.input_count - report.output_count) as u64,
            ),
            ("MergesSkipped", report.merges_skipped as u64),
        ]);
        Ok(json!(report))
    }
}
