"""The Claude memory tool backend (`POST /v1/host/wop-memory/memory-tool`) through the real
memory-mcp binary behind the local gateway, driven the way an application wires it: a subclass of
the official `anthropic` SDK's `BetaAbstractMemoryTool` whose commands go to the route, fed the
model's tool-call inputs through the SDK's own `call` (which parses them into its
`BetaMemoryTool20250818*Command` types). Every result is compared with the SDK's reference
backend (`BetaLocalFilesystemMemoryTool`) given the same inputs.

Also: traversal attempts (plain and encoded) store nothing, CTI-1 (foreign and malformed refs hold
nothing and take no write), SR-1 (a configured secret comes back redacted), forget removes a file
written with a subject, and racing `str_replace` / `insert` / `create` calls through two gateways
(two Lambda containers) lose no update.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import pytest
from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

from conftest import secret_gateway, start_gateway
from wopkit import (
    BASE,
    ROOT,
    Api,
    leaks,
    memory_ref,
    mint_jwt,
    new_tenant,
    query,
    raw_request,
    read_line_with_timeout,
    secret_value,
    sensitive,
    stop_process,
)

SECRET = secret_value("memtool")
PATH_TAG = "memory-tool:path:"


class WopMemoryTool(BetaAbstractMemoryTool):
    """The application side of the wiring (docs/api.md "The Claude memory tool"): each command's
    input is POSTed as the model emitted it; an `is_error` result becomes the SDK's `ToolError`,
    which its tool runner hands back to the model as an error `tool_result`."""

    def __init__(self, base_url: str, tenant: str, ref: str, subject: str | None = None) -> None:
        super().__init__()
        self.base_url, self.ref = base_url, ref
        self.headers = {"Authorization": f"Bearer {mint_jwt({'tenant_id': tenant})}",
                        "Content-Type": "application/json"}
        if subject is not None:
            self.headers["x-wop-subject"] = subject

    def post(self, body: Any) -> dict[str, Any]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        got = raw_request(self.base_url, "POST",
                          f"{BASE}/memory-tool?{query({'memoryRef': self.ref})}",
                          body=raw, headers=self.headers)
        assert got.status == 200, (got.status, got.text)
        out = got.json()
        assert set(out) == {"content", "is_error"} and isinstance(out["content"], str), out
        return out

    def _send(self, command: Any) -> str:
        out = self.post(command.to_dict(mode="json", exclude_unset=True))
        if out["is_error"]:
            raise ToolError(out["content"])
        return out["content"]

    view = create = str_replace = insert = delete = rename = _send  # type: ignore[assignment]


def result(tool: BetaAbstractMemoryTool, model_input: dict[str, Any]) -> tuple[bool, str]:
    """(is_error, text) of one tool call, as the SDK's runner would see it."""
    try:
        return False, str(tool.call(model_input))
    except ToolError as err:
        return True, str(err)


@pytest.fixture(scope="module")
def memtool_url() -> str:
    """A gateway whose memory-mcp has a configured SR-1 secret (REDACTION_SECRETS)."""
    with secret_gateway("python-e2e-memory-tool", "stripe", SECRET, logged="memory tool") as url:
        yield url


@pytest.fixture()
def world(memtool_url: str):
    tenant = new_tenant()
    ref = memory_ref(tenant, "claude")
    return memtool_url, tenant, ref, WopMemoryTool(memtool_url, tenant, ref)


def stored(base_url: str, tenant: str, ref: str) -> list[dict[str, Any]]:
    return Api(base_url, tenant).list_all(ref)


