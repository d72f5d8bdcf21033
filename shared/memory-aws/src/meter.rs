//! What each AWS call consumed, reported to the invocation's meter (`memory_core::metering`;
//! docs/metering.md "What is measured"). Every DynamoDB call asks for
//! `ReturnConsumedCapacity::TOTAL` ([`TOTAL`]) and reports the units DynamoDB answered
//! ([`Consumed`]); S3, EventBridge and Bedrock calls report requests, bytes, entries and tokens at
//! their call sites. Nothing here decides anything: the adapter records what the service said.

use std::future::Future;

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{ConsumedCapacity, ReturnConsumedCapacity};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use memory_core::metering;

/// What every DynamoDB request asks for.
pub const TOTAL: ReturnConsumedCapacity = ReturnConsumedCapacity::Total;

/// Whether a call's units are read or write units when DynamoDB answers a plain total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Read,
    Write,
}

/// Reports one `ConsumedCapacity`: the read and write split where DynamoDB gives one (a
/// transaction), otherwise the total as the call's class.
pub fn report(capacity: &ConsumedCapacity, class: Class) {
    let (read, write) = (
        capacity.read_capacity_units(),
        capacity.write_capacity_units(),
    );
    if read.is_some() || write.is_some() {
        metering::read_units(read.unwrap_or(0.0));
        metering::write_units(write.unwrap_or(0.0));
        return;
    }
    let total = capacity.capacity_units().unwrap_or(0.0);
    match class {
        Class::Read => metering::read_units(total),
        Class::Write => metering::write_units(total),
    }
}

/// A DynamoDB output that carries consumed capacity.
pub trait Consumed {
    fn report(&self);
}

/// A DynamoDB request that asks for [`TOTAL`] and reports what its answer says it consumed:
/// the one way this crate (and the other DynamoDB adapters) send a DynamoDB call, so no call
/// goes unmetered. Retried as `retry::metered`, mapped to a `StoreError` as `dynamo::call`.
pub trait Metered: Clone + Send + Sync {
    type Output: Consumed;
    type Error: ProvideErrorMetadata;
    fn send_metered(
        self,
    ) -> impl Future<Output = Result<Self::Output, SdkError<Self::Error, HttpResponse>>> + Send;
}

/// `Consumed` and `Metered` for one operation; `$each` reports one capacity (`single`) or a
/// capacity per table (`many`).
macro_rules! operations {
    ($($module:ident :: ($builder:ident, $output:ident, $error:ident) => $class:expr, $each:ident;)*) => {$(
        impl Consumed for aws_sdk_dynamodb::operation::$module::$output {
            fn report(&self) {
                operations!(@$each self, $class);
            }
        }

        impl Metered for aws_sdk_dynamodb::operation::$module::builders::$builder {
            type Output = aws_sdk_dynamodb::operation::$module::$output;
            type Error = aws_sdk_dynamodb::operation::$module::$error;
            async fn send_metered(
                self,
            ) -> Result<Self::Output, SdkError<Self::Error, HttpResponse>> {
                self.return_consumed_capacity(TOTAL).send().await.map(metered)
            }
        }
    )*};
    (@single $out:ident, $class:expr) => {
        if let Some(c) = $out.consumed_capacity() {
            report(c, $class);
        }
    };
    (@many $out:ident, $class:expr) => {
        for c in $out.consumed_capacity() {
            report(c, $class);
        }
    };
}

operations! {
    get_item::(GetItemFluentBuilder, GetItemOutput, GetItemError) => Class::Read, single;
    query::(QueryFluentBuilder, QueryOutput, QueryError) => Class::Read, single;
    scan::(ScanFluentBuilder, ScanOutput, ScanError) => Class::Read, single;
    put_item::(PutItemFluentBuilder, PutItemOutput, PutItemError) => Class::Write, single;
    update_item::(UpdateItemFluentBuilder, UpdateItemOutput, UpdateItemError) => Class::Write, single;
    delete_item::(DeleteItemFluentBuilder, DeleteItemOutput, DeleteItemError) => Class::Write, single;
    batch_get_item::(BatchGetItemFluentBuilder, BatchGetItemOutput, BatchGetItemError) => Class::Read, many;
    transact_get_items::(TransactGetItemsFluentBuilder, TransactGetItemsOutput, TransactGetItemsError) => Class::Read, many;
    batch_write_item::(BatchWriteItemFluentBuilder, BatchWriteItemOutput, BatchWriteItemError) => Class::Write, many;
    transact_write_items::(TransactWriteItemsFluentBuilder, TransactWriteItemsOutput, TransactWriteItemsError) => Class::Write, many;
}

