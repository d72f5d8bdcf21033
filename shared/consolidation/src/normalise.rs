//! Text normalisation, word shingles and the distinct-fact guard behind RFC 0068 duplicate
//! folding (openwop-agent-memory.md §"Background consolidation (RFC 0068)": "merge duplicates"
//! while a pass never merges two different facts).
//!
//! # Normalisation (what makes two texts *exact* duplicates)
//!
//! [`normalise`] maps a text to a canonical token sequence joined by single spaces:
//!
//! 1. Unicode lowercase (`str::to_lowercase`, so a word-final capital sigma becomes `ς`), then
//!    `ς` is folded to `σ` so both spellings of a Greek word compare equal.
//! 2. Apostrophe look-alikes (`’ ‘ ʼ ′ ＇`) become `'`; dash look-alikes (`‐ ‑ ‒ – — −`) become `-`.
//! 3. Negated contractions are expanded so the negation survives as its own word:
//!    `don't` → `do not`, `can't`/`cannot`/`cant` → `can not`, `won't` → `will not`, `isn't` →
//!    `is not`, and the apostrophe-less spellings `dont`, `doesnt`, `didnt`, ... likewise. Any
//!    other apostrophe inside a word is dropped (`user's` → `users`).
//! 4. Tokens are maximal runs of letters and digits (`char::is_alphanumeric`, so every script
//!    counts). Inside a number, `. , : / -` between two digits are kept (`3.5`, `1,234`,
//!    `10:30`, `2024-05-01`), and a `-` directly before a digit at the start of a token is kept
//!    (`-5`), so `3.5` / `35` and `-5` / `5` stay different words.
//! 5. Separator punctuation is dropped wherever it occurs: the ASCII characters
//!    `.,;:!?"'()[]{}-_*/\|` and the backquote, the ellipsis, typographic quotes and guillemets,
//!    and CJK full-width punctuation. That removes case, whitespace, end-of-sentence and
//!    markdown differences.
//! 6. Every other symbol (`$ % € £ + = < > @ # & ° ~`, emoji...) is kept as a one-character
//!    token: `5%` and `$5` are different facts. Combining marks, zero-width joiners and variation
//!    selectors stay attached to the token they follow (or vanish after a symbol), so `❤️` and
//!    `❤` are equal.
//!
//! 7. One notation per value (`crate::canonical`): times ("3 pm" = "15:00"), numbers ("1,000" =
//!    "1000", "12.5k" = "12500", "fifteen" = "15"), percentages, money, temperatures, dates
//!    ("1 March 2026" = "2026-03-01"), frequencies ("every three months" = "quarterly"), a
//!    curated list of abbreviations ("appt" = "appointment") and American spellings ("center" =
//!    "centre"); a simple-past passive is turned active ("X was paid by Y" = "Y paid X"). Only
//!    notations of the same value meet; a slash date or a bare hour keeps its form, because it
//!    has more than one reading.
//!
//! No NFC/NFKC normalisation is applied (that would need a Unicode-tables dependency): two
//! canonically equivalent spellings in different forms stay different words, which can only keep
//! entries apart, never merge different ones.
//!
//! # Near duplicates and the guard
//!
//! Two texts with different normalised forms are near duplicates when *both*
//!
//! - the **guard** holds: their *content words* — the normalised tokens minus the small
//!   [`FILLER_WORDS`] list of meaning-neutral words (articles, intensifiers, hedges, politeness)
//!   — are the same sequence. A differing number, negation, date, weekday, month, unit, symbol,
//!   name or any other key word, an inserted qualifier ("nuts" / "tree nuts") or a reordering
//!   ("Alice paid Bob" / "Bob paid Alice") therefore always keeps two entries apart, however
//!   long the sentence; and
//! - the exact Jaccard similarity of their word 2-shingle sets (over all normalised tokens,
//!   fillers included) is at least the configured threshold, which bounds how much filler noise
//!   may differ relative to the sentence length (see [`crate::DEFAULT_NEAR_DUPLICATE_THRESHOLD`]).
//!
//! The guard is an equivalence relation (equality of a derived sequence), so joining candidate
//! pairs transitively (union-find) can never connect two texts the guard keeps apart.

use crate::minhash::{fmix64, hash_bytes};

