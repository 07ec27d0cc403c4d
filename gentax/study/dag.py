"""Snakemake's own job graph of the study, read through its public interfaces: its command line and
a logger plugin (``LogHandler`` writes each dry-run ``JOB_INFO`` record as a JSON line). No second
copy of the graph is kept. Readers: scripts/dump_job_settings.py and ``gentax.study.preview.cost``.
"""

import json
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any, Iterable, Sequence

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

from gentax.errors import ConfigError
from gentax.io import REPO_ROOT

#: the Snakemake profile of each preset: what ``gentax plan`` prices with
PROFILES = {"paper": REPO_ROOT / "profiles" / "slurm", "embedded": REPO_ROOT / "profiles" / "embedded",
            "gpu1": REPO_ROOT / "profiles" / "gpu1"}

#: the logger plugin's name (``--logger``): what ``__main__`` registers it as
LOGGER = "gentax-jobs"


@dataclass(frozen=True)
class PlannedJob:
    """One job of Snakemake's DAG, as its readers need it: plain values (paths as text, in
    Snakemake's order)."""

    rule: str
    verb: str | None            # the gentax verb of its one command (``gentax train rl --job ...``); None: rule all
    spec: dict[str, Any] | None  # what that command receives (its ``--job``); None: rule all
    wildcards: dict[str, str]
    input: list[str]
    output: list[str]
    log: list[str]
    threads: int
    resources: dict[str, Any]


def planned(record: dict[str, Any]) -> PlannedJob:
    """A ``JOB_INFO`` line as a ``PlannedJob``, the verb and spec read from ``gentax VERB --job SPEC``."""
    words = shlex.split(record.pop("shellcmd") or "")
    at = words.index("--job") if "--job" in words else None
    return PlannedJob(verb=" ".join(words[1:at]) if at else None, spec=json.loads(words[at + 1]) if at else None,
                      **record)


def in_pipeline_order(jobs: list[PlannedJob]) -> list[PlannedJob]:
    """``jobs`` layer by layer (a job after every job whose output it reads), each layer sorted."""
    made_by = {path: i for i, job in enumerate(jobs) for path in job.output}
    graph = TopologicalSorter({i: {made_by[path] for path in job.input if path in made_by} for i, job in enumerate(jobs)})
    graph.prepare()
    out: list[PlannedJob] = []
    while graph.is_active():
        layer = sorted(graph.get_ready(), key=lambda i: (jobs[i].rule, sorted(jobs[i].output)))
        out += [jobs[i] for i in layer]
        graph.done(*layer)
    return out


def _snakemake(*args: str, main: str = "snakemake") -> subprocess.CompletedProcess:
    """``snakemake ARGS`` (or this module's ``__main__``) in the repository, its output kept."""
    return subprocess.run([sys.executable, "-m", main, "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory",
                           str(REPO_ROOT), *args], cwd=REPO_ROOT, capture_output=True, text=True)


def _refused(done: subprocess.CompletedProcess, args: Sequence[str]) -> None:
    """A failed ``snakemake`` ended as it ends on its own: the Snakefile's one-line error (exit 2),
    or a ConfigError with Snakemake's last lines."""
    errors = [line for line in done.stderr.splitlines() if line.startswith("gentax: error:")]
    if errors:
        print("\n".join(errors), file=sys.stderr)
        raise SystemExit(2)
    said = " | ".join(line.strip() for line in (done.stdout + done.stderr).strip().splitlines()[-5:])
    raise ConfigError(f"snakemake {' '.join(args)} failed: {said}")


def build(args: Sequence[str]) -> list[PlannedJob]:
    """Every job of ``snakemake -n ARGS``, each forced (what the targets take from nothing), in
    pipeline order; nothing runs. A plan the Snakefile refuses ends as ``snakemake -n`` does (its
    one-line error, ``SystemExit(2)``); any other failure is a ``ConfigError`` with its last lines."""
    with tempfile.TemporaryDirectory(prefix="gentax-dag-") as folder:
        out = Path(folder) / "jobs.jsonl"
        done = _snakemake("-n", "--forceall", "--nolock", "--ignore-incomplete", "--quiet", "rules", "--logger", LOGGER,
                          f"--logger-{LOGGER}-path", str(out), *args, main="gentax.study.dag")
        if done.returncode != 0:
            _refused(done, args)
        return in_pipeline_order([planned(json.loads(line)) for line in out.read_text().splitlines()])


def rule_names(args: Sequence[str]) -> list[str]:
    """Every rule of the workflow loaded with ``args`` (``snakemake --list-rules``)."""
    done = _snakemake("--list-rules", *args)
    if done.returncode != 0:
        _refused(done, args)
    return [line.strip() for line in done.stdout.splitlines() if line.strip() and not line[0].isspace()]


def study_args(preset: str, configfiles: Iterable[str | Path] = (), targets: Iterable[str] = ()) -> list[str]:
    """The Snakemake arguments of ``targets`` (default: rule all's) of the study of ``preset`` with
    ``configfiles`` laid over it (targets first: ``--configfile`` and ``--config`` take every word after them)."""
    files = [str(Path(path).resolve()) for path in configfiles]
    return [*targets, *(["--configfile", *files] if files else []), "--config", f"preset={preset}"]


# ---- the logger plugin (``python -m gentax.study.dag ARGS``: snakemake ARGS with it registered) ----


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    path: str = field(default="", metadata={"help": "the JSON-lines file the jobs are written to", "required": True})


class LogHandler(LogHandlerBase):
    """Each ``JOB_INFO`` record of a dry-run as one JSON line of the settings' ``path``."""

    writes_to_stream = writes_to_file = has_formatter = needs_rulegraph = False
    has_filter = True  # every JOB_INFO, whatever --quiet keeps off the console

    def emit(self, record) -> None:
        if getattr(record, "event", None) != LogEvent.JOB_INFO:
            return
        job = {"rule": record.rule_name, "wildcards": {str(k): str(v) for k, v in record.wildcards.items()},
               "input": list(map(str, record.input)), "output": list(map(str, record.output)),
               "log": list(map(str, record.log)), "threads": record.threads,
               "resources": dict(record.resources.items()), "shellcmd": record.shellcmd}
        with open(self.settings.path, "a") as out:
            out.write(json.dumps(job, default=str) + "\n")


if __name__ == "__main__":
    from snakemake.cli import main as snakemake_main
    from snakemake_interface_logger_plugins.registry import LoggerPluginRegistry

    LoggerPluginRegistry().register_plugin("snakemake_logger_plugin_" + LOGGER.replace("-", "_"), sys.modules[__name__])
    snakemake_main(sys.argv[1:])