def test_every_command_answers_as_the_sdk_reference_backend(world, tmp_path: Path):
    base_url, tenant, ref, ours = world
    reference = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path))
    text = sensitive("alpha\nbeta\ngamma\n")
    calls = [
        {"command": "create", "path": "/memories/notes.md", "file_text": text},
        {"command": "create", "path": "/memories/notes.md", "file_text": "again"},
        {"command": "view", "path": "/memories/notes.md"},
        {"command": "view", "path": "/memories/notes.md", "view_range": [2, 3]},
        {"command": "view", "path": "/memories/notes.md", "view_range": [2, -1]},
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "beta",
         "new_str": "BETA"},
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "zeta",
         "new_str": "x"},
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "a", "new_str": "x"},
        {"command": "insert", "path": "/memories/notes.md", "insert_line": 1,
         "insert_text": "inserted\n"},
        {"command": "insert", "path": "/memories/notes.md", "insert_line": 99,
         "insert_text": "x"},
        {"command": "view", "path": "/memories/notes.md"},
        {"command": "create", "path": "/memories/other.md", "file_text": "o"},
        {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/other.md"},
        {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/n2.md"},
        {"command": "view", "path": "/memories/n2.md", "view_range": [1, 2]},
        {"command": "view", "path": "/memories/notes.md"},
        {"command": "str_replace", "path": "/memories/gone.md", "old_str": "a", "new_str": "b"},
        {"command": "insert", "path": "/memories/gone.md", "insert_line": 0, "insert_text": "b"},
        {"command": "delete", "path": "/memories/n2.md"},
        {"command": "delete", "path": "/memories/n2.md"},
        {"command": "delete", "path": "/memories"},
        {"command": "rename", "old_path": "/memories", "new_path": "/memories/x"},
        {"command": "create", "path": "/memories/empty.md", "file_text": ""},
        {"command": "view", "path": "/memories/empty.md"},
        {"command": "insert", "path": "/memories/empty.md", "insert_line": 0,
         "insert_text": "first"},
        {"command": "view", "path": "/memories/empty.md"},
        {"command": "delete", "path": "/memories/empty.md"},
    ]
    for call in calls:
        want, got = result(reference, call), result(ours, call)
        assert got == want, f"{call['command']} {call.get('path', call.get('old_path'))}: " \
                            f"{got!r} != reference {want!r}"
    # One entry per file, each tagged with its path; nothing left of replaced versions.
    entries = stored(base_url, tenant, ref)
    assert [sorted(e["tags"]) for e in entries] == [["memory-tool:file",
                                                      f"{PATH_TAG}/memories/other.md"]]


def test_a_directory_view_lists_paths_and_sizes_two_levels_deep(world):
    _, _, _, ours = world
    for path, text in [("/memories/a.md", "12345"), ("/memories/dir/b.md", "x" * 2048),
                       ("/memories/dir/sub/c.md", "c"), ("/memories/dir/sub/deep/d.md", "d"),
                       ("/memories/.hidden/e.md", "e")]:
        ours.call({"command": "create", "path": path, "file_text": text})
    assert ours.call({"command": "view", "path": "/memories"}) == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items:\n2.0K\t/memories\n5B\t/memories/a.md\n2.0K\t/memories/dir/\n"
        "2K\t/memories/dir/b.md\n2B\t/memories/dir/sub/")
    assert ours.call({"command": "view", "path": "/memories/dir/"}) == (
        "Here're the files and directories up to 2 levels deep in /memories/dir, excluding "
        "hidden items:\n2.0K\t/memories/dir\n2K\t/memories/dir/b.md\n2B\t/memories/dir/sub/\n"
        "1B\t/memories/dir/sub/c.md\n1B\t/memories/dir/sub/deep/")
    is_error, text = result(ours, {"command": "view", "path": "/memories/nope"})
    assert is_error and text == "The path /memories/nope does not exist. Please provide a valid path."


TRAVERSALS = [
    "/memories/../x", "/memories/../../etc/passwd", "/memories/a/../../x", "/memories/./x",
    "/memories/%2e%2e/x", "/memories/%2E%2E%2Fx", "/memories/..%2fx", "/memories/%252e%252e/x",
    "/memories/..\\x", "/memories/a\\..\\..\\x", "/memories/\uff0e\uff0e/x",
    "/memories/..\u2215x", "/memories//x", "/memories/\x00x", "/memoriesx/y", "/etc/passwd",
    "memories/x", "",
]


