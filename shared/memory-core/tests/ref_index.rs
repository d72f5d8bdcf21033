//! The search index wired to the store (docs/search.md "The index"), over the in-memory ports:
//! a search through the index answers what the full scan of the same table answers (same ids,
//! same scores, bit for bit) in every mode, after writes, deletes, expiries, vector backfills,
//! folds and merges; duplicate passes install one manifest; forget leaves no object holding a
//! forgotten entry's terms or id; a missing segment falls back to the scan and says so, and so
//! does a changed byte in a segment's vectors for the queries that read them.

mod common;

use std::sync::Arc;

use common::{world, World};
use memory_core::forget::Forgetter;
use memory_core::ports::{ArchiveStore, EntryStore, PassKind};
use memory_core::reader::MemoryReader;
use memory_core::ref_index::{IndexForgetHook, IndexPass, IndexReport, SearchPath};
use memory_core::search::{SearchMode, SearchResults};
use memory_core::tag_filter::TagFilter;
use memory_core::writer::MemoryWriter;
use memory_core::{TenantId, TenantScope, Timestamp};
use memory_testkit::contract::{assert_index_parity, suite_search, SEARCH_WORDS};
use memory_testkit::in_memory::{InMemoryArchiveStore, SequentialIds, WordHashEmbedder};
use serde_json::{json, Value};

const TENANT: &str = "tenant-x";
const REF: &str = "workspaces/tenant-x/agents/agent-1/memories";

fn scope() -> TenantScope {
    TenantScope::new(TenantId::parse(TENANT).expect("tenant"))
}

/// Deterministic varied entries: 3-9 words each, some tagged, some expiring.
fn entries(n: usize, seed: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let k = i * 7 + seed * 13;
            let words: Vec<&str> = (0..3 + k % 7)
                .map(|j| SEARCH_WORDS[(k + j * 5) % SEARCH_WORDS.len()])
                .collect();
            let mut e = json!({"content": words.join(" ")});
            if k.is_multiple_of(3) {
                e["tags"] = json!(["kind:fact", format!("topic:{}", k % 4)]);
            }
            if k.is_multiple_of(11) {
                e["expiresAt"] = json!("2027-01-15T08:00:10Z");
            }
            if k.is_multiple_of(17) {
                e["subject"] = json!("alice");
            }
            e
        })
        .collect()
}

struct Setup {
    w: World,
    archive: Arc<InMemoryArchiveStore>,
    embedder: Arc<WordHashEmbedder>,
    ids: Arc<SequentialIds>,
}

impl Setup {
    /// Swaps a segment object's bytes in place (a damaged object the store still serves).
    async fn replace_segment(&self, key: &memory_core::ports::ObjectKey, body: Vec<u8>) {
        let etag = self
            .archive
            .get(key)
            .await
            .expect("get")
            .expect("present")
            .etag;
        self.archive
            .put_expecting(
                memory_core::ports::ObjectPut {
                    key,
                    body,
                    kind: memory_core::ports::ObjectKind::Index,
                    content_type: "application/octet-stream",
                },
                memory_core::ports::Expect::ETag(etag),
            )
            .await
            .expect("replace");
    }

    fn new() -> Self {
        Setup {
            w: world(),
            archive: Arc::new(InMemoryArchiveStore::new()),
            embedder: Arc::new(WordHashEmbedder::default()),
            ids: Arc::new(SequentialIds::default()),
        }
    }

    /// A setup whose ref holds `n` embedded entries (of `seed`), folded by one index pass.
    async fn indexed(n: usize, seed: usize) -> Self {
        let s = Setup::new();
        s.put(entries(n, seed), true).await;
        s.fold().await;
        s
    }

    async fn put(&self, values: Vec<Value>, embed: bool) -> Vec<String> {
        let writer = MemoryWriter::new(self.w.ports.core(), self.ids.clone())
            .with_embedder(embed.then(|| self.embedder.clone() as _));
        let mut ids = Vec::new();
        for chunk in values.chunks(25) {
            let out = writer
                .put(&common::request(
                    json!({"tenantId": TENANT, "memoryRef": REF, "entries": chunk}),
                ))
                .await
                .expect("put");
            ids.extend(out.written.into_iter().map(|w| w.id));
        }
        ids
    }

