"""State Information Augmentation: insert goal-irrelevant text into what the agent sees.

Contract (docs/contracts.md)::

    augment(domain, observation, eps, rng, kind="distractor", *, goal="") -> Augmented(text, inserted)
    TrajectoryAugmenter(domain, eps, p, kind, seed, goal="")  # .active; (observation_text, step, goal="") -> Augmented

Only the agent's view changes: the collector puts ``Augmented.text`` into the prompt while the
env keeps stepping on its original state, so transitions and rewards are those of the plain
episode (STUDY.md "Interventions"). ``Augmented.inserted`` lists every inserted snippet exactly
as it appears in ``text``; ``strip_inserted`` removes them again and gives back the original.

Budget: ``eps`` is a token budget. Each distractor has a nominal size in tokens
(``NOMINAL_TOKENS``) and ``floor(eps / size)`` of them are inserted:

=========  ======  =========================================================================
domain     tokens  distractor
=========  ======  =========================================================================
alfworld   12      "Near the entrance, there is a guitar 3 that is covered in dust." —
                   28 object types x 19 descriptions (x 10 places) as in the paper; inserted
                   at sentence boundaries before the "Your task is to:" statement
sokoban    10      "(7, 2) shows a Broken crate (beyond the wall; unreachable)" at distinct
                   coordinates outside the room's bounding box (so never a real cell); lines
webshop    10      "[AD] 30% off — shop cozy cardigans today!" (any page); "Warning: out of
                   stock wool hoodie (cannot be selected)" after a price in result lists;
                   "Extra feature: ..." trivia on item pages; ``[SEP]`` segments
sciworld   12      "Also here: a dusty poster of the periodic table (out of reach)." — lab
                   objects ScienceWorld does not have; lines
=========  ======  =========================================================================

Kinds (the two last are control arms the paper lacked):

``distractor``        the domain's distractors above;
``cross_domain``      "There is a monitor showing <another domain>: <its observation>" — a real
                      observation of another domain from the committed bank
                      (``augment_bank.json``, built by ``scripts/make_augment_bank.py``),
                      flattened to one line and, when too long, cut to a window of whole
                      words from a random word on (``...`` marks cuts) to the token budget (the
                      caption at ``CHARS_PER_TOKEN`` = 4 characters per token, the shown
                      observation at its domain's ``DONOR_CHARS_PER_TOKEN``); monitors are added
                      while the budget left holds the caption plus ``MIN_MONITOR_TOKENS`` (10)
                      tokens, so small eps (below ~20 tokens) insert nothing;
``fixed_boilerplate`` the ``distractor`` arm's snippets (same count, same positions) with each
                      one replaced by the same number of characters of one fixed text;
``shuffled``          the ``distractor`` arm's snippets with their words shuffled.

For the same ``rng`` state ``distractor``, ``fixed_boilerplate`` and ``shuffled`` insert at the
same positions with the same lengths (before shuffling), so the arms differ only in content.

Safety rules (why a distractor never changes the task):
- distractors are never admissible/clickable: admissible actions come from the env's real
  state, which augmentation never touches; the vocabularies use objects the domain does not
  have (ALFWorld: no ALFWorld object or receptacle type; SciWorld: no ScienceWorld object;
  Sokoban: coordinates outside the room; WebShop: "[AD]", "out of stock ... cannot be
  selected" and "Extra feature:" texts that no button carries);
- no distractor (or cross-domain sample) shares a content word with the goal: the goal is
  ``goal=`` when given, else read from the observation (ALFWorld "Your task is to: ...",
  WebShop "Instruction: [SEP] ..."). Candidates sharing a word (plural-insensitive, words of
  3+ letters minus a few stopwords) are dropped;
- insertions go only at boundaries (after a sentence, at a line end, between ``[SEP]``
  segments but never right after a label such as "Instruction:"), never inside a sentence.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import re
from pathlib import Path
from typing import Callable

from gentax.errors import GentaxError

KINDS = ("distractor", "cross_domain", "fixed_boilerplate", "shuffled")
CHARS_PER_TOKEN = 4  # English prose (the monitor's caption)
MIN_MONITOR_TOKENS = 10  # a monitor needs room for ~10 tokens of the other domain's text
BANK_PATH = Path(__file__).with_name("augment_bank.json")

FIXED_TEXT = "This is fixed filler text that carries no information about the task or the state. "

#: Per-domain tables, derived from each domain's spec (``gentax.domains.spec.Augmentation``):
#: DOMAINS (the domains with augmentation sources), NOMINAL_TOKENS, DONOR_CHARS_PER_TOKEN (characters
#: per token of a domain's observations, measured with the SmolLM2 tokenizer, benchmarks/agent_sizes.py),
#: SEPARATORS (how a domain's text is joined to a snippet; webshop falls back to lines when its
#: observation has no ``[SEP]``) and MONITOR_SHOWS.
_DERIVED = {
    "NOMINAL_TOKENS": "nominal_tokens",
    "DONOR_CHARS_PER_TOKEN": "donor_chars_per_token",
    "SEPARATORS": "separator",
    "MONITOR_SHOWS": "monitor_shows",
}


def _sources() -> dict:
    from gentax.domains.spec import specs

    return {d: s.augmentation for d, s in specs().items() if s.augmentation is not None}


def __getattr__(name: str):
    if name == "DOMAINS":
        return tuple(_sources())
    if name in _DERIVED:
        return {d: getattr(a, _DERIVED[name]) for d, a in _sources().items()}
    raise AttributeError(name)


def _source(domain: str):
    from gentax.domains.spec import spec

    return spec(domain).augmentation_or_error()


@dataclasses.dataclass(frozen=True)
class Augmented:
    text: str
    inserted: list[str]


# ---- vocabularies -------------------------------------------------------------------------
# ALFWorld: 28 object types outside ALFWorld's object/receptacle vocabulary x 19 descriptions.
ALFWORLD_TYPES = (
    "umbrella", "guitar", "backpack", "scarf", "globe", "chess set", "yoga mat", "toy train",
    "picture frame", "bird cage", "rubber duck", "piggy bank", "hourglass", "thermos",
    "harmonica", "skateboard", "suitcase", "sewing kit", "flashlight", "paperweight",
    "wind chime", "tape measure", "birdhouse", "sun hat", "trophy", "lunchbox", "stapler",
    "calculator",
)  # fmt: skip
ALFWORLD_DESCRIPTIONS = (
    "is covered in dust", "looks brand new", "has a small crack on one side",
    "is slightly tilted", "has a faded sticker on it", "seems to be missing a part",
    "is painted a pale blue", "smells faintly of cedar", "has a chipped corner",
    "is wrapped in brown paper", "looks a bit worn out", "still has a price tag attached",
    "is partly hidden in shadow", "has scratches along its edge", "sits at an odd angle",
    "feels cold to the touch", "has a name written on it", "was clearly used long ago",
    "is decorated with tiny stars",
)  # fmt: skip
ALFWORLD_PLACES = (
    "Near the entrance", "In a corner of the room", "Next to the door", "On the floor",
    "Against the far wall", "By the doorway", "Under the ceiling light", "Close to the wall",
    "In the middle of the floor", "Beside the radiator",
)  # fmt: skip

SOKOBAN_THINGS = (
    "Broken crate", "Cracked tile", "Rusty pipe", "Pile of rubble", "Faded marking",
    "Empty barrel", "Loose brick", "Puddle of water", "Old lantern", "Dusty sack",
)  # fmt: skip

WEBSHOP_ADJECTIVES = (
    "cozy", "stylish", "durable", "lightweight", "classic", "premium", "vintage", "handmade",
)  # fmt: skip
WEBSHOP_PRODUCTS = (  # (plural for ads, singular for fake listings)
    ("cardigans", "cardigan"), ("hoodies", "hoodie"), ("sneakers", "sneaker"),
    ("desk lamps", "desk lamp"), ("backpacks", "backpack"), ("coffee mugs", "coffee mug"),
    ("headphones", "headphone set"), ("blankets", "blanket"), ("sunglasses", "pair of sunglasses"),
    ("scented candles", "scented candle"), ("wall clocks", "wall clock"), ("umbrellas", "umbrella"),
)  # fmt: skip
WEBSHOP_AD_TEMPLATES = (
    "[AD] {pct}% off — shop {adj} {products} today!",
    "[AD] Free shipping on {adj} {products} this week!",
    "[AD] Members save {pct}% on {adj} {products}!",
)
WEBSHOP_FEATURES = (
    "Extra feature: the listing photo was taken on a {day}",
    "Extra feature: the shipping box has a small {color} logo",
    "Extra feature: a {color} thank-you card is included",
    "Extra feature: the manual is printed on recycled paper",
    "Extra feature: the barcode label sits on the {side} side of the box",
)
WEBSHOP_FILLERS = {
    "day": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
    "color": ("teal", "maroon", "lavender", "mustard", "olive"),
    "side": ("left", "right", "bottom"),
}

SCIWORLD_THINGS = (
    "poster of the periodic table", "framed lab safety certificate", "brass microscope model",
    "stack of graph paper", "broken centrifuge", "spectrometer with a dead screen",
    "pair of cracked safety goggles", "box of latex gloves", "old lab coat on a hook",
    "plastic model of a DNA helix", "chalkboard covered in formulas", "empty pipette rack",
    "stack of old lab notebooks", "magnetic stirrer without a power cord", "rolled-up star chart",
    "cork board with expired notices",
)  # fmt: skip
SCIWORLD_ADJECTIVES = ("dusty", "faded", "worn", "tidy", "slightly bent", "forgotten")

_STOPWORDS = frozenset(
    "the and for with that this from into onto your you are was were will can has have its "
    "put some one two any all not but out off too very more most less than then them they "
    "need want would like looking find buy price lower dollars".split()
)
ALFWORLD_TASK_MARKER = "Your task is to:"
_COORD = re.compile(r"\((\d+),\s*(\d+)\)")
_ASIN = re.compile(r"^[A-Z0-9]{10}$")


# ---- public API ---------------------------------------------------------------------------
def augment(
    domain: str, observation: str, eps: int, rng: random.Random, kind: str = "distractor", *, goal: str = ""
) -> Augmented:
    """Insert ``floor(eps / NOMINAL_TOKENS[domain])`` snippets of ``kind`` (module docstring)."""
    _check(domain, kind, eps)
    count = eps // _source(domain).nominal_tokens
    if count == 0:
        return Augmented(observation, [])
    keywords = _keywords(goal + " " + _goal_in(domain, observation))
    layout = _layout(domain, observation)
    if kind == "cross_domain":
        placed = _cross_domain(domain, observation, eps, rng, keywords, layout)
    else:
        placed = _source(domain).distractors(observation, count, rng, keywords, layout)
        if kind == "shuffled":
            placed = [(pos, _shuffle_words(text, rng)) for pos, text in placed]
        elif kind == "fixed_boilerplate":
            placed = [(pos, _fixed_text(len(text))) for pos, text in placed]
    return _insert(observation, placed, layout.separator)


def strip_inserted(domain: str, text: str, inserted: list[str]) -> str:
    """Undo ``augment``: remove every inserted snippet (with its separator) from ``text``."""
    separator = _separator(domain, text)
    for snippet in inserted:
        piece = separator + snippet
        if piece not in text:
            raise GentaxError(f"snippet {snippet[:40]!r} is not in the text")
        text = text.replace(piece, "", 1)
    return text


class TrajectoryAugmenter:
    """Augmentation of one trajectory: on with probability ``p``, decided once from ``seed``.

    ``active`` depends only on ``(seed, p)`` — not on domain, eps or kind — so arms that differ
    only in eps or kind augment the same trajectories. Step ``t`` draws from its own RNG keyed by
    ``(seed, t)``: the result does not depend on call order, and the whole trajectory is
    deterministic given the seed. Pass the task's goal (``obs.goal``) to the constructor or to a
    call so distractors avoid goal words; without it the goal is read from the first
    observation that states it (ALFWorld's first observation does).
    """

    def __init__(self, domain: str, eps: int, p: float, kind: str = "distractor", seed: int = 0, goal: str = ""):
        _check(domain, kind, eps)
        if not 0.0 <= float(p) <= 1.0:
            raise GentaxError(f"augmentation probability p must be in [0, 1], got {p}")
        self.domain, self.eps, self.p, self.kind, self.seed = domain, int(eps), float(p), kind, int(seed)
        draw = random.Random(f"gentax.augment.active:{self.seed}").random()
        self.active = self.eps > 0 and draw < self.p
        self._goal = goal

    def __call__(self, observation_text: str, step: int, goal: str = "") -> Augmented:
        if not self.active:
            return Augmented(observation_text, [])
        if goal:
            self._goal = goal
        elif not self._goal:
            self._goal = _goal_in(self.domain, observation_text)
        rng = random.Random(f"gentax.augment.step:{self.seed}:{int(step)}")
        return augment(self.domain, observation_text, self.eps, rng, self.kind, goal=self._goal)


# ---- insertion layout ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Layout:
    separator: str
    boundaries: list[int]  # positions where "separator + snippet" may be inserted
    after_price: list[int]  # webshop: boundaries right after a price segment (result lists)
    results_page: bool = False
    item_page: bool = False


def _separator(domain: str, text: str) -> str:
    if domain == "webshop" and "[SEP]" not in text:
        return "\n"
    return _source(domain).separator


def _layout(domain: str, text: str) -> _Layout:
    separator = _separator(domain, text)
    if separator == " ":
        ends = _sentence_ends(text)
        task = text.find(ALFWORLD_TASK_MARKER)  # keep the task statement free of distractors
        before_task = [p for p in ends if task < 0 or p < task]
        return _Layout(separator, before_task or ends, [])
    if separator == "\n":
        return _Layout(separator, _line_ends(text), [])
    return _webshop_layout(text, separator)


def _sentence_ends(text: str) -> list[int]:
    """After '.', '!' or '?' when the next non-space character starts a sentence (or ends)."""
    ends = []
    for match in re.finditer(r"[.!?](?=\s|$)", text):
        rest = text[match.end() :].lstrip()
        if not rest or rest[0].isupper():
            ends.append(match.end())
    return ends or [len(text)]


def _line_ends(text: str) -> list[int]:
    ends = [i for i, ch in enumerate(text) if ch == "\n"]
    if not text.endswith("\n"):
        ends.append(len(text))
    return ends


def _webshop_layout(text: str, separator: str) -> _Layout:
    segments = text.split(separator)
    boundaries, after_price, position = [], [], 0
    for index, segment in enumerate(segments):
        position += len(segment)
        label = segment.strip().endswith(":")
        if not label:
            boundaries.append(position)
            if segment.strip().startswith("$"):
                after_price.append(position)
        position += len(separator) if index < len(segments) - 1 else 0
    stripped = [s.strip() for s in segments]
    results = any(_ASIN.match(s) for s in stripped) or "Next >" in stripped
    item = any(s.lower() == "buy now" for s in stripped)
    return _Layout(separator, boundaries or [len(text)], after_price, results, item)


def _insert(text: str, placed: list[tuple[int, str]], separator: str) -> Augmented:
    order = sorted(range(len(placed)), key=lambda i: (placed[i][0], i))
    pieces, cursor = [], 0
    for i in order:
        position, snippet = placed[i]
        pieces.append(text[cursor:position])
        pieces.append(separator + snippet)
        cursor = position
    pieces.append(text[cursor:])
    return Augmented("".join(pieces), [placed[i][1] for i in order])


# ---- goal words ---------------------------------------------------------------------------
def _goal_in(domain: str, text: str) -> str:
    read = _source(domain).goal_in
    return read(text) if read is not None else ""


def alfworld_goal(text: str) -> str:
    match = re.search(re.escape(ALFWORLD_TASK_MARKER) + r"\s*(.+)", text)
    return match.group(1) if match else ""


def webshop_goal(text: str) -> str:
    match = re.search(r"Instruction:\s*(?:\[SEP\])?\s*(.+?)(?:\[SEP\]|\n|$)", text)
    return match.group(1) if match else ""


def _stem(word: str) -> str:
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _keywords(text: str) -> frozenset[str]:
    words = re.findall(r"[a-z]+", text.lower())
    return frozenset(_stem(w) for w in words if len(w) >= 3 and w not in _STOPWORDS)


def _allowed(candidates, keywords: frozenset[str], words_of: Callable = str) -> list:
    """Candidates sharing no content word with the goal (all of them if none would be left)."""
    kept = [c for c in candidates if not (_keywords(words_of(c)) & keywords)]
    return kept or list(candidates)


# ---- per-domain distractors ---------------------------------------------------------------
def _article(noun: str) -> str:
    return "an" if noun[0].lower() in "aeiou" else "a"


def alfworld_distractors(text, count, rng, keywords, layout):
    types = _allowed(ALFWORLD_TYPES, keywords)
    descriptions = _allowed(ALFWORLD_DESCRIPTIONS, keywords)
    placed = []
    for _ in range(count):
        kind = rng.choice(types)
        sentence = (
            f"{rng.choice(ALFWORLD_PLACES)}, there is {_article(kind)} {kind} {rng.randint(1, 9)} "
            f"that {rng.choice(descriptions)}."
        )
        placed.append((rng.choice(layout.boundaries), sentence))
    return placed


def _room_cells(text: str) -> set[tuple[int, int]]:
    return {(int(r), int(c)) for r, c in _COORD.findall(text)}


def sokoban_distractor_cells(text: str, count: int, rng: random.Random) -> list[tuple[int, int]]:
    """``count`` distinct cells outside the bounding box of every coordinate in ``text``."""
    cells = _room_cells(text)
    rows = max((r for r, _ in cells), default=-1) + 1
    cols = max((c for _, c in cells), default=-1) + 1
    margin = 2
    while True:
        outside = [
            (r, c) for r in range(rows + margin) for c in range(cols + margin) if r >= rows or c >= cols
        ]
        if len(outside) >= count:
            return rng.sample(outside, count)
        margin *= 2


def sokoban_distractors(text, count, rng, keywords, layout):
    placed = []
    for r, c in sokoban_distractor_cells(text, count, rng):
        thing = rng.choice(SOKOBAN_THINGS)
        line = f"({r}, {c}) shows {_article(thing)} {thing} (beyond the wall; unreachable)"
        placed.append((rng.choice(layout.boundaries), line))
    return placed


#: how ``webshop_distractors`` picks each distractor's kind (printed by ``gentax plan --settings``)
WEBSHOP_DISTRACTOR_KINDS = ("one of the kinds the page allows, drawn uniformly per distractor: an ad line (every page), "
                            "an unselectable listing (results pages), an extra feature (item pages)")


def webshop_distractors(text, count, rng, keywords, layout):
    products = _allowed(WEBSHOP_PRODUCTS, keywords, lambda p: " ".join(p))
    adjectives = _allowed(WEBSHOP_ADJECTIVES, keywords)
    fillers = {k: _allowed(v, keywords) for k, v in WEBSHOP_FILLERS.items()}
    features = _allowed(WEBSHOP_FEATURES, keywords, lambda f: re.sub(r"\{\w+\}", "", f))
    kinds = ["ad"] + (["listing"] if layout.results_page else []) + (["feature"] if layout.item_page else [])
    placed = []
    for _ in range(count):
        kind = rng.choice(kinds)
        plural, singular = rng.choice(products)
        if kind == "ad":
            snippet = rng.choice(WEBSHOP_AD_TEMPLATES).format(
                pct=rng.choice((10, 15, 20, 25, 30, 40, 50)), adj=rng.choice(adjectives), products=plural
            )
            where = layout.boundaries
        elif kind == "listing":
            snippet = f"Warning: out of stock {rng.choice(adjectives)} {singular} (cannot be selected)"
            where = layout.after_price or layout.boundaries
        else:
            template = rng.choice(features)
            snippet = template.format(**{k: rng.choice(v) for k, v in fillers.items()})
            where = layout.boundaries
        placed.append((rng.choice(where), snippet))
    return placed


def sciworld_distractors(text, count, rng, keywords, layout):
    things = _allowed(SCIWORLD_THINGS, keywords)
    placed = []
    for _ in range(count):
        thing = f"{rng.choice(SCIWORLD_ADJECTIVES)} {rng.choice(things)}"
        placed.append((rng.choice(layout.boundaries), f"Also here: {_article(thing)} {thing} (out of reach)."))
    return placed




# ---- other kinds --------------------------------------------------------------------------
def _shuffle_words(text: str, rng: random.Random) -> str:
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


def _fixed_text(length: int) -> str:
    text = (FIXED_TEXT * (length // len(FIXED_TEXT) + 1))[:length]
    return text[:-1] + "." if text.endswith(" ") else text


@functools.lru_cache(maxsize=1)
def observation_bank() -> dict[str, list[str]]:
    """Real observations per domain (``augment_bank.json``) for the ``cross_domain`` kind."""
    if not BANK_PATH.exists():
        raise GentaxError(f"observation bank {BANK_PATH} is missing; run scripts/make_augment_bank.py")
    bank = json.loads(BANK_PATH.read_text())
    return {domain: list(samples) for domain, samples in bank.items() if samples}


def _cross_domain(domain, text, eps, rng, keywords, layout):
    bank = observation_bank()
    sources = _sources()
    donors = [d for d in sources if d != domain and d in bank]
    if not donors:
        raise GentaxError(f"the observation bank has no other domain than {domain!r} for cross_domain")
    budget = float(eps)  # tokens left
    placed = []
    while True:
        donor = rng.choice(donors)
        prefix = f"There is a monitor showing {sources[donor].monitor_shows}: "
        room = budget - (len(layout.separator) + len(prefix)) / CHARS_PER_TOKEN
        if room < MIN_MONITOR_TOKENS:
            break
        sample = rng.choice(_allowed(bank[donor], keywords))
        shown = _excerpt(" ".join(sample.split()), int(room * sources[donor].donor_chars_per_token), rng)
        placed.append((rng.choice(layout.boundaries), prefix + shown))
        budget = room - len(shown) / sources[donor].donor_chars_per_token
    return placed


def _excerpt(text: str, limit: int, rng: random.Random) -> str:
    """``text`` if it fits in ``limit`` characters, else a window of whole words starting at a
    random word (``...`` marks each cut end), so long samples do not always show their header."""
    if len(text) <= limit:
        return text
    starts = [0] + [m.end() for m in re.finditer(r" ", text) if m.end() <= len(text) - limit]
    start = rng.choice(starts)
    room = limit - 4 - (4 if start else 0)
    window = text[start : start + max(room, 0) + 1].rsplit(" ", 1)[0] if room > 0 else ""
    return ("... " if start else "") + window + " ..."


def _check(domain: str, kind: str, eps: int) -> None:
    from gentax.domains.spec import spec

    declared = spec(domain)  # an unknown domain is one GentaxError
    if eps:
        declared.augmentation_or_error()  # and so is a budget for a domain without augmentation sources
    if kind not in KINDS:
        raise GentaxError(f"unknown augmentation kind {kind!r}; valid: {', '.join(KINDS)}")
    if int(eps) != eps or eps < 0:
        raise GentaxError(f"augmentation budget eps must be a non-negative integer, got {eps!r}")
