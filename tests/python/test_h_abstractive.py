"""Abstractive dreams through the real functions (docs/dreams.md "Abstractive dreams (optional)"):
a second local gateway runs memory-dream with `ABSTRACTIVE_MODEL_ID` set and the Bedrock Runtime
endpoint pointed at the local Converse stand-in (infra/local/converse.py), reached through the
Rust SDK.

What must hold: the long-term entry carries the model's text; a secret the model reintroduces
is masked again and a registered secret never leaves for the model; every way the model can
misbehave (errors, throttling, a late, empty, cut, refused, unparsable or over-budget answer)
leaves exactly the deterministic summary; forget reaches the abstractive output; and the
session's plain gateway (no model) dreams as before without calling the model."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import standin_gateway
from standins import Standin
from wopkit import (BASE, Api, Invoker, aws_client, memory_ref, new_id, new_tenant,
                    query, secret_value, sensitive)

MODEL = "amazon.nova-micro-v1:0"
TIMEOUT_MS = 2000
DETERMINISTIC_LINE = re.compile(r"^(## .+|- .+ \((x\d+, )?latest \d{4}-\d{2}-\d{2}\))$")
# A registered secret the stand-in's `leak` mode puts back where the [REDACTED:db] marker was.
LEAKED = secret_value("leak")


@pytest.fixture(scope="module")
def standin(tmp_path_factory) -> tuple[str, Path]:
    """The stand-in on a free port; its record file (one JSON line per request, no text)."""
    work = tmp_path_factory.mktemp("converse")
    record, secrets = work / "record.jsonl", work / "secrets.json"
    secrets.write_text(json.dumps({"db": LEAKED}))
    with Standin("converse", work, "--secrets", str(secrets), "--record", str(record)) as server:
        record.touch()
        yield server.url, record


@pytest.fixture(scope="module")
def abstractive_url(standin) -> str:
    url, _ = standin
    # The dream's logs (the abstractive model, its fallbacks) hold no registered content or secret.
    with standin_gateway("python-e2e-abstractive", url, {
        "ABSTRACTIVE_MODEL_ID": MODEL,
        "ABSTRACTIVE_TIMEOUT_MS": str(TIMEOUT_MS),
    }, logged="abstractive summary") as gateway_url:
        yield gateway_url


def records(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def archive_of(report: dict[str, Any]) -> dict[str, Any]:
    body = aws_client("s3").get_object(Bucket=os.environ["ARCHIVE_BUCKET"],
                                       Key=report["archiveKey"])["Body"].read()
    return json.loads(body)


def dream(url: str, tenant: str, ref: str, entries: list[dict[str, Any]], *,
          secrets: list[dict[str, str]] | None = None,
          dream_secrets: list[dict[str, str]] | None = None) -> tuple[dict, dict]:
    """Writes `entries` to `ref`, dreams it; the report and the long-term entry."""
    invoker = Invoker(url)
    invoker.put(tenant, ref, entries, secrets=secrets)
    payload: dict[str, Any] = {"tenantId": tenant, "memoryRef": ref}
    if dream_secrets is not None:
        payload["secrets"] = dream_secrets
    report = invoker.ok("memory-dream", payload)
    assert report["status"] == "distilled", report
    return report, Api(url, tenant).get(ref, report["outputId"])


def notes(label: str) -> list[dict[str, Any]]:
    return [
        {"content": sensitive(f"Customer {label} prefers email follow-up"), "tags": ["preference"]},
        {"content": sensitive(f"Customer {label} prefers email follow-up"), "tags": ["preference"]},
        {"content": sensitive(f"Invoice {label}-88412 was paid three weeks late"),
         "tags": ["billing"]},
        {"content": sensitive(f"Deploys for {label} are frozen in the last week of December")},
    ]


def test_the_long_term_entry_carries_the_models_summary(abstractive_url, standin):
    _, record = standin
    before = len(records(record))
    tenant = new_tenant()
    label = new_id()
    ref = memory_ref(tenant, f"abs-{label}")
    report, entry = dream(abstractive_url, tenant, ref, notes(label))
    assert report["summaryModel"] == MODEL and "summaryFallback" not in report, report
    # The stand-in's rewrite: headings kept, each section's facts on one line, no (xN) counts.
    assert entry["content"] == (
        "## billing\n"
        f"- Invoice {label}-88412 was paid three weeks late.\n"
        "## preference\n"
        f"- Customer {label} prefers email follow-up.\n"
        "## (untagged)\n"
        f"- Deploys for {label} are frozen in the last week of December."), entry["content"]
    # Provenance exactly as a deterministic dream writes it.
    assert [t for t in entry["tags"] if t.startswith("compacted-from:")] == entry["tags"]
    assert len(entry["tags"]) == 1
    document = archive_of(report)
    assert document["summary"] == entry["content"]
    assert document["distillerVersion"].startswith(f"wop-memory.abstractive/1;model={MODEL};")
    assert document["sourceCount"] == 4 and len(document["sourceIds"]) == 4
    assert document["tokensUsed"] == document["inputTokens"] + document["outputTokens"]
    assert document["tokensUsed"] <= document["tokenBudget"]
    assert report["tokensUsed"] == document["tokensUsed"]
    sent = records(record)[before:]
    assert [(r["model"], r["mode"], r["status"]) for r in sent] == [(MODEL, "ok", 200)]
    assert 0 < sent[0]["maxTokens"] <= 4096


def test_a_secret_the_model_reintroduces_is_masked_and_none_is_sent(abstractive_url, standin):
    _, record = standin
    before = len(records(record))
    tenant = new_tenant()
    ref = memory_ref(tenant, f"abs-leak-{new_id()}")
    secrets = [{"secretId": "db", "value": LEAKED}]
    # Stored as [REDACTED:db]; the stand-in's leak mode puts the value back in its answer.
    entries = [{"content": sensitive(f"The staging database password is {LEAKED}")},
               {"content": sensitive("standin-mode:leak reminder for the on-call rota")}]
    # A second secret that slipped into an entry before it was registered: the dream's own
    # secrets redact it before anything is sent to the model.
    slipped = secret_value("slipped")
    entries.append({"content": sensitive(f"Old API token {slipped} still in use")})
    report, entry = dream(abstractive_url, tenant, ref, entries, secrets=secrets,
                          dream_secrets=secrets + [{"secretId": "api", "value": slipped}])
    assert report["summaryModel"] == MODEL, report
    assert LEAKED not in entry["content"] and slipped not in entry["content"]
    assert "[REDACTED:db]" in entry["content"] and "[REDACTED:api]" in entry["content"]
    assert "; " in entry["content"], "the model's text, re-redacted, not the fallback"
    assert LEAKED not in json.dumps(archive_of(report))
    sent = records(record)[before:]
    assert [r["mode"] for r in sent] == ["leak"]
    assert sent[0]["secretsInInput"] == 0, "no registered secret reached the model"


# Each misbehaviour, steered by a token in one source, and the reason the dream reports.
MISBEHAVIOUR = [
    ("fail-400", "model-error"),      # a non-retryable error
    ("truncate", "model-error"),      # cut at the token limit: stopReason max_tokens
    ("refuse", "model-error"),        # stopReason content_filtered
    ("garbage", "model-error"),       # a 200 that is not a Converse answer
    ("empty", "empty"),
    ("verbose", "over-budget"),       # within maxTokens by the model's count, not by cl100k's
    ("slow-4", "timeout"),          # answers after 4 s, the dream waits 2
    ("throttle", "timeout"),          # retried until the dream's timeout
    ("fail-500", "timeout"),          # retried until the dream's timeout
]


@pytest.mark.parametrize("mode,reason", MISBEHAVIOUR, ids=[m for m, _ in MISBEHAVIOUR])
def test_a_misbehaving_model_leaves_the_deterministic_summary(abstractive_url, base_url, standin,
                                                             mode, reason):
    _, record = standin
    before = len(records(record))
    tenant = new_tenant()
    label = new_id()
    entries = notes(label) + [{"content": sensitive(f"standin-mode:{mode} note {label}")}]
    started = time.monotonic()
    report, entry = dream(abstractive_url, tenant, memory_ref(tenant, f"abs-{mode}"), entries)
    took = time.monotonic() - started
    assert report["summaryFallback"] == reason and "summaryModel" not in report, report
    if reason == "timeout":
        assert took < TIMEOUT_MS / 1000 + 8, f"the dream waited {took:.1f} s"
    # Exactly what a dream without a model writes for the same notes, and recorded as such.
    plain_report, plain = dream(base_url, tenant, memory_ref(tenant, f"plain-{mode}"), entries)
    assert entry["content"] == plain["content"]
    assert all(DETERMINISTIC_LINE.match(line) for line in entry["content"].splitlines())
    assert archive_of(report)["distillerVersion"] == archive_of(plain_report)["distillerVersion"]
    assert report["tokensUsed"] == plain_report["tokensUsed"] <= report["tokenBudget"]
    # The stand-in records a request when it answers: a late answer comes after the dream.
    deadline = time.monotonic() + 10
    while mode not in {r["mode"] for r in records(record)[before:]}:
        assert time.monotonic() < deadline, "the stand-in never saw the request"
        time.sleep(0.1)
    assert {r["mode"] for r in records(record)[before:]} == {mode}


def test_forget_reaches_the_abstractive_output(abstractive_url):
    tenant = new_tenant()
    ref = memory_ref(tenant, f"abs-forget-{new_id()}")
    subject = sensitive(f"customer-{new_id()}")
    entries = [{"content": sensitive(f"{subject} asked to be called after 5 pm"),
                "subject": subject},
               {"content": sensitive("The Berlin office closes at six")}]
    report, entry = dream(abstractive_url, tenant, ref, entries)
    assert report["summaryModel"] == MODEL
    counts = Invoker(abstractive_url).ok("memory-forget", {"tenantId": tenant, "subject": subject})
    assert counts["deletedEntries"] >= 2 and counts["deletedArchives"] == 1, counts
    Api(abstractive_url, tenant).error(
        "GET", f"{BASE}/entries/{entry['id']}?{query({'memoryRef': ref})}", status=404,
        code="not_found")
    s3 = aws_client("s3")
    listed = s3.list_objects_v2(Bucket=os.environ["ARCHIVE_BUCKET"], Prefix=f"{tenant}/")
    assert not [o["Key"] for o in listed.get("Contents", []) if "/archives/" in o["Key"]]


def test_without_a_model_nothing_changes(base_url, standin):
    _, record = standin
    before = len(records(record))
    tenant = new_tenant()
    report, entry = dream(base_url, tenant, memory_ref(tenant, "plain"), notes(new_id()))
    assert "summaryModel" not in report and "summaryFallback" not in report, report
    assert all(DETERMINISTIC_LINE.match(line) for line in entry["content"].splitlines())
    assert not archive_of(report)["distillerVersion"].startswith("wop-memory.abstractive/")
    assert len(records(record)) == before, "the plain gateway never calls the model"
