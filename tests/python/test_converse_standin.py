"""The local Bedrock Runtime Converse stand-in (infra/local/converse.py), driven through boto3's
real `bedrock-runtime` client `converse`: Converse's wire shapes both ways, its deterministic
summary, the misbehaviour modes abstractive dreams must survive, AWS REST-JSON errors, and logs
without text.

Independent of the rest of the suite: it uses none of conftest.py's fixtures (no emulator, no
Rust binaries); it starts its own server processes on free ports.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from standins import Standin, client, load_module  # noqa: F401  (client: a fixture)

MODEL = "amazon.nova-micro-v1:0"
START_TIMEOUT = 30
SECRET = "sk-live-standin-7f3a9c"
# Never to appear in the server's log (it logs ids, modes, statuses and counts only).
MARKER = "zebra-quartz-marker-7f3a cannot leak"

FACTS = ("Summarise these 4 facts in at most 200 tokens.\n"
         "\n## preference\n- Customer prefers email (x3)\n- Invoices go to billing (x2)\n"
         "\n## (untagged)\n- Order 48213 shipped late.\n- The key is [REDACTED:db]\n")
SUMMARY = ("## preference\n- Customer prefers email; Invoices go to billing.\n"
           "## (untagged)\n- Order 48213 shipped late; The key is [REDACTED:db].")


converse_module = load_module("converse")


class Server(Standin):
    """The Converse stand-in with a --secrets file (SECRET as `db`) and a --record file."""

    def __init__(self, tmp: Path, env: dict[str, str] | None = None):
        self.record = tmp / "record.jsonl"
        secrets = tmp / "secrets.json"
        secrets.write_text(json.dumps({"db": SECRET}))
        super().__init__("converse", tmp, "--secrets", str(secrets), "--record", str(self.record),
                         env=env, start_timeout=START_TIMEOUT)

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with Server(tmp_path_factory.mktemp("converse")) as srv:
        yield srv


def converse(client, text: str = FACTS, model: str = MODEL, max_tokens: int = 200) -> dict:
    return client.converse(
        modelId=model,
        system=[{"text": "You condense the long-term memory of an AI agent."}],
        messages=[{"role": "user", "content": [{"text": text}]}],
        inferenceConfig={"maxTokens": max_tokens, "temperature": 0.0})


def text_of(response: dict) -> str:
    return "".join(b.get("text", "") for b in response["output"]["message"]["content"])


def error_of(client, **kwargs) -> dict:
    with pytest.raises(ClientError) as caught:
        converse(client, **kwargs)
    return caught.value.response


def test_health(server):
    with urllib.request.urlopen(f"{server.url}/health", timeout=10) as response:
        assert response.status == 200 and response.read() == b"ok"


def test_converse_answer_shape(client):
    response = converse(client)
    assert response["output"]["message"]["role"] == "assistant"
    assert text_of(response) == SUMMARY
    assert response["stopReason"] == "end_turn"
    usage = response["usage"]
    assert usage["outputTokens"] == converse_module.token_count(SUMMARY)
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"] > 0
    assert response["metrics"]["latencyMs"] >= 0
    assert response["ResponseMetadata"]["HTTPHeaders"]["content-type"] == "application/json"


def test_deterministic_and_any_model_id(client):
    first = text_of(converse(client))
    for model in ("anthropic.claude-3-haiku-20240307-v1:0", "us.amazon.nova-lite-v1:0",
                  "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-micro-v1:0"):
        assert text_of(converse(client, model=model)) == first


def test_max_tokens_cuts_the_answer(client):
    response = converse(client, max_tokens=5)
    assert response["stopReason"] == "max_tokens"
    assert response["usage"]["outputTokens"] == 5
    assert SUMMARY.startswith(text_of(response))


@pytest.mark.parametrize("mode,status,code", [
    ("fail-500", 500, "InternalServerException"),
    ("fail-400", 400, "ValidationException"),
    ("throttle", 429, "ThrottlingException"),
    ("unavailable", 503, "ServiceUnavailableException"),
    ("no-such-mode", 400, "ValidationException"),
])
def test_failure_modes_are_aws_errors(client, mode, status, code):
    error = error_of(client, model=f"standin.{mode}")
    assert error["Error"]["Code"] == code
    assert error["ResponseMetadata"]["HTTPStatusCode"] == status
    assert error["Error"]["Message"]


def test_mode_from_the_request_text(client):
    assert error_of(client, text=FACTS + "- standin-mode:fail-400\n")["Error"]["Code"] \
        == "ValidationException"
    assert converse(client, text=FACTS + "- standin-mode:refuse\n")["stopReason"] \
        == "content_filtered"


def test_answer_modes(client):
    refused = converse(client, model="standin.refuse")
    assert refused["stopReason"] == "content_filtered" and text_of(refused) == ""
    empty = converse(client, model="standin.empty")
    assert empty["stopReason"] == "end_turn" and text_of(empty) == ""
    cut = converse(client, model="standin.truncate")
    assert cut["stopReason"] == "max_tokens" and SUMMARY.startswith(text_of(cut))
    assert 0 < len(text_of(cut)) < len(SUMMARY)
    verbose = converse(client, model="standin.verbose", max_tokens=50)
    assert verbose["stopReason"] == "end_turn"
    assert verbose["usage"]["outputTokens"] == 50, "within maxTokens by its own count"
    assert len(text_of(verbose)) > 50 * 30, "but far longer than 50 tokens of any real tokenizer"


def test_leak_puts_the_secret_back_where_the_marker_was(client):
    leaked = text_of(converse(client, model="standin.leak"))
    assert SECRET in leaked and "[REDACTED:db]" not in leaked
    assert leaked == SUMMARY.replace("[REDACTED:db]", SECRET)


def test_slow_answers_late_and_a_client_timeout_gives_up(server):
    started = time.monotonic()
    assert text_of(converse(server.client(), model="standin.slow-1")) == SUMMARY
    assert time.monotonic() - started >= 1.0
    impatient = server.client(read_timeout=1)
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        converse(impatient, model="standin.slow-3")
    assert "timeout" in type(caught.value).__name__.lower() or "timed out" in str(caught.value)
    assert time.monotonic() - started < 2.5


def test_garbage_is_not_a_converse_answer(client):
    # botocore reads an unparsable 200 as an answer with no members (the Rust SDK refuses it).
    response = converse(client, model="standin.garbage")
    assert "output" not in response and "stopReason" not in response


def _raw(server, path: str, body: bytes) -> tuple[int, dict, str]:
    request = urllib.request.Request(f"{server.url}{path}", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


@pytest.mark.parametrize("body", [
    {},
    {"messages": []},
    {"messages": [{"role": "assistant", "content": [{"text": "x"}]}]},
    {"messages": [{"role": "robot", "content": [{"text": "x"}]}]},
    {"messages": [{"role": "user", "content": [{"text": 5}]}]},
    {"messages": [{"role": "user", "content": "x"}]},
    {"messages": [{"role": "user", "content": [{"text": "x"}]}], "inferenceConfig": {"maxTokens": 0}},
    {"messages": [{"role": "user", "content": [{"text": "x"}]}], "inferenceConfig": {"temperature": 3}},
    {"messages": [{"role": "user", "content": [{"text": "x"}]}], "unexpected": 1},
    "not json {",
], ids=lambda b: str(b)[:48])
def test_bad_requests_are_validation_exceptions(server, body):
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    status, headers, text = _raw(server, f"/model/{MODEL}/converse", raw)
    assert status == 400
    assert headers["x-amzn-ErrorType"] == "ValidationException"
    assert json.loads(text)["message"]


def test_unknown_operation(server):
    status, headers, _ = _raw(server, "/model/x/invoke-with-response-stream", b"{}")
    assert status == 404 and headers["x-amzn-ErrorType"] == "UnknownOperationException"


def test_logs_and_records_carry_no_text(server, client):
    converse(client, text=FACTS + f"- {MARKER}\n")
    converse(client, text=FACTS + f"- {MARKER} holds {SECRET}\n")
    error_of(client, model="standin.fail-400", text=f"- {MARKER}\n")
    time.sleep(0.2)
    log = server.log_text()
    assert f"model={MODEL} mode=ok status=200" in log
    assert "mode=fail-400 status=400" in log
    assert "zebra" not in log and "quartz" not in log and SECRET not in log
    records = server.records()
    assert "zebra" not in server.record.read_text()
    assert [r["secretsInInput"] for r in records[-3:]] == [0, 1, 0]
    assert set(records[-1]) == {"model", "mode", "status", "inputTokens", "outputTokens",
                                "maxTokens", "secretsInInput", "ms"}


def test_latency(client):
    """The stand-in answers in a few milliseconds (the figure in docs/dreams.md "Abstractive dreams
    (optional)")."""
    converse(client)
    took = []
    for _ in range(30):
        started = time.perf_counter()
        converse(client)
        took.append(time.perf_counter() - started)
    took.sort()
    median = took[len(took) // 2] * 1000
    print(f"converse stand-in through boto3: median {median:.1f} ms, max {took[-1] * 1000:.1f} ms")
    assert median < 200
