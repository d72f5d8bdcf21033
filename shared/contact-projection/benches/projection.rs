//! Throughput of `project` on typical memory texts of about 200 bytes, built from the labelled
//! set's lines (contacts and look-alikes mixed as they come). The Python contender's figure on
//! the same texts is printed by tests/quality/projection_contender.py.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn texts() -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in include_str!("../tests/data/contact_v1.jsonl").lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(v["text"].as_str().unwrap_or_default());
        if current.len() >= 200 {
            out.push(std::mem::take(&mut current));
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let texts = texts();
    let bytes: usize = texts.iter().map(String::len).sum();
    let mut group = c.benchmark_group("project");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function(format!("{} texts of ~200 bytes", texts.len()), |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| contact_projection::project(std::hint::black_box(t)).removed)
                .sum::<usize>()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
