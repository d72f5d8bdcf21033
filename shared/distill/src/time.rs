//! Instant formatting for the wire shapes — design notes §"Wire shapes" (timestamps are RFC 3339
//! UTC with milliseconds).
//!
//! Pure integer calendar arithmetic (proleptic Gregorian, H. Hinnant's `civil_from_days`), so the
//! crate needs no clock or date library and every rendering is a function of its argument only.
//! Instants are Unix milliseconds; years outside 0..=9999 are formatted but not parsed back.

const MS_PER_DAY: i64 = 86_400_000;

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// `YYYY-MM-DD` of the UTC day containing `ms`.
pub(crate) fn format_date(ms: i64) -> String {
    let (y, m, d) = civil_from_days(ms.div_euclid(MS_PER_DAY));
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn format_rfc3339_ms(ms: i64) -> String {
    let (y, m, d) = civil_from_days(ms.div_euclid(MS_PER_DAY));
    let in_day = ms.rem_euclid(MS_PER_DAY);
    let (h, rest) = (in_day / 3_600_000, in_day % 3_600_000);
    let (min, rest) = (rest / 60_000, rest % 60_000);
    let (s, milli) = (rest / 1_000, rest % 1_000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}Z")
}

fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses exactly the `YYYY-MM-DD` form [`format_date`] writes, as the day's first millisecond.
pub(crate) fn parse_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let year = digits(s.get(0..4)?)?;
    let month = u32::try_from(digits(s.get(5..7)?)?).ok()?;
    let day = u32::try_from(digits(s.get(8..10)?)?).ok()?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(year, month, day) * MS_PER_DAY)
}

/// Parses exactly the form [`format_rfc3339_ms`] writes (no offsets, no other precisions), so a
/// document that round-trips is byte-identical.
pub(crate) fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 24
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[23] != b'Z'
    {
        return None;
    }
    let day = parse_date(s.get(0..10)?)?;
    let h = digits(s.get(11..13)?)?;
    let min = digits(s.get(14..16)?)?;
    let sec = digits(s.get(17..19)?)?;
    let milli = digits(s.get(20..23)?)?;
    if h > 23 || min > 59 || sec > 59 {
        return None;
    }
    Some(day + h * 3_600_000 + min * 60_000 + sec * 1_000 + milli)
}

#[cfg(test)]
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
        ] {
            assert_eq!(parse_rfc3339_ms(s), None, "{s}");
        }
        assert_eq!(parse_date("2026-13-01"), None);
    }
}
