"""Direct-invoke failures through boto3's real Lambda client: always a function error
(`FunctionError` set) whose payload is `{"errorType", "errorMessage"}` with `errorType` one of the
official client's `HTTP_ERROR_CODES`, a message that names the offending field by its schema
path, and never a runtime's own error type (`DeserializeError`, `&alloc::...`), a serde position
(`line 0 column 0`) or the caller's data."""

from __future__ import annotations

import json

import pytest
from openwop_client import HTTP_ERROR_CODES

from wopkit import leaks, memory_ref, new_id, secret_value, sensitive


def check_error(error: dict, code: str = "validation_error") -> str:
    assert set(error) >= {"errorType", "errorMessage"}, error
    assert error["errorType"] in HTTP_ERROR_CODES, (
        f"errorType {error['errorType']!r} is not one of the client's HTTP_ERROR_CODES: {error}")
    assert error["errorType"] == code, error
    message = error["errorMessage"]
    assert isinstance(message, str) and message, error
    for bad in ("line 0", "column 0", "DeserializeError", "alloc::"):
        assert bad not in message, f"{bad!r} in errorMessage: {message!r}"
    assert not leaks(json.dumps(error)), f"error leaks {leaks(json.dumps(error))}"
    return message


@pytest.fixture(scope="module")
def ref(tenant):
    return memory_ref(tenant, "agent-invoke")


def put_payload(tenant: str, ref: str, **overrides) -> dict:
    payload = {"op": "put", "tenantId": tenant, "memoryRef": ref, "runId": "run-py",
               "entries": [{"content": sensitive(f"invoke fact {new_id()}")}], "secrets": []}
    payload.update(overrides)
    return payload


def test_c_invalid_json_is_a_validation_error(invoker, tenant, ref):
    good = json.dumps(put_payload(tenant, ref)).encode()
    for raw in (good[:-7], b"{", b"\xff\xfe{}", b"{'op': 'put'}"):
        check_error(invoker.fail("memory-write", raw))


def test_c_lone_surrogate_is_a_validation_error(invoker, tenant, ref):
    text = json.dumps(put_payload(tenant, ref, entries=[{"content": "CONTENT"}]))
    raw = text.replace('"CONTENT"', '"half a pair \\ud800 here"').encode()
    assert b"\\ud800" in raw
    check_error(invoker.fail("memory-write", raw))


def test_c_nesting_deeper_than_128_is_a_validation_error(invoker, tenant, ref):
    nested = "[" * 200 + "]" * 200
    text = json.dumps(put_payload(tenant, ref))
    raw = (text[:-1] + f', "deep": {nested}}}').encode()
    check_error(invoker.fail("memory-write", raw))
    raw = ('{"op": "put", "entries": ' + "[" * 129 + "]" * 129 + "}").encode()
    check_error(invoker.fail("memory-write", raw))


def test_c_unknown_field_named_like_a_secret_is_not_echoed(invoker, tenant, ref):
    name = secret_value("field-name")
    message = check_error(invoker.fail("memory-write", put_payload(tenant, ref, **{name: 1})))
    assert name not in message
    assert "sk-live" not in message


def test_c_oversize_secret_names_its_value_path(invoker, tenant, ref):
    value = sensitive("s" + "x" * 65_536)  # 65,537 bytes
    assert len(value.encode()) == 65_537
    secret_id = f"big-{new_id()}"
    message = check_error(invoker.fail("memory-write", put_payload(
        tenant, ref, secrets=[{"secretId": secret_id, "value": value}])))
    assert "secrets[0].value" in message, message
    assert "secretId" not in message and secret_id not in message, message


def test_c_wrong_type_names_the_field_path(invoker, tenant, ref):
    for content in (5, None, ["a"], {"text": "a"}):
        message = check_error(invoker.fail("memory-write", put_payload(
            tenant, ref, entries=[{"content": content}])))
        assert "entries[0].content" in message, message


