"""Checkpoint evaluation and property logs on top of the collector (the logic behind
``gentax eval`` and ``gentax properties``; the workflow calls these functions too).

Contract::

    evaluate(generator, task_seeds, cfg, out_prefix, *, run_id="", meta=None) -> summary dict
    measure_properties(generator, task_seeds, cfg, out_prefix, *, t_max=50, ...) -> report dict
    output_prefix("results/x.parquet") -> "results/x"
    read_eval("results/x.json") -> (summary dict, episodes DataFrame)   # checked, see below

Both write ``<prefix>.steps.parquet`` and ``<prefix>.episodes.parquet`` (the collector's
tables) and then, LAST, ``<prefix>.json`` with the tables' sizes and sha256 (``DIGESTS``) — so a
present JSON means a complete result, and ``read_eval`` (what a consumer of results calls) tells
an intact one from a damaged one, naming the file and the command that rebuilds it. One writer
per result: both hold ``output_lock(prefix)`` while they work (taken before any episode runs,
so an unwritable output fails at once). The three are replaced as one unit: once the rollouts are done, an earlier result's files are deleted, its
JSON first, before the new ones are written, so a kill never leaves an old JSON beside new
tables. Temporaries of killed writes of these three names are removed at start and at the end.
``evaluate``'s JSON is ``summarize(rollouts)`` plus ``meta``; success = the episode was won.
An episode that an env failure ended (``error`` set: a dead JVM, an engine bug) says nothing
about the policy: ``success_rate`` leaves it out by default and counts it as a failure with
``errors_as_losses=True``; the JSON always carries ``errors`` (count), ``error_rate`` (share of
all episodes), ``scored_episodes`` (the episodes behind ``success_rate``; null rate when 0) and
``error_reasons`` (one short line per distinct reason, with its count).
``measure_properties`` collects with ``max_steps = t_max`` and no augmentation (unless it is given
one: a richness level of the controls measures the states its runs train on), and its
JSON holds ``measures`` (``gentax.agent.properties.property_measures``) and ``summary``.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import os
from pathlib import Path
from typing import Any, Callable

from gentax import io as gio
from gentax import progress as gprogress
from gentax.errors import GentaxError, short_reason
from gentax.io import write_json
from gentax.rollout.collector import CollectConfig, collect
from gentax.rollout.schema import Rollouts


#: key of the result JSON: {table file name: gentax.io.file_digest} of the tables written before it
DIGESTS = "file_digests"


def output_lock(prefix: str):
    """The lock every writer of the result at ``prefix`` holds while it works (``gentax.io``);
    GentaxError at once when its folder cannot be written."""
    return gio.output_lock(output_files(prefix)[0], "evaluation output")


def output_prefix(out: str | os.PathLike) -> str:
    """``x.parquet`` -> ``x`` (any other name is taken as the prefix itself)."""
    out = str(out)
    return out[: -len(".parquet")] if out.endswith(".parquet") else out


def output_files(prefix: str) -> list[str]:
    """The files of one result, the marker of completeness (the JSON) first."""
    return [prefix + ".json", prefix + ".steps.parquet", prefix + ".episodes.parquet"]


def _remove_temporaries(prefix: str) -> None:
    folder = Path(prefix).parent
    gio.remove_temporaries(folder, [glob.escape(Path(f).name) for f in output_files(prefix)])


def _replace_result(rollouts: Rollouts, prefix: str, document: Callable[[dict[str, str]], dict]) -> dict:
    """Write the tables, then ``document(files)`` with the tables' digests as the JSON, in place
    of any earlier result."""
    json_path = output_files(prefix)[0]
    gio.remove_outputs(output_files(prefix))
    steps_path, episodes_path = rollouts.write(prefix)
    doc = document({"steps": str(steps_path), "episodes": str(episodes_path)})
    doc[DIGESTS] = {Path(path).name: gio.file_digest(path) for path in (steps_path, episodes_path)}
    write_json(json_path, doc)
    _remove_temporaries(prefix)
    return doc


def _json_number(value: float) -> float | None:
    return None if value != value else value  # NaN -> null


def scored_episodes(episodes, errors_as_losses: bool = False):
    """The episodes behind a success rate (an episodes frame): all of them with
    ``errors_as_losses``, else those no env error ended."""
    return episodes if errors_as_losses else episodes[episodes["error"].isna()]


def task_outcomes(episodes, errors_as_losses: bool = False) -> dict[int, float]:
    """Success per held-out task (``task_seed`` -> share of its scored episodes won; one episode
    per task in an evaluation, so 0 or 1): what a paired comparison of two checkpoints on the same
    tasks needs (``gentax.analysis.stats.delta_id_interval``)."""
    scored = scored_episodes(episodes, errors_as_losses)
    won = scored.groupby("task_seed", sort=True)["won"].mean()
    return {int(seed): float(value) for seed, value in won.items()}


def summarize(rollouts: Rollouts, errors_as_losses: bool = False) -> dict[str, Any]:
    """Headline figures of a set of trajectories (JSON-ready; env errors: see module doc).
    ``think_tokens_mean``: mean think-block tokens over the steps that had one (null: none did)."""
    from gentax.agent.filler import mean_think_tokens

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
        _remove_temporaries(out_prefix)
        rollouts = collect(generator, task_seeds, cfg, run_id=run_id, pool=pool, progress=progress)
        return _replace_result(rollouts, out_prefix, lambda files: {
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
    from gentax.agent.properties import property_measures

    if t_max < 1:
        raise GentaxError(f"t_max must be >= 1, got {t_max}")
    aug = augmentation or {}
    cfg = dataclasses.replace(cfg, max_steps=t_max, aug_eps=int(aug.get("eps", 0)), aug_p=float(aug.get("p", 0.0)),
                              aug_kind=aug.get("kind", cfg.aug_kind))
    cfg.validate()
    with output_lock(out_prefix), gprogress.job(f"properties {cfg.domain} {run_id}".strip(),
                                                len(task_seeds) * cfg.group_size, "episode"):
        _remove_temporaries(out_prefix)
        rollouts = collect(generator, task_seeds, cfg, run_id=run_id, progress=progress)
        measures = property_measures(rollouts.steps_frame(), rollouts.episodes_frame(), t_max=t_max, tokenizer=tokenizer)
        return _replace_result(rollouts, out_prefix, lambda files: {
            **(meta or {}),
            **_config_meta(cfg),
            "t_max": t_max,
            "task_seeds": [int(s) for s in task_seeds],
            "measures": measures,
            "summary": summarize(rollouts, errors_as_losses),
            "files": files,
        })


def read_eval(json_path: str | os.PathLike) -> tuple[dict[str, Any], Any]:
    """(summary dict, episodes DataFrame) of the evaluation result ``json_path``, checked: the
    JSON parses, each table matches the digest the JSON recorded for it and reads as Parquet,
    and some episode was scored. Else GentaxError naming the file and the command that rebuilds
    it (or, when an env error ended every episode, how to recover)."""
    json_path = Path(json_path)
    prefix = output_prefix(str(json_path)[: -len(".json")] if json_path.suffix == ".json" else json_path)
    json_path = Path(output_files(prefix)[0])
    hint = gio.rebuild_hint(json_path)
    doc = gio.read_result_json(json_path, fix=hint)
    tables = {}
    for name, path in zip(("steps", "episodes"), output_files(prefix)[1:]):
        expected = doc.get(DIGESTS, {}).get(Path(path).name)
        problem = gio.digest_problem(path, expected) if expected else None
        if problem:
            state = "is missing" if problem == "missing" else f"is corrupt ({problem})"
            raise GentaxError(f"{path} {state}; {hint}")
        tables[name] = gio.read_result_parquet(path, fix=hint)
    summary = doc.get("summary", doc)  # a property log nests its summary
    if summary.get("success_rate") is None:
        reasons = "; ".join(summary.get("error_reasons") or {}) or "no reason recorded"
        raise GentaxError(
            f"{json_path}: an env error ended every one of its {summary.get('episodes')} episodes ({reasons}); "
            f"fix the cause (see the eval job's log), then {hint}; or set eval.errors_as_losses: true to "
            "count such episodes as failures")
    return doc, tables["episodes"].to_pandas()


def filler_for_eval(reference: str | os.PathLike, *, source: str = "repeat", token: str = ".",
                    tokens: int | None = None):
    """The FillerSpec of a filler-mode evaluation, matched to ``reference``: the JSON of the
    thinking evaluation of the same cell (same checkpoint step, eval domain, seed). Its
    ``think_tokens_mean`` (rounded; 0 when null) is the count unless ``tokens`` fixes one; the
    shuffle source permutes the think blocks of its steps table."""
    from gentax.agent.filler import FillerSpec
    from gentax.agent.parse import think_text

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
