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
    """An exchange that cannot be checked or does not conform."""


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

    def response_schema(self, method: str, raw_path: str, status: int):
        """Returns (operation label, JSON pointer of the response body schema)."""
        template, m, op = self.operation(method, raw_path)
        label = f"{op.get('operationId', m.upper() + ' ' + template)}"
        responses = op.get("responses") or {}
        key = str(status)
        if key not in responses:
            key = f"{key[0]}XX"
            if key not in responses:
                raise CheckError(f"{label} has no response for status {status}")
        ptr, response = self.deref(pointer("paths", template, m, "responses", key))
        content = response.get("content") or {}
        if "application/json" not in content or "schema" not in content["application/json"]:
            raise CheckError(f"{label} {status}: the spec gives no application/json schema")
        return label, ptr + pointer("content", "application/json", "schema")

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
    label, schema_ptr = spec.response_schema(method, path, status)
    errors = list(spec.validator(schema_ptr).iter_errors(exchange["body"]))
    if errors:
        best = best_match(errors)
        where = best.json_path
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        raise CheckError(f"{label} {status}: body at {where}: {_short(best.message)}{more}")
    return f"{method.upper()} {path.split('?', 1)[0]} -> {status} ({label})"


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
# agrees with the Rust sources it describes (error codes/statuses, limits).

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
        "compaction": {"supported": False},
        "distillation": {"supported": False},
        "list": {"maxLimit": 100},
    },
    "agents": {
        "memoryBackends": ["long-term"],
        "memoryConsolidation": {"supported": False},
        "commitments": {"supported": False},
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


def _err(code, message="m"):
    return {"error": {"code": code, "message": message}}


def _x(method, path, status, body):
    return {"method": method, "path": path, "status": status, "body": body}


GOOD = [
    ("list page, last", _x("GET", LIST + "?memoryRef=x", 200, {"entries": [E1, E2], "nextCursor": None})),
    ("list page, more", _x("GET", LIST, 200, {"entries": [E1], "nextCursor": "YzEuMDFKWC5hYmNk"})),
    ("list, short page with cursor", _x("GET", LIST, 200, {"entries": [], "nextCursor": "YzE"})),
    ("list, CTI-1 empty page", _x("GET", LIST, 200, {"entries": [], "nextCursor": None})),
    ("list, stage prefix", _x("GET", "/prod" + LIST, 200, {"entries": [], "nextCursor": None})),
    ("list 400 invalid_limit", _x("GET", LIST, 400, _err("invalid_limit", "limit must be a positive integer"))),
    ("list 400 invalid_cursor", _x("GET", LIST, 400, _err("invalid_cursor"))),
    ("list 400 invalid_request", _x("GET", LIST, 400, _err("invalid_request"))),
    ("list 401 function", _x("GET", LIST, 401, _err("unauthorized"))),
    ("list 401 gateway", _x("GET", LIST, 401, {"message": "Unauthorized"})),
    ("list 500 internal", _x("GET", LIST, 500, _err("internal", "internal error"))),
    ("list 500 gateway", _x("GET", LIST, 500, {"message": "Internal Server Error"})),
    ("list 429 gateway throttling", _x("GET", LIST, 429, {"message": "Too Many Requests"})),
    ("forget 503 gateway timeout", _x("POST", FORGET, 503, {"message": "Service Unavailable"})),
    ("get entry", _x("GET", GET, 200, E1)),
    ("get entry with expiresAt", _x("GET", GET, 200, E2)),
    ("get 404", _x("GET", GET, 404, _err("not_found", "not found"))),
    ("get 400 invalid_request", _x("GET", GET, 400, _err("invalid_request"))),
    ("get 401", _x("GET", GET, 401, _err("unauthorized"))),
    ("capabilities (HOST_MODEL)", _x("GET", CAPS, 200, CAPS_DOC)),
    ("capabilities, distillation on", _x("GET", CAPS, 200, _with(CAPS_DOC, ["memory", "distillation"], {
        "supported": True, "maxTokenBudget": 4000, "tokenizerName": "cl100k_base",
        "archiveRetention": "P30D", "indexEmitted": True}))),
    ("capabilities, unknown key allowed", _x("GET", CAPS, 200, _with(CAPS_DOC, ["memory", "future"], {"x": 1}))),
    ("forget counts", _x("POST", FORGET, 200, {"deletedEntries": 3, "deletedArchives": 0,
                                               "rebuiltIndexes": 1, "cancelledCommitments": 0})),
    ("forget 400", _x("POST", FORGET, 400, _err("invalid_request"))),
    ("forget 401", _x("POST", FORGET, 401, _err("unauthorized"))),
]

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
    ("createdAt without milliseconds", "$.createdAt: '2023-11-14T22:13:20Z' does not match",
     _x("GET", GET, 200, dict(E1, createdAt="2023-11-14T22:13:20Z"))),
    ("createdAt with microseconds", "$.createdAt: '2023-11-14T22:13:20.123456Z' does not match",
     _x("GET", GET, 200, dict(E1, createdAt="2023-11-14T22:13:20.123456Z"))),
    ("expiresAt with an offset", "$.expiresAt: '2030-01-01T01:00:00.000+01:00' does not match",
     _x("GET", GET, 200, dict(E2, expiresAt="2030-01-01T01:00:00.000+01:00"))),
    ("expiresAt year 10000", "$.expiresAt: '+10000-01-01T00:59:59.000Z' does not match",
     _x("GET", GET, 200, dict(E2, expiresAt="+10000-01-01T00:59:59.000Z"))),
    ("createdAt month 13", "$.createdAt: '2023-13-14T22:13:20.123Z' does not match",
     _x("GET", GET, 200, dict(E1, createdAt="2023-13-14T22:13:20.123Z"))),
    ("createdAt non-ASCII digits", '$.createdAt:',
     _x("GET", GET, 200, dict(E1, createdAt="٢٠٢٣-11-14T22:13:20.123Z"))),
    ("expiresAt null", '$.expiresAt: None is not of type',
     _x("GET", GET, 200, dict(E2, expiresAt=None))),
    ("entry id outside the alphabet", "$.id: 'a/b' does not match",
     _x("GET", GET, 200, dict(E1, id="a/b"))),
    ("unknown error code", "$.error.code: 'bad_limit' is not one of",
     _x("GET", LIST, 400, _err("bad_limit"))),
    ("unknown error code on 404", '$.error.code:', _x("GET", GET, 404, _err("teapot"))),
    ("known code, wrong status", "$.error.code: 'not_found' is not one of",
     _x("GET", LIST, 400, _err("not_found"))),
    ("invalid_limit on get", 'getEntry 400: body at $.error.code',
     _x("GET", GET, 400, _err("invalid_limit"))),
    ("error envelope with an extra field", "('id' was unexpected)",
     _x("GET", GET, 404, {"error": {"code": "not_found", "message": "m", "id": "x"}})),
    ("error without message", "'message' is a required property",
     _x("GET", GET, 404, {"error": {"code": "not_found"}})),
    ("error envelope on 429", "listEntries 429: body at $", _x("GET", LIST, 429, _err("internal"))),
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
     _x("POST", FORGET, 200, {"deletedEntries": -1, "deletedArchives": 0,
                                                       "rebuiltIndexes": 0, "cancelledCommitments": 0})),
    ("forget count missing", "'cancelledCommitments' is a required property",
     _x("POST", FORGET, 200, {"deletedEntries": 1, "deletedArchives": 0,
                                                      "rebuiltIndexes": 0})),
    ("forget count a float", "$.deletedEntries: 1.5 is not of type 'integer'",
     _x("POST", FORGET, 200, {"deletedEntries": 1.5, "deletedArchives": 0,
                                                      "rebuiltIndexes": 0, "cancelledCommitments": 0})),
    # Operation / status lookup must fail, not skip.
    ("unknown path", 'no path in the spec matches',
     _x("GET", "/v1/host/wop-memory/search", 200, {})),
    ("nested id path", 'no path in the spec matches', _x("GET", LIST + "/a/b", 200, E1)),
    ("method without operation", 'the spec has no POST operation',
     _x("POST", LIST, 200, {"entries": [], "nextCursor": None})),
    ("status the operation lacks", 'getCapabilities has no response for status 404',
     _x("GET", CAPS, 404, _err("not_found"))),
    ("unlisted status 418", 'listEntries has no response for status 418',
     _x("GET", LIST, 418, _err("internal"))),
    ("exchange without body", '`body` is missing', {"method": "GET", "path": GET, "status": 404}),
    ("status as a string", '`status` must be an integer', _x("GET", GET, "404", _err("not_found"))),
]


