"""Differential test of the OpenIntent door (RFC-0015 agent memory) against the reference server
of the official `openintent` package (0.17.0, FastAPI + SQLAlchemy over SQLite).

One seeded sequence of operations (create / get / list / update with right and stale versions /
delete, two agents, three tiers, duplicate keys, invalid inputs, cross-agent accesses) runs step
by step against both servers: through the official `OpenIntentClient` wherever it can express
the call (its raw response is captured with an httpx response hook), raw httpx otherwise. Our ids
are mapped to the reference's ids by creation. After each step the status codes and the entries
returned must be equal, and every few steps the full list of each agent, as each agent sees it.

Every deliberate difference is a named rule of `RULES` (docs/openintent-differences.md):
a predicate on (op, ours, reference, model) and how both states reconverge afterwards. A
difference that no rule explains fails the test; so does a rule whose predicate holds while its
own checks (the code of our error, the entry it names, ...) do not. The count of each rule is
printed at the end (`pytest -s` shows it).

Run (from the repository root, emulator settings loaded):
    eval "$(infra/local/up)" && .venv/bin/python -m pytest tests/python/test_l_openintent_differential.py -q -s
"""

from __future__ import annotations

import json
import random
import re
import socket
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

import httpx
import pytest

from conftest import start_gateway
from wopkit import Invoker, new_tenant

SEED = 15
STEPS = 2000
FULL_LIST_EVERY = 250
AGENTS = ("a1", "a2")
TIERS = ("working", "episodic", "semantic")
NAMESPACES = ("billing", "billing.invoices", "ops")
KEYS = tuple(f"k{i}" for i in range(12))
TAGS = ("batch", "invoices", "in-progress", "done", "ünï")
TASKS = ("t1", "t1", "t1", "t2", None)
# A small working capacity (per agent and task, RFC-0015 §9.4) so the sequence reaches it.
WORKING_CAPACITY = 3
REFERENCE_KEY = "reference-key"
OUR_ID = re.compile(r"^(mem|sem)_[0-9A-Z]{26}$")


# ---------------------------------------------------------------------------------------------
# The two servers.


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ReferenceServer:
    """`openintent.server` (the package's FastAPI app) in a thread, on a fresh SQLite file."""

    def __init__(self) -> None:
        import uvicorn
        from openintent.server.app import create_app
        from openintent.server.config import ServerConfig

        self.dir = tempfile.TemporaryDirectory(prefix="openintent-ref-")
        port = free_port()
        config = ServerConfig(host="127.0.0.1", port=port,
                              database_url=f"sqlite:///{self.dir.name}/reference.db",
                              api_keys={REFERENCE_KEY})
        self.server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1",
                                                    port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the openintent reference server did not start")
            time.sleep(0.02)
        self.base_url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.dir.cleanup()


# ---------------------------------------------------------------------------------------------
# One side: the official client per agent, its raw responses captured.


@dataclass
class Resp:
    status: int
    body: Any

    def code(self) -> str | None:
        return self.body.get("error") if isinstance(self.body, dict) else None


class Side:
    def __init__(self, name: str, base_url: str, api_key: str) -> None:
        from openintent import OpenIntentClient

        self.name = name
        self.last: httpx.Response | None = None
        self.clients = {}
        for agent in AGENTS:
            c = OpenIntentClient(base_url, api_key=api_key, agent_id=agent, timeout=60)
            c._client.event_hooks = {"response": [self._capture]}
            self.clients[agent] = c
        self.raw = {a: httpx.Client(base_url=base_url, timeout=60,
                                    headers={"X-API-Key": api_key, "X-Agent-ID": a})
                    for a in AGENTS}

    def _capture(self, response: httpx.Response) -> None:
        response.read()
        self.last = response

    def _resp(self, r: httpx.Response) -> Resp:
        try:
            body = r.json() if r.content else None
        except ValueError:
            body = r.text
        return Resp(r.status_code, body)

    def call(self, agent: str, fn: Callable[[Any], Any]) -> Resp:
        """The official client's call; its typed exceptions (and `MemoryEntry.from_dict`
        refusing a value outside its enums) are not the point: the captured response is."""
        self.last = None
        try:
            fn(self.clients[agent])
        except Exception:  # noqa: BLE001 - the raw response below is what is compared
            pass
        assert self.last is not None, f"{self.name}: no response captured"
        return self._resp(self.last)

    def request(self, agent: str, method: str, path: str, **kw: Any) -> Resp:
        return self._resp(self.raw[agent].request(method, path, **kw))

    def close(self) -> None:
        for c in self.clients.values():
            c._client.close()
        for c in self.raw.values():
            c.close()


