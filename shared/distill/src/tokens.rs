//! Token accounting against the advertised tokenizer — RFC 0062 run contract §2 ("the budget caps
//! input + output token accounting against the advertised `tokenizerName`, ±10% conformance
//! tolerance").
//!
//! The tokenizer is the real cl100k_base byte-pair encoder from `tiktoken-rs`. Its merge ranks are
//! compiled into the binary (`include_str!` of the crate's `assets/cl100k_base.tiktoken`), so
//! counting never touches the network or the filesystem. Building the encoder parses ~100k ranks
//! and takes tens of milliseconds, so it is built once per process (the crate's `LazyLock`
//! singleton) on the first count; [`warm_up`] builds it ahead of time where that matters.
//!
//! Special-token spellings such as `<|endoftext|>` inside memory text are counted as the ordinary
//! text they are (`encode_ordinary`): entry content is data, never control tokens.

use tiktoken_rs::CoreBPE;

pub use crate::archive::TOKENIZER_NAME;

/// Longest slice handed to the encoder in one call, in bytes.
///
/// `tiktoken-rs` runs cl100k_base's pre-tokenizer through `fancy-regex`, whose backtracking VM
/// gives up on a whitespace run of about one million characters — and `tiktoken-rs` unwraps that
/// error, which would abort a Lambda built with `panic = "abort"`. Splitting long text keeps every
/// call far below that limit (and bounds the quadratic merge loop on huge single pieces).
const MAX_SEGMENT_BYTES: usize = 64 * 1024;

fn encoder() -> &'static CoreBPE {
    tiktoken_rs::cl100k_base_singleton()
}

/// Builds the encoder now rather than on the first [`count`] (parsing the embedded ranks,
/// ~40 ms, ~30 MiB of tables). `memory-dream` does not: its cold start stays short and the
/// first background dream pays the cost instead.
pub fn warm_up() {
    let _ = encoder();
}

/// Number of cl100k_base tokens in `text`.
///
/// Exact (identical to `tiktoken` on the whole string) for any text that has no 64 KiB stretch
/// without a "newline followed by a non-space character" — which covers every entry the host
/// accepts (content is capped at 64 KiB) and every summary this crate produces. Longer stretches
/// are cut at a character boundary, which may shift the count by a token or two per cut instead
/// of aborting the process.
pub fn count(text: &str) -> usize {
    let bpe = encoder();
    Segments { rest: text }
        .map(|segment| bpe.encode_ordinary(segment).len())
        .sum()
}

/// [`count`] saturated into the `u32` the wire shapes use.
pub fn count_u32(text: &str) -> u32 {
    u32::try_from(count(text)).unwrap_or(u32::MAX)
}

/// Splits text into encoder-sized slices whose token counts add up to the count of the whole.
///
/// cl100k_base's pre-tokenizer never lets a piece run across a `\n` that is followed by a
/// non-whitespace character (no alternative of its pattern can consume a newline and then a
/// letter, digit or symbol), and BPE merges never cross pieces, so cutting just after such a
/// newline leaves the total unchanged. That is also why the distiller can price a summary line by
/// line: every line it writes ends in `\n` and starts with `#` or `-`.
struct Segments<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.rest.is_empty() {
            return None;
        }
        if self.rest.len() <= MAX_SEGMENT_BYTES {
            let all = self.rest;
            self.rest = "";
            return Some(all);
        }
        let cut = safe_cut(self.rest, MAX_SEGMENT_BYTES);
        let (head, tail) = self.rest.split_at(cut);
        self.rest = tail;
        Some(head)
    }
}

/// The last exact split point at or below `limit` (a `\n` followed by non-whitespace), else the
/// last character boundary at or below `limit`. Always returns a value in `1..=limit` for
/// `text.len() > limit`, so iteration makes progress.
fn safe_cut(text: &str, limit: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = limit;
    while i > 0 {
        if bytes[i - 1] == b'\n' {
            if let Some(next) = text.get(i..).and_then(|t| t.chars().next()) {
                if !next.is_whitespace() {
                    return i;
                }
            }
        }
        i -= 1;
    }
    let mut cut = limit;
    while cut > 0 && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    if cut == 0 {
        // Unreachable for limit >= 4, kept so a tiny limit cannot loop forever.
        cut = text
            .char_indices()
            .nth(1)
            .map(|(index, _)| index)
            .unwrap_or(text.len());
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> usize {
        encoder().encode_ordinary(text).len()
    }

    #[test]
    fn known_cl100k_counts() {
        // Reference values from OpenAI's tiktoken for cl100k_base.
        assert_eq!(count(""), 0);
        assert_eq!(count("hello world"), 2);
        assert_eq!(count("tiktoken is great!"), 6);
        assert_eq!(count("<|endoftext|>"), raw("<|endoftext|>"));
        assert!(count("<|endoftext|>") > 1, "special tokens count as text");
    }

    #[test]
    fn long_whitespace_runs_do_not_abort() {
        let text = format!("{}x", " ".repeat(1_200_000));
        assert!(count(&text) > 0);
    }

    /// xorshift64*, so the corpus is fixed without a rand dependency.
    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed >> 12;
        *seed ^= *seed << 25;
        *seed ^= *seed >> 27;
        seed.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    #[test]
    fn splitting_after_newline_before_non_space_is_exact() {
        const ALPHABET: &[&str] = &[
            "a",
            "B",
            "é",
            "日",
            "7",
            "42",
            " ",
            "  ",
            "\n",
            "\r\n",
            "\t",
            ".",
            ")",
            "'s",
            "'",
            "-",
            "#",
            "[REDACTED:k1]",
            "😀",
            "\u{a0}",
            "\n\n",
            " \n",
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..2_000 {
            let len = 1 + (rng(&mut seed) % 60) as usize;
            let text: String = (0..len)
                .map(|_| ALPHABET[(rng(&mut seed) % ALPHABET.len() as u64) as usize])
                .collect();
            let whole = raw(&text);
            for (i, _) in text.match_indices('\n') {
                let cut = i + 1;
                let next = text[cut..].chars().next();
                if next.is_some_and(|c| !c.is_whitespace()) {
                    let (a, b) = text.split_at(cut);
                    assert_eq!(raw(a) + raw(b), whole, "cut at {cut} of {text:?}");
                }
            }
        }
    }

    #[test]
    fn segmented_count_matches_whole_text_count() {
        let line = "- Customer prefers email over phone (x3, latest 2026-11-20)\n";
        let text = line.repeat(3 * MAX_SEGMENT_BYTES / line.len());
        assert!(text.len() > 2 * MAX_SEGMENT_BYTES);
        assert_eq!(count(&text), raw(&text));
    }

    #[test]
    fn safe_cut_always_makes_progress() {
        let text = "é".repeat(10);
        for limit in 1..text.len() {
            let cut = safe_cut(&text, limit);
            assert!(cut >= 1 && text.is_char_boundary(cut));
        }
    }
}
