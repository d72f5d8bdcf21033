"""Fixtures of the Python end-to-end suite.

The suite drives the real function binaries over real HTTP: `target/debug/local_gateway` (the
`e2e` crate's local API Gateway + Lambda Invoke API, see tests/src/gateway.rs) runs the six
functions against the emulator, and the official OpenWOP client (`openwop-client` from PyPI) is
the peer. Nothing here is skipped: a missing binary or emulator setting fails the run loudly.

Run (from the repository root, emulator settings loaded):
    cargo build --bins && eval "$(infra/local/up)" && .venv/bin/python -m pytest tests/python -q

`tests/run` spreads the modules over pytest-xdist workers (`-n 3 --dist loadfile`: a module and
its gateways stay on one worker), each with its own session gateway, then runs
test_zz_hygiene.py on its own: every process records its gateways and the sensitive strings it
registered (`record_session`), and the hygiene check reads them all (docs/testing.md "The
Python end-to-end suite (official OpenWOP client)").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from wopkit import (
    REQUIRED_ENV,
    ROOT,
    SENSITIVE,
    Api,
    EventTap,
    Gateway,
    Invoker,
    leaks,
    new_tenant,
    read_line_with_timeout,
)

START_TIMEOUT = 120
# An xdist worker's id ("gw0", ...), "" in a run of one process.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")


def _target_dir() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR")
    return Path(target) if target else ROOT / "target"


def sessions_dir() -> Path:
    """Where each process of the suite records its gateways and sensitive strings for
    test_zz_hygiene.py."""
    return _target_dir() / "python-e2e-sessions"


# The gateways this process started: (label, logs file, access log file, the session's own).
_STARTED: list[tuple[str, Path, Path, bool]] = []
_SESSION: list[Gateway] = []


def record_session() -> None:
    """Stops this process's session gateway (which writes its functions' logs) and records, for
    the hygiene check, every gateway it started and every sensitive string it registered."""
    for gw in _SESSION:
        gw.stop()
    if not _STARTED:
        return
    out = sessions_dir()
    out.mkdir(parents=True, exist_ok=True)
    record = {"gateways": [{"label": label, "logs": str(logs), "access": str(access),
                            "session": session} for label, logs, access, session in _STARTED],
              "sensitive": sorted(SENSITIVE)}
    (out / f"{WORKER or 'main'}.json").write_text(json.dumps(record))


def start_gateway(label: str, extra_env: dict[str, str] | None = None, *,
                  exchanges: bool = True, log_level: str | None = None) -> Gateway:
    """`local_gateway` with the functions, the environment plus `extra_env`; its exchanges
    join target/e2e-exchanges (the OpenAPI step checks them) unless `exchanges` is off (they
    are not OpenWOP exchanges), its logs go to target/<label>-logs.txt. Fails the test run
    loudly when it cannot start."""
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not set: the Python end-to-end suite needs the local AWS "
            "emulator. Run `eval \"$(infra/local/up)\"` first, or use tests/run, which does it.",
            pytrace=False)
    target = _target_dir()
    binary = target / "debug" / "local_gateway"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: build it with `cargo build --bins` (tests/run does)",
                    pytrace=False)
    target.mkdir(parents=True, exist_ok=True)
    stderr_path = target / f"{label}-gateway.log"
    logs_path = target / f"{label}-logs.txt"
    if logs_path.exists():
        logs_path.unlink()
    # Dreams distil what the tests just wrote (production waits out in-flight writes).
    env = dict(os.environ, DREAM_SETTLE_SECONDS="0", **(extra_env or {}))
    if log_level:
        env["LOCAL_GATEWAY_LOG_LEVEL"] = log_level
    recording = ["--exchanges", str(target / "e2e-exchanges")] if exchanges else []
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [str(binary), *recording, "--logs", str(logs_path)],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            text=True)
    gw = Gateway(process, "", stderr_path, logs_path)
    _STARTED.append((label, logs_path, stderr_path, label == SESSION_LABEL))
    line = read_line_with_timeout(process.stdout, START_TIMEOUT)
    if not line or not line.startswith("listening http://"):
        gw.stop()
        pytest.fail(f"local_gateway did not start (first line {line!r}); its stderr:\n"
                    f"{gw.stderr_tail()}", pytrace=False)
    gw.base_url = line.split(" ", 1)[1].strip()
    return gw


@contextmanager
def standin_gateway(label: str, standin_url: str, extra_env: dict[str, str],
                    logged: str) -> Iterator[str]:
    """`log_checked_gateway` whose Bedrock runtime is the stand-in at `standin_url`; yields the
    gateway's base URL."""
    env = dict(extra_env, AWS_ENDPOINT_URL_BEDROCK_RUNTIME=standin_url)
    with log_checked_gateway(label, env, logged=logged) as gw:
        yield gw.base_url


