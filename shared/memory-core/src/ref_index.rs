//! A ref's search index, wired to the table and the archive bucket (docs/search.md "The
//! index"). The ranking is the spec's ranked-search host extension (`crate::search`); this
//! module only changes where a search reads its documents from, so that a query costs a bounded
//! number of store calls whatever the ref's size, and ranks exactly as the full scan does.
//!
//! - **Objects.** Per ref, under `{tenant}/agents/{agent}/search/`: immutable segments named by
//!   their content (`seg-<sha256>`: the text part, then the vector block, so a text query reads
//!   a byte range and a semantic one the whole object, one call either way; a segment whose
//!   vectors are in lists is read by a semantic query as the text part and the lists' directory
//!   in one ranged call, then each list it compares by range, the nearest and for hybrid those
//!   of its best text hits: docs/search.md "Vectors at scale"),
//!   and one
//!   `manifest.json` naming the live ones, replaced only by a compare-and-swap on its ETag, so
//!   two writers (a pass, a forget) never both install a segment set.
//! - **The tail.** Every entry mutation writes a content-free change record in its own request
//!   (`EntryStore::changes`). A query reads the changes first, then the manifest: a pass drops
//!   the changes it folded in only after installing the manifest that holds them, so every entry
//!   is either in a segment the query reads or named by a change it read. Each changed id is read
//!   back from the table (its current state, or gone) and masks its segment copies, so a write is
//!   found by the very next search and a delete is masked at once.
//! - **Hits are read back.** The entries a search answers are read from the table, so an entry
//!   deleted without its change record (a crash between the two) is never answered.
//! - **Falling back.** No manifest yet, a store without change records, a tag filter asking for
//!   history copies (the index leaves them out, as search does): the full scan, as before. A
//!   manifest or segment that cannot be read or does not verify: the full scan too, and the
//!   answer says so ([`SearchPath::Fallback`]) for a metric. Never an error to the caller.
//! - **The pass** ([`IndexPass`]) folds the changes into a new segment, marks the older copies
//!   of the ids it folded dead in the manifest, and merges all segments into one when there are
//!   more than [`MAX_SEGMENTS`] or too many dead copies. Duplicate deliveries build the same
//!   content-named objects and lose the manifest's compare-and-swap to each other.
//! - **Forget** ([`IndexForgetHook`]) rewrites every segment holding a forgotten entry without
//!   it, installs the manifest, then deletes the old segments, every retired one and every
//!   object the manifest does not name, each with all its versions, before forget goes on.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use search_index::{Manifest, Retired, Segment, SegmentRef, TagQuery, TailDoc, View};
use serde::Serialize;
use sha2::{Digest, Sha256};
use text_search::{searchable_text, Analyzer, Ranking, TermCache};

use crate::background::begin_pass;
use crate::error::{CoreError, StoreError};
use crate::events::ForgetCounts;
use crate::forget::{Fence, ForgetHook, ForgetScope};
use crate::listing::{snapshot, MAX_LIST_LIMIT};
use crate::model::{admitted_ref, EntryKey, StoredEntry};
use crate::pass_report::log_done;
use crate::ports::{
    ArchiveStore, Change, Clock, CorePorts, EntryStore, Expect, ObjectKey, ObjectKind, ObjectPut,
    PassKind, NO_CHANGE_LOG,
};
use crate::search::{SearchHit, SearchResults};
use crate::tag_filter::TagFilter;
use crate::time::Timestamp;
use memory_guard::MemoryRef;

/// When a pass's segments get an approximate vector index ([`IndexPass::with_ann`]).
pub use search_index::Ann;

/// Segments a ref keeps before a pass merges them into one.
pub const MAX_SEGMENTS: usize = 4;
/// A merge also runs when this share of the segments' documents (per mille) is dead.
pub const MAX_DEAD_PER_MILLE: u64 = 200;
/// How long a segment taken out of the set by a merge stays fetchable for queries that read
/// the previous manifest (far longer than a query runs).
pub const RETIRE_GRACE_MS: i64 = 10 * 60 * 1000;
/// Decoded segments a warm function keeps, in bytes of their objects.
pub const CACHE_BUDGET_BYTES: usize = 768 << 20;

const MANIFEST_NAME: &str = "manifest.json";
const BINARY: &str = "application/octet-stream";

fn object_key(memory_ref: &MemoryRef, name: &str) -> Result<ObjectKey, StoreError> {
    ObjectKey::new(
        memory_ref.tenant(),
        &format!("agents/{}/search/{name}", memory_ref.agent().as_str()),
    )
    .ok_or(StoreError::Corrupt {
        key: "search index key".to_owned(),
    })
}

fn vectors_name(name: &str) -> String {
    format!("{name}.vec")
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Which way a search was answered, for the read function's metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum SearchPath {
    /// The full scan: the ref has no index (yet), or the query asks what the index leaves out.
    #[default]
    Scan,
    /// The index.
    Index,
    /// The full scan because the index failed to read or verify (`reason` in the log).
    Fallback,
}

/// Why the index did not answer.
#[derive(Debug)]
pub(crate) enum Unserved {
    /// Nothing to use: the scan answers and nothing is wrong.
    NoIndex,
    /// Something is wrong with the index: the scan answers and a metric counts it.
    Failed(&'static str),
}

impl From<StoreError> for Unserved {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Backend { code, .. } if code == NO_CHANGE_LOG => Unserved::NoIndex,
            StoreError::Corrupt { .. } => Unserved::Failed("corrupt"),
            _ => Unserved::Failed("store"),
        }
    }
}

