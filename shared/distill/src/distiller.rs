//! The distiller — RFC 0062 run contract §2 (token budget: "caps input + output token
//! accounting"; `token_budget_exceeded` when the sources cannot be meaningfully distilled within
//! it) and §3 (distil via the RFC 0012 compaction mechanism), with a deterministic distiller
//! behind a trait that ranks what it keeps by what it tells.
//!
//! A [`Distiller`] turns the transactional entries of one memoryRef into the text of one
//! long-term entry under a token budget. [`DeterministicDistiller`] does it with no model and no
//! network; an LLM-backed distiller can implement the same trait later, check its input with
//! [`check_input`] and keep the accounting below.
//!
//! # Budget rule (the same rule is in shared/distill/README.md "Budget rule")
//!
//! Tokens are cl100k_base tokens ([`crate::tokens`]). A source's *input tokens* are the tokens of
//! its `content` ([`source_tokens`]); tags and timestamps are metadata and are not counted. Each
//! fact in the summary *quotes* one source: its newest statement, whose wording is shown. Its
//! other statements are duplicates — dropped from the text, counted in its `xN`, archived like
//! every source, but not quoted. A source is *included* when the summary quotes it. A run's
//! `tokensUsed` is the input tokens of the included sources plus the tokens of the summary, and
//! is never above the budget.
//!
//! (Why one quoted source per fact, not every statement of it: charging all of them makes the
//! best-corroborated facts the dearest. Over 10,000 entries of ~400 bytes, where a short line
//! recurs in ~100 of them, that rule failed a 1,024 budget with `token_budget_exceeded` — the
//! top fact alone needed 10,076 — and kept 3 facts at 20,000; quoting one source keeps 15 and
//! 239, see the crate README's figures.)
//!
//! 1. **Floor.** A budget below [`MIN_TOKEN_BUDGET`] (32) is a request error
//!    ([`DistillError::BudgetBelowFloor`], `validation_error` on `tokenBudget` at the edge). The
//!    floor is the fixed overhead of a summary, rounded up: the smallest document with the
//!    longest suffix, `## (untagged)\n- x (superseded, x4294967295, latest 2026-11-20)\n`, is
//!    27 tokens, and the one-token source it comes from makes 28; 32 leaves a short topic
//!    heading room too.
//! 2. **Every source is consumed.** The run's sources are all of the snapshot: all are archived
//!    (the archive lists every id, so forget and audits reach them), all are the output entry's
//!    provenance, and the watermark passes all of them. None is left for a later run, and none
//!    becomes unreachable (the transactional entries themselves stay readable).
//! 3. **Greedy fill in rank order.** Facts (below) are offered to the summary best first. A
//!    fact costs the input tokens of its quoted source, unless an earlier fact quotes it already,
//!    plus what it adds to the summary: the heading of a section not yet open, and its bullet —
//!    or what it adds to a merged bullet. It is taken when input + output stays within the
//!    budget and the summary within [`MAX_SUMMARY_BYTES`] (the one bound besides the budget: a
//!    summary is one entry); otherwise it is skipped and the next one is tried, so a small
//!    budget still fills up with cheaper facts — but only with facts that carry at least half
//!    the information (below) of the best fact skipped so far, pinned facts excepted: leftover
//!    room never goes to boilerplate while something informative is left out.
//! 4. **Failure.** The top-ranked fact is never skipped: if its bullet does not fit, its text is
//!    shortened (with `…`) at a character boundary outside any `[REDACTED:…]` marker; if not even
//!    one character fits beside its source's input tokens, the run fails with
//!    `token_budget_exceeded`, whose `needed` is a budget that takes that fact (its source, its
//!    heading, its bullet cut to one character; at least the floor). This is the only budget
//!    failure (it needs a top fact from a source larger than the budget), and any budget at or
//!    above `needed` succeeds. A run over no sources, or over
//!    sources that hold no fact (blank or punctuation-only text), fails with `nothing_to_distill`.
//!
//! # Ranking
//!
//! Every non-blank line of a source is a *fact* (markdown bullets are stripped; `#` headings name
//! the section of the lines under them). Facts are folded by a normalised key (whitespace
//! collapsed, lower-cased outside markers, trailing `.!;,:` dropped): a fact's *weight* is the
//! number of sources that state it, its *latest* the newest `createdAt` among them, its wording
//! the newest one. Facts are ranked by a total order:
//!
//! 1. *pinned* first: a fact one of whose sources carries the tag [`PINNED_TAG`] (any case);
//! 2. *superseded* values last (below, "Superseded values");
//! 3. then by score = information + corroboration + recency, integers only (fixed-point
//!    logarithms, no float, so every platform ranks alike):
//!    - **information** `0..=1000`, what the fact tells that the rest of the run does not. It is
//!      counted over the run's *statements* (each source stating a fact, plus the statements an
//!      earlier summary's `xN` stands for; `D` of them). A word's weight is its inverse
//!      statement frequency, `log2((D + 1) / n)` for a word in `n` statements (English stop
//!      words, possessive `'s` and outer punctuation aside): a word in most lines tells little.
//!      A fact's word information sums its words' weights rarest first, each counting half the
//!      one before — a fact is as telling as its most specific words, and common words add next
//!      to nothing. That is multiplied by the rarity of the fact's *line template* — its key
//!      with numbers, markers and Title-case words (names, a sentence's first word) masked —
//!      `log2((D + 1) / m) / log2(D + 1)` for a template stated `m` times: a line stamped out
//!      across many sources (`No action needed; Maria was only confirming her details` nine
//!      times, `Ticket 1017 closed`, `Ticket 1018 closed`, …) is boilerplate, however rare its
//!      slot values. Lines longer than average are normalised as BM25 does with `b = 1/2`
//!      (twice the average length needs 3/2 the information to rank alike; shorter lines gain
//!      nothing, since most filler is short). Scaled so a line stated once whose words nothing
//!      else uses approaches 1000 (500 for one such word);
//!    - **corroboration** at most a quarter of the information on top: `information * (w - 1) /
//!      (4 * (w + 1))` for weight `w`. It amplifies what a fact tells and saturates, so
//!      repetition alone lifts nothing (boilerplate has little information to multiply);
//!    - **recency** `0..=100`: `100 * r / (d - 1)` for the fact's rank `r` among the `d` distinct
//!      `latest` instants of the run (oldest 0; 100 when all are equal) — by rank, so one very
//!      old entry does not squash everyone else's spread; a tenth of the information scale, so
//!      it orders facts that tell about as much;
//! 4. then weight, latest (both descending), key (ascending; keys are unique).
//!
//! # Superseded values
//!
//! Two facts of a run *set the same attribute* when both read `<subject> <copula> <value>`
//! with the same subject words and — when the value opens with a preposition (`on`, `in`, `at`,
//! …) — the same preposition: `Maria's phone number is 555-0101` and `Maria's phone number is
//! now 555-0199` (or `changed to`, `has been updated to`, …; `now` and `currently` after the
//! copula are skipped), but not `The design review is on Tuesday` and `… is in room B`. The
//! copula is the first `is` / `are` or change phrase of the key; the subject must say whose
//! attribute it is: two or more words besides leading articles, at most eight, no clause
//! punctuation, not led by a pronoun or determiner (`Her phone number is …` could be anyone's),
//! and not a bare name (`Tom Lopez is …` without a possessive: that is a person, and `is on
//! holiday` / `is the account owner` are two facts about him). Subjects are compared word for
//! word, so two people's facts are never merged. Of the facts that set one attribute, all but
//! those with the newest `latest` are *superseded*; and `<subject> is no longer <value>`
//! supersedes an older `<subject> is <value>` for any subject that is not a pronoun, since it
//! names the value it ends. A superseded value is never shown as current: it ranks after every
//! current fact (so a tight budget drops it), and when it is kept its suffix says
//! `(superseded, latest D)` and it follows the current value in its bullet. A pinned value that
//! is superseded passes its pin to the current one (the attribute was pinned). A value stated
//! again after the newer one is current again; so is a value an earlier summary marked
//! superseded when a fresh statement repeats it later.
//!
//! # Compression and layout
//!
//! Each fact goes in the section of the tag most of its sources carry (ties: the smallest tag;
//! `compacted-from:*` provenance tags and the `pinned` tag are ignored); sections holding a
//! pinned fact come first, then the others by name, untagged last. Facts of a section whose text
//! starts with the same two words (compared case-insensitively, neither holding a `:`) share one
//! bullet with the common word prefix factored out — at most [`MAX_MERGED_FACTS`] to a bullet,
//! the prefix as long as all of them share and every fact keeps at least one word of its own.
//! Each fact carries a compact suffix: `(latest D)` when one source states it, `(xN, latest D)`
//! when N do, led by `pinned, ` for a pinned fact — `(pinned, latest D)`, `(pinned, xN, latest
//! D)` — so the flag survives in the text (a summary entry is not tagged `pinned`: it holds many
//! facts), or by `superseded, ` for a superseded one. Bullets (by their first fact) and the
//! facts in a bullet are ordered pinned first, superseded last, then by weight, recency, key:
//!
//! ```text
//! ## office
//! - Door code changes monthly (pinned, latest 2026-11-17)
//! ## contact
//! - Maria's phone number is: now 555-0199 (latest 2026-12-10); 555-0101 (superseded, latest 2026-11-23)
//! ## preference
//! - Customer prefers email (x3, latest 2026-11-20)
//! - Alice prefers: tea (latest 2026-11-19); window seats (latest 2026-11-02)
//! ## (untagged)
//! - Order 48213 shipped late (latest 2026-11-19)
//! ```
//!
//! A summary read back as a source (recursive distillation) gives its facts back: a bullet
//! `- text (xN, latest D)` counts with weight N and that date, `(latest D)` with weight 1, a
//! leading `pinned, ` in the suffix makes the fact pinned again (so a pinned fact stays first
//! through any number of re-distillations), a leading `superseded, ` superseded again, and a
//! merged bullet `- P: a (…); b (…)` (two or more items, each with its own suffix) is the facts
//! `P a` and `P b`. Only the suffix counts: the last ` (…)` of a bullet or item, in exactly these
//! spellings — `pinned` or `superseded` anywhere else in a fact's text is text. Summaries of
//! versions 1 to 3 (no superseded mark; no pinned mark before 3; version 1 wrote `(x1, latest
//! D)` too) still read.

