"""Helpers of the Python end-to-end suite: the local gateway process, the official OpenWOP client
bound to a tenant's token, direct invokes through boto3's real `lambda` client, an EventBridge
tap per tenant, and the registry of strings that must never appear in responses, events or logs.

Every assertion about the wire is made with the official client's own functions and types
(`openwop_client`), never with copies of them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets as _secrets
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote, urlencode

import boto3
from botocore.config import Config
from openwop_client import ErrorEnvelope, OpenwopClient, RunEventDoc, WopError, is_http_error_code
from openwop_client.client import _event_from_dict

ROOT = Path(__file__).resolve().parents[2]
BASE = "/v1/host/wop-memory"
REQUIRED_ENV = ("AWS_ENDPOINT_URL", "MEMORY_TABLE", "ARCHIVE_BUCKET", "EVENT_BUS_NAME")
REGION = "us-east-1"

# ---------------------------------------------------------------------------------------------
# The registry of sensitive strings: entry content, subjects and secret values the suite used.
# No response body, event or function log line may contain any of them (checked per response
# and once more, over the gateway's captured function logs, at the end of the session).

SENSITIVE: set[str] = set()


def sensitive(text: str) -> str:
    """Registers `text` (content, subject or secret value) and returns it."""
    SENSITIVE.add(text)
    return text


def leaks(text: str) -> list[str]:
    """The registered strings found in `text`."""
    return sorted(s for s in SENSITIVE if s and s in text)


def new_id() -> str:
    """A lower-case, ULID-like id: millisecond time then randomness, so ids sort by creation."""
    return f"{int(time.time() * 1000):011x}{_secrets.token_hex(6)}"


def new_tenant() -> str:
    return f"py-{new_id()}"


def memory_ref(tenant: str, agent: str) -> str:
    return f"workspaces/{tenant}/agents/{agent}/memories"


def secret_value(label: str) -> str:
    """A fresh secret-looking value, registered as sensitive."""
    return sensitive(f"sk-live-{label}-{new_id()}")


def rfc3339_in(seconds: float) -> str:
    """RFC 3339 UTC with milliseconds, `seconds` from now."""
    at = datetime.now(timezone.utc) + timedelta(seconds=seconds)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def mint_jwt(claims: Any) -> str:
    """An unsigned-in-effect JWT: the local gateway's authorizer stand-in decodes the claims and
    passes them on (on AWS the JWT authorizer verifies the signature first)."""
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    return f"{header}.{payload}.{b64url(b'dummy-signature')}"


def query(params: dict[str, Any] | list[tuple[str, Any]]) -> str:
    """A query string with every reserved character percent-encoded (`/` too)."""
    return urlencode(params, quote_via=quote, safe="")

def search(api: "Api", ref: str, q: str, *extra: tuple[str, Any]) -> list[dict[str, Any]]:
    """GET .../search with the official client; the body must be exactly `{"results": [...]}`,
    plus, for a semantic or hybrid search of the caller's own ref, the host extension
    `x-wop-memory-unembedded` (docs/search.md "Semantic search")."""
    body = api.request("GET", f"{BASE}/search?{query([('memoryRef', ref), ('q', q), *extra])}")
    semantic = any(k == "mode" and v in ("semantic", "hybrid") for k, v in extra)
    extension = {"x-wop-memory-unembedded"} if semantic else set()
    assert set(body) - extension == {"results"}, body
    if "x-wop-memory-unembedded" in body:
        assert isinstance(body["x-wop-memory-unembedded"], int) \
            and body["x-wop-memory-unembedded"] >= 0, body
    return body["results"]


def ids(results: list[dict[str, Any]]) -> list[str]:
    """The entry ids of search results, in rank order."""
    return [r["entry"]["id"] for r in results]



# ---------------------------------------------------------------------------------------------
# The gateway process.

ACCESS_LINE = re.compile(r"^local_gateway: access (\S+) (\S+) (\d{3})$")


@dataclass
class Gateway:
    """`target/debug/local_gateway`, started by the session fixture."""

    process: subprocess.Popen
    base_url: str
    stderr_path: Path
    logs_path: Path
    logs: str | None = None

    def stop(self) -> str:
        """Stops the gateway (end of stdin, then SIGTERM, then SIGKILL) and returns the function
        logs it wrote on the way out. Idempotent."""
        if self.logs is None:
            stop_process(self.process, stdin_grace=20)
            self.logs = file_text(self.logs_path)
        return self.logs

    def access_log(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request the gateway answered."""
        return access_log(self.stderr_path)

    def stderr_tail(self, lines: int = 40) -> str:
        try:
            text = self.stderr_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def access_log(stderr_path: Path) -> list[tuple[str, str, int]]:
    """(method, path, status) of every request answered by the gateway whose stderr is
    `stderr_path`."""
    out = []
    for line in file_text(stderr_path).splitlines():
        m = ACCESS_LINE.match(line)
        if m:
            out.append((m.group(1), m.group(2), int(m.group(3))))
    return out


