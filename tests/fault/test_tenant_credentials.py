"""Tenant-scoped credentials end to end (docs/guarantees.md "Tenant isolation in three layers").

The real function binaries run behind `local_gateway` with `TENANT_ROLE_ARN` set, and every AWS
call they make goes through the proxy with `tenantIam` on (tenant_iam.py): it learns from each
`sts:AssumeRole` answer which access key was vended for which `tenant` session tag, records which
key signed each DynamoDB / S3 call, and refuses a vended key outside its tenant as IAM would
(moto cannot: it ignores IAM Resource and Condition). Checked here:

- every DynamoDB / S3 call on a tenant's keys, from memory-write, memory-read, memory-forget (direct
  and HTTP), memory-dream and memory-consolidate (direct runs and batches of queued passes),
  memory-commitments (a backfill) and memory-mcp (the memory tool), was signed with
  credentials STS vended for that tenant, and none was refused; the only calls on a function's own
  role are the cross-tenant fan-out Queries on byDirtyRef and byDue;
- one AssumeRole per tenant per function process, however many requests (the session cache);
- STS failing (500) or throttling gives a retryable answer (503 `internal_error` / 429
  `rate_limited` with Retry-After, a failed invoke of the same codes) and no DynamoDB or S3 call
  at all for that tenant - never one on the function's role - and the tenant works once STS heals.

The wrong-key probe (a key of another tenant under a tenant's credentials, refused) is the Rust
test shared/memory-aws/tests/tenant_credentials.rs, which can build such a key.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from faultkit import REQUIRED_ENV, ROOT, FaultProxy, aws_client
from wopkit import (BASE, Api, Invoker, memory_ref, mint_jwt, new_tenant, read_line_with_timeout,
                    stop_process)

# One worker runs the whole module (tests/run spreads the fault step over workers): its tests
# share one rig and its output files.
pytestmark = pytest.mark.xdist_group("tenant-credentials")
OUT = ROOT / "target" / "tenant-credentials"
ROLE_ARN = "arn:aws:iam::123456789012:role/wop-memory-tenant-access"
DATA_SERVICES = ("dynamodb", "s3")


@pytest.fixture(scope="module")
def rig() -> Any:
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not set: run `eval \"$(infra/local/up)\"` first.",
                    pytrace=False)
    # The cargo target dir in use (CARGO_TARGET_DIR, else target/), as suite.py finds it.
    binary = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "debug" / \
        "local_gateway"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: `cargo build --bins` first.", pytrace=False)
    OUT.mkdir(parents=True, exist_ok=True)
    proxy = FaultProxy(serialize=True, stderr_path=OUT / "proxy.log")
    proxy.config(tenantIam=True)
    sqs = aws_client("sqs")
    queue = sqs.create_queue(QueueName=f"tenant-cred-passes-{int(time.time() * 1000)}")["QueueUrl"]
    env = proxy.env(dict(os.environ, TENANT_ROLE_ARN=ROLE_ARN, DREAM_SETTLE_SECONDS="0",
                         PASS_QUEUE_URL=queue))
    # Its HTTP exchanges (the 503 / 429 answers included) join those the OpenAPI step checks.
    exchanges = Path(os.environ.get("TENANT_CRED_EXCHANGES", ROOT / "target" / "e2e-exchanges"))
    gateway = subprocess.Popen(
        [str(binary), "--exchanges", str(exchanges), "--logs", str(OUT / "function-logs.txt")],
        cwd=ROOT, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=(OUT / "gateway.log").open("wb"), text=True)
    line = read_line_with_timeout(gateway.stdout, 120) or ""
    if not line.startswith("listening http://"):
        proxy.stop()
        stop_process(gateway)
        pytest.fail(f"local_gateway did not start: {line!r}; see {OUT / 'gateway.log'}")
    url = line.split(" ", 1)[1].strip()
    try:
        yield proxy, url
    finally:
        stop_process(gateway, stdin_grace=20)
        proxy.stop()
        sqs.delete_queue(QueueUrl=queue)


def mcp_list(url: str, tenant: str, ref: str) -> dict[str, Any]:
    """`memory_list` over MCP as `tenant`, through the official `mcp` client."""
    async def run() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {mint_jwt({'tenant_id': tenant})}"}
        async with httpx2.AsyncClient(headers=headers, trust_env=False, timeout=60) as http:
            async with streamable_http_client(f"{url}{BASE}/mcp", http_client=http) as (
                    read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    result = await s.call_tool("memory_list", {"memoryRef": ref})
                    assert not result.is_error, result
                    return result.structured_content
    return asyncio.run(run())


def credentials(proxy: FaultProxy) -> dict[str, Any]:
    return proxy._call("GET", "/__fault/credentials")


def data_calls(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Calls on tenant data: every DynamoDB / S3 call but the meter's usage items."""
    return [c for c in doc["calls"] if c["service"] in DATA_SERVICES and not c["accounting"]]