use std::borrow::Cow;
use std::cmp::{Ordering, Reverse};
use std::collections::HashMap;

use crate::marker;
use crate::time;
use crate::tokens;
use crate::DistillError;

/// Version of [`DeterministicDistiller`]; part of the archive digest, so any change to its
/// output for the same input must bump it. Version 4: facts ranked by the information their
/// words carry in the run (inverse frequency, lines recurring across many sources discounted),
/// corroboration only amplifying that; an older value of the same attribute marked
/// `superseded, ` and ranked last; pinned facts laid out first; no token cap on the summary
/// below the budget. Version 3: a pinned fact's suffix says so (`pinned, `), and reading it back
/// pins the fact again. Version 2: ranked greedy fill over all sources, merged bullets, compact
/// suffixes, floor 32.
pub const DETERMINISTIC_VERSION: &str = "wop-memory.deterministic/4";

/// Budgets below this are a request error: they cannot hold the fixed overhead of a summary
/// (derivation in the module docs; `floor_covers_the_smallest_document` checks it).
pub const MIN_TOKEN_BUDGET: u32 = 32;

/// Most bytes a summary may take, whatever the budget. The summary is stored as one entry, and
/// every entry a reader gets holds at most 64 KiB of content (the write path's bound; a
/// DynamoDB item allows 400 KB, so the entry bound is the one that binds); 48 KiB leaves 16 KiB
/// for SR-1 carry-forward markers, which can be longer than the secrets they replace. In
/// tokens that is about 12,000 for English text: the most a summary grows to, however large the
/// budget.
pub const MAX_SUMMARY_BYTES: usize = 48 * 1024;

/// Longest fact text in a summary line, in characters, before it is cut with `…`.
pub const MAX_FACT_CHARS: usize = 320;

/// Longest section heading, in characters, before it is cut with `…`.
pub const MAX_HEADING_CHARS: usize = 64;

/// Heading of the section for facts whose sources carry no grouping tag.
pub const UNTAGGED_HEADING: &str = "(untagged)";

/// A source carrying this tag (compared ignoring ASCII case) ranks its facts above all others.
/// The same plain tag the consolidation corpus uses; it is a flag, not a topic, so it never
/// names a section.
pub const PINNED_TAG: &str = "pinned";

/// Most facts merged into one bullet: bounds the bullet a new fact re-renders when it joins (so
/// filling stays linear) and keeps a bullet readable.
pub const MAX_MERGED_FACTS: usize = 8;

/// How a summary suffix marks a pinned fact: `(pinned, latest D)`, `(pinned, xN, latest D)`.
const PINNED_SUFFIX: &str = "pinned, ";

/// How a summary suffix marks a superseded value: `(superseded, latest D)`, `(superseded, xN,
/// latest D)`.
const SUPERSEDED_SUFFIX: &str = "superseded, ";

/// Tag prefixes that are provenance, not topic, and never name a section.
const IGNORED_TAG_PREFIXES: &[&str] = &["compacted-from:"];

/// Ranking weights (module docs, "Ranking"): information dominates, so a newer line never
/// outranks a more informative one by recency alone unless their information is within a
/// tenth of the scale.
const INFORMATION_POINTS: u64 = 1_000;
const RECENCY_POINTS: u64 = 100;
/// Corroboration multiplies information by at most `1 + 1/CORROBORATION_DIVISOR`.
const CORROBORATION_DIVISOR: u64 = 4;

/// Fraction bits of the fixed-point logarithms the information measure is made of.
const LOG_FRACTION_BITS: u32 = 16;

/// English function words (the usual information-retrieval stop list), sorted: they carry no
/// information about anyone, however rare they happen to be in one run — over a hundred
/// entries, `you` in four of them would otherwise look as telling as a name. The distiller's
/// own list, not a shared one: its output may change only with [`DETERMINISTIC_VERSION`].
#[rustfmt::skip]
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by",
    "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from",
    "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him",
    "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me",
    "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only",
    "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so",
    "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there",
    "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was",
    "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with",
    "would", "you", "your", "yours", "yourself", "yourselves",
];

/// Words that make a subject too vague to say whose attribute it is (supersession).
const VAGUE_SUBJECTS: &[&str] = &[
    "he", "she", "it", "they", "we", "i", "you", "him", "her", "his", "its", "their", "our", "my",
    "your", "this", "that", "these", "those", "there", "here", "what", "which", "who", "someone",
    "everyone", "nobody",
];
const ARTICLES: &[&str] = &["the", "a", "an"];
/// What sets a value: the first of these in a fact, as whole words (longest first).
const COPULAS: &[&[&str]] = &[
    &["has", "been", "changed", "to"],
    &["has", "been", "updated", "to"],
    &["has", "changed", "to"],
    &["was", "changed", "to"],
    &["was", "updated", "to"],
    &["changed", "to"],
    &["updated", "to"],
    &["is"],
    &["are"],
];
/// Skipped between the copula and the value: `is now 555-0199` sets the same attribute.
const VALUE_ADVERBS: &[&str] = &["now", "currently"];
/// A preposition opening the value is part of the attribute: `is on Tuesday` and `is in room
/// B` are two attributes of a meeting.
const PREPOSITIONS: &[&str] = &[
    "on", "in", "at", "from", "to", "for", "by", "with", "under", "near", "until", "before",
    "after", "of",
];
/// A longer subject is a clause, not the name of an attribute.
const MAX_SUBJECT_WORDS: usize = 8;

/// A lower bound on the tokens any fact adds to a summary: cl100k_base never puts two
/// space-separated words into one token, and the date suffix alone is two such words.
const SUFFIX_WORDS: u64 = 2;

/// A lower bound on the bytes any fact adds to a summary: `; x (latest YYYY-MM-DD)`.
const MIN_FACT_BYTES: usize = "; x (latest 2026-11-20)".len();

/// One transactional entry offered to a run (already SR-1 redacted, as stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceEntry {
    pub id: String,
    pub content: String,
    pub tags: Vec<String>,
    pub created_at_ms: i64,
}

/// A run's input: the read snapshot of one memoryRef and the (already clamped) budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistillInput {
    pub sources: Vec<SourceEntry>,
    pub token_budget: u32,
}

/// A run's output. All token figures are cl100k_base counts. Every source of the input is
/// consumed by the run (rule step 2); these figures say how much of it made it into the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Distillation {
    /// The long-term entry's content.
    pub summary: String,
    /// `input_tokens + output_tokens`; never above `token_budget`.
    pub tokens_used: u32,
    /// Ids of the sources the summary quotes (rule: one per kept fact, its newest statement),
    /// sorted ascending.
    pub included_source_ids: Vec<String>,
    /// Sum of [`source_tokens`] over the included sources.
    pub input_tokens: u32,
    /// `tokens::count(&summary)`.
    pub output_tokens: u32,
    /// The budget the run was held to.
    pub token_budget: u32,
    /// Newest `createdAt` among all sources: the instant the summary is "as of", and the
    /// deterministic time for the output entry (never the clock, so reruns match).
    pub newest_source_ms: i64,
    /// Facts written into the summary.
    pub facts_kept: u32,
    /// Distinct facts found in the sources (after folding).
    pub facts_found: u32,
}

impl Distillation {
    /// Replaces the summary with its SR-1 carry-forward form (RFC 0012 §D) and recounts.
    ///
    /// Redaction can lengthen text (a marker may be longer than the secret it replaces), so the
    /// budget is checked again; exceeding it fails the run like any other budget failure, before
    /// anything is written.
    pub fn with_summary(mut self, summary: String) -> Result<Self, DistillError> {
        let output = tokens::count_u32(&summary);
        let used = u64::from(self.input_tokens) + u64::from(output);
        if used > u64::from(self.token_budget) {
            return Err(DistillError::TokenBudgetExceeded {
                needed: saturate(used),
                budget: self.token_budget,
            });
        }
        self.summary = summary;
        self.output_tokens = output;
        self.tokens_used = saturate(used);
        Ok(self)
    }
}

/// Turns sources into a long-term summary within a token budget.
///
/// Implementations must be deterministic: the same sources (in any order) and budget give the
/// same [`Distillation`], because the archive is addressed by a digest of exactly those inputs
/// and [`Distiller::version`].
pub trait Distiller {
    /// Identifies the algorithm and its parameters; changing the output for some input requires
    /// a new version.
    fn version(&self) -> &'static str;

    /// Distils `input`, failing with [`DistillError::BudgetBelowFloor`] or
    /// [`DistillError::TokenBudgetExceeded`] when the module's budget rule cannot be met.
    fn distill(&self, input: &DistillInput) -> Result<Distillation, DistillError>;
}

/// Input tokens charged for one source: the cl100k_base tokens of its content.
pub fn source_tokens(source: &SourceEntry) -> u32 {
    tokens::count_u32(&source.content)
}

/// The checks every [`Distiller`] makes before distilling: the budget floor (rule step 1), at
/// least one source, no id twice (a read snapshot never repeats one, so such input is not one).
pub fn check_input(input: &DistillInput) -> Result<(), DistillError> {
    if input.token_budget < MIN_TOKEN_BUDGET {
        return Err(DistillError::BudgetBelowFloor {
            floor: MIN_TOKEN_BUDGET,
            budget: input.token_budget,
        });
    }
    if input.sources.is_empty() {
        return Err(DistillError::NothingToDistill);
    }
    let mut ids: Vec<&str> = input.sources.iter().map(|s| s.id.as_str()).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|pair| pair[0] == pair[1]) {
        return Err(DistillError::DuplicateSourceId);
    }
    Ok(())
}

/// The model-free distiller described in the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeterministicDistiller;

