"""The retrieval claims of docs/figures.md "Retrieval quality", checked on the project's corpus with
our engine (the `rank_corpus` example that `cargo test` builds; RANK_CORPUS_CMD overrides) and real
all-MiniLM-L6-v2 embeddings from the local stand-in's model, beside the contenders run here:
text search at least bm25s's recall@5 and MRR overall and clearly above it on CJK and accented
text; hybrid at least the embedding-only contender's recall@5; the newer version of an updated
fact first more often than not."""

from __future__ import annotations

import importlib.util
import os
import shlex
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
_spec = importlib.util.spec_from_file_location("retrieval_bench", HERE / "bench.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _engine() -> str:
    if os.environ.get("RANK_CORPUS_CMD"):
        return os.environ["RANK_CORPUS_CMD"]
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    binary = target / "debug" / "examples" / "rank_corpus"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: `cargo test` (or `cargo build -p text-search "
                    "--examples`) builds it", pytrace=False)
    return shlex.quote(str(binary))


@pytest.fixture(scope="module")
def figures() -> dict[str, dict]:
    corpus = bench.load_corpus(bench.DEFAULT_CORPUS)
    embeddings = bench.embed_corpus(corpus)
    ours = bench.run_ours(corpus, embeddings, command=_engine())
    systems = {f"ours {mode}": ranked for mode, ranked in ours.items()}
    systems["bm25s"] = bench.run_bm25s(corpus, stem=True)
    systems["cosine"] = bench.run_cosine(corpus, embeddings)
    results = {name: bench.summarize(corpus, ranked) for name, ranked in systems.items()}
    print("\n" + bench.table(results))
    return results


def test_text_search_beats_bm25s_overall_and_on_cjk_and_accents(figures):
    ours, bm25s = figures["ours text"], figures["bm25s"]
    assert ours["overall"]["r5"] >= bm25s["overall"]["r5"]
    assert ours["overall"]["mrr"] >= bm25s["overall"]["mrr"]
    for kind in ("cjk", "accent"):
        assert ours["by_kind"][kind]["r5"] >= bm25s["by_kind"][kind]["r5"] + 0.3, kind
        assert ours["by_kind"][kind]["mrr"] >= bm25s["by_kind"][kind]["mrr"] + 0.3, kind


def test_hybrid_recalls_at_least_what_embeddings_alone_do(figures):
    assert figures["ours hybrid"]["overall"]["r5"] >= figures["cosine"]["overall"]["r5"]
    assert set(figures) >= {"ours text", "ours semantic", "ours hybrid"}


def test_updated_facts_rank_their_newer_version_first(figures):
    assert figures["ours text"]["newer_first"] > 0.5
    assert figures["ours hybrid"]["newer_first"] > 0.5
    assert figures["ours text"]["newer_first"] > figures["bm25s"]["newer_first"]
