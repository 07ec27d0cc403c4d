"""Filler thinking: a ``<think>`` block of a promised token count that carries no reasoning.

Contract (docs/agent.md "Filler thinking")::

    spec = FillerSpec(tokens=N, source="repeat" | "shuffle", token=".", texts=(real thinking, ...))
    ids  = filler_ids(spec, tokenizer, seed)         # exactly N token ids
    pre  = think_prefix_ids(tokenizer, ids)          # ids of "<think>" + filler + "</think>\\n"

The filler arm asks the same question as the default (thinking) arm — the prompt asks for
reasoning then an action — but the policy does not write the reasoning: the generator gets the
chat prompt followed by the forced assistant prefix ``<think>FILLER</think>\\n`` and generates
the action only. The filler tokens sit in the context (they cost the same attention compute as
thinking of that length), carry no reasoning, and are never trained on: they are prompt tokens
of the training sample, outside the loss mask (only generated tokens are).

Exact counts: the filler is built and handed on as TOKEN IDS, never as text to re-tokenise
(``"." * 5`` re-tokenises to fewer tokens under a BPE tokenizer), so the context holds exactly
``tokens`` filler ids between the tag ids. Sources:

- ``repeat``: ``tokens`` copies of ``token``, which must be ONE token under the policy's
  tokenizer (a ConfigError names it otherwise): no word of any real thinking appears.
- ``shuffle``: the token ids of real thinking (``texts``: the thinking run's think blocks at
  that training step), tiled until there are at least ``tokens`` of them, randomly permuted
  (numpy, seeded by ``seed``) and cut to ``tokens``. When ``tokens`` equals the texts' token
  count the filler is a permutation of exactly their tokens (same multiset), never in their
  original order when another order exists. It keeps the words the policy used (object names)
  but not their order: a control for "domain words in the think block" without reasoning.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from gentax.errors import ConfigError

SOURCES = ("repeat", "shuffle")
THINK_OPEN, THINK_CLOSE = "<think>", "</think>\n"
#: redraws of a shuffle that came out in the original order (only possible for tiny inputs)
_REDRAWS = 16


@dataclasses.dataclass(frozen=True)
class FillerSpec:
    """What one filler block is made of (see the module docstring)."""

    tokens: int
    source: str = "repeat"
    token: str = "."
    texts: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "texts", tuple(self.texts))
        if isinstance(self.tokens, bool) or int(self.tokens) != self.tokens or self.tokens < 0:
            raise ConfigError(f"filler token count must be an integer >= 0, got {self.tokens!r}")
        object.__setattr__(self, "tokens", int(self.tokens))
        if self.source not in SOURCES:
            raise ConfigError(f"unknown filler source {self.source!r}; valid: {', '.join(SOURCES)}")
        if self.source == "repeat" and not self.token:
            raise ConfigError("filler source repeat needs a non-empty token")
        if self.source == "shuffle" and self.tokens and not any(t.strip() for t in self.texts):
            raise ConfigError("filler source shuffle needs real thinking texts to shuffle (none given)")


def encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def filler_ids(spec: FillerSpec, tokenizer, seed: int) -> list[int]:
    """Exactly ``spec.tokens`` token ids of filler (see the module docstring)."""
    if spec.tokens == 0:
        return []
    if spec.source == "repeat":
        ids = encode(tokenizer, spec.token)
        if len(ids) != 1:
            raise ConfigError(f"filler token {spec.token!r} is {len(ids)} tokens under the policy's tokenizer; "
                              "choose one that is a single token (e.g. '.')")
        return ids * spec.tokens
    return shuffled_ids([encode(tokenizer, text.strip()) for text in spec.texts], spec.tokens, seed)


def shuffled_ids(pieces: Sequence[Sequence[int]], count: int, seed: int) -> list[int]:
    """``count`` ids: the pieces' ids in order, tiled to >= ``count``, permuted, cut to ``count``."""
    pool = np.array([i for piece in pieces for i in piece], dtype=np.int64)
    if count and not len(pool):
        raise ConfigError("filler source shuffle: the real thinking texts hold no tokens")
    tiled = np.tile(pool, -(-count // len(pool))) if count else pool[:0]
    rng = np.random.default_rng(seed)
    for _ in range(_REDRAWS):
        drawn = tiled[rng.permutation(len(tiled))][:count]
        if not np.array_equal(drawn, tiled[:count]):
            break  # not the original order (keep the last draw when every order is the original)
    return drawn.tolist()


def think_prefix_ids(tokenizer, ids: Sequence[int]) -> list[int]:
    """The forced assistant prefix: ids of ``<think>``, the filler ids as given, ids of ``</think>\\n``."""
    return encode(tokenizer, THINK_OPEN) + list(ids) + encode(tokenizer, THINK_CLOSE)


def mean_think_tokens(values) -> float:
    """Mean of the per-step think-block token counts that exist (NaN when none does)."""
    counts = [float(v) for v in values if v is not None and not (isinstance(v, float) and np.isnan(v))]
    return float(np.mean(counts)) if counts else float("nan")
