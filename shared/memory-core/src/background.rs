//! The fan-out half of the scheduled passes (RFC 0062 dreams, RFC 0068 consolidation): a
//! schedule wakes one invocation that reads the pending-pass index (one Query per shard; never a
//! table Scan) and queues one pass per ref, so ten thousand refs spread over Lambda concurrency
//! through the queue instead of running in one long invocation.

use crate::error::{CoreError, StoreError};
use crate::forget::Fence;
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
