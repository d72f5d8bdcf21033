//! SR-1 redaction speed, judged as a write pays it, against the obvious contenders.
//!
//! For each cell (text size, secret count, secret kind, text kind, planted occurrences) two
//! modes are timed side by side:
//!
//! - **per request**: everything a write pays when the redactor is built for it. Engine:
//!   `SecretRegistry::new()`, `register` each secret, `redactor()`, `redact_counting(text)`.
//!   Contenders: an `AhoCorasick` leftmost-longest automaton (non-contiguous NFA, and the
//!   library's automatic choice) built and run with `replace_all`, and a `regex` alternation
//!   of the escaped secrets (longest first) built and run. The contenders get their inputs
//!   (pattern slices, marker strings, the alternation source) prepared outside the timing.
//! - **built once**: redaction only, with the engine's `Redactor` and each contender built
//!   beforehand.
//!
//! `floor` is a bare `find_iter().count()` over a prebuilt automaton (automatic kind): no
//! output is produced, so it is shown for reference only. `req/pb` sets the engine built per
//! request against the best contender built once (the built-once columns): what a write pays
//! beside a service that keeps its automaton between writes.
//!
//! Timing: each candidate is calibrated to a sample of about 2 ms (at least one call); then
//! rounds run every candidate of the cell once each, in an order rotating per round, and the
//! median over rounds of the per-call time is reported. `ratio` is the best contender's median
//! over the engine's: at least 1.00 means the engine is at least as fast.
//!
//! `cargo bench -p memory-guard` (set `SR1_BENCH_ROUNDS` to change the round count, default
//! 11, and `SR1_BENCH_FILTER` to run only the cells whose name contains it).

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use bench_support::Rng;
use memory_guard::SecretRegistry;

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const FAMILIES: &[&str] = &["sk-live-", "ghp_", "AKIA"];

#[derive(Clone, Copy, PartialEq)]
enum SecretKind {
    /// Random alphanumeric, 16 to 48 chars.
    Random,
    /// `sk-live-`, `ghp_` or `AKIA` and a random alphanumeric tail of 16 to 36 chars.
    Family,
    /// One prefix of 6 random alphanumeric chars, drawn per cell, shared by every secret, and a
    /// random alphanumeric tail of 16 to 36 chars (one deployment's keys of one provider).
    Prefix,
}

#[derive(Clone, Copy, PartialEq)]
enum TextKind {
    Ascii,
    /// CJK prose with emoji.
    Cjk,
}

fn alnum(rng: &mut Rng, len: usize) -> String {
    (0..len)
        .map(|_| char::from(ALNUM[rng.below(ALNUM.len())]))
        .collect()
}

fn secrets(rng: &mut Rng, kind: SecretKind, count: usize) -> Vec<(String, String)> {
    // Drawn only for the prefix kind, so the other cells keep their fixtures.
    let prefix = if kind == SecretKind::Prefix {
        alnum(rng, 6)
    } else {
        String::new()
    };
    (0..count)
        .map(|i| {
            let value = match kind {
                SecretKind::Random => {
                    let len = 16 + rng.below(33);
                    alnum(rng, len)
                }
                SecretKind::Family => {
                    let family = FAMILIES[rng.below(FAMILIES.len())];
                    let len = 16 + rng.below(21);
                    format!("{family}{}", alnum(rng, len))
                }
                SecretKind::Prefix => {
                    let len = 16 + rng.below(21);
                    format!("{prefix}{}", alnum(rng, len))
                }
            };
            (format!("bench-secret-{i:04}"), value)
        })
        .collect()
}

/// Prose of about `bytes` bytes with `planted` secret occurrences spread evenly.
fn text(
    rng: &mut Rng,
    kind: TextKind,
    bytes: usize,
    secrets: &[(String, String)],
    planted: usize,
) -> String {
    let mut out = String::with_capacity(bytes + 64);
    let every = bytes / (planted + 1);
    let mut next_plant = every;
    let mut remaining = planted;
    while out.len() < bytes {
        if remaining > 0 && out.len() >= next_plant {
            remaining -= 1;
            out.push_str(&secrets[rng.below(secrets.len())].1);
            out.push(' ');
            next_plant += every;
        }
        match kind {
            TextKind::Ascii => {
                for _ in 0..2 + rng.below(8) {
                    out.push(char::from(b'a' + rng.below(26) as u8));
                }
                out.push(match rng.below(20) {
                    0 => '.',
                    1 => ',',
                    2 => '\n',
                    _ => ' ',
                });
            }
            TextKind::Cjk => {
                for _ in 0..1 + rng.below(6) {
                    let c = char::from_u32(0x4E00 + rng.below(0x5000) as u32).unwrap_or('日');
                    out.push(c);
                }
                match rng.below(12) {
                    0 => out.push('🔑'),
                    1 => out.push('🎉'),
                    2 => out.push('。'),
                    3 => out.push('、'),
                    4 => out.push(' '),
                    _ => {}
                }
            }
        }
    }
    out
}

