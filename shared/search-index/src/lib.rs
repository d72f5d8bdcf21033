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

use text_search::{rank_scored, Analyzer, Ranking, TermCache, TextScores};

/// Why segment bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    #[error("corrupt segment: {0}")]
    Corrupt(&'static str),
}

/// One query over a ref's index: what it asks and how it is read.
#[derive(Clone, Copy)]
pub struct Query<'q> {
    /// Which entries it ranks.
    pub tags: TagQuery<'q>,
    pub analyzer: &'q Analyzer,
    /// The function's analyses of tail texts.
    pub cache: &'q TermCache,
    /// The query's words.
    pub text: &'q str,
    pub ranking: Ranking<'q>,
    /// The embedding model of the query's vector ("" for text).
    pub model: &'q str,
    pub limit: usize,
    /// The lists a semantic or hybrid query compares of each segment that has an approximate
    /// index, nearest first: `None` for [`default_probes`] (the trade between recall and time
    /// [`Ann::probes_for`] settles), `Some(usize::MAX)` for every list (the exact scan). A
    /// segment without lists is scanned exactly whatever this says.
    pub probes: Option<usize>,
}

/// What a search answers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Found<'a> {
    /// Best first.
    pub hits: Vec<TextHit<'a>>,
    /// How many of the documents a semantic or hybrid query ranked have no vector of its model
    /// (0 for a text query, which compares none): what the answer reports as not yet embedded,
    /// counted over the same live documents the full scan would rank.
    pub unembedded: usize,
}

/// One search over a ref's index: the best `limit` live documents the tags admit for the query,
/// best first, as `text_search::search` ranks the same documents (same hits, same scores; with
/// an approximate index, those of the lists [`probe_lists`] names). A text query without tags
/// reads only the postings of its terms ([`query::text_top`]); the other modes compare the
/// vectors of the lists read, and every candidate's text match decides fusion and which hits
/// are versions of one answer, so they go through [`Candidates`].
pub fn search<'a>(view: &View<'a>, q: &Query<'_>) -> Found<'a> {
    if matches!(q.ranking, Ranking::Text) && q.tags.all.is_empty() && q.tags.any.is_empty() {
        return Found {
            hits: query::text_top(view, q.analyzer, q.cache, q.text, q.limit),
            unembedded: 0,
        };
    }
    let planned = Planned::new(view, q);
    let unembedded = if matches!(q.ranking, Ranking::Text) {
        0
    } else {
        planned.candidates.unembedded
    };
    let Some(text) = planned.text else {
        // A query of stop words only has no results in any mode.
        return Found {
            hits: Vec::new(),
            unembedded,
        };
    };
    let candidates = planned.candidates;
    let similarity = match q.ranking {
        Ranking::Text => Vec::new(),
        Ranking::Semantic(v) | Ranking::Hybrid(v) => candidates.similarity(view, v),
    };
    let hits = rank_scored(&candidates.docs, &similarity, &text, q.ranking, q.limit)
        .into_iter()
        .map(|h| TextHit {
            id: candidates.docs[h.index].id,
            score: h.score,
            location: candidates.locations[h.index],
            created_at_ms: candidates.docs[h.index].created_ms,
        })
        .collect();
    Found { hits, unembedded }
}

/// How many lists [`search`] reads of each approximate segment among `segments` by default.
pub fn default_probes(segments: &[&Segment]) -> usize {
    let lists = segments.iter().map(|s| s.list_count()).max();
    Ann::default().probes_for(lists.unwrap_or(0))
}

/// The vector lists of each segment of `view` that [`search`] compares for `q` (parallel to
/// `view.segments`; empty for a segment without an approximate index, which is compared
/// whole): the nearest to its vector and, for a hybrid query, the lists holding its `limit`
/// best text hits, so that the documents the text leg ranks first are compared by vector too
/// and hybrid does not lose what text alone finds (docs/search.md "Vectors at scale"). It
/// needs only the text parts and the vector directories, never a list: a cold reader calls it
/// on the segments as first read to learn which lists to fetch before the query, and gets the
/// lists the query then compares, whichever lists are held.
pub fn probe_lists(view: &View<'_>, q: &Query<'_>) -> Vec<Vec<usize>> {
    let approximate = view.segments.iter().any(|s| s.is_approximate());
    match q.ranking {
        Ranking::Hybrid(_) if approximate => Planned::new(view, q).lists,
        _ => nearest_lists(view, q),
    }
}

/// The lists nearest to a semantic or hybrid query's vector, per segment.
fn nearest_lists(view: &View<'_>, q: &Query<'_>) -> Vec<Vec<usize>> {
    let probes = q.probes.unwrap_or_else(|| default_probes(view.segments));
    view.segments
        .iter()
        .map(|s| match q.ranking {
            Ranking::Semantic(v) | Ranking::Hybrid(v) if s.is_approximate() => s.probe(v, probes),
            _ => Vec::new(),
        })
        .collect()
}

/// A query's candidates with their text scores (the text leg, scored once), and the lists it
/// compares, chosen from those scores.
struct Planned<'a> {
    candidates: Candidates<'a>,
    /// `None` for a query of stop words only.
    text: Option<TextScores>,
    lists: Vec<Vec<usize>>,
}

impl<'a> Planned<'a> {
    fn new(view: &View<'a>, q: &Query<'_>) -> Self {
        let terms = text_search::query_terms(q.analyzer, q.text);
        let mut lists = nearest_lists(view, q);
        let shortlist = match q.ranking {
            Ranking::Text => Shortlist::every(),
            Ranking::Semantic(_) => Shortlist::probe(view, &lists, None),
            Ranking::Hybrid(_) => {
                Shortlist::probe(view, &lists, Some((&terms, q.analyzer.stems())))
            }
        };
        let mut candidates = Candidates::collect_shortlisted(view, &q.tags, q.model, &shortlist);
        if terms.is_empty() || q.limit == 0 {
            return Planned {
                candidates,
                text: None,
                lists,
            };
        }
        let text = candidates.text_scores(view, q.analyzer, q.cache, &terms);
        let approximate = view.segments.iter().any(|s| s.is_approximate());
        if matches!(q.ranking, Ranking::Hybrid(_)) && approximate {
            // The lists of the best text hits, from the scores the fusion ranks by: a hybrid
            // shortlist holds every document with a query term, so these are the text
            // ranking's own best hits, and whether a list is loaded does not change them.
            let mut extra = vec![Vec::new(); view.segments.len()];
            for hit in rank_scored(&candidates.docs, &[], &text, Ranking::Text, q.limit) {
                let Location::Segment { segment, doc } = candidates.locations[hit.index] else {
                    continue;
                };
                let s = view.segments[segment];
                if let Some(list) = s.list_of(doc).filter(|_| s.is_approximate()) {
                    if !lists[segment].contains(&list) {
                        lists[segment].push(list);
                        extra[segment].push(list);
                    }
                }
            }
            candidates.compare_lists(view, q.model, &extra);
        }
        Planned {
            candidates,
            text: Some(text),
            lists,
        }
    }
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
