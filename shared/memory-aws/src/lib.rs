//! The AWS side of the hexagon: DynamoDB behind `EntryStore`, S3 behind `ArchiveStore` (feature
//! `archive`), EventBridge behind `EventPublisher` (`events`), SQS behind `PassQueue` (`queue`),
//! Bedrock behind `Embedder` (`embeddings`) and `AbstractiveModel` (`abstractive`), and the one
//! retry policy they share. Only adapter crates name AWS SDK types; nothing here decides behaviour,
//! it translates. Each function enables the features it runs.

#[cfg(any(feature = "embeddings", feature = "abstractive"))]
pub mod bedrock;
pub mod config;
pub mod dynamo;
pub mod error;
#[cfg(feature = "events")]
pub mod eventbridge;
#[cfg(feature = "exchange")]
pub mod exchange;
#[cfg(feature = "keyed")]
pub mod keyed;
pub mod meter;
pub mod retry;
#[cfg(feature = "archive")]
pub mod s3;
#[cfg(feature = "queue")]
pub mod sqs;
pub mod tenant;
pub mod usage;

pub use config::{https_client, AwsPorts, Settings};
pub use dynamo::DynamoEntryStore;
#[cfg(feature = "events")]
pub use eventbridge::EventBridgePublisher;
#[cfg(feature = "archive")]
pub use s3::S3ArchiveStore;
#[cfg(feature = "queue")]
pub use sqs::SqsPassQueue;
pub use tenant::{DynamoClients, TenantSessions};
