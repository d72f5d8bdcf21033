//! The approximate vector index of large segments (docs/search.md "Vectors at scale"): recall
//! against the exact scan on a generated corpus, the exact scan below the threshold, a segment
//! read list by list answering as one read whole, a forgotten entry's vector gone from the lists
//! and their centroids, and a changed byte in a list or the directory refused.

use std::collections::HashSet;

use search_index::merge::merge;
use search_index::query::text_top;
use search_index::{
    indexed_doc, probe_lists, search, Ann, Found, IndexedDoc, Location, Query, Segment,
    SegmentError, TagQuery, View,
};
use text_search::{Analyzer, Ranking, TermCache};

const MODEL: &str = "m1";
const NOW: i64 = 1_790_000_100_000;
const D: usize = 16;

/// xorshift64*: a fixed stream of numbers without a test dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn unit(&mut self) -> f32 {
        (self.next() % 2001) as f32 / 1000.0 - 1.0
    }
}

/// `n` entries whose vectors gather around 64 topics (as embeddings gather by subject), and
/// 40 query vectors drawn the same way.
fn corpus(n: usize) -> (Vec<IndexedDoc>, Vec<Vec<f32>>) {
    let mut rng = Rng(0x5EED);
    let centres: Vec<Vec<f32>> = (0..64)
        .map(|_| (0..D).map(|_| rng.unit()).collect())
        .collect();
    let draw = |rng: &mut Rng| -> Vec<f32> {
        let c = &centres[(rng.next() % 64) as usize];
        c.iter().map(|x| x + 0.6 * rng.unit()).collect()
    };
    // A vocabulary of 200 words, so that a query's terms are in a few percent of entries.
    let vocabulary: Vec<String> = (0..200).map(|i| format!("word{i}")).collect();
    let docs = (0..n)
        .map(|i| {
            let words: Vec<&str> = (0..6)
                .map(|_| vocabulary[(rng.next() % 200) as usize].as_str())
                .collect();
            let vector = draw(&mut rng);
            indexed_doc(
                &format!("01K{i:023}"),
                &words.join(" "),
                &[],
                NOW - (n - i) as i64 * 1000,
                None,
                Some(vector),
            )
        })
        .collect();
    let queries = (0..40).map(|_| draw(&mut rng)).collect();
    (docs, queries)
}

fn ann() -> Ann {
    Ann {
        min_vectors: 2_000,
        list_size: 128,
        probes: 6,
    }
}

/// `text` without tags, the best 10, reading `probes` lists of each approximate segment.
fn query<'q>(
    analyzer: &'q Analyzer,
    cache: &'q TermCache,
    text: &'q str,
    ranking: Ranking<'q>,
    probes: usize,
) -> Query<'q> {
    Query {
        tags: TagQuery::default(),
        analyzer,
        cache,
        text,
        ranking,
        model: MODEL,
        limit: 10,
        probes: Some(probes),
    }
}

/// [`search`] for [`query`], with a stemming analyzer and a fresh cache.
fn run<'a>(view: &View<'a>, text: &str, ranking: Ranking<'_>, probes: usize) -> Found<'a> {
    let (analyzer, cache) = (Analyzer::new(true), TermCache::default());
    search(view, &query(&analyzer, &cache, text, ranking, probes))
}

/// [`probe_lists`] for [`query`], with a stemming analyzer and a fresh cache.
fn lists(view: &View<'_>, text: &str, ranking: Ranking<'_>) -> Vec<Vec<usize>> {
    let (analyzer, cache) = (Analyzer::new(true), TermCache::default());
    probe_lists(view, &query(&analyzer, &cache, text, ranking, ann().probes))
}

fn top<'a>(view: &View<'a>, ranking: Ranking<'_>, probes: usize) -> Vec<&'a str> {
    let hits = run(view, "word7 word42", ranking, probes).hits;
    hits.into_iter().map(|h| h.id).collect()
}

