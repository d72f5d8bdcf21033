//! The behavioural contract of the ports, written once and run against every adapter (in-memory
//! here, DynamoDB/S3 in `memory-aws`) through `port_suite!`. Each check uses fresh random tenants,
//! so it can run against a long-lived emulator without cleanup, and every negative assertion is
//! preceded by a positive control on the same data so it cannot pass vacuously.

use std::sync::Arc;

use crate::in_memory::ManualClock;
use memory_core::listing::{ListOptions, ListPage};
use memory_core::model::{Attribution, EntryKey, MemoryEntry, StoredEntry, SubjectKey, Tier};
use memory_core::ports::{
    ArchiveStore, EntryStore, Expect, ObjectKey, ObjectKind, ObjectPut, Page, PageQuery, PutOutcome,
};
use memory_core::reader::MemoryReader;
use memory_core::tag_filter::TagFilter;
use memory_core::time::Timestamp;
use memory_core::StoreError;
use memory_guard::{AgentId, MemoryRef, TenantId, TenantScope};

/// A tenant id no other check or run uses.
pub fn fresh_tenant(label: &str) -> TenantId {
    let id = format!("{label}-{}", ulid::Ulid::new().to_string().to_lowercase());
    TenantId::parse(&id).unwrap_or_else(|_| panic!("test tenant id must be valid"))
}

/// A fresh tenant and its `agent-1` ref, where most contract checks start: runs against a shared
/// backend never meet.
pub fn fresh_ref(label: &str) -> (TenantId, MemoryRef) {
    let t = fresh_tenant(label);
    let r = memory_ref(&t, "agent-1");
    (t, r)
}

/// Stores one entry, failing the test if the store refuses it.
async fn put_all(store: &dyn EntryStore, entries: &[StoredEntry]) {
    store.put_entries(entries).await.expect("put");
}

async fn put_one(store: &dyn EntryStore, e: &StoredEntry) {
    store
        .put_entries(std::slice::from_ref(e))
        .await
        .expect("put");
}

pub fn memory_ref(tenant: &TenantId, agent: &str) -> MemoryRef {
    let agent = AgentId::parse(agent).unwrap_or_else(|_| panic!("test agent id must be valid"));
    MemoryRef::new(tenant.clone(), agent)
}

/// The vocabulary of the search suites' generated entries (in memory and on the emulator):
/// plain words, an identifier, a city with a capital, and non-ASCII words, so every analyzer
/// path is ranked.
pub const SEARCH_WORDS: &[&str] = &[
    "invoice",
    "payment",
    "allergy",
    "peanuts",
    "moved",
    "Berlin",
    "grandmother",
    "birthday",
    "E_CONN_RESET",
    "deploy",
    "rollback",
    "Zurich",
    "coffee",
    "meeting",
    "Tuesday",
    "budget",
    "東京",
    "café",
    "renewal",
    "contract",
];

/// Base instant of the suite; entries are stamped relative to it.
pub const T0: i64 = 1_800_000_000_000;

/// The store's first page of `r` at `T0`, untagged: what most checks read back.
pub async fn first_page(store: &dyn EntryStore, r: &MemoryRef, limit: u32) -> Page {
    store
        .list_page(
            r,
            &PageQuery {
                limit,
                after: None,
                now: Timestamp::from_millis(T0),
            },
        )
        .await
        .expect("list page")
}

/// `e` written about `subject`: a subject is always one of the entry's own tenant.
pub fn about(subject: &str, mut e: StoredEntry) -> StoredEntry {
    e.subject = Some(SubjectKey::derive(e.memory_ref.tenant(), subject));
    e
}

pub fn entry(r: &MemoryRef, n: u64, content: &str, tags: &[&str]) -> StoredEntry {
    let at = Timestamp::from_millis(T0 + i64::try_from(n).unwrap_or(0));
    StoredEntry {
        memory_ref: r.clone(),
        entry: MemoryEntry {
            id: ulid::Ulid::from_parts(u64::try_from(at.as_millis()).unwrap_or(0), u128::from(n))
                .to_string(),
            content: content.to_owned(),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            created_at: at,
            expires_at: None,
        },
        tier: Tier::Transactional,
        subject: None,
        attribution: Attribution {
            run_id: Some("run-1".into()),
            node_id: Some("node-1".into()),
            agent_id: None,
        },
        provenance: Vec::new(),
        embedding: None,
    }
}

/// The first page of `raw_ref` as `scope`'s caller lists it with default options.
async fn list_page(reader: &MemoryReader, scope: &TenantScope, raw_ref: &str) -> ListPage {
    reader
        .list(scope, raw_ref, &ListOptions::default())
        .await
        .expect("list")
}

/// Entry `id` of `raw_ref` as `scope`'s caller gets it.
async fn get_entry(
    reader: &MemoryReader,
    scope: &TenantScope,
    raw_ref: &str,
    id: &str,
) -> Option<MemoryEntry> {
    reader.get(scope, raw_ref, id).await.expect("get")
}

fn reader(store: Arc<dyn EntryStore>, now: i64) -> (MemoryReader, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(now)));
    (MemoryReader::new(store, clock.clone()), clock)
}

async fn list_all(
    reader: &MemoryReader,
    scope: &TenantScope,
    r: &str,
    limit: u32,
) -> Vec<MemoryEntry> {
    list_filtered(reader, scope, r, limit, &TagFilter::default()).await
}

/// Every page of a list; a tag-filtered page that has a next page must be full.
async fn list_filtered(
    reader: &MemoryReader,
    scope: &TenantScope,
    r: &str,
    limit: u32,
    filter: &TagFilter,
) -> Vec<MemoryEntry> {
    let mut out = Vec::new();
    let mut cursor = None;
    for _ in 0..1000 {
        let page = reader
            .list(
                scope,
                r,
                &page_request(limit, filter.clone(), cursor.clone()),
            )
            .await
            .unwrap_or_else(|e| panic!("list failed: {e}"));
        if !filter.is_empty() && page.next_cursor.is_some() {
            assert_eq!(page.entries.len() as u32, limit, "a tag page is full");
        }
        out.extend(page.entries);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return out,
        }
    }
    panic!("pagination did not terminate")
}

pub async fn read_your_writes(store: Arc<dyn EntryStore>) {
    let (t, r) = fresh_ref("ryw");
    let e = entry(&r, 1, "prefers email follow-up", &["preference"]);
    put_one(&*store, &e).await;
    let got = store.get(&e.key()).await.expect("get");
    assert_eq!(got.as_ref(), Some(&e), "get returns exactly what was put");
    let (reader, _) = reader(store, T0 + 10);
    let scope = TenantScope::new(t);
    let page = list_page(&reader, &scope, &r.to_string()).await;
    assert_eq!(page.entries, vec![e.entry.clone()]);
    assert_eq!(page.next_cursor, None);
    assert_eq!(
        get_entry(&reader, &scope, &r.to_string(), &e.entry.id).await,
        Some(e.entry)
    );
}

pub async fn cross_tenant_probe_returns_nothing(store: Arc<dyn EntryStore>) {
    let a = fresh_tenant("cti-a");
    let b = fresh_tenant("cti-b");
    let ra = memory_ref(&a, "agent-1");
    let rb = memory_ref(&b, "agent-1");
    let ea = entry(&ra, 1, "tenant a fact", &["x"]);
    let eb = entry(&rb, 2, "tenant b fact", &["x"]);
    put_one(&*store, &ea).await;
    put_one(&*store, &eb).await;
    let (reader, _) = reader(store, T0 + 10);
    let scope_a = TenantScope::new(a);
    let scope_b = TenantScope::new(b);
    // Positive controls: each owner reads back what it wrote, so the store does hold both.
    let own_a = list_page(&reader, &scope_a, &ra.to_string()).await;
    assert_eq!(own_a.entries, vec![ea.entry.clone()]);
    let own_b = list_page(&reader, &scope_b, &rb.to_string()).await;
    assert_eq!(own_b.entries, vec![eb.entry.clone()]);
    assert!(get_entry(&reader, &scope_b, &rb.to_string(), &eb.entry.id)
        .await
        .is_some());
    // The probe: tenant A's accessor given tenant B's ref.
    let probe = list_page(&reader, &scope_a, &rb.to_string()).await;
    assert!(probe.entries.is_empty() && probe.next_cursor.is_none());
    assert_eq!(
        get_entry(&reader, &scope_a, &rb.to_string(), &eb.entry.id).await,
        None
    );
    // Same id under A's own ref does not reach B's entry either.
    assert_eq!(
        get_entry(&reader, &scope_a, &ra.to_string(), &eb.entry.id).await,
        None
    );
}

