"""The OAP memory-exchange door (RFC 0010) end to end, with a grantee written from the
specification alone: docs/spec/oap-rfc0010-memory-exchange.md and docs/oap.md (the host's wire,
choices and verification rules). Nothing here is taken from the implementation.

Every byte convention is checked with the official `oap-sdk` 0.1.0's own functions
(`canonicalize`, `sha256_hex`, `sign_ed25519`, `load_signing_key`, `export_private_key_pem`,
`build_did_document`); signatures are verified with `cryptography`'s Ed25519 over the key of the
host's `did:web` document, and that key is checked against the signing seed stored in Secrets
Manager (read with boto3, never printed).

The module runs its own gateway (`start_gateway("oap", exchanges=False)`): the exchange routes
are not OpenWOP routes, so their exchanges are not recorded for the OpenAPI check. The last test
stops it and scans the functions' logs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets as _secrets
import threading
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (Ed25519PrivateKey,
                                                               Ed25519PublicKey)
from oap_sdk import (SigningKeys, canonicalize, export_private_key_pem, load_signing_key,
                     sha256_hex, sign_ed25519)
from oap_sdk.manifest import build_did_document

from conftest import start_gateway
from wopkit import (Api, EventTap, Gateway, Invoker, RawResponse, aws_client, b64url, leaks,
                    memory_ref, mint_jwt, new_id, new_tenant, of_type, raw_request, rfc3339_in,
                    sensitive)

PROFILE = "oap.profile.projection.contact.v1"
RFC_KINDS = {"fact", "preference", "conversation_turn", "summary", "observation",
             "document_reference"}
RECEIPT_KEYS = {"receipt_id", "type", "timestamp", "principal_did", "agent_did", "tool_did",
                "action_id", "input_hash", "output_hash", "cost", "policy_decisions",
                "previous_receipt_hash", "signatures", "self_hash"}
ITEM_KEYS_ALWAYS = {"item_id", "owner_did", "scope_id", "kind", "content", "provenance",
                    "labels", "exportable", "chain", "chain_hash"}
ITEM_KEYS_OPTIONAL = {"subject_entity_id", "ttl_days"}
ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
GRANTEE = "did:web:contractor.example"
DAY = 86400


# ---------------------------------------------------------------------------------------------
# Fixtures: the module's gateway and what the host publishes.


@pytest.fixture(scope="module")
def oap_gw() -> Gateway:
    gw = start_gateway("oap", exchanges=False)
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def base(oap_gw: Gateway) -> str:
    return oap_gw.base_url


@dataclass
class Host:
    """What a grantee learns from the two public documents."""

    did: str
    manifest: dict[str, Any]
    did_doc: dict[str, Any]
    key: Ed25519PublicKey


@pytest.fixture(scope="module")
def host(base: str) -> Host:
    manifest = get_json(base, "/.well-known/oap-memory.json")
    did_doc = get_json(base, "/.well-known/did.json")
    did = did_doc["id"]
    method = [m for m in did_doc["verificationMethod"] if m["id"] == f"{did}#oap-signing"]
    assert len(method) == 1, did_doc
    jwk = method[0]["publicKeyJwk"]
    assert jwk["kty"] == "OKP" and jwk["crv"] == "Ed25519", jwk
    key = Ed25519PublicKey.from_public_bytes(b64url_decode(jwk["x"]))
    return Host(did, manifest, did_doc, key)


# ---------------------------------------------------------------------------------------------
# Helpers: the wire.


def b64url_decode(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def get_json(base: str, path: str) -> dict[str, Any]:
    resp = raw_request(base, "GET", path)
    assert resp.status == 200, (path, resp.status, resp.text)
    body = resp.json()
    assert isinstance(body, dict), body
    return body


def jwt_headers(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {mint_jwt({'tenant_id': tenant, 'sub': 'user-py'})}",
            "Content-Type": "application/json"}


class Granter:
    """A tenant's side of the door: grant, revoke, receipts (JWT routes)."""

    def __init__(self, base: str, tenant: str) -> None:
        self.base, self.tenant = base, tenant

    def grant_raw(self, body: Any) -> RawResponse:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return raw_request(self.base, "POST", "/oap/memory/grant", body=data,
                           headers=jwt_headers(self.tenant))

    def grant(self, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.grant_raw(body)
        assert resp.status == 200, (resp.status, resp.text)
        out = resp.json()
        assert set(out) == {"grant", "token", "slice_items", "receipt"}, out
        return out

    def revoke_raw(self, grant_id: str) -> RawResponse:
        return raw_request(self.base, "POST", f"/oap/memory/grant/{grant_id}/revoke", body=b"",
                           headers=jwt_headers(self.tenant))

    def receipts_raw(self, query: str = "") -> RawResponse:
        return raw_request(self.base, "GET", f"/oap/memory/receipts{query}",
                           headers=jwt_headers(self.tenant))

    def receipts(self, page: int = 100) -> list[dict[str, Any]]:
        """The whole log, oldest first, following next_from."""
        out: list[dict[str, Any]] = []
        frm: Any = None
        for _ in range(200):
            q = f"?limit={page}" + (f"&from={frm}" if frm is not None else "")
            resp = self.receipts_raw(q)
            assert resp.status == 200, (resp.status, resp.text)
            body = resp.json()
            assert set(body) == {"receipts", "next_from"}, body
            assert len(body["receipts"]) <= page, body
            out.extend(body["receipts"])
            frm = body["next_from"]
            if frm is None:
                return out
        raise AssertionError("more than 200 pages of receipts")


def new_granter(base: str) -> tuple[str, str, Granter]:
    """A fresh tenant, its assistant's memoryRef and its side of the door."""
    tenant = new_tenant()
    return tenant, memory_ref(tenant, "assistant"), Granter(base, tenant)


def grant_body(ref: str, **over: Any) -> dict[str, Any]:
    body = {"grantee": GRANTEE, "purpose": "Brief the contractor on the redesign.",
            "scope_id": ref, "filter": {}, "max_items": 50, "expires_at": rfc3339_in(3600),
            "revocable": True, "redaction_profile": PROFILE, "scopes": ["items"]}
    body.update(over)
    return body


def query_raw(base: str, token: str | None, body: Any, *,
              content_type: str = "application/json") -> RawResponse:
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return raw_request(base, "POST", "/oap/memory/query", body=data, headers=headers)


def query(base: str, token: str, text: str, max_results: int = 20, *,
          content_type: str = "application/json") -> dict[str, Any]:
    resp = query_raw(base, token, {"query": text, "max_results": max_results,
                                   "include_embeddings": False}, content_type=content_type)
    assert resp.status == 200, (resp.status, resp.text)
    assert not leaks(resp.text), f"query answer leaks {leaks(resp.text)}"
    out = resp.json()
    assert set(out) == {"grant_id", "items", "receipt"}, out
    assert len(out["items"]) <= max_results, out
    return out


def expect_error(resp: RawResponse, status: int, code: str, *,
                 field: str | tuple[str, ...] | None = None,
                 absent: tuple[str, ...] = ()) -> dict[str, Any]:
    """`resp` is the host's error envelope with `status` and `code` (and `details.field` when
    given); it carries no registered string and none of `absent` (tokens, content)."""
    assert resp.status == status, f"status {resp.status}, expected {status}: {resp.text}"
    body = resp.json()
    assert isinstance(body, dict), body
    assert set(body) <= {"error", "message", "details"}, body
    assert body["error"] == code, body
    assert isinstance(body["message"], str) and body["message"], body
    if field is not None:
        accepted = (field,) if isinstance(field, str) else field
        assert (body.get("details") or {}).get("field") in accepted, body
    assert not leaks(resp.text), f"error body leaks {leaks(resp.text)}"
    for s in absent:
        assert s not in resp.text, f"error body carries {s[:40]!r}"
    return body


def served(url: str) -> bool:
    """Some method of `url` reaches a function (the gateway's own answer to a path it does not
    route is `404 {"message": "Not Found"}`, as API Gateway's)."""
    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}"
    for method in ("GET", "POST"):
        resp = raw_request(base, method, parts.path, body=b"{}" if method == "POST" else None,
                           headers={"Content-Type": "application/json"})
        try:
            unrouted = resp.status == 404 and resp.json() == {"message": "Not Found"}
        except ValueError:
            unrouted = False
        if not unrouted:
            return True
    return False


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# ---------------------------------------------------------------------------------------------
# Helpers: verification, with oap-sdk's functions.


