//! Inferred commitments (RFC 0068, `openwop-agent-memory.md` §"Inferred commitments"): infer
//! standing intentions from entries as they are written (and by backfill), bind each to its
//! memoryRef and tenant, and fire each at most once per satisfied condition.
//!
//! Firing is a recorded transition with an outbox: the conditional write (on the stored
//! version) that moves a commitment to fired also records the instant and an outbox entry, so
//! of duplicate scheduler deliveries or concurrent invocations exactly one records the fire.
//! The event is published after the record; if the process dies in between, the outbox keeps
//! the commitment in the due index and the next tick (after the recorder's lease) publishes it.
//! Every `commitment.fired` carries a deterministic id (commitment id + instant), so the rare
//! second delivery of an event whose publisher died after publishing but before clearing the
//! outbox is deduplicated by consumers; the fire itself is recorded exactly once.

use std::collections::BTreeMap;
use std::sync::Arc;

use commitments::{Condition, State, TimeZoneSpec, Transition};

use crate::store::{CommitmentKey, CommitmentStore, Outbox, StoredCommitment, DUE_SHARDS};
use memory_core::acting_tenant::acting_for;
use memory_core::error::{CoreError, StoreError};
use memory_core::events::ForgetCounts;
use memory_core::forget::{Fence, ForgetHook, ForgetScope};
use memory_core::listing::snapshot;
use memory_core::model::{is_valid_entry_id, EntryKey};
use memory_core::pass_report::log_done;
use memory_core::ports::CorePorts;
use memory_core::time::Timestamp;
use memory_guard::{MemoryRef, TenantId};

/// How long a recorder owns a fire it has recorded but not yet announced.
pub const OUTBOX_LEASE_MS: i64 = 60_000;

/// Tenant time zones (IANA names), validated once at start-up.
#[derive(Clone, Debug, Default)]
pub struct ZoneConfig {
    default: Option<TimeZoneSpec>,
    tenants: BTreeMap<String, TimeZoneSpec>,
}

impl ZoneConfig {
    pub fn new(default: &str, tenants: &BTreeMap<String, String>) -> Result<Self, CoreError> {
        let parse = |z: &str| {
            TimeZoneSpec::parse(z).map_err(|_| CoreError::invalid("timeZone", "unknown IANA zone"))
        };
        Ok(ZoneConfig {
            default: if default.is_empty() {
                None
            } else {
                Some(parse(default)?)
            },
            tenants: tenants
                .iter()
                .map(|(t, z)| Ok((t.clone(), parse(z)?)))
                .collect::<Result<_, CoreError>>()?,
        })
    }