def test_traversal_and_encoded_variants_are_refused_and_store_nothing(world):
    base_url, tenant, ref, ours = world
    for path in TRAVERSALS:
        for call in ({"command": "create", "path": path, "file_text": "x"},
                     {"command": "view", "path": path},
                     {"command": "str_replace", "path": path, "old_str": "x", "new_str": "y"},
                     {"command": "insert", "path": path, "insert_line": 0, "insert_text": "y"},
                     {"command": "delete", "path": path},
                     {"command": "rename", "old_path": path, "new_path": "/memories/ok.md"},
                     {"command": "rename", "old_path": "/memories/ok.md", "new_path": path}):
            is_error, _ = result(ours, call)
            assert is_error, f"{call} was not refused"
    long = "/memories/" + "a" * 120
    assert result(ours, {"command": "create", "path": long, "file_text": "x"})[0]
    assert stored(base_url, tenant, ref) == []


def test_limits_and_malformed_inputs_are_tool_errors(world):
    base_url, tenant, ref, ours = world
    too_big = {"command": "create", "path": "/memories/big.md", "file_text": "x" * 65_537}
    is_error, text = result(ours, too_big)
    assert is_error and "maximum file size of 65536 bytes" in text
    for body in ({"command": "create", "path": "/memories/a.md"},
                 {"command": "format_disk", "path": "/memories"},
                 {"command": "view", "path": 7},
                 {"command": "view", "path": "/memories", "extra": True},
                 {"path": "/memories"}):
        out = ours.post(body)
        assert out["is_error"] and out["content"].startswith("Error: "), out
    assert stored(base_url, tenant, ref) == []


def test_the_route_answers_application_errors_in_the_envelope(world):
    base_url, tenant, ref, ours = world
    path = f"{BASE}/memory-tool?{query({'memoryRef': ref})}"
    body = {"command": "view", "path": "/memories"}
    Api(base_url).error("POST", path, status=401, code="unauthenticated", body=body,
                        authenticated=False)
    api = Api(base_url, tenant)
    api.error("GET", path, status=405, code="validation_error")
    api.error("POST", f"{BASE}/memory-tool", status=400, code="validation_error", body=body)
    # A write to a foreign or malformed ref: the write contract's one answer for both.
    for bad in (memory_ref(new_tenant(), "claude"), f"workspaces/{tenant}/agents/../memories",
                "workspaces/%2e%2e/agents/x/memories"):
        create = {"command": "create", "path": "/memories/x.md", "file_text": "x"}
        err = api.error("POST", f"{BASE}/memory-tool?{query({'memoryRef': bad})}", status=400,
                        code="validation_error", body=create)
        assert err.envelope.details == {"field": "memoryRef"}


def test_foreign_and_malformed_refs_hold_no_files(world):
    base_url, tenant, ref, ours = world
    ours.call({"command": "create", "path": "/memories/mine.md", "file_text": "mine"})
    other = new_tenant()
    # The other tenant names our ref (and a malformed one): empty views, nothing found.
    for probe_ref in (ref, f"workspaces/{tenant}/agents/claude/memories/..", "%2e%2e"):
        probe = WopMemoryTool(base_url, other, probe_ref)
        assert probe.call({"command": "view", "path": "/memories"}) == (
            "Here're the files and directories up to 2 levels deep in /memories, excluding "
            "hidden items:\n0B\t/memories")
        for call in ({"command": "view", "path": "/memories/mine.md"},
                     {"command": "str_replace", "path": "/memories/mine.md", "old_str": "mine",
                      "new_str": "theirs"},
                     {"command": "delete", "path": "/memories/mine.md"},
                     {"command": "rename", "old_path": "/memories/mine.md",
                      "new_path": "/memories/stolen.md"}):
            is_error, text = result(probe, call)
            assert is_error and "does not exist" in text, (call, text)
    assert ours.call({"command": "view", "path": "/memories/mine.md"}).endswith("     1\tmine")


def test_a_configured_secret_comes_back_redacted(world):
    base_url, tenant, ref, ours = world
    ours.call({"command": "create", "path": "/memories/keys.md",
               "file_text": f"stripe key {SECRET}\n"})
    snippet = ours.call({"command": "str_replace", "path": "/memories/keys.md",
                         "old_str": "stripe key", "new_str": f"key {SECRET} again"})
    view = ours.call({"command": "view", "path": "/memories/keys.md"})
    assert SECRET not in snippet and SECRET not in view
    assert "key [REDACTED:stripe] again [REDACTED:stripe]" in view, view
    assert all(SECRET not in e["content"] for e in stored(base_url, tenant, ref))