def h(obj: Any) -> str:
    """`sha256:` + sha256_hex of the canonical JSON."""
    return "sha256:" + sha256_hex(canonicalize(obj))


def verify(key: Ed25519PublicKey, signature_b64: str, payload: Any) -> None:
    """Ed25519 over canonicalize(payload), standard base64 signature (sign_ed25519's form)."""
    sig = base64.b64decode(signature_b64, validate=True)
    try:
        key.verify(sig, canonicalize(payload).encode("utf-8"))
    except InvalidSignature:
        raise AssertionError(f"signature does not verify over {canonicalize(payload)[:200]}")


def verify_grant(host: Host, out: dict[str, Any]) -> dict[str, Any]:
    """The grant's own signature and the JWS token's; returns the token's header."""
    grant = out["grant"]
    verify(host.key, grant["signature"], {k: v for k, v in grant.items() if k != "signature"})
    parts = out["token"].split(".")
    assert len(parts) == 3, "the token is not a compact JWS"
    header = json.loads(b64url_decode(parts[0]))
    assert header.get("alg") == "EdDSA", header
    assert header.get("kid") == f"{host.did}#oap-signing", header
    assert b64url_decode(parts[1]) == canonicalize(grant).encode("utf-8"), \
        "the JWS payload is not the signed grant's canonical JSON"
    try:
        host.key.verify(b64url_decode(parts[2]), f"{parts[0]}.{parts[1]}".encode("ascii"))
    except InvalidSignature:
        raise AssertionError("the JWS signature does not verify with the DID key")
    return header


def verify_receipt(host: Host, r: dict[str, Any]) -> None:
    assert set(r) == RECEIPT_KEYS, sorted(r)
    m = re.fullmatch(r"urn:oap:receipt:(.+)", r["receipt_id"])
    assert m and ULID.fullmatch(m.group(1)), r["receipt_id"]
    assert r["tool_did"] == host.did, r
    assert r["input_hash"].startswith("sha256:") and r["output_hash"].startswith("sha256:"), r
    assert isinstance(r["policy_decisions"], list), r
    when(r["timestamp"])
    assert len(r["signatures"]) >= 1, r
    core = {k: v for k, v in r.items() if k not in ("signatures", "self_hash")}
    for sig in r["signatures"]:
        assert sig["by"] == f"{host.did}#oap-signing" and sig["alg"] == "EdDSA", sig
        verify(host.key, sig["value"], core)
    assert r["self_hash"] == h({k: v for k, v in r.items() if k != "self_hash"}), \
        "self_hash is not the hash of the receipt with its signatures"


def verify_log(host: Host, log: list[dict[str, Any]]) -> None:
    """Each receipt verifies and names the one before (`genesis` first): one unforked chain."""
    assert log, "empty receipt log"
    prev = "genesis"
    seen: set[str] = set()
    for i, r in enumerate(log):
        verify_receipt(host, r)
        assert r["previous_receipt_hash"] == prev, f"receipt {i} does not link to receipt {i-1}"
        assert r["receipt_id"] not in seen, f"receipt {i} repeated"
        seen.add(r["receipt_id"])
        prev = r["self_hash"]


def link_hash(link: dict[str, Any]) -> str:
    return link["hash"] if "withheld" in link else h(link)


def text_hashes(text: str) -> set[str]:
    # docs/oap.md names `content_sha256` "of the text" without fixing its form; both the bare
    # sha256_hex and the `sha256:`-prefixed one (the form of every other hash) are accepted.
    return {sha256_hex(text), "sha256:" + sha256_hex(text)}


def verify_chain(item: dict[str, Any]) -> list[dict[str, Any]]:
    """docs/oap.md "Item chains": every shown link's `prev` is the hash of the one before (or
    `genesis`), the last link's hash is `chain_hash`, and its `content_sha256` is the hash of
    the text received. Returns the chain."""
    chain = item["chain"]
    assert isinstance(chain, list) and chain, item
    prev = None
    for i, link in enumerate(chain):
        if "seq" in link:
            assert link["seq"] == i, chain
        if "withheld" in link:
            assert i == 0, "only the origin link is ever withheld"
            assert set(link) == {"seq", "hash", "withheld"}, link
            assert link["hash"].startswith("sha256:"), link
        else:
            assert link["prev"] == ("genesis" if i == 0 else prev), \
                f"link {i} of {item['item_id']} does not name the hash of link {i-1}"
        prev = link_hash(link)
    assert item["chain_hash"] == prev, "chain_hash is not the hash of the last link"
    assert chain[-1].get("content_sha256") in text_hashes(item["content"]["text"]), \
        "the last link's content_sha256 is not the hash of the text received"
    return chain


def check_origin(link: dict[str, Any], item: dict[str, Any], ref: str) -> None:
    assert link["op"] == "capture", link
    assert link["item_id"] == item["item_id"] and link["scope_id"] == ref, link
    assert link["captured_at"] == item["provenance"]["captured_at"], link
    assert sorted(link["labels"]) == sorted(item["labels"]), link
    assert link.get("salt") and link.get("content_sha256"), link


# ---------------------------------------------------------------------------------------------
# The signing seed (never printed: no assertion below shows it).


def stored_keys() -> SigningKeys:
    """SigningKeys of the seed in Secrets Manager, through the SDK's own loader."""
    seed = aws_client("secretsmanager").get_secret_value(
        SecretId=os.environ["OAP_SIGNING_SECRET"])["SecretString"]
    is_hex_seed = re.fullmatch(r"[0-9a-fA-F]{64}", seed) is not None
    assert is_hex_seed, "the local signing secret is not 64 hex characters"
    private = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed))
    return load_signing_key(export_private_key_pem(private))


def seed_found_in(text: str) -> bool:
    seed = aws_client("secretsmanager").get_secret_value(
        SecretId=os.environ["OAP_SIGNING_SECRET"])["SecretString"]
    return seed.lower() in text.lower()


# ---------------------------------------------------------------------------------------------
# 1. The manifest, and its limits enforced.


