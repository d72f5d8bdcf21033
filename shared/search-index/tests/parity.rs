//! The index ranks exactly as the full scan: for any ref split into segments, masks, expiries and
//! a tail, a search over the index gives the hits a search over the same live entries gives,
//! with the same scores bit for bit, in every mode; and merging or a byte round trip changes
//! nothing.

use std::collections::HashSet;

use proptest::prelude::*;
use search_index::{
    indexed_doc, merge::merge, Ann, Segment, SegmentError, TagQuery, TailDoc, View,
};
use text_search::{searchable_text, Analyzer, Document, Ranking, TermCache};

const WORDS: &[&str] = &[
    "refund",
    "refunds",
    "refunded",
    "customer",
    "customers",
    "email",
    "emailed",
    "café",
    "Cafe",
    "office",
    "Berlin",
    "Paris",
    "moved",
    "moving",
    "the",
    "a",
    "of",
    "1,000",
    "42",
    "東京",
    "会议",
    "举行",
    "ÜBER",
    "über",
    "naïve",
    "E_CONN_RESET",
    "E_CONN",
    "reset",
    "maxUploadSizeMb",
    "uploads",
    "payments.retry.max_attempts",
    "attempts",
    "James's",
    "James’s",
    "james",
    "l'école",
    "école",
    "what",
    "is",
    "can't",
    "api",
    "APIs",
];
const TAGS: &[&str] = &["proj", "billing", "kind:fact", "team-a"];
const MODEL: &str = "m1";
const NOW: i64 = 1_790_000_100_000;

#[derive(Clone, Debug)]
struct Entry {
    id: String,
    content: String,
    tags: Vec<String>,
    created_at_ms: i64,
    expires_at_ms: Option<i64>,
    vector: Option<Vec<f32>>,
}

/// Word picks, tag picks, expiry offset from now, a small vector, when it was written (in
/// seconds, few values: ties and times out of id order both occur).
type RawEntry = (Vec<usize>, Vec<usize>, Option<i64>, Option<Vec<i8>>, i64);

fn entry() -> impl Strategy<Value = RawEntry> {
    (
        prop::collection::vec(0..WORDS.len(), 0..12),
        prop::collection::vec(0..TAGS.len(), 0..3),
        prop::option::of(-50_000i64..50_000),
        prop::option::of(prop::collection::vec(-5i8..6, 4)),
        0i64..8,
    )
}

fn entries(raw: Vec<RawEntry>) -> Vec<Entry> {
    raw.into_iter()
        .enumerate()
        .map(|(i, (words, tags, expiry, vector, written))| {
            let mut tags: Vec<String> = tags.into_iter().map(|t| TAGS[t].to_owned()).collect();
            tags.sort();
            tags.dedup();
            Entry {
                id: format!("01JD{i:06}"),
                content: words
                    .iter()
                    .map(|w| WORDS[*w])
                    .collect::<Vec<_>>()
                    .join(" "),
                tags,
                created_at_ms: 1_790_000_000_000 + written * 1000,
                expires_at_ms: expiry.map(|e| NOW + e),
                vector: vector.map(|v| v.into_iter().map(f32::from).collect()),
            }
        })
        .collect()
}

/// The full scan's answer over the live entries (what memory-core ranks today).
fn full_scan(
    live: &[&Entry],
    analyzer: &Analyzer,
    query: &str,
    ranking: Ranking<'_>,
) -> Vec<(String, u64)> {
    let texts: Vec<String> = live
        .iter()
        .map(|e| searchable_text(&e.content, &e.tags))
        .collect();
    let docs: Vec<Document<'_>> = live
        .iter()
        .zip(&texts)
        .map(|(e, t)| Document {
            id: &e.id,
            text: t,
            created_ms: e.created_at_ms,
        })
        .collect();
    let vectors: Vec<Option<&[f32]>> = live.iter().map(|e| e.vector.as_deref()).collect();
    text_search::search(
        analyzer,
        &TermCache::with_budget(0),
        &docs,
        &vectors,
        query,
        ranking,
        10,
    )
    .into_iter()
    .map(|h| (docs[h.index].id.to_owned(), h.score.to_bits()))
    .collect()
}

