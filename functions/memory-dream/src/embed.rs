//! `memory-dream`'s embed pass (docs/search.md "Semantic search"), wired only with
//! `EMBEDDING_MODEL_ID`: a queued pass `{"kind": "embed", ...}` (memory-write queues one when it
//! stored entries without a vector), the sweep `{"action": "fan-out", "pass": "embed"}` (every
//! five minutes) and the operator's direct invoke `{"tenantId", "memoryRef", "pass": "embed"}`
//! (a ref written before a model was configured, or under another one). The answer is the run's
//! `EmbedReport`; metrics count vectors, never content. A run the tenant's token quota stopped
//! emits `QuotaRefused` and leaves the rest to the sweep.

use memory_api::background_api::metered;
use memory_core::embed_pass::EmbedPass;

memory_api::ref_pass!(EmbedRefPass(EmbedPass), Embed, |pass, run| {
    metered(
        pass.run(&run.tenant_id, &run.memory_ref).await,
        "EmbedPassFailures",
        |report| {
            // The tenant's token quota stopped the run (docs/quotas.md "Bedrock tokens").
            if let Some(refusal) = &report.refused {
                memory_api::metrics::quota_event(
                    memory_api::metrics::QUOTA_REFUSED,
                    refusal.tenant.as_str(),
                    refusal.quota.name(),
                );
            }
            vec![
                ("EmbedPasses", 1),
                ("EmbeddingsBackfilled", report.embedded as u64),
                ("EmbeddingsFailed", report.failed as u64),
                (
                    "EmbeddingsStillMissing",
                    (report.failed + report.deferred) as u64,
                ),
            ]
        },
    )
});