/// Decoded segments kept across searches of a warm function. Objects are immutable and named
/// by content, so a cached segment never goes stale, and the vector lists a query loads into a
/// segment read by range stay with it for the next; past the budget the cache starts over.
#[derive(Default)]
pub struct SegmentCache {
    inner: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    segments: HashMap<String, Cached>,
    bytes: usize,
}

struct Cached {
    segment: Arc<Segment>,
    /// Its vectors are at hand: all of them, or its lists' directory (lists load on demand).
    vectors: bool,
    /// Bytes read for it, counted against the budget.
    bytes: usize,
}

impl SegmentCache {
    fn get(&self, name: &str, vectors: bool) -> Option<Arc<Segment>> {
        let state = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .segments
            .get(name)
            .filter(|c| c.vectors || !vectors)
            .map(|c| c.segment.clone())
    }

    /// Takes a segment out (answers the bytes it was counted at), so that the caller holds it
    /// alone and can load more lists into it without a copy.
    fn take(&self, name: &str) -> usize {
        let mut state = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = state.segments.remove(name).map_or(0, |c| c.bytes);
        state.bytes -= bytes;
        bytes
    }

    fn put(&self, name: &str, segment: Arc<Segment>, vectors: bool, bytes: usize) {
        let mut state = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = state.segments.remove(name) {
            state.bytes -= old.bytes;
        }
        if state.bytes + bytes > CACHE_BUDGET_BYTES {
            state.segments.clear();
            state.bytes = 0;
        }
        state.bytes += bytes;
        state.segments.insert(
            name.to_owned(),
            Cached {
                segment,
                vectors,
                bytes,
            },
        );
    }
}

/// The manifest and the ETag it was read at (`None`: the ref has no index).
async fn read_manifest(
    archive: &dyn ArchiveStore,
    memory_ref: &MemoryRef,
) -> Result<Option<(Manifest, String)>, StoreError> {
    let key = object_key(memory_ref, MANIFEST_NAME)?;
    let Some(object) = archive.get(&key).await? else {
        return Ok(None);
    };
    let manifest: Manifest =
        serde_json::from_slice(&object.body).map_err(|_| StoreError::Corrupt {
            key: "search manifest".to_owned(),
        })?;
    if manifest.format != search_index::manifest::FORMAT {
        return Err(StoreError::Corrupt {
            key: "search manifest format".to_owned(),
        });
    }
    Ok(Some((manifest, object.etag)))
}

/// Fetches and decodes one segment (with its vectors when asked and present), checked against
/// the digest the manifest names; a missing or altered object is `Corrupt`. One store call: the
/// text part alone is a range of the segment's object, the vectors follow it in the same
/// object (segments of the earlier layout keep them in `<name>.vec`: a second call).
async fn fetch_segment(
    archive: &dyn ArchiveStore,
    memory_ref: &MemoryRef,
    segment: &SegmentRef,
    vectors: bool,
) -> Result<(Segment, usize), StoreError> {
    let corrupt = || StoreError::Corrupt {
        key: "search segment".to_owned(),
    };
    let key = object_key(memory_ref, &segment.name)?;
    let (text, block) = match segment.vectors_at {
        Some(at) => {
            let body = if vectors && segment.vectors {
                archive.get(&key).await?.ok_or_else(corrupt)?.body
            } else {
                archive.get_range(&key, 0..at).await?.ok_or_else(corrupt)?
            };
            let at = usize::try_from(at).map_err(|_| corrupt())?;
            if body.len() < at {
                return Err(corrupt());
            }
            let mut text = body;
            let block = text.split_off(at);
            (text, (!block.is_empty()).then_some(block))
        }
        None => {
            let text = archive.get(&key).await?.ok_or_else(corrupt)?.body;
            let block = if vectors && segment.vectors {
                let key = object_key(memory_ref, &vectors_name(&segment.name))?;
                Some(archive.get(&key).await?.ok_or_else(corrupt)?.body)
            } else {
                None
            };
            (text, block)
        }
    };
    if hex_sha256(&text) != segment.sha256 {
        return Err(corrupt());
    }
    let bytes = text.len() + block.as_ref().map_or(0, Vec::len);
    let decoded = Segment::decode(&text, block.as_deref()).map_err(|_| corrupt())?;
    Ok((decoded, bytes))
}

/// Reads a segment whose vectors are in lists for a semantic or hybrid query: the text part and
/// the lists' directory, one ranged call, checked against the manifest's digest of the text part
/// and the directory's own (bound to the text part's); no list is loaded yet ([`load_lists`]).
async fn fetch_segment_head(
    archive: &dyn ArchiveStore,
    memory_ref: &MemoryRef,
    segment: &SegmentRef,
) -> Result<(Segment, usize), StoreError> {
    let corrupt = || StoreError::Corrupt {
        key: "search segment".to_owned(),
    };
    let (Some(at), Some(head)) = (segment.vectors_at, segment.vector_head) else {
        return Err(corrupt());
    };
    let key = object_key(memory_ref, &segment.name)?;
    let end = at.checked_add(head).ok_or_else(corrupt)?;
    let mut text = archive.get_range(&key, 0..end).await?.ok_or_else(corrupt)?;
    let at = usize::try_from(at).map_err(|_| corrupt())?;
    if text.len() < at {
        return Err(corrupt());
    }
    let head = text.split_off(at);
    if hex_sha256(&text) != segment.sha256 {
        return Err(corrupt());
    }
    let bytes = text.len() + head.len();
    let decoded = Segment::decode_head(&text, &head).map_err(|_| corrupt())?;
    Ok((decoded, bytes))
}

