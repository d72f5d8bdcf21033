//! Time expressions and their resolution to an instant (RFC 0068 time commitments, "relative to
//! the entry's createdAt and a tenant time zone"). The grammar is the rule table in
//! the crate README; each production below names the rule it implements.
//!
//! Resolution happens in the tenant zone on the local calendar, then maps the local wall-clock
//! time to an instant with the "compatible" disambiguation of RFC 5545, java.time and ECMAScript
//! Temporal: a time that occurs twice (autumn fold) takes the earlier occurrence; a time that
//! does not exist (spring gap) is pushed forward by the length of the gap (02:30 → 03:30).

use chrono::{
    DateTime, Datelike, Duration, LocalResult, Months, NaiveDate, NaiveDateTime, NaiveTime, Offset,
    TimeZone, Weekday,
};
use chrono_tz::Tz;

use super::lexer::COMMA;

/// Default wall-clock hour when only a day is named ("tomorrow", "next Monday", "on 2026-12-01").
pub const DEFAULT_HOUR: u32 = 9;
/// Default wall-clock hour for a bare "today" ("end of the working day": a 09:00 default would
/// already be past for most of the day).
pub const TODAY_HOUR: u32 = 17;

/// The day part of an expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DayRef {
    Today,
    Tomorrow,
    DayAfterTomorrow,
    /// `next: false` = "Monday", "on Monday", "this Monday": the first such day whose resolved
    /// instant is after createdAt (today counts). `next: true` = "next Monday": the first such
    /// day strictly after today's date.
    Weekday {
        wd: Weekday,
        next: bool,
    },
    NextWeek,
    NextMonth,
    /// `year: None` = the next occurrence after createdAt.
    Date {
        year: Option<i32>,
        month: u32,
        day: u32,
    },
    InDays(u32),
    InMonths(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeExpr {
    /// "in N minutes/hours": an exact duration, independent of the zone.
    After { minutes: u32 },
    /// A day, with an explicit (or part-of-day) time or the rule's default.
    Day {
        day: DayRef,
        time: Option<NaiveTime>,
    },
    /// "at 14:30" with no day: today, or tomorrow if already past.
    At { time: NaiveTime },
}

/// One expression found in a sentence: words `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub expr: TimeExpr,
    pub rule: &'static str,
    pub start: usize,
    pub end: usize,
}

/// Words that, right before an expression, make it refer to the past or to a span rather than
/// to a moment to act ("was on Monday", "since Monday", "until Friday", "last Monday").
const BLOCK_BEFORE: &[&str] = &[
    "last", "past", "previous", "since", "from", "until", "till", "before", "during", "between",
    "was", "were", "had", "happened", "occurred",
];
/// Words that, right after an expression, make it refer to the past ("at 9am yesterday").
const BLOCK_AFTER: &[&str] = &["ago", "yesterday", "earlier"];

/// Words that make a sentence recurring: a one-shot commitment would fire once and then go
/// silent, so recurrence is left to RFC 0052 schedules and no time commitment is inferred.
pub(crate) const RECURRENCE: &[&str] = &[
    "every",
    "everyday",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "annually",
    "mondays",
    "tuesdays",
    "wednesdays",
    "thursdays",
    "fridays",
    "saturdays",
    "sundays",
    "weekdays",
    "weekends",
];

fn word(w: &[String], i: usize) -> Option<&str> {
    w.get(i).map(String::as_str)
}

fn hm(h: u32, m: u32) -> Option<NaiveTime> {
    NaiveTime::from_hms_opt(h, m, 0)
}

/// A weekday's full name (`lexicon` `data/weekdays.tsv`); short forms are not read here.
fn weekday(s: &str) -> Option<Weekday> {
    match lexicon::weekday(s)? {
        (n, lexicon::Kind::Name) => Weekday::try_from(n - 1).ok(),
        _ => None,
    }
}

/// A month's name or short form, "may" included (`lexicon` `data/months.tsv`).
fn month(s: &str) -> Option<u32> {
    lexicon::month(s).map(|(n, _)| u32::from(n))
}

