"""The fault-injection suite in `tests/run`: fixed seeds, small workloads, zero violations
(`exactly_once.py` holds the workloads and the checker; `tests/soak` runs it for minutes)."""

from __future__ import annotations

import exactly_once


def run(seed: int, races: int) -> None:
    ops, faults, violations, findings = exactly_once.run_seed(seed, races)
    print(exactly_once.table(ops, faults, violations, exactly_once.INVARIANTS))
    assert sum(ops.values()) > 0, "the workloads ran"
    assert sum(faults.values()) > 0, "positive control: faults were injected"
    assert not findings, "\n".join(findings)


def test_fixed_seeds_hold_every_invariant():
    for seed in (1, 2):
        run(seed, races=3)


def test_fifty_forget_vs_dream_races_leave_no_trace():
    """Issue 14 acceptance: 50 forget-vs-dream races with random offsets, 0 traces (with the
    seed's faults injected throughout)."""
    run(7, races=50)
