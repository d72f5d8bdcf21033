//! The embed pass (docs/search.md "Semantic search"): a background pass over one ref that gives
//! every live entry without a vector of the configured model its vector. Semantic and hybrid
//! search are a host extension of the spec's `search` dimension (RFC 0080 §A); the spec says
//! nothing about vectors, so what is here is this host's promise that every entry is eventually
//! comparable, not a spec clause.
//!
//! A write embeds its entries within a small budget and stores what misses it without a vector
//! (the write must not wait on a throttling model); it then marks the ref pending for this pass
//! (`PassKind::Embed`) and queues it. The pass is the background pass of every other kind, over
//! the same work marker and fence:
//!
//! - **Duplicate delivery.** What it embeds is read from the store each time, and each vector is
//!   written with `EntryStore::set_embedding`, conditional on the entry still existing with the
//!   revision read and having no vector of the model yet. A second delivery finds nothing to do,
//!   or loses every condition to the first, and writes nothing.
//! - **Concurrent delete, forget or rewrite.** The condition is evaluated by the store at the
//!   write: a deleted entry is not recreated (an update of a missing item fails its condition),
//!   a rewritten one (another revision) is not given the old content's vector.
//! - **Forget.** Tombstoned entries (read before the snapshot, `forget::Fence`) are never sent
//!   to the model. A vector lives on its entry's own item, so whatever forget deletes takes its
//!   vector with it; when a forget began during the pass, the pass still ends without taking the
//!   ref out of the pending index, so the next run sees the forget's result whole.
//! - **Bounded.** At most [`EmbedPass::max_entries`] model calls per run, [`EMBED_CONCURRENCY`]
//!   at a time, none started after [`EmbedPass::budget`] (nor within the answer margin of the
//!   invocation's deadline). What is left keeps the ref pending, so the sweep (a fan-out of this
//!   kind every few minutes) runs it again; an entry whose call failed (after the adapter's
//!   retries of throttling) is tried again the same way.
//! - **Token quota.** A call the tenant's `MaxBedrockTokensPerDay` refuses (docs/quotas.md
//!   "Bedrock tokens") ends the run's calls: the rest is deferred, the ref stays pending, and
//!   the sweep's next runs are refused at admission (no model call) until the UTC day turns.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::background::begin_pass;
use crate::error::CoreError;
use crate::forget::Fence;
use crate::listing::snapshot;
use crate::model::{admitted_ref, StoredEntry};
use crate::pass_report::log_done;
use crate::ports::{CorePorts, Embedder, PassKind};

/// Model calls a pass has in flight at once, as a write does (Bedrock throttles bursts per
/// account; a fan-out runs many passes side by side).
pub const EMBED_CONCURRENCY: usize = crate::writer::EMBED_CONCURRENCY;

/// Model calls one run makes at most: at ~100 ms a call and 8 at a time, a few seconds; a ref
/// with more missing vectors stays pending and the next run goes on.
pub const DEFAULT_MAX_ENTRIES: usize = 400;

/// No model call starts after this much of a run: far within memory-dream's 300 s timeout, also
/// when a batch of ten queued passes runs one after another.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(20);

/// One call never waits longer than this, retries included (the adapter retries throttling
/// within the invocation's retry budget, 8 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `entry` lacks a vector `model` made: what semantic search cannot compare.
pub fn lacks_vector(entry: &StoredEntry, model: &str) -> bool {
    !entry
        .embedding
        .as_ref()
        .is_some_and(|v| v.model == model && !v.vector.is_empty())
}

/// What one run did; counts and ids only.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbedReport {
    /// `complete` (nothing is missing any more), `partial` (something is, the ref stays
    /// pending) or `fenced` (a forget began during the run; the ref stays pending).
    pub status: &'static str,
    pub model: String,
    /// Live entries of the ref the fence admits.
    pub entries: usize,
    /// Of those, the ones without a vector of `model` when the run read them.
    pub missing: usize,
    /// Vectors this run stored.
    pub embedded: usize,
    /// Vectors computed but not stored: the entry was deleted, rewritten or given a vector by a
    /// concurrent run meanwhile.
    pub skipped: usize,
    /// Model calls that failed (after the adapter's retries) or timed out.
    pub failed: usize,
    /// Missing entries this run did not get to (its bound).
    pub deferred: usize,
    /// Whether the ref is still pending for an embed pass after this run.
    pub pending: bool,
    /// The tenant's Bedrock token quota refused a call (docs/quotas.md "Bedrock tokens"): the
    /// run started no call after it, and what it did not embed is deferred to a later run.
    #[serde(skip)]
    pub refused: Option<crate::quota::Refusal>,
}

/// Runs the embed pass over one ref (`run`).
#[derive(Clone)]
pub struct EmbedPass {
    ports: CorePorts,
    embedder: Arc<dyn Embedder>,
    max_entries: usize,
    budget: Duration,
}

impl EmbedPass {
    pub fn new(ports: CorePorts, embedder: Arc<dyn Embedder>) -> Self {
        EmbedPass {
            ports,
            embedder,
            max_entries: DEFAULT_MAX_ENTRIES,
            budget: DEFAULT_BUDGET,
        }
    }

