#!/usr/bin/env python3
"""Consolidation quality benchmark: what a consolidation pass does to the project's labelled corpus.

    .venv/bin/python tests/quality/bench.py [--corpus tests/quality/corpus.json] [--json out.json]
                                            [--misses] [--check]

The corpus (tests/quality/corpus.json, see its "about") is one memoryRef's long-term memory,
every entry labelled with the group it belongs to: `duplicate` groups (the same fact in other
words, by category), `distinct` groups (look-alikes stating different facts), `supersession`
groups (a plain-language update of an older statement; `newest` must survive), `conflict` groups
(contradictions no rule can decide), `slot` groups (the `fact:<key>` tag convention) and
`singleton`s.

The planner is run through PLAN_CORPUS_CMD (a shell-split command; default
`cargo run --quiet --release --locked -p consolidation --example plan_corpus`, run from the
repository root). Protocol: one JSON document on its stdin,
    {"entries": [{"id", "content", "tags", "createdAtMs", "subject"}]}
and one on its stdout,
    {"inputCount", "outputCount", "merges": [{"kind": "duplicate" | "supersede",
      "replaced": [ids], "merged": {"id", "content", "tags", "provenance"}}]}
with merges in execution order. It is run twice on the same input (the two stdouts must be
byte-identical) and once with the entries in reverse order (the plan must be the same).

The plan is replayed: each merge removes its `replaced` entries (input ids or the merged ids of
earlier merges) and adds its merged entry, which stands for the union of the input ids behind
what it replaced (its `provenance`, minus any intermediate merged ids, must list exactly those).
The result puts each input id in exactly one surviving entry, which is what is scored:

  distinct facts kept   the share of entries not merged with any entry stating a different fact:
                        an entry that ends in the same surviving entry as an entry of another
                        group, or as another member of its own `distinct` / `conflict` group, is
                        a lost fact. Also: the number of wrongly merged pairs.
  duplicates folded     per category and overall, the share of `duplicate` groups whose members
                        all end in one surviving entry (and the share of member pairs that do).
  supersessions right   the share of `supersession` (plain language) and `slot` groups whose
                        members all end in one surviving entry that carries the `newest` entry's
                        text and was written by a `supersede` merge (or is the newest entry
                        itself, kept in place).
  identical runs        whether the two runs printed the same bytes.
  distillation          at budgets 256 / 1,000 / 4,000 (DISTILL_BUDGETS): the corpus's entries
                        as one dream's sources, distilled by DISTILL_CORPUS_CMD (a shell-split
                        command; default `cargo run --quiet --release --locked -p distill
                        --example distill_corpus`; stdin {"budget", "sources": [{"id", "content",
                        "tags", "createdAtMs"}]}, stdout {"tokensUsed", "tokenBudget",
                        "sourceCount", "sourcesIncluded", "factsKept", "factsFound", "summary",
                        "includedSourceIds"}, or {"error", "message"} with exit status 2). Per
                        budget: tokens used / budget, sources included / all, and coverage = the
                        share of labelled groups with at least one member among the included
                        sources (figures only, no target).

Targets (what a consolidation planner must reach on this corpus): distinct facts kept 100%,
duplicates folded >= 90% overall and >= 75% in every category, plain-language supersession
>= 80%, identical runs. --check exits 1 when one is missed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import unicodedata
from itertools import combinations
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import labelled_corpus  # noqa: E402  (tests/labelled_corpus.py, shared by both corpora)


ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CORPUS = ROOT / "tests" / "quality" / "corpus.json"
DEFAULT_CMD = "cargo run --quiet --release --locked -p consolidation --example plan_corpus"

KINDS = ("duplicate", "distinct", "supersession", "conflict", "slot", "singleton")
DUPLICATE_CATEGORIES = (
    "case-punct", "synonym", "typo", "word-order", "number-format", "abbreviation", "reformulation",
)
DISTINCT_CATEGORIES = (
    "customer-number", "date", "amount", "name", "negation", "unit", "quantity", "time", "place",
    "subject", "version", "qualifier", "role-swap",
    # Written for the second held-out set: kin terms, other numbers, antonyms, other values,
    # polarity, a more general or specific word, and an update of another attribute of the
    # same subject (which must not supersede).
    "kin", "number", "antonym", "value", "polarity", "hypernym", "other-attribute",
)
SUPERSESSION_CATEGORIES = ("moved", "now", "no-longer", "changed-to", "switched", "from-now-on", "correction")
CONFLICT_CATEGORIES = ("contradiction", "different-source")
CATEGORIES = {
    "duplicate": DUPLICATE_CATEGORIES,
    "distinct": DISTINCT_CATEGORIES,
    "supersession": SUPERSESSION_CATEGORIES,
    "conflict": CONFLICT_CATEGORIES,
    "slot": ("fact-tag",),
    "singleton": (None,),
}
SIZES = {"duplicate": (2, 4), "distinct": (2, 3), "supersession": (2, 3), "conflict": (2, 2), "slot": (2, 3), "singleton": (1, 1)}
# Minimum sizes of the project's corpus (skipped with --small-ok, e.g. for test corpora).
MINIMUMS = {"entries": 420, "per_duplicate_category": 15, "distinct": 40, "supersession": 30, "conflict": 6, "slot": 6, "singleton": 10}

ENTRY_ID = re.compile(r"^m\d{4}$")
GROUP_ID = re.compile(r"^g\d{3}$")
TAG = re.compile(r"^[a-z0-9][a-z0-9:._-]*$")
ENTRY_KEYS = {"id", "content", "tags", "createdAtMs", "subject"}
FACT_PREFIX = "fact:"
CONFLICT_WINDOW_MS = 2 * 60 * 60 * 1000  # a `contradiction` pair is written within two hours
UPDATE_GAP_MS = 24 * 60 * 60 * 1000  # an update comes at least a day after what it updates

TARGETS = {"distinct_kept": 1.0, "duplicates_overall": 0.90, "duplicates_per_category": 0.75, "supersession_plain": 0.80}
DISTILL_CMD = "cargo run --quiet --release --locked -p distill --example distill_corpus"
DISTILL_BUDGETS = (256, 1000, 4000)


class CorpusError(ValueError):
    """The corpus breaks one of its rules; the message lists every problem found."""


class PlanError(ValueError):
    """The planner's output is malformed or cannot be replayed against the corpus."""