def test_manifest_is_public_complete_and_its_limits_are_enforced(base: str, host: Host):
    resp = raw_request(base, "GET", "/.well-known/oap-memory.json")  # no credential at all
    assert resp.status == 200, resp.text
    m = resp.json()
    assert m == host.manifest
    for key in ("principal", "scopes", "embedding_profiles", "kinds_supported", "endpoints",
                "max_grant_size_items", "memory_exchange"):
        assert key in m, f"manifest lacks {key}: {m}"
    assert m["principal"] == host.did
    netloc = urlsplit(base).netloc
    assert host.did.startswith("did:web:"), host.did
    method_id = host.did[len("did:web:"):]
    assert ":" not in method_id and unquote(method_id) == netloc, \
        f"{host.did} is not did:web of {netloc} with its port percent-encoded"
    assert isinstance(m["scopes"], list) and m["scopes"], m
    assert all(isinstance(s, str) and s for s in m["scopes"]), m
    assert isinstance(m["embedding_profiles"], list), m
    if not os.environ.get("EMBEDDING_MODEL_ID"):
        assert m["embedding_profiles"] == [], "profiles advertised without an embedder"
    assert set(m["kinds_supported"]) == RFC_KINDS and len(m["kinds_supported"]) == 6, m
    ep = m["endpoints"]
    assert ep.get("query") == f"{base}/oap/memory/query", ep
    assert ep.get("grant") == f"{base}/oap/memory/grant", ep
    assert ep.get("export") == f"{base}/oap/memory/export", ep
    assert ep.get("import") == f"{base}/oap/memory/import", ep
    for name, url in ep.items():
        assert url.startswith(f"{base}/"), f"endpoint {name} is not an absolute URL here: {url}"
        assert served(url.replace("{grant_id}", "mgr_probe")), f"endpoint {name} is not served"
    assert m["max_grant_size_items"] == 10000, m
    mx = m["memory_exchange"]
    assert mx["supported"] is True, mx
    assert mx["max_grant_duration_days"] == 180, mx
    assert mx["max_grant_size_items"] == m["max_grant_size_items"], mx
    assert isinstance(mx["supported_redaction_profiles"], list), mx
    assert PROFILE in mx["supported_redaction_profiles"], mx

    # Each advertised limit is enforced: at the limit accepted, past it refused.
    tenant, ref, g = new_granter(base)
    size, days = mx["max_grant_size_items"], mx["max_grant_duration_days"]
    g.grant(grant_body(ref, max_items=size))
    expect_error(g.grant_raw(grant_body(ref, max_items=size + 1)), 400, "validation_error",
                 field="max_items")
    g.grant(grant_body(ref, expires_at=rfc3339_in(days * DAY - 3600)))
    expect_error(g.grant_raw(grant_body(ref, expires_at=rfc3339_in(days * DAY + 3600))), 400,
                 "validation_error", field="expires_at")
    # Other checked fields of a grant request.
    odd = new_id()
    for field, value in (("max_items", 0), ("expires_at", rfc3339_in(-60)),
                         ("grantee", f"contractor-{odd}.example"), ("purpose", ""),
                         ("purpose", f"purpose-{odd}-" + "x" * 1000),
                         ("purpose", "\u00e9" * 501),  # 1002 bytes, 501 characters
                         ("redaction_profile", f"oap.profile.projection.none-{odd}.v1"),
                         ("scopes", ["items", f"everything-{odd}"])):
        accepted = ("scopes", "scopes[1]") if field == "scopes" else field
        expect_error(g.grant_raw(grant_body(ref, **{field: value})), 400, "validation_error",
                     field=accepted, absent=(odd,))
    g.grant(grant_body(ref, purpose="\u00e9" * 500))  # exactly 1000 bytes
    expect_error(g.grant_raw({**grant_body(ref), "granter": "did:web:evil.example"}), 400,
                 "validation_error")
    # No JWT: the grant route is the tenant's.
    resp = raw_request(base, "POST", "/oap/memory/grant",
                       body=json.dumps(grant_body(ref)).encode(),
                       headers={"Content-Type": "application/json"})
    expect_error(resp, 401, "unauthenticated")


# ---------------------------------------------------------------------------------------------
# 2. The DID document is the SDK's, with the stored key.


def test_did_document_is_the_sdks_shape_with_the_stored_key(base: str, host: Host):
    doc = host.did_doc
    domain = unquote(host.did[len("did:web:"):])
    published = [m for m in doc["verificationMethod"]
                 if m["id"] == f"{host.did}#oap-signing"][0]["publicKeyJwk"]
    assert "d" not in published, "the DID document publishes private key material"
    sdk = build_did_document(host.did, domain, {k: published[k] for k in ("kty", "crv", "x")})
    for part in ("@context", "id", "verificationMethod", "assertionMethod", "authentication"):
        assert doc.get(part) == sdk[part], f"{part}: {doc.get(part)!r} != SDK {sdk[part]!r}"

    keys = stored_keys()
    assert keys.public_jwk["x"] == published["x"], "the published key is not the stored seed's"
    assert build_did_document(host.did, domain, keys.public_jwk)["verificationMethod"] == \
        doc["verificationMethod"]
    # The pair matches: what the stored key signs (sign_ed25519) the published key verifies.
    probe = {"probe": new_id()}
    verify(host.key, sign_ed25519(keys.private_key, probe), probe)
    # And neither public document carries the seed.
    manifest_text = raw_request(base, "GET", "/.well-known/oap-memory.json").text
    did_text = raw_request(base, "GET", "/.well-known/did.json").text
    found = seed_found_in(manifest_text + did_text)
    assert not found, "a public document carries the signing seed"


# ---------------------------------------------------------------------------------------------
# 3. The full flow: write, grant, verify, query as the grantee.


