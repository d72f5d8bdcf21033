#!/usr/bin/env python3
"""A fault-injecting HTTP proxy in front of the local AWS emulator (see tests/fault/README.md).

    .venv/bin/python tests/fault/proxy.py --port 0 --upstream http://127.0.0.1:4566 \\
        [--seed N] [--rate-500 R] [--rate-throttle R] [--rate-conflict R] [--rate-drop R] \\
        [--only dynamodb:TransactWriteItems,s3:PutObject] [--serialize]

Point the function binaries (or boto3) at it with `AWS_ENDPOINT_URL=http://127.0.0.1:PORT`. It
forwards every request to `--upstream` as received (method, target, headers including `Host` and
the SigV4 `Authorization`, body bytes; only hop-by-hop headers are dropped and `Content-Length`
is set from the body, a chunked body is de-chunked) and the answer back the same way, except
that, per request, a seeded RNG may answer instead with a real-looking AWS error for the service
(`500`, `throttle`, `conflict`), or forward the request and then close the client connection
without an answer (`drop`: the write applies, the response is lost).

Decisions are reproducible: the n-th request that `--only` admits (n = the "draw" number,
counted from the start, from the last reset or from the last config change of the seed) draws
from `random.Random(f"{seed}/{n}")`; requests `--only` does not admit take no draw. The same
seed and the same order of admitted requests give the same faults.

Control API (answered by the proxy itself, never forwarded): `GET /__fault/stats`,
`GET|POST /__fault/config`, `POST /__fault/reset`, `GET /__fault/faults`,
`GET /__fault/credentials` (which credentials signed each data call: tenant_iam.py), and
`GET /__fault/usage` (DynamoDB units, S3 requests and bytes and events the upstream answered,
summed since the last reset; the meter's own calls apart: docs/metering.md).

Prints exactly one line, `listening http://127.0.0.1:PORT`, on stdout, then serves until
SIGTERM/SIGINT. One line per injected fault goes to stderr, and one per upstream failure or 5xx
answer (never bodies: they carry entry content). Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import signal
import socket
import sys
import threading
import time
import uuid
import zlib
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tenant_iam import TenantIam, credential_scope, denial

KINDS = ("500", "throttle", "conflict", "drop")
# Kinds answered by the proxy instead of the upstream (drop is forwarded first).
ANSWERED_KINDS = ("500", "throttle", "conflict")
DYNAMODB_THROTTLE_CODES = ("ThrottlingException", "ProvisionedThroughputExceededException")
DYNAMODB_THROTTLE_CHOICES = DYNAMODB_THROTTLE_CODES + ("mixed",)
# Operations a `conflict` applies to (they carry `TransactItems` and can be cancelled with
# `TransactionConflict`); anywhere else a conflict draw passes the request through.
CONFLICT_OPERATIONS = {("dynamodb", "TransactWriteItems"), ("dynamodb", "TransactGetItems")}
CONTROL_PREFIX = "/__fault"
HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
    "te", "trailer", "trailers", "transfer-encoding", "upgrade", "expect", "content-length",
}
TARGET_PREFIXES = {
    "DynamoDB_20120810": "dynamodb",
    "DynamoDBStreams_20120810": "dynamodbstreams",
    "AmazonSQS": "sqs",
    "AWSEvents": "events",
}
UPSTREAM_TIMEOUT = 120.0
MAX_FAULT_LOG = 10_000


def log(msg: str) -> None:
    print(f"fault-proxy: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Which service and operation a request is.

S3_SUBRESOURCES = {
    "acl": "Acl", "accelerate": "AccelerateConfiguration", "analytics": "AnalyticsConfiguration",
    "cors": "Cors", "encryption": "Encryption", "intelligent-tiering":
    "IntelligentTieringConfiguration", "inventory": "InventoryConfiguration", "lifecycle":
    "LifecycleConfiguration", "location": "Location", "logging": "Logging", "metrics":
    "MetricsConfiguration", "notification": "NotificationConfiguration", "object-lock":
    "ObjectLockConfiguration", "ownershipControls": "OwnershipControls", "policy": "Policy",
    "policyStatus": "PolicyStatus", "publicAccessBlock": "PublicAccessBlock", "replication":
    "Replication", "requestPayment": "RequestPayment", "tagging": "Tagging", "versioning":
    "Versioning", "website": "Website",
}


# Object operations a query parameter selects, per method, first match wins.
OBJECT_BY_QUERY = {
    "PUT": (("tagging", "PutObjectTagging"), ("acl", "PutObjectAcl")),
    "GET": (("uploadId", "ListParts"), ("tagging", "GetObjectTagging"), ("acl", "GetObjectAcl"),
            ("attributes", "GetObjectAttributes")),
    "DELETE": (("uploadId", "AbortMultipartUpload"), ("tagging", "DeleteObjectTagging")),
    "POST": (("uploads", "CreateMultipartUpload"), ("uploadId", "CompleteMultipartUpload"),
             ("restore", "RestoreObject")),
}
OBJECT_DEFAULT = {"GET": "GetObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}


def s3_operation(method: str, path: str, query: dict[str, str], headers: dict[str, str]) -> str:
    """The S3 operation of a path-style request (the Rust SDK also names it in `x-id`)."""
    if query.get("x-id"):
        return query["x-id"]
    bucket, _, key = path.lstrip("/").partition("/")
    sub = next((q for q in query if q in S3_SUBRESOURCES), None)
    if not bucket:
        return "ListBuckets" if method == "GET" else f"{method}Root"
    if not key:
        if method == "GET":
            if query.get("list-type") == "2":
                return "ListObjectsV2"
            if "versions" in query:
                return "ListObjectVersions"
            if "uploads" in query:
                return "ListMultipartUploads"
            return f"GetBucket{S3_SUBRESOURCES[sub]}" if sub else "ListObjects"
        if method == "PUT":
            return f"PutBucket{S3_SUBRESOURCES[sub]}" if sub else "CreateBucket"
        if method == "DELETE":
            return f"DeleteBucket{S3_SUBRESOURCES[sub]}" if sub else "DeleteBucket"
        if method == "HEAD":
            return "HeadBucket"
        if method == "POST" and "delete" in query:
            return "DeleteObjects"
        return f"{method}Bucket"
    copy = "x-amz-copy-source" in headers
    if method == "PUT" and "uploadId" in query:
        return "UploadPartCopy" if copy else "UploadPart"
    for marker, operation in OBJECT_BY_QUERY.get(method, ()):
        if marker in query:
            return operation
    if method == "PUT":
        return "CopyObject" if copy else "PutObject"
    return OBJECT_DEFAULT.get(method, f"{method}Object")


def scope_service(headers: dict[str, str], query: dict[str, str]) -> str | None:
    """The service of the SigV4 credential scope (`.../<date>/<region>/<service>/aws4_request`)."""
    parts = credential_scope(headers, query).split("/")
    return parts[3].lower() if len(parts) >= 5 else None


def classify(method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[str, str]:
    """(service, operation) of a request; `headers` has lower-cased names."""
    split = urlsplit(target)
    query = dict(parse_qsl(split.query, keep_blank_values=True))
    amz_target = headers.get("x-amz-target")
    if amz_target:
        prefix, _, op = amz_target.partition(".")
        return TARGET_PREFIXES.get(prefix, prefix.lower()), op or "unknown"
    service = scope_service(headers, query)
    if service == "s3" or (service is None and ("x-amz-content-sha256" in headers
                                                or "x-id" in query)):
        return "s3", s3_operation(method, split.path, query, headers)
    if "application/x-www-form-urlencoded" in headers.get("content-type", ""):
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if form.get("Action"):
            return service or "query", form["Action"]
    if query.get("Action"):
        return service or "query", query["Action"]
    return service or "unknown", "unknown"


def protocol_of(service: str, headers: dict[str, str]) -> str:
    """`json` (X-Amz-Target), `s3` (REST XML) or `query` (form-encoded XML answers)."""
    if "x-amz-target" in headers:
        return "json"
    if service == "s3":
        return "s3"
    return "query"


# ---------------------------------------------------------------------------------------------
# The error answers, one per service and kind.


@dataclass
class Fault:
    kind: str
    code: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def _json_error(status: int, type_: str, message: str, *, content_type: str,
                extra: dict[str, Any] | None = None, message_key: str = "message",
                query_error: str | None = None, crc32: bool = False) -> tuple[int, list, bytes]:
    doc: dict[str, Any] = {"__type": type_}
    if extra:
        doc.update(extra)
    doc[message_key] = message
    body = json.dumps(doc, separators=(",", ":")).encode()
    code = type_.rsplit("#", 1)[-1]
    headers = [("Content-Type", content_type), ("x-amzn-RequestId", str(uuid.uuid4())),
               ("x-amzn-ErrorType", code)]
    if query_error:
        headers.append(("x-amzn-query-error", query_error))
    if crc32:
        headers.append(("x-amz-crc32", str(zlib.crc32(body) & 0xFFFFFFFF)))
    return status, headers, body


def _s3_error(status: int, code: str, message: str, method: str) -> tuple[int, list, bytes]:
    request_id = uuid.uuid4().hex[:16].upper()
    host_id = uuid.uuid4().hex
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message><RequestId>{request_id}</RequestId>"
            f"<HostId>{host_id}</HostId></Error>").encode()
    headers = [("Content-Type", "application/xml"), ("x-amz-request-id", request_id),
               ("x-amz-id-2", host_id)]
    # A HEAD answer has no body (S3 sends none; clients fall back to the status code).
    return status, headers, b"" if method == "HEAD" else body


def _query_error(service: str, status: int, type_: str, code: str, message: str
                 ) -> tuple[int, list, bytes]:
    request_id = str(uuid.uuid4())
    xmlns = ' xmlns="https://sts.amazonaws.com/doc/2011-06-15/"' if service == "sts" else ""
    body = (f'<ErrorResponse{xmlns}><Error>'
            f"<Type>{type_}</Type><Code>{code}</Code><Message>{message}</Message></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>").encode()
    return status, [("Content-Type", "text/xml"), ("x-amzn-RequestId", request_id)], body


DDB_JSON = "application/x-amz-json-1.0"
DDB_NS = "com.amazonaws.dynamodb.v20120810#"
INTERNAL_MESSAGE = "We encountered an internal error. Please try again."


def build_fault(kind: str, service: str, operation: str, method: str, headers: dict[str, str],
                body: bytes, rng: random.Random, dynamodb_throttle: str) -> Fault:
    """The answer for an injected `500`, `throttle` or `conflict` (the draw has already checked
    that a conflict applies to the operation)."""
    proto = protocol_of(service, headers)
    if kind == "conflict":
        try:
            items = json.loads(body or b"{}").get("TransactItems") or []
            count = max(1, len(items))
        except (ValueError, AttributeError):
            count = 1
        conflicted = rng.randrange(count)
        reasons: list[dict[str, str]] = [
            {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
            if i == conflicted else {"Code": "None"} for i in range(count)]
        message = ("Transaction cancelled, please refer cancellation reasons for specific "
                   f"reasons [{', '.join(r['Code'] for r in reasons)}]")
        # DynamoDB capitalises `Message` on this one error; both SDKs read either spelling.
        status, hdrs, data = _json_error(
            400, DDB_NS + "TransactionCanceledException", message, content_type=DDB_JSON,
            extra={"CancellationReasons": reasons}, message_key="Message", crc32=True)
        return Fault(kind, "TransactionCanceledException", status, hdrs, data)
    if service == "dynamodb" and proto == "json":
        if kind == "500":
            status, hdrs, data = _json_error(500, DDB_NS + "InternalServerError",
                                             "Internal server error", content_type=DDB_JSON,
                                             crc32=True)
            return Fault(kind, "InternalServerError", status, hdrs, data)
        code = dynamodb_throttle
        if code == "mixed":
            code = DYNAMODB_THROTTLE_CODES[rng.randrange(2)]
        if code == "ThrottlingException":
            status, hdrs, data = _json_error(
                400, "com.amazon.coral.availability#ThrottlingException",
                "Rate of requests exceeds the allowed throughput.", content_type=DDB_JSON,
                crc32=True)
        else:
            status, hdrs, data = _json_error(
                400, DDB_NS + "ProvisionedThroughputExceededException",
                "The level of configured provisioned throughput for the table was exceeded. "
                "Consider increasing your provisioning level with the UpdateTable API.",
                content_type=DDB_JSON, crc32=True)
        return Fault(kind, code, status, hdrs, data)
    if proto == "s3":
        if kind == "500":
            return Fault(kind, "InternalError", *_s3_error(500, "InternalError",
                                                          INTERNAL_MESSAGE, method))
        return Fault(kind, "SlowDown", *_s3_error(503, "SlowDown",
                                                 "Please reduce your request rate.", method))
    if service == "sqs" and proto == "json":
        json_type = "application/x-amz-json-1.0"
        if kind == "500":
            return Fault(kind, "InternalError", *_json_error(
                500, "com.amazonaws.sqs#InternalError", INTERNAL_MESSAGE,
                content_type=json_type, query_error="InternalError;Receiver"))
        return Fault(kind, "RequestThrottled", *_json_error(
            400, "com.amazonaws.sqs#RequestThrottled", "Rate exceeded",
            content_type=json_type, query_error="RequestThrottled;Sender"))
    if proto == "json":  # EventBridge (JSON 1.1) and any other X-Amz-Target service
        json_type = "application/x-amz-json-1.1" if service == "events" else \
            headers.get("content-type", "application/x-amz-json-1.1")
        if kind == "500":
            return Fault(kind, "InternalFailure", *_json_error(
                500, "com.amazon.coral.service#InternalFailure", INTERNAL_MESSAGE,
                content_type=json_type))
        return Fault(kind, "ThrottlingException", *_json_error(
            400, "com.amazon.coral.availability#ThrottlingException", "Rate exceeded",
            content_type=json_type))
    if kind == "500":  # query protocol (STS, ...)
        return Fault(kind, "InternalFailure", *_query_error(
            service, 500, "Receiver", "InternalFailure", INTERNAL_MESSAGE))
    return Fault(kind, "Throttling", *_query_error(service, 400, "Sender", "Throttling",
                                                   "Rate exceeded"))


# ---------------------------------------------------------------------------------------------
# Configuration, draws and counters.


def parse_only(value: Any) -> list[str]:
    """`only` as a list of `service:Operation` / `service` / `service:*` rules ([] = all)."""
    if value is None or value == "":
        return []
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ValueError("only must be a comma-separated string or a list of strings")
    out = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        service, _, op = item.partition(":")
        service = service.lower()
        if service == "eventbridge":
            service = "events"
        out.append(f"{service}:{op}" if op and op != "*" else service)
    return out


def admitted(only: list[str], service: str, operation: str) -> bool:
    return not only or service in only or f"{service}:{operation}" in only


def check_rates(rates: dict[str, float]) -> None:
    for kind, rate in rates.items():
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r} (kinds: {', '.join(KINDS)})")
        if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not 0 <= rate <= 1:
            raise ValueError(f"rate of {kind!r} must be a number from 0 to 1")
    if sum(rates.values()) > 1 + 1e-9:
        raise ValueError("the rates add up to more than 1")


def decide(seed: int, draw: int, rates: dict[str, float], service: str,
           operation: str) -> tuple[str | None, random.Random]:
    """The fault kind (or None) of draw number `draw`, and the RNG for the fault's details.
    One uniform number per draw, split into consecutive intervals in KINDS order."""
    rng = random.Random(f"{seed}/{draw}")
    u = rng.random()
    edge = 0.0
    for kind in KINDS:
        edge += rates.get(kind, 0.0)
        if u < edge:
            if kind == "conflict" and (service, operation) not in CONFLICT_OPERATIONS:
                return None, rng
            return kind, rng
    return None, rng


def _zero() -> dict[str, int]:
    return {k: 0 for k in KINDS}


@dataclass
class Counters:
    requests: int = 0
    forwarded: int = 0
    failed: int = 0
    in_flight: int = 0
    upstream_5xx: int = 0
    injected: dict[str, int] = field(default_factory=_zero)

    def as_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "forwarded": self.forwarded, "failed": self.failed,
                "inFlight": self.in_flight, "injected": dict(self.injected),
                "upstream5xx": self.upstream_5xx}


DYNAMODB_READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
# The meter's own items (docs/metering.md): its writes and reads are not in the usage it records.
USAGE_MARKERS = (b"#@usage", b"@usage#")


def _units(capacity: Any, read_op: bool) -> tuple[float, float]:
    """(read, write) units of one ConsumedCapacity answer (an object or a list of them)."""
    read = write = 0.0
    for c in capacity if isinstance(capacity, list) else [capacity]:
        if not isinstance(c, dict):
            continue
        if "ReadCapacityUnits" in c or "WriteCapacityUnits" in c:
            read += float(c.get("ReadCapacityUnits", 0))
            write += float(c.get("WriteCapacityUnits", 0))
        elif read_op:
            read += float(c.get("CapacityUnits", 0))
        else:
            write += float(c.get("CapacityUnits", 0))
    return read, write


def _value_size(v: Any) -> int:
    """DynamoDB's size of one attribute value (item size rules; numbers approximated)."""
    if not isinstance(v, dict) or len(v) != 1:
        return 0
    (kind, x), = v.items()
    if kind == "S":
        return len(str(x).encode())
    if kind == "N":
        digits = str(x).lstrip("-").replace(".", "").lstrip("0")
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(str(x)) * 3 // 4
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + _value_size(e) for e in x)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(e) for k, e in x.items())
    if kind in ("SS", "NS", "BS"):
        return sum(_value_size({kind[0]: e}) for e in x)
    return 0