/// The CTI-1 malformed-ref corpus: traversal, percent-encoding and NUL tricks, empty
/// segments, stray slashes and backslashes, whitespace, look-alike characters and wrong case,
/// other schemes, oversize, truncated and extended refs: each must list nothing and get nothing.
pub fn malformed_refs(tenant: &str) -> Vec<String> {
    let ok = format!("workspaces/{tenant}/agents/agent-1/memories");
    vec![
        format!("workspaces/{tenant}/agents/../agents/agent-1/memories"),
        format!("workspaces/{tenant}/../{tenant}/agents/agent-1/memories"),
        format!("workspaces/{tenant}/agents/%2e%2e/memories"),
        format!("workspaces/{tenant}%2Fagents%2Fagent-1%2Fmemories"),
        format!("workspaces/{tenant}/agents/agent-1/memories\0"),
        format!("workspaces/{tenant}\0/agents/agent-1/memories"),
        format!("workspaces//agents/agent-1/memories"),
        format!("workspaces/{tenant}/agents//memories"),
        format!("{ok}/"),
        format!("/{ok}"),
        format!("{ok}{}", "x".repeat(513 - ok.len())),
        format!("w\u{043E}rkspaces/{tenant}/agents/agent-1/memories"),
        format!("workspaces\u{FF0F}{tenant}/agents/agent-1/memories"),
        format!("mem://workspaces/{tenant}/agents/agent-1/memories"),
        format!("s3://{ok}"),
        format!(" {ok}"),
        format!("{ok} "),
        format!("workspaces/{tenant} /agents/agent-1/memories"),
        format!("workspaces/{tenant}/agents/agent 1/memories"),
        format!("workspaces/{tenant}/agents/agent-1/memories\n"),
        format!("workspaces\\{tenant}\\agents\\agent-1\\memories"),
        format!("Workspaces/{tenant}/agents/agent-1/memories"),
        format!("workspaces/{tenant}/agents/agent-1"),
        format!("workspaces/{tenant}/agents/agent-1/memories/extra"),
        String::new(),
        "agent-1".into(),
    ]
}

pub async fn malformed_refs_return_nothing(store: Arc<dyn EntryStore>) {
    let (t, r) = fresh_ref("bad");
    let e = entry(&r, 1, "stored", &[]);
    put_one(&*store, &e).await;
    let (reader, _) = reader(store, T0 + 10);
    let scope = TenantScope::new(t.clone());
    let control = list_page(&reader, &scope, &r.to_string()).await;
    assert_eq!(control.entries.len(), 1, "positive control");
    for bad in malformed_refs(t.as_str()) {
        let page = list_page(&reader, &scope, &bad).await;
        assert!(page.entries.is_empty(), "list of malformed ref {bad:?}");
        let got = get_entry(&reader, &scope, &bad, &e.entry.id).await;
        assert_eq!(got, None, "get of malformed ref {bad:?}");
    }
    for bad_id in ["", "../x", "a/b", "%2e", "\0"] {
        assert_eq!(
            get_entry(&reader, &scope, &r.to_string(), bad_id).await,
            None
        );
    }
}

pub async fn expired_entries_never_surface(store: Arc<dyn EntryStore>) {
    let (t, r) = fresh_ref("ttl");
    let expires = T0 + 5_000;
    let mut e = entry(&r, 1, "short-lived", &["ttl"]);
    e.entry.expires_at = Some(Timestamp::from_millis(expires));
    let keeper = entry(&r, 2, "long-lived", &["ttl"]);
    put_all(&*store, &[e.clone(), keeper.clone()]).await;
    let (reader, clock) = reader(store, expires - 1);
    let scope = TenantScope::new(t);
    let rs = r.to_string();
    // One millisecond before expiry: visible (positive control).
    assert_eq!(list_all(&reader, &scope, &rs, 10).await.len(), 2);
    assert!(get_entry(&reader, &scope, &rs, &e.entry.id).await.is_some());
    // Expired one millisecond ago: gone from list and get, the other entry still there.
    clock.set(Timestamp::from_millis(expires + 1));
    let live = list_all(&reader, &scope, &rs, 10).await;
    assert_eq!(live, vec![keeper.entry.clone()]);
    assert_eq!(get_entry(&reader, &scope, &rs, &e.entry.id).await, None);
    // Exactly at expiresAt it is already past.
    clock.set(Timestamp::from_millis(expires));
    assert_eq!(get_entry(&reader, &scope, &rs, &e.entry.id).await, None);
}

pub async fn pages_are_newest_first_and_complete(store: Arc<dyn EntryStore>) {
    let (t, r) = fresh_ref("page");
    let entries: Vec<StoredEntry> = (0..23)
        .map(|n| {
            entry(
                &r,
                n,
                &format!("fact {n}"),
                if n % 3 == 0 { &["three"] } else { &["other"] },
            )
        })
        .collect();
    store.put_entries(&entries).await.expect("put");
    let (reader, _) = reader(store.clone(), T0 + 1_000);
    let scope = TenantScope::new(t);
    let all = list_all(&reader, &scope, &r.to_string(), 5).await;
    let mut expected: Vec<MemoryEntry> = entries.iter().map(|e| e.entry.clone()).collect();
    expected.reverse();
    assert_eq!(
        all, expected,
        "all pages together: every entry once, newest first"
    );
    let tagged = reader
        .list(
            &scope,
            &r.to_string(),
            &page_request(100, tags(&["three"], &[]), None),
        )
        .await
        .expect("list");
    let want: Vec<MemoryEntry> = expected
        .iter()
        .filter(|e| e.tags == ["three"])
        .cloned()
        .collect();
    assert_eq!(tagged.entries, want);
    assert_eq!(want.len(), 8);
    // A direct store page respects its item limit.
    let page = first_page(store.as_ref(), &r, 4).await;
    assert_eq!(page.entries.len(), 4);
    assert_eq!(page.next_after.as_deref(), Some(expected[3].id.as_str()));
}

pub fn tags(all: &[&str], any: &[&str]) -> TagFilter {
    let owned = |t: &[&str]| t.iter().map(|s| (*s).to_owned()).collect();
    TagFilter::new(owned(all), owned(any)).unwrap_or_else(|e| panic!("test filter: {e}"))
}

/// A list request: one page of at most `limit` entries selected by `tags`, after `cursor`.
fn page_request(limit: u32, tags: TagFilter, cursor: Option<String>) -> ListOptions {
    ListOptions {
        limit: Some(limit),
        tags,
        cursor,
    }
}

/// The entries of `all` (oldest first, as written) that `filter` selects, newest first.
fn selected(all: &[StoredEntry], filter: &TagFilter) -> Vec<MemoryEntry> {
    all.iter()
        .rev()
        .filter(|e| filter.matches(&e.entry.tags))
        .map(|e| e.entry.clone())
        .collect()
}

