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
    distill_error, index_json_object, object_key, swap_index, write_markdown, DerivedForgetHook,
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
}

#[derive(Clone)]
pub struct Dreamer {
    ports: CorePorts,
    archives: Arc<dyn ArchiveStore>,
    distiller: Arc<dyn Distiller + Send + Sync>,
    settle_ms: i64,
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

    /// Clamps a requested budget to the advertised maximum; absent means the maximum.
    pub fn budget(requested: Option<u64>) -> u32 {
        requested.map_or(MAX_TOKEN_BUDGET, |b| {
            u32::try_from(b.min(u64::from(MAX_TOKEN_BUDGET))).unwrap_or(MAX_TOKEN_BUDGET)
        })
    }

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
        // Entries younger than the settle time may still have writes in flight with an earlier
        // createdAt; they wait for the next run, and the ref stays pending for it.
        let cutoff = now.plus_millis(-self.settle_ms);
        let (snapshot, young): (Vec<StoredEntry>, Vec<StoredEntry>) = entries
            .into_iter()
            .filter(|e| state.watermark.is_none_or(|w| e.entry.created_at > w))
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
            if state.pending && young.is_empty() {
                self.ports
                    .store
                    .finish_pass(&memory_ref, PassKind::Dream, state.version, None)
                    .await?;
            }
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
                return Ok(report);
            }
            Err(e) => return Err(distill_error(e)),
        };
        let run_id = dream_run_id(&built.archive.digest);
        let archive_key = object_key(&tenant, &built.archive.key().map_err(distill_error)?)?;
        let bytes = built.archive.to_bytes();

        // 1. The archive: immutable, so a rerun finds it in place. A model's summary is not
        // byte-stable: a run that finds another run's archive there keeps that one's summary.
        let archive_created = self
            .archives
            .put_if_absent(ObjectPut::json(&archive_key, ObjectKind::Archive, bytes))
            .await?
            == PutOutcome::Created;
        let Built {
            archive,
            distillation,
            summary,
        } = match &self.abstractive {
            Some(a) if !archive_created => {
                crate::abstractive::adopt_stored(a, self.archives.as_ref(), &archive_key, built)
                    .await?
            }
            _ => built,
        };

        // 2. The long-term output entry.
        let output = StoredEntry {
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
                run_id: Some(run_id.clone()),
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
        };
        let entry_created = match self
            .ports
            .store
            .put_entries(std::slice::from_ref(&output))
            .await
        {
            Ok(()) => true,
            Err(StoreError::Conflict { .. }) => false,
            Err(e) => {
                self.undo(archive_created.then_some(&archive_key), None)
                    .await;
                return Err(e.into());
            }
        };

        // 3. The index.
        let line = IndexLine::from_archive(&archive).map_err(distill_error)?;
        let index_updated = match self.update_index(&tenant, &memory_ref, line, now).await {
            Ok(changed) => changed,
            Err(e) => {
                self.undo(
                    archive_created.then_some(&archive_key),
                    entry_created.then(|| output.key()),
                )
                .await;
                return Err(e);
            }
        };

        // The Markdown sibling: derived from the JSON; a failure leaves the durable artefacts in
        // place and the watermark unmoved, and the retry repairs it.
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

        // 4. Announce, once: a duplicate run of the same dream (SQS delivers at least once)
        // finds the announcement claimed; a failure here leaves durable artefacts and an
        // unmoved watermark, so the retry announces with the same event ids.
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

        // 5. Only now does the watermark move.
        move_watermark().await?;
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
            "dream"
        );
        Ok(report)
    }

    /// Best-effort removal of what a failed run created; a failure here is logged, and the
    /// retried run still converges because every step is idempotent.
    async fn undo(&self, archive: Option<&ObjectKey>, entry: Option<EntryKey>) {
        if let Some(key) = entry {
            if let Err(e) = self.ports.store.delete(&key).await {
                tracing::error!(error = %e, "could not remove the output entry of a failed dream");
            }
        }
        if let Some(key) = archive {
            if let Err(e) = self.archives.delete(key).await {
                tracing::error!(error = %e, "could not remove the archive of a failed dream");
            }
        }
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