# ---------------------------------------------------------------------------------------------
# The model: entries created on both sides, ids mapped by creation.


@dataclass
class Pair:
    ours: str
    ref: str
    owner: str
    tier: str
    namespace: str
    key: str
    task: str | None
    version: int = 1
    alive: bool = True

    def claim(self) -> tuple:
        """RFC-0015 §1.2 uniqueness: (agent, namespace, key) over working + episodic,
        (namespace, key) for semantic."""
        if self.tier == "semantic":
            return ("semantic", self.namespace, self.key)
        return ("agent", self.owner, self.namespace, self.key)


@dataclass
class World:
    ours: Side
    ref: Side
    pairs: list[Pair] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    unexplained: list[str] = field(default_factory=list)

    def live(self) -> list[Pair]:
        return [p for p in self.pairs if p.alive]

    def by_ours(self, our_id: str) -> Pair | None:
        return next((p for p in self.pairs if p.ours == our_id), None)

    def by_ref(self, ref_id: str) -> Pair | None:
        return next((p for p in self.pairs if p.ref == ref_id), None)

    def working_count(self, agent: str, task: str | None) -> int:
        return sum(1 for p in self.live()
                   if p.tier == "working" and p.owner == agent and p.task == task)


@dataclass
class Op:
    kind: str  # create | get | update | delete | list
    caller: str
    step: int
    pair: Pair | None = None
    body: Any = None
    if_match: str | None = None
    variant: str = "ok"  # what the generator meant: ok, invalid-422, invalid-accepted, ...
    params: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return (f"step {self.step} {self.kind}/{self.variant} by {self.caller}"
                f"{' on ' + self.pair.ours + '=' + self.pair.ref if self.pair else ''}"
                f"{' If-Match ' + repr(self.if_match) if self.if_match is not None else ''}"
                f"{' body ' + json.dumps(self.body)[:200] if self.body is not None else ''}"
                f"{' params ' + json.dumps(self.params) if self.params else ''}")


# ---------------------------------------------------------------------------------------------
# Entry comparison with the entry-level rules.

IGNORED = ("id", "created_at", "updated_at", "curated_by")


def naive(ts: Any) -> bool:
    return isinstance(ts, str) and datetime.fromisoformat(ts).tzinfo is None


def aware(ts: Any) -> bool:
    return isinstance(ts, str) and datetime.fromisoformat(ts.replace("Z", "+00:00")).tzinfo is not None


def entry_differences(w: World, ours: Any, ref: Any, pair: Pair | None) -> list[str]:
    """What differs between two entries outside the entry-level rules (which are counted)."""
    if not (isinstance(ours, dict) and isinstance(ref, dict)):
        return [f"not two entries: ours {ours!r} ref {ref!r}"]
    out = []
    a = {k: v for k, v in ours.items() if k not in IGNORED}
    b = {k: v for k, v in ref.items() if k not in IGNORED}
    if a != b:
        keys = sorted(k for k in set(a) | set(b) if a.get(k, "<absent>") != b.get(k, "<absent>"))
        out.append("fields differ: " + ", ".join(
            f"{k}: ours {a.get(k, '<absent>')!r} ref {b.get(k, '<absent>')!r}" for k in keys))
    # id-format: ours mem_/sem_ + ULID by tier, the reference a uuid4; mapped by creation.
    prefix = "sem_" if ours.get("memory_type") == "semantic" else "mem_"
    try:
        ref_uuid = uuid.UUID(ref.get("id", "")).version == 4
    except ValueError:
        ref_uuid = False
    if OUR_ID.match(str(ours.get("id"))) and ours["id"].startswith(prefix) and ref_uuid:
        w.counts["id-format"] += 1
    else:
        out.append(f"ids: ours {ours.get('id')!r} ref {ref.get('id')!r}")
    if pair is not None and (ours.get("id"), ref.get("id")) != (pair.ours, pair.ref):
        out.append(f"id mapping: ({ours.get('id')}, {ref.get('id')}) is not "
                   f"({pair.ours}, {pair.ref})")
    # timestamps: ours RFC 3339 with an offset, the reference naive (no timezone).
    stamps = ("created_at", "updated_at")
    if all(aware(ours.get(s)) for s in stamps) and all(naive(ref.get(s)) for s in stamps):
        w.counts["naive-timestamps"] += 1
        if ours["updated_at"] < ours["created_at"]:
            out.append(f"updated_at before created_at: {ours}")
    else:
        out.append(f"timestamps: ours {[ours.get(s) for s in stamps]} "
                   f"ref {[ref.get(s) for s in stamps]}")
    # curated-by: ours names the creating agent on semantic entries, the reference leaves null.
    if ours.get("curated_by") != ref.get("curated_by"):
        if (ours.get("memory_type") == "semantic" and ref.get("curated_by") is None
                and ours.get("curated_by") == ours.get("agent_id")):
            w.counts["curated-by"] += 1
        else:
            out.append(f"curated_by: ours {ours.get('curated_by')!r} "
                       f"ref {ref.get('curated_by')!r}")
    elif ours.get("memory_type") == "semantic":
        out.append("curated_by: ours should name the semantic entry's creator")
    return out


