//! An immutable index segment: the analysis of a set of entries of one memoryRef, laid out so
//! that a query touches only the postings of its own terms (docs/search.md "The index").
//!
//! A segment keeps the *unstemmed* terms of each entry's searchable text (stop words are not
//! terms: the analyzer drops them before stemming, so neither analysis holds them), with their
//! postings (document, term frequency), each document's BM25 length (its words, an identifier's
//! parts not counted: they are terms, so the length is stored, not counted from the postings),
//! its id, creation time and expiry, its tags, and its embedding when it has one. English
//! stemming is a pure function of one term (`Analyzer::stem_term`), identifier parts included, so the stemmed postings of a query term are the union of the postings
//! of the unstemmed terms that share its stem; the segment stores that grouping too, so one
//! segment answers stemmed and unstemmed queries alike, with the same frequencies and lengths the
//! full-scan analysis would count.
//!
//! Documents are kept sorted by id, so finding one by id (a masked entry) is a binary search. The byte form ends with the SHA-256 of everything before it: a segment that does
//! not verify is refused whole ([`SegmentError::Corrupt`]), and the caller falls back to the table.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use text_search::analyzer::is_stemmable;
use text_search::similarity::norm_squared;
use text_search::Analyzer;

use crate::codec::{Reader, Writer};
use crate::ivf::{self, Ann};
use crate::SegmentError;

/// First bytes of every segment: the format and its version. Version 2: terms of the analyzer
/// that drops stop words and indexes identifier parts, lengths by BM25's rule; a version-1
/// segment would rank otherwise, so it is refused like a corrupt one and rebuilt. Version 3:
/// each term's postings list has its byte length in the term directory, so a read decodes the
/// directory and leaves the lists as bytes until a query names their term; a version-2
/// segment is refused and rebuilt the same way.
const MAGIC: &[u8; 8] = b"WOPSEG\x00\x03";

/// What a segment is built from: one live entry, analysed without stemming.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexedDoc {
    pub id: String,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub tags: Vec<String>,
    /// `Analyzer::new(false).analyse(searchable_text)`: the terms in text order (an identifier's
    /// parts after it) and the BM25 length, which leaves the parts out.
    pub terms: Vec<String>,
    pub length: u32,
    /// The embedding of the entry's content under the segment's model, when it has one.
    pub vector: Option<Vec<f32>>,
}

/// One document of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocMeta {
    pub id: Box<str>,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    /// BM25 length of the searchable text (the same with and without stemming; fewer than the
    /// document's terms when it holds an identifier).
    pub length: u32,
}

impl DocMeta {
    /// The TTL rule of the read API: live strictly before the expiry.
    pub fn is_live_at(&self, now_ms: i64) -> bool {
        self.expires_at_ms.is_none_or(|exp| now_ms < exp)
    }
}

/// A posting: which document (its position in the segment) and how often the term occurs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posting {
    pub doc: u32,
    pub tf: u32,
}

/// A key (term, stem or tag) and the range of its list in a flat array.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
struct Lists<T> {
    keys: Vec<Box<str>>,
    starts: Vec<u32>,
    items: Vec<T>,
}

impl<T: Copy> Lists<T> {
    fn from_map(map: BTreeMap<String, Vec<T>>) -> Self {
        let mut lists = Lists {
            keys: Vec::with_capacity(map.len()),
            starts: Vec::with_capacity(map.len() + 1),
            items: Vec::new(),
        };
        for (key, items) in map {
            lists.keys.push(key.into_boxed_str());
            lists.starts.push(lists.items.len() as u32);
            lists.items.extend(items);
        }
        lists.starts.push(lists.items.len() as u32);
        lists
    }

    fn get(&self, key: &str) -> &[T] {
        match self.keys.binary_search_by(|k| (**k).cmp(key)) {
            Ok(i) => &self.items[self.starts[i] as usize..self.starts[i + 1] as usize],
            Err(_) => &[],
        }
    }

    fn at(&self, i: usize) -> &[T] {
        &self.items[self.starts[i] as usize..self.starts[i + 1] as usize]
    }
}

/// A segment's vectors grouped into lists (docs/search.md "Vectors at scale"): one list and no
/// centroid below the size where a segment gets an approximate index (the exact scan), else the
/// lists of [`crate::ivf`], each stored contiguously so that it can be read by byte range.
#[derive(Clone, Debug, PartialEq, Default)]
struct VectorLists {
    /// Unit centroids, `dimensions` each; empty for one list (exact).
    centroids: Vec<f32>,
    /// List `l` holds slots `starts[l]..starts[l + 1]` (one entry, 0, without vectors).
    starts: Vec<u32>,
    /// Per list: the row of `vectors` where it begins, none when it is not loaded.
    loaded_at: Vec<Option<u32>>,
    /// Per slot, its document.
    doc_of_slot: Vec<u32>,
    /// Per list, the SHA-256 of its bytes, from the verified directory: kept while lists are
    /// still to be loaded ([`Segment::load_list`]), empty otherwise.
    digests: Vec<[u8; 32]>,
    /// Where the lists' bytes begin in the vector block.
    lists_at: u64,
    /// Every list loaded, in slot order: a slot is its row of `vectors`.
    whole: bool,
}

