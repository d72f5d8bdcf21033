//! Abstractive dreams (docs/dreams.md "Abstractive dreams (optional)"): optionally, a language
//! model rewrites the facts the deterministic distiller chose and ranked into a shorter summary.
//!
//! The deterministic distiller always runs first: it chooses the sources (the budget rule), folds
//! and ranks the facts, and its summary is the fallback. The model only rewrites those facts, and
//! nothing it answers is trusted:
//!
//! - **SR-1.** Facts go out redacted with the run's redactor, and the answer is redacted again
//!   with the same redactor before anything else looks at it, so a secret the model reintroduces
//!   (from its training, a prompt injection, or a guess at a marker) is masked like in any put.
//! - **Budget.** The answer is recounted with the tokenizer every figure uses (cl100k_base, not
//!   the model's own) and rejected when it takes more than the allowance
//!   (`min(MAX_MODEL_OUTPUT_TOKENS, budget - input tokens)`, so `tokensUsed <= budget` as
//!   before) or `MAX_SUMMARY_BYTES`. The deterministic summary grows with the budget; a model's
//!   answer stays within what one call may write.
//! - **Current facts only.** Values the distiller marked superseded are not sent: a rewrite
//!   could drop the mark and state an old phone number as the current one.
//! - **Fallback.** An error, a timeout (the whole call, retries included, is bounded here), an
//!   empty or an over-budget answer keeps the deterministic summary; the log says which (a
//!   reason code and counts, never text).
//! - **Provenance.** The dream writes the result exactly like a deterministic one: same sources,
//!   same `compacted-from:` tag and provenance ids, so forget reaches it the same way.

use std::sync::Arc;
use std::time::{Duration, Instant};

use distill::distiller::{MAX_SUMMARY_BYTES, UNTAGGED_HEADING};
use distill::{Archive, DistillError, DistillInput, Distillation, Distiller};
use memory_core::error::{CoreError, StoreError};
use memory_core::ports::{
    AbstractiveFact, AbstractiveModel, AbstractiveRequest, ArchiveStore, ObjectKey,
};
use memory_guard::Redactor;

/// Version prefix of every abstractive pipeline. Part of the archive digest (with the fact
/// chooser's version and the model id), so a dream with a model configured never shares an
/// archive key with one without, nor with one of another model.
pub const ABSTRACTIVE_VERSION: &str = "wop-memory.abstractive/1";

/// How long a dream waits for the model by default: an answer is at most
/// [`MAX_MODEL_OUTPUT_TOKENS`], which a small model writes in 10-40 s at 100-400 tokens/s, and
/// the prompt asks for far fewer; the dream function's own timeout (300 s) leaves room for
/// retries of the store calls around it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// Most tokens a model's answer may take (its `maxTokens`). A bound on one model call, not on a
/// summary: the usual Bedrock text models accept it as an output limit (some refuse larger
/// values), and it keeps a call within [`DEFAULT_TIMEOUT`]. A larger deterministic summary is
/// still sent whole; an answer cut at this limit falls back to it.
pub const MAX_MODEL_OUTPUT_TOKENS: u32 = 4_096;

/// Why a dream kept the deterministic summary instead of the model's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// The abstractive model failed (throttled past its retries, refused, cut at the token limit,
    /// ...).
    Failed,
    /// No answer within the timeout.
    TimedOut,
    /// The answer was empty (or only whitespace).
    Empty,
    /// The answer, redacted, takes more tokens or bytes than the summary allowance.
    OverBudget,
    /// The deterministic summary held no fact line to rewrite.
    NoFacts,
    /// Another run of the same dream (a redelivered or retried pass) stored the deterministic
    /// summary under this archive key first; put-if-absent keeps the first, and this run adopts it.
    EarlierRun,
    /// The tenant's Bedrock token quota for the day is spent (docs/quotas.md "Bedrock tokens"):
    /// the model was not called.
    TokenQuota,
}

impl Fallback {
    /// The reason code logged and reported (`summaryFallback`).
    pub fn code(self) -> &'static str {
        match self {
            Fallback::Failed => "model-error",
            Fallback::TimedOut => "timeout",
            Fallback::Empty => "empty",
            Fallback::OverBudget => "over-budget",
            Fallback::NoFacts => "no-facts",
            Fallback::EarlierRun => "earlier-run",
            Fallback::TokenQuota => "token-quota",
        }
    }
}

/// A configured abstractive model and how long a dream waits for it.
#[derive(Clone)]
pub struct Abstractive {
    model: Arc<dyn AbstractiveModel>,
    timeout: Duration,
}

