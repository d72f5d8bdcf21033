//! One spelling per value (docs/consolidation.md "What a pass does"; RFC 0068 "merge duplicates"):
//! after [`normalise`](crate::normalise) has tokenised a text, numbers, times, percentages, money,
//! temperatures, dates, frequencies, common abbreviations and American spellings are rewritten
//! to one notation, so "3 pm" / "15:00", "1,000" / "1000", "$5" / "5 dollars", "1 March 2026" /
//! "2026-03-01", "every three months" / "once a quarter" / "quarterly", "appt" / "appointment"
//! and "center" / "centre" are the same words. A simple-past passive with its agent at the end
//! is turned into the active voice ("X was paid by Y" = "Y paid X", see [`active_voice`]).
//! Every rule maps notations *of the same value* to one another and never rounds or picks
//! between two readings: a slash date ("01/03/2026") is day-first in some countries and
//! month-first in others, so it stays as written, and a bare hour ("at 10") is not given a half
//! of the day. Different values therefore stay different words, and the distinct-fact guard
//! keeps their entries apart as before.
//!
//! The abbreviation list is the project's own (written for this repo, Apache-2.0): expansions
//! that are unambiguous in notes about customers, people, offices and operations.

use std::borrow::Cow;

use lexicon::WordSet;

/// Every word that can make a rule change a text, besides some numbers (`lexicon`
/// `data/notation-triggers.txt` and the keys of the lists the rules read; a unit test keeps the
/// list and the rules in step).
const TRIGGERS: &[&str] = lexicon::NOTATION_TRIGGERS;

static TRIGGER_SET: WordSet = WordSet::new(TRIGGERS);

/// Words that only matter after a number ("3 pm", "3:00 p.m.", "15 percent", "5 dollars"); the
/// unit test that keeps [`TRIGGERS`] complete reads it.
#[cfg(test)]
const FOLLOWERS: &[&str] = &[
    "am",
    "day",
    "hour",
    "kilometre",
    "meter",
    "meters",
    "metre",
    "metres",
    "mile",
    "minute",
    "month",
    "week",
    "year",
    "cm",
    "degrees",
    "dollar",
    "dollars",
    "euro",
    "euros",
    "m",
    "millisecond",
    "milliseconds",
    "ms",
    "per",
    "percent",
    "pm",
];

/// Whether token `t` can make [`rewrite`] change a text: a trigger word, or a number not
/// already in its one notation (thousands separators, "k", an hour with a leading zero, an
/// ordinal day). A plain number ("4471", "9:00", "2026-03-01") changes only with a trigger
/// beside it, so most texts of a pass skip the rewrite.
pub(crate) fn needs_rewrite(t: &str) -> bool {
    let b = t.as_bytes();
    match b.first() {
        Some(d) if d.is_ascii_digit() => {
            t.contains(',')
                || t.ends_with('k')
                || (b[0] == b'0' && b.len() > 1 && b[1].is_ascii_digit() && t.contains(':'))
                || (!is_plain_number(t) && day(t).is_some())
        }
        Some(_) => TRIGGER_SET.contains(t),
        None => false,
    }
}

/// Whether a rule may start at token `t`: a number, or one of the [`TRIGGERS`].
pub(crate) fn may_start_rule(t: &str) -> bool {
    t.as_bytes().first().is_some_and(u8::is_ascii_digit) || TRIGGER_SET.contains(t)
}

/// Whether `norm` may hold anything [`rewrite`] changes (tests use it; a pass checks each token
/// with [`may_start_rule`] while tokenising).
#[cfg(test)]
pub(crate) fn may_rewrite(norm: &str) -> bool {
    norm.split(' ').any(may_start_rule)
}