impl Distiller for DeterministicDistiller {
    fn version(&self) -> &'static str {
        DETERMINISTIC_VERSION
    }

    fn distill(&self, input: &DistillInput) -> Result<Distillation, DistillError> {
        check_input(input)?;
        // Newest first, then id: the order decides which wording of a fact is shown.
        let mut order: Vec<&SourceEntry> = input.sources.iter().collect();
        order.sort_by(|a, b| {
            b.created_at_ms
                .cmp(&a.created_at_ms)
                .then_with(|| a.id.cmp(&b.id))
        });
        let facts = Facts::extract(&order);
        if facts.list.is_empty() {
            return Err(DistillError::NothingToDistill);
        }
        let budget = input.token_budget;
        let mut fill = Fill::new(&facts, &order, budget);
        for (rank, &(index, information)) in facts.ranked().iter().enumerate() {
            if fill.exhausted() {
                break;
            }
            fill.offer(index, information, rank == 0)?;
        }
        let done = fill.finish()?;
        Ok(Distillation {
            summary: done.summary,
            tokens_used: saturate(done.input_tokens + done.output_tokens),
            included_source_ids: done.included_source_ids,
            input_tokens: saturate(done.input_tokens),
            output_tokens: saturate(done.output_tokens),
            token_budget: budget,
            newest_source_ms: order.first().map(|s| s.created_at_ms).unwrap_or(0),
            facts_kept: saturate(done.facts_kept as u64),
            facts_found: saturate(facts.list.len() as u64),
        })
    }
}

/// One fact of a summary as a reader of it sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryItem {
    /// The `##` section it sits under; `None` for the untagged section (or no heading).
    pub section: Option<String>,
    /// Its text, a merged bullet's shared prefix put back in front.
    pub text: String,
    /// `N` of `(xN, …)`; 1 for `(latest …)` or no suffix.
    pub weight: u32,
    /// The first millisecond of the suffix's date, if there is one.
    pub latest_ms: Option<i64>,
    /// The suffix starts with `pinned, ` (the fact ranks first when distilled again).
    pub pinned: bool,
    /// The suffix starts with `superseded, `: a newer value of the same attribute replaced this
    /// one, so it is history, not a current fact.
    pub superseded: bool,
}

/// The facts of a summary this distiller wrote, in its order — exactly what recursive
/// distillation reads back (merged bullets split into their facts, suffixes parsed), so a
/// consumer of summaries (a model that rewrites them) need not know the layout.
pub fn summary_items(summary: &str) -> Vec<SummaryItem> {
    let mut out = Vec::new();
    let mut section: Option<String> = None;
    let mut parsed = Vec::new();
    for raw in summary.split('\n') {
        let line = raw.trim();
        if let Some(heading) = heading_of(line) {
            section = Some(collapse(heading)).filter(|name| name != UNTAGGED_HEADING);
            continue;
        }
        split_line(strip_bullet(line), &mut parsed);
        for (text, weight, latest_ms, mark) in parsed.drain(..) {
            if has_substance(&text) {
                out.push(SummaryItem {
                    section: section.clone(),
                    text: text.into_owned(),
                    weight,
                    latest_ms,
                    pinned: mark == Mark::Pinned,
                    superseded: mark == Mark::Superseded,
                });
            }
        }
    }
    out
}

fn saturate(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

// ---------------------------------------------------------------------------------------------
// Fact extraction and folding

struct Fact<'a> {
    /// Display text of the newest occurrence (collapsed when rendered); owned only when it was
    /// rebuilt from a merged bullet of an earlier summary.
    text: Cow<'a, str>,
    key: String,
    weight: u64,
    latest_ms: i64,
    /// (interned section name, sources voting for it).
    votes: Vec<(usize, u32)>,
    /// The source a summary that keeps this fact quotes (index into the run's newest-first
    /// order): its newest statement, whose wording is shown. Its other statements are
    /// duplicates — counted in `weight`, not quoted.
    source: u32,
    /// The last source that stated it, so repeats inside one source count once.
    last_source: u32,
    /// Some source stating it carries [`PINNED_TAG`], or an earlier summary marked it pinned,
    /// or it is the current value of an attribute whose superseded value was pinned.
    pinned: bool,
    /// The newest date an earlier summary marked it superseded, and the newest statement not
    /// so marked: a fresh statement after the mark makes the value current again.
    marked_superseded_ms: Option<i64>,
    unmarked_ms: Option<i64>,
    /// A newer value of the same attribute is in the run, or an earlier summary said so (module
    /// docs, "Superseded values"). Ranked after every current fact, marked in its suffix.
    superseded: bool,
}

struct Facts<'a> {
    list: Vec<Fact<'a>>,
    /// Interned section names (sanitised tags and headings).
    names: Vec<String>,
}

/// Where the lines of a source currently belong.
#[derive(Clone, Copy)]
enum Section {
    /// The source's own grouping tags.
    EntryTags,
    /// A `#` heading inside the source named this section.
    Named(usize),
    /// A `# (untagged)` heading (or an ignored tag as heading).
    Untagged,
}

/// What a summary suffix says about a fact besides its count and date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Plain,
    Pinned,
    Superseded,
}

/// One fact read off a line: its text, weight, (for summary lines) date, and the mark its
/// summary suffix carried.
type Parsed<'a> = (Cow<'a, str>, u32, Option<i64>, Mark);

impl<'a> Facts<'a> {
    fn extract(order: &[&'a SourceEntry]) -> Self {
        let mut list: Vec<Fact<'a>> = Vec::new();
        let mut by_key: HashMap<String, usize> = HashMap::new();
        let mut names: Vec<String> = Vec::new();
        let mut name_ids: HashMap<String, usize> = HashMap::new();
        let mut intern = |name: String, names: &mut Vec<String>| -> usize {
            *name_ids.entry(name).or_insert_with_key(|name| {
                names.push(name.clone());
                names.len() - 1
            })
        };
        let mut parsed: Vec<Parsed<'a>> = Vec::new();

        for (source_index, source) in order.iter().enumerate() {
            let source_index = u32::try_from(source_index).unwrap_or(u32::MAX);
            let pinned = source.tags.iter().any(|t| is_pinned(t));
            let mut entry_tags: Vec<usize> = source
                .tags
                .iter()
                .filter_map(|tag| grouping_name(tag))
                .map(|name| intern(name, &mut names))
                .collect();
            entry_tags.sort_unstable();
            entry_tags.dedup();

            let mut section = Section::EntryTags;
            for raw in source.content.split('\n') {
                let line = raw.trim();
                if let Some(heading) = heading_of(line) {
                    section = match grouping_name(heading) {
                        Some(name) if name != UNTAGGED_HEADING => {
                            Section::Named(intern(name, &mut names))
                        }
                        _ => Section::Untagged,
                    };
                    continue;
                }
                split_line(strip_bullet(line), &mut parsed);
                for (text, weight, dated, mark) in parsed.drain(..) {
                    if !has_substance(&text) {
                        continue;
                    }
                    let key = fact_key(&text);
                    let latest = dated.unwrap_or(source.created_at_ms);
                    let index = match by_key.get(&key) {
                        Some(&index) => index,
                        None => {
                            list.push(Fact {
                                text,
                                key: String::new(),
                                weight: 0,
                                latest_ms: latest,
                                votes: Vec::new(),
                                source: source_index,
                                last_source: u32::MAX,
                                pinned: false,
                                marked_superseded_ms: None,
                                unmarked_ms: None,
                                superseded: false,
                            });
                            by_key.insert(key, list.len() - 1);
                            list.len() - 1
                        }
                    };
                    let fact = &mut list[index];
                    // Repeats inside one source count once.
                    if fact.last_source == source_index {
                        continue;
                    }
                    fact.last_source = source_index;
                    fact.weight += u64::from(weight);
                    fact.latest_ms = fact.latest_ms.max(latest);
                    fact.pinned |= pinned || mark == Mark::Pinned;
                    let seen = if mark == Mark::Superseded {
                        &mut fact.marked_superseded_ms
                    } else {
                        &mut fact.unmarked_ms
                    };
                    *seen = Some(seen.map_or(latest, |t| t.max(latest)));
                    let voters: &[usize] = match section {
                        Section::EntryTags => &entry_tags,
                        Section::Named(ref id) => std::slice::from_ref(id),
                        Section::Untagged => &[],
                    };
                    for &name in voters {
                        match fact.votes.iter_mut().find(|(n, _)| *n == name) {
                            Some((_, count)) => *count += 1,
                            None => fact.votes.push((name, 1)),
                        }
                    }
                }
            }
        }
        // Each key lives once, in the map while folding; hand it to its fact for the ranking
        // tie-breaks. (Assignment by index, so the map's iteration order cannot leak.)
        for (key, index) in by_key {
            list[index].key = key;
        }
        resolve_superseded(&mut list);
        Facts { list, names }
    }

    /// The section a fact is filed under: its most-voted name, ties to the smallest name.
    fn section_of(&self, fact: &Fact<'_>) -> Option<&str> {
        fact.votes
            .iter()
            .map(|&(name, votes)| (votes, self.names[name].as_str()))
            .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(a.1)))
            .map(|(_, name)| name)
    }

    /// Fact indices best first, by the total order of the module docs ("Ranking"), each with
    /// its information points.
    fn ranked(&self) -> Vec<(usize, u64)> {
        let mut instants: Vec<i64> = self.list.iter().map(|f| f.latest_ms).collect();
        instants.sort_unstable();
        instants.dedup();
        let steps = (instants.len() as u64).saturating_sub(1);

        // The run's statements: every source stating a fact, and every statement an earlier
        // summary's `xN` stands for. Word and line frequencies are counted over them.
        let statements: u64 = self.list.iter().map(|f| f.weight.max(1)).sum();
        let scale = log2_fixed(statements.saturating_add(1));
        let mut word_statements: HashMap<&str, u64> = HashMap::new();
        let mut line_ids: HashMap<u64, usize> = HashMap::new();
        let mut line_statements: Vec<u64> = Vec::new();
        let mut line_of: Vec<usize> = Vec::with_capacity(self.list.len());
        let mut words: Vec<&str> = Vec::new();
        let mut all_words: u64 = 0;
        for fact in &self.list {
            let w = fact.weight.max(1);
            distinct_words(&fact.key, &mut words);
            all_words += words.len() as u64;
            for &word in &words {
                *word_statements.entry(word).or_insert(0) += w;
            }
            let id = *line_ids
                .entry(line_template(&fact.key, &fact.text))
                .or_insert_with(|| {
                    line_statements.push(0);
                    line_statements.len() - 1
                });
            line_statements[id] += w;
            line_of.push(id);
        }
        drop(line_ids);
        let facts = (self.list.len() as u64).max(1);

        let idf = |count: u64| scale.saturating_sub(log2_fixed(count.max(1)));
        // Each word's weight once (each value on its own, so the map's order cannot leak).
        for count in word_statements.values_mut() {
            *count = idf(*count);
        }
        let word_weight = word_statements;
        let mut idfs: Vec<u64> = Vec::new();
        let mut ranks: Vec<Rank<'_>> = self
            .list
            .iter()
            .enumerate()
            .map(|(index, fact)| {
                let position = instants.partition_point(|&t| t < fact.latest_ms) as u64;
                // All instants equal: everything is as recent as it gets.
                let recency = (RECENCY_POINTS * position)
                    .checked_div(steps)
                    .unwrap_or(RECENCY_POINTS);
                distinct_words(&fact.key, &mut words);
                idfs.clear();
                idfs.extend(words.iter().map(|w| {
                    word_weight
                        .get(w)
                        .copied()
                        .unwrap_or_else(|| idf(fact.weight))
                }));
                idfs.sort_unstable_by(|a, b| b.cmp(a));
                // Rarest word first, each later one counting half the one before: a fact is as
                // informative as its most specific words, and common words add next to nothing.
                let words_info: u64 = idfs.iter().take(64).enumerate().map(|(i, &v)| v >> i).sum();
                let line_info = idf(line_statements[line_of[index]]);
                // BM25's length normalisation with b = 1/2, for lines longer than average only:
                // one twice the average length needs 3/2 the information to rank alike, since
                // it costs about twice as much; a short line gains nothing by being short (most
                // filler is).
                let n = words.len() as u64;
                let (num, den) = if facts * n <= all_words {
                    (1, 1)
                } else {
                    (2 * all_words, all_words + facts * n)
                };
                // words_info < 2 * scale and line_info <= scale: information <= the points.
                let information = (u128::from(INFORMATION_POINTS)
                    * u128::from(words_info)
                    * u128::from(line_info)
                    * u128::from(num))
                .checked_div(2 * u128::from(scale) * u128::from(scale) * u128::from(den))
                .unwrap_or(0);
                let information = u64::try_from(information).unwrap_or(INFORMATION_POINTS);
                let w = fact.weight.max(1);
                let corroboration = information.saturating_mul(w - 1)
                    / CORROBORATION_DIVISOR.saturating_mul(w.saturating_add(1));
                Rank {
                    pinned: fact.pinned,
                    superseded: fact.superseded,
                    score: information + corroboration + recency,
                    weight: fact.weight,
                    latest_ms: fact.latest_ms,
                    key: fact.key.as_str(),
                    index,
                    information,
                }
            })
            .collect();
        ranks.sort_unstable_by(Rank::best_first);
        ranks
            .into_iter()
            .map(|r| (r.index, r.information))
            .collect()
    }
}

