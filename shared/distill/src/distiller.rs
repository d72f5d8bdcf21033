//! The distiller — RFC 0062 run contract §2 (token budget) and §3 (distil via the RFC 0012
//! compaction mechanism), with a deterministic distiller behind a trait.
//!
//! A [`Distiller`] turns the transactional entries of one memoryRef into the text of one
//! long-term entry under a token budget. [`DeterministicDistiller`] does it with no model and no
//! network; an LLM-backed distiller can implement the same trait later and keep the budget rule
//! below by calling [`select_sources`].
//!
//! # Budget rule (the same text is in the README)
//!
//! Tokens are cl100k_base tokens ([`crate::tokens`]). A source's *input tokens* are the tokens of
//! its `content` ([`source_tokens`]); tags and timestamps are metadata and are not counted. A
//! run's `tokensUsed` is the input tokens of the sources it used plus the tokens of the summary it
//! produced, and is never above the budget.
//!
//! 1. **Floor.** A budget below [`MIN_TOKEN_BUDGET`] (1,024) fails with `token_budget_exceeded`.
//! 2. **Output reserve.** `reserve = min(MAX_SUMMARY_TOKENS, budget / 2)` — 4,096 tokens, or half
//!    of a budget under 8,192 — is kept for the summary while inputs are chosen.
//! 3. **Input choice.** Sources are taken newest first (`createdAt` descending, then id ascending),
//!    whole entries only, while their input tokens add up to at most `budget - reserve`. The
//!    first source that does not fit ends the choice: no older entry is taken after it, so the used
//!    set is always "everything newer than some instant". Sources left out are the oldest ones.
//! 4. **Failure.** If not even the newest source fits (`its tokens > budget - reserve`) the run fails
//!    with `token_budget_exceeded`; `needed` is the smallest budget that would pass steps 1–3 for
//!    that source alone ([`min_budget_for`]). It also fails with `nothing_to_distill` when there
//!    are no sources or the chosen ones hold no fact.
//! 5. **Output.** The summary may use `min(MAX_SUMMARY_TOKENS, budget - input tokens)` tokens (at
//!    least the reserve) and [`MAX_SUMMARY_BYTES`] bytes. Facts are added whole, in rank order,
//!    until the next one would not fit; if the very first one does not fit it is shortened at a
//!    character boundary outside any `[REDACTED:…]` marker. With a budget at or above the floor
//!    the first fact always fits, so step 4 is the only budget failure: the allowance is then at
//!    least 512 tokens, while the shortest first line — a heading of at most 64 characters (256
//!    bytes) plus one character or one whole marker (at most 139 bytes), the ellipsis and the
//!    `(xN, latest …)` suffix — stays under 512 bytes, and no token is shorter than a byte.
//!
//! # What the deterministic summary keeps
//!
//! Every non-blank line of a source is a *fact* (markdown bullets are stripped; `#` headings name
//! the section of the lines under them). Facts are folded by a normalised key (whitespace
//! collapsed, lower-cased outside markers, trailing `.!;,:` dropped); a fact's *weight* is the
//! number of sources that state it, and its *latest* is the newest `createdAt` among them. The
//! kept facts alternate between the most corroborated (weight, then recency) and the most recent
//! (recency, then weight), so neither a long-standing preference nor yesterday's change is
//! crowded out. Each fact goes in the section of the tag most of its sources carry (ties: the
//! smallest tag; `compacted-from:*` provenance tags are ignored); sections are sorted by name,
//! untagged last, facts within a section by weight, recency, key:
//!
//! ```text
//! ## preference
//! - Customer prefers email (x3, latest 2026-11-20)
//! ## (untagged)
//! - Order 48213 shipped late (x1, latest 2026-11-19)
//! ```
//!
//! A summary line `- text (xN, latest YYYY-MM-DD)` read back as a source counts with weight N and
//! that date, so distilling earlier distillations (recursive distillation) keeps the counts.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::marker;
use crate::time;
use crate::tokens;
use crate::DistillError;

/// Version of [`DeterministicDistiller`]; part of the archive digest, so any change to its
/// output for the same input must bump it.
pub const DETERMINISTIC_VERSION: &str = "wop-memory.deterministic/1";

/// Budgets below this fail outright: under ~1k tokens there is no room for a summary worth
/// loading, and above it the first summary line provably fits (see the module docs).
pub const MIN_TOKEN_BUDGET: u32 = 1_024;