def test_every_command_on_the_largest_file_answers_within_2_s(world):
    _, _, _, ours = world
    big = "/memories/big.md"
    ours.call({"command": "create", "path": big, "file_text": "\n" * 65_520})
    timings: dict[str, float] = {}

    def timed(name: str, call: dict[str, Any]) -> tuple[bool, str]:
        started = time.monotonic()
        out = result(ours, call)
        timings[name] = time.monotonic() - started
        return out

    is_error, text = timed("str_replace \\n (65,520 matches)", {
        "command": "str_replace", "path": big, "old_str": "\n", "new_str": "x"})
    assert is_error and text.endswith("65519, 65520. Please ensure it is unique"), text[-80:]
    is_error, text = timed("str_replace 1 MiB old_str, missing file", {
        "command": "str_replace", "path": "/memories/missing.md", "old_str": "y" * (1 << 20),
        "new_str": "x"})
    assert is_error and "longer than the largest file" in text, text[:200]
    timed("view", {"command": "view", "path": big})
    timed("view_range", {"command": "view", "path": big, "view_range": [30_000, 30_010]})
    assert not timed("insert", {"command": "insert", "path": big, "insert_line": 30_000,
                                "insert_text": "mid"})[0]
    assert not timed("str_replace unique", {"command": "str_replace", "path": big,
                                            "old_str": "mid", "new_str": "middle"})[0]
    assert not timed("rename", {"command": "rename", "old_path": big,
                                "new_path": "/memories/big2.md"})[0]
    assert not timed("delete", {"command": "delete", "path": "/memories/big2.md"})[0]
    print("largest-file latencies (s):",
          ", ".join(f"{k}={v:.3f}" for k, v in timings.items()))
    assert all(v < 2.0 for v in timings.values()), timings


def test_secret_paths_empty_files_and_aliasing_names(world):
    base_url, tenant, ref, ours = world
    for call in ({"command": "create", "path": f"/memories/{SECRET}.md", "file_text": "x"},
                 {"command": "view", "path": f"/memories/{SECRET}.md"},
                 {"command": "rename", "old_path": "/memories/a.md",
                  "new_path": f"/memories/{SECRET}"}):
        out = ours.post(call)
        assert out["is_error"] and "configured secret" in out["content"], out
        assert SECRET not in out["content"]
    assert stored(base_url, tenant, ref) == []
    ours.call({"command": "create", "path": "/memories/X.md", "file_text": "x"})
    for bad in ("/memories/x.md", "/memories/CON", "/memories/nul.txt", "/memories/a/com1.md",
                "/memories/dot.", "/memories/Lpt1"):
        is_error, text = result(ours, {"command": "create", "path": bad, "file_text": "y"})
        assert is_error, (bad, text)
    is_error, text = result(ours, {"command": "create", "path": "/memories/x.md",
                                   "file_text": "y"})
    assert "differ only in case" in text, text
    assert [e["content"] for e in stored(base_url, tenant, ref)] == ["x"]


def test_forget_after_edits_by_several_subjects_leaves_no_word_of_the_forgotten(world):
    base_url, tenant, ref, _ = world
    names = {k: sensitive(f"{k}-{new_tenant()}") for k in ("alice", "bob", "carol", "dave")}
    tools = {k: WopMemoryTool(base_url, tenant, ref, subject=v) for k, v in names.items()}
    words = {k: sensitive(f"{k}word{new_tenant().replace('-', '')}") for k in names}
    path = "/memories/shared.md"
    tools["alice"].call({"command": "create", "path": path, "file_text": f"{words['alice']}\n"})
    tools["bob"].call({"command": "str_replace", "path": path, "old_str": words["alice"],
                       "new_str": f"{words['alice']} {words['bob']}"})
    tools["carol"].call({"command": "insert", "path": path, "insert_line": 1,
                         "insert_text": words["carol"]})
    tools["dave"].call({"command": "rename", "old_path": path, "new_path": "/memories/d/s.md"})
    tools["dave"].call({"command": "create", "path": "/memories/dave.md",
                        "file_text": words["dave"]})
    before = json.dumps(stored(base_url, tenant, ref))
    assert all(w in before for w in words.values())
    counts = Api(base_url, tenant).forget(names["alice"])
    assert counts["deletedEntries"] == 1, counts
    after = stored(base_url, tenant, ref)
    text = json.dumps(after)
    assert words["alice"] not in text, "a word of the forgotten subject survived"
    assert [e["content"] for e in after] == [words["dave"]]
    is_error, _ = result(tools["bob"], {"command": "view", "path": "/memories/d/s.md"})
    assert is_error
    # The path is free again, and a later forget of an editor finds nothing more to erase.
    WopMemoryTool(base_url, tenant, ref).call(
        {"command": "create", "path": "/memories/d/s.md", "file_text": "fresh"})
    assert Api(base_url, tenant).forget(names["bob"])["deletedEntries"] == 0
    assert sorted(e["content"] for e in stored(base_url, tenant, ref)) == sorted(
        ["fresh", words["dave"]])


