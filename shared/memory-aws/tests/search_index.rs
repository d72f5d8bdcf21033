//! The search index over the real adapters on the emulator (docs/search.md "The index"): change
//! records in DynamoDB, segments and the manifest in S3. A search through the index answers
//! what the full scan of the same table answers in every mode, after writes, deletes and folds;
//! a forget's rewrite leaves no version of any object under the ref's index holding the
//! forgotten entries' terms or ids.

use std::sync::Arc;

use aws_test_support::{emulator_config, required_env};
use memory_aws::{DynamoEntryStore, S3ArchiveStore};
use memory_core::model::StoredEntry;
use memory_core::ports::{ArchiveStore, CorePorts, Embedder, EntryStore};
use memory_core::reader::MemoryReader;
use memory_core::ref_index::{IndexForgetHook, IndexPass, SearchPath};
use memory_core::search::SearchMode;
use memory_core::tag_filter::TagFilter;
use memory_core::{MemoryRef, TenantScope, Timestamp};
use memory_testkit::contract::{
    assert_index_parity, entry, fresh_ref, suite_search, SEARCH_WORDS, T0,
};
use memory_testkit::in_memory::{ManualClock, RecordingPublisher, WordHashEmbedder};

struct World {
    store: Arc<DynamoEntryStore>,
    archive: Arc<S3ArchiveStore>,
    s3: aws_sdk_s3::Client,
    clock: Arc<ManualClock>,
    embedder: Arc<WordHashEmbedder>,
    r: MemoryRef,
    scope: TenantScope,
}

async fn world(label: &str) -> World {
    let sdk = emulator_config().await;
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    );
    let (t, r) = fresh_ref(label);
    World {
        store: Arc::new(DynamoEntryStore::new(
            aws_sdk_dynamodb::Client::new(&sdk),
            required_env("MEMORY_TABLE"),
        )),
        archive: Arc::new(S3ArchiveStore::new(
            s3.clone(),
            required_env("ARCHIVE_BUCKET"),
        )),
        s3,
        clock: Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 60_000))),
        embedder: Arc::new(WordHashEmbedder::default()),
        scope: TenantScope::new(t),
        r,
    }
}

impl World {
    fn ports(&self) -> CorePorts {
        CorePorts::new(
            self.store.clone(),
            Arc::new(RecordingPublisher::new()),
            self.clock.clone(),
        )
    }

    async fn put(&self, from: u64, n: u64, with_vectors: bool) -> Vec<StoredEntry> {
        let mut out = Vec::new();
        for i in from..from + n {
            let k = i as usize * 7;
            let words: Vec<&str> = (0..3 + k % 5)
                .map(|j| SEARCH_WORDS[(k + j * 3) % SEARCH_WORDS.len()])
                .collect();
            let tags: &[&str] = if i % 3 == 0 { &["kind:fact"] } else { &[] };
            let mut e = entry(&self.r, i, &words.join(" "), tags);
            if with_vectors {
                e.embedding = Some(self.embedder.embed(&e.entry.content).await.expect("embed"));
            }
            out.push(e);
        }
        for chunk in out.chunks(25) {
            self.store.put_entries(chunk).await.expect("put");
        }
        out
    }

    fn pass(&self) -> IndexPass {
        IndexPass::new(
            self.ports(),
            self.archive.clone(),
            Some(self.embedder.model().to_owned()),
        )
    }

    /// One index pass over the world's ref, as the sweep runs it.
    async fn index(&self) -> memory_core::ref_index::IndexReport {
        self.pass()
            .run(self.r.tenant().as_str(), &self.r.to_string())
            .await
            .expect("pass")
    }

    fn reader(&self, indexed: bool) -> MemoryReader {
        let archive = indexed.then(|| self.archive.clone() as Arc<dyn ArchiveStore>);
        MemoryReader::new(self.store.clone(), self.clock.clone())
            .with_embedder(Some(self.embedder.clone()))
            .with_index(archive)
    }

    async fn assert_parity(&self, stage: &str) {
        let filters = [
            TagFilter::default(),
            TagFilter::new(vec!["kind:fact".into()], vec![]).expect("filter"),
        ];
        let queries = [
            "invoice payment",
            "E_CONN",
            "東京 café",
            "grandmother birthday",
        ];
        assert_index_parity(
            stage,
            |indexed| self.reader(indexed),
            &self.scope,
            &self.r.to_string(),
            &filters,
            &queries,
            |q, scan| {
                assert!(
                    !scan.results.is_empty() || q == "E_CONN",
                    "positive control: {q}"
                )
            },
        )
        .await;
    }

    /// Every version of every object under the ref's index, as text.
    async fn all_versions(&self) -> Vec<(String, String)> {
        let bucket = required_env("ARCHIVE_BUCKET");
        let prefix = format!("{}/agents/agent-1/search/", self.r.tenant().as_str());
        let listed = self
            .s3
            .list_object_versions()
            .bucket(&bucket)
            .prefix(&prefix)
            .send()
            .await
            .expect("list versions");
        let mut out = Vec::new();
        for v in listed.versions() {
            let (Some(key), Some(version)) = (v.key(), v.version_id()) else {
                continue;
            };
            let body = self
                .s3
                .get_object()
                .bucket(&bucket)
                .key(key)
                .version_id(version)
                .send()
                .await
                .expect("get version")
                .body
                .collect()
                .await
                .expect("body")
                .into_bytes();
            out.push((key.to_owned(), String::from_utf8_lossy(&body).into_owned()));
        }
        out
    }
}

