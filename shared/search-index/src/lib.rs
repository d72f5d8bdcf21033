//! A persisted search index per memoryRef, as a pure algorithm (docs/search.md "The index"):
//! immutable segments holding the analysis of the ref's entries (terms, postings, lengths, tags,
//! vectors), a manifest naming the live ones, a query that ranks the segments' live documents
//! plus the tail the table gives with exactly the full scan's scores, and merging (compaction,
//! and the rewrite that takes forgotten entries out for good). No I/O: the adapters fetch and
//! store the bytes, the services decide when.
//!
//! The ranking is `text_search`'s: the index only changes where the per-document statistics come
//! from (postings instead of analysing every entry), so a search over the index and a search
//! over the table give the same results in the same order.

mod codec;
pub mod ivf;
pub mod manifest;
pub mod merge;
pub mod query;
pub mod segment;

pub use ivf::Ann;
pub use manifest::{segment_name, Manifest, Retired, SegmentRef};
pub use query::{Candidates, Location, Shortlist, TagQuery, TailDoc, TextHit, View};
pub use segment::{DocMeta, Encoded, IndexedDoc, Posting, Segment};

use text_search::{rank_scored, Analyzer, Ranking, TermCache};

/// Why segment bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    #[error("corrupt segment: {0}")]
    Corrupt(&'static str),
}

/// One search over a ref's index: the best `limit` live documents the tags admit for `query`,
/// best first, as `text_search::search` ranks the same documents (same hits, same scores). A
/// text query without tags reads only the postings of its terms ([`query::text_top`]); the
/// other modes compare every live vector, and every candidate's text match decides fusion and
/// which hits are versions of one answer, so they go through [`Candidates`]. `model` is the
/// embedding model of the query's vector ("" for text).
#[allow(clippy::too_many_arguments)]
pub fn search<'a>(
    view: &View<'a>,
    tags: &TagQuery<'_>,
    analyzer: &Analyzer,
    cache: &TermCache,
    query: &str,
    ranking: Ranking<'_>,
    model: &str,
    limit: usize,
) -> Vec<TextHit<'a>> {
    search_counting(view, tags, analyzer, cache, query, ranking, model, limit).0
}

/// [`search`], and how many of the documents a semantic or hybrid query ranked have no vector
/// of `model` (0 for a text query, which compares none): what the answer reports as not yet
/// embedded, counted over the same live documents the full scan would rank.
#[allow(clippy::too_many_arguments)]
pub fn search_counting<'a>(
    view: &View<'a>,
    tags: &TagQuery<'_>,
    analyzer: &Analyzer,
    cache: &TermCache,
    query: &str,
    ranking: Ranking<'_>,
    model: &str,
    limit: usize,
) -> (Vec<TextHit<'a>>, usize) {
    let probes = default_probes(view.segments);
    search_probing(
        view, tags, analyzer, cache, query, ranking, model, limit, probes,
    )
}

/// How many lists [`search_counting`] reads of each approximate segment among `segments`: a
/// cold reader fetches exactly those lists (`Segment::probe` with this number) before the query.
pub fn default_probes(segments: &[&Segment]) -> usize {
    let lists = segments.iter().map(|s| s.list_count()).max();
    Ann::default().probes_for(lists.unwrap_or(0))
}

