//! A query over a ref's index: the live documents are the segments' documents that are still
//! live (not expired at `now`, not masked because they were deleted, forgotten, superseded or
//! written again since the segment was built) plus the tail (entries written since the
//! watermark, read from the table). BM25 statistics are counted over exactly those documents,
//! from postings, and handed to `text_search` ([`TextScores::from_counts`], then
//! `text_search::search_scored`), so the scores and the order equal what the full scan of the
//! same live entries computes, bit for bit (docs/search.md "The index").

use std::collections::{HashMap, HashSet};

use text_search::similarity::{cosine_normed, norm_squared};
use text_search::{search_scored, Analyzer, Bm25, Candidate, Ranking, TermCache, TextScores};

use crate::segment::Segment;

/// An entry written since the watermark, as the table gives it.
#[derive(Clone, Copy, Debug)]
pub struct TailDoc<'a> {
    pub id: &'a str,
    /// `text_search::searchable_text` of the entry.
    pub text: &'a str,
    pub tags: &'a [String],
    pub created_at_ms: i64,
    pub vector: Option<&'a [f32]>,
}

/// Which entries a search ranks: all tags of `all`, and one of `any` when it is not empty.
#[derive(Clone, Copy, Debug, Default)]
pub struct TagQuery<'a> {
    pub all: &'a [String],
    pub any: &'a [String],
}

impl TagQuery<'_> {
    fn is_open(&self) -> bool {
        self.all.is_empty() && self.any.is_empty()
    }

    fn admits(&self, has: impl Fn(&str) -> bool) -> bool {
        self.all.iter().all(|t| has(t)) && (self.any.is_empty() || self.any.iter().any(|t| has(t)))
    }
}

/// What a query reads: the live segments, what was masked since they were built, the tail.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    pub segments: &'a [&'a Segment],
    /// Ids whose segment copy no longer stands. Every tail id masks its segment copy too.
    pub masked: &'a HashSet<&'a str>,
    /// Per segment (parallel to `segments`, or empty for none): ids whose copy in that segment
    /// was superseded by a later segment's or deleted since it was built. Unlike `masked`, a
    /// later segment's copy of the same id stays live.
    pub dead: &'a [HashSet<&'a str>],
    pub tail: &'a [TailDoc<'a>],
    pub now_ms: i64,
}

/// Where a candidate lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Location {
    Segment { segment: usize, doc: u32 },
    Tail(usize),
}

/// The candidates of one query: every live document its tags admit, in a fixed order (segments
/// in the order given, documents by id, then the tail), with what ranking needs of each.
#[derive(Debug, Default)]
pub struct Candidates<'a> {
    pub docs: Vec<Candidate<'a>>,
    pub vectors: Vec<Option<&'a [f32]>>,
    pub locations: Vec<Location>,
    lengths: Vec<u32>,
    /// Per segment, per document: its position among the candidates ([`NOT_A_CANDIDATE`] for
    /// none, [`ADMITTED`] for a live admitted document left out by a shortlist), for the
    /// postings walk. A flat array, not a map: a semantic query admits every live document, and
    /// 100,000 map insertions cost more than the vector scan itself.
    by_segment_doc: Vec<Vec<u32>>,
    /// The live documents the tags admit in the segments (candidates or not) and their total
    /// length: BM25's collection, which a shortlist does not change.
    admitted: u64,
    admitted_length: u64,
    /// How many of the admitted documents have no vector of the query's model.
    pub unembedded: usize,
}

const NOT_A_CANDIDATE: u32 = u32::MAX;
const ADMITTED: u32 = u32::MAX - 1;

/// Which documents of each segment a semantic or hybrid query ranks, per segment: `None` for
/// every admitted one (an exact segment), else the documents of the lists it probes and, for
/// hybrid, those holding a query term (docs/search.md "Vectors at scale"). Built by
/// [`Shortlist::probe`]; [`Shortlist::every`] changes nothing.
#[derive(Debug, Default)]
pub struct Shortlist {
    segments: Vec<Option<SegmentShortlist>>,
}

#[derive(Debug)]
struct SegmentShortlist {
    /// Documents ranked (probed, or holding a query term).
    ranked: Vec<u64>,
    /// Documents of the probed lists: the only ones whose vector is compared, so that the
    /// answer does not depend on which other lists a warm function happens to hold.
    probed: Vec<u64>,
}

fn set(bits: &mut [u64], p: u32) {
    bits[p as usize / 64] |= 1 << (p % 64);
}

fn has(bits: &[u64], p: u32) -> bool {
    bits[p as usize / 64] & (1 << (p % 64)) != 0
}

impl Shortlist {
    /// No shortlist: every admitted document is ranked and compared.
    pub fn every() -> Self {
        Shortlist::default()
    }