/// A fact's place in the ranking (module docs, "Ranking").
struct Rank<'k> {
    pinned: bool,
    superseded: bool,
    score: u64,
    weight: u64,
    latest_ms: i64,
    /// Unique per fact, so the order is total.
    key: &'k str,
    index: usize,
    information: u64,
}

impl Rank<'_> {
    /// `Less` when `self` ranks before `other`.
    fn best_first(&self, other: &Self) -> Ordering {
        other
            .pinned
            .cmp(&self.pinned)
            .then(self.superseded.cmp(&other.superseded))
            .then(other.score.cmp(&self.score))
            .then(other.weight.cmp(&self.weight))
            .then(other.latest_ms.cmp(&self.latest_ms))
            .then(self.key.cmp(other.key))
    }
}

/// `log2(n)` in fixed point with [`LOG_FRACTION_BITS`] fraction bits, by integer arithmetic
/// only (the same bits on every platform); 0 for `n <= 1`.
fn log2_fixed(n: u64) -> u64 {
    if n <= 1 {
        return 0;
    }
    let whole = u64::from(n.ilog2());
    // The mantissa n / 2^whole in [1, 2), as a Q62 number; squaring it doubles its logarithm,
    // so each squaring yields one fraction bit.
    let mut m = if whole <= 62 {
        u128::from(n) << (62 - whole)
    } else {
        u128::from(n) >> (whole - 62)
    };
    let one = 1_u128 << 62;
    let mut out = whole << LOG_FRACTION_BITS;
    for bit in (0..LOG_FRACTION_BITS).rev() {
        m = (m * m) >> 62;
        if m >= 2 * one {
            m >>= 1;
            out |= 1 << bit;
        }
    }
    out
}

/// The distinct content words of a fact key, outer punctuation and a possessive `'s` trimmed,
/// stop words left out, into `out` (sorted).
fn distinct_words<'k>(key: &'k str, out: &mut Vec<&'k str>) {
    out.clear();
    out.extend(
        key.split(' ')
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
            .map(|w| {
                w.strip_suffix("'s")
                    .or_else(|| w.strip_suffix("’s"))
                    .unwrap_or(w)
            })
            .filter(|w| !w.is_empty() && STOP_WORDS.binary_search(w).is_err()),
    );
    out.sort_unstable();
    out.dedup();
}

/// The line a fact is an instance of, as a 64-bit FNV-1a hash (deterministic on every
/// platform, and nothing allocated per fact): its key with every word that holds a digit or a
/// marker, or is written in Title case in the fact's text (a name, or a sentence's first word),
/// masked, and punctuation-only words dropped. Lines a template stamps out — `Ticket 1017
/// closed`, `Hiro needs a parking permit`, `No action needed; Maria was only confirming her
/// details` — share one. (Two templates colliding in 64 bits would only share a count.)
fn line_template(key: &str, text: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash = (hash ^ u64::from(b)).wrapping_mul(PRIME);
        }
    };
    let mut shown = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty());
    for word in key.split(' ') {
        let title_case = shown.next().is_some_and(|w| {
            let mut chars = w.chars();
            chars.next().is_some_and(char::is_uppercase) && chars.any(char::is_lowercase)
        });
        let marker = word.contains("[REDACTED:");
        // Punctuation alone (`:)`, `-`) is not a word: `Thanks!` and `Thanks :)` are one line.
        if !marker && !word.chars().any(char::is_alphanumeric) {
            continue;
        }
        // A separator no word holds, so word boundaries cannot shift.
        eat(&[0]);
        if title_case || marker || word.bytes().any(|b| b.is_ascii_digit()) {
            eat(b"#");
        } else {
            eat(word.as_bytes());
        }
    }
    hash
}

/// A fact key read as `<subject> <copula> <value>`: the subject's word count and where the
/// value starts (a `now` or `currently` after the copula skipped), for the first copula of the
/// key, when the subject is one that says whose attribute it is — not a pronoun or a
/// determiner, at most [`MAX_SUBJECT_WORDS`] words, no clause punctuation — and a value follows.
fn split_statement(words: &[&str]) -> Option<(usize, usize)> {
    let (at, copula_len) = (1..words.len()).find_map(|i| {
        COPULAS
            .iter()
            .find(|c| words[i..].starts_with(c))
            .map(|c| (i, c.len()))
    })?;
    let subject = &words[..at];
    if subject.len() > MAX_SUBJECT_WORDS || VAGUE_SUBJECTS.contains(&subject[0]) {
        return None;
    }
    if subject
        .iter()
        .any(|w| w.contains([',', ';', ':', '(', ')', '"', '?', '!']) || w.contains("[REDACTED:"))
    {
        return None;
    }
    let mut value = at + copula_len;
    while value < words.len() && VALUE_ADVERBS.contains(&words[value]) {
        value += 1;
    }
    (value < words.len()).then_some((at, value))
}

/// The attribute a fact sets (module docs, "Superseded values"): its subject's words, `=`, and
/// a preposition opening the value; `None` unless the subject names an attribute of someone or
/// something — two or more words besides articles, and not a bare name.
fn attribute_head(key: &str, text: &str) -> Option<String> {
    let words: Vec<&str> = key.split(' ').collect();
    let (at, value) = split_statement(&words)?;
    let subject = &words[..at];
    let leading_articles = subject.iter().take_while(|w| ARTICLES.contains(w)).count();
    let named = &subject[leading_articles..];
    if named.len() < 2 {
        return None;
    }
    // A bare proper name (`Tom Lopez is happy`, `Tom Lopez is a customer`) is a person, not an
    // attribute of one: without a possessive, a subject written all in capitals is refused.
    let possessive = named
        .iter()
        .any(|w| w.ends_with("'s") || w.ends_with("’s") || w.ends_with("s'"));
    if !possessive {
        let shown: Vec<&str> = text
            .split(|c: char| c.is_whitespace() || c.is_control())
            .filter(|w| !w.is_empty())
            .skip(leading_articles)
            .take(named.len())
            .collect();
        if shown.len() == named.len() && shown.iter().all(|w| w.starts_with(char::is_uppercase)) {
            return None;
        }
    }
    let mut head = subject.join(" ");
    head.push_str(" =");
    if PREPOSITIONS.contains(&words[value]) {
        words.get(value + 1)?;
        head.push(' ');
        head.push_str(words[value]);
    }
    Some(head)
}

/// For `<subject> is no longer <value>`: the statement it ends, `<subject> = <value>`; for any
/// other statement, what it states in the same form. Any subject that is not a pronoun will do:
/// the newer fact names the very value it ends.
fn ended_and_stated(key: &str) -> Option<(bool, String)> {
    let words: Vec<&str> = key.split(' ').collect();
    let (at, mut value) = split_statement(&words)?;
    let ends = words[value..].starts_with(&["no", "longer"]);
    if ends {
        value += 2;
    }
    let rest = words.get(value..).filter(|r| !r.is_empty())?;
    Some((
        ends,
        format!("{} = {}", words[..at].join(" "), rest.join(" ")),
    ))
}

/// Whether a key may hold a copula at all: most facts do not, and are not split into words.
fn may_state(key: &str) -> bool {
    key.contains(" is ") || key.contains(" are ") || key.contains(" to ")
}

