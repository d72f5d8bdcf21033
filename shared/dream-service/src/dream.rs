//! Scheduled distillation, "dreams" (RFC 0062, `openwop-agent-memory.md` §"Scheduled
//! distillation"; RFC 0012 for the event, provenance tag and SR-1 carry-forward).
//!
//! One run over one ref: read the transactional entries newer than the last finished dream as one
//! snapshot; distil them within the token budget with the pure `distill` crate; write the archive
//! (immutable, put-if-absent, named by the digest of sources + budget + distiller version, so a
//! rerun lands on the same key with the same bytes), the long-term output entry (deterministic id,
//! `compacted-from:<runId>`), and the MEMORY-INDEX (compare-and-swap on its ETag, retried, so
//! racing dreams lose no update); announce `memory.compacted` (and `workspace.updated` when the
//! index changed); and only then move the watermark. With an abstractive model configured
//! (`abstractive`), a model rewrites the distilled facts first; a rerun still lands on the same
//! key, and the summary stored first is the one kept.
//!
//! Every source of the snapshot is consumed by a run (`distill` rule step 2): archived, the
//! output entry's provenance, and passed by the watermark; the summary holds the best-ranked
//! facts that fit the budget, and the report says how many sources made it in.
//!
//! Atomicity: a budget below the floor is refused before the ref is even read
//! (`validation_error` on `tokenBudget`), and the budget rule is applied before anything is
//! written, so `token_budget_exceeded` leaves bucket, table and index as they were. If a later step fails, what this run created
//! is removed again before the error is returned, and the watermark has not moved, so the next
//! run (the queue retries the pass) starts from the same snapshot and converges.

use std::sync::Arc;

use distill::{DistillError, DistillInput, Distiller, IndexLine, SourceEntry};

use crate::abstractive::{Abstractive, Built};
use crate::derived::{
    distill_error, index_json_object, list_archives, object_key, swap_index, write_markdown,
    DerivedForgetHook,
};
use serde_json::json;

use memory_core::background::{announce_once, start_pass, PassStart};
use memory_core::error::{CoreError, StoreError};
use memory_core::events::{DomainEvent, EventType};
use memory_core::model::{Attribution, EntryKey, MemoryEntry, StoredEntry, Tier};
use memory_core::ports::{
    ArchiveStore, CorePorts, ObjectKey, ObjectKind, ObjectPut, PassKind, PutOutcome,
};
use memory_core::time::Timestamp;
use memory_guard::{MemoryRef, Redactor, TenantId};

pub use memory_core::capabilities::MAX_TOKEN_BUDGET;
/// `memory.compacted.sourceIds` is omitted past this many (RFC 0012 §B), `sourceCount` stays.
const MAX_EVENT_SOURCE_IDS: usize = 100;

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DreamReport {
    /// `distilled` or `nothing-to-distill`.
    pub status: &'static str,
    pub token_budget: u32,
    pub tokens_used: u32,
    pub input_count: usize,
    /// Sources the run consumed: all of the snapshot.
    pub source_count: usize,
    /// Sources at least one of whose facts is in the summary (the ones `tokensUsed` counts).
    pub sources_included: usize,
    /// Facts in the summary, and distinct facts found in the sources.
    pub facts_kept: u32,
    pub facts_found: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive_key: Option<String>,
    pub archive_created: bool,
    pub index_updated: bool,
    /// With an abstractive model configured (docs/dreams.md "Abstractive dreams (optional)"): the
    /// model whose summary the output entry holds, or why it holds the deterministic one (a
    /// `Fallback` code).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_fallback: Option<&'static str>,
    /// Orphan archives (no entry, no index line; any past run's) this pass removed.
    pub orphans_removed: usize,
}

#[derive(Clone)]
pub struct Dreamer {
    ports: CorePorts,
    archives: Arc<dyn ArchiveStore>,
    distiller: Arc<dyn Distiller + Send + Sync>,
    settle_ms: i64,
    orphan_grace_ms: i64,
    abstractive: Option<Abstractive>,
}

