#!/usr/bin/env python3
"""Metamorphic safety suite for consolidation: must-stay-apart pairs built from the duplicate
groups of the labelled corpora, checked against the planner in one run.

    .venv/bin/python tests/quality/metamorphic.py [--embed] [--json OUT] [--limit N]
                                                  [--show-failures [N]] [--planner CMD]

Every member of every `duplicate` group of tests/quality/corpus.json, heldout.json and (when
present and valid) heldout2.json is a *seed*. Mutation operators (below) rewrite one fact of
the seed; each mutant is paired with the seed and with every other member of its duplicate
group (a paraphrase of the seed, which makes the pair harder: the texts differ in wording AND
in one fact). Such a pair states two different facts: consolidation must neither fold it as a
duplicate nor let one text supersede the other.

Operators (deterministic: a choice is drawn from a random.Random seeded by the seed text and
the operator, so the suite is the same on every run; a mutant that leaves the content words
unchanged, or equals a member of its group, is dropped; one whose edit brings in update
language - "now", "no longer", a change verb, "correction" ... - is dropped too, except for
the `change` operator, whose whole point is update language about ANOTHER attribute):

  name        a capitalised name (sentence-initial ones and possessives too) becomes a one-edit
              variant (Mark->Mary, Anna->Anne, Bob->Rob, Grandpa->Grandma, Mrs->Mr) and a
              different name (a place another place, a surname another surname)
  possessive  the possessor changes: "Ana's laptop" -> "Ben's laptop" / "Ana's brother's laptop"
  number      a digit changed, x10, +1 (also inside times, dates, amounts, number words)
  unit        kg<->lb, km<->miles, minutes<->seconds, GB<->MB, EUR<->USD, $<->EUR, mg<->mcg,
              degC<->degF, k<->m, "a day"<->"a week" ...
  value       weekday, month, colour, direction, time of day, am/pm, season, frequency,
              ordinal, meal, kinship, language, drink, seat, carrier ...
  polarity    a negation inserted or removed ("is"->"is not", "can"->"cannot", "never",
              "doesn't"->"does", "no parking"->"parking", available<->unavailable)
  antonym     open/closed, early/late, arrive/leave, buy/sell, near/far from, likes/dislikes ...
  specific    a noun for its hyponym or hypernym (nuts<->peanuts, shellfish<->shrimp, fruit<->apples)
  identifier  an id, email, URL or host, version, room letter: "INV-2291"->"INV-2219",
              "shop.example.org"->"staging.shop.example.org", "vpn-eu-2"->"vpn-us-2"
  change      a NEWER statement with update language about a DIFFERENT attribute of the seed's
              subject ("Kwame Mensah is allergic to penicillin." + later "Kwame Mensah switched
              to the platform team."), from ~20 person / organisation templates; a template
              whose attribute the seed talks about (a "moved" template against a seed saying
              where the person lives) is skipped: that one could be a true supersession

The planner sees ALL pairs in ONE input, each pair under its own `subject` (entries of
different subjects are never merged, so each pair is an isolated cohort): mutated pairs are
planned in both directions (the mutant newer, and in a second cohort the mutant older), the
`change` pairs with the change statement newer only. A pair fails when the replayed plan
(bench.replay) leaves both of its entries in one surviving entry; a failure is a `duplicate`
merge or a `supersede`. The positive control plans the original duplicate pairs (each member
pair of each group, in creation order) the same way and counts how many fold: a harness that
never merges anything would report 0 failures and is caught by it.

Planner command: --planner, else env PLAN_CORPUS_CMD, else target/debug/examples/plan_corpus
when it exists, else bench.DEFAULT_CMD.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import json
import os
import random
import re
import shlex
import sys
import time
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
_spec = importlib.util.spec_from_file_location("quality_bench_mm", HERE / "bench.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

CORPORA = (
    ("corpus", HERE / "corpus.json"),
    ("heldout", HERE / "heldout.json"),
    ("heldout2", HERE / "heldout2.json"),  # optional: skipped when absent or not valid (yet)
)
DEBUG_ENGINE = ROOT / "target" / "debug" / "examples" / "plan_corpus"
# The engine's WordNet table (read only, to tell a sentence-initial common word from a name).
WORDNET_GLOB = "shared/lexicon/data/wordnet-synsets.tsv"

OPERATORS = ("name", "possessive", "number", "unit", "value", "polarity", "antonym", "specific",
             "identifier", "change")
MIN_PAIRS = 5000
BASE_MS = 1767225600000  # 2026-01-01T00:00:00Z
DAY_MS = 24 * 60 * 60 * 1000
GAP_MS = 3 * DAY_MS  # the newer entry of a pair comes three days after the older one


_rx = functools.lru_cache(maxsize=None)(re.compile)  # the operators' patterns, compiled once


def _finditer(pattern, text, flags=0):
    return _rx(pattern, flags).finditer(text)


def _search(pattern, text, flags=0):
    return _rx(pattern, flags).search(text)


def _match(pattern, text, flags=0):
    return _rx(pattern, flags).match(text)


def _fullmatch(pattern, text, flags=0):
    return _rx(pattern, flags).fullmatch(text)


def _findall(pattern, text, flags=0):
    return _rx(pattern, flags).findall(text)


# ----------------------------------------------------------------------------- word resources

FIRST_NAMES = sorted(set("""
Aaron Abel Ada Adam Adrian Ahmed Aida Aiden Alan Alba Alex Ali Alice Alma Amara Amir Amy Ana
Andrea Andrei Anita Ann Anna Anne Anton Arjun Arne Asha Ava Ayumi Ben Bea Beatriz Bettina Bob
Boris Brian Bruno Carl Carla Carlo Carol Clara Clare Colin Dan Dana Daniel Dara Dario Dave
David Dean Dina Dora Doris Ed Elena Eli Elin Ella Ellen Emil Emma Erik Erika Eva Eve Ezra Farid
Fatima Femi Finn Fred Freya Gemma Gideon Gina Greta Hana Hank Hanna Hannah Hans Hassan Hugo Ian
Ida Ilse Ines Inez Inga Inge Ingrid Ivan Ivy Jack Jake Jan Jana Jane Javier Jean Joan Joel John
Jon Jonah Jonas Jose Juan Jude June Kai Kaito Kara Karl Kate Kian Kim Kofi Lana Lara Lars Laura
Lea Leah Lena Leo Leon Lewis Lia Lila Lina Lisa Liv Lola Lucas Luca Lucy Luis Luke Lulu Luna
Mae Maia Mara Marc Marco Maria Marie Mark Marta Mary Mateo Mateus Matteo Max Maya Mehmet Mia
Mika Mila Milo Mina Mira Mona Nadia Nell Nerea Nia Nick Nico Nils Nina Noor Nora Oda Olga
Oliver Omar Oren Oscar Oskar Otto Paul Pedro Pilar Priya Rafa Rashid Ravi Rita Rob Robin Rosa
Rosalind Ruth Sam Sami Sara Sarah Sean Sven Tara Tess Theo Tim Tina Tobias Tom Tomas Uma Vera
Vik Yara Yuri Zara Zoe
""".split()))
SURNAMES = sorted(set("""
Adebayo Almeida Baker Banerjee Becker Brandt Carter Costa Dalton Eriksen Ferreira Fischer Garcia
Haddad Hansen Holm Ibrahim Jensen Keller Kowalski Larsen Lindgren Lindqvist Mensah Moreau Morel
Nakamura Novak Okafor Okoro Park Patel Petrov Quinn Reyes Rossi Sato Schmidt Silva Tanaka Vogel
Walsh Weber Whitcombe Whitfield Yilmaz Zhang
""".split()))
PLACES = sorted(set("""
Accra Amsterdam Antwerp Athens Barcelona Berlin Bilbao Bristol Brussels Canada Cardiff Chicago
Cologne Copenhagen Dublin Edinburgh Eindhoven Geneva Ghent Glasgow Hamburg Helsinki Kyoto Lagos
Leeds Leicester Leipzig Lisbon London Lyon Madrid Manchester Marseille Milan Munich Nairobi Osaka
Oslo Paris Porto Prague Riga Rotterdam Schiphol Seville Spain Stockholm Tallinn Tilburg Toronto
Trondheim Turin Utrecht Valencia Vienna Warsaw York Zurich Portugal Mexico Norway Ireland
""".split()))
BRANDS = sorted(set("""
Amber Beacon Birch Bramble Cedar Cobalt Copper Falcon Granite Harbour Hazel Juniper Kestrel Linden
Maple Marble Meadow Orchard Pine Quarry Raven Saffron Silver Summit Thistle Willow
""".split()))
# Hand-written one-edit neighbours (both ways), tried before the pool search.
ONE_EDIT = {"Mark": "Mary", "Mary": "Mark", "Anna": "Anne", "Anne": "Anna", "Bob": "Rob", "Rob": "Bob",
            "Grandpa": "Grandma", "Grandma": "Grandpa", "Mrs": "Mr", "Mr": "Mrs", "Uncle": "Aunt",
            "Aunt": "Uncle", "Lena": "Lina", "Nils": "Nels", "Jonas": "Jonah", "Ines": "Inez",
            "Luca": "Lucy", "Sara": "Sarah", "Leah": "Lea", "Clara": "Clare", "Dora": "Nora",
            "Ivan": "Iván", "Hugo": "Hugh", "Olga": "Olgo"}
ONE_EDIT["Ivan"] = "Ivon"  # an accent is not a different name: no Iván
TITLES = {"mr", "mrs", "ms", "dr", "doctor", "mister", "prof", "professor", "grandma", "grandpa",
          "uncle", "aunt", "auntie", "sir", "madam", "miss"}
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
WEEKDAY_ABBR = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
MONTH_ABBR = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sept", "Oct", "Nov", "Dec"]
LANGUAGES = ["English", "German", "French", "Spanish", "Italian", "Portuguese", "Dutch", "Arabic",
             "Japanese", "Polish"]
NATIONALITIES = ["Canadian", "Mexican", "Australian", "American", "British", "Irish", "Nordic",
                 "Baltic", "Chinese", "Korean"]
# Capitalised words that are never names (besides weekdays, months, languages, titles).
NOT_NAMES = {w.lower() for w in """
The A An Our Their His Her My Your We I You They He She It This That These Those There Every Each
All Any Some No Not On In At For From To Of By With Without After Before During Since Until Over
And Or But If When While Room Hall Gate Floor Building Street St Ave Avenue Lane Road Rd Park City
Express Ltd Co Inc Labs Supplies Fabrics Marine Safety Project Order Invoice Customer Customers
Celsius Fahrenheit New FYI Le La El Los Las Les Der Die Das Approx Approximately According Most
Visitors Board Meat Parking Check Send Keep Ask Talk Bring Ship Remind Use Signing Returned Red
White Quiet Twice Conference Dentist Disk Deploys Invoices Payroll Forklifts Quarterly Canadian
Nordic Kubernetes Kubernets Design Team Group Partners Systems Logistics Bank Mon Tue Wed Thu Fri
Sat Sun Sept Sous Chef Lab Correction Update Starting Beginning Going Effective Note Please Reminder Casa Calle Rue
Via Avenida Plaza Los Las San Santa Saint
""".split()}
ORG_SUFFIXES = {"ltd", "co", "inc", "labs", "supplies", "fabrics", "marine", "safety", "express",
                "gmbh", "llc", "group", "partners", "systems", "logistics", "foods", "bank", "plc", "ag", "sa"}
STREET_SUFFIXES = {"st", "street", "ave", "avenue", "lane", "road", "rd", "park", "square", "way", "drive"}
UPDATE_WORDS = {"now", "longer", "correction", "update", "starting", "beginning", "effective",
                "forward", "changed", "extended", "increased", "lowered", "moved", "postponed",
                "pushed", "raised", "rebooked", "reduced", "relocated", "renamed", "replaced",
                "rescheduled", "shortened", "switched", "updated", "anymore", "instead"}

# value words: each list is a cycle (a word becomes the next one not already in the text).
VALUE_CYCLES = [
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"],
    ["mondays", "tuesdays", "wednesdays", "thursdays", "fridays", "saturdays", "sundays"],
    [m.lower() for m in MONTHS if m != "May"] ,
    ["red", "blue", "green", "black", "white", "yellow", "grey", "orange", "purple", "brown"],
    ["north", "south", "east", "west"], ["northern", "southern", "eastern", "western"],
    ["left", "right"], ["front", "rear"], ["upstairs", "downstairs"],
    ["inbound", "outbound"], ["top", "bottom"],
    ["morning", "evening", "afternoon"], ["mornings", "evenings", "afternoons"],
    ["noon", "midnight"],
    ["spring", "summer", "autumn", "winter"],
    ["daily", "weekly", "monthly", "quarterly", "yearly"],
    ["once", "twice", "three times"],
    ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"],
    ["breakfast", "lunch", "dinner"],
    ["sister", "brother"], ["son", "daughter"], ["mother", "father"], ["mum", "dad"],
    ["wife", "husband"], ["niece", "nephew"], ["girlfriend", "boyfriend"],
    [w.lower() for w in LANGUAGES], [w.lower() for w in NATIONALITIES],
    ["coffee", "tea", "juice"], ["oat", "soy", "almond"], ["aisle", "window"],
    ["email", "phone", "text message", "letter"], ["emails", "calls", "letters"],
    ["bus", "train", "tram"], ["dhl", "ups", "fedex"], ["visa", "mastercard", "amex"],
    ["cash", "card"], ["jazz", "techno", "classical"], ["beagle", "poodle", "labrador"],
    ["collie", "terrier"], ["vegetarian", "vegan", "pescatarian"],
    ["staging", "production"],
    ["jueves", "viernes"], ["lundi", "mardi"], ["matin", "soir"], ["montag", "dienstag"],
    ["mañana", "noche"],
]
# one way only (the target has other senses or other cycles)
VALUE_ONE_WAY = {"annual": "monthly", "annually": "monthly", "nightly": "weekly", "hourly": "daily",
                 "central": "northern", "tonight": "tomorrow night", "today": "tomorrow", "prod": "staging",
                 "backup": "primary", "fall": "spring"}
# words that need their capital (or a number before them) to be value words
VALUE_NEEDS_CAPITAL = {"may", "march", "sat", "sun", "wed", "mon", "visa", "us"}

# antonyms: "a b" swaps both ways, "a > b" one way only (b has other senses, or b->a reads wrong)
ANTONYM_PAIRS = """
open/closed opens/closes opened>closed hot/cold early/late earlier/later allowed>forbidden allow/forbid
allows/forbids arrives/leaves arrived>left in_full>in_part lands/departs landed/departed buy/sell buys/sells
bought/sold purchased>sold accept/reject accepts/rejects accepted/rejected increase/decrease
increases/decreases likes/dislikes like>dislike enjoys>hates loves/hates wants>refuses quiet/noisy
silent/loud long/short lengthy>short slow/fast sluggish>fast broken/working faulty>working
frequently>rarely often/rarely always>never before/after required/optional mandatory>optional
more/less cheap/expensive inside/outside above/below start/finish starts/finishes begin/end
incoming/outgoing import/export upload/download sent/received senior/junior older/younger heavy/light
high/low higher/lower maximum/minimum max/min wet/dry clean/dirty empty/full public/private
internal/external online/offline enabled/disabled present/absent easy/hard formal/casual
afraid>fond fear>love wide/narrow cracked>intact frozen>allowed requested>declined stolen>returned
safe/dangerous first>last near>far_from close_to>far_from away_from>next_to shared>private
fluent>hesitant biggest/smallest main>minor primary>secondary
"""
ANTONYMS: dict[str, str] = {}
for _pair in ANTONYM_PAIRS.split():
    _a, _sep, _b = re.split(r"([/>])", _pair)
    _a, _b = _a.replace("_", " "), _b.replace("_", " ")
    ANTONYMS.setdefault(_a, _b)
    if _sep == "/":
        ANTONYMS.setdefault(_b, _a)

# noun -> hyponym / hypernym (a more specific or more general statement is another fact)
SPECIFIC = {
    "nuts": "peanuts", "peanuts": "nuts", "shellfish": "shrimp", "shrimp": "shellfish",
    "fruit": "apples", "apples": "fruit", "meat": "pork", "pork": "meat", "beef": "meat",
    "fish": "salmon", "salmon": "fish", "penicillin": "antibiotics", "antibiotics": "penicillin",
    "medicine": "insulin", "medication": "insulin", "insulin": "medication", "coffee": "espresso",
    "espresso": "coffee", "tea": "green tea", "green tea": "tea", "oat milk": "milk",
    "wine": "red wine", "red wine": "wine", "alcohol": "beer", "beer": "alcohol", "dogs": "pets",
    "beagle": "dog", "collie": "dog", "dog": "beagle", "cat": "pet", "cats": "pets", "pets": "cats",
    "laptop": "computer", "computer": "laptop", "sofa": "furniture", "couch": "furniture",
    "furniture": "chairs", "standing desk": "desk", "plants": "cacti",
    "car": "vehicle", "vehicle": "car", "forklifts": "vehicles", "luggage": "suitcase",
    "baggage": "suitcase", "suitcase": "luggage", "documents": "contracts", "contracts": "documents",
    "receipts": "documents", "slide deck": "document", "presentation": "document",
    "jazz playlists": "playlists", "music": "jazz", "gala": "event", "event": "gala",
    "boiler": "appliance", "printer": "device", "scanner": "device", "dentist": "doctor",
    "doctor": "dentist", "flight": "trip", "flights": "trips", "long flights": "flights",
    "ryokan": "hotel", "bakery": "shop", "lentil soup": "soup",
    "soup": "lentil soup", "vegetables": "carrots", "carrots": "vegetables", "chocolate": "sweets",
    "sweets": "chocolate", "eggs": "dairy", "dairy": "milk", "flowers": "roses", "roses": "flowers",
    "flyers": "brochures",
}

PERSON_TEMPLATES = [
    ("{S} switched to the platform team.", r"team|manag|reports?\b|role|job|department|dept|sales|finance|on-call|rota|works?\b"),
    ("{S} moved to the Lisbon office.", "LOCATION"),
    ("Starting Monday, {S} is on parental leave.", r"leave|holiday|vacation|\boff\b|absen|works from home|parental"),
    ("{S} changed their phone number to 0161 496 0772.", r"phone|number|call|mobile|contact|e-?mail"),
    ("{S} updated their email address to {slug}.new@example.net.", r"phone|call|mobile|contact|e-?mail|address"),
    ("{S} has been promoted to team lead.", r"team|role|manag|lead|title|job|position|owner"),
    ("{S} replaced their laptop with a new ThinkPad.", r"laptop|computer|loaner|device|labtop"),
    ("Correction: {S} starts the new contract on 1 June.", r"contract|\bstarts?\b|begins?|join|hired|commence"),
    ("As of today, {S} reports to Fatima Haddad.", r"reports?\b|manag|team|boss|lead|haddad|fatima"),
    ("From now on, {S} works the early shift.", r"shift|works?\b|hours|schedul|morning|afternoon|evening|rota|on-call|early"),
    ("{S} is now based in the Madrid office.", "LOCATION"),
    ("{S} switched dentists to Dr. Moreau.", r"dentist|doctor|\bdr\b|clinic|appointment|appt|physio|medic|moreau"),
    ("{S} rescheduled the quarterly check-in to Friday.", r"check-in|meeting|review|sync|schedul|appointment|appt|friday|call|mtg"),
    ("{S} changed their surname to Whitfield.", r"\bname|surname|called|whitfield"),
    ("{S} is no longer on the hiring panel.", r"hiring|panel|interview"),
    ("Going forward, {S} handles the Benelux accounts.", r"account|customer|client|handles|owns|manag|benelux"),
    ("{S} moved house to Elm Road.", "LOCATION"),
    ("{S} increased their weekly hours to 32.", r"hours|week|part-time|works?\b|schedul"),
    ("Update: {S} now drives an electric car.", r"\bcar\b|drives?|commute|parking|vehicle|train|bike"),
    ("{S} switched gyms to the one on Kestrel Avenue.", r"gym|sport|fitness|kestrel|exercise|swim"),
]
ORG_TEMPLATES = [
    ("{S} moved its headquarters to Rotterdam.", "LOCATION"),
    ("{S} switched its bank to Rabobank.", r"bank|transfer"),
    ("{S} changed its billing contact to billing@{slug}.example.", r"billing|contact|e-?mail|inbox|accounts payable|invoice"),
    ("{S} replaced its CEO.", r"ceo|chief|director|owner|owned"),
    ("As of March, {S} is a gold-tier partner.", r"partner|tier|competitor|rival"),
    ("{S} renamed its product line to Horizon.", r"product|\bname|brand"),
    ("Starting next quarter, {S} ships from a new warehouse in Porto.", r"ship|warehouse|deliver|inspect|porto"),
    ("{S} has now opened a second store in Porto.", r"store|shop|bakery|opened|porto"),
    ("{S} switched to Xero for its accounting.", r"accounting|bookkeep|finance|software|tool"),
    ("{S} changed its support hours to 8:00-18:00.", r"support|hours|ticket|opens?\b|closes?\b"),
    ("Going forward, {S} is on the Enterprise plan.", r"plan\b|subscription|tier|pays?\b|paid"),
    ("{S} updated its VAT number to NL8521.07.334.B01.", r"vat|tax|number"),
]
PROJECT_TEMPLATES = [
    ("{S} switched its budget code to BX-7781.", r"budget|cost|code"),
    ("{S} changed its executive sponsor to Fatima Haddad.", r"sponsor|owner|owned|lead|manag"),
    ("Starting next week, {S} is tracked in Jira.", r"jira|track|board|ticket"),
    ("Correction: {S} is owned by the platform group.", r"owner|owned|team|group|platform"),
]
LOCATION = (r"\blives?\b|living|based|office|offices|\bhq\b|headquarters|clinic|\bflat\b|apartment|house|"
            r"home|address|located|moved|city|station|works? (?:from|in|at)|warehouse|depot|site|"
            r"branch|\bin (?:[A-Z]\w+)|lisbon|madrid|rotterdam|elm road|born")


# --------------------------------------------------------------------------------- text helpers


def fold(s: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", s) if not unicodedata.combining(c)).lower()


def like(src: str, new: str) -> str:
    """`new` in the case pattern of `src` (ALL CAPS, Capitalised, lower)."""
    letters = [c for c in src if c.isalpha()]
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return new.upper()
    if letters and src[0].isupper():
        return new[:1].upper() + new[1:]
    if letters and all(c.islower() for c in letters):
        return new.lower()
    return new


def splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def rng_for(*parts: str) -> random.Random:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def edit1(a: str, b: str) -> bool:
    """Whether a and b are exactly one edit (substitute, insert, delete) apart."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i:] == b[i + 1:]


def levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


@functools.lru_cache(maxsize=1)
def _lexicon() -> tuple[frozenset, frozenset]:
    """WordNet's common lemmas and proper lemmas (the engine's table, read only)."""
    common, proper = set(), set()
    paths = sorted(ROOT.glob(WORDNET_GLOB))
    if not paths:
        raise RuntimeError(f"metamorphic: no {WORDNET_GLOB} under {ROOT} (the engine's WordNet table)")
    with open(paths[0], encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                continue
            cols = line.rstrip("\n").split("\t")
            # The last column is the kind ("c" common, "p" only a name) and then the parts
            # of speech ("cn", "pn").
            (common if cols[-1].startswith("c") else proper).add(cols[0])
    return frozenset(common), frozenset(proper)


def is_common_word(w: str) -> bool:
    common, _ = _lexicon()
    w = w.lower()
    forms = {w, w[:-1] if w.endswith("s") else w, w[:-2] if w.endswith("es") else w,
             w[:-3] + "y" if w.endswith("ies") else w, w[:-2] if w.endswith("ed") else w,
             w[:-1] if w.endswith("ed") else w, w[:-3] if w.endswith("ing") else w,
             w[:-3] + "e" if w.endswith("ing") else w}
    return any(f in common for f in forms)


WORD = re.compile(r"[^\W\d_]+(?:[-'\u2019][^\W\d_]+)*", re.UNICODE)
POSSESSIVE = re.compile(r"^(.+?)(['\u2019]s|s['\u2019])$")


@dataclass
class Word:
    start: int
    end: int
    text: str  # the whole word as written ("Mark's")
    base: str  # without a possessive ending ("Mark")
    possessive: bool


def words(text: str) -> list[Word]:
    out = []
    for m in WORD.finditer(text):
        w = m.group(0)
        p = POSSESSIVE.match(w)
        if p and len(p.group(1)) > 1:
            out.append(Word(m.start(), m.start() + len(p.group(1)), w, p.group(1), True))
        else:
            out.append(Word(m.start(), m.end(), w, w, False))
    return out


def sentence_start(text: str, pos: int) -> bool:
    before = text[:pos].rstrip()
    return not before or before[-1] in ".!?:;\u2014-\u2013\"\u201c("


# ------------------------------------------------------------------------------------ names


def group_names(texts: list[str]) -> set[str]:
    """Lower-case bases of the words that are names in some member of the group (so that a
    lower-case or ALL-CAPS member's names are found too)."""
    found: set[str] = set()
    for text in texts:
        ws = words(text)
        for i, w in enumerate(ws):
            if _is_name(text, ws, i):
                found.add(w.base.lower())
    return {n for n in found if not (n.endswith("s") and n[:-1] in found)}


def _is_name(text: str, ws: list[Word], i: int) -> bool:
    w = ws[i]
    b = w.base
    letters = [c for c in b if c.isalpha()]
    if len(letters) < 2 or not b[0].isupper() or all(c.isupper() for c in letters):
        return False  # lower case, one letter, or an acronym
    low = b.lower()
    if low in NOT_NAMES or low in TITLES or low in ORG_SUFFIXES or low in STREET_SUFFIXES:
        return False
    if b in WEEKDAYS or b.rstrip("s") in WEEKDAYS or b in MONTHS or b in LANGUAGES or b in NATIONALITIES:
        return False
    if i and ws[i - 1].base in ("Los", "Las", "New", "San", "Santa", "Saint"):
        return False  # part of a place name ("Los Angeles", "New York")
    if b in FIRST_NAMES or b in SURNAMES or b in PLACES:
        return True
    if "-" in b and any(is_common_word(part) for part in b.split("-")):
        return False  # "Check-out", "Sous-chef"
    if len(low) >= 4 and any(levenshtein(low, v.lower()) <= (2 if len(low) >= 6 else 1)
                             for v in WEEKDAYS + MONTHS + LANGUAGES):
        return False  # "Wendesday", "Septmber": a misspelt value word, not a name
    if not is_common_word(b):
        return True
    if sentence_start(text, w.start):
        return False  # "Deploys", "Returned", "Reception's": sentence case, not a name
    # A capitalised common word mid-sentence is a name only as part of a business, street or
    # project name ("Harbour St", "Fox & Anchor", "Project Bluebird"), not in a spelt-out
    # acronym ("Parent Teacher Association", "European Union").
    prev = ws[i - 1].base.lower() if i else ""
    nxt = ws[i + 1].base.lower() if i + 1 < len(ws) else ""
    amp = "&" in text[max(0, w.start - 3):w.start] or "&" in text[w.end:w.end + 3]
    return amp or nxt in ORG_SUFFIXES or nxt in STREET_SUFFIXES or prev in ("project", "casa", "calle", "osteria")



def name_spans(text: str, known: set[str]) -> list[tuple[Word, str]]:
    """(word, role) for every name of the text; role: first, surname, place, brand, title."""
    ws = words(text)
    out = []
    for i, w in enumerate(ws):
        low = w.base.lower()
        base_s = low[:-1] if low.endswith("s") and not w.possessive else None
        if low in TITLES and low in ("grandma", "grandpa", "mrs", "mr", "uncle", "aunt"):
            if w.base[0].isupper() or low in known:
                out.append((w, "title"))
            continue
        if base_s and base_s in known:  # "Svens favourite", "ahmeds birthday"
            w = Word(w.start, w.start + len(base_s), w.text, w.text[:len(base_s)], True)
            is_name = True
        else:
            is_name = _is_name(text, ws, i) or (low in known and len(low) > 1)
        if not is_name:
            continue
        prev = ws[i - 1] if i else None
        nxt = ws[i + 1] if i + 1 < len(ws) else None
        gap_prev = text[prev.end:w.start] if prev else ""
        if w.base in PLACES or fold(w.base).capitalize() in PLACES:
            role = "place"
        elif prev is not None and prev.base.lower() in ("project", "casa", "calle", "rue", "via", "osteria", "avenida", "plaza"):
            role = "brand"
        elif nxt is not None and nxt.base.lower() in ORG_SUFFIXES | STREET_SUFFIXES | {"project"}:
            role = "brand"
        elif prev is not None and prev.base.lower() in TITLES and gap_prev.strip(" .") == "":
            role = "surname"
        elif prev is not None and not prev.possessive and gap_prev == " " and \
                any(p is prev for p, r in [(x, y) for x, y in out if y in ("first",)]):
            role = "surname"
        elif w.base in SURNAMES:
            role = "surname"
        else:
            role = "first"
        out.append((w, role))
    return out


def _pool(role: str) -> list[str]:
    return {"first": FIRST_NAMES, "surname": SURNAMES, "place": PLACES, "brand": BRANDS}[role]


def one_edit_name(name: str, role: str, taken: set[str]) -> str | None:
    if name in ONE_EDIT and fold(ONE_EDIT[name]) not in taken:
        return ONE_EDIT[name]
    if role in ("place", "brand") or (is_common_word(name) and name not in FIRST_NAMES + SURNAMES):
        return None  # a misspelt word, not another name
    for cand in FIRST_NAMES + SURNAMES:
        if edit1(cand, name) and fold(cand) != fold(name) and fold(cand) not in taken:
            return cand
    # No pool neighbour: change the first vowel ("Tomás" -> "Tamás", "Kofi" -> "Kafi").
    swap = {"a": "e", "e": "a", "i": "a", "o": "a", "u": "o", "y": "i"}
    for k, c in enumerate(name):
        f = fold(c)
        if f in swap:
            new = name[:k] + (swap[f].upper() if c.isupper() else swap[f]) + name[k + 1:]
            if fold(new) not in taken:
                return new
    return None


def other_name(name: str, role: str, taken: set[str], rng: random.Random) -> str:
    pool = [p for p in _pool(role) if fold(p) not in taken and fold(p) != fold(name)
            and not edit1(fold(p), fold(name))]
    return rng.choice(pool)


# --------------------------------------------------------------------------------- operators

@dataclass
class Mutant:
    op: str
    text: str
    detail: str


def op_name(text: str, ctx: "Ctx") -> list[Mutant]:
    out = []
    spans = name_spans(text, ctx.names)
    done = set()
    for w, role in spans:
        base = w.base
        if base.lower() in done:
            continue
        done.add(base.lower())
        rng = rng_for(text, "name", base)
        canon = base if not (base.islower() or base.isupper()) else base.capitalize()
        if role == "title":
            new = ONE_EDIT.get(canon.rstrip("."))
            cands = [(new, "one-edit")] if new else []
        else:
            cands = [(one_edit_name(canon, role, ctx.taken), "one-edit"),
                     (other_name(canon, role, ctx.taken, rng), "other")]
        for new, how in cands:
            if not new:
                continue
            mutated = _replace_word_everywhere(text, base, new, ctx)
            out.append(Mutant("name", mutated, f"{base}->{like(base, new)} ({how} {role})"))
    return out


def _replace_word_everywhere(text: str, base: str, new: str, ctx: "Ctx") -> str:
    pieces, last = [], 0
    for w in words(text):
        if w.base.lower() == base.lower() or (w.text.lower() == base.lower() + "s" and base.lower() in ctx.names):
            pieces.append(text[last:w.start])
            pieces.append(like(text[w.start:w.start + len(base)], new))
            last = w.start + len(base)
    pieces.append(text[last:])
    return "".join(pieces)


POSSESSOR_SWAPS = {"team": {"design": "marketing", "sales": "support", "support": "sales", "data": "security",
                            "finance": "legal", "legal": "finance", "ops": "platform"},
                   "cabin": "boathouse", "reception": "security", "company": "landlord",
                   "client": "supplier", "customer": "supplier", "office": "warehouse"}


def op_possessive(text: str, ctx: "Ctx") -> list[Mutant]:
    out = []
    ws = words(text)
    names = {w.start: role for w, role in name_spans(text, ctx.names)}
    for i, w in enumerate(ws):
        if not w.possessive and not (w.start in names and text[w.start + len(w.base):w.start + len(w.base) + 1] == "s"):
            continue
        end_poss = w.start + len(w.text)
        rng = rng_for(text, "possessive", w.base)
        if w.start in names and names[w.start] != "title":
            canon = w.base if not (w.base.islower() or w.base.isupper()) else w.base.capitalize()
            new = other_name(canon, names[w.start], ctx.taken, rng)
            out.append(Mutant("possessive", splice(text, w.start, w.start + len(w.base), like(w.base, new)),
                              f"{w.base}'s->{new}'s"))
            kin = rng.choice(["sister's", "brother's", "manager's", "neighbour's"])
            if w.possessive:
                kin = kin.upper() if w.base.isupper() else kin
                out.append(Mutant("possessive", splice(text, end_poss, end_poss, " " + kin), f"{w.base}'s->{w.base}'s {kin}"))
        else:
            low = w.base.lower()
            swap = POSSESSOR_SWAPS.get(low)
            if isinstance(swap, dict) and i and ws[i - 1].base.lower() in swap:
                prev = ws[i - 1]
                new = swap[prev.base.lower()]
                out.append(Mutant("possessive", splice(text, prev.start, prev.end, like(prev.base, new)),
                                  f"{prev.base} {low}'s->{new} {low}'s"))
            elif isinstance(swap, str):
                out.append(Mutant("possessive", splice(text, w.start, w.start + len(w.base), like(w.base, swap)),
                                  f"{w.base}'s->{swap}'s"))
    return out


NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
                "eighteen", "nineteen", "twenty"]