/// Part-of-day words and the time they stand for.
fn part_of_day(s: &str) -> Option<NaiveTime> {
    match s {
        "morning" => hm(9, 0),
        "noon" | "midday" | "lunchtime" => hm(12, 0),
        "afternoon" => hm(15, 0),
        "evening" => hm(18, 0),
        "night" | "tonight" => hm(20, 0),
        _ => None,
    }
}

/// "1" .. "9999", or a small number word; "a"/"an" count as one ("in an hour").
fn count(s: &str) -> Option<u32> {
    let n = match s {
        "a" | "an" | "one" => 1,
        "two" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        "eleven" => 11,
        "twelve" => 12,
        _ if (1..=4).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().ok()?
        }
        _ => return None,
    };
    (n > 0).then_some(n)
}

/// A day of the month: "1", "01", "1st", "2nd", "23rd", "30th".
fn day_of_month(s: &str) -> Option<u32> {
    let digits = ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|suffix| s.strip_suffix(suffix))
        .unwrap_or(s);
    if !(1..=2).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let d: u32 = digits.parse().ok()?;
    (1..=31).contains(&d).then_some(d)
}

fn year(s: &str) -> Option<i32> {
    if s.len() != 4 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let y: i32 = s.parse().ok()?;
    (1970..=9999).contains(&y).then_some(y)
}

/// `YYYY-MM-DD`, validated as a calendar date.
fn iso_date(s: &str) -> Option<(i32, u32, u32)> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let y = year(s.get(0..4)?)?;
    let m: u32 = s.get(5..7)?.parse().ok()?;
    let d: u32 = s.get(8..10)?.parse().ok()?;
    NaiveDate::from_ymd_opt(y, m, d).map(|_| (y, m, d))
}

/// A time of day: "9am", "9 am", "9:30am", "9:30 pm", "14:30", "noon". Returns the time and the
/// index after it. A bare hour ("at 9") is not a time: it is ambiguous between 09:00 and 21:00.
fn time_of_day(w: &[String], i: usize) -> Option<(NaiveTime, usize)> {
    let s = word(w, i)?;
    if matches!(s, "noon" | "midday") {
        return Some((hm(12, 0)?, i + 1));
    }
    // Split "9:30am" into "9:30" + "am"; otherwise look for a separate "am"/"pm" word.
    let (clock, meridiem, next) = if let Some(c) = s.strip_suffix("am") {
        (c, Some(false), i + 1)
    } else if let Some(c) = s.strip_suffix("pm") {
        (c, Some(true), i + 1)
    } else {
        match word(w, i + 1) {
            Some("am") => (s, Some(false), i + 2),
            Some("pm") => (s, Some(true), i + 2),
            _ => (s, None, i + 1),
        }
    };
    let (h, m) = match clock.split_once(':') {
        Some((h, m)) => {
            if m.len() != 2 || !m.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (h, m.parse::<u32>().ok()?)
        }
        None => (clock, 0),
    };
    if !(1..=2).contains(&h.len()) || !h.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let h: u32 = h.parse().ok()?;
    let h24 = match meridiem {
        Some(pm) if (1..=12).contains(&h) => (h % 12) + if pm { 12 } else { 0 },
        Some(_) => return None,
        // 24-hour form needs the minutes ("14:30", "09:00"): "at 9" stays ambiguous.
        None if clock.contains(':') && h <= 23 => h,
        None => return None,
    };
    Some((hm(h24, m)?, next))
}

/// An optional "at"/"around"/"by" followed by a time of day. Returns (time, end, had_preposition).
fn time_clause(w: &[String], i: usize) -> Option<(NaiveTime, usize, bool)> {
    if matches!(word(w, i)?, "at" | "around" | "by") {
        if let Some((t, end)) = time_of_day(w, i + 1) {
            return Some((t, end, true));
        }
        return None;
    }
    time_of_day(w, i).map(|(t, end)| (t, end, false))
}

