"""The files of an evaluation (and of a property log), below both their writer
(``gentax.rollout.evaluation``) and their readers (``gentax.analysis.summary``, ``gentax.rollout.kept``).

A result is ``<prefix>.steps.parquet``, ``<prefix>.episodes.parquet`` and then, LAST, ``<prefix>.json``
with the tables' sizes and sha256 (``DIGESTS``): a present JSON means a complete result, and
``read_eval`` tells an intact one from a damaged one. ``replace`` deletes an earlier result's files,
its JSON first, so a kill never leaves an old JSON beside new tables; one writer holds ``output_lock``.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any, Callable

from gentax import io as gio
from gentax.errors import GentaxError
from gentax.io import write_json

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


def remove_temporaries(prefix: str) -> None:
    """Remove what killed writes of the result at ``prefix`` left (``gentax.io.remove_temporaries``)."""
    folder = Path(prefix).parent
    gio.remove_temporaries(folder, [glob.escape(Path(f).name) for f in output_files(prefix)])


def replace(prefix: str, write_tables: Callable[[str], tuple[Path, Path]],
            document: Callable[[dict[str, str]], dict]) -> dict:
    """In place of any earlier result at ``prefix``: ``write_tables(prefix)`` (-> the steps and
    episodes paths), then ``document(files)`` with the tables' digests as the JSON."""
    json_path = output_files(prefix)[0]
    gio.remove_outputs(output_files(prefix))
    steps_path, episodes_path = write_tables(prefix)
    doc = document({"steps": str(steps_path), "episodes": str(episodes_path)})
    doc[DIGESTS] = {Path(path).name: gio.file_digest(path) for path in (steps_path, episodes_path)}
    write_json(json_path, doc)
    remove_temporaries(prefix)
    return doc


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
            raise gio.result_problem(path, problem, hint)
        tables[name] = gio.read_result_parquet(path, fix=hint)
    summary = doc.get("summary", doc)  # a property log nests its summary
    if summary.get("success_rate") is None:
        reasons = "; ".join(summary.get("error_reasons") or {}) or "no reason recorded"
        raise GentaxError(
            f"{json_path}: an env error ended every one of its {summary.get('episodes')} episodes ({reasons}); "
            f"fix the cause (see the eval job's log), then {hint}; or set eval.errors_as_losses: true to "
            "count such episodes as failures")
    return doc, tables["episodes"].to_pandas()


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