def test_forget_removes_a_file_written_with_a_subject(world):
    base_url, tenant, ref, _ = world
    subject = sensitive(f"customer-{new_tenant()}")
    tool = WopMemoryTool(base_url, tenant, ref, subject=subject)
    tool.call({"command": "create", "path": "/memories/customer.md",
               "file_text": sensitive("prefers e-mail\n")})
    tool.call({"command": "str_replace", "path": "/memories/customer.md", "old_str": "e-mail",
               "new_str": "phone"})
    other = WopMemoryTool(base_url, tenant, ref)  # no subject: kept by forget
    other.call({"command": "create", "path": "/memories/general.md", "file_text": "general"})
    counts = Api(base_url, tenant).forget(subject)
    assert counts["deletedEntries"] == 1, counts
    is_error, text = result(tool, {"command": "view", "path": "/memories/customer.md"})
    assert is_error and "does not exist" in text
    assert [e["tags"] for e in stored(base_url, tenant, ref)] == [
        ["memory-tool:file", f"{PATH_TAG}/memories/general.md"]]


# ---------------------------------------------------------------------------------------------
# Races: two gateways (two Lambda containers) behind the serialising fault proxy, which keeps
# moto's transactions whole (moto 5.2.5 is not safe under concurrent TransactWriteItems).


@pytest.fixture(scope="module")
def two_containers():
    upstream = os.environ["AWS_ENDPOINT_URL"]
    proxy = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/fault/proxy.py"), "--port", "0", "--upstream",
         upstream, "--serialize", "--read-delay-ms", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = read_line_with_timeout(proxy.stdout, 30)
    assert line and line.startswith("listening http://"), line
    proxy_url = line.split(" ", 1)[1].strip()
    gateways = [start_gateway(f"python-e2e-memory-tool-race-{i}",
                              {"AWS_ENDPOINT_URL": proxy_url}) for i in (1, 2)]
    yield [g.base_url for g in gateways]
    logs = "".join(g.stop() for g in gateways)
    stop_process(proxy)
    assert not leaks(logs), f"function logs leak {leaks(logs)}"
    # Positive control: the edits did race (a conditional rewrite lost and was re-read).
    assert "lost a race" in logs, "no edit ever lost a race: the race tests raced nothing"


def hammer(urls: list[str], tenant: str, ref: str, calls: list[dict[str, Any]]
           ) -> list[tuple[bool, str]]:
    """Runs `calls` at once, alternating the two containers; a `429 rate_limited` (an edit that
    lost every try) is retried by the caller, as the envelope's Retry-After says."""
    tools = [WopMemoryTool(u, tenant, ref) for u in urls]
    start = threading.Barrier(len(calls))

    def one(i: int) -> tuple[bool, str]:
        tool = tools[i % len(tools)]
        start.wait()
        for _ in range(20):
            try:
                return result(tool, calls[i])
            except AssertionError as err:
                if "429" not in str(err):
                    raise
                time.sleep(0.2)
        raise AssertionError("still rate limited after 20 tries")

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(one, range(len(calls))))