/// The canonical token sequence of a normalised text (tokens joined by single spaces). A pass
/// runs this on most texts, so a token no rule touches is copied, never allocated.
pub(crate) fn rewrite(norm: &str) -> String {
    let words: Vec<&str> = norm
        .split(' ')
        .filter(|t| !t.is_empty())
        .map(|t| number_word(t).unwrap_or(t))
        .collect();
    let mut out = String::with_capacity(norm.len() + 16);
    let mut push = |token: &str| {
        if !token.is_empty() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(token);
        }
    };
    let mut i = 0;
    while i < words.len() {
        match rewritten_at(&words, i) {
            None => {
                push(words[i]);
                i += 1;
            }
            Some((tokens, used)) => {
                for t in &tokens {
                    push(t);
                }
                i += used.max(1);
            }
        }
    }
    let tokens: Vec<&str> = out.split(' ').collect();
    match active_voice(&tokens) {
        Some(active) => active.join(" "),
        None => out,
    }
}

/// The tokens that replace `words[i..i + used]`, or `None` when `words[i]` stays as it is.
fn rewritten_at(words: &[&str], i: usize) -> Option<(Vec<String>, usize)> {
    let w = |k: usize| words.get(i + k).copied();
    let one = |s: String| Some((vec![s], 1));
    let cur = words[i];
    if !may_start_rule(cur) {
        return None; // the common case: a word no rule is about
    }
    // Dates: ISO, "1 march 2026", "march 1st 2026", and the same without a year.
    if let Some(date) = date_at(words, i) {
        return Some(date);
    }
    // "#4471" is "4471": the sign only says that a number follows.
    if cur == "#" && w(1).is_some_and(is_plain_number) {
        return Some((Vec::new(), 1));
    }
    // "e-mail" tokenises as "e mail".
    if cur == "e" && w(1) == Some("mail") {
        return Some((vec!["email".to_owned()], 2));
    }
    if let Some(n) = number(cur) {
        // Times: "3 pm", "3:00 p.m.", "7:45 am", "15:00", "07:45".
        let meridiem = match (w(1), w(2)) {
            (Some("am"), _) => Some((false, 2)),
            (Some("pm"), _) => Some((true, 2)),
            (Some("a"), Some("m")) => Some((false, 3)),
            (Some("p"), Some("m")) => Some((true, 3)),
            _ => None,
        };
        if let Some((pm, used)) = meridiem {
            if let Some(time) = clock(&n, Some(pm)) {
                return Some((vec![time], used));
            }
        }
        if n.contains(':') {
            if let Some(time) = clock(&n, None) {
                return one(time);
            }
        }
        // Units written out: "15 percent", "15 per cent", "5 dollars", "18 degrees celsius".
        match (w(1), w(2)) {
            (Some("percent"), _) => return Some((vec![n.into_owned(), "%".into()], 2)),
            (Some("per"), Some("cent")) => return Some((vec![n.into_owned(), "%".into()], 3)),
            (Some("dollars" | "dollar" | "usd"), _) => {
                return Some((vec!["$".into(), n.into_owned()], 2))
            }
            (Some("euros" | "euro" | "eur"), _) => {
                return Some((vec!["€".into(), n.into_owned()], 2))
            }
            (Some("degrees"), Some("celsius" | "c")) => {
                return Some((vec![n.into_owned(), "°".into(), "c".into()], 3))
            }
            (Some("degrees"), Some("fahrenheit" | "f")) => {
                return Some((vec![n.into_owned(), "°".into(), "f".into()], 3))
            }
            _ => {}
        }
        // Smaller units of the same quantity: "30000 ms" = "30 seconds", "220 cm" = "2.2 m".
        let scaled = match w(1) {
            Some("ms" | "millisecond" | "milliseconds") => Some((scale_down(&n, 3), "seconds")),
            Some("cm") => Some((scale_down(&n, 2), "m")),
            _ => None,
        };
        if let Some((Some(value), unit)) = scaled {
            return Some((vec![value, unit.to_owned()], 2));
        }
        // Units abbreviated after a number: "2 hrs", "30 mins", "30 s".
        if let Some(unit) = w(1).and_then(|u| abbreviation(u, Some(cur), w(2))) {
            let mut v = vec![n.into_owned()];
            v.extend(unit.split(' ').map(str::to_owned));
            return Some((v, 2));
        }
        return matches!(n, Cow::Owned(_)).then(|| (vec![n.into_owned()], 1));
    }
    if matches!(cur, "usd") && w(1).and_then(number).is_some() {
        return Some((vec!["$".into()], 1));
    }
    if matches!(cur, "eur") && w(1).and_then(number).is_some() {
        return Some((vec!["€".into()], 1));
    }
    if let Some(frequency) = frequency_at(words, i) {
        return Some(frequency);
    }
    let prev = i.checked_sub(1).map(|p| words[p]);
    let expanded = abbreviation(cur, prev, w(1)).or_else(|| spelling(cur))?;
    Some((expanded.split(' ').map(str::to_owned).collect(), 1))
}