def test_c_positive_control_a_valid_put_succeeds(invoker, tenant, ref):
    out = invoker.ok("memory-write", put_payload(tenant, ref))
    assert len(out["written"]) == 1


BAD_PAYLOADS = {
    "action number": b'{"action": 5}',
    "array": b"[]",
    "string": b'"x"',
    "invalid json": b'{"action": ',
    "null": b"null",
}


@pytest.mark.parametrize("function", ["memory-write", "memory-forget", "memory-dream",
                                      "memory-consolidate", "memory-commitments"])
@pytest.mark.parametrize("payload", list(BAD_PAYLOADS.values()), ids=list(BAD_PAYLOADS))
def test_c_every_invoked_function_rejects_bad_payloads_with_a_documented_code(
        invoker, function, payload):
    check_error(invoker.fail(function, payload))


@pytest.mark.parametrize("function", ["memory-forget", "memory-dream", "memory-consolidate",
                                      "memory-commitments"])
def test_c_field_types_are_checked_by_every_invoked_function(invoker, tenant, ref, function):
    payloads = {
        "memory-forget": [{"tenantId": tenant, "subject": 5}, {"tenantId": 5, "subject": "x"},
                          {"tenantId": tenant}],
        "memory-dream": [{"tenantId": tenant, "memoryRef": 5},
                         {"tenantId": tenant, "memoryRef": ref, "tokenBudget": "lots"}],
        "memory-consolidate": [{"tenantId": tenant, "memoryRef": 5}, {"tenantId": tenant}],
        "memory-commitments": [{"action": "backfill", "tenantId": tenant, "memoryRef": 5},
                               {"action": "tock"}],
    }[function]
    for payload in payloads:
        check_error(invoker.fail(function, payload))


def test_c_a_dream_budget_below_the_floor_is_a_validation_error(invoker, tenant, ref):
    """A `tokenBudget` below the fixed overhead of a summary (32 tokens) is a malformed request,
    not a budget the sources failed to meet: `validation_error` naming the field and the bound."""
    for budget in (1, 31):
        message = check_error(invoker.fail("memory-dream", {"tenantId": tenant, "memoryRef": ref,
                                                            "tokenBudget": budget}))
        assert "tokenBudget" in message and "at least 32" in message, message


def test_c_idempotency_key_replays_and_refuses_another_payload(invoker, api, tenant, ref):
    """A keyed put answers the same on retry and stores once; the key with another payload is
    `idempotency_key_mismatch`, a code from the client's own list; a malformed key is a
    validation error naming `idempotencyKey`."""
    key = f"order-{new_id()}/attempt"
    payload = put_payload(tenant, ref, idempotencyKey=key)
    first = invoker.ok("memory-write", payload)
    again = invoker.ok("memory-write", payload)
    assert again == first, (first, again)
    ids = [w["id"] for w in first["written"]]
    stored = [e["id"] for e in api.list_all(ref)]
    assert sum(stored.count(i) for i in ids) == len(ids), "stored exactly once"
    other = put_payload(tenant, ref, idempotencyKey=key,
                        entries=[{"content": sensitive(f"another fact {new_id()}")}])
    check_error(invoker.fail("memory-write", other), "idempotency_key_mismatch")
    for bad in ("", "has space", "x" * 256):
        message = check_error(invoker.fail("memory-write", put_payload(tenant, ref, idempotencyKey=bad)))
        assert "idempotencyKey" in message, message
    # A keyed delete answers its first answer again.
    target = ids[0]
    delete = {"op": "delete", "tenantId": tenant, "memoryRef": ref, "id": target,
              "idempotencyKey": f"del-{new_id()}"}
    assert invoker.ok("memory-write", delete) == {"deleted": True}
    assert invoker.ok("memory-write", delete) == {"deleted": True}
    assert target not in [e["id"] for e in api.list_all(ref)]