/// The deterministic run id of a distillation: the same inputs are the same run.
pub fn dream_run_id(digest: &str) -> String {
    format!("dream-{}", &digest[..digest.len().min(24)])
}

impl Dreamer {
    pub fn new(
        ports: CorePorts,
        archives: Arc<dyn ArchiveStore>,
        distiller: Arc<dyn Distiller + Send + Sync>,
    ) -> Self {
        Dreamer {
            ports,
            archives,
            distiller,
            settle_ms: 0,
            orphan_grace_ms: ORPHAN_GRACE_MILLIS,
            abstractive: None,
        }
    }

    /// A model rewrites the distiller's facts (docs/dreams.md "Abstractive dreams (optional)");
    /// `None`, the default, writes the deterministic summary only.
    pub fn with_abstractive(mut self, abstractive: Option<Abstractive>) -> Self {
        self.abstractive = abstractive;
        self
    }

    /// How old an entry must be to be distilled. A writer stamps `createdAt` before its
    /// transaction commits, so an entry may become visible after a younger one; without a
    /// settle time a run could move the watermark past it. Production uses the write
    /// function's timeout; tests use 0.
    pub fn with_settle_millis(mut self, settle_ms: i64) -> Self {
        self.settle_ms = settle_ms.max(0);
        self
    }

    /// How long an archive must have stood before the orphan sweep may remove it (default
    /// [`ORPHAN_GRACE_MILLIS`]); shorter only where no two runs of a ref overlap (tests).
    pub fn with_orphan_grace_millis(mut self, grace_ms: i64) -> Self {
        self.orphan_grace_ms = grace_ms.max(0);
        self
    }

    /// Clamps a requested budget to the advertised maximum; absent means the maximum.
    pub fn budget(requested: Option<u64>) -> u32 {
        requested.map_or(MAX_TOKEN_BUDGET, |b| {
            u32::try_from(b.min(u64::from(MAX_TOKEN_BUDGET))).unwrap_or(MAX_TOKEN_BUDGET)
        })
    }

