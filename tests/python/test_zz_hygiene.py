"""End-of-suite hygiene. In a run of one process this module runs last (pytest collects files in
name order); `tests/run` runs it on its own after the workers of the suite have finished. It
reads what every process recorded (conftest.record_session: the gateways it started, their
function logs and access logs, the sensitive strings it registered) and checks that no request
to a session gateway got a 5xx answer and that no function log line of any gateway carries any
entry content, subject or secret value any process of the suite used (wopkit.SENSITIVE)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import record_session, sessions_dir
from wopkit import access_log, file_text

FUNCTIONS = ("memory-read", "memory-write", "memory-forget", "memory-dream",
             "memory-consolidate", "memory-commitments", "memory-mcp")


def test_zz_no_5xx_and_no_sensitive_data_in_function_logs():
    # This process's own gateways, in a run of one process (the workers recorded theirs).
    record_session()
    records = [json.loads(p.read_text()) for p in sorted(sessions_dir().glob("*.json"))]
    assert records, (f"no process of the suite recorded its gateways in {sessions_dir()}: "
                     "run the suite first")
    sensitive = set().union(*(r["sensitive"] for r in records))
    gateways = [g for r in records for g in r["gateways"]]
    sessions = [g for g in gateways if g["session"]]
    assert sessions, "no session gateway was recorded"
    # Positive controls, for every session gateway: requests were logged, every function's
    # output was captured, and the leak scan below would see a write's log line.
    served_by_index = False
    for g in sessions:
        logs, access = file_text(Path(g["logs"])), access_log(Path(g["access"]))
        assert access, f"{g['label']} logged no requests"
        for function in FUNCTIONS:
            assert f"===== {function} =====" in logs, f"{g['label']}: no log section for {function}"
        if any(path.endswith("memory-write/invocations") for _, path, _ in access):
            assert "entries written" in logs, f"{g['label']}: memory-write's lines were not captured"
        # The session gateways run the functions at DEBUG (conftest), so the scan below reads
        # the most verbose logs an operator can turn on.
        assert "logging at debug" in logs, f"{g['label']}: the functions did not log at DEBUG"
        served_by_index = served_by_index or "SearchIndexServed" in logs
        server_errors = [a for a in access if a[2] >= 500]
        assert not server_errors, f"5xx answers during the suite ({g['label']}): {server_errors}"
    # The search index served searches (test_f_search builds one): memory-read's EMF metric.
    assert served_by_index, "no search was answered by a ref's index"
    assert sensitive, "no sensitive string was registered"
    for g in gateways:
        logs = file_text(Path(g["logs"]))
        found = sorted(s for s in sensitive if s and s in logs)
        assert not found, (
            f"{len(found)} registered content/subject/secret strings appear in the function "
            f"logs of {g['label']}, e.g. {found[0][:60]!r}")