def test_full_flow_grant_verify_query_project_and_chain(base: str, host: Host):
    tenant, ref, g = new_granter(base)
    inv = Invoker(base)
    label = f"website_redesign_{new_id()}"
    subject, other_subject = f"ent_proj_web_{new_id()}", f"ent_person_{new_id()}"
    email = sensitive(f"jane.{new_id()}@example.com")
    phone_local = f"79{_secrets.randbelow(100):02d} {_secrets.randbelow(10**4):04d}"
    phone = sensitive(f"+44 20 {phone_local}")
    contact_text = (f"Redesign kickoff: the hero uses the teal palette. Mail {email} or call "
                    f"{phone} for the assets.")
    entries = [
        {"content": contact_text, "tags": [label, "kind:fact"]},
        {"content": "Redesign navigation gets a mega menu for the catalogue.",
         "tags": [label], "subject": subject, "expiresAt": rfc3339_in(30 * DAY)},
        {"content": "Redesign budget was approved by finance.", "tags": ["finance"]},
        {"content": "Redesign reviewer prefers serif headings.", "tags": [label],
         "subject": other_subject},
        {"content": "Redesign preference: dark mode first.", "tags": [label, "kind:preference"]},
    ]
    ids = inv.put(tenant, ref, entries)
    e_contact, e_subj, e_outside, e_other, e_pref = ids
    tags_of = dict(zip(ids, (e["tags"] for e in entries)))
    created = {i: Api(base, tenant).get(ref, i)["createdAt"] for i in ids}

    # Grant 1: by label and kind, no subject named.
    filt = {"kinds": ["fact", "observation"], "labels_any": [label],
            "captured_after": rfc3339_in(-3600)}
    req = grant_body(ref, filter=filt, purpose="Brief the contractor on the website redesign.")
    out = g.grant(req)
    grant = out["grant"]
    verify_grant(host, out)
    for k in ("grantee", "purpose", "scope_id", "filter", "max_items", "revocable",
              "redaction_profile", "scopes"):
        assert grant[k] == req[k], (k, grant[k], req[k])
    assert when(grant["expires_at"]) == when(req["expires_at"]), grant
    assert grant["issuer"] == host.did, grant
    assert grant["granter"] == f"{host.did}:tenants:{tenant}", grant
    assert abs((when(grant["issued_at"]) - datetime.now(timezone.utc)).total_seconds()) < 120
    assert grant["grant_id"], grant
    assert out["slice_items"] == 3, out  # contact, subject, other-subject entries
    verify_receipt(host, out["receipt"])
    assert out["receipt"]["type"] == "memory.grant", out["receipt"]
    assert out["receipt"]["principal_did"] == grant["granter"], out["receipt"]
    assert out["receipt"]["agent_did"] == GRANTEE, out["receipt"]

    # The grantee queries with the RFC's media type, at the manifest's query endpoint.
    resp = raw_request(base, "POST", urlsplit(host.manifest["endpoints"]["query"]).path,
                       body=json.dumps({"query": "redesign", "max_results": 20,
                                        "include_embeddings": False}).encode(),
                       headers={"Authorization": f"Bearer {out['token']}",
                                "Content-Type": "application/oap+json"})
    assert resp.status == 200, (resp.status, resp.text)
    answer = resp.json()
    assert set(answer) == {"grant_id", "items", "receipt"}, answer
    assert answer["grant_id"] == grant["grant_id"]
    for value in (email, phone, phone_local, email.split("@")[0], subject, other_subject):
        assert value not in resp.text, f"the answer carries {value!r}"
    items = {it["item_id"]: it for it in answer["items"]}
    assert set(items) == {e_contact, e_subj, e_other}, sorted(items)
    label_mismatches: list[Any] = []
    for iid, it in items.items():
        assert ITEM_KEYS_ALWAYS <= set(it) <= ITEM_KEYS_ALWAYS | ITEM_KEYS_OPTIONAL, sorted(it)
        assert "embedding" not in it
        assert "subject_entity_id" not in it, "a subject shown that the filter did not name"
        assert it["owner_did"] == grant["granter"] and it["scope_id"] == ref, it
        assert it["exportable"] is True, it
        want = {t for t in tags_of[iid] if not t.startswith("kind:")}
        if set(it["labels"]) != want:  # asserted last, so the rest still runs
            label_mismatches.append((iid, sorted(it["labels"]), sorted(want)))
        assert it["provenance"]["source"] == "wop-memory:write", it
        assert abs((when(it["provenance"]["captured_at"]) - when(created[iid]))
                   .total_seconds()) < 1, (it["provenance"], created[iid])
        assert set(it["content"]) == {"text"}, it["content"]
        verify_chain(it)
    assert items[e_contact]["kind"] == "fact"
    assert items[e_subj]["kind"] == items[e_other]["kind"] == "observation"
    assert 29 <= items[e_subj]["ttl_days"] <= 30, items[e_subj]
    assert "ttl_days" not in items[e_contact], items[e_contact]

    # The contact entry: projected, origin withheld behind a projection link.
    projected = items[e_contact]
    text = projected["content"]["text"]
    assert "[contact:email]" in text and "[contact:phone]" in text, text
    assert text.startswith("Redesign kickoff: the hero uses the teal palette."), text
    chain = projected["chain"]
    assert len(chain) == 2 and "withheld" in chain[0], chain
    proj = chain[1]
    assert proj["profile"] == PROFILE and proj["removed"] == 2, proj
    assert proj["content_sha256"] in text_hashes(text), proj
    # An entry with nothing to remove: its origin link, shown whole.
    for iid in (e_subj, e_other):
        it = items[iid]
        assert len(it["chain"]) == 1, it["chain"]
        check_origin(it["chain"][0], it, ref)
        assert it["content"]["text"] == entries[ids.index(iid)]["content"]

    # Grant 2 names a subject: only that subject's entries, which carry it.
    out2 = g.grant(grant_body(ref, filter={"subject_entity_ids": [subject],
                                            "labels_any": [label]}))
    verify_grant(host, out2)
    assert out2["slice_items"] == 1, out2
    ans2 = query(base, out2["token"], "redesign")
    assert [it["item_id"] for it in ans2["items"]] == [e_subj], ans2
    assert ans2["items"][0]["subject_entity_id"] == subject
    assert other_subject not in json.dumps(ans2)

    # Grant 3: captured_after later than every entry: an empty slice, an empty answer.
    out3 = g.grant(grant_body(ref, filter={"captured_after": rfc3339_in(60)}))
    assert out3["slice_items"] == 0, out3
    assert query(base, out3["token"], "redesign")["items"] == []
    sensitive(subject), sensitive(other_subject)  # from here on: never in an answer or a log

    # The query's own bounds.
    token = out["token"]
    for body, field in (({"query": ""}, "query"), ({"query": "x" * 1025}, "query"),
                        ({"query": "redesign", "max_results": 0}, "max_results"),
                        ({"query": "redesign", "max_results": 101}, "max_results")):
        expect_error(query_raw(base, token, body), 400, "validation_error", field=field,
                     absent=(token, email, phone))
    # docs/oap.md "Items": `labels` are the entry's tags without the `kind:` tag.
    assert not label_mismatches, f"labels are not the entry's tags (id, got, tags): " \
                                 f"{label_mismatches}"


def test_a_merged_item_commits_to_the_sources_a_grantee_saw_before(base: str, host: Host):
    """docs/oap.md "Item chains": a merge's first link names its sources and, per source, the
    hash of `{content_sha256, salt}` of that source's own first link. A grantee who received
    the sources before consolidation replaced them checks the merge against them."""
    tenant = new_tenant()
    ref = memory_ref(tenant, "assistant")
    inv, g = Invoker(base), Granter(base, tenant)
    text = f"The customer's preferred delivery window is mornings {new_id()}"
    a, b = inv.put(tenant, ref, [{"content": text, "tier": "long-term"},
                                 {"content": text, "tier": "long-term"}])
    before = g.grant(grant_body(ref))
    seen = {it["item_id"]: verify_chain(it)[0]
            for it in query(base, before["token"], "delivery window")["items"]}
    assert set(seen) == {a, b}, sorted(seen)

    report = inv.ok("memory-consolidate", {"tenantId": tenant, "memoryRef": ref})
    assert (report["inputCount"], report["outputCount"]) == (2, 1), report
    after = g.grant(grant_body(ref))
    [merged] = query(base, after["token"], "delivery window")["items"]
    origin = verify_chain(merged)[0]
    assert origin["op"] == "derive" and merged["provenance"]["source"] == "wop-memory:derived"
    named = set(origin["derived_from"]) & {a, b}
    assert named and named == set(origin["sources"]), origin
    for source in named:
        assert origin["sources"][source] == h({"content_sha256": seen[source]["content_sha256"],
                                               "salt": seen[source]["salt"]}), source
    # A source with other text would not match its commitment.
    other = {"content_sha256": sha256_hex(text + "!"), "salt": seen[a]["salt"]}
    assert h(other) not in origin["sources"].values()


# ---------------------------------------------------------------------------------------------
# 4. The receipt log.


def test_receipt_log_verifies_and_links(base: str, host: Host):
    tenant, ref, g = new_granter(base)
    Invoker(base).put(tenant, ref, [
        {"content": "Alpha launch checklist is ready.", "tags": ["proj"]},
        {"content": "Beta launch needs a copy review.", "tags": ["proj"]},
    ])
    out = g.grant(grant_body(ref, filter={"labels_any": ["proj"]}))
    a1 = query(base, out["token"], "alpha")
    a2 = query(base, out["token"], "beta")
    assert [i["item_id"] for i in a1["items"]] != [i["item_id"] for i in a2["items"]], (a1, a2)
    rev = g.revoke_raw(out["grant"]["grant_id"])
    assert rev.status == 200, rev.text
    revoked = rev.json()

    log = g.receipts()
    verify_log(host, log)
    assert [r["type"] for r in log] == ["memory.grant", "memory.query", "memory.query",
                                        "memory.revoke"], [r["type"] for r in log]
    assert log[0] == out["receipt"] and log[1] == a1["receipt"] and log[2] == a2["receipt"]
    assert log[3] == revoked["receipt"]
    for r in log:
        assert r["principal_did"] == out["grant"]["granter"], r
        assert r["agent_did"] == GRANTEE, r
    # The query receipts differ where the answers differ (docs/oap.md does not fix the exact
    # form of `output_hash`, only that it names every returned item_id with its chain_hash).
    assert a1["receipt"]["output_hash"] != a2["receipt"]["output_hash"]
    assert a1["receipt"]["input_hash"] != a2["receipt"]["input_hash"]
    for word in ("alpha", "beta"):
        assert word not in json.dumps(log), f"a receipt names the query {word!r}"

    # Paging: the same log one receipt at a time; bad limits refused.
    assert g.receipts(page=1) == log
    for bad in ("?limit=0", "?limit=1001"):
        expect_error(g.receipts_raw(bad), 400, "validation_error", field="limit")
    # Another tenant's log is its own (empty).
    assert Granter(base, new_tenant()).receipts() == []

    # The default page is 100 receipts: 102 in the log take two pages.
    more = g.grant(grant_body(ref, filter={"labels_any": ["proj"]}))
    for i in range(97):
        query(base, more["token"], "launch", 1)
    first = g.receipts_raw()
    assert first.status == 200, first.text
    page = first.json()
    assert len(page["receipts"]) == 100 and page["next_from"] is not None, len(page["receipts"])
    rest = g.receipts_raw(f"?from={page['next_from']}").json()
    assert rest["next_from"] is None and len(rest["receipts"]) == 2, rest
    full = page["receipts"] + rest["receipts"]
    assert full[:4] == log
    verify_log(host, full)