impl VectorLists {
    fn count(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    fn slots(&self, list: usize) -> std::ops::Range<usize> {
        self.starts[list] as usize..self.starts[list + 1] as usize
    }

    /// Every list loaded, in slot order.
    fn whole(starts: Vec<u32>, centroids: Vec<f32>, vector_of: &[Option<u32>]) -> Self {
        let loaded_at = starts[..starts.len().saturating_sub(1)]
            .iter()
            .map(|&s| Some(s))
            .collect();
        VectorLists {
            doc_of_slot: doc_of_slot(vector_of, *starts.last().unwrap_or(&0)),
            centroids,
            starts,
            loaded_at,
            digests: Vec::new(),
            lists_at: 0,
            whole: true,
        }
    }
}

fn doc_of_slot(vector_of: &[Option<u32>], slots: u32) -> Vec<u32> {
    let mut out = vec![0u32; slots as usize];
    for (doc, slot) in vector_of.iter().enumerate() {
        if let Some(slot) = slot {
            out[*slot as usize] = doc as u32;
        }
    }
    out
}

/// The terms and their postings, each list kept in its byte form (delta-coded varints) and
/// decoded when a query reads that term: a cold query over a million documents decodes the
/// term directory and its own terms' lists, not tens of millions of postings, and a warm
/// function holds a few bytes a posting instead of eight.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
struct TermPostings {
    keys: Vec<Box<str>>,
    /// Per term, its number of postings.
    counts: Vec<u32>,
    /// Term `i`'s list is `bytes[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<usize>,
    bytes: Vec<u8>,
    /// Documents of the segment: a posting naming another is never answered.
    docs: u32,
}

impl TermPostings {
    fn from_map(map: BTreeMap<String, Vec<Posting>>, docs: u32) -> Self {
        let mut out = TermPostings {
            docs,
            offsets: vec![0],
            ..TermPostings::default()
        };
        let mut w = Writer::default();
        for (key, list) in map {
            let mut previous = 0u32;
            for p in &list {
                w.uint(u64::from(p.doc - previous));
                w.uint(u64::from(p.tf));
                previous = p.doc;
            }
            out.keys.push(key.into_boxed_str());
            out.counts.push(list.len() as u32);
            out.offsets.push(w.len());
        }
        out.bytes = w.finish();
        out
    }

    fn find(&self, key: &str) -> Option<usize> {
        self.keys.binary_search_by(|k| (**k).cmp(key)).ok()
    }

    /// Term `i`'s postings. The bytes were verified with the segment's digest, so they are the
    /// encoder's; a list that would not decode (never written so) ends where it stops decoding.
    fn at(&self, i: usize) -> Vec<Posting> {
        let mut r = Reader::new(&self.bytes[self.offsets[i]..self.offsets[i + 1]]);
        let mut out = Vec::with_capacity(self.counts[i] as usize);
        let mut previous = 0u32;
        for _ in 0..self.counts[i] {
            let (Ok(delta), Ok(tf)) = (r.u32(), r.u32()) else {
                break;
            };
            match previous.checked_add(delta).filter(|d| *d < self.docs) {
                Some(doc) => {
                    out.push(Posting { doc, tf });
                    previous = doc;
                }
                None => break,
            }
        }
        out
    }

    fn encode(&self, w: &mut Writer) {
        w.uint(self.keys.len() as u64);
        let mut previous = "";
        for (i, key) in self.keys.iter().enumerate() {
            w.shared_prefix_str(previous, key);
            previous = key;
            w.uint(u64::from(self.counts[i]));
            w.uint((self.offsets[i + 1] - self.offsets[i]) as u64);
        }
        w.bytes(&self.bytes);
    }

