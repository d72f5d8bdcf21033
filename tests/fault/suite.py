#!/usr/bin/env python3
"""The fault-injection suite of wop-memory (see README.md in this directory).

    eval "$(infra/local/up)"
    .venv/bin/python tests/fault/suite.py run --seed 7               # one run; result as JSON
    .venv/bin/python tests/fault/suite.py races --seed 7 --trials 50 # forget-vs-dream races only
    .venv/bin/python tests/fault/suite.py soak --minutes 10          # loop + Markdown table

A run starts tests/fault/proxy.py (serialised: moto corrupts concurrent transactions) in front of
the emulator and two `target/debug/local_gateway` processes, each running the six real function
binaries with `AWS_ENDPOINT_URL` = the proxy and `DREAM_SETTLE_SECONDS=0`. Two gateways means two
processes per function, so "concurrent" below is two Lambda containers, not one process taking
turns. The workloads (one tenant each, c: one tenant per trial) run at the same time while the
proxy injects 500s, throttles, TransactionConflicts and dropped responses into DynamoDB, S3,
EventBridge and SQS requests, drawn from the run's seed:

  a  keyed (and some keyless) puts from 4 workers to ONE ref, each retried with the same
     idempotencyKey until answered; keyed deletes and their replays; a read-your-writes GET
  b  a key reused with another payload must answer idempotency_key_mismatch; a repeat of the same
     key and payload must answer the identical `written` list and store nothing new
  c  dream and forget of a subject started concurrently, 0-300 ms apart either way (seeded)
  d  near-duplicate long-term entries written while memory-consolidate runs
  e  the same dream / consolidation pass delivered twice: direct invokes (concurrent, then one
     after the other), SQS-shaped batches holding the same record twice, and through a real SQS
     queue (the functions' own fan-out, plus our sends) read back through the proxy
  f  time and predicate commitments; memory.written deliveries and ticks from both processes

Then the faults stop (proxy quiet) and the checker reads the true state straight from the
emulator (boto3 without the proxy), the tenants' events (EventBridge -> SQS taps) and the
function logs, and reports every violated invariant (INVARIANTS below). Output never carries
entry content, subjects, secrets or keys: only marker words (`mk` + 12 hex), ids and keys of
items and objects.

Reproducibility: the seed fixes the fault rates, the proxy's draws, every workload's choices
(sizes, offsets, texts) and the texts' marker words up to a per-run nonce. The proxy draws per
admitted request in arrival order, and concurrent workloads interleave differently from run to
run, so which request gets which fault is only reproducible for a single-threaded workload.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import secrets as pysecrets
import shutil
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for _p in (str(HERE), str(ROOT / "tests" / "python")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import boto3  # noqa: E402

import segments  # noqa: E402
import botocore.exceptions  # noqa: E402
from botocore.config import Config  # noqa: E402

from faultkit import KINDS, REQUIRED_ENV, FaultProxy, aws_client  # noqa: E402
from wopkit import (  # noqa: E402
    BASE, EventTap, file_text, mint_jwt, query, read_line_with_timeout, stop_process)

# ---------------------------------------------------------------------------------------------
# Names.

SERVICES = ("dynamodb", "s3", "events", "sqs")
FUNCTIONS = ("memory-read", "memory-write", "memory-forget", "memory-dream",
             "memory-consolidate", "memory-commitments")
RETRYABLE = {"rate_limited", "idempotency_in_flight", "outcome_unknown"}
SLOW_INVOCATION_SECONDS = 15.0
# How a retryable direct-invoke error ends (docs/api.md "Direct-invoke failures").
RETRY_HINT_RE = re.compile(r"\(retryAfterSeconds: \d+\)$")
# docs/guarantees.md "Idempotent writes": no key is locked longer than this. What a client sees
# adds its own polling: the answer time of its last in-flight try and its retry delay (<= 1.5 s).
KEY_LOCK_BOUND_SECONDS = 30.0
KEY_LOCK_POLL_SLACK_SECONDS = 5.0

# Every invariant the checker reports, in table order.
INVARIANTS = (
    "acked_present_once",        # an acknowledged write is stored exactly once (not lost, not duplicated)
    "keyed_replay_identical",    # a repeated keyed put/delete answers what the first answered
    "key_mismatch_rejected",     # a key reused with another payload answers idempotency_key_mismatch, stores nothing
    "read_your_writes",          # a GET right after an acknowledged put finds the entry
    "forget_complete",           # no stored byte (table item, any object version) carries a forgotten subject's text
    "secrets_not_stored",        # secret values, subjects and raw idempotency keys are never stored
    "archive_has_entry",         # every archive's outputEntryId exists in the table
    "archive_has_index_line",    # every archive has exactly one line in MEMORY-INDEX.json
    "index_line_has_archive",    # no index line points at a missing archive
    "output_entry_has_archive",  # no distilled entry survives without its archive
    "one_archive_per_source_set",  # one archive per distinct source set; no source distilled twice
    "consolidation_coverage",    # every acked long-term entry is present or in exactly one present entry's provenance
    "compacted_once",            # exactly one memory.compacted per outputId (per archive)
    "fire_at_most_once",         # at most one commitment.fired per commitment
    "no_internal_error",         # no internal_error / HTTP 500 answer under injected retryable faults
    "retry_after_present",       # HTTP 429/503 answers carry Retry-After
    "retry_hint_present",        # every retryable direct-invoke error ends with its delay
    "key_lock_bounded",          # no key answers idempotency_in_flight beyond the stated bound
    "unknown_only_when_unknowable",  # outcome_unknown never answered when every fault was a refusal
    "not_stored_truthful",       # a keyless put answered "not stored" (429/503) was not stored
    "no_unexpected_error",       # no other error type (validation errors, timeouts, ...)
    "op_completes",              # every operation got an answer within its time limit
    "no_panic",                  # no "panicked" in any function log
    "no_leak",                   # no content, subject, secret or key in logs, error bodies or events
    "harness_error",             # the suite itself failed (a bug here, or the environment)
)

# Marker kinds and where they may never be stored at the end of a run.
MARKER_RE = re.compile(r"mk[0-9a-f]{12}")
STORED_FORBIDDEN = {
    "forgotten": "forget_complete",
    "never": "key_mismatch_rejected",
    "secret": "secrets_not_stored",
    "subject": "secrets_not_stored",
    "key": "secrets_not_stored",
}

TOPICS = ("billing", "shipping", "the quarterly report", "onboarding", "support tickets",
          "the design review", "data retention", "travel budgets", "vendor contracts")
NAMES = ("Avery", "Blake", "Casey", "Devon", "Emery", "Finley", "Harper", "Jordan")
THINGS = ("green paper invoices", "short weekly summaries", "phone calls over email",
          "dark mode dashboards", "metric units in every report", "invoices in euros")

OUT_ROOT = ROOT / "target" / "fault-runs"


class SuiteError(Exception):
    """The environment is not usable (no emulator, no binaries, a process did not start)."""


# ---------------------------------------------------------------------------------------------
# Profiles: how much each workload does.


@dataclass(frozen=True)
class Profile:
    a_workers: int = 4
    a_puts: int = 3
    b_probes: int = 2
    c_trials: int = 2
    d_groups: int = 2
    d_singles: int = 1
    e_entries: tuple[int, int] = (3, 4)
    f_enabled: bool = True
    f_tick_rounds: int = 3


PROFILES = {
    "small": Profile(),
    "soak": Profile(a_puts=8, b_probes=4, c_trials=8, d_groups=4, d_singles=2,
                    e_entries=(3, 6), f_tick_rounds=4),
}


def rates_for(seed: int) -> dict[str, float]:
    """The fault rates of a run, from its seed (admitted: dynamodb, s3, events, sqs)."""
    rng = random.Random(f"rates/{seed}")
    return {"500": round(rng.uniform(0.01, 0.05), 3),
            "throttle": round(rng.uniform(0.01, 0.05), 3),
            "conflict": round(rng.uniform(0.03, 0.10), 3),
            "drop": round(rng.uniform(0.01, 0.04), 3)}


# ---------------------------------------------------------------------------------------------
# Environment.


def target_dir() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR")
    return Path(target) if target else ROOT / "target"


def require_environment() -> str:
    """The emulator endpoint, after checking the settings, the emulator and the binaries."""
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        raise SuiteError(f"{', '.join(missing)} not set: the fault suite needs the local AWS "
                         "emulator. Run `eval \"$(infra/local/up)\"` first (tests/run does).")
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    try:
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(endpoint,
                                                                          timeout=3).close()
    except urllib.error.HTTPError:
        pass
    except (urllib.error.URLError, OSError) as err:
        raise SuiteError(f"the emulator at {endpoint} does not answer ({err}); start it with "
                         "infra/local/up") from None
    debug = target_dir() / "debug"
    absent = [name for name in ("local_gateway",) + FUNCTIONS if not (debug / name).exists()]
    if absent:
        raise SuiteError(f"missing binaries in {debug}: {', '.join(absent)}; build them with "
                         "`cargo build --bins` (tests/run and tests/soak do)")
    return endpoint


def emulator_client(service: str):
    """boto3 straight to the emulator (never through the proxy), with retries: the checker's
    view of the truth."""
    return aws_client(service, os.environ["AWS_ENDPOINT_URL"],
                      retries={"max_attempts": 5, "mode": "standard"})


def memory_ref(tenant: str, agent: str) -> str:
    return f"workspaces/{tenant}/agents/{agent}/memories"


def partition(ref: str) -> str:
    """The table partition of a canonical memoryRef (`{tenant}#{agent}`)."""
    parts = ref.split("/")
    return f"{parts[1]}#{parts[3]}"


# ---------------------------------------------------------------------------------------------
# Sensitive strings: every text the suite sends carries a marker word, registered with its kind.


class Registry:
    """Marker words (`mk` + 12 hex, unique per run through the nonce) and their kinds:
    `content` (may be stored), `forgotten` (content of a subject that gets forgotten), `never`
    (content of a request that must be refused), `secret`, `subject`, `key`. No kind may appear
    in a log line, an error body or an event."""

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce
        self.lock = threading.Lock()
        self.count = 0
        self.kinds: dict[str, str] = {}

    def marker(self, kind: str) -> str:
        with self.lock:
            self.count += 1
            m = "mk" + hashlib.sha256(f"{self.nonce}/{self.count}".encode()).hexdigest()[:12]
            self.kinds[m] = kind
            return m

    def secret(self) -> str:
        return f"sk-fault-{self.marker('secret')}"

    def subject(self) -> str:
        return f"subj-{self.marker('subject')}"

    def key(self) -> str:
        return f"key-{self.marker('key')}"

    def found(self, text: str) -> list[tuple[str, str]]:
        """(marker, kind) of every registered marker in `text`."""
        kinds = self.kinds
        return sorted({(m, kinds[m]) for m in MARKER_RE.findall(text) if m in kinds})


# ---------------------------------------------------------------------------------------------
# What happened: operations, answers, violations.

MAX_VIOLATIONS_KEPT = 60


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ops: Counter[str] = Counter()
        self.answers: Counter[str] = Counter()
        self.notes: Counter[str] = Counter()
        self.checks: Counter[str] = Counter()
        self.violation_counts: Counter[str] = Counter()
        self.violations: list[dict[str, str]] = []
        # Behaviour worth a look that the checked invariants do not cover (not violations).
        self.findings: list[dict[str, str]] = []

    def op(self, kind: str, n: int = 1) -> None:
        with self.lock:
            self.ops[kind] += n

    def answer(self, kind: str) -> None:
        with self.lock:
            self.answers[kind] += 1

    def note(self, kind: str, n: int = 1) -> None:
        with self.lock:
            self.notes[kind] += n

    def check(self, invariant: str, n: int = 1) -> None:
        with self.lock:
            self.checks[invariant] += n

    def finding(self, name: str, what: str, where: str) -> None:
        with self.lock:
            self.notes[name] += 1
            if len(self.findings) < MAX_VIOLATIONS_KEPT:
                self.findings.append({"finding": name, "what": what, "where": where})

    def violation(self, invariant: str, what: str, where: str) -> None:
        assert invariant in INVARIANTS, invariant
        with self.lock:
            self.violation_counts[invariant] += 1
            if len(self.violations) < MAX_VIOLATIONS_KEPT:
                self.violations.append({"invariant": invariant, "what": what, "where": where})


@dataclass
class Outcome:
    ok: bool
    payload: Any = None
    error_type: str | None = None
    attempts: int = 0
    # (monotonic time the attempt was sent, its answer: "ok", an errorType, "transport_error")
    history: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class Acked:
    """One acknowledged entry and what must be true of it at the end."""
    workload: str
    ref: str
    id: str
    created_at: str
    marker: str
    keyed: bool
    # present | deleted | forgotten | mergeable
    fate: str = "present"
    # The marker names this entry alone (a count of entries carrying it is meaningful).
    unique_marker: bool = True


# ---------------------------------------------------------------------------------------------
# Processes: local_gateway.


class Gateway:
    """`target/debug/local_gateway` (API Gateway + Lambda Invoke API in front of the six
    function binaries)."""

    def __init__(self, index: int, env: dict[str, str], out_dir: Path) -> None:
        self.index = index
        self.logs_path = out_dir / f"gateway-{index}-functions.log"
        self.stderr_path = out_dir / f"gateway-{index}.stderr"
        binary = target_dir() / "debug" / "local_gateway"
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [str(binary), "--logs", str(self.logs_path)], cwd=ROOT, env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
        line = read_line_with_timeout(self.process.stdout, 120)
        if not line or not line.startswith("listening http://"):
            self.stop()
            raise SuiteError(f"local_gateway {index} did not start (first line {line!r}); see "
                             f"{self.stderr_path}")
        self.url = line.split(" ", 1)[1].strip()
        self.client = boto3.session.Session().client(
            "lambda", endpoint_url=self.url, region_name="us-east-1",
            aws_access_key_id="test", aws_secret_access_key="test",
            config=Config(retries={"total_max_attempts": 1, "mode": "standard"},
                          read_timeout=150, connect_timeout=10, max_pool_connections=32))
        self.logs: str | None = None

    def invoke(self, function: str, data: bytes) -> tuple[str | None, bytes]:
        out = self.client.invoke(FunctionName=function, Payload=data)
        raw = out["Payload"].read()
        if out["StatusCode"] != 200:
            raise SuiteError(f"Invoke answered {out['StatusCode']}")
        return out.get("FunctionError"), raw

    def stop(self) -> str:
        """Stops the gateway (end of stdin, then SIGTERM) and returns the function logs."""
        if self.logs is None:
            stop_process(self.process, stdin_grace=30)
            self.logs = file_text(self.logs_path)
        return self.logs


# ---------------------------------------------------------------------------------------------
# The emulator's true state.


def strings_of(value: Any) -> list[str]:
    """Every string inside a DynamoDB attribute value (S, SS, L, M, recursively)."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for tag, inner in v.items():
                if tag == "S":
                    out.append(inner)
                elif tag == "SS":
                    out.extend(inner)
                elif tag in ("L",):
                    stack.extend(inner)
                elif tag == "M":
                    stack.extend(inner.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


@dataclass
class StoredEntry:
    pk: str
    id: str
    content: str
    tags: list[str]
    tier: str
    created_at: str
    created_ms: int
    provenance: list[str]


@dataclass
class State:
    items: list[dict[str, Any]]
    entries: dict[tuple[str, str], StoredEntry]
    by_partition: dict[str, list[StoredEntry]]
    commitments: dict[str, list[dict[str, Any]]]
    markers: dict[str, dict[str, dict[str, Any]]]  # partition -> kind -> work marker item
    # (key, version id, latest, body) of every object version under the run's tenants.
    objects: list[tuple[str, str, bool, bytes]]
    archives: dict[str, dict[str, Any]]        # current archives by key
    index_lines: dict[str, list[dict[str, Any]]]  # partition -> lines of the current index


def read_state(tenants: set[str]) -> State:
    ddb, s3 = emulator_client("dynamodb"), emulator_client("s3")
    table, bucket = os.environ["MEMORY_TABLE"], os.environ["ARCHIVE_BUCKET"]
    items: list[dict[str, Any]] = []
    start = None
    while True:
        kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
        if start:
            kwargs["ExclusiveStartKey"] = start
        page = ddb.scan(**kwargs)
        items.extend(page.get("Items", []))
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    ours = [i for i in items if i.get("pk", {}).get("S", "").split("#", 1)[0] in tenants]
    overflow: dict[tuple[str, str], list[str]] = defaultdict(list)
    for item in ours:
        sk = item.get("sk", {}).get("S", "")
        if sk.startswith("P#"):
            entry_id = sk[2:].rsplit("#", 1)[0]
            overflow[(item["pk"]["S"], entry_id)].extend(strings_of(item.get("ids", {})))
    entries: dict[tuple[str, str], StoredEntry] = {}
    by_partition: dict[str, list[StoredEntry]] = defaultdict(list)
    commitments: dict[str, list[dict[str, Any]]] = defaultdict(list)
    markers: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for item in ours:
        pk, sk = item["pk"]["S"], item.get("sk", {}).get("S", "")
        if sk.startswith("E#"):
            entry_id = sk[2:]
            e = StoredEntry(
                pk=pk, id=entry_id, content=item.get("content", {}).get("S", ""),
                tags=strings_of(item.get("tags", {})), tier=item.get("tier", {}).get("S", ""),
                created_at=item.get("createdAt", {}).get("S", ""),
                created_ms=int(item.get("createdAtMs", {}).get("N", "0")),
                provenance=strings_of(item.get("provenance", {})) + overflow.get((pk, entry_id),
                                                                                 []))
            entries[(pk, entry_id)] = e
            by_partition[pk].append(e)
        elif sk.startswith("C#"):
            commitments[pk].append(item)
        elif sk.startswith("W#"):
            markers[pk][sk[2:]] = item
    objects: list[tuple[str, str, bool, bytes]] = []
    for tenant in sorted(tenants):
        marker: dict[str, str] = {}
        while True:
            page = s3.list_object_versions(Bucket=bucket, Prefix=f"{tenant}/", **marker)
            for v in page.get("Versions", []):
                body = s3.get_object(Bucket=bucket, Key=v["Key"],
                                     VersionId=v["VersionId"])["Body"].read()
                objects.append((v["Key"], v["VersionId"], bool(v.get("IsLatest")), body))
            if not page.get("IsTruncated"):
                break
            marker = {"KeyMarker": page["NextKeyMarker"],
                      "VersionIdMarker": page["NextVersionIdMarker"]}
    archives: dict[str, dict[str, Any]] = {}
    index_lines: dict[str, list[dict[str, Any]]] = {}
    for key, _vid, latest, body in objects:
        if not latest:
            continue
        parts = key.split("/")
        if len(parts) != 5 or parts[1] != "agents":
            continue
        pk = f"{parts[0]}#{parts[2]}"
        if parts[3] == "archives" and key.endswith(".json"):
            try:
                archives[key] = json.loads(body)
            except ValueError:
                archives[key] = {"unparsable": True}
        elif parts[3] == "workspace" and parts[4] == "MEMORY-INDEX.json":
            try:
                index_lines[pk] = json.loads(body).get("entries", [])
            except ValueError:
                index_lines[pk] = []
    return State(items=items, entries=entries, by_partition=by_partition,
                 commitments=commitments, markers=markers, objects=objects, archives=archives,
                 index_lines=index_lines)


# ---------------------------------------------------------------------------------------------
# A run.


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Run:
    """One proxy, two gateways, the workloads and the checker. Use as a context manager; see
    `run_suite` and `run_races` for the usual sequences."""

    def __init__(self, seed: int, *, profile: str = "small", gateways: int = 2,
                 out_dir: Path | None = None, rates: dict[str, float] | None = None,
                 label: str = "run", env: dict[str, str] | None = None,
                 gateway_env: dict[int, dict[str, str]] | None = None) -> None:
        self.endpoint = require_environment()
        self.seed = seed
        self.profile_name = profile
        self.profile = PROFILES[profile]
        self.fixed_rates = rates is not None
        self.rates = rates if rates is not None else rates_for(seed)
        self.phase_seeds: list[int] = []
        self.phase_rates: list[dict[str, float]] = []
        self.phase_stats: list[dict[str, Any]] = []
        self.nonce = pysecrets.token_hex(4)
        self.out_dir = out_dir or OUT_ROOT / f"{label}-seed{seed}-{self.nonce}"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.reg = Registry(self.nonce)
        self.rec = Recorder()
        self.acked: list[Acked] = []
        self.acked_lock = threading.Lock()
        self.tenants: set[str] = set()
        self.taps: dict[str, EventTap] = {}
        self.e_refs: list[str] = []          # refs that must end with exactly one archive
        self.f_refs: list[str] = []
        self.n_gateways = gateways
        self.gateways: list[Gateway] = []
        self.proxy: FaultProxy | None = None
        self.queue_url: str | None = None
        self.jitter = random.Random()       # timing only; never decides what a workload does
        self.rr = 0
        self.rr_lock = threading.Lock()
        self.started = time.monotonic()
        self.stats: dict[str, Any] = {}
        self.fault_log: list[dict[str, Any]] = []
        self.logs: dict[str, str] = {}
        self.workload_seconds: dict[str, float] = {}
        self.extra_log_lines: list[tuple[str, str]] = []   # (file name, line): self-test only
        self.extra_env = dict(env or {})
        # Per gateway index: more environment (a gateway under another function timeout).
        self.gateway_env = dict(gateway_env or {})
        # Retries rotate over the first this-many gateways (all, unless a test keeps one apart).
        self.rotate_over = gateways
        # Set while every injected fault is a refusal (throttling, cancellation): no write can
        # have been applied unseen, so outcome_unknown is never the truth.
        self.refusals_only = False
        # Keyless puts: (ref, markers, how many copies the answers allow) for not_stored_truthful.
        self.keyless_puts: list[tuple[str, list[str], int, str]] = []
        self.max_key_lock = 0.0

    # -- lifetime ----------------------------------------------------------------------------

    def __enter__(self) -> "Run":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        self.proxy = FaultProxy(upstream=self.endpoint, serialize=True, seed=self.seed,
                                stderr_path=self.out_dir / "proxy.log")
        sqs = emulator_client("sqs")
        self.queue_url = sqs.create_queue(
            QueueName=f"fault-passes-{self.nonce}",
            Attributes={"VisibilityTimeout": "3"})["QueueUrl"]
        env = self.proxy.env(dict(os.environ, DREAM_SETTLE_SECONDS="0",
                                  PASS_QUEUE_URL=self.queue_url, DEFAULT_TIME_ZONE="UTC",
                                  **self.extra_env))
        env.pop("TENANT_TIME_ZONES", None)
        for i in range(self.n_gateways):
            self.gateways.append(Gateway(i, dict(env, **self.gateway_env.get(i, {})),
                                         self.out_dir))

    def faults_on(self) -> None:
        """Faults at the run's rates, drawn from its seed, counters from zero."""
        assert self.proxy is not None
        self.proxy.config(rates=self.rates, only=list(SERVICES), seed=self.seed)
        self.proxy.reset()
        self.phase_seeds.append(self.seed)
        self.phase_rates.append(dict(self.rates))

    def _snapshot(self) -> None:
        assert self.proxy is not None
        self.phase_stats.append(self.proxy.stats())
        self.fault_log.extend(self.proxy.faults())

    def phase(self, seed: int) -> None:
        """The next seed of a multi-seed run: its rates, its draws, its workload choices. The
        counters so far are kept (and summed at the end)."""
        self._snapshot()
        self.seed = seed
        if not self.fixed_rates:
            self.rates = rates_for(seed)
        self.faults_on()

    def faults_off(self) -> None:
        """Quiet; the counters of every phase, summed."""
        assert self.proxy is not None
        self._snapshot()
        self.proxy.quiet()
        self.stats = merge_stats(self.phase_stats)

    def stop(self) -> None:
        for gw in self.gateways:
            try:
                self.logs[f"gateway-{gw.index}-functions.log"] = gw.stop()
            except Exception:  # noqa: BLE001 - best effort; the log check reports absences
                pass
            try:
                self.logs[f"gateway-{gw.index}.stderr"] = gw.stderr_path.read_text(
                    encoding="utf-8", errors="replace")
            except OSError:
                pass
        self.gateways_stopped = True
        if self.proxy is not None:
            self.proxy.stop()
            try:
                self.logs["proxy.log"] = (self.out_dir / "proxy.log").read_text(
                    encoding="utf-8", errors="replace")
            except OSError:
                pass
            self.proxy = None
        for tap in self.taps.values():
            tap.close()
        self.taps = {}
        if self.queue_url:
            try:
                emulator_client("sqs").delete_queue(QueueUrl=self.queue_url)
            except Exception:  # noqa: BLE001 - best effort
                pass
            self.queue_url = None

    # -- helpers -----------------------------------------------------------------------------

    def rng(self, name: str) -> random.Random:
        return random.Random(f"{self.seed}/{name}")

    def tenant(self, label: str) -> str:
        t = f"fault-{self.nonce}-s{self.seed}-{label}"
        self.tenants.add(t)
        return t

    def tap(self, tenant: str) -> EventTap:
        tap = EventTap(tenant)
        self.taps[tenant] = tap
        return tap

    def expect(self, acked: Acked) -> None:
        with self.acked_lock:
            self.acked.append(acked)

    def pick(self, gw: int | None) -> int:
        if gw is not None:
            return gw % len(self.gateways)
        with self.rr_lock:
            self.rr += 1
            return self.rr % len(self.gateways)

    def leak_check(self, text: str, where: str) -> None:
        for m, kind in self.reg.found(text):
            self.rec.violation("no_leak", f"{kind} marker {m}", where)

    def call(self, function: str, payload: Any, *, where: str, gw: int | None = None,
             expect: tuple[str, ...] = (), limit: float = 90.0, once: bool = False,
             pin: bool = False) -> Outcome:
        """Invokes `function` until it answers: retryable error types (rate_limited,
        idempotency_in_flight) and transport failures are retried with the same payload (the
        same idempotencyKey), the next attempt going to the next gateway as a Lambda retry may
        land in another container. `internal_error` is a violation, and retried (a 503-style
        "temporarily unavailable" answer is also internal_error on a direct invoke). An error
        type in `expect` is returned; any other error type is a violation and is returned.
        `once`: a single attempt, whatever it answers."""
        data = json.dumps(payload).encode()
        started = time.monotonic()
        g = self.pick(gw)
        attempt = 0
        history: list[tuple[float, str]] = []
        while True:
            attempt += 1
            self.rec.op(f"attempt:{function}")
            sent = time.monotonic()
            try:
                function_error, raw = self.gateways[g].invoke(function, data)
                if time.monotonic() - sent > SLOW_INVOCATION_SECONDS:
                    # Near the local runtime's 30 s deadline: the adapters' retry budget is
                    # gone, and the next failure is answered as "temporarily unavailable".
                    self.rec.note(f"slow_invocation:{function}")
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError,
                    SuiteError) as err:
                self.rec.answer("transport_error")
                self.rec.note(f"transport_error:{type(err).__name__}")
                history.append((sent, "transport_error"))
                if once:
                    return Outcome(False, None, "transport_error", attempt, history)
            else:
                if function_error is None:
                    self.rec.answer("ok")
                    history.append((sent, "ok"))
                    try:
                        return Outcome(True, json.loads(raw), None, attempt, history)
                    except ValueError:
                        self.rec.violation("no_unexpected_error", "answer is not JSON", where)
                        return Outcome(False, None, "not-json", attempt, history)
                text = raw.decode("utf-8", errors="replace")
                self.leak_check(text, f"{where}: error answer of {function}")
                try:
                    doc = json.loads(text)
                except ValueError:
                    doc = {}
                etype = str(doc.get("errorType") or "?") if isinstance(doc, dict) else "?"
                message = str(doc.get("errorMessage") or "") if isinstance(doc, dict) else ""
                self.rec.answer(etype)
                history.append((sent, etype))
                if etype in RETRYABLE or (etype == "internal_error" and "temporar" in message):
                    self.rec.check("retry_hint_present")
                    if not RETRY_HINT_RE.search(message):
                        self.rec.violation("retry_hint_present",
                                           f"{function} answered {etype} with no retry delay",
                                           where)
                if self.refusals_only:
                    self.rec.check("unknown_only_when_unknowable")
                if etype == "outcome_unknown":
                    if self.refusals_only:
                        self.rec.violation("unknown_only_when_unknowable",
                                           f"{function} answered outcome_unknown while every "
                                           "injected fault was a refusal", where)
                if etype in expect or once:
                    return Outcome(False, doc, etype, attempt, history)
                if etype == "internal_error":
                    flavour = "503-style, says temporary" if "temporar" in message \
                        else "500-style"
                    self.rec.violation("no_internal_error",
                                       f"{function} answered internal_error ({flavour})", where)
                elif etype not in RETRYABLE:
                    self.rec.violation("no_unexpected_error",
                                       f"{function} answered {etype}", where)
                    return Outcome(False, doc, etype, attempt, history)
            if time.monotonic() - started > limit:
                self.rec.violation("op_completes",
                                   f"{function} no answer after {attempt} attempts / "
                                   f"{limit:.0f} s", where)
                return Outcome(False, None, "gave-up", attempt, history)
            self.rec.op(f"retry:{function}")
            time.sleep(min(1.5, 0.1 * 2 ** min(attempt, 5)) * self.jitter.uniform(0.5, 1.0))
            if not pin:
                g = (g + 1) % self.rotate_over

    def http_get(self, tenant: str, path: str, *, where: str,
                 limit: float = 60.0) -> tuple[int, bytes]:
        """A read API request with the tenant's token; 429/503 are retried (and must carry
        Retry-After), 500 is a violation."""
        token = mint_jwt({"tenant_id": tenant, "sub": "fault-suite"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            gw = self.gateways[self.pick(None)]
            req = urllib.request.Request(gw.url + path,
                                         headers={"Authorization": f"Bearer {token}"})
            try:
                with opener.open(req, timeout=60) as resp:
                    status, headers, body = resp.status, dict(resp.headers), resp.read()
            except urllib.error.HTTPError as err:
                status, headers, body = err.code, dict(err.headers), err.read()
            except (urllib.error.URLError, OSError):
                status, headers, body = 0, {}, b""
            self.rec.answer(f"http:{status}")
            if status == 200:
                return status, body
            self.leak_check(body.decode("utf-8", errors="replace"), f"{where}: HTTP {status}")
            lower = {k.lower(): v for k, v in headers.items()}
            if status in (429, 503):
                gateway_own = b'"Service Unavailable"' in body
                if not gateway_own and "retry-after" not in lower:
                    self.rec.violation("retry_after_present",
                                       f"HTTP {status} without Retry-After", where)
                if gateway_own:
                    self.rec.note("gateway_integration_timeout")
            elif status >= 500:
                self.rec.violation("no_internal_error", f"HTTP {status} from the read API",
                                   where)
            elif status != 0:
                return status, body
            if time.monotonic() - started > limit:
                self.rec.violation("op_completes", f"read API no answer after {attempt} "
                                   "attempts", where)
                return status, body
            time.sleep(min(1.5, 0.1 * 2 ** min(attempt, 5)) * self.jitter.uniform(0.5, 1.0))

    def put(self, tenant: str, ref: str, entries: list[dict[str, Any]], *, where: str,
            key: str | None, secrets: list[dict[str, str]] | None = None,
            gw: int | None = None, run_id: str = "run-fault", limit: float = 90.0,
            pin: bool = False, once: bool = False) -> Outcome:
        payload: dict[str, Any] = {"op": "put", "tenantId": tenant, "memoryRef": ref,
                                   "runId": run_id, "entries": entries,
                                   "secrets": secrets or []}
        if key is not None:
            payload["idempotencyKey"] = key
        self.rec.op("put_keyed" if key else "put_keyless")
        out = self.call("memory-write", payload, where=where, gw=gw, limit=limit, pin=pin,
                        once=once)
        if key is not None:
            self.check_key_lock(out, where)
        else:
            # Answers that leave open whether the entries were stored: success, an unknown
            # outcome, and a lost Lambda answer. Every other answer promised "not stored".
            maybe = sum(1 for _, a in out.history
                        if a in ("ok", "outcome_unknown", "transport_error"))
            markers = MARKER_RE.findall(" ".join(e.get("content", "") for e in entries))
            self.keyless_puts.append((ref, markers, maybe, where))
        if out.ok:
            written = out.payload.get("written") if isinstance(out.payload, dict) else None
            if not isinstance(written, list) or len(written) != len(entries):
                self.rec.violation("no_unexpected_error",
                                   "put answered a written list of the wrong length", where)
                return Outcome(False, out.payload, "bad-answer", out.attempts)
        return out

    def check_key_lock(self, out: Outcome, where: str) -> float:
        """How long the key was locked as the client saw it: from the try before a run of
        `idempotency_in_flight` answers (whose attempt left the claim) to the try that ended
        the run. Within the stated bound plus the client's own polling."""
        h = out.history
        i = 0
        longest = 0.0
        while i < len(h):
            if h[i][1] != "idempotency_in_flight":
                i += 1
                continue
            j = i
            while j < len(h) and h[j][1] == "idempotency_in_flight":
                j += 1
            start = h[i - 1][0] if i > 0 else h[i][0]
            end = h[j][0] if j < len(h) else h[j - 1][0]
            locked = end - start
            longest = max(longest, locked)
            self.rec.check("key_lock_bounded")
            with self.rec.lock:
                self.max_key_lock = max(self.max_key_lock, locked)
            if locked > KEY_LOCK_BOUND_SECONDS + KEY_LOCK_POLL_SLACK_SECONDS:
                self.rec.violation("key_lock_bounded",
                                   f"key answered idempotency_in_flight for {locked:.1f} s "
                                   f"(bound {KEY_LOCK_BOUND_SECONDS:.0f} s)", where)
            i = j
        return longest

    def check_not_stored_truthful(self, state: State) -> None:
        """A keyless put holds no more copies than the answers that left its fate open
        (success, outcome_unknown, a lost Lambda answer): a 429 or 503 promised nothing was
        stored."""
        # A client's retries of one request are several puts of the same markers: their
        # answers add up.
        allowed: dict[str, int] = Counter()
        for _ref, markers, maybe, _where in self.keyless_puts:
            for m in markers:
                allowed[m] += maybe
        seen: set[str] = set()
        for ref, markers, _maybe, where in self.keyless_puts:
            pk = partition(ref)
            for m in markers:
                if self.reg.kinds.get(m) != "content" or m in seen:
                    continue
                seen.add(m)
                maybe = allowed[m]
                self.rec.check("not_stored_truthful")
                copies = sum(1 for e in state.by_partition.get(pk, [])
                             if m in e.content and not e.provenance
                             and not any(t.startswith("compacted-from:") for t in e.tags))
                if copies > maybe:
                    self.rec.violation("not_stored_truthful",
                                       f"{copies} copies stored, {maybe} answers allowed any "
                                       "(the others said not stored)", f"{where} marker {m}")

    def acknowledge(self, workload: str, ref: str, out: Outcome, markers: list[str], *,
                    keyed: bool, fate: str = "present", unique: bool = True) -> None:
        for m, w in zip(markers, out.payload["written"]):
            self.expect(Acked(workload, ref, w["id"], w["createdAt"], m, keyed, fate, unique))

    # -- workload a: concurrent keyed puts to one ref --------------------------------------

    def workload_a(self) -> None:
        t = self.tenant("a")
        ref = memory_ref(t, "agent-a")
        p = self.profile

        def worker(w: int) -> None:
            rng = self.rng(f"a/{w}")
            for i in range(p.a_puts):
                where = f"a worker {w} put {i}"
                markers, entries, secrets = [], [], []
                for j in range(rng.randint(1, 3)):
                    m = self.reg.marker("content")
                    content = (f"Worker {w} note {i}.{j}: {rng.choice(NAMES)} asked about "
                               f"{rng.choice(TOPICS)}, reference {m}.")
                    if j == 0 and rng.random() < 0.3:
                        value = self.reg.secret()
                        secrets.append({"secretId": f"vault-{w}-{i}", "value": value})
                        content += f" Their API token is {value}."
                    markers.append(m)
                    entries.append({"content": content, "tags": ["fault", f"worker-{w}"]})
                keyed = rng.random() < 0.8
                key = self.reg.key() if keyed else None
                out = self.put(t, ref, entries, where=where, key=key, secrets=secrets, gw=w)
                if not out.ok:
                    continue
                written = out.payload["written"]
                fates = ["present"] * len(markers)
                # A client that lost the Lambda answer repeats the call: same key, same answer.
                if keyed and rng.random() < 0.3:
                    self.rec.op("replay_put")
                    again = self.put(t, ref, entries, where=where + " replay", key=key,
                                     secrets=secrets, gw=w + 1)
                    if again.ok and again.payload["written"] != written:
                        self.rec.violation("keyed_replay_identical",
                                           "a repeated keyed put answered other ids or times",
                                           f"{where}, tenant {t}")
                    self.rec.check("keyed_replay_identical")
                if keyed and rng.random() < 0.25:
                    victim = written[-1]["id"]
                    dkey = self.reg.key()
                    delete = {"op": "delete", "tenantId": t, "memoryRef": ref, "id": victim,
                              "idempotencyKey": dkey}
                    self.rec.op("delete_keyed")
                    d1 = self.call("memory-write", delete, where=where + " delete", gw=w)
                    if d1.ok:
                        fates[-1] = "deleted"
                        if d1.payload != {"deleted": True}:
                            self.rec.violation("keyed_replay_identical",
                                               f"keyed delete of a present entry answered "
                                               f"{d1.payload}", f"{where} id {victim}")
                        self.rec.op("replay_delete")
                        d2 = self.call("memory-write", delete, where=where + " delete replay",
                                       gw=w + 1)
                        if d2.ok and d2.payload != d1.payload:
                            self.rec.violation("keyed_replay_identical",
                                               f"repeated keyed delete answered {d2.payload} "
                                               f"after {d1.payload}", f"{where} id {victim}")
                        self.rec.check("keyed_replay_identical")
                for m, wr, fate in zip(markers, written, fates):
                    self.expect(Acked("a", ref, wr["id"], wr["createdAt"], m, keyed, fate))
                # Read-your-writes on an entry that was not deleted.
                kept = [(wr["id"], m) for wr, m, fate in zip(written, markers, fates)
                        if fate == "present"]
                if not kept:
                    continue
                first, first_marker = kept[0]
                self.rec.op("read_get")
                status, body = self.http_get(
                    t, f"{BASE}/entries/{quote(first, safe='')}?{query({'memoryRef': ref})}",
                    where=f"{where} read")
                self.rec.check("read_your_writes")
                if status == 404:
                    self.rec.violation("read_your_writes", "GET after an acknowledged put "
                                       "answered 404", f"{where} id {first}")
                elif status == 200 and first_marker not in body.decode("utf-8", "replace"):
                    self.rec.violation("read_your_writes", "GET answered another entry",
                                       f"{where} id {first}")

        with ThreadPoolExecutor(max_workers=p.a_workers) as pool:
            for f in [pool.submit(worker, w) for w in range(p.a_workers)]:
                f.result()

    # -- workload b: key reuse ---------------------------------------------------------------

    def workload_b(self) -> None:
        t = self.tenant("b")
        ref = memory_ref(t, "agent-b")
        rng = self.rng("b")
        for i in range(self.profile.b_probes):
            where = f"b probe {i}"
            key = self.reg.key()
            m = self.reg.marker("content")
            entries = [{"content": f"{rng.choice(NAMES)} prefers {rng.choice(THINGS)}, "
                                   f"reference {m}.", "tags": ["probe"]}]
            first = self.put(t, ref, entries, where=where, key=key)
            if not first.ok:
                continue
            self.acknowledge("b", ref, first, [m], keyed=True)
            # The same key with another payload: content changed, or (odd probes) only a tag.
            if i % 2 == 0:
                m2 = self.reg.marker("never")
                other = [{"content": f"{rng.choice(NAMES)} dislikes {rng.choice(THINGS)}, "
                                     f"reference {m2}.", "tags": ["probe"]}]
            else:
                other = [dict(entries[0], tags=["probe", "changed"])]
            self.rec.op("mismatch_probe")
            mismatch = self.call("memory-write",
                                 {"op": "put", "tenantId": t, "memoryRef": ref,
                                  "runId": "run-fault", "entries": other, "secrets": [],
                                  "idempotencyKey": key},
                                 where=where + " mismatch", expect=("idempotency_key_mismatch",))
            self.rec.check("key_mismatch_rejected")
            if mismatch.ok:
                self.rec.violation("key_mismatch_rejected", "a key reused with another payload "
                                   "was accepted", f"{where}, tenant {t}")
            elif mismatch.error_type != "idempotency_key_mismatch":
                self.rec.violation("key_mismatch_rejected",
                                   f"a key reused with another payload answered "
                                   f"{mismatch.error_type}", where)
            self.rec.op("replay_put")
            again = self.put(t, ref, entries, where=where + " replay", key=key)
            self.rec.check("keyed_replay_identical")
            if again.ok and again.payload["written"] != first.payload["written"]:
                self.rec.violation("keyed_replay_identical", "the repeat of a keyed put answered "
                                   "other ids or times", f"{where}, tenant {t}")
        # Deletes: the same key for another id is a mismatch, and the other entry stays.
        m1, m2 = self.reg.marker("content"), self.reg.marker("content")
        two = self.put(t, ref, [{"content": f"Delete probe one {m1}."},
                                {"content": f"Delete probe two {m2}."}],
                       where="b delete probe", key=self.reg.key())
        if not two.ok:
            return
        (w1, w2) = two.payload["written"]
        dkey = self.reg.key()
        self.rec.op("delete_keyed")
        d = self.call("memory-write", {"op": "delete", "tenantId": t, "memoryRef": ref,
                                       "id": w1["id"], "idempotencyKey": dkey},
                      where="b delete")
        self.expect(Acked("b", ref, w1["id"], w1["createdAt"], m1, True,
                          "deleted" if d.ok else "present"))
        self.rec.op("mismatch_probe")
        other = self.call("memory-write", {"op": "delete", "tenantId": t, "memoryRef": ref,
                                           "id": w2["id"], "idempotencyKey": dkey},
                          where="b delete mismatch", expect=("idempotency_key_mismatch",))
        self.rec.check("key_mismatch_rejected")
        if other.ok or other.error_type != "idempotency_key_mismatch":
            self.rec.violation("key_mismatch_rejected",
                               f"a delete key reused for another id answered "
                               f"{other.payload if other.ok else other.error_type}",
                               f"b delete, tenant {t}")
            if other.ok and other.payload == {"deleted": True}:
                self.expect(Acked("b", ref, w2["id"], w2["createdAt"], m2, True, "deleted"))
                return
        self.expect(Acked("b", ref, w2["id"], w2["createdAt"], m2, True))

    # -- workload c: dream and forget racing --------------------------------------------------

    def c_trial(self, k: int) -> None:
        rng = self.rng(f"c/{k}")
        t = self.tenant(f"c{k}")
        ref = memory_ref(t, "agent-c")
        where = f"c trial {k}"
        subject = self.reg.subject()
        n_subject = rng.randint(1, 3)
        n_plain = rng.randint(max(1, 3 - n_subject), 3)
        items = []
        for i in range(n_subject):
            m = self.reg.marker("forgotten")
            items.append(("forgotten", m, {
                "content": f"{rng.choice(NAMES)} shared a private detail {m} about "
                           f"{rng.choice(TOPICS)}.", "subject": subject, "tags": ["private"]}))
        for i in range(n_plain):
            m = self.reg.marker("content")
            items.append(("present", m, {
                "content": f"The team agreed on {rng.choice(THINGS)} for {rng.choice(TOPICS)}, "
                           f"reference {m}.", "tags": ["team"]}))
        rng.shuffle(items)
        # Most trials index the ref between the writes and the race, so the forget has segments
        # to rewrite, and half race an index pass rather than a dream against the forget.
        index_first = rng.random() < 0.7
        race_index = rng.random() < 0.5
        cut = rng.randint(1, len(items))
        for part in (items[:cut], items[cut:]):
            if not part:
                continue
            out = self.put(t, ref, [e for _, _, e in part], where=where + " put",
                           key=self.reg.key())
            if out.ok:
                for (fate, m, _), w in zip(part, out.payload["written"]):
                    self.expect(Acked("c", ref, w["id"], w["createdAt"], m, True, fate))
        offset = rng.uniform(-0.3, 0.3)
        dream_gw = rng.randrange(2)
        barrier = threading.Barrier(2)
        if index_first:
            self.rec.op("index")
            self.call("memory-dream", {"tenantId": t, "memoryRef": ref, "pass": "index"},
                      where=f"{where} index")

        def dream() -> None:
            barrier.wait()
            time.sleep(max(0.0, offset))
            self.rec.op("index" if race_index else "dream")
            run = {"tenantId": t, "memoryRef": ref}
            if race_index:
                run["pass"] = "index"
            out = self.call("memory-dream", run,
                            where=f"{where} {'index' if race_index else 'dream'}", gw=dream_gw)
            if out.ok and isinstance(out.payload, dict):
                # How the race went: "fenced" = the forget began during the dream.
                self.rec.note(f"race_dream_{out.payload.get('status')}")

        def forget() -> None:
            barrier.wait()
            time.sleep(max(0.0, -offset))
            self.rec.op("forget")
            self.call("memory-forget", {"tenantId": t, "subject": subject},
                      where=f"{where} forget", gw=dream_gw + 1)

        threads = [threading.Thread(target=dream), threading.Thread(target=forget)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.rec.check("forget_complete")
        if rng.random() < 0.5:
            # A later dream distils what is left, and must not bring the subject back.
            self.rec.op("dream")
            self.call("memory-dream", {"tenantId": t, "memoryRef": ref},
                      where=f"{where} later dream")

    def workload_c(self, trials: int | None = None) -> None:
        for k in range(self.profile.c_trials if trials is None else trials):
            self.c_trial(k)

    # -- workload d: consolidation during writes ---------------------------------------------

    def workload_d(self) -> None:
        t = self.tenant("d")
        ref = memory_ref(t, "agent-d")
        rng = self.rng("d")
        texts: list[tuple[str, str, bool]] = []   # (content, marker, unique)
        for g in range(self.profile.d_groups):
            m = self.reg.marker("content")
            base = (f"Customer {rng.choice(NAMES)} prefers {rng.choice(THINGS)} for "
                    f"{rng.choice(TOPICS)} under reference {m}")
            forms = [base, f"The {base[0].lower()}{base[1:]}", base + ".", base + "!"]
            for form in rng.sample(forms, rng.randint(2, 3)):
                texts.append((form, m, False))
        for _ in range(self.profile.d_singles):
            m = self.reg.marker("content")
            texts.append((f"Supplier {rng.choice(NAMES)} ships {rng.choice(THINGS)} under "
                          f"reference {m}", m, True))
        rng.shuffle(texts)
        halves = [texts[0::2], texts[1::2]]
        done = threading.Event()

        def writer(w: int) -> None:
            wrng = self.rng(f"d/{w}")
            for i, (content, m, unique) in enumerate(halves[w]):
                keyed = wrng.random() < 0.8
                out = self.put(t, ref, [{"content": content, "tier": "long-term",
                                         "tags": ["preference"]}],
                               where=f"d writer {w} put {i}",
                               key=self.reg.key() if keyed else None, gw=w)
                if out.ok:
                    self.acknowledge("d", ref, out, [m], keyed=keyed, fate="mergeable",
                                     unique=False)
                time.sleep(wrng.uniform(0.0, 0.15))

        def consolidator() -> None:
            crng = self.rng("d/consolidator")
            while not done.is_set():
                time.sleep(crng.uniform(0.05, 0.3))
                n = 2 if crng.random() < 0.3 else 1
                threads = [threading.Thread(target=self._consolidate, args=(t, ref, i,
                                                                            "d concurrent"))
                           for i in range(n)]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()

        cons = threading.Thread(target=consolidator)
        cons.start()
        writers = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
        for th in writers:
            th.start()
        for th in writers:
            th.join()
        done.set()
        cons.join()
        # A last pass after the writes; merges skipped because of a race are retried.
        for _ in range(4):
            report = self._consolidate(t, ref, 0, "d final")
            if not report or not report.get("mergesSkipped"):
                break

    def _consolidate(self, t: str, ref: str, gw: int, where: str) -> dict[str, Any] | None:
        self.rec.op("consolidate")
        out = self.call("memory-consolidate", {"tenantId": t, "memoryRef": ref},
                        where=where, gw=gw)
        return out.payload if out.ok and isinstance(out.payload, dict) else None

    # -- workload e: duplicate pass deliveries ------------------------------------------------

    @staticmethod
    def sqs_record(message_id: str, body: str) -> dict[str, Any]:
        return {"messageId": message_id, "receiptHandle": f"rh-{message_id}", "body": body,
                "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                "md5OfBody": hashlib.md5(body.encode()).hexdigest(),  # noqa: S324 - SQS's own
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:fault-passes",
                "awsRegion": "us-east-1"}

    def deliver_batch(self, function: str, records: list[dict[str, Any]], *, where: str,
                      gw: int | None = None) -> set[str]:
        """Delivers an SQS batch; failed items are delivered again (as SQS would after the
        visibility timeout) until none fails. Returns the ids that never succeeded."""
        pending = records
        for round_ in range(10):
            self.rec.op(f"batch:{function}")
            out = self.call(function, {"Records": pending}, where=f"{where} batch", gw=gw)
            if not out.ok or not isinstance(out.payload, dict):
                return {r["messageId"] for r in pending}
            failed = {f.get("itemIdentifier") for f in out.payload.get("batchItemFailures", [])}
            if not failed:
                return set()
            self.rec.note("batch_item_failures", len(failed))
            pending = [r for r in pending if r["messageId"] in failed]
            time.sleep(0.3 * (round_ + 1))
        self.rec.violation("op_completes", f"{function} batch items still failing after 10 "
                           "deliveries", where)
        return {r["messageId"] for r in pending}

    def _e_write(self, t: str, ref: str, rng: random.Random, n: int, *, tier: str | None,
                 label: str) -> None:
        if tier == "long-term":
            m = self.reg.marker("content")
            base = f"Client {rng.choice(NAMES)} wants {rng.choice(THINGS)} reference {m}"
            contents = [(c, m, False) for c in (base, base + ".", f"The {base[0].lower()}"
                                                f"{base[1:]}")][:n]
        else:
            contents = []
            for _ in range(n):
                m = self.reg.marker("content")
                contents.append((f"{rng.choice(NAMES)} reported progress on "
                                 f"{rng.choice(TOPICS)}, reference {m}.", m, True))
        for i, (content, m, unique) in enumerate(contents):
            entry: dict[str, Any] = {"content": content, "tags": ["status"]}
            if tier:
                entry["tier"] = tier
            out = self.put(t, ref, [entry], where=f"e {label} put {i}", key=self.reg.key())
            if out.ok:
                self.acknowledge("e", ref, out, [m], keyed=True,
                                 fate="mergeable" if tier == "long-term" else "present",
                                 unique=unique)

    def workload_e(self) -> None:
        t = self.tenant("e")
        rng = self.rng("e")
        self.tap(t)
        lo, hi = self.profile.e_entries
        r1, r2, r3, r4 = (memory_ref(t, f"agent-e{i}") for i in range(1, 5))
        self.e_refs.extend([r1, r2, r4])
        self._e_write(t, r1, rng, rng.randint(lo, hi), tier=None, label="e1")
        self._e_write(t, r2, rng, rng.randint(lo, hi), tier=None, label="e2")
        self._e_write(t, r3, rng, 3, tier="long-term", label="e3")
        self._e_write(t, r4, rng, rng.randint(lo, hi), tier=None, label="e4")

        def both(*calls: Callable[[], Any]) -> None:
            threads = [threading.Thread(target=c) for c in calls]
            for th in threads:
                th.start()
            for th in threads:
                th.join()

        def dream(ref: str, gw: int, where: str) -> Callable[[], Any]:
            def go() -> None:
                self.rec.op("dream")
                out = self.call("memory-dream", {"tenantId": t, "memoryRef": ref}, where=where,
                                gw=gw)
                if out.ok and isinstance(out.payload, dict):
                    # A duplicate that overlapped the first: distilled, archive already there.
                    p = out.payload
                    self.rec.note(f"dup_dream_{p.get('status')}"
                                  f"{'_archive_existed' if p.get('status') == 'distilled' and not p.get('archiveCreated') else ''}")
            return go

        def queued_pass(kind: str, ref: str) -> str:
            return json.dumps({"kind": kind, "tenantId": t, "memoryRef": ref})

        # e1: the same dream twice at once (two processes), then once more.
        both(dream(r1, 0, "e1 dream a"), dream(r1, 1, "e1 dream b"))
        dream(r1, 0, "e1 dream again")()
        # e2: a batch holding the same record twice, racing a direct invoke; then again.
        rec2 = self.sqs_record(f"m-{self.nonce}-e2", queued_pass("dream", r2))
        both(lambda: self.deliver_batch("memory-dream", [rec2, rec2], where="e2", gw=0),
             dream(r2, 1, "e2 direct"))
        self.deliver_batch("memory-dream", [rec2, rec2], where="e2 again", gw=1)
        # e3: consolidation twice at once, then the same batch (one record twice) to both.
        both(lambda: self._consolidate(t, r3, 0, "e3 a"),
             lambda: self._consolidate(t, r3, 1, "e3 b"))
        rec3 = self.sqs_record(f"m-{self.nonce}-e3", queued_pass("consolidate", r3))
        both(lambda: self.deliver_batch("memory-consolidate", [rec3, rec3], where="e3 a", gw=0),
             lambda: self.deliver_batch("memory-consolidate", [rec3, rec3], where="e3 b", gw=1))
        # e4: the functions' own fan-out to the queue plus two sends of our own, all read back
        # through the proxy (SQS faults: lost sends are sent again, lost receives and deletes
        # come back after the visibility timeout), delivered in batches.
        self._e_queue(t, r4, queued_pass("dream", r4), queued_pass("consolidate", r3))

    def _e_queue(self, t: str, r4: str, dream_job: str, consolidate_job: str) -> None:
        assert self.proxy is not None and self.queue_url is not None
        sqs = self.proxy.client("sqs")
        url = self.queue_url

        def fan_out(function: str, gw: int) -> None:
            self.rec.op(f"fan_out:{function}")
            self.call(function, {"action": "fan-out"}, where=f"e fan-out {function}", gw=gw)

        threads = [threading.Thread(target=fan_out, args=("memory-dream", 0)),
                   threading.Thread(target=fan_out, args=("memory-consolidate", 1))]
        for th in threads:
            th.start()
        for body in (dream_job, dream_job, consolidate_job):
            for _ in range(20):
                self.rec.op("sqs_send")
                try:
                    sqs.send_message(QueueUrl=url, MessageBody=body)
                    break
                except (botocore.exceptions.BotoCoreError,
                        botocore.exceptions.ClientError):
                    self.rec.note("sqs_send_retried")
                    time.sleep(0.1)
        for th in threads:
            th.join()
        deadline = time.monotonic() + 60
        idle_since: float | None = None
        while time.monotonic() < deadline:
            self.rec.op("sqs_receive")
            try:
                messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                               WaitTimeSeconds=0,
                                               VisibilityTimeout=3).get("Messages", [])
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
                self.rec.note("sqs_receive_failed")
                time.sleep(0.2)
                continue
            if not messages:
                now = time.monotonic()
                idle_since = idle_since or now
                if now - idle_since > 4.5:   # longer than the visibility timeout
                    break
                time.sleep(0.3)
                continue
            idle_since = None
            by_function: dict[str, list[dict[str, Any]]] = defaultdict(list)
            done: list[dict[str, Any]] = []
            for msg in messages:
                try:
                    j = json.loads(msg["Body"])
                except ValueError:
                    j = {}
                if j.get("tenantId") != t:
                    done.append(msg)   # another tenant's ref (shared emulator): not ours to run
                    continue
                function = {"dream": "memory-dream",
                            "consolidate": "memory-consolidate"}.get(j.get("kind"))
                if function is None:
                    self.rec.violation("no_unexpected_error", "a queued pass of unknown kind",
                                       "e queue")
                    done.append(msg)
                    continue
                self.rec.op("sqs_job_delivered")
                by_function[function].append(msg)
            for function, msgs in by_function.items():
                records = [self.sqs_record(m["MessageId"], m["Body"]) for m in msgs]
                failed = self.deliver_batch(function, records, where="e4 queue")
                done.extend(m for m in msgs if m["MessageId"] not in failed)
            for i in range(0, len(done), 10):
                chunk = done[i:i + 10]
                try:
                    out = sqs.delete_message_batch(QueueUrl=url, Entries=[
                        {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                        for n, m in enumerate(chunk)])
                    if out.get("Failed"):
                        self.rec.note("sqs_delete_failed", len(out["Failed"]))
                except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
                    self.rec.note("sqs_delete_failed")
        else:
            self.rec.violation("op_completes", "the pass queue did not drain in 60 s", "e4")

    # -- workload f: commitments fired from two processes ------------------------------------

    def workload_f(self) -> None:
        t = self.tenant("f")
        ref = memory_ref(t, "agent-f")
        self.f_refs.append(ref)
        tap = self.tap(t)
        now = time.time()
        due = math.ceil((now + 6) / 60) * 60
        hhmm = datetime.fromtimestamp(due, timezone.utc).strftime("%H:%M")
        m_time, m_pred, m_plain, m_set = (self.reg.marker("content") for _ in range(4))
        entries = [{"content": f"Remind me at {hhmm} to water the plants {m_time}"},
                   {"content": f"Follow up with Dana {m_pred} when the invoice clears"},
                   {"content": f"The invoice was sent {m_plain}"}]
        out = self.put(t, ref, entries, where="f put", key=self.reg.key())
        if not out.ok:
            return
        self.acknowledge("f", ref, out, [m_time, m_pred, m_plain], keyed=True)
        created = out.payload["written"][0]["createdAt"]
        if datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp() >= due:
            self.rec.note("f_put_after_due_time")

        def twice(payload: Any, where: str) -> None:
            def one(gw: int) -> None:
                self.call("memory-commitments", payload, where=where, gw=gw)
            threads = [threading.Thread(target=one, args=(gw,)) for gw in range(2)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()

        def deliver(ids: set[str]) -> None:
            events = tap.wait(lambda e: e.get("detail-type") == "memory.written"
                              and (e.get("detail") or {}).get("memoryId") in ids,
                              len(ids), timeout=10, settle=0.2)
            seen = {(e.get("detail") or {}).get("memoryId") for e in events}
            if seen != ids:
                self.rec.note("f_memory_written_missing", len(ids - seen))
            delivered: set[str] = set()
            for e in events:
                mid = (e.get("detail") or {}).get("memoryId")
                if mid in delivered:
                    continue
                delivered.add(mid)
                self.rec.op("commitment_event", 2)
                twice(e, "f memory.written")
            self.rec.op("backfill", 2)
            twice({"action": "backfill", "tenantId": t, "memoryRef": ref}, "f backfill")

        deliver({w["id"] for w in out.payload["written"]})
        settle = self.put(t, ref, [{"content": f"Payment settled {m_set}",
                                    "tags": ["when:invoice-clears"]}],
                          where="f satisfy", key=self.reg.key())
        if settle.ok:
            self.acknowledge("f", ref, settle, [m_set], keyed=True)
            deliver({settle.payload["written"][0]["id"]})
        time.sleep(max(0.0, due + 1.0 - time.time()))
        rounds = 0
        while True:
            rounds += 1
            self.rec.op("tick", 2)
            twice({"action": "tick"}, f"f tick round {rounds}")
            fired = tap.wait(lambda e: e.get("detail-type") == "commitment.fired"
                             and (e.get("detail") or {}).get("kind") == "time", 1,
                             timeout=0.5, settle=0.2)
            if (fired and rounds >= self.profile.f_tick_rounds) or time.time() > due + 45:
                break
            time.sleep(0.3)

    # -- the workloads together --------------------------------------------------------------

    def guarded(self, name: str, fn: Callable[[], None]) -> None:
        """Runs a workload; an exception in it is a harness_error violation, never lost."""
        began, seed = time.monotonic(), self.seed
        try:
            fn()
        except Exception as err:  # noqa: BLE001 - reported, never swallowed
            tb = traceback.format_exc(limit=6)
            self.rec.violation("harness_error", f"workload {name} raised "
                               f"{type(err).__name__}: {str(err)[:200]}", tb[-800:])
        finally:
            self.workload_seconds[f"{seed}:{name}"] = round(time.monotonic() - began, 1)

    def run_workloads(self, which: str = "abcdef", *, c_trials: int | None = None,
                      together: bool = True) -> None:
        """The chosen workloads, at the same time or (`together=False`) one after the other.
        Together means more requests queue at the serialising proxy, so each invocation
        takes longer: on a slow emulator, long enough to run out of its retry budget."""
        chosen: list[tuple[str, Callable[[], None]]] = []
        table = {"f": self.workload_f, "a": self.workload_a, "b": self.workload_b,
                 "c": lambda: self.workload_c(c_trials), "d": self.workload_d,
                 "e": self.workload_e}
        for name in "fabcde":
            if name in which and (name != "f" or self.profile.f_enabled):
                chosen.append((name, table[name]))

        if not chosen:
            return
        if not together:
            for name, fn in chosen:
                self.guarded(name, fn)
            return
        with ThreadPoolExecutor(max_workers=len(chosen)) as pool:
            for f in [pool.submit(self.guarded, n, fn) for n, fn in chosen]:
                f.result()

    # -- the checker -------------------------------------------------------------------------

    def finish(self) -> dict[str, Any]:
        """After the workloads: faults off, processes stopped, then every check. Returns the
        run's result."""
        if self.proxy is not None and not self.stats:
            self.faults_off()
        taps = dict(self.taps)
        events: dict[str, list[dict[str, Any]]] = {}
        for t, tap in taps.items():
            tap.wait(lambda e: False, 1, timeout=0.0, settle=1.5)
            events[t] = list(tap.received)
        self.stop()
        try:
            state = read_state(self.tenants)
            self.check_storage(state)
            self.check_acked(state)
            self.check_derived(state)
            self.check_events(state, events)
            self.check_work_markers(state)
            self.check_not_stored_truthful(state)
        except Exception as err:  # noqa: BLE001
            self.rec.violation("harness_error", f"checker raised {type(err).__name__}: "
                               f"{str(err)[:200]}", traceback.format_exc(limit=6)[-800:])
        self.check_logs()
        result = self.result()
        try:
            (self.out_dir / "result.json").write_text(json.dumps(result, indent=1))
        except OSError:
            pass
        return result

    def check_storage(self, state: State) -> None:
        """Forbidden markers anywhere in the table (every item, every tenant) and in every
        object version under the run's tenants."""
        forbidden = {m for m, k in self.reg.kinds.items() if k in STORED_FORBIDDEN}
        self.rec.check("forget_complete", sum(1 for k in self.reg.kinds.values()
                                              if k == "forgotten"))
        for item in state.items:
            text = "\n".join(strings_of({"M": item}))
            hits = [m for m in MARKER_RE.findall(text) if m in forbidden]
            for m in sorted(set(hits)):
                kind = self.reg.kinds[m]
                self.rec.violation(STORED_FORBIDDEN[kind], f"{kind} marker {m} stored",
                                   f"table item pk={item.get('pk', {}).get('S')} "
                                   f"sk={item.get('sk', {}).get('S')}")
        forgotten_ids = {a.id for a in self.acked if a.fate == "forgotten"}
        for key, vid, latest, body in state.objects:
            text = body.decode("utf-8", errors="replace")
            if "/search/" in key:
                # A search index object (docs/search.md "The index"): a segment's words and ids
                # are stored by the prefix they share with the one before, so read it first.
                if "/search/seg-" in key and not key.endswith(".vec"):
                    try:
                        held = segments.read(body)
                    except segments.Unreadable as e:
                        self.rec.violation("forget_complete", f"search segment unreadable ({e})",
                                           f"s3 object {key} version {vid}")
                        continue
                    text = "\n".join(held["ids"] + held["terms"] + held["tags"])
                for entry_id in sorted(i for i in forgotten_ids if i in text):
                    self.rec.violation("forget_complete", f"forgotten entry id {entry_id} kept",
                                       f"s3 object {key} version {vid}"
                                       f"{' (current)' if latest else ' (noncurrent)'}")
            for m in sorted({m for m in MARKER_RE.findall(text) if m in forbidden}):
                kind = self.reg.kinds[m]
                self.rec.violation(STORED_FORBIDDEN[kind], f"{kind} marker {m} stored",
                                   f"s3 object {key} version {vid}"
                                   f"{' (current)' if latest else ' (noncurrent)'}")

    def check_acked(self, state: State) -> None:
        coverage: dict[str, list[Acked]] = defaultdict(list)
        for a in self.acked:
            pk = partition(a.ref)
            stored = state.entries.get((pk, a.id))
            where = f"workload {a.workload} {pk} id {a.id} marker {a.marker}"
            if a.fate == "present":
                self.rec.check("acked_present_once")
                if stored is None:
                    self.rec.violation("acked_present_once", "acknowledged entry missing", where)
                    continue
                if a.marker not in stored.content:
                    self.rec.violation("acked_present_once",
                                       "stored entry does not carry its marker", where)
                if stored.created_at != a.created_at:
                    self.rec.violation("acked_present_once",
                                       f"createdAt {stored.created_at} != acknowledged "
                                       f"{a.created_at}", where)
                if a.unique_marker:
                    copies = [e for e in state.by_partition.get(pk, [])
                              if a.marker in e.content and not e.provenance
                              and not any(tag.startswith("compacted-from:") for tag in e.tags)]
                    if len(copies) > 1:
                        if a.keyed:
                            self.rec.violation("acked_present_once",
                                               f"stored {len(copies)} times (keyed put)", where)
                        else:
                            # Without a key a retry after a lost answer writes again
                            # (docs/guarantees.md "Idempotent writes").
                            self.rec.note("keyless_duplicate", len(copies) - 1)
            elif a.fate == "deleted":
                self.rec.check("acked_present_once")
                if stored is not None:
                    self.rec.violation("acked_present_once", "deleted entry still present",
                                       where)
            elif a.fate == "forgotten":
                if stored is not None:
                    self.rec.violation("forget_complete", "forgotten entry still present",
                                       where)
            elif a.fate == "mergeable":
                coverage[pk].append(a)
        for pk, acked in coverage.items():
            live = state.by_partition.get(pk, [])
            for a in acked:
                self.rec.check("consolidation_coverage")
                holders = [e.id for e in live if a.id in e.provenance]
                present = 1 if (pk, a.id) in state.entries else 0
                if present + len(holders) != 1:
                    self.rec.violation(
                        "consolidation_coverage",
                        f"present {present}, in the provenance of {len(holders)} present "
                        f"entries {holders[:3]}",
                        f"workload {a.workload} {pk} id {a.id}")

    def check_derived(self, state: State) -> None:
        """Archives, index lines and distilled entries of the run's tenants."""
        by_partition_archives: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
        for key, archive in state.archives.items():
            parts = key.split("/")
            by_partition_archives[f"{parts[0]}#{parts[2]}"].append((key, archive))
        partitions = set(by_partition_archives) | set(state.index_lines)
        for pk in sorted(partitions):
            archives = by_partition_archives.get(pk, [])
            lines = state.index_lines.get(pk, [])
            line_keys = Counter(line.get("archiveKey") for line in lines)
            sources: dict[str, str] = {}
            for key, archive in archives:
                for inv in ("archive_has_entry", "archive_has_index_line",
                            "one_archive_per_source_set"):
                    self.rec.check(inv)
                out_id = archive.get("outputEntryId")
                if (pk, out_id) not in state.entries:
                    self.rec.violation("archive_has_entry",
                                       f"outputEntryId {out_id} not in the table",
                                       f"s3 object {key}")
                if line_keys.get(key, 0) != 1:
                    self.rec.violation("archive_has_index_line",
                                       f"{line_keys.get(key, 0)} index lines",
                                       f"s3 object {key}")
                for sid in archive.get("sourceIds", []):
                    if sid in sources:
                        self.rec.violation("one_archive_per_source_set",
                                           f"source {sid} distilled into two archives "
                                           f"({sources[sid]} and this)", f"s3 object {key}")
                    sources[sid] = key.rsplit("/", 1)[-1]
            for line_key, n in line_keys.items():
                self.rec.check("index_line_has_archive")
                if line_key not in state.archives:
                    self.rec.violation("index_line_has_archive",
                                       f"index line for a missing archive {line_key}",
                                       f"{pk} MEMORY-INDEX.json")
        archived_outputs = {(f"{k.split('/')[0]}#{k.split('/')[2]}", a.get("outputEntryId"))
                            for k, a in state.archives.items()}
        for (pk, entry_id), e in state.entries.items():
            if any(tag.startswith("compacted-from:") for tag in e.tags):
                self.rec.check("output_entry_has_archive")
                if (pk, entry_id) not in archived_outputs:
                    self.rec.violation("output_entry_has_archive",
                                       "distilled entry without its archive",
                                       f"{pk} id {entry_id}")
        for ref in self.e_refs:
            pk = partition(ref)
            n = len(by_partition_archives.get(pk, []))
            self.rec.check("one_archive_per_source_set")
            if n != 1:
                self.rec.violation("one_archive_per_source_set",
                                   f"{n} archives for one source set (every entry was written "
                                   "before the first dream)", pk)

    def check_events(self, state: State, events: dict[str, list[dict[str, Any]]]) -> None:
        drops_on_events = any(f.get("service") == "events" and f.get("kind") == "drop"
                              for f in self.fault_log)
        for tenant, received in events.items():
            self.leak_check(json.dumps(received), f"events of tenant {tenant}")
            compacted: dict[str, list[str]] = defaultdict(list)
            fired: dict[str, list[str]] = defaultdict(list)
            for e in received:
                detail = e.get("detail") or {}
                canon = json.dumps(detail, sort_keys=True)
                if e.get("detail-type") == "memory.compacted":
                    compacted[str(detail.get("outputId"))].append(canon)
                elif e.get("detail-type") == "commitment.fired":
                    fired[str(detail.get("commitmentId"))].append(canon)
            for label, groups, inv in (("memory.compacted per outputId", compacted,
                                        "compacted_once"),
                                       ("commitment.fired per commitment", fired,
                                        "fire_at_most_once")):
                for ident, details in groups.items():
                    self.rec.check(inv)
                    distinct = set(details)
                    if len(distinct) > 1:
                        differing = sorted({k for d in distinct for k, v in json.loads(d).items()
                                            if any(json.loads(o).get(k) != v
                                                   for o in distinct)})
                        self.rec.violation(inv, f"{len(distinct)} different {label} (fields "
                                           f"that differ: {differing})",
                                           f"tenant {tenant} id {ident}")
                    if len(details) > len(distinct):
                        if drops_on_events:
                            self.rec.note(f"{inv}_identical_redelivery",
                                          len(details) - len(distinct))
                        else:
                            self.rec.violation(inv, f"{len(details)} identical {label} with no "
                                               "dropped PutEvents to explain them",
                                               f"tenant {tenant} id {ident}")
            # Every archive of a tapped tenant was announced.
            for key, archive in state.archives.items():
                if key.split("/")[0] != tenant:
                    continue
                self.rec.check("compacted_once")
                if str(archive.get("outputEntryId")) not in compacted:
                    self.rec.violation("compacted_once", "archive never announced "
                                       "(no memory.compacted)", f"s3 object {key}")
            for ref in self.f_refs:
                pk = partition(ref)
                if not pk.startswith(tenant + "#"):
                    continue
                stored = state.commitments.get(pk, [])
                if len(stored) < 2:
                    self.rec.note("f_commitments_not_inferred", 2 - len(stored))
                for item in stored:
                    cid = item["sk"]["S"][2:]
                    if cid not in fired:
                        self.rec.note("f_commitment_not_fired")

    def check_work_markers(self, state: State) -> None:
        """Finding (not one of the checked invariants): a ref holding transactional entries
        newer than its last dream's watermark must be in the pending-pass index, or the
        scheduled fan-out never visits it (until its next write marks it)."""
        for pk, entries in state.by_partition.items():
            marker = state.markers.get(pk, {}).get("dream", {})
            watermark = int(marker.get("watermarkMs", {}).get("N", "-1"))
            newer = [e for e in entries if e.tier == "transactional" and e.created_ms > watermark]
            if newer and "dirtyPartition" not in marker:
                self.rec.finding("ref_not_marked",
                                 f"{len(newer)} transactional entries newer than the dream "
                                 f"watermark, ref not in the pending-pass index"
                                 f"{' (no W#dream item)' if not marker else ''}",
                                 f"{pk} ids {[e.id for e in newer][:3]}")

    def check_logs(self) -> None:
        """Panics and registered markers in every function log, gateway stderr and the proxy
        log. Reported by file and line, with the marker word only."""
        if not any(name.endswith("-functions.log") and text for name, text in self.logs.items()):
            self.rec.violation("harness_error", "no function logs were captured",
                               str(self.out_dir))
        logs = dict(self.logs)
        for name, line in self.extra_log_lines:
            logs[name] = logs.get(name, "") + "\n" + line
        for name, text in logs.items():
            section = "-"
            for n, line in enumerate(text.splitlines(), 1):
                if line.startswith("===== ") and line.endswith(" ====="):
                    section = line.strip("= ")
                    continue
                if "panicked" in line:
                    at = re.search(r"panicked at ([^\s:]+:\d+:\d+)", line)
                    self.rec.violation("no_panic", f"{section} panicked"
                                       f"{' at ' + at.group(1) if at else ''}",
                                       f"{self.out_dir / name}:{n}")
                if "mk" in line:
                    for m, kind in self.reg.found(line):
                        self.rec.violation("no_leak", f"{kind} marker {m} in a log line "
                                           f"({section})", f"{self.out_dir / name}:{n}")
        self.rec.check("no_panic")
        self.rec.check("no_leak")

    def corrupt(self) -> set[str]:
        """The checker's self-test: damages the state the workloads left, once per invariant
        the checker can see in stored state, events and logs, and returns the invariants that
        must now be reported. Run without faults, after `run_workloads("abce")`."""
        ddb, s3 = emulator_client("dynamodb"), emulator_client("s3")
        events = emulator_client("events")
        table, bucket = os.environ["MEMORY_TABLE"], os.environ["ARCHIVE_BUCKET"]
        bus = os.environ["EVENT_BUS_NAME"]
        expected: set[str] = set()

        def get(pk: str, sk: str) -> dict[str, Any] | None:
            return ddb.get_item(TableName=table, Key={"pk": {"S": pk}, "sk": {"S": sk}},
                                ConsistentRead=True).get("Item")

        def put_text(pk: str, sk: str, text: str) -> None:
            ddb.put_item(TableName=table, Item={"pk": {"S": pk}, "sk": {"S": sk},
                                                 "content": {"S": text}})

        present_a = [a for a in self.acked if a.workload == "a" and a.fate == "present"
                     and a.keyed]
        if len(present_a) >= 2:
            dup, lost = present_a[0], present_a[1]
            item = get(partition(dup.ref), f"E#{dup.id}")
            if item:
                item["sk"] = {"S": f"E#{dup.id}DUP"}
                ddb.put_item(TableName=table, Item=item)          # stored twice
                expected.add("acked_present_once")
            ddb.delete_item(TableName=table, Key={"pk": {"S": partition(lost.ref)},
                                                  "sk": {"S": f"E#{lost.id}"}})  # lost
            expected.add("acked_present_once")
            # Out of the pending-pass index: a finding, not an invariant.
            ddb.delete_item(TableName=table, Key={"pk": {"S": partition(lost.ref)},
                                                  "sk": {"S": "W#dream"}})
        by_kind: dict[str, list[str]] = defaultdict(list)
        for m, kind in self.reg.kinds.items():
            by_kind[kind].append(m)
        c_refs = sorted({a.ref for a in self.acked if a.workload == "c"})
        if by_kind["forgotten"] and c_refs:
            m = by_kind["forgotten"][0]
            put_text(partition(c_refs[0]), "E#SELFTESTFORGOTTEN", f"left over {m}")
            s3.put_object(Bucket=bucket, Key=f"{c_refs[0].split('/')[1]}/agents/agent-c/"
                          "workspace/selftest.txt", Body=f"left over {m}".encode())
            expected.add("forget_complete")
            # A search segment keeping the marker as a term stored by its shared prefix, so
            # only reading the segment finds it (docs/search.md "The index").
            s3.put_object(Bucket=bucket, Key=f"{c_refs[0].split('/')[1]}/agents/agent-c/"
                          "search/seg-selftest",
                          Body=segments.encode(["01SELFTEST"], sorted([m[:6] + "0" * 8, m]), []))
        if by_kind["secret"]:
            put_text(partition(c_refs[0] if c_refs else present_a[0].ref), "E#SELFTESTSECRET",
                     f"token sk-fault-{by_kind['secret'][0]}")
            expected.add("secrets_not_stored")
        if by_kind["never"]:
            b_ref = next(a.ref for a in self.acked if a.workload == "b")
            put_text(partition(b_ref), "E#SELFTESTNEVER", f"refused {by_kind['never'][0]}")
            expected.add("key_mismatch_rejected")
        state = read_state(self.tenants)
        e_tenant = next((t for t in self.tenants if t.endswith("-e")), None)
        archives = {partition(r): [(k, a) for k, a in state.archives.items()
                                   if k.startswith(partition(r).replace("#", "/agents/") + "/")]
                    for r in self.e_refs}
        refs = list(self.e_refs)
        if len(refs) >= 3 and all(archives[partition(r)] for r in refs[:3]):
            (k1, a1), = archives[partition(refs[0])][:1]
            ddb.delete_item(TableName=table, Key={"pk": {"S": partition(refs[0])},
                                                  "sk": {"S": f"E#{a1['outputEntryId']}"}})
            expected.add("archive_has_entry")
            (k2, _a2), = archives[partition(refs[1])][:1]
            s3.delete_object(Bucket=bucket, Key=k2)   # a delete marker: the line is orphaned
            expected.update({"index_line_has_archive", "output_entry_has_archive"})
            (k3, a3), = archives[partition(refs[2])][:1]
            copy = k3.rsplit("/", 1)[0] + "/" + "f" * 64 + ".json"
            s3.put_object(Bucket=bucket, Key=copy, Body=json.dumps(a3).encode())
            expected.update({"one_archive_per_source_set", "archive_has_index_line"})
            if e_tenant:
                def publish(detail_type: str, detail: dict[str, Any]) -> None:
                    out = events.put_events(Entries=[{
                        "Source": "wop-memory", "DetailType": detail_type,
                        "EventBusName": bus, "Detail": json.dumps(detail)}])
                    assert not out.get("FailedEntryCount"), out
                publish("memory.compacted", {"tenantId": e_tenant,
                                             "outputId": a3["outputEntryId"],
                                             "ts": "2000-01-01T00:00:00.000Z"})
                expected.add("compacted_once")
                for fired_at in ("2000-01-01T00:00:00.000Z", "2000-01-01T00:00:01.000Z"):
                    publish("commitment.fired", {"tenantId": e_tenant,
                                                 "commitmentId": "selftest",
                                                 "firedAt": fired_at})
                expected.add("fire_at_most_once")
                publish("memory.forgotten", {"tenantId": e_tenant,
                                             "note": f"leak {by_kind['content'][0]}"})
                expected.add("no_leak")
        mergeable = sorted({a.ref for a in self.acked if a.fate == "mergeable"})
        if mergeable:
            pk = partition(mergeable[0])
            for e in state.by_partition.get(pk, []):
                ddb.delete_item(TableName=table, Key={"pk": {"S": pk}, "sk": {"S": f"E#{e.id}"}})
            expected.add("consolidation_coverage")
        self.extra_log_lines += [
            ("gateway-0-functions.log", f'{{"level":"INFO","fields":{{"message":"put {by_kind["content"][0]}"}}}}'),
            ("gateway-1-functions.log", "thread 'tokio-runtime-worker' panicked at shared/x/src/lib.rs:1:2:"),
        ]
        expected.update({"no_leak", "no_panic"})
        return expected

    def result(self) -> dict[str, Any]:
        by_service: dict[str, dict[str, int]] = {s: {k: 0 for k in KINDS} for s in SERVICES}
        for op, counters in (self.stats.get("byOperation") or {}).items():
            service = op.split(":", 1)[0]
            if service in by_service:
                for kind, n in counters.get("injected", {}).items():
                    by_service[service][kind] += n
        ops = Counter({k: v for k, v in self.rec.ops.items()
                       if not k.startswith(("attempt:", "retry:"))})
        ops["attempts"] = sum(v for k, v in self.rec.ops.items() if k.startswith("attempt:"))
        ops["retries"] = sum(v for k, v in self.rec.ops.items() if k.startswith("retry:"))
        return {
            "seed": self.phase_seeds[0] if self.phase_seeds else self.seed,
            "seeds": list(self.phase_seeds),
            "profile": self.profile_name,
            "rates": list(self.phase_rates),
            "seconds": round(time.monotonic() - self.started, 1),
            "workloadSeconds": dict(self.workload_seconds),
            "tenants": len(self.tenants),
            "operations": dict(sorted(ops.items())),
            "answers": dict(sorted(self.rec.answers.items())),
            "faults": dict(self.stats.get("injected") or {k: 0 for k in KINDS}),
            "faultsByService": by_service,
            "proxyRequests": self.stats.get("requests", 0),
            "upstream5xx": self.stats.get("upstream5xx", 0),
            "acknowledgedEntries": len(self.acked),
            "maxKeyLockSeconds": round(self.max_key_lock, 1),
            "checks": dict(sorted(self.rec.checks.items())),
            "notes": dict(sorted(self.rec.notes.items())),
            "violationCounts": {k: self.rec.violation_counts.get(k, 0) for k in INVARIANTS},
            "violations": list(self.rec.violations),
            "findings": list(self.rec.findings),
            "outDir": str(self.out_dir),
        }


# ---------------------------------------------------------------------------------------------
# Entry points.


def run_suite(seeds: int | list[int], *, profile: str = "small", which: str = "abcdef",
              out_dir: Path | None = None, together: bool = False) -> dict[str, Any]:
    """One run: workloads a-e once per seed (one phase per seed: its fault rates, its draws,
    its choices, its tenants), f once across all phases (its time commitment falls due while
    the phases run, so several seeds cost one wait), then the checks over everything. Within a
    phase the workloads run one after the other unless `together` (each is concurrent in
    itself; f runs beside them all)."""
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    with Run(seeds[0], profile=profile, out_dir=out_dir, label="suite") as run:
        run.faults_on()
        commitments = None
        if "f" in which and run.profile.f_enabled:
            commitments = threading.Thread(target=run.guarded, args=("f", run.workload_f))
            commitments.start()
        for i, seed in enumerate(seeds):
            if i:
                run.phase(seed)
            run.run_workloads(which.replace("f", ""), together=together)
        if commitments is not None:
            commitments.join()
        return run.finish()


def run_races(seed: int, *, trials: int = 50, out_dir: Path | None = None,
              rates: dict[str, float] | None = None) -> dict[str, Any]:
    """`trials` forget-vs-dream trials (workload c alone, so the seeded offsets hold), under
    faults (milder than a full run's unless `rates` says otherwise)."""
    mild = rates if rates is not None else {k: round(v / 2, 3) for k, v in
                                            rates_for(seed).items()}
    with Run(seed, rates=mild, out_dir=out_dir, label="races") as run:
        run.faults_on()
        run.run_workloads("c", c_trials=trials)
        result = run.finish()
        result["trials"] = trials
        return result


def first_drop_only_seed(rate: float = 0.01, horizon: int = 200) -> int:
    """A proxy seed under which, with only `drop` at `rate`, the first admitted request is
    dropped and the next `horizon - 1` are not (the proxy's draw n uses
    `random.Random(f"{seed}/{n}")`, see proxy.py): "the first attempt only", deterministically."""
    for seed in range(1, 1_000_000):
        if random.Random(f"{seed}/1").random() >= rate:
            continue
        if all(random.Random(f"{seed}/{n}").random() >= rate for n in range(2, horizon + 1)):
            return seed
    raise SuiteError("no seed drops only the first request")


def run_lost_response(seed: int = 5, *, out_dir: Path | None = None) -> dict[str, Any]:
    """A keyed put whose TransactWriteItems answer is lost, then retried by the client with the
    same key: stored exactly once, the same ids answered. Two cases:
    A. only the first TransactWriteItems is dropped (applied upstream, answer lost); the
       function's own retry meets its applied write; the client then repeats the call anyway
       (as after a lost Lambda answer) and must get the identical `written`;
    B. every TransactWriteItems of the client's first call is dropped, so that call fails
       after its retry budget (the write did apply); the faults stop; the client's retries
       with the same key must answer one `written` list, twice the same, naming the stored
       entry."""
    details: dict[str, Any] = {}
    with Run(seed, gateways=1, rates={k: 0.0 for k in KINDS}, out_dir=out_dir,
             label="lost-response") as run:
        assert run.proxy is not None
        t = run.tenant("lost")
        ref = memory_ref(t, "agent-lost")
        tx = "dynamodb:TransactWriteItems"

        ref_b = memory_ref(t, "agent-lost-b")   # its own ref: its work marker is its own

        def payload(m: str, key: str, ref: str = ref) -> dict[str, Any]:
            return {"op": "put", "tenantId": t, "memoryRef": ref, "runId": "run-lost",
                    "entries": [{"content": f"Lost response probe {m}.", "tags": ["lost"]}],
                    "secrets": [], "idempotencyKey": key}

        def dropped() -> int:
            assert run.proxy is not None
            return run.proxy.stats()["byOperation"].get(tx, {}).get("injected", {}).get(
                "drop", 0)

        # A: the first transaction's answer only.
        ma, ka = run.reg.marker("content"), run.reg.key()
        run.proxy.reset()
        run.proxy.config(rates={"drop": 0.01}, only=[tx], seed=first_drop_only_seed())
        run.rec.op("put_keyed")
        first = run.call("memory-write", payload(ma, ka), where="lost A first")
        details["A"] = {"dropped": dropped(), "firstAnswer": "ok" if first.ok
                        else first.error_type}
        run.proxy.quiet()
        run.rec.op("replay_put")
        again = run.call("memory-write", payload(ma, ka), where="lost A retry")
        if details["A"]["dropped"] != 1:
            run.rec.violation("harness_error", f"case A dropped {details['A']['dropped']} "
                              "transactions, not exactly the first", "lost A")
        run.rec.check("keyed_replay_identical")
        if first.ok and again.ok:
            if again.payload["written"] != first.payload["written"]:
                run.rec.violation("keyed_replay_identical", "the retry after a lost "
                                  "transaction answer answered other ids or times", "lost A")
            run.acknowledge("lost", ref, again, [ma], keyed=True)
        # B: every transaction answer of the first call.
        mb, kb = run.reg.marker("content"), run.reg.key()
        run.proxy.reset()
        run.proxy.config(rates={"drop": 1.0}, only=[tx], seed=seed)
        run.rec.op("put_keyed")
        one = run.call("memory-write", payload(mb, kb, ref_b), where="lost B first",
                       once=True)
        details["B"] = {"dropped": dropped(),
                        "firstAnswer": "ok" if one.ok else one.error_type,
                        "firstMessage": None if one.ok else (one.payload or {}).get(
                            "errorMessage")}
        run.proxy.quiet()
        run.rec.op("replay_put", 2)
        second = run.call("memory-write", payload(mb, kb, ref_b), where="lost B retry")
        third = run.call("memory-write", payload(mb, kb, ref_b),
                         where="lost B second retry")
        run.rec.check("keyed_replay_identical")
        if second.ok and third.ok:
            answers = [o.payload["written"] for o in (one, second, third) if o.ok]
            if any(a != answers[0] for a in answers):
                run.rec.violation("keyed_replay_identical", "retries of a put whose first "
                                  "call lost every transaction answer answered different "
                                  "written lists", "lost B")
            run.acknowledge("lost", ref_b, second, [mb], keyed=True)
        result = run.finish()
        result["lostResponse"] = details
        return result


# The 95 % workload: what is faulted, and how.
EXTREME_RATES = {"500": 0.15, "throttle": 0.35, "conflict": 0.25, "drop": 0.20}
# Only refusals: the store applied nothing it did not answer for.
REFUSAL_RATES = {"500": 0.0, "throttle": 0.60, "conflict": 0.35, "drop": 0.0}
# A put's write and a failed attempt's give-back of its key.
EXTREME_WRITE_OPS = ["dynamodb:TransactWriteItems", "dynamodb:DeleteItem"]
# A dream's writes: the archive, the index and its sibling, the output entry.
EXTREME_DREAM_OPS = ["dynamodb:TransactWriteItems", "s3:PutObject"]
# Tries of each keyless put while only refusals are injected.
REFUSED_TRIES = 4
# The functions' timeout in this workload: a failing invocation costs seconds, not half a minute,
# and leases (the deadline, capped at 30 s) are this long.
EXTREME_FUNCTION_TIMEOUT_SECONDS = 6


def orphan_archives(state: State, tenant: str) -> list[str]:
    """Current archives of `tenant` that neither an index line nor their output entry refers to."""
    out = []
    for key, archive in state.archives.items():
        parts = key.split("/")
        if parts[0] != tenant:
            continue
        pk = f"{parts[0]}#{parts[2]}"
        lines = {line.get("archiveKey") for line in state.index_lines.get(pk, [])}
        if key not in lines and (pk, archive.get("outputEntryId")) not in state.entries:
            out.append(key)
    return out


def run_extreme(seed: int = 95, *, out_dir: Path | None = None, workers: int = 2,
                puts: int = 2, refused: int = 2, dream_rounds: int = 2) -> dict[str, Any]:
    """The 95 % workload. One tenant, two gateways, functions under a 6 s timeout.
    1. `workers` threads x `puts` puts (2 of 3 keyed) while 95 % of TransactWriteItems and
       DeleteItem fail (500, throttle, conflict, drop): keyed puts stored once, no key locked
       beyond the bound, every retryable answer with its delay, a keyless put answered
       "not stored" never stored.
    2. `refused` keyless puts while 95 % of TransactWriteItems are refused (throttle,
       conflict only): never `outcome_unknown`.
    2b. one keyed put on the gateway whose functions have a 60 s timeout, while every
       TransactWriteItems and DeleteItem is throttled: its write and its give-back fail, and
       its key answers idempotency_in_flight until the lease (capped at 30 s), not 60 s.
    3. `dream_rounds` rounds of a write (no faults) and one dream attempt under 95 % faults on
       the archive, index and entry writes (orphans may be left); then a clean dream pass:
       no orphan archive left (the checker's archive invariants, and a count)."""
    details: dict[str, Any] = {}
    env = {"LOCAL_FUNCTION_TIMEOUT_SECONDS": str(EXTREME_FUNCTION_TIMEOUT_SECONDS),
           "DREAM_ORPHAN_GRACE_SECONDS": "0"}
    # Gateway 2 runs the functions under a 60 s timeout, above the lease's 30 s cap.
    with Run(seed, rates=EXTREME_RATES, out_dir=out_dir, label="extreme", env=env,
             gateways=3, gateway_env={2: {"LOCAL_FUNCTION_TIMEOUT_SECONDS": "60"}}) as run:
        proxy = run.proxy
        assert proxy is not None
        run.rotate_over = 2
        t = run.tenant("x")
        ref = memory_ref(t, "agent-x")

        def phase(rates: dict[str, float], only: list[str], phase_seed: int) -> None:
            proxy.reset()
            proxy.config(rates=rates, only=only, seed=phase_seed)
            run.phase_seeds.append(phase_seed)
            run.phase_rates.append(dict(rates))

        def end_phase() -> None:
            run._snapshot()
            proxy.quiet()

        # 1. Puts at 95 %.
        started = time.monotonic()
        phase(EXTREME_RATES, EXTREME_WRITE_OPS, seed)

        def worker(w: int) -> None:
            rng = run.rng(f"x/{w}")
            for i in range(puts):
                m = run.reg.marker("content")
                entries = [{"content": f"Extreme {w}.{i}: {rng.choice(NAMES)} on "
                                       f"{rng.choice(TOPICS)}, reference {m}.", "tags": ["x"]}]
                keyed = (w + i) % 3 != 2
                out = run.put(t, ref, entries, where=f"x worker {w} put {i}",
                              key=run.reg.key() if keyed else None, gw=w, limit=240.0)
                if out.ok:
                    run.acknowledge("x", ref, out, [m], keyed=keyed)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for f in [pool.submit(worker, w) for w in range(workers)]:
                f.result()
        end_phase()
        details["putsSeconds"] = round(time.monotonic() - started, 1)

        # 2. Refusals only: nothing can have been applied unseen.
        started = time.monotonic()
        phase(REFUSAL_RATES, ["dynamodb:TransactWriteItems"], seed + 1)
        run.refusals_only = True

        def refused_put(i: int) -> None:
            # A client's tries of one keyless put, each answer checked; a fixed number of
            # tries (not until success), which bounds the phase's time.
            m = run.reg.marker("content")
            for a in range(REFUSED_TRIES):
                out = run.put(t, ref, [{"content": f"Refused probe {i}, reference {m}.",
                                        "tags": ["refused"]}], where=f"x refused {i}.{a}",
                              key=None, gw=i, once=True)
                if out.ok:
                    run.acknowledge("x", ref, out, [m], keyed=False)
                    return

        with ThreadPoolExecutor(max_workers=refused) as pool:
            for f in [pool.submit(refused_put, i) for i in range(refused)]:
                f.result()
        run.refusals_only = False
        end_phase()
        details["refusedSeconds"] = round(time.monotonic() - started, 1)

        # 2b. The bound itself: an attempt under a 60 s timeout whose write and give-back both
        #    fail (every TransactWriteItems and DeleteItem throttled); the key is locked until
        #    the lease, capped at 30 s, not until the 60 s deadline.
        started = time.monotonic()
        phase({"500": 0.0, "throttle": 1.0, "conflict": 0.0, "drop": 0.0}, EXTREME_WRITE_OPS,
              seed + 2)
        lock_m, lock_key = run.reg.marker("content"), run.reg.key()
        lock_entries = [{"content": f"Lock probe, reference {lock_m}.", "tags": ["lock"]}]
        first = run.put(t, ref, lock_entries, where="x lock first", key=lock_key, gw=2,
                        pin=True, once=True)
        end_phase()

        def lock_retry() -> None:
            # Waits out the lock while the dreams run (their faults may meet it afterwards;
            # the lock ends at the first answer that is not idempotency_in_flight).
            then = run.put(t, ref, lock_entries, where="x lock retry", key=lock_key, gw=2,
                           pin=True, limit=180.0)
            if then.ok:
                run.acknowledge("x", ref, then, [lock_m], keyed=True)
            both = Outcome(then.ok, then.payload, then.error_type,
                           first.attempts + then.attempts, first.history + then.history)
            details["lock"] = {"firstAnswer": "ok" if first.ok else first.error_type,
                               "lockedSeconds": round(run.check_key_lock(both, "x lock"), 1),
                               "inFlightAnswers": sum(1 for _, a in then.history
                                                      if a == "idempotency_in_flight")}

        locker = threading.Thread(target=run.guarded, args=("x-lock", lock_retry))
        locker.start()

        # 3. Dreams that fail after their archive, then a clean pass (while the lock runs out).
        dreams_started = time.monotonic()
        dref = memory_ref(t, "agent-dream")
        dream_answers = []
        for r in range(dream_rounds):
            m = run.reg.marker("content")
            out = run.put(t, dref, [{"content": f"Round {r}: {NAMES[r % len(NAMES)]} prefers "
                                     f"{THINGS[r % len(THINGS)]}, reference {m}.",
                                     "tags": ["dream"]}], where=f"x dream round {r} put",
                          key=run.reg.key())
            if out.ok:
                run.acknowledge("x", dref, out, [m], keyed=True, unique=True)
            phase(EXTREME_RATES, EXTREME_DREAM_OPS, seed + 10 + r)
            run.rec.op("dream")
            d = run.call("memory-dream", {"tenantId": t, "memoryRef": dref},
                         where=f"x dream round {r}", once=True)
            dream_answers.append("ok" if d.ok else str(d.error_type))
            end_phase()
        details["dreamAnswers"] = dream_answers
        locker.join()
        details["lockSeconds"] = round(time.monotonic() - started, 1)
        details["orphansBeforeCleanPass"] = len(orphan_archives(read_state({t}), t))
        run.rec.op("dream")
        clean = run.call("memory-dream", {"tenantId": t, "memoryRef": dref},
                         where="x clean dream pass")
        details["cleanPass"] = {k: clean.payload.get(k) for k in
                                ("status", "orphansRemoved")} if clean.ok else None
        details["orphansAfterCleanPass"] = len(orphan_archives(read_state({t}), t))
        details["dreamsSeconds"] = round(time.monotonic() - dreams_started, 1)
        run.stats = merge_stats(run.phase_stats)
        result = run.finish()
        result["extreme"] = details
        try:
            (run.out_dir / "result.json").write_text(json.dumps(result, indent=1))
        except OSError:
            pass
        return result


def run_selftest(seed: int = 1, *, out_dir: Path | None = None) -> dict[str, Any]:
    """The checker's own test: workloads a, b, c and e without faults, then `Run.corrupt`, then
    the checks. `expectedViolations` lists what must be reported; nothing else may be."""
    with Run(seed, rates={k: 0.0 for k in KINDS}, out_dir=out_dir, label="selftest") as run:
        run.faults_on()
        run.run_workloads("abce")
        clean = dict(run.rec.violation_counts)
        expected = run.corrupt()
        result = run.finish()
        result["expectedViolations"] = sorted(expected)
        result["violationsBeforeCorruption"] = {k: v for k, v in clean.items() if v}
        return result


def merge_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The proxy's counters of several phases, added up."""
    out: dict[str, Any] = {"requests": 0, "upstream5xx": 0, "injected": Counter(),
                           "byOperation": {}}
    for st in parts:
        out["requests"] += st.get("requests", 0)
        out["upstream5xx"] += st.get("upstream5xx", 0)
        out["injected"].update(st.get("injected", {}))
        for op, counters in (st.get("byOperation") or {}).items():
            slot = out["byOperation"].setdefault(op, {"requests": 0, "injected": Counter()})
            slot["requests"] += counters.get("requests", 0)
            slot["injected"].update(counters.get("injected", {}))
    out["injected"] = {k: out["injected"].get(k, 0) for k in KINDS}
    return out


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    ops: Counter[str] = Counter()
    faults: dict[str, Counter[str]] = {s: Counter() for s in SERVICES}
    violations: Counter[str] = Counter({k: 0 for k in INVARIANTS})
    notes: Counter[str] = Counter()
    for r in results:
        ops.update(r["operations"])
        for s in SERVICES:
            faults[s].update(r["faultsByService"][s])
        violations.update(r["violationCounts"])
        notes.update(r["notes"])
    return {"runs": len(results), "operations": ops, "faults": faults,
            "violations": violations, "notes": notes}


def markdown(results: list[dict[str, Any]], seconds: float) -> str:
    s = summarize(results)
    seeds = ", ".join(str(s) for r in results for s in (r.get("seeds") or [r["seed"]]))
    out = [f"## Fault suite: {s['runs']} runs in {seconds:.0f} s (seeds {seeds})", "",
           "### Operations", "", "| operation | count |", "|---|---:|"]
    out += [f"| {k} | {v} |" for k, v in sorted(s["operations"].items())]
    out += ["", "### Faults injected", "",
            "| service | " + " | ".join(KINDS) + " | total |",
            "|---|" + "---:|" * (len(KINDS) + 1)]
    totals: Counter[str] = Counter()
    for service in SERVICES:
        row = s["faults"][service]
        totals.update(row)
        out.append(f"| {service} | " + " | ".join(str(row[k]) for k in KINDS)
                   + f" | {sum(row[k] for k in KINDS)} |")
    out.append("| **all** | " + " | ".join(str(totals[k]) for k in KINDS)
               + f" | {sum(totals[k] for k in KINDS)} |")
    out += ["", "### Invariant violations (must all be 0)", "", "| invariant | violations |",
            "|---|---:|"]
    out += [f"| {k} | {s['violations'][k]} |" for k in INVARIANTS]
    findings = [(r["seed"], f) for r in results for f in r.get("findings", [])]
    names = {f["finding"] for _, f in findings}
    notes = {k: v for k, v in s["notes"].items() if k not in names}
    if notes:
        out += ["", "### Notes (expected under faults, not violations)", "",
                "| note | count |", "|---|---:|"]
        out += [f"| {k} | {v} |" for k, v in sorted(notes.items())]
    if findings:
        out += ["", "### Findings (worth a look; not among the invariants)", "",
                "| seed | finding | what | where |", "|---|---|---|---|"]
        out += [f"| {seed} | {f['finding']} | {f['what']} | {f['where']} |"
                for seed, f in findings[:20]]
    first = [(r["seed"], v) for r in results for v in r["violations"]][:20]
    if first:
        out += ["", "### First violations", "", "| seed | invariant | what | where |",
                "|---|---|---|---|"]
        out += [f"| {seed} | {v['invariant']} | {v['what']} | {v['where'].splitlines()[-1]} |"
                for seed, v in first]
    return "\n".join(out)


def purge_events_tap() -> None:
    """Empties the provisioned all-events tap queue (nothing reads it; on a long soak it only
    grows the emulator's memory). Only for an emulator the caller owns."""
    url = os.environ.get("EVENTS_QUEUE_URL")
    if url:
        try:
            emulator_client("sqs").purge_queue(QueueUrl=url)
        except Exception:  # noqa: BLE001 - best effort
            pass


SOAK_SEEDS_PER_RUN = 3


def read_results(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def resident_mb(pid: int | None) -> int | None:
    """Resident memory of a process (the emulator), from /proc."""
    if not pid:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def soak(minutes: float, seed: int, *, out: Path, own_emulator: bool = False,
         race_trials: int = 50, max_runs: int | None = None, emulator_pid: int | None = None,
         max_rss_mb: int = 2048) -> int:
    """Runs until `minutes` have passed (or `max_runs` suite runs): first `race_trials`
    forget-vs-dream trials (0: none), then suite runs of SOAK_SEEDS_PER_RUN seeds each, from
    `seed` on. Every result is appended to `out`/results.jsonl (tests/soak restarts the
    emulator between calls and prints the table of all of them with `table`). A run's
    directory is kept only when it found a violation. Stops early once the emulator
    (`emulator_pid`) holds more than `max_rss_mb`: moto 5.2.5 deep-copies the whole table on
    every TransactWriteItems and its resident memory only grows (0.4-1.5 GB per soak run
    measured here), so tests/soak replaces it. Returns the next unused seed."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "results.jsonl"

    def keep(result: dict[str, Any]) -> None:
        with log.open("a") as fh:
            fh.write(json.dumps(result) + "\n")
        bad = sum(result["violationCounts"].values())
        what = f"{result['trials']} races" if "trials" in result else "suite"
        rss = resident_mb(emulator_pid)
        print(f"soak: {what}, seeds {result.get('seeds')}, {result['seconds']} s, "
              f"{result['proxyRequests']} proxied requests, faults {result['faults']}, "
              f"violations {bad}{f', emulator {rss} MB' if rss is not None else ''}",
              file=sys.stderr, flush=True)
        if not bad:
            shutil.rmtree(result["outDir"], ignore_errors=True)
        if own_emulator:
            purge_events_tap()

    if race_trials:
        keep(run_races(seed, trials=race_trials, out_dir=out / f"races-seed{seed}"))
        seed += 1
    n = 0
    while time.monotonic() - started < minutes * 60 and (max_runs is None or n < max_runs):
        rss = resident_mb(emulator_pid)
        if rss is not None and rss > max_rss_mb:
            break
        seeds = list(range(seed, seed + SOAK_SEEDS_PER_RUN))
        seed += SOAK_SEEDS_PER_RUN
        n += 1
        # Odd runs: a phase's workloads all at once (more interleaving; the soak's own
        # emulator is fast enough); even runs: one after the other.
        keep(run_suite(seeds, profile="soak", out_dir=out / f"suite-seed{seeds[0]}",
                       together=n % 2 == 1))
    return seed


def table(path: Path, seconds: float | None = None) -> int:
    """Prints the Markdown table of every result in `path`; 1 if any violation, 2 if none."""
    results = read_results(path)
    if not results:
        print(f"suite: no results in {path}", file=sys.stderr)
        return 2
    print(markdown(results, seconds if seconds is not None
                   else sum(r["seconds"] for r in results)))
    return 1 if any(sum(r["violationCounts"].values()) for r in results) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="suite.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="one run of every workload; the result as JSON")
    p_run.add_argument("--seeds", default="1", help="comma-separated: one phase per seed")
    p_run.add_argument("--profile", choices=sorted(PROFILES), default="small")
    p_run.add_argument("--workloads", default="abcdef")
    p_run.add_argument("--together", action="store_true",
                       help="a phase's workloads at the same time, not one after the other")
    p_races = sub.add_parser("races", help="forget-vs-dream trials only")
    p_races.add_argument("--seed", type=int, default=1)
    p_races.add_argument("--trials", type=int, default=50)
    sub.add_parser("selftest", help="the checker must report deliberate damage")
    sub.add_parser("lost-response", help="a keyed put whose transaction answers are lost")
    p_extreme = sub.add_parser("extreme", help="the 95 %% fault-rate workload")
    p_extreme.add_argument("--seed", type=int, default=95)
    p_soak = sub.add_parser("soak", help="runs with changing seeds until the time is up; "
                            "results appended to OUT/results.jsonl; prints the next seed")
    p_soak.add_argument("--minutes", type=float, required=True)
    p_soak.add_argument("--seed", type=int, default=1)
    p_soak.add_argument("--races", type=int, default=50, help="forget-vs-dream trials first")
    p_soak.add_argument("--max-runs", type=int, default=None)
    p_soak.add_argument("--own-emulator", action="store_true",
                        help="the emulator is ours alone (tests/soak): purge its tap")
    p_soak.add_argument("--out", type=Path, default=OUT_ROOT / "soak")
    p_soak.add_argument("--emulator-pid", type=int, default=None,
                        help="stop early once this process holds more than --max-rss-mb")
    p_soak.add_argument("--max-rss-mb", type=int, default=2048)
    p_table = sub.add_parser("table", help="the Markdown table of a results.jsonl")
    p_table.add_argument("results", type=Path)
    p_table.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            result = run_suite([int(x) for x in args.seeds.split(",")], profile=args.profile,
                               which=args.workloads, together=args.together)
        elif args.command == "races":
            result = run_races(args.seed, trials=args.trials)
        elif args.command == "lost-response":
            result = run_lost_response()
        elif args.command == "extreme":
            result = run_extreme(args.seed)
        elif args.command == "selftest":
            result = run_selftest()
            missing = [k for k in result["expectedViolations"]
                       if not result["violationCounts"][k]]
            extra = [k for k, v in result["violationCounts"].items()
                     if v and k not in result["expectedViolations"]]
            print(json.dumps(result, indent=2))
            print(f"selftest: missed {missing}, unexpected {extra}", file=sys.stderr)
            return 1 if missing or extra else 0
        elif args.command == "table":
            return table(args.results, args.seconds)
        else:
            print(soak(args.minutes, args.seed, out=args.out, own_emulator=args.own_emulator,
                       race_trials=args.races, max_runs=args.max_runs,
                       emulator_pid=args.emulator_pid, max_rss_mb=args.max_rss_mb))
            return 0
    except SuiteError as err:
        print(f"suite: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2))
    return 1 if sum(result["violationCounts"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
