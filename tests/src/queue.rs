//! Plays the part of a Lambda SQS event source mapping: drains a pass queue and turns the
//! messages into the `{"Records": [...]}` event Lambda would deliver.

use std::time::Duration;

use aws_config::SdkConfig;
use serde_json::{json, Value};

/// Receives every message currently in the queue (deleting them) as SQS event records.
pub async fn drain_as_records(sdk: &SdkConfig, queue_url: &str) -> Vec<Value> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let mut records = Vec::new();
    let mut empty_polls = 0;
    while empty_polls < 2 {
        let out = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap_or_else(|e| panic!("receive: {e:?}"));
        if out.messages().is_empty() {
            empty_polls += 1;
            continue;
        }
        for m in out.messages() {
            records.push(json!({
                "messageId": m.message_id().unwrap_or_default(),
                "receiptHandle": m.receipt_handle().unwrap_or_default(),
                "body": m.body().unwrap_or_default(),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:local",
                "awsRegion": "us-east-1"
            }));
            if let Some(handle) = m.receipt_handle() {
                let _ = sqs
                    .delete_message()
                    .queue_url(queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    records
}
