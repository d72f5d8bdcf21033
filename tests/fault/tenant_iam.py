"""The tenant-isolation side of the proxy (docs/guarantees.md "Tenant isolation in three layers"):
it records
which credentials signed every DynamoDB and S3 call and, when `tenantIam` is on, enforces
TenantAccessRole's policy (template.yaml) the way IAM would.

moto 5.2.5 cannot: its IAM enforcement (`INITIAL_NO_AUTH_ACTION_COUNT`) evaluates a condition
only on context keys it supplies itself and supplies no `dynamodb:LeadingKeys` (measured: a
LeadingKeys-conditioned allow answers 403 to the tenant's own key and to another's alike), nor a
session's `${aws:PrincipalTag/...}`. The proxy sees what IAM sees instead:

- `sts:AssumeRole` answers: the vended access key id and the session's `tenant` tag (from the
  request's `Tags.member.N`), so every later request's SigV4 access key names its tenant;
- each DynamoDB request's leading keys (the partition key values of the items it names, or the
  partition key of a Query's key condition on the table or index), each S3 request's object key or
  listing prefix.

A request signed by vended credentials is allowed only as the role allows it: the role's actions,
on the table or bySubject (not another index), every leading key starting with "<tenant>#" and at
least one (the `Null` condition); S3 objects under "<tenant>/", listings with a prefix under it.
Anything else is answered as AWS would (DynamoDB 400 AccessDeniedException, S3 403 AccessDenied)
and never reaches the emulator. And as S3 does for a caller without an unconditioned
`s3:ListBucket`, a GetObject of an absent key under vended credentials is answered 403, not 404. Requests signed by other keys (the function's own role) are
forwarded and recorded as `own`. Standard library only; bodies are never logged or kept.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections import deque
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

MAX_RECORDS = 20_000
# Index -> its partition key attribute (template.yaml MemoryTable); None = the base table.
HASH_KEYS = {None: "pk", "bySubject": "subjectKey", "byDue": "duePartition",
             "byDirtyRef": "dirtyPartition"}
# What TenantAccessRole allows (TransactWriteItems / TransactGetItems are authorised per item).
DYNAMODB_ALLOWED = {"GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem",
                    "TransactWriteItems", "TransactGetItems"}
DYNAMODB_QUERY_INDEXES = {None, "bySubject"}
S3_OBJECT_OPS = {"GetObject", "HeadObject", "PutObject", "PutObjectTagging", "DeleteObject"}
S3_LIST_OPS = {"ListObjectsV2", "ListObjects", "ListObjectVersions"}
TENANT_TAG = "tenant"


def credential_scope(headers: dict[str, str], query: dict[str, str]) -> str:
    """The SigV4 credential (`AKID/date/region/service/aws4_request`) of a signed request, from
    its Authorization header or a presigned query; "" when unsigned."""
    auth = headers.get("authorization", "")
    if "Credential=" in auth:
        return auth.split("Credential=", 1)[1].split(",", 1)[0].strip()
    return query.get("X-Amz-Credential", "")


def access_key(headers: dict[str, str], query: dict[str, str]) -> str | None:
    """The access key id of the SigV4 credential scope (`Credential=AKID/date/region/...`)."""
    return credential_scope(headers, query).split("/", 1)[0] or None


def _s(value: Any) -> str | None:
    return value.get("S") if isinstance(value, dict) and isinstance(value.get("S"), str) else None


def dynamodb_leading_keys(operation: str, body: bytes) -> tuple[list[str], str | None]:
    """(the partition key values a request names, the index it queries)."""
    try:
        doc = json.loads(body or b"{}")
    except ValueError:
        return [], None
    if not isinstance(doc, dict):
        return [], None
    keys: list[str] = []

    def pk_of(item: Any) -> None:
        if isinstance(item, dict):
            value = _s(item.get("pk"))
            keys.append(value if value is not None else "")

    if operation in ("GetItem", "UpdateItem", "DeleteItem"):
        pk_of(doc.get("Key"))
    elif operation == "PutItem":
        pk_of(doc.get("Item"))
    elif operation == "BatchGetItem":
        for spec in (doc.get("RequestItems") or {}).values():
            for key in (spec or {}).get("Keys") or []:
                pk_of(key)
    elif operation == "BatchWriteItem":
        for writes in (doc.get("RequestItems") or {}).values():
            for w in writes or []:
                pk_of(((w or {}).get("PutRequest") or {}).get("Item"))
                pk_of(((w or {}).get("DeleteRequest") or {}).get("Key"))
    elif operation in ("TransactWriteItems", "TransactGetItems"):
        for t in doc.get("TransactItems") or []:
            for kind, field in (("Put", "Item"), ("Update", "Key"), ("Delete", "Key"),
                                ("ConditionCheck", "Key"), ("Get", "Key")):
                if isinstance(t, dict) and kind in t:
                    pk_of((t[kind] or {}).get(field))
    elif operation == "Query":
        index = doc.get("IndexName")
        attr = HASH_KEYS.get(index)
        names = doc.get("ExpressionAttributeNames") or {}
        values = doc.get("ExpressionAttributeValues") or {}
        for name, placeholder in re.findall(r"([#A-Za-z0-9_]+)\s*=\s*(:[A-Za-z0-9_]+)",
                                            doc.get("KeyConditionExpression") or ""):
            if names.get(name, name) == attr:
                keys.append(_s(values.get(placeholder)) or "")
        return keys, index
    return keys, None


def s3_target(operation: str, target: str) -> str | None:
    """The object key (object operations) or the listing prefix (listings) of a path-style
    request; None when the request names neither."""
    split = urlsplit(target)
    query = dict(parse_qsl(split.query, keep_blank_values=True))
    _bucket, _, key = split.path.lstrip("/").partition("/")
    if operation in S3_LIST_OPS:
        return query.get("prefix")
    return unquote(key) if key else None


def assumed_tenant(form_body: bytes) -> str | None:
    """The `tenant` session tag of an AssumeRole request (query protocol form body)."""
    form = dict(parse_qsl(form_body.decode("utf-8", "replace"), keep_blank_values=True))
    for name, value in form.items():
        m = re.fullmatch(r"Tags\.member\.(\d+)\.Key", name)
        if m and value == TENANT_TAG:
            return form.get(f"Tags.member.{m.group(1)}.Value")
    return None


def vended_key(response_body: bytes) -> str | None:
    m = re.search(rb"<AccessKeyId>([^<]+)</AccessKeyId>", response_body or b"")
    return m.group(1).decode() if m else None


def denial(service: str, method: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """AWS's own answer to a request IAM refuses."""
    request_id = str(uuid.uuid4())
    if service == "dynamodb":
        body = json.dumps({"__type": "com.amazon.coral.service#AccessDeniedException",
                           "Message": "User is not authorized to perform this action on this "
                                      "resource because no identity-based policy allows it"}
                          ).encode()
        return 400, [("Content-Type", "application/x-amz-json-1.0"),
                     ("x-amzn-RequestId", request_id)], body
    body = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
            b"<Message>Access Denied</Message><RequestId>" + request_id.encode()
            + b"</RequestId></Error>")
    return 403, [("Content-Type", "application/xml"), ("x-amz-request-id", request_id)], \
        (b"" if method == "HEAD" else body)


