"""Self-test of tests/fault/proxy.py: it forwards faithfully, each fault kind reaches botocore as
the right AWS error, a dropped write applies upstream, draws are reproducible from the seed, and
the counters add up. boto3 talks to the proxy, which fronts the emulator; SDK retries are off."""

from __future__ import annotations

import http.client
import io
import json
import os
import random
import secrets
import sys
import urllib.error
import urllib.request
import zlib
from contextlib import contextmanager
from pathlib import Path

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError

from faultkit import KINDS, FaultProxy, aws_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import proxy as proxy_mod  # noqa: E402 - the module under test, for its pure functions

# One worker runs the whole module (tests/run spreads the fault step over workers): its tests
# share one rig and its output files.
pytestmark = pytest.mark.xdist_group("proxy")
TABLE = os.environ.get("MEMORY_TABLE", "")
BUCKET = os.environ.get("ARCHIVE_BUCKET", "")
BUS = os.environ.get("EVENT_BUS_NAME", "")


def key(tenant: str, sk: str = "E#x") -> dict:
    return {"pk": {"S": f"{tenant}#agent"}, "sk": {"S": sk}}


def item(tenant: str, sk: str = "E#x", content: str = "fault-test") -> dict:
    return {**key(tenant, sk), "content": {"S": content}}


@contextmanager
def ddb_cleanup(tenant: str, *sks: str):
    """Deletes the test's items straight on the emulator afterwards."""
    try:
        yield
    finally:
        direct = aws_client("dynamodb")
        for sk in sks:
            direct.delete_item(TableName=TABLE, Key=key(tenant, sk))


def error_of(call, *args, **kwargs) -> ClientError:
    with pytest.raises(ClientError) as info:
        call(*args, **kwargs)
    return info.value


def code_status(err: ClientError) -> tuple[str, int]:
    return err.response["Error"]["Code"], err.response["ResponseMetadata"]["HTTPStatusCode"]


def assert_counters_add_up(stats: dict) -> None:
    answered = sum(stats["injected"][k] for k in ("500", "throttle", "conflict"))
    assert stats["requests"] == (stats["forwarded"] + stats["failed"] + stats["inFlight"]
                                 + answered), stats
    assert stats["injected"]["drop"] <= stats["forwarded"], stats
    for field in ("requests", "forwarded", "failed", "inFlight", "upstream5xx"):
        assert stats[field] == sum(op[field] for op in stats["byOperation"].values()), field
    for kind in KINDS:
        assert stats["injected"][kind] == sum(
            op["injected"][kind] for op in stats["byOperation"].values()), kind


# ---------------------------------------------------------------------------------------------
# (a) pass-through


def test_everything_passes_through_at_rate_zero(proxy: FaultProxy, tenant: str) -> None:
    ddb = proxy.client("dynamodb")
    with ddb_cleanup(tenant, "E#x"):
        ddb.put_item(TableName=TABLE, Item=item(tenant))
        got = ddb.get_item(TableName=TABLE, Key=key(tenant), ConsistentRead=True)
        assert got["Item"] == item(tenant)

    s3 = proxy.client("s3")
    obj = f"{tenant}/agents/agent/archives/x.json"
    body = json.dumps({"k": "v" * 3000}).encode()  # a few KiB, byte-exact round trip
    try:
        # A file-like body makes botocore send `Expect: 100-continue`.
        put = s3.put_object(Bucket=BUCKET, Key=obj, Body=io.BytesIO(body),
                            ContentType="application/json", Tagging="wop-memory-kind=archive")
        got = s3.get_object(Bucket=BUCKET, Key=obj)
        assert got["Body"].read() == body
        assert got["ETag"] == put["ETag"]
        assert got["ContentType"] == "application/json"
        head = s3.head_object(Bucket=BUCKET, Key=obj)
        assert head["ContentLength"] == len(body)
        tags = s3.get_object_tagging(Bucket=BUCKET, Key=obj)["TagSet"]
        assert tags == [{"Key": "wop-memory-kind", "Value": "archive"}]
        with pytest.raises(ClientError) as missing:
            s3.head_object(Bucket=BUCKET, Key=obj + ".missing")
        assert code_status(missing.value)[1] == 404  # upstream errors come back unchanged
    finally:
        s3.delete_object(Bucket=BUCKET, Key=obj)

    sqs = proxy.client("sqs")
    url = sqs.create_queue(QueueName=tenant)["QueueUrl"]
    try:
        sqs.send_message(QueueUrl=url, MessageBody="fault-test message")
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=2)
        assert [m["Body"] for m in got["Messages"]] == ["fault-test message"]
    finally:
        sqs.delete_queue(QueueUrl=url)

    events = proxy.client("events")
    out = events.put_events(Entries=[{"Source": "faulttest", "DetailType": "fault.test",
                                      "Detail": json.dumps({"tenantId": tenant}),
                                      "EventBusName": BUS}])
    assert out["FailedEntryCount"] == 0

    stats = proxy.stats()
    assert stats["injected"] == {k: 0 for k in KINDS}
    assert stats["forwarded"] == stats["requests"] > 0
    assert {"dynamodb:PutItem", "dynamodb:GetItem", "s3:PutObject",
            "s3:GetObject", "s3:HeadObject", "s3:GetObjectTagging", "s3:DeleteObject",
            "sqs:CreateQueue", "sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteQueue",
            "events:PutEvents"} <= set(stats["byOperation"]), stats["byOperation"].keys()
    assert_counters_add_up(stats)