    fn decode(r: &mut Reader<'_>, docs: u32) -> Result<Self, SegmentError> {
        let n = r.count()?;
        let mut out = TermPostings {
            docs,
            keys: Vec::with_capacity(n),
            counts: Vec::with_capacity(n),
            offsets: Vec::with_capacity(n + 1),
            bytes: Vec::new(),
        };
        out.offsets.push(0);
        let mut previous = String::new();
        let mut end = 0usize;
        for _ in 0..n {
            let key = r.ascending_key(&mut previous, out.keys.is_empty())?;
            out.keys.push(key);
            out.counts.push(r.u32()?);
            end = end
                .checked_add(r.count()?)
                .ok_or(SegmentError::Corrupt("postings"))?;
            out.offsets.push(end);
        }
        out.bytes = r.bytes(end)?.to_vec();
        Ok(out)
    }
}

/// An immutable segment, decoded.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    docs: Vec<DocMeta>,
    terms: TermPostings,
    /// Stem -> ids of the terms (positions in `terms`) that stem to it.
    stems: Lists<u32>,
    tags: Lists<u32>,
    /// The embedding model of `vectors` (empty: the segment holds none).
    vector_model: String,
    dimensions: u32,
    /// Per document: its vector's slot, or none. Slots are numbered list by list.
    vector_of: Vec<Option<u32>>,
    /// How the slots are grouped into lists, and which lists are loaded.
    lists: VectorLists,
    /// The loaded lists' vectors, `dimensions` each (every list's, in slot order, unless the
    /// segment was read list by list: [`Segment::decode_head`]).
    vectors: Vec<f32>,
    /// Per stored vector, its squared norm (`similarity::norm_squared`): computed once when the
    /// segment is built or decoded, so a query's exact scan is one dot product per vector.
    norms: Vec<f64>,
    total_length: u64,
    /// Positions of the documents with an expiry (few: most entries never expire).
    expiring: Vec<u32>,
}

impl Segment {
    /// Builds a segment. Documents are ordered by id; a repeated id keeps its last version.
    /// Vectors of another length than the first one seen are left out (a document without a
    /// comparable vector is "not yet embedded", never compared).
    pub fn build(input: Vec<IndexedDoc>, vector_model: &str, analyzer: &Analyzer) -> Self {
        Segment::build_with(input, vector_model, analyzer, &Ann::default())
    }

    /// [`Segment::build`], with lists of vectors when `ann` says the segment is large enough.
    pub fn build_with(
        mut input: Vec<IndexedDoc>,
        vector_model: &str,
        analyzer: &Analyzer,
        ann: &Ann,
    ) -> Self {
        input.reverse();
        input.sort_by(|a, b| a.id.cmp(&b.id));
        input.dedup_by(|later, kept| later.id == kept.id);
        let mut terms: BTreeMap<String, Vec<Posting>> = BTreeMap::new();
        let mut tags: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        let mut docs = Vec::with_capacity(input.len());
        let mut vector_of = Vec::with_capacity(input.len());
        let mut vectors = Vec::new();
        let mut dimensions = 0u32;
        let mut total_length = 0u64;
        for (position, doc) in input.into_iter().enumerate() {
            let position = position as u32;
            let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
            for t in &doc.terms {
                *counts.entry(t.as_str()).or_default() += 1;
            }
            for (term, tf) in counts {
                terms
                    .entry(term.to_owned())
                    .or_default()
                    .push(Posting { doc: position, tf });
            }
            for tag in &doc.tags {
                let list = tags.entry(tag.clone()).or_default();
                if list.last() != Some(&position) {
                    list.push(position);
                }
            }
            let length = doc.length;
            total_length += u64::from(length);
            let vector = doc.vector.filter(|v| {
                !v.is_empty() && !vector_model.is_empty() && {
                    if dimensions == 0 {
                        dimensions = v.len() as u32;
                    }
                    v.len() == dimensions as usize
                }
            });
            vector_of.push(vector.map(|v| {
                let at = (vectors.len() / dimensions.max(1) as usize) as u32;
                vectors.extend_from_slice(&v);
                at
            }));
            docs.push(DocMeta {
                id: doc.id.into_boxed_str(),
                created_at_ms: doc.created_at_ms,
                expires_at_ms: doc.expires_at_ms,
                length,
            });
        }
        let d = dimensions.max(1) as usize;
        let (lists, vector_of, vectors) = match ann.lists_for(vectors.len() / d) {
            1 => {
                let slots = (vectors.len() / d) as u32;
                (
                    VectorLists::whole(vec![0, slots], Vec::new(), &vector_of),
                    vector_of,
                    vectors,
                )
            }
            count => grouped(&vectors, d, count, vector_of),
        };
        let lists = if dimensions == 0 {
            VectorLists::whole(vec![0], Vec::new(), &vector_of)
        } else {
            lists
        };
        let terms = TermPostings::from_map(terms, docs.len() as u32);
        let mut stems: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for (i, term) in terms.keys.iter().enumerate() {
            if let Some(stem) = analyzer.stem_term(term) {
                stems.entry(stem).or_default().push(i as u32);
            }
        }
        Segment {
            terms,
            stems: Lists::from_map(stems),
            tags: Lists::from_map(tags),
            vector_model: if dimensions == 0 {
                String::new()
            } else {
                vector_model.to_owned()
            },
            dimensions,
            expiring: expiring_of(&docs),
            docs,
            vector_of,
            lists,
            norms: norms_of(&vectors, dimensions),
            vectors,
            total_length,
        }
    }

    pub fn docs(&self) -> &[DocMeta] {
        &self.docs
    }

    /// Positions of the documents that have an expiry.
    pub fn expiring(&self) -> &[u32] {
        &self.expiring
    }