    fn pass(&self) -> IndexPass {
        IndexPass::new(
            self.w.ports.core(),
            self.archive.clone(),
            Some(self.embedder_model()),
        )
    }

    /// One index pass over the suite's ref, which must succeed.
    async fn fold(&self) -> IndexReport {
        self.pass().run(TENANT, REF).await.expect("index pass")
    }

    fn embedder_model(&self) -> String {
        use memory_core::ports::Embedder;
        self.embedder.model().to_owned()
    }

    fn reader(&self, indexed: bool) -> MemoryReader {
        MemoryReader::new(self.w.ports.store.clone(), self.w.ports.clock.clone())
            .with_embedder(Some(self.embedder.clone()))
            .with_index(indexed.then(|| self.archive.clone() as Arc<dyn ArchiveStore>))
    }

    async fn search(
        &self,
        indexed: bool,
        q: &str,
        tags: &TagFilter,
        mode: SearchMode,
    ) -> SearchResults {
        suite_search(&self.reader(indexed), &scope(), REF, q, tags, mode).await
    }

    /// [`Setup::search`] with no tag filter.
    async fn search_untagged(&self, indexed: bool, q: &str, mode: SearchMode) -> SearchResults {
        self.search(indexed, q, &TagFilter::default(), mode).await
    }

    /// With vector bytes that do not verify: semantic and hybrid queries for `q` fall back to
    /// the scan and answer what it answers; a text query reads the text part alone, which is
    /// intact, so the index still answers it, as the scan does.
    async fn assert_vector_queries_fall_back(&self, q: &str) {
        for mode in [SearchMode::Semantic, SearchMode::Hybrid] {
            self.assert_answers_as_scan(q, mode, SearchPath::Fallback)
                .await;
        }
        self.assert_answers_as_scan(q, SearchMode::Text, SearchPath::Index)
            .await;
    }

    /// The reader with the index answers `q` by `path`, and answers what the scan answers
    /// (hits and unembedded count); returns that answer.
    async fn assert_answers_as_scan(
        &self,
        q: &str,
        mode: SearchMode,
        path: SearchPath,
    ) -> SearchResults {
        let scan = self.search_untagged(false, q, mode).await;
        let answer = self.search_untagged(true, q, mode).await;
        assert_eq!(answer.path, path, "{mode:?} {q}");
        assert_eq!(answer.results, scan.results, "{mode:?} {q}");
        assert_eq!(answer.unembedded, scan.unembedded, "{mode:?} {q}");
        answer
    }

    /// Every query, mode and filter: the index answers, and answers what the scan answers.
    async fn assert_parity(&self, stage: &str) {
        let filters = [
            TagFilter::default(),
            TagFilter::new(vec!["kind:fact".into()], vec![]).expect("filter"),
            TagFilter::new(vec![], vec!["topic:1".into(), "topic:2".into()]).expect("filter"),
        ];
        let queries = [
            "invoice payment",
            "allergy peanuts",
            "E_CONN",
            "東京 café",
            "the and of",
            "Berlin grandmother birthday",
        ];
        assert_index_parity(
            stage,
            |indexed| self.reader(indexed),
            &scope(),
            REF,
            &filters,
            &queries,
            |_, _| {},
        )
        .await;
    }