/// The vector lists of each segment of `view` that a query compares (parallel to
/// `view.segments`; empty for a segment without an approximate index, which is compared
/// whole): the `probes` nearest to its vector and, for a hybrid query, the lists holding its
/// `limit` best text hits, so that the documents the text leg ranks first are compared by
/// vector too and hybrid does not lose what text alone finds (docs/search.md "Vectors at
/// scale"). It reads only the text part and the vector directory, never a list: a cold reader
/// calls it on the segments as first read to learn which lists to fetch, and the query calls it
/// again with the same answer whichever lists are then held.
#[allow(clippy::too_many_arguments)]
pub fn probe_lists(
    view: &View<'_>,
    analyzer: &Analyzer,
    cache: &TermCache,
    query: &str,
    ranking: Ranking<'_>,
    limit: usize,
    probes: usize,
) -> Vec<Vec<usize>> {
    let vector = match ranking {
        Ranking::Text => return vec![Vec::new(); view.segments.len()],
        Ranking::Semantic(q) | Ranking::Hybrid(q) => q,
    };
    let mut lists: Vec<Vec<usize>> = view
        .segments
        .iter()
        .map(|s| {
            if s.is_approximate() {
                s.probe(vector, probes)
            } else {
                Vec::new()
            }
        })
        .collect();
    if matches!(ranking, Ranking::Hybrid(_)) {
        for hit in query::text_top(view, analyzer, cache, query, limit) {
            let Location::Segment { segment, doc } = hit.location else {
                continue;
            };
            let s = view.segments[segment];
            if let Some(list) = s.list_of(doc).filter(|_| s.is_approximate()) {
                if !lists[segment].contains(&list) {
                    lists[segment].push(list);
                }
            }
        }
    }
    lists
}

/// [`search_counting`] reading `probes` lists of each segment that has an approximate index
/// (the trade between recall and time that [`Ann::probes_for`] settles by default; a segment
/// without one is scanned exactly whatever `probes` says, and `usize::MAX` reads every list:
/// the exact scan).
#[allow(clippy::too_many_arguments)]
pub fn search_probing<'a>(
    view: &View<'a>,
    tags: &TagQuery<'_>,
    analyzer: &Analyzer,
    cache: &TermCache,
    query: &str,
    ranking: Ranking<'_>,
    model: &str,
    limit: usize,
    probes: usize,
) -> (Vec<TextHit<'a>>, usize) {
    if matches!(ranking, Ranking::Text) && tags.all.is_empty() && tags.any.is_empty() {
        return (query::text_top(view, analyzer, cache, query, limit), 0);
    }
    let terms = text_search::query_terms(analyzer, query);
    let shortlist = match ranking {
        Ranking::Text => Shortlist::every(),
        Ranking::Semantic(_) => {
            let lists = probe_lists(view, analyzer, cache, query, ranking, limit, probes);
            Shortlist::probe(view, &lists, None)
        }
        Ranking::Hybrid(_) => {
            let lists = probe_lists(view, analyzer, cache, query, ranking, limit, probes);
            Shortlist::probe(view, &lists, Some((&terms, analyzer.stems())))
        }
    };
    let mut candidates = Candidates::collect_shortlisted(view, tags, model, &shortlist);
    let unembedded = if matches!(ranking, Ranking::Text) {
        0
    } else {
        candidates.unembedded
    };
    if terms.is_empty() || limit == 0 {
        // A query of stop words only has no results in any mode.
        return (Vec::new(), unembedded);
    }
    let text = candidates.text_scores(view, analyzer, cache, &terms);
    let similarity = match ranking {
        Ranking::Text => Vec::new(),
        Ranking::Semantic(q) | Ranking::Hybrid(q) => candidates.similarity(view, q),
    };
    let hits = rank_scored(&candidates.docs, &similarity, &text, ranking, limit)
        .into_iter()
        .map(|h| TextHit {
            id: candidates.docs[h.index].id,
            score: h.score,
            location: candidates.locations[h.index],
            created_at_ms: candidates.docs[h.index].created_ms,
        })
        .collect();
    (hits, unembedded)
}

/// What a segment is built from for one entry: its searchable text analysed without stemming,
/// with the length BM25 normalises by (identifier parts not counted, so it is not the number of
/// terms).
pub fn indexed_doc(
    id: &str,
    content: &str,
    tags: &[String],
    created_at_ms: i64,
    expires_at_ms: Option<i64>,
    vector: Option<Vec<f32>>,
) -> IndexedDoc {
    let (terms, length) =
        Analyzer::new(false).analyse(&text_search::searchable_text(content, tags));
    IndexedDoc {
        id: id.to_owned(),
        created_at_ms,
        expires_at_ms,
        tags: tags.to_vec(),
        terms,
        length,
        vector,
    }
}