/// Reports what `out` consumed and hands it back: `metered(send().await?)`.
pub fn metered<T: Consumed>(out: T) -> T {
    out.report();
    out
}

/// One S3 attempt that S3 answered (a success or an error answer, both billed requests):
/// `bytes_in` sent, and what `bytes_out` says a success returned. An attempt that never got
/// an answer (timeout, broken connection) is not counted.
pub fn s3_answered<T, E, R>(
    result: &Result<T, SdkError<E, R>>,
    bytes_in: u64,
    bytes_out: impl Fn(&T) -> u64,
) {
    match result {
        Ok(out) => metering::s3(bytes_in, bytes_out(out)),
        Err(SdkError::ServiceError(_)) => metering::s3(bytes_in, 0),
        Err(_) => {}
    }
}

/// An S3 request without a body whose answers are counted ([`s3_answered`]): a get's
/// `Content-Length` is what it returned, every other answer returns nothing counted. The
/// requests that send a body (puts, parts) count their bytes at their call sites.
#[cfg(feature = "archive")]
pub trait Counted: Clone + Send + Sync {
    type Output;
    type Error: ProvideErrorMetadata;
    fn send_counted(
        self,
    ) -> impl Future<Output = Result<Self::Output, SdkError<Self::Error, HttpResponse>>> + Send;
}

#[cfg(feature = "archive")]
macro_rules! counted {
    ($($module:ident :: ($builder:ident, $output:ident, $error:ident) => $bytes_out:expr;)*) => {$(
        impl Counted for aws_sdk_s3::operation::$module::builders::$builder {
            type Output = aws_sdk_s3::operation::$module::$output;
            type Error = aws_sdk_s3::operation::$module::$error;
            async fn send_counted(
                self,
            ) -> Result<Self::Output, SdkError<Self::Error, HttpResponse>> {
                let result = self.send().await;
                s3_answered(&result, 0, $bytes_out);
                result
            }
        }
    )*};
}

#[cfg(feature = "archive")]
counted! {
    get_object::(GetObjectFluentBuilder, GetObjectOutput, GetObjectError) => |o| length(o.content_length());
    head_object::(HeadObjectFluentBuilder, HeadObjectOutput, HeadObjectError) => |_| 0;
    list_objects_v2::(ListObjectsV2FluentBuilder, ListObjectsV2Output, ListObjectsV2Error) => |_| 0;
    list_object_versions::(ListObjectVersionsFluentBuilder, ListObjectVersionsOutput, ListObjectVersionsError) => |_| 0;
    delete_object::(DeleteObjectFluentBuilder, DeleteObjectOutput, DeleteObjectError) => |_| 0;
    create_multipart_upload::(CreateMultipartUploadFluentBuilder, CreateMultipartUploadOutput, CreateMultipartUploadError) => |_| 0;
    complete_multipart_upload::(CompleteMultipartUploadFluentBuilder, CompleteMultipartUploadOutput, CompleteMultipartUploadError) => |_| 0;
    abort_multipart_upload::(AbortMultipartUploadFluentBuilder, AbortMultipartUploadOutput, AbortMultipartUploadError) => |_| 0;
}

/// The byte count S3 stated, never negative.
pub fn length(bytes: Option<i64>) -> u64 {
    bytes.and_then(|b| u64::try_from(b).ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::acting_tenant::acting_for;
    use memory_core::metering::{metered as scope, Meter};

    #[tokio::test]
    async fn a_total_goes_by_class_and_a_split_as_given() {
        let meter = Meter::new();
        scope(
            &meter,
            acting_for(Some("t"), async {
                report(
                    &ConsumedCapacity::builder().capacity_units(1.5).build(),
                    Class::Read,
                );
                report(
                    &ConsumedCapacity::builder().capacity_units(2.0).build(),
                    Class::Write,
                );
                report(
                    &ConsumedCapacity::builder()
                        .capacity_units(6.0)
                        .read_capacity_units(2.0)
                        .write_capacity_units(4.0)
                        .build(),
                    Class::Write,
                );
            }),
        )
        .await;
        let taken = meter.take();
        assert_eq!(taken.len(), 1);
        assert_eq!((taken[0].1.read_units, taken[0].1.write_units), (3.5, 6.0));
    }
}
