//! Shared helpers for the consolidation integration tests.
#![allow(dead_code)]

use consolidation::{apply, plan, Entry, Plan, Settings};

pub const T0: i64 = 1_700_000_000_000;

pub fn entry(id: &str, content: &str) -> Entry {
    Entry {
        id: id.to_string(),
        content: content.to_string(),
        tags: Vec::new(),
        created_at_ms: T0,
        expires_at_ms: None,
        subject: None,
        provenance: Vec::new(),
    }
}

pub fn tagged(id: &str, content: &str, tags: &[&str], created_at_ms: i64) -> Entry {
    Entry {
        tags: tags.iter().map(|t| t.to_string()).collect(),
        created_at_ms,
        ..entry(id, content)
    }
}

/// Plans, checks the invariants every plan must satisfy, applies, and checks that a second
/// pass over the result does nothing. Returns the plan and the consolidated corpus.
pub fn run(entries: &[Entry], settings: &Settings) -> (Plan, Vec<Entry>) {
    let p = plan(entries, settings);
    check_invariants(entries, settings, &p);
    let after = apply(entries, &p).expect("plan applies to its own corpus");
    assert_eq!(
        after.len(),
        p.output_count,
        "output_count matches the applied corpus"
    );
    let again = plan(&after, settings);
    assert!(
        again.merges.is_empty(),
        "second pass must be a no-op, got {} merges",
        again.merges.len()
    );
    assert_eq!(again.output_count, again.input_count);
    (p, after)
}

pub fn check_invariants(entries: &[Entry], settings: &Settings, p: &Plan) {
    assert_eq!(p.input_count, entries.len());
    let replaced: usize = p.merges.iter().map(|m| m.replaced.len()).sum();
    assert_eq!(p.output_count + replaced, entries.len() + p.merges.len());
    let max = settings.max_replaced_per_merge.max(2);
    for m in &p.merges {
        assert!(m.replaced.len() >= 2);
        assert!(m.replaced.len() <= max, "{} > {max}", m.replaced.len());
        assert!(
            m.replaced.windows(2).all(|w| w[0] < w[1]),
            "replaced sorted"
        );
        assert!(
            m.merged.tags.windows(2).all(|w| w[0] < w[1]),
            "tags sorted, deduped"
        );
        assert!(
            m.merged.provenance.windows(2).all(|w| w[0] < w[1]),
            "provenance sorted"
        );
        for id in &m.replaced {
            assert!(
                m.merged.provenance.contains(id),
                "provenance names replaced ids"
            );
        }
        assert_eq!(m.merged.id.len(), 26);
        assert_eq!(
            m.merged.id,
            consolidation::merged_id(m.merged.created_at_ms, &m.replaced)
        );
        let corroborated: Vec<&String> = m
            .merged
            .tags
            .iter()
            .filter(|t| t.starts_with("corroborated:"))
            .collect();
        assert_eq!(corroborated.len(), 1, "exactly one corroborated tag");
    }
}

/// The same slice in a different, deterministic order (a fixed LCG permutation).
pub fn shuffled(entries: &[Entry], seed: u64) -> Vec<Entry> {
    let mut out = entries.to_vec();
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    for i in (1..out.len()).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let j = ((state >> 33) as usize) % (i + 1);
        out.swap(i, j);
    }
    out
}

pub fn corroboration(tags: &[String]) -> Option<u64> {
    tags.iter()
        .find_map(|t| t.strip_prefix("corroborated:"))
        .and_then(|n| n.parse().ok())
}