# ---------------------------------------------------------------------------------------------
# The rules: every deliberate difference. `applies(op, ours, ref, w)` must hold exactly when the
# rule explains the step; `reconverge(op, ours, ref, w)` brings both states back together (and
# may check more; a failed check there is unexplained too).

EXPECTED_CODE = {400: "VALIDATION_ERROR", 403: "ACCESS_DENIED", 404: "ENTRY_NOT_FOUND",
                 409: ("VERSION_MISMATCH", "DUPLICATE_KEY"), 413: "VALUE_TOO_LARGE",
                 428: "PRECONDITION_REQUIRED", 429: "CAPACITY_EXCEEDED"}


def envelope_ok(r: Resp) -> bool:
    """Our error body: {"error": CODE for the status, "message": text, ...}."""
    want = EXPECTED_CODE.get(r.status)
    return (isinstance(r.body, dict) and isinstance(r.body.get("message"), str)
            and want is not None and r.code() in (want if isinstance(want, tuple) else (want,)))


def detail_ok(r: Resp) -> bool:
    return isinstance(r.body, dict) and set(r.body) == {"detail"}


def delete_reference_extra(op: Op, ours: Resp, ref: Resp, w: World) -> None:
    """The reference created an entry ours refused: delete it there."""
    got = w.ref.call(op.caller, lambda c: c.delete_memory(ref.body["id"]))
    if got.status != 200:
        w.unexplained.append(f"{op.describe()}: reconverge delete on the reference: {got}")


def nothing(op: Op, ours: Resp, ref: Resp, w: World) -> None:
    pass


def replay_as_owner(op: Op, ours: Resp, ref: Resp, w: World) -> None:
    """The reference let a non-owner change a private entry: do the same as its owner on ours
    (which must then succeed with the same result)."""
    pair = op.pair
    if op.kind == "get":  # nothing changed anywhere
        return
    if op.kind == "delete":
        got = w.ours.call(pair.owner, lambda c: c.delete_memory(pair.ours))
        if got.status != 200:
            w.unexplained.append(f"{op.describe()}: owner's delete on ours: {got}")
        pair.alive = False
        return
    if ref.status != 200:  # a stale version: nothing changed on the reference either
        return
    got = w.ours.call(pair.owner, lambda c: c.update_memory(pair.ours, op.if_match, **op.body))
    diffs = [f"owner's replay: {got.status}"] if got.status != 200 else \
        entry_differences(w, got.body, ref.body, pair)
    if diffs:
        w.unexplained.append(f"{op.describe()}: {'; '.join(diffs)}")
    pair.version = ref.body["version"]


def unique_key_applies(op: Op, ours: Resp, ref: Resp, w: World) -> bool:
    if not (op.kind == "create" and ours.status == 409 and ours.code() == "DUPLICATE_KEY"
            and ref.status == 200 and envelope_ok(ours)):
        return False
    existing = w.by_ours(ours.body.get("existing_id"))
    tier, agent = op.body["memory_type"], op.body["agent_id"]
    claim = (("semantic", op.body["namespace"], op.body["key"]) if tier == "semantic"
             else ("agent", agent, op.body["namespace"], op.body["key"]))
    return (existing is not None and existing.alive and existing.claim() == claim
            and ours.body.get("current_version") == existing.version)


def capacity_applies(op: Op, ours: Resp, ref: Resp, w: World) -> bool:
    if not (op.kind == "create" and ours.status == 429 and ref.status == 200
            and envelope_ok(ours) and op.body.get("memory_type") == "working"):
        return False
    task = (op.body.get("scope") or {}).get("task_id")
    return (w.working_count(op.caller, task) == WORKING_CAPACITY
            and ours.body.get("max_capacity") == WORKING_CAPACITY
            and ours.body.get("current_count") == WORKING_CAPACITY)


def isolation_applies(op: Op, ours: Resp, ref: Resp, w: World) -> bool:
    p = op.pair
    return (op.kind in ("get", "update", "delete") and p is not None and p.alive
            and p.tier != "semantic" and op.caller != p.owner and ours.status == 404
            and envelope_ok(ours)
            and (ref.status == 200 or (op.kind == "update" and ref.status == 409)))