@contextmanager
def secret_gateway(label: str, secret_id: str, value: str, logged: str) -> Iterator[str]:
    """`log_checked_gateway` with one configured SR-1 secret (REDACTION_SECRETS); yields the
    gateway's base URL; on leaving, none of its answers may have been a 5xx."""
    env = {"REDACTION_SECRETS": json.dumps([{"secretId": secret_id, "value": value}])}
    # At DEBUG, so the configured secret is looked for in every line the MCP
    # library and the functions could write at the most verbose level.
    with log_checked_gateway(label, env, logged=logged, log_level="DEBUG") as gw:
        yield gw.base_url
    assert_no_server_errors(gw)


def assert_no_server_errors(gw: Gateway) -> None:
    """No request to `gw` was answered with a 5xx."""
    server_errors = [a for a in gw.access_log() if a[2] >= 500]
    assert not server_errors, f"5xx answers: {server_errors}"


@contextmanager
def log_checked_gateway(label: str, extra_env: dict[str, str],
                        logged: str, log_level: str | None = None) -> Iterator[Gateway]:
    """`start_gateway` for a module that configures one of its own; stopped on leaving, when its
    functions' logs must hold `logged` (the positive control: they were captured) and no
    registered content or secret."""
    gw = start_gateway(label, extra_env, log_level=log_level)
    yield gw
    logs = gw.stop()
    assert logged in logs, f"positive control: the functions' log lines hold {logged!r}"
    assert not leaks(logs), f"function logs leak {leaks(logs)}"


SESSION_LABEL = f"python-e2e-{WORKER}" if WORKER else "python-e2e"


@pytest.fixture(scope="session")
def gateway() -> Gateway:
    # At DEBUG, the most verbose level an operator can set (AWS_LAMBDA_LOG_LEVEL): the leak
    # scan at the end of the suite (test_zz_hygiene) then covers every line the functions could
    # ever write. The Rust end-to-end tests and the stand-in gateways run at INFO, as deployed.
    if not WORKER:
        # A run of one process owns the records; tests/run clears them before its workers.
        shutil.rmtree(sessions_dir(), ignore_errors=True)
    gw = start_gateway(SESSION_LABEL, log_level="DEBUG")
    _SESSION.append(gw)
    yield gw
    gw.stop()


# The modules that take longest, started first when the suite runs on workers, so the workers
# finish together (the OpenIntent differential is one sequential test of about 3 minutes).
LONGEST_FIRST = ("test_l_openintent_differential.py", "test_n_embed_backfill.py",
                 "test_k_openintent.py", "test_j_memory_tool.py", "test_m_oap.py")


def pytest_collection_modifyitems(items) -> None:
    if WORKER:
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_sessionfinish(session, exitstatus) -> None:
    # An xdist worker records what test_zz_hygiene.py, run after all workers, checks.
    if WORKER:
        record_session()


@pytest.fixture(scope="session")
def base_url(gateway: Gateway) -> str:
    return gateway.base_url


@pytest.fixture(scope="session")
def invoker(base_url: str) -> Invoker:
    return Invoker(base_url)


@pytest.fixture(scope="module")
def tenant() -> str:
    """A fresh tenant for each test module."""
    return new_tenant()


@pytest.fixture(scope="module")
def api(base_url: str, tenant: str) -> Api:
    """The official client with a token of the module's tenant."""
    return Api(base_url, tenant)


@pytest.fixture(scope="module")
def tap(tenant: str):
    """The module's tenant's events, read back from a private SQS queue."""
    t = EventTap(tenant)
    yield t
    t.close()