fn to_doc(e: &Entry) -> search_index::IndexedDoc {
    indexed_doc(
        &e.id,
        &e.content,
        &e.tags,
        e.created_at_ms,
        e.expires_at_ms,
        e.vector.clone(),
    )
}

struct Split {
    segments: Vec<Segment>,
    masked: Vec<String>,
    tail: Vec<(Entry, String)>,
    live: Vec<Entry>,
}

/// Entries spread over `cuts` segments, a tail of the last `tail` entries, `masked` ones deleted
/// after indexing, and some tail entries rewriting an indexed id.
fn split(all: &[Entry], cuts: &[usize], tail: usize, masked: &[usize], rewrites: usize) -> Split {
    let indexed = all.len().saturating_sub(tail);
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (indexed + 1)).collect();
    bounds.push(0);
    bounds.push(indexed);
    bounds.sort_unstable();
    bounds.dedup();
    let stem = Analyzer::new(true);
    let segments: Vec<Segment> = bounds
        .windows(2)
        .map(|w| Segment::build(all[w[0]..w[1]].iter().map(to_doc).collect(), MODEL, &stem))
        .collect();
    let masked: Vec<String> = masked
        .iter()
        .filter(|m| indexed > 0 && **m < indexed)
        .map(|m| all[*m].id.clone())
        .collect();
    let mut tail_entries: Vec<Entry> = all[indexed..].to_vec();
    // A rewrite: an indexed id written again since (new text in the tail).
    for (k, e) in all[..indexed].iter().take(rewrites).enumerate() {
        let mut again = e.clone();
        again.content = format!(
            "{} rewritten {}",
            WORDS[k % WORDS.len()],
            WORDS[(k * 7) % WORDS.len()]
        );
        tail_entries.push(again);
    }
    let tail_ids: HashSet<&str> = tail_entries.iter().map(|e| e.id.as_str()).collect();
    let mut live: Vec<Entry> = all[..indexed]
        .iter()
        .filter(|e| !masked.contains(&e.id) && !tail_ids.contains(e.id.as_str()))
        .cloned()
        .collect();
    live.extend(tail_entries.iter().cloned());
    let live = live
        .into_iter()
        .filter(|e| e.expires_at_ms.is_none_or(|x| NOW < x))
        .collect();
    let tail = tail_entries
        .into_iter()
        .filter(|e| e.expires_at_ms.is_none_or(|x| NOW < x))
        .map(|e| {
            let text = searchable_text(&e.content, &e.tags);
            (e, text)
        })
        .collect();
    Split {
        segments,
        masked,
        tail,
        live,
    }
}