    /// Sum of the documents' lengths (all of them, live or not).
    pub fn total_length(&self) -> u64 {
        self.total_length
    }

    /// The position of the document with `id`.
    pub fn position(&self, id: &str) -> Option<u32> {
        self.docs
            .binary_search_by(|d| (*d.id).cmp(id))
            .ok()
            .map(|p| p as u32)
    }

    /// Postings of a query term as the analyzer produced it: with stemming, the merged postings
    /// of every unstemmed term sharing its stem (frequencies added), else the term's own.
    pub fn postings(&self, term: &str, stemmed: bool) -> Vec<Posting> {
        if !stemmed || !is_stemmable(term) {
            // Unstemmed, or a term the analyzer never stems (a number, a CJK bigram, a word
            // with other letters): the documents hold it as it is.
            return self
                .terms
                .find(term)
                .map_or_else(Vec::new, |i| self.terms.at(i));
        }
        let group = self.stems.get(term);
        if let [only] = group {
            // Most stems have one surface form here: its postings are already the answer.
            return self.terms.at(*only as usize);
        }
        let mut all: Vec<Posting> = group
            .iter()
            .flat_map(|&t| self.terms.at(t as usize))
            .collect();
        all.sort_unstable_by_key(|p| p.doc);
        let mut merged: Vec<Posting> = Vec::with_capacity(all.len());
        for p in all {
            match merged.last_mut() {
                Some(last) if last.doc == p.doc => last.tf += p.tf,
                _ => merged.push(p),
            }
        }
        merged
    }

    /// Every term with its postings, in term order (merging reads them all).
    pub fn all_postings(&self) -> impl Iterator<Item = (&str, Vec<Posting>)> {
        (0..self.terms.keys.len()).map(|i| (&*self.terms.keys[i], self.terms.at(i)))
    }

    /// Every tag with its documents, in tag order.
    pub fn all_tags(&self) -> impl Iterator<Item = (&str, &[u32])> {
        (0..self.tags.keys.len()).map(|i| (&*self.tags.keys[i], self.tags.at(i)))
    }

    /// Positions of the documents tagged `tag`, ascending.
    pub fn tagged(&self, tag: &str) -> &[u32] {
        self.tags.get(tag)
    }

    /// The tags of document `doc` (for filters naming several tags).
    pub fn has_tag(&self, doc: u32, tag: &str) -> bool {
        self.tagged(tag).binary_search(&doc).is_ok()
    }

    pub fn vector_model(&self) -> &str {
        &self.vector_model
    }

    /// The vector of document `doc`, if it has one.
    pub fn vector(&self, doc: u32) -> Option<&[f32]> {
        self.vector_normed(doc).map(|(v, _)| v)
    }

    /// The vector of document `doc` with its squared norm, if it has one.
    pub fn vector_normed(&self, doc: u32) -> Option<(&[f32], f64)> {
        let slot = self.vector_of.get(doc as usize).copied().flatten()?;
        let at = self.row_of(slot)?;
        let d = self.dimensions as usize;
        Some((
            self.vectors.get(at * d..(at + 1) * d)?,
            *self.norms.get(at)?,
        ))
    }

    /// Whether document `doc` has a vector (loaded or not).
    pub fn has_vector(&self, doc: u32) -> bool {
        self.vector_of
            .get(doc as usize)
            .copied()
            .flatten()
            .is_some()
    }

    /// The row of `vectors` holding `slot`, when its list is loaded.
    fn row_of(&self, slot: u32) -> Option<usize> {
        let lists = &self.lists;
        if lists.whole {
            return Some(slot as usize);
        }
        let list = if lists.count() == 1 {
            0
        } else {
            lists
                .starts
                .partition_point(|&s| s <= slot)
                .checked_sub(1)?
        };
        let base = (*lists.loaded_at.get(list)?)?;
        Some((base + slot - lists.starts[list]) as usize)
    }

    /// The number of vector lists (1 for an exact segment, 0 without vectors).
    pub fn list_count(&self) -> usize {
        self.lists.count()
    }

    /// Whether the segment compares a query with centroids first (it holds lists).
    pub fn is_approximate(&self) -> bool {
        !self.lists.centroids.is_empty()
    }

    /// Every list's vectors are loaded (merging and rewriting need them all).
    pub fn vectors_complete(&self) -> bool {
        self.lists.loaded_at.iter().all(Option::is_some)
    }

    /// The lists a query vector reads: the `probes` whose centroids are nearest to it, or the
    /// one list of an exact segment.
    pub fn probe(&self, query: &[f32], probes: usize) -> Vec<usize> {
        let d = self.dimensions as usize;
        if !self.is_approximate() || query.len() != d {
            return (0..self.lists.count()).collect();
        }
        ivf::probe(&self.lists.centroids, d, query, probes)
    }

