#!/usr/bin/env python3
"""The contact projection profile (oap.profile.projection.contact.v1, crate contact-projection)
beside the best registry libraries for the same job, on the same labelled set.

    python tests/quality/projection_contender.py [--data shared/contact-projection/tests/data/contact_v1.jsonl]
                                                 [--ours-cmd "cargo run ..."] [--no-bench]

Needs `phonenumbers` and `pyap` (pinned in infra/requirements.txt's contact projection block;
a throwaway venv is enough: `python3 -m venv /tmp/projvenv && /tmp/projvenv/bin/pip install
phonenumbers==... pyap==...`).

The contender: Google's libphonenumber port `phonenumbers` (PhoneNumberMatcher, leniency VALID,
run once per region in REGIONS, spans unioned), a standard email regex (the WHATWG HTML
`input type=email` grammar with a required dot in the domain), and `pyap` for street addresses
(its US, GB and CA parsers; pyap has no parser for the other countries of the set). Nothing in
the contender detects handles or obfuscated emails, so its handle recall is 0 by construction.

Ours: the crate's `project` example, which writes, per input line, the detected spans as
character offsets. Both sides are scored by the same code, as tests/labelled.rs scores ours:
a contact counts as removed when every character of it is inside a detected span; a look-alike
line (nothing to remove) is a false positive when anything in it is detected. Printed per split
and per kind. The throughput line times the contender's detection on the same ~200-byte texts as
the crate's criterion bench (shared/contact-projection/benches/projection.rs).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "shared/contact-projection/tests/data/contact_v1.jsonl"
OURS = "cargo run --quiet --release --locked -p contact-projection --example project"

# The countries of the labelled set, and the large ones whose numbers appear in it.
REGIONS = ["US", "GB", "DE", "FR", "ES", "IT", "NL", "JP", "BR", "AU", "IN", "CN", "IE", "CH",
           "SG", "HK"]
EMAIL = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                   r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+")


def contender_spans(text: str) -> list[tuple[int, int, str]]:
    import phonenumbers
    import pyap

    spans = [(m.start(), m.end(), "email") for m in EMAIL.finditer(text)]
    for region in REGIONS:
        for m in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
            spans.append((m.start, m.end, "phone"))
    for country in ("US", "GB", "CA"):
        for a in pyap.parse(text, country=country):
            full = a.full_address
            at = text.find(full)
            if at < 0:  # pyap normalises some separators; fall back to its first line
                continue
            spans.append((at, at + len(full), "address"))
    return spans


def covered(spans, start: int, end: int) -> bool:
    at = start
    for s, e, _ in sorted(spans):
        if s <= at < e:
            at = e
    return at >= end


def score(lines, spans_of) -> dict:
    recall = defaultdict(lambda: [0, 0])
    fp = defaultdict(lambda: [0, 0])
    for line, spans in zip(lines, spans_of):
        if not line["contacts"]:
            fp[line["split"]][0] += bool(spans)
            fp[line["split"]][1] += 1
            continue
        for c in line["contacts"]:
            s = line["text"].find(c)
            hit = covered(spans, s, s + len(c))
            for kind in (line["kind"], "all"):
                recall[(line["split"], kind)][0] += hit
                recall[(line["split"], kind)][1] += 1
    return {"recall": dict(recall), "fp": dict(fp)}


def ours_spans(lines, cmd: str):
    payload = "".join(json.dumps(l, ensure_ascii=False) + "\n" for l in lines)
    out = subprocess.run(shlex.split(cmd), cwd=ROOT, input=payload, capture_output=True,
                         text=True, check=True).stdout
    return [[tuple(s) for s in json.loads(l)["spans"]] for l in out.splitlines()]


def bench_texts(lines) -> list[str]:
    texts, current = [], ""
    for l in lines:
        current = (current + " " + l["text"]) if current else l["text"]
        if len(current.encode()) >= 200:
            texts.append(current)
            current = ""
    return texts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--ours-cmd", default=OURS)
    ap.add_argument("--no-bench", action="store_true")
    args = ap.parse_args()
    lines = [json.loads(l) for l in args.data.read_text().splitlines() if l.strip()]

    ours = score(lines, ours_spans(lines, args.ours_cmd))
    theirs = score(lines, [contender_spans(l["text"]) for l in lines])

    def rate(t):
        return f"{t[0] / t[1]:.3f} ({t[0]:>3}/{t[1]:>3})" if t[1] else "n/a"

    print(f"{'split':8} {'kind':8} {'ours recall':>18} {'contender recall':>20}")
    for key in sorted(ours["recall"]):
        print(f"{key[0]:8} {key[1]:8} {rate(ours['recall'][key]):>18} "
              f"{rate(theirs['recall'].get(key, [0, 0])):>20}")
    print(f"{'split':8} {'':8} {'ours FP rate':>18} {'contender FP rate':>20}")
    for split in sorted(ours["fp"]):
        print(f"{split:8} {'':8} {rate(ours['fp'][split]):>18} {rate(theirs['fp'][split]):>20}")

    if not args.no_bench:
        texts = bench_texts(lines)
        total = sum(len(t.encode()) for t in texts)
        rounds, start = 0, time.perf_counter()
        while time.perf_counter() - start < 3.0:
            for t in texts:
                contender_spans(t)
            rounds += 1
        elapsed = time.perf_counter() - start
        per_text = elapsed / (rounds * len(texts))
        print(f"contender throughput: {len(texts)} texts of ~200 bytes, "
              f"{per_text * 1e6:.0f} µs per text, {total * rounds / elapsed / 1e6:.3f} MB/s "
              f"(phonenumbers x{len(REGIONS)} regions + email regex + pyap x3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
