//! Background consolidation (RFC 0068, `openwop-agent-memory.md` §"Background consolidation"):
//! reads one ref's live long-term entries as a snapshot, plans merges with the pure
//! `consolidation` crate, and executes each merge as one all-or-nothing store rewrite that puts
//! the merged entry and deletes the replaced ones only if they are unchanged since the snapshot.
//! An entry written or changed during the pass is therefore never lost: its merge conflicts,
//! is skipped, and the next pass sees it. Merged text goes through the redactor (SR-1
//! carry-forward) and the pass ends with a content-free `agent.memory.consolidated`.

use std::collections::HashMap;

use consolidation::{Entry, MergeKind, Semantic, Settings, DEFAULT_MIN_COSINE};
use sha2::{Digest, Sha256};

use memory_core::background::{
    announce_once, claim_job, complete_job, release_job, start_pass, Job,
};
use memory_core::derivation::with_source_digests;
use memory_core::error::{CoreError, StoreError};
use memory_core::events::DomainEvent;
use memory_core::forget::{forget_derived_entries, TOMBSTONE_TTL_SECONDS};
use memory_core::history::{history_copy, is_history};
use memory_core::model::{hex, MemoryEntry, StoredEntry, SubjectKey, Tier};
use memory_core::pass_report::log_done;
use memory_core::ports::{CorePorts, PassKind, QuotaStore};
use memory_core::time::Timestamp;
use memory_guard::Redactor;

/// A merge's tags are the union of its members'; past this many the rest are dropped, so a fact
/// corroborated by hundreds of entries does not grow its item toward DynamoDB's 400 KB.
pub const MAX_MERGED_TAGS: usize = 64;

/// Entries one merge replaces: its transaction holds the merged entry, a history copy of each
/// superseded entry, the deletes, the change record and four quota counters (docs/quotas.md
/// "Counters"), within DynamoDB's 100 items with headroom for provenance overflow items.
pub const MAX_REPLACED_WITH_HISTORY: usize = 46;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsolidationReport {
    pub input_count: usize,
    pub output_count: usize,
    pub merges_applied: usize,
    /// Merges skipped because an entry changed during the pass; the next pass retries them.
    pub merges_skipped: usize,
}

#[derive(Clone)]
pub struct Consolidator {
    ports: CorePorts,
    settings: Settings,
    /// The embedding model whose stored vectors feed the planner's embedding stage
    /// (`consolidation::semantic`); `None`: the deterministic stages only.
    embedding_model: Option<String>,
    /// Where the ref's quota counters are recounted after the pass (docs/quotas.md "Counters").
    quotas: Option<std::sync::Arc<dyn QuotaStore>>,
}

fn to_input(e: &StoredEntry) -> Entry {
    Entry {
        id: e.entry.id.clone(),
        content: e.entry.content.clone(),
        tags: e.entry.tags.clone(),
        created_at_ms: e.entry.created_at.as_millis(),
        expires_at_ms: e.entry.expires_at.map(Timestamp::as_millis),
        subject: e.subject.as_ref().map(|s| s.as_str().to_owned()),
        provenance: e.provenance.clone(),
    }
}

impl Consolidator {
    pub fn new(ports: CorePorts) -> Self {
        Consolidator {
            ports,
            settings: Settings {
                max_replaced_per_merge: MAX_REPLACED_WITH_HISTORY,
                ..Settings::default()
            },
            embedding_model: None,
            quotas: None,
        }
    }

    /// Recounts the ref's entries after each pass and repairs its quota counters: what TTL
    /// expiry removed silently and what an interrupted delete left counted.
    pub fn with_quotas(mut self, quotas: Option<std::sync::Arc<dyn QuotaStore>>) -> Self {
        self.quotas = quotas;
        self
    }

    /// The recount of one ref after a pass; a failure costs only the repair (the next pass
    /// tries again), never the pass.
    async fn recount(&self, memory_ref: &memory_guard::MemoryRef, now: Timestamp) {
        let Some(quotas) = &self.quotas else {
            return;
        };
        match memory_core::quota::recount(
            self.ports.store.as_ref(),
            quotas.as_ref(),
            memory_ref,
            now,
        )
        .await
        {
            Ok(Some(r)) => tracing::info!(
                tenant = %memory_ref.tenant(),
                seen_entries = r.seen.0,
                counted_entries = r.counted.0,
                "quota counters repaired"
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "quota counters not recounted"),
        }
    }

    /// Turns on the embedding stage for entries carrying vectors of `model`.
    pub fn with_embedding_model(mut self, model: Option<String>) -> Self {
        self.embedding_model = model;
        self
    }