def _item_size(item: Any) -> int:
    if not isinstance(item, dict):
        return 0
    return sum(len(k.encode()) + _value_size(v) for k, v in item.items())


def _kb_units(size: int) -> int:
    return max(1, -(-size // 1024))


def billed_write_units(operation: str, request: Any) -> float:
    """What DynamoDB on-demand bills for a write request, from the sizes of the items it sends:
    1 unit per KB, 2 in a transaction. An update is sized by its key and values (the stored
    item's size is not in the request), so this is an estimate."""
    if not isinstance(request, dict):
        return 0.0

    def update_size(u: dict[str, Any]) -> int:
        return _item_size(u.get("Key")) + _item_size(u.get("ExpressionAttributeValues"))

    if operation == "PutItem":
        return _kb_units(_item_size(request.get("Item")))
    if operation in ("UpdateItem", "DeleteItem"):
        return _kb_units(update_size(request))
    if operation == "BatchWriteItem":
        total = 0
        for writes in (request.get("RequestItems") or {}).values():
            for w in writes:
                put = (w.get("PutRequest") or {}).get("Item")
                total += _kb_units(_item_size(put)) if put else 1
        return float(total)
    if operation == "TransactWriteItems":
        total = 0
        for t in request.get("TransactItems") or []:
            if "Put" in t:
                total += 2 * _kb_units(_item_size(t["Put"].get("Item")))
            elif "Update" in t:
                total += 2 * _kb_units(update_size(t["Update"]))
            else:
                total += 2
        return float(total)
    return 0.0


def usage_of(service: str, operation: str, headers: dict[str, str], body: bytes, status: int,
             data: bytes) -> dict[str, float]:
    """What one forwarded request consumed, as the emulator answered it: the independent side of
    the metering checks (tests/tests/metering.rs). The meter's own calls (docs/metering.md) are
    summed apart, under `meter...` names."""
    if service == "dynamodb":
        meter = any(m in body for m in USAGE_MARKERS)
        try:
            request = json.loads(body or b"{}")
            answer = json.loads(data or b"{}")
        except ValueError:
            return {}
        out: dict[str, float] = {}
        if status == 200 and operation not in DYNAMODB_READS:
            out["billedWriteUnits"] = billed_write_units(operation, request)
            out["writes"] = 1
        if status == 200 and operation in DYNAMODB_READS:
            out["reads"] = 1
        if isinstance(answer, dict) and "ConsumedCapacity" in answer:
            read, write = _units(answer["ConsumedCapacity"], operation in DYNAMODB_READS)
            out["readUnits"], out["writeUnits"] = read, write
        if meter:
            return {"meter" + k[0].upper() + k[1:]: v for k, v in out.items()}
        return out
    if service == "s3" and status < 500:
        sent = 0
        if operation in ("PutObject", "UploadPart"):
            decoded = headers.get("x-amz-decoded-content-length")
            sent = int(decoded) if decoded and decoded.isdigit() else len(body)
        got = len(data) if operation == "GetObject" and status in (200, 206) else 0
        return {"s3Requests": 1, "s3BytesIn": sent, "s3BytesOut": got}
    if service == "events" and operation == "PutEvents" and status == 200:
        try:
            sent_doc, answer = json.loads(body or b"{}"), json.loads(data or b"{}")
        except ValueError:
            return {}
        return {"events": len(sent_doc.get("Entries", [])) - int(answer.get("FailedEntryCount", 0))}
    return {}


class State:
    """Configuration and counters, behind one lock."""

    def __init__(self, *, seed: int, rates: dict[str, float], only: list[str], serialize: bool,
                 dynamodb_throttle: str, tenant_iam: bool = False) -> None:
        check_rates(rates)
        # Which credentials signed each DynamoDB / S3 call, and TenantAccessRole's policy
        # enforced on vended ones when on (tenant_iam.py).
        self.iam = TenantIam(enforce=tenant_iam)
        self.lock = threading.Lock()
        self.upstream_lock = threading.Lock()
        self.seed = seed
        self.rates = {k: float(rates.get(k, 0.0)) for k in KINDS}
        self.only = only
        self.serialize = serialize
        self.dynamodb_throttle = dynamodb_throttle
        # Holds each DynamoDB read's answer this long (outside the serialising lock), so two
        # clients that start a read-modify-write together both read before either writes: a
        # race test then races every time, however idle the machine.
        self.read_delay_s = 0.0
        self.generation = 0
        self._reset_counters()

    def _reset_counters(self) -> None:
        self.seq = 0
        self.draw = 0
        self.total = Counters()
        self.by_op: dict[str, Counters] = {}
        self.faults: deque[dict[str, Any]] = deque(maxlen=MAX_FAULT_LOG)
        self.usage: dict[str, float] = {}

    def tally(self, gen: int, usage: dict[str, float]) -> None:
        with self.lock:
            if gen != self.generation or not usage:
                return
            for k, v in usage.items():
                self.usage[k] = self.usage.get(k, 0) + v

    def reset(self) -> None:
        """Zeroes the counters, the fault log and the sequence (the config stays). Requests
        still in flight when it happens are not counted afterwards."""
        with self.lock:
            self.generation += 1
            self._reset_counters()
        self.iam.reset()

    def config_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "rates": dict(self.rates), "only": list(self.only),
                "serialize": self.serialize, "dynamodbThrottle": self.dynamodb_throttle,
                "tenantIam": self.iam.enforce}

    def configure(self, doc: Any) -> dict[str, Any]:
        if not isinstance(doc, dict):
            raise ValueError("the config must be a JSON object")
        unknown = set(doc) - {"rates", "only", "seed", "serialize", "dynamodbThrottle",
                              "tenantIam"}
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}")
        with self.lock:
            rates = dict(self.rates)
            if "rates" in doc:
                if not isinstance(doc["rates"], dict):
                    raise ValueError("rates must be an object {kind: rate}")
                rates.update(doc["rates"])
                check_rates(rates)
            only = parse_only(doc["only"]) if "only" in doc else self.only
            if "seed" in doc and (not isinstance(doc["seed"], int) or isinstance(doc["seed"],
                                                                                   bool)):
                raise ValueError("seed must be an integer")
            if "serialize" in doc and not isinstance(doc["serialize"], bool):
                raise ValueError("serialize must be true or false")
            if "tenantIam" in doc and not isinstance(doc["tenantIam"], bool):
                raise ValueError("tenantIam must be true or false")
            self.iam.enforce = doc.get("tenantIam", self.iam.enforce)
            throttle = doc.get("dynamodbThrottle", self.dynamodb_throttle)
            if throttle not in DYNAMODB_THROTTLE_CHOICES:
                raise ValueError(f"dynamodbThrottle must be one of {DYNAMODB_THROTTLE_CHOICES}")
            self.rates = {k: float(v) for k, v in rates.items()}
            self.only = only
            self.dynamodb_throttle = throttle
            self.serialize = doc.get("serialize", self.serialize)
            if "seed" in doc:
                # A seed restarts the fault sequence: draw 1 comes next.
                self.seed = doc["seed"]
                self.draw = 0
            return self.config_json()

    def begin(self, service: str, operation: str) -> tuple[int, int, int | None, str | None,
                                                          random.Random | None, str]:
        """Counts a request and draws for it:
        (generation, seq, draw, kind, rng, dynamodb_throttle)."""
        with self.lock:
            gen = self.generation
            self.seq += 1
            seq = self.seq
            op = self.by_op.setdefault(f"{service}:{operation}", Counters())
            for c in (self.total, op):
                c.requests += 1
                c.in_flight += 1
            if not admitted(self.only, service, operation):
                return gen, seq, None, None, None, self.dynamodb_throttle
            self.draw += 1
            kind, rng = decide(self.seed, self.draw, self.rates, service, operation)
            return gen, seq, self.draw, kind, rng, self.dynamodb_throttle

    def end(self, gen: int, service: str, operation: str, outcome: str,
            fault: dict[str, Any] | None, status: int = 0) -> None:
        """outcome: `forwarded`, `failed`, or a fault kind (`drop` = forwarded and dropped);
        status: the upstream's answer, when forwarded."""
        with self.lock:
            if gen != self.generation:
                return  # began before a reset
            op = self.by_op.setdefault(f"{service}:{operation}", Counters())
            for c in (self.total, op):
                c.in_flight -= 1
                if outcome in ("forwarded", "drop"):
                    c.forwarded += 1
                elif outcome == "failed":
                    c.failed += 1
                if outcome in KINDS:
                    c.injected[outcome] += 1
                if status >= 500:
                    c.upstream_5xx += 1
            if fault is not None:
                self.faults.append(fault)

    def stats_json(self) -> dict[str, Any]:
        with self.lock:
            out = self.total.as_json()
            out["byOperation"] = {k: v.as_json() for k, v in sorted(self.by_op.items())}
            out["draws"] = self.draw
            out["config"] = self.config_json()
            return out

    def faults_json(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.faults)