@dataclass
class Rule:
    name: str
    reference: str
    ours: str
    why: str
    applies: Callable[[Op, Resp, Resp, World], bool]
    reconverge: Callable[[Op, Resp, Resp, World], None]


def refused(variant: str, ours: int, ref: int, kind: str | None = None):
    """A rule's test for a request of `variant` (and `kind`, when given) that ours refuses
    with `ours` and a proper error body where the reference answers `ref`."""
    return lambda op, o, r, w: ((kind is None or op.kind == kind) and op.variant == variant
                                and o.status == ours and envelope_ok(o) and r.status == ref)


RULES = [
    Rule("validation-422", "422 FastAPI `detail` list (pydantic)", "400 VALIDATION_ERROR",
         "RFC-0015 SDK error model; the official client raises ValidationError on 400 only",
         refused("invalid-422", 400, 422), nothing),
    Rule("stricter-validation",
         "200: stores any memory_type/priority string, empty namespace/key, any ttl",
         "400 VALIDATION_ERROR naming the field",
         "§1.1 enums (memory_type, priority) and required non-empty namespace/key; ttl forms",
         lambda op, o, r, w: op.variant == "invalid-accepted" and o.status == 400
         and envelope_ok(o) and (r.status == 200 and op.kind in ("create", "list")),
         lambda op, o, r, w: delete_reference_extra(op, o, r, w) if op.kind == "create" else None),
    Rule("value-too-large", "200: any value size", "413 VALUE_TOO_LARGE",
         "§1.3 values SHOULD NOT exceed 64 KB",
         refused("too-large", 413, 200, kind="create"), delete_reference_extra),
    Rule("if-match-format", "428 (a non-integer If-Match reads as absent)",
         "400 VALIDATION_ERROR (field If-Match)",
         "§3.2: If-Match carries the version; a malformed one is a bad request, not a missing one",
         refused("if-match-text", 400, 428, kind="update"), nothing),
    Rule("not-caller", "200: creates an entry for any agent_id", "403 ACCESS_DENIED",
         "§9 isolation: agent_id must be the authenticated agent (X-Agent-ID)",
         refused("other-agent", 403, 200, kind="create"), delete_reference_extra),
    Rule("unique-key", "200: a second entry with the same key",
         "409 DUPLICATE_KEY with existing_id and current_version",
         "§1.1 key is unique within the namespace for this agent (working+episodic), "
         "semantic namespace-scoped (§2.3)", unique_key_applies, delete_reference_extra),
    Rule("working-capacity", "200: no capacity", "429 CAPACITY_EXCEEDED (current_count, "
         "max_capacity)", "§9.4 working memory limit per task",
         capacity_applies, delete_reference_extra),
    Rule("private-isolation", "any agent reads/patches/deletes any id",
         "404 ENTRY_NOT_FOUND for another agent's working/episodic entry",
         "§9.1 working and episodic entries MUST NOT be accessible to other agents",
         isolation_applies, replay_as_owner),
    Rule("patch-unknown", "409 `Version conflict or entry not found`", "404 ENTRY_NOT_FOUND",
         "§3.2 409 carries the current entry state; a missing entry has none",
         lambda op, o, r, w: op.kind == "update" and (op.pair is None or not op.pair.alive)
         and o.status == 404 and envelope_ok(o) and r.status == 409 and detail_ok(r), nothing),
]
RULE = {r.name: r for r in RULES}
# Rules applied inside comparisons (no reconvergence needed): counted where they hold.
FORMAT_RULES = {
    "error-envelope": ("FastAPI `{\"detail\": ...}`", "`{\"error\": CODE, \"message\", ...}`; "
                       "409 VERSION_MISMATCH carries current_version and current_entry",
                       "RFC-0015 SDK error codes (§ Python SDK); §3.2 current state on 409"),
    "id-format": ("uuid4", "mem_/sem_ + ULID (time-ordered, home in the id)",
                  "§1.1 server-generated id, format free"),
    "naive-timestamps": ("naive ISO 8601, no timezone", "RFC 3339 UTC (`Z`)",
                         "§1 example timestamps carry `Z`"),
    "curated-by": ("null", "the creating agent on semantic entries",
                   "§2.3 curated_by on semantic entries"),
    "list-isolation": ("lists every entry of agent X to anyone",
                       "another agent sees only X's semantic entries",
                       "§9.1 owner-only working/episodic"),
    "list-filters": ("ignores `tags` and `offset`", "tags (AND) and offset applied",
                     "§4.1 tags (AND logic), offset"),
}


# ---------------------------------------------------------------------------------------------
# Comparing one step.