pub async fn tag_lists_fill_pages_and_combine_filters(store: Arc<dyn EntryStore>) {
    let (t, r) = fresh_ref("tags");
    // 60 entries: `a` on multiples of 2, `b` of 3, `c` of 5, `rare` on two, the rest untagged;
    // one `a,b` entry expired.
    let entries: Vec<StoredEntry> = (1..=60u64)
        .map(|n| {
            let mut tags = Vec::new();
            for (k, tag) in [(2, "a"), (3, "b"), (5, "c")] {
                if n % k == 0 {
                    tags.push(tag);
                }
            }
            if n == 7 || n == 59 {
                tags.push("rare");
            }
            let mut e = entry(&r, n, &format!("fact {n}"), &tags);
            if n == 42 {
                e.entry.expires_at = Some(Timestamp::from_millis(T0 + 500));
            }
            e
        })
        .collect();
    for chunk in entries.chunks(20) {
        store.put_entries(chunk).await.expect("put");
    }
    let live: Vec<StoredEntry> = entries
        .iter()
        .filter(|e| e.entry.id != entries[41].entry.id)
        .cloned()
        .collect();
    let (reader, _) = reader(store.clone(), T0 + 1_000);
    let scope = TenantScope::new(t);
    let raw = r.to_string();
    for (filter, limit) in [
        (tags(&["a"], &[]), 4),
        (tags(&["rare"], &[]), 1),
        (tags(&["rare"], &[]), 50),
        (tags(&["a", "b"], &[]), 2),
        (tags(&["a", "b", "c"], &[]), 1),
        (tags(&[], &["b", "c"]), 7),
        (tags(&[], &["rare", "c"]), 3),
        (tags(&["a"], &["b", "c"]), 5),
        (tags(&["nobody"], &[]), 10),
        (tags(&["a", "nobody"], &[]), 10),
    ] {
        let want = selected(&live, &filter);
        let got = list_filtered(&reader, &scope, &raw, limit, &filter).await;
        assert_eq!(got, want, "{filter:?} in pages of {limit}");
    }
    // One full page, exactly `limit` entries, when more match than fit.
    let page = reader
        .list(&scope, &raw, &page_request(7, tags(&["a"], &[]), None))
        .await
        .expect("list");
    assert_eq!(page.entries.len(), 7);
    assert!(page.next_cursor.is_some());
    // The cursor is bound to the filter it was minted for.
    let other = reader
        .list(
            &scope,
            &raw,
            &page_request(7, tags(&["b"], &[]), page.next_cursor.clone()),
        )
        .await;
    assert_eq!(other, Err(memory_core::CoreError::BadCursor));
}

pub async fn tag_lists_follow_every_delete_path(store: Arc<dyn EntryStore>) {
    let (t, r) = fresh_ref("tagdel");
    let entries: Vec<StoredEntry> = (1..=6u64)
        .map(|n| entry(&r, n, &format!("fact {n}"), &["x", "y"]))
        .collect();
    store.put_entries(&entries).await.expect("put");
    let (reader, _) = reader(store.clone(), T0 + 1_000);
    let scope = TenantScope::new(t);
    let raw = r.to_string();
    // delete, delete_many, and a rewrite that replaces two entries with one merged entry.
    assert!(store.delete(&entries[5].key()).await.expect("delete"));
    assert_eq!(
        store
            .delete_many(&[entries[4].key()])
            .await
            .expect("delete many"),
        1
    );
    let mut merged = entry(&r, 7, "merged", &["x", "z"]);
    merged.tier = Tier::LongTerm;
    merged.provenance = vec![entries[0].entry.id.clone(), entries[1].entry.id.clone()];
    store
        .replace(
            std::slice::from_ref(&merged),
            &[entries[0].clone(), entries[1].clone()],
        )
        .await
        .expect("replace");
    let ids = |list: Vec<MemoryEntry>| list.into_iter().map(|e| e.id).collect::<Vec<_>>();
    for (filter, want) in [
        (tags(&["x"], &[]), vec![&merged, &entries[3], &entries[2]]),
        (tags(&["y"], &[]), vec![&entries[3], &entries[2]]),
        (tags(&["x", "y"], &[]), vec![&entries[3], &entries[2]]),
        (
            tags(&[], &["y", "z"]),
            vec![&merged, &entries[3], &entries[2]],
        ),
        (tags(&["z"], &[]), vec![&merged]),
    ] {
        let got = ids(list_filtered(&reader, &scope, &raw, 2, &filter).await);
        let want: Vec<String> = want.iter().map(|e| e.entry.id.clone()).collect();
        assert_eq!(got, want, "{filter:?}");
    }
}

pub async fn search_ranks_live_entries_of_the_callers_ref(store: Arc<dyn EntryStore>) {
    use memory_core::search::SearchOptions;
    let (t, r) = fresh_ref("search");
    let texts = [
        (
            "Customer asked about a refund for order 1042",
            &["billing"][..],
        ),
        ("Customer prefers email follow-up", &["preference"][..]),
        ("The zephyr contract renews in March", &["contract"][..]),
        ("Rendez-vous au café à Montréal", &[][..]),
        ("会议在东京举行", &["travel"][..]),
        (
            "Refunds are processed within 5 days",
            &["billing", "policy"][..],
        ),
    ];
    let mut entries: Vec<StoredEntry> = texts
        .iter()
        .enumerate()
        .map(|(n, (text, tags))| entry(&r, n as u64 + 1, text, tags))
        .collect();
    // One expired entry that would be the best match.
    let mut expired = entry(&r, 7, "zephyr zephyr zephyr", &[]);
    expired.entry.expires_at = Some(Timestamp::from_millis(T0 + 500));
    entries.push(expired);
    store.put_entries(&entries).await.expect("put");
    let (reader, _) = reader(store.clone(), T0 + 1_000);
    let scope = TenantScope::new(t.clone());
    let raw = r.to_string();
    let search = |q: &str, tags: TagFilter| {
        let reader = reader.clone();
        let scope = scope.clone();
        let raw = raw.clone();
        let options = SearchOptions::new(q, tags, Some(10), true).expect("options");
        async move {
            reader
                .search(&scope, &raw, &options)
                .await
                .expect("search")
                .results
        }
    };
    let ids = |hits: &[memory_core::search::SearchHit]| {
        hits.iter().map(|h| h.entry.id.clone()).collect::<Vec<_>>()
    };
    // A rare term, and never the expired entry.
    let zephyr = search("zephyr renewal", TagFilter::default()).await;
    assert_eq!(ids(&zephyr), [entries[2].entry.id.clone()]);
    // Stemming joins "refunds" and "refund"; scores are positive and ordered.
    let refund = search("refunds", TagFilter::default()).await;
    assert_eq!(refund.len(), 2, "{:?}", ids(&refund));
    assert!(refund[0].score >= refund[1].score && refund[1].score > 0.0);
    // Accents and CJK.
    assert_eq!(
        ids(&search("cafe montreal", TagFilter::default()).await),
        [entries[3].entry.id.clone()]
    );
    assert_eq!(
        ids(&search("东京", TagFilter::default()).await),
        [entries[4].entry.id.clone()]
    );
    // Tags restrict what is ranked.
    let policy = search("refund", tags(&["policy"], &[])).await;
    assert_eq!(ids(&policy), [entries[5].entry.id.clone()]);
    // Deterministic: the same query twice gives the same order and scores.
    assert_eq!(
        search("customer refund", TagFilter::default()).await,
        search("customer refund", TagFilter::default()).await
    );
    // A deleted entry is gone from the next search.
    assert!(store.delete(&entries[2].key()).await.expect("delete"));
    assert!(search("zephyr", TagFilter::default()).await.is_empty());
    // Another tenant, or a malformed ref, finds nothing.
    let other = TenantScope::new(fresh_tenant("intruder"));
    let options =
        SearchOptions::new("customer", TagFilter::default(), None, true).expect("options");
    for (scope, raw) in [(&other, raw.as_str()), (&scope, "workspaces/../memories")] {
        let got = reader.search(scope, raw, &options).await.expect("search");
        assert!(got.results.is_empty());
    }
    assert!(SearchOptions::new("  ", TagFilter::default(), None, true).is_err());
    assert!(SearchOptions::new(&"x".repeat(1025), TagFilter::default(), None, true).is_err());
}

