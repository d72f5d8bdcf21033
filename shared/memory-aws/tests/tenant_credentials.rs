//! Tenant-scoped credentials against the emulator (docs/guarantees.md "Tenant isolation in three
//! layers"; `src/tenant.rs`). The adapters run with `TENANT_ROLE_ARN` behind the recording proxy
//! in `tests/fault` with `--tenant-iam`: it learns from each AssumeRole answer which access key
//! belongs to which `tenant` session tag and refuses, as IAM would with TenantAccessRole's policy,
//! a vended key used outside its tenant. (moto itself ignores IAM Resource and Condition, so
//! without the proxy nothing would be refused; the policy is also checked statically by
//! tests/template_policies.py.)
//!
//! - a key of another tenant, built on purpose here (the bug the design guards against), is
//!   refused for DynamoDB reads, S3 reads and S3 listings, while the tenant's own keys work;
//! - a burst of concurrent requests for one tenant makes one AssumeRole; the figures of a miss
//!   and a hit are printed;
//! - STS failing gives `StoreError::Unavailable` and no data call at all.
//!
//! Needs the emulator (`eval "$(infra/local/up)"`) and the project venv (`infra/local/venv`).

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_test_support::proxy::FaultProxy;
use aws_test_support::required_env;
use memory_aws::{AwsPorts, Settings};
use memory_core::acting_tenant::acting_for;
use memory_core::ports::{ArchiveStore, EntryStore, ObjectKey, ObjectKind, ObjectPut, PutOutcome};
use memory_core::{EntryKey, StoreError};
use memory_testkit::contract::{entry, fresh_tenant, memory_ref};
use serde_json::Value;

const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/wop-memory-tenant-access";

/// `tests/fault/proxy.py --tenant-iam` in front of the emulator.
struct Proxy(FaultProxy);

impl Proxy {
    fn start() -> Proxy {
        let upstream = required_env("AWS_ENDPOINT_URL");
        let args = ["--serialize", "--tenant-iam", "--upstream", &upstream];
        Proxy(FaultProxy::start(&args, Stdio::null()))
    }

    fn control(&self, method: &str, path: &str, body: &str) -> Value {
        self.0.control(method, path, body)
    }

    /// The data calls recorded for `tenant`'s keys: (operation, signer, denied).
    fn calls_on(&self, tenant: &str) -> Vec<(String, String, bool)> {
        let doc = self.control("GET", "credentials", "");
        doc["calls"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| {
                c["keyTenants"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|x| x == tenant))
            })
            .map(|c| {
                (
                    c["operation"].as_str().unwrap_or_default().to_owned(),
                    c["signer"].as_str().unwrap_or_default().to_owned(),
                    c["denied"].as_bool().unwrap_or(false),
                )
            })
            .collect()
    }

    fn assumed(&self, tenant: &str) -> usize {
        let doc = self.control("GET", "credentials", "");
        doc["assumed"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["tenant"] == tenant && a["status"] == 200)
            .count()
    }
}

/// The adapters as a function with `TENANT_ROLE_ARN` set builds them, through `proxy`.
async fn ports(proxy: &Proxy) -> AwsPorts {
    // The endpoint set on the loader, as AWS_ENDPOINT_URL would be: the environment's own
    // (the emulator) must not win over it.
    required_env("AWS_ENDPOINT_URL");
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(memory_aws::https_client())
        .endpoint_url(proxy.0.url())
        .load()
        .await;
    let settings = Settings {
        table: required_env("MEMORY_TABLE"),
        bucket: required_env("ARCHIVE_BUCKET"),
        bus: required_env("EVENT_BUS_NAME"),
        endpoint_override: true,
        pass_queue_url: None,
        embed_queue_url: None,
        embedding_model: None,
        embedding_dimensions: None,
        abstractive_model: None,
        tenant_role_arn: Some(ROLE_ARN.to_owned()),
        tenant_session_cache: 100,
        quota_limits: memory_core::quota::Limits::unlimited(),
    };
    AwsPorts::from_sdk_config(&sdk, &settings)
}

fn denied(result: &Result<impl std::fmt::Debug, StoreError>, code: &str) -> bool {
    matches!(result, Err(StoreError::Backend { code: c, .. }) if c == code)
}

