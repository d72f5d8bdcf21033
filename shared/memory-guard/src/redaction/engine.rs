//! The matching engine behind [`super::Redactor`].
//!
//! Two paths compute the same thing (the semantics in the module docs of [`super`]):
//!
//! - **Fast.** A leftmost-longest finder reports, from a position, the leftmost start of an
//!   occurrence and the longest pattern there. The scan then resumes inside that occurrence,
//!   not after it, so an occurrence starting inside another and reaching past it is found and
//!   the two merge into one span (the old engine resumed at the end and left the tail in
//!   clear). It resumes one byte after the start on a redactor's first text; from the second
//!   text on, a per-pattern bound ([`overlap_reach`]) lets it resume nearer the end. Markers
//!   are checked only around occurrences ([`marker_around`]), so text without secrets is never
//!   examined for markers at all. The output is allocated once, at its exact length when the
//!   text has few spans.
//!
//!   The finder is the cheapest to build and fastest to run for the pattern set (measured
//!   with `benches/redaction.rs`): `memchr::memmem` for one pattern; the prefix finder
//!   ([`PrefixIndex`]) when every pattern shares one literal prefix (a deployment's keys of one
//!   provider), a substring search for the prefix being both faster and more selective than
//!   any single byte; the rare-byte finder ([`Rare`]) when every pattern has one of at most
//!   three rare bytes at a fixed offset (key families such as `sk-live-`, `ghp_`, `AKIA`),
//!   since `memchr3` outruns a search for several prefixes on text free of those bytes;
//!   otherwise the prefix finder over up to eight prefixes, Aho-Corasick's packed Teddy
//!   searcher up to 64 patterns and the Wu-Manber [`SkipIndex`] beyond. None of them needs an
//!   automaton, which is what makes building a redactor per request cheap.
//! - **Slow.** A standard Aho-Corasick walk ([`Slow`]), built lazily on first need, with the
//!   markers found up front. Linear in the text whatever the patterns.
//!
//! The fast path hands the whole text to the slow one (discarding its partial work) when an
//! occurrence runs into a marker from before it, when occurrences keep starting inside one
//! another (`a{8}`..`a{1000}` over a run of `a`), or when its work budget (bytes verified or
//! re-read, a small multiple of the text length) is spent. So the fast path's work is bounded
//! by its budget and the total stays linear.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use aho_corasick::packed;
use memchr::memmem;

use super::marker::{is_id_byte, marker_id_at, MARKER_PREFIX, MARKER_SUFFIX, MAX_MARKER_BYTES};
use super::prefix::{Groups, PrefixIndex};
use super::rare::{Miss, Rare};
use super::skip::SkipIndex;
use super::slow::Slow;

/// Up to this many patterns the packed Teddy searcher is used (its own heuristic limit).
const PACKED_PATTERNS: usize = 64;
/// ... and while no pattern is longer than this. Teddy confirms a candidate by comparing the
/// patterns of its bucket, outside the fast path's budget; with both bounds that costs at most
/// a constant per text byte. Longer patterns (PEM keys) go to the budgeted [`SkipIndex`].
const PACKED_MAX_LEN: usize = 256;

/// One pattern: a byte range of [`Engine::bytes`] and the registration index of its secret.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pattern {
    pub(super) start: u32,
    pub(super) len: u32,
    pub(super) secret: u32,
}

impl Pattern {
    #[inline(always)]
    pub(super) fn range(&self) -> Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

/// One search by a finder: the text, the pattern set (each [`Pattern`] a range of `bytes`) and
/// the part of the text searched, `from..to`.
#[derive(Clone, Copy)]
pub(super) struct Search<'a> {
    pub(super) hay: &'a [u8],
    pub(super) bytes: &'a [u8],
    pub(super) patterns: &'a [Pattern],
    pub(super) from: usize,
    pub(super) to: usize,
}

/// An occurrence of pattern `pattern` at `start..end`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Found {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) pattern: u32,
}

/// The fast path gave up; the slow path redoes the whole text.
#[derive(Debug)]
pub(super) struct Bail;

/// No automaton could be built; the caller fails closed.
#[derive(Debug)]
pub(super) struct Unavailable;

/// Work the fast path may still spend on one text, in bytes compared or re-read, and the
/// rare-byte finder's record for the text.
pub(super) struct Budget {
    left: usize,
    pub(super) rare_misses: usize,
}