NUMBER_TOKEN = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\d])")
ORDINAL_SUFFIX = re.compile(r"^(st|nd|rd|th)\b")
MONTH_RE = "|".join(MONTHS + [a for a in MONTH_ABBR if a != "May"] + ["Sep"])
VALID = {"hour": range(0, 24), "hour12": range(1, 13), "minute": range(0, 60), "day": range(1, 29),
         "month": range(1, 13)}


def _ordinal(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def number_role(text: str, s: int, e: int) -> str:
    """What the digit run text[s:e] is: hour, hour12, minute, day, month, year, decimal, id,
    phone or quantity (only a quantity is multiplied by ten)."""
    before, after, run = text[:s], text[e:], text[s:e]
    ts, te = s, e  # the whole token of digits and inner separators
    while ts > 0 and (text[ts - 1].isdigit() or (text[ts - 1] in "/.-:" and ts > 1 and text[ts - 2].isdigit())):
        ts -= 1
    while te < len(text) and (text[te].isdigit() or (text[te] in "/.-:" and te + 1 < len(text) and text[te + 1].isdigit())):
        te += 1
    tok = text[ts:te]
    parts = _findall(r"\d+", tok)
    index = len(_findall(r"\d+", text[ts:s]))
    if _fullmatch(r"\d{4}-\d{1,2}-\d{1,2}", tok):
        return ("year", "month", "day")[index]
    if _fullmatch(r"\d{1,2}[/.]\d{1,2}[/.]\d{2,4}", tok):
        return ("day", "month", "year")[index]
    if _fullmatch(r"\d{1,2}:\d{2}", tok):
        if index == 1:
            return "minute"
        return "hour12" if _match(r"\s?(am|pm|a\.m\.|p\.m\.)", text[te:], re.I) else "hour"
    if _fullmatch(r"\d+\.\d+", tok):
        return "decimal"
    if _search(r"[A-Za-z]-?$", before) or before.endswith("#") or _match(r"[A-Za-z]", after) and \
            not _match(r"(st|nd|rd|th|k|m|s|h|ms|cm|mm|km|kg|lb|mg|ml|gb|mb|tb|min|am|pm)\b", after, re.I):
        return "id"
    if before.endswith("+") or len(run) >= 7 or _match(r"\s\d{3,}\s\d{3,}", after) or \
            _search(r"\d{3,}\s$", before) and len(parts) == 1 and _search(r"phone|\+", before):
        return "phone"
    if _fullmatch(r"(19|20)\d\d", run) and not _search(r"[$€£]\s?$", before):
        return "year"
    if _search(r"\b(?:" + MONTH_RE + r")\.?\s+$", before) or \
            _match(r"(?:st|nd|rd|th)?\s+(?:of\s+)?(?:" + MONTH_RE + r")\b", after):
        return "day"
    if _match(r"\s?(am|pm|a\.m\.|p\.m\.)(?!\w)", after, re.I):
        return "hour12"
    if _search(r"\b(at|before|after|until|till|from)\s+$", before, re.I) and int(run) <= 24 and \
            not _match(r"\s*(?:%|°|[A-Z]|(?:degrees|percent|per|units|people|guests|items|km|kg|mg|m|cm|"
                         r"euros?|dollars?|pounds?|minutes?|seconds?|hours?|days?|weeks?)\b)", after):
        return "hour"
    return "quantity"


def op_number(text: str, ctx: "Ctx") -> list[Mutant]:
    out = []
    for m in list(_finditer(r"\d+", text))[:5]:
        s, e = m.span()
        run = m.group(0)
        role = number_role(text, s, e)
        suffix = ORDINAL_SUFFIX.match(text[e:])

        def fix(new_run: str) -> str:
            t = splice(text, s, e, new_run)
            if suffix:
                t = splice(t, s + len(new_run), s + len(new_run) + len(suffix.group(1)), _ordinal(int(new_run)))
            return t

        d, n, f = int(run[-1]), int(run), int(run[0])
        cands = [("digit", run[:-1] + str(d + 1 if d < 9 else d - 1)),
                 ("+1", str(n + 1).zfill(len(run) if run.startswith("0") else 0)),
                 ("digit", run[:-1] + str(d - 1 if d > 0 else d + 1)),
                 ("-1", str(n - 1).zfill(len(run) if run.startswith("0") else 0) if n > 0 else run),
                 ("digit", (str(f - 1) if f > 1 else str(f + 1)) + run[1:] if len(run) > 1 else run)]
        made = 0
        for how, new_run in cands:
            if made == 2 or new_run == run:
                continue
            if role in VALID and int(new_run) not in VALID[role]:
                continue
            if new_run.startswith("0") and not run.startswith("0") and _match(r"[,.]\d", text[e:]):
                continue  # "$0,250"
            mutated = fix(new_run)
            if any(mu.text == mutated for mu in out):
                continue
            out.append(Mutant("number", mutated, f"{run}->{new_run} ({how}, {role})"))
            made += 1
        if role == "quantity":
            full = NUMBER_TOKEN.match(text, s)
            if full and full.start() == s:
                tok = full.group(1)
                new_tok = _times10(tok)
                out.append(Mutant("number", splice(text, s, full.end(), new_tok), f"{tok}->{new_tok} (x10)"))
    for m in _finditer(r"\b(" + "|".join(NUMBER_WORDS[1:]) + r")\b", text, re.I):
        w = m.group(1)
        k = NUMBER_WORDS.index(w.lower())
        new = NUMBER_WORDS[k + 1] if k + 1 < len(NUMBER_WORDS) else NUMBER_WORDS[k - 1]
        if w.lower() == "one" and not _match(r"\s+(?:of|another|day|week|month|year|\w+s)\b", text[m.end():]):
            continue  # "one" as a pronoun
        out.append(Mutant("number", splice(text, m.start(), m.end(), like(w, new)), f"{w}->{new} (word)"))
    return out


def _times10(tok: str) -> str:
    if "," in tok:
        return f"{int(tok.replace(',', '')) * 10:,}"
    if "." in tok:
        a, b = tok.split(".")
        v = a + b[0] + ("." + b[1:] if len(b) > 1 else "")
        return v.lstrip("0") or "0"
    return tok + "0"


UNIT_SWAPS = [
    (r"(?<=\d)(\s?)(kg)\b", "lb"), (r"(?<=\d)(\s?)(lbs?)\b", "kg"), (r"(?<=\d)(\s)(kilograms?)\b", "pounds"),
    (r"(?<=\d)(\s?)(km)\b", "miles"), (r"(?<=\d)(\s)(miles?)\b", "km"),
    (r"(?<=\d)(\s)(kilomet(?:re|er)s?)\b", "miles"), (r"(?<=\d)(\s?)(m)\b(?!\.)", "ft"),
    (r"(?<=\d)(\s?)(cm)\b", "mm"), (r"(?<=\d)(\s?)(mm)\b", "cm"), (r"(?<=\d)(\s)(met(?:re|er)s?)\b", "feet"),
    (r"(?<=\d)([\s-])(minutes?)\b", "second"), (r"(?<=\d)([\s-])(mins?)\b", "sec"),
    (r"(?<=\d)([\s-])(seconds?)\b", "minute"), (r"(?<=\d)([\s-])(secs?)\b", "min"),
    (r"(?<=\d)(\s)(s)\b", "min"), (r"(?<=\d)(\s?)(ms)\b", "s"), (r"(?<=\d)([\s-])(hours?)\b", "day"),
    (r"(?<=\d)([\s-])(days?)\b", "week"), (r"(?<=\d)([\s-])(weeks?)\b", "month"),
    (r"(?<=\d)([\s-])(months?)\b", "year"), (r"(?<=\d)([\s-])(years?)\b", "month"),
    (r"(?<=\d)(\s?)(GB)\b", "MB"), (r"(?<=\d)(\s?)(MB)\b", "GB"), (r"(?<=\d)(\s?)(TB)\b", "GB"),
    (r"\b()(EUR)\b", "USD"), (r"\b()(USD)\b", "EUR"), (r"\b()(GBP)\b", "EUR"), (r"\b()(CHF)\b", "EUR"),
    (r"(?<=\d)(\s)(euros?)\b", "dollars"), (r"(?<![Cc]anadian )(?<!US )(?<=\d|k)(\s)(dollars?)\b", "euros"),
    (r"()(Canadian dollars)\b", "US dollars"), (r"()(€)(?=\s?\d)", "$"), (r"()(\$)(?=\s?\d)", "€"),
    (r"()(£)(?=\s?\d)", "€"), (r"(?<=\d)(\s?)(mg)\b", "mcg"), (r"(?<=\d)(\s?)(mcg|µg)\b", "mg"),
    (r"(?<=\d)(\s?)(ml)\b", "l"), (r"(?<=\d)(\s?)(°C)", "°F"), (r"(?<=\d)(\s?)(°F)", "°C"),
    (r"()(degrees Celsius)\b", "degrees Fahrenheit"), (r"()(degrees Fahrenheit)\b", "degrees Celsius"),
    (r"(?<=\d)()(k)\b", "m"), (r"(?<=\d)()(K)\b", "M"),
    (r"(\b(?:a|an|per|each|every|once a|twice a)\s)(day)\b", "week"),
    (r"(\b(?:a|an|per|each|every)\s)(week)\b", "month"),
    (r"(\b(?:a|an|per|each|every)\s)(month)\b", "week"),
    (r"(\b(?:a|an|per|each|every)\s)(year)\b", "month"),
    (r"(\b(?:a|an|per|each|every)\s)(quarter)\b", "month"),
    (r"(\b(?:two|three|four|five|six|several)\s)(months)\b", "weeks"),
    (r"(\b(?:two|three|four|five|six|several)\s)(weeks)\b", "days"),
]


PLURAL_UNITS = {"second", "minute", "hour", "day", "week", "month", "year", "mile", "euro", "dollar",
                "pound", "kilogram", "metre", "meter", "kilometre", "kilometer"}


def op_unit(text: str, ctx: "Ctx") -> list[Mutant]:
    out = []
    for pattern, new in UNIT_SWAPS:
        flags = 0 if _search(r"[A-Z€$£°]", new + pattern) else re.I  # "GB", "EUR", "k"/"K": as written
        for m in _finditer(pattern, text, flags):
            old = m.group(2)
            repl = new
            if old.endswith("s") and old.lower() not in ("ms", "s", "lbs") and repl in PLURAL_UNITS:
                repl = new + "s"
            if repl.lower() == old.lower():
                continue
            repl = like(old, repl) if old.isalpha() and not old.isupper() else repl
            out.append(Mutant("unit", splice(text, m.start(2), m.end(2), repl), f"{old}->{repl}"))
    return out


def op_value(text: str, ctx: "Ctx") -> list[Mutant]:
    out = []
    lowered = text.lower()
    cycles = {}
    for cycle in VALUE_CYCLES:
        for word in cycle:
            cycles.setdefault(word, cycle)
    for word in list(cycles) + list(VALUE_ONE_WAY):
        pat = r"(?<![\w-])" + re.escape(word) + r"(?![\w'-])"
        for m in _finditer(pat, text, re.I):
            src = m.group(0)
            if word in VALUE_NEEDS_CAPITAL and not src[0].isupper():
                continue
            if word == "fall" and not _search(r"\bthe\s$", text[:m.start()], re.I):
                continue
            if word in VALUE_ONE_WAY:
                new = VALUE_ONE_WAY[word]
                if _search(r"(?<!\w)" + re.escape(new) + r"(?!\w)", lowered):
                    continue
            else:
                cycle = cycles[word]
                cands = [c for c in cycle if c != word and not _search(r"(?<!\w)" + re.escape(c) + r"(?!\w)", lowered)]
                if not cands:
                    continue
                nxt = cycle[(cycle.index(word) + 1) % len(cycle)]
                new = nxt if nxt in cands else rng_for(text, "value", word, str(m.start())).choice(cands)
            out.append(Mutant("value", splice(text, m.start(), m.end(), like(src, new)), f"{src}->{like(src, new)}"))
    # am <-> pm after a number; weekday/month abbreviations with a capital
    for m in _finditer(r"(?<=\d)(\s?)(am|pm|a\.m\.|p\.m\.|AM|PM)(?!\w)", text):
        old = m.group(2)
        new = {"am": "pm", "pm": "am", "a.m.": "p.m.", "p.m.": "a.m.", "AM": "PM", "PM": "AM"}[old]
        out.append(Mutant("value", splice(text, m.start(2), m.end(2), new), f"{old}->{new}"))
    for abbrs in (WEEKDAY_ABBR, MONTH_ABBR):
        for m in _finditer(r"\b(" + "|".join(abbrs) + r")(\.|\b)", text):
            old = m.group(1)
            if old == "May" or (abbrs is MONTH_ABBR and not m.group(2) == "." and old in ("Mar", "Jun", "Jul")):
                continue
            new = abbrs[(abbrs.index(old) + 1) % len(abbrs)]
            if _search(r"\b" + new + r"\b", text):
                continue
            out.append(Mutant("value", splice(text, m.start(1), m.end(1), new), f"{old}->{new}"))
    return out


AUX = r"is|are|was|were|will|can|must|should|could|would|does|do|did|has|have|had|may|might"
NEG_CONTRACTIONS = {"doesn't": "does", "don't": "do", "didn't": "did", "isn't": "is", "aren't": "are",
                    "wasn't": "was", "weren't": "were", "can't": "can", "won't": "will", "haven't": "have",
                    "hasn't": "has", "hadn't": "had", "shouldn't": "should", "couldn't": "could",
                    "wouldn't": "would", "mustn't": "must"}
UN_PREFIX = {"available": "unavailable", "paid": "unpaid", "locked": "unlocked", "frozen": "unfrozen",
             "reliable": "unreliable", "known": "unknown", "usual": "unusual", "official": "unofficial",
             "signed": "unsigned", "encrypted": "unencrypted", "insured": "uninsured",
             "vaccinated": "unvaccinated", "married": "unmarried", "attended": "unattended",
             "restricted": "unrestricted", "limited": "unlimited", "refundable": "non-refundable",
             "damaged": "undamaged", "safe": "unsafe", "responsive": "unresponsive",
             "allowed": "disallowed", "approved": "unapproved", "finished": "unfinished",
             "happy": "unhappy", "likely": "unlikely", "comfortable": "uncomfortable", "fit": "unfit"}
UN_PREFIX.update({v: k for k, v in list(UN_PREFIX.items())})
UN_CONTEXT = {"is", "are", "was", "were", "be", "been", "being", "the", "a", "an", "still", "remains",
              "remain", "stays", "stay", "not", "isn't", "aren't", "wasn't", "weren't", "currently", "fully",
              "completely", "always", "never", "now", "totally", "its", "their", "his", "her", "our", "my"}
PARTICIPLES = {"been", "got", "gotten", "run", "paid", "left", "gone", "made", "sent", "done", "built",
               "kept", "sold", "bought", "seen", "taken", "given", "found", "lost", "stolen", "shown"}
IRREGULAR_PAST = {"bought", "took", "left", "went", "got", "made", "sent", "paid", "kept", "sold", "ran", "saw",
                  "spent", "lost", "found", "met", "told", "said", "gave", "came", "wrote", "drove", "flew",
                  "ate", "drank", "won", "brought", "built", "chose", "forgot", "knew", "led", "lent", "read",
                  "sat", "slept", "spoke", "stood", "taught", "thought", "understood", "wore"}
NOT_VERB_AFTER_NAME = {"and", "or", "is", "are", "was", "were", "has", "have", "had", "will", "can", "does",
                       "do", "did", "must", "should", "could", "would", "never", "not", "also", "always",
                       "the", "a", "an", "to", "of", "in", "on", "at", "for", "with", "from", "by", "may"}


def op_polarity(text: str, ctx: "Ctx") -> list[Mutant]:
    out = []
    # removals
    for m in _finditer(r"\b(\w+)n['\u2019]t\b", text, re.I):
        whole = m.group(0)
        key = whole.lower().replace("\u2019", "'")
        if key in NEG_CONTRACTIONS:
            new = like(whole, NEG_CONTRACTIONS[key])
            out.append(Mutant("polarity", splice(text, m.start(), m.end(), new), f"{whole}->{new}"))
    for m in _finditer(r"\b(can)\s?(not)\b", text, re.I):
        out.append(Mutant("polarity", splice(text, m.start(), m.end(), m.group(1)), f"{m.group(0)}->{m.group(1)}"))
    for m in _finditer(r"\b(" + AUX.replace("|can", "") + r")(\s+)(not)\b", text, re.I):
        out.append(Mutant("polarity", splice(text, m.end(1), m.end(3), ""), f"{m.group(0)}->{m.group(1)}"))
    for m in _finditer(r"\s(never)\b", text, re.I):
        out.append(Mutant("polarity", splice(text, m.start(), m.end(), ""), "never->(removed)"))
    for m in _finditer(r"\b(no)\s+(?=[a-z])", text, re.I):
        if _match(r"longer\b", text[m.end():], re.I):
            continue
        out.append(Mutant("polarity", splice(text, m.start(), m.end(), ""), "no X->X"))
    for m in _finditer(r"\bwithout\b", text, re.I):
        out.append(Mutant("polarity", splice(text, m.start(), m.end(), like(m.group(0), "with")), "without->with"))
    # un- prefixes
    for word, new in UN_PREFIX.items():
        for m in _finditer(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text, re.I):
            prev = _search(r"([\w'\u2019]+)\s+$", text[:m.start()])
            if not prev or prev.group(1).lower().replace("\u2019", "'") not in UN_CONTEXT:
                continue  # "Halvorsen Ltd paid invoice ...": a verb, not the adjective
            if _match(r"\s+(?:off|up|in|out)\b", text[m.end():], re.I):
                continue  # "signed off"
            out.append(Mutant("polarity", splice(text, m.start(), m.end(), like(m.group(0), new)), f"{m.group(0)}->{new}"))
    # insertions: the first auxiliary or modal not negated yet
    negated = _search(r"n['\u2019]t\b|\bnot\b|\bnever\b|\bcannot\b|\bno\b(?!\s+longer)|\bwithout\b", text, re.I)
    m = None
    for cand in _finditer(r"\b(" + AUX + r")\b(?!\s+not\b)(?!n['\u2019]t)", text, re.I):
        if cand.group(1) in ("May", "Might") and not sentence_start(text, cand.start()) or cand.group(1) == "MAY":
            continue  # the month
        m = cand
        break
    if m and not negated:
        aux = m.group(1)
        nxt = _match(r"\s+([^\W\d_]+)", text[m.end():])
        nw = nxt.group(1).lower() if nxt else ""
        if aux.lower() in ("has", "have", "had") and nw and not (nw.endswith("ed") or nw in PARTICIPLES):
            do = {"has": "does", "have": "do", "had": "did"}[aux.lower()]
            new = like(aux, f"{do} not have")
        elif aux.lower() == "can":
            new = like(aux, "cannot")
        elif nw == "rather":
            new = aux + text[m.end():m.end() + nxt.end()] + (" NOT" if aux.isupper() else " not")
            out.append(Mutant("polarity", splice(text, m.start(), m.end() + nxt.end(), new), f"{aux} rather->{aux} rather not"))
            new = None
        else:
            new = aux + (" NOT" if aux.isupper() else " not")
        if new:
            out.append(Mutant("polarity", splice(text, m.start(), m.end(), new), f"{aux}->{new}"))
    # "never" before the verb that follows a leading name (or We / I / They)
    if not negated:
        spans = name_spans(text, ctx.names)
        ws = words(text)
        k = 0
        while k < len(ws) and (any(w.start == ws[k].start and not w.possessive for w, _ in spans)
                               or (k == 0 and ws[0].base.lower() in ("we", "i", "they"))):
            k += 1
        if 0 < k < len(ws):
            v = ws[k]
            vl = v.base.lower()
            verbish = (vl.endswith("s") and not vl.endswith("ss")) or vl.endswith("ed") or vl in IRREGULAR_PAST
            if (v.base.islower() or v.base.isupper()) and verbish:
                if vl not in NOT_VERB_AFTER_NAME and not v.possessive:
                    ins = "NEVER " if v.base.isupper() else "never "
                    out.append(Mutant("polarity", splice(text, v.start, v.start, ins), f"+never before {v.base}"))
    return out


def op_antonym(text: str, ctx: "Ctx") -> list[Mutant]:
    out = []
    for word, new in ANTONYMS.items():
        for m in _finditer(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text, re.I):
            src = m.group(0)
            if word in ("close to",) and _search(r"\bclose to\b", text, re.I) is None:
                continue
            if word == "first" and _match(r"\s+of\b", text[m.end():]):
                continue
            if word == "long" and _match(r"\s+(?:as|ago)\b", text[m.end():]):
                continue
            if word == "working" and not _search(r"\b(?:is|are|was|were|not|n't|isn't|aren't)\s+$", text[:m.start()], re.I):
                continue  # "while working": a verb, not the state
            if word == "full" and _search(r"\bin\s+$", text[:m.start()], re.I):
                continue  # "in full" has its own entry
            if word in ("min", "max") and _search(r"\d\s*$", text[:m.start()]):
                continue  # "90 min": minutes
            if word == "clean" and _search(r"\b(?:a|an|the|deep)\s+$", text[:m.start()], re.I):
                continue  # "a deep clean": the noun
            if word == "open" and _search(r"\bto\s+$", text[:m.start()], re.I):
                new = "close"  # the verb
            out.append(Mutant("antonym", splice(text, m.start(), m.end(), like(src, new)), f"{src}->{like(src, new)}"))
    return out


def op_specific(text: str, ctx: "Ctx") -> list[Mutant]:
    out = []
    for word, new in sorted(SPECIFIC.items(), key=lambda kv: -len(kv[0])):
        for m in _finditer(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text, re.I):
            src = m.group(0)
            before = text[:m.start()].lower()
            if " " not in word and _search(r"(green|black|oat|red|white|standing|lentil|long|jazz)\s$", before):
                continue  # part of a longer phrase handled on its own
            if " " not in word and _match(r"\s*(milk|deck|soup|playlists|flights|desk)\b", text[m.end():], re.I):
                continue
            if new.lower() in text.lower():
                continue
            if word == "doctor" and _match(r"\s+[A-Z]", text[m.end():]):
                continue  # a title ("Doctor Lindqvist")
            out.append(Mutant("specific", splice(text, m.start(), m.end(), like(src, new)), f"{src}->{like(src, new)}"))
    return out


def _transpose(digits: str) -> str | None:
    for k in range(len(digits) - 1, 0, -1):
        if digits[k] != digits[k - 1]:
            return digits[:k - 1] + digits[k] + digits[k - 1] + digits[k + 1:]
    return None


SEGMENT_SWAPS = {"eu": "us", "us": "eu", "west": "east", "east": "west", "north": "south", "south": "north",
                 "central": "west", "prod": "staging", "staging": "prod", "dev": "prod", "inv": "crn"}


def op_identifier(text: str, ctx: "Ctx") -> list[Mutant]:
    out = []
    taken = []

    def add(s: int, e: int, new: str, detail: str) -> None:
        out.append(Mutant("identifier", splice(text, s, e, new), detail))

    for m in _finditer(r"\b([\w.+-]+)@([\w-]+(?:\.[\w-]+)+)\b", text):
        local, host = m.group(1), m.group(2)
        add(m.start(1), m.end(1), local + "2", f"{local}@->{local}2@")
        tld = host.rsplit(".", 1)
        add(m.start(2), m.end(2), tld[0] + "." + ("org" if tld[1] != "org" else "com"), f"@{host}->other TLD")
        taken.append(m.span())
    for m in _finditer(r"\bhttps?://([\w.-]+)", text):
        host = m.group(1)
        new = ("prod." + host[len("staging."):]) if host.startswith("staging.") else "staging." + host
        add(m.start(1), m.end(1), new, f"{host}->{new}")
        taken.append(m.span())
    for m in _finditer(r"(?<![@/\w.])((?:[a-z0-9-]+\.)+(?:com|org|net|io|dev|co|uk|de|fr|nl|example|internal))\b", text, re.I):
        if any(a <= m.start() < b for a, b in taken):
            continue
        host = m.group(1)
        add(m.start(1), m.end(1), "staging." + host, f"{host}->staging.{host}")
        parts = host.rsplit(".", 1)
        other = {"org": "com", "com": "org", "net": "com", "io": "com"}.get(parts[1].lower(), "com")
        add(m.start(1), m.end(1), parts[0] + "." + other, f"{host}->{parts[0]}.{other}")
    for m in _finditer(r"\b(v?)(\d+)\.(\d+)(?:\.(\d+))?\b", text):
        if not (m.group(1) or m.group(4) or _search(r"version\s*$", text[:m.start()], re.I)):
            continue
        if m.group(4) is not None:
            new = f"{m.group(1)}{m.group(2)}.{int(m.group(3)) + 1}.{m.group(4)}"
        else:
            new = f"{m.group(1)}{m.group(2)}.{int(m.group(3)) + 1}"
        add(m.start(), m.end(), new, f"{m.group(0)}->{new} (version)")
    # hyphenated / prefixed ids: INV-2291, vpn-eu-2, eu-west-1, #4471, ticket 48213
    for m in _finditer(r"(?<![\w.])((?:[A-Za-z]+-)+[A-Za-z]*\d+[A-Za-z0-9]*|#\d+)(?![\w-])", text):
        ident = m.group(1)
        digits = _search(r"\d+(?!.*\d)", ident)
        ds, de = digits.span()
        tr = _transpose(digits.group(0))
        if tr:
            new = ident[:ds] + tr + ident[de:]
            add(m.start(1), m.end(1), new, f"{ident}->{new} (transposed)")
        else:
            nd = str(int(digits.group(0)) + 1)
            new = ident[:ds] + nd + ident[de:]
            if new not in text:
                add(m.start(1), m.end(1), new, f"{ident}->{new}")
        for seg in _finditer(r"[A-Za-z]+", ident):
            low = seg.group(0).lower()
            if low in SEGMENT_SWAPS:
                new = ident[:seg.start()] + like(seg.group(0), SEGMENT_SWAPS[low]) + ident[seg.end():]
                add(m.start(1), m.end(1), new, f"{ident}->{new} (segment)")
                break
    for m in _finditer(r"\b(?:customer|order|ticket|invoice|account|phone number is|number|no\.?|ref)\s+#?(\d{4,})\b", text, re.I):
        tr = _transpose(m.group(1))
        if tr:
            add(m.start(1), m.end(1), tr, f"{m.group(1)}->{tr} (transposed)")
    for m in _finditer(r"(?<![\d+])(\d{7,})\b", text):
        tr = _transpose(m.group(1))
        if tr:
            add(m.start(1), m.end(1), tr, f"{m.group(1)}->{tr} (transposed)")
    for m in _finditer(r"\b(room|hall|gate|building|terminal|block|wing|zone|platform|lab|bay|dock|level)\s+([A-Za-z])\b", text, re.I):
        letter = m.group(2)
        new = chr(ord(letter) + 1) if letter.lower() != "z" else ("a" if letter.islower() else "A")
        add(m.start(2), m.end(2), new, f"{m.group(1)} {letter}->{m.group(1)} {new}")
    return out


def subject_of(text: str, ctx: "Ctx") -> tuple[str, str] | None:
    """The seed's leading name phrase (a person, organisation or project) and its kind, for the
    change templates: "Kwame Mensah", "Mrs. Adebayo", "Grandma Ilse", "Kofi" (from "Kofi's
    flight"), "Halvorsen Ltd", "Project Bluebird"."""
    spans = name_spans(text, ctx.names)
    ws = words(text)
    if not ws:
        return None
    starts = {w.start: (w, role) for w, role in spans}
    k, parts, kind = 0, [], "person"
    if ws[0].base.lower() == "project" and len(ws) > 1 and ws[1].start in starts:
        return "Project " + _canon(ws[1].base), "project"
    if ws[0].base.lower() in TITLES:
        title = ws[0].base
        if ws[0].start not in starts and not title[0].isupper():
            return None
        parts.append(_canon(title) + ("." if text[ws[0].end:ws[0].end + 1] == "." else ""))
        k = 1
    while k < len(ws) and ws[k].start in starts and starts[ws[k].start][1] != "title":
        span = starts[ws[k].start][0]
        parts.append(_canon(span.base))
        if span.possessive:
            k += 1
            break
        k += 1
        if len(parts) >= 3:
            break
    names_found = [p for p in parts if p.rstrip(".").lower() not in TITLES]
    if not names_found:
        return None
    if k < len(ws) and ws[k].base.lower() in ORG_SUFFIXES and not starts[ws[k - 1].start][0].possessive:
        parts.append(ws[k].base + ("." if text[ws[k].end:ws[k].end + 1] == "." else ""))
        kind = "org"
    if any(starts.get(w.start, (None, ""))[1] == "place" for w in ws[:k]):
        return None  # "Vienna hotel" ...: a place, not a subject with attributes
    return " ".join(parts), kind


def _canon(w: str) -> str:
    return w if not (w.islower() or w.isupper()) else w.capitalize()


def op_change(text: str, ctx: "Ctx") -> list[Mutant]:
    subj = subject_of(text, ctx)
    if not subj:
        return []
    name, kind = subj
    templates = {"person": PERSON_TEMPLATES, "org": ORG_TEMPLATES, "project": PROJECT_TEMPLATES}[kind]
    slug = re.sub(r"[^a-z]+", ".", fold(name.split()[-1])).strip(".") or "contact"
    group_text = " ".join(ctx.texts)
    out = []
    for template, clash in templates:
        pattern = LOCATION if clash == "LOCATION" else clash
        if _search(pattern, group_text, re.I if clash != "LOCATION" else 0) or \
                (clash == "LOCATION" and _search(pattern, group_text.lower())):
            continue
        new = template.format(S=name, slug=slug)
        out.append(Mutant("change", new, f"[{kind}] {template.split('{S}')[1].strip() or template}"))
    return out


OPERATOR_FUNCS = {
    "name": op_name, "possessive": op_possessive, "number": op_number, "unit": op_unit,
    "value": op_value, "polarity": op_polarity, "antonym": op_antonym, "specific": op_specific,
    "identifier": op_identifier, "change": op_change,
}


@dataclass
class Ctx:
    texts: list[str]  # every member of the seed's duplicate group
    names: set[str]  # lower-case names found in the group
    taken: set[str]  # folded words of the group (a replacement name must be new)


def make_ctx(texts: list[str]) -> Ctx:
    taken = {fold(w.base) for t in texts for w in words(t)}
    return Ctx(list(texts), group_names(texts), taken)


def fix_article(seed: str, text: str) -> str:
    """"a intact screen" -> "an intact screen": the article before the first changed word."""
    p = 0
    while p < min(len(seed), len(text)) and seed[p] == text[p]:
        p += 1
    while p > 0 and text[p - 1].isalnum():
        p -= 1
    art = _search(r"\b(a|an|A|An|AN)(\s+)$", text[:p])
    word = _match(r"[^\W\d_]+", text[p:])
    if not art or not word:
        return text
    vowel = word.group(0)[0].lower() in "aeiou" and not word.group(0).lower().startswith(("uni", "use", "eu", "one"))
    want = "an" if vowel else "a"
    if art.group(1).lower() == want:
        return text
    return text[:art.start(1)] + like(art.group(1), want) + text[art.end(1):]


def mutants(seed: str, ctx: Ctx, operators: tuple[str, ...] = OPERATORS) -> list[Mutant]:
    """The seed's mutants, each a different fact: not the seed's content words, not a member's,
    no update language brought in (except by `change`), one per text (the first operator wins)."""
    member_words = {bench.content_words(t) for t in ctx.texts}
    seed_tokens = set(bench.tokens(seed))
    seen: set[str] = set()
    out = []
    for op in operators:
        for mu in OPERATOR_FUNCS[op](seed, ctx):
            text = re.sub(r"\s{2,}", " ", mu.text).strip()
            if op != "change":
                text = fix_article(seed, text)
            if text in seen or text in ctx.texts or not text:
                continue
            cw = bench.content_words(text)
            if cw in member_words:
                continue
            if op != "change" and (set(bench.tokens(text)) - seed_tokens) & UPDATE_WORDS:
                continue
            seen.add(text)
            out.append(Mutant(op, text, mu.detail))
    return out


# ------------------------------------------------------------------------------------- pairs

@dataclass
class Side:
    id: str  # corpus entry id, or "" for a mutant
    text: str
    tags: list


@dataclass
class Pair:
    n: int
    corpus: str
    group: str
    category: str
    op: str  # an operator, or "control"
    detail: str
    left: Side  # the seed or its paraphrase (the control: the older member)
    right: Side  # the mutant (the control: the newer member)
    partner: str  # "seed" | "paraphrase" | "control"
    directions: tuple = ("mutant-newer", "mutant-older")


def load_corpora(log=print) -> list[tuple[str, dict]]:
    out = []
    for name, path in CORPORA:
        if not path.exists():
            log(f"metamorphic: {path.name} is absent, skipped")
            continue
        try:
            out.append((name, bench.load_corpus(path, minimums=False)))
        except (bench.CorpusError, json.JSONDecodeError, OSError, ValueError) as e:
            log(f"metamorphic: {path.name} is not a valid corpus (yet), skipped: {str(e).strip()[:300]}")
    return out


def build_pairs(corpora: list[tuple[str, dict]], limit: int | None = None) -> tuple[list[Pair], list[Pair]]:
    """(mutated pairs, control pairs), numbered in one sequence."""
    mutated: list[Pair] = []
    control: list[Pair] = []
    seen_pairs: set = set()
    for cname, corpus in corpora:
        by_id = {e["id"]: e for e in corpus["entries"]}
        for g in corpus["groups"]:
            if g["kind"] != "duplicate":
                continue
            members = [by_id[m] for m in g["entries"]]
            texts = [e["content"] for e in members]
            ctx = make_ctx(texts)
            ordered = sorted(members, key=lambda e: e["createdAtMs"])
            for i, a in enumerate(ordered):
                for b in ordered[i + 1:]:
                    control.append(Pair(0, cname, g["id"], g["category"], "control", "original duplicate pair",
                                        Side(a["id"], a["content"], a["tags"]), Side(b["id"], b["content"], b["tags"]),
                                        "control", ("as-written",)))
            for seed in members:
                for mu in mutants(seed["content"], ctx):
                    partners = [seed] if mu.op == "change" else [seed] + [m for m in members if m is not seed]
                    for p in partners:
                        key = (p["content"], mu.text)
                        if key in seen_pairs:
                            continue
                        seen_pairs.add(key)
                        mutated.append(Pair(0, cname, g["id"], g["category"], mu.op, mu.detail,
                                            Side(p["id"], p["content"], p["tags"]), Side("", mu.text, seed["tags"]),
                                            "seed" if p is seed else "paraphrase",
                                            ("mutant-newer",) if mu.op == "change" else ("mutant-newer", "mutant-older")))
    if limit is not None and limit < len(mutated):
        step = len(mutated) / limit
        mutated = [mutated[int(k * step)] for k in range(limit)]
    for n, p in enumerate(mutated + control):
        p.n = n
    return mutated, control


# ------------------------------------------------------------------------------ running the plan

_VECTORS: dict[str, str] = {}  # text -> its embedding as JSON numbers (cached for the process)


def embed_texts(texts: list[str]) -> None:
    todo = sorted({t for t in texts if t not in _VECTORS})
    if not todo:
        return
    sys.path.insert(0, str(ROOT / "infra" / "local"))
    import embedder  # noqa: E402  (numpy; installed in .venv by infra/local/venv)

    vectors = embedder.embed(todo)
    for t, v in zip(todo, vectors):
        # 9 significant digits give back the exact float32 the model computed (smaller than repr)
        _VECTORS[t] = ",".join(format(x, ".9g") for x in v.tolist())


@dataclass
class Cohort:
    pair: Pair
    direction: str
    older: str  # entry ids
    newer: str


def plan_entries(pairs: list[Pair]) -> tuple[list[dict], list[Cohort]]:
    entries, parts = [], []
    for p in pairs:
        for d in p.directions:
            tag = {"mutant-newer": "a", "mutant-older": "r", "as-written": "c"}[d]
            subject = f"mm-{p.n:06d}{'' if tag == 'a' else tag}"
            t0 = BASE_MS + p.n * 60_000
            if d == "mutant-older":
                older, newer = p.right, p.left
            else:
                older, newer = p.left, p.right
            ida, idb = f"{'p' if tag == 'a' else tag}{p.n:06d}a", f"{'p' if tag == 'a' else tag}{p.n:06d}b"
            entries.append({"id": ida, "content": older.text, "tags": list(older.tags), "createdAtMs": t0,
                            "subject": subject})
            entries.append({"id": idb, "content": newer.text, "tags": list(newer.tags), "createdAtMs": t0 + GAP_MS,
                            "subject": subject})
            parts.append(Cohort(p, d, ida, idb))
    return entries, parts


def payload(entries: list[dict], embed: bool) -> bytes:
    if not embed:
        return json.dumps({"entries": entries}, ensure_ascii=False).encode("utf-8")
    embed_texts([e["content"] for e in entries])
    chunks = []
    for e in entries:
        head = json.dumps(e, ensure_ascii=False)
        chunks.append(head[:-1] + ',"embedding":[' + _VECTORS[e["content"]] + "]}")
    return ('{"entries":[' + ",".join(chunks) + "]}").encode("utf-8")


def planner_command(explicit: str | None = None) -> str:
    if explicit:
        return explicit
    if os.environ.get("PLAN_CORPUS_CMD"):
        return os.environ["PLAN_CORPUS_CMD"]
    if DEBUG_ENGINE.exists():
        return shlex.quote(str(DEBUG_ENGINE))
    return bench.DEFAULT_CMD


@dataclass
class Outcome:
    cohort: Cohort
    merged: bool
    kind: str | None  # "duplicate" | "supersede" when merged
    survivor_text: str | None


def run(pairs: list[Pair], embed: bool, command: str | None = None, timings: dict | None = None) -> list[Outcome]:
    """Plans every pair in one planner run; one Outcome per cohort."""
    t = time.monotonic()
    entries, parts = plan_entries(pairs)
    raw_in = payload(entries, embed)
    t_embed = time.monotonic() - t
    t = time.monotonic()
    raw = bench.run_planner(raw_in, planner_command(command))
    t_plan = time.monotonic() - t
    plan = bench.parse_plan(raw)
    survivors = bench.replay(entries, plan)
    home = {m: s.id for s in survivors.values() for m in s.members}
    subject_of_id = {e["id"]: e["subject"] for e in entries}
    for s in survivors.values():  # the isolation the suite relies on
        subjects = {subject_of_id[m] for m in s.members}
        if len(subjects) > 1:
            raise bench.PlanError(f"a merge crossed subjects: {sorted(s.members)[:6]}")
    out = []
    for part in parts:
        together = home[part.older] == home[part.newer]
        s = survivors[home[part.older]] if together else None
        out.append(Outcome(part, together, s.kind if s else None, s.content if s else None))
    if timings is not None:
        timings.update({"entries": len(entries), "payload_mb": round(len(raw_in) / 1e6, 1),
                        "prepare_s": round(t_embed, 1), "planner_s": round(t_plan, 1),
                        "merges": len(plan["merges"])})
    return out


# ------------------------------------------------------------------------------------ reporting

def summarise(mutated: list[Pair], control: list[Pair], outcomes: list[Outcome]) -> dict:
    by_pair: dict[int, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_pair[o.cohort.pair.n].append(o)
    pairs_by_op = Counter(p.op for p in mutated)
    pairs_by_corpus = Counter(p.corpus for p in mutated)
    pairs_by_op_corpus = Counter(f"{p.op}/{p.corpus}" for p in mutated)
    failures = []
    fail_by_op: Counter = Counter()
    fail_kind_by_op: dict[str, Counter] = defaultdict(Counter)
    for p in mutated:
        bad = [o for o in by_pair[p.n] if o.merged]
        if not bad:
            continue
        fail_by_op[p.op] += 1
        for o in bad:
            fail_kind_by_op[p.op][f"{o.kind} ({o.cohort.direction})"] += 1
        failures.append({
            "pair": p.n, "corpus": p.corpus, "group": p.group, "category": p.category, "op": p.op,
            "detail": p.detail, "partner": p.partner,
            "how": sorted({f"{o.kind} ({o.cohort.direction})" for o in bad}),
            "texts": [p.left.text, p.right.text], "kept": bad[0].survivor_text,
        })
    folded = [p for p in control if any(o.merged for o in by_pair[p.n])]
    control_kinds = Counter(o.kind for p in control for o in by_pair[p.n] if o.merged)
    return {
        "pairs": len(mutated),
        "pairs_by_operator": {op: pairs_by_op[op] for op in OPERATORS if pairs_by_op[op]},
        "pairs_by_corpus": dict(pairs_by_corpus),
        "pairs_by_operator_and_corpus": dict(sorted(pairs_by_op_corpus.items())),
        "pairs_by_partner": dict(Counter(p.partner for p in mutated)),
        "cohorts": len(outcomes),
        "failures": len(failures),
        "merges": sum(1 for f in failures if any(h.startswith("duplicate") for h in f["how"])),
        "supersessions": sum(1 for f in failures if any(h.startswith("supersede") for h in f["how"])),
        "failures_by_operator": {op: fail_by_op[op] for op in OPERATORS if fail_by_op[op]},
        "failure_kinds_by_operator": {op: dict(c) for op, c in fail_kind_by_op.items()},
        "failed": failures,
        "control": {"pairs": len(control), "folded": len(folded), "by_kind": dict(control_kinds),
                    "rate": round(len(folded) / len(control), 3) if control else None},
    }


def report_lines(summary: dict, per_op_examples: int = 10) -> list[str]:
    lines = [f"mutated pairs: {summary['pairs']} ({summary['cohorts']} cohorts incl. control)",
             "  by corpus: " + ", ".join(f"{k} {v}" for k, v in summary["pairs_by_corpus"].items()),
             "  by partner: " + ", ".join(f"{k} {v}" for k, v in summary["pairs_by_partner"].items()),
             f"  {'operator':<12}{'pairs':>7}{'failed':>8}  how"]
    for op, n in summary["pairs_by_operator"].items():
        f = summary["failures_by_operator"].get(op, 0)
        how = ", ".join(f"{k} {v}" for k, v in sorted(summary["failure_kinds_by_operator"].get(op, {}).items()))
        lines.append(f"  {op:<12}{n:>7}{f:>8}  {how}")
    lines.append(f"failures: {summary['failures']} pairs (duplicate merges in {summary['merges']}, "
                 f"supersessions in {summary['supersessions']})")
    c = summary["control"]
    lines.append(f"positive control: {c['folded']} of {c['pairs']} original duplicate pairs folded "
                 f"({c['by_kind']})")
    if per_op_examples:
        shown: Counter = Counter()
        for f in summary["failed"]:
            if shown[f["op"]] >= per_op_examples:
                continue
            shown[f["op"]] += 1
            lines.append(f"  FAIL {f['op']:<10} {f['corpus']}/{f['group']} {f['detail']} [{f['partner']}; "
                         f"{', '.join(f['how'])}]\n       {f['texts'][0]!r}\n       {f['texts'][1]!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embed", action="store_true", help="attach all-MiniLM-L6-v2 vectors (the embedding stage)")
    parser.add_argument("--json", metavar="OUT", help="write the counts and every failure to OUT")
    parser.add_argument("--limit", type=int, help="plan only N mutated pairs (an even sample)")
    parser.add_argument("--show-failures", type=int, nargs="?", const=10**9, default=10, metavar="N",
                        help="failing pairs printed per operator (default 10; no N: all)")
    parser.add_argument("--planner", help="planner command (default: env PLAN_CORPUS_CMD, else the debug build)")
    parser.add_argument("--generate-only", action="store_true", help="print the pair counts, run nothing")
    args = parser.parse_args(argv)

    started = time.monotonic()
    corpora = load_corpora(log=lambda m: print(m, file=sys.stderr))
    print("corpora: " + ", ".join(f"{n} ({sum(g['kind'] == 'duplicate' for g in c['groups'])} duplicate groups)"
                                  for n, c in corpora))
    mutated, control = build_pairs(corpora, args.limit)
    t_gen = time.monotonic() - started
    if args.generate_only:
        counts = Counter(p.op for p in mutated)
        print(f"{len(mutated)} mutated pairs, {len(control)} control pairs (generated in {t_gen:.1f} s)")
        for op in OPERATORS:
            print(f"  {op:<12}{counts[op]:>7}   " + ", ".join(
                f"{c} {sum(1 for p in mutated if p.op == op and p.corpus == c)}" for c, _ in corpora))
        return 0
    timings: dict = {"generate_s": round(t_gen, 1)}
    outcomes = run(mutated + control, args.embed, args.planner, timings)
    summary = summarise(mutated, control, outcomes)
    timings["total_s"] = round(time.monotonic() - started, 1)
    summary["mode"] = "embeddings" if args.embed else "deterministic"
    summary["timings"] = timings
    print(f"mode: {summary['mode']}; {timings}")
    print("\n".join(report_lines(summary, args.show_failures)))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2, ensure_ascii=False)
            f.write("\n")
    ok = summary["pairs"] >= MIN_PAIRS and summary["failures"] == 0 and summary["control"]["folded"] > 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
