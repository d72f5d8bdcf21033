"""The OpenIntent door (RFC-0015 agent memory) end to end: `memory-intent` behind its Lambda
authorizer `memory-intent-auth`, run by `target/debug/local_gateway` against the emulator, driven
by the official `openintent` client (sync `OpenIntentClient` and async `AsyncOpenIntentClient`).

Every assertion about the wire goes through the client's own functions and types: its methods,
`MemoryEntry.from_dict`, `_handle_response` and the exceptions it raises. Where the client cannot
express a request (a PATCH without If-Match, list filters it has no parameter for, the archive
route) the request goes through the client's own `httpx` session (`client._client`, which carries
`X-API-Key` / `X-Agent-ID`) and its answer through the client's `_handle_response`.

Three gateways are used: the session's (default limits, its logs checked by test_zz_hygiene), and
two "small" ones sharing one environment (episodic capacity 5, working capacity 3, 3 versions
kept, a redaction secret, a 1 s authorizer cache) whose logs this module checks itself. Two
processes of `memory-intent` against one emulator make the races real: the local gateway runs one
instance of each function, so one gateway alone would serialise every request.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import pytest
from openintent import AsyncOpenIntentClient, OpenIntentClient
from openintent.exceptions import (ConflictError, NotFoundError, OpenIntentError,
                                   ValidationError)
from openintent.models import (MemoryEntry, MemoryPriority, MemoryScope, MemorySensitivity,
                               MemoryType)

from conftest import assert_no_server_errors, start_gateway
from wopkit import (EventTap, Invoker, aws_client, leaks, new_id, new_tenant, raw_request,
                    sensitive)

EPISODIC_CAP = 5
WORKING_CAP = 3
VERSIONS_KEPT_SMALL = 3
SECRET_ID = "oi-secret"
SECRET = sensitive(f"sk-live-openintent-{new_id()}")
SCOPE_SECRET_ID = "oi-scope-secret"
SCOPE_SECRET = sensitive(f"sk-live-openintent-scope-{new_id()}")
SMALL_ENV = {
    "INTENT_EPISODIC_CAPACITY": str(EPISODIC_CAP),
    "INTENT_WORKING_CAPACITY": str(WORKING_CAP),
    "INTENT_VERSIONS_KEPT": str(VERSIONS_KEPT_SMALL),
    "REDACTION_SECRETS": json.dumps([{"secretId": SECRET_ID, "value": SECRET},
                                     {"secretId": SCOPE_SECRET_ID, "value": SCOPE_SECRET}]),
    "AUTHORIZER_CACHE_SECONDS": "1",
}
EVENT_DETAIL_KEYS = {"tenantId", "agentId", "entryId", "memoryType", "version", "at", "eventId"}


# ---------------------------------------------------------------------------------------------
# Helpers.


def text(label: str) -> str:
    """A fresh, registered value string (letters, digits and dashes only, so it appears verbatim
    in every stored form), free of the substring that turns the client's 409 into a lease
    conflict."""
    out = sensitive(f"oi-{label}-{new_id()}")
    assert "lease" not in out.lower()
    return out


def issue(invoker: Invoker, tenant: str, agents: list[str], days: int = 1) -> str:
    """A fresh API key (registered as sensitive) from the operator's direct invoke."""
    out = invoker.issue_api_key(tenant, agents, expiresInDays=days)
    assert set(out) == {"apiKey", "keyId", "tenantId", "agents", "expiresAt"}, out
    assert out["tenantId"] == tenant and out["agents"] == agents, out
    assert out["apiKey"].startswith("oik_") and out["keyId"] in out["apiKey"], out
    expires = datetime.fromisoformat(out["expiresAt"].replace("Z", "+00:00"))
    expected = datetime.now(timezone.utc) + timedelta(days=days)
    assert abs((expires - expected).total_seconds()) < 120, out
    return out["apiKey"]


def issue_with_id(invoker: Invoker, tenant: str, agents: list[str]) -> tuple[str, str]:
    out = invoker.issue_api_key(tenant, agents, expiresInDays=1)
    return out["apiKey"], out["keyId"]


def call(client: OpenIntentClient, method: str, path: str, **kw: Any) -> Any:
    """A request on the client's own httpx session, answered through its `_handle_response`."""
    return client._handle_response(client._client.request(method, path, **kw))


def raises(exc: type, fn: Callable[[], Any]) -> OpenIntentError:
    """`fn()` must raise exactly `exc` (one of the client's exceptions); returns it, after
    checking that the error body carries no registered value, key or secret."""
    try:
        got = fn()
    except OpenIntentError as err:
        assert type(err) is exc, f"raised {type(err).__name__} ({err.status_code} " \
                                 f"{err.response!r}), expected {exc.__name__}"
        body = json.dumps(err.response)
        assert not leaks(body), f"error body leaks {leaks(body)}"
        return err
    raise AssertionError(f"succeeded, expected {exc.__name__}: {got!r}")


def status(err: OpenIntentError, code: int, error: str | None = None) -> dict[str, Any]:
    assert err.status_code == code, (err.status_code, err.response)
    if error is not None:
        assert isinstance(err.response, dict) and err.response.get("error") == error, \
            err.response
        assert err.response.get("message"), err.response
    return err.response


def list_raw(client: OpenIntentClient, agent: str, **params: Any) -> list[MemoryEntry]:
    """GET /api/v1/agents/{agent}/memory with filters the client's `list_memory` lacks."""
    data = call(client, "GET", f"/api/v1/agents/{agent}/memory", params=params)
    assert isinstance(data, list), data
    return [MemoryEntry.from_dict(m) for m in data]


def versions(client: OpenIntentClient, entry_id: str) -> dict[str, Any]:
    return call(client, "GET", f"/api/v1/memory/{entry_id}/versions")


def archive_route(client: OpenIntentClient, task: str) -> dict[str, Any]:
    return call(client, "POST", f"/api/v1/tasks/{task}/memory:archive")


