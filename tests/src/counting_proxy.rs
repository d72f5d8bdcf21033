//! `tests/fault/proxy.py` with no faults, in front of the emulator, as the independent side of
//! metering checks (docs/metering.md "Accuracy and overhead"): it sums the `ConsumedCapacity`
//! the emulator answered, the bytes of S3 requests and answers and the events accepted, leaving
//! out the meter's own calls (`GET /__fault/usage`). Stopped (by its pid) on drop.

use std::process::Stdio;

use aws_test_support::proxy::FaultProxy;
use serde_json::Value;

pub struct CountingProxy(FaultProxy);

impl CountingProxy {
    /// Starts the proxy in front of `upstream` (an `http://` URL).
    pub fn start(upstream: &str) -> CountingProxy {
        // One line per upstream failure or 5xx answer, never a body.
        CountingProxy(FaultProxy::start(
            &["--upstream", upstream],
            Stdio::inherit(),
        ))
    }

    /// What the function binaries set as `AWS_ENDPOINT_URL`.
    pub fn url(&self) -> String {
        self.0.url()
    }

    /// The sums since the start or the last [`reset`](Self::reset): `readUnits`, `writeUnits`,
    /// `s3Requests`, `s3BytesIn`, `s3BytesOut`, `events`, and the meter's own `meterReadUnits`,
    /// `meterWriteUnits`, `meterWrites`; with `billedWriteUnits` / `meterBilledWriteUnits`, what
    /// DynamoDB's pricing rules make of the written items' sizes.
    pub fn usage(&self) -> Value {
        self.0.control("GET", "usage", "")
    }

    pub fn reset(&self) {
        self.0.control("POST", "reset", "");
    }
}