# ---------------------------------------------------------------------------------------------
# 5. Security.


def test_expired_grant_is_refused_and_the_expiry_recorded_once(base: str, host: Host):
    tenant, ref, g = new_granter(base)
    secret_line = f"Expiring launch note {new_id()}"
    fading_line = f"Fading launch note {new_id()}"
    keep, fading = Invoker(base).put(tenant, ref, [
        {"content": secret_line, "tags": ["exp"]},
        # Expires no later than the short grant (written first, same offset): a loaded machine
        # has the whole offset to issue both grants and query before either lapses.
        {"content": fading_line, "tags": ["exp"], "expiresAt": rfc3339_in(5)}])
    tap = EventTap(tenant)
    try:
        out = g.grant(grant_body(ref, filter={"labels_any": ["exp"]}, expires_at=rfc3339_in(5)))
        token = out["token"]
        long = g.grant(grant_body(ref, filter={"labels_any": ["exp"]}))
        # Before expiry the grant works.
        resp = query_raw(base, token, {"query": "launch"})
        assert resp.status == 200 and secret_line in resp.text, resp.text
        assert {i["item_id"] for i in query(base, long["token"], "launch")["items"]} == \
            {keep, fading}
        time.sleep(max(0.0, (when(out["grant"]["expires_at"]) -
                             datetime.now(timezone.utc)).total_seconds()) + 0.5)
        for _ in range(2):
            expect_error(query_raw(base, token, {"query": "launch"}), 401, "unauthenticated",
                         absent=(token, secret_line))
        # An entry's own expiry takes it out of a live grant at once.
        sensitive(fading_line)
        after = query(base, long["token"], "launch")
        assert {i["item_id"] for i in after["items"]} == {keep}, after
        types = [r["type"] for r in g.receipts()]
        assert types == ["memory.grant", "memory.grant", "memory.query", "memory.query",
                         "memory.expire", "memory.query"], types
        verify_log(host, g.receipts())
        expired = tap.wait(of_type("oap.memory.grant.expired", ref), 1, timeout=15)
        assert len(expired) == 1, expired
        assert expired[0]["detail"]["grantId"] == out["grant"]["grant_id"], expired
    finally:
        tap.close()


def test_revoked_grant_is_refused_and_revoke_is_idempotent(base: str, host: Host):
    tenant, ref, g = new_granter(base)
    Invoker(base).put(tenant, ref, [{"content": "Revocation drill text.", "tags": ["rev"]}])
    out = g.grant(grant_body(ref, filter={"labels_any": ["rev"]}))
    token, gid = out["token"], out["grant"]["grant_id"]
    assert len(query(base, token, "revocation")["items"]) == 1  # positive control
    first = g.revoke_raw(gid)
    assert first.status == 200, first.text
    r1 = first.json()
    assert r1["grant_id"] == gid and r1["revoked"] is True, r1
    assert set(r1) <= {"grant_id", "revoked", "revoked_at", "receipt"}, r1
    verify_receipt(host, r1["receipt"])
    assert r1["receipt"]["type"] == "memory.revoke", r1
    expect_error(query_raw(base, token, {"query": "revocation"}), 401, "unauthenticated",
                 absent=(token, "Revocation drill"))
    second = g.revoke_raw(gid)
    assert second.status == 200, second.text
    r2 = second.json()
    assert r2["grant_id"] == gid and r2["revoked"] is True, r2
    assert r2["revoked_at"] == r1["revoked_at"], (r1, r2)
    log = g.receipts()
    verify_log(host, log)
    assert [r["type"] for r in log].count("memory.revoke") == 1, [r["type"] for r in log]
    # Unknown grant id: 404. A non-revocable grant: 403.
    expect_error(g.revoke_raw(f"mgr_{new_id()}"), 404, "not_found")
    fixed = g.grant(grant_body(ref, revocable=False))
    expect_error(g.revoke_raw(fixed["grant"]["grant_id"]), 403, "forbidden")
    assert len(query(base, fixed["token"], "revocation")["items"]) == 1


def test_tampered_forged_and_missing_tokens_are_refused(base: str, host: Host):
    tenant, ref, g = new_granter(base)
    content = "Tamper target: the staging password rotates monthly."
    Invoker(base).put(tenant, ref, [{"content": content, "tags": ["tam"]}])
    out = g.grant(grant_body(ref, filter={"labels_any": ["tam"]}))
    token = out["token"]
    assert len(query(base, token, "tamper")["items"]) == 1  # positive control
    h_, p_, s_ = token.split(".")
    # Single characters flipped, never a segment's last one (its spare bits could decode alike).
    positions = [1, len(h_) // 2,                                   # header
                 len(h_) + 1 + 5, len(h_) + 1 + len(p_) // 2,       # payload
                 len(h_) + 1 + len(p_) - 3,
                 len(h_) + len(p_) + 2 + 2, len(token) - 10]        # signature
    for pos in positions:
        c = token[pos]
        flipped = token[:pos] + ("A" if c != "A" else "B") + token[pos + 1:]
        assert flipped != token
        expect_error(query_raw(base, flipped, {"query": "tamper"}), 401, "unauthenticated",
                     absent=(token, flipped, content))
    # A payload edited to widen the filter, re-encoded, with the original signature.
    grant = json.loads(b64url_decode(p_))
    wider = {**grant, "filter": {}, "max_items": 10000}
    edited = f"{h_}.{b64url(canonicalize(wider).encode())}.{s_}"
    expect_error(query_raw(base, edited, {"query": "tamper"}), 401, "unauthenticated",
                 absent=(content,))
    # The same wider grant re-signed, correctly, by another key (the SDK's own signer).
    forger = load_signing_key()
    core = {k: v for k, v in wider.items() if k != "signature"}
    forged_grant = {**core, "signature": sign_ed25519(forger.private_key, core)}
    fh = b64url(json.dumps({"alg": "EdDSA", "kid": f"{host.did}#oap-signing"}).encode())
    fp = b64url(canonicalize(forged_grant).encode())
    fs = b64url(forger.private_key.sign(f"{fh}.{fp}".encode("ascii")))
    expect_error(query_raw(base, f"{fh}.{fp}.{fs}", {"query": "tamper"}), 401,
                 "unauthenticated", absent=(content,))
    # Missing, garbage, the tenant's own JWT, and an unknown (never issued) grant.
    expect_error(query_raw(base, None, {"query": "tamper"}), 401, "unauthenticated")
    expect_error(query_raw(base, "not-a-token", {"query": "tamper"}), 401, "unauthenticated")
    jwt = mint_jwt({"tenant_id": tenant, "sub": "user-py"})
    expect_error(query_raw(base, jwt, {"query": "tamper"}), 401, "unauthenticated",
                 absent=(content,))
    # The original still works after all that.
    assert len(query(base, token, "tamper")["items"]) == 1