    /// The list holding document `doc`'s vector, if it has one.
    pub fn list_of(&self, doc: u32) -> Option<usize> {
        let slot = self.vector_of.get(doc as usize).copied().flatten()?;
        // `starts` ascends: the list is the last one starting at or before the slot.
        let after = self.lists.starts.partition_point(|&s| s <= slot);
        after.checked_sub(1).filter(|&l| l < self.lists.count())
    }

    /// Whether list `list`'s vectors are loaded.
    pub fn list_loaded(&self, list: usize) -> bool {
        self.lists.loaded_at.get(list).copied().flatten().is_some()
    }

    /// The documents of list `list` that have their vector loaded, for a query's shortlist.
    pub fn list_docs(&self, list: usize) -> &[u32] {
        if self.lists.loaded_at.get(list).copied().flatten().is_none() {
            return &[];
        }
        &self.lists.doc_of_slot[self.lists.slots(list)]
    }

    /// Where list `list`'s bytes are in the vector block (a segment read by
    /// [`Segment::decode_head`]): the range to fetch for [`Segment::load_list`].
    pub fn list_range(&self, list: usize) -> std::ops::Range<u64> {
        let width = u64::from(self.dimensions) * 4;
        let slots = self.lists.slots(list);
        self.lists.lists_at + slots.start as u64 * width
            ..self.lists.lists_at + slots.end as u64 * width
    }

    /// Adds list `list`'s vectors from its bytes ([`Segment::list_range`]), checked against the
    /// digest the verified directory names for it.
    pub fn load_list(&mut self, list: usize, bytes: &[u8]) -> Result<(), SegmentError> {
        if list >= self.lists.count() {
            return Err(SegmentError::Corrupt("no such list"));
        }
        if self.lists.loaded_at[list].is_some() {
            return Ok(());
        }
        let expected = self
            .lists
            .digests
            .get(list)
            .ok_or(SegmentError::Corrupt("list digest"))?;
        if Sha256::digest(bytes).as_slice() != expected {
            return Err(SegmentError::Corrupt("list checksum"));
        }
        let d = self.dimensions as usize;
        let slots = self.lists.slots(list);
        if bytes.len() != slots.len() * d * 4 {
            return Err(SegmentError::Corrupt("list size"));
        }
        let row = (self.vectors.len() / d.max(1)) as u32;
        let added = floats(bytes);
        self.norms.extend(norms_of(&added, self.dimensions));
        self.vectors.extend(added);
        self.lists.loaded_at[list] = Some(row);
        Ok(())
    }

    /// The byte forms: the text part (everything a text query reads) and, when the segment holds
    /// vectors, a vector block of its own, so that a text query never fetches the vectors
    /// (they are most of a segment's bytes: 1.5 KB an entry at 384 dimensions). Each is
    /// versioned and ends with its SHA-256; the vector block names the text part's.
    pub fn encode(&self) -> Encoded {
        let mut w = Writer::default();
        w.bytes(MAGIC);
        w.uint(self.docs.len() as u64);
        let mut previous = "";
        for d in &self.docs {
            w.shared_prefix_str(previous, &d.id);
            previous = &d.id;
            w.int(d.created_at_ms);
            match d.expires_at_ms {
                Some(e) => {
                    w.uint(1);
                    w.int(e);
                }
                None => w.uint(0),
            }
            w.uint(u64::from(d.length));
        }
        self.terms.encode(&mut w);
        encode_lists(&mut w, &self.stems, |w, t: &u32, _| w.uint(u64::from(*t)));
        encode_lists(&mut w, &self.tags, |w, d: &u32, previous: &mut u32| {
            w.uint(u64::from(*d - *previous));
            *previous = *d;
        });
        let text = sealed(w);
        let vectors = (self.dimensions > 0).then(|| self.encode_vectors(&text[text.len() - 32..]));
        Encoded { text, vectors }
    }

    /// The vector block: its directory (sealed by its own digest, bound to the text part's),
    /// then each list's vectors, contiguous, each verified by the digest the directory lists.
    /// A segment read list by list needs only the directory and the lists it probes.
    fn encode_vectors(&self, text_digest: &[u8]) -> Vec<u8> {
        debug_assert!(
            self.vectors_complete(),
            "a partly read segment is not re-encoded"
        );
        let d = self.dimensions as usize;
        let lists: Vec<Vec<u8>> = (0..self.lists.count())
            .map(|l| {
                let rows = self.lists.slots(l);
                self.vectors[rows.start * d..rows.end * d]
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect()
            })
            .collect();
        let mut w = Writer::default();
        // Bound to the text part: a vector block of another segment is refused.
        w.bytes(text_digest);
        w.str(&self.vector_model);
        w.uint(u64::from(self.dimensions));
        w.uint(self.docs.len() as u64);
        for v in &self.vector_of {
            w.uint(v.map_or(0, |at| u64::from(at) + 1));
        }
        w.uint(self.lists.count() as u64);
        for (l, list) in lists.iter().enumerate() {
            w.uint(self.lists.slots(l).len() as u64);
            w.bytes(&Sha256::digest(list));
        }
        for x in &self.lists.centroids {
            w.bytes(&x.to_le_bytes());
        }
        let directory = sealed(w);
        let mut block =
            Vec::with_capacity(16 + directory.len() + lists.iter().map(Vec::len).sum::<usize>());
        block.extend_from_slice(VECTORS_MAGIC);
        block.extend_from_slice(&(directory.len() as u64).to_le_bytes());
        block.extend_from_slice(&directory);
        for list in lists {
            block.extend_from_slice(&list);
        }
        block
    }