def at_once(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """`fn(0)` .. `fn(n - 1)` on `n` threads released together: what each returned, or the
    client error it raised."""
    barrier = threading.Barrier(n)

    def run(i: int) -> Any:
        barrier.wait()
        try:
            return fn(i)
        except OpenIntentError as err:
            return err

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def one_winner(results: list[Any], context: Any) -> tuple[MemoryEntry, ConflictError]:
    """Of two racing writes, exactly one succeeded and the other was refused with a 409."""
    wins = [r for r in results if isinstance(r, MemoryEntry)]
    losses = [r for r in results if isinstance(r, ConflictError)]
    assert len(wins) == 1 and len(losses) == 1, (context, results)
    return wins[0], losses[0]


def ts(at: datetime) -> str:
    return at.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def entry_events(tap: EventTap, kind: str, entry_ids: set[str], count: int,
                 timeout: float = 20.0) -> list[dict[str, Any]]:
    def match(e: dict[str, Any]) -> bool:
        return e.get("detail-type") == kind and (e.get("detail") or {}).get("entryId") in entry_ids
    return tap.wait(match, count, timeout=timeout)


def unique_by_event_id(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for e in events:
        out.setdefault(e["detail"]["eventId"], e)
    return out


def table_dump() -> str:
    """Every item of the table, as one JSON text."""
    ddb = aws_client("dynamodb")
    items: list[Any] = []
    for page in ddb.get_paginator("scan").paginate(TableName=os.environ["MEMORY_TABLE"]):
        items.extend(page.get("Items", []))
    return json.dumps(items, default=str)


def bucket_dump(prefix: str) -> dict[str, str]:
    """Every version of every object under `prefix`: `key@version` -> body text."""
    s3 = aws_client("s3")
    bucket = os.environ["ARCHIVE_BUCKET"]
    out: dict[str, str] = {}
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for v in page.get("Versions", []):
            body = s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"]
            out[f"{v['Key']}@{v['VersionId']}"] = body.read().decode("utf-8", "replace")
    return out


# ---------------------------------------------------------------------------------------------
# Fixtures.


class Door:
    """One tenant on one gateway: a `*` key, clients per agent, and an event tap."""

    def __init__(self, base_url: str, invoker: Invoker) -> None:
        self.base_url = base_url
        self.invoker = invoker
        self.tenant = new_tenant()
        self.key = issue(invoker, self.tenant, ["*"])
        self.tap = EventTap(self.tenant)
        self._clients: dict[str, OpenIntentClient] = {}

    def client(self, agent: str, base_url: str | None = None) -> OpenIntentClient:
        url = base_url or self.base_url
        if (agent, url) not in self._clients:
            self._clients[(agent, url)] = OpenIntentClient(url, self.key, agent, timeout=60)
        return self._clients[(agent, url)]

    def close(self) -> None:
        self.tap.close()
        for c in self._clients.values():
            c._client.close()


@pytest.fixture(scope="module")
def door(base_url: str, invoker: Invoker):
    d = Door(base_url, invoker)
    yield d
    d.close()


@pytest.fixture(scope="module")
def other(base_url: str, invoker: Invoker):
    """Another tenant on the session gateway."""
    d = Door(base_url, invoker)
    yield d
    d.close()


@pytest.fixture(scope="module")
def small():
    """Two gateways with small limits, a redaction secret and a 1 s authorizer cache; at the
    end, their function logs must hold no registered value, API key or secret."""
    a = start_gateway("python-e2e-openintent-a", SMALL_ENV)
    b = start_gateway("python-e2e-openintent-b", SMALL_ENV)
    # Positive control for the log checks below: a line each memory-intent writes.
    for gw in (a, b):
        issue(Invoker(gw.base_url), new_tenant(), ["*"])
    yield a, b
    for gw in (a, b):
        logs = gw.stop()
        assert "===== memory-intent =====" in logs and "===== memory-intent-auth =====" in logs
        assert "api key issued" in logs, "memory-intent's log lines were not captured"
        found = leaks(logs)
        assert not found, f"{gw.logs_path.name}: function logs leak {len(found)} registered " \
                          f"strings, e.g. {found[0][:40]!r}"
        assert SECRET not in logs and SCOPE_SECRET not in logs
        assert_no_server_errors(gw)


@pytest.fixture
def small_door(small):
    a, _ = small
    d = Door(a.base_url, Invoker(a.base_url))
    yield d
    d.close()


# ---------------------------------------------------------------------------------------------
# 1. Every client method on every tier; MemoryEntry round trip.


@pytest.mark.parametrize("tier", ["working", "episodic", "semantic"])
def test_every_method_on_every_tier(door: Door, tier: str):
    c = door.client("a1")
    ns = f"billing.{tier}"
    value = {"total": 47, "done": 23, "note": text(f"crud-{tier}"), "nested": {"ok": [1, None]}}
    task = f"task-{new_id()}"
    created = c.create_memory("a1", ns, "progress", value, tier, tags=["batch", "invoices"],
                              scope={"task_id": task, "intent_id": "intent-1"},
                              priority="high", pinned=(tier == "episodic"),
                              sensitivity="confidential", ttl="task_lifetime")
    assert isinstance(created, MemoryEntry)
    prefix = "sem_" if tier == "semantic" else "mem_"
    assert created.id.startswith(prefix) and len(created.id) == 30, created.id
    assert created.agent_id == "a1" and created.namespace == ns and created.key == "progress"
    assert created.value == value
    assert created.memory_type == MemoryType(tier)
    assert created.version == 1
    assert created.scope == MemoryScope(task_id=task, intent_id="intent-1")
    assert created.tags == ["batch", "invoices"]
    assert created.ttl == "task_lifetime" and created.expires_at is None
    assert created.pinned is (tier == "episodic")
    assert created.priority == MemoryPriority.HIGH
    assert created.sensitivity == MemorySensitivity.CONFIDENTIAL
    assert created.curated_by == ("a1" if tier == "semantic" else None)
    assert created.created_at is not None and created.created_at == created.updated_at
    assert abs((datetime.now(timezone.utc) - created.created_at).total_seconds()) < 60

    got = c.get_memory(created.id)
    assert got == created

    listed = c.list_memory("a1", namespace=ns, memory_type=tier)
    assert listed == [created]

    new_value = {"total": 47, "done": 24, "note": text(f"crud2-{tier}")}
    updated = c.update_memory(created.id, 1, value=new_value, tags=["batch", "done"],
                              priority="low", pinned=False, sensitivity="internal")
    assert updated.version == 2 and updated.value == new_value
    assert updated.tags == ["batch", "done"] and updated.priority == MemoryPriority.LOW
    assert updated.pinned is False and updated.sensitivity == MemorySensitivity.INTERNAL
    assert updated.created_at == created.created_at and updated.updated_at >= created.updated_at
    assert (updated.id, updated.namespace, updated.key, updated.scope) == \
        (created.id, created.namespace, created.key, created.scope)
    assert c.get_memory(created.id) == updated

    assert c.delete_memory(created.id) is None
    raises(NotFoundError, lambda: c.get_memory(created.id))
    raises(NotFoundError, lambda: c.delete_memory(created.id))
    raises(NotFoundError, lambda: c.update_memory(created.id, 2, value={"x": 1}))
    assert c.list_memory("a1", namespace=ns) == []
    # Immediate and irreversible, versions included (§9.3): no value of it is left stored.
    table = table_dump()
    assert value["note"] not in table and new_value["note"] not in table

    # The lifecycle events name the entry by id, tier and version only.
    events = door.tap.wait(lambda e: (e.get("detail") or {}).get("entryId") == created.id, 3)
    kinds = sorted(e["detail-type"] for e in unique_by_event_id(events).values())
    assert kinds == ["memory.created", "memory.deleted", "memory.updated"], events
    for e in events:
        d = e["detail"]
        assert e["source"] == "wop-memory"
        expected_keys = EVENT_DETAIL_KEYS | ({"previousVersion"}
                                             if e["detail-type"] == "memory.updated" else set())
        assert set(d) == expected_keys, d
        assert (d["tenantId"], d["agentId"], d["memoryType"]) == (door.tenant, "a1", tier)
        raw = json.dumps(e)
        assert not leaks(raw) and ns not in raw and "progress" not in raw and "invoices" \
            not in raw, raw
    upd = [e for e in events if e["detail-type"] == "memory.updated"][0]["detail"]
    assert (upd["version"], upd["previousVersion"]) == (2, 1)


def test_ttl_and_expiry_round_trip(door: Door):
    c = door.client("a1")
    before = datetime.now(timezone.utc)
    e = c.create_memory("a1", "ttl", "dur", {"v": 1}, "episodic", ttl="duration:PT24H")
    assert e.ttl == "duration:PT24H"
    assert e.expires_at == e.created_at + timedelta(hours=24), (e.created_at, e.expires_at)
    # An absolute expiry takes precedence over the ttl (§1.1).
    at = (before + timedelta(hours=2)).replace(microsecond=123000)
    e2 = c.create_memory("a1", "ttl", "abs", {"v": 2}, "working", ttl="duration:PT1H",
                         expires_at=ts(at))
    assert e2.expires_at == at and e2.ttl == "duration:PT1H"
    assert c.get_memory(e2.id) == e2
    # A PATCH of the ttl recomputes the expiry; null clears both.
    e3 = c.update_memory(e.id, 1, ttl="duration:P1DT2H30M")
    assert e3.expires_at == e3.updated_at + timedelta(days=1, hours=2, minutes=30)
    e4 = c.update_memory(e.id, 2, ttl=None)
    assert e4.ttl is None and e4.expires_at is None
    # An entry that expires becomes invisible, and its key is free again.
    e5 = c.create_memory("a1", "ttl", "short", {"v": 3}, "episodic", ttl="duration:PT1S")
    assert e5.expires_at == e5.created_at + timedelta(seconds=1)
    time.sleep(1.3)
    raises(NotFoundError, lambda: c.get_memory(e5.id))
    assert [x.key for x in c.list_memory("a1", namespace="ttl")] == ["dur", "abs"]
    again = c.create_memory("a1", "ttl", "short", {"v": 4}, "episodic")
    assert again.id != e5.id and again.version == 1


def test_list_filters(door: Door):
    c = door.client("lister")
    task = f"t-{new_id()}"
    made = [
        c.create_memory("lister", "app.billing", "a", {"i": 0}, "working",
                        tags=["x", "y"], scope={"task_id": task, "intent_id": "i1"}),
        c.create_memory("lister", "app.billing.sub", "b", {"i": 1}, "episodic",
                        tags=["x"], pinned=True),
        c.create_memory("lister", "app.ops", "c", {"i": 2}, "episodic", tags=["y", "z"]),
        c.create_memory("lister", "other", "a", {"i": 3}, "semantic", tags=["z"]),
    ]
    middle = datetime.now(timezone.utc)
    time.sleep(0.05)
    late = c.create_memory("lister", "app.late", "d", {"i": 4}, "episodic")
    made.append(late)
    ids = lambda es: [e.id for e in es]  # noqa: E731
    assert ids(c.list_memory("lister")) == ids(made), "creation order across partitions"
    assert ids(c.list_memory("lister", namespace="app.billing")) == [made[0].id]
    assert ids(c.list_memory("lister", namespace="app.billing*")) == ids(made[:2])
    assert ids(c.list_memory("lister", memory_type="episodic")) == ids([made[1], made[2], late])
    assert ids(c.list_memory("lister", memory_type="semantic")) == [made[3].id]
    assert ids(c.list_memory("lister", tags=["x", "y"])) == [made[0].id]
    assert ids(c.list_memory("lister", limit=2, offset=1)) == ids(made[1:3])
    assert ids(list_raw(c, "lister", tags_any="y,z")) == ids([made[0], made[2], made[3]])
    assert ids(list_raw(c, "lister", key="a")) == ids([made[0], made[3]])
    assert ids(list_raw(c, "lister", **{"scope.task_id": task})) == [made[0].id]
    assert ids(list_raw(c, "lister", **{"scope.intent_id": "i1"})) == [made[0].id]
    assert ids(list_raw(c, "lister", pinned="true")) == [made[1].id]
    assert ids(list_raw(c, "lister", updated_after=ts(middle))) == [late.id]
    assert ids(list_raw(c, "lister", updated_before=ts(middle))) == ids(made[:4])
    assert list_raw(c, "lister", limit=1000, offset=5) == []
    assert list_raw(c, "nobody-here") == []
    # The default page is 100 entries; up to 1000 may be asked for.
    many = door.client("many")
    for i in range(101):
        many.create_memory("many", "bulk", f"k{i:03d}", {"i": i}, "semantic")
    assert [e.key for e in list_raw(many, "many")] == [f"k{i:03d}" for i in range(100)]
    assert len(many.list_memory("many", limit=1000)) == 101


def test_async_client_representative_subset(door: Door):
    async def scenario() -> None:
        async with AsyncOpenIntentClient(door.base_url, door.key, "async1") as c:
            note = text("async")
            e = await c.create_memory("async1", "async.ns", "k", {"note": note}, "episodic",
                                      tags=["t1"], priority="low")
            s = await c.create_memory("async1", "async.ns", "k", {"note": note}, "semantic")
            assert e.id.startswith("mem_") and s.id.startswith("sem_")
            assert await c.get_memory(e.id) == e
            assert [x.id for x in await c.list_memory("async1", namespace="async.ns")] == \
                [e.id, s.id]
            u = await c.update_memory(e.id, 1, value={"note": "second"})
            assert u.version == 2 and u.value == {"note": "second"}
            try:
                await c.update_memory(e.id, 1, value={"note": "stale"})
                raise AssertionError("a stale If-Match succeeded")
            except ConflictError as err:
                assert err.current_version == 2
                assert MemoryEntry.from_dict(err.response["current_entry"]) == u
            try:
                await c.create_memory("async1", "async.ns", "k", {"n": 1}, "working")
                raise AssertionError("a taken key was accepted")
            except ConflictError as err:
                assert err.response["error"] == "DUPLICATE_KEY"
                assert err.response["existing_id"] == e.id and err.current_version == 2
            assert await c.delete_memory(e.id) is None
            assert await c.delete_memory(s.id) is None
            try:
                await c.get_memory(e.id)
                raise AssertionError("a deleted entry was found")
            except NotFoundError as err:
                assert err.response["error"] == "ENTRY_NOT_FOUND"
            assert await c.list_memory("async1") == []

    asyncio.run(scenario())


# ---------------------------------------------------------------------------------------------
# 2. If-Match conflicts, 428, uniqueness.


def test_if_match_conflict_and_precondition(door: Door):
    c = door.client("a1")
    e = c.create_memory("a1", "conc", "k", {"n": 1}, "working")
    e2 = c.update_memory(e.id, 1, value={"n": 2})
    err = raises(ConflictError, lambda: c.update_memory(e.id, 1, value={"n": 99}))
    assert err.status_code == 409 and err.current_version == 2
    assert err.response["error"] == "VERSION_MISMATCH" and err.response["current_version"] == 2
    assert MemoryEntry.from_dict(err.response["current_entry"]) == e2
    # A version ahead of the entry is a conflict as well.
    err = raises(ConflictError, lambda: c.update_memory(e.id, 7, value={"n": 99}))
    assert err.current_version == 2
    assert c.get_memory(e.id) == e2

    # The client always sends If-Match: without it the door answers 428.
    resp = c._client.patch(f"/api/v1/memory/{e.id}", json={"value": {"n": 3}})
    assert resp.status_code == 428
    err = raises(OpenIntentError, lambda: c._handle_response(resp))
    status(err, 428, "PRECONDITION_REQUIRED")
    # Bad If-Match values: 400, named by field.
    for bad in ["abc", "0", "-1", "2.0", ""]:
        err = raises(ValidationError, lambda: call(c, "PATCH", f"/api/v1/memory/{e.id}",
                                                   json={"value": {"n": 3}},
                                                   headers={"If-Match": bad}))
        status(err, 400, "VALIDATION_ERROR")
        assert [x["field"] for x in err.errors] == ["If-Match"], (bad, err.errors)
    # The ETag forms name the same version.
    e3 = MemoryEntry.from_dict(call(c, "PATCH", f"/api/v1/memory/{e.id}",
                                    json={"value": {"n": 3}}, headers={"If-Match": '"2"'}))
    assert e3.version == 3
    assert c.get_memory(e.id) == e3 and len(versions(c, e.id)["versions"]) == 3


def test_uniqueness(door: Door):
    c1, c2 = door.client("u1"), door.client("u2")
    w = c1.create_memory("u1", "uniq", "k", {"n": 1}, "working")
    # Working and episodic share one key space per agent.
    for tier in ("working", "episodic"):
        err = raises(ConflictError, lambda: c1.create_memory("u1", "uniq", "k", {"n": 2}, tier))
        assert err.status_code == 409 and err.current_version == 1
        assert err.response["error"] == "DUPLICATE_KEY" and err.response["existing_id"] == w.id
    # Another agent, or the semantic tier, is another key space.
    assert c2.create_memory("u2", "uniq", "k", {"n": 3}, "episodic").version == 1
    s = c1.create_memory("u1", "uniq", "k", {"n": 4}, "semantic")
    # Semantic (namespace, key) is unique per tenant, whichever agent writes it.
    c1.update_memory(s.id, 1, value={"n": 5})
    err = raises(ConflictError, lambda: c2.create_memory("u2", "uniq", "k", {"n": 6}, "semantic"))
    assert err.response["error"] == "DUPLICATE_KEY"
    assert err.response["existing_id"] == s.id and err.current_version == 2
    # Once deleted, the key is free.
    c1.delete_memory(w.id)
    assert c1.create_memory("u1", "uniq", "k", {"n": 7}, "episodic").version == 1


# ---------------------------------------------------------------------------------------------
# 3. Capacity.


def test_working_capacity_per_agent_and_task(small_door: Door):
    c = small_door.client("w1")
    task = f"t-{new_id()}"
    made = [c.create_memory("w1", "cap", f"k{i}", {"i": i}, "working", scope={"task_id": task})
            for i in range(WORKING_CAP)]
    err = raises(OpenIntentError, lambda: c.create_memory("w1", "cap", "over", {"i": 9},
                                                          "working", scope={"task_id": task}))
    body = status(err, 429, "CAPACITY_EXCEEDED")
    assert (body["memory_type"], body["current_count"], body["max_capacity"]) == \
        ("working", WORKING_CAP, WORKING_CAP), body
    assert [x.key for x in list_raw(c, "w1", **{"scope.task_id": task})] == \
        [f"k{i}" for i in range(WORKING_CAP)]
    # Another task, and another agent, have their own capacity.
    c.create_memory("w1", "cap", "other-task", {"i": 1}, "working", scope={"task_id": "t-other"})
    small_door.client("w2").create_memory("w2", "cap", "k", {"i": 1}, "working",
                                          scope={"task_id": task})
    # Deleting frees a slot.
    c.delete_memory(made[0].id)
    assert c.create_memory("w1", "cap", "over", {"i": 9}, "working",
                           scope={"task_id": task}).version == 1


def test_episodic_eviction_priority_then_lru(small_door: Door):
    c = small_door.client("ev")
    mk = lambda key, **kw: c.create_memory("ev", "ep", key, {"k": key}, "episodic", **kw)  # noqa
    n1 = mk("n1")
    n2 = mk("n2")
    h1 = mk("h1", priority="high")
    p1 = mk("p1", priority="low", pinned=True)
    l1 = mk("l1", priority="low")
    c.update_memory(n1.id, 1, value={"k": "n1 touched"})  # n1 is now more recent than n2
    expected_victims = []
    # Lowest priority first, even when it is the most recent; the pinned low entry is skipped.
    x1 = mk("x1")
    expected_victims.append(l1.id)
    # Then least recently accessed among normal: n2 (n1 was updated after it).
    x2 = mk("x2")
    expected_victims.append(n2.id)
    x3 = mk("x3")
    expected_victims.append(n1.id)
    x4 = mk("x4")
    expected_victims.append(x1.id)
    live = c.list_memory("ev", memory_type="episodic")
    assert sorted(e.id for e in live) == sorted([h1.id, p1.id, x2.id, x3.id, x4.id])
    for v in expected_victims:
        raises(NotFoundError, lambda: c.get_memory(v))
        raises(NotFoundError, lambda: versions(c, v))
    # Evicted entries are fully deleted from storage (§9.3), version records included.
    table = table_dump()
    assert f"{l1.id}" not in table and n2.id not in table and n1.id not in table, \
        "an evicted entry (or one of its versions) is still stored"
    assert h1.id in table, "positive control: the scan sees live entries"
    events = entry_events(small_door.tap, "memory.evicted", set(expected_victims), 4)
    by_id = unique_by_event_id(events)
    assert len(by_id) == len(events) == 4, events
    assert sorted(e["detail"]["entryId"] for e in events) == sorted(expected_victims)
    for e in events:
        assert set(e["detail"]) == EVENT_DETAIL_KEYS and e["detail"]["memoryType"] == "episodic"
    # The high-priority and pinned entries outlive every normal one.
    assert c.get_memory(h1.id) == h1 and c.get_memory(p1.id) == p1


def test_pinned_never_evicted(small_door: Door):
    c = small_door.client("pin")
    pinned = [c.create_memory("pin", "ep", f"p{i}", {"i": i}, "episodic", pinned=True,
                              priority="low") for i in range(EPISODIC_CAP)]
    err = raises(OpenIntentError, lambda: c.create_memory("pin", "ep", "one-more", {"i": 9},
                                                          "episodic"))
    body = status(err, 429, "CAPACITY_EXCEEDED")
    assert (body["memory_type"], body["current_count"], body["max_capacity"]) == \
        ("episodic", EPISODIC_CAP, EPISODIC_CAP), body
    assert [e.id for e in c.list_memory("pin")] == [e.id for e in pinned]
    # Unpinning one makes it the victim of the next insert.
    c.update_memory(pinned[2].id, 1, pinned=False)
    c.create_memory("pin", "ep", "one-more", {"i": 9}, "episodic")
    raises(NotFoundError, lambda: c.get_memory(pinned[2].id))
    assert len(c.list_memory("pin")) == EPISODIC_CAP
    # Semantic memory is unbounded.
    for i in range(EPISODIC_CAP + 2):
        c.create_memory("pin", "sem", f"s{i}", {"i": i}, "semantic")
    assert len(c.list_memory("pin", memory_type="semantic")) == EPISODIC_CAP + 2


# ---------------------------------------------------------------------------------------------
# 4. Archive on task end.


def test_archive_on_task_end_route_and_direct_invoke(door: Door, invoker: Invoker):
    c = door.client("arch")
    task = f"task-{new_id()}"
    values = [text(f"arch{i}") for i in range(3)]
    made = [c.create_memory("arch", "job", f"k{i}", {"v": values[i]}, "working",
                            scope={"task_id": task}, tags=["t"]) for i in range(3)]
    final = c.update_memory(made[0].id, 1, value={"v": values[0], "final": True})
    keep_other_task = c.create_memory("arch", "job", "other", {"v": 1}, "working",
                                      scope={"task_id": f"{task}-b"})
    keep_episodic = c.create_memory("arch", "job", "ep", {"v": 2}, "episodic",
                                    scope={"task_id": task})
    out = archive_route(c, task)
    assert set(out) == {"task_id", "agent_id", "entries_archived", "archive"}, out
    assert (out["task_id"], out["agent_id"], out["entries_archived"]) == (task, "arch", 3)
    prefix = f"{door.tenant}/agents/arch/keyed-archives/"
    assert out["archive"].startswith(prefix) and out["archive"].endswith(".json"), out
    digest = out["archive"][len(prefix):-len(".json")]
    assert len(digest) == 32 and all(ch in "0123456789abcdef" for ch in digest), digest
    for e in made:
        raises(NotFoundError, lambda: c.get_memory(e.id))
        raises(NotFoundError, lambda: versions(c, e.id))
    assert c.get_memory(keep_other_task.id) == keep_other_task
    assert c.get_memory(keep_episodic.id) == keep_episodic
    table = table_dump()
    assert not [v for v in values if v in table], "archived entries are still in the table"

    s3 = aws_client("s3")
    doc = json.loads(s3.get_object(Bucket=os.environ["ARCHIVE_BUCKET"],
                                   Key=out["archive"])["Body"].read())
    assert doc["task_id"] == task and doc["agent_id"] == "arch"
    assert doc["entries_archived"] == 3
    archived = {e["id"]: e for e in doc["entries"]}
    assert set(archived) == {e.id for e in made}
    assert archived[final.id]["value"] == final.value and archived[final.id]["version"] == 2
    assert archived[made[1].id]["value"] == {"v": values[1]}

    # Rerun: the same answer, the same object, no new announcement.
    again = archive_route(c, task)
    assert again == out
    doc2 = json.loads(s3.get_object(Bucket=os.environ["ARCHIVE_BUCKET"],
                                    Key=out["archive"])["Body"].read())
    assert {e["id"] for e in doc2["entries"]} == set(archived)
    listed = s3.list_object_versions(Bucket=os.environ["ARCHIVE_BUCKET"], Prefix=out["archive"])
    assert len(listed.get("Versions", [])) == 1, "older archive versions are removed"

    # A task without working memory archives nothing.
    assert archive_route(c, f"empty-{new_id()}")["entries_archived"] == 0

    # Direct invoke (the engine's task end), for another task.
    task2 = f"task-{new_id()}"
    w = c.create_memory("arch", "job2", "k", {"v": 3}, "working", scope={"task_id": task2})
    direct = invoker.ok("memory-intent", {"op": "archiveTask", "tenantId": door.tenant,
                                          "agentId": "arch", "taskId": task2})
    assert direct["entriesArchived"] == 1 and direct["archive"].startswith(prefix), direct
    raises(NotFoundError, lambda: c.get_memory(w.id))
    assert invoker.ok("memory-intent", {"op": "archiveTask", "tenantId": door.tenant,
                                        "agentId": "arch", "taskId": task2}) == direct

    def archived_event(e: dict[str, Any]) -> bool:
        return e.get("detail-type") == "memory.archived" and \
            e["detail"].get("agentId") == "arch"
    events = door.tap.wait(archived_event, 2)
    unique = unique_by_event_id(events)
    assert len(unique) == 2, events
    by_archive = {e["detail"]["archive"]: e["detail"] for e in unique.values()}
    assert set(by_archive) == {out["archive"], direct["archive"]}
    assert by_archive[out["archive"]]["entriesArchived"] == 3
    assert by_archive[out["archive"]]["taskDigest"] == digest
    for e in events:
        raw = json.dumps(e)
        assert task not in raw and not leaks(raw), raw
        assert set(e["detail"]) == {"tenantId", "agentId", "taskDigest", "archive",
                                    "entriesArchived", "at", "eventId"}, e["detail"]


# ---------------------------------------------------------------------------------------------
# 5. Versions and their retention.


def test_versions_endpoint_and_default_retention(door: Door):
    c = door.client("ver")
    e = c.create_memory("ver", "v", "k", {"n": 0}, "episodic", tags=["a"])
    for n in range(1, 23):
        e = c.update_memory(e.id, n, value={"n": n})
    assert e.version == 23
    c.update_memory(e.id, 23, tags=["b"], priority="high")
    out = versions(c, e.id)
    assert out["entry_id"] == e.id
    vs = out["versions"]
    assert [v["version"] for v in vs] == list(range(5, 25)), "the newest 20, oldest first"
    for v in vs:
        assert set(v) == {"version", "changed_by", "changed_at", "changes", "entry"}
        assert v["changed_by"] == "ver"
        entry = MemoryEntry.from_dict(v["entry"])
        assert entry.version == v["version"] and entry.id == e.id
    assert vs[0]["changes"] == ["value"] and MemoryEntry.from_dict(vs[0]["entry"]).value == \
        {"n": 4}
    assert vs[-1]["changes"] == ["tags", "priority"]
    assert MemoryEntry.from_dict(vs[-1]["entry"]) == c.get_memory(e.id)
    first = versions(c, c.create_memory("ver", "v", "fresh", {"n": 1}, "semantic").id)
    assert [(v["version"], v["changes"]) for v in first["versions"]] == [(1, ["created"])]


def test_versions_retention_bound_configured(small_door: Door):
    c = small_door.client("ver")
    e = c.create_memory("ver", "v", "k", {"n": 0}, "semantic")
    for n in range(1, 6):
        e = c.update_memory(e.id, n, value={"n": n})
    vs = versions(c, e.id)["versions"]
    assert [v["version"] for v in vs] == [4, 5, 6]
    assert [MemoryEntry.from_dict(v["entry"]).value for v in vs] == [{"n": 3}, {"n": 4},
                                                                    {"n": 5}]


# ---------------------------------------------------------------------------------------------
# 6. Forget by subject.


def test_forget_reaches_entries_versions_and_archives(door: Door, invoker: Invoker):
    c = door.client("fg")
    subject = sensitive(f"subject-{new_id()}@example.com")
    secret_value = text("forget-me")
    other_value = f"oi-keep-{new_id()}"
    task = f"task-{new_id()}"
    # A working entry of the subject, updated twice (three version records), then archived
    # with an entry of nobody's.
    w = c.create_memory("fg", "crm", "w", {"about": secret_value}, "working",
                        scope={"task_id": task}, subject=subject)
    c.update_memory(w.id, 1, value={"about": secret_value, "n": 2})
    c.update_memory(w.id, 2, value={"about": secret_value, "n": 3})
    keep = c.create_memory("fg", "crm", "keep", {"about": other_value}, "working",
                           scope={"task_id": task})
    archived = archive_route(c, task)
    assert archived["entries_archived"] == 2
    # Live entries of the subject on every tier, with versions.
    ep = c.create_memory("fg", "crm", "ep", {"about": secret_value}, "episodic",
                         subject=subject)
    c.update_memory(ep.id, 1, value={"about": secret_value, "more": True})
    sem = c.create_memory("fg", "crm", "sem", {"about": secret_value}, "semantic",
                          subject=subject)
    live_w = c.create_memory("fg", "crm", "w2", {"about": secret_value}, "working",
                             scope={"task_id": f"{task}-2"}, subject=subject)
    bystander = c.create_memory("fg", "crm", "by", {"about": other_value}, "episodic")

    # Positive controls: the scans see the value where it is.
    assert secret_value in table_dump()
    assert any(secret_value in body for body in bucket_dump(f"{door.tenant}/").values())

    counts = invoker.ok("memory-forget", {"tenantId": door.tenant, "subject": subject})
    assert counts["deletedEntries"] >= 3 and counts["deletedArchives"] >= 1, counts

    for e in (ep, sem, live_w):
        raises(NotFoundError, lambda: c.get_memory(e.id))
        raises(NotFoundError, lambda: versions(c, e.id))
    assert c.get_memory(bystander.id) == bystander
    table = table_dump()
    assert secret_value not in table, "a value of the forgotten subject is left in the table"
    assert subject not in table
    bodies = bucket_dump(f"{door.tenant}/")
    traces = [k for k, body in bodies.items() if secret_value in body or subject in body]
    assert not traces, f"object versions still holding the subject: {traces}"
    # The archive lives on without the subject's entry.
    doc = json.loads(bodies[next(k for k in bodies if k.startswith(archived["archive"] + "@"))])
    assert [e["id"] for e in doc["entries"]] == [keep.id]
    assert doc["entries"][0]["value"] == {"about": other_value}
    # The key is free again.
    assert c.create_memory("fg", "crm", "ep", {"about": "new"}, "episodic").version == 1


# ---------------------------------------------------------------------------------------------
# 7. Races on the emulator, across two processes of memory-intent.


def test_patch_race_exactly_one_wins(door: Door, small):
    a, _ = small
    c_here, c_there = door.client("racer"), door.client("racer", a.base_url)
    e = c_here.create_memory("racer", "race", "k", {"n": 0}, "semantic")
    version = 1
    losses_seen = 0
    overlapping = 0
    for trial in range(50):
        spans: list[tuple[float, float]] = [(0.0, 0.0), (0.0, 0.0)]

        def patch(i: int) -> MemoryEntry:
            start = time.monotonic()
            try:
                return (c_here, c_there)[i].update_memory(e.id, version,
                                                          value={"trial": trial, "by": i})
            finally:
                spans[i] = (start, time.monotonic())

        win, loss = one_winner(at_once(2, patch), trial)
        overlapping += spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]
        assert type(loss) is ConflictError
        assert win.version == version + 1
        assert loss.current_version == version + 1, (trial, loss.response)
        assert MemoryEntry.from_dict(loss.response["current_entry"]) == win
        losses_seen += 1
        version += 1
    final = c_here.get_memory(e.id)
    assert final.version == 51 and final.value["trial"] == 49
    assert losses_seen == 50
    # The two requests were in flight at the same time (else this would show nothing).
    assert overlapping >= 40, f"only {overlapping} of 50 trials overlapped"


def test_duplicate_key_and_working_capacity_races(door: Door, small):
    a, b = small
    c_a, c_b = door.client("dup", a.base_url), door.client("dup", b.base_url)
    episodic_winners = 0
    for trial in range(20):

        def create(i: int) -> MemoryEntry:
            # One task per trial keeps the working side below its capacity.
            return (c_a, c_b)[i].create_memory("dup", "dup", f"k{trial}", {"by": i},
                                               ("working", "episodic")[i],
                                               scope={"task_id": f"t{trial}"})

        win, loss = one_winner(at_once(2, create), trial)
        assert loss.response["error"] == "DUPLICATE_KEY"
        assert loss.response["existing_id"] == win.id
        episodic_winners += win.memory_type.value == "episodic"
    # Every working winner stays; episodic winners past the small gateways' capacity evicted
    # the oldest of their kind.
    assert len(c_a.list_memory("dup")) == 20 - episodic_winners + min(episodic_winners,
                                                                      EPISODIC_CAP)
    # Ten creates racing for a task's three working slots.
    task = f"t-{new_id()}"
    results = at_once(10, lambda i: (c_a, c_b)[i % 2].create_memory(
        "dup", "slots", f"k{i}", {"i": i}, "working", scope={"task_id": task}))
    made = [r for r in results if isinstance(r, MemoryEntry)]
    refused = [r for r in results if isinstance(r, OpenIntentError)]
    assert len(made) == WORKING_CAP and len(refused) == 10 - WORKING_CAP, results
    for r in refused:
        assert r.status_code == 429 and r.response["error"] == "CAPACITY_EXCEEDED", r.response
    assert len(list_raw(c_a, "dup", **{"scope.task_id": task})) == WORKING_CAP


def test_concurrent_inserts_at_episodic_capacity(small):
    a, b = small
    inv = Invoker(a.base_url)
    tenant = new_tenant()
    key = issue(inv, tenant, ["*"])
    tap = EventTap(tenant)
    clients = [OpenIntentClient(gw.base_url, key, "crowd", timeout=60) for gw in (a, b)]
    watcher = OpenIntentClient(a.base_url, key, "crowd", timeout=60)
    try:
        stop = threading.Event()
        seen_counts: list[int] = []

        def watch() -> None:
            while not stop.is_set():
                seen_counts.append(len(watcher.list_memory("crowd", memory_type="episodic")))

        spy = threading.Thread(target=watch)
        spy.start()
        results = at_once(50, lambda i: clients[i % 2].create_memory(
            "crowd", "crowd", f"k{i:02d}", {"i": i}, "episodic"))
        stop.set()
        spy.join(30)

        made = [r for r in results if isinstance(r, MemoryEntry)]
        failed = [r for r in results if not isinstance(r, MemoryEntry)]
        # A create that kept losing races may be told to retry (429); nothing else may fail.
        assert all(isinstance(r, OpenIntentError) and r.status_code == 429 for r in failed), \
            [(r.status_code, r.response) for r in failed]
        assert len(made) >= EPISODIC_CAP, f"only {len(made)} of 50 inserts succeeded"
        assert seen_counts and max(seen_counts) <= EPISODIC_CAP, max(seen_counts)
        live = watcher.list_memory("crowd", memory_type="episodic")
        assert len(live) == EPISODIC_CAP
        made_ids = {e.id for e in made}
        live_ids = {e.id for e in live}
        assert live_ids <= made_ids
        evicted_ids = made_ids - live_ids
        assert len(evicted_ids) == len(made) - EPISODIC_CAP

        def evicted(e: dict[str, Any]) -> bool:
            return e.get("detail-type") == "memory.evicted"
        events = tap.wait(evicted, len(evicted_ids), timeout=30)
        unique = unique_by_event_id(events)
        announced = [e["detail"]["entryId"] for e in unique.values()]
        assert sorted(announced) == sorted(evicted_ids), \
            f"{len(announced)} evictions announced for {len(evicted_ids)} evicted entries"
        created = tap.wait(lambda e: e.get("detail-type") == "memory.created", len(made),
                           settle=0)
        assert {e["detail"]["entryId"] for e in created} == made_ids
    finally:
        tap.close()
        for cl in (*clients, watcher):
            cl._client.close()


def set_quota_limits(tenant: str, **limits: int) -> None:
    """The tenant's override item (docs/quotas.md "Changing a tenant's limits"), written before
    the tenant's first request so no container has its limits cached."""
    item = {"pk": {"S": f"{tenant}#@quota"}, "sk": {"S": "Q#limits"}}
    item.update({name: {"N": str(v)} for name, v in limits.items()})
    aws_client("dynamodb").put_item(TableName=os.environ["MEMORY_TABLE"], Item=item)


def test_entries_quota_exact_across_two_processes_and_delete_gives_back(small):
    """MaxEntriesPerRef counts the door's entries, charged in the create's own transaction:
    eight creates racing on two processes for three places get exactly three, the rest a 429
    `rate_limited` naming the quota; a delete gives its place back."""
    a, b = small
    tenant = new_tenant()
    set_quota_limits(tenant, MaxEntriesPerRef=3)
    key = issue(Invoker(a.base_url), tenant, ["*"])
    clients = [OpenIntentClient(gw.base_url, key, "quota", timeout=60) for gw in (a, b)]
    try:
        results = at_once(8, lambda i: clients[i % 2].create_memory(
            "quota", "q", f"k{i}", {"i": i}, "episodic"))
        made = [r for r in results if isinstance(r, MemoryEntry)]
        refused = [r for r in results if not isinstance(r, MemoryEntry)]
        assert len(made) == 3, [(getattr(r, "status_code", None), getattr(r, "response", r))
                                for r in refused]
        for err in refused:
            assert isinstance(err, OpenIntentError) and err.status_code == 429, err
            body = json.dumps(err.response)
            assert "rate_limited" in body and "MaxEntriesPerRef" in body, err.response
            assert not leaks(body)
        assert len(clients[0].list_memory("quota", memory_type="episodic")) == 3
        err = raises(OpenIntentError, lambda: clients[0].create_memory(
            "quota", "q", "late", {"i": 9}, "episodic"))
        assert err.status_code == 429 and "3 of at most 3" in json.dumps(err.response), \
            err.response
        clients[1].delete_memory(made[0].id)
        assert clients[0].create_memory("quota", "q", "late", {"i": 9}, "episodic").version == 1
    finally:
        for c in clients:
            c._client.close()


# ---------------------------------------------------------------------------------------------
# 8. Bad input: a clear 4xx, nothing stored, nothing leaked.


def test_bad_input_is_refused_and_nothing_is_stored(door: Door):
    c = door.client("bad")
    secret_value = text("bad-input")
    ok = {"note": secret_value}
    cases: list[tuple[str, dict[str, Any], int, str]] = [
        ("memory_type", dict(memory_type="longterm"), 400, "memory_type"),
        ("key ctl", dict(key="k\x07"), 400, "key"),
        ("key newline", dict(key="line\nbreak"), 400, "key"),
        ("namespace ctl", dict(namespace="ns\x1b[31m"), 400, "namespace"),
        ("namespace empty", dict(namespace=""), 400, "namespace"),
        ("tag ctl", dict(tags=["ok", "bad\x00"]), 400, "tags"),
        ("task ctl", dict(scope={"task_id": "t\r1"}), 400, "scope.task_id"),
        ("value list", dict(value=[secret_value]), 400, "value"),
        ("ttl", dict(ttl="forever"), 400, "ttl"),
        ("ttl months", dict(ttl="duration:P1M"), 400, "ttl"),
        ("priority", dict(priority="urgent"), 400, "priority"),
        ("sensitivity", dict(sensitivity="secret"), 400, "sensitivity"),
        ("pinned", dict(pinned="yes"), 400, "pinned"),
        ("expires_at past", dict(expires_at="2020-01-01T00:00:00Z"), 400, "expires_at"),
        ("expires_at format", dict(expires_at="tomorrow"), 400, "expires_at"),
        ("key too long", dict(key="k" * 256), 400, "key"),
    ]
    for label, change, code, field in cases:
        args: dict[str, Any] = dict(agent_id="bad", namespace="ns", key="k", value=ok,
                                    memory_type="working")
        args.update(change)
        err = raises(ValidationError, lambda: c.create_memory(**args))
        status(err, code, "VALIDATION_ERROR")
        assert [x["field"] for x in err.errors] == [field], (label, err.response)
        assert all(ch not in json.dumps(err.response) for ch in ("\\u0007", "\\u001b")), label

    # Oversized value: 65,536 serialized bytes pass, one more is 413.
    fill = text("big")
    base = len(json.dumps({"v": fill, "pad": ""}, separators=(",", ":")))
    at_limit = {"v": fill, "pad": "x" * (65_536 - base)}
    assert len(json.dumps(at_limit, separators=(",", ":"))) == 65_536
    over = {"v": fill, "pad": "x" * (65_537 - base)}
    err = raises(OpenIntentError, lambda: c.create_memory("bad", "ns", "big", over, "episodic"))
    body = status(err, 413, "VALUE_TOO_LARGE")
    assert (body["size_bytes"], body["max_bytes"]) == (65_537, 65_536), body
    # Not JSON, not an object.
    err = raises(ValidationError, lambda: call(c, "POST", "/api/v1/memory", content=b"{nope"))
    assert [x["field"] for x in err.errors] == ["body"]
    # Another agent named in the body: 403.
    err = raises(OpenIntentError, lambda: c.create_memory("someone-else", "ns", "k", ok))
    status(err, 403, "ACCESS_DENIED")
    # Bad list parameters.
    for params, field in [({"limit": "0"}, "limit"), ({"limit": "1001"}, "limit"),
                          ({"memory_type": "x"}, "memory_type"), ({"pinned": "1"}, "pinned"),
                          ({"offset": "-1"}, "offset"), ({"key": "a\x01"}, "key"),
                          ({"updated_after": "yesterday"}, "updated_after")]:
        err = raises(ValidationError, lambda: list_raw(c, "bad", **params))
        assert [x["field"] for x in err.errors] == [field], params

    assert c.list_memory("bad") == [], "a refused request stored something"
    e = c.create_memory("bad", "ns", "big", at_limit, "episodic")
    assert c.get_memory(e.id).value == at_limit
    # A bad PATCH changes nothing.
    for patch, code, field in [({"value": over}, 413, None), ({"tags": ["a\nb"]}, 400, "tags"),
                               ({"priority": "max"}, 400, "priority"),
                               ({"value": "text"}, 400, "value")]:
        exc = ValidationError if code == 400 else OpenIntentError
        err = raises(exc, lambda: c.update_memory(e.id, 1, **patch))
        assert err.status_code == code
        if field:
            assert [x["field"] for x in err.errors] == [field]
    assert c.get_memory(e.id).version == 1
    assert [v["version"] for v in versions(c, e.id)["versions"]] == [1]


def test_redaction_of_values_and_tags_and_refusal_of_identifiers(small_door: Door):
    c = small_door.client("sr1")
    marker = f"[REDACTED:{SECRET_ID}]"
    e = c.create_memory("sr1", "sr", "k", {"token": f"use {SECRET} now",
                                           "nested": [{"deep": SECRET}], SECRET: 1},
                        "episodic", tags=[f"tag-{SECRET}", "plain"])
    assert e.value == {"token": f"use {marker} now", "nested": [{"deep": marker}], marker: 1}
    assert e.tags == [f"tag-{marker}", "plain"]
    assert c.get_memory(e.id) == e
    u = c.update_memory(e.id, 1, value={"again": SECRET}, tags=[SECRET])
    assert u.value == {"again": marker} and u.tags == [marker]
    for field, args in [("namespace", ("sr1", f"ns-{SECRET}", "k2", {"x": 1})),
                        ("key", ("sr1", "sr", f"k-{SECRET}", {"x": 1}))]:
        err = raises(ValidationError, lambda: c.create_memory(*args, "semantic"))
        assert [x["field"] for x in err.errors] == [field]
    assert [x.id for x in c.list_memory("sr1")] == [e.id]
    assert SECRET not in json.dumps(versions(c, e.id))
    assert SECRET not in table_dump()


def test_redaction_reaches_scope(small_door: Door):
    """SR-1: a registered secret never reaches the store through this door. `scope` is free-form
    (§1.1, the client sends any object), so a secret in it must be refused (like a namespace or
    key) or redacted (like a value) - either way it must not be stored or answered."""
    c = small_door.client("sr1scope")
    outcomes = []
    for n, scope in enumerate(({"task_id": f"task-{SCOPE_SECRET}"},
                               {"intent_id": SCOPE_SECRET},
                               {"task_id": "t", "note": f"see {SCOPE_SECRET}"})):
        resp = c._client.post("/api/v1/memory", json={
            "agent_id": "sr1scope", "namespace": "sr", "key": f"k{n}", "value": {"x": 1},
            "memory_type": "working", "scope": scope})
        try:
            c._handle_response(resp)
            outcomes.append(("stored", resp.text))
        except ValidationError:
            outcomes.append(("refused", resp.text))
    answered = [body for _, body in outcomes if SCOPE_SECRET in body]
    stored = SCOPE_SECRET in table_dump()
    assert not answered and not stored, (
        f"a registered secret in `scope` was stored verbatim (in the table: {stored}) and "
        f"answered back in {len(answered)} of 3 creates; outcomes: "
        f"{[kind for kind, _ in outcomes]}")


# ---------------------------------------------------------------------------------------------
# Who may call: API keys, agents, tenants (8, 10).


def test_api_keys_missing_unknown_malformed_revoked_and_not_covered(door: Door, other: Door,
                                                                    invoker: Invoker):
    c = door.client("a1")
    e = c.create_memory("a1", "auth", "k", {"n": 1}, "episodic")
    url = door.base_url

    def answer(headers: dict[str, str]) -> tuple[int, Any]:
        r = raw_request(url, "GET", f"/api/v1/memory/{e.id}", headers=headers)
        return r.status, r.json()

    assert answer({"X-Agent-ID": "a1"}) == (401, {"message": "Unauthorized"})
    assert answer({"X-API-Key": door.key}) == (401, {"message": "Unauthorized"})
    assert answer({"X-API-Key": "", "X-Agent-ID": "a1"}) == (401, {"message": "Unauthorized"})
    unknown_key = issue(invoker, door.tenant, ["a1"])
    bad_keys = {
        "unknown": "oik_" + "0" * 26 + "_" + "A" * 43,
        "wrong secret": door.key[:-1] + ("x" if door.key[-1] != "x" else "y"),
        "malformed": "Bearer abc",
        "shape": "oik_short_x",
    }
    forbidden = (403, {"message": "Forbidden"})
    for label, k in bad_keys.items():
        sensitive(k)
        assert answer({"X-API-Key": k, "X-Agent-ID": "a1"}) == forbidden, label
    # A key for a1 only does not cover a2, nor an agent id that is not one.
    only_a1 = issue(invoker, door.tenant, ["a1"])
    assert answer({"X-API-Key": only_a1, "X-Agent-ID": "a1"})[0] == 200
    for agent in ("a2", "../a1", "A1", "*"):
        assert answer({"X-API-Key": only_a1, "X-Agent-ID": agent}) == forbidden, agent
    # Revoked before first use (the session gateway caches answers for 60 s).
    revoked, key_id = issue_with_id(invoker, door.tenant, ["*"])
    assert invoker.ok("memory-intent", {"op": "revokeApiKey", "keyId": key_id}) == \
        {"revoked": True, "keyId": key_id}
    assert answer({"X-API-Key": revoked, "X-Agent-ID": "a1"}) == forbidden
    assert invoker.ok("memory-intent", {"op": "revokeApiKey",
                                        "keyId": "0" * 26})["revoked"] is False
    # Expired before first use: keys live at least a day, so its record's expiry is moved into
    # the past in the table itself (the authorizer reads it on the next uncached check).
    expired, expired_id = issue_with_id(invoker, door.tenant, ["*"])
    aws_client("dynamodb").update_item(
        TableName=os.environ["MEMORY_TABLE"],
        Key={"pk": {"S": f"@apikey#{expired_id}"}, "sk": {"S": "K"}},
        UpdateExpression="SET expiresMs = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time() * 1000) - 1000)}})
    assert answer({"X-API-Key": expired, "X-Agent-ID": "a1"}) == forbidden
    # The client surfaces these as its OpenIntentError with the status.
    err = raises(OpenIntentError,
                 lambda: OpenIntentClient(url, revoked, "a1").get_memory(e.id))
    assert (err.status_code, err.response) == forbidden
    # Keys cannot be issued for longer than a year or for no time at all.
    for days in (0, 367, "7"):
        got = invoker.fail("memory-intent", {"op": "issueApiKey", "tenantId": door.tenant,
                                             "agents": ["a1"], "expiresInDays": days})
        assert got == {"errorType": "validation_error",
                       "errorMessage": "an integer from 1 to 366"}, (days, got)
    for agents in ([], ["../x"], "a1"):
        got = invoker.fail("memory-intent", {"op": "issueApiKey", "tenantId": door.tenant,
                                             "agents": agents, "expiresInDays": 1})
        assert got["errorType"] == "validation_error", (agents, got)
    # A key of this tenant that was issued and never used is only as good as its agents.
    assert answer({"X-API-Key": unknown_key, "X-Agent-ID": "a2"}) == forbidden
    # The other tenant's key is valid, and sees nothing of this tenant.
    foreign = other.client("a1")
    raises(NotFoundError, lambda: foreign.get_memory(e.id))
    assert c.get_memory(e.id).version == 1


def test_revocation_within_the_authorizer_cache_ttl(small):
    a, _ = small
    inv = Invoker(a.base_url)
    # A trial shows the TTL only if the revocation lands while the answer is still cached (1 s);
    # on a loaded machine the revoke itself can take longer, so a trial may be tried again.
    for _ in range(3):
        tenant = new_tenant()
        key, key_id = issue_with_id(inv, tenant, ["ttl-agent"])
        c = OpenIntentClient(a.base_url, key, "ttl-agent")
        e = c.create_memory("ttl-agent", "ns", "k", {"n": 1}, "episodic")
        assert c.get_memory(e.id) == e  # cached from here
        assert inv.ok("memory-intent", {"op": "revokeApiKey", "keyId": key_id})["revoked"] is True
        revoked_at = time.monotonic()
        outcomes: list[tuple[float, int]] = []
        while time.monotonic() - revoked_at < 3.0:
            # When the request left: the gateway decides on the cached answer as it arrives, and
            # a slow function answer must not count as a late authorization.
            sent = time.monotonic() - revoked_at
            r = c._client.get(f"/api/v1/memory/{e.id}")
            outcomes.append((sent, r.status_code))
            assert r.status_code in (200, 403), r.text
            time.sleep(0.05)
        late_successes = [t for t, s in outcomes if s == 200 and t > 1.0]
        assert not late_successes, f"the revoked key still worked {late_successes[0]:.2f} s later"
        first_refusal = min(t for t, s in outcomes if s == 403)
        assert all(s == 403 for t, s in outcomes if t >= first_refusal), outcomes
        err = raises(OpenIntentError, lambda: c.get_memory(e.id))
        assert (err.status_code, err.response) == (403, {"message": "Forbidden"})
        c._client.close()
        if any(s == 200 for _, s in outcomes):
            return
    pytest.fail("the cached answer was never used in 3 trials: this would not show the TTL")


def test_foreign_agent_and_tenant_isolation(door: Door, other: Door):
    c1, c2 = door.client("iso1"), door.client("iso2")
    w = c1.create_memory("iso1", "iso", "w", {"n": 1}, "working", scope={"task_id": "t"})
    ep = c1.create_memory("iso1", "iso", "e", {"n": 2}, "episodic")
    s = c1.create_memory("iso1", "iso", "s", {"n": 3}, "semantic")
    for private in (w, ep):
        for fn in (lambda: c2.get_memory(private.id),
                   lambda: c2.update_memory(private.id, 1, value={"n": 0}),
                   lambda: c2.delete_memory(private.id),
                   lambda: versions(c2, private.id)):
            err = raises(NotFoundError, fn)
            assert err.response["error"] == "ENTRY_NOT_FOUND"
        assert c1.get_memory(private.id) == private
    # Semantic entries are the tenant's: another agent reads and updates them.
    assert c2.get_memory(s.id) == s
    s2 = c2.update_memory(s.id, 1, value={"n": 4})
    assert versions(c1, s.id)["versions"][-1]["changed_by"] == "iso2"
    # Listing another agent shows only that agent's semantic entries.
    assert c2.list_memory("iso1") == [s2]
    assert c2.list_memory("iso1", memory_type="working") == []
    assert [x.id for x in c1.list_memory("iso1")] == [w.id, ep.id, s.id]
    # Another tenant: always 404, never a listing.
    f1 = other.client("iso1")
    for entry in (w, ep, s):
        for fn in (lambda: f1.get_memory(entry.id),
                   lambda: f1.update_memory(entry.id, 1, value={"n": 0}),
                   lambda: f1.delete_memory(entry.id),
                   lambda: versions(f1, entry.id)):
            raises(NotFoundError, fn)
    assert f1.list_memory("iso1") == []
    assert archive_route(f1, "t") == {"task_id": "t", "agent_id": "iso1",
                                      "entries_archived": 0, "archive": None}
    assert c1.get_memory(w.id) == w
    # The other tenant's semantic (namespace, key) is its own.
    assert f1.create_memory("iso1", "iso", "s", {"n": 5}, "semantic").version == 1


def test_ids_that_are_not_entry_ids(door: Door):
    c = door.client("cti")
    e = c.create_memory("cti", "cti", "k", {"n": 1}, "episodic")
    headers = {"X-API-Key": door.key, "X-Agent-ID": "cti"}
    # `../x` and friends percent-encoded, so each stays one path segment and reaches the door
    # as an id (an HTTP client removes a literal dot segment before sending: httpx turns
    # /api/v1/memory/../x into /api/v1/x, which names no route of the door at all).
    for entry_id in ["..%2Fx", "%2E%2E%2Fx", "mem_%2e%2e", "mem_..%2F..%2Fx", "sem_%2e%2e%2f",
                     e.id.lower(), e.id + "0", e.id[:-1], "mem_" + "0" * 26, "sem_" + "Z" * 26,
                     e.id.replace("mem_", "sem_"), e.id.replace("mem_", "MEM_"), "%00",
                     e.id + "%2F..", e.id[4:]]:
        for method in ("GET", "DELETE"):
            r = raw_request(door.base_url, method, f"/api/v1/memory/{entry_id}", headers=headers)
            assert r.status == 404, (method, entry_id, r.status, r.text)
        r = raw_request(door.base_url, "GET", f"/api/v1/memory/{entry_id}/versions",
                        headers=headers)
        assert r.status == 404, (entry_id, r.status, r.text)
    for entry_id in ("..%2Fx", "mem_%2e%2e", f"mem_..%2F..%2Fagents%2Fcti%2F{e.id}"):
        err = raises(NotFoundError, lambda: c.get_memory(entry_id))
        assert err.response["error"] == "ENTRY_NOT_FOUND", err.response
    assert c.get_memory(e.id) == e
