//! `memory-consolidate` contract: a direct invoke `{"tenantId", "memoryRef", "secrets"?}` runs one
//! pass now and answers `{"inputCount", "outputCount", "mergesApplied", "mergesSkipped"}`; the
//! schedule and queue paths go through `background_api`.

use consolidation_service::pass::Consolidator;
use serde_json::json;

memory_api::ref_pass!(
    ConsolidatePass(Consolidator),
    Consolidate,
    |consolidator, run| {
        let report = consolidator
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
);
