"""Environment property measures (STUDY.md "Environment properties", Table 3, and more).

Contract (docs/contracts.md)::

    property_measures(steps, episodes, *, t_max=50, tokenizer=None) -> dict[str, float]

``steps`` and ``episodes`` are the collector's step and episode tables (pandas DataFrames).
Returned measures:

``richness``             state information richness: mean characters per observation (paper);
``complexity``           planning complexity: mean trajectory length, a failed trajectory (not
                         ``won``) counted as ``t_max`` (paper; default 50 for every domain);
``tokens_per_obs``       mean tokens per observation under ``tokenizer`` (only when given);
``zlib_bytes_per_obs``   mean zlib-compressed size (level 9, UTF-8) per observation — how much
                         non-repetitive information an observation carries;
``admissible_per_step``  mean number of admissible actions per step (``admissible_count``);
``success``              fraction of episodes won;
``n_episodes``, ``n_steps``, ``augmented_fraction``  bookkeeping.

Choices (the paper is silent on them):
- An observation is the state the agent acted on at a step: one per step row, so a state
  repeated after an invalid action counts again, and the final state after the last step
  (never shown to the agent) is not counted. Means are pooled over all step rows.
- The text is the one the agent saw: the ``observation`` column when the step table has one,
  else the current observation recovered from the ``prompt`` column
  (``gentax.agent.prompts.observation_from_prompt``); with neither, ``richness`` falls back to
  ``obs_chars`` and the text measures are NaN. Property logs are collected WITHOUT
  augmentation, so this is the original state text; ``augmented_fraction`` reports the share
  of augmented steps so a mistaken input is visible.
"""

from __future__ import annotations

import math
import zlib

from gentax.agent.prompts import observation_from_prompt
from gentax.errors import GentaxError

STEP_COLUMNS = ("admissible_count",)
EPISODE_COLUMNS = ("length", "won")


def property_measures(steps, episodes, *, t_max: int = 50, tokenizer=None) -> dict[str, float]:
    """Property measures of one domain's trajectories (see the module docstring)."""
    _require(steps, STEP_COLUMNS, "steps")
    _require(episodes, EPISODE_COLUMNS, "episodes")
    if len(episodes) == 0 or len(steps) == 0:
        raise GentaxError("property measures need at least one episode and one step")
    if t_max < 1:
        raise GentaxError(f"t_max must be >= 1, got {t_max}")

    texts = observation_texts(steps)
    won = episodes["won"].astype(bool)
    lengths = episodes["length"].astype(float).where(won, float(t_max))
    measures = {
        "richness": _mean([len(t) for t in texts]) if texts is not None else float(steps["obs_chars"].mean()),
        "complexity": float(lengths.mean()),
        "zlib_bytes_per_obs": _mean([len(zlib.compress(t.encode("utf-8"), 9)) for t in texts]) if texts is not None else math.nan,
        "admissible_per_step": float(steps["admissible_count"].mean()),
        "success": float(won.mean()),
        "n_episodes": float(len(episodes)),
        "n_steps": float(len(steps)),
        "augmented_fraction": float(steps["augmented"].astype(bool).mean()) if "augmented" in steps else 0.0,
    }
    if tokenizer is not None:
        measures["tokens_per_obs"] = _mean([len(_encode(tokenizer, t)) for t in texts]) if texts is not None else math.nan
    return measures


def observation_texts(steps) -> list[str] | None:
    """The observation text of every step row (None when the table holds no text)."""
    if "observation" in steps:
        return [str(t) for t in steps["observation"]]
    if "prompt" in steps:
        return [observation_from_prompt(str(p)) for p in steps["prompt"]]
    if "obs_chars" not in steps:
        raise GentaxError("steps table needs an 'observation', 'prompt' or 'obs_chars' column")
    return None


def _encode(tokenizer, text: str) -> list[int]:
    try:
        return tokenizer.encode(text, add_special_tokens=False)
    except TypeError:  # tokenizers without the keyword (e.g. tiktoken-style)
        return tokenizer.encode(text)


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values))


def _require(frame, columns, name: str) -> None:
    missing = [c for c in columns if c not in frame]
    if missing:
        raise GentaxError(f"{name} table lacks column(s) {', '.join(missing)}")