def test_racing_str_replace_and_insert_lose_no_update(two_containers):
    tenant = new_tenant()
    ref = memory_ref(tenant, "claude")
    setup = WopMemoryTool(two_containers[0], tenant, ref)
    # 8 calls a round, 4 a container: each container runs one invocation at a time, so more
    # would queue past the gateway's 30 s integration timeout on a loaded emulator.
    slots, inserts = 6, 2
    setup.call({"command": "create", "path": "/memories/race.md",
                "file_text": "".join(f"slot-{i:02}: empty\n" for i in range(slots))})
    for round_ in range(4):
        calls = [{"command": "str_replace", "path": "/memories/race.md",
                  "old_str": f"slot-{i:02}: " + ("empty" if round_ == 0 else f"r{round_ - 1}"),
                  "new_str": f"slot-{i:02}: r{round_}"} for i in range(slots)]
        calls += [{"command": "insert", "path": "/memories/race.md", "insert_line": 0,
                   "insert_text": f"note-{round_}-{j}"} for j in range(inserts)]
        outcomes = hammer(two_containers, tenant, ref, calls)
        assert all(not is_error for is_error, _ in outcomes), outcomes
        text = setup.call({"command": "view", "path": "/memories/race.md"})
        for i in range(slots):
            assert f"\tslot-{i:02}: r{round_}\n" in text + "\n", (i, text)
        for r in range(round_ + 1):
            for j in range(inserts):
                assert f"\tnote-{r}-{j}\n" in text, (r, j, text)
    entries = Api(two_containers[0], tenant).list_all(ref, tag=f"{PATH_TAG}/memories/race.md")
    assert len(entries) == 1, entries


def test_racing_creates_renames_and_deletes_keep_one_file_per_path(two_containers):
    tenant = new_tenant()
    ref = memory_ref(tenant, "claude")
    setup = WopMemoryTool(two_containers[0], tenant, ref)
    api = Api(two_containers[0], tenant)
    rounds = int(os.environ.get("MEMTOOL_RACE_ROUNDS", "50"))
    left: list[str] = []
    for round_ in range(rounds):
        target = f"/memories/t{round_}.md"
        for src in ("a", "b"):
            setup.call({"command": "create", "path": f"/memories/{src}{round_}.md",
                        "file_text": f"from {src}"})
        calls = [{"command": "rename", "old_path": f"/memories/a{round_}.md", "new_path": target},
                 {"command": "rename", "old_path": f"/memories/b{round_}.md", "new_path": target},
                 {"command": "create", "path": target, "file_text": "created"}]
        outcomes = hammer(two_containers, tenant, ref, calls)
        won = [i for i, (is_error, _) in enumerate(outcomes) if not is_error]
        assert len(won) == 1, (round_, outcomes)
        want = ["from a", "from b", "created"][won[0]]
        left += [f"/memories/{src}{round_}.md" for i, src in enumerate("ab") if i != won[0]]
        assert setup.call({"command": "view", "path": target}).endswith(f"\t{want}")
        entries = api.list_all(ref, tag=f"{PATH_TAG}{target}")
        assert [e["content"] for e in entries] == [want], (round_, entries)
        deletes = hammer(two_containers, tenant, ref, [{"command": "delete", "path": target}] * 2)
        assert sorted(is_error for is_error, _ in deletes) == [False, True], deletes
        assert api.list_all(ref, tag=f"{PATH_TAG}{target}") == []
    # Every acknowledged operation is what is stored: the losing sources are still in place.
    paths = sorted(next(t for t in e["tags"] if t.startswith(PATH_TAG))[len(PATH_TAG):]
                   for e in api.list_all(ref))
    assert paths == sorted(left), (paths, left)


def test_racing_creates_of_one_path_leave_at_most_the_one_acknowledged(two_containers):
    tenant = new_tenant()
    ref = memory_ref(tenant, "claude")
    for round_ in range(3):
        path = f"/memories/new-{round_}.md"
        calls = [{"command": "create", "path": path, "file_text": f"writer {i}"}
                 for i in range(4)]
        outcomes = hammer(two_containers, tenant, ref, calls)
        won = [i for i, (is_error, _) in enumerate(outcomes) if not is_error]
        assert len(won) <= 1, outcomes
        assert all(text == f"File {path} already exists"
                   for is_error, text in outcomes if is_error), outcomes
        entries = Api(two_containers[0], tenant).list_all(ref, tag=f"{PATH_TAG}{path}")
        assert [e["content"] for e in entries] == [f"writer {i}" for i in won], (entries, won)
