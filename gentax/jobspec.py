"""Reading a job spec: the one argument a workflow job hands its verb (``--job SPEC``).

``SPEC`` is the spec's JSON text (what the rules write, ``gentax.study.jobs.encode``) or
``@FILE``, a JSON file holding it. ``take(spec, required, optional, verb)`` checks that the spec
has every required key and no unknown one, and returns it with each missing optional key set to
its default: a bad spec is one ``GentaxError`` naming the keys, before any work starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from gentax.errors import GentaxError, key_problems

HELP = ("the job's whole spec, as the workflow resolved it (JSON text, or @FILE); the other options are then "
        "not read (`snakemake -n -p` prints every job's command with its spec)")


def add_argument(parser) -> None:
    parser.add_argument("--job", metavar="SPEC", default=None, help=HELP)


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
