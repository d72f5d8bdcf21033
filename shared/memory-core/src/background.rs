//! The fan-out half of the scheduled passes (RFC 0062 dreams, RFC 0068 consolidation): a
//! schedule wakes one invocation that reads the pending-pass index (one Query per shard; never a
//! table Scan) and queues one pass per ref, so ten thousand refs spread over Lambda concurrency
//! through the queue instead of running in one long invocation.

use crate::error::{CoreError, StoreError};
use crate::events::DomainEvent;
use crate::forget::Fence;
use crate::idempotency::{
    new_attempt, Claim, Completion, IdempotencyKey, KeyClaim, DEFAULT_KEY_TTL_SECONDS,
};
use crate::listing::snapshot;
use crate::model::{StoredEntry, Tier};
use crate::ports::{
    CorePorts, EntryStore, MarkerState, PassKind, PassQueue, QueuedPass, PENDING_SHARDS,
};
use crate::time::Timestamp;

/// The marker state a pass starts from. Only a pending ref needs the pass recorded as running
/// (`EntryStore::begin_pass`): writers skip the marker only while the ref is pending, so on a
/// ref that is not pending every write bumps the version anyway, and a pass over an unchanged
/// ref stays free of writes.
pub async fn begin_pass(
    store: &dyn EntryStore,
    memory_ref: &memory_guard::MemoryRef,
    kind: PassKind,
) -> Result<MarkerState, StoreError> {
    let state = store.marker_state(memory_ref, kind).await?;
    if state.pending {
        store.begin_pass(memory_ref, kind).await
    } else {
        Ok(state)
    }
}

/// What a background pass over one ref works from. Read in this order so that a pass never
/// takes in an entry a forget has tombstoned: the work state (`begin_pass`), forget's fence (a
/// pass checks it again before its last write), the clock, then the ref's live entries of the
/// pass's tier that the fence admits.
pub struct PassStart {
    pub state: MarkerState,
    pub fence: Fence,
    pub now: Timestamp,
    pub entries: Vec<StoredEntry>,
}

pub async fn start_pass(
    ports: &CorePorts,
    memory_ref: &memory_guard::MemoryRef,
    kind: PassKind,
    tier: Tier,
) -> Result<PassStart, StoreError> {
    let store = ports.store.as_ref();
    let state = begin_pass(store, memory_ref, kind).await?;
    let fence = Fence::read(store, memory_ref).await?;
    let now = ports.clock.now();
    let entries = snapshot(store, memory_ref, now)
        .await?
        .into_iter()
        .filter(|e| e.tier == tier && fence.admits(&e.entry.id))
        .collect();
    Ok(PassStart {
        state,
        fence,
        now,
        entries,
    })
}

/// Jobs go to the queue in chunks this size (SQS `SendMessageBatch` takes at most 10).
const ENQUEUE_CHUNK: usize = 10;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FanOutReport {
    pub shards: u8,
    pub queued: usize,
}

pub async fn fan_out(
    store: &dyn EntryStore,
    queue: &dyn PassQueue,
    kind: PassKind,
) -> Result<FanOutReport, CoreError> {
    let mut report = FanOutReport::default();
    for shard in 0..PENDING_SHARDS {
        let refs = store.pending_refs(kind, shard).await?;
        let passes: Vec<QueuedPass> = refs
            .iter()
            .map(|r| QueuedPass {
                kind,
                tenant_id: r.tenant().to_string(),
                memory_ref: r.to_string(),
            })
            .collect();
        for chunk in passes.chunks(ENQUEUE_CHUNK) {
            queue.enqueue(chunk).await?;
        }
        report.shards += 1;
        report.queued += passes.len();
    }
    tracing::info!(kind = kind.as_str(), queued = report.queued, "fan-out done");
    Ok(report)
}

/// How long an announcement's claim is presumed alive before another delivery may take it over.
pub const ANNOUNCE_LEASE_MILLIS: i64 = 30_000;

