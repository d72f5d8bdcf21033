//! `memory-dream` contract: a direct invoke `{"tenantId", "memoryRef", "tokenBudget"?,
//! "secrets"?}` distils one ref now and answers the run report; a budget below the floor (the
//! fixed overhead of a summary) fails the invoke with `validation_error` on `tokenBudget`, one
//! that cannot hold the top-ranked fact with its source with `token_budget_exceeded`. The
//! schedule and queue paths go through `background_api` (queued passes use the advertised maximum
//! budget).

use async_trait::async_trait;
use dream_service::dream::Dreamer;
use memory_core::ports::PassKind;
use memory_core::CoreError;
use serde_json::{json, Value};

use memory_api::background_api::{RefPass, RunRef};

pub struct DreamPass(pub Dreamer);

#[async_trait]
impl RefPass for DreamPass {
    fn kind(&self) -> PassKind {
        PassKind::Dream
    }

    async fn run(&self, run: &RunRef) -> Result<Value, CoreError> {
        if run.token_budget == Some(0) {
            return Err(CoreError::invalid(
                "tokenBudget",
                "must be a positive integer",
            ));
        }
        let redactor = run.redactor()?;
        match self
            .0
            .run(&run.tenant_id, &run.memory_ref, run.token_budget, &redactor)
            .await
        {
            Ok(report) => {
                let mut counts = vec![
                    ("Dreams", u64::from(report.status == "distilled")),
                    ("TokensUsed", u64::from(report.tokens_used)),
                    ("DreamSources", report.source_count as u64),
                ];
                // Only with a model configured: how often its summary was kept, and how often
                // the deterministic one stood in (the alarm-worthy ratio of a model outage).
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
                memory_api::metrics::emit(&counts);
                Ok(json!(report))
            }
            Err(e) => {
                memory_api::metrics::emit(&[("DreamFailures", 1)]);
                Err(e)
            }
        }
    }
}