struct Cell {
    name: String,
    secrets: Vec<(String, String)>,
    text: String,
}

fn cells() -> Vec<Cell> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut cells = Vec::new();
    let mut shapes: Vec<(usize, usize, bool, &[SecretKind])> = Vec::new();
    let mixed: &[SecretKind] = &[SecretKind::Random, SecretKind::Family];
    for bytes in [1 << 10, 4 << 10] {
        for count in [1, 10, 100] {
            shapes.push((bytes, count, true, mixed));
        }
    }
    shapes.push((64 << 10, 1000, true, mixed));
    shapes.push((1 << 20, 1000, true, mixed));
    // A few cells with nothing to redact.
    let clean: [(usize, usize); 3] = [(4 << 10, 10), (4 << 10, 100), (1 << 20, 1000)];
    shapes.extend(clean.iter().map(|&(b, c)| (b, c, false, mixed)));
    // Many secrets sharing one literal prefix.
    for bytes in [4 << 10, 64 << 10, 1 << 20] {
        for count in [100, 1000] {
            shapes.push((bytes, count, true, &[SecretKind::Prefix]));
        }
    }
    for (bytes, count, planting, kinds) in shapes {
        for &secret_kind in kinds {
            for text_kind in [TextKind::Ascii, TextKind::Cjk] {
                let secrets = secrets(&mut rng, secret_kind, count);
                let planted = if planting { (bytes >> 10).max(1) } else { 0 };
                let text = text(&mut rng, text_kind, bytes, &secrets, planted);
                let size = if bytes >= 1 << 20 {
                    format!("{}MiB", bytes >> 20)
                } else {
                    format!("{}KiB", bytes >> 10)
                };
                let name = format!(
                    "{size:>5} {count:>4} {} {} {}",
                    match secret_kind {
                        SecretKind::Random => "rand",
                        SecretKind::Family => "fam ",
                        SecretKind::Prefix => "pre6",
                    },
                    match text_kind {
                        TextKind::Ascii => "ascii",
                        TextKind::Cjk => "cjk  ",
                    },
                    if planted > 0 {
                        format!("{planted:>4}")
                    } else {
                        "   0".to_owned()
                    },
                );
                cells.push(Cell {
                    name,
                    secrets,
                    text,
                });
            }
        }
    }
    cells
}

type Run<'a> = Box<dyn FnMut() -> usize + 'a>;

struct Candidate<'a> {
    run: Run<'a>,
    iters: u32,
    samples: Vec<f64>,
}

impl<'a> Candidate<'a> {
    fn new(_name: &'static str, run: Run<'a>) -> Self {
        Self {
            run,
            iters: 1,
            samples: Vec::new(),
        }
    }

    fn calibrate(&mut self, target: Duration) {
        let start = Instant::now();
        black_box((self.run)());
        let once = start.elapsed().max(Duration::from_nanos(20));
        self.iters = (target.as_nanos() / once.as_nanos()).clamp(1, 1_000_000) as u32;
    }

    fn sample(&mut self) {
        let start = Instant::now();
        for _ in 0..self.iters {
            black_box((self.run)());
        }
        self.samples
            .push(start.elapsed().as_nanos() as f64 / f64::from(self.iters));
    }

    fn median(&self) -> f64 {
        let mut sorted = self.samples.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    }
}