/// Words treated as meaning-neutral by the guard. Deliberately short: a word belongs here only
/// if adding, dropping or swapping it never changes which fact a sentence states. Negations,
/// quantifiers ("only", "some", "all"), frequency words ("always", "usually"), modals,
/// prepositions, pronouns and time words are *not* fillers.
pub const FILLER_WORDS: &[&str] = &[
    "a",
    "actually",
    "also",
    "an",
    "basically",
    "certainly",
    "definitely",
    "er",
    "hmm",
    "honestly",
    "indeed",
    "kindly",
    "literally",
    "please",
    "quite",
    "really",
    "the",
    "truly",
    "uh",
    "um",
    "very",
];

/// Whether a normalised token is in [`FILLER_WORDS`]. A `match` rather than a search of the
/// list: this runs for every token of every entry.
pub fn is_filler(token: &str) -> bool {
    matches!(
        token,
        "a" | "actually"
            | "also"
            | "an"
            | "basically"
            | "certainly"
            | "definitely"
            | "er"
            | "hmm"
            | "honestly"
            | "indeed"
            | "kindly"
            | "literally"
            | "please"
            | "quite"
            | "really"
            | "the"
            | "truly"
            | "uh"
            | "um"
            | "very"
    )
}

/// Normalises `text` into `norm` (cleared first, so one buffer serves a whole pass) and
/// returns, from the same pass, a fingerprint of its content-word sequence (the guard's
/// bucketing key; equality is always re-checked on the texts).
#[cfg(test)]
pub(crate) fn analyse_into(text: &str, norm: &mut String) -> u64 {
    analyse_with(
        text,
        norm,
        &mut crate::link::supersession::Scanner::default(),
        &mut crate::substitution::Longest::default(),
    )
}

/// [`analyse_into`], also feeding every content word to `scanner` (plain-language
/// supersession), all in the one pass over the text.
pub(crate) fn analyse_with(
    text: &str,
    norm: &mut String,
    scanner: &mut crate::link::supersession::Scanner,
    longest: &mut crate::substitution::Longest,
) -> u64 {
    norm.clear();
    let mut guard = GUARD_SEED;
    let mut rewrite = false;
    tokenise_into(text, norm, |token| {
        if !is_filler(token) {
            let fingerprint = hash_bytes(token.as_bytes());
            let term = term(fingerprint);
            guard = guard.wrapping_add(term);
            scanner.word(token, fingerprint);
            longest.word(token, term);
            // No filler is a rewrite trigger (a unit test of `canonical` checks it).
            rewrite |= crate::canonical::needs_rewrite(token);
        }
    });
    if rewrite {
        let canonical = crate::canonical::rewrite(norm);
        if canonical != *norm {
            *norm = canonical;
            guard = GUARD_SEED;
            *scanner = crate::link::supersession::Scanner::default();
            *longest = crate::substitution::Longest::default();
            for w in content_words(norm) {
                let fingerprint = hash_bytes(w.as_bytes());
                let term = term(fingerprint);
                guard = guard.wrapping_add(term);
                scanner.word(w, fingerprint);
                longest.word(w, term);
            }
        }
    }
    guard
}

const GUARD_SEED: u64 = 0x6a09_e667_f3bc_c908;

/// One content word's share of the guard fingerprint. The fingerprint is the sum of the
/// shares, so it is that of the word *multiset*: reorderings of one sentence share a bucket
/// ([`same_content_words`] with [`role_swap`] decides the rest), and the fingerprint of the text
/// minus one word is one subtraction (`crate::substitution`).
fn term(token_hash: u64) -> u64 {
    fmix64(token_hash ^ 0x9e37_79b9_7f4a_7c15)
}

/// The canonical form used for exact-duplicate detection: the [`tokenised`] text with one
/// notation per value (`crate::canonical`); see the module documentation.
pub fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rewrite = false;
    tokenise_into(text, &mut out, |token| {
        rewrite |= crate::canonical::needs_rewrite(token);
    });
    if rewrite {
        crate::canonical::rewrite(&out)
    } else {
        out
    }
}

/// Steps 1-6 of the module documentation: the tokens of `text` joined by single spaces.
pub fn tokenised(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    tokenise_into(text, &mut out, |_| {});
    out
}

/// Iterates the tokens of an already normalised text. A normalised text holds no whitespace
/// but the single spaces between its tokens (a property test checks it), so this is its split
/// on `' '`, by std's byte-level splitter: `split(' ')` searches with `memchr` and compares
/// the match with `memcmp`, two library calls per token of a few bytes.
pub(crate) fn tokens(norm: &str) -> impl Iterator<Item = &str> {
    norm.split_ascii_whitespace()
}

