"""The MCP server (`/v1/host/wop-memory/mcp`) through the real memory-mcp binary behind the local
gateway (API Gateway + JWT authorizer stand-in), driven by the official `mcp` Python SDK's
Streamable HTTP client: initialize, list the tools, call each one; cross-tenant and malformed-ref
probes (empty / not found, never data); a secret given to `memory_write` and one from the
server's configuration come back redacted; errors are tool errors carrying the REST envelope's
codes; the server keeps no session (a bare `tools/call` without `initialize` is answered).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from openwop_client import is_http_error_code

from conftest import secret_gateway
from wopkit import (
    BASE,
    Api,
    leaks,
    memory_ref,
    mint_jwt,
    new_tenant,
    raw_request,
    secret_value,
    sensitive,
)

CONFIGURED_SECRET = secret_value("mcp-configured")
TOOLS = ["memory_search", "memory_list", "memory_get", "memory_write", "memory_delete",
         "memory_forget"]


@pytest.fixture(scope="module")
def mcp_url() -> str:
    with secret_gateway("python-e2e-mcp", "configured", CONFIGURED_SECRET,
                        logged="mcp tool") as url:
        yield url


def session(base_url: str, tenant: str | None,
            body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Runs `body` in an initialized MCP session of the official client, as `tenant`."""
    async def run() -> Any:
        headers = {"Authorization": f"Bearer {mint_jwt({'tenant_id': tenant})}"} if tenant else {}
        # trust_env=False: the local gateway is reached directly, never through a proxy.
        async with httpx2.AsyncClient(headers=headers, trust_env=False, timeout=60) as http:
            async with streamable_http_client(f"{base_url}{BASE}/mcp", http_client=http) as (
                    read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    return await body(s)
    return asyncio.run(run())


def calls(base_url: str, tenant: str, *steps: tuple[str, dict[str, Any]]) -> list[Any]:
    """Each (tool, arguments) in one session; the `CallToolResult`s in order."""
    async def body(s: ClientSession) -> list[Any]:
        return [await s.call_tool(name, args) for name, args in steps]
    return session(base_url, tenant, body)


def ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    data = result.structured_content
    assert json.loads(result.content[0].text) == data
    return data


def tool_error(result: Any, code: str, field: str | None = None) -> dict[str, Any]:
    """The result is an MCP tool error whose content is the REST envelope with `code`."""
    assert result.is_error, result
    envelope = result.structured_content
    assert json.loads(result.content[0].text) == envelope
    assert envelope["error"] == code and is_http_error_code(code), envelope
    assert envelope["message"]
    if field is not None:
        assert envelope["details"]["field"] == field, envelope
    assert not leaks(json.dumps(envelope)), envelope
    return envelope


def test_initialize_and_list_the_tools_with_schemas(mcp_url: str):
    tenant = new_tenant()

    async def body(s: ClientSession):
        return s.initialize_result, await s.list_tools()

    init, listed = session(mcp_url, tenant, body)
    assert init.server_info.name == "wop-memory"
    assert init.capabilities.tools is not None
    assert [t.name for t in listed.tools] == TOOLS
    for t in listed.tools:
        schema = t.input_schema
        assert schema["type"] == "object" and schema.get("additionalProperties") is False, t
        assert t.description and len(t.description) > 40, t.name
        required = set(schema.get("required", []))
        if t.name == "memory_forget":
            assert required == {"subject"}
        else:
            assert "memoryRef" in required, (t.name, required)
            assert schema["properties"]["memoryRef"]["description"], t.name
    annotations = {t.name: t.annotations for t in listed.tools}
    assert annotations["memory_list"].read_only_hint is True
    assert annotations["memory_forget"].destructive_hint is True


def test_every_tool_through_the_client_with_secrets_redacted(mcp_url: str):
    tenant = new_tenant()
    ref = memory_ref(tenant, "mcp-bot")
    secret = secret_value("mcp-call")
    content = sensitive(f"the staging deploy key is {secret} and {CONFIGURED_SECRET} rotates "
                        "on fridays")
    written, = calls(mcp_url, tenant, ("memory_write", {
        "memoryRef": ref, "entries": [{"content": content, "tags": ["ops"]}],
        "secrets": [{"secretId": "deploy-key", "value": secret}]}))
    entry_id = ok(written)["written"][0]["id"]
    got, listed, found, by_tag = calls(
        mcp_url, tenant,
        ("memory_get", {"memoryRef": ref, "id": entry_id}),
        ("memory_list", {"memoryRef": ref}),
        ("memory_search", {"memoryRef": ref, "query": "deploy key fridays"}),
        ("memory_list", {"memoryRef": ref, "tags": ["ops"], "limit": 5}))
    entry = ok(got)
    assert entry["content"] == ("the staging deploy key is [REDACTED:deploy-key] and "
                                "[REDACTED:configured] rotates on fridays")
    assert ok(listed) == {"entries": [entry], "nextCursor": None}
    assert [r["entry"]["id"] for r in ok(found)["results"]] == [entry_id]
    assert ok(found)["results"][0]["score"] > 0
    assert [e["id"] for e in ok(by_tag)["entries"]] == [entry_id]
    # The REST door sees the same entry (one store, one SR-1 chokepoint).
    assert Api(mcp_url, tenant).get(ref, entry_id)["content"] == entry["content"]

    deleted, again, gone = calls(mcp_url, tenant,
                                 ("memory_delete", {"memoryRef": ref, "id": entry_id}),
                                 ("memory_delete", {"memoryRef": ref, "id": entry_id}),
                                 ("memory_get", {"memoryRef": ref, "id": entry_id}))
    assert ok(deleted) == {"deleted": True} and ok(again) == {"deleted": False}
    tool_error(gone, "not_found")

    subject = sensitive(f"customer-{new_tenant()}")
    kept_ref = memory_ref(tenant, "other-agent")
    w1, w2, forgot, left, kept = calls(
        mcp_url, tenant,
        ("memory_write", {"memoryRef": ref, "entries": [
            {"content": sensitive("prefers tea"), "subject": subject}]}),
        ("memory_write", {"memoryRef": kept_ref, "entries": [{"content": "unrelated"}]}),
        ("memory_forget", {"subject": subject}),
        ("memory_list", {"memoryRef": ref}),
        ("memory_list", {"memoryRef": kept_ref}))
    ok(w1), ok(w2)
    counts = ok(forgot)
    assert counts["deletedEntries"] == 1, counts
    assert set(counts) == {"deletedEntries", "deletedArchives", "rebuiltIndexes",
                           "cancelledCommitments"}
    assert ok(left)["entries"] == []
    assert [e["content"] for e in ok(kept)["entries"]] == ["unrelated"]


def test_cross_tenant_and_malformed_refs_give_empty_or_not_found(mcp_url: str):
    owner = new_tenant()
    ref = memory_ref(owner, "bot")
    written, = calls(mcp_url, owner, ("memory_write", {
        "memoryRef": ref, "entries": [{"content": sensitive("owner's private note")}]}))
    entry_id = ok(written)["written"][0]["id"]
    intruder = new_tenant()
    malformed = [ref, f"workspaces/{owner}/agents/../memories", f"workspaces/{owner}/agents/bot",
                 "workspaces/%2e%2e/agents/bot/memories", "", "x" * 600,
                 f"workspaces/{owner}/agents/bot/memories\u0000"]
    for probe in malformed:
        results = calls(mcp_url, intruder,
                        ("memory_list", {"memoryRef": probe}),
                        ("memory_search", {"memoryRef": probe, "query": "private note"}),
                        ("memory_get", {"memoryRef": probe, "id": entry_id}),
                        ("memory_delete", {"memoryRef": probe, "id": entry_id}),
                        ("memory_write", {"memoryRef": probe,
                                          "entries": [{"content": "planted"}]}))
        listed, found, got, deleted, write = results
        assert ok(listed) == {"entries": [], "nextCursor": None}, probe
        assert ok(found) == {"results": []}, probe
        tool_error(got, "not_found")
        assert ok(deleted) == {"deleted": False}, probe
        tool_error(write, "validation_error", "memoryRef")
    # The owner's own malformed refs are no better.
    for probe in malformed[1:]:
        listed, got = calls(mcp_url, owner, ("memory_list", {"memoryRef": probe}),
                            ("memory_get", {"memoryRef": probe, "id": entry_id}))
        assert ok(listed)["entries"] == []
        tool_error(got, "not_found")
    # The entry is untouched, and nothing was planted.
    assert [e["id"] for e in Api(mcp_url, owner).list_all(ref)] == [entry_id]


def test_errors_are_tool_errors_with_the_rest_codes(mcp_url: str):
    tenant = new_tenant()
    ref = memory_ref(tenant, "bot")
    results = calls(
        mcp_url, tenant,
        ("memory_list", {"memoryRef": ref, "limit": 0}),
        ("memory_list", {"memoryRef": ref, "cursor": "not-a-cursor"}),
        ("memory_list", {"memoryRef": ref, "colour": "blue"}),
        ("memory_search", {"memoryRef": ref, "query": "  "}),
        ("memory_search", {"memoryRef": ref, "query": "x", "mode": "semantic"}),
        ("memory_write", {"memoryRef": ref, "entries": []}),
        ("memory_write", {"memoryRef": ref, "entries": [{"content": "x" * 65_537}]}),
        ("memory_write", {"memoryRef": ref, "entries": [{"content": "x"}],
                          "secrets": [{"secretId": "bad id!", "value": "v"}]}),
        ("memory_get", {"memoryRef": ref}),
        ("memory_forget", {"subject": ""}),
    )
    fields = ["limit", "cursor", None, None, "mode", "entries", "entries[0].content",
              "secrets[0].secretId", None, "subject"]
    for result, field in zip(results, fields):
        tool_error(result, "validation_error", field)


def test_no_token_is_the_rest_401_and_no_session_is_kept(mcp_url: str):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}}
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    got = raw_request(mcp_url, "POST", f"{BASE}/mcp", body=json.dumps(init).encode(),
                      headers=headers)
    assert got.status == 401 and got.json()["error"] == "unauthenticated", got.text
    tenant = new_tenant()
    ref = memory_ref(tenant, "bot")
    authed = dict(headers, Authorization=f"Bearer {mint_jwt({'tenant_id': tenant})}")
    got = raw_request(mcp_url, "POST", f"{BASE}/mcp", body=json.dumps(init).encode(),
                      headers=authed)
    assert got.status == 200 and got.headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in got.headers, "stateless: no session to route back to"
    # A tools/call with no initialize before it (another container may have served that).
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "memory_list", "arguments": {"memoryRef": ref}}}
    got = raw_request(mcp_url, "POST", f"{BASE}/mcp", body=json.dumps(call).encode(),
                      headers=dict(authed, **{"MCP-Protocol-Version": "2025-06-18"}))
    assert got.status == 200, got.text
    answer = got.json()
    assert answer["id"] == 2 and answer["result"]["structuredContent"] == {
        "entries": [], "nextCursor": None}, answer


def test_the_transports_refusals_are_plain_text_as_the_openapi_says(mcp_url: str):
    """406 (an Accept without JSON or SSE) and 415 (a body that is not JSON) are the MCP
    transport's own answers, plain text; the recorded exchanges go through the OpenAPI check."""
    tenant = new_tenant()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}}
    auth = {"Authorization": f"Bearer {mint_jwt({'tenant_id': tenant})}"}
    got = raw_request(mcp_url, "POST", f"{BASE}/mcp", body=json.dumps(init).encode(),
                      headers=dict(auth, **{"Content-Type": "application/json",
                                            "Accept": "text/html"}))
    assert got.status == 406, got.text
    assert got.headers["content-type"].startswith("text/plain"), got.headers
    got = raw_request(mcp_url, "POST", f"{BASE}/mcp", body=json.dumps(init).encode(),
                      headers=dict(auth, **{"Content-Type": "text/plain",
                                            "Accept": "application/json, text/event-stream"}))
    assert got.status == 415, got.text
    assert got.headers["content-type"].startswith("text/plain"), got.headers