/// Vectors round-trip bit for bit through the store, and semantic / hybrid search rank by them:
/// only vectors of the configured model are compared, an entry without one is still found by
/// hybrid (through its words), and a host without an embedder refuses the modes.
pub async fn semantic_search_ranks_by_stored_vectors(store: Arc<dyn EntryStore>) {
    use crate::in_memory::{WordHashEmbedder, WORD_HASH_MODEL};
    use memory_core::model::Embedding;
    use memory_core::ports::Embedder;
    use memory_core::search::{SearchMode, SearchOptions};
    let (t, r) = fresh_ref("semantic");
    let embedder = Arc::new(WordHashEmbedder::default());
    let texts = [
        "invoice overdue payment reminder",
        "the cat sleeps on the sofa",
        "payment of the invoice arrived",
        "invoice",
    ];
    let mut entries = Vec::new();
    for (n, text) in texts.iter().enumerate() {
        let mut e = entry(&r, n as u64 + 1, text, &[]);
        e.embedding = Some(embedder.embed(text).await.expect("embed"));
        entries.push(e);
    }
    // The last entry's vector is of another model: never compared.
    entries[3].embedding = Some(Embedding {
        model: "another-model".into(),
        vector: vec![1.0; 64],
    });
    // An entry without a vector (written before the embedder was configured).
    entries.push(entry(&r, 5, "invoice copy requested", &[]));
    // An exact vector with awkward bits (subnormal, negative zero) round-trips as stored.
    entries[1].embedding = Some(Embedding {
        model: WORD_HASH_MODEL.into(),
        vector: vec![f32::MIN_POSITIVE / 2.0, -0.0, 1.5e-7, 3.25],
    });
    store.put_entries(&entries).await.expect("put");
    for e in &entries {
        let got = store.get(&e.key()).await.expect("get").expect("stored");
        assert_eq!(
            got.embedding, e.embedding,
            "vector of {} round-trips",
            e.entry.id
        );
        assert_eq!(got.revision(), e.revision());
    }
    let (plain, _) = reader(store.clone(), T0 + 1_000);
    let scope = TenantScope::new(t.clone());
    let raw = r.to_string();
    let options = |mode| {
        SearchOptions::new("invoice payment", TagFilter::default(), Some(10), true)
            .expect("options")
            .with_mode(mode)
    };
    let refused = plain
        .search(&scope, &raw, &options(SearchMode::Semantic))
        .await
        .expect_err("no embedder, no semantic search");
    assert!(refused.to_string().contains("mode"), "{refused}");
    let with = plain.clone().with_embedder(Some(embedder.clone()));
    let ids = |hits: &[memory_core::search::SearchHit]| {
        hits.iter().map(|h| h.entry.id.clone()).collect::<Vec<_>>()
    };
    let semantic = with
        .search(&scope, &raw, &options(SearchMode::Semantic))
        .await
        .expect("semantic");
    // One entry of another model's vector and one without: the answer counts both.
    assert_eq!(semantic.unembedded, Some(2));
    let semantic = semantic.results;
    let semantic_ids = ids(&semantic);
    // Both hold every query term: two versions of one answer, and the later written one goes
    // first (docs/search.md "Ranked text search", newer versions first), though the earlier
    // one's vector is the closer.
    assert_eq!(semantic_ids[0], entries[2].entry.id, "{semantic_ids:?}");
    assert_eq!(semantic_ids[1], entries[0].entry.id, "{semantic_ids:?}");
    assert!(
        !semantic_ids.contains(&entries[3].entry.id),
        "another model's vector"
    );
    assert!(!semantic_ids.contains(&entries[4].entry.id), "no vector");
    assert!(semantic.windows(2).all(|w| w[0].score >= w[1].score));
    let hybrid = with
        .search(&scope, &raw, &options(SearchMode::Hybrid))
        .await
        .expect("hybrid")
        .results;
    let hybrid_ids = ids(&hybrid);
    assert!(
        hybrid_ids.contains(&entries[4].entry.id),
        "found by its words"
    );
    assert!(
        hybrid_ids.contains(&entries[3].entry.id),
        "found by its words"
    );
    assert_eq!(
        hybrid_ids[..2],
        semantic_ids[..2],
        "both rankings agree on the top two"
    );
    // Deterministic, and CTI-1 holds for the new modes too.
    let again = with
        .search(&scope, &raw, &options(SearchMode::Hybrid))
        .await;
    assert_eq!(again.expect("hybrid").results, hybrid);
    let other = TenantScope::new(fresh_tenant("intruder"));
    let foreign = with
        .search(&other, &raw, &options(SearchMode::Hybrid))
        .await;
    assert!(foreign.expect("foreign").results.is_empty());
    // The query was embedded once per semantic/hybrid search (and never for a refused one).
    assert_eq!(embedder.calls.get("embed"), texts.len() as u64 + 3);
}

/// The embed pass's write (docs/search.md "Semantic search"): a vector lands only on the entry
/// as it was read, never recreates a deleted one, never replaces a vector of the same model, and
/// leaves the entry itself (revision, postings) as it was.
pub async fn set_embedding_is_conditional(store: Arc<dyn EntryStore>) {
    use memory_core::model::Embedding;
    let (_, r) = fresh_ref("setvec");
    let vector = |model: &str, x: f32| Embedding {
        model: model.into(),
        vector: vec![x, -0.0, 1.5e-7, 3.25],
    };
    let plain = entry(&r, 1, "no vector yet", &["a"]);
    let other = {
        let mut e = entry(&r, 2, "another model's vector", &[]);
        e.embedding = Some(vector("model-old", 9.0));
        e
    };
    let gone = entry(&r, 3, "deleted before its vector came", &[]);
    put_all(&*store, &[plain.clone(), other.clone(), gone.clone()]).await;
    // Whether `set_embedding` of `model`'s vector `x` on `read` wrote anything.
    let set = |read: &StoredEntry, model: &str, x: f32| {
        let (store, read, vector) = (store.clone(), read.clone(), vector(model, x));
        async move { store.set_embedding(&read, &vector).await.expect("set") }
    };
    let stored_vector = |key: EntryKey| {
        let store = store.clone();
        async move {
            let got = store.get(&key).await.expect("get").expect("there");
            got.embedding
        }
    };
    assert!(set(&plain, "model-a", 1.0).await);
    let got = store.get(&plain.key()).await.expect("get").expect("there");
    assert_eq!(got.embedding, Some(vector("model-a", 1.0)));
    assert_eq!(got.revision(), plain.revision(), "the entry is unchanged");
    // A second write of the same model (a duplicate pass) changes nothing.
    assert!(!set(&plain, "model-a", 2.0).await);
    assert_eq!(
        stored_vector(plain.key()).await,
        Some(vector("model-a", 1.0))
    );
    // Another model's vector is replaced by the configured one.
    assert!(set(&other, "model-a", 3.0).await);
    // A deleted entry is not recreated.
    assert!(store.delete(&gone.key()).await.expect("delete"));
    assert!(!set(&gone, "model-a", 4.0).await);
    assert_eq!(store.get(&gone.key()).await.expect("get"), None);
    // An entry read at another revision is not given that content's vector.
    let mut stale = other.clone();
    stale.entry.content = "what it said before".into();
    assert!(!set(&stale, "model-b", 5.0).await);
    assert_eq!(
        stored_vector(other.key()).await,
        Some(vector("model-a", 3.0))
    );
    // Tag lists still find the entry (its postings were left alone).
    let ids = store
        .tag_postings(&r, "a", None, 10)
        .await
        .expect("postings");
    assert_eq!(ids, vec![plain.entry.id.clone()]);
}