    /// Reads a segment's text part, and its vector block when given (semantic and hybrid
    /// queries); anything that does not verify is [`SegmentError::Corrupt`].
    pub fn decode(text: &[u8], vectors: Option<&[u8]>) -> Result<Segment, SegmentError> {
        let mut segment = Segment::decode_text(text)?;
        let Some(block) = vectors else {
            return Ok(segment);
        };
        let text_digest = &text[text.len() - 32..];
        if block.starts_with(VECTORS_MAGIC_1) {
            let (model, dimensions, vector_of, vectors) =
                decode_vectors_1(block, text_digest, segment.docs.len())?;
            let slots = (vectors.len() / dimensions.max(1) as usize) as u32;
            segment.lists = VectorLists::whole(vec![0, slots], Vec::new(), &vector_of);
            segment.vector_model = model;
            segment.dimensions = dimensions;
            segment.vector_of = vector_of;
            segment.norms = norms_of(&vectors, dimensions);
            segment.vectors = vectors;
            return Ok(segment);
        }
        let lists_at = segment.read_directory(block, text_digest)?;
        let d = segment.dimensions as usize;
        let mut rest = &block[lists_at as usize..];
        for l in 0..segment.lists.count() {
            let n = segment.lists.slots(l).len() * d * 4;
            if rest.len() < n {
                return Err(SegmentError::Corrupt("truncated list"));
            }
            let (list, tail) = rest.split_at(n);
            segment.load_list(l, list)?;
            rest = tail;
        }
        if !rest.is_empty() {
            return Err(SegmentError::Corrupt("trailing bytes"));
        }
        // Read whole: nothing is left to load by range.
        segment.lists.digests = Vec::new();
        segment.lists.lists_at = 0;
        segment.lists.whole = true;
        Ok(segment)
    }

    /// How many bytes of a vector block its head is (the magic, the directory's length and the
    /// directory), from at least its first 16 bytes: what to fetch for [`Segment::decode_head`].
    pub fn vector_head_len(prefix: &[u8]) -> Result<u64, SegmentError> {
        if prefix.len() < 16 || !prefix.starts_with(VECTORS_MAGIC) {
            return Err(SegmentError::Corrupt("not a vector block of this version"));
        }
        let mut length = [0u8; 8];
        length.copy_from_slice(&prefix[8..16]);
        Ok(16 + u64::from_le_bytes(length))
    }

    /// Reads a segment's text part and the head of its vector block ([`Segment::vector_head_len`]
    /// bytes; more are ignored) with no list loaded: a cold query then probes the centroids and
    /// loads the lists it reads ([`Segment::list_range`], [`Segment::load_list`]), not the
    /// whole block.
    pub fn decode_head(text: &[u8], head: &[u8]) -> Result<Segment, SegmentError> {
        let mut segment = Segment::decode_text(text)?;
        let length = Segment::vector_head_len(head)?;
        let head = usize::try_from(length)
            .ok()
            .and_then(|n| head.get(..n))
            .ok_or(SegmentError::Corrupt("truncated directory"))?;
        segment.read_directory(head, &text[text.len() - 32..])?;
        Ok(segment)
    }