impl Budget {
    fn new(left: usize) -> Self {
        Self {
            left,
            rare_misses: 0,
        }
    }

    #[inline(always)]
    pub(super) fn charge(&mut self, work: usize) -> Result<(), Bail> {
        self.left = self.left.checked_sub(work).ok_or(Bail)?;
        Ok(())
    }
}

/// Work allowed for checking one marker id for secrets (ids are at most 128 bytes).
const ID_BUDGET: usize = 64 * 1024;

enum Fast {
    One(memmem::Finder<'static>),
    Packed(packed::Searcher),
    Prefix(PrefixIndex),
    Skip(SkipIndex),
    /// Patterns the fast finders cannot index (shorter than 8 bytes, in a large set).
    None,
}

/// A span being accumulated: the union of overlapping or adjacent occurrences, and the
/// occurrence that names it (longest, then leftmost, then lowest registration index).
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
    best_len: usize,
    best_start: usize,
    secret: u32,
}

impl Span {
    #[inline(always)]
    fn of(found: Found, secret: u32) -> Self {
        Self {
            start: found.start,
            end: found.end,
            best_len: found.end - found.start,
            best_start: found.start,
            secret,
        }
    }

    #[inline(always)]
    fn absorb(&mut self, other: Span) {
        self.start = self.start.min(other.start);
        self.end = self.end.max(other.end);
        let better = (
            other.best_len,
            std::cmp::Reverse(other.best_start),
            std::cmp::Reverse(other.secret),
        ) > (
            self.best_len,
            std::cmp::Reverse(self.best_start),
            std::cmp::Reverse(self.secret),
        );
        if better {
            self.best_len = other.best_len;
            self.best_start = other.best_start;
            self.secret = other.secret;
        }
    }
}

pub(super) struct Engine {
    bytes: Box<[u8]>,
    patterns: Box<[Pattern]>,
    /// Secret ids concatenated; secret `i`'s id ends at `id_ends[i]`.
    ids: Box<str>,
    id_ends: Box<[u32]>,
    max_len: usize,
    /// Whether some pattern contains `[`, so an occurrence can contain a marker's start.
    has_bracket: bool,
    /// For key families: tried first, until a text proves dense in its bytes.
    rare: Option<Rare>,
    /// The general finder; built up front unless `rare` applies.
    fast: OnceLock<Fast>,
    slow: OnceLock<Option<Slow>>,
    /// Per pattern, how far back from an occurrence's end another occurrence reaching past
    /// that end can start ([`overlap_reach`]). Computed on the second text, so a redactor
    /// used once (per request) never pays for it.
    reach: OnceLock<Box<[u32]>>,
    used: AtomicBool,
}

impl Engine {
    /// `patterns` index into `bytes`; secret `i` has id `ids[id_ends[i-1]..id_ends[i]]`.
    pub(super) fn new(
        bytes: Box<[u8]>,
        patterns: Box<[Pattern]>,
        ids: Box<str>,
        id_ends: Box<[u32]>,
    ) -> Self {
        let max_len = patterns.iter().map(|p| p.len as usize).max().unwrap_or(0);
        let has_bracket = memchr::memchr(b'[', &bytes).is_some();
        // One prefix shared by every pattern is searched for with `memmem`, more selective than
        // any single rare byte (and not slowed by text full of that byte); several prefixes are left to
        // the rare-byte finder first, whose `memchr3` outruns Teddy on text free of its bytes.
        let groups = Groups::of(&bytes, &patterns);
        let single_prefix = groups.as_ref().is_some_and(Groups::is_single);
        let rare = if patterns.len() > 1 && !single_prefix {
            Rare::new(&bytes, &patterns)
        } else {
            None
        };
        let fast = OnceLock::new();
        if rare.is_none() {
            let _ = fast.set(Self::general_finder(&bytes, &patterns, groups));
        }
        Self {
            bytes,
            patterns,
            ids,
            id_ends,
            max_len,
            has_bracket,
            rare,
            fast,
            slow: OnceLock::new(),
            reach: OnceLock::new(),
            used: AtomicBool::new(false),
        }
    }

