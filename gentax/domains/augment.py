"""State Information Augmentation: insert goal-irrelevant text into what the agent sees.

Only the agent's view changes: the collector puts ``Augmented.text`` into the prompt while the env
steps on its original state, so transitions and rewards are those of the plain episode.
``augment`` inserts ``floor(eps / nominal_tokens)`` snippets at the layout's boundaries;
``Augmented.inserted`` lists them exactly as they appear, and ``strip_inserted`` removes them.
Each domain declares its distractors, goal reader and layout on its spec (``Augmentation``); this
module holds what they share. docs/agent.md "State Information Augmentation" describes the kinds,
the budget and the safety rules (never admissible, no goal word, only at boundaries).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import re
from pathlib import Path
from typing import Callable

from gentax.domains.spec import Augmentation, spec, specs
from gentax.errors import GentaxError

KINDS = ("distractor", "cross_domain", "fixed_boilerplate", "shuffled")
CHARS_PER_TOKEN = 4  # English prose (the monitor's caption)
MIN_MONITOR_TOKENS = 10  # a monitor needs room for ~10 tokens of the other domain's text
BANK_PATH = Path(__file__).with_name("augment_bank.json")

FIXED_TEXT = "This is fixed filler text that carries no information about the task or the state. "

#: per-domain tables derived from the specs' ``Augmentation`` (and DOMAINS: the domains that have one)
_DERIVED = {
    "NOMINAL_TOKENS": "nominal_tokens",
    "DONOR_CHARS_PER_TOKEN": "donor_chars_per_token",
    "MONITOR_SHOWS": "monitor_shows",
}


def _sources() -> dict[str, Augmentation]:
    return {d: s.augmentation for d, s in specs().items() if s.augmentation is not None}


def __getattr__(name: str):
    if name == "DOMAINS":
        return tuple(_sources())
    if name in _DERIVED:
        return {d: getattr(a, _DERIVED[name]) for d, a in _sources().items()}
    raise AttributeError(name)


def _source(domain: str) -> Augmentation:
    return spec(domain).augmentation_or_error()


@dataclasses.dataclass(frozen=True)
class Augmented:
    text: str
    inserted: list[str]


_STOPWORDS = frozenset(
    "the and for with that this from into onto your you are was were will can has have its "
    "put some one two any all not but out off too very more most less than then them they "
    "need want would like looking find buy price lower dollars".split()
)


# ---- public API ---------------------------------------------------------------------------
def augment(
    domain: str, observation: str, eps: int, rng: random.Random, kind: str = "distractor", *, goal: str = ""
) -> Augmented:
    """Insert ``floor(eps / NOMINAL_TOKENS[domain])`` snippets of ``kind`` (docs/agent.md)."""
    _check(domain, kind, eps)
    count = eps // _source(domain).nominal_tokens
    if count == 0:
        return Augmented(observation, [])
    keywords = _keywords(goal + " " + _goal_in(domain, observation))
    layout = layout_of(domain, observation)
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
    separator = layout_of(domain, text).separator
    for snippet in inserted:
        piece = separator + snippet
        if piece not in text:
            raise GentaxError(f"snippet {snippet[:40]!r} is not in the text")
        text = text.replace(piece, "", 1)
    return text


class TrajectoryAugmenter:
    """Augmentation of one trajectory: on with probability ``p`` by a draw from ``seed`` alone, so
    arms that differ only in eps or kind augment the same trajectories. Step ``t`` draws from an RNG
    keyed by ``(seed, t)``, independent of call order. Pass the task's goal (``obs.goal``) so
    distractors avoid its words; without it, the first observation stating a goal gives it."""

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
class Layout:
    """Where ``separator + snippet`` may be inserted into one observation text."""

    separator: str
    boundaries: list[int]


def layout_of(domain: str, text: str) -> Layout:
    """The domain's layout of ``text``: its spec's ``layout``, else by its separator (a line
    separator: line ends; any other: sentence ends)."""
    source = _source(domain)
    if source.layout is not None:
        return source.layout(text)
    if source.separator == "\n":
        return line_layout(text)
    return sentence_layout(text, source.separator)


def sentence_layout(text: str, separator: str = " ", *, before: str | None = None) -> Layout:
    """After '.', '!' or '?' when the next non-space character starts a sentence (or ends);
    with ``before``, only ahead of that marker's first occurrence (when any boundary is)."""
    ends = _sentence_ends(text)
    if before is not None:
        marker = text.find(before)
        ends = [p for p in ends if marker < 0 or p < marker] or ends
    return Layout(separator, ends)


def line_layout(text: str) -> Layout:
    """At every line end (and the text's end when it has no final newline)."""
    return Layout("\n", _line_ends(text))


def _sentence_ends(text: str) -> list[int]:
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


def _stem(word: str) -> str:
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _keywords(text: str) -> frozenset[str]:
    words = re.findall(r"[a-z]+", text.lower())
    return frozenset(_stem(w) for w in words if len(w) >= 3 and w not in _STOPWORDS)


def allowed(candidates, keywords: frozenset[str], words_of: Callable = str) -> list:
    """Candidates sharing no content word with the goal (all of them if none would be left)."""
    kept = [c for c in candidates if not (_keywords(words_of(c)) & keywords)]
    return kept or list(candidates)


def article(noun: str) -> str:
    """The indefinite article of ``noun`` (distractor sentences)."""
    return "an" if noun[0].lower() in "aeiou" else "a"


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
        sample = rng.choice(allowed(bank[donor], keywords))
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
    declared = spec(domain)  # an unknown domain is one GentaxError
    if eps:
        declared.augmentation_or_error()  # and so is a budget for a domain without augmentation sources
    if kind not in KINDS:
        raise GentaxError(f"unknown augmentation kind {kind!r}; valid: {', '.join(KINDS)}")
    if int(eps) != eps or eps < 0:
        raise GentaxError(f"augmentation budget eps must be a non-negative integer, got {eps!r}")
