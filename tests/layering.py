#!/usr/bin/env python3
"""The layering rules of docs/architecture.md "Layering: each function links only what it runs",
checked on the real dependency graph:

- a pure crate (memory-guard, distill, consolidation, commitments, text-search, lexicon,
  contact-projection) links no AWS, Lambda or async crate;
- the core and the services link no AWS SDK, Lambda or HTTP crate (only adapters name them);
- the services link no wire crate (memory-api, lambda-adapter): a function's contract is its own;
- no function links a test-only crate;
- each function links only what it runs (the per-function lists below: e.g. memory-read links
  no distiller, tokenizer, time-zone tables, S3, SQS or EventBridge client);
- every dependency a function declares is used by its code.

The graph is `cargo tree -p <crate> -e normal`, resolved for that crate alone, as
`sam build` (`cargo lambda build --bin <name>`) resolves it. `--self-test` runs the rules on a
planted graph and requires every planted violation to be reported.

    .venv/bin/python tests/layering.py [--self-test]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PURE = ["memory-guard", "distill", "consolidation", "commitments", "text-search", "lexicon",
        "contact-projection", "search-index"]
CORE = ["memory-core", "memory-api", "dream-service", "consolidation-service",
        "commitment-service", "memory-tool", "mcp-server", "intent-memory", "oap-exchange"]
FUNCTIONS = ["memory-read", "memory-write", "memory-forget", "memory-dream",
             "memory-consolidate", "memory-commitments", "memory-mcp", "memory-intent",
             "memory-intent-auth", "memory-exchange"]

ASYNC_OR_AWS = re.compile(r"^(aws-|aws_|lambda_|tokio|hyper|rustls)")
AWS_OR_LAMBDA = re.compile(r"^(aws-sdk-|aws-config|aws-smithy-|aws_lambda_events|lambda_|hyper|rustls)")
TEST_ONLY = {"memory-testkit", "aws-test-support", "bench-support", "criterion", "proptest", "e2e"}

# The services hold behaviour over the ports; a function's wire contract (the error envelope,
# request shapes, metrics) lives in memory-api and the function, never in a service.
SERVICES = ["dream-service", "consolidation-service", "commitment-service", "intent-memory",
            "oap-exchange"]
WIRE = {"memory-api", "lambda-adapter"}
TOKENIZER = {"tiktoken-rs", "fancy-regex"}
DISTILLER = {"distill", "dream-service"} | TOKENIZER
COMMITMENTS = {"commitments", "commitment-service", "commitment-aws", "chrono-tz"}
CONSOLIDATION = {"consolidation", "consolidation-service"}
# What each function must not link, because it never runs it.
NOT_RUN = {
    # memory-read reads the search indexes' objects (S3) but writes nothing anywhere.
    "memory-read": DISTILLER | COMMITMENTS | CONSOLIDATION
    | {"aws-sdk-sqs", "aws-sdk-eventbridge"},
    # memory-write queues the embed pass of entries it stored without a vector (SQS).
    "memory-write": DISTILLER | COMMITMENTS | CONSOLIDATION | {"aws-sdk-s3"},
    # Only memory-read, memory-write, memory-mcp and memory-dream (the embed pass) embed, and
    # only memory-dream runs an abstractive model (abstractive dreams, Converse).
    # Forget's sweep of dream output reads the archive and index formats, never the distiller:
    # no tokenizer (dream-service and distill without their `dreams` / `distiller` features).
    "memory-forget": CONSOLIDATION | TOKENIZER | {"aws-sdk-sqs", "aws-sdk-bedrockruntime"},
    "memory-dream": COMMITMENTS | CONSOLIDATION,
    "memory-consolidate": DISTILLER | COMMITMENTS | {"aws-sdk-s3", "aws-sdk-bedrockruntime"},
    "memory-commitments": DISTILLER | CONSOLIDATION
    | {"aws-sdk-s3", "aws-sdk-sqs", "aws-sdk-bedrockruntime"},
    # The standard doors (MCP, the Claude memory tool) read, write and forget like the REST
    # doors together; they run no pass of their own.
    "memory-mcp": CONSOLIDATION | TOKENIZER | {"aws-sdk-sqs"},
    # The OpenIntent door keeps structured values: no distiller, consolidation, commitments,
    # search embeddings or queues; its authorizer reads one DynamoDB item and nothing else.
    "memory-intent": DISTILLER | COMMITMENTS | CONSOLIDATION
    | {"aws-sdk-sqs", "aws-sdk-bedrockruntime"},
    "memory-intent-auth": DISTILLER | COMMITMENTS | CONSOLIDATION
    | {"aws-sdk-s3", "aws-sdk-sqs", "aws-sdk-eventbridge", "aws-sdk-bedrockruntime"},
    # The exchange door reads the memory and ranks it with text search; it distils, consolidates
    # and embeds nothing.
    "memory-exchange": DISTILLER | COMMITMENTS | CONSOLIDATION
    | {"aws-sdk-sqs", "aws-sdk-bedrockruntime"},
}


def linked(package: str) -> set[str]:
    """Every crate `package` links (normal dependencies, features resolved for it alone)."""
    out = subprocess.run(
        ["cargo", "tree", "--locked", "-p", package, "-e", "normal", "--prefix", "none",
         "--format", "{p}"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()} - {package}


def declared() -> dict[str, list[str]]:
    """Each workspace package's declared normal dependencies."""
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--locked", "--format-version", "1", "--no-deps"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    return {p["name"]: [d["rename"] or d["name"] for d in p["dependencies"]
                        if d["kind"] is None] for p in meta["packages"]}


