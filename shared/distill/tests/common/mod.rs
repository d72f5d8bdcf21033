//! Fixtures shared by the integration tests.
#![allow(dead_code)]

use distill::SourceEntry;

/// 2026-11-20T00:00:00.000Z
pub const DAY0: i64 = 1_795_132_800_000;
pub const DAY: i64 = 86_400_000;
pub const REF: &str = "workspaces/t-1/agents/a-1/memories";
pub const TENANT: &str = "t-1";

pub fn entry(id: &str, content: &str, tags: &[&str], created_at_ms: i64) -> SourceEntry {
    SourceEntry {
        id: id.to_owned(),
        content: content.to_owned(),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        created_at_ms,
    }
}

/// The benches' seeded generator, so a test's seed draws the corpus a bench's would.
pub use bench_support::Rng;

/// How a seeded entry's detail is written after its recurring fact: words of `vocab`, each
/// after a space or, one time in `break_one_in`, after `line_break`; one time in `marker_one_in`
/// an SR-1 marker instead of a word.
pub struct Detail<'a> {
    pub vocab: &'a [&'a str],
    pub break_one_in: usize,
    pub line_break: &'a str,
    pub marker_one_in: usize,
    pub marker: fn(&mut Rng) -> String,
}

impl Detail<'_> {
    /// Appends detail to `content` until it holds at least `bytes` bytes.
    pub fn pad(&self, rng: &mut Rng, content: &mut String, bytes: usize) {
        while content.len() < bytes {
            content.push_str(if rng.below(self.break_one_in) == 0 {
                self.line_break
            } else {
                " "
            });
            if rng.below(self.marker_one_in) == 0 {
                content.push_str(&(self.marker)(rng));
            } else {
                content.push_str(self.vocab[rng.below(self.vocab.len())]);
            }
        }
    }
}

/// The vocabulary of the seeded corpus (the benchmark adds function words to it).
pub const WORDS: &[&str] = &[
    "customer",
    "prefers",
    "email",
    "invoice",
    "refund",
    "order",
    "shipped",
    "late",
    "billing",
    "address",
    "phone",
    "follow-up",
    "Monday",
    "account",
    "upgrade",
    "plan",
    "support",
    "ticket",
    "resolved",
    "escalated",
    "warehouse",
    "Berlin",
    "discount",
    "renewal",
    "contract",
];
pub const TAGS: &[&str] = &["preference", "billing", "shipping", "support", "contract"];

/// `n` entries of roughly `bytes` bytes each: a pool of recurring facts (so folding has work to
/// do) plus per-entry detail, a tag on most, and the odd `[REDACTED:…]` marker.
pub fn corpus(n: usize, bytes: usize, seed: u64) -> Vec<SourceEntry> {
    let mut rng = Rng(seed | 1);
    let pool: Vec<String> = (0..200)
        .map(|i| {
            let words: Vec<&str> = (0..6).map(|_| WORDS[rng.below(WORDS.len())]).collect();
            format!("Fact {i}: {}.", words.join(" "))
        })
        .collect();
    (0..n)
        .map(|i| {
            let mut content = pool[rng.below(pool.len())].clone();
            Detail {
                vocab: WORDS,
                break_one_in: 8,
                line_break: "\n",
                marker_one_in: 40,
                marker: |rng| format!("key [REDACTED:secret-{}] used", rng.below(5)),
            }
            .pad(&mut rng, &mut content, bytes);
            let tags: Vec<&str> = if rng.below(5) == 0 {
                vec![]
            } else {
                vec![TAGS[rng.below(TAGS.len())]]
            };
            entry(
                &format!("e{i:07}"),
                &content,
                &tags,
                DAY0 + (i as i64) * 60_000,
            )
        })
        .collect()
}