/// Loads into `segment` (read by [`fetch_segment_head`]) the lists of `lists` it does not hold
/// yet, each by its byte range, the calls issued together; each list is checked against the
/// digest the verified directory names for it, and one that does not verify is `Corrupt`.
/// Answers the segment and the bytes read.
async fn load_lists(
    archive: &dyn ArchiveStore,
    memory_ref: &MemoryRef,
    reference: &SegmentRef,
    mut segment: Segment,
    lists: &[usize],
) -> Result<(Segment, usize), StoreError> {
    let corrupt = || StoreError::Corrupt {
        key: "search segment".to_owned(),
    };
    let missing: Vec<usize> = lists
        .iter()
        .copied()
        .filter(|&l| !segment.list_loaded(l))
        .collect();
    if missing.is_empty() {
        return Ok((segment, 0));
    }
    let at = reference.vectors_at.ok_or_else(corrupt)?;
    let key = object_key(memory_ref, &reference.name)?;
    let bodies = futures_util::future::try_join_all(missing.iter().map(|&l| {
        let range = segment.list_range(l);
        archive.get_range(&key, at + range.start..at + range.end)
    }))
    .await?;
    let mut bytes = 0;
    for (l, body) in missing.into_iter().zip(bodies) {
        let body = body.ok_or_else(corrupt)?;
        segment.load_list(l, &body).map_err(|_| corrupt())?;
        bytes += body.len();
    }
    Ok((segment, bytes))
}

/// The entries among `ids` of the ref as the table holds them now.
async fn read_back(
    store: &dyn EntryStore,
    memory_ref: &MemoryRef,
    ids: impl IntoIterator<Item = String>,
) -> Result<Vec<StoredEntry>, StoreError> {
    let keys = EntryKey::all_in(memory_ref, ids);
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(MAX_LIST_LIMIT as usize) {
        out.extend(
            store
                .get_many(chunk)
                .await?
                .into_iter()
                .filter(|e| e.memory_ref == *memory_ref),
        );
    }
    Ok(out)
}

/// Whether an entry belongs in the index: search leaves history copies out unless asked.
fn indexable(entry: &StoredEntry, now: Timestamp) -> bool {
    entry.entry.is_live_at(now) && !crate::history::is_history(&entry.entry.tags)
}

/// The vector of `model` an entry carries, if any (an empty one is none, as in the scan).
fn vector_of<'a>(entry: &'a StoredEntry, model: &str) -> Option<&'a [f32]> {
    entry
        .embedding
        .as_ref()
        .filter(|v| !model.is_empty() && v.model == model && !v.vector.is_empty())
        .map(|v| v.vector.as_slice())
}

fn indexed_doc(entry: &StoredEntry, model: &str) -> search_index::IndexedDoc {
    search_index::indexed_doc(
        &entry.entry.id,
        &entry.entry.content,
        &entry.entry.tags,
        entry.entry.created_at.as_millis(),
        entry.entry.expires_at.map(|t| t.as_millis()),
        vector_of(entry, model).map(<[f32]>::to_vec),
    )
}

/// What one search over the index needs besides the ref.
pub(crate) struct IndexQuery<'a> {
    pub query: &'a str,
    pub tags: &'a TagFilter,
    pub stem: bool,
    pub ranking: Ranking<'a>,
    /// The query vector's model ("" for text).
    pub model: &'a str,
    pub limit: usize,
    pub now: Timestamp,
}

/// The index side of a reader: where segments come from and the warm ones.
pub struct IndexReader {
    archive: Arc<dyn ArchiveStore>,
    cache: SegmentCache,
}

impl IndexReader {
    pub fn new(archive: Arc<dyn ArchiveStore>) -> Self {
        IndexReader {
            archive,
            cache: SegmentCache::default(),
        }
    }

    async fn segment(
        &self,
        memory_ref: &MemoryRef,
        segment: &SegmentRef,
        vectors: bool,
    ) -> Result<Arc<Segment>, StoreError> {
        if let Some(hit) = self.cache.get(&segment.name, vectors) {
            return Ok(hit);
        }
        let (decoded, bytes) = if vectors && segment.vectors && segment.vector_head.is_some() {
            fetch_segment_head(&*self.archive, memory_ref, segment).await?
        } else {
            fetch_segment(&*self.archive, memory_ref, segment, vectors).await?
        };
        let decoded = Arc::new(decoded);
        self.cache.put(
            &segment.name,
            decoded.clone(),
            vectors || !segment.vectors,
            bytes,
        );
        Ok(decoded)
    }

