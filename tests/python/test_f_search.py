"""Ranked text search through the real functions and the official client (docs/search.md "Ranked
text search"): rare terms first, tags respected, deterministic, read-your-writes, and never an
expired, deleted, forgotten or other tenant's entry."""

from __future__ import annotations

import time
from typing import Any

from wopkit import BASE, Api, Invoker, ids, memory_ref, new_id, query, rfc3339_in, search, sensitive



def test_search_ranks_filters_and_is_deterministic(api: Api, invoker: Invoker, tenant: str):
    ref = memory_ref(tenant, f"search-{new_id()}")
    rare = f"zephyr{new_id()[-6:].lower()}"
    texts = [
        ("Customer asked about a refund for order 1042", ["billing"]),
        (f"The {rare} contract renews in March", ["contract"]),
        ("Customer prefers email follow-up", ["preference"]),
        ("Rendez-vous au café à Montréal", []),
        ("会议在东京举行", ["travel"]),
        ("Refunds are processed within 5 days", ["billing", "policy"]),
    ]
    written = invoker.put(tenant, ref, [{"content": sensitive(t), "tags": tags} for t, tags in texts])
    # Read-your-writes: the entries just written are found by the next search.
    assert ids(search(api, ref, rare)) == [written[1]]
    assert ids(search(api, ref, "cafe montreal")) == [written[3]]
    assert ids(search(api, ref, "东京")) == [written[4]]
    refunds = search(api, ref, "refunds")
    assert sorted(ids(refunds)) == sorted([written[0], written[5]])
    assert refunds[0]["score"] >= refunds[1]["score"] > 0
    # Without stemming only the literal word matches.
    assert ids(search(api, ref, "refunds", ("stem", "false"))) == [written[5]]
    assert ids(search(api, ref, "refund", ("tag", "policy"))) == [written[5]]
    assert ids(search(api, ref, "customer", ("limit", "1"))) in ([written[0]], [written[2]])
    assert search(api, ref, "customer refund") == search(api, ref, "customer refund")
    # A delete takes effect on the next query.
    assert invoker.ok("memory-write", {"op": "delete", "tenantId": tenant, "memoryRef": ref,
                                       "id": written[1]}) == {"deleted": True}
    assert search(api, ref, rare) == []


def test_search_never_shows_expired_forgotten_or_foreign_entries(api: Api, invoker: Invoker,
                                                                 tenant: str, base_url: str):
    ref = memory_ref(tenant, f"searchx-{new_id()}")
    word = f"quokka{new_id()[-6:].lower()}"
    subject = sensitive(f"subject-{new_id()}")
    [short] = invoker.put(tenant, ref, [{"content": f"{word} short-lived",
                                          "expiresAt": rfc3339_in(2)}])
    [kept, forgotten] = invoker.put(tenant, ref, [
        {"content": f"{word} kept"}, {"content": f"{word} about the subject", "subject": subject}])
    assert set(ids(search(api, ref, word))) == {short, kept, forgotten}, "positive control"
    time.sleep(2.5)
    assert set(ids(search(api, ref, word))) == {kept, forgotten}
    api.forget(subject)
    assert ids(search(api, ref, word)) == [kept]
    intruder = Api(base_url, tenant=f"intruder-{new_id()}")
    assert search(intruder, ref, word) == []
    assert search(api, "workspaces/../memories", word) == []
    for params, field in (([("memoryRef", ref)], "q"), ([("memoryRef", ref), ("q", " ")], "q"),
                          ([("memoryRef", ref), ("q", "x" * 1025)], "q"),
                          ([("memoryRef", ref), ("q", word), ("stem", "yes")], "stem")):
        err = api.error("GET", f"{BASE}/search?{query(params)}", status=400,
                        code="validation_error")
        assert (err.envelope.details or {}).get("field") == field, err.raw_text


def test_search_through_the_index_answers_what_the_scan_answered(api: Api, invoker: Invoker,
                                                                  tenant: str):
    """docs/search.md "The index": memory-dream's index pass builds a ref's segments; searches
    then read them (and the change records since) and answer exactly what the full scan of the
    same entries answered, a write is found and a delete is gone at once, and a forget leaves
    the index without the forgotten entry."""
    ref = memory_ref(tenant, f"indexed-{new_id()}")
    word = f"wombat{new_id()[-6:].lower()}"
    subject = sensitive(f"subject-{new_id()}")
    texts = [f"{word} invoice {i} for order {1000 + i}" if i % 3 else f"payment reminder {i}"
             for i in range(24)]
    written = invoker.put(tenant, ref, [{"content": sensitive(t), "tags": ["billing"] if i % 2
                                         else []} for i, t in enumerate(texts)])
    [private] = invoker.put(tenant, ref, [{"content": f"{word} private note", "subject": subject}])
    queries = [(word,), ("invoice order",), ("payment reminder",), (word, ("tag", "billing")),
               ("invoice", ("limit", "3"))]

    def answers() -> list[list[tuple[str, float]]]:
        return [[(h["entry"]["id"], h["score"]) for h in search(api, ref, q[0], *q[1:])]
                for q in queries]

    scanned = answers()
    assert all(scanned), "positive control: every query finds something"
    run = {"tenantId": tenant, "memoryRef": ref, "pass": "index"}
    built = invoker.ok("memory-dream", run)
    assert (built["status"], built["segments"], built["documents"]) == ("built", 1, 25), built
    assert answers() == scanned, "the index ranks as the scan did"
    # Read-your-writes and deletes through the index's tail, before any pass folds them.
    [late] = invoker.put(tenant, ref, [{"content": f"{word} late invoice"}])
    assert late in ids(search(api, ref, f"{word} late"))
    assert invoker.ok("memory-write", {"op": "delete", "tenantId": tenant, "memoryRef": ref,
                                       "id": written[1]}) == {"deleted": True}
    assert written[1] not in ids(search(api, ref, word, ("limit", "50")))
    folded = invoker.ok("memory-dream", run)
    assert folded["status"] in ("folded", "merged") and folded["changes"] == 2, folded
    assert invoker.ok("memory-dream", run)["status"] == "unchanged", "a duplicate finds nothing"
    after = ids(search(api, ref, word, ("limit", "50")))
    assert late in after and written[1] not in after and private in after
    api.forget(subject)
    assert private not in ids(search(api, ref, word, ("limit", "50")))