    /// One dream over one ref, as a saga (docs/dreams.md "A dream, step by step"): the steps
    /// in order, each beside its compensation, so what a failure at any step leaves behind is
    /// said in one place ([`Saga`]):
    ///
    /// | step | does | if a later step fails |
    /// |---|---|---|
    /// | `recover` | finishes an earlier run that passed its pivot but not its watermark (announce once, watermark) | — |
    /// | `archive` | put-if-absent at the key named by the digest of the run's inputs; "already exists" is adopted: what is there is this very dream (its own write whose answer was lost, or a duplicate delivery's) | created: removed, every version; adopted: left to the orphan sweep, which removes it once no run can still be finishing it |
    /// | `entry` | the long-term output entry (deterministic id; "exists" is adopted the same way) | created: removed |
    /// | `index` | the archive's line in MEMORY-INDEX.json (compare-and-swap): the pivot, past it the run only goes forward | — |
    /// | `markdown`, `fence`, `announce`, `watermark` | the Markdown sibling; forget's fence; `memory.compacted` once; the watermark | a failure leaves the watermark unmoved: the retry reads the same snapshot, lands on the same digest, adopts and finishes |
    /// | `sweep` | removes archives no entry and no index line refer to (bounded, best effort) | — |
    pub async fn run(
        &self,
        tenant_id: &str,
        raw_ref: &str,
        token_budget: Option<u64>,
        redactor: &Redactor,
    ) -> Result<DreamReport, CoreError> {
        let memory_ref = memory_core::model::admitted_ref(tenant_id, raw_ref)?;
        let tenant = memory_ref.tenant().clone();
        let budget = Self::budget(token_budget);
        if budget < distill::MIN_TOKEN_BUDGET {
            return Err(distill_error(DistillError::BudgetBelowFloor {
                floor: distill::MIN_TOKEN_BUDGET,
                budget,
            }));
        }
        // Forget's fence (`forget.rs`): tombstoned entries never enter the snapshot.
        let PassStart {
            state,
            fence,
            now,
            entries,
        } = start_pass(
            &self.ports,
            &memory_ref,
            PassKind::Dream,
            Tier::Transactional,
        )
        .await?;
        // Step `recover`: an earlier run that passed its pivot and failed before its watermark
        // is finished first, so its sources are never distilled a second time.
        let recovered = self
            .finish_interrupted(&memory_ref, state.watermark, now)
            .await?;
        let base = recovered.as_ref().map(|(w, _)| *w).max(state.watermark);
        // Entries younger than the settle time may still have writes in flight with an earlier
        // createdAt; they wait for the next run, and the ref stays pending for it.
        let cutoff = now.plus_millis(-self.settle_ms);
        let (snapshot, young): (Vec<StoredEntry>, Vec<StoredEntry>) = entries
            .into_iter()
            .filter(|e| base.is_none_or(|w| e.entry.created_at > w))
            .partition(|e| e.entry.created_at <= cutoff);
        // A version no marker has: the watermark moves, the ref stays in the pending index.
        let finish_version = if young.is_empty() {
            state.version
        } else {
            Some(u64::MAX)
        };
        let mut report = DreamReport {
            status: "nothing-to-distill",
            token_budget: budget,
            input_count: snapshot.len(),
            ..Default::default()
        };
        let Some(watermark) = snapshot.iter().map(|e| e.entry.created_at).max() else {
            if let Some((watermark, finished)) = recovered {
                self.ports
                    .store
                    .finish_pass(
                        &memory_ref,
                        PassKind::Dream,
                        finish_version,
                        Some(watermark),
                    )
                    .await?;
                report = finished;
                report.token_budget = budget;
            } else if state.pending && young.is_empty() {
                self.ports
                    .store
                    .finish_pass(&memory_ref, PassKind::Dream, state.version, None)
                    .await?;
            }
            report.orphans_removed = self.sweep_orphans(&memory_ref, None, now).await;
            return Ok(report);
        };

        let move_watermark = || {
            self.ports.store.finish_pass(
                &memory_ref,
                PassKind::Dream,
                finish_version,
                Some(watermark),
            )
        };

        // SR-1: sources as the run's redactor sees them (a secret registered for this run is
        // redacted even if it slipped into an entry before), and the summary again afterwards.
        let input = DistillInput {
            sources: snapshot
                .iter()
                .map(|e| SourceEntry {
                    id: e.entry.id.clone(),
                    content: redactor.redact(&e.entry.content).into_owned(),
                    tags: redactor.redact_tags(&e.entry.tags),
                    created_at_ms: e.entry.created_at.as_millis(),
                })
                .collect(),
            token_budget: budget,
        };
        let built = match crate::abstractive::build_archive(
            self.abstractive.as_ref(),
            tenant.as_str(),
            &memory_ref.to_string(),
            &input,
            self.distiller.as_ref(),
            redactor,
        )
        .await
        {
            Ok(built) => built,
            Err(DistillError::NothingToDistill) => {
                move_watermark().await?;
                report.orphans_removed = self.sweep_orphans(&memory_ref, None, now).await;
                return Ok(report);
            }
            Err(e) => return Err(distill_error(e)),
        };
        let run_id = dream_run_id(&built.archive.digest);
        let archive_key = object_key(&tenant, &built.archive.key().map_err(distill_error)?)?;

        let mut saga = Saga::new(self);
        let (archive_created, built) = saga
            .step("archive", self.step_archive(&archive_key, built))
            .await?;
        saga.done(Undo::Archive {
            key: archive_key.clone(),
            created: archive_created,
        });
        let Built {
            archive,
            distillation,
            summary,
        } = built;
        let output = self.output_entry(&memory_ref, &archive, &run_id, &snapshot);
        // Registered before the step: a write whose outcome is unknown may have stored it.
        saga.done(Undo::Entry(output.key()));
        let entry_created = saga.step("entry", self.step_entry(&output)).await?;
        if !entry_created {
            // Adopted: another run of this dream stored it, and keeps it.
            saga.undo.pop();
        }
        let line = saga
            .step("index", async {
                IndexLine::from_archive(&archive).map_err(distill_error)
            })
            .await?;
        let index_updated = saga
            .step("index", self.update_index(&tenant, &memory_ref, line, now))
            .await?;
        // The pivot: from here on the run goes forward only; a failure leaves the watermark
        // unmoved and the retry finishes the same dream.
        saga.pivot();
        self.sync_markdown(&tenant, &memory_ref).await?;

        // After the last write: did a forget begin since the snapshot? Then this run removes
        // what it derived from a forgotten entry, announces nothing and leaves the watermark,
        // so the next run distils what is left.
        if let Some(tombstoned) = fence
            .breached(self.ports.store.as_ref(), &memory_ref)
            .await?
        {
            let swept = DerivedForgetHook {
                store: self.ports.store.clone(),
                archives: self.archives.clone(),
                clock: self.ports.clock.clone(),
            }
            .sweep(&memory_ref, &tombstoned, &archive, &archive_key)
            .await?;
            tracing::info!(
                tenant = %tenant,
                deleted_entries = swept.deleted_entries,
                deleted_archives = swept.deleted_archives,
                "dream fenced by a concurrent forget"
            );
            report.status = "fenced";
            return Ok(report);
        }

        // Announce, once: a duplicate run of the same dream (SQS delivers at least once) finds
        // the announcement claimed; a failure here leaves durable artefacts and an unmoved
        // watermark, so the retry announces with the same event ids.
        let mut events = vec![memory_compacted(
            &memory_ref,
            &archive,
            distillation.tokens_used,
            index_updated,
            now,
        )];
        if index_updated {
            events.push(workspace_updated(&memory_ref, &archive.digest, now));
        }
        announce_once(&self.ports, &tenant, &archive.digest, &events, now).await?;

        // Only now does the watermark move.
        move_watermark().await?;
        report.orphans_removed = self
            .sweep_orphans(&memory_ref, Some(&archive_key), now)
            .await;
        report.status = "distilled";
        report.tokens_used = distillation.tokens_used;
        report.source_count = archive.source_ids.len();
        report.sources_included = distillation.included_source_ids.len();
        report.facts_kept = distillation.facts_kept;
        report.facts_found = distillation.facts_found;
        report.output_id = Some(archive.output_entry_id.clone());
        report.archive_key = Some(archive_key.as_str().to_owned());
        report.archive_created = archive_created;
        report.index_updated = index_updated;
        (report.summary_model, report.summary_fallback) = match summary {
            None => (None, None),
            Some(Ok(model)) => (Some(model), None),
            Some(Err(reason)) => (None, Some(reason.code())),
        };
        tracing::info!(
            tenant = %tenant,
            sources = report.source_count,
            sources_included = report.sources_included,
            tokens_used = report.tokens_used,
            token_budget = budget,
            archive_created,
            index_updated,
            orphans_removed = report.orphans_removed,
            "dream"
        );
        Ok(report)
    }

