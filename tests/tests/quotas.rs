//! Quotas end to end (docs/quotas.md "Quotas"): the real `memory-write`, `memory-read`,
//! `memory-forget` and `memory-consolidate` binaries against the emulated table. Eight writer
//! processes (eight Lambda containers) race for each limit: exactly the limit is accepted, every
//! other request is refused with `rate_limited` and a retry hint, and the counters in the table
//! say so. Limits are set the way an operator sets them, by writing a tenant's `Q#limits` item
//! while the functions run.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_test_support::{emulator_config, required_env};
use e2e::apigw::{event, now_ms, rfc3339, utc_date, HttpEvent};
use e2e::{memory_ref, tenant, LambdaProcess, Outcome};
use serde_json::{json, Value};

const WRITERS: usize = 8;

async fn dynamo() -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&emulator_config().await)
}

/// The operator's action: the tenant's override item (docs/quotas.md "Changing a tenant's
/// limits").
async fn set_limits(db: &aws_sdk_dynamodb::Client, tenant: &str, limits: &[(&str, u64)]) {
    let mut item = HashMap::from([
        (
            "pk".to_owned(),
            AttributeValue::S(format!("{tenant}#@quota")),
        ),
        ("sk".to_owned(), AttributeValue::S("Q#limits".to_owned())),
    ]);
    for (name, max) in limits {
        item.insert((*name).to_owned(), AttributeValue::N(max.to_string()));
    }
    db.put_item()
        .table_name(required_env("MEMORY_TABLE"))
        .set_item(Some(item))
        .send()
        .await
        .unwrap_or_else(|e| panic!("put limits: {e:?}"));
}

