#!/usr/bin/env python3
"""Latency of the OpenIntent door beside the `openintent` reference server, and DynamoDB write
units per patch.

    cd /work/main && export EMULATOR_PORT=4573 && eval "$(infra/local/up)" \
        && .venv/bin/python tests/bench/openintent_bench.py [--n 200]

What is measured, in one run on one machine:
- ours: `target/debug/local_gateway` (debug builds of memory-intent and its authorizer
  memory-intent-auth, each a local Lambda process) over the moto emulator; the reference:
  `openintent.server` (FastAPI + SQLAlchemy on a SQLite file) under uvicorn in this process.
- the official `OpenIntentClient` on both sides; wall time of each call (client to response
  parsed), N calls per operation after 10 warm-up calls (the first Lambda invocations start the
  processes): create (episodic entries, ~200-byte values), get (each created entry once), patch
  (each entry once, If-Match 1, a new value of the same size).
- WCU per patch: moto does not report consumed capacity reliably, so it is computed from the
  items the patch's transaction writes, read back from the table with boto3: the entry item
  (before and after; a Put is charged on the larger), the new version record, and for unpinned
  episodic entries the eviction-order item deleted (old) and put (new). DynamoDB item size =
  attribute names + values (S: UTF-8 bytes; N: ceil(significant digits / 2) + 1); each item
  costs ceil(size / 1 KB) write units, doubled inside TransactWriteItems.
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "python"))

import boto3  # noqa: E402

from conftest import start_gateway  # noqa: E402
from test_l_openintent_differential import REFERENCE_KEY, ReferenceServer  # noqa: E402
from wopkit import Invoker, new_tenant  # noqa: E402

WARMUP = 10
AGENT = "bench-agent"


def percentile(xs: list[float], p: float) -> float:
    s = sorted(xs)
    k = (len(s) - 1) * p
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def value(i: int, salt: str) -> dict:
    return {"step": i, "salt": salt, "note": ("observation " * 14)[: 160], "ok": True}


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def run_side(client, n: int, tag: str) -> tuple[dict[str, list[float]], list[tuple[str, dict]]]:
    """create / get / patch timings (ms) on one side; the created entries."""
    for i in range(WARMUP):
        e = client.create_memory(AGENT, "bench.warmup", f"w{tag}{i}", value(i, "w"),
                                 memory_type="episodic")
        client.get_memory(e.id)
        client.update_memory(e.id, 1, value=value(i, "w2"))
    times: dict[str, list[float]] = {"create": [], "get": [], "patch": []}
    ids: list[str] = []
    for i in range(n):
        box = {}
        times["create"].append(timed(lambda: box.setdefault("e", client.create_memory(
            AGENT, "bench", f"k{i}", value(i, "a"), memory_type="episodic",
            tags=["bench", "episodic"]))))
        ids.append(box["e"].id)
    order = list(range(n))
    random.Random(7).shuffle(order)
    for i in order:
        times["get"].append(timed(lambda: client.get_memory(ids[i])))
    return times, ids


def patch_all(client, ids: list[str], times: dict[str, list[float]], before_after=None) -> None:
    for i, eid in enumerate(ids):
        if before_after:
            before_after[0](eid)
        times["patch"].append(timed(lambda: client.update_memory(eid, 1,
                                                                 value=value(i, "b"))))
        if before_after:
            before_after[1](eid)


# ---------------------------------------------------------------------------------------------
# DynamoDB item sizes and write units.


def attr_size(v: dict) -> int:
    (kind, x), = v.items()
    if kind == "S":
        return len(x.encode("utf-8"))
    if kind == "N":
        digits = x.lstrip("-").replace(".", "").lstrip("0").rstrip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(x)
    if kind in ("BOOL", "NULL"):
        return 1
    raise ValueError(f"attribute type {kind} not sized here")


def item_size(item: dict) -> int:
    return sum(len(name.encode("utf-8")) + attr_size(v) for name, v in item.items())


def units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


class PatchCost:
    """Reads the items one patch writes, before and after it."""

    def __init__(self, tenant: str) -> None:
        self.ddb = boto3.client("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                                region_name=os.environ.get("AWS_REGION", "us-east-1"))
        self.table = os.environ["MEMORY_TABLE"]
        self.pk = f"{tenant}#{AGENT}"
        self.before: dict | None = None
        self.costs: list[int] = []
        self.sizes: list[tuple[int, int, int, int]] = []

    def get(self, sk: str) -> dict:
        out = self.ddb.get_item(TableName=self.table, ConsistentRead=True,
                                Key={"pk": {"S": self.pk}, "sk": {"S": sk}})
        if "Item" not in out:
            raise AssertionError(f"item {self.pk}/{sk} not in the table")
        return out["Item"]

    @staticmethod
    def lru_sk(item: dict, eid: str, rank: int) -> str:
        return f"I#L#{rank}#{int(item['accessedMs']['N']):015}#{eid}"

    def read_before(self, eid: str) -> None:
        entry = self.get(f"I#E#{eid}")
        # Unpinned, normal priority (rank 1) episodic entries hold a place in the eviction order.
        self.before = {"entry": entry, "lru": self.get(self.lru_sk(entry, eid, 1))}

    def read_after(self, eid: str) -> None:
        entry = self.get(f"I#E#{eid}")
        assert int(entry["version"]["N"]) == 2, entry["version"]
        version = self.get(f"I#V#{eid}#{2:020}")
        lru = self.get(self.lru_sk(entry, eid, 1))
        old_entry, old_lru = item_size(self.before["entry"]), item_size(self.before["lru"])
        new_entry, v_size, new_lru = item_size(entry), item_size(version), item_size(lru)
        wcu = 2 * (units(max(old_entry, new_entry)) + units(v_size) + units(old_lru)
                   + units(new_lru))
        self.costs.append(wcu)
        self.sizes.append((max(old_entry, new_entry), v_size, old_lru, new_lru))


# ---------------------------------------------------------------------------------------------


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, " \
           f"Python {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    from openintent import OpenIntentClient

    gw = start_gateway("openintent-bench", exchanges=False)
    reference = ReferenceServer()
    try:
        tenant = new_tenant()
        api_key = Invoker(gw.base_url).issue_api_key(tenant, [AGENT])["apiKey"]
        ours = OpenIntentClient(gw.base_url, api_key=api_key, agent_id=AGENT, timeout=60)
        ref = OpenIntentClient(reference.base_url, api_key=REFERENCE_KEY, agent_id=AGENT,
                               timeout=60)
        print(f"ours: {gw.base_url} (debug binaries, moto at {os.environ['AWS_ENDPOINT_URL']}); "
              f"reference: {reference.base_url}; N={args.n}", file=sys.stderr)
        ours_t, ours_ids = run_side(ours, args.n, "o")
        cost = PatchCost(tenant)
        patch_all(ours, ours_ids, ours_t, (cost.read_before, cost.read_after))
        ref_t, ref_ids = run_side(ref, args.n, "r")
        patch_all(ref, ref_ids, ref_t)
    finally:
        gw.stop()
        reference.stop()

    print(f"\nOpenIntent door vs reference server, N={args.n} per operation, {machine()}\n")
    print("| operation | ours p50 (ms) | ours p95 (ms) | reference p50 (ms) | reference p95 (ms) |")
    print("|---|---|---|---|---|")
    for op in ("create", "get", "patch"):
        o, r = ours_t[op], ref_t[op]
        assert len(o) == len(r) == args.n
        print(f"| {op} | {statistics.median(o):.1f} | {percentile(o, 0.95):.1f} | "
              f"{statistics.median(r):.1f} | {percentile(r, 0.95):.1f} |")
    sizes = list(zip(*cost.sizes))
    print(f"\nWCU per patch (ours, computed from item sizes, transactional x2): "
          f"min {min(cost.costs)}, median {statistics.median(cost.costs):g}, "
          f"max {max(cost.costs)} over {len(cost.costs)} patches; "
          f"median item bytes: entry {statistics.median(sizes[0]):g}, version record "
          f"{statistics.median(sizes[1]):g}, eviction-order item deleted "
          f"{statistics.median(sizes[2]):g} and put {statistics.median(sizes[3]):g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
