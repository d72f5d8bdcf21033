"""The RFC 0080 capability document, read without a token through the official client, and every
claim in it exercised by behaviour. `CHECKS` maps each leaf of the document (a scalar or a list)
to the check that proves it; `test_d_every_claim_has_a_check` walks the served document and fails
on a leaf without a check (and on a check whose claim is gone), so no claim can be added or kept
unchecked."""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime, timezone
from typing import Any, Callable

import pytest
import yaml
from openwop_client import WopError
from openwop_client.events import is_memory_written, memory_written_payload

from wopkit import (
    ROOT,
    Api,
    aws_client,
    memory_ref,
    new_id,
    new_tenant,
    of_type,
    query,
    rfc3339_in,
    run_event,
    sensitive,
)

# ---------------------------------------------------------------------------------------------
# The document.


def leaves(doc: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of the document by dotted path; lists are leaves (their value is the claim)."""
    if isinstance(doc, dict) and doc:
        out: dict[str, Any] = {}
        for key, value in doc.items():
            out.update(leaves(value, f"{prefix}.{key}" if prefix else key))
        return out
    return {prefix: doc}


@pytest.fixture(scope="module")
def caps(base_url) -> dict[str, Any]:
    # The client needs some api_key; authenticated=False sends no Authorization header at all.
    return Api(base_url, "unused").capabilities(authenticated=False)


def test_d_capabilities_are_served_without_a_token_and_hold_no_tenant_data(base_url, caps,
                                                                          tenant):
    assert set(caps) == {"memory", "agents"}, caps
    assert set(caps["agents"]) == {"memoryBackends", "memoryConsolidation", "commitments"}
    assert isinstance(caps["memory"], dict) and caps["memory"]
    # Identical for every caller: nothing tenant-specific.
    assert Api(base_url, tenant).capabilities(authenticated=True) == caps
    other = new_tenant()
    assert Api(base_url, other).capabilities(authenticated=True) == caps
    text = json.dumps(caps)
    assert tenant not in text and other not in text and "workspaces/" not in text


# ---------------------------------------------------------------------------------------------
# Behaviour behind the claims. Expensive scenarios run once per module and are shared.


class Scenario:
    def __init__(self, api: Api, invoker, tap, tenant: str) -> None:
        self.api, self.invoker, self.tap, self.tenant = api, invoker, tap, tenant
        self._memo: dict[str, Any] = {}

    def once(self, name: str, build: Callable[[], Any]) -> Any:
        if name not in self._memo:
            self._memo[name] = build()
        return self._memo[name]

    def ref(self, agent: str) -> str:
        return memory_ref(self.tenant, agent)

    def content(self, text: str) -> str:
        return sensitive(f"{text} {new_id()}")

    # -- write / read -------------------------------------------------------------------------
    def round_trip(self) -> dict[str, Any]:
        def build():
            ref = self.ref("agent-rw")
            content = self.content("Customer prefers e-mail")
            [entry_id] = self.invoker.put(self.tenant, ref, [{"content": content,
                                                              "tags": ["preference"]}])
            return {"ref": ref, "id": entry_id, "content": content,
                    "get": self.api.get(ref, entry_id), "list": self.api.list(ref)}
        return self.once("round_trip", build)

    # -- TTL ----------------------------------------------------------------------------------
    def ttl(self) -> dict[str, Any]:
        def attempt(window: float) -> dict[str, Any] | None:
            ref = self.ref(f"agent-ttl-{new_id()}")
            expires_at = rfc3339_in(window)
            deadline = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
            short, stays = self.invoker.put(self.tenant, ref, [
                {"content": self.content("short-lived note"), "expiresAt": expires_at},
                {"content": self.content("lasting note")},
            ])
            try:
                before = [e["id"] for e in self.api.list(ref)["entries"]]
                before_get = self.api.get(ref, short)
            except WopError:
                before, before_get = [], None
            if datetime.now(timezone.utc) >= deadline:
                return None  # too slow a machine for this window: the control proves nothing
            while datetime.now(timezone.utc) <= deadline:
                time.sleep(0.1)
            time.sleep(0.05)
            after = [e["id"] for e in self.api.list(ref)["entries"]]
            try:
                self.api.get(ref, short)
                after_get = 200
            except WopError as err:
                after_get = err.status
            return {"short": short, "stays": stays, "before": before, "after": after,
                    "before_get": before_get, "after_get": after_get, "expiresAt": expires_at}

        def build():
            # ~2 s ahead; a loaded machine that cannot read it back in time gets a longer window.
            for window in (2.5, 6.0, 15.0):
                result = attempt(window)
                if result is not None:
                    return result
            raise AssertionError("could not write and read back within 15 s")
        return self.once("ttl", build)

    # -- search -------------------------------------------------------------------------------
    def tag_filter(self) -> dict[str, Any]:
        def build():
            ref = self.ref("agent-search")
            ids = self.invoker.put(self.tenant, ref, [
                {"content": self.content("likes tea"), "tags": ["drink", "preference"]},
                {"content": self.content("lives in Oslo"), "tags": ["place"]},
                {"content": self.content("likes coffee"), "tags": ["drink"]},
                {"content": self.content("untagged note")},
            ])
            return {"ids": ids, "drink": self.api.list(ref, tag="drink")["entries"],
                    "none": self.api.list(ref, tag="absent-tag")["entries"],
                    "all": self.api.list(ref)["entries"]}
        return self.once("tag_filter", build)

    # -- ranked search (host extension) --------------------------------------------------------
    def ranked(self) -> dict[str, Any]:
        def build():
            ref = self.ref("agent-ranked")
            texts = ["the refund was approved", "refunds take five days", "Café à Montréal",
                     "会议在东京举行", "nothing related here", "customer called"]
            ids = self.invoker.put(self.tenant, ref, [
                {"content": self.content(t), "tags": ["note"]} for t in texts])
            def search(q: str, *extra: tuple[str, Any]) -> list[dict[str, Any]]:
                path = f"/v1/host/wop-memory/search?{query([('memoryRef', ref), ('q', q), *extra])}"
                return self.api.request("GET", path)["results"]
            return {"ids": ids, "search": search}
        return self.once("ranked", build)

    # -- forget -------------------------------------------------------------------------------
    def forget(self) -> dict[str, Any]:
        def build():
            ref = self.ref("agent-forget")
            subject = sensitive(f"subject-{new_id()}@example.com")
            ids = self.invoker.put(self.tenant, ref, [
                {"content": self.content("subject fact one"), "subject": subject},
                {"content": self.content("subject fact two"), "subject": subject},
                {"content": self.content("unrelated fact")},
            ])
            before = len(self.api.list(ref)["entries"])
            counts = self.api.forget(subject)
            after = [e["id"] for e in self.api.list(ref)["entries"]]
            again = self.api.forget(subject)
            return {"ids": ids, "before": before, "counts": counts, "after": after,
                    "again": again}
        return self.once("forget", build)

    # -- attribution --------------------------------------------------------------------------
    def attribution(self) -> list[dict[str, Any]]:
        def build():
            ref = self.ref("agent-attr")
            [entry_id] = self.invoker.put(
                self.tenant, ref, [{"content": self.content("attributed note"), "tags": ["a"]}],
                run_id="run-attr", attribution={"nodeId": "node-attr", "agentId": "agent-attr"})
            events = self.tap.wait(of_type("memory.written", ref), 1)
            return {"id": entry_id, "events": events}
        return self.once("attribution", build)

    # -- dream --------------------------------------------------------------------------------
    def dream(self) -> dict[str, Any]:
        def build():
            ref = self.ref("agent-dream")
            self.invoker.put(self.tenant, ref, [
                {"content": self.content(f"Customer prefers email follow-up; ticket {n} closed"),
                 "tags": ["preference"]} for n in range(6)])
            report = self.invoker.ok("memory-dream", {"tenantId": self.tenant, "memoryRef": ref})
            compacted = self.tap.wait(of_type("memory.compacted", ref), 1)
            updated = self.tap.wait(of_type("workspace.updated", ref), 1)
            return {"ref": ref, "report": report, "compacted": compacted, "updated": updated}
        return self.once("dream", build)

    def dream_over_budget(self, budget: int) -> dict[str, Any]:
        def build():
            ref = self.ref("agent-dream-budget")
            self.invoker.put(self.tenant, ref, [{"content": self.content("budget note")},
                                                {"content": self.content("another note")}])
            return self.invoker.ok("memory-dream", {"tenantId": self.tenant, "memoryRef": ref,
                                                    "tokenBudget": budget})
        return self.once("dream_over_budget", build)


    # -- the OpenIntent door (host extension) ---------------------------------------------------
    def openintent(self) -> dict[str, Any]:
        def build():
            import httpx
            from openintent import OpenIntentClient
            from openintent.exceptions import ConflictError, OpenIntentError

            agent = "agent-keyed"
            issued = self.invoker.ok("memory-intent", {"op": "issueApiKey", "tenantId": self.tenant,
                                                       "agents": [agent]})
            sensitive(issued["apiKey"])
            base = self.api.base_url
            client = OpenIntentClient(base, api_key=issued["apiKey"], agent_id=agent)
            subject = sensitive(f"subject-{new_id()}@example.com")
            value = {"note": self.content("keyed fact")}
            made = {tier: client.create_memory(agent, "caps", f"k-{tier}", value, memory_type=tier,
                                               scope={"task_id": "caps-task"}, subject=subject)
                    for tier in ("working", "episodic", "semantic")}
            updated = client.update_memory(made["episodic"].id, 1, tags=["t"])
            try:
                client.update_memory(made["episodic"].id, 1, tags=["stale"])
                stale = None
            except ConflictError as e:
                stale = e.current_version
            raw = httpx.Client(base_url=base, headers={"X-API-Key": issued["apiKey"],
                                                        "X-Agent-ID": agent})
            versions = raw.get(f"/api/v1/memory/{made['episodic'].id}/versions").json()
            no_key = httpx.post(f"{base}/api/v1/memory", json={}).status_code
            sizes = {}
            for n in (65536, 65537):
                # {"v":"<x * k>"} serialises to k + 8 bytes.
                body = {"agent_id": agent, "namespace": "caps", "key": f"size-{n}",
                        "value": {"v": "x" * (n - 8)}}
                sizes[n] = raw.post("/api/v1/memory", json=body).status_code
            archived = raw.post("/api/v1/tasks/caps-task/memory:archive").json()
            try:
                client.get_memory(made["working"].id)
                working_after_archive = 200
            except OpenIntentError as e:
                working_after_archive = e.status_code
            counts = self.api.forget(subject)
            after = {tier: raw.get(f"/api/v1/memory/{e.id}").status_code for tier, e in made.items()}
            return {"made": made, "updated": updated, "stale": stale, "versions": versions,
                    "no_key": no_key, "sizes": sizes, "archived": archived,
                    "working_after_archive": working_after_archive, "counts": counts,
                    "after": after}
        return self.once("openintent", build)


@pytest.fixture(scope="module")
def scenario(api, invoker, tap, tenant) -> Scenario:
    return Scenario(api, invoker, tap, tenant)


# ---------------------------------------------------------------------------------------------
# The checks, one per claim.

CHECKS: dict[str, Callable[[Scenario, Any], None]] = {}


def claim(*paths: str):
    def register(check):
        for path in paths:
            assert path not in CHECKS, path
            CHECKS[path] = check
        return check
    return register


@claim("memory.supported")
def check_supported(s: Scenario, value: Any) -> None:
    assert value is True
    rt = s.round_trip()
    assert rt["get"]["id"] == rt["id"] and rt["get"]["content"] == rt["content"]


@claim("memory.writable")
def check_writable(s: Scenario, value: Any) -> None:
    assert value is True
    rt = s.round_trip()
    assert [e["id"] for e in rt["list"]["entries"]] == [rt["id"]]
    assert rt["list"]["entries"][0]["tags"] == ["preference"]


@claim("memory.ttlSupported", "memory.retention.ttl")
def check_ttl(s: Scenario, value: Any) -> None:
    assert value is True
    ttl = s.ttl()
    assert ttl["short"] in ttl["before"], "positive control: listed before expiresAt"
    assert ttl["before_get"] is not None, "positive control: readable before expiresAt"
    assert ttl["before_get"]["expiresAt"] == ttl["expiresAt"]
    assert ttl["after"] == [ttl["stays"]], "gone from list once expiresAt has passed"
    assert ttl["after_get"] == 404, "gone from get once expiresAt has passed"


@claim("memory.search.supported")
def check_search_supported(s: Scenario, value: Any) -> None:
    assert value is True
    tf = s.tag_filter()
    assert len(tf["all"]) == 4, "positive control"
    assert tf["none"] == []


@claim("memory.search.modes")
def check_search_modes(s: Scenario, value: Any) -> None:
    assert value == ["filter"], "the tag filter is the only search this host offers"
    tf = s.tag_filter()
    ids = tf["ids"]
    assert sorted(e["id"] for e in tf["drink"]) == sorted([ids[0], ids[2]])
    assert all("drink" in e["tags"] for e in tf["drink"])


@claim("memory.x-wop-memory-search.route", "memory.x-wop-memory-search.maxLimit")
def check_ranked_route(s: Scenario, value: Any) -> None:
    r = s.ranked()
    if isinstance(value, str):
        assert value == "/v1/host/wop-memory/search"
        assert [h["entry"]["id"] for h in r["search"]("customer")] == [r["ids"][5]]
    else:
        assert value == 100
        assert len(r["search"]("note", ("limit", "1000"))) == 6, "clamped, not rejected"


@claim("memory.x-wop-memory-search.ranking", "memory.x-wop-memory-search.k1",
       "memory.x-wop-memory-search.b")
def check_ranked_bm25(s: Scenario, value: Any) -> None:
    import math
    assert value in ("bm25", 1.2, 0.75)
    hits = s.ranked()["search"]("approved", ("stem", "false"))
    assert len(hits) == 1
    # One matching document among six: idf = ln(1 + (6 - 1 + 0.5) / (1 + 0.5)); the document's
    # length (4 terms + its unique suffix + tag) against the average decides the rest, so check
    # the score lies where BM25 with k1 1.2 puts it for any length: idf * 2.2 / (1 + 1.2 * norm).
    idf = math.log(1 + 5.5 / 1.5)
    assert 0 < hits[0]["score"] <= idf * 2.2 / (1 + 1.2 * 0.25) + 1e-9


@claim("memory.x-wop-memory-search.analyzer")
def check_ranked_analyzer(s: Scenario, value: Any) -> None:
    assert "cjk-bigrams" in value and "accentfold" in value and "english-stopwords" in value
    r = s.ranked()
    assert [h["entry"]["id"] for h in r["search"]("cafe montreal")] == [r["ids"][2]]
    assert [h["entry"]["id"] for h in r["search"]("东京")] == [r["ids"][3]]
    # Only stop words: nothing to look for ("the refund was approved" holds "the" and "was").
    assert r["search"]("what was the") == []


@claim("memory.x-wop-memory-search.stemming")
def check_ranked_stemming(s: Scenario, value: Any) -> None:
    assert value.startswith("english-snowball")
    r = s.ranked()
    assert sorted(h["entry"]["id"] for h in r["search"]("refund")) == sorted(r["ids"][:2])
    assert [h["entry"]["id"] for h in r["search"]("refund", ("stem", "false"))] == [r["ids"][0]]


@claim("memory.x-wop-memory-search.newerWithin")
def check_ranked_recency(s: Scenario, value: Any) -> None:
    import math
    assert value == 0.7
    ref = s.ref(f"agent-recency-{new_id()}")
    [old] = s.invoker.put(s.tenant, ref, [{"content": sensitive("kiwi note")}])
    [new] = s.invoker.put(s.tenant, ref, [{"content": sensitive("kiwi note extra")}])
    path = f"/v1/host/wop-memory/search?{query([('memoryRef', ref), ('q', 'kiwi')])}"
    hits = s.api.request("GET", path)["results"]
    # BM25 alone ranks the shorter, older entry first (2 vs 3 terms, both hold "kiwi"); both
    # hold the same query terms and the newer scores above 0.7 of the older, so it is a newer
    # version of the same answer: it ranks first, with the older one's score.
    idf = math.log(1 + 0.5 / 2.5)
    bm25 = {n: idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * n / 2.5)) for n in (2, 3)}
    assert bm25[2] > bm25[3] >= value * bm25[2]
    assert [h["entry"]["id"] for h in hits] == [new, old]
    assert math.isclose(hits[0]["score"], bm25[2], rel_tol=1e-9)
    assert math.isclose(hits[1]["score"], bm25[2], rel_tol=1e-9)


@claim("memory.x-wop-memory-search.modes", "memory.x-wop-memory-search.embeddingModel",
       "memory.x-wop-memory-search.fusion.method", "memory.x-wop-memory-search.fusion.textWeight")
def check_ranked_modes(s: Scenario, value: Any) -> None:
    # This gateway runs without an embedder (test_g_semantic runs one with): text only, and the
    # fused mode the `fusion` field describes is refused, as are semantic searches.
    served = s.api.capabilities()["memory"]["x-wop-memory-search"]
    assert (served["modes"], served["embeddingModel"]) == (["text"], None)
    assert served["fusion"] == {"method": "convex", "textWeight": 0.5}
    assert value in (served["modes"], None, "convex", 0.5)
    ref = s.ranked()
    assert ref["search"]("refund"), "text mode is served"
    for mode in ("semantic", "hybrid"):
        path = (f"/v1/host/wop-memory/search?"
                f"{query([('memoryRef', s.ref('agent-ranked')), ('q', 'refund'), ('mode', mode)])}")
        s.api.error("GET", path, status=400, code="validation_error")


@claim("memory.retention.forget")
def check_forget(s: Scenario, value: Any) -> None:
    assert value is True
    f = s.forget()
    assert f["before"] == 3, "positive control"
    assert f["counts"]["deletedEntries"] == 2, f["counts"]
    assert set(f["counts"]) >= {"deletedEntries", "deletedArchives", "rebuiltIndexes",
                                "cancelledCommitments"}
    assert f["after"] == [f["ids"][2]], "only the unrelated entry is left"
    assert f["again"]["deletedEntries"] == 0, "idempotent"


@claim("memory.attribution.supported", "memory.attribution.emitsWriteEvents")
def check_attribution(s: Scenario, value: Any) -> None:
    assert value is True
    a = s.attribution()
    assert len(a["events"]) == 1, a["events"]
    doc = run_event(a["events"][0])
    assert is_memory_written(doc)
    payload = memory_written_payload(doc)
    assert payload["memoryId"] == a["id"]
    assert (payload.get("nodeId"), payload.get("agentId"), payload.get("runId")) == (
        "node-attr", "agent-attr", "run-attr")


@claim("memory.compaction.supported")
def check_compaction(s: Scenario, value: Any) -> None:
    assert value is True
    d = s.dream()
    assert d["report"]["status"] == "distilled", d["report"]
    assert len(d["compacted"]) == 1, d["compacted"]
    assert d["compacted"][0]["detail"]["outputId"] == d["report"]["outputId"]


@claim("memory.compaction.trigger")
def check_compaction_trigger(s: Scenario, value: Any) -> None:
    assert value == "host-managed"
    d = s.dream()
    assert [e["detail"]["trigger"] for e in d["compacted"]] == [value]


@claim("memory.distillation.supported")
def check_distillation(s: Scenario, value: Any) -> None:
    assert value is True
    d = s.dream()
    output = s.api.get(d["ref"], d["report"]["outputId"])
    assert output["id"] == d["report"]["outputId"], "the distilled entry is readable via get"
    assert any(t.startswith("compacted-from:") for t in output["tags"]), output["tags"]


@claim("memory.distillation.maxTokenBudget")
def check_max_token_budget(s: Scenario, value: Any) -> None:
    assert isinstance(value, int) and value > 0
    d = s.dream()
    dist = d["compacted"][0]["detail"]["distillation"]
    assert dist["tokenBudget"] <= value, dist
    assert dist["tokensUsed"] <= dist["tokenBudget"], dist
    assert d["report"]["tokenBudget"] == value, "an absent tokenBudget means the maximum"
    over = s.dream_over_budget(value * 10)
    assert over["status"] == "distilled", over
    assert over["tokenBudget"] == value, "a larger tokenBudget is clamped to the maximum"


@claim("memory.distillation.tokenizerName")
def check_tokenizer(s: Scenario, value: Any) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"Tokens are {value}" in readme, "the README states the tokenizer the host advertises"
    d = s.dream()
    archive = aws_client("s3").get_object(Bucket=_bucket(), Key=d["report"]["archiveKey"])
    document = json.loads(archive["Body"].read())
    assert document["tokenizer"] == value, "the archive records the tokenizer that counted"


def _bucket() -> str:
    return os.environ["ARCHIVE_BUCKET"]


class _CfnLoader(yaml.SafeLoader):
    """SafeLoader that keeps CloudFormation short-form tags (!Ref ...) as {tag: value}."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        return {suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {suffix: loader.construct_sequence(node, deep=True)}
    return {suffix: loader.construct_mapping(node, deep=True)}


_CfnLoader.add_multi_constructor("!", _intrinsic)


@claim("memory.distillation.archiveRetention")
def check_archive_retention(s: Scenario, value: Any) -> None:
    m = re.fullmatch(r"P(\d+)D", value)
    assert m, f"an ISO-8601 duration in days: {value!r}"
    days = int(m.group(1))
    d = s.dream()
    tags = aws_client("s3").get_object_tagging(Bucket=_bucket(), Key=d["report"]["archiveKey"])
    assert {"Key": "wop-memory-kind", "Value": "archive"} in tags["TagSet"], tags
    # The deployed bucket expires objects with that tag after ArchiveRetentionDays (the emulator
    # has no lifecycle expiry, so this half is read from the template the stack is built from).
    template = yaml.load((ROOT / "template.yaml").read_text(encoding="utf-8"),
                         Loader=_CfnLoader)
    assert template["Parameters"]["ArchiveRetentionDays"]["Default"] == days
    rules = template["Resources"]["ArchiveBucket"]["Properties"]["LifecycleConfiguration"][
        "Rules"]
    expiring = [r for r in rules if {"Key": "wop-memory-kind", "Value": "archive"}
                in r.get("TagFilters", [])]
    assert len(expiring) == 1, rules
    assert expiring[0]["ExpirationInDays"] == {"Ref": "ArchiveRetentionDays"}
    assert expiring[0]["Status"] == "Enabled"


@claim("memory.distillation.indexEmitted")
def check_index_emitted(s: Scenario, value: Any) -> None:
    assert value is True
    d = s.dream()
    assert len(d["updated"]) == 1, d["updated"]
    assert d["compacted"][0]["detail"]["distillation"]["indexUpdated"] is True
    agent = d["ref"].split("/")[3]
    key = f"{s.tenant}/agents/{agent}/workspace/MEMORY-INDEX.json"
    index = json.loads(aws_client("s3").get_object(Bucket=_bucket(), Key=key)["Body"].read())
    assert index["memoryRef"] == d["ref"]
    assert [line["outputEntryId"] for line in index["entries"]] == [d["report"]["outputId"]]


@claim("memory.list.maxLimit")
def check_max_limit(s: Scenario, value: Any) -> None:
    assert isinstance(value, int) and 0 < value <= 1000
    ref = s.ref("agent-limit")
    written: list[str] = []
    for start in range(0, value + 1, 25):
        batch = [{"content": s.content(f"bulk fact {n}")}
                 for n in range(start, min(start + 25, value + 1))]
        written += s.invoker.put(s.tenant, ref, batch)
    assert len(written) == value + 1
    page = s.api.list(ref, limit="1000")
    assert len(page["entries"]) == value, "a larger limit is clamped to maxLimit"
    assert page["nextCursor"], "and the rest is one cursor away"
    rest = s.api.list(ref, limit="1000", cursor=page["nextCursor"])
    assert len(rest["entries"]) == 1 and rest["nextCursor"] is None
    assert sorted(e["id"] for e in page["entries"] + rest["entries"]) == sorted(written)


@claim("agents.memoryBackends")
def check_memory_backends(s: Scenario, value: Any) -> None:
    assert value == ["long-term"]
    ref = s.ref("agent-long-term")
    [entry_id] = s.invoker.put(s.tenant, ref, [{"content": s.content("durable preference"),
                                                "tier": "long-term"}])
    assert [e["id"] for e in s.api.list(ref)["entries"]] == [entry_id]


@claim("agents.memoryConsolidation.supported")
def check_consolidation(s: Scenario, value: Any) -> None:
    assert value is True
    ref = s.ref("agent-consolidate")
    text = s.content("The customer's preferred contact channel is email")
    s.invoker.put(s.tenant, ref, [{"content": text, "tier": "long-term"},
                                  {"content": text, "tier": "long-term"}])
    report = s.invoker.ok("memory-consolidate", {"tenantId": s.tenant, "memoryRef": ref})
    assert (report["inputCount"], report["outputCount"]) == (2, 1), report
    events = s.tap.wait(of_type("agent.memory.consolidated", ref), 1)
    assert len(events) == 1, events
    detail = events[0]["detail"]
    assert detail["inputCount"] > detail["outputCount"], detail
    assert len(s.api.list(ref)["entries"]) == 1


@claim("agents.commitments.supported")
def check_commitments(s: Scenario, value: Any) -> None:
    assert value is True
    ref = s.ref("agent-commitments")
    remind = sensitive("remind me tomorrow at 9am to call the bank")
    statement = sensitive(f"The bank statement arrived {new_id()}")
    subject = sensitive(f"subject-{new_id()}@example.com")
    ids = s.invoker.put(s.tenant, ref, [{"content": remind, "subject": subject},
                                        {"content": statement}])
    events = s.tap.wait(of_type("memory.written", ref), 2)
    assert len(events) == 2, events
    inferred = {}
    for event in events:
        # As the EventBridge rule delivers it: the event envelope itself is the payload.
        report = s.invoker.ok("memory-commitments", json.dumps(event).encode())
        inferred[event["detail"]["memoryId"]] = report["inferred"]
    assert inferred == {ids[0]: 1, ids[1]: 0}, inferred
    # Forget cancels it again (so no later tick on a shared emulator fires it tomorrow).
    counts = s.api.forget(subject)
    assert (counts["deletedEntries"], counts["cancelledCommitments"]) == (1, 1), counts


@claim("memory.x-wop-memory-openintent.spec", "memory.x-wop-memory-openintent.basePath",
       "memory.x-wop-memory-openintent.tiers")
def check_openintent_door(s: Scenario, value: Any) -> None:
    o = s.openintent()
    assert sorted(e.memory_type.value for e in o["made"].values()) == [
        "episodic", "semantic", "working"]
    assert [e.id[:4] for e in o["made"].values()] == ["mem_", "mem_", "sem_"]


@claim("memory.x-wop-memory-openintent.auth")
def check_openintent_auth(s: Scenario, value: Any) -> None:
    assert value == ["X-API-Key", "X-Agent-ID"]
    assert s.openintent()["no_key"] == 401


@claim("memory.x-wop-memory-openintent.concurrency")
def check_openintent_if_match(s: Scenario, value: Any) -> None:
    o = s.openintent()
    assert value == "If-Match" and o["updated"].version == 2 and o["stale"] == 2


@claim("memory.x-wop-memory-openintent.versions")
def check_openintent_versions(s: Scenario, value: Any) -> None:
    assert value is True
    assert [v["version"] for v in s.openintent()["versions"]["versions"]] == [1, 2]


@claim("memory.x-wop-memory-openintent.taskArchive")
def check_openintent_archive(s: Scenario, value: Any) -> None:
    o = s.openintent()
    assert value == "/api/v1/tasks/{task_id}/memory:archive"
    assert o["archived"]["entries_archived"] == 1 and o["working_after_archive"] == 404


@claim("memory.x-wop-memory-openintent.maxValueBytes")
def check_openintent_value_size(s: Scenario, value: Any) -> None:
    assert s.openintent()["sizes"] == {value: 200, value + 1: 413}


@claim("memory.x-wop-memory-openintent.forget")
def check_openintent_forget(s: Scenario, value: Any) -> None:
    o = s.openintent()
    # The episodic and semantic entries of the subject (the working one was archived, and the
    # archive rewritten without it).
    assert value is True and o["counts"]["deletedEntries"] == 2, o["counts"]
    assert o["counts"]["deletedArchives"] == 1, o["counts"]
    assert set(o["after"].values()) == {404}, o["after"]


# ---------------------------------------------------------------------------------------------


def test_d_every_claim_has_a_check(caps):
    served = set(leaves(caps))
    unchecked = sorted(served - set(CHECKS))
    stale = sorted(set(CHECKS) - served)
    assert not unchecked, f"claims without a behaviour check: {unchecked}"
    assert not stale, f"checks for claims the document no longer makes: {stale}"


@pytest.mark.parametrize("path", sorted(CHECKS))
def test_d_claim_holds(caps, scenario, path):
    document = leaves(caps)
    assert path in document, f"the document does not make the claim {path}"
    CHECKS[path](scenario, document[path])
