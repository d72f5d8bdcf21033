#!/usr/bin/env python3
"""Retrieval benchmark: our search engine beside contenders on the project's labelled corpus.

    .venv/bin/python tests/retrieval/bench.py [--corpus tests/retrieval/corpus.json] [--embed]
                                              [--json out.json] [--contenders-only]

The corpus (tests/retrieval/corpus.json, see its "about") holds memory entries and queries of
twelve kinds, each query labelled with the entries that answer it (a `common-only` query, made of
function words only, is answered by nothing: its right result is an empty list). Every system ranks, for each
query, the entries that carry ALL the query's tags (the tag filter is applied before ranking,
so term statistics are those of the filtered set, as in the search route), and returns at most
10 ids, best first.

Systems:
  ours text / ours semantic / ours hybrid
      The text-search crate, run through RANK_CORPUS_CMD (a shell-split command; default
      `cargo run --quiet --release --locked -p text-search --example rank_corpus`, run from the
      repository root). Protocol: one JSON document on its stdin,
        {"limit", "stem": true, "entries": [{"id", "content", "tags", "createdAt",
         "embedding"?}], "queries": [{"id", "q", "tags", "embedding"?}]}
      (createdAt in milliseconds since the epoch)
      and one on its stdout, {"text": {query id: [entry ids]}, "semantic": …, "hybrid": …}
      (semantic and hybrid only when embeddings were sent, i.e. with --embed).
  bm25s (en stem) / bm25s (plain)
      bm25s (PyPI) as its README uses it: bm25s.tokenize(texts, stopwords="en",
      stemmer=Stemmer.Stemmer("english")), bm25s.BM25() with default parameters, one index per
      distinct tag filter; "plain" is the same without a stemmer. Its tokenizer is its own
      (lowercase, \\w\\w+ tokens: a CJK run without spaces is one token; no accent folding) and
      is left as it is: that is the contender's real behaviour. Documents whose score is 0
      (no query term) are not hits, as with our engine. Documents are indexed with the same text
      our engine indexes: the content, then the tags, one per line.
  cosine (same embeddings)                                           (--embed)
      Plain cosine similarity (dot product of L2-normalised vectors) over the embeddings sent to
      our engine: the embedding-only contender.

Embeddings (--embed) come from infra/local/embedder.py (`embed(texts) -> float32 (n, 384)`,
all-MiniLM-L6-v2), loaded by path; entries are embedded by their content, queries by their text.

Metrics, per system, overall and per query kind (each the mean over queries):
  R@1     the top hit is the query's `best` if it names one, else any relevant entry.
  R@5     the fraction of the relevant entries in the top 5, out of min(|relevant|, 5).
  MRR@10  1 / rank of the `best` (or of the first relevant entry) within the top 10, else 0.
  newer   (update and update-close queries) the fraction where `best`, the newest version of
          the fact, ranks above every other relevant entry (and is in the top 10).
  A common-only query scores 1 on every metric when nothing is returned, else 0.

--shuffle SEED also runs our engine on the corpus with its write order scrambled: entries handed
over in a random order under randomly reassigned ids (so neither the input order nor the ids
follow time), createdAt kept; "newer first" must not depend on either.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import labelled_corpus  # noqa: E402  (tests/labelled_corpus.py, shared by both corpora)


ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CORPUS = ROOT / "tests" / "retrieval" / "corpus.json"
DEFAULT_CMD = "cargo run --quiet --release --locked -p text-search --example rank_corpus"
EMBEDDER = ROOT / "infra" / "local" / "embedder.py"
LIMIT = 10
KINDS = ("paraphrase", "rare", "number", "name", "tag", "cjk", "accent", "update", "identifier",
         "possessive", "common-only", "update-close")
UPDATE_KINDS = ("update", "update-close")
ENTRY_ID = re.compile(r"^e\d{4}$")
QUERY_ID = re.compile(r"^q\d{3}$")
TAG = re.compile(r"^[a-z0-9-]+$")


class CorpusError(ValueError):
    """The corpus breaks one of its rules; the message lists every problem found."""


# ---------------------------------------------------------------------------------------- corpus


def load_corpus(path: Path | str = DEFAULT_CORPUS) -> dict:
    with open(path, encoding="utf-8") as f:
        corpus = json.load(f)
    validate(corpus)
    return corpus


def _created(value: object) -> dt.datetime | None:
    if not isinstance(value, str) or not value.endswith("Z"):
        return None
    try:
        return dt.datetime.fromisoformat(value[:-1] + "+00:00")
    except ValueError:
        return None


def _objects(kind: str, items: object, problems: list[str]) -> list[tuple[str, dict]]:
    return labelled_corpus.objects(kind, items, problems)


def validate(corpus: dict) -> None:
    """Raises CorpusError listing every broken rule (see the corpus's "about")."""
    problems: list[str] = []
    if not isinstance(corpus, dict):
        raise CorpusError("the corpus is not a JSON object")
    for key in ("about", "entries", "queries"):
        if key not in corpus:
            problems.append(f"missing top-level field {key!r}")
    entries = corpus.get("entries") or []
    queries = corpus.get("queries") or []
    if not entries:
        problems.append("no entries")
    if not queries:
        problems.append("no queries")

    by_id: dict[str, dict] = {}
    previous: tuple[str, dt.datetime] | None = None
    for where, e in _objects("entry", entries, problems):
        eid = labelled_corpus.unique_id(where, e, ENTRY_ID, "e0001", by_id, problems)
        if eid is None:
            continue
        if not isinstance(e.get("content"), str) or not e["content"].strip():
            problems.append(f"{where}: content must be a non-empty string")
        tags = e.get("tags")
        if not isinstance(tags, list) or len(tags) > 3:
            problems.append(f"{where}: tags must be a list of at most 3")
        elif any(not isinstance(t, str) or not TAG.match(t) for t in tags) or len(set(tags)) != len(tags):
            problems.append(f"{where}: tags must be distinct lowercase letters, digits, '-'")
        created = _created(e.get("createdAt"))
        if created is None:
            problems.append(f"{where}: createdAt must be an ISO-8601 UTC time ending in Z")
        elif previous is not None:
            pid, ptime = previous
            if eid <= pid or created <= ptime:
                problems.append(f"{where}: ids and createdAt must both increase ({pid} came before)")
        if created is not None:
            previous = (eid, created)

    seen_q: set[str] = set()
    for where, q in _objects("query", queries, problems):
        qid = q.get("id")
        if not isinstance(qid, str) or not QUERY_ID.match(qid):
            problems.append(f"{where}: id must look like q001")
        elif qid in seen_q:
            problems.append(f"{where}: duplicate id {qid}")
        else:
            seen_q.add(qid)
        kind = q.get("kind")
        if kind not in KINDS:
            problems.append(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
        if not isinstance(q.get("q"), str) or not q["q"].strip():
            problems.append(f"{where}: q must be a non-empty string")
        tags = q.get("tags")
        if not isinstance(tags, list) or any(not isinstance(t, str) or not TAG.match(t) for t in tags):
            problems.append(f"{where}: tags must be a list of lowercase tags")
            tags = []
        if kind == "tag" and not tags:
            problems.append(f"{where}: a tag query needs at least one tag")
        relevant = q.get("relevant")
        if kind == "common-only":
            if relevant != []:
                problems.append(f"{where}: a common-only query is answered by nothing (relevant must be [])")
            relevant = []
        elif not isinstance(relevant, list) or not relevant:
            problems.append(f"{where}: relevant must be a non-empty list")
            relevant = []
        if len(set(map(str, relevant))) != len(relevant):
            problems.append(f"{where}: relevant lists an id twice")
        for r in relevant:
            if r not in by_id:
                problems.append(f"{where}: relevant id {r!r} is not an entry")
            elif not set(tags) <= set(by_id[r]["tags"] or []):
                problems.append(f"{where}: relevant {r} lacks the query's tags {tags}, so no system can find it")
        best = q.get("best")
        if best is not None and best not in relevant:
            problems.append(f"{where}: best {best!r} is not in relevant")
        if kind in UPDATE_KINDS:
            if best is None:
                problems.append(f"{where}: an update query must name its best (the newest version)")
            elif len(relevant) < 2:
                problems.append(f"{where}: an update query needs an old and a new version")
            elif best in by_id and all(r in by_id for r in relevant):
                newest = max(relevant, key=lambda r: (by_id[r].get("createdAt", ""), r))
                if best != newest:
                    problems.append(f"{where}: best {best} is not the newest relevant entry ({newest})")
    if problems:
        raise CorpusError(f"{len(problems)} problem(s) in the corpus:\n  " + "\n  ".join(problems))


def candidates(entries: list[dict], tags: list[str]) -> list[int]:
    """Indexes of the entries carrying all of `tags` (the query's tag filter)."""
    wanted = set(tags)
    return [i for i, e in enumerate(entries) if wanted <= set(e["tags"])]


def indexed_text(entry: dict) -> str:
    """What our engine indexes for an entry (rank_corpus): its content, then its tags, one a line."""
    return "\n".join([entry["content"], *entry["tags"]])


# ------------------------------------------------------------------------------------- systems

Rankings = dict  # query id -> [entry id, ...] best first


def millis(created: str) -> int:
    """An ISO-8601 UTC time (createdAt) in milliseconds since the epoch."""
    return round(_created(created).timestamp() * 1000)


def shuffled(corpus: dict, seed: int, embeddings: tuple | None = None) -> tuple[dict, tuple | None]:
    """The corpus as if written in another order: entries in a random order under randomly
    reassigned ids (id order no longer follows createdAt), queries' labels renamed to match;
    with the entries' embeddings in the same new order."""
    import random

    rng = random.Random(seed)
    entries = [dict(e) for e in corpus["entries"]]
    new_ids = [e["id"] for e in entries]
    rng.shuffle(new_ids)
    rename = {e["id"]: new for e, new in zip(entries, new_ids)}
    for e in entries:
        e["id"] = rename[e["id"]]
    order = list(range(len(entries)))
    rng.shuffle(order)
    entries = [entries[i] for i in order]
    if embeddings is not None:
        embeddings = ([embeddings[0][i] for i in order], embeddings[1])
    queries = []
    for q in corpus["queries"]:
        q = dict(q, relevant=[rename[r] for r in q["relevant"]])
        if q.get("best"):
            q["best"] = rename[q["best"]]
        queries.append(q)
    return {**corpus, "entries": entries, "queries": queries}, embeddings


def run_ours(corpus: dict, embeddings: tuple | None = None, command: str | None = None) -> dict[str, Rankings]:
    """Our engine through RANK_CORPUS_CMD; returns {"text": …} (+ "semantic", "hybrid")."""
    command = command or os.environ.get("RANK_CORPUS_CMD") or DEFAULT_CMD
    entries = [{"id": e["id"], "content": e["content"], "tags": e["tags"], "createdAt": millis(e["createdAt"])}
               for e in corpus["entries"]]
    queries = [{"id": q["id"], "q": q["q"], "tags": q["tags"]} for q in corpus["queries"]]
    if embeddings is not None:
        ev, qv = embeddings
        for item, vector in zip(entries, ev):
            item["embedding"] = [float(x) for x in vector]
        for item, vector in zip(queries, qv):
            item["embedding"] = [float(x) for x in vector]
    payload = json.dumps({"limit": LIMIT, "stem": True, "entries": entries, "queries": queries})
    argv = shlex.split(command)
    try:
        done = subprocess.run(argv, input=payload.encode(), capture_output=True, cwd=ROOT, check=False)
    except OSError as e:
        raise SystemExit(f"bench: cannot run our engine ({command!r}): {e}") from e
    if done.returncode != 0:
        sys.stderr.write(done.stderr.decode(errors="replace"))
        raise SystemExit(f"bench: our engine ({command!r}) exited with {done.returncode}")
    try:
        out = json.loads(done.stdout)
    except json.JSONDecodeError as e:
        head = done.stdout[:300].decode(errors="replace")
        raise SystemExit(f"bench: our engine's stdout is not one JSON document ({e}): {head!r}") from e
    wanted = ["text"] + (["semantic", "hybrid"] if embeddings is not None else [])
    tags_of = {e["id"]: set(e["tags"]) for e in corpus["entries"]}
    for mode in wanted:
        rankings = out.get(mode)
        if not isinstance(rankings, dict):
            raise SystemExit(f"bench: our engine's output has no {mode!r} rankings")
        for q in corpus["queries"]:
            ranked = rankings.get(q["id"])
            if not isinstance(ranked, list) or len(ranked) > LIMIT or not set(ranked) <= tags_of.keys():
                raise SystemExit(f"bench: our engine's {mode} ranking for {q['id']} is not a list of at most {LIMIT} entry ids")
            if len(set(ranked)) != len(ranked) or any(not set(q["tags"]) <= tags_of[r] for r in ranked):
                raise SystemExit(f"bench: our engine's {mode} ranking for {q['id']} repeats an id or ignores the tag filter {q['tags']}")
    return {mode: out[mode] for mode in wanted}


def run_bm25s(corpus: dict, stem: bool) -> Rankings:
    """bm25s with its default tokenizer, English stopwords, the English Snowball stemmer (or none)."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english") if stem else None
    entries, queries = corpus["entries"], corpus["queries"]
    groups: dict[tuple[str, ...], list[dict]] = {}
    for q in queries:
        groups.setdefault(tuple(sorted(set(q["tags"]))), []).append(q)
    rankings: Rankings = {}
    for tags, group in groups.items():
        pool = candidates(entries, list(tags))
        if not pool:
            rankings.update({q["id"]: [] for q in group})
            continue
        docs = [indexed_text(entries[i]) for i in pool]
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(docs, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
        tokens = bm25s.tokenize([q["q"] for q in group], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
        found, scores = retriever.retrieve(tokens, k=min(LIMIT, len(pool)), show_progress=False)
        for q, row, row_scores in zip(group, found, scores):
            rankings[q["id"]] = [entries[pool[int(d)]]["id"] for d, s in zip(row, row_scores) if s > 0]
    return rankings


def run_cosine(corpus: dict, embeddings: tuple) -> Rankings:
    """Top 10 by cosine similarity of the same embeddings; ties go to the newer entry."""
    import numpy as np

    ev, qv = (np.asarray(a, dtype=np.float64) for a in embeddings)
    ev = ev / np.maximum(np.linalg.norm(ev, axis=1, keepdims=True), 1e-12)
    qv = qv / np.maximum(np.linalg.norm(qv, axis=1, keepdims=True), 1e-12)
    entries = corpus["entries"]
    rankings: Rankings = {}
    for q, vector in zip(corpus["queries"], qv):
        pool = candidates(entries, q["tags"])
        scores = ev[pool] @ vector if pool else np.zeros(0)
        order = sorted(range(len(pool)), key=lambda j: (-scores[j], -pool[j]))[:LIMIT]
        rankings[q["id"]] = [entries[pool[j]]["id"] for j in order]
    return rankings


def load_embedder():
    if not EMBEDDER.exists():
        raise SystemExit(f"bench: --embed needs {EMBEDDER.relative_to(ROOT)}")
    spec = importlib.util.spec_from_file_location("wop_local_embedder", EMBEDDER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.embed


def embed_corpus(corpus: dict) -> tuple:
    embed = load_embedder()
    ev = embed([e["content"] for e in corpus["entries"]])
    qv = embed([q["q"] for q in corpus["queries"]])
    if len(ev) != len(corpus["entries"]) or len(qv) != len(corpus["queries"]):
        raise SystemExit("bench: the embedder returned the wrong number of vectors")
    return ev, qv


# ------------------------------------------------------------------------------------- metrics


def score_query(query: dict, ranked: list[str]) -> dict:
    """R@1, R@5, reciprocal rank (@10) and, for update queries, newer-first, for one ranking."""
    ranked = list(ranked)[:LIMIT]
    if query["kind"] == "common-only":
        silent = float(not ranked)
        return {"r1": silent, "r5": silent, "rr": silent}
    relevant = list(query["relevant"])
    best = query.get("best")
    hit1 = bool(ranked) and (ranked[0] == best if best else ranked[0] in relevant)
    r5 = len(set(ranked[:5]) & set(relevant)) / min(len(relevant), 5)
    targets = [best] if best else relevant
    rank = next((i + 1 for i, r in enumerate(ranked) if r in targets), None)
    figures = {"r1": float(hit1), "r5": r5, "rr": 1.0 / rank if rank else 0.0}
    if query["kind"] in UPDATE_KINDS:
        newer = best in ranked and all(
            o not in ranked or ranked.index(o) > ranked.index(best) for o in relevant if o != best
        )
        figures["newer"] = float(newer)
    return figures


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(corpus: dict, rankings: Rankings) -> dict:
    per_query = {q["id"]: score_query(q, rankings.get(q["id"], [])) for q in corpus["queries"]}

    def block(qs: list[dict]) -> dict:
        figs = [per_query[q["id"]] for q in qs]
        out = {"n": len(figs), "r1": _mean([f["r1"] for f in figs]), "r5": _mean([f["r5"] for f in figs]),
               "mrr": _mean([f["rr"] for f in figs])}
        newer = [f["newer"] for f in figs if "newer" in f]
        if newer:
            out["newer_first"] = _mean(newer)
        return out

    queries = corpus["queries"]
    return {
        "overall": block(queries),
        "by_kind": {k: block([q for q in queries if q["kind"] == k]) for k in KINDS if any(q["kind"] == k for q in queries)},
        "newer_first": _mean([f["newer"] for f in per_query.values() if "newer" in f]),
        "per_query": {qid: {**f, "ranked": rankings.get(qid, [])} for qid, f in per_query.items()},
    }


def table(results: dict[str, dict]) -> str:
    kinds = [k for k in KINDS if any(k in r["by_kind"] for r in results.values())]
    width = max(len(name) for name in results) + 2
    head1 = " " * width + f"{'overall':^20} {'newer':>6} " + " ".join(f"{k:^9}" for k in kinds)
    head2 = " " * width + f"{'R@1':>6} {'R@5':>6} {'MRR':>6} {'first':>6} " + " ".join(f"{'R@5/MRR':^9}" for _ in kinds)
    lines = [head1, head2, "-" * len(head2)]
    for name, r in results.items():
        o = r["overall"]
        nf = "-" if r["newer_first"] is None else f"{r['newer_first']:.2f}"
        cells = []
        for k in kinds:
            b = r["by_kind"].get(k)
            cells.append(f"{b['r5']:.2f}/{b['mrr']:.2f}" if b else f"{'-':^9}")
        lines.append(f"{name:<{width}}{o['r1']:>6.2f} {o['r5']:>6.2f} {o['mrr']:>6.2f} {nf:>6} " + " ".join(cells))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- main


def describe(corpus: dict) -> str:
    """One line: how many entries and queries, and queries per kind."""
    queries = corpus["queries"]
    return (f"corpus: {len(corpus['entries'])} entries, {len(queries)} queries "
            f"({labelled_corpus.by_kind(queries, KINDS)})")


def main(argv: list[str] | None = None) -> int:
    parser = labelled_corpus.argument_parser(
        __doc__, DEFAULT_CORPUS, "write every figure (and each query's ranking) to OUT")
    parser.add_argument("--embed", action="store_true", help="also compare semantic/hybrid/cosine (needs infra/local/embedder.py)")
    parser.add_argument("--contenders-only", action="store_true", help="skip our engine (e.g. when it is not built)")
    parser.add_argument("--shuffle", type=int, metavar="SEED", help="also rank the corpus written in a scrambled order")
    args = parser.parse_args(argv)

    try:
        corpus = load_corpus(args.corpus)
    except CorpusError as e:
        print(f"bench: {args.corpus}: {e}", file=sys.stderr)
        return 2
    print(describe(corpus))

    embeddings = None
    timings: dict[str, float] = {}
    if args.embed:
        t = time.perf_counter()
        embeddings = embed_corpus(corpus)
        timings["embed"] = time.perf_counter() - t

    systems: dict[str, Rankings] = {}
    if not args.contenders_only:
        t = time.perf_counter()
        ours = run_ours(corpus, embeddings)
        timings["ours"] = time.perf_counter() - t
        systems["ours text"] = ours["text"]
    t = time.perf_counter()
    systems["bm25s (en stem)"] = run_bm25s(corpus, stem=True)
    systems["bm25s (plain)"] = run_bm25s(corpus, stem=False)
    timings["bm25s"] = time.perf_counter() - t
    if embeddings is not None:
        if not args.contenders_only:
            systems["ours semantic"] = ours["semantic"]
            systems["ours hybrid"] = ours["hybrid"]
        systems["cosine (same embeddings)"] = run_cosine(corpus, embeddings)

    results = {name: summarize(corpus, rankings) for name, rankings in systems.items()}
    if args.shuffle is not None and not args.contenders_only:
        scrambled, scrambled_embeddings = shuffled(corpus, args.shuffle, embeddings)
        for mode, rankings in run_ours(scrambled, scrambled_embeddings).items():
            results[f"ours {mode} (shuffled)"] = summarize(scrambled, rankings)
    print(table(results))
    print("R@1: the best (else any relevant) entry ranked first. R@5: share of the relevant entries in the\n"
          "top 5 (of min(|relevant|, 5)). MRR: @10. newer first: update queries whose newest version\n"
          "outranks the older ones. Per kind: R@5/MRR.")
    if args.json:
        document = {
            "corpus": str(args.corpus),
            "entries": len(corpus["entries"]),
            "queries": {k: sum(q["kind"] == k for q in corpus["queries"]) for k in KINDS},
            "limit": LIMIT,
            "embed": bool(args.embed),
            "seconds": timings,
            "systems": results,
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(document, f, ensure_ascii=False, indent=1)
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