def test_other_tenant_and_grantee_widening_are_refused(base: str, host: Host):
    tenant_a, tenant_b = new_tenant(), new_tenant()
    ref_a = memory_ref(tenant_a, "assistant")
    ga, gb = Granter(base, tenant_a), Granter(base, tenant_b)
    Invoker(base).put(tenant_a, ref_a, [
        {"content": "Widen probe: inside the slice.", "tags": ["in"]},
        {"content": "Widen probe: outside the slice.", "tags": ["out"]},
    ])
    out = ga.grant(grant_body(ref_a, filter={"labels_any": ["in"]}))
    token, gid = out["token"], out["grant"]["grant_id"]
    # Tenant B cannot revoke A's grant, nor grant A's memory.
    expect_error(gb.revoke_raw(gid), 404, "not_found")
    assert len(query(base, token, "widen")["items"]) == 1, "B's revoke took effect"
    foreign = expect_error(gb.grant_raw(grant_body(ref_a)), 400, "validation_error",
                           field="scope_id")
    malformed = expect_error(gb.grant_raw(grant_body(f"workspaces/{tenant_b}/nope")), 400,
                             "validation_error", field="scope_id")
    assert foreign == malformed, "another tenant's ref is not refused like a malformed one"
    assert ga.receipts()[-1]["type"] == "memory.query"
    assert gb.receipts() == []
    # The grantee cannot bring a filter of its own.
    expect_error(query_raw(base, token, {"query": "widen", "filter": {}}), 400,
                 "validation_error", absent=("outside the slice",))
    expect_error(query_raw(base, token, {"query": "widen", "filter": {"labels_any": ["out"]}}),
                 400, "validation_error", absent=("outside the slice",))
    items = query(base, token, "widen", 100)["items"]
    assert [i["content"]["text"] for i in items] == ["Widen probe: inside the slice."], items


def test_max_items_bounds_every_query_and_deletes_leave_the_slice(base: str, host: Host):
    tenant, ref, g = new_granter(base)
    inv = Invoker(base)
    words = ["apple", "banana", "cherry", "damson", "elder", "fig"]
    older = inv.put(tenant, ref, [{"content": f"Orchard {w} harvest log.", "tags": ["orchard"]}
                                  for w in words[:4]])
    newer = inv.put(tenant, ref, [{"content": f"Orchard {w} harvest log.", "tags": ["orchard"]}
                                  for w in words[4:]])
    out = g.grant(grant_body(ref, filter={"labels_any": ["orchard"]}, max_items=2))
    assert out["slice_items"] == 2, out
    later = inv.put(tenant, ref, [{"content": "Orchard grape harvest log.",
                                   "tags": ["orchard"]}])
    seen: set[str] = set()
    for q in ["orchard", "harvest", "log", *words, "grape", "orchard harvest log apple fig"]:
        got = query(base, out["token"], q, 100)
        assert len(got["items"]) <= 2, got
        seen |= {i["item_id"] for i in got["items"]}
    assert seen == set(newer), (sorted(seen), newer, older, later)
    # A delete leaves the slice at once, and the slice does not refill.
    inv.ok("memory-write", {"op": "delete", "tenantId": tenant, "memoryRef": ref,
                            "id": newer[0]})
    for q in ("orchard", "elder", "harvest"):
        resp = query_raw(base, out["token"], {"query": q, "max_results": 100})
        assert resp.status == 200, resp.text
        got = {i["item_id"] for i in resp.json()["items"]}
        assert got <= {newer[1]}, got
        assert "elder" not in resp.text.lower(), "the deleted entry's content is served"
    assert {i["item_id"] for i in query(base, out["token"], "fig", 100)["items"]} == {newer[1]}
    # Embeddings need their own scope (§5.2).
    expect_error(query_raw(base, out["token"], {"query": "orchard", "include_embeddings": True}),
                 403, "forbidden", absent=("Orchard",))


def test_forget_takes_effect_on_live_grants(base: str, host: Host):
    tenant, ref, g = new_granter(base)
    inv = Invoker(base)
    subject = f"customer-{new_id()}"
    mark1, mark2 = f"forgetmark{new_id()}", f"forgetmark{new_id()}"
    ids = inv.put(tenant, ref, [
        {"content": f"Ledger note {mark1} for the account.", "tags": ["ledger"],
         "subject": subject},
        {"content": f"Ledger note {mark2} on renewal.", "tags": ["ledger"], "subject": subject},
        {"content": "Ledger note without a subject.", "tags": ["ledger"]},
    ])
    wide = g.grant(grant_body(ref, filter={"labels_any": ["ledger"]}))
    named = g.grant(grant_body(ref, filter={"subject_entity_ids": [subject]}))
    assert wide["slice_items"] == 3 and named["slice_items"] == 2, (wide, named)
    before = query(base, named["token"], "ledger")
    assert {i["item_id"] for i in before["items"]} == set(ids[:2]), before  # positive control
    counts = Api(base, tenant).forget(subject)
    assert counts["deletedEntries"] == 2, counts
    sensitive(mark1), sensitive(mark2)
    for out in (wide, named):
        resp = query_raw(base, out["token"], {"query": "ledger note", "max_results": 100})
        assert resp.status == 200, resp.text
        got = {i["item_id"] for i in resp.json()["items"]}
        assert not got & set(ids[:2]), got
        assert mark1 not in resp.text and mark2 not in resp.text
        assert not leaks(resp.text), leaks(resp.text)
    assert {i["item_id"] for i in query(base, wide["token"], "ledger", 100)["items"]} == \
        {ids[2]}


def test_grant_and_query_defaults_and_byte_bounds(base: str, host: Host):
    tenant, ref, g = new_granter(base)
    Invoker(base).put(tenant, ref, [{"content": f"Defaults note number {i}.", "tags": ["dflt"]}
                                    for i in range(22)])
    body = grant_body(ref, filter={"labels_any": ["dflt"]})
    del body["redaction_profile"], body["scopes"]
    out = g.grant(body)
    verify_grant(host, out)
    assert out["grant"]["redaction_profile"] == PROFILE, out["grant"]
    assert out["grant"]["scopes"] == ["items"], out["grant"]
    assert out["slice_items"] == 22, out
    # max_results defaults to 20.
    resp = query_raw(base, out["token"], {"query": "defaults note"})
    assert resp.status == 200, resp.text
    assert len(resp.json()["items"]) == 20, len(resp.json()["items"])
    # `query` is bounded in bytes: 1024 accepted, 1026 (513 two-byte characters) refused.
    assert query(base, out["token"], "\u00e9" * 512)["items"] == []
    expect_error(query_raw(base, out["token"], {"query": "\u00e9" * 513}), 400,
                 "validation_error", field="query")
    # `items` is always granted; `embeddings` only adds the right to ask for vectors.
    emb = g.grant(grant_body(ref, filter={"labels_any": ["dflt"]}, scopes=["embeddings"]))
    verify_grant(host, emb)
    assert set(emb["grant"]["scopes"]) == {"items", "embeddings"}, emb["grant"]
    items = query(base, emb["token"], "defaults note", 5)["items"]
    assert len(items) == 5 and all("embedding" not in i for i in items), items


# ---------------------------------------------------------------------------------------------
# 6. Concurrency: one grant, eight queries at once, one unforked log.