# ---------------------------------------------------------------------------------------------
# The HTTP side.


class ChunkedError(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fault-proxy"
    # Idle keep-alive connections are closed after this many seconds.
    timeout = 300

    state: State  # set on the subclass made by make_server
    upstream: tuple[str, int]
    rewrite_host: bool

    def setup(self) -> None:
        super().setup()
        # Small answers go out at once (no Nagle / delayed-ACK stall of ~40 ms per request).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # no access log: one line per injected fault only

    # Every method goes through `_proxy`.
    def do_GET(self) -> None:  # noqa: N802
        self._proxy()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = do_GET

    # -- request ---------------------------------------------------------------------------

    def _read_body(self) -> bytes | None:
        """The request body (None: the request had no body framing at all)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = bytearray()
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ChunkedError("connection closed inside a chunked body")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(out)
                chunk = self.rfile.read(size)
                if len(chunk) != size:
                    raise ChunkedError("connection closed inside a chunk")
                out += chunk
                self.rfile.readline(65537)
        length = self.headers.get("Content-Length")
        if length is None:
            return None
        return self.rfile.read(int(length))

    def _proxy(self) -> None:
        if self.path.startswith(CONTROL_PREFIX):
            self._control()
            return
        try:
            body = self._read_body()
        except (ChunkedError, ValueError) as err:
            self._send_plain(400, f"fault proxy: bad request body: {err}")
            self.close_connection = True
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        service, operation = classify(self.command, self.path, headers, body or b"")
        state = self.state
        gen, seq, draw, kind, rng, ddb_throttle = state.begin(service, operation)
        ended = False

        def finish(outcome: str, record: dict[str, Any] | None = None, status: int = 0
                   ) -> None:
            # Counted before the client hears anything, so a stats call made after a response
            # arrived always sees that request.
            nonlocal ended
            ended = True
            state.end(gen, service, operation, outcome, record, status)

        try:
            if service in ("dynamodb", "s3") and not state.iam.check(
                    seq, service, operation, self.command, self.path, headers, body or b""):
                # What IAM answers a tenant's credentials outside the tenant (tenant_iam.py).
                finish("denied")
                self._send(*denial(service, self.command))
                return
            if kind in ANSWERED_KINDS:
                assert rng is not None
                fault = build_fault(kind, service, operation, self.command, headers,
                                    body or b"", rng, ddb_throttle)
                finish(kind, self._note(seq, draw, service, operation, kind, fault.code))
                self._send(fault.status, fault.headers, fault.body)
                return
            try:
                status, reason, resp_headers, data = self._forward(body)
            except (OSError, http.client.HTTPException) as err:
                log(f"upstream error seq={seq} service={service} operation={operation}: "
                    f"{type(err).__name__}: {err}")
                finish("failed")
                self._send_plain(502, f"fault proxy: upstream error: {type(err).__name__}")
                return
            if kind == "drop":
                # The upstream applied the request; the client never hears about it.
                finish("drop", self._note(seq, draw, service, operation, kind, "-"), status)
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if (service, operation) == ("sts", "AssumeRole"):
                state.iam.note_assume(seq, body or b"", status, data)
            if state.iam.hides_absent(service, operation, self.path, headers, status):
                finish("denied")
                self._send(*denial(service, self.command))
                return
            finish("forwarded", None, status)
            state.tally(gen, usage_of(service, operation, headers, body or b"", status, data))
            if state.read_delay_s and (service, operation) in DELAYED_READS:
                time.sleep(state.read_delay_s)
            if status >= 500:
                log(f"upstream answered {status} seq={seq} service={service} "
                    f"operation={operation}")
            self._send(status, resp_headers, data, reason=reason)
        finally:
            if not ended:
                finish("failed")

    def _note(self, seq: int, draw: int | None, service: str, operation: str, kind: str,
              code: str) -> dict[str, Any]:
        log(f"injected kind={kind} service={service} operation={operation} seq={seq} "
            f"draw={draw} code={code}")
        return {"seq": seq, "draw": draw, "service": service, "operation": operation,
                "kind": kind, "code": code}

    def _forward(self, body: bytes | None) -> tuple[int, str, list[tuple[str, str]], bytes]:
        if self.state.serialize:
            with self.state.upstream_lock:
                return self._forward_once(body)
        return self._forward_once(body)

    def _forward_once(self, body: bytes | None
                      ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        host, port = self.upstream
        # One upstream connection per request: nothing is ever sent twice upstream.
        conn = http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT)
        try:
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                lower = name.lower()
                if lower in HOP_BY_HOP:
                    continue
                if lower == "host" and self.rewrite_host:
                    value = f"{host}:{port}"
                conn.putheader(name, value)
            if body is not None:
                conn.putheader("Content-Length", str(len(body)))
            conn.putheader("Connection", "close")
            conn.endheaders(body if body else None)
            resp = conn.getresponse()
            data = resp.read()
            out_headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
            length = resp.getheader("Content-Length")
            no_body = self.command == "HEAD" or resp.status in (204, 304) or resp.status < 200
            if no_body:
                if length is not None:
                    out_headers.append(("Content-Length", length))
            else:
                out_headers.append(("Content-Length", str(len(data))))
            return resp.status, resp.reason, out_headers, data
        finally:
            conn.close()

    # -- responses -------------------------------------------------------------------------

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes, *,
              reason: str | None = None) -> None:
        self.send_response_only(status, reason)
        has_length = any(k.lower() == "content-length" for k, _ in headers)
        for name, value in headers:
            self.send_header(name, value)
        if not has_length:
            self.send_header("Content-Length", str(len(body)))
        # end_headers() without its flush: status line, headers and body in one write.
        self._headers_buffer.append(b"\r\n")
        head = b"".join(self._headers_buffer)
        self._headers_buffer = []
        self.wfile.write(head + body if self.command != "HEAD" else head)
        self.wfile.flush()

    def _send_plain(self, status: int, text: str) -> None:
        self._send(status, [("Content-Type", "text/plain; charset=utf-8")], text.encode())

    def _send_json(self, status: int, doc: Any) -> None:
        self._send(status, [("Content-Type", "application/json")],
                   json.dumps(doc, separators=(",", ":")).encode())

    # -- control API -----------------------------------------------------------------------

    def _control(self) -> None:
        try:
            body = self._read_body() or b""
        except (ChunkedError, ValueError):
            body = b""
        path = urlsplit(self.path).path.rstrip("/")
        method = self.command
        state = self.state
        if path == f"{CONTROL_PREFIX}/stats" and method == "GET":
            self._send_json(200, state.stats_json())
        elif path == f"{CONTROL_PREFIX}/faults" and method == "GET":
            self._send_json(200, state.faults_json())
        elif path == f"{CONTROL_PREFIX}/config" and method == "GET":
            with state.lock:
                self._send_json(200, state.config_json())
        elif path == f"{CONTROL_PREFIX}/config" and method == "POST":
            try:
                doc = json.loads(body or b"{}")
                self._send_json(200, state.configure(doc))
            except ValueError as err:
                self._send_json(400, {"error": str(err)})
        elif path == f"{CONTROL_PREFIX}/usage" and method == "GET":
            with state.lock:
                self._send_json(200, dict(state.usage))
        elif path == f"{CONTROL_PREFIX}/credentials" and method == "GET":
            self._send_json(200, state.iam.as_json())
        elif path == f"{CONTROL_PREFIX}/reset" and method == "POST":
            state.reset()
            self._send_json(200, state.stats_json())
        else:
            self._send_json(404, {"error": f"no control endpoint {method} {path}"})


def make_server(*, host: str, port: int, upstream: str, state: State,
                rewrite_host: bool = False) -> ThreadingHTTPServer:
    split = urlsplit(upstream)
    if split.scheme != "http" or not split.hostname:
        raise ValueError(f"--upstream must be an http:// URL, got {upstream!r}")
    upstream_addr = (split.hostname, split.port or 80)
    handler = type("BoundHandler", (Handler,), {"state": state, "upstream": upstream_addr,
                                                "rewrite_host": rewrite_host})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    server.block_on_close = False
    return server


DELAYED_READS = {("dynamodb", "GetItem"), ("dynamodb", "BatchGetItem"), ("dynamodb", "Query")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="proxy.py", description="Fault-injecting proxy in front of a local AWS emulator.")
    parser.add_argument("--port", type=int, default=0, help="listen port (0: ephemeral)")
    parser.add_argument("--host", default="127.0.0.1", help="listen address")
    parser.add_argument("--upstream", default="http://127.0.0.1:4566", help="emulator URL")
    parser.add_argument("--seed", type=int, default=0)
    for kind in KINDS:
        parser.add_argument(f"--rate-{kind}", type=float, default=0.0, metavar="R",
                            help=f"probability of a {kind} fault per admitted request")
    parser.add_argument("--only", default="",
                        help="comma-separated service:Operation (or service) rules")
    parser.add_argument("--serialize", action="store_true",
                        help="send one request at a time upstream (moto's transactions are "
                             "not thread-safe)")
    parser.add_argument("--dynamodb-throttle", choices=DYNAMODB_THROTTLE_CHOICES,
                        default="mixed", help="the DynamoDB throttle error (mixed: seeded)")
    parser.add_argument("--tenant-iam", action="store_true",
                        help="enforce TenantAccessRole's policy on vended credentials "
                             "(tenant_iam.py)")
    parser.add_argument("--read-delay-ms", type=int, default=0,
                        help="hold every DynamoDB GetItem / BatchGetItem / Query answer this "
                             "long (race tests)")
    parser.add_argument("--rewrite-host", action="store_true",
                        help="send the upstream's host:port as Host (default: as received)")
    args = parser.parse_args(argv)
    rates = {kind: getattr(args, f"rate_{kind}") for kind in KINDS}
    try:
        state = State(seed=args.seed, rates=rates, only=parse_only(args.only),
                      serialize=args.serialize, dynamodb_throttle=args.dynamodb_throttle,
                      tenant_iam=args.tenant_iam)
        state.read_delay_s = max(args.read_delay_ms, 0) / 1000
        server = make_server(host=args.host, port=args.port, upstream=args.upstream,
                             state=state, rewrite_host=args.rewrite_host)
    except (ValueError, OSError) as err:
        log(str(err))
        return 2

    def stop(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    port = server.server_address[1]
    print(f"listening http://{args.host}:{port}", flush=True)
    log(f"upstream {args.upstream}, seed {args.seed}, rates {state.rates}, only "
        f"{state.only or 'all'}, serialize {state.serialize}")
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
