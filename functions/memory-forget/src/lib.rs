//! The forgetter with every hook that reaches derived data: dream output (archives, index
//! lines), commitments, the OpenIntent door's entries, versions and archives, the exchange
//! door's exported bundles, the Claude memory tool's files a subject contributed to (through
//! their path keys), and the refs' search index segments. Wired once
//! here, for this function and for memory-mcp's `memory_forget` tool, so the two doors that
//! forget can never reach different data.

use std::sync::Arc;

use commitment_aws::DynamoCommitmentStore;
use commitment_service::firing::CommitmentForgetHook;
use dream_service::DerivedForgetHook;
use intent_memory::forget::KeyedForgetHook;
use memory_aws::AwsPorts;
use memory_core::forget::Forgetter;
use memory_core::ports::SystemClock;
use memory_core::ref_index::IndexForgetHook;
use memory_tool::PathForgetHook;
use oap_exchange::forget::BundleForgetHook;

pub fn forgetter(ports: &AwsPorts) -> Forgetter {
    let clock = Arc::new(SystemClock);
    Forgetter::new(ports.core())
        .with_hook(Arc::new(DerivedForgetHook {
            store: ports.entries.clone(),
            archives: ports.archives.clone(),
            clock: clock.clone(),
        }))
        .with_hook(Arc::new(CommitmentForgetHook(Arc::new(
            DynamoCommitmentStore::from_ports(ports),
        ))))
        .with_hook(Arc::new(KeyedForgetHook {
            store: Arc::new(ports.keyed_store()),
            archives: ports.archives.clone(),
            clock: clock.clone(),
        }))
        .with_hook(Arc::new(BundleForgetHook {
            store: Arc::new(ports.exchange_store()),
            archives: ports.archives.clone(),
            clock: clock.clone(),
        }))
        .with_hook(Arc::new(PathForgetHook {
            paths: ports.entries.clone(),
        }))
        .with_hook(Arc::new(IndexForgetHook::new(
            ports.archives.clone(),
            clock,
        )))
}