/// The search index's tail (docs/search.md "The index"): every mutation leaves a content-free
/// change record naming the ids it touched, in the same write; a write that did not happen
/// leaves none; the records of one ref are not another's; dropped records are gone.
pub async fn every_mutation_leaves_a_change_record(store: Arc<dyn EntryStore>) {
    use memory_core::model::Embedding;
    use std::collections::BTreeSet;
    let (t, r) = fresh_ref("chg");
    let other = memory_ref(&t, "agent-2");
    let touched = |changes: &[memory_core::ports::Change]| -> Vec<BTreeSet<String>> {
        changes
            .iter()
            .map(|c| c.ids.iter().cloned().collect())
            .collect()
    };
    let ids =
        |v: &[&StoredEntry]| -> BTreeSet<String> { v.iter().map(|e| e.entry.id.clone()).collect() };
    let a = entry(&r, 1, "first", &["x"]);
    let b = entry(&r, 2, "second", &[]);
    let c = entry(&r, 3, "third", &[]);
    put_all(&*store, &[a.clone(), b.clone(), c.clone()]).await;
    put_all(&*store, &[entry(&other, 9, "elsewhere", &[])]).await;
    let after_put = store.changes(&r).await.expect("changes");
    assert_eq!(touched(&after_put), vec![ids(&[&a, &b, &c])]);
    // A put that fails its condition writes nothing, its change record included.
    let mut taken = a.clone();
    taken.entry.content = "another text under a taken id".into();
    assert!(store.put_entries(&[taken]).await.is_err());
    assert_eq!(store.changes(&r).await.expect("changes").len(), 1);
    assert!(store.delete(&b.key()).await.expect("delete"));
    assert!(!store.delete(&b.key()).await.expect("delete again"));
    let vector = Embedding {
        model: "model-a".into(),
        vector: vec![1.0, 0.5],
    };
    assert!(store.set_embedding(&c, &vector).await.expect("vector"));
    let merged = entry(&r, 4, "first and third", &[]);
    store
        .replace(std::slice::from_ref(&merged), std::slice::from_ref(&a))
        .await
        .expect("replace");
    // A replace that loses its condition leaves no record.
    assert!(store
        .replace(&[entry(&r, 5, "never", &[])], std::slice::from_ref(&a))
        .await
        .is_err());
    assert_eq!(store.delete_many(&[c.key()]).await.expect("delete many"), 1);
    let all = store.changes(&r).await.expect("changes");
    assert_eq!(
        touched(&all),
        vec![
            ids(&[&a, &b, &c]),
            ids(&[&b]),
            ids(&[&c]),
            ids(&[&merged, &a]),
            ids(&[&c]),
        ],
        "one record per mutation, oldest first"
    );
    let seqs: BTreeSet<&String> = all.iter().map(|c| &c.seq).collect();
    assert_eq!(seqs.len(), all.len(), "sequence names are unique");
    // The other ref's records are its own.
    assert_eq!(store.changes(&other).await.expect("other").len(), 1);
    // Dropping some leaves the rest.
    let dropped: Vec<String> = all[..2].iter().map(|c| c.seq.clone()).collect();
    store.drop_changes(&r, &dropped).await.expect("drop");
    let left = store.changes(&r).await.expect("changes");
    assert_eq!(left, all[2..].to_vec());
}

pub async fn cursor_is_bound_to_tenant_and_ref(store: Arc<dyn EntryStore>) {
    let (t, r) = fresh_ref("cur");
    let r2 = memory_ref(&t, "agent-2");
    let entries: Vec<StoredEntry> = (0..4).map(|n| entry(&r, n, "x", &[])).collect();
    store.put_entries(&entries).await.expect("put");
    let (reader, _) = reader(store, T0 + 1_000);
    let scope = TenantScope::new(t);
    let first = reader
        .list(
            &scope,
            &r.to_string(),
            &page_request(2, TagFilter::default(), None),
        )
        .await
        .expect("list");
    let cursor = first.next_cursor.expect("a second page exists");
    let second = reader
        .list(
            &scope,
            &r.to_string(),
            &page_request(2, TagFilter::default(), Some(cursor.clone())),
        )
        .await
        .expect("list");
    assert_eq!(
        second.entries.len(),
        2,
        "positive control: the cursor works for its own ref"
    );
    let foreign = reader
        .list(
            &scope,
            &r2.to_string(),
            &page_request(2, TagFilter::default(), Some(cursor)),
        )
        .await;
    assert_eq!(foreign, Err(memory_core::CoreError::BadCursor));
}

pub async fn puts_are_all_or_nothing(store: Arc<dyn EntryStore>) {
    let (_, r) = fresh_ref("atomic");
    let first = entry(&r, 1, "first", &[]);
    put_one(&*store, &first).await;
    let fresh = entry(&r, 2, "fresh", &[]);
    let mut clash = entry(&r, 3, "clash", &[]);
    clash.entry.id = first.entry.id.clone();
    let result = store.put_entries(&[fresh.clone(), clash]).await;
    assert!(
        matches!(result, Err(StoreError::Conflict { .. })),
        "{result:?}"
    );
    assert_eq!(
        store.get(&fresh.key()).await.expect("get"),
        None,
        "nothing of a failed put is stored"
    );
    assert_eq!(
        store.get(&first.key()).await.expect("get"),
        Some(first),
        "the existing entry is not overwritten"
    );
}

pub async fn delete_and_forget_by_subject(store: Arc<dyn EntryStore>) {
    let a = fresh_tenant("subj-a");
    let b = fresh_tenant("subj-b");
    let (ra1, ra2, rb) = (
        memory_ref(&a, "agent-1"),
        memory_ref(&a, "agent-2"),
        memory_ref(&b, "agent-1"),
    );
    let subject_a = SubjectKey::derive(&a, "customer-42");
    let subject_b = SubjectKey::derive(&b, "customer-42");
    let mut e1 = entry(&ra1, 1, "about 42", &[]);
    e1.subject = Some(subject_a.clone());
    let mut e2 = entry(&ra2, 2, "also about 42", &[]);
    e2.subject = Some(subject_a.clone());
    let other = entry(&ra1, 3, "not about 42", &[]);
    let mut eb = entry(&rb, 4, "tenant b about 42", &[]);
    eb.subject = Some(subject_b.clone());
    put_all(&*store, &[e1.clone(), other.clone()]).await;
    put_all(&*store, &[e2.clone()]).await;
    put_one(&*store, &eb).await;

    let mut found = store.find_by_subject(&subject_a).await.expect("find");
    found.sort();
    let mut want = vec![e1.key(), e2.key()];
    want.sort();
    assert_eq!(found, want, "every ref of the tenant, nothing else");
    // Tenant b's digest asked for inside tenant a names nothing there.
    let b_digest_in_a = SubjectKey::from_stored(&a, subject_b.as_str()).expect("digest");
    assert_eq!(
        store.find_by_subject(&b_digest_in_a).await.expect("find"),
        Vec::<EntryKey>::new()
    );
    assert_eq!(store.delete_many(&found).await.expect("delete"), 2);
    assert_eq!(
        store.delete_many(&found).await.expect("delete"),
        0,
        "idempotent"
    );
    assert_eq!(store.get(&e1.key()).await.expect("get"), None);
    assert_eq!(
        store.get(&other.key()).await.expect("get"),
        Some(other.clone())
    );
    assert_eq!(
        store.get(&eb.key()).await.expect("get"),
        Some(eb.clone()),
        "other tenant untouched"
    );
    assert_eq!(
        store.find_by_subject(&subject_b).await.expect("find"),
        vec![eb.key()]
    );

    assert!(store.delete(&other.key()).await.expect("delete"));
    assert!(!store.delete(&other.key()).await.expect("delete"));
}

pub async fn replace_is_conditional_and_atomic(store: Arc<dyn EntryStore>) {
    let (_, r) = fresh_ref("replace");
    let (a, b) = (entry(&r, 1, "dup", &[]), entry(&r, 2, "dup", &[]));
    put_all(&*store, &[a.clone(), b.clone()]).await;
    let mut merged = entry(&r, 3, "dup", &["corroborated:2"]);
    merged.tier = Tier::LongTerm;
    merged.provenance = vec![a.entry.id.clone(), b.entry.id.clone()];
    // A stale revision for b (the caller read it with other tags): the whole rewrite must fail
    // and change nothing.
    let mut b_as_read = b.clone();
    b_as_read.entry.tags.push("edited-since".into());
    let stale = store
        .replace(std::slice::from_ref(&merged), &[a.clone(), b_as_read])
        .await;
    assert!(
        matches!(stale, Err(StoreError::Conflict { .. })),
        "{stale:?}"
    );
    assert_eq!(store.get(&a.key()).await.expect("get"), Some(a.clone()));
    assert_eq!(store.get(&merged.key()).await.expect("get"), None);
    // Current revisions: merged in, both sources out, in one step.
    store
        .replace(std::slice::from_ref(&merged), &[a.clone(), b.clone()])
        .await
        .expect("replace");
    assert_eq!(
        store.get(&merged.key()).await.expect("get"),
        Some(merged.clone())
    );
    assert_eq!(store.get(&a.key()).await.expect("get"), None);
    assert_eq!(store.get(&b.key()).await.expect("get"), None);
    // A retry of the same rewrite conflicts instead of duplicating.
    let again = store
        .replace(std::slice::from_ref(&merged), std::slice::from_ref(&a))
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "{again:?}"
    );
}

