#!/usr/bin/env python3
"""Check recorded HTTP exchanges of wop-memory against infra/openapi.yaml.

Usage (with the project venv, created by infra/local/venv):
    .venv/bin/python tests/openapi_check.py DIR          check every DIR/*.json exchange
    .venv/bin/python tests/openapi_check.py --self-test  check the checker and the spec itself
Options:
    --spec PATH   another OpenAPI file (default: infra/openapi.yaml of this repo)

An exchange file is one JSON object:
    {"method": "GET", "path": "/v1/host/wop-memory/entries/01ABC", "status": 200, "body": {...}}
`path` is the concrete request path (a query string, if present, is ignored; as in the
functions' router, anything before `/v1/host/wop-memory/`, e.g. a stage name, is ignored too).
An optional `"headers": {"Name": "value", ...}` (response headers, names in any case) is checked
against the response's documented headers: a `required` one must be present (e.g. `Allow` on
405), and a present one must match its schema (`Retry-After` an integer). Without `headers`, no
header is checked.
For each file the checker finds the operation (path template + method) and the response for the
status (exact code, else an `NXX` range), then validates `body` against that response's
application/json schema with JSON Schema Draft 2020-12, `$ref`s resolved inside the same
document. A missing operation or status is a failure, not a skip.

Output: one line per file, then exactly `N passed, N failed`. Exit 0 only when at least one
file was checked and none failed; 1 otherwise (an empty or missing directory fails loudly);
2 on usage errors or an unreadable spec.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry
from referencing.jsonschema import DRAFT202012

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = ROOT / "infra" / "openapi.yaml"
SPEC_URI = "urn:wop-memory:openapi"
# The functions route on the suffix from here (read_api.rs `BASE`).
BASE = "/v1/host/wop-memory/"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
MAX_MESSAGE = 200


class CheckError(Exception):
    """An exchange that cannot be checked or does not conform. `details` lists every schema
    violation (`<json path>: <message>`) when there were several; the message shows the best."""

    def __init__(self, message: str, details=()):
        super().__init__(message)
        self.details = list(details)


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


def pointer(*segments: str) -> str:
    return "".join("/" + _escape(str(s)) for s in segments)


class Spec:
    def __init__(self, path: Path):
        self.path = path
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or not isinstance(doc.get("paths"), dict):
            raise ValueError(f"{path}: not an OpenAPI document (no `paths`)")
        # YAML can produce dates and other non-JSON values; a JSON Schema must be plain JSON.
        json.dumps(doc)
        self.doc = doc
        self.registry = Registry().with_resource(SPEC_URI, DRAFT202012.create_resource(doc))
        self._templates = []
        for template in doc["paths"]:
            parts = re.split(r"\{[^}/]+\}", template)
            regex = re.compile("^" + "[^/]+".join(re.escape(p) for p in parts) + "$")
            self._templates.append((len(parts) - 1, template, regex))
        self._templates.sort()  # literal templates win over templated ones

    def at(self, ptr: str):
        node = self.doc
        for raw in ptr.split("/")[1:]:
            seg = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list):
                node = node[int(seg)]
            else:
                node = node[seg]
        return node

    def deref(self, ptr: str):
        """Follows local `$ref`s (responses, parameters); returns (pointer, object)."""
        seen = set()
        node = self.at(ptr)
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/") or ref in seen:
                raise CheckError(f"unsupported or cyclic $ref {ref!r} at {ptr}")
            seen.add(ref)
            ptr = ref[1:]
            node = self.at(ptr)
        return ptr, node

    def match_path(self, raw_path: str) -> str:
        path = raw_path.split("?", 1)[0]
        i = path.find(BASE)
        if i > 0:
            path = path[i:]
        for _, template, regex in self._templates:
            if regex.match(path):
                return template
        raise CheckError(f"no path in the spec matches {raw_path!r}")

    def operation(self, method: str, raw_path: str):
        template = self.match_path(raw_path)
        item = self.doc["paths"][template]
        m = method.lower()
        if m not in METHODS or m not in item:
            raise CheckError(f"the spec has no {method.upper()} operation on {template}")
        return template, m, item[m]

    def response(self, method: str, raw_path: str, status: int):
        """Returns (operation label, pointer of the response object, the response object)."""
        template, m, op = self.operation(method, raw_path)
        label = f"{op.get('operationId', m.upper() + ' ' + template)}"
        responses = op.get("responses") or {}
        key = str(status)
        if key not in responses:
            key = f"{key[0]}XX"
            if key not in responses:
                raise CheckError(f"{label} has no response for status {status}")
        ptr, response = self.deref(pointer("paths", template, m, "responses", key))
        return label, ptr, response

    def response_schema(self, method: str, raw_path: str, status: int):
        """Returns (operation label, JSON pointer of the response body schema)."""
        label, ptr, response = self.response(method, raw_path, status)
        content = response.get("content") or {}
        if "application/json" not in content or "schema" not in content["application/json"]:
            raise CheckError(f"{label} {status}: the spec gives no application/json schema")
        return label, ptr + pointer("content", "application/json", "schema")

    def response_headers(self, method: str, raw_path: str, status: int):
        """Yields (header name, required, JSON pointer of its schema) of the matched response."""
        _, ptr, response = self.response(method, raw_path, status)
        for name in response.get("headers") or {}:
            hptr, header = self.deref(ptr + pointer("headers", name))
            if "schema" in header:
                yield name, bool(header.get("required")), hptr + "/schema"

    def validator(self, schema_ptr: str) -> Draft202012Validator:
        ref = SPEC_URI + "#" + quote(schema_ptr, safe="/~:@!$&'()*+,;=-._")
        return Draft202012Validator({"$ref": ref}, registry=self.registry)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def check_exchange(spec: Spec, exchange) -> str:
    """Returns a short description of what matched; raises CheckError on any failure."""
    if not isinstance(exchange, dict):
        raise CheckError("an exchange must be a JSON object")
    method, path, status = (exchange.get(k) for k in ("method", "path", "status"))
    if not isinstance(method, str) or not isinstance(path, str):
        raise CheckError("`method` and `path` must be strings")
    if isinstance(status, bool) or not isinstance(status, int):
        raise CheckError("`status` must be an integer")
    if "body" not in exchange:
        raise CheckError("`body` is missing")
    headers = exchange.get("headers")
    if headers is not None and not (
        isinstance(headers, dict) and all(isinstance(v, str) for v in headers.values())
    ):
        raise CheckError("`headers` must be an object of strings")
    label, schema_ptr = spec.response_schema(method, path, status)
    errors = list(spec.validator(schema_ptr).iter_errors(exchange["body"]))
    if errors:
        best = best_match(errors)
        where = best.json_path
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        raise CheckError(f"{label} {status}: body at {where}: {_short(best.message)}{more}",
                         [f"{e.json_path}: {e.message}" for e in _all_errors(errors)])
    if headers is not None:
        check_headers(spec, label, method, path, status, headers)
    return f"{method.upper()} {path.split('?', 1)[0]} -> {status} ({label})"


def _all_errors(errors):
    """The errors and, depth first, the errors of each alternative of a failed oneOf / anyOf."""
    for e in errors:
        yield e
        yield from _all_errors(e.context or ())


def check_headers(spec: Spec, label: str, method: str, path: str, status: int, headers: dict) -> None:
    """Checks the response headers the spec documents: required ones present, values valid.
    Header names are compared case-insensitively; an integer schema parses the value first."""
    got = {k.lower(): v for k, v in headers.items()}
    for name, required, schema_ptr in spec.response_headers(method, path, status):
        value = got.get(name.lower())
        if value is None:
            if required:
                raise CheckError(f"{label} {status}: header {name} is missing")
            continue
        schema = spec.at(schema_ptr)
        if schema.get("type") == "integer":
            if not re.fullmatch(r"[0-9]+", value.strip()):
                raise CheckError(f"{label} {status}: header {name}: {value!r} is not an integer")
            instance = int(value.strip())
        else:
            instance = value
        errors = list(spec.validator(schema_ptr).iter_errors(instance))
        if errors:
            raise CheckError(f"{label} {status}: header {name}: {_short(best_match(errors).message)}")


def check_dir(spec: Spec, directory: Path) -> int:
    passed = failed = 0
    files = sorted(directory.glob("*.json")) if directory.is_dir() else []
    if not directory.is_dir():
        print(f"FAIL {directory}: not a directory")
    elif not files:
        print(f"FAIL {directory}: no *.json exchange files (an empty run proves nothing)")
    for file in files:
        try:
            try:
                exchange = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
                raise CheckError(f"unreadable exchange: {_short(str(e))}") from None
            what = check_exchange(spec, exchange)
        except CheckError as e:
            failed += 1
            print(f"FAIL {file.name}: {e}")
        else:
            passed += 1
            print(f"PASS {file.name}: {what}")
    print(f"{passed} passed, {failed} failed")
    return 0 if files and failed == 0 else 1


# ---------------------------------------------------------------------------------------------
# Self-test: the checker accepts good bodies, rejects bad ones, fails empty runs, and the spec
# agrees with the Rust sources it describes (wire.rs codes/statuses/headers, limits) and with
# openwop-client's error code list.

E1 = {
    "id": "01JABCDEFGHJKMNPQRSTVWXYZ0",
    "content": "prefers e-mail over phone",
    "tags": ["preference", "contact"],
    "createdAt": "2023-11-14T22:13:20.123Z",
}
E2 = {
    "id": "01JABCDEFGHJKMNPQRSTVWXYZ1",
    "content": "renewal due",
    "tags": [],
    "createdAt": "2023-11-14T22:13:20.000Z",
    "expiresAt": "2030-01-01T00:00:00.999Z",
}
LIST = "/v1/host/wop-memory/entries"
GET = "/v1/host/wop-memory/entries/01JABCDEFGHJKMNPQRSTVWXYZ0"
CAPS = "/v1/host/wop-memory/capabilities"
FORGET = "/v1/host/wop-memory/forget"
# HostMemoryModel::document() of HOST_MODEL (capabilities.rs), written out by hand.
CAPS_DOC = {
    "memory": {
        "supported": True,
        "writable": True,
        "ttlSupported": True,
        "search": {"supported": True, "modes": ["filter"]},
        "retention": {"ttl": True, "forget": True},
        "attribution": {"supported": True, "emitsWriteEvents": True},
        "compaction": {"supported": True, "trigger": "host-managed"},
        "distillation": {"supported": True, "maxTokenBudget": 128000, "tokenizerName": "cl100k_base",
                         "archiveRetention": "P90D", "indexEmitted": True},
        "list": {"maxLimit": 100},
        "x-wop-memory-search": {
            "route": "/v1/host/wop-memory/search", "ranking": "bm25", "k1": 1.2, "b": 0.75,
            "analyzer": "uax29-words+casefold+accentfold+cjk-bigrams+english-stopwords+possessives+identifier-parts",
            "stemming": "english-snowball (default on; stem=false turns it off)", "maxLimit": 100,
            "modes": ["text"], "embeddingModel": None,
            "fusion": {"method": "convex", "textWeight": 0.5}, "newerWithin": 0.7,
        },
        "x-wop-memory-openintent": {
            "spec": "openintent-rfc-0015", "basePath": "/api/v1",
            "auth": ["X-API-Key", "X-Agent-ID"], "tiers": ["working", "episodic", "semantic"],
            "concurrency": "If-Match", "versions": True,
            "taskArchive": "/api/v1/tasks/{task_id}/memory:archive", "maxValueBytes": 65536,
            "forget": True,
        },
    },
    "agents": {
        "memoryBackends": ["long-term"],
        "memoryConsolidation": {"supported": True},
        "commitments": {"supported": True},
    },
}


def _with(doc, path, value):
    """Deep copy of doc with doc[path...] = value (the value _DELETE removes the key)."""
    doc = json.loads(json.dumps(doc))
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


_DELETE = object()


def _err(code, message="m", **details):
    """A flat envelope as WireError::envelope() builds it (`details` only when non-empty)."""
    body = {"error": code, "message": message}
    if details:
        body["details"] = details
    return body


def _x(method, path, status, body, headers=None):
    x = {"method": method, "path": path, "status": status, "body": body}
    if headers is not None:
        x["headers"] = headers
    return x


# The function's answers, as wire.rs words them.
V_LIMIT = _err("validation_error", "limit must be a positive integer", field="limit")
V_CURSOR = _err("validation_error", "cursor is not valid for this memoryRef", field="cursor")
V_REF = _err("validation_error", "invalid memoryRef: query parameter is required", field="memoryRef")
V_EVENT = _err("validation_error", "event.requestContext: missing field `http`", field="event.requestContext")
V_PAYLOAD = _err("validation_error", "payload is not valid JSON (RFC 8259, UTF-8, no lone surrogate escapes)",
                 field="payload")
V_SUBJECT = _err("validation_error", "invalid subject: 1-256 bytes", field="subject")
V_UNKNOWN = _err("validation_error", "payload: unknown field (not part of the schema)", field="payload")
UNAUTH = _err("unauthenticated", "tenant could not be determined")
NOT_FOUND = _err("not_found", "not found")
INTERNAL = _err("internal_error", "internal error")
RATE = _err("rate_limited", "concurrent update of the same items; retry after the delay", retryAfterSeconds=1)
METHOD = _err("validation_error", "method not allowed; use POST", allow=["POST"])
GW_UNAUTH = {"message": "Unauthorized"}
COUNTS = {"deletedEntries": 3, "deletedArchives": 0, "rebuiltIndexes": 1, "cancelledCommitments": 0}



def _refusals(name: str, method: str, path: str) -> list:
    """What every authenticated route may answer before it does its job: the function's and the
    gateway's 401, and the function's 500."""
    return [
        (f"{name} 401 function", _x(method, path, 401, UNAUTH)),
        (f"{name} 401 gateway", _x(method, path, 401, GW_UNAUTH)),
        (f"{name} 500 internal_error", _x(method, path, 500, INTERNAL)),
    ]


GOOD = [
    ("list page, last", _x("GET", LIST + "?memoryRef=x", 200, {"entries": [E1, E2], "nextCursor": None})),
    ("list page, more", _x("GET", LIST, 200, {"entries": [E1], "nextCursor": "YzEuMDFKWC5hYmNk"})),
    ("list, short page with cursor", _x("GET", LIST, 200, {"entries": [], "nextCursor": "YzE"})),
    ("list, CTI-1 empty page", _x("GET", LIST, 200, {"entries": [], "nextCursor": None})),
    ("list, stage prefix", _x("GET", "/prod" + LIST, 200, {"entries": [], "nextCursor": None})),
    ("list 400 bad limit", _x("GET", LIST, 400, V_LIMIT)),
    ("list 400 bad cursor", _x("GET", LIST, 400, V_CURSOR)),
    ("list 400 memoryRef missing", _x("GET", LIST, 400, V_REF)),
    ("list 400 malformed event", _x("GET", LIST, 400, V_EVENT)),
    *_refusals("list", "GET", LIST),
    ("list 500 gateway", _x("GET", LIST, 500, {"message": "Internal Server Error"})),
    ("list 429 gateway throttling", _x("GET", LIST, 429, {"message": "Too Many Requests"})),
    ("list 503 gateway timeout", _x("GET", LIST, 503, {"message": "Service Unavailable"})),
    ("get entry", _x("GET", GET, 200, E1)),
    ("get entry with expiresAt", _x("GET", GET, 200, E2)),
    ("get 404", _x("GET", GET, 404, NOT_FOUND)),
    ("get 404, stage prefix", _x("GET", "/prod" + GET, 404, NOT_FOUND)),
    ("get 400 memoryRef missing", _x("GET", GET, 400, V_REF)),
    *_refusals("get", "GET", GET),
    ("capabilities (HOST_MODEL)", _x("GET", CAPS, 200, CAPS_DOC)),
    ("capabilities, distillation off", _x("GET", CAPS, 200, _with(CAPS_DOC, ["memory", "distillation"],
                                                                   {"supported": False}))),
    ("capabilities, semantic search on", _x("GET", CAPS, 200, _with(
        _with(CAPS_DOC, ["memory", "search", "modes"], ["filter", "semantic"]),
        ["memory", "x-wop-memory-search"],
        dict(CAPS_DOC["memory"]["x-wop-memory-search"], modes=["text", "semantic", "hybrid"],
             embeddingModel="amazon.titan-embed-text-v2:0")))),
    ("capabilities, unknown key allowed", _x("GET", CAPS, 200, _with(CAPS_DOC, ["memory", "future"], {"x": 1}))),
    ("capabilities 500 internal_error", _x("GET", CAPS, 500, INTERNAL)),
    ("capabilities 429 gateway throttling", _x("GET", CAPS, 429, {"message": "Too Many Requests"})),
    ("forget counts", _x("POST", FORGET, 200, COUNTS)),
    ("forget 400 not JSON", _x("POST", FORGET, 400, V_PAYLOAD)),
    ("forget 400 subject too long", _x("POST", FORGET, 400, V_SUBJECT)),
    ("forget 400 unknown field", _x("POST", FORGET, 400, V_UNKNOWN)),
    *_refusals("forget", "POST", FORGET),
    ("forget 429 rate_limited + Retry-After", _x("POST", FORGET, 429, RATE,
                                                 {"Retry-After": "1", "Content-Type": "application/json"})),
    ("forget 429 rate_limited, headers not recorded", _x("POST", FORGET, 429, RATE)),
    ("forget 429 gateway throttling", _x("POST", FORGET, 429, {"message": "Too Many Requests"})),
    ("forget 503 gateway timeout", _x("POST", FORGET, 503, {"message": "Service Unavailable"})),
    ("GET forget 405 + Allow", _x("GET", FORGET, 405, METHOD, {"allow": "POST"})),
    ("PUT forget 405", _x("PUT", FORGET, 405, METHOD, {"Allow": "POST"})),
    ("DELETE forget 405", _x("DELETE", FORGET, 405, METHOD)),
    ("PATCH forget 405", _x("PATCH", FORGET, 405, METHOD)),
    ("OPTIONS forget 405", _x("OPTIONS", FORGET, 405, METHOD)),
    ("GET forget 401 gateway", _x("GET", FORGET, 401, GW_UNAUTH)),
]

OLD_NESTED = {"error": {"code": "invalid_limit", "message": "limit must be a positive integer"}}

BAD = [  # (name, expected fragment of the rejection, exchange)
    ("list without nextCursor", "'nextCursor' is a required property",
     _x("GET", LIST, 200, {"entries": [E1]})),
    ("list, nextCursor not a string", '$.nextCursor: 5 is not of type',
     _x("GET", LIST, 200, {"entries": [], "nextCursor": 5})),
    ("list, extra top-level key", "('count' was unexpected)",
     _x("GET", LIST, 200, {"entries": [], "nextCursor": None, "count": 0})),
    ("entry with an extra field", '$.entries[0]: Additional properties',
     _x("GET", LIST, 200, {"entries": [dict(E1, tier="long-term")], "nextCursor": None})),
    ("get, entry with an extra field", "('subject' was unexpected)",
     _x("GET", GET, 200, dict(E1, subject="alice"))),
    ("entry without tags", "'tags' is a required property",
     _x("GET", GET, 200, {k: v for k, v in E1.items() if k != "tags"})),
    # Timestamps: exactly milliseconds, UTC, a real calendar date.
    *((f"{field} {what}", f"$.{field}: '{value}' does not match",
       _x("GET", GET, 200, dict(base, **{field: value})))
      for what, base, field, value in (
          ("without milliseconds", E1, "createdAt", "2023-11-14T22:13:20Z"),
          ("with microseconds", E1, "createdAt", "2023-11-14T22:13:20.123456Z"),
          ("with an offset", E2, "expiresAt", "2030-01-01T01:00:00.000+01:00"),
          ("year 10000", E2, "expiresAt", "+10000-01-01T00:59:59.000Z"),
          ("month 13", E1, "createdAt", "2023-13-14T22:13:20.123Z"),
      )),
    ("createdAt non-ASCII digits", '$.createdAt:',
     _x("GET", GET, 200, dict(E1, createdAt="٢٠٢٣-11-14T22:13:20.123Z"))),
    ("expiresAt null", '$.expiresAt: None is not of type',
     _x("GET", GET, 200, dict(E2, expiresAt=None))),
    ("entry id outside the alphabet", "$.id: 'a/b' does not match",
     _x("GET", GET, 200, dict(E1, id="a/b"))),
    # The envelope: flat, closed, only this host's codes, each on its own status.
    ("old nested envelope", "$.error: {'code': 'invalid_limit', 'message': 'limit must be a positive integer'} is not of type 'string'",
     _x("GET", LIST, 400, OLD_NESTED)),
    ("old nested envelope on 404", "$: 'message' is a required property",
     _x("GET", GET, 404, {"error": {"code": "not_found", "message": "not found"}})),
    ("old code invalid_limit", "$.error: 'invalid_limit' is not one of",
     _x("GET", LIST, 400, _err("invalid_limit", field="limit"))),
    ("old code unauthorized", "listEntries 401: body at $.error: 'unauthorized' is not one of",
     _x("GET", LIST, 401, _err("unauthorized"))),
    ("old code internal", "listEntries 500: body at $.error: 'internal' is not one of",
     _x("GET", LIST, 500, _err("internal", "internal error"))),
    ("old code conflict on forget 429", "$.error: 'conflict' is not one of",
     _x("POST", FORGET, 429, _err("conflict", retryAfterSeconds=1))),
    ("unknown error code", "$.error: 'teapot' is not one of ['validation_error',",
     _x("GET", GET, 404, _err("teapot"))),
    ("known code, wrong status", "getEntry 404: body at $.error: 'not_found' was expected",
     _x("GET", GET, 404, _err("not_found", field="memoryRef") | {"error": "validation_error"})),
    ("not_found on a 400", "listEntries 400: body at $.error: 'validation_error' was expected",
     _x("GET", LIST, 400, _err("not_found", field="limit"))),
    ("error without message", "'message' is a required property",
     _x("GET", GET, 404, {"error": "not_found"})),
    ("message not a string", "$.message: 5 is not of type 'string'",
     _x("GET", GET, 404, {"error": "not_found", "message": 5})),
    ("extra top-level key", "('code' was unexpected)",
     _x("GET", GET, 404, dict(NOT_FOUND, code="not_found"))),
    ("details with an unknown key", "('value' was unexpected)",
     _x("GET", LIST, 400, _err("validation_error", field="limit", value="abc"))),
    ("details empty", "$.details: {} should be non-empty",
     _x("GET", GET, 404, dict(NOT_FOUND, details={}))),
    ("400 without details.field", "'details' is a required property",
     _x("GET", LIST, 400, _err("validation_error", "bad"))),
    ("400 with details but no field", "$.details: 'field' is a required property",
     _x("GET", LIST, 400, _err("validation_error", "bad", retryAfterSeconds=1))),
    ("details.field not a string", "$.details.field: 3 is not of type 'string'",
     _x("GET", LIST, 400, _err("validation_error", field=3))),
    ("500 leaking backend detail", "listEntries 500: body at $.message: 'internal error' was expected",
     _x("GET", LIST, 500, _err("internal_error", "backend failure during query: ThrottlingException"))),
    ("rate_limited on a read without retryAfterSeconds",
     "listEntries 429: body at $: Additional properties are not allowed ('error' was unexpected)",
     _x("GET", LIST, 429, _err("rate_limited", "retry"))),
    ("503 envelope on a read without retryAfterSeconds",
     "listEntries 503: body at $: Additional properties are not allowed ('error' was unexpected)",
     _x("GET", LIST, 503, INTERNAL)),
    ("500 with details", "should not be valid under {'required': ['details']}",
     _x("GET", GET, 500, dict(INTERNAL, details={"field": "memoryRef"}))),
    ("rate_limited without retryAfterSeconds", "$: 'details' is a required property",
     _x("POST", FORGET, 429, _err("rate_limited", "retry"))),
    ("Retry-After not an integer", "forgetSubject 429: header Retry-After: 'soon' is not an integer",
     _x("POST", FORGET, 429, RATE, {"Retry-After": "soon"})),
    ("405 without details.allow", "forgetMethodNotAllowedGet 405: body at $: 'details' is a required property",
     _x("GET", FORGET, 405, _err("validation_error", "method not allowed; use POST"))),
    ("405 allowing GET", "$.details.allow: ['POST'] was expected",
     _x("GET", FORGET, 405, _err("validation_error", "m", allow=["GET"]))),
    ("405 with another code", "$.error: 'validation_error' was expected",
     _x("DELETE", FORGET, 405, _err("not_found", "m", allow=["POST"]))),
    ("405 without the Allow header", "forgetMethodNotAllowedPut 405: header Allow is missing",
     _x("PUT", FORGET, 405, METHOD, {"content-type": "application/json"})),
    ("405 with a wrong Allow header", "header Allow: 'POST' was expected",
     _x("PATCH", FORGET, 405, METHOD, {"Allow": "GET, POST"})),
    ("envelope on a gateway-only 401", "forgetMethodNotAllowedGet 401: body at $: Additional properties are not allowed ('error' was",
     _x("GET", FORGET, 401, UNAUTH)),
    ("error envelope on a read 429", "listEntries 429: body at $.error: 'rate_limited' was expected",
     _x("GET", LIST, 429, INTERNAL)),
    ("gateway shape on 404", 'getEntry 404: body at $',
     _x("GET", GET, 404, {"message": "Not Found"})),
    ("capabilities without list.maxLimit", "'maxLimit' is a required property",
     _x("GET", CAPS, 200, _with(CAPS_DOC, ["memory", "list"], {}))),
    ("capabilities without agents", "'agents' is a required property",
     _x("GET", CAPS, 200, _with(CAPS_DOC, ["agents"], _DELETE))),
    ("capabilities, ttlSupported a string", "$.memory.ttlSupported: 'yes' is not of type 'boolean'",
     _x("GET", CAPS, 200, _with(CAPS_DOC, ["memory", "ttlSupported"], "yes"))),
    ("capabilities, distillation on without budget", "$.memory.distillation: 'maxTokenBudget' is a required property",
     _x("GET", CAPS, 200, _with(
        CAPS_DOC, ["memory", "distillation"], {"supported": True}))),
    ("forget count negative", '$.deletedEntries: -1 is less than the minimum of 0',
     _x("POST", FORGET, 200, dict(COUNTS, deletedEntries=-1))),
    ("forget count missing", "'cancelledCommitments' is a required property",
     _x("POST", FORGET, 200, {k: v for k, v in COUNTS.items() if k != "cancelledCommitments"})),
    ("forget count a float", "$.deletedEntries: 1.5 is not of type 'integer'",
     _x("POST", FORGET, 200, dict(COUNTS, deletedEntries=1.5))),
    # Operation / status lookup must fail, not skip.
    ("unknown path", 'no path in the spec matches',
     _x("GET", "/v1/host/wop-memory/recall", 200, {})),
    ("nested id path", 'no path in the spec matches', _x("GET", LIST + "/a/b", 200, E1)),
    ("method without operation", 'the spec has no POST operation',
     _x("POST", LIST, 200, {"entries": [], "nextCursor": None})),
    ("HEAD on forget", 'the spec has no HEAD operation', _x("HEAD", FORGET, 405, METHOD)),
    ("status the operation lacks", 'getCapabilities has no response for status 404',
     _x("GET", CAPS, 404, NOT_FOUND)),
    ("capabilities is public: no 401", 'getCapabilities has no response for status 401',
     _x("GET", CAPS, 401, UNAUTH)),
    ("405 on POST forget", 'forgetSubject has no response for status 405', _x("POST", FORGET, 405, METHOD)),
    ("200 on GET forget", 'forgetMethodNotAllowedGet has no response for status 200',
     _x("GET", FORGET, 200, COUNTS)),
    ("token_budget_exceeded is not on HTTP", 'forgetSubject has no response for status 422',
     _x("POST", FORGET, 422, _err("token_budget_exceeded"))),
    ("unlisted status 418", 'listEntries has no response for status 418',
     _x("GET", LIST, 418, INTERNAL)),
    ("exchange without body", '`body` is missing', {"method": "GET", "path": GET, "status": 404}),
    ("status as a string", '`status` must be an integer', _x("GET", GET, "404", NOT_FOUND)),
    ("headers not strings", '`headers` must be an object of strings',
     _x("GET", FORGET, 405, METHOD, {"Allow": ["POST"]})),
]


# ---------------------------------------------------------------------------------------------
# Drift: the spec against shared/memory-api/src/wire.rs (the one mapping from errors to HTTP) and
# the official client's code list.

ENVELOPE = "#/components/schemas/ErrorEnvelope"
# Codes this host may emit that are not in openwop-client's HTTP_ERROR_CODES: RFC 0062's, and
# the answer to a write that may or may not be stored, which no client code can stand for.
NON_CLIENT_CODES = {"token_budget_exceeded", "outcome_unknown"}


def wire_statuses(text: str) -> dict:
    """{code: {status, ...}} from every `WireError::new(status, "code", ...)` outside the tests."""
    text = text.split("#[cfg(test)]", 1)[0]
    out: dict = {}
    for m in re.finditer(r"WireError::new\(\s*(\d{3})\s*,\s*\"([a-z_]+)\"", text):
        out.setdefault(m.group(2), set()).add(int(m.group(1)))
    if not out:
        raise ValueError("no `WireError::new(status, \"code\", ...)` calls found")
    return out


def _resolve(spec: Spec, node):
    """Follows a local `$ref` (one level at a time); returns the node otherwise."""
    seen = set()
    while isinstance(node, dict) and "$ref" in node and node["$ref"].startswith("#/"):
        if node["$ref"] in seen:
            break
        seen.add(node["$ref"])
        node = spec.at(node["$ref"][1:])
    return node


def _envelope_branches(spec: Spec, node, depth=0):
    """Yields the (allOf) schemas that extend ErrorEnvelope, as lists of their parts, through
    local $refs and oneOf/anyOf alternatives."""
    if depth > 20 or not isinstance(node, dict):
        return
    if node.get("$ref") == ENVELOPE:
        yield [node]
        return
    node = _resolve(spec, node)
    parts = node.get("allOf") or []
    if any(isinstance(p, dict) and p.get("$ref") == ENVELOPE for p in parts):
        yield parts
        return
    for part in parts:  # allOf [SomeRef, narrowing]: the ref may itself extend the envelope
        for inner in _envelope_branches(spec, part, depth + 1):
            yield inner + [p for p in parts if p is not part]
    for key in ("oneOf", "anyOf"):
        for alt in node.get(key, []):
            yield from _envelope_branches(spec, alt, depth + 1)


def _narrowed(parts) -> set | None:
    """The codes an envelope branch is narrowed to (`properties.error` const / enum)."""
    codes = None
    for part in parts:
        error = ((part.get("properties") or {}).get("error")) if isinstance(part, dict) else None
        if isinstance(error, dict) and ("const" in error or "enum" in error):
            here = {error["const"]} if "const" in error else set(error["enum"])
            codes = here if codes is None else codes & here
    return codes


def drift_checks(spec: Spec):
    """Yields (name, problem-or-None) comparing the spec with the Rust sources."""
    core = ROOT / "shared" / "memory-core" / "src"
    wire_rs = ROOT / "shared" / "memory-api" / "src" / "wire.rs"
    if not wire_rs.is_file():
        yield ("wire.rs drift check", f"skipped: {wire_rs} not found")
        return
    text = wire_rs.read_text(encoding="utf-8")
    try:
        code_status = wire_statuses(text)
    except ValueError as e:
        yield ("parse wire.rs", f"{e}: update drift_checks in {Path(__file__).name}")
        return
    yield ("parse wire.rs", None)
    enum = spec.at("/components/schemas/ErrorEnvelope/properties/error").get("enum") or []
    yield ("ErrorEnvelope error enum == wire.rs codes",
           None if sorted(enum) == sorted(code_status) else
           f"spec {sorted(enum)} vs wire.rs {sorted(code_status)}")
    try:
        from openwop_client import HTTP_ERROR_CODES
    except ImportError:
        yield ("wire.rs codes are openwop-client HTTP_ERROR_CODES", "skipped: openwop-client not installed")
    else:
        foreign = sorted(set(code_status) - set(HTTP_ERROR_CODES) - NON_CLIENT_CODES)
        yield ("wire.rs codes are openwop-client HTTP_ERROR_CODES (+ token_budget_exceeded, "
               "outcome_unknown)",
               f"not in the client's list: {foreign}" if foreign else None)
    internal = re.search(r"WireError::new\(\s*500\s*,\s*\"internal_error\"\s*,\s*\"([^\"]*)\"", text)
    documented = spec.at("/components/responses/InternalError/content/application~1json/schema/oneOf/0/allOf/1"
                         "/properties/message").get("const")
    yield ("500 message == wire.rs internal()",
           None if internal and internal.group(1) == documented else
           f"spec {documented!r} vs wire.rs {internal and internal.group(1)!r}")
    header_of = {"rate_limited": "retry-after"}
    if re.search(r"\"allow\"", text):
        header_of["405"] = "allow"
    for template, item in spec.doc["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if not op:
                continue
            for status, _ in (op.get("responses") or {}).items():
                ptr, response = spec.deref(pointer("paths", template, method, "responses", status))
                schema = ((response.get("content") or {}).get("application/json") or {}).get("schema")
                branches = list(_envelope_branches(spec, schema)) if schema is not None else []
                if not branches:
                    continue
                name = f"{method.upper()} {template} {status}: codes match wire.rs statuses"
                found = set()
                unnarrowed = False
                for parts in branches:
                    codes = _narrowed(parts)
                    if not codes:
                        unnarrowed = True
                    else:
                        found |= codes
                if unnarrowed:
                    yield (name, "error response not narrowed to the codes this status can carry")
                    continue
                wrong = sorted(c for c in found if int(status) not in code_status.get(c, set()))
                yield (name, f"codes with another status in wire.rs: {wrong}" if wrong else None)
                headers = {h.lower() for h in (response.get("headers") or {})}
                for key, header in header_of.items():
                    if key in found or key == status:
                        yield (f"{method.upper()} {template} {status}: documents the {header} header",
                               None if header in headers else f"no {header} header on this response")
    listing = core / "listing.rs"
    if listing.is_file():
        lt = listing.read_text(encoding="utf-8")
        default = re.search(r"DEFAULT_LIST_LIMIT:\s*u32\s*=\s*(\d+)", lt)
        maximum = re.search(r"MAX_LIST_LIMIT:\s*u32\s*=\s*(\d+)", lt)
        params = spec.at(pointer("paths", "/v1/host/wop-memory/entries", "get", "parameters"))
        limit = next(p for p in params if p.get("name") == "limit")
        yield ("limit default == DEFAULT_LIST_LIMIT",
               None if default and limit["schema"].get("default") == default.group(1) else
               f"spec {limit['schema'].get('default')!r} vs listing.rs {default and default.group(1)}")
        yield ("limit clamp (MAX_LIST_LIMIT) documented",
               None if maximum and f"above {maximum.group(1)}" in limit.get("description", "") else
               f"limit description does not say 'above {maximum and maximum.group(1)}'")
    writer = core / "writer.rs"
    if writer.is_file():
        m = re.search(r"MAX_SUBJECT_BYTES:\s*usize\s*=\s*(\d+)", writer.read_text(encoding="utf-8"))
        got = spec.at("/components/schemas/ForgetRequest/properties/subject").get("maxLength")
        yield ("ForgetRequest subject maxLength == MAX_SUBJECT_BYTES",
               None if m and got == int(m.group(1)) else f"spec {got} vs writer.rs {m and m.group(1)}")
    caps = spec.at(pointer("paths", "/v1/host/wop-memory/capabilities", "get"))
    yield ("capabilities is public (security: [])",
           None if caps.get("security") == [] else f"security is {caps.get('security')!r}")
    # The OAP exchange door's two public documents and the grantee's query (its credential is
    # a grant the function checks) are public too; nothing else.
    oap_public = {"GET /.well-known/oap-memory.json", "GET /.well-known/did.json",
                  "POST /oap/memory/query"}
    public = sorted(f"{m.upper()} {t}" for t, item in spec.doc["paths"].items() for m in METHODS
                    if m in item and item[m].get("security") == []
                    and t != "/v1/host/wop-memory/capabilities"
                    and f"{m.upper()} {t}" not in oap_public)
    yield ("no other operation is public", f"public: {public}" if public else None)


def _run_dir(spec: Spec, files: dict):
    with tempfile.TemporaryDirectory() as d:
        for name, content in files.items():
            Path(d, name).write_text(content if isinstance(content, str) else json.dumps(content))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = check_dir(spec, Path(d))
    return rc, out.getvalue().splitlines()


def self_test(spec: Spec) -> int:
    results = []  # (ok, name, detail)

    try:
        from openapi_spec_validator import validate as validate_openapi
    except ImportError:
        results.append((True, "OpenAPI 3.1 document is valid", "skipped: openapi-spec-validator not installed"))
    except Exception as e:  # noqa: BLE001 - a broken install (e.g. mid-upgrade) must fail, not crash
        results.append((False, "OpenAPI 3.1 document is valid", f"openapi-spec-validator unusable: {_short(str(e))}"))
    else:
        try:
            validate_openapi(spec.doc)
            results.append((True, "OpenAPI 3.1 document is valid (openapi-spec-validator)", ""))
        except Exception as e:  # noqa: BLE001 - any validator complaint is a failure
            results.append((False, "OpenAPI 3.1 document is valid (openapi-spec-validator)", _short(str(e))))
    for name in spec.doc["components"]["schemas"]:
        try:
            Draft202012Validator.check_schema(spec.doc["components"]["schemas"][name])
            results.append((True, f"schema {name} is valid Draft 2020-12", ""))
        except Exception as e:  # noqa: BLE001
            results.append((False, f"schema {name} is valid Draft 2020-12", _short(str(e))))

    for name, exchange in GOOD:
        try:
            check_exchange(spec, exchange)
            results.append((True, f"accepts: {name}", ""))
        except CheckError as e:
            results.append((False, f"accepts: {name}", str(e)))
    for name, expect, exchange in BAD:
        try:
            what = check_exchange(spec, exchange)
            results.append((False, f"rejects: {name}", f"was accepted as {what}"))
        except CheckError as e:
            # Rejected for the intended reason, not for an unrelated one (e.g. a broken lookup):
            # the reported violation, or one of the others found with it.
            ok = expect in str(e) or any(expect in d for d in e.details)
            results.append((ok, f"rejects: {name}", "" if ok else f"wrong reason: {e}"))

    rc, lines = _run_dir(spec, {})
    results.append((rc == 1 and lines[-1:] == ["0 passed, 0 failed"], "empty directory run fails (exit 1)",
                    f"exit {rc}, last line {lines[-1:]}"))
    rc, lines = _run_dir(spec, {"a.json": GOOD[0][1], "b.json": BAD[0][2], "c.json": "{not json"})
    results.append((rc == 1 and lines[-1:] == ["1 passed, 2 failed"], "mixed directory run: 1 passed, 2 failed, exit 1",
                    f"exit {rc}, last line {lines[-1:]}"))
    rc, lines = _run_dir(spec, {f"{i:02}.json": x for i, (_, x) in enumerate(GOOD)})
    results.append((rc == 0 and lines[-1:] == [f"{len(GOOD)} passed, 0 failed"], "all-good directory run exits 0",
                    f"exit {rc}, last line {lines[-1:]}"))

    for name, problem in drift_checks(spec):
        skipped = problem is not None and problem.startswith("skipped")
        results.append((problem is None or skipped, f"drift: {name}", problem or ""))

    failed = 0
    for ok, name, detail in results:
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"  [{detail}]" if detail and (not ok or 'skipped' in detail) else ""))
    print(f"self-test: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv) -> int:
    args = list(argv)
    spec_path = DEFAULT_SPEC
    if "--spec" in args:
        i = args.index("--spec")
        if i + 1 >= len(args):
            print(__doc__, file=sys.stderr)
            return 2
        spec_path = Path(args[i + 1])
        del args[i : i + 2]
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        spec = Spec(spec_path)
    except (OSError, ValueError, TypeError, yaml.YAMLError) as e:
        print(f"cannot load spec {spec_path}: {_short(str(e))}", file=sys.stderr)
        return 2
    if args[0] == "--self-test":
        return self_test(spec)
    return check_dir(spec, Path(args[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
