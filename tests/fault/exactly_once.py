#!/usr/bin/env python3
"""The fault-injection suite: workloads on the real function binaries, with seeded AWS faults
between them and the emulator, then a checker that reads the true state straight from the
emulator and counts invariant violations (README §Exactly once; issue 14).

    eval "$(infra/local/up)" && .venv/bin/python tests/fault/exactly_once.py --seeds 1,2
    .venv/bin/python tests/fault/exactly_once.py --minutes 30     # what tests/soak runs

Workloads, each on a fresh tenant:
- keyed puts from several threads to ONE ref, each retried with its key until answered;
- a keyed put whose transaction response is lost on every try, then retried by the client;
- forget racing a dream on the same ref, random offsets;
- the same dream job delivered twice at once (direct invokes and an SQS batch).
Invariants: every acknowledged write stored exactly once; no trace of a forgotten subject in
any item or object; one archive, one output entry, one `memory.compacted` per dream; no
`internal_error` without a retry hint; no panic; no content, subject or secret in any log line
or error.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "tests" / "python")]

from faultkit import FaultProxy, aws_client  # noqa: E402
from wopkit import EventTap, Invoker, memory_ref, of_type, read_line_with_timeout  # noqa: E402

OUT = ROOT / "target" / "fault-suite"
RETRYABLE = {"rate_limited", "internal_error", "idempotency_in_flight"}
FAULTS = {"500": 0.04, "throttle": 0.08, "conflict": 0.08, "drop": 0.04}


def word(rng: random.Random, label: str) -> str:
    """A marker word that occurs nowhere else, so a trace of it anywhere is a finding."""
    return f"{label}{rng.randrange(16**10):010x}"


class Rig:
    """The proxy (seeded, serialised) and `local_gateway` running the binaries through it."""

    def __init__(self, seed: int) -> None:
        OUT.mkdir(parents=True, exist_ok=True)
        self.proxy = FaultProxy(serialize=True, seed=seed, stderr_path=OUT / "proxy.log")
        env = self.proxy.env(dict(os.environ, DREAM_SETTLE_SECONDS="0"))
        self.logs = OUT / f"function-logs-{seed}.txt"
        self.logs.unlink(missing_ok=True)
        binary = ROOT / "target" / "debug" / "local_gateway"
        if not binary.is_file():
            self.proxy.stop()
            raise RuntimeError(f"{binary} missing: run `cargo build --bins` first")
        self.gateway = subprocess.Popen(
            [str(binary), "--logs", str(self.logs)], cwd=ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=(OUT / "gateway.log").open("wb"), text=True)
        line = read_line_with_timeout(self.gateway.stdout, 120) or ""
        if not line.startswith("listening http://"):
            self.stop()
            raise RuntimeError(f"local_gateway did not start: {line!r}")
        self.invoker = Invoker(line.split(" ", 1)[1].strip())

    def stop(self) -> None:
        if getattr(self, "gateway", None) and self.gateway.poll() is None:
            self.gateway.stdin.close()
            try:
                self.gateway.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.gateway.terminate()
                self.gateway.wait()
        self.proxy.stop()


class Run:
    """One seed's workloads and what the checker found."""

    def __init__(self, rig: Rig, seed: int) -> None:
        self.rig, self.rng = rig, random.Random(seed)
        self.ops: Counter = Counter()
        self.violations: Counter = Counter()
        self.findings: list[str] = []
        self.markers: list[str] = []  # words that must never reach a log or an error
        self.errors: list[str] = []

    def violate(self, invariant: str, detail: str) -> None:
        self.violations[invariant] += 1
        self.findings.append(f"{invariant}: {detail}")

    def call(self, function: str, payload: Any, *, attempts: int = 40) -> Any:
        """Invokes until answered; a retryable error is retried after its hint, anything else
        is a finding."""
        for _ in range(attempts):
            got = self.rig.invoker.invoke(function, payload)
            if got.function_error is None:
                return got.payload
            body = got.payload if isinstance(got.payload, dict) else {}
            self.errors.append(json.dumps(body))
            code = body.get("errorType")
            self.ops[f"retried {code}"] += 1
            if code not in RETRYABLE:
                self.violate("no unexpected error", f"{function}: {code}")
                return None
            time.sleep(0.05 + self.rng.random() * 0.2)
        self.violate("answered within retries", function)
        return None

    # -- workloads -----------------------------------------------------------------------

    def concurrent_keyed_puts(self, tenant: str, workers: int = 4, puts: int = 5) -> None:
        ref = memory_ref(tenant, "agent-hot")
        acked: dict[str, list[str]] = {}
        secret = word(self.rng, "sec")
        self.markers.append(secret)
        lock = threading.Lock()

        def worker(w: int) -> None:
            for i in range(puts):
                content = word(self.rng, f"note{w}x{i}x")
                with lock:
                    self.markers.append(content)
                payload = {"op": "put", "tenantId": tenant, "memoryRef": ref, "runId": "run-f",
                           "idempotencyKey": f"w{w}-p{i}",
                           "entries": [{"content": f"{content} token {secret}"}],
                           "secrets": [{"secretId": "s", "value": secret}]}
                out = self.call("memory-write", payload)
                if out:
                    with lock:
                        acked[content] = [x["id"] for x in out["written"]]
        threads = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.ops["keyed puts"] += workers * puts
        self.expect_once(tenant, "agent-hot", acked)

    def lost_response_then_keyed_retry(self, tenant: str) -> None:
        ref = memory_ref(tenant, "agent-lost")
        content = word(self.rng, "lost")
        self.markers.append(content)
        payload = {"op": "put", "tenantId": tenant, "memoryRef": ref, "idempotencyKey": "k-lost",
                   "entries": [{"content": content}], "secrets": []}
        proxy = self.rig.proxy
        saved = proxy.config()
        proxy.config(rates={"500": 0, "throttle": 0, "conflict": 0, "drop": 1.0},
                     only=["dynamodb:TransactWriteItems"])
        first = self.rig.invoker.invoke("memory-write", payload)
        proxy.config(rates=saved["rates"], only=saved.get("only") or [])
        self.ops["lost-response puts"] += 1
        out = self.call("memory-write", payload)
        if first.function_error is None and out and first.payload != out:
            self.violate("keyed retry answers the same", "different written lists")
        self.expect_once(tenant, "agent-lost", {content: [x["id"] for x in out["written"]]}
                         if out else {})

    def forget_vs_dream(self, tenant: str, trial: int) -> None:
        agent = f"agent-race{trial}"
        ref = memory_ref(tenant, agent)
        subject, secret_text = word(self.rng, "subj"), word(self.rng, "forgotten")
        keep = word(self.rng, "kept")
        self.markers += [subject, secret_text]
        entries = [{"content": f"{secret_text} detail {i}", "subject": subject} for i in range(3)]
        entries += [{"content": f"{keep} other {i}"} for i in range(2)]
        self.call("memory-write", {"op": "put", "tenantId": tenant, "memoryRef": ref,
                                   "idempotencyKey": f"seed-{trial}", "entries": entries,
                                   "secrets": []})
        offset = self.rng.uniform(-0.3, 0.3)

        def dream() -> None:
            if offset < 0:
                time.sleep(-offset)
            self.call("memory-dream", {"tenantId": tenant, "memoryRef": ref})

        def forget() -> None:
            if offset > 0:
                time.sleep(offset)
            self.call("memory-forget", {"tenantId": tenant, "subject": subject})
        threads = [threading.Thread(target=dream), threading.Thread(target=forget)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.ops["forget-vs-dream races"] += 1
        traces = [where for where in self.stored_text(tenant) if secret_text in where[1]]
        for where, _ in traces:
            self.violate("forget leaves no trace", f"trial {trial}: {where}")

    def duplicate_dream(self, tenant: str) -> None:
        ref = memory_ref(tenant, "agent-dup")
        self.call("memory-write", {"op": "put", "tenantId": tenant, "memoryRef": ref,
                                   "idempotencyKey": "dup-seed", "secrets": [],
                                   "entries": [{"content": f"launch note {i}"} for i in range(4)]})
        tap = EventTap(tenant)
        try:
            job = {"tenantId": tenant, "memoryRef": ref}
            batch = {"Records": [
                {"messageId": f"m{i}", "body": json.dumps({"kind": "dream", **job})}
                for i in range(2)]}
            threads = [threading.Thread(target=self.call, args=("memory-dream", job)),
                       threading.Thread(target=self.call, args=("memory-dream", job)),
                       threading.Thread(target=self.call, args=("memory-dream", batch))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.ops["duplicate dream deliveries"] += 4
            events = tap.wait(of_type("memory.compacted", ref), 1, timeout=15, settle=2)
        finally:
            tap.close()
        # EventBridge is at-least-once and PutEvents is not idempotent: a publish whose answer
        # was lost and was retried delivers the same event twice, with the same deterministic
        # `eventId` for consumers to drop. One dream must announce one eventId.
        ids = {e["detail"].get("eventId") for e in events}
        outputs = {e["detail"]["outputId"] for e in events}
        if len(ids) > 1 or len(outputs) > 1:
            self.violate("one memory.compacted per dream", f"{len(ids)} event ids")
        self.ops["memory.compacted redelivered (same eventId)"] += len(events) - len(ids)
        items = self.items(tenant, "agent-dup")
        long_term = [i for i in items if i["sk"]["S"].startswith("E#")
                     and i.get("tier", {}).get("S") == "long-term"]
        if len(long_term) != 1:
            self.violate("one output entry per dream", f"{len(long_term)}")
        archives = self.objects(tenant, "agent-dup/archives/")
        if len(archives) != 1:
            self.violate("one archive per dream", f"{len(archives)}")

    # -- the checker ---------------------------------------------------------------------

    def items(self, tenant: str, agent: str) -> list[dict[str, Any]]:
        ddb = aws_client("dynamodb")
        out, start = [], None
        while True:
            kwargs = {"TableName": os.environ["MEMORY_TABLE"], "ConsistentRead": True,
                      "KeyConditionExpression": "pk = :p",
                      "ExpressionAttributeValues": {":p": {"S": f"{tenant}#{agent}"}}}
            if start:
                kwargs["ExclusiveStartKey"] = start
            page = ddb.query(**kwargs)
            out += page["Items"]
            start = page.get("LastEvaluatedKey")
            if not start:
                return out

    def objects(self, tenant: str, prefix: str) -> list[str]:
        s3 = aws_client("s3")
        out = s3.list_objects_v2(Bucket=os.environ["ARCHIVE_BUCKET"],
                                 Prefix=f"{tenant}/agents/{prefix}")
        return [o["Key"] for o in out.get("Contents", [])]

    def stored_text(self, tenant: str) -> list[tuple[str, str]]:
        """Every item of the tenant (a table scan) and every object version under it."""
        ddb, s3 = aws_client("dynamodb"), aws_client("s3")
        found, start = [], None
        while True:
            kwargs = {"TableName": os.environ["MEMORY_TABLE"]}
            if start:
                kwargs["ExclusiveStartKey"] = start
            page = ddb.scan(**kwargs)
            for item in page["Items"]:
                if item["pk"]["S"].startswith(tenant):
                    found.append((f"item {item['pk']['S']} {item['sk']['S']}", json.dumps(item)))
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        bucket = os.environ["ARCHIVE_BUCKET"]
        versions = s3.list_object_versions(Bucket=bucket, Prefix=f"{tenant}/")
        for v in versions.get("Versions", []):
            body = s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"]
            found.append((f"object {v['Key']}", body.read().decode("utf-8", "replace")))
        return found

    def expect_once(self, tenant: str, agent: str, acked: dict[str, list[str]]) -> None:
        contents = Counter()
        ids = Counter()
        for item in self.items(tenant, agent):
            if item["sk"]["S"].startswith("E#"):
                ids[item["sk"]["S"][2:]] += 1
                for c in acked:
                    if c in item.get("content", {}).get("S", ""):
                        contents[c] += 1
        for content, written in acked.items():
            if contents[content] != 1:
                self.violate("acknowledged write stored exactly once",
                             f"{agent}: stored {contents[content]} times")
            for i in written:
                if ids[i] != 1:
                    self.violate("acknowledged ids present", f"{agent}: id {i} x{ids[i]}")

    def check_logs(self) -> None:
        text = self.rig.logs.read_text(errors="replace") if self.rig.logs.exists() else ""
        if "panicked" in text:
            self.violate("no panic", "a function log line says panicked")
        errors = "\n".join(self.errors)
        for m in self.markers:
            if m in text:
                self.violate("no content in logs", f"marker {m[:6]}... in function logs")
            if m in errors:
                self.violate("no content in errors", f"marker {m[:6]}... in an error body")


def run_seed(seed: int, races: int) -> tuple[Counter, Counter, Counter, list[str]]:
    rig = Rig(seed)
    run = Run(rig, seed)
    try:
        rig.proxy.config(rates=FAULTS, only=[])
        tenant = f"fault{seed}-{random.Random(seed).randrange(16**8):08x}-{int(time.time())}"
        run.concurrent_keyed_puts(tenant)
        run.lost_response_then_keyed_retry(tenant)
        for trial in range(races):
            run.forget_vs_dream(tenant, trial)
        run.duplicate_dream(tenant)
        faults = Counter({k: v for k, v in rig.proxy.stats()["injected"].items() if v})
    finally:
        rig.proxy.quiet()
        rig.stop()
    run.check_logs()
    return run.ops, faults, run.violations, run.findings


def table(ops: Counter, faults: Counter, violations: Counter, invariants: list[str]) -> str:
    lines = ["| operations | count |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(ops.items())]
    lines += ["", "| faults injected | count |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(faults.items())]
    lines += ["", "| invariant | violations |", "|---|---|"]
    lines += [f"| {k} | {violations.get(k, 0)} |" for k in invariants]
    return "\n".join(lines)


INVARIANTS = ["acknowledged write stored exactly once", "acknowledged ids present",
              "keyed retry answers the same", "forget leaves no trace",
              "one memory.compacted per dream", "one output entry per dream",
              "one archive per dream", "no unexpected error", "answered within retries",
              "no panic", "no content in logs", "no content in errors"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--minutes", type=float, default=0)
    parser.add_argument("--races", type=int, default=5)
    args = parser.parse_args()
    ops, faults, violations, findings = Counter(), Counter(), Counter(), []
    seeds = [int(s) for s in args.seeds.split(",")]
    deadline = time.monotonic() + args.minutes * 60
    i = 0
    while True:
        seed = seeds[i] if i < len(seeds) else seeds[-1] + i
        o, f, v, fs = run_seed(seed, args.races)
        ops += o
        faults += f
        violations += v
        findings += fs
        i += 1
        print(f"seed {seed}: {sum(o.values())} operations, {sum(f.values())} faults, "
              f"{sum(v.values())} violations", flush=True)
        if i >= len(seeds) and time.monotonic() >= deadline:
            break
    print(table(ops, faults, violations, INVARIANTS))
    for f in findings:
        print("finding:", f)
    return 1 if sum(violations.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