#[tokio::test]
async fn a_key_of_another_tenant_is_refused_under_a_tenants_credentials() {
    let proxy = Proxy::start();
    let ports = ports(&proxy).await;
    let (a, b) = (fresh_tenant("iam-a"), fresh_tenant("iam-b"));
    let (ref_a, ref_b) = (memory_ref(&a, "agent-1"), memory_ref(&b, "agent-1"));
    let (in_a, in_b) = (Some(a.as_str()), Some(b.as_str()));
    let e = entry(&ref_b, 1, "b's note", &[]);
    let object_b = ObjectKey::new(&b, "archives/probe.json").expect("object key");
    // b writes its own entry and object.
    acting_for(in_b, ports.entries.put_entries(std::slice::from_ref(&e)))
        .await
        .expect("b's put");
    let put = acting_for(
        in_b,
        ports.archives.put_if_absent(ObjectPut::json(
            &object_b,
            ObjectKind::Archive,
            b"{}".to_vec(),
        )),
    )
    .await;
    assert_eq!(put.ok(), Some(PutOutcome::Created));

    // Acting for a, a test-only path builds b's keys: DynamoDB and S3 refuse them.
    let key_b = EntryKey {
        memory_ref: ref_b.clone(),
        id: e.entry.id.clone(),
    };
    let get = acting_for(in_a, ports.entries.get(&key_b)).await;
    assert!(denied(&get, "AccessDeniedException"), "{get:?}");
    let page = acting_for(in_a, ports.entries.tombstones(&ref_b)).await;
    assert!(denied(&page, "AccessDeniedException"), "{page:?}");
    let object = acting_for(in_a, ports.archives.get(&object_b)).await;
    assert!(denied(&object, "AccessDenied"), "{object:?}");
    let listing = acting_for(in_a, ports.archives.list(&b, "archives/")).await;
    assert!(denied(&listing, "AccessDenied"), "{listing:?}");

    // a's own keys work (an absent entry, an absent object: None, not a denial).
    let own = EntryKey {
        memory_ref: ref_a.clone(),
        id: e.entry.id.clone(),
    };
    assert_eq!(acting_for(in_a, ports.entries.get(&own)).await, Ok(None));
    let absent = ObjectKey::new(&a, "archives/none.json").expect("object key");
    assert_eq!(
        acting_for(in_a, ports.archives.get(&absent)).await.ok(),
        Some(None)
    );
    // b still reads its own.
    let mine = acting_for(in_b, ports.entries.get(&key_b)).await;
    assert_eq!(mine.ok().flatten().map(|s| s.entry.id), Some(e.entry.id));

    let on_b = proxy.calls_on(b.as_str());
    let refused: Vec<_> = on_b.iter().filter(|(_, _, d)| *d).collect();
    assert!(
        refused.len() >= 4
            && refused
                .iter()
                .all(|(_, signer, _)| *signer == format!("tenant:{}", a.as_str())),
        "{on_b:?}"
    );
    assert!(
        on_b.iter()
            .filter(|(_, _, d)| !d)
            .all(|(_, signer, _)| *signer == format!("tenant:{}", b.as_str())),
        "{on_b:?}"
    );
    // Outside any tenant scope the adapters refuse to call at all.
    let unscoped = ports.entries.get(&key_b).await;
    assert!(denied(&unscoped, "NoActingTenant"), "{unscoped:?}");
}