/// Most tokens a summary may take, and the output reserve for budgets of 8,192 and more.
pub const MAX_SUMMARY_TOKENS: u32 = 4_096;

/// Most bytes a summary may take: half the host's 64 KiB entry limit, leaving room for SR-1
/// carry-forward markers (longer than the secrets they replace) and the entry envelope.
pub const MAX_SUMMARY_BYTES: usize = 32 * 1024;

/// Longest fact text in a summary line, in characters, before it is cut with `…`.
pub const MAX_FACT_CHARS: usize = 320;

/// Longest section heading, in characters, before it is cut with `…`.
pub const MAX_HEADING_CHARS: usize = 64;

/// Heading of the section for facts whose sources carry no grouping tag.
pub const UNTAGGED_HEADING: &str = "(untagged)";

/// Tag prefixes that are provenance, not topic, and never name a section.
const IGNORED_TAG_PREFIXES: &[&str] = &["compacted-from:"];

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

/// A run's output. All token figures are cl100k_base counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Distillation {
    /// The long-term entry's content.
    pub summary: String,
    /// `input_tokens + output_tokens`; never above `token_budget`.
    pub tokens_used: u32,
    /// Ids of the sources the summary was distilled from, sorted ascending.
    pub used_source_ids: Vec<String>,
    /// Sum of [`source_tokens`] over the used sources.
    pub input_tokens: u32,
    /// `tokens::count(&summary)`.
    pub output_tokens: u32,
    /// The budget the run was held to.
    pub token_budget: u32,
    /// Newest `createdAt` among the used sources: the instant the summary is "as of", and the
    /// deterministic time for the output entry (never the clock, so reruns match).
    pub newest_source_ms: i64,
    /// Facts written into the summary.
    pub facts_kept: u32,
    /// Distinct facts found in the used sources (after folding).
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

    /// Distils `input`, failing with [`DistillError::TokenBudgetExceeded`] when the module's
    /// budget rule cannot be met.
    fn distill(&self, input: &DistillInput) -> Result<Distillation, DistillError>;
}

/// Input tokens charged for one source: the cl100k_base tokens of its content.
pub fn source_tokens(source: &SourceEntry) -> u32 {
    tokens::count_u32(&source.content)
}

/// Tokens kept back for the summary while inputs are chosen (rule step 2).
pub fn output_reserve(budget: u32) -> u32 {
    MAX_SUMMARY_TOKENS.min(budget / 2)
}

/// Smallest budget with which a newest source of `input_tokens` tokens is chosen (rule steps
/// 1–3): the least `b >= MIN_TOKEN_BUDGET` with `input_tokens <= b - output_reserve(b)`.
pub fn min_budget_for(input_tokens: u32) -> u32 {
    let t = u64::from(input_tokens);
    let least = if t == 0 {
        0
    } else {
        // b - min(M, b/2) = max(b - M, ceil(b/2)), so b >= min(2t - 1, t + M).
        (2 * t - 1).min(t + u64::from(MAX_SUMMARY_TOKENS))
    };
    saturate(least.max(u64::from(MIN_TOKEN_BUDGET)))
}

/// The sources a run uses (rule steps 1–4), newest first, with their summed input tokens.
///
/// Shared by every [`Distiller`] so they all choose inputs the same documented way. Also rejects
/// empty input and duplicate ids.
pub fn select_sources(input: &DistillInput) -> Result<(Vec<&SourceEntry>, u32), DistillError> {
    if input.sources.is_empty() {
        return Err(DistillError::NothingToDistill);
    }
    let mut ids: Vec<&str> = input.sources.iter().map(|s| s.id.as_str()).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|pair| pair[0] == pair[1]) {
        return Err(DistillError::DuplicateSourceId);
    }
    let mut order: Vec<&SourceEntry> = input.sources.iter().collect();
    order.sort_by(|a, b| {
        b.created_at_ms
            .cmp(&a.created_at_ms)
            .then_with(|| a.id.cmp(&b.id))
    });

    let budget = input.token_budget;
    let limit = u64::from(budget - output_reserve(budget));
    let mut used = 0_u64;
    let mut taken = 0;
    let mut newest_tokens = 0;
    if budget >= MIN_TOKEN_BUDGET {
        for (i, source) in order.iter().enumerate() {
            let t = source_tokens(source);
            if i == 0 {
                newest_tokens = t;
            }
            if used + u64::from(t) > limit {
                break;
            }
            used += u64::from(t);
            taken += 1;
        }
    } else {
        newest_tokens = order.first().map(|s| source_tokens(s)).unwrap_or(0);
    }
    if taken == 0 {
        return Err(DistillError::TokenBudgetExceeded {
            needed: min_budget_for(newest_tokens),
            budget,
        });
    }
    order.truncate(taken);
    Ok((order, saturate(used)))
}

