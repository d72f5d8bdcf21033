"""A local Bedrock Runtime stand-in (infra/local/embedder.py, converse.py) run as a server process
on a free port, for the tests that drive one: the stand-ins' own tests and the end-to-end tests
that point the functions at one. Imports nothing of wopkit, so the stand-ins' own tests stay
independent of the emulator and the Rust binaries."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import boto3
import pytest
from botocore.config import Config

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / "infra" / "local"


def load_module(name: str) -> ModuleType:
    """The stand-in `infra/local/<name>.py` as a module, for what it computes without a server."""
    spec = importlib.util.spec_from_file_location(name, LOCAL / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Standin:
    """`infra/local/<name>.py serve --port 0` plus `args`, its stderr in `work`; ready once it has
    written its port file. Fails the test when it exits or is not ready in `start_timeout`. As a
    context manager, stopped on leaving, so a fixture cannot forget to."""

    def __init__(self, name: str, work: Path, *args: str, env: dict[str, str] | None = None,
                 start_timeout: float = 30):
        self.port_file = work / "port"
        self.log = work / "stderr.log"
        with self.log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(LOCAL / f"{name}.py"), "serve", "--port", "0",
                 "--port-file", str(self.port_file), *args],
                env=dict(os.environ, **(env or {})), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + start_timeout
        while not self.port_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"{name} stand-in did not start; its stderr:\n{self.log_text()}",
                            pytrace=False)
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{int(self.port_file.read_text())}"

    def client(self, read_timeout: float = 60):
        """boto3's real `bedrock-runtime` client on this stand-in, one attempt a call."""
        return boto3.client(
            "bedrock-runtime", endpoint_url=self.url, region_name="us-east-1",
            aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="dummy-secret",
            config=Config(retries={"total_max_attempts": 1}, read_timeout=read_timeout))

    def __enter__(self) -> "Standin":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def client(server: Standin):
    """boto3's client on the test module's own `server` fixture (a stand-in)."""
    return server.client()
