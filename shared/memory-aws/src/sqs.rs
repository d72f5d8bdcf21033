//! `PassQueue` on SQS: the fan-out's queued passes, ten per `SendMessageBatch`, retrying the
//! entries SQS reports as failed. Message bodies are ids only (tenant, memoryRef, kind).

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use aws_sdk_sqs::Client;

use memory_core::ports::{PassQueue, QueuedPass};
use memory_core::StoreError;

use crate::error::backend;

const ATTEMPTS: u32 = 5;

#[derive(Clone, Debug)]
pub struct SqsPassQueue {
    client: Client,
    queue_url: String,
}

impl SqsPassQueue {
    pub fn new(client: Client, queue_url: String) -> Self {
        SqsPassQueue { client, queue_url }
    }
}

#[async_trait]
impl PassQueue for SqsPassQueue {
    async fn enqueue(&self, passes: &[QueuedPass]) -> Result<(), StoreError> {
        const OP: &str = "enqueue";
        for chunk in passes.chunks(10) {
            let mut pending: Vec<(String, String)> = Vec::with_capacity(chunk.len());
            for (i, queued) in chunk.iter().enumerate() {
                let body = serde_json::to_string(queued).map_err(|_| StoreError::Backend {
                    op: OP,
                    code: "Encode".into(),
                })?;
                pending.push((i.to_string(), body));
            }
            for attempt in 0..ATTEMPTS {
                if attempt > 0 {
                    tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
                }
                let entries = pending
                    .iter()
                    .map(|(id, body)| {
                        SendMessageBatchRequestEntry::builder()
                            .id(id)
                            .message_body(body)
                            .build()
                            .map_err(|_| StoreError::Backend {
                                op: OP,
                                code: "BuildRequest".into(),
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let out = match crate::retry::send(OP, || {
                    self.client
                        .send_message_batch()
                        .queue_url(&self.queue_url)
                        .set_entries(Some(entries.clone()))
                        .send()
                })
                .await
                {
                    Ok(out) => out,
                    Err(e) => return Err(backend(OP, &e)),
                };
                let failed: Vec<&str> = out.failed().iter().map(|f| f.id()).collect();
                pending.retain(|(id, _)| failed.contains(&id.as_str()));
                if pending.is_empty() {
                    break;
                }
            }
            if !pending.is_empty() {
                return Err(StoreError::Backend {
                    op: OP,
                    code: format!(
                        "{} passes not queued after {ATTEMPTS} attempts",
                        pending.len()
                    ),
                });
            }
        }
        Ok(())
    }
}