def compare_errors(w: World, op: Op, ours: Resp, ref: Resp) -> list[str]:
    """Same non-2xx status on both sides: the bodies' shapes differ by rule; ours must carry
    the right code, and a VERSION_MISMATCH the entry as the reference holds it."""
    if not (envelope_ok(ours) and isinstance(ref.body, dict) and "detail" in ref.body):
        return [f"error bodies: ours {ours.body!r} ref {ref.body!r}"]
    w.counts["error-envelope"] += 1
    if ours.code() == "DUPLICATE_KEY":
        return [f"409 DUPLICATE_KEY on a {op.kind}"]
    if ours.code() == "VERSION_MISMATCH":
        p = op.pair
        current = w.ref.call(p.owner, lambda c: c.get_memory(p.ref))
        if current.status != 200:
            return [f"VERSION_MISMATCH but the reference has no entry: {current}"]
        diffs = entry_differences(w, ours.body.get("current_entry"), current.body, p)
        if ours.body.get("current_version") != current.body["version"]:
            diffs.append(f"current_version {ours.body.get('current_version')} != "
                         f"{current.body['version']}")
        return diffs
    return []


def settle(w: World, op: Op, ours: Resp, ref: Resp) -> None:
    """Equal outcomes: update the model (creates map ids, updates bump versions)."""
    if ours.status != 200:
        return
    if op.kind == "create":
        body = op.body
        w.pairs.append(Pair(ours.body["id"], ref.body["id"], body["agent_id"],
                            body["memory_type"], body["namespace"], body["key"],
                            (body.get("scope") or {}).get("task_id")))
    elif op.kind == "update":
        op.pair.version = ref.body["version"]
    elif op.kind == "delete":
        op.pair.alive = False


def expected_rules(op: Op, w: World) -> set[str]:
    """The rules the model says this step must show (before anything settles): a rule whose
    difference does not appear fails the step too, so ours cannot drift towards the reference
    unnoticed. Two rules when both hold (a duplicate key in a full task: either answer)."""
    by_variant = {"invalid-accepted": "stricter-validation", "invalid-422": "validation-422",
                  "too-large": "value-too-large", "other-agent": "not-caller",
                  "if-match-text": "if-match-format"}
    if op.variant in by_variant:
        return {by_variant[op.variant]}
    p = op.pair
    if op.kind == "create":
        b = op.body
        claim = (("semantic", b["namespace"], b["key"]) if b["memory_type"] == "semantic"
                 else ("agent", b["agent_id"], b["namespace"], b["key"]))
        out = set()
        if any(q.claim() == claim for q in w.live()):
            out.add("unique-key")
        task = (b.get("scope") or {}).get("task_id")
        if b["memory_type"] == "working" and w.working_count(op.caller, task) >= WORKING_CAPACITY:
            out.add("working-capacity")
        return out
    if op.kind in ("get", "update", "delete") and op.variant != "no-if-match":
        if p is not None and p.alive and p.tier != "semantic" and op.caller != p.owner:
            return {"private-isolation"}
        if op.kind == "update" and (p is None or not p.alive):
            return {"patch-unknown"}
    return set()


def check_step(w: World, op: Op, ours: Resp, ref: Resp) -> None:
    diffs: list[str] = []
    expected = expected_rules(op, w)
    if ours.status == ref.status and expected:
        diffs = [f"the model expects {sorted(expected)} but both answered {ours.status}: "
                 f"ours {json.dumps(ours.body)[:300]} | ref {json.dumps(ref.body)[:300]}"]
    elif ours.status == ref.status:
        if ours.status == 200 and op.kind in ("create", "get", "update"):
            pair = op.pair if op.kind != "create" else None
            diffs = entry_differences(w, ours.body, ref.body, pair)
        elif ours.status == 200 and op.kind == "delete":
            if (ours.body != {"status": "deleted", "entry_id": op.pair.ours}
                    or ref.body != {"status": "deleted", "entry_id": op.pair.ref}):
                diffs = [f"delete bodies: ours {ours.body!r} ref {ref.body!r}"]
        elif ours.status != 200:
            diffs = compare_errors(w, op, ours, ref)
        if not diffs:
            settle(w, op, ours, ref)
    else:
        matched = [r for r in RULES if r.applies(op, ours, ref, w)]
        if len(matched) == 1 and matched[0].name in expected:
            w.counts[matched[0].name] += 1
            matched[0].reconverge(op, ours, ref, w)
        else:
            diffs = [f"rules {[r.name for r in matched]} match, the model expects "
                     f"{sorted(expected)}: "
                     f"ours {ours.status} {json.dumps(ours.body)[:300]} | "
                     f"ref {ref.status} {json.dumps(ref.body)[:300]}"]
    for d in diffs:
        w.unexplained.append(f"{op.describe()}: {d}")