def test_concurrent_queries_keep_one_receipt_chain(base: str, host: Host):
    """Eight queries of one grant at once, through two gateways (each runs one instance of a
    function, so one gateway alone would serialise them): two containers appending to one log.
    The second is configured as a deployment is (one DID and public URL for every container)."""
    tenant, ref, g = new_granter(base)
    Invoker(base).put(tenant, ref, [{"content": f"Parallel note {w}.", "tags": ["par"]}
                                    for w in ("one", "two", "three")])
    out = g.grant(grant_body(ref, filter={"labels_any": ["par"]}))
    gw2 = start_gateway("oap-2", {"OAP_DID": host.did, "OAP_PUBLIC_URL": base}, exchanges=False)
    try:
        assert get_json(gw2.base_url, "/.well-known/did.json") == host.did_doc
        bases = [base, gw2.base_url]
        n = 8
        barrier = threading.Barrier(n)
        results: list[Any] = [None] * n

        def run(i: int) -> None:
            barrier.wait()
            results[i] = query_raw(bases[i % 2], out["token"], {"query": f"parallel note {i}"})

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        logs2 = gw2.stop()
    statuses = [r.status if r else None for r in results]
    assert statuses == [200] * n, [(r.status, r.text[:200]) if r else None for r in results]
    assert all(len(r.json()["items"]) == 3 for r in results), [r.text[:200] for r in results]
    log = g.receipts()
    verify_log(host, log)
    types = [r["type"] for r in log]
    assert types == ["memory.grant"] + ["memory.query"] * n, types
    assert {r.json()["receipt"]["receipt_id"] for r in results} == \
        {r["receipt_id"] for r in log[1:]}
    assert all(r.json()["receipt"] in log for r in results), "an answer's receipt is not logged"
    assert not [a for a in gw2.access_log() if a[2] >= 500], gw2.access_log()
    assert not leaks(logs2), f"the second gateway's logs leak {leaks(logs2)}"


# ---------------------------------------------------------------------------------------------
# 7. Events: issued and revoked, content-free.


