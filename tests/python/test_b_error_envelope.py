"""The OpenWOP error envelope over HTTP, parsed by the official client: every failure raises
`WopError` whose `.envelope` is the client's `ErrorEnvelope` with a code from the client's own
`HTTP_ERROR_CODES`, the documented status, and nothing of the caller's data in the body."""

from __future__ import annotations

import json

import pytest
from openwop_client import ErrorEnvelope, OpenwopClient, is_http_error_code

from wopkit import (
    BASE,
    Api,
    leaks,
    memory_ref,
    new_id,
    new_tenant,
    query,
    raw_request,
    secret_value,
    sensitive,
)

ENTRIES = f"{BASE}/entries"


@pytest.fixture(scope="module")
def written(api, invoker, tenant):
    """Three entries (one with a subject and a secret) in the module tenant's ref."""
    ref = memory_ref(tenant, "agent-1")
    key = secret_value("env")
    subject = sensitive(f"subject-{new_id()}@example.com")
    contents = [sensitive(f"error envelope fact {n} {new_id()}") for n in range(3)]
    ids = invoker.put(tenant, ref, [
        {"content": f"{contents[0]} {key}", "subject": subject, "tags": ["t"]},
        {"content": contents[1]},
        {"content": contents[2]},
    ], secrets=[{"secretId": "env-key", "value": key}])
    return {"ref": ref, "ids": ids, "subject": subject, "key": key}


def list_path(ref: str, **params) -> str:
    return f"{ENTRIES}?{query({'memoryRef': ref, **params})}"


def get_path(ref: str, entry_id: str) -> str:
    return f"{ENTRIES}/{entry_id}?{query({'memoryRef': ref})}"


@pytest.mark.parametrize("limit", ["0", "-3", "abc"])
def test_b_bad_limit_is_a_validation_error_on_limit(api, written, limit):
    err = api.error("GET", list_path(written["ref"], limit=limit), status=400,
                    code="validation_error")
    assert (err.envelope.details or {}).get("field") == "limit", err.raw_text


def test_b_positive_control_a_good_limit_lists(api, written):
    page = api.list(written["ref"], limit="2")
    assert len(page["entries"]) == 2 and page["nextCursor"]


def test_b_bad_cursors_are_validation_errors_on_cursor(api, invoker, tenant, written):
    err = api.error("GET", list_path(written["ref"], cursor="not-a-cursor-!!"), status=400,
                    code="validation_error")
    assert (err.envelope.details or {}).get("field") == "cursor", err.raw_text
    cursor = api.list(written["ref"], limit="1")["nextCursor"]
    assert cursor, "positive control: a cursor to replay"
    assert len(api.list(written["ref"], limit="1", cursor=cursor)["entries"]) == 1
    other = memory_ref(tenant, "agent-2")
    err = api.error("GET", list_path(other, cursor=cursor), status=400, code="validation_error")
    assert (err.envelope.details or {}).get("field") == "cursor", err.raw_text


def test_b_missing_memory_ref_is_a_validation_error(api):
    api.error("GET", ENTRIES, status=400, code="validation_error")
    api.error("GET", f"{ENTRIES}/01ABCDEFGHJKMNPQRSTVWXYZ00", status=400, code="validation_error")


def test_b_no_token_is_unauthenticated(api, written):
    api.error("GET", list_path(written["ref"]), status=401, code="unauthenticated",
              authenticated=False)
    api.error("GET", get_path(written["ref"], written["ids"][0]), status=401,
              code="unauthenticated", authenticated=False)
    api.error("POST", f"{BASE}/forget", body={"subject": written["subject"]}, status=401,
              code="unauthenticated", authenticated=False)


@pytest.mark.parametrize("claim", [5, ["t1", "t2"], {"id": "t"}, None, ""],
                         ids=["number", "list", "object", "null", "empty"])
def test_b_non_string_or_empty_tenant_claims_are_unauthenticated(base_url, written, claim):
    api = Api(base_url, claims={"tenant_id": claim, "sub": "user-py"})
    api.error("GET", list_path(written["ref"]), status=401, code="unauthenticated")
    api.error("GET", get_path(written["ref"], written["ids"][0]), status=401,
              code="unauthenticated")
    api.error("POST", f"{BASE}/forget", body={"subject": written["subject"]}, status=401,
              code="unauthenticated")


def malformed_refs(tenant: str) -> dict[str, str]:
    return {
        "traversal": "workspaces/../x",
        "agent traversal": f"workspaces/{tenant}/agents/../memories",
        "percent-encoded slash": f"workspaces%2F{tenant}%2Fagents%2Fagent-1%2Fmemories",
        "percent-encoded dot-dot": f"workspaces/{tenant}/agents/%2e%2e/memories",
        "percent-encoded tenant": f"workspaces/%{ord(tenant[0]):02x}{tenant[1:]}/agents/agent-1/memories",
        "nul": f"workspaces/{tenant}/agents/agent-1\x00/memories",
        "oversize": f"workspaces/{tenant}/agents/{'a' * 600}/memories",
        "trailing slash": f"workspaces/{tenant}/agents/agent-1/memories/",
        "whitespace": f" workspaces/{tenant}/agents/agent-1/memories",
    }