/// The guard's content-word sequence of a normalised text, as an iterator (no allocation).
pub(crate) fn content_words(norm: &str) -> impl Iterator<Item = &str> {
    tokens(norm).filter(|t| !is_filler(t))
}

/// Fingerprint of the guard's content-word sequence, as [`analyse_into`] computes it; equal
/// sequences give equal fingerprints. Used only to bucket candidates; equality is always
/// re-checked with [`same_content_words`].
#[cfg(test)]
pub(crate) fn guard_fingerprint(norm: &str) -> u64 {
    content_words(norm).fold(GUARD_SEED, |h, w| {
        h.wrapping_add(term(hash_bytes(w.as_bytes())))
    })
}

/// The distinct-fact guard: the same content words, in any order (a multiset).
pub(crate) fn same_content_words(a: &str, b: &str) -> bool {
    if content_words(a).eq(content_words(b)) {
        return true;
    }
    let mut x: Vec<&str> = content_words(a).collect();
    let mut y: Vec<&str> = content_words(b).collect();
    if x.len() != y.len() {
        return false;
    }
    x.sort_unstable();
    y.sort_unstable();
    x == y
}

/// Words that join two phrases without ordering them: "Sunil and Dora" = "Dora and Sunil".
fn is_coordinator(word: &str) -> bool {
    matches!(word, "and" | "or" | "&" | "plus" | "nor")
}

/// Whether two reorderings of the same content words swap two roles around a verb or a
/// preposition: `P X M Y S` against `P Y M X S` with a middle `M` that is not only
/// coordinators ("Yuki paid Samir" / "Samir paid Yuki", "from Rome to Paris" / "from Paris to
/// Rome"). A phrase moved to the other end of the sentence ("On Tuesdays, Clara works from
/// home" / "Clara works from home on Tuesdays") is a swap with an empty middle and keeps its
/// meaning, as does a swap around "and". Reorderings of more than two blocks are not judged
/// (they are rare, and they pass): the check is a guard against the common role swap, not a
/// parser.
pub(crate) fn role_swap(a: &str, b: &str) -> bool {
    let x: Vec<&str> = content_words(a).collect();
    let y: Vec<&str> = content_words(b).collect();
    if x.len() != y.len() || x == y {
        return false;
    }
    let prefix = x.iter().zip(&y).take_while(|(p, q)| p == q).count();
    let suffix = x[prefix..]
        .iter()
        .rev()
        .zip(y[prefix..].iter().rev())
        .take_while(|(p, q)| p == q)
        .count();
    let (x, y) = (&x[prefix..x.len() - suffix], &y[prefix..y.len() - suffix]);
    let n = x.len();
    for i in 1..n {
        for j in i + 1..n {
            let (first, middle, last) = (&x[..i], &x[i..j], &x[j..]);
            if middle.iter().all(|w| is_coordinator(w)) {
                continue;
            }
            if y.starts_with(last)
                && y[last.len()..].starts_with(middle)
                && &y[last.len() + middle.len()..] == first
            {
                return true;
            }
        }
    }
    false
}

/// Whether two normalised texts with the same content words may be near duplicates at all:
/// in the same order the shingle threshold decides; reordered, the meaning-neutral words must
/// agree too and the reordering must not swap roles.
pub(crate) fn reorder_allowed(a: &str, b: &str) -> bool {
    if content_words(a).eq(content_words(b)) {
        return true;
    }
    let mut fa: Vec<&str> = tokens(a).filter(|t| is_filler(t)).collect();
    let mut fb: Vec<&str> = tokens(b).filter(|t| is_filler(t)).collect();
    fa.sort_unstable();
    fb.sort_unstable();
    fa == fb && !role_swap(a, b)
}

