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

/// xorshift64*: deterministic fixtures without a rand dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
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
            while content.len() < bytes {
                content.push(if rng.below(8) == 0 { '\n' } else { ' ' });
                if rng.below(40) == 0 {
                    content.push_str(&format!("key [REDACTED:secret-{}] used", rng.below(5)));
                } else {
                    content.push_str(WORDS[rng.below(WORDS.len())]);
                }
            }
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