/// The adverb of a period ("every month" = "monthly").
fn period(t: &str) -> Option<&'static str> {
    Some(match t {
        "day" => "daily",
        "week" => "weekly",
        "month" => "monthly",
        "quarter" => "quarterly",
        "year" => "yearly",
        _ => return None,
    })
}

/// The adverb of "every `n` `unit`" when there is one ("every 3 months" = "quarterly").
fn counted_period(n: &str, unit: &str) -> Option<&'static str> {
    Some(match (n, unit) {
        ("1", "day") | ("24", "hours") => "daily",
        ("7", "days") | ("1", "week") => "weekly",
        ("2", "weeks") => "fortnightly",
        ("1", "month") => "monthly",
        ("3", "months") => "quarterly",
        ("12", "months") | ("1", "year") => "yearly",
        _ => return None,
    })
}

/// Frequencies, one word each: "every month", "each month", "once a month" and "once per
/// month" are "monthly"; "every three months" and "once a quarter" are "quarterly"; "every
/// other week" is "fortnightly", "annually" is "yearly". A lone "each" is "every" ("on the
/// first of each month" = "of every month"). A count other than once ("twice a month") keeps
/// its words: it is a different value.
fn frequency_at(words: &[&str], i: usize) -> Option<(Vec<String>, usize)> {
    let w = |k: usize| words.get(i + k).copied();
    let found = match (words[i], w(1), w(2)) {
        ("every" | "each", Some(p), _) if period(p).is_some() => (period(p)?, 2),
        ("every" | "each", Some(n), Some(unit)) if counted_period(n, unit).is_some() => {
            (counted_period(n, unit)?, 3)
        }
        ("every", Some("other"), Some("week")) => ("fortnightly", 3),
        ("once", Some("a" | "per" | "every" | "each"), Some(p)) if period(p).is_some() => {
            (period(p)?, 3)
        }
        ("annually", _, _) => ("yearly", 1),
        ("each", _, _) => ("every", 1),
        _ => return None,
    };
    Some((vec![found.0.to_owned()], found.1))
}

/// American spellings of words that notes use in both spellings, to the British one the
/// abbreviations expand to (`lexicon` `data/spellings.tsv`: "center" = "centre").
fn spelling(t: &str) -> Option<&'static str> {
    lexicon::british_spelling(t)
}

/// Past participles that are also the simple past, besides the regular "-ed" ones: the verbs
/// whose passive "X was paid by Y" has the active "Y paid X" in the same word.
const PAST_BOTH: &[&str] = &[
    "bought", "brought", "built", "caught", "felt", "found", "had", "heard", "held", "hired",
    "kept", "led", "left", "lent", "lost", "made", "meant", "met", "paid", "read", "sent", "sold",
    "spent", "taught", "told", "won",
];

/// Participles after which "by" is usually a place or a deadline ("located by the river",
/// "finished by Friday" is caught by its value word), not the one who acted.
fn is_placing(v: &str) -> bool {
    matches!(
        v,
        "located" | "based" | "situated" | "seated" | "parked" | "placed" | "stored" | "held"
    )
}

/// The position of the one word that satisfies `is`; `None` when none or several do.
fn only_position(words: &[&str], is: impl Fn(&str) -> bool) -> Option<usize> {
    let mut at = words
        .iter()
        .enumerate()
        .filter(|(_, t)| is(t))
        .map(|(i, _)| i);
    let first = at.next()?;
    at.next().is_none().then_some(first)
}

