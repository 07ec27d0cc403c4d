"""Reading a job spec: the one argument a workflow job hands its verb (``--job SPEC``).

``SPEC`` is the spec's JSON text (what the rules write, ``gentax.study.jobs.encode``) or
``@FILE``, a JSON file holding it. ``take(spec, required, optional, verb)`` checks that the spec
has every required key and no unknown one, and returns it with each missing optional key set to
its default: a bad spec is one ``GentaxError`` naming the keys, before any work starts.

Below that: the views of a job's inputs its check runs on (``OnDisk``, ``Manifest``) and the
helpers the verbs' checks share (``file_problems``, ``model_problem``, ``require``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from gentax.errors import GentaxError, key_problems

HELP = ("the job's whole spec, as the workflow resolved it (JSON text, or @FILE); the other options are then "
        "not read (`snakemake -n -p` prints every job's command with its spec)")


def add_argument(parser, *, required: bool = False) -> None:
    """``--job SPEC`` and ``--check`` (run the job's check of its spec against its inputs, then exit)."""
    parser.add_argument("--job", metavar="SPEC", default=None, required=required, help=HELP)
    parser.add_argument("--check", action="store_true", help=CHECK_HELP)


def load(text: str) -> dict[str, Any]:
    """The spec of ``--job TEXT`` (inline JSON or @FILE)."""
    source = "--job"
    if text.startswith("@"):
        source = text[1:]
        try:
            text = Path(source).read_text()
        except OSError as exc:
            raise GentaxError(f"--job {source}: cannot read it ({exc.strerror})") from None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GentaxError(f"{source}: not a JSON job spec ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(spec, dict):
        raise GentaxError(f"{source}: a job spec is a JSON object, got {type(spec).__name__}")
    return spec


def take(spec: Mapping[str, Any], required: Iterable[str], optional: Mapping[str, Any] | None = None, *,
         verb: str) -> dict[str, Any]:
    """``spec`` with ``optional``'s defaults filled in; missing or unknown keys are one GentaxError."""
    required, optional = list(required), dict(optional or {})
    problems = key_problems(spec, required, optional)
    if problems:
        raise GentaxError(f"gentax {verb} --job: {problems}")
    return {**optional, **spec}


# ---- a job's check of its spec against its inputs ------------------------------------------------
# Each verb owns its check, ``<verb>_problems(spec, inputs) -> list[str]`` ("key: what disagrees,
# with the file and the fix"; [] when the job would start), run on one of two views of its inputs:
# ``OnDisk`` here (the job itself, before any work; ``--check`` stops after it) and the plan's
# ``gentax.study.checks.Planned`` (every job of a plan, when Snakemake builds it).
CHECK_HELP = "check the spec against its inputs (task manifest, model folder, input files) and exit before any work"


@dataclass(frozen=True)
class Manifest:
    """What a job reads of a task manifest (``gentax.domains.tasks.task_manifest``)."""
    domain: str
    split: str
    size: int


class OnDisk:
    """A job's inputs as they are on disk."""

    def manifest(self, path: str) -> Manifest | None:
        """The manifest at ``path``; None when there is none; a damaged one is a GentaxError."""
        file = Path(path)
        if not file.is_file():
            return None
        try:
            data = json.loads(file.read_text())
            return Manifest(str(data["domain"]), str(data["split"]), len(data["seeds"]))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise GentaxError(f"{path}: not a task manifest ({type(exc).__name__}: {exc}); rebuild it "
                              f"(snakemake --forcerun tasks)") from None

    def model(self, path: str) -> bool:
        """An HF model folder is there."""
        return (Path(path) / "config.json").is_file()

    def file(self, path: str) -> bool:
        return Path(path).is_file()


def file_problems(spec: Mapping[str, Any], inputs, *keys: str) -> list[str]:
    """Every file the spec's ``keys`` name (a path, a list of paths, or None) is there."""
    out = []
    for key in keys:
        value = spec[key]
        for path in [value] if isinstance(value, str) else (value or []):
            if not inputs.file(path):
                out.append(f"{key}: {path} is not there (its job has not run: snakemake {path})")
    return out


def model_problem(key: str, path: str, inputs) -> list[str]:
    """[] when ``path`` is a model folder in ``inputs``, else the one problem naming ``key``."""
    if inputs.model(path):
        return []
    return [f"{key}: {path} is no model folder (no config.json there) and no job of the plan writes one there"]


def require(verb: str, found: list[str]) -> None:
    """A job's problems (its check's list) as one GentaxError, a line per problem; nothing if none."""
    if found:
        raise GentaxError(f"gentax {verb} --job: " + ("; ".join(found) if len(found) == 1
                                                      else "\n  " + "\n  ".join(found)))


def checked(verb: str) -> int:
    """What ``--check`` prints once the check passed: the job would start."""
    print(f"gentax {verb} --check: the spec agrees with its inputs")
    return 0