    /// At most this many model calls per run (tests make it small to see a ref stay pending).
    pub fn max_entries(mut self, max: usize) -> Self {
        self.max_entries = max.max(1);
        self
    }

    /// No model call starts after this much of a run.
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    pub fn model(&self) -> &str {
        self.embedder.model()
    }

    /// When the run must stop starting calls: its budget, or the invocation's deadline less the
    /// time the remaining writes and the answer need.
    fn stop_at(&self) -> tokio::time::Instant {
        let start = tokio::time::Instant::now();
        let by_budget = start + self.budget;
        let Some(deadline_ms) = crate::deadline::invocation_deadline_ms() else {
            return by_budget;
        };
        let now_ms = self.ports.clock.now().as_millis();
        let left = u64::try_from(deadline_ms.saturating_sub(now_ms)).unwrap_or(0);
        let reserve = CALL_TIMEOUT + crate::deadline::ANSWER_MARGIN * 4;
        let by_deadline = start + Duration::from_millis(left).saturating_sub(reserve);
        by_budget.min(by_deadline)
    }

    /// Embeds what one ref is missing (the module doc says how it stays safe).
    pub async fn run(&self, tenant_id: &str, raw_ref: &str) -> Result<EmbedReport, CoreError> {
        let memory_ref = admitted_ref(tenant_id, raw_ref)?;
        let store = self.ports.store.as_ref();
        let model = self.embedder.model().to_owned();
        let state = begin_pass(store, &memory_ref, PassKind::Embed).await?;
        let fence = Fence::read(store, &memory_ref).await?;
        let now = self.ports.clock.now();
        let live: Vec<StoredEntry> = snapshot(store, &memory_ref, now)
            .await?
            .into_iter()
            .filter(|e| fence.admits(&e.entry.id))
            .collect();
        let mut missing: Vec<StoredEntry> = live
            .iter()
            .filter(|e| lacks_vector(e, &model))
            .cloned()
            .collect();
        let mut report = EmbedReport {
            model: model.clone(),
            entries: live.len(),
            missing: missing.len(),
            ..EmbedReport::default()
        };
        // Newest first (the snapshot's order) is what a search is most likely to need.
        let deferred = missing.split_off(missing.len().min(self.max_entries));
        report.deferred = deferred.len();
        let stop_at = self.stop_at();
        let mut queue = missing.into_iter();
        let mut calls = tokio::task::JoinSet::new();
        loop {
            while calls.len() < EMBED_CONCURRENCY
                && tokio::time::Instant::now() < stop_at
                && report.refused.is_none()
            {
                let Some(entry) = queue.next() else { break };
                let embedder = self.embedder.clone();
                // As the pass's tenant: its tokens are metered and charged to its quota.
                calls.spawn(crate::acting_tenant::carried(async move {
                    let vector =
                        tokio::time::timeout(CALL_TIMEOUT, embedder.embed(&entry.entry.content))
                            .await;
                    (entry, vector)
                }));
            }
            let Some(done) = calls.join_next().await else {
                break;
            };
            match done {
                Ok((entry, Ok(Ok(vector)))) if vector.model == model => {
                    if store.set_embedding(&entry, &vector).await? {
                        report.embedded += 1;
                    } else {
                        report.skipped += 1;
                    }
                }
                Ok((_, Ok(Err(crate::error::StoreError::QuotaExceeded(r))))) => {
                    report.deferred += 1;
                    // Not in the report's serialised form (the answer's shape): said here, once.
                    if report.refused.is_none() {
                        tracing::info!(quota = r.quota.name(), "embed pass stopped by a quota");
                    }
                    report.refused.get_or_insert(r);
                }
                Ok((entry, Ok(Ok(_)))) => {
                    report.failed += 1;
                    tracing::warn!(entry = %entry.entry.id, "embedder answered for another model");
                }
                Ok((entry, Ok(Err(e)))) => {
                    report.failed += 1;
                    tracing::warn!(entry = %entry.entry.id, error = %e, "embedding failed, left for the next run");
                }
                Ok((entry, Err(_))) => {
                    report.failed += 1;
                    tracing::warn!(entry = %entry.entry.id, "embedding timed out, left for the next run");
                }
                Err(_) => report.failed += 1,
            }
        }
        // Calls never started (the run's time ran out) are deferred like those past the bound.
        report.deferred += queue.len();
        let breached = fence.breached(store, &memory_ref).await?.is_some();
        let left = report.failed + report.deferred;
        report.status = if breached {
            "fenced"
        } else if left > 0 {
            "partial"
        } else {
            "complete"
        };
        report.pending = if left == 0 && !breached {
            // Ends the pass unless a write marked the ref again since `state` was read: that
            // write's entries may be missing too, and the ref stays pending for them. A ref
            // that was not pending (a late duplicate, an operator's run) has nothing to end.
            if state.pending {
                store
                    .finish_pass(&memory_ref, PassKind::Embed, state.version, None)
                    .await?;
            }
            store
                .marker_state(&memory_ref, PassKind::Embed)
                .await?
                .pending
        } else {
            if !state.pending {
                // An operator's backfill of a ref nothing had marked: the sweep goes on with it.
                store.mark_pending(&memory_ref, PassKind::Embed, now).await;
            }
            true
        };
        log_done("embed pass done", Some(memory_ref.tenant()), &report);
        Ok(report)
    }
}