    /// `segment` with every list of `lists` loaded: the ones it lacks are read by range and kept
    /// in the cache with it, so a later query reads only lists no query has read before.
    async fn with_lists(
        &self,
        memory_ref: &MemoryRef,
        reference: &SegmentRef,
        segment: Arc<Segment>,
        lists: &[usize],
    ) -> Result<Arc<Segment>, StoreError> {
        if lists.iter().all(|&l| segment.list_loaded(l)) {
            return Ok(segment);
        }
        // Out of the cache first, so the segment is (usually) held here alone and gains the
        // lists in place; a copy only when another query holds it at the same time.
        let held = match self.cache.take(&reference.name) {
            // Dropped from the cache meanwhile: count it at the bytes its head read was.
            0 => reference
                .vectors_at
                .zip(reference.vector_head)
                .map_or(0, |(at, head)| {
                    usize::try_from(at.saturating_add(head)).unwrap_or(usize::MAX)
                }),
            bytes => bytes,
        };
        let segment = Arc::try_unwrap(segment).unwrap_or_else(|shared| (*shared).clone());
        let (segment, read) =
            load_lists(&*self.archive, memory_ref, reference, segment, lists).await?;
        let segment = Arc::new(segment);
        self.cache.put(
            &reference.name,
            segment.clone(),
            true,
            held.saturating_add(read),
        );
        Ok(segment)
    }

    /// One search over the ref's index (the module doc says what it reads, in which order).
    pub(crate) async fn search(
        &self,
        store: &dyn EntryStore,
        memory_ref: &MemoryRef,
        q: &IndexQuery<'_>,
        terms: &TermCache,
    ) -> Result<SearchResults, Unserved> {
        if q.tags.asks_for_history() {
            return Err(Unserved::NoIndex);
        }
        // Changes first, then the manifest (see the module doc).
        let changes = store.changes(memory_ref).await?;
        let Some((manifest, _)) = read_manifest(&*self.archive, memory_ref).await? else {
            return Err(Unserved::NoIndex);
        };
        let vectors = !matches!(q.ranking, Ranking::Text);
        let mut segments = Vec::with_capacity(manifest.segments.len());
        for s in &manifest.segments {
            segments.push(self.segment(memory_ref, s, vectors).await?);
        }
        let changed: BTreeSet<String> = changes.into_iter().flat_map(|c| c.ids).collect();
        let tail_entries: Vec<StoredEntry> = read_back(store, memory_ref, changed.iter().cloned())
            .await?
            .into_iter()
            .filter(|e| indexable(e, q.now))
            .collect();
        let texts: Vec<String> = tail_entries
            .iter()
            .map(|e| searchable_text(&e.entry.content, &e.entry.tags))
            .collect();
        let tail: Vec<TailDoc<'_>> = tail_entries
            .iter()
            .zip(&texts)
            .map(|(e, text)| TailDoc {
                id: &e.entry.id,
                text,
                tags: &e.entry.tags,
                created_at_ms: e.entry.created_at.as_millis(),
                vector: vector_of(e, q.model),
            })
            .collect();
        let masked: HashSet<&str> = changed.iter().map(String::as_str).collect();
        let dead: Vec<HashSet<&str>> = manifest
            .segments
            .iter()
            .map(|s| s.dead.iter().map(String::as_str).collect())
            .collect();
        let analyzer = Analyzer::new(q.stem);
        let all: Vec<String> = q.tags.all.iter().cloned().collect();
        let any: Vec<String> = q.tags.any.iter().cloned().collect();
        let query = search_index::Query {
            tags: TagQuery {
                all: &all,
                any: &any,
            },
            analyzer: &analyzer,
            cache: terms,
            text: q.query,
            ranking: q.ranking,
            model: q.model,
            limit: q.limit,
            probes: None,
        };
        // What the query sees besides the segments, the same before and after lists load.
        let around = View {
            segments: &[],
            masked: &masked,
            dead: &dead,
            tail: &tail,
            now_ms: q.now.as_millis(),
        };
        if segments.iter().any(|s| s.is_approximate()) {
            // The lists the query will compare (the nearest and, for hybrid, those of its best
            // text hits), from the text parts and the vector directories alone, loaded before
            // it runs: the answer is the same whichever lists were held before.
            let lists = {
                let held: Vec<&Segment> = segments.iter().map(|s| &**s).collect();
                let view = View {
                    segments: &held,
                    ..around
                };
                search_index::probe_lists(&view, &query)
            };
            let mut loaded = Vec::with_capacity(segments.len());
            for ((s, segment), lists) in manifest.segments.iter().zip(segments).zip(&lists) {
                loaded.push(if segment.is_approximate() {
                    self.with_lists(memory_ref, s, segment, lists).await?
                } else {
                    segment
                });
            }
            segments = loaded;
        }
        let segment_refs: Vec<&Segment> = segments.iter().map(|s| &**s).collect();
        let view = View {
            segments: &segment_refs,
            ..around
        };
        let search_index::Found { hits, unembedded } = search_index::search(&view, &query);
        // The answer's entries come from the table: the tail's as read, the segments' read
        // back now (one batch), so nothing deleted is ever answered.
        let from_segments: Vec<String> = hits
            .iter()
            .filter(|h| matches!(h.location, search_index::Location::Segment { .. }))
            .map(|h| h.id.to_owned())
            .collect();
        let mut by_id: HashMap<String, StoredEntry> = read_back(store, memory_ref, from_segments)
            .await?
            .into_iter()
            .filter(|e| indexable(e, q.now))
            .map(|e| (e.entry.id.clone(), e))
            .collect();
        for e in &tail_entries {
            by_id.insert(e.entry.id.clone(), e.clone());
        }
        let results = hits
            .iter()
            .filter_map(|h| {
                by_id.remove(h.id).map(|e| SearchHit {
                    entry: e.entry,
                    score: h.score,
                })
            })
            .collect();
        Ok(SearchResults {
            results,
            unembedded: vectors.then_some(unembedded),
            path: SearchPath::Index,
            pressure: Vec::new(),
        })
    }
}

