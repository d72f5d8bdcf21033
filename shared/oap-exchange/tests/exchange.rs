//! The exchange service through its ports, in memory: what a grantee can and cannot read, and
//! that the receipt log and item chains verify.

use std::sync::Arc;

use memory_core::forget::ForgetScope;
use memory_core::model::{Attribution, MemoryEntry, StoredEntry, SubjectKey, Tier};
use memory_core::ports::{EntryStore, IdSource};
use memory_core::{MemoryRef, TenantId, Timestamp};
use memory_testkit::exchange::{InMemoryBundleStore, InMemoryExchangeStore};
use memory_testkit::in_memory::{
    InMemoryEntryStore, ManualClock, RecordingPublisher, SequentialIds,
};
use oap_exchange::canonical::{hash_of, sha256_hex};
use oap_exchange::receipt::first_broken;
use oap_exchange::{Exchange, ExchangeError, ExchangePorts, GrantRequest, HostKey, QueryRequest};
use oap_exchange::{ExportRequest, ImportRequest};
use serde_json::{json, Value};

const T0: i64 = 1_790_000_000_000;
const DAY: i64 = 86_400_000;
const REF: &str = "workspaces/acme/agents/assistant/memories";

struct World {
    exchange: Exchange,
    bundles: Arc<InMemoryBundleStore>,
    entries: Arc<InMemoryEntryStore>,
    grants: Arc<InMemoryExchangeStore>,
    events: Arc<RecordingPublisher>,
    clock: Arc<ManualClock>,
    ids: Arc<SequentialIds>,
    tenant: TenantId,
}

fn key() -> HostKey {
    HostKey::from_seed("did:web:memory.example", &[9u8; 32]).unwrap()
}

fn world() -> World {
    let entries = Arc::new(InMemoryEntryStore::new());
    let grants = Arc::new(InMemoryExchangeStore::racing());
    let events = Arc::new(RecordingPublisher::new());
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0)));
    let ids = Arc::new(SequentialIds::default());
    let bundles = Arc::new(InMemoryBundleStore::new());
    let redactor = memory_core::writer::registry_from(&[memory_core::writer::SecretInput {
        secret_id: "vault-token".into(),
        value: secrecy::SecretString::from("s3cr3t-vault-token-value"),
    }])
    .unwrap()
    .redactor();
    let exchange = Exchange::new(
        ExchangePorts {
            bundles: bundles.clone(),
            grants: grants.clone(),
            entries: entries.clone(),
            publisher: events.clone(),
            clock: clock.clone(),
            ids: ids.clone(),
        },
        key(),
        Arc::new(redactor),
    )
    .with_quotas(Some(
        entries.clone() as Arc<dyn memory_core::ports::QuotaStore>
    ));
    World {
        exchange,
        bundles,
        entries,
        grants,
        events,
        clock,
        ids,
        tenant: TenantId::parse("acme").unwrap(),
    }
}

impl World {
    async fn write(&self, content: &str, tags: &[&str], subject: Option<&str>) -> String {
        self.write_in(REF, content, tags, subject).await
    }

    async fn write_in(
        &self,
        r: &str,
        content: &str,
        tags: &[&str],
        subject: Option<&str>,
    ) -> String {
        self.clock.advance_millis(1000);
        let now = memory_core::ports::Clock::now(self.clock.as_ref());
        let memory_ref = MemoryRef::parse(r).unwrap();
        let id = self.ids.next_id(now);
        let entry = StoredEntry {
            subject: subject.map(|s| SubjectKey::derive(memory_ref.tenant(), s)),
            memory_ref,
            entry: MemoryEntry {
                id: id.clone(),
                content: content.into(),
                tags: tags.iter().map(|t| (*t).to_owned()).collect(),
                created_at: now,
                expires_at: None,
            },
            tier: Tier::Transactional,
            attribution: Attribution::default(),
            provenance: vec![],
            embedding: None,
        };
        self.entries.put_entries(&[entry]).await.unwrap();
        id
    }

    async fn grant(&self, body: Value) -> Result<Value, ExchangeError> {
        let request: GrantRequest = serde_json::from_value(body).unwrap();
        self.exchange.grant(&self.tenant, request).await
    }

    async fn query(&self, token: &str, body: Value) -> Result<Value, ExchangeError> {
        let request: QueryRequest = serde_json::from_value(body).unwrap();
        self.exchange.query(Some(token), request).await
    }

    async fn log(&self) -> Vec<Value> {
        let page = self.exchange.receipts(&self.tenant, 0, 1000).await.unwrap();
        page["receipts"].as_array().unwrap().clone()
    }
}