def test_b_foreign_and_malformed_refs_are_not_found_and_list_empty(base_url, api, invoker,
                                                                   tenant, written):
    other = new_tenant()
    foreign_ref = memory_ref(other, "agent-1")
    foreign_id = invoker.put(other, foreign_ref,
                             [{"content": sensitive(f"foreign fact {new_id()}")}])[0]
    # Positive controls: the owners read their entries.
    assert Api(base_url, other).get(foreign_ref, foreign_id)["id"] == foreign_id
    assert api.get(written["ref"], written["ids"][0])["id"] == written["ids"][0]

    api.error("GET", get_path(foreign_ref, foreign_id), status=404, code="not_found")
    assert api.list(foreign_ref) == {"entries": [], "nextCursor": None}
    api.error("GET", get_path(written["ref"], foreign_id), status=404, code="not_found")
    for name, bad in malformed_refs(tenant).items():
        api.error("GET", get_path(bad, written["ids"][0]), status=404, code="not_found")
        assert api.list(bad) == {"entries": [], "nextCursor": None}, name


FORGET = f"{BASE}/forget"


def test_b_forget_bodies_are_validated(base_url, api, written):
    api.error("POST", FORGET, body={}, status=400, code="validation_error")
    api.error("POST", FORGET, body={"subjects": written["subject"]}, status=400,
              code="validation_error")
    api.error("POST", FORGET, body=[], status=400, code="validation_error")
    api.error("POST", FORGET, body="x", status=400, code="validation_error")
    api.error("POST", FORGET, body={"subject": 5}, status=400, code="validation_error")
    # Bodies the client cannot produce: sent raw, the body parsed by the client's own parser.
    for body in (b'{"subject": ', b"not json", b""):
        raw = raw_request(base_url, "POST", FORGET, body=body,
                          headers={"Authorization": f"Bearer {api.token}",
                                   "Content-Type": "application/json"})
        assert raw.status == 400, (body, raw.status, raw.text)
        envelope = OpenwopClient._parse_envelope(raw.text)
        assert isinstance(envelope, ErrorEnvelope), raw.text
        assert envelope.error == "validation_error" and is_http_error_code(envelope.error)
        assert not leaks(raw.text)
    # Positive control: the entries are still there (nothing was forgotten).
    assert api.get(written["ref"], written["ids"][0])["id"] == written["ids"][0]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_b_forget_with_another_method_is_405_with_allow(base_url, api, method):
    body = {"subject": "x"} if method == "PUT" else None
    api.error(method, FORGET, body=body, status=405, code="validation_error")
    raw = raw_request(base_url, method, FORGET,
                      body=json.dumps(body).encode() if body else None,
                      headers={"Authorization": f"Bearer {api.token}"})
    assert raw.status == 405
    assert raw.headers.get("allow") == "POST", raw.headers


def test_b_unknown_path_reaching_the_function_is_not_found(api, invoker, tenant):
    """API Gateway only routes the declared paths; an event for any other path (a route added
    in the template before the function knows it, or a direct invoke) gets the function's 404."""
    for path in (f"{BASE}/nope", f"{BASE}/entries/a/b", f"{BASE}/"):
        event = {
            "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
            "headers": {"authorization": f"Bearer {api.token}"},
            "requestContext": {
                "accountId": "123456789012", "apiId": "abc123", "stage": "$default",
                "requestId": f"req-{new_id()}", "routeKey": "$default",
                "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
                "http": {"method": "GET", "path": path, "protocol": "HTTP/1.1",
                         "sourceIp": "203.0.113.10", "userAgent": "py"},
                "authorizer": {"jwt": {"claims": {"tenant_id": tenant}, "scopes": None}},
                "time": "22/Nov/2026:10:00:00 +0000", "timeEpoch": 1795000000000,
            },
            "isBase64Encoded": False,
        }
        response = invoker.ok("memory-read", event)
        assert response["statusCode"] == 404, (path, response)
        envelope = OpenwopClient._parse_envelope(response["body"])
        assert isinstance(envelope, ErrorEnvelope), response
        assert envelope.error == "not_found" and is_http_error_code(envelope.error)


def test_b_paths_outside_the_routes_get_api_gateways_own_404(base_url, api):
    for method, path in (("GET", f"{BASE}/nope"), ("POST", ENTRIES), ("GET", "/")):
        raw = raw_request(base_url, method, path,
                          headers={"Authorization": f"Bearer {api.token}"})
        assert (raw.status, raw.json()) == (404, {"message": "Not Found"}), (method, path)
        assert OpenwopClient._parse_envelope(raw.text) is None