def list_params(namespace=None, memory_type=None, tags=None, limit=100, offset=0) -> dict:
    return {"namespace": namespace, "memory_type": memory_type, "tags": tags, "limit": limit,
            "offset": offset}


def check_list(w: World, op: Op, ours: Resp, ref: Resp) -> None:
    """A list: equal, or equal to the reference's full list (same namespace and memory_type)
    once the list rules are applied to it."""
    p, agent = op.params, op.params["agent"]
    if op.variant == "invalid-accepted":  # memory_type outside the enum
        check_step(w, op, ours, ref)
        return
    if ours.status != 200 or ref.status != 200:
        w.unexplained.append(f"{op.describe()}: list statuses ours {ours.status} "
                             f"{ours.body!r} ref {ref.status} {ref.body!r}")
        return

    def pairs_of(entries: list[dict], side: str) -> list[Pair | None]:
        return [w.by_ours(e["id"]) if side == "ours" else w.by_ref(e["id"]) for e in entries]

    expected = ref.body
    used = []
    if op.caller != agent or p["tags"] or p["offset"]:
        # The reference's own answer ignores these: its full list, the rules applied.
        full = w.ref.call(op.caller, lambda c: c.list_memory(
            agent, namespace=p["namespace"], memory_type=p["memory_type"], limit=1000))
        expected = full.body
        if [e["id"] for e in ref.body] != [e["id"] for e in full.body[:p["limit"]]]:
            w.unexplained.append(f"{op.describe()}: the reference's list is not its full list "
                                 f"cut at limit (what list-isolation/list-filters assume)")
        if op.caller != agent:
            kept = [e for e in expected if e["memory_type"] == "semantic"]
            if kept != expected:
                used.append("list-isolation")
            expected = kept
        if p["tags"] or p["offset"]:
            kept = [e for e in expected if all(t in e["tags"] for t in p["tags"] or [])]
            kept = kept[p["offset"]:]
            if kept != expected:
                used.append("list-filters")
            expected = kept
        expected = expected[:p["limit"]]
    mine = pairs_of(ours.body, "ours")
    theirs = pairs_of(expected, "ref")
    diffs = []
    if [x.ours if x else None for x in mine] != [x.ours if x else None for x in theirs]:
        diffs.append(f"list ids: ours {[e['id'] for e in ours.body]} expected "
                     f"{[x.ours if x else '?' for x in theirs]} (rules {used})")
    else:
        for e_ours, e_ref, pr in zip(ours.body, expected, mine):
            diffs += entry_differences(w, e_ours, e_ref, pr)
        for name in used:
            w.counts[name] += 1
    for d in diffs:
        w.unexplained.append(f"{op.describe()}: {d}")


# ---------------------------------------------------------------------------------------------
# The seeded sequence.


def random_value(rng: random.Random, step: int) -> dict:
    pick = rng.random()
    if pick < 0.5:
        return {"step": step, "n": rng.randint(-1000, 1000), "done": rng.random() < 0.5}
    if pick < 0.8:
        return {"items": [rng.randint(0, 9) for _ in range(rng.randint(0, 4))],
                "nested": {"label": rng.choice(["x", "Grüße", "日本", "a\"b"]), "none": None}}
    return {"ratio": rng.choice([0.5, 0.1, 3.25, -2.0]), "big": rng.choice([2 ** 40, 10 ** 15]),
            "text": "v" * rng.randint(0, 300)}


def random_tags(rng: random.Random) -> list[str]:
    return rng.sample(TAGS, rng.randint(0, 3))