def test_chunked_request_body_is_forwarded(proxy: FaultProxy, tenant: str) -> None:
    """A SigV4-signed S3 PUT sent with `Transfer-Encoding: chunked` arrives whole."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    obj = f"{tenant}/agents/agent/archives/chunked.json"
    url = f"{proxy.url}/{BUCKET}/{obj}"
    chunks = [b'{"part":1,', b'"pad":"' + b"x" * 5000 + b'",', b'"part2":true}']
    request = AWSRequest(method="PUT", url=url, headers={
        "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "Content-Type": "application/json"})
    S3SigV4Auth(Credentials("test", "test"), "s3", os.environ.get("AWS_REGION") or "us-east-1"
                ).add_auth(request)
    host, port = proxy.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.putrequest("PUT", f"/{BUCKET}/{obj}", skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", f"{host}:{port}")  # signed as such by add_auth
        for name, value in request.headers.items():
            conn.putheader(name, value)
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        for chunk in chunks:
            conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        conn.send(b"0\r\n\r\n")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200, resp.status
    finally:
        conn.close()
    direct = aws_client("s3")
    try:
        assert direct.get_object(Bucket=BUCKET, Key=obj)["Body"].read() == b"".join(chunks)
    finally:
        direct.delete_object(Bucket=BUCKET, Key=obj)
    assert proxy.stats()["byOperation"]["s3:PutObject"]["forwarded"] == 1


def test_control_path_is_never_forwarded(proxy: FaultProxy) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError) as info:
        opener.open(proxy.url + "/__fault/nothing", timeout=5)
    assert info.value.code == 404
    assert "no control endpoint" in json.loads(info.value.read())["error"]
    with pytest.raises(RuntimeError, match="400"):
        proxy.config(rates={"throttle": 0.7, "500": 0.7})
    with pytest.raises(RuntimeError, match="400"):
        proxy.config(rates={"bogus": 0.1})
    assert proxy.stats()["requests"] == 0


# ---------------------------------------------------------------------------------------------
# (b) every fault kind, forced on one operation, is the right error for botocore


def test_dynamodb_throttling_exception(proxy: FaultProxy, tenant: str) -> None:
    proxy.config(rates={"throttle": 1.0}, only="dynamodb:PutItem",
                 dynamodbThrottle="ThrottlingException")
    ddb = proxy.client("dynamodb")
    err = error_of(ddb.put_item, TableName=TABLE, Item=item(tenant))
    assert code_status(err) == ("ThrottlingException", 400)
    assert err.response["Error"]["Message"] == "Rate of requests exceeds the allowed throughput."
    # Injected before forwarding: nothing was written. Other operations pass.
    assert "Item" not in ddb.get_item(TableName=TABLE, Key=key(tenant), ConsistentRead=True)


def test_dynamodb_provisioned_throughput_exceeded(proxy: FaultProxy, tenant: str) -> None:
    proxy.config(rates={"throttle": 1.0}, only="dynamodb:PutItem",
                 dynamodbThrottle="ProvisionedThroughputExceededException")
    ddb = proxy.client("dynamodb")
    with pytest.raises(ddb.exceptions.ProvisionedThroughputExceededException) as info:
        ddb.put_item(TableName=TABLE, Item=item(tenant))
    assert code_status(info.value) == ("ProvisionedThroughputExceededException", 400)


def test_dynamodb_internal_server_error(proxy: FaultProxy, tenant: str) -> None:
    proxy.config(rates={"500": 1.0}, only="dynamodb:GetItem")
    ddb = proxy.client("dynamodb")
    with pytest.raises(ddb.exceptions.InternalServerError) as info:
        ddb.get_item(TableName=TABLE, Key=key(tenant))
    assert code_status(info.value) == ("InternalServerError", 500)
    assert info.value.response["Error"]["Message"] == "Internal server error"


def test_dynamodb_transaction_conflict(proxy: FaultProxy, tenant: str) -> None:
    proxy.config(rates={"conflict": 1.0}, only="dynamodb:TransactWriteItems")
    ddb = proxy.client("dynamodb")
    sks = ("E#a", "E#b", "E#c")
    with pytest.raises(ddb.exceptions.TransactionCanceledException) as info:
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": TABLE, "Item": item(tenant, sk)}} for sk in sks])
    err = info.value
    assert code_status(err) == ("TransactionCanceledException", 400)
    reasons = err.response["CancellationReasons"]
    codes = [r["Code"] for r in reasons]
    assert len(reasons) == len(sks)
    assert codes.count("TransactionConflict") == 1 and codes.count("None") == 2, codes
    conflict = reasons[codes.index("TransactionConflict")]
    assert conflict["Message"] == "Transaction is ongoing for the item"
    assert err.response["Error"]["Message"] == (
        "Transaction cancelled, please refer cancellation reasons for specific reasons "
        f"[{', '.join(codes)}]")
    direct = aws_client("dynamodb")
    for sk in sks:  # nothing was forwarded
        assert "Item" not in direct.get_item(TableName=TABLE, Key=key(tenant, sk),
                                             ConsistentRead=True)
    # A conflict draw on an operation that cannot conflict passes the request through.
    proxy.config(only=[])
    with ddb_cleanup(tenant, "E#x"):
        ddb.put_item(TableName=TABLE, Item=item(tenant))
    assert proxy.stats()["injected"]["conflict"] == 1


def test_s3_slow_down_and_internal_error(proxy: FaultProxy, tenant: str) -> None:
    s3 = proxy.client("s3")
    obj = f"{tenant}/agents/agent/archives/y.json"
    proxy.config(rates={"throttle": 1.0}, only="s3:PutObject")
    err = error_of(s3.put_object, Bucket=BUCKET, Key=obj, Body=b"{}")
    assert code_status(err) == ("SlowDown", 503)
    assert err.response["Error"]["Message"] == "Please reduce your request rate."
    with pytest.raises(ClientError) as missing:  # not written
        aws_client("s3").head_object(Bucket=BUCKET, Key=obj)
    assert code_status(missing.value)[1] == 404

    proxy.config(rates={"throttle": 0.0, "500": 1.0}, only="s3:GetObject")
    s3.put_object(Bucket=BUCKET, Key=obj, Body=b"{}")
    try:
        err = error_of(s3.get_object, Bucket=BUCKET, Key=obj)
        assert code_status(err) == ("InternalError", 500)
        # HEAD answers carry no body; botocore falls back to the status.
        proxy.config(only="s3:HeadObject")
        err = error_of(s3.head_object, Bucket=BUCKET, Key=obj)
        assert code_status(err)[1] == 500
    finally:
        proxy.config(only="s3:NothingElse")
        s3.delete_object(Bucket=BUCKET, Key=obj)


@pytest.mark.parametrize("kind, expected", [
    ("throttle", ("ThrottlingException", 400)),
    ("500", ("InternalFailure", 500)),
])
def test_eventbridge_faults(proxy: FaultProxy, kind: str, expected: tuple[str, int]) -> None:
    proxy.config(rates={kind: 1.0}, only="events:PutEvents")
    err = error_of(proxy.client("events").put_events,
                   Entries=[{"Source": "faulttest", "DetailType": "fault.test", "Detail": "{}",
                             "EventBusName": BUS}])
    assert code_status(err) == expected


@pytest.mark.parametrize("kind, expected", [
    ("throttle", ("RequestThrottled", 400)),
    ("500", ("InternalError", 500)),
])
def test_sqs_faults(proxy: FaultProxy, tenant: str, kind: str,
                    expected: tuple[str, int]) -> None:
    sqs = proxy.client("sqs")
    url = sqs.create_queue(QueueName=tenant)["QueueUrl"]
    try:
        proxy.config(rates={kind: 1.0}, only="sqs:SendMessage")
        err = error_of(sqs.send_message, QueueUrl=url, MessageBody="fault-test")
        assert code_status(err) == expected
    finally:
        proxy.config(only="sqs:NothingElse")
        sqs.delete_queue(QueueUrl=url)


def test_query_protocol_faults(proxy: FaultProxy) -> None:
    sts = proxy.client("sts")
    proxy.config(rates={"throttle": 1.0}, only="sts")
    assert code_status(error_of(sts.get_caller_identity)) == ("Throttling", 400)
    proxy.config(rates={"throttle": 0.0, "500": 1.0})
    assert code_status(error_of(sts.get_caller_identity)) == ("InternalFailure", 500)


# ---------------------------------------------------------------------------------------------
# (c) drop: the write applies upstream, the client sees a broken connection


def test_drop_applies_the_write_and_loses_the_response(proxy: FaultProxy, tenant: str) -> None:
    proxy.config(rates={"drop": 1.0}, only="dynamodb:PutItem")
    ddb = proxy.client("dynamodb")
    with ddb_cleanup(tenant, "E#x"):
        with pytest.raises(ConnectionClosedError):
            ddb.put_item(TableName=TABLE, Item=item(tenant))
        direct = aws_client("dynamodb")
        got = direct.get_item(TableName=TABLE, Key=key(tenant), ConsistentRead=True)
        assert got.get("Item") == item(tenant)
        # The same client (and its connection pool) goes on working.
        assert ddb.get_item(TableName=TABLE, Key=key(tenant), ConsistentRead=True)["Item"]
    stats = proxy.stats()
    assert stats["injected"]["drop"] == 1
    assert stats["byOperation"]["dynamodb:PutItem"]["forwarded"] == 1
    assert [f["kind"] for f in proxy.faults()] == ["drop"]


# ---------------------------------------------------------------------------------------------
# (d) reproducible draws


def _outcomes(proxy: FaultProxy, tenant: str, n: int) -> list[str]:
    ddb = proxy.client("dynamodb")
    out = []
    for _ in range(n):
        try:
            ddb.get_item(TableName=TABLE, Key=key(tenant))
            out.append("ok")
        except ClientError as err:
            out.append(err.response["Error"]["Code"])
    return out


def test_same_seed_same_faults(proxy: FaultProxy, tenant: str) -> None:
    n = 24
    proxy.config(seed=42, rates={"500": 0.25, "throttle": 0.25}, only="dynamodb:GetItem")
    first, first_log = _outcomes(proxy, tenant, n), proxy.faults()
    proxy.reset()
    proxy.config(seed=42)  # a seed restarts the draws
    second, second_log = _outcomes(proxy, tenant, n), proxy.faults()
    assert first == second
    strip = [{k: f[k] for k in ("seq", "draw", "kind", "code")} for f in first_log]
    assert strip == [{k: f[k] for k in ("seq", "draw", "kind", "code")} for f in second_log]
    kinds = set(first)
    assert {"ok", "InternalServerError"} <= kinds and kinds & {
        "ThrottlingException", "ProvisionedThroughputExceededException"}, first
    # Requests the `only` rule does not admit take no draw and do not shift the sequence.
    proxy.reset()
    proxy.config(seed=42)
    ddb = proxy.client("dynamodb")
    mixed = []
    for i in range(n):
        ddb.describe_table(TableName=TABLE)
        mixed += _outcomes(proxy, tenant, 1)
    assert mixed == first
    proxy.reset()
    proxy.config(seed=43)
    assert _outcomes(proxy, tenant, n) != first


def test_draws_are_a_pure_function_of_seed_and_number() -> None:
    rates = {"500": 0.1, "throttle": 0.2, "conflict": 0.05, "drop": 0.05}
    seq = [proxy_mod.decide(7, n, rates, "dynamodb", "TransactWriteItems")[0]
           for n in range(1, 4001)]
    assert seq == [proxy_mod.decide(7, n, rates, "dynamodb", "TransactWriteItems")[0]
                   for n in range(1, 4001)]
    for kind, rate in rates.items():
        assert abs(seq.count(kind) / len(seq) - rate) < 0.025, (kind, seq.count(kind))
    # Conflicts only on transactions; the other kinds keep their draws.
    other = [proxy_mod.decide(7, n, rates, "dynamodb", "PutItem")[0] for n in range(1, 4001)]
    assert "conflict" not in other
    assert [k if k != "conflict" else None for k in seq] == other


# ---------------------------------------------------------------------------------------------
# (e) counters


def test_counters_add_up(proxy: FaultProxy, tenant: str) -> None:
    ddb = proxy.client("dynamodb")
    with ddb_cleanup(tenant, "E#x", "E#a", "E#b"):
        ddb.put_item(TableName=TABLE, Item=item(tenant))                      # forwarded
        for _ in range(2):
            ddb.get_item(TableName=TABLE, Key=key(tenant))                    # forwarded
        proxy.config(rates={"throttle": 1.0}, only="dynamodb:PutItem")
        for _ in range(2):
            error_of(ddb.put_item, TableName=TABLE, Item=item(tenant))        # throttle
        proxy.config(rates={"throttle": 0.0, "500": 1.0}, only="dynamodb:GetItem")
        error_of(ddb.get_item, TableName=TABLE, Key=key(tenant))              # 500
        proxy.config(rates={"500": 0.0, "conflict": 1.0}, only="dynamodb:TransactWriteItems")
        error_of(ddb.transact_write_items, TransactItems=[                    # conflict
            {"Put": {"TableName": TABLE, "Item": item(tenant, sk)}} for sk in ("E#a", "E#b")])
        proxy.config(rates={"conflict": 0.0, "drop": 1.0}, only="dynamodb:DeleteItem")
        with pytest.raises(ConnectionClosedError):
            ddb.delete_item(TableName=TABLE, Key=key(tenant))                 # drop (applies)
        proxy.quiet()
        assert "Item" not in ddb.get_item(TableName=TABLE, Key=key(tenant),
                                          ConsistentRead=True)                # forwarded
        stats = proxy.stats()
    assert_counters_add_up(stats)
    assert stats["requests"] == 9
    assert stats["forwarded"] == 5 and stats["failed"] == 0 and stats["inFlight"] == 0
    assert stats["injected"] == {"500": 1, "throttle": 2, "conflict": 1, "drop": 1}
    by_op = stats["byOperation"]
    assert by_op["dynamodb:PutItem"]["requests"] == 3
    assert by_op["dynamodb:PutItem"]["injected"]["throttle"] == 2
    assert by_op["dynamodb:GetItem"]["requests"] == 4
    assert by_op["dynamodb:TransactWriteItems"]["injected"]["conflict"] == 1
    assert by_op["dynamodb:DeleteItem"] == {"requests": 1, "forwarded": 1, "failed": 0,
                                            "inFlight": 0, "upstream5xx": 0, "injected": {
                                                "500": 0, "throttle": 0, "conflict": 0,
                                                "drop": 1}}
    faults = proxy.faults()
    assert len(faults) == sum(stats["injected"].values())
    assert [f["kind"] for f in faults] == ["throttle", "throttle", "500", "conflict", "drop"]
    assert proxy.reset()["requests"] == 0


# ---------------------------------------------------------------------------------------------
# pure parts: classification and error bodies


@pytest.mark.parametrize("method, target, headers, expected", [
    ("POST", "/", {"x-amz-target": "DynamoDB_20120810.TransactWriteItems"},
     ("dynamodb", "TransactWriteItems")),
    ("POST", "/", {"x-amz-target": "AmazonSQS.SendMessage"}, ("sqs", "SendMessage")),
    ("POST", "/", {"x-amz-target": "AWSEvents.PutEvents"}, ("events", "PutEvents")),
    ("PUT", "/b/t/agents/a/archives/d.json?x-id=PutObject", {}, ("s3", "PutObject")),
    ("GET", "/b/k?x-id=GetObject", {}, ("s3", "GetObject")),
    ("PUT", "/b/k", {"authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/"
                                      "aws4_request, SignedHeaders=host, Signature=0"},
     ("s3", "PutObject")),
    ("GET", "/b?list-type=2&prefix=t%2F", {"x-amz-content-sha256": "UNSIGNED-PAYLOAD"},
     ("s3", "ListObjectsV2")),
    ("POST", "/b?delete", {"x-amz-content-sha256": "x"}, ("s3", "DeleteObjects")),
    ("PUT", "/b/k?tagging", {"x-amz-content-sha256": "x"}, ("s3", "PutObjectTagging")),
    ("PUT", "/b/k", {"x-amz-content-sha256": "x", "x-amz-copy-source": "/b/j"},
     ("s3", "CopyObject")),
    ("HEAD", "/b", {"x-amz-content-sha256": "x"}, ("s3", "HeadBucket")),
])
def test_classify(method: str, target: str, headers: dict, expected: tuple) -> None:
    assert proxy_mod.classify(method, target, headers, b"") == expected


def test_classify_query_protocol() -> None:
    headers = {"authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/sts/"
                                "aws4_request, SignedHeaders=host, Signature=0",
               "content-type": "application/x-www-form-urlencoded; charset=utf-8"}
    body = b"Action=GetCallerIdentity&Version=2011-06-15"
    assert proxy_mod.classify("POST", "/", headers, body) == ("sts", "GetCallerIdentity")


def test_conflict_body_shape() -> None:
    body = json.dumps({"TransactItems": [{"Put": {}}, {"Update": {}}, {"Delete": {}},
                                         {"ConditionCheck": {}}]}).encode()
    fault = proxy_mod.build_fault("conflict", "dynamodb", "TransactWriteItems", "POST",
                                  {"x-amz-target": "DynamoDB_20120810.TransactWriteItems"},
                                  body, random.Random(1), "mixed")
    doc = json.loads(fault.body)
    assert fault.status == 400
    assert doc["__type"] == "com.amazonaws.dynamodb.v20120810#TransactionCanceledException"
    assert len(doc["CancellationReasons"]) == 4
    assert sorted(r["Code"] for r in doc["CancellationReasons"]) == [
        "None", "None", "None", "TransactionConflict"]
    headers = dict(fault.headers)
    assert headers["x-amzn-ErrorType"] == "TransactionCanceledException"
    assert int(headers["x-amz-crc32"]) == zlib.crc32(fault.body)
    assert "message" not in doc and doc["Message"].startswith("Transaction cancelled")


def test_cli_prints_listening_and_rejects_bad_rates(tmp_path: Path) -> None:
    with FaultProxy(seed=5, rates={"throttle": 0.5}, only="dynamodb:PutItem", serialize=False,
                    stderr_path=tmp_path / "proxy.log") as p:
        assert p.url.startswith("http://127.0.0.1:")
        cfg = p.stats()["config"]
        assert cfg == {"seed": 5, "rates": {"500": 0.0, "throttle": 0.5, "conflict": 0.0,
                                            "drop": 0.0},
                       "only": ["dynamodb:PutItem"], "serialize": False,
                       "dynamodbThrottle": "mixed", "tenantIam": False}
    with pytest.raises(RuntimeError, match="did not start"):
        FaultProxy(rates={"throttle": 0.8, "drop": 0.8}, stderr_path=tmp_path / "bad.log")
    assert "more than 1" in (tmp_path / "bad.log").read_text()


def test_fault_lines_on_stderr_carry_no_bodies(proxy: FaultProxy, tenant: str) -> None:
    marker = f"secret-content-{secrets.token_hex(4)}"
    proxy.config(rates={"throttle": 1.0}, only="dynamodb:PutItem")
    error_of(proxy.client("dynamodb").put_item, TableName=TABLE,
             Item=item(tenant, content=marker))
    log = proxy.stderr_path.read_text()
    lines = [line for line in log.splitlines() if "injected kind=throttle" in line]
    assert lines and "operation=PutItem" in lines[-1] and "service=dynamodb" in lines[-1]
    assert marker not in log and tenant not in log