fn over_index(
    s: &Split,
    segments: &[&Segment],
    tags: &TagQuery<'_>,
    analyzer: &Analyzer,
    query: &str,
    ranking: Ranking<'_>,
) -> Vec<(String, u64)> {
    let masked: HashSet<&str> = s.masked.iter().map(String::as_str).collect();
    let tail: Vec<TailDoc<'_>> = s
        .tail
        .iter()
        .map(|(e, text)| TailDoc {
            id: &e.id,
            text,
            tags: &e.tags,
            created_at_ms: e.created_at_ms,
            vector: e.vector.as_deref(),
        })
        .collect();
    let view = View {
        segments,
        masked: &masked,
        dead: &[],
        tail: &tail,
        now_ms: NOW,
    };
    let cache = TermCache::with_budget(0);
    let search_index::Found { hits, unembedded } = search_index::search(
        &view,
        &search_index::Query {
            tags: *tags,
            analyzer,
            cache: &cache,
            text: query,
            ranking,
            model: MODEL,
            limit: 10,
            probes: None,
        },
    );
    // What the answer reports as not yet embedded: the ranked live entries without a vector.
    let want_unembedded = match ranking {
        Ranking::Text => 0,
        _ => s
            .live
            .iter()
            .filter(|e| tags.all.iter().all(|t| e.tags.contains(t)))
            .filter(|e| tags.any.is_empty() || tags.any.iter().any(|t| e.tags.contains(t)))
            .filter(|e| e.vector.is_none())
            .count(),
    };
    assert_eq!(unembedded, want_unembedded, "unembedded count");
    hits.into_iter()
        .map(|h| (h.id.to_owned(), h.score.to_bits()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_index_ranks_as_the_full_scan(
        raw in prop::collection::vec(entry(), 0..40),
        cuts in prop::collection::vec(0usize..40, 0..4),
        tail in 0usize..8,
        masked in prop::collection::vec(0usize..40, 0..6),
        rewrites in 0usize..3,
        query in prop::collection::vec(0..WORDS.len(), 1..4),
        stem in any::<bool>(),
        tag_filter in prop::option::of((0..TAGS.len(), prop::option::of(0..TAGS.len()))),
        qv in prop::collection::vec(-5i8..6, 4),
    ) {
        let all = entries(raw);
        let s = split(&all, &cuts, tail, &masked, rewrites);
        let analyzer = Analyzer::new(stem);
        let query: String = query.iter().map(|w| WORDS[*w]).collect::<Vec<_>>().join(" ");
        let qv: Vec<f32> = qv.into_iter().map(f32::from).collect();
        let (all_tags, any_tags): (Vec<String>, Vec<String>) = match tag_filter {
            None => (vec![], vec![]),
            Some((a, None)) => (vec![TAGS[a].to_owned()], vec![]),
            Some((a, Some(b))) => (vec![], vec![TAGS[a].to_owned(), TAGS[b].to_owned()]),
        };
        let tags = TagQuery { all: &all_tags, any: &any_tags };
        let admitted: Vec<&Entry> = s
            .live
            .iter()
            .filter(|e| all_tags.iter().all(|t| e.tags.contains(t)))
            .filter(|e| any_tags.is_empty() || any_tags.iter().any(|t| e.tags.contains(t)))
            .collect();
        let segments: Vec<&Segment> = s.segments.iter().collect();
        for ranking in [Ranking::Text, Ranking::Semantic(&qv), Ranking::Hybrid(&qv)] {
            let want = full_scan(&admitted, &analyzer, &query, ranking);
            prop_assert_eq!(over_index(&s, &segments, &tags, &analyzer, &query, ranking), want.clone(), "{:?} {:?}", ranking, query);
            // Bytes and back, then everything merged into one segment without the masked ones:
            // the same answer.
            let decoded: Vec<Segment> = s
                .segments
                .iter()
                .map(|g| {
                    let bytes = g.encode();
                    // A text query reads the text part alone; the others the vectors too.
                    let vectors = match ranking {
                        Ranking::Text => None,
                        _ => bytes.vectors.as_deref(),
                    };
                    Segment::decode(&bytes.text, vectors).unwrap()
                })
                .collect();
            let decoded_refs: Vec<&Segment> = decoded.iter().collect();
            prop_assert_eq!(over_index(&s, &decoded_refs, &tags, &analyzer, &query, ranking), want.clone());
            let masked: HashSet<&str> = s.masked.iter().map(String::as_str).collect();
            let merged = merge(&segments, |_, d| !masked.contains(&*d.id), Vec::new(), MODEL, &Analyzer::new(true), &Ann::default());
            prop_assert_eq!(over_index(&s, &[&merged], &tags, &analyzer, &query, ranking), want);
        }
    }
}

#[test]
fn any_changed_byte_is_refused() {
    let all = entries(vec![
        (vec![0, 4, 19], vec![0], None, Some(vec![1, 2, 3, 4]), 0),
        (vec![7, 8, 9], vec![1, 2], Some(1000), None, 1),
    ]);
    let encoded = Segment::build(
        all.iter().map(to_doc).collect(),
        MODEL,
        &Analyzer::new(true),
    )
    .encode();
    let vectors = encoded.vectors.clone().expect("a vector block");
    assert!(Segment::decode(&encoded.text, Some(&vectors)).is_ok());
    for i in 0..encoded.text.len() {
        let mut bad = encoded.text.clone();
        bad[i] ^= 0x01;
        assert!(
            matches!(Segment::decode(&bad, None), Err(SegmentError::Corrupt(_))),
            "text byte {i}"
        );
    }
    for i in 0..vectors.len() {
        let mut bad = vectors.clone();
        bad[i] ^= 0x01;
        assert!(
            Segment::decode(&encoded.text, Some(&bad)).is_err(),
            "vector byte {i}"
        );
    }
    assert!(Segment::decode(&encoded.text[..encoded.text.len() - 1], None).is_err());
    assert!(Segment::decode(&[], None).is_err());
    // Another segment's vector block is refused, though it verifies on its own.
    let other = Segment::build(
        all[..1].iter().map(to_doc).collect(),
        MODEL,
        &Analyzer::new(true),
    )
    .encode();
    assert!(Segment::decode(&encoded.text, other.vectors.as_deref()).is_err());
}

#[test]
fn a_merge_without_a_forgotten_entry_holds_none_of_its_terms_or_vector() {
    let all = entries(vec![
        (vec![19, 20], vec![0], None, Some(vec![5, 5, 5, 5]), 0),
        (vec![0, 3], vec![0], None, Some(vec![1, 0, 0, 0]), 1),
    ]);
    let analyzer = Analyzer::new(true);
    let segment = Segment::build(all.iter().map(to_doc).collect(), MODEL, &analyzer);
    let forgotten = all[0].id.clone();
    let rewritten = merge(
        &[&segment],
        |_, d| *d.id != *forgotten,
        Vec::new(),
        MODEL,
        &analyzer,
        &Ann::default(),
    );
    assert_eq!(rewritten.docs().len(), 1);
    assert!(rewritten.postings("東京", false).is_empty());
    assert!(rewritten
        .all_postings()
        .all(|(t, _)| !t.contains('東') && !t.contains('会')));
    let encoded = rewritten.encode();
    let mut bytes = encoded.text;
    bytes.extend(encoded.vectors.unwrap_or_default());
    for needle in ["東京".as_bytes(), forgotten.as_bytes(), &5f32.to_le_bytes()] {
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "{needle:?} left in the bytes"
        );
    }
}

fn one_segment_view(all: &[Entry]) -> Split {
    split(all, &[], 0, &[], 0)
}

#[test]
fn a_query_of_stop_words_finds_nothing_in_any_mode() {
    let all = entries(vec![
        (
            vec![14, 15, 16, 0],
            vec![0],
            None,
            Some(vec![1, 2, 3, 4]),
            0,
        ),
        (vec![14, 39, 40], vec![0], None, Some(vec![1, 2, 3, 4]), 1),
    ]);
    let s = one_segment_view(&all);
    let segments: Vec<&Segment> = s.segments.iter().collect();
    let qv = [1.0f32, 2.0, 3.0, 4.0];
    for stem in [false, true] {
        let analyzer = Analyzer::new(stem);
        for tags in [
            TagQuery::default(),
            TagQuery {
                all: &all[0].tags,
                any: &[],
            },
        ] {
            for ranking in [Ranking::Text, Ranking::Semantic(&qv), Ranking::Hybrid(&qv)] {
                let got = over_index(&s, &segments, &tags, &analyzer, "What is the", ranking);
                assert!(got.is_empty(), "{ranking:?}: {got:?}");
                let live: Vec<&Entry> = s.live.iter().collect();
                let found = over_index(&s, &segments, &tags, &analyzer, "refund", ranking);
                assert!(!found.is_empty());
                assert_eq!(found, full_scan(&live, &analyzer, "refund", ranking));
            }
        }
    }
}

#[test]
fn the_newer_version_leads_by_created_at_not_by_id() {
    // Same words, so the same query terms: two versions of one answer. The one with the lower
    // id was written later, and both paths put it first.
    let all = entries(vec![
        (vec![9, 10, 11], vec![], None, None, 5),
        (vec![9, 10, 11, 9], vec![], None, None, 2),
        (vec![0], vec![], None, None, 1),
    ]);
    let s = one_segment_view(&all);
    let segments: Vec<&Segment> = s.segments.iter().collect();
    let analyzer = Analyzer::new(true);
    let got = over_index(
        &s,
        &segments,
        &TagQuery::default(),
        &analyzer,
        "office Berlin",
        Ranking::Text,
    );
    let live: Vec<&Entry> = s.live.iter().collect();
    assert_eq!(
        got,
        full_scan(&live, &analyzer, "office Berlin", Ranking::Text)
    );
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, all[0].id, "written later, ranked first");
    assert_eq!(
        got[0].1, got[1].1,
        "and it takes the better version's score"
    );
}
