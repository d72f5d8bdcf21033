"""Fixtures of the fault-injection suite (see README.md in this directory).

Run (from the repository root, emulator settings loaded):
    eval "$(infra/local/up)" && .venv/bin/python -m pytest tests/fault -q -p no:cacheprovider
"""

from __future__ import annotations

import os
import secrets

import pytest

from faultkit import REQUIRED_ENV, FaultProxy


@pytest.fixture(scope="session")
def _proxy_process() -> FaultProxy:
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not set: the fault suite needs the local AWS emulator. "
                    "Run `eval \"$(infra/local/up)\"` first.", pytrace=False)
    proxy = FaultProxy(serialize=True)
    yield proxy
    proxy.stop()


@pytest.fixture
def proxy(_proxy_process: FaultProxy) -> FaultProxy:
    """The session's proxy, quiet (every rate 0, no `only`, seed 0, mixed DynamoDB throttle,
    serialised) and with zeroed counters."""
    _proxy_process.config(rates={"500": 0, "throttle": 0, "conflict": 0, "drop": 0}, only=[],
                          seed=0, serialize=True, dynamodbThrottle="mixed")
    _proxy_process.reset()
    return _proxy_process


@pytest.fixture
def tenant() -> str:
    """A fresh tenant id for one test."""
    return f"faulttest-{secrets.token_hex(6)}"