def gen_create(rng: random.Random, step: int, w: World) -> Op:
    caller = rng.choice(AGENTS)
    tier = rng.choice(TIERS)
    namespace, key = rng.choice(NAMESPACES), rng.choice(KEYS)
    if rng.random() < 0.7:  # mostly a free key; the rest may collide (§1.2)
        held = {q.claim() for q in w.live()}
        free = [(n, k) for n in NAMESPACES for k in KEYS
                if (("semantic", n, k) if tier == "semantic" else ("agent", caller, n, k))
                not in held]
        if free:
            namespace, key = rng.choice(free)
    body: dict[str, Any] = {"agent_id": caller, "namespace": namespace, "key": key,
                            "value": random_value(rng, step), "memory_type": tier}
    if tier == "working":
        task = rng.choice(TASKS)
        if task:
            body["scope"] = {"task_id": task}
    if rng.random() < 0.5:
        body["tags"] = random_tags(rng)
    if rng.random() < 0.3:
        body["priority"] = rng.choice(["low", "normal", "high"])
    if rng.random() < 0.2:
        body["pinned"] = rng.random() < 0.5
    if rng.random() < 0.1:
        body["sensitivity"] = rng.choice(["public", "internal", "confidential", "restricted"])
    if rng.random() < 0.1:
        body["ttl"] = "task_lifetime"
    op = Op("create", caller, step, body=body)
    r = rng.random()
    if r < 0.06:
        op.variant = "invalid-accepted"
        bad = rng.choice(["memory_type", "priority", "namespace", "key", "ttl"])
        body[bad] = {"memory_type": "long_term", "priority": "urgent", "namespace": "",
                     "key": "", "ttl": "forever"}[bad]
    elif r < 0.11:
        op.variant = "invalid-422"
        bad = rng.choice(["value", "tags", "missing-key", "pinned"])
        if bad == "value":
            body["value"] = rng.choice([[1, 2], "text", 7])
        elif bad == "tags":
            body["tags"] = [1, 2]
        elif bad == "pinned":
            body["pinned"] = [True]
        else:
            del body["key"]
            op.params["raw"] = True
    elif r < 0.13:
        op.variant = "too-large"
        body["value"] = {"blob": "x" * (70 * 1024)}
    elif r < 0.17:
        op.variant = "other-agent"
        body["agent_id"] = next(a for a in AGENTS if a != caller)
    return op


def pick_pair(rng: random.Random, w: World) -> Pair | None:
    live = w.live()
    if live and rng.random() < 0.85:
        return rng.choice(live)
    dead = [p for p in w.pairs if not p.alive]
    if dead and rng.random() < 0.7:
        return rng.choice(dead)
    return None  # an id neither side ever issued


def other_or_owner(rng: random.Random, pair: Pair | None, cross: float) -> str:
    if pair is None:
        return rng.choice(AGENTS)
    if rng.random() < cross:
        return next(a for a in AGENTS if a != pair.owner)
    return pair.owner


def gen_update(rng: random.Random, step: int, w: World) -> Op:
    pair = pick_pair(rng, w)
    caller = other_or_owner(rng, pair, 0.15)
    body: dict[str, Any] = {}
    for name, make in (("value", lambda: random_value(rng, step)), ("tags", lambda: random_tags(rng)),
                       ("pinned", lambda: rng.random() < 0.5),
                       ("priority", lambda: rng.choice(["low", "normal", "high"]))):
        if rng.random() < (0.8 if name == "value" else 0.25):
            body[name] = make()
    version = pair.version if pair else 1
    op = Op("update", caller, step, pair=pair, body=body, if_match=str(version))
    r = rng.random()
    if r < 0.2:
        op.variant = "stale"
        op.if_match = str(version - 1 if version > 1 and rng.random() < 0.6 else version + 1)
    elif r < 0.25:
        op.variant = "if-match-text"
        op.if_match = rng.choice(["latest", "v2", "*"])
    elif r < 0.29:
        op.variant = "no-if-match"
        op.if_match = None
        op.params["raw"] = True
    elif r < 0.33:
        op.variant = "invalid-422"
        op.body = {"value": rng.choice([[1], "text", 3])}
    return op


def gen_list(rng: random.Random, step: int, w: World) -> Op:
    caller = rng.choice(AGENTS)
    agent = caller if rng.random() < 0.7 else next(a for a in AGENTS if a != caller)
    params = list_params(
        namespace=rng.choice(NAMESPACES) if rng.random() < 0.3 else None,
        memory_type=rng.choice(TIERS) if rng.random() < 0.3 else None,
        tags=random_tags(rng)[:2] or None if rng.random() < 0.3 else None,
        limit=rng.choice([100, 100, 3, 1000]),
        offset=rng.choice([0, 0, 0, 1, 2]))
    op = Op("list", caller, step, params=dict(params, agent=agent))
    if rng.random() < 0.03:
        op.variant = "invalid-accepted"
        op.params["memory_type"] = "long_term"
    return op


