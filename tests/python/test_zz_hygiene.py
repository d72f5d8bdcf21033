"""End-of-session hygiene (this module runs last: pytest collects files in name order). It stops
the gateway, which writes every function's captured stdout/stderr, and checks that no request of
the whole suite got a 5xx answer and that no function log line carries any entry content,
subject or secret value the suite used (the registry in wopkit.SENSITIVE)."""

from __future__ import annotations

from wopkit import SENSITIVE, leaks


def test_zz_no_5xx_and_no_sensitive_data_in_function_logs(gateway):
    logs = gateway.stop()
    access = gateway.access_log()
    # Positive controls: requests were logged, every function's output was captured, and the
    # leak scan below would see a write's log line.
    assert access, "the gateway logged no requests"
    for function in ("memory-read", "memory-write", "memory-forget", "memory-dream",
                     "memory-consolidate", "memory-commitments", "memory-mcp"):
        assert f"===== {function} =====" in logs, f"no log section for {function}"
    if any(path.endswith("memory-write/invocations") for _, path, _ in access):
        assert "entries written" in logs, "memory-write's log lines were not captured"
    # The suite's gateway runs the functions at DEBUG (conftest), so the scan below reads the
    # most verbose logs an operator can turn on.
    assert "logging at debug" in logs, "the functions did not log at DEBUG"
    # The search index served searches (test_f_search builds one): memory-read's EMF metric.
    assert "SearchIndexServed" in logs, "no search was answered by a ref's index"

    server_errors = [a for a in access if a[2] >= 500]
    assert not server_errors, f"5xx answers during the suite: {server_errors}"
    found = leaks(logs)
    assert not found, (
        f"{len(found)} registered content/subject/secret strings appear in the function logs, "
        f"e.g. {found[0][:60]!r}")