/// A counter's `n` (absent: 0).
async fn counter(db: &aws_sdk_dynamodb::Client, pk: &str, sk: &str) -> i64 {
    let out = db
        .get_item()
        .table_name(required_env("MEMORY_TABLE"))
        .key("pk", AttributeValue::S(pk.to_owned()))
        .key("sk", AttributeValue::S(sk.to_owned()))
        .consistent_read(true)
        .send()
        .await
        .unwrap_or_else(|e| panic!("get counter: {e:?}"));
    out.item()
        .and_then(|i| i.get("n"))
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Entry items stored in a ref's partition now.
async fn stored_entries(db: &aws_sdk_dynamodb::Client, r: &str) -> usize {
    let pk = r
        .strip_prefix("workspaces/")
        .and_then(|rest| rest.strip_suffix("/memories"))
        .map(|rest| rest.replace("/agents/", "#"))
        .expect("ref");
    let out = db
        .query()
        .table_name(required_env("MEMORY_TABLE"))
        .key_condition_expression("pk = :pk AND begins_with(sk, :e)")
        .expression_attribute_values(":pk", AttributeValue::S(pk))
        .expression_attribute_values(":e", AttributeValue::S("E#".to_owned()))
        .consistent_read(true)
        .send()
        .await
        .unwrap_or_else(|e| panic!("query: {e:?}"));
    out.items().len()
}

fn ref_pk(tenant: &str, agent: &str) -> String {
    format!("{tenant}#{agent}")
}

/// A fresh tenant (named after `label`) whose `agent-1` ref may hold at most `max` entries: the
/// tenant, the ref, and the ref's counter partition.
async fn ref_limited_to(
    db: &aws_sdk_dynamodb::Client,
    label: &str,
    max: u64,
) -> (String, String, String) {
    let t = tenant(label);
    set_limits(db, &t, &[("MaxEntriesPerRef", max)]).await;
    let r = memory_ref(&t, "agent-1");
    let pk = ref_pk(&t, "agent-1");
    (t, r, pk)
}

fn quota_pk(tenant: &str) -> String {
    format!("{tenant}#@quota")
}

fn put(tenant: &str, r: &str, entries: Value) -> Value {
    json!({"op": "put", "tenantId": tenant, "memoryRef": r, "entries": entries})
}

/// What the race's requests got: how many were accepted, and every refusal.
struct Tally {
    accepted: usize,
    refused: Vec<Value>,
}

impl Tally {
    fn of(outcomes: Vec<Outcome>) -> Tally {
        let mut tally = Tally {
            accepted: 0,
            refused: Vec::new(),
        };
        for outcome in outcomes {
            match outcome {
                Outcome::Response(_) => tally.accepted += 1,
                Outcome::Error(e) => tally.refused.push(e),
            }
        }
        tally
    }
}

/// `requests` spread over the processes, each process running its share one after another
/// and all processes at once: eight concurrent callers.
async fn race(processes: &[LambdaProcess], requests: Vec<Value>) -> Vec<Outcome> {
    let mut shares: Vec<Vec<Value>> = vec![Vec::new(); processes.len()];
    for (i, r) in requests.into_iter().enumerate() {
        shares[i % processes.len()].push(r);
    }
    let runs = processes.iter().zip(shares).map(|(p, share)| {
        Box::pin(async move {
            let mut outcomes = Vec::new();
            for r in share {
                outcomes.push(p.invoke(&r).await);
            }
            outcomes
        })
    });
    join_all(runs.collect())
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Polls every future together until all are done (the callers run side by side).
async fn join_all<F: std::future::Future + Unpin>(mut futures: Vec<F>) -> Vec<F::Output> {
    let mut results: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in futures.iter_mut().enumerate() {
            if results[i].is_none() {
                match std::pin::Pin::new(f).poll(cx) {
                    std::task::Poll::Ready(v) => results[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    results.into_iter().flatten().collect()
}

/// Every refusal is `rate_limited`, names the quota with its numbers, and carries the retry
/// hint direct invokes carry.
fn assert_refusals(refused: &[Value], quota: &str, max: u64) {
    for e in refused {
        assert_eq!(e["errorType"], "rate_limited", "{e}");
        let message = e["errorMessage"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!("quota {quota} reached: {max} of at most {max}")),
            "{message}"
        );
        assert!(message.contains("(retryAfterSeconds: "), "{message}");
    }
}

async fn writers() -> Vec<LambdaProcess> {
    let mut processes = Vec::with_capacity(WRITERS);
    for _ in 0..WRITERS {
        processes.push(LambdaProcess::start("memory-write", &[]).await);
    }
    processes
}

/// Waits, when the minute is about to turn, for the next one: a windowed race must happen
/// inside one minute to be counted against one limit.
async fn inside_one_minute() {
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() % 60)
        .unwrap_or(0);
    if second > 40 {
        tokio::time::sleep(Duration::from_secs(61 - second)).await;
    }
}

#[tokio::test]
async fn entries_per_ref_and_bytes_per_tenant_are_reached_exactly_by_eight_writers() {
    let db = dynamo().await;
    let writers = writers().await;

    // Entries per ref: 20 allowed of 32 single-entry puts.
    let (t, r, pk) = ref_limited_to(&db, "quota-entries", 20).await;
    let other = tenant("quota-neighbour");
    let requests = (0..32)
        .map(|i| put(&t, &r, json!([{"content": format!("fact {i:02}")}])))
        .collect();
    let tally = Tally::of(race(&writers, requests).await);
    assert_eq!(tally.accepted, 20, "refused: {:?}", tally.refused);
    assert_eq!(tally.refused.len(), 12);
    assert_refusals(&tally.refused, "MaxEntriesPerRef", 20);
    assert_eq!(stored_entries(&db, &r).await, 20);
    assert_eq!(counter(&db, &pk, "Q#entries").await, 20);
    assert_eq!(counter(&db, &quota_pk(&t), "Q#entries").await, 20);
    assert_eq!(counter(&db, &quota_pk(&t), "Q#bytes").await, 20 * 7);
    // Another ref of the same tenant has its own count.
    let r2 = memory_ref(&t, "agent-2");
    writers[0]
        .respond(&put(&t, &r2, json!([{"content": "elsewhere"}])))
        .await;
    // Another tenant, on the same functions, keeps writing while this one is over quota.
    let ro = memory_ref(&other, "agent-1");
    let neighbour = Tally::of(
        race(
            &writers,
            (0..16)
                .map(|i| put(&other, &ro, json!([{"content": format!("n {i}")}])))
                .collect(),
        )
        .await,
    );
    assert_eq!((neighbour.accepted, neighbour.refused.len()), (16, 0));
    // The same 21st write is refused again.
    let again = writers[3]
        .invoke(&put(&t, &r, json!([{"content": "one more"}])))
        .await
        .error();
    assert_refusals(&[again], "MaxEntriesPerRef", 20);

    // Bytes per tenant: 10-byte entries into four refs against 100 bytes: 10 allowed of 24.
    let tb = tenant("quota-bytes");
    set_limits(&db, &tb, &[("MaxBytesPerTenant", 100)]).await;
    let requests = (0..24)
        .map(|i| {
            let r = memory_ref(&tb, &format!("agent-{}", i % 4));
            put(
                &tb,
                &r,
                json!([{"content": format!("ten bytes{}", i % 10)}]),
            )
        })
        .collect();
    let tally = Tally::of(race(&writers, requests).await);
    assert_eq!(tally.accepted, 10, "refused: {:?}", tally.refused);
    assert_refusals(&tally.refused, "MaxBytesPerTenant", 100);
    assert_eq!(counter(&db, &quota_pk(&tb), "Q#bytes").await, 100);
    // A put bigger than the whole limit is refused even on an empty counter.
    let tiny = tenant("quota-tiny");
    set_limits(&db, &tiny, &[("MaxBytesPerTenant", 4)]).await;
    let big = writers[1]
        .invoke(&put(
            &tiny,
            &memory_ref(&tiny, "a"),
            json!([{"content": "12345"}]),
        ))
        .await
        .error();
    assert_eq!(big["errorType"], "rate_limited");
    assert!(
        big["errorMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("quota MaxBytesPerTenant reached: 0 of at most 4")),
        "{big}"
    );
}

#[tokio::test]
async fn writes_and_searches_per_minute_are_reached_exactly() {
    let db = dynamo().await;
    let writers = writers().await;
    let mut readers = Vec::with_capacity(WRITERS);
    for _ in 0..WRITERS {
        readers.push(LambdaProcess::start("memory-read", &[]).await);
    }
    let t = tenant("quota-rate");
    let r = memory_ref(&t, "agent-1");
    set_limits(
        &db,
        &t,
        &[("MaxWritesPerMinute", 10), ("MaxSearchesPerMinute", 12)],
    )
    .await;

    inside_one_minute().await;
    let requests = (0..24)
        .map(|i| {
            put(
                &t,
                &r,
                json!([{"content": format!("w {i}")}, {"content": "x"}]),
            )
        })
        .collect();
    let tally = Tally::of(race(&writers, requests).await);
    assert_eq!(tally.accepted, 10, "refused: {:?}", tally.refused);
    assert_refusals(&tally.refused, "MaxWritesPerMinute", 10);
    assert_eq!(stored_entries(&db, &r).await, 20, "a write is a request");

    inside_one_minute().await;
    let search = |i: usize| {
        event(&HttpEvent {
            method: "GET",
            path: "/v1/host/wop-memory/search",
            query: &[
                ("memoryRef", r.as_str()),
                ("q", if i.is_multiple_of(2) { "w" } else { "x" }),
            ],
            claims: Some(json!({"tenant_id": t, "sub": "user-1"})),
            body: None,
        })
    };
    let outcomes = race(&readers, (0..24).map(search).collect()).await;
    let statuses: Vec<u64> = outcomes
        .into_iter()
        .map(|o| o.response()["statusCode"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        12,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        12,
        "{statuses:?}"
    );
    // The counter is the authority: exactly the limit was charged, nothing beyond.
    let minute = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 60)
        .unwrap_or(0);
    let charged = counter(&db, &quota_pk(&t), &format!("Q#searches#{minute}")).await;
    assert_eq!(charged, 12);
    let refused = readers[0].respond(&search(0)).await;
    assert_eq!(refused["statusCode"], 429);
    let retry: u64 = refused["headers"]["retry-after"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("Retry-After");
    assert!((1..=60).contains(&retry), "{retry}");
    let body: Value = serde_json::from_str(refused["body"].as_str().unwrap_or("{}")).expect("json");
    assert_eq!(body["error"], "rate_limited");
    assert_eq!(
        body["message"],
        "quota MaxSearchesPerMinute reached: 12 of at most 12 searches this minute"
    );
    assert_eq!(body["details"]["retryAfterSeconds"], retry);
    let logs = readers[0].logs();
    assert!(
        logs.contains("\"QuotaRefused\":1") && logs.contains("\"quota\":\"MaxSearchesPerMinute\""),
        "the refusal metric is in the EMF log"
    );
}

#[tokio::test]
async fn counters_return_after_delete_forget_and_consolidation_and_limits_change_live() {
    let db = dynamo().await;
    let writer = LambdaProcess::start("memory-write", &[]).await;
    let forget = LambdaProcess::start("memory-forget", &[]).await;
    let consolidate = LambdaProcess::start("memory-consolidate", &[]).await;
    let (t, r, pk) = ref_limited_to(&db, "quota-return", 5).await;

    let out = writer
        .respond(&put(
            &t,
            &r,
            json!([
                {"content": "alice likes tea", "subject": "alice"},
                {"content": "alice moved", "subject": "alice"},
                {"content": "Prefers email follow-up", "tier": "long-term"},
                {"content": "prefers email follow-up.", "tier": "long-term"},
                {"content": "plain"}
            ]),
        ))
        .await;
    let ids: Vec<String> = out["written"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|w| w["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(counter(&db, &pk, "Q#entries").await, 5);
    let full = writer
        .invoke(&put(&t, &r, json!([{"content": "sixth"}])))
        .await
        .error();
    assert_eq!(full["errorType"], "rate_limited");
    // The writer's log carries the pressure event of the put that reached the limit.
    assert!(writer.logs().contains("\"QuotaNearLimit\":1"));

    // Delete: one back.
    let deleted = writer
        .respond(&json!({"op": "delete", "tenantId": t, "memoryRef": r, "id": ids[4]}))
        .await;
    assert_eq!(deleted["deleted"], true);
    assert_eq!(counter(&db, &pk, "Q#entries").await, 4);

    // Forget: both of alice's entries back.
    let e = event(&HttpEvent {
        method: "POST",
        path: "/v1/host/wop-memory/forget",
        query: &[],
        claims: Some(json!({"tenant_id": t})),
        body: Some(&json!({"subject": "alice"}).to_string()),
    });
    assert_eq!(forget.respond(&e).await["statusCode"], 200);
    assert_eq!(counter(&db, &pk, "Q#entries").await, 2);

    // Consolidation merges the two near-duplicates into one.
    let pass = consolidate
        .respond(&json!({"tenantId": t, "memoryRef": r}))
        .await;
    assert_eq!(pass["mergesApplied"], 1, "{pass}");
    assert_eq!(stored_entries(&db, &r).await, 1);
    assert_eq!(counter(&db, &pk, "Q#entries").await, 1);
    assert_eq!(counter(&db, &quota_pk(&t), "Q#entries").await, 1);

    // Room for exactly four more.
    let refill = writer
        .respond(&put(
            &t,
            &r,
            json!([{"content": "a"}, {"content": "b"}, {"content": "c"}, {"content": "d"}]),
        ))
        .await;
    assert_eq!(refill["written"].as_array().map(Vec::len), Some(4));
    let full = writer
        .invoke(&put(&t, &r, json!([{"content": "e"}])))
        .await
        .error();
    assert_eq!(full["errorType"], "rate_limited");

    // The operator raises the limit: within the cache period the same function takes it.
    set_limits(&db, &t, &[("MaxEntriesPerRef", 6)]).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(75);
    loop {
        match writer.invoke(&put(&t, &r, json!([{"content": "e"}]))).await {
            Outcome::Response(_) => break,
            Outcome::Error(e) => {
                assert_eq!(e["errorType"], "rate_limited");
                assert!(
                    std::time::Instant::now() < deadline,
                    "the new limit never applied"
                );
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
    assert_eq!(counter(&db, &pk, "Q#entries").await, 6);
    assert_eq!(stored_entries(&db, &r).await, 6);
}

#[tokio::test]
async fn a_consolidation_pass_recounts_what_ttl_expiry_removed() {
    let db = dynamo().await;
    let writer = LambdaProcess::start("memory-write", &[]).await;
    let consolidate = LambdaProcess::start("memory-consolidate", &[]).await;
    let (t, r, pk) = ref_limited_to(&db, "quota-ttl", 3).await;
    let soon = rfc3339(now_ms() + 2_000);
    writer
        .respond(&put(
            &t,
            &r,
            json!([
                {"content": "short lived one", "expiresAt": soon},
                {"content": "short lived two", "expiresAt": soon},
                {"content": "kept"}
            ]),
        ))
        .await;
    assert_eq!(counter(&db, &pk, "Q#entries").await, 3);
    tokio::time::sleep(Duration::from_secs(4)).await;
    // Expired but not yet deleted by TTL: still counted, so still refused.
    let refused = writer
        .invoke(&put(&t, &r, json!([{"content": "new"}])))
        .await
        .error();
    assert_eq!(refused["errorType"], "rate_limited");

    consolidate
        .respond(&json!({"tenantId": t, "memoryRef": r}))
        .await;
    assert_eq!(counter(&db, &pk, "Q#entries").await, 1);
    assert_eq!(counter(&db, &pk, "Q#bytes").await, 4);
    assert_eq!(counter(&db, &quota_pk(&t), "Q#entries").await, 1);
    assert_eq!(counter(&db, &quota_pk(&t), "Q#bytes").await, 4);
    let room = writer
        .respond(&put(
            &t,
            &r,
            json!([{"content": "new"}, {"content": "newer"}]),
        ))
        .await;
    assert_eq!(room["written"].as_array().map(Vec::len), Some(2));
    // A second pass finds the counters right and changes nothing.
    consolidate
        .respond(&json!({"tenantId": t, "memoryRef": r}))
        .await;
    assert_eq!(counter(&db, &pk, "Q#entries").await, 3);
}

/// Entry items of a ref stored now, and how many of them carry a vector.
async fn embedded_entries(db: &aws_sdk_dynamodb::Client, t: &str, agent: &str) -> (usize, usize) {
    let out = db
        .query()
        .table_name(required_env("MEMORY_TABLE"))
        .key_condition_expression("pk = :pk AND begins_with(sk, :e)")
        .expression_attribute_values(":pk", AttributeValue::S(ref_pk(t, agent)))
        .expression_attribute_values(":e", AttributeValue::S("E#".to_owned()))
        .consistent_read(true)
        .send()
        .await
        .unwrap_or_else(|e| panic!("query: {e:?}"));
    let with_vector = out
        .items()
        .iter()
        .filter(|i| i.contains_key("embedding"))
        .count();
    (with_vector, out.items().len())
}

/// `MaxBedrockTokensPerDay` through the real binaries and the local embedding stand-in
/// (docs/quotas.md "Bedrock tokens"): one writer at a time, the call that crosses the limit
/// completes and the next is refused (the entry stored without a vector); eight writers at once
/// never charge a refused call and pass the limit by at most the calls admitted side by side;
/// the embed pass defers the tenant's work until the limit is raised, with no redeploy; another
/// tenant's embeddings go on all along.
#[tokio::test]
async fn bedrock_tokens_per_day_stop_embeddings_and_the_embed_pass_defers() {
    let standin = e2e::bedrock_standin::BedrockStandIn::start("embedder");
    let env = [
        ("EMBEDDING_MODEL_ID", "amazon.titan-embed-text-v2:0"),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", standin.url()),
    ];
    let db = dynamo().await;
    let mut writers = Vec::with_capacity(WRITERS);
    for _ in 0..WRITERS {
        writers.push(LambdaProcess::start("memory-write", &env).await);
    }
    let text = "the customer asked for the march invoice again";
    let one = |t: &str| put(t, &memory_ref(t, "agent-1"), json!([{"content": text}]));
    let tokens = |t: String| {
        let db = db.clone();
        async move {
            counter(
                &db,
                &quota_pk(&t),
                &format!("Q#tokens#{}", utc_date(now_ms())),
            )
            .await
        }
    };

    // What one call of this text costs, on a tenant whose limit is never reached.
    let probe = tenant("tokens-probe");
    set_limits(&db, &probe, &[("MaxBedrockTokensPerDay", 1_000_000)]).await;
    writers[0].respond(&one(&probe)).await;
    let per_call = tokens(probe.clone()).await;
    assert!(per_call > 0, "the stand-in counts tokens");

    // One writer: limit 2 calls + 1 token: the third call crosses it, the fourth is refused.
    let t = tenant("tokens-serial");
    let limit = 2 * per_call + 1;
    set_limits(&db, &t, &[("MaxBedrockTokensPerDay", limit as u64)]).await;
    for _ in 0..5 {
        writers[1].respond(&one(&t)).await;
    }
    assert_eq!(embedded_entries(&db, &t, "agent-1").await, (3, 5));
    assert_eq!(tokens(t.clone()).await, 3 * per_call);
    let logs = writers[1].logs();
    assert!(
        logs.contains("\"QuotaRefused\":1") && logs.contains("MaxBedrockTokensPerDay"),
        "the refusal is a metric"
    );

    // Eight writers at once, and a neighbour beside them.
    let racing = tenant("tokens-race");
    let neighbour = tenant("tokens-neighbour");
    let limit = 5 * per_call + 1;
    set_limits(&db, &racing, &[("MaxBedrockTokensPerDay", limit as u64)]).await;
    set_limits(&db, &neighbour, &[("MaxBedrockTokensPerDay", 1_000_000)]).await;
    let requests = (0..24)
        .map(|i| {
            if i % 3 == 2 {
                one(&neighbour)
            } else {
                one(&racing)
            }
        })
        .collect();
    let tally = Tally::of(race(&writers, requests).await);
    assert_eq!(
        (tally.accepted, tally.refused.len()),
        (24, 0),
        "a refused embedding never refuses the put"
    );
    // On a loaded machine a call can also miss the write's 3 s embedding budget, and the write
    // then drops it: before admission (neither charged nor embedded), or after the model
    // answered and its tokens were charged (charged, the entry stored without its vector, for the
    // embed pass). So the calls charged, not the vectors stored, are what the limit bounds; both
    // bounds hold whatever the load, and the lower one is exact once a refusal shows the counter
    // reached the limit.
    let refusals = |t: &str| {
        writers
            .iter()
            .map(|w| {
                w.logs()
                    .lines()
                    .filter(|l| l.contains("\"QuotaRefused\":1") && l.contains(t))
                    .count()
            })
            .sum::<usize>()
    };
    let (embedded, stored) = embedded_entries(&db, &racing, "agent-1").await;
    assert_eq!(stored, 16);
    let spent = tokens(racing.clone()).await;
    assert_eq!(
        spent % per_call,
        0,
        "{spent}: every charged call charged in full"
    );
    let charged = usize::try_from(spent / per_call).unwrap_or(usize::MAX);
    assert!(
        charged >= embedded,
        "{charged} < {embedded}: a vector stored uncharged"
    );
    assert!(
        charged < 6 + WRITERS,
        "{charged}: at most seven calls admitted beside the six the limit admits"
    );
    let refused = refusals(&racing);
    assert!(refused + charged <= 16, "a refused call is never charged");
    if refused > 0 {
        assert!(charged >= 6, "{charged}: refused before the limit");
    }
    let (neighbour_embedded, neighbour_stored) = embedded_entries(&db, &neighbour, "agent-1").await;
    assert_eq!(neighbour_stored, 8);
    assert_eq!(refusals(&neighbour), 0, "another tenant is never refused");
    assert_eq!(
        tokens(neighbour.clone()).await,
        neighbour_embedded as i64 * per_call
    );

    // The embed pass: refused at admission while the day is spent, then, once the operator
    // raises the limit, a new container gives the rest their vectors.
    let pass = json!({"tenantId": t, "memoryRef": memory_ref(&t, "agent-1"), "pass": "embed"});
    let dream = LambdaProcess::start("memory-dream", &env).await;
    let report = dream.respond(&pass).await;
    assert_eq!(
        (report["embedded"].as_u64(), report["pending"].as_bool()),
        (Some(0), Some(true)),
        "{report}"
    );
    assert!(dream.logs().contains("\"QuotaRefused\":1"));
    assert_eq!(tokens(t.clone()).await, 3 * per_call, "no model call");
    set_limits(&db, &t, &[("MaxBedrockTokensPerDay", 0)]).await;
    let dream = LambdaProcess::start("memory-dream", &env).await;
    let report = dream.respond(&pass).await;
    assert_eq!(report["embedded"].as_u64(), Some(2), "{report}");
    assert_eq!(embedded_entries(&db, &t, "agent-1").await, (5, 5));
}