/// The sorted, deduplicated set of word 2-shingle fingerprints of a normalised text (a single
/// token yields its 1-shingle; an empty text yields the empty set). Fingerprints come from a
/// fixed, release-independent hash so a pass next year shingles exactly like a pass today.
pub(crate) fn shingles(norm: &str) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    let mut previous: Option<u64> = None;
    for t in tokens(norm) {
        let h = hash_bytes(t.as_bytes());
        if let Some(p) = previous {
            out.push(fmix64(p.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ h));
        }
        previous = Some(h);
    }
    if let (true, Some(only)) = (out.is_empty(), previous) {
        out.push(fmix64(only ^ 0x5851_f42d_4c95_7f2d));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Exact Jaccard similarity of two sorted, deduplicated shingle sets; two empty sets score 0
/// (they cannot be near duplicates of each other: equal empty texts are exact duplicates).
pub(crate) fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let (mut i, mut j, mut inter) = (0usize, 0usize, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                inter += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - inter;
    if union == 0 {
        0.0
    } else {
        inter as f64 / union as f64
    }
}

/// Word 2-shingle Jaccard similarity of two raw texts (after normalisation): the measure the
/// near-duplicate threshold applies to.
pub fn shingle_jaccard(a: &str, b: &str) -> f64 {
    jaccard(&shingles(&normalise(a)), &shingles(&normalise(b)))
}

/// The pairwise duplicate relation a pass applies, without the candidate search: equal
/// normalised texts, or the guard plus `shingle_jaccard >= threshold`. A pass folds two texts
/// of the same cohort exactly when a chain of this relation connects them (LSH recall
/// aside: a pair it misses is missed the same way on every pass).
pub fn is_near_duplicate(a: &str, b: &str, threshold: f64) -> bool {
    let (na, nb) = (normalise(a), normalise(b));
    na == nb || (same_content_words(&na, &nb) && near_in_class(&na, &nb, threshold))
}

/// The near-duplicate test between two texts already known to share their content words.
pub(crate) fn near_in_class(a: &str, b: &str, threshold: f64) -> bool {
    if content_words(a).eq(content_words(b)) {
        jaccard(&shingles(a), &shingles(b)) >= threshold
    } else {
        reorder_allowed(a, b)
    }
}

fn fold_char(c: char) -> char {
    match c {
        '\u{2019}' | '\u{2018}' | '\u{02BC}' | '\u{2032}' | '\u{FF07}' => '\'',
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2212}' => '-',
        'ς' => 'σ',
        other => other,
    }
}

/// Punctuation that separates words and carries no fact of its own.
fn is_separator(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(
            c,
            '.' | ','
                | ';'
                | ':'
                | '!'
                | '?'
                | '"'
                | '\''
                | '`'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '-'
                | '_'
                | '*'
                | '/'
                | '\\'
                | '|'
                | '\u{2026}' // …
                | '\u{201C}' // “
                | '\u{201D}' // ”
                | '\u{201E}' // „
                | '\u{201F}' // ‟
                | '\u{00AB}' // «
                | '\u{00BB}' // »
                | '\u{2039}' // ‹
                | '\u{203A}' // ›
                | '\u{00A1}' // ¡
                | '\u{00BF}' // ¿
                | '\u{00B7}' // ·
                | '\u{2022}' // •
                | '\u{3002}' // 。
                | '\u{3001}' // 、
                | '\u{FF0C}' // ，
                | '\u{FF01}' // ！
                | '\u{FF1F}' // ？
                | '\u{FF1A}' // ：
                | '\u{FF1B}' // ；
                | '\u{FF08}' // （
                | '\u{FF09}' // ）
                | '\u{300C}' // 「
                | '\u{300D}' // 」
                | '\u{300E}' // 『
                | '\u{300F}' // 』
                | '\u{3010}' // 【
                | '\u{3011}' // 】
                | '\u{300A}' // 《
                | '\u{300B}' // 》
                | '\u{3008}' // 〈
                | '\u{3009}' // 〉
        )
}

/// Marks that modify the preceding character rather than standing alone.
fn is_attached_mark(c: char) -> bool {
    matches!(c,
        '\u{0300}'..='\u{036F}'
        | '\u{1AB0}'..='\u{1AFF}'
        | '\u{1DC0}'..='\u{1DFF}'
        | '\u{20D0}'..='\u{20FF}'
        | '\u{FE20}'..='\u{FE2F}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{200C}' | '\u{200D}'
        | '\u{E0100}'..='\u{E01EF}')
}

/// Apostrophe-less negated contractions and `cannot`, expanded like their apostrophe forms.
/// `wont` is left alone on purpose: it is also an English word.
#[inline]
fn expand_bare_contraction(word: &str) -> Option<&'static str> {
    if !word.ends_with("nt") && !word.ends_with("ot") {
        return None; // the common case (every word is asked), decided on two bytes, inline
    }
    bare_contraction_stem(word)
}

