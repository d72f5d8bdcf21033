//! Plays the part of a Lambda SQS event source mapping: drains a pass queue and turns the
//! messages into the `{"Records": [...]}` event Lambda would deliver.

use std::time::Duration;

use aws_config::SdkConfig;
use aws_test_support::receive_and_delete;
use serde_json::{json, Value};

/// Receives every message currently in the queue (deleting them) as SQS event records.
pub async fn drain_as_records(sdk: &SdkConfig, queue_url: &str) -> Vec<Value> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let mut records = Vec::new();
    let mut empty_polls = 0;
    while empty_polls < 2 {
        let messages = receive_and_delete(&sqs, queue_url).await;
        if messages.is_empty() {
            empty_polls += 1;
            continue;
        }
        for m in &messages {
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
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    records
}
