//! The analyzer property the index is built on: the stemmed analysis of a text is its unstemmed
//! analysis with each term mapped by `Analyzer::stem_term`, and the BM25 length is the same. A
//! segment keeps unstemmed terms and groups them by stem, so it answers a stemmed query right
//! only while this holds: stop words must be dropped by the word before stemming (in both
//! analyses alike), identifier parts stemmed like any word, possessives cut before either.

use proptest::prelude::*;
use text_search::Analyzer;

/// Pieces that exercise each rule: stop words in several spellings, possessives with both
/// apostrophes, identifiers of every shape, stems, numbers, CJK, accents and other scripts.
const PIECES: &[&str] = &[
    "the",
    "The",
    "THE",
    "what's",
    "What’s",
    "can't",
    "Can’t",
    "won't",
    "is",
    "a",
    "A",
    "I",
    "James's",
    "James’s",
    "James'",
    "Dana's",
    "'s",
    "its",
    "it's",
    "E_CONN_RESET",
    "payments.retry.max_attempts",
    "maxUploadSizeMb",
    "HTTPServer",
    "is_active",
    "iPhone",
    "v1.2",
    "l'école",
    "O'Brien",
    "refunds",
    "refunded",
    "Running",
    "ponies",
    "caresses",
    "1,000",
    "3.14",
    "2026-12-01",
    "東京都",
    "会议在东京举行",
    "회의 일정",
    "VIP客户",
    "Café",
    "naïve",
    "ÜBER",
    "straße",
    "İstanbul",
    "Ωmega",
    "x",
    "__init__",
    "a.b.c",
    "The_Thing",
    "doesNotExist",
    "ABCdef",
    "e-mail",
    "bob@example.com",
];

const SEPARATORS: &[&str] = &[" ", "  ", "\n", ", ", "_", ".", "'", "’", "-", ""];

fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => prop::sample::select(PIECES).prop_map(str::to_owned),
        1 => "[a-zA-Z0-9_.'’ éÉüÜßıİ東京会议한국-]{0,16}",
    ];
    prop::collection::vec((piece, prop::sample::select(SEPARATORS)), 0..12).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(p, s)| format!("{p}{s}"))
            .collect::<String>()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn stemmed_analysis_is_the_unstemmed_one_mapped_by_stem_term(text in text()) {
        let (stem, plain) = (Analyzer::new(true), Analyzer::new(false));
        let (stemmed, stemmed_length) = stem.analyse(&text);
        let (unstemmed, unstemmed_length) = plain.analyse(&text);
        let mapped: Vec<String> = unstemmed
            .iter()
            .map(|t| stem.stem_term(t).unwrap_or_else(|| t.clone()))
            .collect();
        prop_assert_eq!(stemmed, mapped, "{:?}", text);
        prop_assert_eq!(stemmed_length, unstemmed_length, "{:?}", text);
        prop_assert!(unstemmed.iter().all(|t| plain.stem_term(t).is_none()));
    }
}

#[test]
fn the_rules_the_property_covers_are_in_force() {
    let (stem, plain) = (Analyzer::new(true), Analyzer::new(false));
    assert!(plain.terms("what is the").is_empty());
    assert_eq!(plain.terms("James's"), ["james"]);
    assert_eq!(stem.terms("maxUploads"), ["maxupload", "max", "upload"]);
    assert_eq!(plain.analyse("maxUploads twice").1, 2);
}