#[cold]
fn bare_contraction_stem(word: &str) -> Option<&'static str> {
    Some(match word {
        "cannot" | "cant" => "can",
        "dont" => "do",
        "doesnt" => "does",
        "didnt" => "did",
        "isnt" => "is",
        "arent" => "are",
        "wasnt" => "was",
        "werent" => "were",
        "hasnt" => "has",
        "havent" => "have",
        "hadnt" => "had",
        "couldnt" => "could",
        "shouldnt" => "should",
        "wouldnt" => "would",
        "mustnt" => "must",
        "neednt" => "need",
        _ => return None,
    })
}

struct Tokeniser<F: FnMut(&str)> {
    word: String,
    emit: F,
}

impl<F: FnMut(&str)> Tokeniser<F> {
    fn flush(&mut self) {
        if self.word.is_empty() {
            return;
        }
        if let Some(stem) = expand_bare_contraction(&self.word) {
            (self.emit)(stem);
            (self.emit)("not");
        } else {
            (self.emit)(&self.word);
        }
        self.word.clear();
    }
}

/// Appends the normalised tokens of `text` to `out` (empty, or ending in a token), joined by
/// single spaces, and calls `emit` with each token as it lands in `out`, in order.
///
/// ASCII text (the common case) is read by [`tokenise_ascii`], which writes straight into
/// `out`; other text by [`tokenise`], the general definition, which streams over the
/// characters with a three-character window (per-character lowercasing equals
/// `str::to_lowercase` there because the one context-dependent rule, final sigma, is folded
/// away by [`fold_char`]). A property test checks the two agree on ASCII text.
fn tokenise_into(text: &str, out: &mut String, mut emit: impl FnMut(&str)) {
    if text.is_ascii() {
        tokenise_ascii(text.as_bytes(), out, &mut emit);
    } else {
        tokenise(
            text.chars().flat_map(char::to_lowercase).map(fold_char),
            |token| {
                if !out.is_empty() {
                    out.push(' ');
                }
                let start = out.len();
                out.push_str(token);
                emit(&out[start..]);
            },
        );
    }
}

/// How [`tokenise`] treats each ASCII character (after lowercasing).
#[derive(Clone, Copy, PartialEq, Eq)]
enum AsciiClass {
    /// Part of a word (`char::is_alphanumeric`).
    Word,
    /// [`is_separator`]: ends a word and is dropped.
    Separator,
    /// Any other character: ends a word and is a one-character token, unless a rule of
    /// [`tokenise`] keeps it inside a number or a contraction.
    Symbol,
}

/// [`AsciiClass`] per byte; a unit test checks it against `char::is_alphanumeric` and
/// [`is_separator`].
const ASCII_CLASS: [AsciiClass; 128] = {
    let mut table = [AsciiClass::Symbol; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        table[b] = if c.is_ascii_alphanumeric() {
            AsciiClass::Word
        } else if c <= b' '
            || c == 0x7f
            || matches!(
                c,
                b'.' | b','
                    | b';'
                    | b':'
                    | b'!'
                    | b'?'
                    | b'"'
                    | b'\''
                    | b'`'
                    | b'('
                    | b')'
                    | b'['
                    | b']'
                    | b'{'
                    | b'}'
                    | b'-'
                    | b'_'
                    | b'*'
                    | b'/'
                    | b'\\'
                    | b'|'
            )
        {
            AsciiClass::Separator
        } else {
            AsciiClass::Symbol
        };
        b += 1;
    }
    table
};