/// Times candidates side by side; returns their medians in ns per call.
fn measure(candidates: &mut [Candidate<'_>], rounds: usize) -> Vec<f64> {
    let target = Duration::from_millis(2);
    for c in candidates.iter_mut() {
        c.calibrate(target);
    }
    let n = candidates.len();
    for round in 0..rounds {
        for k in 0..n {
            candidates[(round + k) % n].sample();
        }
    }
    candidates.iter().map(Candidate::median).collect()
}

fn markers(secrets: &[(String, String)]) -> Vec<String> {
    secrets
        .iter()
        .map(|(id, _)| format!("[REDACTED:{id}]"))
        .collect()
}

fn ac(kind: Option<AhoCorasickKind>, values: &[&str]) -> AhoCorasick {
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .kind(kind)
        .build(values)
        .expect("fixture automaton builds")
}

/// Escaped alternation, longest first (the regex crate is leftmost-first).
fn alternation(values: &[&str]) -> String {
    let mut sorted: Vec<&str> = values.to_vec();
    sorted.sort_by_key(|v| std::cmp::Reverse(v.len()));
    sorted
        .iter()
        .map(|v| regex::escape(v))
        .collect::<Vec<_>>()
        .join("|")
}

fn regex_build(source: &str) -> regex::Regex {
    regex::RegexBuilder::new(source)
        .size_limit(1 << 30)
        .dfa_size_limit(1 << 30)
        .build()
        .expect("fixture regex builds")
}

/// What `replace_all` does, for the regex: copy the gaps, push the value's marker.
fn regex_replace(re: &regex::Regex, by_value: &HashMap<&str, &str>, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for m in re.find_iter(text) {
        out.push_str(&text[last..m.start()]);
        out.push_str(by_value[m.as_str()]);
        last = m.end();
    }
    out.push_str(&text[last..]);
    out
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2}ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1}µs", ns / 1e3)
    } else {
        format!("{ns:.0}ns")
    }
}

struct Row {
    name: String,
    req: Vec<f64>,
    once: Vec<f64>,
    floor: f64,
}

const REQ_NAMES: [&str; 4] = ["engine", "ac-nfa", "ac-auto", "regex"];
const ONCE_NAMES: [&str; 4] = ["engine", "ac-nfa", "ac-auto", "regex"];

