//! `EventPublisher` on EventBridge: `PutEvents` takes at most 10 entries, and can accept some
//! entries of a call while rejecting others, so failed entries (and only those) are retried
//! with backoff. Events keep their deterministic `eventId` across retries for consumer dedupe.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use aws_sdk_eventbridge::Client;

use memory_core::events::{DomainEvent, EVENT_SOURCE};
use memory_core::ports::EventPublisher;
use memory_core::StoreError;

use crate::error::backend;

pub const MAX_EVENTS_PER_CALL: usize = 10;
const ATTEMPTS: u32 = 5;

#[derive(Clone, Debug)]
pub struct EventBridgePublisher {
    client: Client,
    bus: String,
}

impl EventBridgePublisher {
    pub fn new(client: Client, bus: String) -> Self {
        EventBridgePublisher { client, bus }
    }

    fn entry(&self, event: &DomainEvent) -> PutEventsRequestEntry {
        PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(EVENT_SOURCE)
            .detail_type(event.event_type.as_str())
            .detail(event.detail_json().to_string())
            .build()
    }

    async fn publish_chunk(&self, chunk: &[DomainEvent]) -> Result<(), StoreError> {
        const OP: &str = "publish";
        let mut pending: Vec<&DomainEvent> = chunk.iter().collect();
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
            }
            let out = match crate::retry::send(OP, || {
                self.client
                    .put_events()
                    .set_entries(Some(pending.iter().map(|e| self.entry(e)).collect()))
                    .send()
            })
            .await
            {
                Ok(out) => out,
                Err(e) => return Err(backend(OP, &e)),
            };
            let sent = pending.len() as u64;
            let failed = u64::try_from(out.failed_entry_count()).unwrap_or(0);
            // Entries the bus accepted are what EventBridge bills.
            memory_core::metering::events(sent.saturating_sub(failed));
            if failed == 0 {
                return Ok(());
            }
            // Result entries are positional: entry i answers request entry i.
            pending = pending
                .into_iter()
                .zip(out.entries())
                .filter(|(_, result)| result.error_code().is_some())
                .map(|(event, _)| event)
                .collect();
            tracing::warn!(
                failed = pending.len(),
                attempt,
                "put_events partially failed"
            );
            if pending.is_empty() {
                return Ok(());
            }
        }
        Err(StoreError::Backend {
            op: OP,
            code: format!("{} events failed after {ATTEMPTS} attempts", pending.len()),
        })
    }
}

#[async_trait]
impl EventPublisher for EventBridgePublisher {
    async fn publish(&self, events: &[DomainEvent]) -> Result<(), StoreError> {
        for chunk in events.chunks(MAX_EVENTS_PER_CALL) {
            self.publish_chunk(chunk).await?;
        }
        Ok(())
    }
}