/// [`tokenise`] for ASCII text, on bytes and without a word buffer: each word is built in
/// place at the end of `out`, then kept, expanded or (if it ends up empty) taken back. The
/// rules are [`tokenise`]'s, case by case; every ASCII letter, digit and symbol is one byte.
fn tokenise_ascii(text: &[u8], out: &mut String, emit: &mut impl FnMut(&str)) {
    let lower = |i: usize| text.get(i).map(u8::to_ascii_lowercase);
    // The word being built: where `out` ended before it (and its separating space), and where
    // the word itself starts.
    let mut word: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < text.len() {
        let c = text[i].to_ascii_lowercase();
        match ASCII_CLASS[usize::from(c)] {
            AsciiClass::Word => push_word_byte(out, &mut word, c),
            class => {
                let next = lower(i + 1);
                let next_is_digit = next.is_some_and(|n| n.is_ascii_digit());
                let last = word.and_then(|(_, start)| out.as_bytes()[start..].last().copied());
                let inside_number = matches!(c, b'.' | b',' | b':' | b'/' | b'-')
                    && last.is_some_and(|l| l.is_ascii_digit())
                    && next_is_digit;
                let sign = c == b'-'
                    && word.is_none()
                    && next_is_digit
                    && (i == 0 || !text[i - 1].is_ascii_alphanumeric());
                if inside_number || sign {
                    push_word_byte(out, &mut word, c);
                } else if c == b'\''
                    && last.is_some_and(|l| l.is_ascii_alphabetic())
                    && next.is_some_and(|n| n.is_ascii_alphabetic())
                {
                    if last == Some(b'n')
                        && next == Some(b't')
                        && lower(i + 2).is_none_or(|a| !a.is_ascii_alphanumeric())
                    {
                        // `n't`: split the negation off as its own word.
                        out.pop();
                        if let Some((_, start)) = word {
                            let stem = match &out[start..] {
                                "ca" => Some("can"),
                                "wo" => Some("will"),
                                "sha" => Some("shall"),
                                _ => None,
                            };
                            if let Some(stem) = stem {
                                out.truncate(start);
                                out.push_str(stem);
                            }
                        }
                        flush_word(out, &mut word, emit);
                        for b in *b"not" {
                            push_word_byte(out, &mut word, b);
                        }
                        flush_word(out, &mut word, emit);
                        i += 1;
                    }
                    // Otherwise a possessive or other contraction: the apostrophe joins the word.
                } else {
                    flush_word(out, &mut word, emit);
                    if class == AsciiClass::Symbol {
                        if !out.is_empty() {
                            out.push(' ');
                        }
                        out.push(char::from(c));
                        emit(&out[out.len() - 1..]);
                    }
                }
            }
        }
        i += 1;
    }
    flush_word(out, &mut word, emit);
}

/// Appends an ASCII byte to the word being built at the end of `out`, starting one if needed.
fn push_word_byte(out: &mut String, word: &mut Option<(usize, usize)>, b: u8) {
    if word.is_none() {
        let before = out.len();
        if before > 0 {
            out.push(' ');
        }
        *word = Some((before, out.len()));
    }
    out.push(char::from(b));
}

/// Ends the word being built at the end of `out` as [`Tokeniser::flush`] does: an
/// apostrophe-less negation is expanded, an empty word taken back with its space.
fn flush_word(out: &mut String, word: &mut Option<(usize, usize)>, emit: &mut impl FnMut(&str)) {
    let Some((before, start)) = word.take() else {
        return;
    };
    if out.len() == start {
        out.truncate(before);
        return;
    }
    if let Some(stem) = expand_bare_contraction(&out[start..]) {
        out.truncate(start);
        out.push_str(stem);
        emit(&out[start..]);
        out.push(' ');
        let not = out.len();
        out.push_str("not");
        emit(&out[not..]);
    } else {
        emit(&out[start..]);
    }
}

