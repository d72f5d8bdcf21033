"""The local Bedrock Runtime stand-in (infra/local/embedder.py), driven through boto3's real
`bedrock-runtime` client `invoke_model`: Titan Text Embeddings V2 wire shapes carrying real
all-MiniLM-L6-v2 embeddings, AWS REST-JSON errors, the fault hook, and logs without input text.

Independent of the rest of the suite: it uses none of conftest.py's fixtures (no emulator, no
Rust binaries); it starts its own server processes on free ports.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from botocore.exceptions import ClientError

from standins import Standin, client, load_module  # noqa: F401  (client: a fixture)

MODEL = "amazon.titan-embed-text-v2:0"
START_TIMEOUT = 60
# Never to appear in the server's log (it logs model id, status and token count only).
MARKER = "zebra-quartz-marker-7f3a cannot leak"


embedder = load_module("embedder")


def start(tmp: Path, env: dict[str, str] | None = None) -> Standin:
    return Standin("embedder", tmp, env=env, start_timeout=START_TIMEOUT)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with start(tmp_path_factory.mktemp("embedder")) as srv:
        yield srv


def invoke(client, body, model: str = MODEL) -> tuple[dict, dict]:
    """The parsed Titan V2 answer and the HTTP response headers."""
    raw = body if isinstance(body, (bytes, str)) else json.dumps(body)
    response = client.invoke_model(modelId=model, body=raw, contentType="application/json",
                                   accept="application/json")
    return json.loads(response["body"].read()), response["ResponseMetadata"]["HTTPHeaders"]


def vector(client, text: str) -> np.ndarray:
    answer, _ = invoke(client, {"inputText": text})
    return np.array(answer["embedding"], dtype=np.float64)


def test_health(server):
    with urllib.request.urlopen(f"{server.url}/health", timeout=10) as response:
        assert response.status == 200
        assert response.read() == b"ok"


def test_titan_v2_answer_shape(client):
    text = "The customer prefers email"
    answer, headers = invoke(client, {"inputText": text, "dimensions": 384, "normalize": True,
                                      "embeddingTypes": ["float"]})
    assert set(answer) == {"embedding", "inputTextTokenCount", "embeddingsByType"}
    assert len(answer["embedding"]) == 384
    assert all(isinstance(x, float) for x in answer["embedding"])
    assert answer["embeddingsByType"] == {"float": answer["embedding"]}
    assert abs(np.linalg.norm(answer["embedding"]) - 1) < 1e-5
    # [CLS] the customer prefers email [SEP]
    assert answer["inputTextTokenCount"] == embedder.token_count(text) == 6
    assert headers["content-type"] == "application/json"
    assert headers["x-amzn-bedrock-input-token-count"] == "6"


def test_server_and_module_agree(client):
    text = "Meeting moved to Thursday, 3 pm."
    local = embedder.embed([text])[0]
    assert local.dtype == np.float32 and local.shape == (384,)
    assert np.abs(vector(client, text) - local).max() < 1e-6


def test_known_reference_vector():
    # Published all-MiniLM-L6-v2 values (fastembed's test suite) for "hello world".
    reference = [-0.034478, 0.03102, 0.00673, 0.02611, -0.039362]
    assert np.allclose(embedder.embed(["hello world"])[0, :5], reference, atol=1e-4)


def test_deterministic(client):
    text = "Invoices are due on the first of each month."
    first, _ = invoke(client, {"inputText": text})
    second, _ = invoke(client, {"inputText": text})
    assert first["embedding"] == second["embedding"]


def test_paraphrase_is_closer_than_unrelated(client):
    a = vector(client, "The customer prefers email")
    b = vector(client, "Client would rather be contacted by e-mail")
    c = vector(client, "The warehouse is in Berlin")
    paraphrase, unrelated = float(a @ b), float(a @ c)
    assert paraphrase > 0.5, paraphrase
    assert unrelated < 0.3, unrelated
    assert paraphrase > unrelated + 0.3


def test_non_english_and_cjk(client):
    for text in ("東京は日本の首都です", "Grüße aus Köln, ça va?", "Привет, мир", "🙂👍"):
        answer, _ = invoke(client, {"inputText": text})
        v = np.array(answer["embedding"])
        assert v.shape == (384,) and abs(np.linalg.norm(v) - 1) < 1e-5
        assert answer["inputTextTokenCount"] == embedder.token_count(text) >= 3
    tokyo = vector(client, "東京は日本の首都です")
    assert float(tokyo @ vector(client, "Tokyo is the capital of Japan")) > float(
        tokyo @ vector(client, "The invoice is overdue"))


def test_long_text_is_truncated_not_refused(client):
    text = "word " * 1000
    answer, _ = invoke(client, {"inputText": text})
    assert answer["inputTextTokenCount"] == 1002  # the whole text is counted
    assert np.allclose(answer["embedding"], embedder.embed(["word " * 300])[0], atol=1e-6)


def test_normalize_false_and_binary(client):
    text = "Quarterly budget review"
    unit = vector(client, text)
    answer, _ = invoke(client, {"inputText": text, "normalize": False,
                                "embeddingTypes": ["float", "binary"]})
    raw = np.array(answer["embedding"])
    assert abs(np.linalg.norm(raw) - 1) > 1e-3
    assert np.allclose(raw / np.linalg.norm(raw), unit, atol=1e-5)
    assert answer["embeddingsByType"]["binary"] == [int(x > 0) for x in raw]


@pytest.mark.parametrize("body", [
    {},
    {"inputText": ""},
    {"inputText": 42},
    {"inputText": None},
    {"inputText": ["a list"]},
    {"inputText": "fine", "dimensions": 1024},
    {"inputText": "fine", "dimensions": "384"},
    {"inputText": "fine", "normalize": "yes"},
    {"inputText": "fine", "embeddingTypes": ["int8"]},
    {"inputText": "fine", "unexpected": 1},
    {"inputText": "x" * 50_001},
    "not json {",
    "[1, 2]",
], ids=lambda b: str(b)[:40])
def test_bad_request_is_a_validation_exception(client, body):
    with pytest.raises(ClientError) as caught:
        invoke(client, body)
    error = caught.value.response
    assert error["Error"]["Code"] == "ValidationException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Error"]["Message"]


def test_dimensions_1024_is_refused(client):
    with pytest.raises(ClientError) as caught:
        invoke(client, {"inputText": "fine", "dimensions": 1024})
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert "384" in caught.value.response["Error"]["Message"]


def test_model_ids(client):
    for model in ("amazon.titan-embed-text-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        answer, _ = invoke(client, {"inputText": "fine"}, model=model)
        assert len(answer["embedding"]) == 384
    for model in ("amazon.titan-embed-text-v1", "cohere.embed-english-v3"):
        with pytest.raises(ClientError) as caught:
            invoke(client, {"inputText": "fine"}, model=model)
        assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_log_lines_carry_no_input_text(server, client):
    invoke(client, {"inputText": MARKER})
    with pytest.raises(ClientError):
        invoke(client, {"inputText": MARKER, "dimensions": 1024})
    time.sleep(0.2)
    log = server.log_text()
    assert f"model={MODEL} status=200 tokens={embedder.token_count(MARKER)}" in log
    assert f"model={MODEL} status=400" in log
    assert "zebra" not in log and "quartz" not in log


def test_fault_hook_every_second_request(tmp_path):
    with start(tmp_path, env={"EMBEDDER_FAIL_EVERY": "2"}) as faulty:
        client = faulty.client()
        codes = []
        for _ in range(4):
            try:
                invoke(client, {"inputText": "fine"})
                codes.append("ok")
            except ClientError as err:
                assert err.response["ResponseMetadata"]["HTTPStatusCode"] == 503
                codes.append(err.response["Error"]["Code"])
        assert codes == ["ok", "ServiceUnavailableException"] * 2