    fn objects_text(&self) -> String {
        self.archive
            .dump()
            .into_iter()
            .map(|(k, body)| format!("{}\n{}", k.as_str(), String::from_utf8_lossy(&body)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn memory_ref() -> memory_core::MemoryRef {
    scope().admit(REF).expect("ref")
}

#[tokio::test]
async fn a_ref_without_an_index_is_scanned_and_the_first_pass_builds_one() {
    let s = Setup::new();
    s.put(entries(30, 1), true).await;
    let before = s.search_untagged(true, "invoice", SearchMode::Text).await;
    assert_eq!(before.path, SearchPath::Scan);
    let report = s.fold().await;
    assert_eq!(report.status, "built");
    assert_eq!(report.segments, 1);
    // Every change it folded is gone; the ref left the pending index.
    assert!(s
        .w
        .ports
        .store
        .changes(&memory_ref())
        .await
        .expect("changes")
        .is_empty());
    let marker =
        s.w.ports
            .store
            .marker_state(&memory_ref(), PassKind::Index)
            .await
            .expect("marker");
    assert!(!marker.pending);
    s.assert_parity("built").await;
}

#[tokio::test]
async fn writes_deletes_expiries_and_backfills_after_the_pass_are_seen_at_once() {
    let s = Setup::new();
    let first = s.put(entries(40, 2), true).await;
    s.fold().await;
    // The tail: new entries (some without vectors), deletes, an expiry passing.
    let late = s.put(entries(12, 3), false).await;
    for id in first.iter().step_by(6).chain(late.iter().take(2)) {
        let key = memory_core::EntryKey {
            memory_ref: memory_ref(),
            id: id.clone(),
        };
        assert!(s.w.ports.store.delete(&key).await.expect("delete"));
    }
    s.assert_parity("tail").await;
    s.w.ports
        .clock
        .set(Timestamp::parse_rfc3339("2027-01-15T08:00:11Z").expect("time"));
    s.assert_parity("expired").await;
    // Vectors backfilled after the pass: the index masks the old copies and ranks the new.
    let pass = memory_core::embed_pass::EmbedPass::new(s.w.ports.core(), s.embedder.clone());
    pass.run(TENANT, REF).await.expect("embed pass");
    s.assert_parity("backfilled").await;
    // Folding the tail and merging change nothing a search sees.
    let mut statuses = Vec::new();
    for round in 0..6 {
        let mut batch = entries(5, 10 + round);
        for e in &mut batch {
            if let Some(o) = e.as_object_mut() {
                o.remove("expiresAt");
            }
        }
        s.put(batch, round % 2 == 0).await;
        let report = s.fold().await;
        assert!(
            matches!(report.status, "folded" | "merged"),
            "{}",
            report.status
        );
        assert!(report.segments <= memory_core::ref_index::MAX_SEGMENTS);
        statuses.push(report.status);
        s.assert_parity(&format!("round {round}")).await;
    }
    assert!(
        statuses.contains(&"folded") && statuses.contains(&"merged"),
        "{statuses:?}"
    );
}

#[tokio::test]
async fn duplicate_passes_install_one_manifest_and_lose_nothing() {
    let s = Setup::indexed(30, 4).await;
    for round in 0..5 {
        s.put(entries(6, 20 + round), true).await;
        let (pa, pb) = (s.pass(), s.pass());
        let (a, b) = tokio::join!(pa.run(TENANT, REF), pb.run(TENANT, REF));
        let statuses = [a.expect("a").status, b.expect("b").status];
        // At most one installs a new segment set; the other finds nothing or loses the swap.
        assert!(
            statuses
                .iter()
                .filter(|s| matches!(**s, "folded" | "merged"))
                .count()
                <= 1,
            "{statuses:?}"
        );
        s.assert_parity(&format!("duplicate round {round}")).await;
    }
    // Nothing orphaned: every segment object is named by the manifest or retired.
    let text = s.objects_text();
    let manifest_count = text.matches("manifest.json").count();
    assert_eq!(manifest_count, 1);
}

#[tokio::test]
async fn forget_leaves_no_segment_or_manifest_holding_the_subject() {
    let s = Setup::new();
    s.put(entries(20, 5), true).await;
    let secret_ids = s
        .put(
            vec![
                json!({"content": "zanzibarite allergy to quokkas", "subject": "carol"}),
                json!({"content": "carol moved to zanzibarite street", "subject": "carol", "tags": ["kind:fact"]}),
            ],
            true,
        )
        .await;
    s.fold().await;
    // An update folded later leaves the first copy retired in an older segment too.
    s.put(entries(5, 6), true).await;
    s.fold().await;
    assert!(s.objects_text().contains("zanzibarite"));
    let forgetter = Forgetter::new(s.w.ports.core()).with_hook(Arc::new(IndexForgetHook::new(
        s.archive.clone(),
        s.w.ports.clock.clone(),
    )));
    forgetter.forget(TENANT, "carol").await.expect("forget");
    let text = s.objects_text();
    assert!(
        !text.contains("zanzibarite"),
        "a term of the forgotten subject survived"
    );
    assert!(!text.contains("quokka"));
    for id in &secret_ids {
        assert!(
            !text.contains(id.as_str()),
            "a forgotten id survived in an object"
        );
    }
    let found = s
        .search_untagged(true, "zanzibarite quokkas", SearchMode::Text)
        .await;
    assert!(found.results.is_empty());
    s.assert_parity("after forget").await;
}

#[tokio::test]
async fn a_missing_segment_falls_back_to_the_table_and_says_so() {
    let s = Setup::indexed(25, 7).await;
    let segment = s
        .archive
        .dump()
        .into_iter()
        .map(|(k, _)| k)
        .find(|k| !k.as_str().ends_with("manifest.json") && !k.as_str().ends_with(".vec"))
        .expect("a segment object");
    s.archive.delete(&segment).await.expect("delete");
    let fallback = s
        .assert_answers_as_scan("invoice payment", SearchMode::Hybrid, SearchPath::Fallback)
        .await;
    // A forget meanwhile cannot read the index: it drops the index whole rather than fail.
    let hook = IndexForgetHook::new(s.archive.clone(), s.w.ports.clock.clone());
    let forgotten = memory_core::EntryKey {
        memory_ref: memory_ref(),
        id: fallback.results[0].entry.id.clone(),
    };
    let ids = std::collections::BTreeSet::from([forgotten.id.as_str()]);
    let now = memory_core::ports::Clock::now(&*s.w.ports.clock);
    assert_eq!(
        hook.rewrite_without(&memory_ref(), &ids, now)
            .await
            .expect("forget"),
        0
    );
    assert!(s.archive.dump().is_empty(), "every index object is gone");
    assert_eq!(
        s.search_untagged(true, "invoice payment", SearchMode::Text)
            .await
            .path,
        SearchPath::Scan
    );
    // The next pass with something to fold finds the segment gone and rebuilds from the table.
    s.put(entries(3, 8), true).await;
    let report = s.fold().await;
    assert_eq!(report.status, "built");
    s.assert_parity("rebuilt").await;
}

#[tokio::test]
async fn a_changed_byte_in_the_vectors_falls_back_for_the_queries_that_read_them() {
    let s = Setup::new();
    s.put(entries(25, 7), true).await;
    s.pass().run(TENANT, REF).await.expect("pass");
    let (segment, mut body) = s
        .archive
        .dump()
        .into_iter()
        .find(|(k, _)| !k.as_str().ends_with("manifest.json"))
        .expect("a segment object");
    // The last byte is in the vector block's last list: the text part still verifies.
    let last = body.len() - 1;
    body[last] ^= 1;
    s.replace_segment(&segment, body).await;
    s.assert_vector_queries_fall_back("invoice payment").await;
}

#[tokio::test]
async fn a_cold_query_reads_one_object_per_segment_whatever_its_mode() {
    let s = Setup::indexed(30, 11).await;
    s.put(entries(10, 12), true).await;
    let folded = s.fold().await;
    assert_eq!(folded.segments, 2);
    // Segment objects hold their vectors: no second object per segment.
    assert!(
        !s.objects_text().contains(".vec\n"),
        "no separate vector objects"
    );
    for mode in [SearchMode::Text, SearchMode::Semantic, SearchMode::Hybrid] {
        s.archive.calls.reset();
        // A fresh reader holds no segment: the manifest, then one object per segment.
        let cold = s
            .search(true, "invoice payment", &TagFilter::default(), mode)
            .await;
        assert_eq!(cold.path, SearchPath::Index, "{mode:?}");
        assert_eq!(
            s.archive.calls.get("get"),
            3,
            "{mode:?}: manifest + 2 segments"
        );
    }
    s.assert_parity("segments read by range").await;
}

#[tokio::test]
async fn an_index_built_in_process_from_the_tables_entries_ranks_as_the_scan() {
    let s = Setup::new();
    s.put(entries(30, 13), true).await;
    let now = memory_core::ports::Clock::now(&*s.w.ports.clock);
    let (r, stored, model) = (memory_ref(), s.w.ports.store.dump(), s.embedder_model());
    let install =
        || memory_core::ref_index::install_built_index(&*s.archive, &r, &stored, &model, now);
    let report = install().await.expect("install");
    assert_eq!((report.status, report.segments), ("built", 1));
    // A ref that already has an index is not replaced.
    assert!(install().await.is_err());
    s.put(entries(6, 14), true).await;
    s.assert_parity("built in process, then a tail").await;
    // The pass folds every change record, those of the entries built in process too (marked
    // dead in the built segment, so it merges): the answers stay the scan's.
    let folded = s.fold().await;
    assert_eq!(folded.documents, 36, "{folded:?}");
    s.assert_parity("folded").await;
}

/// A ref whose one segment holds its vectors in lists (the threshold lowered: 3,000 entries in
/// lists of about 32, of which a query reads 16), with its manifest entry and object.
async fn listed_ref() -> (Setup, search_index::SegmentRef, Vec<u8>) {
    let s = Setup::new();
    // Varied enough that the vectors spread over the lists (the word-hash embedder sums one
    // vector per word): two of the search words and two words of a few hundred.
    let varied = (0..3_000)
        .map(|i: usize| {
            let a = SEARCH_WORDS[i % SEARCH_WORDS.len()];
            let b = SEARCH_WORDS[(i / SEARCH_WORDS.len() * 3 + 1) % SEARCH_WORDS.len()];
            json!({"content": format!("{a} {b} w{} v{}", i % 97, i % 89)})
        })
        .collect();
    s.put(varied, true).await;
    s.pass()
        .with_ann(search_index::Ann {
            min_vectors: 1_000,
            list_size: 32,
            probes: 16,
        })
        .run(TENANT, REF)
        .await
        .expect("pass");
    let objects = s.archive.dump();
    let manifest: search_index::Manifest = objects
        .iter()
        .find(|(k, _)| k.as_str().ends_with("manifest.json"))
        .map(|(_, body)| serde_json::from_slice(body).expect("manifest"))
        .expect("a manifest");
    assert_eq!(manifest.segments.len(), 1);
    let reference = manifest.segments[0].clone();
    assert!(reference.vector_head.is_some(), "a segment with lists");
    let body = objects
        .into_iter()
        .find(|(k, _)| k.as_str().ends_with(&reference.name))
        .expect("the segment object")
        .1;
    (s, reference, body)
}

/// The segment as a cold query reads it, the lists it compares for `query` in `mode` (those
/// `search_index::probe_lists` names: the nearest, and for hybrid those of the best `limit`
/// text hits, as `suite_search` asks), and how many of them are not among the nearest.
async fn probed_lists(
    s: &Setup,
    reference: &search_index::SegmentRef,
    body: &[u8],
    query: &str,
    mode: SearchMode,
) -> (search_index::Segment, Vec<usize>, usize) {
    use memory_core::ports::Embedder;
    let at = reference.vectors_at.expect("vectors") as usize;
    let head = reference.vector_head.expect("head") as usize;
    let segment =
        search_index::Segment::decode_head(&body[..at], &body[at..at + head]).expect("head");
    let vector = s.embedder.embed(query).await.expect("embed").vector;
    let probes = search_index::default_probes(&[&segment]);
    let ranking = match mode {
        SearchMode::Hybrid => text_search::Ranking::Hybrid(&vector),
        _ => text_search::Ranking::Semantic(&vector),
    };
    let masked = std::collections::HashSet::new();
    let segments = [&segment];
    let view = search_index::View {
        segments: &segments,
        masked: &masked,
        dead: &[],
        tail: &[],
        now_ms: 0,
    };
    let lists = search_index::probe_lists(
        &view,
        &search_index::Query {
            tags: search_index::TagQuery::default(),
            analyzer: &text_search::Analyzer::new(true),
            cache: &text_search::TermCache::default(),
            text: query,
            ranking,
            // The lists do not depend on the model (only which vectors are compared).
            model: "",
            limit: 8,
            probes: Some(probes),
        },
    )
    .remove(0);
    let nearest = segment.probe(&vector, probes);
    let extra = lists.iter().filter(|l| !nearest.contains(l)).count();
    (segment, lists, extra)
}

const LISTED_QUERIES: [&str; 4] = [
    "invoice payment",
    "allergy peanuts",
    "Berlin grandmother birthday",
    "invoice allergy",
];

#[tokio::test]
async fn a_segment_with_lists_is_read_by_range_and_answers_the_same_cold_and_warm() {
    let (s, reference, body) = listed_ref().await;
    let at = reference.vectors_at.expect("vectors");
    let head = reference.vector_head.expect("head");
    let manifest_bytes = s
        .archive
        .dump()
        .into_iter()
        .find(|(k, _)| k.as_str().ends_with("manifest.json"))
        .expect("manifest")
        .1
        .len() as u64;
    let warm = s.reader(true);
    let mut warm_lists = std::collections::BTreeSet::new();
    let mut text_hit_lists = 0;
    for mode in [SearchMode::Semantic, SearchMode::Hybrid] {
        for q in LISTED_QUERIES {
            let (segment, lists, extra) = probed_lists(&s, &reference, &body, q, mode).await;
            assert!(
                segment.list_count() >= 80 && lists.len() == 16 + extra,
                "{} lists, {} probed",
                segment.list_count(),
                lists.len()
            );
            match mode {
                SearchMode::Hybrid => text_hit_lists += extra,
                _ => assert_eq!(extra, 0, "semantic reads the nearest lists only"),
            }
            let list_bytes: u64 = lists
                .iter()
                .map(|&l| {
                    let r = segment.list_range(l);
                    r.end - r.start
                })
                .sum();
            // Cold: the manifest, the text part with the directory, then each list compared.
            s.archive.calls.reset();
            s.archive
                .bytes_read
                .store(0, std::sync::atomic::Ordering::Relaxed);
            let cold = s.search_untagged(true, q, mode).await;
            assert_eq!(cold.path, SearchPath::Index, "{mode:?} {q}");
            assert_eq!(
                s.archive.calls.get("get"),
                2 + lists.len() as u64,
                "{mode:?} {q}: manifest, head, one call per probed list"
            );
            let read = s
                .archive
                .bytes_read
                .load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(
                read,
                manifest_bytes + at + head + list_bytes,
                "{mode:?} {q}"
            );
            let block_lists = body.len() as u64 - at - head;
            assert!(
                list_bytes < block_lists / 2,
                "{mode:?} {q}: read {list_bytes} of {block_lists} bytes of lists"
            );
            // Warm: the lists no earlier query of this reader read, nothing else again.
            let missing = lists.iter().filter(|l| !warm_lists.contains(*l)).count() as u64;
            let first = warm_lists.is_empty();
            s.archive.calls.reset();
            let answer = suite_search(&warm, &scope(), REF, q, &TagFilter::default(), mode).await;
            assert_eq!(
                s.archive.calls.get("get"),
                1 + u64::from(first) + missing,
                "{mode:?} {q}: warm reads only lists it lacks"
            );
            warm_lists.extend(lists);
            assert_eq!(answer.path, SearchPath::Index);
            assert_eq!(answer.results, cold.results, "{mode:?} {q}: warm = cold");
            assert_eq!(answer.unembedded, cold.unembedded);
            assert!(!answer.results.is_empty(), "{mode:?} {q}");
        }
    }
    assert!(warm_lists.len() > 16, "the queries probed different lists");
    // Hybrid queries also read the lists of their best text hits, in the same calls.
    assert!(text_hit_lists > 0, "a text hit outside the nearest lists");
    // Held lists do not change an answer: every query again on the warm reader, which now
    // holds more lists than any one query probes, answers as a fresh one.
    for mode in [SearchMode::Semantic, SearchMode::Hybrid] {
        for q in LISTED_QUERIES {
            let again = suite_search(&warm, &scope(), REF, q, &TagFilter::default(), mode).await;
            let cold = s.search_untagged(true, q, mode).await;
            assert_eq!(again.results, cold.results, "{mode:?} {q}");
        }
    }
    // Text queries read the text part alone and rank as the scan.
    s.assert_answers_as_scan("invoice payment", SearchMode::Text, SearchPath::Index)
        .await;
}

#[tokio::test]
async fn a_changed_byte_in_a_probed_list_falls_back_to_the_scan() {
    let (s, reference, mut body) = listed_ref().await;
    let q = "invoice payment";
    let (segment, lists, _) = probed_lists(&s, &reference, &body, q, SearchMode::Semantic).await;
    let at = reference.vectors_at.expect("vectors");
    let range = segment.list_range(lists[0]);
    body[(at + range.start) as usize] ^= 1;
    let key = s
        .archive
        .dump()
        .into_iter()
        .find(|(k, _)| k.as_str().ends_with(&reference.name))
        .expect("segment")
        .0;
    s.replace_segment(&key, body).await;
    s.assert_vector_queries_fall_back(q).await;
}
