"""Helpers of the fault-injection suite: the proxy process (tests/fault/proxy.py) and AWS clients
through it or straight to the emulator.

    with FaultProxy() as proxy:       # serialised upstream by default (tests/fault/README.md "CLI")
        proxy.config(rates={"throttle": 0.1}, only="dynamodb:TransactWriteItems", seed=7)
        env = dict(os.environ, AWS_ENDPOINT_URL=proxy.url)   # for the function binaries
        ...
        stats = proxy.stats()
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

_WOPKIT = str(Path(__file__).resolve().parents[1] / "python")
if _WOPKIT not in sys.path:
    sys.path.insert(0, _WOPKIT)

from wopkit import read_line_with_timeout, stop_process  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROXY = HERE / "proxy.py"
REGION = "us-east-1"
START_TIMEOUT = 20
REQUIRED_ENV = ("AWS_ENDPOINT_URL", "MEMORY_TABLE", "ARCHIVE_BUCKET", "EVENT_BUS_NAME")
KINDS = ("500", "throttle", "conflict", "drop")

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


class FaultProxy:
    """tests/fault/proxy.py as a child process, with its control API.

    `serialize` defaults to True: moto 5.2.5 serves concurrent TransactWriteItems unsafely, so
    fault runs send one request at a time upstream; a figure taken with `serialize=False` must
    say so."""

    def __init__(self, *, upstream: str | None = None, seed: int = 0,
                 rates: dict[str, float] | None = None, only: str | list[str] | None = None,
                 serialize: bool = True, dynamodb_throttle: str = "mixed",
                 stderr_path: Path | None = None) -> None:
        self.upstream = upstream or os.environ.get("AWS_ENDPOINT_URL") or \
            "http://127.0.0.1:4566"
        self.stderr_path = stderr_path or ROOT / "target" / "fault-proxy.log"
        self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        args = [python(), str(PROXY), "--port", "0", "--upstream", self.upstream,
                "--seed", str(seed), "--dynamodb-throttle", dynamodb_throttle]
        for kind, rate in (rates or {}).items():
            args += [f"--rate-{kind}", str(rate)]
        if only:
            args += ["--only", only if isinstance(only, str) else ",".join(only)]
        if serialize:
            args.append("--serialize")
        with self.stderr_path.open("ab") as stderr:
            self.process = subprocess.Popen(args, cwd=ROOT, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.PIPE, stderr=stderr, text=True)
        line = read_line_with_timeout(self.process.stdout, START_TIMEOUT)
        if not line or not line.startswith("listening http://"):
            self.stop()
            raise RuntimeError(f"proxy.py did not start (first line {line!r}); see "
                               f"{self.stderr_path}")
        self.url = line.split(" ", 1)[1].strip()

    # -- control API -----------------------------------------------------------------------

    def _call(self, method: str, path: str, doc: Any = None) -> Any:
        data = None if doc is None else json.dumps(doc).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with _opener.open(req, timeout=10) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            raise RuntimeError(f"{method} {path}: {err.code} {err.read()!r}") from None

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/__fault/stats")

    def faults(self) -> list[dict[str, Any]]:
        """The injected faults, oldest first: {seq, draw, service, operation, kind, code}."""
        return self._call("GET", "/__fault/faults")

    def config(self, **doc: Any) -> dict[str, Any]:
        """Changes any of rates ({kind: rate}, merged), only, seed (restarts the draws),
        serialize, dynamodbThrottle; returns the whole config."""
        return self._call("POST", "/__fault/config", doc)

    def quiet(self) -> dict[str, Any]:
        """Every rate 0, no `only` rule."""
        return self.config(rates={k: 0.0 for k in KINDS}, only=[])

    def reset(self) -> dict[str, Any]:
        return self._call("POST", "/__fault/reset", {})

    # -- clients ---------------------------------------------------------------------------

    def client(self, service: str, **config: Any):
        """A boto3 client through the proxy (SDK retries off unless `retries` is given)."""
        return aws_client(service, self.url, **config)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment for the function binaries that sends their AWS calls through here."""
        return dict(base if base is not None else os.environ, AWS_ENDPOINT_URL=self.url)

    # -- lifetime --------------------------------------------------------------------------

    def stop(self) -> None:
        stop_process(self.process)

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def aws_client(service: str, endpoint: str | None = None, **config: Any):
    """A boto3 client for `endpoint` (default: the emulator itself), path-style S3, and no SDK
    retries unless `retries` is passed. (botocore's `max_attempts` counts retries, not attempts:
    `{"max_attempts": 1}` still retries once; `total_max_attempts: 1` is one attempt.)"""
    config.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
    config.setdefault("s3", {"addressing_style": "path"})
    config.setdefault("connect_timeout", 5)
    config.setdefault("read_timeout", 30)
    return boto3.session.Session().client(
        service,
        endpoint_url=endpoint or os.environ["AWS_ENDPOINT_URL"],
        region_name=os.environ.get("AWS_REGION") or REGION,
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID") or "test",
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY") or "test",
        config=Config(**config),
    )