    /// Names secret `i` by `ids[id_ends[i-1]..id_ends[i]]` from now on.
    pub(super) fn rename(&mut self, ids: Box<str>, id_ends: Box<[u32]>) {
        self.ids = ids;
        self.id_ends = id_ends;
    }

    /// `groups`: [`Groups::of`] these patterns.
    fn general_finder(bytes: &[u8], patterns: &[Pattern], groups: Option<Groups>) -> Fast {
        if let Some(index) = groups.and_then(|groups| PrefixIndex::new(bytes, patterns, &groups)) {
            return Fast::Prefix(index);
        }
        match patterns.len() {
            0 => Fast::None,
            1 => Fast::One(memmem::Finder::new(&bytes[patterns[0].range()]).into_owned()),
            n if n <= PACKED_PATTERNS
                && patterns.iter().all(|p| p.len as usize <= PACKED_MAX_LEN) =>
            {
                let mut config = packed::Config::new();
                config.match_kind(packed::MatchKind::LeftmostLongest);
                let mut builder = config.builder();
                for pattern in patterns {
                    builder.add(&bytes[pattern.range()]);
                }
                match builder.build() {
                    Some(searcher) => Fast::Packed(searcher),
                    None => SkipIndex::new(bytes, patterns).map_or(Fast::None, Fast::Skip),
                }
            }
            _ => SkipIndex::new(bytes, patterns).map_or(Fast::None, Fast::Skip),
        }
    }

    #[inline(always)]
    fn secret_id(&self, secret: u32) -> &str {
        let i = secret as usize;
        let start = if i == 0 {
            0
        } else {
            self.id_ends[i - 1] as usize
        };
        &self.ids[start..self.id_ends[i] as usize]
    }

    /// Redacts one text; `Unavailable` only if the fallback automaton cannot be built.
    #[inline(always)]
    pub(super) fn redact<'t>(&self, text: &'t str) -> Result<(Cow<'t, str>, usize), Unavailable> {
        if let Ok(done) = self.redact_fast(text) {
            return Ok(done);
        }
        self.redact_slow(text)
    }

    #[inline(always)]
    fn general(&self) -> &Fast {
        self.fast.get_or_init(|| {
            let groups = Groups::of(&self.bytes, &self.patterns);
            Self::general_finder(&self.bytes, &self.patterns, groups)
        })
    }

    /// Whether `text` holds an occurrence of an active pattern: for marker names, which are id
    /// characters (no marker inside), so this is whether redacting them would replace anything.
    /// It does not count as the redactor's first text, so the names checked while building do
    /// not make a redactor used once pay for [`overlap_reach`].
    pub(super) fn holds_pattern(&self, text: &str) -> bool {
        let hay = text.as_bytes();
        let mut budget = Budget::new(ID_BUDGET);
        match self.find(hay, 0, hay.len(), &mut budget) {
            Ok(found) => found.is_some(),
            Err(Bail) => self.redact_slow(text).map_or(true, |(_, spans)| spans > 0),
        }
    }

    /// The search of `hay[from..to]` for this engine's patterns.
    #[inline(always)]
    fn search<'a>(&'a self, hay: &'a [u8], from: usize, to: usize) -> Search<'a> {
        Search {
            hay,
            bytes: &self.bytes,
            patterns: &self.patterns,
            from,
            to,
        }
    }

    /// Any finder, for checks off the hot loop (marker ids).
    fn find(
        &self,
        hay: &[u8],
        from: usize,
        to: usize,
        budget: &mut Budget,
    ) -> Result<Option<Found>, Bail> {
        if let Some(rare) = &self.rare {
            match rare.find(&self.search(hay, from, to), budget) {
                Ok(found) => return Ok(found),
                Err(Miss::Bail) => return Err(Bail),
                Err(Miss::Dense) => {}
            }
        }
        self.general().find(self, hay, from, to, budget)
    }
}

impl Fast {
    #[inline]
    fn find(
        &self,
        engine: &Engine,
        hay: &[u8],
        from: usize,
        to: usize,
        budget: &mut Budget,
    ) -> Result<Option<Found>, Bail> {
        match self {
            Fast::One(finder) => Ok(find_one(finder, finder.needle().len(), hay, from, to)),
            Fast::Packed(searcher) => Ok(find_packed(searcher, hay, from, to)),
            Fast::Prefix(index) => index.find(&engine.search(hay, from, to), budget),
            Fast::Skip(index) => index.find(&engine.search(hay, from, to), budget),
            Fast::None => Err(Bail),
        }
    }
}