fn tokenise(mut chars: impl Iterator<Item = char>, emit: impl FnMut(&str)) {
    let mut t = Tokeniser {
        word: String::new(),
        emit,
    };
    let mut prev: Option<char> = None;
    let (mut cur, mut next, mut after) = (chars.next(), chars.next(), chars.next());
    let mut advance = |prev: &mut Option<char>,
                       cur: &mut Option<char>,
                       next: &mut Option<char>,
                       after: &mut Option<char>| {
        *prev = *cur;
        *cur = *next;
        *next = *after;
        *after = chars.next();
    };
    while let Some(c) = cur {
        if c.is_alphanumeric() {
            t.word.push(c);
        } else if is_attached_mark(c) {
            // Attached to a word it is part of that word; after a symbol or a gap it vanishes.
            if !t.word.is_empty() {
                t.word.push(c);
            }
        } else {
            let next_is_digit = next.is_some_and(char::is_numeric);
            let last = t.word.chars().next_back();
            if matches!(c, '.' | ',' | ':' | '/' | '-')
                && last.is_some_and(char::is_numeric)
                && next_is_digit
            {
                t.word.push(c);
            } else if c == '-'
                && t.word.is_empty()
                && next_is_digit
                && prev.is_none_or(|p| !p.is_alphanumeric())
            {
                t.word.push('-');
            } else if c == '\''
                && last.is_some_and(char::is_alphabetic)
                && next.is_some_and(char::is_alphabetic)
            {
                if t.word.ends_with('n')
                    && next == Some('t')
                    && after.is_none_or(|a| !a.is_alphanumeric())
                {
                    // `n't`: split the negation off as its own word.
                    t.word.pop();
                    let stem = match t.word.as_str() {
                        "ca" => Some("can"),
                        "wo" => Some("will"),
                        "sha" => Some("shall"),
                        _ => None,
                    };
                    if let Some(stem) = stem {
                        t.word.clear();
                        t.word.push_str(stem);
                    }
                    t.flush();
                    t.word.push_str("not");
                    t.flush();
                    advance(&mut prev, &mut cur, &mut next, &mut after);
                }
                // Otherwise a possessive or other contraction: the apostrophe joins the word.
            } else {
                t.flush();
                if !is_separator(c) {
                    let mut buf = [0u8; 4];
                    (t.emit)(c.encode_utf8(&mut buf));
                }
            }
        }
        advance(&mut prev, &mut cur, &mut next, &mut after);
    }
    t.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    #[test]
    fn filler_list_and_filler_match_agree() {
        assert!(FILLER_WORDS.windows(2).all(|w| w[0] < w[1]));
        for w in FILLER_WORDS {
            assert!(is_filler(w), "{w}");
        }
        for w in [
            "not", "no", "never", "only", "that", "some", "to", "", "the ",
        ] {
            assert!(!is_filler(w), "{w:?}");
        }
    }

    #[test]
    fn analyse_matches_the_separate_functions() {
        let analyse = |text: &str| {
            let mut norm = String::from("stale");
            let guard = analyse_into(text, &mut norm);
            (norm, guard)
        };
        for text in [
            "The user REALLY prefers e-mail.",
            "",
            "a the",
            "x",
            "User doesn't like 5% tea",
        ] {
            let (norm, guard) = analyse(text);
            assert_eq!(norm, normalise(text));
            assert_eq!(guard, guard_fingerprint(&norm));
        }
        assert_eq!(
            analyse("User prefers email").1,
            analyse("the user really prefers email").1
        );
        assert_ne!(
            analyse("User prefers email").1,
            analyse("User prefers phone").1
        );
    }

    #[test]
    fn normalisation_table() {
        let cases: &[(&str, &str)] = &[
            ("User prefers email.", "user prefers email"),
            ("  USER\tprefers \n email!!! ", "user prefers email"),
            ("User doesn't like tea", "user does not like tea"),
            ("User doesn’t like tea", "user does not like tea"),
            ("User can't come; he cannot", "user can not come he can not"),
            ("I won't", "i will not"),
            ("dont", "do not"),
            ("as is his wont", "as is his wont"),
            ("User's car", "users car"),
            ("Version 3.5 vs 35", "version 3.5 vs 35"),
            ("1,234 and 1234", "1,234 and 1234"),
            ("at 10:30 on 2024-05-01", "at 10:30 on 2024-05-01"),
            ("it is -5 degrees", "it is -5 degrees"),
            ("pages 3–5", "pages 3-5"),
            ("us-east-1", "us east 1"),
            ("5% off, $5 off", "5 % off $ 5 off"),
            ("billing@acme.com", "billing @ acme com"),
            ("**bold** _it_ (x) [y]", "bold it x y"),
            ("Tea...", "tea"),
            ("«Guillemets» “quotes”", "guillemets quotes"),
            ("ÉCOLE", "école"),
            ("ΟΔΟΣ οδος", "οδοσ οδοσ"),
            ("I ❤️ tea", "i ❤ tea"),
            ("", ""),
            ("!!!", ""),
        ];
        for (input, want) in cases {
            assert_eq!(tokenised(input), *want, "input {input:?}");
        }
    }

    /// The general definition's tokens of `text`, joined by single spaces.
    fn tokenised_by_the_general_path(text: &str) -> String {
        let mut tokens: Vec<String> = Vec::new();
        tokenise(
            text.chars().flat_map(char::to_lowercase).map(fold_char),
            |t| tokens.push(t.to_owned()),
        );
        tokens.join(" ")
    }

    #[test]
    fn ascii_classes_follow_the_general_definition() {
        for b in 0..128u8 {
            let c = char::from(b);
            let want = if c.is_alphanumeric() {
                AsciiClass::Word
            } else if is_separator(c) {
                AsciiClass::Separator
            } else {
                AsciiClass::Symbol
            };
            assert!(ASCII_CLASS[usize::from(b)] == want, "{b:#x}");
            assert!(!is_attached_mark(c));
        }
    }

    /// Text made of the pieces the tokeniser's rules are about (contractions, signs and
    /// punctuation inside numbers, symbols), with some non-ASCII among them.
    fn tricky_text() -> impl proptest::strategy::Strategy<Value = String> {
        const PIECES: &[&str] = &[
            "don't", "DON'T", "can't", "Won't", "shan't", "n't", "N'T", "-5", "3.5", "1,2",
            "10:30", "e-mail", "don", "DON", "n", "N", "'", "t", "T", "ca", "wo", "sha", "Sha",
            "-", "5", "03", ".", ",", ":", "/", " ", "  ", "\t", "\n", "cannot", "dont", "isnt",
            "x", "us", "$", "%", "#", "@", "+", "_", "*", "\"", "(", ")", "\u{7f}", "\u{b}", "É",
            "’", "ς", "Σ", "\u{301}", "–", "❤️", "。", "İ", "3 pm", "1,000", "12.5k", "1st",
            "march", "nyc", "\u{a0}",
        ];
        proptest::collection::vec(proptest::sample::select(PIECES), 0..24).prop_map(|v| v.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// The ASCII fast path tokenises exactly like the general definition.
        #[test]
        fn ascii_tokeniser_matches_the_general_one(
            text in proptest::prop_oneof![
                "[ -~\t\n]{0,60}",
                "[a-zA-Z0-9 '.,:/$-]{0,60}",
                tricky_text().prop_filter("ascii", |t| t.is_ascii()),
            ],
        ) {
            let mut out = String::new();
            let mut emitted: Vec<String> = Vec::new();
            tokenise_ascii(text.as_bytes(), &mut out, &mut |t: &str| emitted.push(t.to_owned()));
            proptest::prop_assert_eq!(&out, &tokenised_by_the_general_path(&text));
            proptest::prop_assert_eq!(emitted.join(" "), out);
        }

        /// Whatever the text (ASCII or not), the tokens handed to `emit` are those written to
        /// `out`, the general definition's, and the sweep's analysis equals the separate
        /// functions'.
        #[test]
        fn tokens_and_analysis_match_the_general_definition(
            text in proptest::prop_oneof![
                tricky_text(),
                "\\PC{0,40}",
                "[a-zA-Zé0-9 '’.,:/$%-]{0,60}",
            ],
        ) {
            let mut out = String::new();
            let mut emitted: Vec<String> = Vec::new();
            tokenise_into(&text, &mut out, |t| emitted.push(t.to_owned()));
            proptest::prop_assert_eq!(&out, &tokenised_by_the_general_path(&text));
            proptest::prop_assert_eq!(emitted.join(" "), out.clone());
            proptest::prop_assert_eq!(tokenised(&text), out);
            let mut norm = String::from("stale");
            let guard = analyse_into(&text, &mut norm);
            proptest::prop_assert_eq!(&norm, &normalise(&text));
            proptest::prop_assert_eq!(guard, guard_fingerprint(&norm));
            proptest::prop_assert!(!norm.contains(|c: char| c.is_whitespace() && c != ' '));
            proptest::prop_assert!(!norm.starts_with(' ') && !norm.ends_with(' '));
            proptest::prop_assert!(!norm.contains("  "));
            proptest::prop_assert!(tokens(&norm).eq(norm.split(' ').filter(|t| !t.is_empty())));
        }
    }

    #[test]
    fn guard_ignores_only_fillers() {
        let a = normalise("The user really prefers email");
        let b = normalise("User prefers email");
        assert!(same_content_words(&a, &b));
        assert_eq!(guard_fingerprint(&a), guard_fingerprint(&b));
        let c = normalise("User prefers phone");
        assert!(!same_content_words(&a, &c));
    }

    #[test]
    fn jaccard_basics() {
        let a = shingles("a b c d");
        let b = shingles("a b c d");
        assert_eq!(jaccard(&a, &b), 1.0);
        let c = shingles("x y");
        assert_eq!(jaccard(&a, &c), 0.0);
        assert_eq!(jaccard(&[], &[]), 0.0);
        let d = shingles("a b c d e");
        assert!((jaccard(&a, &d) - 0.75).abs() < 1e-12);
    }
}
