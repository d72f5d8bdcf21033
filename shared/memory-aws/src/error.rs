//! SDK errors become `StoreError` with the operation and the service's error code only: the
//! SDK's own `Display` can include request details, which must not reach logs or clients.

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use memory_core::StoreError;

pub fn backend<E>(op: &'static str, err: &SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata,
{
    let code = code_of(err);
    if crate::retry::is_retryable(err) {
        StoreError::Unavailable { op, code }
    } else {
        StoreError::Backend { op, code }
    }
}

/// The service's error code, or the kind of transport failure; never the SDK's `Display`.
pub fn code_of<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> String {
    match err {
        SdkError::ServiceError(service) => service.err().code().unwrap_or("Unknown").to_owned(),
        SdkError::TimeoutError(_) => "Timeout".to_owned(),
        SdkError::DispatchFailure(_) => "DispatchFailure".to_owned(),
        SdkError::ResponseError(_) => "ResponseError".to_owned(),
        SdkError::ConstructionFailure(_) => "ConstructionFailure".to_owned(),
        _ => "Unknown".to_owned(),
    }
}

/// The service error code, if the failure was a service answer.
pub fn service_code<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> Option<&str> {
    match err {
        SdkError::ServiceError(service) => service.err().code(),
        _ => None,
    }
}