pub async fn work_markers_track_pending_refs(store: Arc<dyn EntryStore>) {
    use memory_core::ports::{pending_shard, PassKind};
    let (_, r) = fresh_ref("work");
    let shard = pending_shard(&r);
    let before = store
        .marker_state(&r, PassKind::Dream)
        .await
        .expect("state");
    assert_eq!((before.version, before.pending), (None, false));
    put_all(&*store, &[entry(&r, 1, "x", &[])]).await;
    let state = store
        .marker_state(&r, PassKind::Dream)
        .await
        .expect("state");
    assert!(state.pending && state.version.is_some());
    assert!(
        !store
            .marker_state(&r, PassKind::Consolidate)
            .await
            .expect("state")
            .pending,
        "a transactional write makes only a dream pending"
    );
    assert!(store
        .pending_refs(PassKind::Dream, shard)
        .await
        .expect("pending")
        .contains(&r));
    // A write while a pass runs (it began after the first write) keeps the ref pending, but
    // the watermark moves.
    let state = store.begin_pass(&r, PassKind::Dream).await.expect("begin");
    assert!(state.running && state.pending);
    put_all(&*store, &[entry(&r, 2, "y", &[])]).await;
    let cleared = store
        .finish_pass(
            &r,
            PassKind::Dream,
            state.version,
            Some(Timestamp::from_millis(T0 + 1)),
        )
        .await
        .expect("finish");
    assert!(!cleared);
    let after = store
        .marker_state(&r, PassKind::Dream)
        .await
        .expect("state");
    assert!(after.pending);
    assert_eq!(after.watermark, Some(Timestamp::from_millis(T0 + 1)));
    // With the current version it leaves the index.
    assert!(store
        .finish_pass(
            &r,
            PassKind::Dream,
            after.version,
            Some(Timestamp::from_millis(T0 + 2))
        )
        .await
        .expect("finish"));
    assert!(!store
        .pending_refs(PassKind::Dream, shard)
        .await
        .expect("pending")
        .contains(&r));
    let done = store
        .marker_state(&r, PassKind::Dream)
        .await
        .expect("state");
    assert_eq!(
        (done.pending, done.watermark),
        (false, Some(Timestamp::from_millis(T0 + 2)))
    );
    let mut long = entry(&r, 3, "z", &[]);
    long.tier = Tier::LongTerm;
    put_all(&*store, &[long]).await;
    assert!(store
        .pending_refs(PassKind::Consolidate, shard)
        .await
        .expect("pending")
        .contains(&r));
}

pub async fn archive_put_if_absent_is_immutable(archive: Arc<dyn ArchiveStore>) {
    let t = fresh_tenant("arch");
    let key = ObjectKey::new(&t, "archives/agent-1/abc.json").expect("key");
    let first = archive
        .put_if_absent(ObjectPut::json(&key, ObjectKind::Archive, b"one".to_vec()))
        .await
        .expect("put");
    assert_eq!(first, PutOutcome::Created);
    let second = archive
        .put_if_absent(ObjectPut::json(&key, ObjectKind::Archive, b"two".to_vec()))
        .await
        .expect("put");
    assert_eq!(second, PutOutcome::AlreadyExists);
    assert_eq!(
        archive.get(&key).await.expect("get").map(|o| o.body),
        Some(b"one".to_vec())
    );
}

pub async fn archive_compare_and_swap(archive: Arc<dyn ArchiveStore>) {
    let t = fresh_tenant("cas");
    let key = ObjectKey::new(&t, "index/agent-1/MEMORY-INDEX.json").expect("key");
    let etag1 = archive
        .put_expecting(
            ObjectPut::json(&key, ObjectKind::Index, b"v1".to_vec()),
            Expect::Absent,
        )
        .await
        .expect("create");
    let again = archive
        .put_expecting(
            ObjectPut::json(&key, ObjectKind::Index, b"v1b".to_vec()),
            Expect::Absent,
        )
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "{again:?}"
    );
    let etag2 = archive
        .put_expecting(
            ObjectPut::json(&key, ObjectKind::Index, b"v2".to_vec()),
            Expect::ETag(etag1.clone()),
        )
        .await
        .expect("swap");
    assert_ne!(etag1, etag2);
    let stale = archive
        .put_expecting(
            ObjectPut::json(&key, ObjectKind::Index, b"v3".to_vec()),
            Expect::ETag(etag1),
        )
        .await;
    assert!(
        matches!(stale, Err(StoreError::Conflict { .. })),
        "{stale:?}"
    );
    let got = archive.get(&key).await.expect("get").expect("exists");
    assert_eq!((got.body, got.etag), (b"v2".to_vec(), etag2));
}

pub async fn archive_listing_is_tenant_scoped(archive: Arc<dyn ArchiveStore>) {
    let a = fresh_tenant("list-a");
    let b = fresh_tenant("list-b");
    let ka = ObjectKey::new(&a, "archives/agent-1/1.json").expect("key");
    let kb = ObjectKey::new(&b, "archives/agent-1/1.json").expect("key");
    for k in [&ka, &kb] {
        archive
            .put_if_absent(ObjectPut::json(k, ObjectKind::Archive, b"{}".to_vec()))
            .await
            .expect("put");
    }
    assert_eq!(
        archive.list(&a, "archives/").await.expect("list"),
        vec![ka.clone()]
    );
    assert_eq!(
        archive.list(&b, "archives/").await.expect("list"),
        vec![kb.clone()]
    );
    archive.delete(&ka).await.expect("delete");
    archive.delete(&ka).await.expect("delete of absent is fine");
    assert_eq!(archive.get(&ka).await.expect("get"), None);
    assert!(archive.get(&kb).await.expect("get").is_some());
    assert!(ObjectKey::new(&a, "../x").is_none());
    assert!(ObjectKey::from_listed(&a, kb.as_str()).is_none());
}

/// Expands to one `#[tokio::test]` per check. `$store` and `$archive` are expressions (usually
/// `fn` calls returning futures) that yield `Arc<dyn EntryStore>` / `Arc<dyn ArchiveStore>`.
/// Writers to one ref do not serialise on its work marker: while the ref is pending and no
/// pass runs, N more puts leave the marker untouched (one marker write per dirty period); once
/// a pass has begun, every put is counted again so the pass cannot clear what it did not read.
pub async fn marker_is_written_once_per_dirty_period(store: Arc<dyn EntryStore>) {
    use memory_core::ports::PassKind;
    let (_, r) = fresh_ref("hot");
    let n = 24u64;
    let mut puts = tokio::task::JoinSet::new();
    for i in 0..n {
        let store = store.clone();
        let e = entry(&r, 100 + i, "concurrent", &[]);
        puts.spawn(async move { store.put_entries(&[e]).await });
    }
    while let Some(result) = puts.join_next().await {
        result
            .expect("task")
            .expect("every concurrent put succeeds");
    }
    let state = store
        .marker_state(&r, PassKind::Dream)
        .await
        .expect("state");
    assert!(state.pending);
    assert_eq!(
        state.version,
        Some(1),
        "{n} concurrent puts in one dirty period touch the marker once"
    );
    let begun = store.begin_pass(&r, PassKind::Dream).await.expect("begin");
    for i in 0..3 {
        put_all(&*store, &[entry(&r, 200 + i, "during the pass", &[])]).await;
    }
    let during = store
        .marker_state(&r, PassKind::Dream)
        .await
        .expect("state");
    assert_eq!(during.version, Some(4), "puts during a pass are counted");
    assert!(!store
        .finish_pass(&r, PassKind::Dream, begun.version, None)
        .await
        .expect("finish"));
    assert!(
        store
            .marker_state(&r, PassKind::Dream)
            .await
            .expect("state")
            .pending
    );
    assert!(store
        .finish_pass(&r, PassKind::Dream, during.version, None)
        .await
        .expect("finish"));
    let idle = store
        .marker_state(&r, PassKind::Dream)
        .await
        .expect("state");
    assert!(
        !idle.pending && !idle.running,
        "a clean finish ends the pass"
    );
    // A new dirty period: the next put marks again, once.
    put_all(&*store, &[entry(&r, 300, "next period", &[])]).await;
    put_all(&*store, &[entry(&r, 301, "next period", &[])]).await;
    assert_eq!(
        store
            .marker_state(&r, PassKind::Dream)
            .await
            .expect("state")
            .version,
        Some(5)
    );
}

