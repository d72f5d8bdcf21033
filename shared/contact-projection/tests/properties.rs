//! Panic-freedom and the projection's invariants on random input. The generator is a fixed
//! xorshift (no `proptest`: it would bring `regex-syntax`'s Unicode tables into the test build,
//! and the profile's patterns must compile without them, as in production).

use contact_projection::{detect, project, Kind};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Pieces that steer random text towards the detectors' edges.
const PIECES: &[&str] = &[
    "@",
    "＠",
    ".",
    "-",
    "+",
    "(",
    ")",
    "/",
    ":",
    " ",
    "\u{a0}",
    "tel:",
    "ext.",
    " at ",
    " dot ",
    "[at]",
    "(dot)",
    "0",
    "1",
    "5",
    "9",
    "00",
    "+44",
    "Street",
    "rue ",
    "Via ",
    "straße ",
    "str.",
    "Postfach ",
    "P.O. Box ",
    "zip ",
    "SW1A 2AA",
    "github.com/",
    "linkedin.com/in/",
    "t.me/",
    "skype: ",
    "u/",
    "#",
    "x",
    "é",
    "ß",
    "日本",
    "😀",
    "\n",
    "`",
    "com",
    "de",
    "a",
    "Z",
    "ê",
    "\u{200b}",
    "'",
    ",",
    "º",
];

fn random_text(rng: &mut Rng) -> String {
    let mut s = String::new();
    for _ in 0..rng.below(40) {
        if rng.below(3) == 0 {
            // Any scalar value, including multi-byte ones next to ASCII separators.
            let c = char::from_u32(rng.below(0x11_0000) as u32).unwrap_or('?');
            s.push(c);
        } else {
            s.push_str(PIECES[rng.below(PIECES.len())]);
        }
    }
    s
}

#[test]
fn random_text_projects_without_panicking_and_keeps_its_invariants() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let text = random_text(&mut rng);
        let spans = detect(&text);
        let mut last_end = 0;
        for d in &spans {
            assert!(d.start < d.end && d.start >= last_end && d.end <= text.len());
            assert!(text.is_char_boundary(d.start) && text.is_char_boundary(d.end));
            last_end = d.end;
        }
        let p = project(&text);
        assert_eq!(p.removed, spans.len());
        assert_eq!(
            Kind::ALL.iter().map(|&k| p.kinds.get(k)).sum::<usize>(),
            p.removed
        );
        if spans.is_empty() {
            assert_eq!(p.text, text);
        }
        // Deterministic.
        assert_eq!(project(&text), p);
    }
}