def test_grant_events_and_records_are_content_free(base: str, host: Host):
    tenant, ref, g = new_granter(base)
    content = f"Event probe {new_id()} content."
    purpose = f"Purpose text {new_id()} for the contractor."
    subject = f"ent_evt_{new_id()}"
    Invoker(base).put(tenant, ref, [{"content": content, "tags": ["evt"], "subject": subject}])
    tap = EventTap(tenant)
    try:
        out = g.grant(grant_body(ref, purpose=purpose,
                                 filter={"labels_any": ["evt"], "subject_entity_ids": [subject]}))
        gid = out["grant"]["grant_id"]
        assert g.revoke_raw(gid).status == 200
        assert g.revoke_raw(gid).status == 200
        issued = tap.wait(of_type("oap.memory.grant.issued", ref), 1)
        revoked = tap.wait(of_type("oap.memory.grant.revoked", ref), 1)
        assert len(issued) == 1 and len(revoked) == 1, (issued, revoked)
        d = issued[0]["detail"]
        assert d["tenantId"] == tenant and d["memoryRef"] == ref, d
        assert d["grantId"] == gid and d["grantee"] == GRANTEE and d["sliceItems"] == 1, d
        assert when(d["expiresAt"]) == when(out["grant"]["expires_at"]), d
        r = revoked[0]["detail"]
        assert r["grantId"] == gid and r["tenantId"] == tenant and r["memoryRef"] == ref, r
        for e in issued + revoked:
            assert e["source"] == "wop-memory", e
            text = json.dumps(e)
            for s in (content, purpose, subject, out["token"], out["token"].split(".")[2],
                      out["grant"]["signature"]):
                assert s not in text, f"event {e['detail-type']} carries {s[:40]!r}"
    finally:
        tap.close()

    # What the host stores for the door (docs/oap.md "Storage"): a record, never the grant.
    db = aws_client("dynamodb")
    rows = db.query(TableName=os.environ["MEMORY_TABLE"], ConsistentRead=True,
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={":pk": {"S": f"{tenant}#@oap"}})["Items"]
    sks = sorted(r["sk"]["S"] for r in rows)
    assert len(sks) == 4 and sks[0] == "X#G#" + gid and sks[3] == "X#TIP", sks
    assert all(re.fullmatch(r"X#R#\d{20}", k) for k in sks[1:3]), sks
    assert int(sks[2][4:]) == int(sks[1][4:]) + 1, sks
    record = next(r for r in rows if r["sk"]["S"] == "X#G#" + gid)
    assert set(record) - {"pk", "sk"} <= {"scopeId", "grantee", "grantHash", "issuedMs",
                                          "expiresMs", "revocable", "revokedMs",
                                          "expiryAnnounced", "slice", "ttl"}, sorted(record)
    expires_ms = int(record["expiresMs"]["N"])
    assert expires_ms == int(when(out["grant"]["expires_at"]).timestamp() * 1000), record
    assert abs(int(record["ttl"]["N"]) - (expires_ms // 1000 + 90 * DAY)) <= 1, record
    stored = json.dumps(rows)
    for s in (content, purpose, subject, out["token"], out["token"].split(".")[2],
              out["grant"]["signature"]):
        assert s not in stored, f"the door's partition stores {s[:40]!r}"
    sensitive(purpose), sensitive(subject), sensitive(content)  # and the logs must not either


# ---------------------------------------------------------------------------------------------
# Export and import (docs/oap.md "Export and import", "Deletion across grants").


def post_jwt(base: str, tenant: str, path: str, body: Any) -> RawResponse:
    return raw_request(base, "POST", path, body=json.dumps(body).encode(),
                       headers=jwt_headers(tenant))


def bundle_lines(url: str) -> list[dict[str, Any]]:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=30) as r:
        body = r.read().decode("utf-8")
    return [json.loads(line) for line in body.splitlines()]


def test_export_import_round_trip_verifies_and_is_idempotent(base: str, host: Host):
    a, b = new_tenant(), new_tenant()
    ref_a, ref_b = memory_ref(a, "assistant"), memory_ref(b, "successor")
    contents = [f"Round trip fact {i} {new_id()}: the user is allergic to penicillin."
                for i in range(4)]
    Invoker(base).put(a, ref_a, [{"content": c, "tags": ["health", "kind:fact"]}
                                 for c in contents])
    resp = post_jwt(base, a, "/oap/memory/export", {"scope_id": ref_a})
    assert resp.status == 200, resp.text
    ex = resp.json()
    manifest = ex["manifest"]
    assert ex["items"] == 4 and manifest["items"] == 4, ex
    # The manifest is signed by the host key, over canonical JSON of every other field.
    unsigned = {k: v for k, v in manifest.items() if k != "signature"}
    verify(host.key, manifest["signature"], unsigned)
    # The download is the bundle the manifest describes.
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(ex["url"], timeout=30) as r:
        raw = r.read()
    assert len(raw) == manifest["bytes"] and hashlib.sha256(raw).hexdigest() == manifest["sha256"]
    lines = [json.loads(line) for line in raw.decode().splitlines()]
    assert sorted(line["content"]["text"] for line in lines) == sorted(contents)
    for line in lines:
        assert line["content_sha256"] == sha256_hex(line["content"]["text"])
        assert line["chain"][0]["prev"] == "genesis"
        assert "sha256:" + sha256_hex(canonicalize(line["chain"][-1])) == line["chain_hash"]
        assert line["kind"] == "fact" and line["labels"] == ["health"], line

    first = post_jwt(base, b, "/oap/memory/import", {"scope_id": ref_b, "manifest": manifest})
    assert first.status == 200, first.text
    assert (first.json()["imported"], first.json()["already_present"]) == (4, 0)
    again = post_jwt(base, b, "/oap/memory/import", {"scope_id": ref_b, "manifest": manifest})
    assert (again.json()["imported"], again.json()["already_present"]) == (0, 4), again.text
    assert sorted(e["content"] for e in Api(base, b).list_all(ref_b)) == sorted(contents)

    re_ex = post_jwt(base, b, "/oap/memory/export", {"scope_id": ref_b}).json()
    relines = bundle_lines(re_ex["url"])
    essence = lambda l: (l["item_id"], l["kind"], l["content"]["text"], tuple(l["labels"]),  # noqa: E731
                         l["captured_at"], l["content_sha256"])
    assert sorted(map(essence, relines)) == sorted(map(essence, lines))
    by_id = {l["item_id"]: l for l in lines}
    for line in relines:
        assert line["chain"][0]["op"] == "import"
        assert line["chain"][0]["prev"] == by_id[line["item_id"]]["chain_hash"], line
    verify_log(host, Granter(base, b).receipts())


def test_changed_bundles_and_foreign_refs_import_nothing(base: str, host: Host):
    a, b = new_tenant(), new_tenant()
    ref_a, ref_b = memory_ref(a, "assistant"), memory_ref(b, "successor")
    Invoker(base).put(a, ref_a, [{"content": f"Bundle fact {i} {new_id()}"} for i in range(3)])
    manifest = post_jwt(base, a, "/oap/memory/export", {"scope_id": ref_a}).json()["manifest"]
    for field, value in (("items", 2), ("sha256", "0" * 64), ("scope_id", ref_b),
                         ("signature", manifest["signature"][:-4] + "AAAA")):
        changed = dict(manifest, **{field: value})
        resp = post_jwt(base, b, "/oap/memory/import", {"scope_id": ref_b, "manifest": changed})
        expect_error(resp, 400, "validation_error")
    # The object itself changed after export: refused whole, nothing written.
    s3 = aws_client("s3")
    bucket, key = os.environ["ARCHIVE_BUCKET"], manifest["object"]
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.put_object(Bucket=bucket, Key=key, Body=body.replace(b"Bundle fact 2", b"Bundle fakt 2"))
    resp = post_jwt(base, b, "/oap/memory/import", {"scope_id": ref_b, "manifest": manifest})
    expect_error(resp, 400, "validation_error")
    assert Api(base, b).list_all(ref_b) == []
    # Into a ref of another tenant: the same answer as a malformed ref.
    resp = post_jwt(base, b, "/oap/memory/import", {"scope_id": ref_a, "manifest": manifest})
    expect_error(resp, 400, "validation_error")


def test_forget_deletes_exported_bundles_and_the_log_names_them(base: str, host: Host):
    a, b = new_tenant(), new_tenant()
    ref_a, ref_b = memory_ref(a, "assistant"), memory_ref(b, "successor")
    subject = f"cust-{new_id()}"
    secret_fact = f"Forget probe {new_id()}: lives at the old address."
    Invoker(base).put(a, ref_a, [{"content": secret_fact, "subject": subject},
                                 {"content": f"Unrelated {new_id()}"}])
    holding = post_jwt(base, a, "/oap/memory/export", {"scope_id": ref_a}).json()
    Api(base, a).forget(subject)
    s3 = aws_client("s3")
    bucket = os.environ["ARCHIVE_BUCKET"]
    versions = s3.list_object_versions(Bucket=bucket, Prefix=holding["manifest"]["object"])
    assert not versions.get("Versions") and not versions.get("DeleteMarkers", [])[1:], versions
    log = Granter(base, a).receipts()
    verify_log(host, log)
    forgets = [r for r in log if r["type"] == "memory.forget"]
    assert len(forgets) == 1, [r["type"] for r in log]
    assert forgets[0]["output_hash"] == h({"deleted_bundles": [holding["bundle_id"]]})
    resp = post_jwt(base, b, "/oap/memory/import", {"scope_id": ref_b,
                                                   "manifest": holding["manifest"]})
    expect_error(resp, 400, "validation_error")


def test_export_and_import_as_direct_invokes(base: str, host: Host):
    a, b = new_tenant(), new_tenant()
    ref_a, ref_b = memory_ref(a, "assistant"), memory_ref(b, "successor")
    inv = Invoker(base)
    inv.put(a, ref_a, [{"content": f"Direct fact {i} {new_id()}"} for i in range(3)])
    ex = inv.ok("memory-exchange", {"op": "export", "tenantId": a, "scope_id": ref_a})
    assert ex["items"] == 3, ex
    verify(host.key, ex["manifest"]["signature"],
           {k: v for k, v in ex["manifest"].items() if k != "signature"})
    im = inv.ok("memory-exchange", {"op": "import", "tenantId": b, "scope_id": ref_b,
                                    "manifest": ex["manifest"]})
    assert im["imported"] == 3, im
    # Another tenant's ref, an unknown op, no tenant: refused, nothing written.
    for payload, field in (({"op": "import", "tenantId": b, "scope_id": ref_a,
                             "manifest": ex["manifest"]}, None),
                           ({"op": "grant", "tenantId": a}, None),
                           ({"op": "export", "scope_id": ref_a}, None)):
        err = inv.fail("memory-exchange", payload)
        assert err.get("errorType") == "validation_error", err
    assert len(Api(base, a).list_all(ref_a)) == 3


def test_the_hourly_sweep_announces_an_expiry_nobody_queried(base: str, host: Host):
    tenant, ref, g = new_granter(base)
    Invoker(base).put(tenant, ref, [{"content": f"Sweep probe {new_id()}", "tags": ["sw"]}])
    tap = EventTap(tenant)
    try:
        # 4 s: the sweep below must run before the expiry even on a loaded machine (at 1.5 s a
        # slow first sweep already expired the grant and the second found nothing).
        out = g.grant(grant_body(ref, expires_at=rfc3339_in(4)))
        gid = out["grant"]["grant_id"]
        # Before the expiry the sweep finds nothing of this grant.
        Invoker(base).ok("memory-exchange", {"op": "sweep"})
        time.sleep(max(0.0, (when(out["grant"]["expires_at"]) -
                             datetime.now(timezone.utc)).total_seconds()) + 0.3)
        swept = Invoker(base).ok("memory-exchange", {"op": "sweep"})
        assert swept["expired"] >= 1, swept
        again = Invoker(base).ok("memory-exchange", {"op": "sweep"})
        assert again["expired"] == 0, again
        expired = tap.wait(of_type("oap.memory.grant.expired", ref), 1)
        assert [e["detail"]["grantId"] for e in expired] == [gid], expired
    finally:
        tap.close()
    log = g.receipts()
    verify_log(host, log)
    assert [r["type"] for r in log].count("memory.expire") == 1, [r["type"] for r in log]


def test_a_letta_agent_file_moves_in(base: str, host: Host):
    tenant = new_tenant()
    ref = memory_ref(tenant, "assistant")
    fact = f"Name: Ada {new_id()}. Allergic to penicillin."
    af = {"agents": [{"id": "agent-0", "name": "assistant", "block_ids": ["block-0", "block-1"],
                      "messages": [{"created_at": "2026-03-01T10:00:00+00:00"}]}],
          "blocks": [{"id": "block-0", "label": "human", "value": fact},
                     {"id": "block-1", "label": "persona", "value": "I am careful."}],
          "tools": [], "files": []}
    first = post_jwt(base, tenant, "/oap/memory/import", {"scope_id": ref, "letta_agent_file": af})
    assert first.status == 200, first.text
    assert (first.json()["blocks"], first.json()["imported"]) == (2, 2)
    again = post_jwt(base, tenant, "/oap/memory/import",
                     {"scope_id": ref, "letta_agent_file": json.dumps(af)})
    assert again.json()["imported"] == 0, again.text
    entries = Api(base, tenant).list_all(ref)
    human = [e for e in entries if "letta-block:human" in e["tags"]]
    assert len(entries) == 2 and human and human[0]["content"] == fact, entries


# ---------------------------------------------------------------------------------------------
# Last: the functions' logs (stops the module's gateway).


def test_z_no_5xx_and_nothing_sensitive_in_the_logs(oap_gw: Gateway):
    logs = oap_gw.stop()
    assert "===== memory-exchange =====" in logs, "memory-exchange's log was not captured"
    server_errors = [a for a in oap_gw.access_log() if a[2] >= 500]
    assert not server_errors, f"5xx answers: {server_errors}"
    found = leaks(logs)
    assert not found, f"{len(found)} registered strings in the logs, e.g. {found[0][:60]!r}"
    seed_logged = seed_found_in(logs)
    assert not seed_logged, "the signing seed appears in the function logs"