/// What an index pass did, counts only.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexReport {
    /// `built` (first segment from the whole ref), `folded`, `merged`, `unchanged`, `lost`
    /// (another writer installed a manifest first; the next run goes on).
    pub status: &'static str,
    pub changes: usize,
    pub documents: u64,
    pub segments: usize,
    pub deleted_objects: usize,
}

/// The background pass that keeps a ref's index (the module doc).
#[derive(Clone)]
pub struct IndexPass {
    ports: CorePorts,
    archive: Arc<dyn ArchiveStore>,
    /// The embedding model whose vectors the segments keep ("" for none).
    model: String,
    /// When the segments it builds get an approximate vector index.
    ann: Ann,
}

impl IndexPass {
    pub fn new(ports: CorePorts, archive: Arc<dyn ArchiveStore>, model: Option<String>) -> Self {
        IndexPass {
            ports,
            archive,
            model: model.unwrap_or_default(),
            ann: Ann::default(),
        }
    }

    /// Builds segments with approximate lists as `ann` says instead of the default threshold:
    /// for tests, which reach a segment with lists without writing 150,000 entries.
    pub fn with_ann(mut self, ann: Ann) -> Self {
        self.ann = ann;
        self
    }

    /// Folds the ref's changes into its index (builds it the first time).
    pub async fn run(&self, tenant_id: &str, raw_ref: &str) -> Result<IndexReport, CoreError> {
        let memory_ref = admitted_ref(tenant_id, raw_ref)?;
        let store = self.ports.store.as_ref();
        let archive = self.archive.as_ref();
        let state = begin_pass(store, &memory_ref, PassKind::Index).await?;
        let now = self.ports.clock.now();
        // The manifest before the fence: a forget that rewrote the index after this read makes
        // the install below lose its compare-and-swap; one before it left its tombstones, which
        // the fence read next keeps out.
        // A manifest that does not decode is replaced by a rebuild (under its own ETag).
        let (current, corrupt_etag) = match read_manifest(archive, &memory_ref).await {
            Ok(m) => (m, None),
            Err(StoreError::Corrupt { .. }) => {
                let key = object_key(&memory_ref, MANIFEST_NAME)?;
                (None, archive.get(&key).await?.map(|o| o.etag))
            }
            Err(e) => return Err(e.into()),
        };
        let changes: Vec<Change> = match store.changes(&memory_ref).await {
            Ok(c) => c,
            Err(StoreError::Backend { code, .. }) if code == NO_CHANGE_LOG => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let fence = Fence::read(store, &memory_ref).await?;
        let changed: BTreeSet<String> = changes.iter().flat_map(|c| c.ids.clone()).collect();
        let mut rebuild = match &current {
            None => true,
            Some((m, _)) => m.vector_model != self.model,
        };
        let mut report = IndexReport {
            changes: changes.len(),
            ..IndexReport::default()
        };
        if !rebuild && changes.is_empty() {
            report.status = "unchanged";
            report.segments = current.as_ref().map_or(0, |(m, _)| m.segments.len());
            report.documents = current.as_ref().map_or(0, |(m, _)| m.docs());
            self.finish(&memory_ref, state.pending, state.version)
                .await?;
            return Ok(report);
        }
        // The older segments' ids (text parts only), so a folded id is marked dead only where a
        // copy of it lives; a segment that is gone or does not verify makes this run a rebuild.
        let mut held: Vec<Segment> = Vec::new();
        if let (false, Some((m, _))) = (rebuild, &current) {
            for s in &m.segments {
                match fetch_segment(archive, &memory_ref, s, false).await {
                    Ok((segment, _)) => held.push(segment),
                    Err(StoreError::Corrupt { .. }) => {
                        tracing::warn!(tenant = %memory_ref.tenant(), "search segment unreadable, rebuilding the index");
                        rebuild = true;
                        break;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let fresh: Vec<StoredEntry> = if rebuild {
            snapshot(store, &memory_ref, now).await?
        } else {
            read_back(store, &memory_ref, changed.iter().cloned()).await?
        };
        let docs: Vec<search_index::IndexedDoc> = fresh
            .iter()
            .filter(|e| indexable(e, now) && fence.admits(&e.entry.id))
            .map(|e| indexed_doc(e, &self.model))
            .collect();
        let (mut manifest, expect, mut old) = match current {
            Some((m, etag)) => {
                let old = m.segments.clone();
                (m, Expect::ETag(etag), old)
            }
            None => (
                Manifest::empty(),
                corrupt_etag.map_or(Expect::Absent, Expect::ETag),
                Vec::new(),
            ),
        };
        let mut uploads: Vec<String> = Vec::new();
        if rebuild {
            // A first build, or vectors of another model: one segment from the whole ref.
            manifest.retired.extend(old.drain(..).map(|s| Retired {
                name: s.name,
                at_ms: now.as_millis(),
            }));
            manifest.segments.clear();
            manifest.vector_model = self.model.clone();
        } else {
            for (s, segment) in manifest.segments.iter_mut().zip(&held) {
                let mut dead: BTreeSet<String> = std::mem::take(&mut s.dead).into_iter().collect();
                dead.extend(
                    changed
                        .iter()
                        .filter(|id| segment.position(id).is_some())
                        .cloned(),
                );
                s.dead = dead.into_iter().collect();
            }
        }
        // The docs read (the whole ref for a rebuild, the changed entries otherwise) are one
        // new segment.
        add_segment(
            archive,
            &memory_ref,
            &mut manifest,
            docs,
            &self.ann,
            &mut uploads,
        )
        .await?;
        report.status = if rebuild { "built" } else { "folded" };
        // Too many segments or too many dead ids: all merged into one (never after a rebuild,
        // which leaves one segment with no dead ids).
        let total: u64 = manifest.segments.iter().map(|s| u64::from(s.docs)).sum();
        let dead: u64 = manifest.segments.iter().map(|s| s.dead.len() as u64).sum();
        if manifest.segments.len() > MAX_SEGMENTS
            || (total > 0 && dead * 1000 > total * MAX_DEAD_PER_MILLE)
        {
            let merged = self
                .merge_all(&memory_ref, &manifest, now, &fence, &mut uploads)
                .await?;
            manifest.retired.extend(
                manifest
                    .segments
                    .drain(..)
                    .filter(|s| merged.as_ref().is_none_or(|m| m.name != s.name))
                    .map(|s| Retired {
                        name: s.name,
                        at_ms: now.as_millis(),
                    }),
            );
            manifest.segments.extend(merged);
            report.status = "merged";
        }
        // Retired segments past their grace are deleted now, with every version.
        let (expired, kept): (Vec<Retired>, Vec<Retired>) = std::mem::take(&mut manifest.retired)
            .into_iter()
            .partition(|r| now.as_millis() - r.at_ms >= RETIRE_GRACE_MS);
        manifest.retired = kept;
        manifest.generation += 1;
        manifest.built_ms = now.as_millis();
        report.segments = manifest.segments.len();
        report.documents = manifest.docs();
        match install_manifest(archive, &memory_ref, &manifest, expect).await {
            Ok(()) => {}
            Err(StoreError::Conflict { .. }) => {
                // Another pass or a forget installed first: what this run uploaded is not
                // named by any manifest; take it away (content-named, so if the winner holds
                // the same bytes, keep them).
                let winner = read_manifest(archive, &memory_ref).await?;
                for name in uploads {
                    let named = winner
                        .as_ref()
                        .is_some_and(|(m, _)| m.segments.iter().any(|s| s.name == name));
                    if !named {
                        delete_segment(archive, &memory_ref, &name).await?;
                    }
                }
                report.status = "lost";
                store.mark_pending(&memory_ref, PassKind::Index, now).await;
                return Ok(report);
            }
            Err(e) => return Err(e.into()),
        }
        let seqs: Vec<String> = changes.into_iter().map(|c| c.seq).collect();
        store.drop_changes(&memory_ref, &seqs).await?;
        for r in expired {
            delete_segment(archive, &memory_ref, &r.name).await?;
            report.deleted_objects += 1;
        }
        if fence.breached(store, &memory_ref).await?.is_some() {
            // A forget began meanwhile: its own rewrite takes its entries out; stay pending so
            // the next run starts from its result.
            store.mark_pending(&memory_ref, PassKind::Index, now).await;
        } else {
            self.finish(&memory_ref, state.pending, state.version)
                .await?;
        }
        log_done("index pass done", Some(memory_ref.tenant()), &report);
        Ok(report)
    }

    async fn finish(
        &self,
        memory_ref: &MemoryRef,
        pending: bool,
        version: Option<u64>,
    ) -> Result<(), StoreError> {
        if pending {
            self.ports
                .store
                .finish_pass(memory_ref, PassKind::Index, version, None)
                .await?;
        }
        Ok(())
    }

    /// Every live document of the manifest's segments in one segment (`None` when none is left).
    async fn merge_all(
        &self,
        memory_ref: &MemoryRef,
        manifest: &Manifest,
        now: Timestamp,
        fence: &Fence,
        uploads: &mut Vec<String>,
    ) -> Result<Option<SegmentRef>, StoreError> {
        let mut decoded = Vec::with_capacity(manifest.segments.len());
        for s in &manifest.segments {
            decoded.push(fetch_segment(&*self.archive, memory_ref, s, true).await?.0);
        }
        let dead: Vec<HashSet<&str>> = manifest
            .segments
            .iter()
            .map(|s| s.dead.iter().map(String::as_str).collect())
            .collect();
        let refs: Vec<&Segment> = decoded.iter().collect();
        let merged = search_index::merge::merge(
            &refs,
            |si, d| {
                !dead[si].contains(&*d.id) && d.is_live_at(now.as_millis()) && fence.admits(&d.id)
            },
            Vec::new(),
            &manifest.vector_model,
            &Analyzer::new(true),
            &self.ann,
        );
        if merged.docs().is_empty() {
            return Ok(None);
        }
        Ok(Some(
            put_segment(&*self.archive, memory_ref, &merged, uploads).await?,
        ))
    }
}

/// The first build of a ref's index from entries handed over in process rather than read from
/// the table: the first pass's own steps (`indexed_doc` of each indexable entry, one
/// `add_segment`, a manifest installed only where none is yet). For a ref
/// loaded in bulk at a size the write path and the snapshot cannot reach in reasonable time
/// (the scale bench's bulk mode, docs/search.md "Against the emulator"); `entries` must be what
/// the table holds for the ref. The ref's change records are not read or dropped: a pass folds
/// what was written after.
pub async fn install_built_index(
    archive: &dyn ArchiveStore,
    memory_ref: &MemoryRef,
    entries: &[StoredEntry],
    model: &str,
    now: Timestamp,
) -> Result<IndexReport, StoreError> {
    let docs: Vec<search_index::IndexedDoc> = entries
        .iter()
        .filter(|e| e.memory_ref == *memory_ref && indexable(e, now))
        .map(|e| indexed_doc(e, model))
        .collect();
    let mut manifest = Manifest::empty();
    manifest.vector_model = model.to_owned();
    let mut uploads = Vec::new();
    add_segment(
        archive,
        memory_ref,
        &mut manifest,
        docs,
        &Ann::default(),
        &mut uploads,
    )
    .await?;
    manifest.generation = 1;
    manifest.built_ms = now.as_millis();
    install_manifest(archive, memory_ref, &manifest, Expect::Absent).await?;
    Ok(IndexReport {
        status: "built",
        changes: 0,
        documents: manifest.docs(),
        segments: manifest.segments.len(),
        deleted_objects: 0,
    })
}

/// Stores a segment of `docs`, built with the manifest's vector model, and lists it in
/// `manifest`; no segment for no docs.
async fn add_segment(
    archive: &dyn ArchiveStore,
    memory_ref: &MemoryRef,
    manifest: &mut Manifest,
    docs: Vec<search_index::IndexedDoc>,
    ann: &Ann,
    uploads: &mut Vec<String>,
) -> Result<(), StoreError> {
    if !docs.is_empty() {
        let built = Segment::build_with(docs, &manifest.vector_model, &Analyzer::new(true), ann);
        manifest
            .segments
            .push(put_segment(archive, memory_ref, &built, uploads).await?);
    }
    Ok(())
}

async fn put_segment(
    archive: &dyn ArchiveStore,
    memory_ref: &MemoryRef,
    segment: &Segment,
    uploads: &mut Vec<String>,
) -> Result<SegmentRef, StoreError> {
    let encoded = segment.encode();
    let sha256 = hex_sha256(&encoded.text);
    let text_bytes = encoded.text.len() as u64;
    let has_vectors = encoded.vectors.is_some();
    let vector_head = match &encoded.vectors {
        Some(block) if segment.is_approximate() => Segment::vector_head_len(block).ok(),
        _ => None,
    };
    // One object: the text part, then the vector block (fetch_segment reads either).
    let mut body = encoded.text;
    if let Some(block) = encoded.vectors {
        body.extend_from_slice(&block);
    }
    let name = search_index::segment_name(&body);
    let bytes = body.len() as u64;
    let key = object_key(memory_ref, &name)?;
    archive
        .put_if_absent(ObjectPut {
            key: &key,
            body,
            kind: ObjectKind::Index,
            content_type: BINARY,
        })
        .await?;
    uploads.push(name.clone());
    Ok(SegmentRef {
        name,
        docs: u32::try_from(segment.docs().len()).unwrap_or(u32::MAX),
        bytes,
        sha256,
        vectors: has_vectors,
        vectors_at: has_vectors.then_some(text_bytes),
        vector_head,
        dead: Vec::new(),
    })
}

async fn install_manifest(
    archive: &dyn ArchiveStore,
    memory_ref: &MemoryRef,
    manifest: &Manifest,
    expect: Expect,
) -> Result<(), StoreError> {
    let body = serde_json::to_vec(manifest).map_err(|_| StoreError::Corrupt {
        key: "search manifest".to_owned(),
    })?;
    let key = object_key(memory_ref, MANIFEST_NAME)?;
    archive
        .put_expecting(ObjectPut::json(&key, ObjectKind::Index, body), expect)
        .await?;
    // The manifest's earlier versions name segments (and dead ids) no longer live.
    archive.delete_old_versions(&key).await
}

/// Deletes a segment's objects with every version.
async fn delete_segment(
    archive: &dyn ArchiveStore,
    memory_ref: &MemoryRef,
    name: &str,
) -> Result<(), StoreError> {
    for object in [name.to_owned(), vectors_name(name)] {
        let key = object_key(memory_ref, &object)?;
        archive.delete(&key).await?;
        archive.delete_old_versions(&key).await?;
    }
    Ok(())
}

/// Forget's part in the index (the module doc): before forget deletes a subject's entries,
/// every segment holding one of them is rewritten without it and every object the new manifest
/// does not name is deleted with all its versions, so no segment keeps the subject's terms or
/// vectors once forget answers.
pub struct IndexForgetHook {
    archive: Arc<dyn ArchiveStore>,
    clock: Arc<dyn Clock>,
}

/// Compare-and-swap rounds a forget's rewrite tries against passes installing at the same time.
const FORGET_ROUNDS: usize = 8;

impl IndexForgetHook {
    pub fn new(archive: Arc<dyn ArchiveStore>, clock: Arc<dyn Clock>) -> Self {
        IndexForgetHook { archive, clock }
    }

    /// Rewrites one ref's index without `ids`; returns how many segments it rewrote.
    pub async fn rewrite_without(
        &self,
        memory_ref: &MemoryRef,
        ids: &BTreeSet<&str>,
        now: Timestamp,
    ) -> Result<usize, StoreError> {
        let archive = &*self.archive;
        for _ in 0..FORGET_ROUNDS {
            let (manifest, etag) = match read_manifest(archive, memory_ref).await {
                Ok(Some(found)) => found,
                Ok(None) => {
                    self.sweep(memory_ref, None).await?;
                    return Ok(0);
                }
                // An index forget cannot read is dropped whole (the scan answers until the next
                // pass rebuilds it): it may hold the subject, and a forget must not fail on it.
                Err(StoreError::Corrupt { .. }) => return self.drop_index(memory_ref).await,
                Err(e) => return Err(e),
            };
            let mut rewritten = 0;
            let mut next = manifest.clone();
            let mut uploads = Vec::new();
            for (i, s) in manifest.segments.iter().enumerate() {
                let decoded = match fetch_segment(archive, memory_ref, s, true).await {
                    Ok((decoded, _)) => decoded,
                    Err(StoreError::Corrupt { .. }) => return self.drop_index(memory_ref).await,
                    Err(e) => return Err(e),
                };
                if !ids.iter().any(|id| decoded.position(id).is_some()) {
                    continue;
                }
                let dead: HashSet<&str> = s.dead.iter().map(String::as_str).collect();
                let merged = search_index::merge::merge(
                    &[&decoded],
                    |_, d| !ids.contains(&*d.id) && !dead.contains(&*d.id),
                    Vec::new(),
                    &manifest.vector_model,
                    &Analyzer::new(true),
                    &Ann::default(),
                );
                let mut replacement =
                    put_segment(archive, memory_ref, &merged, &mut uploads).await?;
                // Ids already dead stay out of the new segment, so none need marking.
                replacement.dead = Vec::new();
                next.segments[i] = replacement;
                rewritten += 1;
            }
            next.segments.retain(|s| s.docs > 0);
            // Superseded copies of a forgotten entry may sit in retired segments: they go now.
            next.retired.clear();
            next.generation += 1;
            next.built_ms = now.as_millis();
            match install_manifest(archive, memory_ref, &next, Expect::ETag(etag)).await {
                Ok(()) => {
                    self.sweep(memory_ref, Some(&next)).await?;
                    return Ok(rewritten);
                }
                Err(StoreError::Conflict { .. }) => {
                    // Either another writer installed first, or this very install was applied
                    // and its answer lost (the retry then fails its precondition): only what
                    // the manifest now in place does not name is taken away.
                    let current = read_manifest(archive, memory_ref).await.ok().flatten();
                    if current.as_ref().is_some_and(|(m, _)| {
                        m.generation == next.generation && m.segments == next.segments
                    }) {
                        self.sweep(memory_ref, Some(&next)).await?;
                        return Ok(rewritten);
                    }
                    for name in uploads {
                        let named = current
                            .as_ref()
                            .is_some_and(|(m, _)| m.segments.iter().any(|s| s.name == name));
                        if !named {
                            delete_segment(archive, memory_ref, &name).await?;
                        }
                    }
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Unavailable {
            op: "forget search index",
            code: "ManifestContention".to_owned(),
        })
    }

    /// Deletes the ref's whole index, every version of every object; the next index pass builds
    /// it again from the table.
    async fn drop_index(&self, memory_ref: &MemoryRef) -> Result<usize, StoreError> {
        tracing::warn!(tenant = %memory_ref.tenant(), "search index unreadable, dropped for forget");
        let key = object_key(memory_ref, MANIFEST_NAME)?;
        self.archive.delete(&key).await?;
        self.archive.delete_old_versions(&key).await?;
        self.sweep(memory_ref, None).await?;
        Ok(0)
    }

    /// Deletes, with every version, each object under the ref's index that `manifest` does not
    /// name (old segments, retired ones, leftovers of passes that lost their install).
    async fn sweep(
        &self,
        memory_ref: &MemoryRef,
        manifest: Option<&Manifest>,
    ) -> Result<(), StoreError> {
        let prefix = format!("agents/{}/search/", memory_ref.agent().as_str());
        let live: HashSet<String> = manifest
            .map(|m| {
                m.segments
                    .iter()
                    .flat_map(|s| [s.name.clone(), vectors_name(&s.name)])
                    .chain([MANIFEST_NAME.to_owned()])
                    .collect()
            })
            .unwrap_or_default();
        for key in self.archive.list(memory_ref.tenant(), &prefix).await? {
            let name = key.as_str().rsplit('/').next().unwrap_or_default();
            if !live.contains(name) {
                self.archive.delete(&key).await?;
                self.archive.delete_old_versions(&key).await?;
            }
        }
        Ok(())
    }
}

#[async_trait]
impl ForgetHook for IndexForgetHook {
    async fn forget(&self, scope: ForgetScope<'_>) -> Result<ForgetCounts, CoreError> {
        let mut by_ref: BTreeMap<&MemoryRef, BTreeSet<&str>> = BTreeMap::new();
        for k in scope.forgotten {
            by_ref.entry(&k.memory_ref).or_default().insert(&k.id);
        }
        let now = self.clock.now();
        let mut rewritten = 0;
        for (memory_ref, ids) in by_ref {
            rewritten += self.rewrite_without(memory_ref, &ids, now).await?;
        }
        tracing::info!(segments = rewritten, "search index rewritten for forget");
        // The counts name derived data a caller asked about; segments are the index's own.
        Ok(ForgetCounts::default())
    }
}