/// A simple-past passive in the active voice: "invoice 22 was paid in full by halvorsen ltd"
/// is "halvorsen ltd paid invoice 22 in full". Only the clear case is turned: one "was" /
/// "were" / "got", a participle that is also the simple past right after it, and one "by"
/// followed by an agent of one to four words that closes the text and holds no value word or
/// number (then "by" is a deadline: "sent by Friday", "paid by 5 March"). The present passive
/// ("is paid by") is left alone: its active form is another word ("pays").
fn active_voice(words: &[&str]) -> Option<Vec<String>> {
    let aux = only_position(words, |t| matches!(t, "was" | "were" | "got"))?;
    let by = only_position(words, |t| t == "by")?;
    let verb = *words.get(aux + 1)?;
    let past = verb.len() > 3 && verb.ends_with("ed") || PAST_BOTH.contains(&verb);
    let (subject, middle, agent) = (
        &words[..aux],
        &words[aux + 2..by.max(aux + 2)],
        &words[by + 1..],
    );
    if aux == 0
        || by <= aux + 1
        || !past
        || is_placing(verb)
        || !(1..=4).contains(&agent.len())
        || agent.iter().any(|t| {
            crate::substitution::is_value_word(t) || t.starts_with(|c: char| c.is_ascii_digit())
        })
    {
        return None;
    }
    Some(
        agent
            .iter()
            .chain([&verb])
            .chain(subject)
            .chain(middle)
            .map(|t| (*t).to_owned())
            .collect(),
    )
}

fn is_plain_number(t: &str) -> bool {
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
}

/// A number token in one notation: thousands separators dropped ("12,500"), "12.5k" written
/// out; borrowed when it already is. `None` for anything else.
fn number(t: &str) -> Option<Cow<'_, str>> {
    let first = t.bytes().next()?;
    if !first.is_ascii_digit() {
        return None;
    }
    // "12,500" / "1,000,000": groups of exactly three digits after the first.
    if t.contains(',') {
        let mut groups = t.split(',');
        let head = groups.next()?;
        let well_formed = (1..=3).contains(&head.len())
            && is_plain_number(head)
            && groups.all(|g| g.len() == 3 && is_plain_number(g));
        return well_formed.then(|| Cow::Owned(t.replace(',', "")));
    }
    if let Some(k) = t.strip_suffix('k') {
        return thousands(k).map(Cow::Owned);
    }
    t.bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b':' | b'-' | b'/'))
        .then_some(Cow::Borrowed(t))
}

/// "12.5" thousands as a whole number ("12500"); `None` when it would not be whole.
fn thousands(k: &str) -> Option<String> {
    let (whole, fraction) = k.split_once('.').unwrap_or((k, ""));
    if !is_plain_number(whole) || (!fraction.is_empty() && !is_plain_number(fraction)) {
        return None;
    }
    if fraction.len() > 3 || whole.len() > 12 {
        return None;
    }
    let scaled = format!("{fraction:0<3}");
    let value = format!("{whole}{scaled}");
    Some(value.trim_start_matches('0').to_owned()).filter(|v| !v.is_empty())
}

/// `n` divided by 10^`places`, written without trailing zeros ("220" / 10^2 = "2.2"); `None`
/// unless `n` is a plain decimal number whose result is exact within 3 decimals.
fn scale_down(n: &str, places: usize) -> Option<String> {
    let (whole, fraction) = n.split_once('.').unwrap_or((n, ""));
    if !is_plain_number(whole) || (!fraction.is_empty() && !is_plain_number(fraction)) {
        return None;
    }
    if whole.len() > 12 || fraction.len() + places > 3 {
        return None;
    }
    // Left-padded so that at least one digit stands before the point ("5" -> "005" -> "0.05").
    let width = fraction.len() + places + 1;
    let digits = format!("{:0>width$}", format!("{whole}{fraction}"));
    let point = digits.len() - fraction.len() - places;
    let (int, frac) = (&digits[..point], &digits[point..]);
    let int = match int.trim_start_matches('0') {
        "" => "0",
        trimmed => trimmed,
    };
    let frac = frac.trim_end_matches('0');
    Some(if frac.is_empty() {
        int.to_owned()
    } else {
        format!("{int}.{frac}")
    })
}