    /// Step `recover`: finishes earlier runs of this ref that passed their pivot (their index
    /// line is written) but not their watermark: a line whose output is newer than the
    /// watermark is such a run, since a finished run moves the watermark to its newest source,
    /// the output's `createdAt`. Its announcement is made (once: a run that got that far finds
    /// it done) and the Markdown sibling synced; the watermark it answers, the newest such
    /// output's, is where this run's snapshot starts and what it moves to if it has nothing
    /// else to distil. Without this, a write between the failure and the retry would make the
    /// retry distil the same sources into a second archive.
    async fn finish_interrupted(
        &self,
        memory_ref: &MemoryRef,
        watermark: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Option<(Timestamp, DreamReport)>, CoreError> {
        let tenant = memory_ref.tenant();
        let reference = memory_ref.to_string();
        let Some(index) = self
            .archives
            .get(&index_json_object(tenant, &reference)?)
            .await?
        else {
            return Ok(None);
        };
        let index = distill::index::from_json_bytes(&index.body).map_err(distill_error)?;
        let mut unfinished: Vec<IndexLine> = index
            .entries
            .into_iter()
            .filter(|l| watermark.is_none_or(|w| l.created_at_ms > w.as_millis()))
            .collect();
        unfinished.sort_by_key(|l| l.created_at_ms);
        let mut finished = None;
        for line in unfinished {
            let key = object_key(tenant, &line.archive_key)?;
            // A line whose archive is gone is forget's or a sweep's business, not a run's.
            let Some(object) = self.archives.get(&key).await? else {
                continue;
            };
            let archive = distill::Archive::from_bytes(&object.body).map_err(distill_error)?;
            let events = vec![
                memory_compacted(memory_ref, &archive, archive.tokens_used, true, now),
                workspace_updated(memory_ref, &archive.digest, now),
            ];
            announce_once(&self.ports, tenant, &archive.digest, &events, now).await?;
            tracing::info!("dream finished an earlier run interrupted past its index line");
            let report = DreamReport {
                status: "distilled",
                tokens_used: archive.tokens_used,
                input_count: archive.source_ids.len(),
                source_count: archive.source_ids.len(),
                sources_included: usize::try_from(archive.sources_included).unwrap_or(0),
                output_id: Some(archive.output_entry_id.clone()),
                archive_key: Some(key.as_str().to_owned()),
                ..Default::default()
            };
            finished = Some((Timestamp::from_millis(line.created_at_ms), report));
        }
        if finished.is_some() {
            self.sync_markdown(tenant, memory_ref).await?;
        }
        Ok(finished)
    }

    /// Step `archive`: immutable, put-if-absent at the digest's key; `true` when this call
    /// created it. "Already exists" is this dream's own archive (the key is the digest of the
    /// inputs): an earlier attempt whose answer was lost, or a duplicate delivery. It is
    /// adopted, and the run finishes with it; a model's summary is not byte-stable, so the
    /// run then carries the summary stored first.
    async fn step_archive(
        &self,
        key: &ObjectKey,
        built: Built,
    ) -> Result<(bool, Built), CoreError> {
        let bytes = built.archive.to_bytes();
        let created = self
            .archives
            .put_if_absent(ObjectPut::json(key, ObjectKind::Archive, bytes))
            .await?
            == PutOutcome::Created;
        if !created {
            tracing::info!("dream adopts the archive already at its digest");
        }
        let built = match &self.abstractive {
            Some(a) if !created => {
                crate::abstractive::adopt_stored(a, self.archives.as_ref(), key, built).await?
            }
            _ => built,
        };
        Ok((created, built))
    }

    /// The long-term output entry of `archive`: deterministic id and content, so every run of
    /// the same dream builds the same entry.
    fn output_entry(
        &self,
        memory_ref: &MemoryRef,
        archive: &distill::Archive,
        run_id: &str,
        snapshot: &[StoredEntry],
    ) -> StoredEntry {
        StoredEntry {
            memory_ref: memory_ref.clone(),
            entry: MemoryEntry {
                id: archive.output_entry_id.clone(),
                content: archive.summary.clone(),
                tags: vec![format!("compacted-from:{run_id}")],
                created_at: Timestamp::from_millis(archive.output_created_at_ms),
                expires_at: None,
            },
            tier: Tier::LongTerm,
            subject: None,
            attribution: Attribution {
                run_id: Some(run_id.to_owned()),
                node_id: None,
                agent_id: None,
            },
            provenance: memory_core::derivation::with_source_digests(
                archive.source_ids.clone(),
                snapshot
                    .iter()
                    .filter(|e| archive.source_ids.binary_search(&e.entry.id).is_ok()),
            ),
            embedding: None,
        }
    }

    /// Step `entry`: `true` when this call stored it; an entry already under the id is this
    /// dream's (adopted, like the archive).
    async fn step_entry(&self, output: &StoredEntry) -> Result<bool, CoreError> {
        match self
            .ports
            .store
            .put_entries(std::slice::from_ref(output))
            .await
        {
            Ok(()) => Ok(true),
            Err(StoreError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Step `sweep`: removes the ref's orphan archives, ones that no index line names and
    /// whose output entry is gone (a run that failed after its archive, and whose compensation
    /// could not or would not remove it; or any past run's). Only archives last written at
    /// least [`ORPHAN_GRACE_MILLIS`] ago are touched, so a run still finishing its archive is
    /// never undercut, and at most [`MAX_ORPHANS_PER_PASS`] candidates are read per pass. Best
    /// effort: a failure is logged and the next pass sweeps again. Answers how many it removed.
    async fn sweep_orphans(
        &self,
        memory_ref: &MemoryRef,
        just_written: Option<&ObjectKey>,
        now: Timestamp,
    ) -> usize {
        match self.try_sweep_orphans(memory_ref, just_written, now).await {
            Ok(removed) => removed,
            Err(e) => {
                tracing::warn!(error = %e, "orphan sweep left for the next pass");
                0
            }
        }
    }

    async fn try_sweep_orphans(
        &self,
        memory_ref: &MemoryRef,
        just_written: Option<&ObjectKey>,
        now: Timestamp,
    ) -> Result<usize, CoreError> {
        let tenant = memory_ref.tenant();
        let reference = memory_ref.to_string();
        let listed: Vec<ObjectKey> = list_archives(self.archives.as_ref(), memory_ref)
            .await?
            .into_iter()
            .filter(|k| Some(k) != just_written)
            .collect();
        // The common case, one call: no archive but this run's.
        if listed.is_empty() {
            return Ok(0);
        }
        let indexed: std::collections::BTreeSet<String> = match self
            .archives
            .get(&index_json_object(tenant, &reference)?)
            .await?
        {
            Some(o) => distill::index::from_json_bytes(&o.body)
                .map_err(distill_error)?
                .entries
                .into_iter()
                .map(|line| line.archive_key)
                .collect(),
            None => Default::default(),
        };
        let candidates = listed
            .into_iter()
            .filter(|k| !indexed.contains(k.as_str()))
            .take(MAX_ORPHANS_PER_PASS);
        let mut removed = 0;
        for key in candidates {
            let Some(object) = self.archives.get(&key).await? else {
                continue;
            };
            let old_enough = object
                .modified_at
                .is_some_and(|at| at.plus_millis(self.orphan_grace_ms) <= now);
            if !old_enough {
                continue;
            }
            // An archive this version cannot read is not ours to judge.
            let Ok(archive) = distill::Archive::from_bytes(&object.body) else {
                continue;
            };
            let entry = EntryKey {
                memory_ref: memory_ref.clone(),
                id: archive.output_entry_id.clone(),
            };
            if self.ports.store.get(&entry).await?.is_some() {
                continue;
            }
            self.archives.delete(&key).await?;
            removed += 1;
        }
        if removed > 0 {
            tracing::info!(removed, "orphan archives removed");
        }
        Ok(removed)
    }

    /// Upserts the archive's line with compare-and-swap on the index's ETag; `true` when the
    /// index changed. The Markdown sibling is rewritten from the JSON that won.
    async fn update_index(
        &self,
        tenant: &TenantId,
        memory_ref: &MemoryRef,
        line: IndexLine,
        now: Timestamp,
    ) -> Result<bool, CoreError> {
        let reference = memory_ref.to_string();
        let json_key = index_json_object(tenant, &reference)?;
        let written = swap_index(
            self.archives.as_ref(),
            &json_key,
            "index update",
            |existing| {
                let (index, changed) =
                    distill::index::upsert(existing, &reference, line.clone(), now.as_millis())
                        .map_err(distill_error)?;
                Ok(changed.then_some(index))
            },
        )
        .await?;
        Ok(written.is_some())
    }

    /// Brings MEMORY-INDEX.md in line with the JSON as it now stands. Run after every index
    /// touch, changed or not, so a sibling a failed run left stale is repaired by the retry.
    async fn sync_markdown(
        &self,
        tenant: &TenantId,
        memory_ref: &MemoryRef,
    ) -> Result<(), CoreError> {
        let reference = memory_ref.to_string();
        let json_key = index_json_object(tenant, &reference)?;
        let Some(current) = self.archives.get(&json_key).await? else {
            return Ok(());
        };
        let index = distill::index::from_json_bytes(&current.body).map_err(distill_error)?;
        write_markdown(self.archives.as_ref(), tenant, &reference, &index).await
    }
}

/// How long an archive must have stood before the orphan sweep may remove it: longer than any
/// dream runs (memory-dream's timeout is 300 s), so no run can still be finishing it.
pub const ORPHAN_GRACE_MILLIS: i64 = 15 * 60 * 1000;

/// Candidates the orphan sweep reads per pass: its work is bounded whatever a ref holds.
pub const MAX_ORPHANS_PER_PASS: usize = 8;

/// What a dream step wrote that a failure of a later step takes back.
enum Undo {
    /// `created`: by this run, so removed (every version); adopted: left to the orphan sweep,
    /// since a duplicate delivery may be finishing it right now.
    Archive { key: ObjectKey, created: bool },
    /// The output entry, stored by this run.
    Entry(EntryKey),
}

/// The compensations of a dream's steps so far: a step that fails runs them, newest first,
/// before its error is returned. Past the pivot nothing is compensated: the retry finishes.
struct Saga<'a> {
    dreamer: &'a Dreamer,
    undo: Vec<Undo>,
}

impl<'a> Saga<'a> {
    fn new(dreamer: &'a Dreamer) -> Self {
        Saga {
            dreamer,
            undo: Vec::new(),
        }
    }

    fn done(&mut self, undo: Undo) {
        self.undo.push(undo);
    }

    fn pivot(&mut self) {
        self.undo.clear();
    }

    /// Runs one step; on failure, compensates everything before it.
    async fn step<T>(
        &mut self,
        name: &'static str,
        step: impl std::future::Future<Output = Result<T, CoreError>>,
    ) -> Result<T, CoreError> {
        match step.await {
            Ok(value) => Ok(value),
            Err(e) => {
                tracing::warn!(step = name, error = %e, "dream step failed; compensating");
                self.compensate().await;
                Err(e)
            }
        }
    }

    /// Best effort: a compensation that fails is logged, and the orphan sweep of a later pass
    /// removes what it left.
    async fn compensate(&mut self) {
        let d = self.dreamer;
        while let Some(undo) = self.undo.pop() {
            match undo {
                Undo::Entry(key) => {
                    if let Err(e) = d.ports.store.delete(&key).await {
                        tracing::error!(error = %e, "could not remove the output entry of a failed dream");
                    }
                }
                Undo::Archive { key, created: true } => {
                    if let Err(e) = d.archives.delete(&key).await {
                        tracing::error!(error = %e, "could not remove the archive of a failed dream; the orphan sweep will");
                    }
                }
                Undo::Archive { created: false, .. } => {
                    tracing::info!("adopted archive of a failed dream left to the orphan sweep");
                }
            }
        }
    }
}

// The dream's events, built from ids, counts and digests only.

/// RFC 0012 §B plus the RFC 0062 `distillation` sub-object. Content-free: ids and counts.
pub fn memory_compacted(
    memory_ref: &MemoryRef,
    archive: &distill::Archive,
    tokens_used: u32,
    index_updated: bool,
    at: Timestamp,
) -> DomainEvent {
    let mut detail = json!({
        "ts": at,
        "outputId": archive.output_entry_id,
        "sourceCount": archive.source_ids.len(),
        "trigger": "host-managed",
        "byteSize": archive.summary.len(),
        "distillation": {
            "tokenBudget": archive.token_budget,
            "tokensUsed": tokens_used,
            "indexUpdated": index_updated,
        },
    });
    if archive.source_ids.len() <= MAX_EVENT_SOURCE_IDS {
        detail["sourceIds"] = json!(archive.source_ids);
    }
    DomainEvent::for_ref(
        EventType::MemoryCompacted,
        memory_ref,
        format!("memory.compacted:{}", archive.digest),
        detail,
    )
}

/// RFC 0062 §5: the index is a workspace file; its change is a `workspace.updated`.
pub fn workspace_updated(memory_ref: &MemoryRef, digest: &str, at: Timestamp) -> DomainEvent {
    DomainEvent::for_ref(
        EventType::WorkspaceUpdated,
        memory_ref,
        format!("workspace.updated:{memory_ref}:{digest}"),
        json!({
            "agentId": memory_ref.agent().as_str(),
            "path": distill::keys::INDEX_JSON_NAME,
            "updatedAt": at,
        }),
    )
}