/// The model-free distiller described in the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeterministicDistiller;

impl Distiller for DeterministicDistiller {
    fn version(&self) -> &'static str {
        DETERMINISTIC_VERSION
    }

    fn distill(&self, input: &DistillInput) -> Result<Distillation, DistillError> {
        let (used, input_tokens) = select_sources(input)?;
        let budget = input.token_budget;
        let facts = Facts::extract(&used);
        if facts.list.is_empty() {
            return Err(DistillError::NothingToDistill);
        }
        let cap = u64::from(MAX_SUMMARY_TOKENS)
            .min(u64::from(budget).saturating_sub(u64::from(input_tokens)));
        let (summary, output_tokens, kept) = render(&facts, cap, input_tokens, budget)?;
        let mut used_source_ids: Vec<String> = used.iter().map(|s| s.id.clone()).collect();
        used_source_ids.sort_unstable();
        let newest_source_ms = used.first().map(|s| s.created_at_ms).unwrap_or(0);
        Ok(Distillation {
            summary,
            tokens_used: saturate(u64::from(input_tokens) + output_tokens),
            used_source_ids,
            input_tokens,
            output_tokens: saturate(output_tokens),
            token_budget: budget,
            newest_source_ms,
            facts_kept: saturate(kept as u64),
            facts_found: saturate(facts.list.len() as u64),
        })
    }
}

fn saturate(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

// ---------------------------------------------------------------------------------------------
// Fact extraction and folding

struct Fact<'a> {
    /// Display text of the newest occurrence (raw slice; collapsed when rendered).
    text: &'a str,
    key: String,
    weight: u64,
    latest_ms: i64,
    /// (interned section name, sources voting for it).
    votes: Vec<(usize, u32)>,
    /// Index of the last source that stated this fact, so repeats inside one source count once.
    last_source: usize,
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

impl<'a> Facts<'a> {
    fn extract(used: &[&'a SourceEntry]) -> Self {
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

        for (source_index, source) in used.iter().enumerate() {
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
                let body = strip_bullet(line);
                let (text, weight, dated) = split_suffix(body);
                if !has_substance(text) {
                    continue;
                }
                let key = fact_key(text);
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
                            last_source: usize::MAX,
                        });
                        by_key.insert(key, list.len() - 1);
                        list.len() - 1
                    }
                };
                let fact = &mut list[index];
                if fact.last_source == source_index {
                    continue;
                }
                fact.last_source = source_index;
                fact.weight += u64::from(weight);
                fact.latest_ms = fact.latest_ms.max(latest);
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
        // Each key lives once, in the map while folding; hand it to its fact for the ranking
        // tie-breaks. (Assignment by index, so the map's iteration order cannot leak.)
        for (key, index) in by_key {
            list[index].key = key;
        }
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
}

