#!/usr/bin/env python3
"""Do the function binaries (AWS SDK for Rust) read the proxy's faults as AWS errors?

Not a pytest module (it needs the built binaries and takes ~20 s): a check to run by hand after
changing the fault bodies.

    eval "$(infra/local/up)" && .venv/bin/python tests/fault/rust_sdk_check.py

It starts the proxy (serialised) and `target/debug/local_gateway` with `AWS_ENDPOINT_URL` = the
proxy, then, phase by phase, forces one fault kind at a high rate on one service and drives
memory-write / memory-read / memory-dream. Every call must still succeed (the functions' retry
policy retries throttles, 5xx, transaction conflicts and broken connections, and it can only do
so if the SDK parsed the error code, and for conflicts the `CancellationReasons`), no entry may
be duplicated by a dropped (lost-response) write, and the codes the functions logged while
retrying are printed per phase. Cleans up the tenant's items and objects afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "tests" / "python")]

from faultkit import FaultProxy, aws_client  # noqa: E402
from wopkit import Api, Invoker, memory_ref, new_tenant, read_line_with_timeout  # noqa: E402

OUT = ROOT / "target" / "fault-rust-check"
CODE = re.compile(r'"message":"retrying".*?"code":"([^"]+)"')


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    proxy = FaultProxy(serialize=True, seed=11, stderr_path=OUT / "proxy.log")
    env = proxy.env(dict(os.environ, DREAM_SETTLE_SECONDS="0"))
    logs = OUT / "function-logs.txt"
    gateway = subprocess.Popen(
        [str(ROOT / "target" / "debug" / "local_gateway"), "--logs", str(logs)], cwd=ROOT,
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=(OUT / "gateway.log").open("wb"), text=True)
    line = read_line_with_timeout(gateway.stdout, 120) or ""
    if not line.startswith("listening http://"):
        proxy.stop()
        print(f"local_gateway did not start: {line!r}; see {OUT / 'gateway.log'}")
        return 1
    url = line.split(" ", 1)[1].strip()
    invoker, tenant = Invoker(url), new_tenant()
    api, ref = Api(url, tenant), memory_ref(tenant, "agent-fault")
    written: list[str] = []
    failures: list[str] = []

    def puts(label: str, n: int) -> None:
        for i in range(n):
            written.append(f"fault note {label} {i}")
            invoker.put(tenant, ref, [{"content": written[-1], "tags": ["fault"]}])

    def dream() -> None:
        invoker.ok("memory-dream", {"tenantId": tenant, "memoryRef": ref})

    phases = [
        ("pass-through", {}, lambda: puts("pass", 2)),
        ("conflict on TransactWriteItems", {"rates": {"conflict": 0.5},
                                            "only": "dynamodb:TransactWriteItems"},
         lambda: puts("conflict", 6)),
        ("throttle on dynamodb (mixed codes)", {"rates": {"throttle": 0.4}, "only": "dynamodb"},
         lambda: (puts("throttle", 4), api.list_all(ref))),
        ("500 on dynamodb", {"rates": {"500": 0.4}, "only": "dynamodb"},
         lambda: (puts("500", 4), api.list_all(ref))),
        ("throttle + 500 on events", {"rates": {"throttle": 0.3, "500": 0.3}, "only": "events"},
         lambda: puts("events", 4)),
        ("drop on TransactWriteItems", {"rates": {"drop": 0.5},
                                        "only": "dynamodb:TransactWriteItems"},
         lambda: puts("drop", 4)),
        ("throttle + 500 on s3 (dream)", {"rates": {"throttle": 0.4, "500": 0.3},
                                          "only": "s3"}, dream),
        ("drop on s3 (dream)", {"rates": {"drop": 0.5}, "only": "s3"},
         lambda: (puts("drop-s3", 1), dream())),
    ]
    try:
        for name, cfg, run in phases:
            proxy.quiet()
            proxy.reset()
            proxy.config(**cfg)
            started = time.monotonic()
            try:
                run()
                outcome = "ok"
            except AssertionError as err:
                outcome = f"FAILED {str(err)[:300]}"
                failures.append(name)
            stats = proxy.stats()
            injected = {k: v for k, v in stats["injected"].items() if v}
            print(f"{name}: {outcome} in {time.monotonic() - started:.1f}s, "
                  f"{stats['requests']} requests, injected {injected}, upstream 5xx "
                  f"{stats['upstream5xx']}, failed {stats['failed']}", flush=True)
        proxy.quiet()
        contents = Counter(e["content"] for e in api.list_all(ref))
        dupes = {c: n for c, n in contents.items() if c in written and n > 1}
        missing = [c for c in written if c not in contents]
        print(f"entries written {len(written)}, listed {sum(contents.values())} "
              f"(dream adds long-term entries), duplicated {dupes}, missing {missing}")
        if dupes or missing:
            failures.append("entries")
    finally:
        gateway.stdin.close()
        try:
            gateway.wait(timeout=30)
        except subprocess.TimeoutExpired:
            gateway.terminate()
            gateway.wait()
        proxy.stop()
        cleanup(tenant)
    text = logs.read_text(errors="replace") if logs.exists() else ""
    codes = Counter(CODE.findall(text))
    print(f"codes the functions retried on: {dict(codes)} (function logs: {logs}; `Unknown` = "
          "a 5xx without an AWS error code, i.e. the emulator's own failure)")
    print("FAILED: " + ", ".join(failures) if failures else "all phases passed")
    return 1 if failures else 0


def cleanup(tenant: str) -> None:
    table, bucket = os.environ["MEMORY_TABLE"], os.environ["ARCHIVE_BUCKET"]
    ddb, s3 = aws_client("dynamodb"), aws_client("s3")
    pk = f"{tenant}#agent-fault"
    items = ddb.query(TableName=table, KeyConditionExpression="pk = :p",
                      ExpressionAttributeValues={":p": {"S": pk}})["Items"]
    for item in items:
        ddb.delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})
    objects = s3.list_objects_v2(Bucket=bucket, Prefix=f"{tenant}/").get("Contents", [])
    for obj in objects:
        s3.delete_object(Bucket=bucket, Key=obj["Key"])
    print(f"cleaned up {len(items)} items, {len(objects)} objects")


if __name__ == "__main__":
    sys.exit(main())
