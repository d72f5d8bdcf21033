"""Checks of the consolidation quality benchmark's corpus and scoring (tests/quality/bench.py).

Run: .venv/bin/python -m pytest tests/quality -q      (about a second; no engine build: the
planner is replaced by hand-made plans and tiny stand-in commands written to a temp dir)
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("quality_bench", HERE / "bench.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

DAY = 24 * 60 * 60 * 1000


@pytest.fixture(scope="module")
def raw() -> dict:
    with open(bench.DEFAULT_CORPUS, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def corpus() -> dict:
    return bench.load_corpus(bench.DEFAULT_CORPUS)


# ------------------------------------------------------------------------------ the corpus itself


def test_corpus_is_valid_and_sized(corpus):
    groups = corpus["groups"]
    assert len(corpus["entries"]) >= 420
    per_category = Counter(g["category"] for g in groups if g["kind"] == "duplicate")
    assert set(per_category) == set(bench.DUPLICATE_CATEGORIES)
    assert min(per_category.values()) >= 15, per_category
    kinds = Counter(g["kind"] for g in groups)
    assert kinds["distinct"] >= 40 and kinds["supersession"] >= 30
    assert kinds["conflict"] >= 6 and kinds["slot"] >= 6 and kinds["singleton"] >= 10
    # The distinct look-alikes cover the differences a merge must never erase.
    distinct = {g["category"] for g in groups if g["kind"] == "distinct"}
    assert {"customer-number", "date", "amount", "name", "negation", "unit", "quantity"} <= distinct
    assert {g["category"] for g in groups if g["kind"] == "conflict"} == set(bench.CONFLICT_CATEGORIES)


def test_every_entry_is_in_exactly_one_group(corpus):
    members = [m for g in corpus["groups"] for m in g["entries"]]
    assert sorted(members) == sorted(e["id"] for e in corpus["entries"])


def test_updates_are_plain_language_and_name_their_newest(corpus):
    by_id = {e["id"]: e for e in corpus["entries"]}
    for g in corpus["groups"]:
        if g["kind"] == "supersession":
            assert not any(t.startswith("fact:") for m in g["entries"] for t in by_id[m]["tags"]), g["id"]
        if g["kind"] in ("supersession", "slot"):
            assert g["newest"] == max(g["entries"], key=lambda m: by_id[m]["createdAtMs"]), g["id"]
            assert g["newest"] == g["entries"][-1]  # ids are in creation order


def test_tokens_follow_the_engine_normalisation():
    # A sample of shared/consolidation normalise.rs `normalisation_table` (the tokeniser,
    # `tokenised`: steps 1-6; the engine's one-notation-per-value step 7 is not mirrored here,
    # so the validator's cross-group "same words" check does not see texts that differ only in
    # notation; the engine's run of the benchmark does).
    cases = {
        "User doesn\u2019t like tea": "user does not like tea",
        "User can't come; he cannot": "user can not come he can not",
        "I won't": "i will not",
        "as is his wont": "as is his wont",
        "User's car": "users car",
        "1,234 and 1234": "1,234 and 1234",
        "at 10:30 on 2024-05-01": "at 10:30 on 2024-05-01",
        "it is -5 degrees": "it is -5 degrees",
        "us-east-1": "us east 1",
        "5% off, $5 off": "5 % off $ 5 off",
        "\u00abGuillemets\u00bb \u201cquotes\u201d": "guillemets quotes",
        "\u039f\u0394\u039f\u03a3 \u03bf\u03b4\u03bf\u03c2": "\u03bf\u03b4\u03bf\u03c3 \u03bf\u03b4\u03bf\u03c3",
        "I \u2764\ufe0f tea": "i \u2764 tea",
        "!!!": "",
    }
    for text, want in cases.items():
        assert " ".join(bench.tokens(text)) == want, text
    assert bench.content_words("The user REALLY prefers e-mail.") == ("user", "prefers", "e", "mail")


def _broken(raw: dict, change) -> dict:
    c = copy.deepcopy(raw)
    change(c)
    return c


def _group(c: dict, kind: str, category: str | None = None, n: int = 0) -> dict:
    return [g for g in c["groups"] if g["kind"] == kind and (category is None or g["category"] == category)][n]


def _entry(c: dict, eid: str) -> dict:
    return next(e for e in c["entries"] if e["id"] == eid)


def _copy_words(c: dict) -> None:
    """Gives an entry of one group the words of an entry of another group."""
    a, b = _group(c, "duplicate", "synonym"), _group(c, "singleton")
    _entry(c, b["entries"][0]).update(content=_entry(c, a["entries"][0])["content"].upper(),
                                      subject=_entry(c, a["entries"][0])["subject"])


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda c: c["entries"][1].update(id=c["entries"][0]["id"]), "duplicate id"),
        (lambda c: c["entries"][5].update(createdAtMs=c["entries"][2]["createdAtMs"]), "must both increase"),
        (lambda c: c["entries"][0].update(createdAt="2026-01-01T00:00:00Z"), "fields must be exactly"),
        (lambda c: c["entries"][0].update(tags=["Billing"]), "lowercase"),
        (lambda c: c["entries"][0]["tags"].append("corroborated:2"), "written by consolidation"),
        (lambda c: c.update(about="a corpus"), "licence"),
        (lambda c: c["groups"].remove(_group(c, "singleton")), "is in no group"),
        (lambda c: _group(c, "singleton").update(entries=list(_group(c, "distinct")["entries"][:1])), "already in group"),
        (lambda c: _group(c, "duplicate").update(entries=["m9999", *_group(c, "duplicate")["entries"][1:]]), "is not an entry"),
        (lambda c: _group(c, "duplicate").update(kind="paraphrase"), "is not one of"),
        (lambda c: _group(c, "duplicate").update(category="spelling"), "category 'spelling'"),
        (lambda c: _group(c, "distinct").update(entries=_group(c, "distinct")["entries"][:1]), "holds 2-3 entries"),
        (lambda c: _group(c, "supersession").pop("newest"), "must name its newest"),
        (lambda c: (lambda g: g.update(newest=g["entries"][0]))(_group(c, "supersession")), "not the member created last"),
        (lambda c: _group(c, "duplicate").update(newest=_group(c, "duplicate")["entries"][0]), "only supersession and slot"),
        (lambda c: _entry(c, _group(c, "supersession")["entries"][0])["tags"].append("fact:office-city"), "slot groups only"),
        (lambda c: _entry(c, _group(c, "slot")["entries"][0]).update(tags=["contact"]), "same non-empty set of fact:<key>"),
        (lambda c: _entry(c, _group(c, "duplicate", "typo")["entries"][0]).update(subject="subj-elsewhere"), "share one subject"),
        (lambda c: (lambda g: _entry(c, g["entries"][1]).update(content=_entry(c, g["entries"][0])["content"] + " !"))(
            _group(c, "distinct", "negation")), "same words about the same subject"),
        (lambda c: (lambda g: _entry(c, g["entries"][1]).update(content=_entry(c, g["entries"][0])["content"]))(
            _group(c, "duplicate", "synonym")), "worded differently"),
        (_copy_words, "in different groups"),
        (lambda c: _entry(c, _group(c, "conflict", "different-source")["entries"][0]).update(tags=["customer"]), "source-<name>"),
        (lambda c: (lambda g: _entry(c, g["entries"][1]).update(content="The Lagos shipment left port on Friday."))(
            _group(c, "conflict", "contradiction")), None),  # still valid: a control
    ],
)
def test_validation_fails_loudly(raw, change, says):
    bench.validate(raw)  # the committed corpus is fine...
    broken = _broken(raw, change)
    if says is None:
        bench.validate(broken)
        return
    with pytest.raises(bench.CorpusError, match=says):
        bench.validate(broken)  # ...and each kind of breakage is caught


def test_validation_checks_timing_rules():
    c = tiny()
    bench.validate(c, minimums=False)
    # The contradiction pair is written 30 minutes apart; a day apart it is no conflict the
    # rules cannot decide any more.
    far = copy.deepcopy(c)
    for e in far["entries"]:
        if e["id"] >= "m0009":
            e["createdAtMs"] += DAY
    with pytest.raises(bench.CorpusError, match="within two hours"):
        bench.validate(far, minimums=False)
    # An update must come at least a day after the statement it updates: squeeze m0003..m0013
    # into the minutes after m0002 (the supersession group is m0002 -> m0013).
    soon = copy.deepcopy(c)
    start = soon["entries"][1]["createdAtMs"]
    squeezed = [e for e in soon["entries"] if "m0003" <= e["id"] <= "m0013"]
    for k, e in enumerate(squeezed, 1):
        e["createdAtMs"] = start + k * 60_000
    with pytest.raises(bench.CorpusError, match="at least a day after") as caught:
        bench.validate(soon, minimums=False)
    assert str(caught.value).count("\n") == 1  # that one problem only


def test_minimums_apply_to_the_project_corpus_only(raw):
    small = copy.deepcopy(raw)
    # Drop every reformulation group and its entries: structurally fine, too small for the project.
    drop = {m for g in raw["groups"] if g["category"] == "reformulation" for m in g["entries"]}
    small["groups"] = [g for g in small["groups"] if g["category"] != "reformulation"]
    small["entries"] = [e for e in small["entries"] if e["id"] not in drop]
    bench.validate(small, minimums=False)
    with pytest.raises(bench.CorpusError, match="reformulation needs at least 15 groups"):
        bench.validate(small)


# ------------------------------------------------------------------ scoring on hand-made plans

TINY_TEXTS = [
    # id, group, text
    ("m0001", "g001", "Nils likes jazz while working."),
    ("m0002", "g004", "Our office is in Paris."),
    ("m0003", "g003", "The fire alarm was tested on 12 March."),
    ("m0004", "g002", "The quarterly report is due next Wednesday."),
    ("m0005", "g001", "Nils enjoys jazz while working."),
    ("m0006", "g005", "Billing plan: Starter."),
    ("m0007", "g003", "The fire alarm was tested on 12 April."),
    ("m0008", "g006", "The Lagos shipment left port on Tuesday."),
    ("m0009", "g006", "The Lagos shipment left port on Wednesday."),
    ("m0010", "g002", "The quarterly report is due next Wendesday."),
    ("m0011", "g001", "Nils is fond of jazz while working."),
    ("m0012", "g007", "The lobby plant needs indirect light."),
    ("m0013", "g004", "The office moved to Berlin."),
    ("m0014", "g005", "Billing plan: Growth."),
]
BASE = 1767225600000


def tiny() -> dict:
    """Seven groups, one of each kind; a day between entries, except the conflict pair (30 min)."""
    entries, t = [], BASE
    for eid, gid, text in TINY_TEXTS:
        t += 30 * 60 * 1000 if eid == "m0009" else DAY
        tags = ["fact:billing-plan"] if gid == "g005" else []
        entries.append({"id": eid, "content": text, "tags": tags, "createdAtMs": t, "subject": None})
    members = lambda gid: [eid for eid, g, _ in TINY_TEXTS if g == gid]
    groups = [
        {"id": "g001", "kind": "duplicate", "category": "synonym", "entries": members("g001")},
        {"id": "g002", "kind": "duplicate", "category": "typo", "entries": members("g002")},
        {"id": "g003", "kind": "distinct", "category": "date", "entries": members("g003")},
        {"id": "g004", "kind": "supersession", "category": "moved", "entries": members("g004"), "newest": "m0013"},
        {"id": "g005", "kind": "slot", "category": "fact-tag", "entries": members("g005"), "newest": "m0014"},
        {"id": "g006", "kind": "conflict", "category": "contradiction", "entries": members("g006")},
        {"id": "g007", "kind": "singleton", "category": None, "entries": members("g007")},
    ]
    return {"about": "A tiny test corpus (Apache-2.0).", "entries": entries, "groups": groups}


TEXT = {eid: text for eid, _, text in TINY_TEXTS}


def merge(kind: str, replaced: list[str], mid: str, content: str, provenance: list[str]) -> dict:
    return {"kind": kind, "replaced": replaced, "merged": {"id": mid, "content": content, "tags": [], "provenance": sorted(provenance)}}


def plan(*merges: dict) -> dict:
    n = len(TINY_TEXTS)
    return {"inputCount": n, "outputCount": n + len(merges) - sum(len(m["replaced"]) for m in merges), "merges": list(merges)}


PERFECT = [
    # a group of three folded as a tree: the second merge replaces the first one's result
    merge("duplicate", ["m0001", "m0005"], "X1", TEXT["m0005"], ["m0001", "m0005"]),
    merge("duplicate", ["X1", "m0011"], "X2", TEXT["m0005"], ["X1", "m0001", "m0005", "m0011"]),
    merge("duplicate", ["m0004", "m0010"], "X3", TEXT["m0004"], ["m0004", "m0010"]),
    merge("supersede", ["m0002", "m0013"], "X4", TEXT["m0013"], ["m0002", "m0013"]),
    merge("supersede", ["m0006", "m0014"], "X5", TEXT["m0014"], ["m0006", "m0014"]),
]


def figures_of(*merges: dict) -> dict:
    c = tiny()
    bench.validate(c, minimums=False)
    return bench.score(c, bench.replay(c["entries"], plan(*merges)))


def test_a_perfect_plan_scores_100_100_100():
    f = figures_of(*PERFECT)
    assert f["distinct_kept"]["rate"] == 1.0 and f["distinct_kept"]["wrong_pairs"] == 0
    assert f["duplicates_folded"]["overall"]["rate"] == 1.0
    assert f["duplicates_folded"]["overall"]["pair_rate"] == 1.0
    assert {c: b["rate"] for c, b in f["duplicates_folded"]["by_category"].items()} == {"synonym": 1.0, "typo": 1.0}
    assert f["supersessions"]["plain"]["rate"] == 1.0 and f["supersessions"]["slot"]["rate"] == 1.0
    assert f["supersessions"]["all"]["rate"] == 1.0
    assert all(bench.acceptance(f, identical=True).values())
    assert set(f["outcomes"].values()) == {"folded", "kept apart", "right"}


def test_doing_nothing_keeps_facts_and_folds_nothing():
    f = figures_of()
    assert f["distinct_kept"]["rate"] == 1.0
    assert f["duplicates_folded"]["overall"]["rate"] == 0.0
    assert f["duplicates_folded"]["overall"]["pair_rate"] == 0.0
    assert f["supersessions"]["plain"]["outcomes"] == {"not merged": 1}
    assert f["supersessions"]["all"]["rate"] == 0.0
    acc = bench.acceptance(f, identical=True)
    assert acc["distinct facts kept 100%"] is True and acc["duplicates folded >= 90% overall"] is False


def test_merging_a_distinct_pair_loses_facts():
    f = figures_of(*PERFECT, merge("duplicate", ["m0003", "m0007"], "X6", TEXT["m0003"], ["m0003", "m0007"]))
    dk = f["distinct_kept"]
    assert dk["lost"] == 2 and dk["rate"] == pytest.approx(12 / 14)
    assert dk["wrong_pairs"] == 1 and dk["wrong_pairs_by_why"] == {"within a distinct group": 1}
    assert dk["groups"]["distinct"]["rate"] == 0.0 and f["outcomes"]["g003"] == "merged"
    assert bench.acceptance(f, identical=True)["distinct facts kept 100%"] is False


def test_deciding_a_conflict_loses_facts():
    f = figures_of(*PERFECT, merge("supersede", ["m0008", "m0009"], "X6", TEXT["m0009"], ["m0008", "m0009"]))
    assert f["distinct_kept"]["wrong_pairs_by_why"] == {"within a conflict group": 1}
    assert f["distinct_kept"]["groups"]["conflict"]["rate"] == 0.0


def test_a_merge_across_groups_loses_every_entry_it_touches():
    # The typo group still folds, but the singleton was swallowed with it.
    bad = [m for m in PERFECT if m["merged"]["id"] != "X3"]
    f = figures_of(*bad, merge("duplicate", ["m0004", "m0010", "m0012"], "X3", TEXT["m0004"], ["m0004", "m0010", "m0012"]))
    assert f["duplicates_folded"]["by_category"]["typo"]["rate"] == 1.0
    assert f["distinct_kept"]["lost"] == 3 and f["distinct_kept"]["wrong_pairs"] == 2
    assert f["distinct_kept"]["wrong_pairs_by_why"] == {"across groups": 2}
    assert f["outcomes"]["g007"] == "merged"


def test_a_partly_folded_group_is_not_folded():
    f = figures_of(merge("duplicate", ["m0001", "m0005"], "X1", TEXT["m0005"], ["m0001", "m0005"]))
    syn = f["duplicates_folded"]["by_category"]["synonym"]
    assert syn["rate"] == 0.0 and syn["pair_rate"] == pytest.approx(1 / 3)
    assert f["duplicates_folded"]["overall"]["pair_rate"] == pytest.approx(1 / 4)  # 1 of 3 + 0 of 1 pairs
    assert f["outcomes"]["g001"] == "partly folded"


def _with_supersession(m: dict) -> list[dict]:
    return [x for x in PERFECT if x["merged"]["id"] != "X4"] + [m]


def test_keeping_the_older_statement_is_wrong():
    f = figures_of(*_with_supersession(merge("supersede", ["m0002", "m0013"], "X4", TEXT["m0002"], ["m0002", "m0013"])))
    assert f["supersessions"]["plain"]["rate"] == 0.0
    assert f["outcomes"]["g004"] == "merged, kept an older text"
    assert f["distinct_kept"]["rate"] == 1.0  # a wrong winner is not a lost distinct fact


def test_the_newest_text_must_come_from_a_supersede():
    f = figures_of(*_with_supersession(merge("duplicate", ["m0002", "m0013"], "X4", TEXT["m0013"], ["m0002", "m0013"])))
    assert f["outcomes"]["g004"] == "merged as duplicate" and f["supersessions"]["plain"]["rate"] == 0.0


def test_the_newest_entry_may_survive_in_place():
    f = figures_of(*_with_supersession(merge("supersede", ["m0002", "m0013"], "m0013", TEXT["m0013"], ["m0002", "m0013"])))
    assert f["outcomes"]["g004"] == "right" and f["supersessions"]["plain"]["rate"] == 1.0


def test_acceptance_needs_every_category():
    f = figures_of(*PERFECT)
    f["duplicates_folded"]["by_category"]["typo"]["rate"] = 0.74
    acc = bench.acceptance(f, identical=True)
    assert acc["duplicates folded >= 75% in every category"] is False
    assert bench.acceptance(figures_of(*PERFECT), identical=False)["identical plan and bytes on two runs"] is False


def _plan_error(p: dict) -> None:
    c = tiny()
    bench.replay(c["entries"], p)


@pytest.mark.parametrize(
    "broken, says",
    [
        (plan(merge("duplicate", ["m0001", "m9999"], "X1", "x", ["m0001", "m9999"])), "not a live entry"),
        (plan(PERFECT[0], merge("duplicate", ["m0001", "m0011"], "X2", "x", ["m0001", "m0011"])), "not a live entry"),
        (plan(merge("duplicate", ["m0001", "m0005"], "m0011", "x", ["m0001", "m0005"])), "already a live entry"),
        (plan(merge("duplicate", ["m0001", "m0005"], "X1", "x", ["m0001"])), "provenance lists"),
        (plan(merge("duplicate", ["m0001", "m0005"], "X1", "x", ["m0001", "m0005"]) | {"kind": "fold"}), "kind must be"),
        (plan(merge("duplicate", [], "X1", "x", [])), "non-empty list"),
        (plan(merge("duplicate", ["m0001", "m0001"], "X1", "x", ["m0001"])), "distinct ids"),
        (plan(PERFECT[0]) | {"outputCount": 14}, "outputCount"),
        (plan(PERFECT[0]) | {"inputCount": 13}, "inputCount"),
        ({"merges": "none"}, "merges list"),
    ],
)
def test_a_plan_that_cannot_run_is_rejected(broken, says):
    with pytest.raises(bench.PlanError, match=says):
        _plan_error(broken)


def test_unsorted_provenance_is_rejected():
    m = merge("duplicate", ["m0001", "m0005"], "X1", "x", [])
    m["merged"]["provenance"] = ["m0005", "m0001"]
    with pytest.raises(bench.PlanError, match="sorted"):
        _plan_error(plan(m))


# ------------------------------------------------------------ the command, with stand-in planners


# Includes the first budget/250 sources, as a distiller whose every source costs 250 tokens would.
STAND_IN_DISTILLER = (
    "import json, sys\n"
    "d = json.load(sys.stdin)\n"
    "ids = [s['id'] for s in d['sources']][: d['budget'] // 250]\n"
    "print(json.dumps({'tokensUsed': 250 * len(ids), 'tokenBudget': d['budget'],\n"
    "                  'sourceCount': len(d['sources']), 'sourcesIncluded': len(ids), 'factsKept': len(ids),\n"
    "                  'factsFound': len(d['sources']), 'summary': '', 'includedSourceIds': ids}))\n"
)


def _run_main(tmp_path: Path, monkeypatch, capsys, script: str, *extra: str) -> tuple[int, str, dict | None]:
    corpus_path = tmp_path / "tiny.json"
    corpus_path.write_text(json.dumps(tiny()), encoding="utf-8")
    fake = tmp_path / "planner.py"
    fake.write_text(script, encoding="utf-8")
    monkeypatch.setenv("PLAN_CORPUS_CMD", f"{sys.executable} {fake}")
    distiller = tmp_path / "distiller.py"
    distiller.write_text(STAND_IN_DISTILLER, encoding="utf-8")
    monkeypatch.setenv("DISTILL_CORPUS_CMD", f"{sys.executable} {distiller}")
    out_json = tmp_path / "out.json"
    rc = bench.main(["--corpus", str(corpus_path), "--small-ok", "--json", str(out_json), *extra])
    printed = capsys.readouterr().out
    return rc, printed, json.loads(out_json.read_text()) if out_json.exists() else None


def test_main_with_a_perfect_stand_in(tmp_path, monkeypatch, capsys):
    (tmp_path / "plan.json").write_text(json.dumps(plan(*PERFECT)), encoding="utf-8")
    script = "import sys, pathlib\nsys.stdin.read()\nsys.stdout.write((pathlib.Path(__file__).parent / 'plan.json').read_text())\n"
    rc, printed, out = _run_main(tmp_path, monkeypatch, capsys, script, "--check")
    assert rc == 0, printed
    assert out["runs"] == {"identical_bytes": True, "identical_plans": True, "order_independent": True}
    assert out["distinct_kept"]["rate"] == 1.0 and out["duplicates_folded"]["overall"]["rate"] == 1.0
    assert out["supersessions"]["plain"]["rate"] == 1.0 and all(out["acceptance"].values())
    assert "distinct facts kept" in printed and "100.0%" in printed
    d = out["distillation"]["budgets"]
    assert (d["256"]["sources_included"], d["1000"]["sources_included"]) == (1, 4)
    assert d["256"]["groups_covered"] == 1 and d["4000"]["coverage"] == 1.0
    assert d["1000"]["tokens_used"] == 1000 and d["1000"]["source_count"] == len(tiny()["entries"])
    assert "distillation coverage at budgets 256 / 1,000 / 4,000: " in printed
    assert "  budget 1,000: tokens used 1,000 / 1,000, sources included 4 / " in printed


def test_distillation_counts_groups_once_and_reports_a_failed_budget(tmp_path):
    script = tmp_path / "distiller.py"
    script.write_text(
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "if d['budget'] < 1000:\n"
        "    print(json.dumps({'error': 'token_budget_exceeded', 'message': 'counts'})); sys.exit(2)\n"
        "ids = [s['id'] for s in d['sources']]\n"
        "print(json.dumps({'tokensUsed': 9, 'tokenBudget': d['budget'], 'sourceCount': len(ids),\n"
        "                  'sourcesIncluded': 2, 'factsKept': 1, 'factsFound': 9, 'summary': '',\n"
        "                  'includedSourceIds': ids[:1] + ids[:1]}))\n",
        encoding="utf-8")
    out = bench.distillation(tiny(), f"{sys.executable} {script}")
    assert out["budgets"]["256"] == {"token_budget": 256, "error": "token_budget_exceeded"}
    assert out["budgets"]["4000"]["groups_covered"] == 1
    lines = bench.distillation_lines(out)
    assert lines[0].startswith("distillation coverage at budgets 256 / 1,000 / 4,000: token_budget_exceeded / ")


NULL_PLANNER = (
    "import json, sys\n"
    "n = len(json.load(sys.stdin)['entries'])\n"
    "print(json.dumps({'inputCount': n, 'outputCount': n, 'merges': []}))\n"
)


def test_main_with_a_planner_that_does_nothing(tmp_path, monkeypatch, capsys):
    rc, printed, out = _run_main(tmp_path, monkeypatch, capsys, NULL_PLANNER)
    assert rc == 0  # figures only; --check makes a miss fail
    assert out["duplicates_folded"]["overall"]["rate"] == 0.0 and out["distinct_kept"]["rate"] == 1.0
    assert out["acceptance"]["duplicates folded >= 90% overall"] is False
    rc, _, _ = _run_main(tmp_path, monkeypatch, capsys, NULL_PLANNER, "--check")
    assert rc == 1


def test_main_notices_output_that_differs_between_runs(tmp_path, monkeypatch, capsys):
    # Same plan, different bytes on every run (a counter file decides the key order).
    script = (
        "import json, sys, pathlib\n"
        "n = len(json.load(sys.stdin)['entries'])\n"
        "f = pathlib.Path(__file__).parent / 'count'\n"
        "k = int(f.read_text()) if f.exists() else 0\n"
        "f.write_text(str(k + 1))\n"
        "d = {'inputCount': n, 'outputCount': n, 'merges': []}\n"
        "print(json.dumps(dict(reversed(d.items())) if k % 2 else d))\n"
    )
    rc, printed, out = _run_main(tmp_path, monkeypatch, capsys, script)
    assert out["runs"]["identical_bytes"] is False and out["runs"]["identical_plans"] is True
    assert out["acceptance"]["identical plan and bytes on two runs"] is False
    assert "NO" in printed


def test_main_rejects_a_broken_corpus_and_a_broken_plan(tmp_path, monkeypatch, capsys):
    bad_corpus = tmp_path / "bad.json"
    c = tiny()
    c["groups"].pop()  # the singleton's entry is now in no group
    bad_corpus.write_text(json.dumps(c), encoding="utf-8")
    monkeypatch.setenv("PLAN_CORPUS_CMD", f"{sys.executable} -c pass")
    assert bench.main(["--corpus", str(bad_corpus), "--small-ok"]) == 2
    assert "is in no group" in capsys.readouterr().err
    script = "import sys\nsys.stdin.read()\nprint('{\"inputCount\": 14, \"outputCount\": 13, \"merges\": [{\"kind\": \"duplicate\", \"replaced\": [\"m0001\", \"m0099\"], \"merged\": {\"id\": \"X\", \"content\": \"x\", \"tags\": [], \"provenance\": [\"m0001\"]}}]}')\n"
    rc, _, out = _run_main(tmp_path, monkeypatch, capsys, script)
    assert rc == 3 and out is None