def accounting_calls(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The meter's calls on the usage partitions (docs/metering.md "The items and the rollup")."""
    return [c for c in doc["calls"] if c["accounting"]]


def test_every_tenant_data_call_is_signed_by_that_tenants_vended_credentials(rig: Any) -> None:
    proxy, url = rig
    proxy.reset()
    invoker = Invoker(url)
    a, b = new_tenant(), new_tenant()
    ref_a, ref_b = memory_ref(a, "agent-iam"), memory_ref(b, "agent-iam")
    for tenant, ref in ((a, ref_a), (b, ref_b)):
        for i in range(3):
            invoker.put(tenant, ref, [{"content": f"iam note {i}", "tags": ["iam"],
                                      "subject": "subj-iam"}])
    api_a = Api(url, a)
    assert len(api_a.list_all(ref_a)) == 3
    first = api_a.list(ref_a)["entries"][0]
    assert api_a.get(ref_a, first["id"])["id"] == first["id"]
    # Another tenant's ref answers as empty (CTI-1), without touching its keys.
    assert api_a.list(ref_b)["entries"] == []
    invoker.ok("memory-dream", {"tenantId": a, "memoryRef": ref_a})
    invoker.ok("memory-consolidate", {"tenantId": b, "memoryRef": ref_b})
    # SQS batches of queued passes: each acts for its own tenant.
    batch = {"Records": [
        {"messageId": "m-a", "body": json.dumps({"kind": "consolidate", "tenantId": a,
                                                 "memoryRef": ref_a})},
        {"messageId": "m-b", "body": json.dumps({"kind": "consolidate", "tenantId": b,
                                                 "memoryRef": ref_b})}]}
    assert invoker.ok("memory-consolidate", batch) == {"batchItemFailures": []}
    invoker.ok("memory-dream", {"action": "fan-out"})
    # Commitments act for the ref's tenant; the memory tool (memory-mcp) for the JWT's.
    invoker.ok("memory-commitments", {"action": "backfill", "tenantId": a, "memoryRef": ref_a})
    invoker.ok("memory-commitments", {"action": "tick"})
    created = Api(url, b).request(
        "POST", f"/v1/host/wop-memory/memory-tool?memoryRef={ref_b}",
        body={"command": "create", "path": "/memories/iam.md", "file_text": "iam file"})
    assert not created.get("is_error"), created
    # An MCP tool call (the official client) lists that file, on the same memory-mcp process.
    listed = mcp_list(url, b, ref_b)
    assert sorted(e["content"] for e in listed["entries"]) == [
        "iam file", "iam note 0", "iam note 1", "iam note 2"], listed
    forgot_a = invoker.ok("memory-forget", {"tenantId": a, "subject": "subj-iam"})
    forgot_b = Api(url, b).forget("subj-iam")
    assert forgot_a["deletedEntries"] >= 1 and forgot_b["deletedEntries"] == 3, (forgot_a, forgot_b)

    doc = credentials(proxy)
    calls = data_calls(doc)
    mine = [c for c in calls if set(c["keyTenants"]) & {a, b}]
    assert mine, "no data call of the test's tenants was recorded"
    # The meter touches only the usage partitions (counts, no content): its hour items by ADD,
    # the day's tenant list, and the rollup's reads and day items.
    metered = accounting_calls(doc)
    assert any(c["operation"] == "UpdateItem" for c in metered), \
        "positive control: the meter's usage writes were not seen"
    assert {c["operation"] for c in metered} <= {"UpdateItem", "PutItem", "Query"}, metered[:5]
    wrong = [c for c in mine if c["keyTenants"] != [c["signer"].removeprefix("tenant:")]]
    assert not wrong, f"calls not signed by their tenant's credentials: {wrong[:5]}"
    denied = [c for c in calls if c["denied"]]
    assert not denied, f"refused: {denied[:5]}"
    own = Counter((c["operation"], c["index"]) for c in calls if c["signer"] == "own")
    assert set(own) <= {("Query", "byDirtyRef"), ("Query", "byDue")}, f"on the function role: {own}"
    assert own[("Query", "byDirtyRef")] >= 1, "the fan-out Queries were not seen"
    services = Counter((c["service"], c["signer"]) for c in mine)
    assert services[("s3", f"tenant:{a}")] >= 1, f"the dream's S3 calls were not seen: {services}"
    # One AssumeRole per tenant per function process: a's requests went to write, read, dream,
    # consolidate, commitments and forget (6), b's to write, consolidate, mcp and forget (4).
    assumed = Counter(x["tenant"] for x in doc["assumed"] if x["status"] == 200)
    assert (assumed[a], assumed[b]) == (6, 4), assumed
    print(f"\n{len(mine)} data calls of 2 tenants, all on their tenant's credentials; "
          f"by service/signer {dict(services)}; AssumeRole {dict(assumed)}; own-role calls "
          f"{dict(own)}")


@pytest.mark.parametrize("kind,status,code", [("500", 503, "internal_error"),
                                              ("throttle", 429, "rate_limited")])
def test_sts_failure_is_retryable_and_never_falls_back_to_the_function_role(
        rig: Any, kind: str, status: int, code: str) -> None:
    proxy, url = rig
    proxy.reset()
    invoker = Invoker(url)
    tenant = new_tenant()
    ref = memory_ref(tenant, "agent-sts")
    proxy.config(rates={kind: 1.0}, only="sts:AssumeRole")
    try:
        started = time.monotonic()
        err = Api(url, tenant).error("GET", f"/v1/host/wop-memory/entries?memoryRef={ref}",
                                     status=status, code=code)
        took = time.monotonic() - started
        assert err.envelope.details and err.envelope.details.get("retryAfterSeconds"), err.raw_text
        failed = invoker.fail("memory-write", {"op": "put", "tenantId": tenant, "memoryRef": ref,
                                               "entries": [{"content": "x"}], "secrets": []})
        assert failed.get("errorType") == code, failed
        # A function error has no details: the delay ends the message in a fixed form.
        assert re.search(r"\(retryAfterSeconds: \d+\)$", failed.get("errorMessage", "")), failed
        forget = invoker.fail("memory-forget", {"tenantId": tenant, "subject": "s"})
        assert forget.get("errorType") == code, forget
    finally:
        proxy.quiet()
    doc = credentials(proxy)
    touched = [c for c in data_calls(doc) if tenant in c["keyTenants"]]
    assert not touched, f"data calls despite no credentials: {touched[:5]}"
    time.sleep(1.2)  # past the failure hold
    Invoker(url).put(tenant, ref, [{"content": "after the outage"}])
    assert [e["content"] for e in Api(url, tenant).list_all(ref)] == ["after the outage"]
    print(f"\nSTS {kind}: read answered {status} {code} after {took:.1f}s of retries, no data "
          "call; healed afterwards")


def test_the_proxy_refuses_vended_keys_outside_their_tenant(proxy: FaultProxy) -> None:
    """The proxy's own check (tenant_iam.py), with boto3: keys vended for one tenant reach that
    tenant's items and objects only; other keys pass unchecked, and all are recorded."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    proxy.config(tenantIam=True)
    try:
        table, bucket = os.environ["MEMORY_TABLE"], os.environ["ARCHIVE_BUCKET"]
        mine, other = new_tenant(), new_tenant()
        vended = proxy.client("sts").assume_role(
            RoleArn=ROLE_ARN, RoleSessionName="probe", Tags=[{"Key": "tenant", "Value": mine}]
        )["Credentials"]
        session = boto3.session.Session(
            aws_access_key_id=vended["AccessKeyId"], aws_secret_access_key=vended["SecretAccessKey"],
            aws_session_token=vended["SessionToken"], region_name=os.environ.get("AWS_REGION",
                                                                                 "us-east-1"))
        config = Config(retries={"total_max_attempts": 1}, s3={"addressing_style": "path"})
        ddb = session.client("dynamodb", endpoint_url=proxy.url, config=config)
        s3 = session.client("s3", endpoint_url=proxy.url, config=config)

        def code(call: Any, **kw: Any) -> str:
            try:
                call(**kw)
                return "ok"
            except ClientError as err:
                return err.response["Error"]["Code"]

        key = {"pk": {"S": f"{mine}#agent"}, "sk": {"S": "E#1"}}
        assert code(ddb.put_item, TableName=table, Item=key) == "ok"
        assert code(ddb.get_item, TableName=table, Key=key) == "ok"
        foreign = {"pk": {"S": f"{other}#agent"}, "sk": {"S": "E#1"}}
        assert code(ddb.get_item, TableName=table, Key=foreign) == "AccessDeniedException"
        assert code(ddb.query, TableName=table, KeyConditionExpression="pk = :p",
                    ExpressionAttributeValues={":p": {"S": f"{other}#agent"}}) \
            == "AccessDeniedException"
        assert code(ddb.query, TableName=table, IndexName="byDirtyRef",
                    KeyConditionExpression="dirtyPartition = :p",
                    ExpressionAttributeValues={":p": {"S": "dream#00"}}) == "AccessDeniedException"
        assert code(ddb.scan, TableName=table, Limit=1) == "AccessDeniedException"
        assert code(ddb.transact_write_items, TransactItems=[
            {"Put": {"TableName": table, "Item": key}},
            {"Put": {"TableName": table, "Item": foreign}}]) == "AccessDeniedException"
        assert code(s3.put_object, Bucket=bucket, Key=f"{mine}/probe", Body=b"x") == "ok"
        assert code(s3.get_object, Bucket=bucket, Key=f"{other}/probe") == "AccessDenied"
        assert code(s3.list_objects_v2, Bucket=bucket, Prefix=f"{other}/") == "AccessDenied"
        assert code(s3.list_objects_v2, Bucket=bucket) == "AccessDenied"
        assert code(s3.list_objects_v2, Bucket=bucket, Prefix=f"{mine}/") == "ok"
        # S3 without an unconditioned ListBucket: an absent key of one's own is a 403 too.
        assert code(s3.get_object, Bucket=bucket, Key=f"{mine}/absent") == "AccessDenied"
        # The function's own keys are not vended ones: recorded as `own`, never refused.
        assert code(proxy.client("dynamodb").get_item, TableName=table, Key=foreign) == "ok"
        calls = credentials(proxy)["calls"]
        assert [c["denied"] for c in calls] == [False, False, True, True, True, True, True,
                                                False, True, True, True, False, False, False]
        assert {c["signer"] for c in calls[:-1]} == {f"tenant:{mine}"}
        assert calls[-1]["signer"] == "own"
        ddb.delete_item(TableName=table, Key=key)
        s3.delete_object(Bucket=bucket, Key=f"{mine}/probe")
    finally:
        proxy.config(tenantIam=False)