    /// Reads the vector block's directory into `self` (no list loaded); answers where the
    /// lists begin.
    fn read_directory(&mut self, block: &[u8], text_digest: &[u8]) -> Result<u64, SegmentError> {
        let head = Segment::vector_head_len(block)?;
        let directory = usize::try_from(head)
            .ok()
            .and_then(|n| block.get(16..n))
            .ok_or(SegmentError::Corrupt("truncated directory"))?;
        let mut r = Reader::new(unsealed(directory)?);
        if r.bytes(32)? != text_digest {
            return Err(SegmentError::Corrupt("a vector block of another segment"));
        }
        let model = r.str()?;
        let dimensions = r.u32()?;
        let docs = self.docs.len();
        if r.uint()? != docs as u64 || dimensions == 0 {
            return Err(SegmentError::Corrupt("vector block size"));
        }
        let mut vector_of = Vec::with_capacity(docs);
        for _ in 0..docs {
            vector_of.push(r.u32()?.checked_sub(1));
        }
        let count = r.count()?;
        let mut starts = Vec::with_capacity(count + 1);
        let mut digests = Vec::with_capacity(count);
        let mut slots = 0u32;
        starts.push(0);
        for _ in 0..count {
            slots = slots
                .checked_add(r.u32()?)
                .ok_or(SegmentError::Corrupt("list size"))?;
            starts.push(slots);
            let mut digest = [0u8; 32];
            digest.copy_from_slice(r.bytes(32)?);
            digests.push(digest);
        }
        let mut seen = vec![false; slots as usize];
        for slot in vector_of.iter().flatten() {
            match seen.get_mut(*slot as usize) {
                Some(s) if !*s => *s = true,
                _ => return Err(SegmentError::Corrupt("vector position")),
            }
        }
        if seen.iter().any(|s| !s) {
            return Err(SegmentError::Corrupt("vector position"));
        }
        let centroids = if count > 1 {
            floats(r.bytes(count * dimensions as usize * 4)?)
        } else {
            Vec::new()
        };
        if !r.is_empty() {
            return Err(SegmentError::Corrupt("trailing bytes"));
        }
        self.lists = VectorLists {
            doc_of_slot: doc_of_slot(&vector_of, slots),
            centroids,
            loaded_at: vec![None; count],
            starts,
            digests,
            lists_at: head,
            whole: false,
        };
        self.vector_model = model;
        self.dimensions = dimensions;
        self.vector_of = vector_of;
        self.vectors = Vec::new();
        self.norms = Vec::new();
        Ok(head)
    }

    fn decode_text(text: &[u8]) -> Result<Segment, SegmentError> {
        let body = unsealed(text)?;
        let mut r = Reader::new(body);
        if r.bytes(MAGIC.len())? != MAGIC {
            return Err(SegmentError::Corrupt("not a segment of this version"));
        }
        let n = r.count()?;
        let mut docs = Vec::with_capacity(n);
        let mut previous = String::new();
        let mut total_length = 0u64;
        for _ in 0..n {
            let id = r.shared_prefix_str(&previous)?;
            previous.clone_from(&id);
            let created_at_ms = r.int()?;
            let expires_at_ms = match r.uint()? {
                0 => None,
                _ => Some(r.int()?),
            };
            let length = u32::try_from(r.uint()?).map_err(|_| SegmentError::Corrupt("length"))?;
            total_length += u64::from(length);
            docs.push(DocMeta {
                id: id.into_boxed_str(),
                created_at_ms,
                expires_at_ms,
                length,
            });
        }
        let doc_count = docs.len() as u32;
        let terms = TermPostings::decode(&mut r, doc_count)?;
        let term_count = terms.keys.len() as u32;
        let stems = decode_lists(&mut r, |r, _| {
            let t = r.u32()?;
            (t < term_count)
                .then_some(t)
                .ok_or(SegmentError::Corrupt("stem"))
        })?;
        let tags = decode_lists(&mut r, |r, previous: &mut u32| {
            let doc = previous
                .checked_add(r.u32()?)
                .filter(|d| *d < doc_count)
                .ok_or(SegmentError::Corrupt("tag"))?;
            *previous = doc;
            Ok(doc)
        })?;
        if !r.is_empty() {
            return Err(SegmentError::Corrupt("trailing bytes"));
        }
        let vector_of = vec![None; docs.len()];
        Ok(Segment {
            expiring: expiring_of(&docs),
            lists: VectorLists::whole(vec![0], Vec::new(), &vector_of),
            docs,
            terms,
            stems,
            tags,
            vector_model: String::new(),
            dimensions: 0,
            vector_of,
            norms: Vec::new(),
            vectors: Vec::new(),
            total_length,
        })
    }
}

/// The two byte forms of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    pub text: Vec<u8>,
    pub vectors: Option<Vec<u8>>,
}

/// First bytes of a segment's vector block. Version 2: a directory, then the vectors list by
/// list, each with its own digest (an approximate index's lists are read by byte range).
const VECTORS_MAGIC: &[u8; 8] = b"WOPVEC\x00\x02";
/// Version 1: one sealed block, every vector in document order (still read).
const VECTORS_MAGIC_1: &[u8; 8] = b"WOPVEC\x00\x01";

type Vectors = (String, u32, Vec<Option<u32>>, Vec<f32>);

fn sealed(w: Writer) -> Vec<u8> {
    let mut bytes = w.finish();
    let digest = Sha256::digest(&bytes);
    bytes.extend_from_slice(&digest);
    bytes
}

