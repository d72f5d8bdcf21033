//! SR-1 redaction throughput: the Aho-Corasick redactor against the spec's reference approach
//! (sort by length, `str::replace` each value in turn), on 1 MiB of text with 1,000 secrets.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memory_guard::SecretRegistry;

const TEXT_BYTES: usize = 1 << 20;
const SECRETS: usize = 1_000;
const PLANTED: usize = 200;

/// xorshift64*: deterministic and dependency-free, good enough for fixtures.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

fn secrets(rng: &mut Rng, count: usize) -> Vec<(String, String)> {
    (0..count)
        .map(|i| {
            let len = 16 + rng.below(33);
            let value = (0..len)
                .map(|_| char::from(ALNUM[rng.below(ALNUM.len())]))
                .collect();
            (format!("bench-secret-{i:04}"), value)
        })
        .collect()
}

/// Prose-like text: lowercase words, spaces, some punctuation and newlines, with `planted`
/// secret occurrences spread evenly.
fn text(rng: &mut Rng, secrets: &[(String, String)], planted: usize) -> String {
    let mut out = String::with_capacity(TEXT_BYTES + 64);
    let every = TEXT_BYTES / (planted + 1);
    let mut next_plant = every;
    let mut remaining = planted;
    while out.len() < TEXT_BYTES {
        if remaining > 0 && out.len() >= next_plant {
            remaining -= 1;
            out.push_str(&secrets[rng.below(secrets.len())].1);
            out.push(' ');
            next_plant += every;
        }
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
    out
}

/// The spec's reference: longest value first, each replaced in turn over the whole text.
fn naive_redact(secrets: &[(String, String)], text: &str) -> String {
    let mut sorted: Vec<&(String, String)> = secrets.iter().collect();
    sorted.sort_by_key(|s| std::cmp::Reverse(s.1.len()));
    let mut out = text.to_owned();
    for (id, value) in sorted {
        out = out.replace(value.as_str(), &format!("[REDACTED:{id}]"));
    }
    out
}

fn registry(secrets: &[(String, String)]) -> SecretRegistry {
    let mut reg = SecretRegistry::new();
    for (id, value) in secrets {
        reg.register(id.clone(), value.clone())
            .expect("fixture ids are valid");
    }
    reg
}

fn bench(c: &mut Criterion) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let secrets = secrets(&mut rng, SECRETS);
    let text = text(&mut rng, &secrets, PLANTED);
    let reg = registry(&secrets);
    let redactor = reg.redactor();

    let (fast, count) = redactor.redact_counting(&text);
    assert_eq!(count, PLANTED, "every planted secret is found");
    assert_eq!(
        fast,
        naive_redact(&secrets, &text),
        "same output as the reference"
    );

    let mut group = c.benchmark_group("redact_1MiB_1000_secrets");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("redactor", |b| {
        b.iter(|| black_box(redactor.redact(black_box(&text))))
    });
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    group.bench_function("naive_sorted_replace", |b| {
        b.iter(|| black_box(naive_redact(&secrets, black_box(&text))))
    });
    group.finish();

    let clean = self::text(&mut rng, &secrets, 0);
    let mut group = c.benchmark_group("redact_1MiB_1000_secrets_no_match");
    group.throughput(Throughput::Bytes(clean.len() as u64));
    group.bench_function("redactor", |b| {
        b.iter(|| black_box(redactor.redact(black_box(&clean))))
    });
    group.finish();

    // The skip window is the shortest pattern, so one 8-character secret slows the whole scan.
    let mut with_short = secrets.clone();
    with_short[0].1.truncate(8);
    let short_text = self::text(&mut rng, &with_short, PLANTED);
    let short_redactor = registry(&with_short).redactor();
    assert_eq!(short_redactor.redact_counting(&short_text).1, PLANTED);
    let mut group = c.benchmark_group("redact_1MiB_1000_secrets_one_8_char");
    group.throughput(Throughput::Bytes(short_text.len() as u64));
    group.bench_function("redactor", |b| {
        b.iter(|| black_box(short_redactor.redact(black_box(&short_text))))
    });
    group.finish();

    let few = &secrets[..5];
    let few_text = self::text(&mut rng, few, PLANTED);
    let few_redactor = registry(few).redactor();
    let mut group = c.benchmark_group("redact_1MiB_5_secrets");
    group.throughput(Throughput::Bytes(few_text.len() as u64));
    group.bench_function("redactor", |b| {
        b.iter(|| black_box(few_redactor.redact(black_box(&few_text))))
    });
    group.finish();

    let mut group = c.benchmark_group("build_redactor");
    group.bench_function("1000_secrets", |b| b.iter(|| black_box(reg.redactor())));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