    /// The shortlist of a query over `view`: for each segment holding lists, the documents of
    /// the lists `lists` names for it (its nearest; those that are loaded), plus, when `terms`
    /// are given (hybrid), the documents holding one of them.
    pub fn probe(view: &View<'_>, lists: &[Vec<usize>], terms: Option<(&[String], bool)>) -> Self {
        let segments = view
            .segments
            .iter()
            .enumerate()
            .map(|(si, segment)| {
                if !segment.is_approximate() {
                    return None;
                }
                let words = segment.docs().len().div_ceil(64);
                let mut probed = vec![0u64; words];
                for &list in lists.get(si).map_or(&[][..], Vec::as_slice) {
                    for &doc in segment.list_docs(list) {
                        set(&mut probed, doc);
                    }
                }
                let mut ranked = probed.clone();
                if let Some((terms, stemmed)) = terms {
                    for term in terms {
                        for p in segment.postings(term, stemmed) {
                            set(&mut ranked, p.doc);
                        }
                    }
                }
                Some(SegmentShortlist { ranked, probed })
            })
            .collect();
        Shortlist { segments }
    }

    fn of(&self, segment: usize) -> Option<&SegmentShortlist> {
        self.segments.get(segment).and_then(Option::as_ref)
    }
}

impl<'a> Candidates<'a> {
    /// The live, admitted documents of `view`, for an embedding `model` (vectors of another
    /// model are not comparable and count as missing).
    pub fn collect(view: &View<'a>, tags: &TagQuery<'_>, model: &str) -> Self {
        Candidates::collect_shortlisted(view, tags, model, &Shortlist::every())
    }

    /// [`Candidates::collect`], ranking only what `shortlist` keeps of the segments that have
    /// one (the others' and the tail's documents all), while the BM25 collection stays every
    /// admitted live document.
    pub fn collect_shortlisted(
        view: &View<'a>,
        tags: &TagQuery<'_>,
        model: &str,
        shortlist: &Shortlist,
    ) -> Self {
        let tail_ids: HashSet<&str> = view.tail.iter().map(|d| d.id).collect();
        let mut out = Candidates::default();
        for (si, segment) in view.segments.iter().enumerate() {
            let mut positions = vec![NOT_A_CANDIDATE; segment.docs().len()];
            // Masked, rewritten in the tail, dead or expired: one bit each, found by binary
            // search of the (few) ids, instead of hashing every document's id.
            let dead = Dead::of(si, segment, view, &tail_ids);
            let same_model = !model.is_empty() && segment.vector_model() == model;
            let short = shortlist.of(si);
            let admitted: Box<dyn Iterator<Item = u32>> = if tags.is_open() {
                Box::new(0..segment.docs().len() as u32)
            } else {
                // Start from the rarest named tag's postings rather than every document.
                let seed = tags
                    .all
                    .iter()
                    .map(|t| segment.tagged(t))
                    .min_by_key(|l| l.len());
                match seed {
                    Some(list) => Box::new(list.iter().copied()),
                    None => {
                        let mut any: Vec<u32> = tags
                            .any
                            .iter()
                            .flat_map(|t| segment.tagged(t).iter().copied())
                            .collect();
                        any.sort_unstable();
                        any.dedup();
                        Box::new(any.into_iter())
                    }
                }
            };
            for doc in admitted {
                if dead.contains(doc) || !tags.admits(|t| segment.has_tag(doc, t)) {
                    continue;
                }
                let meta = &segment.docs()[doc as usize];
                out.admitted += 1;
                out.admitted_length += u64::from(meta.length);
                if !(same_model && segment.has_vector(doc)) {
                    out.unembedded += 1;
                }
                if short.is_some_and(|s| !has(&s.ranked, doc)) {
                    positions[doc as usize] = ADMITTED;
                    continue;
                }
                positions[doc as usize] = out.docs.len() as u32;
                out.docs.push(Candidate {
                    id: &meta.id,
                    created_ms: meta.created_at_ms,
                });
                // A text hit outside the probed lists is ranked by its text alone, whether or
                // not its list is at hand (unless a hybrid query then compares that list,
                // `compare_lists`): a warm function may hold lists a cold one does not read,
                // and both must answer the same.
                let compared = same_model && short.is_none_or(|s| has(&s.probed, doc));
                out.vectors
                    .push(compared.then(|| segment.vector(doc)).flatten());
                out.locations.push(Location::Segment { segment: si, doc });
                out.lengths.push(meta.length);
            }
            out.by_segment_doc.push(positions);
        }
        for (i, d) in view.tail.iter().enumerate() {
            if !tags.admits(|t| d.tags.iter().any(|x| x == t)) {
                continue;
            }
            if d.vector.is_none() {
                out.unembedded += 1;
            }
            out.docs.push(Candidate {
                id: d.id,
                created_ms: d.created_at_ms,
            });
            out.vectors.push(d.vector);
            out.locations.push(Location::Tail(i));
            out.lengths.push(0);
        }
        out
    }