# ---------------------------------------------------------------------------------------------
# The read API through the official client.


class Api:
    """The official `OpenwopClient` with a token for `claims` (default: `{"tenant_id": tenant}`).
    Requests go through the client's own `_request_json`, which sends `Authorization: Bearer
    <api_key>` and raises `WopError` with the envelope its `_parse_envelope` parsed."""

    def __init__(self, base_url: str, tenant: str | None = None, claims: Any = None) -> None:
        self.base_url = base_url
        self.tenant = tenant
        if claims is None:
            claims = {"tenant_id": tenant, "sub": "user-py"}
        self.token = mint_jwt(claims)
        self.client = OpenwopClient(base_url, api_key=self.token, timeout=60)

    def request(self, method: str, path: str, *, body: Any = None,
                authenticated: bool = True) -> dict[str, Any]:
        return self.client._request_json(method, path, body=body, authenticated=authenticated)

    def list(self, ref: str, **params: Any) -> dict[str, Any]:
        return self.request("GET", f"{BASE}/entries?{query({'memoryRef': ref, **params})}")

    def list_all(self, ref: str, **params: Any) -> list[dict[str, Any]]:
        """Every entry, following nextCursor."""
        out: list[dict[str, Any]] = []
        cursor = None
        for _ in range(100):
            page = self.list(ref, **params, **({"cursor": cursor} if cursor else {}))
            out.extend(page["entries"])
            cursor = page["nextCursor"]
            if cursor is None:
                return out
        raise AssertionError("more than 100 pages")

    def get(self, ref: str, entry_id: str) -> dict[str, Any]:
        return self.request("GET", f"{BASE}/entries/{quote(entry_id, safe='')}?"
                                   f"{query({'memoryRef': ref})}")

    def capabilities(self, authenticated: bool = False) -> dict[str, Any]:
        return self.request("GET", f"{BASE}/capabilities", authenticated=authenticated)

    def forget(self, subject: str) -> dict[str, Any]:
        return self.request("POST", f"{BASE}/forget", body={"subject": subject})

    def error(self, method: str, path: str, *, status: int, code: str | None,
              body: Any = None, authenticated: bool = True) -> WopError:
        """Issues the request, which must fail with `status`; when `code` is given, the client
        must have parsed the body into an `ErrorEnvelope` whose `error` is `code` and a known
        HTTP error code. No registered sensitive string may appear in the body."""
        try:
            got = self.request(method, path, body=body, authenticated=authenticated)
        except WopError as err:
            assert err.status == status, (
                f"{method} {path}: status {err.status}, expected {status}; body {err.raw_text!r}")
            assert not leaks(err.raw_text), f"error body leaks {leaks(err.raw_text)}"
            if code is not None:
                assert isinstance(err.envelope, ErrorEnvelope), (
                    f"{method} {path}: the client could not parse the error body "
                    f"{err.raw_text!r} into an ErrorEnvelope")
                assert is_http_error_code(err.envelope.error), (
                    f"{err.envelope.error!r} is not one of the client's HTTP_ERROR_CODES")
                assert err.envelope.error == code, (
                    f"{method} {path}: code {err.envelope.error!r}, expected {code!r}; "
                    f"body {err.raw_text!r}")
                assert err.envelope.message, "the envelope's message is empty"
            return err
        raise AssertionError(f"{method} {path} succeeded, expected {status}: {got!r}")


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def raw_request(base_url: str, method: str, path: str, *, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> RawResponse:
    """A plain urllib request, for what the client does not expose (response headers, bodies
    that are not JSON)."""
    req = urllib.request.Request(base_url + path, data=body, method=method,
                                 headers=headers or {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=60) as resp:
            return RawResponse(resp.status, {k.lower(): v for k, v in resp.headers.items()},
                               resp.read())
    except urllib.error.HTTPError as err:
        return RawResponse(err.code, {k.lower(): v for k, v in err.headers.items()},
                           err.read())


# ---------------------------------------------------------------------------------------------
# Direct invokes through boto3's real Lambda client.


@dataclass
class Invocation:
    function_error: str | None
    payload: Any
    raw: bytes


class Invoker:
    """boto3's `lambda` client pointed at the gateway's Invoke API."""

    def __init__(self, base_url: str) -> None:
        self.client = boto3.session.Session().client(
            "lambda",
            endpoint_url=base_url,
            region_name=REGION,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(retries={"max_attempts": 1, "mode": "standard"},
                          read_timeout=180, connect_timeout=10),
        )

    def invoke(self, function: str, payload: Any) -> Invocation:
        data = payload if isinstance(payload, (bytes, bytearray)) else json.dumps(payload).encode()
        out = self.client.invoke(FunctionName=function, Payload=bytes(data))
        raw = out["Payload"].read()
        assert out["StatusCode"] == 200, out
        try:
            decoded = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            decoded = None
        return Invocation(out.get("FunctionError"), decoded, raw)

    def ok(self, function: str, payload: Any) -> Any:
        got = self.invoke(function, payload)
        assert got.function_error is None, f"{function} failed: {got.raw!r}"
        return got.payload

    def issue_api_key(self, tenant: str, agents: list[str], **extra: Any) -> dict[str, Any]:
        """memory-intent's `issueApiKey` (the operator's direct invoke): a fresh OpenIntent API
        key, registered as sensitive, with the rest of the answer (`keyId`, `expiresAt`, ...)."""
        out = self.ok("memory-intent", {"op": "issueApiKey", "tenantId": tenant, "agents": agents,
                                        **extra})
        sensitive(out["apiKey"])
        return out

    def fail(self, function: str, payload: Any) -> dict[str, Any]:
        got = self.invoke(function, payload)
        assert got.function_error, f"{function} succeeded, expected a function error: {got.raw!r}"
        assert isinstance(got.payload, dict), got.raw
        return got.payload

    def put(self, tenant: str, ref: str, entries: list[dict[str, Any]], *,
            secrets: list[dict[str, str]] | None = None, run_id: str | None = "run-py",
            attribution: dict[str, str] | None = None) -> list[str]:
        """A put through memory-write; returns the written ids, in entry order."""
        payload: dict[str, Any] = {"op": "put", "tenantId": tenant, "memoryRef": ref,
                                   "entries": entries, "secrets": secrets or []}
        if run_id is not None:
            payload["runId"] = run_id
        if attribution is not None:
            payload["attribution"] = attribution
        out = self.ok("memory-write", payload)
        ids = [w["id"] for w in out["written"]]
        assert len(ids) == len(entries), out
        return ids


# ---------------------------------------------------------------------------------------------
# EventBridge -> SQS tap for one tenant.


def aws_client(service: str):
    return boto3.session.Session().client(
        service,
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        region_name=os.environ.get("AWS_REGION") or REGION,
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID") or "test",
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY") or "test",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
    )


def run_event(event: dict[str, Any]) -> RunEventDoc:
    """An EventBridge event as the client's own `RunEventDoc`, built by the client's own
    `_event_from_dict`."""
    detail = event.get("detail") or {}
    return _event_from_dict({
        "eventId": detail.get("eventId"),
        "runId": detail.get("runId") or "",
        "type": event["detail-type"],
        "payload": detail,
        "timestamp": event["time"],
        "sequence": 0,
    })


@dataclass
class EventTap:
    """A private SQS queue and a rule on the bus delivering only this tenant's wop-memory
    events (as `EventTap` in shared/aws-test-support does for the Rust tests)."""

    tenant: str
    bus: str = field(default_factory=lambda: os.environ["EVENT_BUS_NAME"])
    received: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sqs, self.events = aws_client("sqs"), aws_client("events")
        self.name = f"tap-{self.tenant}"[:80]
        self.queue_url = self.sqs.create_queue(QueueName=self.name)["QueueUrl"]
        arn = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        pattern = {"source": ["wop-memory"], "detail": {"tenantId": [self.tenant]}}
        self.events.put_rule(Name=self.name, EventBusName=self.bus,
                             EventPattern=json.dumps(pattern), State="ENABLED")
        out = self.events.put_targets(Rule=self.name, EventBusName=self.bus,
                                      Targets=[{"Id": "tap", "Arn": arn}])
        assert not out.get("FailedEntryCount"), out

    def _receive(self) -> None:
        out = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10,
                                       WaitTimeSeconds=1)
        for m in out.get("Messages", []):
            try:
                self.received.append(json.loads(m["Body"]))
            except json.JSONDecodeError:
                self.received.append({"unparsable": m["Body"]})
            self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])

    def wait(self, match: Callable[[dict[str, Any]], bool], count: int, *,
             timeout: float = 20.0, settle: float = 1.5) -> list[dict[str, Any]]:
        """Polls until `count` received events match (or `timeout`), then keeps polling for
        `settle` seconds to catch extra (duplicate) ones; returns every matching event."""
        deadline = time.monotonic() + timeout
        while sum(1 for e in self.received if match(e)) < count and time.monotonic() < deadline:
            self._receive()
        end = time.monotonic() + settle
        while time.monotonic() < end:
            self._receive()
        return [e for e in self.received if match(e)]

    def close(self) -> None:
        for call in (
            lambda: self.events.remove_targets(Rule=self.name, EventBusName=self.bus,
                                               Ids=["tap"]),
            lambda: self.events.delete_rule(Name=self.name, EventBusName=self.bus),
            lambda: self.sqs.delete_queue(QueueUrl=self.queue_url),
        ):
            try:
                call()
            except Exception:  # noqa: BLE001 - best-effort cleanup
                pass


def of_type(kind: str, ref: str | None = None) -> Callable[[dict[str, Any]], bool]:
    """Matches events of `kind` (detail-type), for `ref` when given."""
    def match(e: dict[str, Any]) -> bool:
        return e.get("detail-type") == kind and (
            ref is None or (e.get("detail") or {}).get("memoryRef") == ref)
    return match


def file_text(path: Path) -> str:
    """The file's text ("" when it does not exist), undecodable bytes replaced."""
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def stop_process(process: subprocess.Popen, stdin_grace: float | None = None) -> None:
    """Stops `process` politely: end of stdin (when `stdin_grace` is given, for processes that
    shut down cleanly on it), then SIGTERM, then SIGKILL; closes its stdout pipe."""
    if process.poll() is None and stdin_grace is not None:
        if process.stdin:
            process.stdin.close()
        try:
            process.wait(timeout=stdin_grace)
        except subprocess.TimeoutExpired:
            pass
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout:
        process.stdout.close()


def read_line_with_timeout(stream, timeout: float) -> str | None:
    """The first line of `stream`, or None if none arrived within `timeout` seconds."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return box[0] if box else None