def run_op(w: World, op: Op) -> tuple[Resp, Resp]:
    """The same call on both sides (ids mapped), through the official client when it can
    express it."""
    unknown = {"ours": "mem_01ZZZZZZZZZZZZZZZZZZZZZZZZ", "ref": str(uuid.uuid4())}

    def on(side: Side, which: str) -> Resp:
        eid = getattr(op.pair, which) if op.pair else unknown[which]
        if op.kind == "create":
            if op.params.get("raw"):
                return side.request(op.caller, "POST", "/api/v1/memory", json=op.body)
            b = dict(op.body)
            return side.call(op.caller, lambda c: c.create_memory(
                b.pop("agent_id"), b.pop("namespace", None), b.pop("key", None),
                b.pop("value"), b.pop("memory_type"), **b))
        if op.kind == "get":
            return side.call(op.caller, lambda c: c.get_memory(eid))
        if op.kind == "delete":
            return side.call(op.caller, lambda c: c.delete_memory(eid))
        if op.kind == "update":
            if op.params.get("raw"):
                return side.request(op.caller, "PATCH", f"/api/v1/memory/{eid}", json=op.body)
            return side.call(op.caller, lambda c: c.update_memory(eid, op.if_match, **op.body))
        p = op.params
        return side.call(op.caller, lambda c: c.list_memory(
            p["agent"], namespace=p["namespace"], memory_type=p["memory_type"], tags=p["tags"],
            limit=p["limit"], offset=p["offset"]))

    return on(w.ours, "ours"), on(w.ref, "ref")


def full_lists(w: World, step: int) -> None:
    for caller in AGENTS:
        for agent in AGENTS:
            op = Op("list", caller, step, variant="full", params=dict(list_params(limit=1000),
                                                                         agent=agent))
            ours, ref = run_op(w, op)
            check_list(w, op, ours, ref)
            w.counts["full-list-compared"] += 1


def run_sequence(w: World, steps: int = STEPS, seed: int = SEED) -> None:
    rng = random.Random(seed)
    for step in range(1, steps + 1):
        r = rng.random()
        if r < 0.35:
            op = gen_create(rng, step, w)
        elif r < 0.55:
            pair = pick_pair(rng, w)
            op = Op("get", other_or_owner(rng, pair, 0.2), step, pair=pair)
        elif r < 0.75:
            op = gen_update(rng, step, w)
        elif r < 0.85:
            pair = pick_pair(rng, w)
            op = Op("delete", other_or_owner(rng, pair, 0.15), step, pair=pair)
        else:
            op = gen_list(rng, step, w)
        ours, ref = run_op(w, op)
        w.counts[f"op:{op.kind}"] += 1
        if op.kind == "list":
            check_list(w, op, ours, ref)
        else:
            check_step(w, op, ours, ref)
        if step % FULL_LIST_EVERY == 0:
            full_lists(w, step)
        if len(w.unexplained) >= 25:
            break
    # The final state: every live entry, read by its owner, equal on both sides.
    for p in w.live():
        ours, ref = run_op(w, Op("get", p.owner, steps + 1, pair=p))
        check_step(w, Op("get", p.owner, steps + 1, pair=p), ours, ref)
    full_lists(w, steps + 1)


# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def servers():
    gw = start_gateway("openintent-diff", {"INTENT_WORKING_CAPACITY": str(WORKING_CAPACITY)},
                       exchanges=False)
    reference = ReferenceServer()
    tenant = new_tenant()
    api_key = Invoker(gw.base_url).issue_api_key(tenant, list(AGENTS))["apiKey"]
    ours = Side("ours", gw.base_url, api_key)
    ref = Side("reference", reference.base_url, REFERENCE_KEY)
    yield ours, ref
    ours.close()
    ref.close()
    reference.stop()
    gw.stop()


def print_counts(w: World, seconds: float) -> None:
    print(f"\nOpenIntent differential: seed {SEED}, {STEPS} steps, {seconds:.0f} s, "
          f"{len(w.pairs)} entries created on both sides, {len(w.live())} live at the end")
    print("operations: " + ", ".join(f"{k[3:]} {v}" for k, v in sorted(w.counts.items())
                                     if k.startswith("op:")))
    print(f"full lists compared: {w.counts['full-list-compared']}")
    print("| rule | count |\n|---|---|")
    for name in [r.name for r in RULES] + list(FORMAT_RULES):
        print(f"| {name} | {w.counts[name]} |")
    print(f"| (unexplained) | {len(w.unexplained)} |")


def test_openintent_differential(servers):
    ours, ref = servers
    w = World(ours, ref)
    started = time.monotonic()
    run_sequence(w)
    print_counts(w, time.monotonic() - started)
    assert not w.unexplained, "differences outside the rules:\n" + "\n".join(w.unexplained[:25])
    # The sequence reached what it was written to reach: every rule, duplicates, both tiers'
    # isolation, stale versions.
    unused = [name for name in [r.name for r in RULES] + list(FORMAT_RULES) if not w.counts[name]]
    assert not unused, f"rules the sequence never exercised: {unused}"
    assert w.counts["op:create"] + w.counts["op:get"] + w.counts["op:update"] + \
        w.counts["op:delete"] + w.counts["op:list"] == STEPS
