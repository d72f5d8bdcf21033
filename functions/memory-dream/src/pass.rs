//! `memory-dream` contract: a direct invoke `{"tenantId", "memoryRef", "tokenBudget"?,
//! "secrets"?}` distils one ref now and answers the run report; a budget below the floor (the
//! fixed overhead of a summary) fails the invoke with `validation_error` on `tokenBudget`, one
//! that cannot hold the top-ranked fact with its source with `token_budget_exceeded`. The
//! schedule and queue paths go through `background_api` (queued passes use the advertised maximum
//! budget).

use dream_service::dream::Dreamer;
use memory_api::background_api::metered;
use memory_core::CoreError;

memory_api::ref_pass!(DreamPass(Dreamer), Dream, |dreamer, run| {
    if run.token_budget == Some(0) {
        return Err(CoreError::invalid(
            "tokenBudget",
            "must be a positive integer",
        ));
    }
    let redactor = run.redactor()?;
    let outcome = dreamer
        .run(&run.tenant_id, &run.memory_ref, run.token_budget, &redactor)
        .await;
    let tenant = run.tenant_id.clone();
    metered(outcome, "DreamFailures", |report| {
        // The tenant's token quota kept the model from being called (docs/quotas.md "Bedrock
        // tokens"): the dream stored the deterministic summary.
        if report.summary_fallback == Some(dream_service::abstractive::Fallback::TokenQuota.code())
        {
            memory_api::metrics::quota_event(
                memory_api::metrics::QUOTA_REFUSED,
                &tenant,
                memory_core::quota::Quota::BedrockTokensPerDay.name(),
            );
        }
        let mut counts = vec![
            ("Dreams", u64::from(report.status == "distilled")),
            ("TokensUsed", u64::from(report.tokens_used)),
            ("DreamSources", report.source_count as u64),
        ];
        // Only with a model configured: how often its summary was kept, and how often the
        // deterministic one stood in (the alarm-worthy ratio of a model outage).
        if report.summary_model.is_some() || report.summary_fallback.is_some() {
            counts.push((
                "AbstractiveSummaries",
                u64::from(report.summary_model.is_some()),
            ));
            counts.push((
                "AbstractiveFallbacks",
                u64::from(report.summary_fallback.is_some()),
            ));
        }
        counts
    })
});
