#!/usr/bin/env python3
"""The OAP exchange door on the emulator: grant query latency beside the host's own search route
over the same items, and a round trip of a large ref (export, import elsewhere, export again)
with its throughput and the export function's peak RSS.

    cd /work/main && export EMULATOR_PORT=4574 && eval "$(infra/local/up)" \\
        && .venv/bin/python tests/bench/oap_bench.py [--grant-items 1000] [--queries 100] \\
           [--round-trip 10000]

What is measured, in one run on one machine (debug builds of the functions, each a local
Lambda process, over the moto emulator):
- query: a grant over N items (max_items N); wall time of POST /oap/memory/query (the grantee's
  query: grant check, the slice read and ranked, projection, item chains, one receipt appended)
  and of GET /v1/host/wop-memory/search on the same ref with the same query (the same ranking
  over the same read, without grant, projection, chains or receipt): p50 / p95 after 10 warm-ups.
- round trip: a ref of M items, seeded through the import of a Letta agent file with M blocks
  (memory-write on moto manages about 20 items/s and slows as the table grows; the import is the
  door's own write path); export (items/s), import into another tenant (items/s), export
  again, as direct invokes of memory-exchange (a large ref outlasts the HTTP API's 30 s); the two bundles must hold
  the same items (ids, kinds, text, labels, capture times, content hashes), or the run fails.
  Peak RSS: VmHWM of the memory-exchange process, read from /proc after each step.
Prints markdown tables. Use a fresh emulator: moto's memory grows with what it serves. The
100,000-item round trip runs in memory: `cargo bench -p oap-exchange --bench export`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "python"))

from conftest import start_gateway  # noqa: E402
from wopkit import Invoker, memory_ref, mint_jwt, new_tenant, raw_request  # noqa: E402

WORDS = ["project", "allergy", "Lisbon", "meeting", "budget", "design", "birthday", "contract",
         "deadline", "preference", "tea", "sailing", "invoice", "garden", "flight", "doctor"]
QUERIES = ["project deadline", "allergy doctor", "meeting in Lisbon", "budget for design",
           "birthday present", "contract invoice", "sailing trip", "garden flight"]


def text(i: int) -> str:
    return f"Fact {i}: " + " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(30))


def post(base: str, path: str, body: dict, token: str) -> dict:
    resp = raw_request(base, "POST", path, body=json.dumps(body).encode(),
                       headers={"Authorization": f"Bearer {token}",
                                "Content-Type": "application/json"})
    assert resp.status == 200, (path, resp.status, resp.text[:300])
    return resp.json()


def write(base: str, tenant: str, ref: str, n: int) -> None:
    inv = Invoker(base)
    for start in range(0, n, 25):
        inv.put(tenant, ref, [{"content": text(i), "tags": ["bench"]}
                              for i in range(start, min(n, start + 25))])


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def exchange_pid() -> int | None:
    out = subprocess.run(["pgrep", "-f", "target/debug/memory-exchange"], capture_output=True,
                         text=True).stdout.split()
    return int(out[0]) if out else None


def peak_rss_mib(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bundle(url: str) -> list[dict]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=120) as r:
        return [json.loads(line) for line in r.read().decode().splitlines()]


def essence(line: dict) -> tuple:
    return (line["item_id"], line["kind"], line["content"]["text"], tuple(line["labels"]),
            line["captured_at"], line["content_sha256"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--grant-items", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--round-trip", type=int, default=10000)
    args = ap.parse_args()
    gw = start_gateway("oap-bench", exchanges=False)
    base = gw.base_url
    try:
        if args.queries:
            tenant = new_tenant()
            ref = memory_ref(tenant, "assistant")
            jwt = mint_jwt({"tenant_id": tenant, "sub": "bench"})
            write(base, tenant, ref, args.grant_items)
            grant = post(base, "/oap/memory/grant", {
                "grantee": "did:web:contractor.example", "purpose": "bench", "scope_id": ref,
                "max_items": args.grant_items,
                "expires_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86400)),
            }, jwt)
            assert grant["slice_items"] == args.grant_items, grant["slice_items"]
            door, search = [], []
            for k in range(args.queries + 10):
                q = QUERIES[k % len(QUERIES)]
                t0 = time.perf_counter()
                post(base, "/oap/memory/query", {"query": q, "max_results": 20}, grant["token"])
                t1 = time.perf_counter()
                resp = raw_request(base, "GET", "/v1/host/wop-memory/search?" + urllib.parse.urlencode(
                    {"memoryRef": ref, "q": q, "limit": 20}), headers={"Authorization": f"Bearer {jwt}"})
                t2 = time.perf_counter()
                assert resp.status == 200, resp.text[:200]
                if k >= 10:
                    door.append((t1 - t0) * 1000)
                    search.append((t2 - t1) * 1000)
            if door:
                print(f"\n### Query, a grant over {args.grant_items} items, {args.queries} queries\n")
                print("| route | p50 ms | p95 ms |\n|---|---|---|")
                print(f"| POST /oap/memory/query (grant) | {pct(door, .5):.1f} | {pct(door, .95):.1f} |")
                print(f"| GET /v1/host/wop-memory/search (same items, same ranking) | "
                      f"{pct(search, .5):.1f} | {pct(search, .95):.1f} |")

        if args.round_trip:
            a, b = new_tenant(), new_tenant()
            ref_a, ref_b = memory_ref(a, "assistant"), memory_ref(b, "successor")
            af = {"agents": [{"id": "agent-0", "name": "bench",
                              "block_ids": [f"block-{i}" for i in range(args.round_trip)]}],
                  "blocks": [{"id": f"block-{i}", "label": f"fact-{i % 50}", "value": text(i)}
                             for i in range(args.round_trip)],
                  "created_at": "2026-01-01T00:00:00+00:00"}
            inv = Invoker(base)
            t0 = time.perf_counter()
            seeded = inv.ok("memory-exchange", {"op": "import", "tenantId": a, "scope_id": ref_a,
                                                "letta_agent_file": af})
            wrote = time.perf_counter() - t0
            assert seeded["imported"] == args.round_trip, seeded
            pid = exchange_pid()
            rss0 = peak_rss_mib(pid)
            # Direct invokes (the function's own timeout, not the HTTP API's 30 s): what a large
            # ref's export and import use.
            t0 = time.perf_counter()
            ex = inv.ok("memory-exchange", {"op": "export", "tenantId": a, "scope_id": ref_a})
            export_s = time.perf_counter() - t0
            rss1 = peak_rss_mib(pid)
            t0 = time.perf_counter()
            im = inv.ok("memory-exchange", {"op": "import", "tenantId": b, "scope_id": ref_b,
                                            "manifest": ex["manifest"]})
            import_s = time.perf_counter() - t0
            rss2 = peak_rss_mib(pid)
            ex2 = inv.ok("memory-exchange", {"op": "export", "tenantId": b, "scope_id": ref_b})
            first, second = bundle(ex["url"]), bundle(ex2["url"])
            same = sorted(map(essence, first)) == sorted(map(essence, second))
            assert ex["items"] == args.round_trip == im["imported"] == ex2["items"], (ex["items"], im)
            assert same, "the round trip changed items or hashes"
            print(f"\n### Round trip of {args.round_trip} items ({ex['bytes'] / 2**20:.1f} MiB bundle)\n")
            print("| step | seconds | items/s | memory-exchange peak RSS (VmHWM) |\n|---|---|---|---|")
            print(f"| seed (import of a Letta file with {args.round_trip} blocks) | {wrote:.1f} | {args.round_trip / wrote:.0f} | |")
            print(f"| export | {export_s:.1f} | {args.round_trip / export_s:.0f} | {rss1:.0f} MiB (before: {rss0:.0f}) |")
            print(f"| import | {import_s:.1f} | {args.round_trip / import_s:.0f} | {rss2:.0f} MiB |")
            print(f"| re-export equal: items, ids, text, labels, capture times, content hashes | | | {same} |")
    finally:
        gw.stop()
    return 0


if __name__ == "__main__":
    import urllib.parse  # noqa: E402
    sys.exit(main())