class TenantIam:
    """The vended keys seen so far, the records of data calls, and the policy check."""

    def __init__(self, enforce: bool = False) -> None:
        self.lock = threading.Lock()
        self.enforce = enforce
        self.vended: dict[str, str] = {}
        self.assumed: deque[dict[str, Any]] = deque(maxlen=MAX_RECORDS)
        self.calls: deque[dict[str, Any]] = deque(maxlen=MAX_RECORDS)

    def reset(self) -> None:
        """Forgets the records; vended keys stay known (their sessions live on in the callers'
        caches, and their later calls must still be attributed and checked)."""
        with self.lock:
            self.assumed.clear()
            self.calls.clear()

    def note_assume(self, seq: int, request_body: bytes, status: int, response: bytes) -> None:
        tenant = assumed_tenant(request_body)
        key = vended_key(response) if status == 200 else None
        with self.lock:
            if key and tenant:
                self.vended[key] = tenant
            self.assumed.append({"seq": seq, "tenant": tenant, "accessKey": key,
                                 "status": status})

    def check(self, seq: int, service: str, operation: str, method: str, target: str,
              headers: dict[str, str], body: bytes) -> bool:
        """Records a DynamoDB / S3 call; False when the role's policy refuses it (enforced)."""
        query = dict(parse_qsl(urlsplit(target).query, keep_blank_values=True))
        key = access_key(headers, query)
        index = None
        if service == "dynamodb":
            leading, index = dynamodb_leading_keys(operation, body)
        else:
            where = s3_target(operation, target)
            leading = [where] if where is not None else []
        with self.lock:
            tenant = self.vended.get(key or "")
        allowed = True
        if tenant is not None:
            allowed = self._allows(tenant, service, operation, index, leading)
        key_tenants = sorted({k.split("#" if service == "dynamodb" else "/", 1)[0]
                              for k in leading if k})
        # The meter's usage items (docs/metering.md "The items and the rollup"): the host's own
        # accounting of what a tenant's work cost, counts only, written on the function's role.
        accounting = service == "dynamodb" and bool(leading) and all(
            k.split("#", 1)[-1] == "@usage" or k.startswith("@usage#") for k in leading)
        record = {"seq": seq, "service": service, "operation": operation, "accessKey": key,
                  "signer": f"tenant:{tenant}" if tenant is not None else "own",
                  "keyTenants": key_tenants, "index": index, "accounting": accounting,
                  "denied": not allowed and self.enforce}
        with self.lock:
            self.calls.append(record)
        return allowed or not self.enforce

    @staticmethod
    def _allows(tenant: str, service: str, operation: str, index: str | None,
                leading: list[str]) -> bool:
        if service == "dynamodb":
            if operation not in DYNAMODB_ALLOWED:
                return False
            if operation == "Query" and index not in DYNAMODB_QUERY_INDEXES:
                return False
            # ForAllValues:StringLike "<tenant>#*", and Null false: at least one leading key.
            return bool(leading) and all(k.startswith(f"{tenant}#") for k in leading)
        if operation in S3_OBJECT_OPS or operation in S3_LIST_OPS:
            return bool(leading) and all(k.startswith(f"{tenant}/") for k in leading)
        return False

    def hides_absent(self, service: str, operation: str, target: str,
                     headers: dict[str, str], status: int) -> bool:
        """Whether S3 would answer 403 instead of this 404: a GetObject / HeadObject of an absent
        key signed by a vended key, whose role has no unconditioned s3:ListBucket (enforced)."""
        if not self.enforce or service != "s3" or operation not in ("GetObject", "HeadObject") \
                or status != 404:
            return False
        query = dict(parse_qsl(urlsplit(target).query, keep_blank_values=True))
        with self.lock:
            return access_key(headers, query) in self.vended

    def as_json(self) -> dict[str, Any]:
        with self.lock:
            return {"enforce": self.enforce, "assumed": list(self.assumed),
                    "calls": list(self.calls)}
