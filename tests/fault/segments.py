"""Reads a search index segment's text part (docs/search.md "The index") far enough to list its
document ids, terms and tags, so the fault suite's "no trace" check sees what a segment holds
even though its byte form stores sorted keys by the prefix they share with the one before (a
forgotten word need not appear whole in the bytes). Written from the format's definition in
shared/search-index/src/segment.rs and codec.rs; a byte form this reader does not know is
reported as unreadable, never as clean."""

from __future__ import annotations

import hashlib

MAGIC = b"WOPSEG\x00\x03"


class Unreadable(ValueError):
    pass


class _Reader:
    def __init__(self, body: bytes) -> None:
        self.body = body
        self.at = 0

    def uint(self) -> int:
        shift = value = 0
        while True:
            if self.at >= len(self.body) or shift > 63:
                raise Unreadable("truncated varint")
            byte = self.body[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def int(self) -> int:
        v = self.uint()
        return (v >> 1) ^ -(v & 1)

    def text(self) -> str:
        n = self.uint()
        if self.at + n > len(self.body):
            raise Unreadable("truncated string")
        s = self.body[self.at:self.at + n].decode("utf-8")
        self.at += n
        return s

    def shared(self, previous: str) -> str:
        keep = self.uint()
        prefix = previous.encode("utf-8")[:keep].decode("utf-8")
        return prefix + self.text()


def _lists(r: _Reader, items_per_entry: int) -> list[str]:
    keys: list[str] = []
    previous = ""
    for _ in range(r.uint()):
        key = r.shared(previous)
        previous = key
        keys.append(key)
        for _ in range(r.uint() * items_per_entry):
            r.uint()
    return keys


def _term_directory(r: _Reader) -> list[str]:
    """The terms, then past their postings: each key with its list's count and byte length,
    the lists' bytes after the directory."""
    keys: list[str] = []
    previous = ""
    length = 0
    for _ in range(r.uint()):
        key = r.shared(previous)
        previous = key
        keys.append(key)
        r.uint()
        length += r.uint()
    if r.at + length > len(r.body):
        raise Unreadable("truncated postings")
    r.at += length
    return keys


def read(blob: bytes) -> dict[str, list[str]]:
    """`{"ids": [...], "terms": [...], "tags": [...]}` of one segment's text part."""
    if len(blob) < len(MAGIC) + 32 or hashlib.sha256(blob[:-32]).digest() != blob[-32:]:
        raise Unreadable("seal does not verify")
    body = blob[:-32]
    if not body.startswith(MAGIC):
        raise Unreadable("unknown segment format")
    r = _Reader(body)
    r.at = len(MAGIC)
    ids: list[str] = []
    previous = ""
    for _ in range(r.uint()):
        previous = r.shared(previous)
        ids.append(previous)
        r.int()
        if r.uint():
            r.int()
        r.uint()
    terms = _term_directory(r)
    _lists(r, 1)           # stem groups: term positions
    tags = _lists(r, 1)    # tag postings: doc deltas
    return {"ids": ids, "terms": terms, "tags": tags}


def _uint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _shared(previous: str, key: str) -> bytes:
    keep = 0
    while keep < min(len(previous), len(key)) and previous[keep] == key[keep]:
        keep += 1
    rest = key[keep:].encode("utf-8")
    return _uint(len(previous[:keep].encode("utf-8"))) + _uint(len(rest)) + rest


def encode(ids: list[str], terms: list[str], tags: list[str]) -> bytes:
    """A sealed segment text part holding `ids` (sorted), each of `terms` (sorted) once in the
    first document, and `tags` on the first document: what the checker's self-test plants."""
    body = bytearray(MAGIC) + _uint(len(ids))
    previous = ""
    for i in ids:
        body += _shared(previous, i) + _uint(0) + _uint(0) + _uint(1)
        previous = i
    body += _uint(len(terms))
    previous = ""
    for k in terms:
        # One posting (document 0, frequency 1): two bytes.
        body += _shared(previous, k) + _uint(1) + _uint(2)
        previous = k
    body += b"".join(_uint(0) + _uint(1) for _ in terms)
    for keys, items in (([], []), (tags, [0])):
        body += _uint(len(keys))
        previous = ""
        for k in keys:
            body += _shared(previous, k) + _uint(1) + b"".join(_uint(x) for x in items)
            previous = k
    return bytes(body) + hashlib.sha256(bytes(body)).digest()


def self_test() -> None:
    """Segments in the format above read back exactly; a changed byte does not read."""
    blob = encode(["01AAA", "01AAB"], ["mkabc", "mkd"], ["t:x"])
    assert b"mkd" not in blob, "the second term is stored by its shared prefix"
    got = read(blob)
    assert got == {"ids": ["01AAA", "01AAB"], "terms": ["mkabc", "mkd"], "tags": ["t:x"]}, got
    try:
        read(blob[:-1] + bytes([blob[-1] ^ 1]))
    except Unreadable:
        pass
    else:
        raise AssertionError("a changed byte must not read")