/// A tag's section name: control characters and runs of whitespace collapsed to one space,
/// trimmed; `None` for provenance tags and tags that are blank after that.
fn grouping_name(tag: &str) -> Option<String> {
    if IGNORED_TAG_PREFIXES.iter().any(|p| tag.starts_with(p)) {
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

/// Splits a trailing ` (xN, latest YYYY-MM-DD)` written by an earlier distillation, returning
/// the text, its weight (1 when absent) and the date's first millisecond.
fn split_suffix(body: &str) -> (&str, u32, Option<i64>) {
    let plain = (body, 1, None);
    let Some(open) = body.rfind(" (x") else {
        return plain;
    };
    let Some(inner) = body[open + 3..].strip_suffix(')') else {
        return plain;
    };
    let Some((count, date)) = inner.split_once(", latest ") else {
        return plain;
    };
    if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
        return plain;
    }
    match (count.parse::<u32>(), time::parse_date(date)) {
        (Ok(weight), Some(day)) if weight > 0 => (body[..open].trim_end(), weight, Some(day)),
        _ => plain,
    }
}

/// A fact needs a letter, a digit or a marker; rules like `---` and lone punctuation are not
/// facts.
fn has_substance(text: &str) -> bool {
    text.chars().any(char::is_alphanumeric) || !marker::spans(text).is_empty()
}

/// Whitespace and control characters collapsed to single spaces, trimmed.
fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
    {
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
    for word in text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
    {
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
// Ranking and rendering

/// Fact indices in the order they are offered to the summary: alternately the best remaining
/// by corroboration (weight, then recency, then key) and the best remaining by recency (recency,
/// then weight, then key).
///
/// Lazy: two heaps built in O(n), popped only while the summary has room, so ranking costs
/// O(n + k log n) for k kept facts rather than two full sorts.
struct PickOrder<'f> {
    by_weight: BinaryHeap<(u64, i64, Reverse<&'f str>, usize)>,
    by_recency: BinaryHeap<(i64, u64, Reverse<&'f str>, usize)>,
    picked: Vec<bool>,
    weight_turn: bool,
}

impl<'f> PickOrder<'f> {
    fn new(facts: &'f [Fact<'_>]) -> Self {
        let by_weight = facts
            .iter()
            .enumerate()
            .map(|(i, f)| (f.weight, f.latest_ms, Reverse(f.key.as_str()), i))
            .collect();
        let by_recency = facts
            .iter()
            .enumerate()
            .map(|(i, f)| (f.latest_ms, f.weight, Reverse(f.key.as_str()), i))
            .collect();
        Self {
            by_weight,
            by_recency,
            picked: vec![false; facts.len()],
            weight_turn: true,
        }
    }

    fn pop_weight(&mut self) -> Option<usize> {
        while let Some((.., i)) = self.by_weight.pop() {
            if !self.picked[i] {
                return Some(i);
            }
        }
        None
    }

    fn pop_recency(&mut self) -> Option<usize> {
        while let Some((.., i)) = self.by_recency.pop() {
            if !self.picked[i] {
                return Some(i);
            }
        }
        None
    }
}

impl Iterator for PickOrder<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let first_weight = self.weight_turn;
        self.weight_turn = !self.weight_turn;
        let next = if first_weight {
            self.pop_weight().or_else(|| self.pop_recency())
        } else {
            self.pop_recency().or_else(|| self.pop_weight())
        };
        if let Some(i) = next {
            self.picked[i] = true;
        }
        next
    }
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

fn fact_line(text: &str, was_cut: bool, fact: &Fact<'_>) -> String {
    let ellipsis = if was_cut { "…" } else { "" };
    format!(
        "- {text}{ellipsis} (x{}, latest {})\n",
        fact.weight,
        time::format_date(fact.latest_ms)
    )
}

struct Kept {
    fact: usize,
    section: Option<String>,
    line: String,
}

/// Writes the summary: facts in [`pick_order`] while they fit `cap` tokens and
/// [`MAX_SUMMARY_BYTES`], then laid out by section. Returns (summary, its tokens, facts kept).
fn render(
    facts: &Facts<'_>,
    cap: u64,
    input_tokens: u32,
    budget: u32,
) -> Result<(String, u64, usize), DistillError> {
    let mut kept: Vec<Kept> = Vec::new();
    let mut sections_open: Vec<Option<String>> = Vec::new();
    let (mut used_tokens, mut used_bytes) = (0_u64, 0_usize);

    for index in PickOrder::new(&facts.list) {
        let fact = &facts.list[index];
        let section = facts.section_of(fact).map(str::to_owned);
        let heading = (!sections_open.contains(&section)).then(|| heading_line(section.as_deref()));
        let (head_tokens, head_bytes) = heading
            .as_deref()
            .map(|h| (tokens::count(h) as u64, h.len()))
            .unwrap_or((0, 0));
        let display = collapse(fact.text);
        let (text, was_cut) = marker::truncate_chars(&display, MAX_FACT_CHARS);
        let mut line = fact_line(text, was_cut, fact);
        let fits = |line: &str| {
            used_tokens + head_tokens + tokens::count(line) as u64 <= cap
                && used_bytes + head_bytes + line.len() <= MAX_SUMMARY_BYTES
        };
        if !fits(&line) {
            if !kept.is_empty() {
                break;
            }
            // Only the first fact may be shortened: a summary needs at least one line.
            line = shorten_to_fit(text, fact, &fits).ok_or(DistillError::TokenBudgetExceeded {
                needed: saturate(
                    u64::from(input_tokens) + head_tokens + tokens::count(&line) as u64,
                ),
                budget,
            })?;
        }
        used_tokens += head_tokens + tokens::count(&line) as u64;
        used_bytes += head_bytes + line.len();
        if heading.is_some() {
            sections_open.push(section.clone());
        }
        kept.push(Kept {
            fact: index,
            section,
            line,
        });
    }

    loop {
        let summary = layout(facts, &kept);
        let total = tokens::count(&summary) as u64;
        // Lines start with `#`/`-` and end in `\n`, so per-line prices add up exactly (see
        // `tokens`); the recount is the figure reported, and the loop a guard should that ever
        // not hold.
        if total <= cap || kept.len() <= 1 {
            if total > cap {
                return Err(DistillError::TokenBudgetExceeded {
                    needed: saturate(u64::from(input_tokens) + total),
                    budget,
                });
            }
            return Ok((summary, total, kept.len()));
        }
        kept.pop();
    }
}

/// The longest marker-safe prefix of `text` whose line fits, or `None` if not even one unit does.
fn shorten_to_fit(text: &str, fact: &Fact<'_>, fits: &dyn Fn(&str) -> bool) -> Option<String> {
    let points = marker::cut_points(text);
    let (mut lo, mut hi) = (0_usize, points.len());
    let mut best = None;
    // Token counts grow (near-)monotonically with the prefix, so bisection finds the longest
    // fitting prefix; each candidate is checked exactly, so a non-monotone step only costs length.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let cut = points[mid];
        let line = fact_line(&text[..cut], cut < text.len(), fact);
        if fits(&line) {
            best = Some(line);
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    best
}

/// Sections by name with untagged last; facts in a section by weight, recency, key.
fn layout(facts: &Facts<'_>, kept: &[Kept]) -> String {
    let mut order: Vec<&Kept> = kept.iter().collect();
    order.sort_by(|a, b| {
        let (fa, fb) = (&facts.list[a.fact], &facts.list[b.fact]);
        (a.section.is_none(), &a.section)
            .cmp(&(b.section.is_none(), &b.section))
            .then_with(|| {
                (Reverse(fa.weight), Reverse(fa.latest_ms), &fa.key).cmp(&(
                    Reverse(fb.weight),
                    Reverse(fb.latest_ms),
                    &fb.key,
                ))
            })
    });
    let mut out = String::new();
    let mut current: Option<&Option<String>> = None;
    for item in order {
        if current != Some(&item.section) {
            out.push_str(&heading_line(item.section.as_deref()));
            current = Some(&item.section);
        }
        out.push_str(&item.line);
    }
    out
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
        assert_eq!(
            split_suffix("Customer prefers email (x3, latest 2026-11-20)"),
            ("Customer prefers email", 3, time::parse_date("2026-11-20"))
        );
        for plain in [
            "Paid (x3)",
            "Paid (x0, latest 2026-11-20)",
            "Paid (xA, latest 2026-11-20)",
            "Paid (x3, latest 2026-13-20)",
            "(x3, latest 2026-11-20)",
        ] {
            assert_eq!(split_suffix(plain), (plain, 1, None), "{plain}");
        }
    }

    #[test]
    fn headings_and_bullets() {
        assert_eq!(heading_of("## preference"), Some("preference"));
        assert_eq!(heading_of("#hashtag"), None);
        assert_eq!(heading_of("####### seven"), None);
        assert_eq!(strip_bullet("- item"), "item");
        assert_eq!(strip_bullet("-item"), "-item");
    }

    #[test]
    fn min_budget_matches_the_rule() {
        for t in [
            0_u32, 1, 300, 511, 512, 513, 4_096, 4_097, 10_000, 1_000_000,
        ] {
            let b = min_budget_for(t);
            assert!(b >= MIN_TOKEN_BUDGET);
            assert!(t <= b - output_reserve(b), "t={t} b={b}");
            if b > MIN_TOKEN_BUDGET {
                assert!(t > (b - 1) - output_reserve(b - 1), "t={t} b-1={}", b - 1);
            }
        }
        assert_eq!(min_budget_for(u32::MAX), u32::MAX);
    }
}