fn best(times: &[f64], names: &[&str]) -> (f64, &'static str) {
    let (i, t) = times[1..]
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .expect("contenders");
    let name: &'static str = match names[i + 1] {
        "ac-nfa" => "ac-nfa",
        "ac-auto" => "ac-auto",
        _ => "regex",
    };
    (*t, name)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this once as a smoke test.
    let quick = !std::env::args().any(|a| a == "--bench");
    let rounds: usize = std::env::var("SR1_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1 } else { 11 });
    let started = Instant::now();
    let mut rows = Vec::new();
    let cells = cells();
    let filter = std::env::var("SR1_BENCH_FILTER").unwrap_or_default();
    let cells: Vec<&Cell> = if quick {
        cells.iter().take(2).collect()
    } else {
        cells
            .iter()
            .filter(|c| c.name.contains(filter.as_str()))
            .collect()
    };

    for cell in cells {
        let values: Vec<&str> = cell.secrets.iter().map(|(_, v)| v.as_str()).collect();
        let markers = markers(&cell.secrets);
        let by_value: HashMap<&str, &str> = values
            .iter()
            .copied()
            .zip(markers.iter().map(String::as_str))
            .collect();
        let source = alternation(&values);
        let text = cell.text.as_str();
        let secrets = &cell.secrets;

        // Sanity: every candidate produces the same output on these fixtures.
        let mut reg = SecretRegistry::new();
        for (id, value) in secrets {
            reg.register(id.as_str(), value.as_str())
                .expect("valid fixture");
        }
        let redactor = reg.redactor();
        let expected = ac(None, &values).replace_all(text, &markers);
        assert_eq!(redactor.redact(text), expected, "{}", cell.name);
        let re = regex_build(&source);
        assert_eq!(
            regex_replace(&re, &by_value, text),
            expected,
            "{}",
            cell.name
        );

        let mut req = vec![
            Candidate::new(
                "engine",
                Box::new(|| {
                    let mut reg = SecretRegistry::new();
                    for (id, value) in secrets {
                        let _ = reg.register(id.as_str(), value.as_str());
                    }
                    let r = reg.redactor();
                    let (out, n) = r.redact_counting(black_box(text));
                    black_box(out).len() + n
                }),
            ),
            Candidate::new(
                "ac-nfa",
                Box::new(|| {
                    let ac = ac(Some(AhoCorasickKind::NoncontiguousNFA), &values);
                    black_box(ac.replace_all(black_box(text), &markers)).len()
                }),
            ),
            Candidate::new(
                "ac-auto",
                Box::new(|| {
                    let ac = ac(None, &values);
                    black_box(ac.replace_all(black_box(text), &markers)).len()
                }),
            ),
            Candidate::new(
                "regex",
                Box::new(|| {
                    let re = regex_build(&source);
                    black_box(regex_replace(&re, &by_value, black_box(text))).len()
                }),
            ),
        ];
        let req_t = measure(&mut req, rounds);
        drop(req);

        let ac_nfa = ac(Some(AhoCorasickKind::NoncontiguousNFA), &values);
        let ac_auto = ac(None, &values);
        let mut once = vec![
            Candidate::new(
                "engine",
                Box::new(|| {
                    let (out, n) = redactor.redact_counting(black_box(text));
                    black_box(out).len() + n
                }),
            ),
            Candidate::new(
                "ac-nfa",
                Box::new(|| black_box(ac_nfa.replace_all(black_box(text), &markers)).len()),
            ),
            Candidate::new(
                "ac-auto",
                Box::new(|| black_box(ac_auto.replace_all(black_box(text), &markers)).len()),
            ),
            Candidate::new(
                "regex",
                Box::new(|| black_box(regex_replace(&re, &by_value, black_box(text))).len()),
            ),
            Candidate::new(
                "floor",
                Box::new(|| ac_auto.find_iter(black_box(text)).count()),
            ),
        ];
        let mut once_t = measure(&mut once, rounds);
        let floor = once_t.pop().expect("floor");
        rows.push(Row {
            name: cell.name.clone(),
            req: req_t,
            once: once_t,
            floor,
        });
        eprintln!("measured {} ({:.0?})", cell.name, started.elapsed());
    }

    println!();
    println!(
        "SR-1 redaction: median per call over {rounds} interleaved rounds; ratio = best contender / engine"
    );
    println!(
        "{:<27} | {:>9} {:>9} {:>9} {:>9} {:>6} | {:>9} {:>9} {:>9} {:>9} {:>6} | {:>9} | {:>6}",
        "cell (size n kind text planted)",
        "engine",
        "ac-nfa",
        "ac-auto",
        "regex",
        "ratio",
        "engine",
        "ac-nfa",
        "ac-auto",
        "regex",
        "ratio",
        "floor",
        "req/pb"
    );
    println!(
        "{:<27} | {:^52} | {:^52} |",
        "", "per request (build + redact)", "built once (redact only)"
    );
    let mut worst_req = f64::INFINITY;
    let mut worst_once = f64::INFINITY;
    let mut worst_prebuilt = f64::INFINITY;
    for row in &rows {
        let (best_req, _) = best(&row.req, &REQ_NAMES);
        let (best_once, _) = best(&row.once, &ONCE_NAMES);
        let ratio_req = best_req / row.req[0];
        let ratio_once = best_once / row.once[0];
        worst_req = worst_req.min(ratio_req);
        worst_once = worst_once.min(ratio_once);
        // The engine built per request against the contenders built once: what a write pays
        // beside a service that keeps its automaton.
        let ratio_prebuilt = best_once / row.req[0];
        worst_prebuilt = worst_prebuilt.min(ratio_prebuilt);
        println!(
            "{:<27} | {:>9} {:>9} {:>9} {:>9} {:>6.2} | {:>9} {:>9} {:>9} {:>9} {:>6.2} | {:>9} | {:>6.2}",
            row.name,
            fmt_ns(row.req[0]),
            fmt_ns(row.req[1]),
            fmt_ns(row.req[2]),
            fmt_ns(row.req[3]),
            ratio_req,
            fmt_ns(row.once[0]),
            fmt_ns(row.once[1]),
            fmt_ns(row.once[2]),
            fmt_ns(row.once[3]),
            ratio_once,
            fmt_ns(row.floor),
            ratio_prebuilt,
        );
    }
    println!(
        "lowest ratio: per request {worst_req:.2}, built once {worst_once:.2}, per request \
         against contenders built once {worst_prebuilt:.2}; total {:.0?}",
        started.elapsed()
    );
}
