"""The fault-injection suite (suite.py) in `tests/run`: fixed seeds, small workloads, zero
violations; 50 forget-vs-dream races; a keyed put retried after lost transaction answers; and
the checker's own test (deliberate damage must be reported). `tests/soak --minutes N` runs the
same workloads for minutes on an emulator of its own.

Needs the emulator settings (`eval "$(infra/local/up)"`) and the built binaries
(`cargo build --bins`); without either every test fails, none is skipped. Output names marker
words, ids and keys only, never entry content, subjects, secrets or idempotency keys.
"""

from __future__ import annotations

import json
import time

import pytest

import suite

SEEDS = (11, 12, 13)
RACE_SEED = 7
RACE_TRIALS = 50
EXTREME_SEED = 95


@pytest.fixture(scope="module", autouse=True)
def environment() -> None:
    try:
        suite.require_environment()
    except suite.SuiteError as err:
        pytest.fail(str(err), pytrace=False)


def violations_text(results: list[dict]) -> str:
    lines = []
    for r in results:
        for v in r["violations"]:
            lines.append(f"seed {r['seed']}: {v['invariant']}: {v['what']} @ "
                         f"{v['where'].splitlines()[-1]}")
        more = sum(r["violationCounts"].values()) - len(r["violations"])
        if more > 0:
            lines.append(f"seed {r['seed']}: {more} more (see {r['outDir']})")
    return "\n".join(lines)


def assert_clean(results: list[dict]) -> None:
    bad = {k: sum(r["violationCounts"][k] for r in results) for k in suite.INVARIANTS}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"invariant violations {bad}:\n{violations_text(results)}"


def test_fault_suite() -> None:
    """Every workload under seeded faults, three fixed seeds (one run: a phase of workloads
    a-e per seed, f across the phases): no invariant violated."""
    started = time.monotonic()
    results = [suite.run_suite(list(SEEDS), profile="small")]
    print(suite.markdown(results, time.monotonic() - started))
    for r in results:
        print(f"seeds {r['seeds']}: {r['seconds']} s, workloads {r['workloadSeconds']}, "
              f"findings {[f['finding'] + ' @ ' + f['where'] for f in r['findings']]}")
    # Positive controls: the workloads ran, every fault kind was injected, and checks ran.
    totals = suite.summarize(results)
    assert totals["operations"]["put_keyed"] > 0 and totals["operations"]["dream"] > 0
    injected = {k: sum(r["faults"][k] for r in results) for k in suite.KINDS}
    assert all(injected.values()), f"every fault kind injected: {injected}"
    for service in suite.SERVICES:
        assert sum(totals["faults"][service].values()) > 0, f"no fault injected into {service}"
    for invariant in ("acked_present_once", "forget_complete", "consolidation_coverage",
                      "archive_has_entry", "compacted_once", "fire_at_most_once",
                      "key_mismatch_rejected", "keyed_replay_identical"):
        assert sum(r["checks"].get(invariant, 0) for r in results) > 0, \
            f"{invariant} was never checked"
    assert_clean(results)


def test_forget_vs_dream_races() -> None:
    """50 trials: a subject's entries written, then memory-dream and memory-forget started
    0-300 ms apart either way (seeded), under faults; afterwards no table item and no object
    version anywhere carries a marker word of the subject's content."""
    result = suite.run_races(RACE_SEED, trials=RACE_TRIALS)
    print(json.dumps({k: result[k] for k in ("seconds", "operations", "faults", "checks",
                                             "notes")}, indent=1))
    assert result["operations"].get("forget") == RACE_TRIALS
    assert result["checks"].get("forget_complete", 0) >= RACE_TRIALS
    traces = result["violationCounts"]["forget_complete"]
    assert traces == 0, f"{traces} traces of forgotten subjects:\n{violations_text([result])}"
    assert_clean([result])


def test_keyed_retry_lost_response() -> None:
    """A keyed put whose TransactWriteItems answer the proxy drops (A: the first attempt only,
    by a seed that draws a drop first and none after; B: every attempt of the first call),
    retried by the client with the same key: one copy stored, the same ids answered."""
    result = suite.run_lost_response()
    print(json.dumps(result["lostResponse"]), result["findings"])
    assert result["lostResponse"]["A"]["dropped"] == 1
    assert result["lostResponse"]["B"]["dropped"] >= 1
    assert result["checks"].get("acked_present_once", 0) == 2, "both puts acknowledged"
    # B's first call lost every answer after its transaction applied, so it never marked its
    # ref; the replay must have, or the dream would not see the entry until the next write.
    unmarked = [f for f in result["findings"] if f["finding"] == "ref_not_marked"]
    assert not unmarked, unmarked
    assert_clean([result])


def test_extreme_fault_rate() -> None:
    """95 % of the writes fail (500, throttle, conflict, drop) with the functions under a short
    timeout: keyed puts stored once, no key locked beyond the stated bound, every retryable
    direct-invoke error with its delay, `outcome_unknown` never answered while only refusals
    were injected and no keyless put answered "not stored" stored; dreams failing after their
    archive leave no orphan after a clean pass."""
    result = suite.run_extreme(EXTREME_SEED)
    print(json.dumps({k: result[k] for k in ("seconds", "operations", "answers", "faults",
                                             "maxKeyLockSeconds", "extreme", "notes")}))
    assert sum(result["faults"].values()) > 0, "faults injected"
    assert result["answers"].get("ok", 0) > 0
    for invariant in ("retry_hint_present", "not_stored_truthful", "acked_present_once",
                      "archive_has_entry", "unknown_only_when_unknowable", "key_lock_bounded"):
        assert result["checks"].get(invariant, 0) > 0, f"{invariant} was never checked"
    assert result["extreme"]["cleanPass"] is not None, "the clean dream pass answered"
    assert result["extreme"]["orphansAfterCleanPass"] == 0
    bound = suite.KEY_LOCK_BOUND_SECONDS + suite.KEY_LOCK_POLL_SLACK_SECONDS
    assert result["maxKeyLockSeconds"] <= bound
    # Positive control: the probe's key was held (its give-back failed) for most of the capped
    # lease, and released by the cap, not by its 60 s deadline.
    lock = result["extreme"]["lock"]
    assert lock["inFlightAnswers"] > 0 and 20.0 <= lock["lockedSeconds"] <= bound, lock
    assert_clean([result])


def test_checker_catches_corruption() -> None:
    """The checker's own test: after clean workloads, duplicate, lost and leftover items,
    orphaned archives and index lines, duplicate events, a leaked marker and a panic line are
    planted; each must be reported under its invariant, and nothing else."""
    result = suite.run_selftest()
    assert not result["violationsBeforeCorruption"], result["violationsBeforeCorruption"]
    expected = set(result["expectedViolations"])
    assert len(expected) >= 12, f"the self-test planted too little: {sorted(expected)}"
    missed = sorted(k for k in expected if not result["violationCounts"][k])
    extra = sorted(k for k, v in result["violationCounts"].items() if v and k not in expected)
    assert not missed and not extra, (f"checker missed {missed}, reported unplanted {extra}:\n"
                                      f"{violations_text([result])}")


def test_segment_reader_reads_what_the_index_writes() -> None:
    """The no-trace check reads search segments (tests/fault/segments.py): its own round trip."""
    suite.segments.self_test()