/// The one secret's leftmost occurrence in `from..to` (`len`: the needle's length, read once
/// per text by the caller on the hot path).
#[inline(always)]
fn find_one(
    finder: &memmem::Finder<'static>,
    len: usize,
    hay: &[u8],
    from: usize,
    to: usize,
) -> Option<Found> {
    finder.find(&hay[from..to]).map(|at| Found {
        start: from + at,
        end: from + at + len,
        pattern: 0,
    })
}

/// The leftmost-longest match of the packed searcher in `from..to`.
#[inline(always)]
fn find_packed(searcher: &packed::Searcher, hay: &[u8], from: usize, to: usize) -> Option<Found> {
    let span = aho_corasick::Span {
        start: from,
        end: to,
    };
    searcher.find_in(hay, span).map(|m| Found {
        start: m.start(),
        end: m.end(),
        pattern: m.pattern().as_u32(),
    })
}

impl Engine {
    /// The well-formed marker starting at `at`, if one does (rule 1: grammar, and no pattern
    /// inside the id).
    fn marker_at(&self, hay: &[u8], at: usize) -> Result<Option<(usize, usize)>, Bail> {
        let Some((id_start, id_end)) = marker_id_at(hay, at) else {
            return Ok(None);
        };
        let mut budget = Budget::new(ID_BUDGET);
        if self.find(hay, id_start, id_end, &mut budget)?.is_some() {
            return Ok(None);
        }
        Ok(Some((at, id_end + MARKER_SUFFIX.len())))
    }