/// Marks every value that a newer value of the same attribute replaces (or a newer `no
/// longer` ends), and every value an earlier summary marked superseded that no fresh statement
/// has repeated since. The pin of a superseded value passes to the current one: it was the
/// attribute that was pinned.
fn resolve_superseded(list: &mut [Fact<'_>]) {
    let mut by_head: HashMap<String, Vec<usize>> = HashMap::new();
    let mut by_statement: HashMap<String, Vec<usize>> = HashMap::new();
    let mut endings: Vec<(usize, String)> = Vec::new();
    for (index, fact) in list.iter().enumerate() {
        if !may_state(&fact.key) {
            continue;
        }
        if let Some(head) = attribute_head(&fact.key, &fact.text) {
            by_head.entry(head).or_default().push(index);
        }
        match ended_and_stated(&fact.key) {
            Some((true, ended)) => endings.push((index, ended)),
            Some((false, stated)) => by_statement.entry(stated).or_default().push(index),
            None => {}
        }
    }
    // Each fact is in at most one group, a group's outcome does not depend on the order of its
    // members, and marks only ever become true: the maps' iteration order cannot leak.
    let mut superseded = vec![false; list.len()];
    let mut pin_to: Vec<usize> = Vec::new();
    for members in by_head.values().filter(|m| m.len() > 1) {
        let newest = members
            .iter()
            .map(|&i| list[i].latest_ms)
            .max()
            .unwrap_or(i64::MIN);
        let pin_moves = members
            .iter()
            .any(|&i| list[i].latest_ms < newest && list[i].pinned);
        for &i in members {
            if list[i].latest_ms < newest {
                superseded[i] = true;
            } else if pin_moves {
                pin_to.push(i);
            }
        }
    }
    for (ending, ended) in &endings {
        for &i in by_statement.get(ended).into_iter().flatten() {
            if list[i].latest_ms < list[*ending].latest_ms {
                superseded[i] = true;
            }
        }
    }
    for i in pin_to {
        list[i].pinned = true;
    }
    for (fact, replaced) in list.iter_mut().zip(superseded) {
        let marked = fact
            .marked_superseded_ms
            .is_some_and(|marked| fact.unmarked_ms.is_none_or(|fresh| fresh <= marked));
        if replaced || marked {
            fact.superseded = true;
            fact.pinned = false;
        }
    }
}

/// Order of facts inside a section and a bullet: pinned first, superseded last, then weight,
/// recency (both descending), key.
fn layout_order(a: &Fact<'_>, b: &Fact<'_>) -> Ordering {
    (
        Reverse(a.pinned),
        a.superseded,
        Reverse(a.weight),
        Reverse(a.latest_ms),
        &a.key,
    )
        .cmp(&(
            Reverse(b.pinned),
            b.superseded,
            Reverse(b.weight),
            Reverse(b.latest_ms),
            &b.key,
        ))
}

fn is_pinned(tag: &str) -> bool {
    tag.trim().eq_ignore_ascii_case(PINNED_TAG)
}

/// A tag's section name: control characters and runs of whitespace collapsed to one space,
/// trimmed; `None` for provenance tags, the pinned flag and tags that are blank after that.
fn grouping_name(tag: &str) -> Option<String> {
    if IGNORED_TAG_PREFIXES.iter().any(|p| tag.starts_with(p)) || is_pinned(tag) {
        return None;
    }
    let name = collapse(tag);
    (!name.is_empty()).then_some(name)
}

/// `Some(title)` for a markdown heading line (`#` to `######`, a space, a title).
fn heading_of(line: &str) -> Option<&str> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let title = rest.trim();
    (!title.is_empty()).then_some(title)
}

fn strip_bullet(line: &str) -> &str {
    for bullet in ["- ", "* ", "+ ", "• "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            return rest.trim_start();
        }
    }
    line
}

/// Splits a trailing ` (xN, latest YYYY-MM-DD)` or ` (latest YYYY-MM-DD)`, either led by
/// `pinned, ` or `superseded, `, written by an earlier distillation ([`push_suffix`]),
/// returning the text, its weight (1 when absent or without `xN`), the date's first
/// millisecond and the mark. Only the last ` (…)` closing the text is a suffix, and only in
/// exactly these spellings.
fn split_suffix(body: &str) -> (&str, u32, Option<i64>, Mark) {
    let plain = (body, 1, None, Mark::Plain);
    let Some(open) = body.rfind(" (") else {
        return plain;
    };
    let Some(inner) = body[open + 2..].strip_suffix(')') else {
        return plain;
    };
    let (mark, inner) = if let Some(rest) = inner.strip_prefix(PINNED_SUFFIX) {
        (Mark::Pinned, rest)
    } else if let Some(rest) = inner.strip_prefix(SUPERSEDED_SUFFIX) {
        (Mark::Superseded, rest)
    } else {
        (Mark::Plain, inner)
    };
    let (weight, date) = match inner.split_once(", latest ") {
        Some((count, date)) => {
            let Some(digits) = count.strip_prefix('x') else {
                return plain;
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return plain;
            }
            match digits.parse::<u32>() {
                Ok(weight) if weight > 0 => (weight, date),
                _ => return plain,
            }
        }
        None => match inner.strip_prefix("latest ") {
            Some(date) => (1, date),
            None => return plain,
        },
    };
    let text = body[..open].trim_end();
    match time::parse_date(date) {
        Some(day) if !text.is_empty() => (text, weight, Some(day), mark),
        _ => plain,
    }
}

/// The facts of one line into `out`: the facts of a merged bullet of an earlier summary
/// ([`split_merged`]), else the line with its suffix split off ([`split_suffix`]).
fn split_line<'a>(body: &'a str, out: &mut Vec<Parsed<'a>>) {
    out.clear();
    if !split_merged(body, out) {
        out.clear();
        let (text, weight, dated, mark) = split_suffix(body);
        out.push((Cow::Borrowed(text), weight, dated, mark));
    }
}

/// Reads `P: a (…); b (…)` — a prefix of two or more words without `:`, then two or more items
/// each ending in a summary suffix, separated by `; ` — as the facts `P a`, `P b`. Anything else
/// is not a merged bullet (`false`); an item may itself contain `; `, since only a `; ` right
/// after a valid suffix separates.
fn split_merged<'a>(body: &'a str, out: &mut Vec<Parsed<'a>>) -> bool {
    let Some((prefix, rest)) = body.split_once(": ") else {
        return false;
    };
    if prefix.contains(':') || prefix.split(' ').filter(|w| !w.is_empty()).count() < 2 {
        return false;
    }
    let mut start = 0;
    for (at, _) in rest.match_indices("); ") {
        let (text, weight, dated, mark) = split_suffix(&rest[start..=at]);
        if dated.is_some() {
            out.push((Cow::Owned(format!("{prefix} {text}")), weight, dated, mark));
            start = at + 3;
        }
    }
    let (text, weight, dated, mark) = split_suffix(&rest[start..]);
    if dated.is_none() || out.is_empty() {
        return false;
    }
    out.push((Cow::Owned(format!("{prefix} {text}")), weight, dated, mark));
    true
}

/// A fact needs a letter, a digit or a marker; rules like `---` and lone punctuation are not
/// facts.
fn has_substance(text: &str) -> bool {
    text.chars().any(char::is_alphanumeric) || !marker::spans(text).is_empty()
}

/// The words of a text as a fact is compared and printed: whitespace and control characters
/// both separate them.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
}

/// Whitespace and control characters collapsed to single spaces, trimmed.
fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in words(text) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// The folding key: collapsed, lower-cased except inside markers (secret ids are
/// case-sensitive), trailing sentence punctuation dropped. One pass, one allocation: markers hold
/// no whitespace, so each lies inside a single word.
fn fact_key(text: &str) -> String {
    let mut key = String::with_capacity(text.len());
    for word in words(text) {
        if !key.is_empty() {
            key.push(' ');
        }
        let mut at = 0;
        if word.contains("[REDACTED:") {
            for span in marker::spans(word) {
                key.extend(word[at..span.start].chars().flat_map(char::to_lowercase));
                key.push_str(&word[span.clone()]);
                at = span.end;
            }
        }
        key.extend(word[at..].chars().flat_map(char::to_lowercase));
    }
    let keep = key
        .trim_end_matches(|c: char| matches!(c, '.' | '!' | ';' | ',' | ':') || c.is_whitespace())
        .len();
    key.truncate(keep);
    key
}

// ---------------------------------------------------------------------------------------------
// Filling and rendering

/// A fact placed in the summary.
struct Member {
    fact: usize,
    /// Display text: collapsed, cut at [`MAX_FACT_CHARS`] (or shorter, for a shortened top fact),
    /// ending in `…` when cut.
    text: String,
}

/// One bullet: a single fact, or facts sharing a word prefix.
struct Line {
    section: usize,
    /// Sorted by [`layout_order`].
    members: Vec<Member>,
    /// Words of the factored prefix (0 for a single fact).
    prefix_words: usize,
    /// `- …\n`.
    text: String,
    tokens: u64,
}

struct OpenSection {
    name: Option<String>,
    heading: String,
}

/// What taking one fact changes, worked out before anything is changed.
struct Plan {
    /// An open section, or a new one: (name, heading, its tokens).
    section: Result<usize, (Option<String>, String, u64)>,
    /// The bullet the fact joins, if any.
    joins: Option<usize>,
    members: Vec<Member>,
    text: String,
    tokens: u64,
    prefix_words: usize,
    /// Group key under which later facts may join a new bullet.
    group: Option<String>,
}

/// The greedy fill of rule step 3: the summary so far and what it has cost.
struct Fill<'f, 'a> {
    facts: &'f Facts<'a>,
    sources: &'f [&'a SourceEntry],
    budget: u64,
    /// Per source, lazily: whitespace-separated words (a lower bound of its tokens, since
    /// cl100k_base never joins two of them into one token) and its exact tokens.
    source_words: Vec<Option<u64>>,
    source_tokens: Vec<Option<u64>>,
    included: Vec<bool>,
    input: u64,
    output: u64,
    bytes: usize,
    sections: Vec<OpenSection>,
    section_ids: HashMap<Option<String>, usize>,
    lines: Vec<Line>,
    /// Per section: group key -> the bullet with room for another fact.
    groups: Vec<HashMap<String, usize>>,
    /// (bullet, fact) in the order taken.
    picks: Vec<(usize, usize)>,
    /// The most information points of a fact skipped for want of room: leftover room is only
    /// filled with facts carrying at least half as much.
    skipped_information: u64,
}

