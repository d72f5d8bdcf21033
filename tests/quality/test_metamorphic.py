"""Metamorphic safety suite (tests/quality/metamorphic.py): thousands of must-stay-apart pairs,
each a member of a labelled duplicate group (or its paraphrase) against a copy with one fact
changed (a name, number, unit, value word, negation, antonym, hyponym, possessor, identifier)
or against a newer update about another attribute of the same subject. The engine must
neither fold nor supersede any of them, with or without the embedding stage.

Runs the debug build of the `plan_corpus` example (built by `cargo test`, which tests/run runs
first; a missing binary fails loudly), once per mode, every pair in one planner input under its
own subject. The positive control (the original duplicate pairs, planned the same way) must
fold some pairs, so a harness that never merges anything cannot pass.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ENGINE = ROOT / "target" / "debug" / "examples" / "plan_corpus"

_spec = importlib.util.spec_from_file_location("quality_metamorphic", HERE / "metamorphic.py")
mm = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mm  # its dataclasses look their module up while it loads
_spec.loader.exec_module(mm)

SHOWN = 20  # failing pairs printed on failure (round robin over the operators)


@pytest.fixture(scope="module")
def pairs():
    corpora = mm.load_corpora(log=print)
    return mm.build_pairs(corpora)


def _failure_report(summary: dict) -> str:
    lines = [f"{summary['failures']} of {summary['pairs']} must-stay-apart pairs were merged "
             f"(duplicate merges in {summary['merges']}, supersessions in {summary['supersessions']}); "
             f"by operator: {summary['failures_by_operator']}"]
    # The first failing pairs of each operator in turn, so that every failing class shows.
    by_op: dict[str, list] = {}
    for f in summary["failed"]:
        by_op.setdefault(f["op"], []).append(f)
    shown = [f for k in range(SHOWN) for fs in by_op.values() if k < len(fs) for f in [fs[k]]][:SHOWN]
    for f in shown:
        lines.append(f"  {f['op']:<10} {f['corpus']}/{f['group']} {f['detail']} [{f['partner']}; {', '.join(f['how'])}]")
        lines.append(f"      {f['texts'][0]!r}")
        lines.append(f"      {f['texts'][1]!r}")
    return "\n".join(lines)


@pytest.mark.parametrize("embed", [False, True], ids=["deterministic", "embedded"])
def test_no_mutated_pair_is_merged_or_superseded(pairs, embed):
    assert ENGINE.exists(), f"{ENGINE} is missing: run `cargo test -p consolidation` first"
    mutated, control = pairs
    assert len(mutated) >= mm.MIN_PAIRS, f"only {len(mutated)} mutated pairs generated (< {mm.MIN_PAIRS})"
    assert all(any(p.op == op for p in mutated) for op in mm.OPERATORS), \
        "an operator produced no pair: " + str({op: sum(p.op == op for p in mutated) for op in mm.OPERATORS})
    outcomes = mm.run(mutated + control, embed, command=str(ENGINE))
    summary = mm.summarise(mutated, control, outcomes)
    control_report = summary["control"]
    # The positive control: the harness can see a merge at all.
    assert control_report["folded"] > 0, f"no original duplicate pair folded: {control_report}"
    assert summary["failures"] == 0, _failure_report(summary)