/// "in N minutes|hours" (and "in half an hour").
fn in_duration(w: &[String], i: usize) -> Option<(u32, &'static str, usize)> {
    if word(w, i)? != "in" {
        return None;
    }
    if word(w, i + 1) == Some("half")
        && matches!(word(w, i + 2), Some("an" | "a"))
        && word(w, i + 3) == Some("hour")
    {
        return Some((30, "time.in_minutes", i + 4));
    }
    let n = count(word(w, i + 1)?)?;
    let (per, rule) = match word(w, i + 2)? {
        "minute" | "minutes" | "min" | "mins" => (1, "time.in_minutes"),
        "hour" | "hours" | "hr" | "hrs" => (60, "time.in_hours"),
        _ => return None,
    };
    Some((n.checked_mul(per)?, rule, i + 3))
}

/// A day reference, with an optional leading "on"/"by". Returns (day, rule, end, part-of-day).
fn day_ref(w: &[String], i: usize) -> Option<(DayRef, &'static str, usize, Option<NaiveTime>)> {
    let mut j = i;
    if matches!(word(w, j)?, "on" | "by") {
        j += 1;
    }
    let s = word(w, j)?;
    // Part of day following a day: "tomorrow morning", "monday evening".
    let part_after = |end: usize| match word(w, end).and_then(part_of_day) {
        Some(t) => (end + 1, Some(t)),
        None => (end, None),
    };
    match s {
        "today" => return Some((DayRef::Today, "time.today", j + 1, None)),
        "tonight" => return Some((DayRef::Today, "time.tonight", j + 1, part_of_day("tonight"))),
        "tomorrow" | "tmrw" => {
            let (end, part) = part_after(j + 1);
            return Some((DayRef::Tomorrow, "time.tomorrow", end, part));
        }
        "this" => {
            if let Some(t) = word(w, j + 1).and_then(part_of_day) {
                return Some((DayRef::Today, "time.today", j + 2, Some(t)));
            }
        }
        "the"
            if word(w, j + 1) == Some("day")
                && word(w, j + 2) == Some("after")
                && word(w, j + 3) == Some("tomorrow") =>
        {
            let (end, part) = part_after(j + 4);
            return Some((
                DayRef::DayAfterTomorrow,
                "time.day_after_tomorrow",
                end,
                part,
            ));
        }
        "next" => match word(w, j + 1)? {
            "week" => return Some((DayRef::NextWeek, "time.next_week", j + 2, None)),
            "month" => return Some((DayRef::NextMonth, "time.next_month", j + 2, None)),
            _ => {}
        },
        "in" => {
            let n = count(word(w, j + 1)?)?;
            let (day, rule) = match word(w, j + 2)? {
                "day" | "days" => (DayRef::InDays(n), "time.in_days"),
                "week" | "weeks" => (DayRef::InDays(n.checked_mul(7)?), "time.in_weeks"),
                "month" | "months" => (DayRef::InMonths(n), "time.in_months"),
                _ => return None,
            };
            let end = if word(w, j + 3) == Some("time") {
                j + 4
            } else {
                j + 3
            };
            return Some((day, rule, end, None));
        }
        _ => {}
    }
    // Weekdays: "[next|this|coming|this coming] monday [morning]".
    let (next, k) = match s {
        "next" => (true, j + 1),
        "this" if word(w, j + 1) == Some("coming") => (false, j + 2),
        "this" | "coming" => (false, j + 1),
        _ => (false, j),
    };
    if let Some(wd) = word(w, k).and_then(weekday) {
        let (end, part) = part_after(k + 1);
        let rule = if next {
            "time.next_weekday"
        } else {
            "time.weekday"
        };
        return Some((DayRef::Weekday { wd, next }, rule, end, part));
    }
    date(w, j).map(|(day, rule, end)| (day, rule, end, None))
}