#[tokio::test]
async fn the_index_ranks_as_the_scan_through_writes_deletes_and_folds() {
    let w = world("idx").await;
    let first = w.put(0, 60, true).await;
    let built = w.index().await;
    assert_eq!((built.status, built.segments), ("built", 1));
    assert!(w.store.changes(&w.r).await.expect("changes").is_empty());
    w.assert_parity("built").await;
    // The tail: a write without vectors and deletes, seen by the very next search.
    w.put(100, 15, false).await;
    for e in first.iter().step_by(7) {
        assert!(w.store.delete(&e.key()).await.expect("delete"));
    }
    w.assert_parity("tail").await;
    let folded = w.index().await;
    assert_eq!((folded.status, folded.segments), ("folded", 2));
    w.assert_parity("folded").await;
    // A duplicate delivery finds nothing to fold.
    let again = w.index().await;
    assert_eq!(again.status, "unchanged");
}

#[tokio::test]
async fn a_forget_rewrite_leaves_no_version_holding_the_forgotten_entries() {
    let w = world("idxforget").await;
    w.put(0, 20, true).await;
    let mut secret = entry(&w.r, 50, "zanzibarite quokka allergy", &["kind:fact"]);
    secret.embedding = Some(
        w.embedder
            .embed(&secret.entry.content)
            .await
            .expect("embed"),
    );
    w.store
        .put_entries(std::slice::from_ref(&secret))
        .await
        .expect("put");
    let pass = w.pass();
    let (tenant, raw) = (w.r.tenant().as_str().to_owned(), w.r.to_string());
    pass.run(&tenant, &raw).await.expect("pass");
    // A second segment and a second manifest version, so old versions exist.
    w.put(200, 5, true).await;
    pass.run(&tenant, &raw).await.expect("pass");
    let before = w.all_versions().await;
    assert!(
        before.iter().any(|(_, body)| body.contains("zanzibarite")),
        "positive control: the term is in a segment"
    );
    let hook = IndexForgetHook::new(w.archive.clone(), w.clock.clone());
    let ids = std::collections::BTreeSet::from([secret.entry.id.as_str()]);
    assert_eq!(
        hook.rewrite_without(&w.r, &ids, memory_core::ports::Clock::now(&*w.clock))
            .await
            .expect("rewrite"),
        1
    );
    w.store.delete(&secret.key()).await.expect("delete");
    let after = w.all_versions().await;
    assert!(!after.is_empty());
    for (key, body) in &after {
        assert!(
            !body.contains("zanzibarite") && !body.contains("quokka"),
            "{key} keeps a term"
        );
        assert!(!body.contains(&secret.entry.id), "{key} keeps the id");
    }
    w.assert_parity("after forget").await;
}

#[tokio::test]
async fn a_segment_with_lists_is_read_by_range_from_s3_and_answers_the_same_cold_and_warm() {
    let w = world("ivf").await;
    // Varied vectors (the word-hash embedder sums one vector per word), so the lists spread.
    let mut entries = Vec::new();
    for i in 0..600u64 {
        let n = i as usize;
        let a = SEARCH_WORDS[n % SEARCH_WORDS.len()];
        let b = SEARCH_WORDS[(n / SEARCH_WORDS.len() * 3 + 1) % SEARCH_WORDS.len()];
        let mut e = entry(&w.r, i, &format!("{a} {b} w{} v{}", n % 37, n % 29), &[]);
        e.embedding = Some(w.embedder.embed(&e.entry.content).await.expect("embed"));
        entries.push(e);
    }
    for chunk in entries.chunks(25) {
        w.store.put_entries(chunk).await.expect("put");
    }
    w.pass()
        .with_ann(memory_core::ref_index::Ann {
            min_vectors: 200,
            list_size: 8,
            probes: 16,
        })
        .run(w.r.tenant().as_str(), &w.r.to_string())
        .await
        .expect("pass");
    let key = memory_core::ports::ObjectKey::new(
        w.r.tenant(),
        &format!("agents/{}/search/manifest.json", w.r.agent().as_str()),
    )
    .expect("key");
    let manifest: serde_json::Value = serde_json::from_slice(
        &w.archive
            .get(&key)
            .await
            .expect("get")
            .expect("manifest")
            .body,
    )
    .expect("manifest");
    assert!(
        manifest["segments"][0]["vectorHead"].is_u64(),
        "one segment with lists: {}",
        manifest["segments"]
    );
    let warm = w.reader(true);
    let ref_name = w.r.to_string();
    for mode in [SearchMode::Semantic, SearchMode::Hybrid] {
        for q in ["invoice payment", "allergy peanuts", "grandmother birthday"] {
            let cold = suite_search(
                &w.reader(true),
                &w.scope,
                &ref_name,
                q,
                &TagFilter::default(),
                mode,
            )
            .await;
            let held =
                suite_search(&warm, &w.scope, &ref_name, q, &TagFilter::default(), mode).await;
            assert_eq!(cold.path, SearchPath::Index, "{mode:?} {q}");
            assert_eq!(held.path, SearchPath::Index, "{mode:?} {q}");
            assert!(!cold.results.is_empty(), "{mode:?} {q}");
            assert_eq!(held.results, cold.results, "{mode:?} {q}: warm = cold");
            assert_eq!(held.unembedded, cold.unembedded);
        }
    }
}
