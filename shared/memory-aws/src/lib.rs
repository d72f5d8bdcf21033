//! The AWS side of the hexagon: DynamoDB behind `EntryStore`, S3 behind `ArchiveStore`,
//! EventBridge behind `EventPublisher`. This crate is the only one that names AWS SDK types;
//! nothing here decides behaviour, it translates.

pub mod config;
pub mod dynamo;
pub mod error;
pub mod eventbridge;
pub mod retry;
pub mod s3;
pub mod sqs;

pub use config::{AwsPorts, Settings};
pub use dynamo::DynamoEntryStore;
pub use eventbridge::EventBridgePublisher;
pub use s3::S3ArchiveStore;
pub use sqs::SqsJobQueue;
