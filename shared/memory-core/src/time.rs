//! Instants on the wire: RFC 3339 UTC with exactly three fractional digits (the spec's
//! "millisecond floor"). Inside the core an instant is milliseconds since the Unix epoch, so
//! comparisons for TTL are integer comparisons and never depend on string formatting.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::CoreError;

/// 9999-12-31T23:59:59.999Z, the last instant with a four-digit year.
const MAX_WIRE_MILLIS: i64 = 253_402_300_799_999;

/// Milliseconds since the Unix epoch, UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// Parses RFC 3339 with any offset; sub-millisecond digits are floored, as the spec's
    /// millisecond granularity requires (a value never rounds up into the future).
    pub fn parse_rfc3339(s: &str) -> Result<Self, CoreError> {
        let parsed = DateTime::parse_from_rfc3339(s).map_err(|_| CoreError::InvalidTimestamp)?;
        let ms = parsed.with_timezone(&Utc).timestamp_millis();
        // The wire form has a four-digit UTC year; an offset must not push an instant outside it.
        if !(0..=MAX_WIRE_MILLIS).contains(&ms) {
            return Err(CoreError::InvalidTimestamp);
        }
        Ok(Timestamp(ms))
    }

    pub fn to_rfc3339(self) -> String {
        match DateTime::<Utc>::from_timestamp_millis(self.0) {
            Some(dt) => dt.to_rfc3339_opts(SecondsFormat::Millis, true),
            // Out of chrono's range (±262,000 years): clamp rather than panic on a read path.
            None => "9999-12-31T23:59:59.999Z".to_owned(),
        }
    }

    pub fn plus_millis(self, ms: i64) -> Self {
        Timestamp(self.0.saturating_add(ms))
    }

    /// Whole seconds, rounded up: the DynamoDB TTL attribute must never fire before `expiresAt`.
    pub fn epoch_seconds_ceil(self) -> i64 {
        self.0.div_euclid(1000) + i64::from(self.0.rem_euclid(1000) != 0)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse_rfc3339(&s)
            .map_err(|_| serde::de::Error::custom("timestamp must be RFC 3339"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_with_milliseconds() {
        let t = Timestamp::parse_rfc3339("2026-11-22T10:00:00.123456+01:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-22T09:00:00.123Z");
        assert_eq!(
            Timestamp::from_millis(0).to_rfc3339(),
            "1970-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn rejects_non_rfc3339() {
        for bad in [
            "",
            "2026-11-22",
            "tomorrow",
            "2026-11-22T10:00:00",
            "1700000000",
            "9999-12-31T23:59:59-01:00",
            "1969-12-31T23:59:59Z",
        ] {
            assert!(Timestamp::parse_rfc3339(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ttl_seconds_round_up() {
        assert_eq!(Timestamp::from_millis(1_000).epoch_seconds_ceil(), 1);
        assert_eq!(Timestamp::from_millis(1_001).epoch_seconds_ceil(), 2);
        assert_eq!(Timestamp::from_millis(999).epoch_seconds_ceil(), 1);
    }
}