# --------------------------------------------------------------------------------- text rules

# The words shared/consolidation treats as meaning-neutral (normalise.rs FILLER_WORDS).
FILLER_WORDS = frozenset(
    "a actually also an basically certainly definitely er hmm honestly indeed kindly literally "
    "please quite really the truly uh um very".split()
)
_BARE_NEGATIONS = {
    "cannot": "can", "cant": "can", "dont": "do", "doesnt": "does", "didnt": "did", "isnt": "is",
    "arent": "are", "wasnt": "was", "werent": "were", "hasnt": "has", "havent": "have", "hadnt": "had",
    "couldnt": "could", "shouldnt": "should", "wouldnt": "would", "mustnt": "must", "neednt": "need",
}
_FOLD = {**{c: "'" for c in "\u2019\u2018\u02bc\u2032\uff07"}, **{c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2212"}, "\u03c2": "\u03c3"}
_SEPARATORS = set(".,;:!?\"'`()[]{}-_*/\\|\u2026\u201c\u201d\u201e\u201f\u00ab\u00bb\u2039\u203a\u00a1\u00bf\u00b7\u2022"
                  "\u3002\u3001\uff0c\uff01\uff1f\uff1a\uff1b\uff08\uff09\u300c\u300d\u300e\u300f\u3010\u3011\u300a\u300b\u3008\u3009")


def tokens(text: str) -> list[str]:
    """The engine's normalised tokens (a port of shared/consolidation normalise.rs, close enough
    to tell whether two corpus entries are the same words): lowercase, separator punctuation
    dropped, `n't` split off as `not`, numbers keep their inner `. , : / -`, other symbols are
    one-character tokens."""
    chars = [_FOLD.get(c, c) for c in text.lower()]
    out: list[str] = []
    word: list[str] = []

    def flush() -> None:
        w = "".join(word)
        word.clear()
        if w:
            out.extend([_BARE_NEGATIONS[w], "not"] if w in _BARE_NEGATIONS else [w])

    i = 0
    while i < len(chars):
        c = chars[i]
        prev = chars[i - 1] if i else None
        nxt = chars[i + 1] if i + 1 < len(chars) else None
        after = chars[i + 2] if i + 2 < len(chars) else None
        last = word[-1] if word else None
        if c.isalnum():
            word.append(c)
        elif unicodedata.combining(c) or c in "\u200c\u200d\ufe0f\ufe0e":
            if word:
                word.append(c)
        elif c in ".,:/-" and last is not None and last.isnumeric() and nxt is not None and nxt.isnumeric():
            word.append(c)
        elif c == "-" and not word and nxt is not None and nxt.isnumeric() and (prev is None or not prev.isalnum()):
            word.append(c)
        elif c == "'" and last is not None and last.isalpha() and nxt is not None and nxt.isalpha():
            if last == "n" and nxt == "t" and (after is None or not after.isalnum()):
                word.pop()
                stem = {"ca": "can", "wo": "will", "sha": "shall"}.get("".join(word), "".join(word))
                word[:] = list(stem)
                flush()
                word.extend("not")
                flush()
                i += 1  # the `t`
        else:
            flush()
            if not (c.isspace() or unicodedata.category(c).startswith("C") or c in _SEPARATORS):
                out.append(c)
        i += 1
    flush()
    return out


def content_words(text: str) -> tuple[str, ...]:
    """The engine's distinct-fact guard key: the normalised tokens minus the filler words."""
    return tuple(t for t in tokens(text) if t not in FILLER_WORDS)


def fact_keys(tags: list[str]) -> tuple[str, ...]:
    return tuple(sorted({t[len(FACT_PREFIX):] for t in tags if t.startswith(FACT_PREFIX) and len(t) > len(FACT_PREFIX)}))


# ---------------------------------------------------------------------------------------- corpus


def load_corpus(path: Path | str = DEFAULT_CORPUS, minimums: bool = True) -> dict:
    with open(path, encoding="utf-8") as f:
        corpus = json.load(f)
    validate(corpus, minimums=minimums)
    return corpus


def _objects(kind: str, items: object, problems: list[str]) -> list[tuple[str, dict]]:
    return labelled_corpus.objects(kind, items, problems)


def validate(corpus: dict, minimums: bool = True) -> None:
    """Raises CorpusError listing every broken rule (see the corpus's "about")."""
    if not isinstance(corpus, dict):
        raise CorpusError("the corpus is not a JSON object")
    problems: list[str] = []
    for key in ("about", "entries", "groups"):
        if key not in corpus:
            problems.append(f"missing top-level field {key!r}")
    about = corpus.get("about")
    if not isinstance(about, str) or "Apache-2.0" not in about:
        problems.append("about must describe the corpus and state its licence (Apache-2.0)")

    # Entries: ids and createdAtMs both increase, lowercase tags, no consolidation-owned tags.
    by_id: dict[str, dict] = {}
    previous: tuple[str, int] | None = None
    for where, e in _objects("entry", corpus.get("entries", []), problems):
        eid = labelled_corpus.unique_id(where, e, ENTRY_ID, "m0001", by_id, problems)
        if eid is None:
            continue
        if set(e) != ENTRY_KEYS:
            problems.append(f"{where}: fields must be exactly {sorted(ENTRY_KEYS)} (has {sorted(e)})")
        if not isinstance(e.get("content"), str) or not e["content"].strip():
            problems.append(f"{where}: content must be a non-empty string")
        tags = e.get("tags")
        if not isinstance(tags, list) or any(not isinstance(t, str) for t in tags):
            problems.append(f"{where}: tags must be a list of strings")
        else:
            if any(not TAG.match(t) for t in tags) or len(set(tags)) != len(tags):
                problems.append(f"{where}: tags must be distinct, lowercase letters, digits and ':._-'")
            if any(t.startswith("corroborated:") for t in tags):
                problems.append(f"{where}: corroborated:<n> tags are written by consolidation, not by the corpus")
        subject = e.get("subject")
        if subject is not None and (not isinstance(subject, str) or not subject):
            problems.append(f"{where}: subject must be null or a non-empty string")
        created = e.get("createdAtMs")
        if not isinstance(created, int) or isinstance(created, bool) or created <= 0:
            problems.append(f"{where}: createdAtMs must be a positive integer (ms since the epoch)")
            continue
        if previous is not None and (eid <= previous[0] or created <= previous[1]):
            problems.append(f"{where}: ids and createdAtMs must both increase ({previous[0]} came before)")
        previous = (eid, created)
    if not by_id:
        problems.append("no entries")

    # Groups: every entry in exactly one; kind, category, size and `newest` fit the kind.
    group_of: dict[str, dict] = {}
    seen_groups: set[str] = set()
    groups = _objects("group", corpus.get("groups", []), problems)
    for where, g in groups:
        gid, kind, members = g.get("id"), g.get("kind"), g.get("entries")
        if not isinstance(gid, str) or not GROUP_ID.match(gid):
            problems.append(f"{where}: id must look like g001")
        elif gid in seen_groups:
            problems.append(f"{where}: duplicate id {gid}")
        seen_groups.add(gid)
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            problems.append(f"{where}: entries must be a list of entry ids")
            continue
        if members != sorted(set(members)):
            problems.append(f"{where}: entries must be sorted and distinct")
        for m in members:
            if m not in by_id:
                problems.append(f"{where}: {m} is not an entry")
            elif m in group_of:
                problems.append(f"{where}: {m} is already in group {group_of[m].get('id')}")
            else:
                group_of[m] = g
        if kind not in KINDS:
            problems.append(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
            continue
        if g.get("category") not in CATEGORIES[kind]:
            problems.append(f"{where}: category {g.get('category')!r} is not one of {CATEGORIES[kind]} for a {kind} group")
        lo, hi = SIZES[kind]
        if not lo <= len(members) <= hi:
            problems.append(f"{where}: a {kind} group holds {lo}-{hi} entries, not {len(members)}")
        known = [by_id[m] for m in members if m in by_id]
        if len(known) != len(members):
            continue
        if kind in ("supersession", "slot"):
            newest = g.get("newest")
            timed = [e for e in known if isinstance(e.get("createdAtMs"), int)]
            if newest not in members:
                problems.append(f"{where}: a {kind} group must name its newest entry, one of its members")
            elif timed and newest != max(timed, key=lambda e: e["createdAtMs"])["id"]:
                problems.append(f"{where}: newest {newest} is not the member created last")
            times = sorted(e["createdAtMs"] for e in timed)
            if kind == "supersession" and any(b - a < UPDATE_GAP_MS for a, b in zip(times, times[1:])):
                problems.append(f"{where}: each update must come at least a day after the statement it updates")
        elif "newest" in g:
            problems.append(f"{where}: only supersession and slot groups name a newest entry")
        if kind in ("duplicate", "supersession", "slot") and len({e.get("subject") for e in known}) > 1:
            problems.append(f"{where}: members of a {kind} group must share one subject")
        tag_lists = [e["tags"] if isinstance(e.get("tags"), list) else [] for e in known]
        keys = [fact_keys([t for t in tags if isinstance(t, str)]) for tags in tag_lists]
        if kind == "slot":
            if not keys[0] or len(set(keys)) != 1:
                problems.append(f"{where}: members of a slot group must carry the same non-empty set of fact:<key> tags")
        elif any(keys):
            problems.append(f"{where}: fact:<key> tags belong in slot groups only")
        if kind == "conflict":
            times = [e.get("createdAtMs") for e in known]
            if g.get("category") == "contradiction" and all(isinstance(t, int) for t in times) and max(times) - min(times) > CONFLICT_WINDOW_MS:
                problems.append(f"{where}: a contradiction pair must be written within two hours")
            if g.get("category") == "different-source":
                sources = [tuple(sorted(t for t in tags if t.startswith("source-"))) for tags in tag_lists]
                if any(len(s) != 1 for s in sources) or len(set(sources)) != len(sources):
                    problems.append(f"{where}: each member of a different-source group carries its own source-<name> tag")
        texts = [e.get("content") for e in known]
        if kind == "duplicate" and len(set(texts)) != len(texts):
            problems.append(f"{where}: members of a duplicate group must be worded differently")
        if kind in ("distinct", "conflict"):
            for a, b in combinations(known, 2):
                if a.get("subject") == b.get("subject") and isinstance(a.get("content"), str) and isinstance(b.get("content"), str) \
                        and content_words(a["content"]) == content_words(b["content"]):
                    problems.append(f"{where}: {a['id']} and {b['id']} are the same words about the same subject, not different facts")
    for eid in by_id:
        if eid not in group_of:
            problems.append(f"entry {eid} is in no group")

    # Slot key sets and wordings never repeat across groups (that would be the same fact twice).
    slot_keys: dict[tuple, str] = {}
    for _, g in groups:
        if g.get("kind") == "slot" and isinstance(g.get("entries"), list) and g["entries"] and g["entries"][0] in by_id:
            e = by_id[g["entries"][0]]
            key = (e.get("subject"), fact_keys(e["tags"] if isinstance(e.get("tags"), list) else []))
            if key in slot_keys:
                problems.append(f"group {g.get('id')}: fact slot {list(key[1])} is already used by group {slot_keys[key]}")
            slot_keys[key] = g.get("id")
    words: dict[tuple, str] = {}
    for eid, e in by_id.items():
        if not isinstance(e.get("content"), str) or eid not in group_of:
            continue
        key = (e.get("subject"), content_words(e["content"]))
        other = words.get(key)
        if other is not None and group_of[other] is not group_of[eid]:
            problems.append(f"entries {other} (group {group_of[other].get('id')}) and {eid} (group {group_of[eid].get('id')}) "
                            f"are the same words about the same subject but in different groups")
        words.setdefault(key, eid)

    if minimums and not problems:
        problems += _below_minimums(corpus)
    if problems:
        raise CorpusError("\n  " + "\n  ".join(problems))


def _below_minimums(corpus: dict) -> list[str]:
    problems = []
    groups = corpus["groups"]
    if len(corpus["entries"]) < MINIMUMS["entries"]:
        problems.append(f"the corpus needs at least {MINIMUMS['entries']} entries, has {len(corpus['entries'])}")
    for cat in DUPLICATE_CATEGORIES:
        n = sum(g["kind"] == "duplicate" and g["category"] == cat for g in groups)
        if n < MINIMUMS["per_duplicate_category"]:
            problems.append(f"duplicate category {cat} needs at least {MINIMUMS['per_duplicate_category']} groups, has {n}")
    for kind in ("distinct", "supersession", "conflict", "slot", "singleton"):
        n = sum(g["kind"] == kind for g in groups)
        if n < MINIMUMS[kind]:
            problems.append(f"the corpus needs at least {MINIMUMS[kind]} {kind} groups, has {n}")
    return problems


# ------------------------------------------------------------------------------------- planner


def embeddings(corpus: dict) -> dict[str, list[float]]:
    """all-MiniLM-L6-v2 vectors of every entry, from the local embedding stand-in (the model the
    semantic-search tests use), for the planner's optional embedding stage."""
    sys.path.insert(0, str(ROOT / "infra" / "local"))
    import embedder  # noqa: E402  (numpy; installed in .venv by infra/local/venv)

    ids = [e["id"] for e in corpus["entries"]]
    vectors = embedder.embed([e["content"] for e in corpus["entries"]])
    return {i: [float(x) for x in v] for i, v in zip(ids, vectors)}


def plan_input(corpus: dict, reverse: bool = False, vectors: dict[str, list[float]] | None = None) -> bytes:
    entries = [{k: e[k] for k in ("id", "content", "tags", "createdAtMs", "subject")} for e in corpus["entries"]]
    if vectors:
        for e in entries:
            e["embedding"] = vectors[e["id"]]
    if reverse:
        entries.reverse()
    return json.dumps({"entries": entries}, ensure_ascii=False).encode("utf-8")


def run_planner(payload: bytes, command: str | None = None) -> bytes:
    """One run of the planner command on `payload`; returns its stdout (raw bytes)."""
    command = command or os.environ.get("PLAN_CORPUS_CMD") or DEFAULT_CMD
    argv = shlex.split(command)
    try:
        done = subprocess.run(argv, input=payload, capture_output=True, cwd=ROOT, check=False)
    except OSError as e:
        raise SystemExit(f"bench: cannot run the planner ({command!r}): {e}") from e
    if done.returncode != 0:
        sys.stderr.write(done.stderr.decode(errors="replace"))
        raise SystemExit(f"bench: the planner ({command!r}) exited with {done.returncode}")
    return done.stdout


def parse_plan(raw: bytes) -> dict:
    try:
        plan = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PlanError(f"the planner's stdout is not one JSON document ({e}): {raw[:300]!r}") from e
    if not isinstance(plan, dict) or not isinstance(plan.get("merges"), list):
        raise PlanError("the plan must be an object with a merges list")
    return plan


# ---------------------------------------------------------------------------- replaying a plan


class Survivor(NamedTuple):
    """An entry left once the plan has run."""

    id: str
    members: frozenset  # the input ids it stands for
    content: str
    kind: str | None  # the kind of the merge that wrote it; None: an input entry left untouched


def replay(entries: list[dict], plan: dict) -> dict[str, Survivor]:
    """Executes the plan on the input ids as the store would (merges in order); returns the
    surviving entries by id. Raises PlanError when the plan cannot be executed or misstates what
    a merged entry stands for."""
    if not isinstance(plan, dict) or not isinstance(plan.get("merges"), list):
        raise PlanError("the plan must be an object with a merges list")
    inputs = {e["id"] for e in entries}
    live: dict[str, Survivor] = {e["id"]: Survivor(e["id"], frozenset([e["id"]]), e["content"], None) for e in entries}
    for n, m in enumerate(plan["merges"], 1):
        where = f"merge #{n}"
        if not isinstance(m, dict) or m.get("kind") not in ("duplicate", "supersede"):
            raise PlanError(f"{where}: kind must be duplicate or supersede")
        replaced, merged = m.get("replaced"), m.get("merged")
        if not isinstance(replaced, list) or not replaced or not all(isinstance(r, str) for r in replaced) \
                or len(set(replaced)) != len(replaced):
            raise PlanError(f"{where}: replaced must be a non-empty list of distinct ids")
        if not isinstance(merged, dict) or not isinstance(merged.get("id"), str) or not isinstance(merged.get("content"), str) \
                or not isinstance(merged.get("tags"), list) or not isinstance(merged.get("provenance"), list):
            raise PlanError(f"{where}: merged must be an object with id, content, tags and provenance")
        for r in replaced:
            if r not in live:
                raise PlanError(f"{where}: replaces {r}, which is not a live entry at that point")
        if merged["id"] in live and merged["id"] not in replaced:
            raise PlanError(f"{where}: the merged id {merged['id']} is already a live entry")
        members = frozenset().union(*(live[r].members for r in replaced))
        provenance = merged["provenance"]
        if provenance != sorted(set(provenance)):
            raise PlanError(f"{where}: provenance must be sorted and distinct")
        if {p for p in provenance if p in inputs} != members:
            raise PlanError(f"{where}: provenance lists {sorted(p for p in provenance if p in inputs)} "
                            f"but the merge stands for {sorted(members)}")
        for r in replaced:
            del live[r]
        live[merged["id"]] = Survivor(merged["id"], members, merged["content"], m["kind"])
    if plan.get("inputCount") != len(entries):
        raise PlanError(f"inputCount is {plan.get('inputCount')!r}, the corpus has {len(entries)} entries")
    if plan.get("outputCount") != len(live):
        raise PlanError(f"outputCount is {plan.get('outputCount')!r}, replaying the plan leaves {len(live)} entries")
    return live


# --------------------------------------------------------------------------------------- scoring


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def score(corpus: dict, survivors: dict[str, Survivor]) -> dict:
    """Every figure of the benchmark for one replayed plan."""
    entries, groups = corpus["entries"], corpus["groups"]
    content = {e["id"]: e["content"] for e in entries}
    group_of = {m: g for g in groups for m in g["entries"]}
    home = {m: s.id for s in survivors.values() for m in s.members}
    missing = sorted(set(content) - set(home))
    if missing:
        raise PlanError(f"entries {missing[:5]} are in no surviving entry")

    # Distinct facts: pairs in one surviving entry that state different facts.
    wrong: list[dict] = []
    for s in survivors.values():
        for a, b in combinations(sorted(s.members), 2):
            ga, gb = group_of[a], group_of[b]
            if ga is not gb:
                wrong.append({"a": a, "b": b, "why": "across groups", "groups": [ga["id"], gb["id"]]})
            elif ga["kind"] in ("distinct", "conflict"):
                wrong.append({"a": a, "b": b, "why": f"within a {ga['kind']} group", "groups": [ga["id"]]})
    lost = {p["a"] for p in wrong} | {p["b"] for p in wrong}
    outcomes: dict[str, str] = {}
    kept_apart: dict[str, dict] = {}
    for kind in ("distinct", "conflict"):
        for g in (g for g in groups if g["kind"] == kind):
            apart = len({home[m] for m in g["entries"]}) == len(g["entries"]) and not lost & set(g["entries"])
            outcomes[g["id"]] = "kept apart" if apart else "merged"
            block = kept_apart.setdefault(kind, {"groups": 0, "kept": 0, "by_category": {}})
            cat = block["by_category"].setdefault(g["category"], {"groups": 0, "kept": 0})
            for b in (block, cat):
                b["groups"] += 1
                b["kept"] += apart
    for block in kept_apart.values():
        for b in [block, *block["by_category"].values()]:
            b["rate"] = _rate(b["kept"], b["groups"])
    for g in groups:
        if g["kind"] == "singleton":
            outcomes[g["id"]] = "merged" if lost & set(g["entries"]) else "kept apart"
    distinct_kept = {
        "entries": len(entries),
        "lost": len(lost),
        "rate": _rate(len(entries) - len(lost), len(entries)),
        "wrong_pairs": len(wrong),
        "wrong_pairs_by_why": {w: sum(p["why"] == w for p in wrong) for w in sorted({p["why"] for p in wrong})},
        "groups": kept_apart,
        "wrong": [{**p, "texts": [content[p["a"]], content[p["b"]]]} for p in wrong[:200]],
    }

    # Duplicates: a group is folded when all its members end in one surviving entry.
    dup_blocks: dict[str, dict] = {}
    overall = {"groups": 0, "folded": 0, "pairs": 0, "pairs_together": 0}
    for g in (g for g in groups if g["kind"] == "duplicate"):
        homes = [home[m] for m in g["entries"]]
        folded = len(set(homes)) == 1
        pairs = list(combinations(homes, 2))
        together = sum(a == b for a, b in pairs)
        outcomes[g["id"]] = "folded" if folded else ("partly folded" if together else "not folded")
        block = dup_blocks.setdefault(g["category"], {"groups": 0, "folded": 0, "pairs": 0, "pairs_together": 0})
        for b in (block, overall):
            b["groups"] += 1
            b["folded"] += folded
            b["pairs"] += len(pairs)
            b["pairs_together"] += together
    for b in [overall, *dup_blocks.values()]:
        b["rate"] = _rate(b["folded"], b["groups"])
        b["pair_rate"] = _rate(b["pairs_together"], b["pairs"])
    by_category = {c: dup_blocks[c] for c in DUPLICATE_CATEGORIES if c in dup_blocks}

    # Supersessions: one surviving entry with the newest text, written by a supersede merge.
    sup: dict[str, dict] = {}
    for g in (g for g in groups if g["kind"] in ("supersession", "slot")):
        homes = {home[m] for m in g["entries"]}
        newest = g["newest"]
        if len(homes) == 1:
            s = survivors[homes.pop()]
            if s.content != content[newest]:
                outcome = "merged, kept an older text"
            elif s.kind == "supersede" or s.id == newest:
                outcome = "right"
            else:
                outcome = f"merged as {s.kind}"
        elif len(homes) == len(g["entries"]) and all(survivors[home[m]].kind is None for m in g["entries"]):
            outcome = "not merged"
        else:
            outcome = "partly merged"
        outcomes[g["id"]] = outcome
        key = "plain" if g["kind"] == "supersession" else "slot"
        block = sup.setdefault(key, {"groups": 0, "right": 0, "outcomes": {}, "by_category": {}})
        cat = block["by_category"].setdefault(g["category"], {"groups": 0, "right": 0})
        for b in (block, cat):
            b["groups"] += 1
            b["right"] += outcome == "right"
        block["outcomes"][outcome] = block["outcomes"].get(outcome, 0) + 1
    for block in sup.values():
        for b in [block, *block["by_category"].values()]:
            b["rate"] = _rate(b["right"], b["groups"])
    both = [sup[k] for k in ("plain", "slot") if k in sup]
    supersessions = {
        "plain": sup.get("plain"),
        "slot": sup.get("slot"),
        "all": {"groups": sum(b["groups"] for b in both), "right": sum(b["right"] for b in both),
                "rate": _rate(sum(b["right"] for b in both), sum(b["groups"] for b in both))},
    }

    return {
        "distinct_kept": distinct_kept,
        "duplicates_folded": {"overall": overall, "by_category": by_category},
        "supersessions": supersessions,
        "outcomes": outcomes,
    }


def acceptance(figures: dict, identical: bool | None) -> dict[str, bool | None]:
    dup = figures["duplicates_folded"]
    plain = figures["supersessions"]["plain"]

    def at_least(value: float | None, target: float) -> bool | None:
        return None if value is None else value >= target - 1e-12

    cats = [at_least(b["rate"], TARGETS["duplicates_per_category"]) for b in dup["by_category"].values()]
    return {
        "distinct facts kept 100%": at_least(figures["distinct_kept"]["rate"], TARGETS["distinct_kept"]),
        "duplicates folded >= 90% overall": at_least(dup["overall"]["rate"], TARGETS["duplicates_overall"]),
        "duplicates folded >= 75% in every category": None if not cats or None in cats else all(cats),
        "plain-language supersession >= 80%": at_least(plain["rate"] if plain else None, TARGETS["supersession_plain"]),
        "identical plan and bytes on two runs": identical,
    }


# ------------------------------------------------------------------------------------- report


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _mark(ok: bool | None) -> str:
    return {True: "ok", False: "MISS", None: "-"}[ok]


def table(figures: dict, runs: dict) -> str:
    acc = acceptance(figures, runs.get("identical_bytes"))
    dk, dup, sup = figures["distinct_kept"], figures["duplicates_folded"], figures["supersessions"]
    rows: list[tuple[str, str, str, str]] = []

    def row(label: str, value: str, target: str = "", ok: bool | None = None, show: bool = False) -> None:
        rows.append((label, value, target, _mark(ok) if (target or show) else ""))

    row("distinct facts kept", _pct(dk["rate"]), "100%", acc["distinct facts kept 100%"])
    row(f"  entries merged with a different fact", f"{dk['lost']} of {dk['entries']}")
    row("  wrongly merged pairs", str(dk["wrong_pairs"]), "0", dk["wrong_pairs"] == 0)
    for why, n in dk["wrong_pairs_by_why"].items():
        row(f"    {why}", str(n))
    for kind, block in dk["groups"].items():
        row(f"  {kind} groups kept apart ({block['groups']})", _pct(block["rate"]))
        for cat, b in block["by_category"].items():
            if b["kept"] < b["groups"]:
                row(f"    {cat} ({b['groups']})", _pct(b["rate"]))
    o = dup["overall"]
    row(f"duplicates folded, overall ({o['groups']} groups)", _pct(o["rate"]), ">= 90%", acc["duplicates folded >= 90% overall"])
    row("  pairwise (member pairs in one entry)", _pct(o["pair_rate"]))
    for cat, b in dup["by_category"].items():
        ok = None if b["rate"] is None else b["rate"] >= TARGETS["duplicates_per_category"] - 1e-12
        row(f"  {cat} ({b['groups']}; pairwise {_pct(b['pair_rate'])})", _pct(b["rate"]), ">= 75%", ok)
    for key, label, target in (("plain", "plain language", ">= 80%"), ("slot", "fact:<key> slots", "")):
        b = sup[key]
        if b is None:
            continue
        ok = acc["plain-language supersession >= 80%"] if key == "plain" else None
        row(f"supersessions right, {label} ({b['groups']})", _pct(b["rate"]), target, ok)
        if key == "plain":
            for cat, c in b["by_category"].items():
                row(f"  {cat} ({c['groups']})", _pct(c["rate"]))
        wrong = {k: v for k, v in b["outcomes"].items() if k != "right"}
        if wrong:
            row("  wrong: " + ", ".join(f"{k} {v}" for k, v in sorted(wrong.items())), "")
    row("supersessions right, all", _pct(sup["all"]["rate"]))
    ident = runs.get("identical_bytes")
    row("same plan and bytes on two runs", {True: "yes", False: "NO", None: "-"}[ident], "yes", ident)
    order = runs.get("order_independent")
    row("  same plan with the input reversed", {True: "yes", False: "NO", None: "-"}[order], "", order, show=True)
    width = max(len(r[0]) for r in rows) + 2
    lines = [f"{'':<{width}}{'value':>10}  {'target':>7}", "-" * (width + 25)]
    lines += [f"{label:<{width}}{value:>10}  {target:>7}  {mark}".rstrip() for label, value, target, mark in rows]
    lines += distillation_lines(figures.get("distillation"))
    return "\n".join(lines)


def misses(corpus: dict, figures: dict) -> str:
    """The groups a plan got wrong, with their texts (for --misses)."""
    content = {e["id"]: e["content"] for e in corpus["entries"]}
    good = {"folded", "kept apart", "right"}
    lines = []
    for g in corpus["groups"]:
        outcome = figures["outcomes"].get(g["id"])
        if outcome is None or outcome in good:
            continue
        lines.append(f"{g['id']} {g['kind']}/{g['category']}: {outcome}")
        for m in g["entries"]:
            star = " (newest)" if g.get("newest") == m else ""
            lines.append(f"    {m}{star}: {content[m]}")
    for p in figures["distinct_kept"]["wrong"]:
        if p["why"] == "across groups":
            lines.append(f"across groups {p['groups'][0]}/{p['groups'][1]}: {p['a']} {p['texts'][0]!r} + {p['b']} {p['texts'][1]!r}")
    return "\n".join(lines) if lines else "(no misses)"


# -------------------------------------------------------------------------------- distillation


def run_distiller(corpus: dict, budget: int, command: str | None = None) -> dict:
    """One run of the distiller command over every corpus entry at `budget`: its report, or
    {"error": code} when the run failed on the budget (exit status 2)."""
    command = command or os.environ.get("DISTILL_CORPUS_CMD") or DISTILL_CMD
    sources = [{k: e[k] for k in ("id", "content", "tags", "createdAtMs")} for e in corpus["entries"]]
    payload = json.dumps({"budget": budget, "sources": sources}, ensure_ascii=False).encode("utf-8")
    try:
        done = subprocess.run(shlex.split(command), input=payload, capture_output=True, cwd=ROOT, check=False)
    except OSError as e:
        raise SystemExit(f"bench: cannot run the distiller ({command!r}): {e}") from e
    if done.returncode not in (0, 2):
        sys.stderr.write(done.stderr.decode(errors="replace"))
        raise SystemExit(f"bench: the distiller ({command!r}) exited with {done.returncode}")
    return json.loads(done.stdout)


def distillation(corpus: dict, command: str | None = None) -> dict:
    """Per budget: tokens used, sources included, facts kept, and the share of labelled groups
    with at least one member among the included sources."""
    group_of = {m: g["id"] for g in corpus["groups"] for m in g["entries"]}
    total = len(corpus["groups"])
    out: dict = {"budgets": {}}
    for budget in DISTILL_BUDGETS:
        r = run_distiller(corpus, budget, command)
        if "error" in r:
            out["budgets"][str(budget)] = {"token_budget": budget, "error": r["error"]}
            continue
        covered = {group_of[i] for i in r["includedSourceIds"] if i in group_of}
        out["budgets"][str(budget)] = {
            "token_budget": r["tokenBudget"], "tokens_used": r["tokensUsed"],
            "source_count": r["sourceCount"], "sources_included": r["sourcesIncluded"],
            "facts_kept": r["factsKept"], "facts_found": r["factsFound"],
            "groups_covered": len(covered), "groups": total, "coverage": _rate(len(covered), total),
        }
    return out


def distillation_lines(d: dict | None) -> list[str]:
    if not d:
        return []
    blocks = [d["budgets"][str(b)] for b in DISTILL_BUDGETS]
    shares = " / ".join(_pct(b.get("coverage")) if "error" not in b else b["error"] for b in blocks)
    lines = [f"distillation coverage at budgets 256 / 1,000 / 4,000: {shares} of labelled groups"]
    for b in blocks:
        if "error" in b:
            lines.append(f"  budget {b['token_budget']:>5,}: {b['error']}")
            continue
        lines.append(f"  budget {b['token_budget']:>5,}: tokens used {b['tokens_used']:,} / {b['token_budget']:,}, "
                     f"sources included {b['sources_included']} / {b['source_count']}, "
                     f"facts {b['facts_kept']} / {b['facts_found']}, "
                     f"groups covered {b['groups_covered']} / {b['groups']}")
    return lines


# ---------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = labelled_corpus.argument_parser(
        __doc__, DEFAULT_CORPUS, "write every figure (and each group's outcome) to OUT")
    parser.add_argument("--misses", action="store_true", help="list every group the plan got wrong, with its texts")
    parser.add_argument("--check", action="store_true", help="exit 1 when an acceptance target is missed")
    parser.add_argument("--small-ok", action="store_true", help="skip the corpus size minimums (test corpora)")
    parser.add_argument("--embed", action="store_true",
                        help="give the planner all-MiniLM-L6-v2 vectors (its optional embedding stage)")
    args = parser.parse_args(argv)

    try:
        corpus = load_corpus(args.corpus, minimums=not args.small_ok)
    except CorpusError as e:
        print(f"bench: {args.corpus}: the corpus is broken:{e}", file=sys.stderr)
        return 2
    groups = corpus["groups"]
    print(f"corpus: {len(corpus['entries'])} entries in {len(groups)} groups "
          f"({labelled_corpus.by_kind(groups, KINDS)})")

    vectors = embeddings(corpus) if args.embed else None
    if vectors:
        print("embedding stage on: all-MiniLM-L6-v2 vectors from infra/local/embedder.py")
    payload = plan_input(corpus, vectors=vectors)
    first = run_planner(payload)
    second = run_planner(payload)
    reversed_raw = run_planner(plan_input(corpus, reverse=True, vectors=vectors))
    try:
        plan = parse_plan(first)
        runs = {
            "identical_bytes": first == second,
            "identical_plans": plan == parse_plan(second),
            "order_independent": plan == parse_plan(reversed_raw),
        }
        survivors = replay(corpus["entries"], plan)
        figures = score(corpus, survivors)
    except PlanError as e:
        print(f"bench: the plan is broken: {e}", file=sys.stderr)
        return 3
    kinds_of = [m["kind"] for m in plan["merges"]]
    print(f"plan:   {plan['inputCount']} entries in, {plan['outputCount']} out; {len(kinds_of)} merges "
          f"({kinds_of.count('duplicate')} duplicate, {kinds_of.count('supersede')} supersede)\n")
    figures["distillation"] = distillation(corpus)
    print(table(figures, runs))
    acc = acceptance(figures, runs["identical_bytes"])
    if args.misses:
        print("\n" + misses(corpus, figures))
    if args.json:
        out = {
            "corpus": {"path": str(args.corpus), "entries": len(corpus["entries"]),
                       "groups": {k: sum(g["kind"] == k for g in groups) for k in KINDS}},
            "plan": {"input_count": plan["inputCount"], "output_count": plan["outputCount"], "merges": len(kinds_of),
                     "duplicate_merges": kinds_of.count("duplicate"), "supersede_merges": kinds_of.count("supersede")},
            "runs": runs,
            **figures,
            "acceptance": acc,
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2, ensure_ascii=False)
            f.write("\n")
    return 1 if args.check and not all(acc.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