impl Abstractive {
    pub fn new(model: Arc<dyn AbstractiveModel>, timeout: Duration) -> Self {
        Abstractive { model, timeout }
    }

    pub fn model(&self) -> &str {
        self.model.model()
    }

    /// The distiller version of this pipeline over the fact chooser `facts_version`: what the
    /// archive digest is computed over, and what `distillerVersion` records when the model's
    /// summary was kept.
    pub fn version(&self, facts_version: &str) -> String {
        format!(
            "{ABSTRACTIVE_VERSION};model={};facts={facts_version}",
            self.model()
        )
    }

    /// `deterministic` with its summary replaced by the model's rewrite of its facts, redacted
    /// and recounted; or why not. `deterministic` must already carry the SR-1 carry-forward
    /// summary. Logs the outcome (counts and a reason code only).
    pub async fn rewrite(
        &self,
        deterministic: &Distillation,
        redactor: &Redactor,
    ) -> Result<Distillation, Fallback> {
        let started = Instant::now();
        let outcome = self.try_rewrite(deterministic, redactor).await;
        let millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match &outcome {
            Ok(kept) => tracing::info!(
                model = self.model(),
                millis,
                facts = deterministic.facts_kept,
                output_tokens = kept.output_tokens,
                deterministic_tokens = deterministic.output_tokens,
                "abstractive summary kept"
            ),
            Err(reason) => tracing::warn!(
                model = self.model(),
                millis,
                reason = reason.code(),
                "abstractive summary not used, deterministic summary kept"
            ),
        }
        outcome
    }

    async fn try_rewrite(
        &self,
        deterministic: &Distillation,
        redactor: &Redactor,
    ) -> Result<Distillation, Fallback> {
        let facts: Vec<AbstractiveFact> = facts(&deterministic.summary)
            .into_iter()
            .map(|f| AbstractiveFact {
                text: redactor.redact(&f.text).into_owned(),
                ..f
            })
            .collect();
        if facts.is_empty() {
            return Err(Fallback::NoFacts);
        }
        let allowance = allowance(deterministic);
        let request = AbstractiveRequest {
            facts,
            max_output_tokens: allowance,
        };
        let answer = match tokio::time::timeout(self.timeout, self.model.rewrite(&request)).await {
            Err(_) => return Err(Fallback::TimedOut),
            Ok(Err(StoreError::QuotaExceeded(_))) => return Err(Fallback::TokenQuota),
            Ok(Err(e)) => {
                tracing::warn!(model = self.model(), error = %e, "abstractive model failed");
                return Err(Fallback::Failed);
            }
            Ok(Ok(text)) => text,
        };
        let answer = answer.trim();
        if answer.is_empty() {
            return Err(Fallback::Empty);
        }
        let redacted = redactor.redact(answer);
        if redacted.len() > MAX_SUMMARY_BYTES {
            return Err(Fallback::OverBudget);
        }
        let rewritten = deterministic
            .clone()
            .with_summary(redacted.into_owned())
            .map_err(|_| Fallback::OverBudget)?;
        if rewritten.output_tokens > allowance {
            return Err(Fallback::OverBudget);
        }
        Ok(rewritten)
    }
}

/// A dream's archive and distillation, and what became of the model's summary.
pub struct Built {
    pub archive: Archive,
    pub distillation: Distillation,
    /// `None` without a model; the model id when its summary was kept; why not otherwise.
    pub summary: Option<Result<String, Fallback>>,
}

/// The pure pipeline of a dream (`distill::archive::build_archive`: distil, SR-1 carry-forward,
/// archive), then the model's rewrite when one is configured. Without one the result is exactly
/// the deterministic archive.
///
/// With one, the archive is addressed by the digest over the configured pipeline's version
/// ([`Abstractive::version`]) whichever summary is kept, so two runs of one dream land on one
/// key even when only one of them got the model's answer; `distillerVersion` records which
/// summary it holds: that version, or the deterministic distiller's after a fallback.
pub async fn build_archive(
    abstractive: Option<&Abstractive>,
    tenant_id: &str,
    memory_ref: &str,
    input: &DistillInput,
    distiller: &(dyn Distiller + Sync),
    redactor: &Redactor,
) -> Result<Built, DistillError> {
    let (archive, distillation) =
        distill::archive::build_archive(tenant_id, memory_ref, input, distiller, |summary| {
            redactor.redact(summary).into_owned()
        })?;
    let Some(abstractive) = abstractive else {
        return Ok(Built {
            archive,
            distillation,
            summary: None,
        });
    };
    let (kept, summary) = match abstractive.rewrite(&distillation, redactor).await {
        Ok(rewritten) => (rewritten, Ok(abstractive.model().to_owned())),
        Err(reason) => (distillation, Err(reason)),
    };
    let mut archive = Archive::new(
        tenant_id,
        memory_ref,
        input,
        &abstractive.version(distiller.version()),
        &kept,
    )?;
    if summary.is_err() {
        distiller
            .version()
            .clone_into(&mut archive.distiller_version);
    }
    Ok(Built {
        archive,
        distillation: kept,
        summary: Some(summary),
    })
}

