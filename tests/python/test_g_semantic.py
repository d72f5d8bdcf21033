"""Semantic and hybrid search through the real functions (docs/search.md "Semantic search"): a
second local gateway runs memory-write and memory-read with `EMBEDDING_MODEL_ID` set and the Bedrock
Runtime endpoint pointed at the local InvokeModel stand-in (infra/local/embedder.py: real
all-MiniLM-L6-v2 embeddings, Titan V2 wire shapes), reached through the Rust SDK. The session's
plain gateway (no embedder) must refuse the modes and advertise `filter` only."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import standin_gateway
from standins import Standin
from wopkit import (BASE, Api, Invoker, aws_client, ids, memory_ref, new_id,
                    new_tenant, query, search, secret_value, sensitive)

MODEL = "amazon.titan-embed-text-v2:0"


@pytest.fixture(scope="module")
def standin(tmp_path_factory) -> tuple[str, Path]:
    """The stand-in on a free port; its file of sha256 digests of every text it embedded."""
    work = tmp_path_factory.mktemp("embedder")
    digests = work / "digests"
    with Standin("embedder", work, "--digests", str(digests), start_timeout=60) as server:
        yield server.url, digests


@pytest.fixture(scope="module")
def semantic_url(standin) -> str:
    url, _ = standin
    # The functions' logs of this gateway (the embed path, the Bedrock adapter) hold no
    # registered content or secret.
    with standin_gateway("python-e2e-semantic", url, {"EMBEDDING_MODEL_ID": MODEL},
                         logged="memory-write") as gateway_url:
        yield gateway_url



TEXTS = [
    "The customer would rather receive messages by e-mail than by phone.",
    "The Berlin warehouse closes at six in the evening on weekdays.",
    "Invoice 88412 was paid three weeks late.",
    "Our cat sleeps on the sofa all afternoon.",
    "Deploys are frozen during the last week of December.",
]


def every_entry_embedded(url: str, tenant: str, ref: str) -> None:
    """A write embeds within a time budget; on a loaded machine some entries miss it and are
    left to the embed pass (tests/python/test_n_embed_backfill.py checks that path). These
    tests are about ranking embedded entries, so they run the pass the deployed sweep would."""
    report: dict[str, Any] = {}
    for _ in range(5):
        report = Invoker(url).ok("memory-dream", {"tenantId": tenant, "memoryRef": ref,
                                                  "pass": "embed"})
        if not report["pending"]:
            break
    assert report["status"] == "complete" and not report["pending"], report


def test_capabilities_advertise_semantic_only_where_an_embedder_is_configured(
        semantic_url: str, base_url: str):
    on = Api(semantic_url).capabilities()["memory"]
    off = Api(base_url).capabilities()["memory"]
    assert on["search"]["modes"] == ["filter", "semantic"]
    assert on["x-wop-memory-search"]["modes"] == ["text", "semantic", "hybrid"]
    assert on["x-wop-memory-search"]["embeddingModel"] == MODEL
    assert off["search"]["modes"] == ["filter"]
    assert off["x-wop-memory-search"]["modes"] == ["text"]
    assert off["x-wop-memory-search"]["embeddingModel"] is None


def test_semantic_search_finds_paraphrases_that_share_no_word(semantic_url: str, standin):
    _, digests = standin
    tenant = new_tenant()
    ref = memory_ref(tenant, f"sem-{new_id()}")
    secret = secret_value("sem")
    texts = [*TEXTS, f"The staging database password is {secret}."]
    written = Invoker(semantic_url).put(
        tenant, ref, [{"content": sensitive(t)} for t in texts],
        secrets=[{"secretId": "db", "value": secret}])
    every_entry_embedded(semantic_url, tenant, ref)
    api = Api(semantic_url, tenant)
    # No word in common with the entry it means.
    question = "preferred communication channel"
    assert ids(search(api, ref, question)) == [], "text search cannot see it"
    semantic = search(api, ref, question, ("mode", "semantic"))
    assert ids(semantic)[0] == written[0], semantic
    # Cosine (a newer version of an answer takes its older's, never more); nothing without a
    # positive similarity is a result.
    assert all(0.0 < r["score"] <= 1.0 + 1e-9 for r in semantic)
    assert semantic == search(api, ref, question, ("mode", "semantic")), "deterministic"
    # Hybrid keeps what text search is best at (an exact rare token) and adds the paraphrase.
    assert ids(search(api, ref, "88412", ("mode", "hybrid")))[0] == written[2]
    assert ids(search(api, ref, "when is the depot shut", ("mode", "hybrid")))[0] == written[1]
    # The vectors are stored with the entries: 384 little-endian f32s and the model id.
    table = aws_client("dynamodb")
    key_of = {"pk": {"S": f"{tenant}#{ref.split('/')[3]}"}}
    items = table.query(TableName=os.environ["MEMORY_TABLE"], ConsistentRead=True,
                        KeyConditionExpression="pk = :p",
                        ExpressionAttributeValues={":p": key_of["pk"]})["Items"]
    stored = [i for i in items if "embedding" in i]
    assert len(stored) == len(texts)
    assert all(len(i["embedding"]["B"]) == 384 * 4 for i in stored)
    assert all(i["embeddingModel"]["S"] == MODEL for i in stored)
    # The model saw the redacted text, never the secret.
    sent = set(digests.read_text().split())
    redacted = f"The staging database password is [REDACTED:db]."
    assert hashlib.sha256(redacted.encode()).hexdigest() in sent
    assert hashlib.sha256(texts[-1].encode()).hexdigest() not in sent


def test_semantic_search_never_crosses_tenants_or_shows_deleted_entries(semantic_url: str):
    tenant = new_tenant()
    ref = memory_ref(tenant, f"semx-{new_id()}")
    written = Invoker(semantic_url).put(tenant, ref, [{"content": sensitive(t)} for t in TEXTS])
    every_entry_embedded(semantic_url, tenant, ref)
    api = Api(semantic_url, tenant)
    question = "which animal naps on the couch"
    assert ids(search(api, ref, question, ("mode", "semantic")))[0] == written[3]
    intruder = Api(semantic_url, new_tenant())
    for mode in ("semantic", "hybrid"):
        assert search(intruder, ref, question, ("mode", mode)) == []
        assert search(api, "workspaces/../memories", question, ("mode", mode)) == []
    assert Invoker(semantic_url).ok("memory-write", {"op": "delete", "tenantId": tenant,
                                                      "memoryRef": ref, "id": written[3]}) \
        == {"deleted": True}
    for mode in ("semantic", "hybrid"):
        assert written[3] not in ids(search(api, ref, question, ("mode", mode)))


def test_a_host_without_an_embedder_refuses_the_modes(base_url: str):
    tenant = new_tenant()
    api = Api(base_url, tenant)
    ref = memory_ref(tenant, "agent-1")
    for mode in ("semantic", "hybrid"):
        err = api.error("GET", f"{BASE}/search?{query([('memoryRef', ref), ('q', 'x'), ('mode', mode)])}",
                        status=400, code="validation_error")
        assert "mode" in err.raw_text
    api.error("GET", f"{BASE}/search?{query([('memoryRef', ref), ('q', 'x'), ('mode', 'fuzzy')])}",
              status=400, code="validation_error")