    /// One pass over one ref. `redactor` carries the run's secrets when the pass was invoked
    /// with some; a scheduled pass has none and still keeps existing markers whole.
    pub async fn run(
        &self,
        tenant_id: &str,
        raw_ref: &str,
        redactor: &Redactor,
    ) -> Result<ConsolidationReport, CoreError> {
        let memory_ref = memory_core::model::admitted_ref(tenant_id, raw_ref)?;
        // Forget's fence (`forget.rs`): tombstoned entries are never merged.
        let pass = start_pass(
            &self.ports,
            &memory_ref,
            PassKind::Consolidate,
            Tier::LongTerm,
        )
        .await?;
        // Only queued work is a job: a ref that is not pending has nothing delivered twice, and a
        // pass over it stays free of writes.
        if !pass.state.pending {
            return self
                .run_job(&memory_ref, pass, redactor)
                .await
                .map(|(r, _)| r);
        }
        let job = match claim_job(
            &self.ports,
            &memory_ref,
            PassKind::Consolidate,
            pass.state.version,
            pass.now,
        )
        .await?
        {
            Job::Mine(claim) => claim,
            Job::Done(report) => {
                return serde_json::from_str(&report).map_err(|_| {
                    CoreError::Store(StoreError::Corrupt {
                        key: "a recorded consolidation report".into(),
                    })
                });
            }
            Job::Running => return Err(CoreError::IdempotencyInFlight),
        };
        let outcome = self.run_job(&memory_ref, pass, redactor).await;
        match &outcome {
            Ok((report, true)) => match serde_json::to_string(report) {
                Ok(recorded) => complete_job(&self.ports, job, recorded).await?,
                Err(_) => release_job(&self.ports, &job).await,
            },
            _ => release_job(&self.ports, &job).await,
        }
        outcome.map(|(report, _)| report)
    }