/// ISO dates and named-month dates, with or without a year.
fn date(w: &[String], i: usize) -> Option<(DayRef, &'static str, usize)> {
    let s = word(w, i)?;
    if let Some((y, m, d)) = iso_date(s) {
        let day = DayRef::Date {
            year: Some(y),
            month: m,
            day: d,
        };
        return Some((day, "time.date_iso", i + 1));
    }
    // An optional trailing year: "december 1 2026", "december 1, 2026".
    let year_at = |k: usize| -> (Option<i32>, usize) {
        if let Some(y) = word(w, k).and_then(year) {
            return (Some(y), k + 1);
        }
        if word(w, k) == Some(COMMA) {
            if let Some(y) = word(w, k + 1).and_then(year) {
                return (Some(y), k + 2);
            }
        }
        (None, k)
    };
    let named = |y: Option<i32>, m: u32, d: u32, end: usize| {
        // Reject impossible days up front ("february 30"); Feb 29 is checked per year later.
        NaiveDate::from_ymd_opt(y.unwrap_or(2000), m, d)?;
        Some((
            DayRef::Date {
                year: y,
                month: m,
                day: d,
            },
            "time.date_named",
            end,
        ))
    };
    // "december 1st [2026]"
    if let Some(m) = month(s) {
        let d = day_of_month(word(w, i + 1)?)?;
        let (y, end) = year_at(i + 2);
        return named(y, m, d, end);
    }
    // "[the] 1st [of] december [2026]"
    let k = if s == "the" { i + 1 } else { i };
    let d = day_of_month(word(w, k)?)?;
    let k = if word(w, k + 1) == Some("of") {
        k + 2
    } else {
        k + 1
    };
    let m = month(word(w, k)?)?;
    let (y, end) = year_at(k + 1);
    named(y, m, d, end)
}

/// The longest expression starting at word `i`, if any.
fn parse_at(w: &[String], i: usize) -> Option<(TimeExpr, &'static str, usize)> {
    if let Some((minutes, rule, end)) = in_duration(w, i) {
        return Some((TimeExpr::After { minutes }, rule, end));
    }
    if let Some((day, rule, mut end, part)) = day_ref(w, i) {
        // An explicit time beats a part of day: "tonight at 9pm", "tomorrow morning at 10am".
        let mut time = part;
        if let Some((t, e, _)) = time_clause(w, end) {
            time = Some(t);
            end = e;
        }
        return Some((TimeExpr::Day { day, time }, rule, end));
    }
    let (t, end, had_prep) = time_clause(w, i)?;
    if let Some((day, rule, e, _)) = day_ref(w, end) {
        return Some((TimeExpr::Day { day, time: Some(t) }, rule, e));
    }
    // A lone time needs its preposition: "at 14:30", not a stray "9am" in a list.
    had_prep.then_some((TimeExpr::At { time: t }, "time.at", end))
}