/// Idempotency records: claim, in-flight, mismatch, completion in the entries' write, replay,
/// takeover after the lease with the first attempt's instant, release, and the fence on the
/// completing write (an attempt that lost the key writes nothing).
pub async fn idempotency_records(store: Arc<dyn EntryStore>) {
    use memory_core::idempotency::{Claim, Completion, IdempotencyKey, KeyClaim, Verdict};
    let (t, r) = fresh_ref("idem");
    let key = IdempotencyKey::parse(&t, "order-42/retry").expect("key");
    let at = |ms: i64| Timestamp::from_millis(T0 + ms);
    let claim = |attempt: &str, payload: &str, now: i64| KeyClaim {
        key: key.clone(),
        payload: payload.into(),
        attempt: attempt.into(),
        now: at(now),
        lease_until: at(now + 1_000),
        expires_at: at(now + 60_000),
    };
    // One claim of `attempt` with `payload` at `now`, as the store answers it.
    let claimed = |attempt: &str, payload: &str, now: i64| {
        let (store, asked) = (store.clone(), claim(attempt, payload, now));
        async move { store.claim_key(&asked).await.expect("claim") }
    };
    let first = claimed("a1", "p", 0).await;
    assert_eq!(
        first,
        Claim::Acquired {
            first_attempt_at: at(0)
        }
    );
    // The same attempt again (its answer was lost): still its own.
    assert_eq!(
        claimed("a1", "p", 1).await,
        Claim::Acquired {
            first_attempt_at: at(0)
        }
    );
    let Claim::Held(held) = claimed("a2", "p", 10).await else {
        panic!("a live holder keeps the key");
    };
    assert_eq!(held.verdict("p"), Verdict::InFlight);
    assert_eq!(held.verdict("other"), Verdict::Mismatch);
    // After the lease, a retry with the same payload takes over, keeping the first instant.
    assert_eq!(
        claimed("a3", "p", 2_000).await,
        Claim::Acquired {
            first_attempt_at: at(0)
        }
    );
    // ...and the slow first attempt can no longer write.
    let e1 = entry(&r, 1, "keyed", &[]);
    let stale = Completion {
        key: key.clone(),
        attempt: "a1".into(),
        result: "r1".into(),
    };
    assert!(matches!(
        store
            .put_entries_completing(std::slice::from_ref(&e1), Some(&stale))
            .await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.get(&e1.key()).await.expect("get"), None, "fenced out");
    let done = Completion {
        key: key.clone(),
        attempt: "a3".into(),
        result: "r3".into(),
    };
    store
        .put_entries_completing(std::slice::from_ref(&e1), Some(&done))
        .await
        .expect("holder writes");
    assert!(store.get(&e1.key()).await.expect("get").is_some());
    let Claim::Held(finished) = claimed("a4", "p", 3_000).await else {
        panic!("a finished key is held");
    };
    assert_eq!(finished.verdict("p"), Verdict::Replay("r3".into()));
    assert_eq!(finished.verdict("q"), Verdict::Mismatch);
    store
        .complete_key(&done)
        .await
        .expect("recording the same result again is fine");
    // After the window, the key is new again.
    assert!(matches!(
        claimed("a5", "q", 63_000).await,
        Claim::Acquired { .. }
    ));
    // Release gives an unfinished key back; a finished one stays.
    store.release_key(&key, "a5").await.expect("release");
    assert_eq!(
        claimed("a6", "z", 63_001).await,
        Claim::Acquired {
            first_attempt_at: at(63_001)
        }
    );
    // Keys are per tenant.
    let other = IdempotencyKey::parse(&fresh_tenant("idem-b"), "order-42/retry").expect("key");
    assert!(matches!(
        store
            .claim_key(&KeyClaim {
                key: other,
                ..claim("b1", "p", 63_002)
            })
            .await
            .expect("claim"),
        Claim::Acquired { .. }
    ));
    // Delete with a completion: recorded with the delete; absent entries record nothing.
    let dkey = IdempotencyKey::parse(&t, "delete-1").expect("key");
    let dclaim = KeyClaim {
        key: dkey.clone(),
        ..claim("d1", "del", 70_000)
    };
    assert!(matches!(
        store.claim_key(&dclaim).await.expect("claim"),
        Claim::Acquired { .. }
    ));
    let dc = Completion {
        key: dkey.clone(),
        attempt: "d1".into(),
        result: "deleted".into(),
    };
    assert!(store
        .delete_completing(&e1.key(), &dc)
        .await
        .expect("delete"));
    assert_eq!(store.get(&e1.key()).await.expect("get"), None);
    let Claim::Held(drec) = store
        .claim_key(&KeyClaim {
            attempt: "d2".into(),
            ..dclaim.clone()
        })
        .await
        .expect("claim")
    else {
        panic!("held");
    };
    assert_eq!(drec.verdict("del"), Verdict::Replay("deleted".into()));
}

/// Bounded items: an entry derived from 20,000 sources (its ids alone would pass DynamoDB's
/// 400 KB item limit) is stored, read back whole, followed by forget's derived-data search, and
/// deleted with everything it spilled over into.
pub async fn provenance_has_no_item_size_ceiling(store: Arc<dyn EntryStore>) {
    let (_, r) = fresh_ref("prov");
    let mut derived = entry(&r, 1, "summary of many", &[]);
    derived.tier = Tier::LongTerm;
    derived.provenance = (0..20_000u64)
        .map(|i| ulid::Ulid::from_parts(T0 as u64, u128::from(i)).to_string())
        .collect();
    put_one(&*store, &derived).await;
    let back = store
        .get(&derived.key())
        .await
        .expect("get")
        .expect("present");
    assert_eq!(back, derived, "read back whole, same revision");
    let listed = first_page(store.as_ref(), &r, 10).await;
    assert_eq!(
        listed.entries,
        vec![derived.clone()],
        "lists show one entry, whole"
    );
    // Forget's derived-data search sees the last source id too.
    let mut gone = std::collections::BTreeSet::from([derived.provenance[19_999].clone()]);
    let removed = memory_core::forget::forget_derived_entries(
        store.as_ref(),
        &r,
        &mut gone,
        Timestamp::from_millis(T0 + 1),
    )
    .await
    .expect("forget derived");
    assert_eq!(removed, 1);
    assert_eq!(store.get(&derived.key()).await.expect("get"), None);
    // Nothing of it is left behind: a new entry with the same id starts from nothing.
    let mut again = derived.clone();
    again.provenance = vec!["only-one".into()];
    put_one(&*store, &again).await;
    assert_eq!(
        store
            .get(&again.key())
            .await
            .expect("get")
            .map(|e| e.provenance),
        Some(vec!["only-one".to_owned()])
    );
}

/// Forget's tombstones are per ref and read back consistently.
pub async fn tombstones_are_per_ref(store: Arc<dyn EntryStore>) {
    let t = fresh_tenant("tomb");
    let r1 = memory_ref(&t, "agent-1");
    let r2 = memory_ref(&t, "agent-2");
    assert!(store.tombstones(&r1).await.expect("read").is_empty());
    let k = |r: &MemoryRef, id: &str| EntryKey {
        memory_ref: r.clone(),
        id: id.into(),
    };
    store
        .tombstone(
            &[k(&r1, "a"), k(&r1, "b"), k(&r2, "c")],
            Timestamp::from_millis(T0 + 1),
        )
        .await
        .expect("tombstone");
    let got: Vec<String> = store
        .tombstones(&r1)
        .await
        .expect("read")
        .into_iter()
        .collect();
    assert_eq!(got, vec!["a".to_owned(), "b".to_owned()]);
    // Tombstones are not entries: lists never show them.
    let page = first_page(store.as_ref(), &r1, 10).await;
    assert!(page.entries.is_empty() && page.next_after.is_none());
}

#[macro_export]
macro_rules! port_suite {
    (store: $store:expr, archive: $archive:expr) => {
        $crate::port_suite!(@store $store; read_your_writes, cross_tenant_probe_returns_nothing,
            malformed_refs_return_nothing, expired_entries_never_surface,
            pages_are_newest_first_and_complete, cursor_is_bound_to_tenant_and_ref,
            puts_are_all_or_nothing, delete_and_forget_by_subject,
            replace_is_conditional_and_atomic, work_markers_track_pending_refs,
            marker_is_written_once_per_dirty_period, idempotency_records,
            tombstones_are_per_ref, provenance_has_no_item_size_ceiling,
            tag_lists_fill_pages_and_combine_filters, tag_lists_follow_every_delete_path,
            search_ranks_live_entries_of_the_callers_ref,
            semantic_search_ranks_by_stored_vectors, set_embedding_is_conditional,
            every_mutation_leaves_a_change_record);
        $crate::port_suite!(@archive $archive; archive_put_if_absent_is_immutable,
            archive_compare_and_swap, archive_listing_is_tenant_scoped);
    };
    (@store $store:expr; $($name:ident),*) => {
        $(
            #[tokio::test]
            async fn $name() {
                $crate::contract::$name($store.await).await;
            }
        )*
    };
    (@archive $archive:expr; $($name:ident),*) => {
        $(
            #[tokio::test]
            async fn $name() {
                $crate::contract::$name($archive.await).await;
            }
        )*
    };
}

fn commitment_at(
    r: &MemoryRef,
    source: &str,
    due_ms: i64,
    subject: Option<SubjectKey>,
) -> commitment_service::StoredCommitment {
    let inferred = commitments::Inferred {
        condition: commitments::Condition::At { due_ms },
        rule: "time.test",
    };
    commitment_service::StoredCommitment {
        commitment: commitments::Commitment::new(
            r.tenant().as_str(),
            &r.to_string(),
            source,
            &inferred,
            T0,
        ),
        version: 1,
        subject,
        outbox: None,
    }
}

pub async fn commitment_store_contract(store: Arc<dyn commitment_service::CommitmentStore>) {
    use commitment_service::{due_shard, CommitmentKey, Outbox, StoredCommitment};
    let t = fresh_tenant("cmt");
    let other = fresh_tenant("cmt-other");
    let r = memory_ref(&t, "agent-1");
    let subject = SubjectKey::derive(&t, "customer-1");
    let due = commitment_at(&r, "e1", T0 + 1_000, Some(subject.clone()));
    let later = commitment_at(&r, "e2", T0 + 1_000_000, None);
    let foreign = commitment_at(
        &memory_ref(&other, "agent-1"),
        "e1",
        T0 + 1_000,
        Some(SubjectKey::derive(&other, "customer-1")),
    );
    assert_eq!(
        store
            .put_new(&[due.clone(), later.clone(), foreign.clone()])
            .await
            .expect("put"),
        3
    );
    assert_eq!(
        store
            .put_new(std::slice::from_ref(&due))
            .await
            .expect("put again"),
        0,
        "idempotent"
    );
    let key = CommitmentKey {
        memory_ref: r.clone(),
        id: due.commitment.id.clone(),
    };
    assert_eq!(store.get(&key).await.expect("get"), Some(due.clone()));

    let shard = due_shard(&due.commitment.id);
    let read = store
        .due(shard, Timestamp::from_millis(T0 + 1_000))
        .await
        .expect("due");
    assert!(read.keys.contains(&key), "due at its instant");
    assert!(!read.keys.iter().any(|k| k.id == later.commitment.id));
    assert!(read.items_read >= 1);
    let early = store
        .due(shard, Timestamp::from_millis(T0 + 999))
        .await
        .expect("due");
    assert!(!early.keys.contains(&key), "not before");

    // Conditional transition: stale versions lose.
    let fired = StoredCommitment {
        commitment: due
            .commitment
            .apply(commitments::Transition::Fire {
                instant_ms: T0 + 1_000,
            })
            .expect("fire"),
        version: 2,
        outbox: Some(Outbox {
            instant_ms: T0 + 1_000,
            lease_until_ms: T0 + 61_000,
        }),
        ..due.clone()
    };
    store.transition(1, &fired).await.expect("transition");
    let lost = store
        .transition(
            1,
            &StoredCommitment {
                version: 2,
                ..due.clone()
            },
        )
        .await;
    assert!(matches!(lost, Err(StoreError::Conflict { .. })), "{lost:?}");
    assert_eq!(store.get(&key).await.expect("get"), Some(fired.clone()));
    // Whether the due index lists the commitment at T0 + 2s.
    let due_later = || async {
        store
            .due(shard, Timestamp::from_millis(T0 + 2_000))
            .await
            .expect("due")
            .keys
            .contains(&key)
    };
    assert!(due_later().await, "an outbox stays due");
    let done = StoredCommitment {
        version: 3,
        outbox: None,
        ..fired.clone()
    };
    store.transition(2, &done).await.expect("clear");
    assert!(!due_later().await, "fired leaves the index");

    let mut mine: Vec<String> = store
        .for_ref(&r)
        .await
        .expect("for_ref")
        .into_iter()
        .map(|c| c.commitment.id)
        .collect();
    mine.sort();
    let mut want = vec![due.commitment.id.clone(), later.commitment.id.clone()];
    want.sort();
    assert_eq!(mine, want);
    assert_eq!(
        store.find_by_subject(&subject).await.expect("find"),
        vec![key.clone()]
    );
    assert!(store.delete(&key).await.expect("delete"));
    assert!(!store.delete(&key).await.expect("delete"));
    assert_eq!(store.get(&key).await.expect("get"), None);
    let foreign_key = CommitmentKey {
        memory_ref: memory_ref(&other, "agent-1"),
        id: foreign.commitment.id.clone(),
    };
    assert!(
        store.get(&foreign_key).await.expect("get").is_some(),
        "other tenant untouched"
    );
}

/// Expands to a `#[tokio::test]` running the commitment store contract on `$store`.
#[macro_export]
macro_rules! commitment_suite {
    ($store:expr) => {
        #[tokio::test]
        async fn commitment_store_contract() {
            $crate::contract::commitment_store_contract($store.await).await;
        }
    };
}

/// The search index's promise (docs/search.md "The index"), checked the same way over every
/// adapter: an answer from the index names the entries the full scan names, in its order, with
/// the same scores to the bit, and counts the same unembedded entries.
pub fn assert_same_answer(
    what: &str,
    index: &memory_core::search::SearchResults,
    scan: &memory_core::search::SearchResults,
) {
    assert_eq!(
        index.path,
        memory_core::ref_index::SearchPath::Index,
        "{what}: served by the index"
    );
    let ranked = |r: &memory_core::search::SearchResults| {
        r.results
            .iter()
            .map(|h| (h.entry.id.clone(), h.score.to_bits()))
            .collect::<Vec<_>>()
    };
    assert_eq!(ranked(index), ranked(scan), "{what}");
    assert_eq!(index.unembedded, scan.unembedded, "{what}: unembedded");
}

/// `q` searched through `reader` as the search suites ask it: eight hits, `tags`, `mode`.
pub async fn suite_search(
    reader: &MemoryReader,
    scope: &TenantScope,
    raw_ref: &str,
    q: &str,
    tags: &TagFilter,
    mode: memory_core::search::SearchMode,
) -> memory_core::search::SearchResults {
    let options = memory_core::search::SearchOptions::new(q, tags.clone(), Some(8), true)
        .expect("options")
        .with_mode(mode);
    reader
        .search(scope, raw_ref, &options)
        .await
        .expect("search")
}

/// Every mode, filter and query of a suite: the answer through the index is the full scan's
/// ([`assert_same_answer`]), each from a fresh reader (`reader(indexed)`, so nothing decoded
/// by one search serves the next); `check` sees each query with its scan answer.
pub async fn assert_index_parity(
    stage: &str,
    reader: impl Fn(bool) -> MemoryReader,
    scope: &TenantScope,
    raw_ref: &str,
    filters: &[TagFilter],
    queries: &[&str],
    check: impl Fn(&str, &memory_core::search::SearchResults),
) {
    use memory_core::search::SearchMode;
    for mode in [SearchMode::Text, SearchMode::Semantic, SearchMode::Hybrid] {
        for tags in filters {
            for &q in queries {
                let scan = suite_search(&reader(false), scope, raw_ref, q, tags, mode).await;
                let index = suite_search(&reader(true), scope, raw_ref, q, tags, mode).await;
                assert_same_answer(&format!("{stage}: {q} {mode:?} {tags:?}"), &index, &scan);
                check(q, &scan);
            }
        }
    }
}