/// "HH:MM" (24 h) for an hour or hour:minute, with the half of the day when one is given.
fn clock(n: &str, pm: Option<bool>) -> Option<String> {
    let (h, m) = match n.split_once(':') {
        Some((h, m)) => (h, m),
        None => (n, "00"),
    };
    if !is_plain_number(h) || !is_plain_number(m) || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let (mut hour, minute): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    if minute > 59 {
        return None;
    }
    match pm {
        Some(pm) => {
            if !(1..=12).contains(&hour) {
                return None;
            }
            hour = match (pm, hour) {
                (false, 12) => 0,
                (true, 12) => 12,
                (true, h) => h + 12,
                (false, h) => h,
            };
        }
        None if hour > 23 => return None,
        None => {}
    }
    Some(format!("{hour}:{minute:02}"))
}

/// The month a name or short form stands for (`lexicon` `data/months.tsv`; "may" is also a
/// verb: only a month beside a day number, see `date_at`).
fn month(t: &str) -> Option<u32> {
    lexicon::month(t).map(|(n, _)| u32::from(n))
}

/// A day of the month, plain ("1") or ordinal ("1st", "22nd").
fn day(t: &str) -> Option<u32> {
    let digits = t
        .strip_suffix("st")
        .or_else(|| t.strip_suffix("nd"))
        .or_else(|| t.strip_suffix("rd"))
        .or_else(|| t.strip_suffix("th"))
        .unwrap_or(t);
    if !is_plain_number(digits) || digits.len() > 2 {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

fn year(t: &str) -> Option<u32> {
    (t.len() == 4 && is_plain_number(t))
        .then(|| t.parse().ok())
        .flatten()
}

/// "YYYY-MM-DD" for "2026-03-01", "1 march 2026", "march 1st 2026"; "MM-DD" when no year
/// follows ("1 march", "march 1st").
fn date_at(words: &[&str], i: usize) -> Option<(Vec<String>, usize)> {
    let w = |k: usize| words.get(i + k).copied();
    let cur = w(0)?;
    let b = cur.as_bytes();
    if b.len() == 10 && b[4] == b'-' && b[7] == b'-' {
        let (y, m, d) = (&cur[..4], &cur[5..7], &cur[8..]);
        if year(y).is_some() && m.len() == 2 && d.len() == 2 {
            let (month, day) = (m.parse::<u32>().ok()?, day(d)?);
            if (1..=12).contains(&month) {
                return Some((vec![format!("{y}-{month:02}-{day:02}")], 1));
            }
        }
        return None;
    }
    let (d, m, used) = if let (Some(d), Some(m)) = (day(cur), w(1).and_then(month)) {
        (d, m, 2)
    } else if let (Some(m), Some(d)) = (month(cur), w(1).and_then(day)) {
        // "may 5" is as often "may" the verb: a month only with an ordinal day or a year.
        let ordinal = w(1).is_some_and(|t| !is_plain_number(t));
        if cur == "may" && !ordinal && w(2).and_then(year).is_none() {
            return None;
        }
        (d, m, 2)
    } else {
        return None;
    };
    Some(match w(used).and_then(year) {
        Some(y) => (vec![format!("{y}-{m:02}-{d:02}")], used + 1),
        None => (vec![format!("{m:02}-{d:02}")], used),
    })
}

/// Number words to digits ("fifteen" -> "15"): only whole words with one meaning
/// (`lexicon` `data/number-words.tsv`).
fn number_word(t: &str) -> Option<&'static str> {
    if !may_start_rule(t) || t.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    lexicon::number_word(t)
}

/// The expansion of an abbreviation, given its neighbours (some are abbreviations only in
/// one position: "st" is "street" before a number and at the end, "hr" is "hours" after a
/// number). The words are `lexicon` data: `units.tsv` after a number, then
/// `abbreviations.tsv`, then a weekday's short form ("sat" and "sun" are also words: left
/// alone).
fn abbreviation(t: &str, prev: Option<&str>, next: Option<&str>) -> Option<&'static str> {
    let after_number = prev.is_some_and(|p| p.bytes().next().is_some_and(|b| b.is_ascii_digit()));
    let before_number_or_end = next.is_none_or(|n| n.bytes().all(|b| b.is_ascii_digit()));
    if after_number {
        if let Some(unit) = lexicon::unit_after_number(t) {
            return Some(unit);
        }
    }
    if let Some(expanded) = lexicon::abbreviation(t) {
        return Some(expanded);
    }
    if let Some((day, lexicon::Kind::Short)) = lexicon::weekday(t) {
        return lexicon::WEEKDAYS
            .iter()
            .find(|(_, n, kind)| *n == day && *kind == lexicon::Kind::Name)
            .map(|(name, _, _)| *name);
    }
    match t {
        "st" if before_number_or_end => Some("street"),
        "rd" if before_number_or_end => Some("road"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(norm: &str) -> String {
        assert!(may_rewrite(norm) || rewrite(norm) == norm, "{norm}");
        rewrite(norm)
    }

    #[test]
    fn notations_of_one_value_meet() {
        for (a, b) in [
            ("sync at 3 pm", "sync at 15:00"),
            ("sync at 3:00 p m", "sync at 15:00"),
            ("leaves at 7:45 am", "leaves at 07:45"),
            ("leaves at 7:45", "leaves at 07:45"),
            ("leaves at 12 am", "leaves at 00:00"),
            ("for 1,000 flyers", "for 1000 flyers"),
            ("holds 12.5k units", "holds 12500 units"),
            ("holds 12,500 units", "holds 12500 units"),
            ("costs 5 dollars", "costs $ 5"),
            ("costs usd 5", "costs $ 5"),
            ("is 15 percent", "is 15 %"),
            ("is fifteen per cent", "is 15 %"),
            ("at 18 degrees celsius", "at 18 ° c"),
            ("due on 1 march 2026", "due on 2026-03-01"),
            ("due on march 1st 2026", "due on 2026-03-01"),
            ("due on march 1st", "due on 1 march"),
            ("dentist appt", "dentist appointment"),
            ("lives in nyc", "lives in new york city"),
            ("shop at 42 harbour st", "shop at 42 harbour street"),
            ("order # 4471 shipped", "order 4471 shipped"),
            ("prefers e mail", "prefers email"),
            ("takes 2 hrs", "takes 2 hours"),
            ("timeout is 30 s", "timeout is 30 seconds"),
            ("timeout is 30000 ms", "timeout is 30 seconds"),
            ("is 220 cm wide", "is 2.2 m wide"),
            ("is 5 cm wide", "is 0.05 m wide"),
            ("ask hr", "ask human resources"),
            ("starts on mon", "starts on monday"),
            ("dr lindqvist", "doctor lindqvist"),
            ("3 km away", "3 kilometres away"),
            ("3 kilometers away", "3 km away"),
            ("a 15 minute response", "a 15 min response"),
            ("a 2 hour call", "a 2 hrs call"),
            ("board meets every 3 months", "board meets quarterly"),
            ("board meets once a quarter", "board meets quarterly"),
            (
                "paid on the first of each month",
                "paid on the first of every month",
            ),
            ("runs every day", "runs daily"),
            ("runs once per week", "runs weekly"),
            ("reviewed annually", "reviewed yearly"),
            ("stand up every other week", "stand up fortnightly"),
            ("distribution ctr", "distribution center"),
            ("distribution centre", "distribution center"),
            ("her favorite color", "her favourite colour"),
            ("kestrel ave has a garden", "kestrel avenue has a garden"),
            (
                "invoice 22 was paid in full by halvorsen ltd",
                "halvorsen ltd paid invoice 22 in full",
            ),
            ("the boxes were sent by tom", "tom sent the boxes"),
            ("the invoice got paid by tom", "tom paid the invoice"),
        ] {
            assert_eq!(canon(a), canon(b), "{a} / {b}");
        }
    }

    #[test]
    fn different_values_stay_different() {
        for (a, b) in [
            ("sync at 3 pm", "sync at 3 am"),
            ("sync at 3 pm", "sync at 3"),
            ("due on 01/03/2026", "due on 2026-03-01"),
            ("due on 1 march 2026", "due on 1 march 2027"),
            ("for 1,000 flyers", "for 100 flyers"),
            ("for 1,00 flyers", "for 100 flyers"),
            ("costs $ 5", "costs € 5"),
            ("holds 12.5 units", "holds 12500 units"),
            ("timeout is 30001 ms", "timeout is 30 seconds"),
            ("is 2.2 cm wide", "is 2.2 m wide"),
            ("st mary church", "street mary church"),
            ("at 25:00", "at 01:00"),
            ("it may 5 times", "it 05-05 times"),
            ("board meets every 2 months", "board meets quarterly"),
            ("board meets twice a month", "board meets monthly"),
            ("a 15 minute response", "a 15 hour response"),
            // The passive keeps its roles: Tom paid Ana.
            ("ana was paid by tom", "ana paid tom"),
            // "by" before a value word or a number is a deadline, not who acted.
            ("the report was sent by friday", "friday sent the report"),
            ("tom was hired by acme in 2020", "acme hired tom in 2020"),
            // The present passive has another word in the active ("pays").
            ("ana is paid by tom", "tom paid ana"),
            (
                "the shop was located by the river",
                "the river located the shop",
            ),
            (
                "ana was paid by tom and was happy",
                "tom paid ana and was happy",
            ),
        ] {
            assert_ne!(canon(a), canon(b), "{a} / {b}");
        }
    }

    #[test]
    fn every_word_a_rule_knows_is_a_trigger_and_every_trigger_is_known() {
        for t in TRIGGERS {
            let known = number_word(t).is_some()
                || month(t).is_some()
                || abbreviation(t, None, None).is_some()
                || abbreviation(t, Some("1"), None).is_some()
                || spelling(t).is_some()
                || matches!(
                    *t,
                    "#" | "e"
                        | "usd"
                        | "eur"
                        | "every"
                        | "each"
                        | "once"
                        | "annually"
                        | "was"
                        | "were"
                        | "got"
                )
                || FOLLOWERS.contains(t);
            assert!(known, "{t} triggers no rule");
            assert!(may_start_rule(t), "{t}");
        }
        assert!(
            TRIGGERS.windows(2).all(|w| w[0] < w[1]),
            "sorted, no repeats"
        );
        // Each rule's words, spelled here once more, are triggers.
        for word in [
            "appt", "mgr", "dept", "hq", "dr", "nyc", "mon", "thurs", "fifteen", "march", "sept",
            "hrs", "km", "q3", "p1",
        ] {
            assert!(TRIGGERS.contains(&word), "{word}");
        }
        assert!(!may_start_rule("customer") && !may_start_rule("") && may_start_rule("12"));
    }

    #[test]
    fn a_text_that_needs_no_rewrite_is_already_canonical() {
        for norm in [
            "call 4471 before 9:00 on 2026-03-01 ticket x 123456",
            "sync at 15:00 version 3.5",
            "lena prefers email",
        ] {
            assert!(!norm.split(' ').any(needs_rewrite), "{norm}");
            assert_eq!(rewrite(norm), norm, "{norm}");
        }
        for t in ["1,000", "12k", "07:45", "1st", "pm", "march", "appt"] {
            assert!(needs_rewrite(t), "{t}");
        }
    }

    #[test]
    fn no_filler_is_a_trigger() {
        // The sweep asks `needs_rewrite` about content words only.
        for w in crate::normalise::FILLER_WORDS {
            assert!(!needs_rewrite(w) && !may_start_rule(w), "{w}");
        }
    }

    #[test]
    fn text_without_numbers_or_known_words_is_untouched() {
        let norm = "lena okafor prefers email over phone calls";
        assert!(!may_rewrite(norm));
        assert_eq!(rewrite(norm), norm);
        assert_eq!(rewrite(""), "");
    }
}