    /// The pass itself, once this delivery holds the job; `true` with the report when the job
    /// is done (nothing skipped, no forget fenced it), so later deliveries replay the report.
    async fn run_job(
        &self,
        memory_ref: &memory_guard::MemoryRef,
        pass: memory_core::background::PassStart,
        redactor: &Redactor,
    ) -> Result<(ConsolidationReport, bool), CoreError> {
        let memory_ref = memory_ref.clone();
        let corpus: Vec<StoredEntry> = pass
            .entries
            .into_iter()
            // History copies (`memory_core::history`) are what memory used to say: kept, never
            // merged again.
            .filter(|e| !is_history(&e.entry.tags))
            .collect();
        let inputs: Vec<Entry> = corpus.iter().map(to_input).collect();
        let vectors: Vec<Option<&[f32]>> = corpus
            .iter()
            .map(|e| {
                e.embedding
                    .as_ref()
                    .filter(|v| Some(&v.model) == self.embedding_model.as_ref())
                    .map(|v| v.vector.as_slice())
            })
            .collect();
        let semantic = Semantic {
            vectors: &vectors,
            min_cosine: DEFAULT_MIN_COSINE,
        };
        let plan = consolidation::plan_with(
            &inputs,
            &self.settings,
            self.embedding_model.as_ref().map(|_| &semantic),
        );
        drop(vectors);

        // What each id stands for right now: snapshot entries, then merged entries as they land.
        let mut known: HashMap<String, StoredEntry> = corpus
            .into_iter()
            .map(|e| (e.entry.id.clone(), e))
            .collect();
        let mut report = ConsolidationReport {
            input_count: plan.input_count,
            output_count: plan.input_count,
            ..Default::default()
        };
        let mut failed: Vec<String> = Vec::new();
        // Intermediate merged entries of a large group are not facts anyone wrote: no history.
        let merge_ids: std::collections::HashSet<String> =
            plan.merges.iter().map(|m| m.merged.id.clone()).collect();
        let mut applied: Vec<String> = Vec::new();
        for merge in &plan.merges {
            if merge.replaced.iter().any(|id| failed.contains(id)) {
                failed.push(merge.merged.id.clone());
                report.merges_skipped += 1;
                continue;
            }
            let Some(replaced) = merge
                .replaced
                .iter()
                .map(|id| known.get(id).cloned())
                .collect::<Option<Vec<StoredEntry>>>()
            else {
                failed.push(merge.merged.id.clone());
                report.merges_skipped += 1;
                continue;
            };
            let m = &merge.merged;
            let content = redactor.redact(&m.content).into_owned();
            // A merge that keeps one source's words keeps its vector too (semantic search);
            // rewritten text has none until it is written again.
            let embedding = replaced
                .iter()
                .find(|e| e.entry.content == content)
                .and_then(|e| e.embedding.clone());
            let merged = StoredEntry {
                memory_ref: memory_ref.clone(),
                entry: MemoryEntry {
                    id: m.id.clone(),
                    content,
                    tags: {
                        let mut tags = redactor.redact_tags(&m.tags);
                        tags.truncate(MAX_MERGED_TAGS);
                        tags
                    },
                    created_at: Timestamp::from_millis(m.created_at_ms),
                    expires_at: m.expires_at_ms.map(Timestamp::from_millis),
                },
                tier: Tier::LongTerm,
                subject: (m.subject.as_deref())
                    .and_then(|s| SubjectKey::from_stored(memory_ref.tenant(), s)),
                attribution: replaced
                    .iter()
                    .max_by_key(|e| (e.entry.created_at, e.entry.id.clone()))
                    .map(|e| e.attribution.clone())
                    .unwrap_or_default(),
                provenance: with_source_digests(m.provenance.clone(), &replaced),
                embedding,
            };
            // A superseded entry (its text is not the survivor's) is kept as history in the same
            // all-or-nothing rewrite.
            let mut puts = vec![merged.clone()];
            if merge.kind == MergeKind::Supersede {
                puts.extend(
                    replaced
                        .iter()
                        .filter(|e| e.entry.content != merged.entry.content)
                        .filter(|e| !merge_ids.contains(&e.entry.id))
                        .map(|e| history_copy(e, &merged.entry.id)),
                );
            }
            let outcome = match self.ports.store.replace(&puts, &replaced).await {
                // Another delivery of this pass (same snapshot, same plan, same merged id)
                // applied this very merge first: it is done, and counted as done, so both
                // deliveries describe the same outcome and announce it once.
                Err(StoreError::Conflict { .. })
                    if self.applied_by_peer(&merged, &replaced).await? =>
                {
                    Ok(())
                }
                other => other,
            };
            match outcome {
                Ok(()) => {
                    report.merges_applied += 1;
                    applied.push(merge.merged.id.clone());
                    report.output_count = report.output_count + 1 - replaced.len();
                    for id in &merge.replaced {
                        known.remove(id);
                    }
                    known.insert(merged.entry.id.clone(), merged);
                }
                // A write raced this merge, or the store stayed busy through the adapter's
                // retries: skip this one merge (its members are untouched, all or nothing) and
                // leave the pass pending for the next one, rather than abandon the others. A
                // merge whose outcome is unknown is left the same way: the next pass reads
                // whether it applied.
                Err(
                    StoreError::Conflict { .. }
                    | StoreError::Unavailable { .. }
                    | StoreError::OutcomeUnknown { .. },
                ) => {
                    failed.push(merge.merged.id.clone());
                    report.merges_skipped += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
        // A forget began during the pass: what was merged from a forgotten entry goes (the
        // merged entry's provenance names it), and the pass stays pending.
        if let Some(mut tombstoned) = pass
            .fence
            .breached(self.ports.store.as_ref(), &memory_ref)
            .await?
        {
            let until = pass
                .now
                .plus_millis(TOMBSTONE_TTL_SECONDS.saturating_mul(1000));
            let swept = forget_derived_entries(
                self.ports.store.as_ref(),
                &memory_ref,
                &mut tombstoned,
                until,
            )
            .await?;
            tracing::info!(
                tenant = %memory_ref.tenant(),
                deleted_entries = swept,
                "consolidation fenced by a concurrent forget"
            );
            report.merges_skipped += 1;
            return Ok((report, false));
        }
        // Whether this pass took the ref out of the pending index: of two duplicate passes
        // (at-least-once delivery) only one does, and only it announces a pass without merges.
        let finished = pass.state.pending
            && report.merges_skipped == 0
            && self
                .ports
                .store
                .finish_pass(&memory_ref, PassKind::Consolidate, pass.state.version, None)
                .await?;
        if report.merges_applied > 0 || finished {
            let event = DomainEvent::memory_consolidated(
                &memory_ref,
                report.input_count,
                report.output_count,
                pass.now,
                &pass_identity(pass.state.version, &applied),
            );
            // Once per outcome, however many deliveries reached it (`announce_once`).
            let counts = format!("{}/{}", report.input_count, report.output_count);
            match announce_once(
                &self.ports,
                memory_ref.tenant(),
                &counts,
                &[event],
                pass.now,
            )
            .await
            {
                Ok(()) | Err(CoreError::IdempotencyInFlight) => {}
                Err(e) => tracing::error!(error = %e, "agent.memory.consolidated not published"),
            }
        }
        log_done("consolidation pass", Some(memory_ref.tenant()), &report);
        self.recount(&memory_ref, pass.now).await;
        let done = report.merges_skipped == 0;
        Ok((report, done))
    }
}

impl Consolidator {
    /// Whether the merge that just conflicted is already in place: its merged entry stored and
    /// every entry it replaces gone (what a concurrent delivery of the same pass leaves).
    async fn applied_by_peer(
        &self,
        merged: &StoredEntry,
        replaced: &[StoredEntry],
    ) -> Result<bool, CoreError> {
        if self.ports.store.get(&merged.key()).await?.is_none() {
            return Ok(false);
        }
        let keys: Vec<_> = replaced
            .iter()
            .filter(|e| e.entry.id != merged.entry.id)
            .map(StoredEntry::key)
            .collect();
        Ok(self.ports.store.get_many(&keys).await?.is_empty())
    }
}

/// The identity of a pass's outcome: the marker version it read and the merged ids it applied.
/// Two deliveries of one queued pass that did the same thing share it; passes that did different
/// things (or ran over different writes) differ, whatever the clock said.
fn pass_identity(version: Option<u64>, applied: &[String]) -> String {
    let mut h = Sha256::new();
    h.update(version.unwrap_or(0).to_be_bytes());
    for id in applied {
        h.update(id.as_bytes());
        h.update([0]);
    }
    format!("v{}-{}", version.unwrap_or(0), hex(&h.finalize()[..8]))
}
