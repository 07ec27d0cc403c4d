"""Filler thinking: a ``<think>`` block of a promised token count that carries no reasoning.

The filler arm's prompt is the thinking arm's, but the think block is forced: the generator gets
the prompt plus ``<think>FILLER</think>\\n`` as an assistant prefix and writes the action only, so
the filler tokens cost the attention of thinking of that length, carry no reasoning, and are never
trained on (prompt tokens, outside the loss mask). The filler travels as token IDS, never as text
to re-tokenise (``"." * 5`` re-tokenises to fewer tokens), so the count is exact. Sources:
``repeat`` (one single-token ``token``) and ``shuffle`` (the real think blocks' ids, tiled,
permuted, cut). docs/agent.md "Filler thinking".
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
