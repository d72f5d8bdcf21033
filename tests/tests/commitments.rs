//! Inferred commitments end to end: real `memory.written` events (read back from the bus)
//! delivered to the real `memory-commitments` binary, predicate fires, a time commitment fired
//! by two concurrent ticks exactly once, and content-free `commitment.fired` events.

use std::time::{Duration, Instant};

use aws_test_support::{emulator_config, of_type, EventTap};
use e2e::{memory_ref, tenant, LambdaProcess};
use serde_json::json;

#[tokio::test]
async fn commitments_are_inferred_and_fire_once() {
    let sdk = emulator_config().await;
    let t = tenant("e2e-cmt");
    let r = memory_ref(&t, "agent-1");
    let tap = EventTap::for_tenant(&sdk, &t).await;
    let write = LambdaProcess::start("memory-write", &[]).await;
    let commitments = LambdaProcess::start("memory-commitments", &[]).await;
    let commitments_2 = LambdaProcess::start("memory-commitments", &[]).await;

    let started = Instant::now();
    write
        .respond(
            &json!({"op": "put", "tenantId": t, "memoryRef": r, "entries": [
                {"content": "Remind me in a minute to check the oven"},
                {"content": "Follow up with Dana when the invoice clears"},
                {"content": "The invoice was sent on 2026-11-02"}
            ]}),
        )
        .await;
    let written = tap.collect(3, Duration::from_secs(20)).await;
    assert_eq!(of_type(&written, "memory.written").len(), 3);
    let mut inferred = 0;
    for event in &written {
        let report = commitments.respond(event).await;
        inferred += report["inferred"].as_u64().unwrap_or(0);
    }
    assert_eq!(
        inferred, 2,
        "one time and one predicate commitment; the plain statement gives none"
    );
    // A duplicate delivery infers nothing new and fires nothing.
    let again = commitments.respond(&written[0]).await;
    assert_eq!(
        (again["inferred"].clone(), again["fired"].clone()),
        (json!(0), json!(0))
    );

    // The predicate becomes true.
    write
        .respond(&json!({"op": "put", "tenantId": t, "memoryRef": r,
            "entries": [{"content": "Payment settled", "tags": ["when:invoice-clears"]}]}))
        .await;
    let settled = tap.collect(1, Duration::from_secs(20)).await;
    let report = commitments.respond(&settled[0]).await;
    assert_eq!(report["fired"], 1, "{report}");
    let duplicate = commitments.respond(&settled[0]).await;
    assert_eq!(
        duplicate["fired"], 0,
        "a duplicate delivery does not fire twice"
    );

    // The time commitment: pairs of concurrent ticks, from its instant on, fire it once in all.
    // (Polling, not a fixed sleep: its instant is the write's createdAt + 60 s.)
    tokio::time::sleep(Duration::from_secs(60).saturating_sub(started.elapsed())).await;
    let tick = json!({"action": "tick"});
    let mut fired_total = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while fired_total == 0 && Instant::now() < deadline {
        let (a, b) = tokio::join!(commitments.invoke(&tick), commitments_2.invoke(&tick));
        let (a, b) = (a.response(), b.response());
        fired_total += a["fired"].as_u64().unwrap_or(9) + b["fired"].as_u64().unwrap_or(9);
        if fired_total == 0 {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    assert_eq!(fired_total, 1, "two concurrent ticks fire it exactly once");
    let later = commitments.respond(&tick).await;
    assert_eq!(later["fired"], 0);

    let events = tap.finish(4).await;
    let fired = of_type(&events, "commitment.fired");
    assert_eq!(fired.len(), 2, "{events:?}");
    let kinds: Vec<&str> = fired
        .iter()
        .filter_map(|e| e["detail"]["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"time") && kinds.contains(&"predicate"));
    let runs = of_type(&events, "run.requested");
    assert_eq!(runs.len(), 2);
    for e in fired.iter().chain(runs.iter()) {
        assert_eq!(
            e["detail"]["tenantId"],
            t.as_str(),
            "same tenant as the memory"
        );
        assert_eq!(e["detail"]["memoryRef"], r.as_str());
    }
    let text = serde_json::to_string(&events).unwrap_or_default();
    for word in ["oven", "Dana", "invoice", "Remind"] {
        assert!(!text.contains(word), "{word} leaked into events");
        assert!(
            !commitments.logs().contains(word),
            "{word} leaked into logs"
        );
    }
}