/// Publishes `events` unless a delivery of the same pass outcome already did (or is doing it
/// right now: then `IdempotencyInFlight`, and the pass is retried after the other's lease).
/// A pass's outcome is named by its first event's id, which each pass derives from what it did,
/// never from the clock: duplicate deliveries that did the same thing announce it once.
/// `payload` tells two outcomes under one name apart (a mismatch is announced again, never lost).
pub async fn announce_once(
    ports: &CorePorts,
    tenant: &memory_guard::TenantId,
    payload: &str,
    events: &[DomainEvent],
    now: Timestamp,
) -> Result<(), CoreError> {
    let Some(first) = events.first() else {
        return Ok(());
    };
    let key = IdempotencyKey::internal(tenant, "announce", &first.event_id);
    let claim = KeyClaim {
        key: key.clone(),
        payload: payload.to_owned(),
        attempt: new_attempt(),
        now,
        lease_until: now.plus_millis(ANNOUNCE_LEASE_MILLIS),
        expires_at: now.plus_millis(DEFAULT_KEY_TTL_SECONDS.saturating_mul(1000)),
    };
    match ports.store.claim_key(&claim).await? {
        Claim::Acquired { .. } => {
            if let Err(e) = ports.publisher.publish(events).await {
                // Give the claim back so the retry announces at once; if this fails too, the
                // retry waits for the lease.
                if let Err(release) = ports.store.release_key(&key, &claim.attempt).await {
                    tracing::warn!(error = %release, "announcement claim kept until its lease");
                }
                return Err(e.into());
            }
            ports
                .store
                .complete_key(&Completion {
                    key,
                    attempt: claim.attempt,
                    result: "published".into(),
                })
                .await?;
            Ok(())
        }
        Claim::Held(record) if record.result.is_some() => Ok(()),
        Claim::Held(_) => Err(CoreError::IdempotencyInFlight),
    }
}

/// How long a delivery that took a pass job owns it before another delivery may take over: a
/// background pass never runs longer than its function's timeout (at most 15 minutes).
pub const JOB_LEASE_MILLIS: i64 = 15 * 60 * 1000;

/// What a delivery of a pass job may do (`claim_job`).
pub enum Job {
    /// This delivery runs the job; it records the outcome (`complete`) or gives it back.
    Mine(KeyClaim),
    /// A delivery finished this job: its recorded report.
    Done(String),
    /// Another delivery is running it right now.
    Running,
}

/// Takes the job "pass `kind` over `memory_ref` at marker `version`": at-least-once delivery
/// brings the same queued pass twice, and two deliveries running at once would split its work
/// between them (each announcing its half). The marker version names the job: the writes it
/// covers are the same for every delivery that reads it.
pub async fn claim_job(
    ports: &CorePorts,
    memory_ref: &memory_guard::MemoryRef,
    kind: PassKind,
    version: Option<u64>,
    now: Timestamp,
) -> Result<Job, CoreError> {
    let name = format!(
        "{}#{}#{}",
        kind.as_str(),
        memory_ref,
        version.map_or_else(|| "-".to_owned(), |v| v.to_string())
    );
    let claim = KeyClaim {
        key: IdempotencyKey::internal(memory_ref.tenant(), "pass-job", &name),
        payload: name,
        attempt: new_attempt(),
        now,
        lease_until: now.plus_millis(JOB_LEASE_MILLIS),
        expires_at: now.plus_millis(DEFAULT_KEY_TTL_SECONDS.saturating_mul(1000)),
    };
    Ok(match ports.store.claim_key(&claim).await? {
        Claim::Acquired { .. } => Job::Mine(claim),
        Claim::Held(record) => match record.result {
            Some(report) => Job::Done(report),
            None => Job::Running,
        },
    })
}

/// Records a job's outcome, so later deliveries of it answer with `report` and do nothing.
pub async fn complete_job(
    ports: &CorePorts,
    claim: KeyClaim,
    report: String,
) -> Result<(), CoreError> {
    ports
        .store
        .complete_key(&Completion {
            key: claim.key,
            attempt: claim.attempt,
            result: report,
        })
        .await
        .map_err(Into::into)
}

/// Gives a job back unfinished (a merge was skipped, a forget fenced the pass): the next
/// delivery runs it again at once instead of waiting for the lease.
pub async fn release_job(ports: &CorePorts, claim: &KeyClaim) {
    if let Err(e) = ports.store.release_key(&claim.key, &claim.attempt).await {
        tracing::warn!(error = %e, "pass job kept until its lease");
    }
}
