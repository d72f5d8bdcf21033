//! Instant formatting for the wire shapes — docs/api.md "MemoryEntry" (timestamps are RFC 3339
//! UTC with milliseconds).
//!
//! Calendar maths is chrono's; this module only pins the one spelling the documents use and
//! accepts nothing else on the way back (a parse is checked by formatting it again), so a
//! document that round-trips is byte-identical. Instants are Unix milliseconds.

use chrono::{DateTime, SecondsFormat, Utc};

/// Instants come from a clock, never from input; chrono's range (about ±262,000 years) is
/// clamped rather than failed so that rendering stays total.
fn instant(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(if ms < 0 {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    })
}

/// `YYYY-MM-DD` of the UTC day containing `ms` (the date part of [`format_rfc3339_ms`]; chrono's
/// strftime machinery is left out of the binary on purpose).
#[cfg(feature = "distiller")]
pub(crate) fn format_date(ms: i64) -> String {
    let mut text = format_rfc3339_ms(ms);
    text.truncate(text.find('T').unwrap_or(text.len()));
    text
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn format_rfc3339_ms(ms: i64) -> String {
    instant(ms).to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses exactly the `YYYY-MM-DD` form [`format_date`] writes, as the day's first millisecond.
#[cfg(feature = "distiller")]
pub(crate) fn parse_date(s: &str) -> Option<i64> {
    let ms = parse_rfc3339_ms(&format!("{s}T00:00:00.000Z"))?;
    (format_date(ms) == s).then_some(ms)
}

/// Parses exactly the form [`format_rfc3339_ms`] writes (no offsets, no other precisions).
pub(crate) fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let ms = DateTime::parse_from_rfc3339(s).ok()?.timestamp_millis();
    (format_rfc3339_ms(ms) == s).then_some(ms)
}

#[cfg(all(test, feature = "distiller"))]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_rfc3339_ms(1_795_665_600_123),
            "2026-11-26T04:00:00.123Z"
        );
        assert_eq!(format_date(-1), "1969-12-31");
        assert_eq!(format_date(951_782_400_000), "2000-02-29");
    }

    #[test]
    fn round_trips() {
        for ms in [
            0,
            1,
            999,
            86_399_999,
            951_782_400_000,
            1_795_665_600_123,
            253_402_300_799_999,
        ] {
            assert_eq!(parse_rfc3339_ms(&format_rfc3339_ms(ms)), Some(ms));
        }
        assert_eq!(parse_date("2026-11-20"), Some(1_795_132_800_000));
    }

    #[test]
    fn rejects_other_spellings() {
        for s in [
            "2026-11-20T03:00:00Z",
            "2026-11-20T03:00:00.000+00:00",
            "2026-02-30T03:00:00.000Z",
            "2026-11-20t03:00:00.000Z",
            "2026-11-20T24:00:00.000Z",
            "+026-11-20T03:00:00.000Z",
            "2026-11-20T03:00:00.0000Z",
            "2026-11-20T23:59:60.000Z",
            " 2026-11-20T03:00:00.000Z",
        ] {
            assert_eq!(parse_rfc3339_ms(s), None, "{s}");
        }
        for s in ["2026-13-01", "2026-2-01", "+026-11-20", "2026-11-20 "] {
            assert_eq!(parse_date(s), None, "{s}");
        }
    }
}