/// The body of a sealed byte form whose digest verifies.
fn unsealed(bytes: &[u8]) -> Result<&[u8], SegmentError> {
    if bytes.len() < MAGIC.len() + 32 {
        return Err(SegmentError::Corrupt("too short"));
    }
    let (body, digest) = bytes.split_at(bytes.len() - 32);
    if Sha256::digest(body).as_slice() != digest {
        return Err(SegmentError::Corrupt("checksum"));
    }
    Ok(body)
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The lists of an approximate index: centroids trained on the vectors, each vector in the
/// list of its nearest centroid, slots renumbered list by list (documents in order within a
/// list).
fn grouped(
    vectors: &[f32],
    d: usize,
    count: usize,
    vector_of: Vec<Option<u32>>,
) -> (VectorLists, Vec<Option<u32>>, Vec<f32>) {
    let centroids = ivf::train(vectors, d, count);
    let list_of: Vec<usize> = vectors
        .chunks_exact(d)
        .map(|v| ivf::nearest(&centroids, d, v))
        .collect();
    let mut starts = vec![0u32; count + 1];
    for &l in &list_of {
        starts[l + 1] += 1;
    }
    for l in 0..count {
        starts[l + 1] += starts[l];
    }
    let mut next: Vec<u32> = starts[..count].to_vec();
    let mut slot_of_old = vec![0u32; list_of.len()];
    for (old, &l) in list_of.iter().enumerate() {
        slot_of_old[old] = next[l];
        next[l] += 1;
    }
    let mut grouped = vec![0f32; vectors.len()];
    for (old, &slot) in slot_of_old.iter().enumerate() {
        grouped[slot as usize * d..(slot as usize + 1) * d]
            .copy_from_slice(&vectors[old * d..(old + 1) * d]);
    }
    let vector_of: Vec<Option<u32>> = vector_of
        .into_iter()
        .map(|v| v.map(|old| slot_of_old[old as usize]))
        .collect();
    (
        VectorLists::whole(starts, centroids, &vector_of),
        vector_of,
        grouped,
    )
}

fn decode_vectors_1(
    block: &[u8],
    text_digest: &[u8],
    docs: usize,
) -> Result<Vectors, SegmentError> {
    let mut r = Reader::new(unsealed(block)?);
    if r.bytes(VECTORS_MAGIC_1.len())? != VECTORS_MAGIC_1 {
        return Err(SegmentError::Corrupt("not a vector block of this version"));
    }
    if r.bytes(32)? != text_digest {
        return Err(SegmentError::Corrupt("a vector block of another segment"));
    }
    let model = r.str()?;
    let dimensions = r.u32()?;
    if r.uint()? != docs as u64 {
        return Err(SegmentError::Corrupt("vector block size"));
    }
    let mut vector_of = Vec::with_capacity(docs);
    let mut with_vectors = 0usize;
    for _ in 0..docs {
        vector_of.push(match r.u32()? {
            0 => None,
            at => {
                with_vectors += 1;
                Some(at - 1)
            }
        });
    }
    if vector_of
        .iter()
        .flatten()
        .any(|at| *at as usize >= with_vectors)
    {
        return Err(SegmentError::Corrupt("vector position"));
    }
    let floats = with_vectors
        .checked_mul(dimensions as usize)
        .and_then(|f| f.checked_mul(4))
        .ok_or(SegmentError::Corrupt("vectors"))?;
    let vectors = r
        .bytes(floats)?
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if !r.is_empty() {
        return Err(SegmentError::Corrupt("trailing bytes"));
    }
    Ok((model, dimensions, vector_of, vectors))
}

fn norms_of(vectors: &[f32], dimensions: u32) -> Vec<f64> {
    if dimensions == 0 {
        return Vec::new();
    }
    vectors
        .chunks_exact(dimensions as usize)
        .map(norm_squared)
        .collect()
}

fn expiring_of(docs: &[DocMeta]) -> Vec<u32> {
    (0..docs.len() as u32)
        .filter(|&p| docs[p as usize].expires_at_ms.is_some())
        .collect()
}

fn encode_lists<T>(w: &mut Writer, lists: &Lists<T>, item: impl Fn(&mut Writer, &T, &mut u32)) {
    w.uint(lists.keys.len() as u64);
    let mut previous = "";
    for (i, key) in lists.keys.iter().enumerate() {
        w.shared_prefix_str(previous, key);
        previous = key;
        let list = &lists.items[lists.starts[i] as usize..lists.starts[i + 1] as usize];
        w.uint(list.len() as u64);
        let mut last = 0u32;
        for x in list {
            item(w, x, &mut last);
        }
    }
}

fn decode_lists<T>(
    r: &mut Reader<'_>,
    item: impl Fn(&mut Reader<'_>, &mut u32) -> Result<T, SegmentError>,
) -> Result<Lists<T>, SegmentError> {
    let n = r.count()?;
    let mut lists = Lists {
        keys: Vec::with_capacity(n),
        starts: Vec::with_capacity(n + 1),
        items: Vec::new(),
    };
    let mut previous = String::new();
    for _ in 0..n {
        let key = r.ascending_key(&mut previous, lists.keys.is_empty())?;
        lists.keys.push(key);
        lists.starts.push(lists.items.len() as u32);
        let len = r.count()?;
        let mut last = 0u32;
        for _ in 0..len {
            lists.items.push(item(r, &mut last)?);
        }
    }
    lists.starts.push(lists.items.len() as u32);
    Ok(lists)
}