/// After put-if-absent found an archive at this run's key: another run of the same dream (a
/// redelivered or retried pass) stored it first. A model is not byte-stable, so that archive may
/// hold another summary than this run's; the first one stays, and this run writes the output
/// entry and announces with its summary and figures, so entry, archive and event agree.
pub async fn adopt_stored(
    abstractive: &Abstractive,
    archives: &dyn ArchiveStore,
    key: &ObjectKey,
    built: Built,
) -> Result<Built, CoreError> {
    let Some(stored) = archives.get(key).await? else {
        // Removed since (a forget's sweep): the fence check after the writes deals with it.
        return Ok(built);
    };
    let stored = Archive::from_bytes(&stored.body).map_err(|e| {
        CoreError::Store(StoreError::Corrupt {
            key: e.code().to_owned(),
        })
    })?;
    if stored.digest != built.archive.digest || stored == built.archive {
        return Ok(built);
    }
    let mut distillation = built.distillation;
    distillation.summary.clone_from(&stored.summary);
    distillation.input_tokens = stored.input_tokens;
    distillation.output_tokens = stored.output_tokens;
    distillation.tokens_used = stored.tokens_used;
    // Same digest, so the same pipeline and model: only which summary it holds can differ.
    let summary = if stored.distiller_version.starts_with(ABSTRACTIVE_VERSION) {
        Ok(abstractive.model().to_owned())
    } else {
        Err(Fallback::EarlierRun)
    };
    Ok(Built {
        archive: stored,
        distillation,
        summary: Some(summary),
    })
}

/// Tokens the model's summary may take: what the budget leaves after the included sources
/// (`distill::distiller` budget rule), within one call's [`MAX_MODEL_OUTPUT_TOKENS`].
pub fn allowance(distillation: &Distillation) -> u32 {
    MAX_MODEL_OUTPUT_TOKENS.min(
        distillation
            .token_budget
            .saturating_sub(distillation.input_tokens),
    )
}

/// The current facts of a deterministic summary, in its order, as the distiller reads a summary
/// back (merged bullets split, suffixes parsed into weights); superseded values are left out.
pub fn facts(summary: &str) -> Vec<AbstractiveFact> {
    distill::summary_items(summary)
        .into_iter()
        .filter(|item| !item.superseded)
        .map(|item| AbstractiveFact {
            section: item.section.unwrap_or_else(|| UNTAGGED_HEADING.to_owned()),
            text: item.text,
            weight: item.weight,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_follow_the_deterministic_summary() {
        let summary = "## preference\n\
                       - Customer prefers email (x3, latest 2026-11-20)\n\
                       - Alice prefers: tea (latest 2026-11-19); window seats (latest 2026-11-02)\n\
                       ## contact\n\
                       - Maria's phone number is: 555-0199 (latest 2026-11-20); 555-0101 (superseded, latest 2026-11-02)\n\
                       ## (untagged)\n\
                       - Key is [REDACTED:db] (latest 2026-11-18)\n";
        let got: Vec<(String, String, u32)> = facts(summary)
            .into_iter()
            .map(|f| (f.section, f.text, f.weight))
            .collect();
        let want = [
            ("preference", "Customer prefers email", 3),
            ("preference", "Alice prefers tea", 1),
            ("preference", "Alice prefers window seats", 1),
            ("contact", "Maria's phone number is 555-0199", 1),
            ("(untagged)", "Key is [REDACTED:db]", 1),
        ];
        assert_eq!(
            got,
            want.map(|(s, t, w)| (s.to_owned(), t.to_owned(), w))
                .to_vec()
        );
    }

    #[test]
    fn fallback_codes_are_distinct() {
        let all = [
            Fallback::Failed,
            Fallback::TimedOut,
            Fallback::Empty,
            Fallback::OverBudget,
            Fallback::NoFacts,
            Fallback::EarlierRun,
            Fallback::TokenQuota,
        ];
        let codes: std::collections::BTreeSet<_> = all.iter().map(|f| f.code()).collect();
        assert_eq!(codes.len(), all.len());
    }
}