/// The filled summary and its accounting.
struct Done {
    summary: String,
    input_tokens: u64,
    output_tokens: u64,
    included_source_ids: Vec<String>,
    facts_kept: usize,
}

impl<'f, 'a> Fill<'f, 'a> {
    fn new(facts: &'f Facts<'a>, sources: &'f [&'a SourceEntry], budget: u32) -> Self {
        Self {
            facts,
            sources,
            budget: u64::from(budget),
            source_words: vec![None; sources.len()],
            source_tokens: vec![None; sources.len()],
            included: vec![false; sources.len()],
            input: 0,
            output: 0,
            bytes: 0,
            sections: Vec::new(),
            section_ids: HashMap::new(),
            lines: Vec::new(),
            groups: Vec::new(),
            picks: Vec::new(),
            skipped_information: 0,
        }
    }

    fn words_of(&mut self, source: u32) -> u64 {
        let i = source as usize;
        *self.source_words[i]
            .get_or_insert_with(|| self.sources[i].content.split_whitespace().count() as u64)
    }

    fn tokens_of(&mut self, source: u32) -> u64 {
        let i = source as usize;
        *self.source_tokens[i].get_or_insert_with(|| u64::from(source_tokens(self.sources[i])))
    }

    /// Output tokens still free under the budget.
    fn room(&self) -> u64 {
        self.budget.saturating_sub(self.input + self.output)
    }

    /// No fact can be added any more: every fact adds at least one word and its suffix, in
    /// tokens and in bytes.
    fn exhausted(&self) -> bool {
        !self.picks.is_empty()
            && (self.room() < 1 + SUFFIX_WORDS || self.bytes + MIN_FACT_BYTES > MAX_SUMMARY_BYTES)
    }

    /// Offers one fact (rule steps 3 and 4): takes it if it fits, skips it if not; the top
    /// fact (`first`) is shortened to fit or fails the run.
    fn offer(&mut self, index: usize, information: u64, first: bool) -> Result<(), DistillError> {
        let facts = self.facts;
        let fact = &facts.list[index];
        if !fact.pinned && information.saturating_mul(2) < self.skipped_information {
            return Ok(());
        }
        let taken = self.place(index, first)?;
        if !taken {
            self.skipped_information = self.skipped_information.max(information);
        }
        Ok(())
    }

    /// Takes the fact if it fits (`true`), leaves it if not (`false`); shortens the top fact
    /// (`first`) to fit or fails the run.
    fn place(&mut self, index: usize, first: bool) -> Result<bool, DistillError> {
        let facts = self.facts;
        let fact = &facts.list[index];
        let section_name = facts.section_of(fact).map(str::to_owned);
        let section = self.section_ids.get(&section_name).copied();
        let display = collapse(&fact.text);
        let (cut, was_cut) = marker::truncate_chars(&display, MAX_FACT_CHARS);
        let text = if was_cut {
            format!("{cut}…")
        } else {
            cut.to_owned()
        };
        let group = group_key(&text);
        let joins = section
            .zip(group.as_deref())
            .and_then(|(s, g)| self.groups[s].get(g).copied());

        // Cheap lower bounds before any tokenizing: words never share a token.
        let words = text.split(' ').count() as u64;
        let own_words = match joins {
            Some(line) => words
                .saturating_sub(self.lines[line].prefix_words as u64)
                .max(1),
            None => words,
        };
        let least = own_words + SUFFIX_WORDS + u64::from(section.is_none());
        // The quoted source, unless an earlier fact already quotes it.
        let new_source = Some(fact.source).filter(|&s| !self.included[s as usize]);
        if !first {
            if least > self.room() {
                return Ok(false);
            }
            let new_words = new_source.map_or(0, |s| self.words_of(s));
            if self.input + new_words + self.output + least > self.budget {
                return Ok(false);
            }
        }

        let (section_plan, head_tokens, head_bytes) = match section {
            Some(s) => (Ok(s), 0, 0),
            None => {
                let heading = heading_line(section_name.as_deref());
                let tokens = tokens::count(&heading) as u64;
                let bytes = heading.len();
                (Err((section_name, heading, tokens)), tokens, bytes)
            }
        };
        let mut members: Vec<Member> = match joins {
            Some(line) => self.lines[line]
                .members
                .iter()
                .map(|m| Member {
                    fact: m.fact,
                    text: m.text.clone(),
                })
                .collect(),
            None => Vec::new(),
        };
        let (old_tokens, old_bytes) = joins
            .map(|line| (self.lines[line].tokens, self.lines[line].text.len()))
            .unwrap_or((0, 0));
        members.push(Member { fact: index, text });
        members.sort_by(|a, b| layout_order(&facts.list[a.fact], &facts.list[b.fact]));
        let (line_text, prefix_words) = render_line(facts, &members);
        if !first && self.bytes - old_bytes + head_bytes + line_text.len() > MAX_SUMMARY_BYTES {
            // Skipped before tokenizing: where the byte bound binds, that is every fact left.
            return Ok(false);
        }
        let line_tokens = tokens::count(&line_text) as u64;
        let output_after = self.output - old_tokens + head_tokens + line_tokens;
        if !first && self.input + output_after > self.budget {
            // Skipped before its source is tokenized: where the budget binds, that is most.
            return Ok(false);
        }
        let new_input = new_source.map_or(0, |s| self.tokens_of(s));
        let input_after = self.input + new_input;
        let fits = |tokens: u64, bytes: usize| {
            let output = self.output - old_tokens + head_tokens + tokens;
            input_after + output <= self.budget
                && self.bytes - old_bytes + head_bytes + bytes <= MAX_SUMMARY_BYTES
        };
        let plan = if fits(line_tokens, line_text.len()) {
            Plan {
                section: section_plan,
                joins,
                members,
                text: line_text,
                tokens: line_tokens,
                prefix_words,
                group,
            }
        } else if !first {
            return Ok(false);
        } else {
            // The top fact alone (nothing is open yet): shorten it, or fail the run.
            let shortened = shorten_to_fit(cut, was_cut, |candidate| {
                let line = render_line(
                    facts,
                    &[Member {
                        fact: index,
                        text: candidate.to_owned(),
                    }],
                )
                .0;
                let tokens = tokens::count(&line) as u64;
                fits(tokens, line.len()).then_some((line, tokens))
            });
            let Some((member_text, (line, tokens))) = shortened else {
                let at = marker::cut_points(cut)
                    .first()
                    .copied()
                    .unwrap_or(cut.len());
                let shortest = shortened_text(cut, was_cut, at);
                let line = render_line(
                    facts,
                    &[Member {
                        fact: index,
                        text: shortest,
                    }],
                )
                .0;
                let needed = new_input + head_tokens + tokens::count(&line) as u64;
                return Err(DistillError::TokenBudgetExceeded {
                    needed: saturate(needed.max(u64::from(MIN_TOKEN_BUDGET))),
                    budget: saturate(self.budget),
                });
            };
            Plan {
                section: section_plan,
                joins: None,
                members: vec![Member {
                    fact: index,
                    text: member_text,
                }],
                text: line,
                tokens,
                prefix_words: 0,
                // A shortened fact keeps its bullet to itself.
                group: None,
            }
        };
        self.apply(index, new_source, plan);
        Ok(true)
    }

    fn apply(&mut self, fact: usize, new_source: Option<u32>, plan: Plan) {
        let section = match plan.section {
            Ok(s) => s,
            Err((name, heading, tokens)) => {
                self.output += tokens;
                self.bytes += heading.len();
                self.sections.push(OpenSection {
                    name: name.clone(),
                    heading,
                });
                self.groups.push(HashMap::new());
                self.section_ids.insert(name, self.sections.len() - 1);
                self.sections.len() - 1
            }
        };
        if let Some(s) = new_source {
            self.included[s as usize] = true;
            self.input += self.tokens_of(s);
        }
        let line = match plan.joins {
            Some(line) => {
                let old = &mut self.lines[line];
                self.output = self.output - old.tokens + plan.tokens;
                self.bytes = self.bytes - old.text.len() + plan.text.len();
                old.members = plan.members;
                old.prefix_words = plan.prefix_words;
                old.text = plan.text;
                old.tokens = plan.tokens;
                if old.members.len() >= MAX_MERGED_FACTS {
                    self.groups[section].retain(|_, l| *l != line);
                }
                line
            }
            None => {
                self.output += plan.tokens;
                self.bytes += plan.text.len();
                self.lines.push(Line {
                    section,
                    members: plan.members,
                    prefix_words: plan.prefix_words,
                    text: plan.text,
                    tokens: plan.tokens,
                });
                let line = self.lines.len() - 1;
                if let Some(group) = plan.group {
                    self.groups[section].insert(group, line);
                }
                line
            }
        };
        self.picks.push((line, fact));
    }

    /// Lays the summary out and recounts it whole. Lines start with `#`/`-` and end in `\n`, so
    /// per-line prices add up exactly (see `tokens`); the recount is the figure reported, and
    /// the loop a guard should that ever not hold: it drops the last fact taken until the
    /// summary fits.
    fn finish(mut self) -> Result<Done, DistillError> {
        loop {
            let summary = self.layout();
            let output = tokens::count(&summary) as u64;
            let mut included = vec![false; self.sources.len()];
            for line in &self.lines {
                for member in &line.members {
                    included[self.facts.list[member.fact].source as usize] = true;
                }
            }
            let mut input = 0;
            let mut ids = Vec::new();
            for (s, _) in included.iter().enumerate().filter(|(_, &on)| on) {
                input += self.tokens_of(s as u32);
                ids.push(self.sources[s].id.clone());
            }
            if input + output <= self.budget && summary.len() <= MAX_SUMMARY_BYTES {
                ids.sort_unstable();
                return Ok(Done {
                    summary,
                    input_tokens: input,
                    output_tokens: output,
                    included_source_ids: ids,
                    facts_kept: self.picks.len(),
                });
            }
            match self.picks.pop() {
                Some((line, fact)) if !self.picks.is_empty() => {
                    let line = &mut self.lines[line];
                    line.members.retain(|m| m.fact != fact);
                    let (text, prefix_words) = render_line(self.facts, &line.members);
                    line.text = text;
                    line.prefix_words = prefix_words;
                }
                _ => {
                    return Err(DistillError::TokenBudgetExceeded {
                        needed: saturate(input + output),
                        budget: saturate(self.budget),
                    })
                }
            }
        }
    }

    /// Sections holding a pinned fact first, then by name with untagged last; bullets in a
    /// section by their first fact (so pinned facts lead the summary).
    fn layout(&self) -> String {
        let mut pinned = vec![false; self.sections.len()];
        for line in &self.lines {
            if line.members.iter().any(|m| self.facts.list[m.fact].pinned) {
                pinned[line.section] = true;
            }
        }
        let mut section_rank: Vec<usize> = (0..self.sections.len()).collect();
        section_rank.sort_by(|&a, &b| {
            let (na, nb) = (&self.sections[a].name, &self.sections[b].name);
            (!pinned[a], na.is_none(), na).cmp(&(!pinned[b], nb.is_none(), nb))
        });
        let mut position = vec![0; self.sections.len()];
        for (rank, &section) in section_rank.iter().enumerate() {
            position[section] = rank;
        }
        let mut order: Vec<&Line> = self
            .lines
            .iter()
            .filter(|l| !l.members.is_empty())
            .collect();
        order.sort_by(|a, b| {
            position[a.section].cmp(&position[b.section]).then_with(|| {
                layout_order(
                    &self.facts.list[a.members[0].fact],
                    &self.facts.list[b.members[0].fact],
                )
            })
        });
        let mut out = String::new();
        let mut current = None;
        for line in order {
            if current != Some(line.section) {
                out.push_str(&self.sections[line.section].heading);
                current = Some(line.section);
            }
            out.push_str(&line.text);
        }
        out
    }
}

