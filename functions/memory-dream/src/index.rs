//! `memory-dream`'s index pass (docs/search.md "The index"): folds a ref's change records into
//! its search index. Started by the sweep `{"action": "fan-out", "pass": "index"}` (every five
//! minutes, over the refs a write marked), a queued pass `{"kind": "index", ...}`, or the
//! operator's direct invoke `{"tenantId", "memoryRef", "pass": "index"}`. The answer is the
//! run's `IndexReport`; metrics count changes and documents, never content.

use memory_api::background_api::metered;
use memory_core::ref_index::IndexPass;

memory_api::ref_pass!(IndexRefPass(IndexPass), Index, |pass, run| {
    metered(
        pass.run(&run.tenant_id, &run.memory_ref).await,
        "IndexPassFailures",
        |report| {
            vec![
                ("IndexPasses", 1),
                ("IndexChangesFolded", report.changes as u64),
                ("IndexDocuments", report.documents),
                ("IndexSegments", report.segments as u64),
            ]
        },
    )
});
