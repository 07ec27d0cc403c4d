"""Checkpoint evaluation and property logs on top of the collector (``gentax eval``, ``gentax properties``).

    evaluate(generator, task_seeds, cfg, out_prefix, *, run_id="", meta=None) -> summary dict
    measure_properties(generator, task_seeds, cfg, out_prefix, *, t_max=50, ...) -> report dict

Both write one result at ``out_prefix`` in the format of ``gentax.evalfile`` (the two tables, then
LAST the JSON with their digests), holding ``output_lock(prefix)`` from before any episode runs; an
earlier result is replaced only once the rollouts are done. Success = the episode was won. An
episode that an env failure ended says nothing about the policy: ``success_rate`` leaves it out
unless ``errors_as_losses``; the JSON always counts ``errors`` and their reasons (``summarize``).
``measure_properties`` plays to ``t_max`` steps, unaugmented unless given a richness level.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from pathlib import Path
from typing import Any

from gentax import io as gio
from gentax import progress as gprogress
from gentax.agent.filler import FillerSpec, mean_think_tokens
from gentax.agent.parse import think_text
from gentax.agent.properties import property_measures
from gentax.errors import GentaxError, short_reason
from gentax.evalfile import output_lock, remove_temporaries, replace, scored_episodes
from gentax.rollout.collector import CollectConfig, collect
from gentax.rollout.schema import Rollouts


def _json_number(value: float) -> float | None:
    return None if value != value else value  # NaN -> null


def summarize(rollouts: Rollouts, errors_as_losses: bool = False) -> dict[str, Any]:
    """Headline figures of a set of trajectories (JSON-ready; env errors: see module doc).
    ``think_tokens_mean``: mean think-block tokens over the steps that had one (null: none did)."""
    steps, episodes = rollouts.steps_frame(), rollouts.episodes_frame()
    if len(episodes) == 0:
        raise GentaxError("no episodes to summarise")
    reasons = collections.Counter(steps["reason"].dropna())
    stats = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in rollouts.stats.items()}
    errored = episodes["error"].notna()
    scored = scored_episodes(episodes, errors_as_losses)
    return {
        "episodes": int(len(episodes)),
        "steps": int(len(steps)),
        "success_rate": float(scored["won"].mean()) if len(scored) else None,
        "scored_episodes": int(len(scored)),
        "errors_as_losses": bool(errors_as_losses),
        "error_rate": float(errored.mean()),
        "error_reasons": dict(collections.Counter(map(short_reason, episodes["error"][errored])).most_common()),
        "invalid_rate": float(1.0 - steps["valid"].mean()) if len(steps) else float("nan"),
        "mean_length": float(episodes["length"].mean()),
        "mean_return": float(episodes["return"].mean()),
        "length_cut_rate": float((steps["finish_reason"] == "length").mean()) if len(steps) else float("nan"),
        "think_tokens_mean": _json_number(mean_think_tokens(steps["think_tokens"])),
        "invalid_reasons": dict(sorted(reasons.items())),
        "errors": int(episodes["error"].notna().sum()),
        "timing": stats,
    }


def evaluate(generator, task_seeds: list[int], cfg: CollectConfig, out_prefix: str, *, run_id: str = "",
             meta: dict[str, Any] | None = None, pool=None, progress: bool = True,
             errors_as_losses: bool = False) -> dict[str, Any]:
    """Roll out ``task_seeds`` under ``cfg``, write the tables and the summary JSON."""
    with output_lock(out_prefix), gprogress.job(f"eval {cfg.domain} {run_id}".strip(), len(task_seeds) * cfg.group_size,
                                                "episode"):
        remove_temporaries(out_prefix)
        rollouts = collect(generator, task_seeds, cfg, run_id=run_id, pool=pool, progress=progress)
        return replace(out_prefix, rollouts.write, lambda files: {
            **(meta or {}),
            **_config_meta(cfg),
            "task_seeds": [int(s) for s in task_seeds],
            **summarize(rollouts, errors_as_losses),
            "files": files,
        })


def measure_properties(generator, task_seeds: list[int], cfg: CollectConfig, out_prefix: str, *, t_max: int = 50,
                       run_id: str = "", meta: dict[str, Any] | None = None, tokenizer=None,
                       progress: bool = True, errors_as_losses: bool = False,
                       augmentation: dict[str, Any] | None = None) -> dict[str, Any]:
    """Trajectories with ``max_steps = t_max`` and their property measures; no augmentation
    unless ``augmentation`` ({"eps", "p", "kind"}) asks for it."""
    if t_max < 1:
        raise GentaxError(f"t_max must be >= 1, got {t_max}")
    aug = augmentation or {}
    cfg = dataclasses.replace(cfg, max_steps=t_max, aug_eps=int(aug.get("eps", 0)), aug_p=float(aug.get("p", 0.0)),
                              aug_kind=aug.get("kind", cfg.aug_kind))
    cfg.validate()
    with output_lock(out_prefix), gprogress.job(f"properties {cfg.domain} {run_id}".strip(),
                                                len(task_seeds) * cfg.group_size, "episode"):
        remove_temporaries(out_prefix)
        rollouts = collect(generator, task_seeds, cfg, run_id=run_id, progress=progress)
        measures = property_measures(rollouts.steps_frame(), rollouts.episodes_frame(), t_max=t_max, tokenizer=tokenizer)
        return replace(out_prefix, rollouts.write, lambda files: {
            **(meta or {}),
            **_config_meta(cfg),
            "t_max": t_max,
            "task_seeds": [int(s) for s in task_seeds],
            "measures": measures,
            "summary": summarize(rollouts, errors_as_losses),
            "files": files,
        })


def filler_for_eval(reference: str | os.PathLike, *, source: str = "repeat", token: str = ".",
                    tokens: int | None = None):
    """The FillerSpec of a filler-mode evaluation, matched to ``reference``: the JSON of the
    thinking evaluation of the same cell (same checkpoint step, eval domain, seed). Its
    ``think_tokens_mean`` (rounded; 0 when null) is the count unless ``tokens`` fixes one; the
    shuffle source permutes the think blocks of its steps table."""
    path = Path(reference)
    if not path.is_file():
        raise GentaxError(f"filler evaluation: the thinking evaluation {path} does not exist")
    doc = gio.read_result_json(path, keys=("files",) if source == "shuffle" else ())
    if tokens is None:
        mean = doc.get("think_tokens_mean")
        tokens = 0 if mean is None else int(round(mean))
    texts: tuple[str, ...] = ()
    if source == "shuffle":
        responses = gio.read_result_parquet(doc["files"]["steps"], columns=["response"], fix=gio.rebuild_hint(path))
        responses = responses.column("response").to_pylist()
        texts = tuple(t for t in map(think_text, responses) if t)
    return FillerSpec(tokens=tokens, source=source, token=token, texts=texts)


def _config_meta(cfg: CollectConfig) -> dict[str, Any]:
    filler = None if cfg.filler is None else {"tokens": cfg.filler.tokens, "source": cfg.filler.source,
                                             "token": cfg.filler.token, "texts": len(cfg.filler.texts)}
    return {
        "domain": cfg.domain,
        "split": cfg.split,
        "think": cfg.think,
        "filler": filler,
        "history_length": cfg.history_length,
        "group_size": cfg.group_size,
        "sampling": dataclasses.asdict(cfg.sampling),
        "max_steps": cfg.max_steps,
        "env_options": cfg.env_options,
        "augmentation": {"eps": cfg.aug_eps, "p": cfg.aug_p, "kind": cfg.aug_kind},
        "seed": cfg.seed,
    }