    /// Picks the finder once per text, so the scan loop is specialised for it.
    #[inline(always)]
    fn redact_fast<'t>(&self, text: &'t str) -> Result<(Cow<'t, str>, usize), Bail> {
        if let Some(rare) = &self.rare {
            let mut dense = false;
            return self.scan(text, |hay, from, to, budget| {
                if !dense {
                    match rare.find(&self.search(hay, from, to), budget) {
                        Ok(found) => return Ok(found),
                        Err(Miss::Bail) => return Err(Bail),
                        Err(Miss::Dense) => dense = true,
                    }
                }
                self.general().find(self, hay, from, to, budget)
            });
        }
        match self.general() {
            Fast::One(finder) => {
                let len = finder.needle().len();
                self.scan(text, |hay, from, to, _| {
                    Ok(find_one(finder, len, hay, from, to))
                })
            }
            Fast::Packed(searcher) => self.scan(text, |hay, from, to, _| {
                Ok(find_packed(searcher, hay, from, to))
            }),
            Fast::Prefix(index) => self.scan(text, |hay, from, to, budget| {
                index.find(&self.search(hay, from, to), budget)
            }),
            Fast::Skip(index) => self.scan(text, |hay, from, to, budget| {
                index.find(&self.search(hay, from, to), budget)
            }),
            Fast::None => Err(Bail),
        }
    }

    #[inline(always)]
    fn scan<'t>(
        &self,
        text: &'t str,
        mut find: impl FnMut(&[u8], usize, usize, &mut Budget) -> Result<Option<Found>, Bail>,
    ) -> Result<(Cow<'t, str>, usize), Bail> {
        let hay = text.as_bytes();
        let n = hay.len();
        let mut budget = Budget::new(
            n.saturating_mul(4)
                .saturating_add(self.max_len.saturating_mul(8))
                .saturating_add(4096),
        );
        let mut inner_starts_left = 16 + n / 64;
        // A plain load on the hot path (a swap would be a locked instruction per text).
        let reach = if self.used.load(Ordering::Relaxed) {
            Some(
                self.reach
                    .get_or_init(|| overlap_reach(&self.bytes, &self.patterns)),
            )
        } else {
            self.used.store(true, Ordering::Relaxed);
            None
        };
        let mut out = Output::new(text);
        let mut current: Option<Span> = None;
        let mut from = 0;
        while from < n {
            let Some(found) = find(hay, from, n, &mut budget)? else {
                break;
            };
            if let Some((marker_start, marker_end)) =
                marker_around(self, hay, found.start, found.end, &mut budget)?
            {
                if found.start < marker_start {
                    // Runs into a marker from before it: a shorter pattern at the same start
                    // might still count, which the slow path settles.
                    return Err(Bail);
                }
                from = marker_end;
                continue;
            }
            budget.charge(found.end - found.start)?;
            let span = Span::of(found, self.patterns[found.pattern as usize].secret);
            match &mut current {
                Some(open) if found.start <= open.end => {
                    if found.start < open.end {
                        inner_starts_left = inner_starts_left.checked_sub(1).ok_or(Bail)?;
                    }
                    open.absorb(span);
                }
                _ => {
                    if let Some(done) = current.replace(span) {
                        out.replace(done, self.secret_id(done.secret));
                    }
                }
            }
            // Resume one byte after the start, so that an occurrence starting inside this one
            // and reaching past it is found; when the pattern's reach is known, no such
            // occurrence starts before `end - reach` (ones ending inside this occurrence are
            // shorter and change nothing).
            from = match reach {
                Some(reach) => {
                    (found.end - reach[found.pattern as usize] as usize).max(found.start + 1)
                }
                None => found.start + 1,
            };
        }
        if let Some(done) = current {
            out.replace(done, self.secret_id(done.secret));
        }
        Ok(out.finish())
    }

    /// The slow path alone (for tests).
    pub(super) fn redact_fallback<'t>(
        &self,
        text: &'t str,
    ) -> Result<(Cow<'t, str>, usize), Unavailable> {
        self.redact_slow(text)
    }

    fn redact_slow<'t>(&self, text: &'t str) -> Result<(Cow<'t, str>, usize), Unavailable> {
        let slow = self
            .slow
            .get_or_init(|| {
                let patterns: Vec<&[u8]> = self
                    .patterns
                    .iter()
                    .map(|p| &self.bytes[p.range()])
                    .collect();
                Slow::build(&patterns)
            })
            .as_ref()
            .ok_or(Unavailable)?;
        let hay = text.as_bytes();
        let mut spans: Vec<Span> = Vec::new();
        let mut cache = HashMap::new();
        let mut segment_start = 0;
        let markers = slow.markers(hay);
        for (marker_start, marker_end) in markers.into_iter().chain([(hay.len(), hay.len())]) {
            slow.scan_segment(hay, segment_start, marker_start, &mut cache, |found| {
                let mut span = Span::of(found, self.patterns[found.pattern as usize].secret);
                // Occurrences arrive in order of end: merge every earlier span they reach.
                while let Some(last) = spans.last() {
                    if last.end < span.start {
                        break;
                    }
                    span.absorb(*last);
                    spans.pop();
                }
                spans.push(span);
            });
            segment_start = marker_end;
        }
        let mut out = Output::new(text);
        for span in spans {
            out.replace(span, self.secret_id(span.secret));
        }
        Ok(out.finish())
    }
}

/// For each pattern P, the longest proper suffix of P that could be a proper prefix of some
/// pattern (0 if none): an occurrence of another pattern starting inside an occurrence of P
/// and reaching past its end must start within that many bytes of the end. Conservative: a
/// suffix counts when its first (up to) 4 bytes are some pattern's first bytes.
fn overlap_reach(bytes: &[u8], patterns: &[Pattern]) -> Box<[u32]> {
    fn key(head: &[u8]) -> u32 {
        let mut word = [0u8; 4];
        word[..head.len()].copy_from_slice(head);
        u32::from_le_bytes(word)
    }
    let mut heads: [HashSet<u32, foldhash::fast::RandomState>; 4] = Default::default();
    for pattern in patterns {
        let pattern = &bytes[pattern.range()];
        for (len, set) in heads.iter_mut().enumerate().take(pattern.len().min(4)) {
            set.insert(key(&pattern[..=len]));
        }
    }
    patterns
        .iter()
        .map(|pattern| {
            let pattern = &bytes[pattern.range()];
            (1..pattern.len())
                .find(|&at| {
                    let take = (pattern.len() - at).min(4);
                    heads[take - 1].contains(&key(&pattern[at..at + take]))
                })
                .map_or(0, |at| (pattern.len() - at) as u32)
        })
        .collect()
}

