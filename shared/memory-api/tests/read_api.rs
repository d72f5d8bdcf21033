//! The read API in process over the in-memory store: routing, statuses and envelopes.

use std::sync::Arc;

use memory_api::read_api::{ReadApi, ReadRequest};
use memory_core::capabilities::HOST_MODEL;
use memory_core::ports::EntryStore;
use memory_core::reader::MemoryReader;
use memory_core::{TenantId, Timestamp};
use memory_testkit::contract::{entry, memory_ref, T0};
use memory_testkit::in_memory::{InMemoryEntryStore, ManualClock};
use serde_json::json;

const TENANT: &str = "tenant-a";

async fn api() -> (ReadApi, String, String) {
    let store = Arc::new(InMemoryEntryStore::new());
    let r = memory_ref(&TenantId::parse(TENANT).expect("tenant"), "agent-1");
    let e = entry(&r, 1, "hello", &["greeting"]);
    store
        .put_entries(std::slice::from_ref(&e))
        .await
        .expect("put");
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(T0 + 100)));
    (
        ReadApi::new(MemoryReader::new(store, clock), HOST_MODEL),
        r.to_string(),
        e.entry.id,
    )
}

fn req(path: &str, query: &[(&str, &str)], tenant: Option<&str>) -> ReadRequest {
    ReadRequest {
        method: "GET".into(),
        path: path.into(),
        query: query.iter().copied().collect(),
        tenant_claim: tenant.map(str::to_owned),
    }
}

#[tokio::test]
async fn routes_and_statuses() {
    let (api, r, id) = api().await;
    let list_at = |path: &'static str| {
        let request = req(path, &[("memoryRef", &r)], Some(TENANT));
        let api = &api;
        async move { api.handle(&request).await }
    };
    let list = list_at("/v1/host/wop-memory/entries").await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body["entries"][0]["content"], "hello");
    assert_eq!(list.body["nextCursor"], json!(null));
    let staged = list_at("/prod/v1/host/wop-memory/entries").await;
    assert_eq!(
        staged.body, list.body,
        "a stage prefix in the path changes nothing"
    );
    let got = api
        .handle(&req(
            &format!("/v1/host/wop-memory/entries/{id}"),
            &[("memoryRef", &r)],
            Some(TENANT),
        ))
        .await;
    assert_eq!((got.status, &got.body["id"]), (200, &json!(id)));

    let cases = [
        (
            req("/v1/host/wop-memory/entries", &[("memoryRef", &r)], None),
            401,
            "unauthenticated",
        ),
        (
            req(
                "/v1/host/wop-memory/entries",
                &[("memoryRef", &r)],
                Some("bad tenant"),
            ),
            401,
            "unauthenticated",
        ),
        (
            req("/v1/host/wop-memory/entries", &[], Some(TENANT)),
            400,
            "validation_error",
        ),
        (
            req(
                "/v1/host/wop-memory/entries",
                &[("memoryRef", &r), ("limit", "0")],
                Some(TENANT),
            ),
            400,
            "validation_error",
        ),
        (
            req(
                "/v1/host/wop-memory/entries",
                &[("memoryRef", &r), ("cursor", "zzz")],
                Some(TENANT),
            ),
            400,
            "validation_error",
        ),
        (
            req(
                "/v1/host/wop-memory/entries/01NOPE",
                &[("memoryRef", &r)],
                Some(TENANT),
            ),
            404,
            "not_found",
        ),
        (
            req("/v1/host/wop-memory/nothing", &[], Some(TENANT)),
            404,
            "not_found",
        ),
        (
            req(
                "/v1/host/wop-memory/entries/a/b",
                &[("memoryRef", &r)],
                Some(TENANT),
            ),
            404,
            "not_found",
        ),
    ];
    for (request, status, code) in cases {
        let response = api.handle(&request).await;
        assert_eq!(
            (response.status, response.body["error"].as_str()),
            (status, Some(code)),
            "{request:?}"
        );
        assert!(response.body["message"].is_string());
    }
    let mut post = req(
        "/v1/host/wop-memory/entries",
        &[("memoryRef", &r)],
        Some(TENANT),
    );
    post.method = "POST".into();
    assert_eq!(api.handle(&post).await.status, 404);
    let caps = api
        .handle(&req("/v1/host/wop-memory/capabilities", &[], None))
        .await;
    assert_eq!(
        (caps.status, caps.body.clone()),
        (200, HOST_MODEL.document())
    );
}

/// The usage route over the in-memory usage store: the caller's own days only, bad ranges 400.
#[tokio::test]
async fn usage_answers_the_callers_own_days_and_refuses_bad_ranges() {
    use memory_core::metering::{StoredNow, Usage, UsageStore};
    use memory_testkit::usage::InMemoryUsageStore;
    let usage = Arc::new(InMemoryUsageStore::default());
    let mine = TenantId::parse(TENANT).expect("tenant");
    let theirs = TenantId::parse("tenant-b").expect("tenant");
    let day = memory_core::metering::day_of(Timestamp::from_millis(T0 + 100));
    let spent = Usage {
        write_units: 4.0,
        requests: 1,
        ..Usage::default()
    };
    for t in [&mine, &theirs] {
        usage
            .add_hour(
                memory_core::metering::HourItem {
                    tenant: t,
                    hour: &format!("{day}T00"),
                    shard: 0,
                },
                &spent,
            )
            .await
            .expect("add");
    }
    usage.set_stored(
        &theirs,
        StoredNow {
            entries: 9,
            bytes: 9,
        },
    );
    let (plain_api, _, _) = api().await;
    let routes = plain_api.with_usage(Some(usage as Arc<dyn UsageStore>));
    let path = "/v1/host/wop-memory/usage";
    let ok = routes
        .handle(&req(
            path,
            &[("from", &day), ("to", &day), ("tenantId", "tenant-b")],
            Some(TENANT),
        ))
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.body["days"][0]["day"], json!(day));
    assert_eq!(ok.body["days"][0]["writeUnits"], json!(4.0));
    assert_eq!(
        ok.body["now"],
        json!({"entries": 0, "bytes": 0}),
        "the claim's tenant, never the query's"
    );
    let fresh = routes
        .handle(&req(
            path,
            &[("from", &day), ("to", &day)],
            Some("tenant-c"),
        ))
        .await;
    assert_eq!((fresh.status, &fresh.body["days"]), (200, &json!([])));
    for (query, field) in [
        (vec![("from", "2026-01-02"), ("to", "2026-01-01")], "to"),
        (vec![("from", "2026-1-02"), ("to", "2026-01-03")], "from"),
        (vec![("from", "2025-01-01"), ("to", "2026-01-02")], "to"),
        (vec![("from", "2026-01-01")], "to"),
    ] {
        let bad = routes.handle(&req(path, &query, Some(TENANT))).await;
        assert_eq!(bad.status, 400, "{query:?}");
        assert_eq!(
            (
                bad.body["error"].clone(),
                bad.body["details"]["field"].clone()
            ),
            (json!("validation_error"), json!(field))
        );
    }
    let anonymous = routes
        .handle(&req(path, &[("from", &day), ("to", &day)], None))
        .await;
    assert_eq!(anonymous.status, 401);
    // Without a usage store the route does not exist.
    let (plain, _, _) = crate::api().await;
    let absent = plain
        .handle(&req(path, &[("from", &day), ("to", &day)], Some(TENANT)))
        .await;
    assert_eq!(absent.status, 404);
}