#[tokio::test]
async fn a_burst_for_one_tenant_makes_one_assume_role() {
    let proxy = Proxy::start();
    let ports = ports(&proxy).await;
    let c = fresh_tenant("iam-burst");
    let key = EntryKey {
        memory_ref: memory_ref(&c, "agent-1"),
        id: "01J0000000000000000000000A".to_owned(),
    };
    let store: Arc<dyn EntryStore> = ports.entries.clone();
    let mut burst = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let (store, key, tenant) = (store.clone(), key.clone(), c.as_str().to_owned());
        burst.spawn(async move { acting_for(Some(&tenant), store.get(&key)).await });
    }
    while let Some(got) = burst.join_next().await {
        assert_eq!(got.ok(), Some(Ok(None)));
    }
    assert_eq!(proxy.assumed(c.as_str()), 1);

    // Figures (through the proxy, on this machine): a miss (AssumeRole + building the
    // session's clients), a hit, and one GetItem on the tenant's session vs the function's own.
    let sessions = ports.tenant_sessions.clone().expect("tenant sessions");
    let d = fresh_tenant("iam-figures");
    let started = Instant::now();
    sessions.session(&d).await.expect("miss");
    let miss = started.elapsed();
    let hits = 10_000u32;
    let started = Instant::now();
    for _ in 0..hits {
        sessions.session(&d).await.expect("hit");
    }
    let hit = started.elapsed() / hits;
    let key_d = EntryKey {
        memory_ref: memory_ref(&d, "agent-1"),
        id: key.id.clone(),
    };
    let own = memory_aws::DynamoEntryStore::new(ports.dynamo.clone(), ports.table.clone());
    let rounds = 50u32;
    let mut tenant_get = Duration::ZERO;
    let mut own_get = Duration::ZERO;
    for _ in 0..rounds {
        let t = Instant::now();
        let _ = acting_for(Some(d.as_str()), ports.entries.get(&key_d)).await;
        tenant_get += t.elapsed();
        let t = Instant::now();
        let _ = own.get(&key_d).await;
        own_get += t.elapsed();
    }
    // The alternatives not taken: building a session's two clients per request, or overriding
    // the credentials per operation on the function's client (rebuilds the operation's config).
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(memory_aws::https_client())
        .endpoint_url(proxy.0.url())
        .load()
        .await;
    let creds = aws_sdk_dynamodb::config::Credentials::new("AKID", "SECRET", None, None, "t");
    let builds = 200u32;
    let started = Instant::now();
    for _ in 0..builds {
        let dynamo = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&sdk)
                .credentials_provider(creds.clone())
                .build(),
        );
        let s3 = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&sdk)
                .credentials_provider(creds.clone())
                .force_path_style(true)
                .build(),
        );
        drop((dynamo, s3));
    }
    let build = started.elapsed() / builds;
    let mut override_get = Duration::ZERO;
    for _ in 0..rounds {
        let t = Instant::now();
        let _ = ports
            .dynamo
            .get_item()
            .table_name(&ports.table)
            .key(
                "pk",
                aws_sdk_dynamodb::types::AttributeValue::S(format!("{}#agent-1", d.as_str())),
            )
            .key(
                "sk",
                aws_sdk_dynamodb::types::AttributeValue::S("E#x".into()),
            )
            .customize()
            .config_override(
                aws_sdk_dynamodb::config::Builder::default().credentials_provider(creds.clone()),
            )
            .send()
            .await;
        override_get += t.elapsed();
    }
    println!(
        "tenant session: miss {:.1} ms (AssumeRole through the proxy + clients), hit {:.2} us; \
         GetItem on the tenant's session {:.2} ms vs the function's own {:.2} ms vs a per-call \
         credentials override {:.2} ms (mean of {rounds}); building a session's two clients {:.0} us",
        miss.as_secs_f64() * 1e3,
        hit.as_secs_f64() * 1e6,
        (tenant_get / rounds).as_secs_f64() * 1e3,
        (own_get / rounds).as_secs_f64() * 1e3,
        (override_get / rounds).as_secs_f64() * 1e3,
        build.as_secs_f64() * 1e6,
    );
    assert!(
        hit < Duration::from_millis(1),
        "a hit must be a lookup: {hit:?}"
    );
}

#[tokio::test]
async fn sts_failure_is_unavailable_and_sends_no_data_call() {
    let proxy = Proxy::start();
    proxy.control(
        "POST",
        "config",
        r#"{"rates": {"500": 1.0}, "only": "sts:AssumeRole"}"#,
    );
    let ports = ports(&proxy).await;
    let e = fresh_tenant("iam-sts");
    let key = EntryKey {
        memory_ref: memory_ref(&e, "agent-1"),
        id: "01J0000000000000000000000A".to_owned(),
    };
    let got = acting_for(Some(e.as_str()), ports.entries.get(&key)).await;
    assert!(
        matches!(&got, Err(StoreError::Unavailable { op: "assume_role", code }) if code == "InternalFailure"),
        "{got:?}"
    );
    let object = ObjectKey::new(&e, "archives/x.json").expect("object key");
    let got = acting_for(Some(e.as_str()), ports.archives.get(&object)).await;
    assert!(
        matches!(&got, Err(StoreError::Unavailable { .. })),
        "{got:?}"
    );
    assert_eq!(proxy.calls_on(e.as_str()), Vec::new());
}
