"""Snakemake's own job graph of the study: the one walk of it, built as ``snakemake -n`` builds it.

Which jobs a target needs is Snakemake's to say, from the rules' own inputs and outputs
(rules/*.smk): nothing in the package keeps a second copy of the graph. Its readers: the
job-settings dump (scripts/dump_job_settings.py: every job's record) and the budget preview
(``gentax.study.cost``: every job's work, read from its spec), both in ``gentax plan --cost`` and in
the line a dry-run or a run prints (the Snakefile, ``when_built``).

Contract:

- ``build(args)``: every job of ``snakemake -n ARGS`` (Snakemake's own command line: targets,
  ``--profile``, ``--configfile``, ``--config``), each one forced, so the graph is what the targets
  take from nothing, whatever ``results/`` holds; as ``PlannedJob`` records in pipeline order
  (Snakemake's topological layers, each job after every job it needs; within a layer by rule and
  outputs). Built in this process, in the repository; nothing runs and nothing is written under
  ``results/``. A plan the Snakefile refuses (a bad config, a job whose check fails:
  rules/common.smk ``JobSpec.checked``) ends as it ends ``snakemake -n``: its one-line error on
  stderr and ``SystemExit(2)``; any other refusal of Snakemake's is a ``ConfigError`` with its message.
- ``study_args(preset, configfiles, targets)``: the Snakemake arguments of ``targets`` (default: the
  rule all's) of the study config that ``gentax plan`` resolves from a preset and config files
  (``gentax.study.config.study_config``).
- ``planned(job)``: one Snakemake job as a ``PlannedJob``: its rule, the gentax verb its one command
  runs, its spec (its ``job`` param, ``gentax.study.jobs``), wildcards, files, threads, resources.
- ``when_built(workflow, report)``: ``report(jobs)`` with the ``PlannedJob`` of every job a
  ``snakemake`` invocation will run, once it has built its DAG (a dry-run's and a run's).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from gentax.errors import ConfigError
from gentax.io import REPO_ROOT

@dataclass(frozen=True)
class PlannedJob:
    """One job of Snakemake's DAG, as its readers need it: plain values (paths as text, in
    Snakemake's order), read while the workflow is loaded."""

    rule: str
    verb: str | None            # the gentax verb of its one command (``gentax train rl --job ...``); None: rule all
    spec: dict[str, Any] | None  # what that command receives (its ``job`` param); None: rule all
    wildcards: dict[str, str]
    input: list[str]
    output: list[str]
    log: list[str]
    threads: int
    resources: dict[str, Any]


def _verb(job) -> str | None:
    """The verb of a job's one command, from its rule's shell command (``gentax VERB --job SPEC ...``,
    rules/common.smk); None for a rule that runs none (all)."""
    words = (job.rule.shellcmd or "").split()
    if "--job" not in words:
        return None
    return " ".join(words[1:words.index("--job")])


def planned(job) -> PlannedJob:
    """A Snakemake job as a ``PlannedJob`` (its params, and so its spec, evaluated now)."""
    params = job.params
    spec = json.loads(params.job) if "job" in params.keys() else None
    return PlannedJob(rule=job.rule.name, verb=_verb(job), spec=spec,
                      wildcards={str(k): str(v) for k, v in job.wildcards.items()},
                      input=[str(f) for f in job.input], output=[str(f) for f in job.output],
                      log=[str(f) for f in job.log], threads=job.threads, resources=dict(job.resources.items()))


def study_args(preset: str, configfiles: Iterable[str | Path] = (), targets: Iterable[str] = ()) -> list[str]:
    """The Snakemake arguments of ``targets`` of the study config of ``preset`` with ``configfiles``
    laid over it in order, as ``gentax plan`` resolves it (files named absolutely: the DAG is built
    in the repository; the targets first: ``--configfile`` and ``--config`` take every word after them)."""
    files = [str(Path(path).resolve()) for path in configfiles]
    return [*targets, *(["--configfile", *files] if files else []), "--config", f"preset={preset}"]


def build(args: Sequence[str]) -> list[PlannedJob]:
    """Every job of ``snakemake -n ARGS``, forced (module docstring)."""
    from snakemake import cli
    from snakemake.api import DAGApi

    jobs: list[PlannedJob] = []

    def every_job(dag_api, *_, **__):  # in place of the execution: the DAG, every job forced, read
        workflow = dag_api.workflow_api._workflow
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
        # the class's build, not the Snakefile's wrap of it (when_built): that wrap prices the jobs for
        # the dry-run line, which nobody reads here
        type(workflow)._build_dag(workflow)
        for layer in workflow.dag.toposorted():
            jobs.extend(sorted(map(planned, layer), key=lambda j: (j.rule, sorted(j.output))))

    execute, said = DAGApi.execute_workflow, io.StringIO()
    environ, path = dict(os.environ), list(sys.path)  # the Snakefile puts this clone first on both (gentax.clone)
    DAGApi.execute_workflow = every_job
    try:  # what the Snakefile and Snakemake print while they load is the dry-run's, not the caller's
        with contextlib.chdir(REPO_ROOT), contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            cli.main(["-n", "--quiet=all", *args])  # "=": a target after it is no quietness
    except SystemExit as exc:
        if exc.code not in (0, None):
            errors = [line for line in said.getvalue().splitlines() if line.startswith("gentax: error:")]
            if errors:  # the Snakefile's own one-line refusal
                print("\n".join(errors), file=sys.stderr)
                raise SystemExit(2) from None
            raise ConfigError(f"snakemake -n {' '.join(args)} failed: {_last_lines(said.getvalue())}") from None
    finally:
        DAGApi.execute_workflow = execute
        os.environ.clear()
        os.environ.update(environ)
        sys.path[:] = path
    return jobs


def _last_lines(text: str, n: int = 5) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-n:])


def when_built(workflow, report: Callable[[list[PlannedJob]], None]) -> None:
    """Have ``report(jobs)`` called with the jobs this invocation will run, once Snakemake has built
    its DAG: before a dry-run lists them and before a run starts any. Snakemake has no hook there
    (``onstart`` comes later, and never in a dry-run), so this wraps the workflow's DAG build
    (``Workflow._build_dag``; ``build`` calls the unwrapped one). A ``ConfigError`` of ``report`` ends the
    invocation as the Snakefile's own refusals do: its one line on stderr, exit status 2."""
    build_dag = workflow._build_dag

    def build_then_report():
        build_dag()
        try:
            report([planned(job) for job in workflow.dag.needrun_jobs()])
        except ConfigError as exc:
            print(f"gentax: error: {exc}", file=sys.stderr)
            sys.exit(2)

    workflow._build_dag = build_then_report


__all__ = ["PlannedJob", "build", "planned", "study_args", "when_built"]
