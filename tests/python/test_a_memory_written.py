"""`memory.written` (RFC 0057) as the official client reads it: one event per entry, each passing
the client's `is_memory_written`, carrying the ids the put returned and the write attribution,
and no entry content, subject or secret."""

from __future__ import annotations

import json

from openwop_client import RunEventDoc
from openwop_client.events import is_memory_written, memory_written_payload

from wopkit import leaks, memory_ref, new_id, of_type, run_event, secret_value, sensitive


def test_a_put_of_three_entries_emits_three_memory_written_events(api, invoker, tap, tenant):
    ref = memory_ref(tenant, "agent-written")
    key = secret_value("stripe")
    subject = sensitive(f"subject-{new_id()}@example.com")
    contents = [sensitive(f"Customer {n} prefers a call back after 5pm {new_id()}")
                for n in range(3)]
    entries = [
        {"content": f"{contents[0]}; api key {key}", "tags": ["preference", f"key:{key}"],
         "subject": subject},
        {"content": contents[1], "tags": ["contact"]},
        {"content": contents[2], "tags": ["billing", "vip"], "tier": "long-term"},
    ]
    ids = invoker.put(tenant, ref, entries,
                      secrets=[{"secretId": "stripe-key", "value": key}],
                      run_id="run-py-written",
                      attribution={"nodeId": "node-py-7", "agentId": "agent-written"})
    expected_tags = {
        ids[0]: ["preference", "key:[REDACTED:stripe-key]"],
        ids[1]: ["contact"],
        ids[2]: ["billing", "vip"],
    }
    # Positive control: the stored entries carry exactly these (redacted) tags.
    for entry_id, tags in expected_tags.items():
        assert api.get(ref, entry_id)["tags"] == tags

    events = tap.wait(of_type("memory.written", ref), 3)
    assert len(events) == 3, f"exactly one memory.written per entry: {json.dumps(events)}"
    docs = [run_event(e) for e in events]
    seen = []
    for doc in docs:
        assert isinstance(doc, RunEventDoc)
        assert is_memory_written(doc), f"the client does not accept it: {doc!r}"
        payload = memory_written_payload(doc)
        assert payload is not None
        seen.append(payload["memoryId"])
        assert payload["memoryRef"] == ref
        assert payload.get("nodeId") == "node-py-7", payload
        assert payload.get("agentId") == "agent-written", payload
        assert payload.get("runId") == "run-py-written", payload
        assert doc.runId == "run-py-written"
        assert payload.get("tags") == expected_tags[payload["memoryId"]], payload
        assert doc.eventId, "a deterministic eventId for consumer de-duplication"
    assert sorted(seen) == sorted(ids), "memoryIds are the ids the put returned"
    assert len({d.eventId for d in docs}) == 3

    text = json.dumps(events)
    assert not leaks(text), f"events carry registered content: {leaks(text)}"
    for s in [*contents, subject, key]:
        assert s not in text