fn view<'a>(segments: &'a [&'a Segment], masked: &'a HashSet<&'a str>) -> View<'a> {
    View {
        segments,
        masked,
        dead: &[],
        tail: &[],
        now_ms: NOW,
    }
}

/// Recall@10 of `probes` lists against every list, over the queries.
fn recall(segment: &Segment, queries: &[Vec<f32>], probes: usize, hybrid: bool) -> f64 {
    let masked = HashSet::new();
    let segments = [segment];
    let v = view(&segments, &masked);
    let (mut found, mut wanted) = (0, 0);
    for q in queries {
        let ranking = |q| {
            if hybrid {
                Ranking::Hybrid(q)
            } else {
                Ranking::Semantic(q)
            }
        };
        let exact = top(&v, ranking(q), usize::MAX);
        let approximate = top(&v, ranking(q), probes);
        found += approximate.iter().filter(|id| exact.contains(id)).count();
        wanted += exact.len();
    }
    found as f64 / wanted as f64
}

#[test]
fn recall_at_10_against_the_exact_scan_holds_a_floor() {
    let (docs, queries) = corpus(6_000);
    let segment = Segment::build_with(docs, MODEL, &Analyzer::new(true), &ann());
    assert!(segment.is_approximate());
    let semantic = recall(&segment, &queries, ann().probes, false);
    let hybrid = recall(&segment, &queries, ann().probes, true);
    assert!(semantic >= 0.9, "semantic recall@10 {semantic}");
    assert!(hybrid >= 0.9, "hybrid recall@10 {hybrid}");
    // Reading more lists never loses what fewer found, and every list is the exact scan.
    assert!(recall(&segment, &queries, 1, false) <= semantic);
    assert_eq!(recall(&segment, &queries, usize::MAX, false), 1.0);
}

#[test]
fn below_the_threshold_a_segment_is_scanned_exactly() {
    let (docs, queries) = corpus(1_999);
    let small = Segment::build_with(docs, MODEL, &Analyzer::new(true), &ann());
    assert!(!small.is_approximate());
    assert_eq!(recall(&small, &queries, 1, false), 1.0);
    assert_eq!(recall(&small, &queries, 1, true), 1.0);
}

#[test]
fn a_segment_read_list_by_list_answers_as_one_read_whole() {
    let (docs, queries) = corpus(4_000);
    let built = Segment::build_with(docs, MODEL, &Analyzer::new(true), &ann());
    let bytes = built.encode();
    let block = bytes.vectors.as_deref().expect("vectors");
    let whole = Segment::decode(&bytes.text, Some(block)).expect("decodes");
    assert_eq!(whole, built, "a round trip changes nothing");
    let masked = HashSet::new();
    for q in &queries[..10] {
        let head = Segment::vector_head_len(block).expect("head") as usize;
        assert!(
            head < block.len() / 4,
            "the directory is a small part of the block"
        );
        let a = [&whole];
        for ranking in [Ranking::Semantic(q), Ranking::Hybrid(q)] {
            let mut partial =
                Segment::decode_head(&bytes.text, &block[..head]).expect("head decodes");
            let read = head + load_probed(&mut partial, block, "word7", ranking);
            assert!(
                read < block.len() / 2,
                "read {read} of {} bytes",
                block.len()
            );
            let b = [&partial];
            let full = run(&view(&a, &masked), "word7", ranking, ann().probes);
            let listed = run(&view(&b, &masked), "word7", ranking, ann().probes);
            assert_eq!(
                full.unembedded, 0,
                "every document has a vector, loaded or not"
            );
            assert_eq!(listed.unembedded, 0);
            // Only the probed lists' vectors are compared, in either mode, whichever other
            // lists are at hand: the same answer.
            assert_eq!(full, listed);
        }
    }
}

/// Loads into `partial` (read by `Segment::decode_head`) the lists `probe_lists` names for the
/// query, from the text part and directory alone, as a cold reader does; answers the bytes read.
fn load_probed(partial: &mut Segment, block: &[u8], query: &str, ranking: Ranking<'_>) -> usize {
    let masked = HashSet::new();
    let lists = {
        let segments = [&*partial];
        lists(&view(&segments, &masked), query, ranking)
    };
    let mut read = 0;
    for &list in &lists[0] {
        let r = partial.list_range(list);
        read += (r.end - r.start) as usize;
        partial
            .load_list(list, &block[r.start as usize..r.end as usize])
            .expect("list verifies");
    }
    read
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

#[test]
fn a_hybrid_querys_best_text_hit_outside_the_nearest_lists_is_compared_by_vector() {
    let (docs, queries) = corpus(6_000);
    let analyzer = Analyzer::new(true);
    let built = Segment::build_with(docs, MODEL, &analyzer, &ann());
    let bytes = built.encode();
    let block = bytes.vectors.as_deref().expect("vectors");
    let whole = Segment::decode(&bytes.text, Some(block)).expect("decodes");
    let masked = HashSet::new();
    let segments = [&whole];
    let v = view(&segments, &masked);
    // A query whose best text hit lies outside the lists nearest to its vector, and resembles
    // it (a positive cosine, so comparing its vector changes its score).
    let text = "word7 word42";
    let best = match text_top(&v, &analyzer, &TermCache::default(), text, 1)[..] {
        [ref hit] => match hit.location {
            Location::Segment { doc, .. } => doc,
            Location::Tail(_) => unreachable!("no tail"),
        },
        _ => panic!("the text query matches"),
    };
    let list = whole.list_of(best).expect("the hit has a vector");
    let best_vector = whole.vector(best).expect("vector").to_vec();
    let q = queries
        .iter()
        .find(|q| !whole.probe(q, ann().probes).contains(&list) && cosine(q, &best_vector) > 0.2)
        .expect("a query far enough from the hit's list");
    assert!(
        lists(&v, text, Ranking::Hybrid(q))[0].contains(&list),
        "the hit's list is read"
    );
    // Semantic reads only the nearest lists.
    assert!(!lists(&v, text, Ranking::Semantic(q))[0].contains(&list));
    let hybrid = |view: &View<'_>, probes: usize| -> Vec<(String, u64)> {
        run(view, text, Ranking::Hybrid(q), probes)
            .hits
            .into_iter()
            .map(|h| (h.id.to_owned(), h.score.to_bits()))
            .collect()
    };
    let exact = hybrid(&v, usize::MAX);
    let warm = hybrid(&v, ann().probes);
    let id = &whole.docs()[best as usize].id;
    let score_of = |hits: &[(String, u64)]| {
        hits.iter()
            .find(|h| *h.0 == **id)
            .map(|h| h.1)
            .expect("the best text hit is answered")
    };
    // Scored with its vector as the exact scan scores it, not by its text alone.
    assert_eq!(score_of(&warm), score_of(&exact));
    // A cold reader fetching only the lists `probe_lists` names answers the same.
    let head = Segment::vector_head_len(block).expect("head") as usize;
    let mut partial = Segment::decode_head(&bytes.text, &block[..head]).expect("head decodes");
    load_probed(&mut partial, block, text, Ranking::Hybrid(q));
    assert!(partial.list_loaded(list));
    let cold_segments = [&partial];
    assert_eq!(hybrid(&view(&cold_segments, &masked), ann().probes), warm);
}

#[test]
fn forgetting_takes_the_vector_out_of_the_lists_and_their_centroids() {
    let (docs, _) = corpus(3_000);
    let analyzer = Analyzer::new(true);
    let segment = Segment::build_with(docs.clone(), MODEL, &analyzer, &ann());
    assert!(segment.is_approximate());
    let forgotten: HashSet<&str> = docs.iter().step_by(7).map(|d| d.id.as_str()).collect();
    let rewritten = merge(
        &[&segment],
        |_, meta| !forgotten.contains(&*meta.id),
        Vec::new(),
        MODEL,
        &analyzer,
        &ann(),
    );
    // The rewrite is the segment built from the kept entries alone: centroids trained on
    // their vectors only, lists of theirs only.
    let kept: Vec<IndexedDoc> = docs
        .iter()
        .filter(|d| !forgotten.contains(d.id.as_str()))
        .cloned()
        .collect();
    let direct = Segment::build_with(kept, MODEL, &analyzer, &ann());
    let bytes = rewritten.encode();
    assert_eq!(bytes, direct.encode());
    let block = bytes.vectors.expect("vectors");
    for d in docs.iter().filter(|d| forgotten.contains(d.id.as_str())) {
        let raw: Vec<u8> = d
            .vector
            .as_ref()
            .expect("vector")
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert!(
            !block.windows(raw.len()).any(|w| w == raw.as_slice()),
            "a forgotten vector's bytes remain"
        );
        assert!(rewritten.position(&d.id).is_none());
    }
}

#[test]
fn a_changed_byte_in_a_list_or_the_directory_is_refused() {
    let (docs, queries) = corpus(3_000);
    let segment = Segment::build_with(docs, MODEL, &Analyzer::new(true), &ann());
    let bytes = segment.encode();
    let block = bytes.vectors.expect("vectors");
    let head = Segment::vector_head_len(&block).expect("head") as usize;
    // A byte of a list: the whole read refuses it, and so does loading that list alone.
    let mut changed = block.clone();
    changed[head + 5] ^= 1;
    assert_eq!(
        Segment::decode(&bytes.text, Some(&changed)),
        Err(SegmentError::Corrupt("list checksum"))
    );
    let mut partial = Segment::decode_head(&bytes.text, &changed[..head]).expect("head intact");
    let r = partial.list_range(0);
    assert_eq!(
        partial.load_list(0, &changed[r.start as usize..r.end as usize]),
        Err(SegmentError::Corrupt("list checksum"))
    );
    // Other lists still load, and the refused one stays unread (no vector of it is compared).
    let other = partial.probe(&queries[0], 3).into_iter().find(|&l| l != 0);
    if let Some(l) = other {
        let r = partial.list_range(l);
        partial
            .load_list(l, &changed[r.start as usize..r.end as usize])
            .expect("an intact list loads");
    }
    assert!(partial.list_docs(0).is_empty());
    // A byte of the directory (a centroid, a list's digest, a slot): refused before any list.
    for at in [20, head / 2, head - 40] {
        let mut changed = block.clone();
        changed[at] ^= 1;
        assert!(Segment::decode(&bytes.text, Some(&changed)).is_err());
        assert!(Segment::decode_head(&bytes.text, &changed[..head]).is_err());
    }
}