/// Every expression in the sentence, left to right, non-overlapping (longest match at each
/// position), minus the ones whose context marks them as past or as a span.
pub(crate) fn scan(w: &[String]) -> Vec<Found> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < w.len() {
        match parse_at(w, i) {
            Some((expr, rule, end)) if end > i => {
                let blocked_before = i
                    .checked_sub(1)
                    .and_then(|p| word(w, p))
                    .is_some_and(|p| BLOCK_BEFORE.contains(&p));
                let blocked_after = word(w, end).is_some_and(|a| BLOCK_AFTER.contains(&a));
                if !blocked_before && !blocked_after {
                    found.push(Found {
                        expr,
                        rule,
                        start: i,
                        end,
                    });
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    found
}

/// Maps a local wall-clock time to epoch ms with the "compatible" disambiguation (module doc).
pub(crate) fn local_to_ms(tz: Tz, local: NaiveDateTime) -> Option<i64> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(dt) => Some(dt.timestamp_millis()),
        LocalResult::Ambiguous(earliest, _) => Some(earliest.timestamp_millis()),
        LocalResult::None => {
            // In a gap: read the wall time with the offset in force before the transition. Two
            // days back is before the gap and after any previous transition in every zone.
            let before = local.checked_sub_signed(Duration::days(2))?;
            let offset = tz.offset_from_utc_datetime(&before).fix().local_minus_utc();
            let utc = local.checked_sub_signed(Duration::seconds(i64::from(offset)))?;
            Some(utc.and_utc().timestamp_millis())
        }
    }
}

fn at(tz: Tz, date: NaiveDate, time: NaiveTime) -> Option<i64> {
    local_to_ms(tz, date.and_time(time))
}

fn add_days(date: NaiveDate, days: i64) -> Option<NaiveDate> {
    date.checked_add_signed(Duration::days(days))
}

/// Days from `from` forward to the next `to` (0 when equal).
fn days_until(from: Weekday, to: Weekday) -> i64 {
    i64::from((7 + to.num_days_from_monday() - from.num_days_from_monday()) % 7)
}

/// The instant an expression stands for, relative to `created` in its zone; `None` if it does
/// not exist or is not strictly after `created` (past instants never make a commitment).
pub(crate) fn resolve(expr: TimeExpr, created: DateTime<Tz>) -> Option<i64> {
    let tz = created.timezone();
    let created_ms = created.timestamp_millis();
    let today = created.date_naive();
    let now_local = created.time();
    let default = |hour: u32| hm(hour, 0);
    let due = match expr {
        TimeExpr::After { minutes } => created_ms.checked_add(i64::from(minutes) * 60_000)?,
        TimeExpr::At { time } => {
            let first = at(tz, today, time)?;
            if first > created_ms {
                first
            } else {
                at(tz, add_days(today, 1)?, time)?
            }
        }
        TimeExpr::Day { day, time } => match day {
            DayRef::Today => at(tz, today, time.or(default(TODAY_HOUR))?)?,
            DayRef::Tomorrow => at(tz, add_days(today, 1)?, time.or(default(DEFAULT_HOUR))?)?,
            DayRef::DayAfterTomorrow => {
                at(tz, add_days(today, 2)?, time.or(default(DEFAULT_HOUR))?)?
            }
            DayRef::Weekday { wd, next: true } => {
                let k = match days_until(today.weekday(), wd) {
                    0 => 7,
                    k => k,
                };
                at(tz, add_days(today, k)?, time.or(default(DEFAULT_HOUR))?)?
            }
            DayRef::Weekday { wd, next: false } => {
                let t = time.or(default(DEFAULT_HOUR))?;
                let k = days_until(today.weekday(), wd);
                let first = at(tz, add_days(today, k)?, t)?;
                if first > created_ms {
                    first
                } else {
                    at(tz, add_days(today, k + 7)?, t)?
                }
            }
            DayRef::NextWeek => {
                let k = match days_until(today.weekday(), Weekday::Mon) {
                    0 => 7,
                    k => k,
                };
                at(tz, add_days(today, k)?, time.or(default(DEFAULT_HOUR))?)?
            }
            DayRef::NextMonth => {
                let first = today.with_day(1)?.checked_add_months(Months::new(1))?;
                at(tz, first, time.or(default(DEFAULT_HOUR))?)?
            }
            DayRef::Date {
                year: Some(y),
                month,
                day,
            } => at(
                tz,
                NaiveDate::from_ymd_opt(y, month, day)?,
                time.or(default(DEFAULT_HOUR))?,
            )?,
            DayRef::Date {
                year: None,
                month,
                day,
            } => {
                let t = time.or(default(DEFAULT_HOUR))?;
                // The next occurrence; eight years covers any February 29.
                (today.year()..=today.year().checked_add(8)?)
                    .filter_map(|y| NaiveDate::from_ymd_opt(y, month, day))
                    .filter_map(|d| at(tz, d, t))
                    .find(|&ms| ms > created_ms)?
            }
            DayRef::InDays(n) => at(
                tz,
                add_days(today, i64::from(n))?,
                time.unwrap_or(now_local),
            )?,
            DayRef::InMonths(n) => at(
                tz,
                today.checked_add_months(Months::new(n))?,
                time.unwrap_or(now_local),
            )?,
        },
    };
    (due > created_ms).then_some(due)
}
