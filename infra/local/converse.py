#!/usr/bin/env python3
"""A local stand-in for Amazon Bedrock Runtime `Converse`, for abstractive dreams.

It speaks Converse's REST-JSON wire shapes (what boto3's `bedrock-runtime` client and the Rust
service's aws-sdk-bedrockruntime send and parse) and answers with a deterministic "abstractive"
summary: the facts it was given, regrouped under their headings with every section's facts
joined on one line, the `(xN)` counts dropped. No model, no network, stdlib only.

    infra/local/converse.py serve --port 4598 [--port-file PATH] [--secrets FILE] [--record FILE]
        (--port 0: a free port; the port file is written once the server listens)

    POST /model/{modelId}/converse   {"messages", "system"?, "inferenceConfig"?, ...}; any SigV4
                                     signature is accepted
    GET  /health                     200 "ok"

Misbehaviour for tests, chosen by the model id `standin.<mode>` or by a `standin-mode:<mode>`
token anywhere in the request's text (so one dream's sources can steer one request):

    ok (default)   the summary above; cut at maxTokens with stopReason "max_tokens" if longer
    fail-500       500 InternalServerException        throttle     429 ThrottlingException
    fail-400       400 ValidationException            unavailable  503 ServiceUnavailableException
    slow[-S]       answers after S seconds (default 30, or CONVERSE_SLOW_SECONDS)
    leak           the summary with every [REDACTED:id] marker replaced by the value --secrets
                   maps id to: a model that "reintroduces" a secret
    verbose        maxTokens words the stand-in counts as one token each, but long ones (far more
                   cl100k_base tokens), stopReason "end_turn": over budget by the caller's count
    truncate       half the summary, stopReason "max_tokens"
    refuse         stopReason "content_filtered"      empty        an empty text block
    garbage        200 with a body that is not JSON

Errors use the AWS REST-JSON shape (`x-amzn-ErrorType` header, `{"message": ...}` body). The
server logs one line per request (model id, mode, status, token counts, how many --secrets
values the input held, milliseconds) and never any text; --record appends the same as a JSON
line, for tests.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from urllib.parse import unquote

sys.path.insert(0, str(Path(__file__).resolve().parent))
import standin_http  # noqa: E402  (the server both stand-ins run, beside this file)
from standin_http import ApiError  # noqa: E402

_CONVERSE = re.compile(r"^/model/([^/]+)/converse$")
_MODEL_ID = re.compile(r"^[A-Za-z0-9._:/+-]{1,2048}$")
_MODE_TOKEN = re.compile(r"standin-mode:([a-z0-9-]+)")
_MARKER = re.compile(r"\[REDACTED:([^\]\s]{1,128})\]")
_WEIGHT = re.compile(r"\s*\(x\d+\)$")
# What the stand-in counts as one model token: a word or one other visible character.
_TOKEN = re.compile(r"\w+|[^\w\s]")
MODES = {"ok", "fail-500", "fail-400", "throttle", "unavailable", "slow", "leak", "verbose",
         "truncate", "refuse", "empty", "garbage"}
_FIELDS = {"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig",
           "additionalModelRequestFields", "additionalModelResponseFieldPaths",
           "promptVariables", "requestMetadata", "performanceConfig", "serviceTier"}
_INFERENCE_FIELDS = {"maxTokens", "temperature", "topP", "stopSequences"}
DEFAULT_MAX_TOKENS = 4096
# A long word of many cl100k_base tokens that the stand-in counts as one (mode "verbose").
LONG_WORD = "Xylophonequartzjinglezephyrmarmalade"


def _invalid(message: str) -> ApiError:
    return ApiError(400, "ValidationException", message)


def token_count(text: str) -> int:
    return len(_TOKEN.findall(text))


def _cut(text: str, tokens: int) -> str:
    """`text` up to the end of its `tokens`-th stand-in token."""
    if tokens <= 0:
        return ""
    for i, match in enumerate(_TOKEN.finditer(text), start=1):
        if i == tokens:
            return text[:match.end()]
    return text


def _texts(blocks, where: str) -> list[str]:
    if not isinstance(blocks, list):
        raise _invalid(f"{where}: expected a list of content blocks")
    out = []
    for i, block in enumerate(blocks):
        if not isinstance(block, dict) or len(block) != 1:
            raise _invalid(f"{where}[{i}]: a content block has exactly one member")
        (kind, value), = block.items()
        if kind == "text":
            if not isinstance(value, str):
                raise _invalid(f"{where}[{i}].text: expected a string")
            out.append(value)
        elif kind not in ("image", "document", "video", "toolUse", "toolResult",
                          "guardContent", "cachePoint", "reasoningContent"):
            raise _invalid(f"{where}[{i}]: unknown content block {kind[:32]!r}")
    return out


def parse_request(body: bytes) -> tuple[str, str, int]:
    """(system text, conversation text, maxTokens) of a Converse body, validated."""
    request = standin_http.json_object(
        body, _FIELDS, _invalid, not_json="The request body is not valid JSON",
        not_object="The request body must be a JSON object")
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("messages: at least one message is required")
    conversation = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or set(message) - {"role", "content"}:
            raise _invalid(f"messages[{i}]: expected {{role, content}}")
        if message.get("role") not in ("user", "assistant"):
            raise _invalid(f"messages[{i}].role: expected user or assistant")
        conversation += _texts(message.get("content"), f"messages[{i}].content")
    if messages[0].get("role") != "user":
        raise _invalid("A conversation must start with a user message.")
    system = _texts(request.get("system", []), "system")
    config = request.get("inferenceConfig", {})
    if not isinstance(config, dict) or set(config) - _INFERENCE_FIELDS:
        raise _invalid("inferenceConfig: unknown member")
    max_tokens = config.get("maxTokens", DEFAULT_MAX_TOKENS)
    if type(max_tokens) is not int or max_tokens < 1:
        raise _invalid("inferenceConfig.maxTokens: expected an integer >= 1")
    temperature = config.get("temperature", 1.0)
    if not isinstance(temperature, (int, float)) or not 0 <= temperature <= 1:
        raise _invalid("inferenceConfig.temperature: expected a number in [0, 1]")
    return "\n".join(system), "\n".join(conversation), max_tokens


def abstractive_answer(text: str) -> str:
    """The deterministic "abstractive" answer: headings kept, each section's bullet facts joined
    on one line with `; `, `(xN)` counts and trailing full stops dropped. Lines that are neither
    (the request's own instruction line) are left out."""
    sections: list[tuple[str | None, list[str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif line.startswith("- "):
            fact = _WEIGHT.sub("", line[2:].strip()).rstrip(" .;")
            if not fact:
                continue
            if not sections:
                sections.append((None, []))
            sections[-1][1].append(fact)
    out = []
    for heading, facts in sections:
        if not facts:
            continue
        if heading:
            out.append(f"## {heading}")
        out.append("- " + "; ".join(facts) + ".")
    return "\n".join(out)


def mode_of(model_id: str, text: str) -> str:
    if model_id.startswith("standin."):
        mode = model_id[len("standin."):]
    else:
        found = _MODE_TOKEN.search(text)
        mode = found.group(1) if found else "ok"
    name = "slow" if re.fullmatch(r"slow(-\d{1,3})?", mode) else mode
    if name not in MODES:
        raise _invalid("The provided model identifier is invalid.")
    return mode


def answer(mode: str, conversation: str, max_tokens: int,
           secrets: dict[str, str]) -> tuple[str | None, str]:
    """(text, stopReason) of a successful call; raises the injected failures."""
    if mode == "fail-500":
        raise ApiError(500, "InternalServerException", "Injected fault (standin fail-500).")
    if mode == "fail-400":
        raise _invalid("Injected fault (standin fail-400).")
    if mode == "throttle":
        raise ApiError(429, "ThrottlingException", "Too many requests, please wait.")
    if mode == "unavailable":
        raise ApiError(503, "ServiceUnavailableException", "Injected fault (standin).")
    if mode == "refuse":
        return "", "content_filtered"
    if mode == "empty":
        return "", "end_turn"
    if mode == "verbose":
        return " ".join([LONG_WORD] * max_tokens), "end_turn"
    if mode.startswith("slow"):
        seconds = int(mode[5:]) if mode.startswith("slow-") else int(
            os.environ.get("CONVERSE_SLOW_SECONDS") or 30)
        time.sleep(seconds)
    text = abstractive_answer(conversation)
    if mode == "leak":
        text = _MARKER.sub(lambda m: secrets.get(m.group(1), m.group(0)), text)
    if mode == "truncate":
        return _cut(text, max(1, token_count(text) // 2)), "max_tokens"
    if token_count(text) > max_tokens:
        return _cut(text, max_tokens), "max_tokens"
    return text, "end_turn"


class _Handler(standin_http.Handler):
    server_version = "bedrock-runtime-converse-standin"
    secrets: dict[str, str] = {}
    record: str | None = None
    lock = threading.Lock()

    def _log(self, fields: dict) -> None:
        print("converse: " + " ".join(f"{k}={v}" for k, v in fields.items()), file=sys.stderr,
              flush=True)
        if self.record:
            with self.lock, open(self.record, "a", encoding="utf-8") as f:
                f.write(json.dumps(fields) + "\n")

    def do_POST(self):  # noqa: N802
        started = time.monotonic()
        try:
            match, body = self.read_post(_CONVERSE)
        except ApiError as err:
            self.send_api_error(err)
            return
        model_id = unquote(match.group(1))
        fields = {"model": model_id[:128] if _MODEL_ID.match(model_id) else "(invalid)",
                  "mode": "-", "status": 0, "inputTokens": 0, "outputTokens": 0,
                  "maxTokens": 0, "secretsInInput": 0, "ms": 0}
        status, payload, headers = 200, b"", {}
        try:
            if not _MODEL_ID.match(model_id):
                raise _invalid("The provided model identifier is invalid.")
            system, conversation, max_tokens = parse_request(body)
            mode = mode_of(model_id, f"{system}\n{conversation}")
            fields.update(mode=mode, maxTokens=max_tokens,
                          inputTokens=token_count(system) + token_count(conversation),
                          secretsInInput=sum(1 for v in self.secrets.values()
                                             if v and v in f"{system}\n{conversation}"))
            text, stop = answer(mode, conversation, max_tokens, self.secrets)
            output = token_count(text or "")
            fields["outputTokens"] = output
            if mode == "garbage":
                payload, content_type = b"<html>not a Converse answer</html>", "application/json"
            else:
                content_type = "application/json"
                payload = json.dumps({
                    "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                    "stopReason": stop,
                    "usage": {"inputTokens": fields["inputTokens"], "outputTokens": output,
                              "totalTokens": fields["inputTokens"] + output},
                    "metrics": {"latencyMs": int((time.monotonic() - started) * 1000)},
                }).encode()
        except ApiError as err:
            status = err.status
            payload, content_type = json.dumps({"message": err.message}).encode(), "application/json"
            headers = {"x-amzn-ErrorType": err.code}
        except Exception as err:  # noqa: BLE001  (a bug here must answer, not hang the client)
            status = 500
            payload = json.dumps({"message": type(err).__name__}).encode()
            content_type, headers = "application/json", {"x-amzn-ErrorType": "InternalServerException"}
        self.send(status, payload, content_type, headers)
        fields.update(status=status, ms=int((time.monotonic() - started) * 1000))
        self._log(fields)


def serve(port: int, port_file: str | None, secrets: str | None, record: str | None) -> None:
    _Handler.secrets = json.loads(Path(secrets).read_text()) if secrets else {}
    _Handler.record = record
    standin_http.listen(_Handler, port, port_file, "converse")


def main() -> None:
    parser, run = standin_http.command_line(__doc__, "Bedrock Runtime Converse", 4598)
    run.add_argument("--secrets", help="JSON file {secretId: value}: what mode leak puts back "
                     "in place of markers, and what secretsInInput counts")
    run.add_argument("--record", help="append one JSON line per request (no text) to this file")
    args = parser.parse_args()
    serve(args.port, args.port_file, args.secrets, args.record)


if __name__ == "__main__":
    main()
