//! The DynamoDB commitment store against the emulator: the same contract the in-memory store
//! passes (`memory_testkit::commitment_suite!`).

use std::sync::Arc;

use aws_test_support::{emulator_config, required_env};

async fn commitments() -> Arc<dyn commitment_service::CommitmentStore> {
    let sdk = emulator_config().await;
    Arc::new(commitment_aws::DynamoCommitmentStore::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        required_env("MEMORY_TABLE"),
    ))
}

memory_testkit::commitment_suite!(commitments());