    /// Compares the vectors of the candidates in `lists` too (per segment, parallel to
    /// `view.segments`; loaded lists only): a hybrid query's lists of its best text hits, chosen
    /// after its text scores (`crate::probe_lists`), so that those hits are ranked by their
    /// vector as well as their text. Only the candidates already ranked gain one: the
    /// documents ranked do not change, and the text scores stand.
    pub fn compare_lists(&mut self, view: &View<'a>, model: &str, lists: &[Vec<usize>]) {
        for (si, lists) in lists.iter().enumerate() {
            let segment: &'a Segment = view.segments[si];
            if model.is_empty() || segment.vector_model() != model {
                continue;
            }
            for &list in lists {
                for &doc in segment.list_docs(list) {
                    let at = self.by_segment_doc[si][doc as usize];
                    if at < ADMITTED {
                        self.vectors[at as usize] = segment.vector(doc);
                    }
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Each candidate's cosine similarity to `query` (`None` without a comparable vector): a
    /// segment's vector with the norm the segment keeps, a tail vector's computed here. The
    /// same bits as `text_search::similarity::cosine`, which the full scan computes.
    pub fn similarity(&self, view: &View<'a>, query: &[f32]) -> Vec<Option<f64>> {
        let query_norm = norm_squared(query);
        self.vectors
            .iter()
            .zip(&self.locations)
            .map(|(vector, location)| {
                let vector = (*vector)?;
                let norm = match *location {
                    Location::Segment { segment, doc } => {
                        view.segments[segment].vector_normed(doc)?.1
                    }
                    Location::Tail(_) => norm_squared(vector),
                };
                cosine_normed(vector, norm, query, query_norm)
            })
            .collect()
    }

    /// How each candidate matches `terms` (the query's, `text_search::query_terms`): the
    /// scores the full scan's analysis of the same documents gives, counted from postings.
    pub fn text_scores(
        &mut self,
        view: &View<'a>,
        analyzer: &Analyzer,
        cache: &TermCache,
        terms: &[String],
    ) -> TextScores {
        let stemmed = analyzer.stems();
        let width = terms.len();
        // Per candidate, the frequency of each query term: one flat array, not a map of
        // vectors (a common term is held by a large share of 100,000 candidates).
        let mut frequencies = vec![0u32; self.len() * width];
        let mut df = vec![0u32; width];
        for (si, segment) in view.segments.iter().enumerate() {
            let positions = &self.by_segment_doc[si];
            for (ti, term) in terms.iter().enumerate() {
                for p in segment.postings(term, stemmed) {
                    let at = positions[p.doc as usize];
                    if at != NOT_A_CANDIDATE {
                        df[ti] += 1;
                    }
                    if at < ADMITTED {
                        frequencies[at as usize * width + ti] = p.tf;
                    }
                }
            }
        }
        for (at, location) in self.locations.iter().enumerate() {
            let Location::Tail(i) = *location else {
                continue;
            };
            let analysed = cache.analysed(analyzer, view.tail[i].text);
            self.lengths[at] = analysed.length;
            for (ti, t) in terms.iter().enumerate() {
                let f = analysed.frequency(t);
                if f > 0 {
                    df[ti] += 1;
                }
                frequencies[at * width + ti] = f;
            }
        }
        // The segments' admitted documents (candidates or not), then the tail's.
        let mut documents = self.admitted;
        let mut total_length = self.admitted_length;
        for (at, location) in self.locations.iter().enumerate() {
            if let Location::Tail(_) = location {
                documents += 1;
                total_length += u64::from(self.lengths[at]);
            }
        }
        let statistics = Bm25::new(documents, total_length, &df);
        TextScores::from_counts(
            &statistics,
            self.len(),
            frequencies
                .chunks_exact(width.max(1))
                .enumerate()
                .map(|(at, tf)| (at, self.lengths[at], tf)),
        )
    }
}

/// A text hit found from postings alone.
#[derive(Clone, Debug, PartialEq)]
pub struct TextHit<'a> {
    pub id: &'a str,
    pub score: f64,
    pub location: Location,
    pub created_at_ms: i64,
}

/// What is dead in one segment for this query: masked, rewritten in the tail, or expired.
struct Dead {
    /// Sorted positions.
    positions: Vec<u32>,
    bits: Vec<u64>,
    length: u64,
}

impl View<'_> {
    fn dead_in(&self, segment: usize) -> Option<&HashSet<&str>> {
        self.dead.get(segment)
    }
}

impl Dead {
    fn of(si: usize, segment: &Segment, view: &View<'_>, tail_ids: &HashSet<&str>) -> Dead {
        let mut positions: Vec<u32> = view
            .masked
            .iter()
            .chain(tail_ids.iter())
            .chain(view.dead_in(si).into_iter().flatten())
            .filter_map(|id| segment.position(id))
            .chain(
                segment
                    .expiring()
                    .iter()
                    .copied()
                    .filter(|&p| !segment.docs()[p as usize].is_live_at(view.now_ms)),
            )
            .collect();
        positions.sort_unstable();
        positions.dedup();
        let mut bits = vec![0u64; segment.docs().len().div_ceil(64)];
        let mut length = 0u64;
        for &p in &positions {
            bits[p as usize / 64] |= 1 << (p % 64);
            length += u64::from(segment.docs()[p as usize].length);
        }
        Dead {
            positions,
            bits,
            length,
        }
    }

    fn contains(&self, p: u32) -> bool {
        self.bits[p as usize / 64] & (1 << (p % 64)) != 0
    }
}

/// The best `limit` text hits of `query` over `view` with no tag restriction, best first: what
/// `search` gives for `Ranking::Text`, computed from the postings of the query's terms only. The
/// statistics come from each segment's totals less what is dead, and only the documents holding
/// a query term are scored and ranked: a text ranking compares hits alone (newer versions first
/// compares hits with hits, by their createdAt), so no query walks every document.
pub fn text_top<'a>(
    view: &View<'a>,
    analyzer: &Analyzer,
    cache: &TermCache,
    query: &str,
    limit: usize,
) -> Vec<TextHit<'a>> {
    let terms = text_search::query_terms(analyzer, query);
    if terms.is_empty() || limit == 0 {
        return Vec::new();
    }
    let tail_ids: HashSet<&str> = view.tail.iter().map(|d| d.id).collect();
    let dead: Vec<Dead> = view
        .segments
        .iter()
        .enumerate()
        .map(|(si, s)| Dead::of(si, s, view, &tail_ids))
        .collect();
    let mut n = view.tail.len() as u64;
    let mut total_length = 0u64;
    for (segment, dead) in view.segments.iter().zip(&dead) {
        n += (segment.docs().len() - dead.positions.len()) as u64;
        total_length += segment.total_length() - dead.length;
    }
    if n == 0 {
        return Vec::new();
    }
    let stemmed = analyzer.stems();
    let mut df = vec![0u32; terms.len()];
    let mut found: HashMap<Location, Vec<u32>> = HashMap::new();
    for (si, (segment, dead)) in view.segments.iter().zip(&dead).enumerate() {
        for (ti, term) in terms.iter().enumerate() {
            for p in segment.postings(term, stemmed) {
                if dead.contains(p.doc) {
                    continue;
                }
                df[ti] += 1;
                found
                    .entry(Location::Segment {
                        segment: si,
                        doc: p.doc,
                    })
                    .or_insert_with(|| vec![0; terms.len()])[ti] = p.tf;
            }
        }
    }
    let mut tail_lengths = Vec::with_capacity(view.tail.len());
    for (i, d) in view.tail.iter().enumerate() {
        let analysed = cache.analysed(analyzer, d.text);
        total_length += u64::from(analysed.length);
        tail_lengths.push(analysed.length);
        let tf: Vec<u32> = terms.iter().map(|t| analysed.frequency(t)).collect();
        for (ti, f) in tf.iter().enumerate() {
            if *f > 0 {
                df[ti] += 1;
            }
        }
        if tf.iter().any(|&f| f > 0) {
            found.insert(Location::Tail(i), tf);
        }
    }
    let statistics = Bm25::new(n, total_length, &df);
    // The hits alone are the documents ranked; the statistics are the whole live set's.
    let hits: Vec<(Location, Vec<u32>)> = found.into_iter().collect();
    let mut documents = Vec::with_capacity(hits.len());
    let mut lengths = Vec::with_capacity(hits.len());
    for (location, _) in &hits {
        let (id, length, created_ms) = match *location {
            Location::Segment { segment, doc } => {
                let meta = &view.segments[segment].docs()[doc as usize];
                (&*meta.id, meta.length, meta.created_at_ms)
            }
            Location::Tail(i) => (view.tail[i].id, tail_lengths[i], view.tail[i].created_at_ms),
        };
        documents.push(Candidate { id, created_ms });
        lengths.push(length);
    }
    let scores = TextScores::from_counts(
        &statistics,
        hits.len(),
        hits.iter()
            .enumerate()
            .map(|(i, (_, tf))| (i, lengths[i], tf.as_slice())),
    );
    search_scored(&documents, &[], &scores, Ranking::Text, limit)
        .into_iter()
        .map(|h| TextHit {
            id: documents[h.index].id,
            score: h.score,
            location: hits[h.index].0,
            created_at_ms: documents[h.index].created_ms,
        })
        .collect()
}