fn grant_body(extra: Value) -> Value {
    let mut body = json!({
        "grantee": "did:web:contractor.example",
        "purpose": "Brief the contractor on the website redesign.",
        "scope_id": REF,
        "max_items": 50,
        "expires_at": Timestamp::from_millis(T0 + 30 * DAY).to_rfc3339(),
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn token(granted: &Value) -> String {
    granted["token"].as_str().unwrap().to_owned()
}

fn ids_of(answer: &Value) -> Vec<String> {
    answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["item_id"].as_str().unwrap().to_owned())
        .collect()
}

/// What a grantee checks of an item's chain, from the RFC and the docs alone.
fn chain_verifies(item: &Value) -> bool {
    let links = item["chain"].as_array().unwrap();
    let mut prev = "genesis".to_owned();
    for link in links {
        let hash = match link.get("withheld") {
            Some(_) => link["hash"].as_str().unwrap().to_owned(),
            None => {
                if link["prev"].as_str() != Some(prev.as_str()) {
                    return false;
                }
                hash_of(link)
            }
        };
        prev = hash;
    }
    let last = links.last().unwrap();
    prev == item["chain_hash"].as_str().unwrap()
        && last["content_sha256"].as_str()
            == Some(sha256_hex(item["content"]["text"].as_str().unwrap()).as_str())
}

#[tokio::test]
async fn a_grant_reads_its_filtered_slice_and_everything_verifies() {
    let w = world();
    let kept = w
        .write(
            "The redesign launches in March",
            &["website_redesign"],
            Some("ent_proj_web"),
        )
        .await;
    w.write("Private: the user's salary is 90k", &["personal"], None)
        .await;
    let granted = w
        .grant(grant_body(json!({"filter": {"labels_any": ["website_redesign"], "subject_entity_ids": ["ent_proj_web"]}})))
        .await
        .unwrap();
    assert_eq!(granted["slice_items"], 1);
    let grant = &granted["grant"];
    assert_eq!(grant["granter"], "did:web:memory.example:tenants:acme");
    let mut unsigned = grant.clone();
    let sig = unsigned
        .as_object_mut()
        .unwrap()
        .remove("signature")
        .unwrap();
    assert!(key().verifies(&unsigned, sig.as_str().unwrap()));

    let answer = w
        .query(
            &token(&granted),
            json!({"query": "when does the redesign launch"}),
        )
        .await
        .unwrap();
    assert_eq!(ids_of(&answer), [kept]);
    let item = &answer["items"][0];
    assert_eq!(item["subject_entity_id"], "ent_proj_web");
    assert_eq!(item["kind"], "observation");
    assert!(item.get("embedding").is_none());
    assert!(chain_verifies(item));
    let salary = w
        .query(&token(&granted), json!({"query": "salary"}))
        .await
        .unwrap();
    assert_eq!(ids_of(&salary), Vec::<String>::new());

    let log = w.log().await;
    assert_eq!(log.len(), 3, "grant + two queries");
    assert_eq!(first_broken(&key(), &log), None);
    assert_eq!(log[0]["type"], "memory.grant");
    assert_eq!(log[1]["previous_receipt_hash"], log[0]["self_hash"]);
    assert_eq!(
        w.events
            .of_type(memory_core::events::EventType::GrantIssued)
            .len(),
        1
    );
}

#[tokio::test]
async fn projection_removes_contacts_and_the_chain_says_so() {
    let w = world();
    w.write(
        "Reach the designer at jane.doe@example.com about the mockups",
        &[],
        None,
    )
    .await;
    let granted = w.grant(grant_body(json!({}))).await.unwrap();
    let answer = w
        .query(&token(&granted), json!({"query": "designer mockups"}))
        .await
        .unwrap();
    let item = &answer["items"][0];
    let text = item["content"]["text"].as_str().unwrap();
    assert!(!text.contains("jane.doe@example.com"));
    assert!(text.contains("[contact:email]"));
    let chain = item["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 2);
    assert!(chain[0].get("salt").is_none() && chain[0].get("content_sha256").is_none());
    assert_eq!(chain[1]["op"], "projection");
    assert!(chain_verifies(item));
    // Changing the text breaks the chain.
    let mut forged = item.clone();
    forged["content"]["text"] = json!("Reach the designer at someone else");
    assert!(!chain_verifies(&forged));
}

#[tokio::test]
async fn revoked_expired_tampered_and_foreign_grants_read_nothing() {
    let w = world();
    w.write("The redesign uses the blue palette", &[], None)
        .await;
    let granted = w.grant(grant_body(json!({}))).await.unwrap();
    let t = token(&granted);
    assert_eq!(
        ids_of(&w.query(&t, json!({"query": "palette"})).await.unwrap()).len(),
        1
    );

    // Any changed byte of the token.
    for i in (0..t.len()).step_by(7) {
        let mut b = t.clone().into_bytes();
        b[i] = if b[i] == b'x' { b'y' } else { b'x' };
        let Ok(bad) = String::from_utf8(b) else {
            continue;
        };
        if bad == t {
            continue;
        }
        assert!(
            matches!(
                w.query(&bad, json!({"query": "palette"})).await,
                Err(ExchangeError::GrantRefused(_))
            ),
            "byte {i}"
        );
    }
    // A grant re-signed by another key.
    let other = HostKey::from_seed("did:web:memory.example", &[1u8; 32]).unwrap();
    let forged = other.compact_jws(&granted["grant"]);
    assert!(matches!(
        w.query(&forged, json!({"query": "palette"})).await,
        Err(ExchangeError::GrantRefused(_))
    ));

    // Revocation: at once, once.
    let receipts_before = w.log().await.len();
    w.exchange
        .revoke(&w.tenant, granted["grant"]["grant_id"].as_str().unwrap())
        .await
        .unwrap();
    w.exchange
        .revoke(&w.tenant, granted["grant"]["grant_id"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(w.log().await.len(), receipts_before + 1);
    assert!(matches!(
        w.query(&t, json!({"query": "palette"})).await,
        Err(ExchangeError::GrantRefused("the grant was revoked"))
    ));

    // Another tenant cannot revoke it, nor grant its ref.
    let other_tenant = TenantId::parse("globex").unwrap();
    assert!(matches!(
        w.exchange
            .revoke(
                &other_tenant,
                granted["grant"]["grant_id"].as_str().unwrap()
            )
            .await,
        Err(ExchangeError::NotFound)
    ));
    let foreign: GrantRequest = serde_json::from_value(grant_body(json!({}))).unwrap();
    assert!(matches!(
        w.exchange.grant(&other_tenant, foreign).await,
        Err(ExchangeError::Invalid { .. })
    ));

    // Expiry: refused from the instant itself; announced once.
    let short = w
        .grant(grant_body(
            json!({"expires_at": Timestamp::from_millis(T0 + 2 * DAY).to_rfc3339()}),
        ))
        .await
        .unwrap();
    w.clock.set(Timestamp::from_millis(T0 + 2 * DAY));
    for _ in 0..2 {
        assert!(matches!(
            w.query(&token(&short), json!({"query": "palette"})).await,
            Err(ExchangeError::GrantRefused("the grant has expired"))
        ));
    }
    assert_eq!(
        w.events
            .of_type(memory_core::events::EventType::GrantExpired)
            .len(),
        1
    );
    assert!(w
        .grants
        .expiry_announced(&w.tenant, short["grant"]["grant_id"].as_str().unwrap()));
    assert_eq!(first_broken(&key(), &w.log().await), None);
}

#[tokio::test]
async fn bounds_hold_over_any_number_of_queries() {
    let w = world();
    for i in 0..10 {
        w.write(
            &format!("redesign note number {i} about colours and fonts"),
            &[],
            None,
        )
        .await;
    }
    let granted = w.grant(grant_body(json!({"max_items": 3}))).await.unwrap();
    assert_eq!(granted["slice_items"], 3);
    let mut seen = std::collections::BTreeSet::new();
    for q in [
        "redesign",
        "colours",
        "fonts",
        "note number 1",
        "note number 2",
    ] {
        let a = w
            .query(&token(&granted), json!({"query": q, "max_results": 100}))
            .await
            .unwrap();
        seen.extend(ids_of(&a));
    }
    // New writes after the grant stay outside its slice.
    w.write("redesign note written later", &[], None).await;
    let a = w
        .query(&token(&granted), json!({"query": "redesign later"}))
        .await
        .unwrap();
    seen.extend(ids_of(&a));
    assert_eq!(seen.len(), 3);

    // Embeddings need their scope.
    assert!(matches!(
        w.query(
            &token(&granted),
            json!({"query": "x", "include_embeddings": true})
        )
        .await,
        Err(ExchangeError::NotCovered(_))
    ));
    // The grantee cannot send a filter of its own.
    assert!(serde_json::from_value::<QueryRequest>(
        json!({"query": "x", "filter": {"labels_any": []}})
    )
    .is_err());
    // Bounds of the request itself.
    for bad in [
        json!({"max_items": 0}),
        json!({"max_items": 10_001}),
        json!({"expires_at": Timestamp::from_millis(T0 + 181 * DAY).to_rfc3339()}),
        json!({"grantee": "contractor"}),
        json!({"redaction_profile": "oap.profile.none"}),
    ] {
        assert!(
            matches!(
                w.grant(grant_body(bad.clone())).await,
                Err(ExchangeError::Invalid { .. })
            ),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn a_deleted_entry_leaves_every_grant_at_once() {
    let w = world();
    let id = w
        .write(
            "The client's phone-free summary of the redesign",
            &[],
            Some("cust-7"),
        )
        .await;
    let granted = w.grant(grant_body(json!({}))).await.unwrap();
    assert_eq!(
        ids_of(
            &w.query(&token(&granted), json!({"query": "redesign"}))
                .await
                .unwrap()
        ),
        std::slice::from_ref(&id)
    );
    let key = memory_core::EntryKey {
        memory_ref: MemoryRef::parse(REF).unwrap(),
        id,
    };
    assert!(w.entries.delete(&key).await.unwrap());
    assert!(ids_of(
        &w.query(&token(&granted), json!({"query": "redesign"}))
            .await
            .unwrap()
    )
    .is_empty());
}

#[tokio::test]
async fn concurrent_appends_never_fork_the_log() {
    let w = world();
    w.write("redesign palette", &[], None).await;
    let granted = w.grant(grant_body(json!({}))).await.unwrap();
    let t = token(&granted);
    let queries = (0..12).map(|_| w.query(&t, json!({"query": "palette"})));
    for r in futures_join(queries).await {
        r.unwrap();
    }
    let log = w.log().await;
    assert_eq!(log.len(), 13);
    assert!(
        w.grants.calls.get("append") > 13,
        "the queries raced for the tip"
    );
    assert_eq!(first_broken(&key(), &log), None);
}

async fn futures_join<F: std::future::Future>(fs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut out = Vec::new();
    // Interleaves the futures on one task: each awaits the store, so their appends race.
    let pinned: Vec<_> = fs.map(Box::pin).collect();
    let mut pending: Vec<_> = pinned.into_iter().map(Some).collect();
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut results: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    while pending.iter().any(Option::is_some) {
        for (i, slot) in pending.iter_mut().enumerate() {
            if let Some(f) = slot {
                if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                    results[i] = Some(v);
                    *slot = None;
                }
            }
        }
    }
    for r in results {
        out.extend(r);
    }
    out
}

const OTHER_REF: &str = "workspaces/globex/agents/successor/memories";

impl World {
    async fn export(&self, tenant: &str, scope: &str) -> Result<Value, ExchangeError> {
        let request: ExportRequest = serde_json::from_value(json!({"scope_id": scope})).unwrap();
        self.exchange
            .export(&TenantId::parse(tenant).unwrap(), request)
            .await
    }

    async fn import(
        &self,
        tenant: &str,
        scope: &str,
        manifest: &Value,
    ) -> Result<Value, ExchangeError> {
        let request: ImportRequest =
            serde_json::from_value(json!({"scope_id": scope, "manifest": manifest})).unwrap();
        self.exchange
            .import(&TenantId::parse(tenant).unwrap(), request)
            .await
    }

    /// `count` plain facts written into acme's `REF`, then exported: the bundle the import
    /// refusals start from.
    async fn export_facts(&self, count: usize) -> Value {
        for i in 0..count {
            self.write(&format!("fact number {i} about the project"), &[], None)
                .await;
        }
        self.export("acme", REF).await.unwrap()
    }

    /// The live entries of a ref, as a grantee of the store would see them a day later.
    async fn entries_in(&self, r: &str) -> Vec<StoredEntry> {
        let page = self
            .entries
            .list_page(
                &MemoryRef::parse(r).unwrap(),
                &memory_core::ports::PageQuery {
                    limit: 1000,
                    after: None,
                    now: Timestamp::from_millis(T0 + DAY),
                },
            )
            .await
            .unwrap();
        page.entries
    }

    /// The bundle's lines, parsed, without the fields that name where an item lives.
    fn lines(&self, exported: &Value) -> Vec<Value> {
        let object = exported["manifest"]["object"].as_str().unwrap();
        let bytes = self.bundles.object(object).unwrap();
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// What must survive a round trip: the item as it was captured, with its content hash.
fn essence(line: &Value) -> Value {
    json!([
        line["item_id"],
        line["kind"],
        line["content"],
        line["labels"],
        line["captured_at"],
        line["content_sha256"],
        line["tier"]
    ])
}

/// What an import answered it added, and what it found already there.
fn added_and_present(answer: &Value) -> (Option<u64>, Option<u64>) {
    (
        answer["imported"].as_u64(),
        answer["already_present"].as_u64(),
    )
}

#[tokio::test]
async fn export_import_export_keeps_items_and_hashes_and_continues_chains() {
    let w = world();
    w.write("The user is allergic to penicillin", &["health"], None)
        .await;
    w.write(
        "The user moved to Lisbon in May",
        &["kind:fact", "home"],
        None,
    )
    .await;
    w.write("Grandma's birthday is on 3 March", &[], None).await;
    let first = w.export("acme", REF).await.unwrap();
    assert_eq!(first["items"], 3);
    assert_eq!(first["manifest"]["sha256"].as_str().unwrap().len(), 64);
    let lines = w.lines(&first);

    let imported = w
        .import("globex", OTHER_REF, &first["manifest"])
        .await
        .unwrap();
    assert_eq!(added_and_present(&imported), (Some(3), Some(0)));
    let again = w
        .import("globex", OTHER_REF, &first["manifest"])
        .await
        .unwrap();
    assert_eq!(
        added_and_present(&again),
        (Some(0), Some(3)),
        "a second import adds nothing"
    );

    let second = w.export("globex", OTHER_REF).await.unwrap();
    let relines = w.lines(&second);
    let mut a: Vec<Value> = lines.iter().map(essence).collect();
    let mut b: Vec<Value> = relines.iter().map(essence).collect();
    a.sort_by_key(|v| v.to_string());
    b.sort_by_key(|v| v.to_string());
    assert_eq!(a, b);
    // The imported items' chains continue the exported ones.
    for line in &relines {
        let source = lines
            .iter()
            .find(|l| l["item_id"] == line["item_id"])
            .unwrap();
        assert_eq!(line["chain"][0]["op"], "import");
        assert_eq!(line["chain"][0]["prev"], source["chain_hash"]);
        assert_eq!(
            line["chain_hash"].as_str().unwrap(),
            hash_of(&line["chain"][0])
        );
    }
    assert_eq!(
        first_broken(
            &key(),
            &w.exchange
                .receipts(&TenantId::parse("globex").unwrap(), 0, 100)
                .await
                .unwrap()["receipts"]
                .as_array()
                .unwrap()
                .clone()
        ),
        None
    );
}

#[tokio::test]
async fn a_changed_bundle_or_manifest_imports_nothing() {
    let w = world();
    let exported = w.export_facts(30).await;
    let manifest = exported["manifest"].clone();
    // Any field of the manifest changed.
    for (field, value) in [
        ("items", json!(29)),
        ("scope_id", json!(OTHER_REF)),
        ("sha256", json!("0".repeat(64))),
        ("object", json!("globex/oap/exports/x.jsonl")),
    ] {
        let mut m = manifest.clone();
        m[field] = value;
        assert!(
            matches!(
                w.import("globex", OTHER_REF, &m).await,
                Err(ExchangeError::Invalid { .. })
            ),
            "{field}"
        );
    }
    // One byte of the object changed, late in the bundle: nothing is written, not even the
    // lines before it.
    let object = manifest["object"].as_str().unwrap();
    let mut bytes = w.bundles.object(object).unwrap();
    let at = bytes.len() - 40;
    bytes[at] = if bytes[at] == b'a' { b'b' } else { b'a' };
    w.bundles.replace(object, bytes);
    assert!(matches!(
        w.import("globex", OTHER_REF, &manifest).await,
        Err(ExchangeError::Invalid { .. })
    ));
    let page_entries = w.entries_in(OTHER_REF).await;
    assert!(page_entries.is_empty());
    // Into a ref of another tenant.
    assert!(matches!(
        w.import("globex", REF, &manifest).await,
        Err(ExchangeError::Invalid { .. })
    ));
}

#[tokio::test]
async fn imported_text_passes_sr1_again() {
    let w = world();
    w.write(
        "The vault token is s3cr3t-vault-token-value, keep it safe",
        &[],
        None,
    )
    .await;
    let exported = w.export("acme", REF).await.unwrap();
    w.import("globex", OTHER_REF, &exported["manifest"])
        .await
        .unwrap();
    let page_entries = w.entries_in(OTHER_REF).await;
    let text = &page_entries[0].entry.content;
    assert!(!text.contains("s3cr3t-vault-token-value"), "{text}");
    assert!(text.contains("[REDACTED:vault-token]"), "{text}");
}

#[tokio::test]
async fn a_large_export_streams_in_parts() {
    let w = world();
    let filler = "x".repeat(4000);
    let batch: Vec<StoredEntry> = (0..2500u64)
        .map(|i| {
            let now = Timestamp::from_millis(T0 + i as i64);
            let memory_ref = MemoryRef::parse(REF).unwrap();
            StoredEntry {
                subject: None,
                memory_ref,
                entry: MemoryEntry {
                    id: w.ids.next_id(now),
                    content: format!("{i} {filler}"),
                    tags: vec![],
                    created_at: now,
                    expires_at: None,
                },
                tier: Tier::LongTerm,
                attribution: Attribution::default(),
                provenance: vec![],
                embedding: None,
            }
        })
        .collect();
    for chunk in batch.chunks(50) {
        w.entries.put_entries(chunk).await.unwrap();
    }
    let exported = w.export("acme", REF).await.unwrap();
    assert_eq!(exported["items"], 2500);
    assert!(
        w.bundles.calls.get("part") >= 2,
        "{} parts",
        w.bundles.calls.get("part")
    );
    assert_eq!(w.bundles.open_uploads(), 0);
    let imported = w
        .import("globex", OTHER_REF, &exported["manifest"])
        .await
        .unwrap();
    assert_eq!(imported["imported"], 2500);
}

#[tokio::test]
async fn a_letta_agent_file_moves_in_once_and_through_sr1() {
    let w = world();
    let af = json!({
        "agents": [{"id": "agent-0", "name": "assistant", "block_ids": ["block-0", "block-1"],
                    "messages": [{"created_at": "2026-03-01T10:00:00+00:00"}]}],
        "blocks": [
            {"id": "block-0", "label": "human", "value": "Name: Ada. Allergic to penicillin. Vault: s3cr3t-vault-token-value"},
            {"id": "block-1", "label": "persona", "value": "I am a careful assistant."}
        ],
        "tools": [], "files": []
    });
    let request = |af: Value| -> ImportRequest {
        serde_json::from_value(json!({"scope_id": OTHER_REF, "letta_agent_file": af})).unwrap()
    };
    let globex = TenantId::parse("globex").unwrap();
    let first = w
        .exchange
        .import(&globex, request(af.clone()))
        .await
        .unwrap();
    assert_eq!(
        (first["blocks"].as_u64(), first["imported"].as_u64()),
        (Some(2), Some(2))
    );
    // The file as text, a second time: nothing new.
    let again = w
        .exchange
        .import(&globex, request(json!(af.to_string())))
        .await
        .unwrap();
    assert_eq!(added_and_present(&again), (Some(0), Some(2)));
    let page_entries = w.entries_in(OTHER_REF).await;
    assert_eq!(page_entries.len(), 2);
    let human = page_entries
        .iter()
        .find(|e| e.entry.tags.contains(&"letta-block:human".to_owned()))
        .unwrap();
    assert!(human.entry.content.contains("Allergic to penicillin"));
    assert!(!human.entry.content.contains("s3cr3t-vault-token-value"));
    assert_eq!(
        human.entry.created_at.to_rfc3339(),
        "2026-03-01T10:00:00.000Z"
    );
    // Neither or both sources, or not an agent file: refused.
    for bad in [
        json!({"scope_id": OTHER_REF}),
        json!({"scope_id": OTHER_REF, "letta_agent_file": {"tools": []}}),
    ] {
        let r: ImportRequest = serde_json::from_value(bad).unwrap();
        assert!(matches!(
            w.exchange.import(&globex, r).await,
            Err(ExchangeError::Invalid { .. })
        ));
    }
}

#[tokio::test]
async fn forget_deletes_the_bundles_that_held_the_subject_and_the_log_says_which() {
    use memory_core::forget::ForgetHook;
    let w = world();
    w.write("Ada's allergy: penicillin", &[], Some("ada")).await;
    w.write("The office moves in June", &[], None).await;
    let with_ada = w.export("acme", REF).await.unwrap();
    let archives = Arc::new(memory_testkit::in_memory::InMemoryArchiveStore::new());
    // The bundle objects live in the archive bucket in production; here the hook deletes from
    // its own store, so the object is copied there first.
    let object = with_ada["manifest"]["object"].as_str().unwrap().to_owned();
    let object_key = memory_core::ports::ObjectKey::from_listed(&w.tenant, &object).unwrap();
    let put = memory_core::ports::ObjectPut {
        key: &object_key,
        body: w.bundles.object(&object).unwrap(),
        kind: memory_core::ports::ObjectKind::Archive,
        content_type: "application/x-ndjson",
    };
    memory_core::ports::ArchiveStore::put_if_absent(archives.as_ref(), put)
        .await
        .unwrap();
    let hook = oap_exchange::forget::BundleForgetHook {
        store: w.grants.clone(),
        archives: archives.clone(),
        clock: w.clock.clone(),
    };
    let (ada, nobody) = (
        SubjectKey::derive(&w.tenant, "ada"),
        SubjectKey::derive(&w.tenant, "nobody"),
    );
    let hook = &hook;
    let deleted = |subject| async move {
        let scope = ForgetScope {
            subject,
            forgotten: &[],
        };
        hook.forget(scope).await.unwrap().deleted_archives
    };
    assert_eq!(deleted(&nobody).await, 0);
    assert_eq!(deleted(&ada).await, 1);
    assert!(
        memory_core::ports::ArchiveStore::get(archives.as_ref(), &object_key)
            .await
            .unwrap()
            .is_none()
    );
    // Again (a retried forget): nothing more to delete, no second notice.
    assert_eq!(deleted(&ada).await, 0);
    let log = w.log().await;
    let forgets: Vec<&Value> = log
        .iter()
        .filter(|r| r["type"] == "memory.forget")
        .collect();
    assert_eq!(forgets.len(), 1);
    assert_eq!(
        forgets[0]["output_hash"],
        json!(hash_of(
            &json!({"deleted_bundles": [with_ada["bundle_id"]]})
        ))
    );
    assert_eq!(first_broken(&key(), &log), None);
}

#[tokio::test]
async fn a_successors_copy_follows_the_originals_forget() {
    let w = world();
    let gone = w
        .write("Ada lives at the old address", &[], Some("ada"))
        .await;
    w.write("The office moves in June", &[], None).await;
    let first = w.export("acme", REF).await.unwrap();
    w.import("globex", OTHER_REF, &first["manifest"])
        .await
        .unwrap();
    assert_eq!(w.entries_in(OTHER_REF).await.len(), 2);
    // Forget removes the entry at the origin and tombstones its id.
    let key = memory_core::EntryKey {
        memory_ref: MemoryRef::parse(REF).unwrap(),
        id: gone.clone(),
    };
    w.entries
        .tombstone(std::slice::from_ref(&key), Timestamp::from_millis(T0 + DAY))
        .await
        .unwrap();
    assert!(w.entries.delete(&key).await.unwrap());
    let second = w.export("acme", REF).await.unwrap();
    assert_eq!(
        (
            second["items"].as_u64(),
            second["manifest"]["deleted"].as_u64()
        ),
        (Some(1), Some(1))
    );
    let imported = w
        .import("globex", OTHER_REF, &second["manifest"])
        .await
        .unwrap();
    assert_eq!(imported["deleted"], 1);
    let left: Vec<String> = w
        .entries_in(OTHER_REF)
        .await
        .into_iter()
        .map(|e| e.entry.id)
        .collect();
    assert!(!left.contains(&gone), "{left:?}");
    assert_eq!(left.len(), 1);
}

#[tokio::test]
async fn the_sweep_announces_expiries_nobody_queried_once() {
    let w = world();
    w.write("The redesign uses the blue palette", &[], None)
        .await;
    let soon = Timestamp::from_millis(T0 + 2 * DAY).to_rfc3339();
    let quiet = w
        .grant(grant_body(json!({"expires_at": soon})))
        .await
        .unwrap();
    let revoked = w
        .grant(grant_body(json!({"expires_at": soon})))
        .await
        .unwrap();
    let later = w.grant(grant_body(json!({}))).await.unwrap();
    w.exchange
        .revoke(&w.tenant, revoked["grant"]["grant_id"].as_str().unwrap())
        .await
        .unwrap();
    assert!(w.exchange.due_expiries().await.unwrap().is_empty());
    w.clock.set(Timestamp::from_millis(T0 + 2 * DAY));
    let due = w.exchange.due_expiries().await.unwrap();
    let ids: Vec<&str> = due.iter().map(|e| e.grant_id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(!ids.contains(&later["grant"]["grant_id"].as_str().unwrap()));
    for entry in &due {
        w.exchange.expire(entry).await.unwrap();
        w.exchange.expire(entry).await.unwrap();
    }
    assert!(w.exchange.due_expiries().await.unwrap().is_empty());
    let expired = w
        .events
        .of_type(memory_core::events::EventType::GrantExpired);
    assert_eq!(
        expired.len(),
        1,
        "the revoked grant's expiry is not announced"
    );
    assert_eq!(expired[0].detail["grantId"], quiet["grant"]["grant_id"]);
    let log = w.log().await;
    assert_eq!(
        log.iter().filter(|r| r["type"] == "memory.expire").count(),
        1
    );
    assert_eq!(first_broken(&key(), &log), None);
}

#[tokio::test]
async fn a_derived_item_commits_to_the_text_of_each_source() {
    let w = world();
    let oslo = w.write("Ada lives in Oslo", &[], None).await;
    let bergen = w.write("Ada moved to Bergen in May", &[], None).await;
    let sources = w.entries_in(REF).await;
    // What a consolidation merge writes: sources by id, and a digest mark per source it read.
    let now = memory_core::ports::Clock::now(w.clock.as_ref());
    let merged = StoredEntry {
        memory_ref: MemoryRef::parse(REF).unwrap(),
        entry: MemoryEntry {
            id: w.ids.next_id(now),
            content: "Ada lives in Bergen (moved in May)".into(),
            tags: vec![],
            created_at: now,
            expires_at: None,
        },
        tier: Tier::LongTerm,
        subject: None,
        attribution: Attribution::default(),
        provenance: memory_core::derivation::with_source_digests(
            vec![oslo.clone(), bergen.clone()],
            &sources,
        ),
        embedding: None,
    };
    w.entries
        .put_entries(std::slice::from_ref(&merged))
        .await
        .unwrap();

    let granted = w.grant(grant_body(json!({}))).await.unwrap();
    let answer = w
        .query(&token(&granted), json!({"query": "Ada", "max_results": 10}))
        .await
        .unwrap();
    let items = answer["items"].as_array().unwrap();
    let by_id = |id: &str| items.iter().find(|i| i["item_id"] == id).unwrap();
    let derived = by_id(&merged.entry.id);
    assert!(chain_verifies(derived));
    let link = &derived["chain"][0];
    assert_eq!(link["op"], "derive");
    assert_eq!(link["derived_from"], json!([oslo, bergen]));
    // A grantee holding a source recomputes its commitment from that source's own first link.
    for source in [&oslo, &bergen] {
        let first = &by_id(source)["chain"][0];
        let commitment = hash_of(&json!({
            "content_sha256": first["content_sha256"],
            "salt": first["salt"],
        }));
        assert_eq!(
            link["sources"][source.as_str()],
            json!(commitment),
            "{source}"
        );
    }
    // A source whose text differed from what was read would not match.
    let other = hash_of(&json!({
        "content_sha256": sha256_hex("Ada lives in Trondheim"),
        "salt": by_id(&oslo)["chain"][0]["salt"],
    }));
    assert_ne!(link["sources"][oslo.as_str()], json!(other));
    // The marks are host-internal: never an id a grantee sees.
    assert!(!link["derived_from"].to_string().contains("srcsha256"));
}

#[tokio::test]
async fn an_import_over_a_quota_is_refused_and_a_raised_limit_lets_it_in() {
    use memory_core::ports::QuotaStore;
    use memory_core::quota::{Counter, Quota};
    let w = world();
    let exported = w.export_facts(30).await;
    let globex = TenantId::parse("globex").unwrap();
    w.entries
        .set_overrides(&globex, &[(Quota::EntriesPerRef, 20)])
        .await
        .unwrap();
    match w.import("globex", OTHER_REF, &exported["manifest"]).await {
        Err(ExchangeError::Store(memory_core::StoreError::QuotaExceeded(r))) => {
            assert_eq!((r.quota, r.max), (Quota::EntriesPerRef, 20));
            assert!(r.current <= 20, "{r:?}");
        }
        other => panic!("expected a quota refusal, got {other:?}"),
    }
    let stored = w.entries_in(OTHER_REF).await.len();
    assert!(stored <= 20, "never past the limit: {stored}");
    let r = MemoryRef::parse(OTHER_REF).unwrap();
    assert_eq!(
        w.entries.counter(&Counter::RefEntries(r.clone())),
        stored as i64,
        "the counter is what is stored"
    );
    w.entries
        .set_overrides(&globex, &[(Quota::EntriesPerRef, 100)])
        .await
        .unwrap();
    let imported = w
        .import("globex", OTHER_REF, &exported["manifest"])
        .await
        .unwrap();
    assert_eq!(
        added_and_present(&imported),
        (Some(30 - stored as u64), Some(stored as u64)),
        "the retry adds only what is missing"
    );
    assert_eq!(w.entries.counter(&Counter::RefEntries(r)), 30);
}