/// The key under which facts of a section share a bullet: the first two words, lower-cased,
/// for a text of three or more words whose first two hold no `:` (so a merged bullet reads
/// back unambiguously); `None` for a text that never merges.
fn group_key(text: &str) -> Option<String> {
    let mut words = text.split(' ');
    let (first, second) = (words.next()?, words.next()?);
    words.next()?;
    if first.contains(':') || second.contains(':') {
        return None;
    }
    let mut key: String = first.chars().flat_map(char::to_lowercase).collect();
    key.push(' ');
    key.extend(second.chars().flat_map(char::to_lowercase));
    Some(key)
}

fn same_word(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_lowercase)
        .eq(b.chars().flat_map(char::to_lowercase))
}

/// `- text (suffix)\n`, or for several facts `- P: a (suffix); b (suffix)\n` with `P` the longest
/// word prefix they all share (no word of it holding a `:`, every fact keeping a word of its
/// own). Returns the line and the number of words factored out.
fn render_line(facts: &Facts<'_>, members: &[Member]) -> (String, usize) {
    let mut out = String::from("- ");
    let mut prefix_words = 0;
    if let [only] = members {
        out.push_str(&only.text);
        push_suffix(&mut out, &facts.list[only.fact]);
    } else if let Some(first) = members.first() {
        let words: Vec<Vec<&str>> = members
            .iter()
            .map(|m| m.text.split(' ').collect())
            .collect();
        let shortest = words.iter().map(Vec::len).min().unwrap_or(0);
        let lead: Vec<&str> = first.text.split(' ').collect();
        while prefix_words + 1 < shortest
            && !lead[prefix_words].contains(':')
            && words
                .iter()
                .all(|w| same_word(w[prefix_words], lead[prefix_words]))
        {
            prefix_words += 1;
        }
        out.push_str(&lead[..prefix_words].join(" "));
        out.push_str(": ");
        for (i, (member, own)) in members.iter().zip(&words).enumerate() {
            if i > 0 {
                out.push_str("; ");
            }
            out.push_str(&own[prefix_words..].join(" "));
            push_suffix(&mut out, &facts.list[member.fact]);
        }
    }
    out.push('\n');
    (out, prefix_words)
}

/// ` (latest D)` for one source, ` (xN, latest D)` for N; after `(`, `pinned, ` for a pinned
/// fact and `superseded, ` for a superseded one ([`split_suffix`] reads them all back).
fn push_suffix(out: &mut String, fact: &Fact<'_>) {
    let mark = if fact.superseded {
        Mark::Superseded
    } else if fact.pinned {
        Mark::Pinned
    } else {
        Mark::Plain
    };
    write_suffix(out, fact.weight, fact.latest_ms, mark);
}

fn write_suffix(out: &mut String, weight: u64, latest_ms: i64, mark: Mark) {
    out.push_str(" (");
    match mark {
        Mark::Pinned => out.push_str(PINNED_SUFFIX),
        Mark::Superseded => out.push_str(SUPERSEDED_SUFFIX),
        Mark::Plain => {}
    }
    if weight > 1 {
        out.push_str(&format!("x{weight}, "));
    }
    out.push_str("latest ");
    out.push_str(&time::format_date(latest_ms));
    out.push(')');
}

fn heading_line(section: Option<&str>) -> String {
    let title = match section {
        Some(name) => {
            let (cut, was_cut) = marker::truncate_chars(name, MAX_HEADING_CHARS);
            if was_cut {
                format!("{cut}…")
            } else {
                cut.to_owned()
            }
        }
        None => UNTAGGED_HEADING.to_owned(),
    };
    format!("## {title}\n")
}

/// `text` cut at byte `at` (a marker-safe cut point), with `…` unless it is the whole, uncut text.
fn shortened_text(text: &str, was_cut: bool, at: usize) -> String {
    if at >= text.len() && !was_cut {
        text.to_owned()
    } else {
        format!("{}…", &text[..at])
    }
}

