"""What the project's labelled corpora (tests/retrieval, tests/quality) share: how a validator
walks a list of entries or queries and names the broken ones."""

from __future__ import annotations


def objects(kind: str, items: object, problems: list[str]) -> list[tuple[str, dict]]:
    """The items that are objects, each with how a problem names it ("entry #3 (e0003)"); a
    non-list or an item that is not an object is recorded in `problems`."""
    if not isinstance(items, list):
        problems.append(f"{kind}s must be a list")
        return []
    out = []
    for n, item in enumerate(items):
        if isinstance(item, dict):
            out.append((f"{kind} #{n + 1} ({item.get('id', '?')})", item))
        else:
            problems.append(f"{kind} #{n + 1}: not an object")
    return out


def unique_id(where: str, item: dict, pattern, example: str, seen: dict[str, dict],
              problems: list[str]) -> str | None:
    """The item's id if it matches `pattern` (named by `example` in the problem), recorded in
    `seen`; a repeated id is a problem too (the later item replaces the earlier in `seen`)."""
    item_id = item.get("id")
    if not isinstance(item_id, str) or not pattern.match(item_id):
        problems.append(f"{where}: id must look like {example}")
        return None
    if item_id in seen:
        problems.append(f"{where}: duplicate id {item_id}")
    seen[item_id] = item
    return item_id


def argument_parser(doc: str, corpus: object, json_help: str):
    """The command line both benchmarks start from: `--corpus` and `--json`."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(corpus), help="the labelled corpus (JSON)")
    parser.add_argument("--json", metavar="OUT", help=json_help)
    return parser


def by_kind(items: list[dict], kinds: tuple[str, ...]) -> str:
    """"kind n, kind n, ..." over `items`, in the order of `kinds`."""
    return ", ".join(f"{k} {sum(i['kind'] == k for i in items)}" for k in kinds)