def sources(package: str) -> str:
    return "\n".join(p.read_text() for p in (ROOT / "functions" / package / "src").rglob("*.rs"))


def violations(graph: dict[str, set[str]], deps: dict[str, list[str]],
               code: dict[str, str]) -> list[str]:
    found = []
    for crate in PURE:
        found += [f"{crate} (pure) links {d}" for d in sorted(graph[crate]) if ASYNC_OR_AWS.match(d)]
    for crate in CORE:
        found += [f"{crate} (core/service) links {d}" for d in sorted(graph[crate])
                  if AWS_OR_LAMBDA.match(d)]
    for crate in SERVICES:
        found += [f"{crate} (service) links {d}, the wire" for d in sorted(graph[crate] & WIRE)]
    for fn in FUNCTIONS:
        found += [f"{fn} links test-only {d}" for d in sorted(graph[fn] & TEST_ONLY)]
        found += [f"{fn} links {d}, which it never runs" for d in sorted(graph[fn] & NOT_RUN[fn])]
        for dep in deps[fn]:
            name = dep.replace("-", "_")
            if not re.search(rf"\b{re.escape(name)}(::|!)", code[fn]):
                found.append(f"{fn} declares {dep} but its code never uses it")
    return found


def self_test() -> int:
    clean = {c: set() for c in PURE + CORE + FUNCTIONS}
    graph = dict(clean)
    graph["distill"] = {"tokio"}
    graph["memory-core"] = {"aws-sdk-dynamodb"}
    graph["memory-read"] = {"tiktoken-rs", "memory-testkit"}
    graph["dream-service"] = {"memory-api"}
    deps = {fn: ["serde_json"] for fn in FUNCTIONS}
    code = {fn: "fn main() { serde_json::json!({}); }" for fn in FUNCTIONS}
    code["memory-write"] = "fn main() {}"
    got = violations(graph, deps, code)
    want = ["distill (pure) links tokio", "memory-core (core/service) links aws-sdk-dynamodb",
            "memory-read links test-only memory-testkit",
            "memory-read links tiktoken-rs, which it never runs",
            "memory-write declares serde_json but its code never uses it",
            "dream-service (service) links memory-api, the wire"]
    if sorted(got) != sorted(want) or violations(clean, deps, {f: code["memory-read"]
                                                               for f in FUNCTIONS}):
        print(f"layering self-test failed: got {got}", file=sys.stderr)
        return 1
    print(f"layering self-test: {len(want)} planted violations reported, none on a clean graph")
    return 0


def main() -> int:
    if "--self-test" in sys.argv:
        return self_test()
    graph = {c: linked(c) for c in PURE + CORE + FUNCTIONS}
    found = violations(graph, declared(), {fn: sources(fn) for fn in FUNCTIONS})
    for v in found:
        print(f"layering: {v}", file=sys.stderr)
    if found:
        return 1
    sizes = ", ".join(f"{fn} {len(graph[fn])}" for fn in FUNCTIONS)
    print(f"layering: clean ({len(PURE + CORE + FUNCTIONS)} crates; crates linked: {sizes})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