/// The longest marker-safe prefix of `text` that `fits` accepts, with what `fits` returned, or
/// `None` if not even one unit does.
fn shorten_to_fit<T>(
    text: &str,
    was_cut: bool,
    fits: impl Fn(&str) -> Option<T>,
) -> Option<(String, T)> {
    let points = marker::cut_points(text);
    let (mut lo, mut hi) = (0_usize, points.len());
    let mut best = None;
    // Token counts grow (near-)monotonically with the prefix, so bisection finds the longest
    // fitting prefix; each candidate is checked exactly, so a non-monotone step only costs length.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let candidate = shortened_text(text, was_cut, points[mid]);
        match fits(&candidate) {
            Some(found) => {
                best = Some((candidate, found));
                lo = mid + 1;
            }
            None => hi = mid,
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_fold_case_space_and_trailing_punctuation_but_not_marker_ids() {
        assert_eq!(
            fact_key("  Customer   prefers EMAIL.  "),
            "customer prefers email"
        );
        assert_eq!(
            fact_key("customer prefers email!"),
            "customer prefers email"
        );
        assert_eq!(
            fact_key("Key [REDACTED:AbC] used"),
            "key [REDACTED:AbC] used"
        );
        assert_ne!(fact_key("[REDACTED:AbC]"), fact_key("[REDACTED:abc]"));
    }

    #[test]
    fn suffix_round_trips() {
        let day = time::parse_date("2026-11-20");
        // The fact, what its parenthesis holds before `latest 2026-11-20`, and what is read back.
        for (fact, marks, n, mark) in [
            ("Customer prefers email", "x3, ", 3, Mark::Plain),
            ("Customer prefers email", "", 1, Mark::Plain),
            // Version 1 wrote `x1` too.
            ("Customer prefers email", "x1, ", 1, Mark::Plain),
            // Version 3 marks pinned facts.
            ("Door code is 4411", "pinned, ", 1, Mark::Pinned),
            ("Door code is 4411", "pinned, x3, ", 3, Mark::Pinned),
            // Version 4 marks superseded values.
            ("Door code is 4411", "superseded, ", 1, Mark::Superseded),
            ("Door code is 4411", "superseded, x2, ", 2, Mark::Superseded),
            // Only the suffix position pins: the word elsewhere, or an earlier parenthesis, is text.
            (
                "Note (pinned, latest 2026-11-19) on the board",
                "",
                1,
                Mark::Plain,
            ),
            ("The pinned note moved", "x2, ", 2, Mark::Plain),
        ] {
            let text = format!("{fact} ({marks}latest 2026-11-20)");
            assert_eq!(split_suffix(&text), (fact, n, day, mark), "{text}");
        }
        for plain in [
            "Paid (pinned)",
            "Paid (pinned, x3)",
            "Paid (Pinned, latest 2026-11-20)",
            "Paid (pinned,latest 2026-11-20)",
            "Paid (pinned, pinned, latest 2026-11-20)",
            "Paid (x3, pinned, latest 2026-11-20)",
            "Paid (latest 2026-11-20, pinned)",
            "Paid (pinned, latest 2026-11-20) today",
            "(pinned, latest 2026-11-20)",
            "Paid (pinned, superseded, latest 2026-11-20)",
            "Paid (superseded, pinned, latest 2026-11-20)",
            "Paid (superseded)",
            "Paid (Superseded, latest 2026-11-20)",
            "Paid (x3)",
            "Paid (x0, latest 2026-11-20)",
            "Paid (xA, latest 2026-11-20)",
            "Paid (x3, latest 2026-13-20)",
            "Paid (3, latest 2026-11-20)",
            "Paid (newest 2026-11-20)",
            "Paid (latest 2026-11-20",
            "(x3, latest 2026-11-20)",
            "(latest 2026-11-20)",
        ] {
            assert_eq!(
                split_suffix(plain),
                (plain, 1, None, Mark::Plain),
                "{plain}"
            );
        }
    }

    proptest::proptest! {
        /// Whatever a fact's text, the suffix written after it reads back as exactly what was
        /// written, and the text before it comes back whole (a fact whose own text ends in
        /// something suffix-like keeps it: only the last ` (…)` is the suffix).
        #[test]
        fn written_suffixes_read_back(
            text in "[a-zA-Z0-9(),;: -]{0,24}[a-z0-9.)]",
            weight in 1_u64..=u64::from(u32::MAX),
            day in 0_i64..40_000,
            mark in proptest::sample::select(vec![Mark::Plain, Mark::Pinned, Mark::Superseded]),
            tail in proptest::option::of(
                proptest::sample::select(vec![" (pinned)", " (pinned, latest 2026-11-20)", " (superseded, latest 2026-11-20)", " (x2, latest 2026-11-20)"])
            ),
        ) {
            let text = format!("{}{}", collapse(&text), tail.unwrap_or(""));
            proptest::prop_assume!(!text.is_empty());
            let latest_ms = day * 86_400_000 + 12_345;
            let mut line = text.clone();
            write_suffix(&mut line, weight, latest_ms, mark);
            let day_start = day * 86_400_000;
            let weight = u32::try_from(weight).unwrap_or(u32::MAX);
            proptest::prop_assert_eq!(
                split_suffix(&line),
                (text.as_str(), weight, Some(day_start), mark)
            );
        }
    }

    fn facts_of(line: &str) -> Vec<(String, u32, Option<i64>, Mark)> {
        let mut out = Vec::new();
        split_line(line, &mut out);
        out.into_iter()
            .map(|(t, w, d, p)| (t.into_owned(), w, d, p))
            .collect()
    }

    #[test]
    fn merged_bullets_read_back_as_their_facts() {
        let d1 = time::parse_date("2026-11-19");
        let d2 = time::parse_date("2026-11-20");
        assert_eq!(
            facts_of("Alice prefers: tea (latest 2026-11-19); window seats; quiet (x2, latest 2026-11-20)"),
            vec![
                ("Alice prefers tea".to_owned(), 1, d1, Mark::Plain),
                ("Alice prefers window seats; quiet".to_owned(), 2, d2, Mark::Plain),
            ]
        );
        // Each item carries its own mark.
        assert_eq!(
            facts_of("Alice prefers: tea (pinned, latest 2026-11-19); coffee (superseded, latest 2026-11-20); water (pinned, x2, latest 2026-11-20)"),
            vec![
                ("Alice prefers tea".to_owned(), 1, d1, Mark::Pinned),
                ("Alice prefers coffee".to_owned(), 1, d2, Mark::Superseded),
                ("Alice prefers water".to_owned(), 2, d2, Mark::Pinned),
            ]
        );
        // Not merged bullets: one item, a one-word prefix, a prefix with `:`, an item without
        // its suffix.
        for single in [
            "Note: call Bob (latest 2026-11-19)",
            "Alice: tea (latest 2026-11-19); coffee (latest 2026-11-20)",
            "Re: Alice prefers: tea (latest 2026-11-19); coffee (latest 2026-11-20)",
            "Alice prefers: tea (latest 2026-11-19); coffee",
        ] {
            let (text, weight, date, mark) = split_suffix(single);
            assert_eq!(
                facts_of(single),
                vec![(text.to_owned(), weight, date, mark)],
                "{single}"
            );
        }
    }

    #[test]
    fn summary_items_follow_the_layout() {
        let summary = "## preference\n\
                       - Customer prefers email (x3, latest 2026-11-20)\n\
                       - Alice prefers: tea (latest 2026-11-19); window seats (pinned, x2, latest 2026-11-18)\n\
                       ## (untagged)\n\
                       - Key is [REDACTED:db]… (pinned, latest 2026-11-19)\n";
        let items = summary_items(summary);
        let short: Vec<(Option<&str>, &str, u32, bool)> = items
            .iter()
            .map(|i| (i.section.as_deref(), i.text.as_str(), i.weight, i.pinned))
            .collect();
        assert_eq!(
            short,
            vec![
                (Some("preference"), "Customer prefers email", 3, false),
                (Some("preference"), "Alice prefers tea", 1, false),
                (Some("preference"), "Alice prefers window seats", 2, true),
                (None, "Key is [REDACTED:db]…", 1, true),
            ]
        );
        assert_eq!(items[3].latest_ms, time::parse_date("2026-11-19"));
    }

    #[test]
    fn group_keys_need_three_words_and_no_colon_up_front() {
        assert_eq!(
            group_key("Alice Prefers tea").as_deref(),
            Some("alice prefers")
        );
        assert_eq!(group_key("Alice prefers"), None);
        assert_eq!(group_key("Note: Alice prefers tea"), None);
        assert_eq!(group_key("Alice prefers: tea"), None);
    }

    #[test]
    fn fixed_point_logarithms_are_exact_to_the_last_bit_kept() {
        let one = 1_u64 << LOG_FRACTION_BITS;
        assert_eq!(log2_fixed(0), 0);
        assert_eq!(log2_fixed(1), 0);
        assert_eq!(log2_fixed(2), one);
        assert_eq!(log2_fixed(1 << 40), 40 * one);
        // Truncated, never rounded up: log2(3) = 1.5849625… = 103872.6… / 65536.
        assert_eq!(log2_fixed(3), 103_872);
        assert_eq!(log2_fixed(u64::MAX), 64 * one - 1);
        // Monotone, so a rarer word never carries less.
        let mut last = 0;
        for n in 1..5_000_u64 {
            let v = log2_fixed(n);
            assert!(v >= last, "{n}");
            let exact = (n as f64).log2() * one as f64;
            assert!((exact - v as f64).abs() < 1.0, "{n}: {v} vs {exact}");
            last = v;
        }
    }

    #[test]
    fn word_lists_are_sorted_and_lower_case() {
        // `binary_search` needs the order; keys are lower case.
        assert!(STOP_WORDS.windows(2).all(|p| p[0] < p[1]));
        assert!(STOP_WORDS
            .iter()
            .all(|w| w.chars().all(|c| c.is_ascii_lowercase())));
        let mut words = Vec::new();
        distinct_words("you and i saw maria's dog at the park", &mut words);
        assert_eq!(words, vec!["dog", "maria", "park", "saw"]);
    }

    #[test]
    fn templates_mask_numbers_names_and_markers() {
        let t = |text: &str| line_template(&fact_key(text), text);
        assert_eq!(t("Ticket 1017 closed"), t("Ticket 1018 closed"));
        assert_eq!(t("Ticket 1017 closed"), t("Order 55 closed"));
        assert_eq!(
            t("No action needed; Maria was only confirming her details."),
            t("No action needed; Tom was only confirming her details")
        );
        assert_eq!(t("Thanks!"), t("Thanks :)"));
        assert_eq!(t("Key [REDACTED:k-1] rotated"), t("Door 12 rotated"));
        // Capitals alone (an acronym, shouting) are not a name.
        assert_ne!(t("VAT id on file"), t("Tax id on file"));
        // Words stay words.
        assert_ne!(t("ab c"), t("a bc"));
        assert_ne!(
            t("Maria is allergic to penicillin"),
            t("Maria is allergic to peanuts")
        );
    }

    #[test]
    fn attribute_heads_need_a_subject_that_names_whose_attribute() {
        let head = |text: &str| attribute_head(&fact_key(text), text);
        let phone = Some("maria's phone number =".to_owned());
        assert_eq!(head("Maria's phone number is 555-0101."), phone);
        assert_eq!(head("Maria's phone number is now 555-0199"), phone);
        assert_eq!(head("Maria's phone number changed to 555-0199"), phone);
        assert_eq!(
            head("Maria's phone number has been updated to 555-0199"),
            phone
        );
        assert_eq!(
            head("The office wifi password is tulip").as_deref(),
            Some("the office wifi password =")
        );
        assert_eq!(
            head("The design review is on Tuesday").as_deref(),
            Some("the design review = on")
        );
        for none in [
            "Her phone number is 555-0101",
            "Maria is allergic to penicillin",
            "The office is closed",
            "Tom Lopez is on holiday",
            "No action needed; Maria was only confirming her details",
            "Maria, the customer, is happy",
            "Maria's phone number is",
            "The design review is on",
            "Invoice 7719 was paid",
        ] {
            assert_eq!(head(none), None, "{none}");
        }
        // A possessive makes a name's attribute.
        assert_eq!(
            head("Tom Lopez's phone number is 555-0142").as_deref(),
            Some("tom lopez's phone number =")
        );
        assert_eq!(
            ended_and_stated("ivan is no longer vegetarian"),
            Some((true, "ivan = vegetarian".to_owned()))
        );
        assert_eq!(
            ended_and_stated("ivan is vegetarian"),
            Some((false, "ivan = vegetarian".to_owned()))
        );
        assert_eq!(ended_and_stated("he is no longer vegetarian"), None);
    }

    #[test]
    fn headings_and_bullets() {
        assert_eq!(heading_of("## preference"), Some("preference"));
        assert_eq!(heading_of("#hashtag"), None);
        assert_eq!(heading_of("####### seven"), None);
        assert_eq!(strip_bullet("- item"), "item");
        assert_eq!(strip_bullet("-item"), "-item");
        assert_eq!(grouping_name(" Pinned "), None);
        assert_eq!(grouping_name("compacted-from:r1"), None);
    }

    /// 2026-11-20T00:00:00.000Z
    const DAY_2026_11_20: i64 = 1_795_132_800_000;

    #[test]
    fn floor_covers_the_smallest_document() {
        // The fixed overhead (module docs, rule step 1): the untagged heading and one bullet of a
        // one-character fact with the longest suffix (superseded — the top fact is superseded
        // only when every fact is, read back so from an earlier summary — with the largest count
        // the suffix reads back), plus its one-token source.
        let mut smallest = String::from("## (untagged)\n- x");
        write_suffix(
            &mut smallest,
            u64::from(u32::MAX),
            DAY_2026_11_20,
            Mark::Superseded,
        );
        smallest.push('\n');
        assert_eq!(
            smallest,
            "## (untagged)\n- x (superseded, x4294967295, latest 2026-11-20)\n"
        );
        let overhead = tokens::count(&smallest) + tokens::count("x");
        assert_eq!(overhead, 28);
        assert!(overhead <= MIN_TOKEN_BUDGET as usize);
        // The pinned mark, for the record.
        assert_eq!(
            tokens::count("## (untagged)\n- x (pinned, x4294967295, latest 2026-11-20)\n") + 1,
            27
        );
        // Version 2's longest suffix, for the record: the pinned mark costs three tokens.
        assert_eq!(
            tokens::count("## (untagged)\n- x (x4294967295, latest 2026-11-20)\n") + 1,
            24
        );
        // The lower bound the fill skips by: a suffix is at least two words and two tokens.
        assert!(tokens::count(" (latest 2026-11-20)") as u64 >= SUFFIX_WORDS);
    }
}