def _parse_match_fn(text: str, name: str) -> dict:
    """`fn name(&self) ... { match self { ARMS } }` -> {normalized pattern: value}."""
    start = text.index(f"fn {name}(")
    m = text.index("match self {", start) + len("match self ")
    depth = 0
    for i in range(m, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                body = text[m + 1 : i]
                break
    else:
        raise ValueError(f"unbalanced braces in fn {name}")
    arms = {}
    for arm in re.finditer(r"((?:\|?\s*CoreError::[^=]*?)+)=>\s*(\"[a-z_]+\"|\d{3})\s*,", body):
        for pat in arm.group(1).split("|"):
            pat = re.sub(r"\s+|\{\.\.\}", "", pat)
            if pat:
                arms[pat] = arm.group(2).strip('"')
    if not arms:
        raise ValueError(f"no match arms found in fn {name}")
    return arms


def _narrowed_codes(node, found):
    """Collects inline `properties.error.properties.code` const/enum narrowings ($refs not followed)."""
    if isinstance(node, dict):
        code = (((node.get("properties") or {}).get("error") or {}).get("properties") or {}).get("code")
        if isinstance(code, dict) and ("const" in code or "enum" in code):
            found.update([code["const"]] if "const" in code else code["enum"])
        for key in ("allOf", "oneOf", "anyOf"):
            for sub in node.get(key, []):
                _narrowed_codes(sub, found)
    return found


def _mentions_envelope(node) -> bool:
    return "#/components/schemas/ErrorEnvelope" in json.dumps(node)


def drift_checks(spec: Spec):
    """Yields (name, problem-or-None) comparing the spec with the Rust sources."""
    core = ROOT / "shared" / "memory-core" / "src"
    error_rs = core / "error.rs"
    if not error_rs.is_file():
        yield ("error.rs drift check", f"skipped: {error_rs} not found")
        return
    text = error_rs.read_text(encoding="utf-8")
    try:
        statuses = _parse_match_fn(text, "http_status")
        codes = _parse_match_fn(text, "code")
    except ValueError as e:
        yield ("parse error.rs code()/http_status()", f"{e}: update drift_checks in {Path(__file__).name}")
        return
    problem = None
    if set(statuses) != set(codes):
        problem = f"code() and http_status() arms differ: {sorted(set(statuses) ^ set(codes))}"
    yield ("parse error.rs code()/http_status()", problem)
    code_status = {codes[p]: int(statuses[p]) for p in codes if p in statuses}
    enum = spec.at("/components/schemas/ErrorCode")["enum"]
    yield ("ErrorCode enum == error.rs code() values",
           None if sorted(enum) == sorted(code_status) else
           f"spec {sorted(enum)} vs error.rs {sorted(code_status)}")
    for template, item in spec.doc["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if not op:
                continue
            for status, _ in (op.get("responses") or {}).items():
                ptr, response = spec.deref(pointer("paths", template, method, "responses", status))
                schema = ((response.get("content") or {}).get("application/json") or {}).get("schema")
                if schema is None or not _mentions_envelope(schema):
                    continue
                name = f"{method.upper()} {template} {status}: codes match http_status()"
                found = _narrowed_codes(schema, set())
                if not found:
                    yield (name, "error response not narrowed to the codes this status can carry")
                    continue
                wrong = sorted(c for c in found if str(code_status.get(c)) != status)
                yield (name, f"codes with another status in error.rs: {wrong}" if wrong else None)
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
            # Rejected for the intended reason, not for an unrelated one (e.g. a broken lookup).
            ok = expect in str(e)
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
