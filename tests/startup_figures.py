"""Start-up of the function binaries: process start to the first `GET .../invocation/next`
poll of the Lambda Runtime API, median of N starts, for each binary in a directory.

The Runtime API here is a bare blocking socket, so the figure is the binary's own start-up and
not a test harness's (the e2e harness, a debug build with a tokio runtime and log capture,
adds about 3 ms). Run against release binaries built as `sam build` does, with the emulator
settings loaded:

    cargo build --release -p memory-read   # ... one function at a time
    eval "$(infra/local/up)"
    .venv/bin/python tests/startup_figures.py target/release [--runs 21] [name ...]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import time
from pathlib import Path

FUNCTIONS = ["memory-read", "memory-write", "memory-forget", "memory-consolidate",
             "memory-commitments", "memory-dream", "memory-mcp"]
PASSED_THROUGH = ["AWS_ENDPOINT_URL", "MEMORY_TABLE", "ARCHIVE_BUCKET", "EVENT_BUS_NAME",
                  "DREAM_QUEUE_URL", "CONSOLIDATE_QUEUE_URL",
                  # Set to measure memory-read / memory-write with the Bedrock client built.
                  "EMBEDDING_MODEL_ID"]


def one_start(binary: Path, name: str) -> float:
    """Milliseconds from spawning `binary` to its first complete Runtime API request."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        env = {
            "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{server.getsockname()[1]}",
            "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test", "AWS_LAMBDA_FUNCTION_NAME": name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_STREAM_NAME": "local", "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
            # As on Lambda: no home directory with AWS profiles to read.
            "HOME": "/nonexistent", "PATH": "/usr/bin:/bin",
        }
        env.update({k: os.environ[k] for k in PASSED_THROUGH if k in os.environ})
        started = time.perf_counter()
        process = subprocess.Popen([str(binary)], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            server.settimeout(30)
            conn, _ = server.accept()
            with conn:
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    request += chunk
                polled = time.perf_counter()
            if b"/runtime/invocation/next" not in request:
                raise SystemExit(f"{name}: first request was not a poll: {request[:80]!r}")
        finally:
            process.kill()
            process.wait()
    return (polled - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bin_dir", type=Path)
    parser.add_argument("names", nargs="*", default=FUNCTIONS)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    missing = [k for k in ("MEMORY_TABLE", "ARCHIVE_BUCKET", "EVENT_BUS_NAME")
               if k not in os.environ]
    if missing:
        raise SystemExit(f"set {missing} first: eval \"$(infra/local/up)\"")
    print(f"| function | start-up, median of {args.runs} | min | max |")
    print("|---|---|---|---|")
    for name in args.names:
        times = [one_start(args.bin_dir / name, name) for _ in range(args.runs)]
        print(f"| {name} | {statistics.median(times):.2f} ms | {min(times):.2f} ms | "
              f"{max(times):.2f} ms |", flush=True)


if __name__ == "__main__":
    main()