    fn zone(&self, tenant: &TenantId) -> TimeZoneSpec {
        self.tenants
            .get(tenant.as_str())
            .copied()
            .or(self.default)
            .unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitmentReport {
    pub inferred: usize,
    pub fired: usize,
    pub rearmed: usize,
    /// Outboxes of crashed recorders finished by this call.
    pub recovered: usize,
    /// Evaluations that lost a race to another invocation (which then fired).
    pub lost_races: usize,
    /// Due-index items read by a tick.
    pub due_items_read: u64,
}

#[derive(Clone)]
pub struct CommitmentService {
    /// `ports.store` holds the entries the commitments are inferred from.
    ports: CorePorts,
    commitments: Arc<dyn CommitmentStore>,
    zones: ZoneConfig,
    enqueue_runs: bool,
}

impl CommitmentService {
    pub fn new(
        ports: CorePorts,
        commitments: Arc<dyn CommitmentStore>,
        zones: ZoneConfig,
        enqueue_runs: bool,
    ) -> Self {
        CommitmentService {
            ports,
            commitments,
            zones,
            enqueue_runs,
        }
    }

    /// A `memory.written` event: infer from the new entry, then re-evaluate the ref's predicates.
    pub async fn on_written(
        &self,
        tenant_id: &str,
        raw_ref: &str,
        entry_id: &str,
    ) -> Result<CommitmentReport, CoreError> {
        let memory_ref = memory_core::model::admitted_ref(tenant_id, raw_ref)?;
        let mut report = CommitmentReport::default();
        let now = self.ports.clock.now();
        let mut observed_at = now;
        if is_valid_entry_id(entry_id) {
            let key = EntryKey {
                memory_ref: memory_ref.clone(),
                id: entry_id.to_owned(),
            };
            if let Some(stored) = self.ports.store.get(&key).await? {
                if stored.entry.is_live_at(now) {
                    observed_at = stored.entry.created_at;
                    report.inferred = self
                        .infer_and_store(&memory_ref, std::slice::from_ref(&stored))
                        .await?;
                }
            }
        }
        self.evaluate_predicates(&memory_ref, observed_at, &mut report)
            .await?;
        Ok(report)
    }

    /// Infers from every live entry of the ref (idempotent: ids are deterministic).
    pub async fn backfill(
        &self,
        tenant_id: &str,
        raw_ref: &str,
    ) -> Result<CommitmentReport, CoreError> {
        let memory_ref = memory_core::model::admitted_ref(tenant_id, raw_ref)?;
        let now = self.ports.clock.now();
        let entries = snapshot(self.ports.store.as_ref(), &memory_ref, now).await?;
        let mut report = CommitmentReport {
            inferred: self.infer_and_store(&memory_ref, &entries).await?,
            ..Default::default()
        };
        self.evaluate_predicates(&memory_ref, now, &mut report)
            .await?;
        Ok(report)
    }

    /// After inferring: if a forget began since `fence` was read, commitments of the ref
    /// inferred from a tombstoned entry are deleted (the forget may have looked before they
    /// were stored).
    async fn sweep_if_fenced(
        &self,
        fence: &Fence,
        memory_ref: &MemoryRef,
    ) -> Result<(), CoreError> {
        if let Some(tombstoned) = fence
            .breached(self.ports.store.as_ref(), memory_ref)
            .await?
        {
            let removed =
                delete_inferred_from(self.commitments.as_ref(), memory_ref, &tombstoned).await?;
            tracing::info!(
                removed,
                "commitment inference fenced by a concurrent forget"
            );
        }
        Ok(())
    }

    async fn infer_and_store(
        &self,
        memory_ref: &MemoryRef,
        entries: &[memory_core::model::StoredEntry],
    ) -> Result<usize, CoreError> {
        let zone = self.zones.zone(memory_ref.tenant());
        let tenant = memory_ref.tenant().as_str();
        let reference = memory_ref.to_string();
        let reference = reference.as_str();
        let mut found: Vec<StoredCommitment> = entries
            .iter()
            .flat_map(|e| {
                commitments::infer_in(&e.entry.content, e.entry.created_at.as_millis(), zone)
                    .into_iter()
                    .map(move |inferred| StoredCommitment {
                        commitment: commitments::Commitment::new(
                            tenant,
                            reference,
                            &e.entry.id,
                            &inferred,
                            e.entry.created_at.as_millis(),
                        ),
                        version: 1,
                        subject: e.subject.clone(),
                        outbox: None,
                    })
            })
            .collect();
        if found.is_empty() {
            return Ok(0);
        }
        // Forget's fence (`forget.rs`), paid only when there is something to store: nothing is
        // stored from a tombstoned entry, and what was stored while a forget began goes again.
        let fence = Fence::read(self.ports.store.as_ref(), memory_ref).await?;
        found.retain(|c| {
            c.commitment
                .source_entry_ids
                .iter()
                .all(|id| fence.admits(id))
        });
        let stored = self.commitments.put_new(&found).await?;
        self.sweep_if_fenced(&fence, memory_ref).await?;
        Ok(stored)
    }

    async fn evaluate_predicates(
        &self,
        memory_ref: &MemoryRef,
        observed_at: Timestamp,
        report: &mut CommitmentReport,
    ) -> Result<(), CoreError> {
        let watching: Vec<StoredCommitment> = self
            .commitments
            .for_ref(memory_ref)
            .await?
            .into_iter()
            .filter(|c| c.commitment.condition.tag().is_some())
            .filter(|c| matches!(c.commitment.state, State::Armed | State::Satisfied))
            .filter(|c| c.outbox.is_none())
            .collect();
        if watching.is_empty() {
            return Ok(());
        }
        let live = snapshot(
            self.ports.store.as_ref(),
            memory_ref,
            self.ports.clock.now(),
        )
        .await?;
        for c in watching {
            let Some(tag) = c.commitment.condition.tag() else {
                continue;
            };
            let holds = commitments::predicate_holds(
                tag,
                live.iter().map(|e| e.entry.tags.iter().map(String::as_str)),
            );
            match c.commitment.on_predicate(holds, observed_at.as_millis()) {
                t @ Transition::Fire { .. } => self.fire(c, t, report).await?,
                Transition::Rearm => {
                    let next = StoredCommitment {
                        commitment: c.commitment.apply(Transition::Rearm).map_err(corrupt)?,
                        version: c.version + 1,
                        ..c.clone()
                    };
                    match self.commitments.transition(c.version, &next).await {
                        Ok(()) => report.rearmed += 1,
                        Err(StoreError::Conflict { .. }) => report.lost_races += 1,
                        Err(e) => return Err(e.into()),
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The every-minute schedule: fire what is due, finish abandoned outboxes.
    pub async fn tick(&self) -> Result<CommitmentReport, CoreError> {
        let now = self.ports.clock.now();
        let mut report = CommitmentReport::default();
        // One failing commitment must not hold back the others: failures are counted, the rest
        // of the tick goes on, and the first failure is returned at the end (the schedule's
        // retry and the error alarm see it; the failed ones are simply due again next tick).
        let mut first_error: Option<CoreError> = None;
        for shard in 0..DUE_SHARDS {
            let due = match self.commitments.due(shard, now).await {
                Ok(due) => due,
                Err(e) => {
                    first_error.get_or_insert(e.into());
                    continue;
                }
            };
            report.due_items_read += due.items_read;
            for key in due.keys {
                // The due index is read on the function's role (a cross-tenant fan-out); each
                // commitment is then read and fired acting for its own tenant.
                let tenant = key.memory_ref.tenant().as_str().to_owned();
                let fired = acting_for(Some(&tenant), self.tick_one(&key, now, &mut report)).await;
                if let Err(e) = fired {
                    tracing::warn!(error = %e, commitment = %key.id, "commitment not fired this tick");
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        // A cross-tenant fan-out: no one tenant to name.
        log_done("commitment tick", None, &report);
        Ok(report)
    }

    async fn tick_one(
        &self,
        key: &crate::store::CommitmentKey,
        now: Timestamp,
        report: &mut CommitmentReport,
    ) -> Result<(), CoreError> {
        let Some(c) = self.commitments.get(key).await? else {
            return Ok(());
        };
        if let Some(outbox) = c.outbox {
            if now.as_millis() >= outbox.lease_until_ms {
                self.announce_and_clear(&c, outbox.instant_ms).await?;
                report.recovered += 1;
            }
            return Ok(());
        }
        let t = c.commitment.on_tick(now.as_millis());
        if matches!(t, Transition::Fire { .. }) {
            self.fire(c, t, report).await?;
        }
        Ok(())
    }

    /// Records the fire (the race is decided here), then announces it and clears the outbox.
    async fn fire(
        &self,
        c: StoredCommitment,
        t: Transition,
        report: &mut CommitmentReport,
    ) -> Result<(), CoreError> {
        let Transition::Fire { instant_ms } = t else {
            return Ok(());
        };
        let now = self.ports.clock.now().as_millis();
        let recorded = StoredCommitment {
            commitment: c.commitment.apply(t).map_err(corrupt)?,
            version: c.version + 1,
            subject: c.subject.clone(),
            outbox: Some(Outbox {
                instant_ms,
                lease_until_ms: now + OUTBOX_LEASE_MS,
            }),
        };
        match self.commitments.transition(c.version, &recorded).await {
            Ok(()) => {}
            Err(StoreError::Conflict { .. }) => {
                report.lost_races += 1;
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        }
        report.fired += 1;
        self.announce_and_clear(&recorded, instant_ms).await
    }

    async fn announce_and_clear(
        &self,
        c: &StoredCommitment,
        instant_ms: i64,
    ) -> Result<(), CoreError> {
        let memory_ref =
            MemoryRef::parse(&c.commitment.memory_ref).map_err(|_| StoreError::Corrupt {
                key: c.commitment.id.clone(),
            })?;
        let fired_at = self.ports.clock.now();
        let run_id = self.enqueue_runs.then(|| c.commitment.run_id(instant_ms));
        let mut events = vec![crate::events::commitment_fired(
            &memory_ref,
            &c.commitment,
            instant_ms,
            fired_at,
            run_id.as_deref(),
        )];
        if let Some(run_id) = &run_id {
            events.push(crate::events::run_requested(
                &memory_ref,
                &c.commitment.id,
                run_id,
            ));
        }
        self.ports.publisher.publish(&events).await?;
        let cleared = StoredCommitment {
            version: c.version + 1,
            outbox: None,
            ..c.clone()
        };
        match self.commitments.transition(c.version, &cleared).await {
            Ok(()) | Err(StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// A decision the record no longer allows means the record is not what the store says it is.
fn corrupt(_: commitments::CommitmentError) -> CoreError {
    CoreError::Store(StoreError::Corrupt {
        key: "commitment state".into(),
    })
}

/// Deletes the commitments of `memory_ref` inferred from any entry in `ids`; returns how many.
async fn delete_inferred_from(
    store: &dyn CommitmentStore,
    memory_ref: &MemoryRef,
    ids: &std::collections::BTreeSet<String>,
) -> Result<usize, CoreError> {
    let mut removed = 0;
    for c in store.for_ref(memory_ref).await? {
        if c.commitment
            .source_entry_ids
            .iter()
            .any(|id| ids.contains(id))
        {
            let key = CommitmentKey {
                memory_ref: memory_ref.clone(),
                id: c.commitment.id.clone(),
            };
            removed += usize::from(store.delete(&key).await?);
        }
    }
    Ok(removed)
}

/// Forget removes commitments inferred from the subject's entries: their predicate tags are the
/// user's words, so the records are deleted rather than kept as cancelled. They are found by
/// subject, and also by source entry in each affected ref (a strongly consistent read, which
/// the fence argument of `forget.rs` relies on; the subject index is eventually consistent).
pub struct CommitmentForgetHook(pub Arc<dyn CommitmentStore>);

#[async_trait::async_trait]
impl ForgetHook for CommitmentForgetHook {
    async fn forget(&self, scope: ForgetScope<'_>) -> Result<ForgetCounts, CoreError> {
        let (subject, forgotten) = (scope.subject, scope.forgotten);
        let tenant = subject.tenant();
        let mut counts = ForgetCounts::default();
        for key in self.0.find_by_subject(subject).await? {
            if key.memory_ref.tenant() == tenant && self.0.delete(&key).await? {
                counts.cancelled_commitments += 1;
            }
        }
        let mut by_ref: BTreeMap<MemoryRef, std::collections::BTreeSet<String>> = BTreeMap::new();
        for k in forgotten.iter().filter(|k| k.memory_ref.tenant() == tenant) {
            by_ref
                .entry(k.memory_ref.clone())
                .or_default()
                .insert(k.id.clone());
        }
        for (memory_ref, ids) in by_ref {
            counts.cancelled_commitments +=
                delete_inferred_from(self.0.as_ref(), &memory_ref, &ids).await?;
        }
        Ok(counts)
    }
}

/// The condition kind as published (`time` / `predicate`), never the predicate's words.
pub fn condition_kind(c: &Condition) -> &'static str {
    c.kind()
}