/// Finds a well-formed marker overlapping an occurrence `start..end`, the first if several.
///
/// A marker overlapping it either contains `start` or starts inside the occurrence. One
/// containing `start` consists of `[` and id bytes (`REDACTED:` is made of id bytes) up to
/// `start`, so walking back from `start` over id bytes to a `[` finds the only candidate, and
/// in prose the walk usually stops at once (a space, `=`, a quote). One starting inside needs a
/// pattern containing `[`, so that search runs only for such registries. The walk is charged
/// to the budget, so a long run of id bytes full of occurrences hands the text to the slow
/// path rather than going quadratic.
#[inline]
fn marker_around(
    engine: &Engine,
    hay: &[u8],
    start: usize,
    end: usize,
    budget: &mut Budget,
) -> Result<Option<(usize, usize)>, Bail> {
    let floor = start.saturating_sub(MAX_MARKER_BYTES - 1);
    let mut at = start;
    while at > floor {
        let byte = hay[at - 1];
        if byte == b'[' {
            if let Some(marker) = engine.marker_at(hay, at - 1)? {
                if marker.1 > start {
                    return Ok(Some(marker));
                }
            }
            break;
        }
        if !is_id_byte(byte) {
            break;
        }
        at -= 1;
    }
    budget.charge(start - at)?;
    if engine.has_bracket {
        for offset in memchr::memchr_iter(b'[', &hay[start..end]) {
            if let Some(marker) = engine.marker_at(hay, start + offset)? {
                return Ok(Some(marker));
            }
        }
    }
    Ok(None)
}

/// Spans held back before the output is allocated, so that a text with few spans (nearly
/// every text) gets one allocation of exactly the output's length.
const HELD_SPANS: usize = 8;

/// Builds the output lazily: nothing is allocated or copied until a span is known, and up to
/// [`HELD_SPANS`] spans are held until the output's exact length is.
struct Output<'t, 'e> {
    text: &'t str,
    held: [(usize, usize, &'e str); HELD_SPANS],
    held_len: usize,
    /// Output length if the held spans are all.
    exact: usize,
    out: String,
    streaming: bool,
    copied: usize,
    count: usize,
}

impl<'t, 'e> Output<'t, 'e> {
    #[inline(always)]
    fn new(text: &'t str) -> Self {
        Self {
            text,
            held: [(0, 0, ""); HELD_SPANS],
            held_len: 0,
            exact: text.len(),
            out: String::new(),
            streaming: false,
            copied: 0,
            count: 0,
        }
    }

    #[inline(always)]
    fn replace(&mut self, span: Span, id: &'e str) {
        self.count += 1;
        if !self.streaming {
            if self.held_len < HELD_SPANS {
                self.held[self.held_len] = (span.start, span.end, id);
                self.held_len += 1;
                self.exact = self.exact - (span.end - span.start)
                    + MARKER_PREFIX.len()
                    + id.len()
                    + MARKER_SUFFIX.len();
                return;
            }
            // Many spans: allocate for what is known plus some slack, then stream.
            self.streaming = true;
            self.out = String::with_capacity(self.exact + self.text.len() / 16);
            self.flush_held();
        }
        self.write(span.start, span.end, id);
    }

    #[inline(always)]
    fn flush_held(&mut self) {
        for i in 0..self.held_len {
            let (start, end, id) = self.held[i];
            self.write(start, end, id);
        }
    }

    #[inline(always)]
    fn write(&mut self, start: usize, end: usize, id: &str) {
        // Patterns are non-empty UTF-8, so occurrences in UTF-8 text start and end on char
        // boundaries, and so do their unions.
        self.out.push_str(&self.text[self.copied..start]);
        self.out.push_str(MARKER_PREFIX);
        self.out.push_str(id);
        self.out.push_str(MARKER_SUFFIX);
        self.copied = end;
    }

    /// Takes `&mut self`: moving the struct by value costs a copy and a store-forwarding stall
    /// that showed up in profiles of short texts.
    #[inline(always)]
    fn finish(&mut self) -> (Cow<'t, str>, usize) {
        if self.count == 0 {
            return (Cow::Borrowed(self.text), 0);
        }
        if !self.streaming {
            self.out = String::with_capacity(self.exact);
            self.flush_held();
        }
        self.out.push_str(&self.text[self.copied..]);
        (Cow::Owned(std::mem::take(&mut self.out)), self.count)
    }
}
