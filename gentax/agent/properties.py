"""Environment property measures (STUDY.md "Environment properties", Table 3, and more).

``property_measures(steps, episodes)`` reads the collector's step and episode tables (pandas) and
returns richness, complexity (a failed trajectory counted as ``t_max``), tokens, zlib bytes and
admissible actions per observation, success and bookkeeping; docs/agent.md "Property measures"
defines each. An observation is the state the agent acted on, one per step row; its text is the
``observation`` column, else the one recovered from ``prompt``, else only ``obs_chars`` is known
(text measures NaN). Property logs are collected without augmentation (``augmented_fraction``
shows a mistaken input).
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
