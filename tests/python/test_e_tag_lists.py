"""Tag lists through the real functions and the official client (docs/api.md "Tag lists"):
`tag=a&tag=b` means all of them, `anyTag=a&anyTag=b` any of them, repeated parameters are read
from the raw query string (so a tag may contain a comma), a filtered page is full, and its
cursor is bound to the filter."""

from __future__ import annotations

from typing import Any

from wopkit import BASE, Api, Invoker, memory_ref, new_id, query


def entries_path(pairs: list[tuple[str, Any]]) -> str:
    return f"{BASE}/entries?{query(pairs)}"


def listed(api: Api, ref: str, pairs: list[tuple[str, Any]]) -> list[str]:
    """Ids of every page of a filtered list; each page but the last must be full."""
    out: list[str] = []
    cursor = None
    limit = next((int(v) for k, v in pairs if k == "limit"), 50)
    for _ in range(50):
        page = api.request("GET", entries_path(
            [("memoryRef", ref), *pairs, *([("cursor", cursor)] if cursor else [])]))
        if page["nextCursor"] is not None:
            assert len(page["entries"]) == limit, page
        out.extend(e["id"] for e in page["entries"])
        cursor = page["nextCursor"]
        if cursor is None:
            return out
    raise AssertionError("more than 50 pages")


def test_tag_filters_select_all_any_and_comma_tags(api: Api, invoker: Invoker, tenant: str):
    ref = memory_ref(tenant, f"tags-{new_id()}")
    specs = [["a"], ["a", "b"], ["b"], ["a,b"], ["a", "b", "c"], [], ["c"], ["a", "c"]]
    ids = invoker.put(tenant, ref, [{"content": f"fact {i}", "tags": t}
                                    for i, t in enumerate(specs)])
    newest_first = list(reversed(list(zip(ids, specs))))

    def want(pred) -> list[str]:
        return [i for i, tags in newest_first if pred(set(tags))]

    cases = [
        ([("tag", "a")], want(lambda t: "a" in t)),
        ([("tag", "a"), ("tag", "b")], want(lambda t: {"a", "b"} <= t)),
        ([("anyTag", "b"), ("anyTag", "c")], want(lambda t: bool({"b", "c"} & t))),
        ([("tag", "a"), ("anyTag", "b"), ("anyTag", "c")],
         want(lambda t: "a" in t and bool({"b", "c"} & t))),
        # One tag that contains a comma, not the tags `a` and `b`.
        ([("tag", "a,b")], want(lambda t: "a,b" in t)),
        ([("tag", "nobody")], []),
    ]
    for pairs, expected in cases:
        for limit in (1, 2, 50):
            got = listed(api, ref, [*pairs, ("limit", limit)])
            assert got == expected, (pairs, limit, got, expected)
    assert want(lambda t: "a,b" in t), "positive control: the comma tag was written"


def test_a_tag_cursor_is_bound_to_its_filter_and_bad_tags_are_400(api: Api, invoker: Invoker,
                                                                  tenant: str):
    ref = memory_ref(tenant, f"tagcur-{new_id()}")
    invoker.put(tenant, ref, [{"content": f"n {i}", "tags": ["x", "y"]} for i in range(3)])
    page = api.request("GET", entries_path([("memoryRef", ref), ("tag", "x"), ("limit", 1)]))
    assert len(page["entries"]) == 1 and page["nextCursor"], page
    cursor = page["nextCursor"]
    # The same filter in another order accepts it; another filter does not.
    again = api.request("GET", entries_path(
        [("memoryRef", ref), ("limit", 1), ("tag", "x"), ("cursor", cursor)]))
    assert len(again["entries"]) == 1
    for other in ([("tag", "y")], [("anyTag", "x")], [("tag", "x"), ("tag", "y")], []):
        err = api.error("GET", entries_path([("memoryRef", ref), *other, ("cursor", cursor)]),
                        status=400, code="validation_error")
        assert (err.envelope.details or {}).get("field") == "cursor", err.raw_text
    for field, value in (("tag", ""), ("tag", "x\u0007"), ("anyTag", "y" * 129)):
        err = api.error("GET", entries_path([("memoryRef", ref), (field, value)]),
                        status=400, code="validation_error")
        assert (err.envelope.details or {}).get("field") == field, err.raw_text
    err = api.error("GET", entries_path([("memoryRef", ref), *[("tag", f"t{i}") for i in range(9)]]),
                    status=400, code="validation_error")
    assert (err.envelope.details or {}).get("field") == "tag", err.raw_text
    err = api.error("GET", entries_path([("memoryRef", ref), ("memoryRef", ref)]),
                    status=400, code="validation_error")
    assert (err.envelope.details or {}).get("field") == "memoryRef", err.raw_text


def test_tag_lists_never_cross_tenants(api: Api, invoker: Invoker, tenant: str, base_url: str):
    ref = memory_ref(tenant, f"tagx-{new_id()}")
    invoker.put(tenant, ref, [{"content": "mine", "tags": ["shared-tag"]}])
    assert len(listed(api, ref, [("tag", "shared-tag")])) == 1, "positive control"
    intruder = Api(base_url, tenant=f"intruder-{new_id()}")
    for pairs in ([("tag", "shared-tag")], [("anyTag", "shared-tag"), ("anyTag", "z")]):
        page = intruder.request("GET", entries_path([("memoryRef", ref), *pairs]))
        assert page == {"entries": [], "nextCursor": None}, page
