"""What the Snakefile calls: the study config it loads, and the checks before a run's first job
(Snakemake's job graph is read through its command line only: ``gentax.study.dag``)."""

from __future__ import annotations

import os
import sys
from typing import Any

from gentax import progress
from gentax.errors import ConfigError
from gentax.io import read_yaml
from gentax.study import config as gconfig
from gentax.study import paths as gpaths
from gentax.study.preview import cost, memory


def _stop(problems: list[str]) -> None:
    """One line each, exit 2, no traceback (a WorkflowError would print the Snakefile's frame)."""
    for problem in problems:
        print(f"gentax: error: {problem}", file=sys.stderr)
    sys.exit(2)


def load(config: dict, settings: Any, *, main: bool) -> None:
    """Make Snakemake's ``config`` the study config in place (``gentax.study.config.with_preset`` of
    the files and ``--config`` pairs in ``settings``, its ``ConfigSettings``), validated; in the
    ``main`` process also notes of what a run would lack here. A bad value ends the process in one line."""
    try:
        overrides = gconfig.cli_overrides(settings.overwrite_config or {}, settings.config or {})
        study = gconfig.with_preset(read_yaml(gconfig.STUDY_FILE), overrides)
        gconfig.validate(study, sources=gconfig.config_sources(study["preset"], settings.configfiles, settings.config))
    except ConfigError as exc:
        _stop([str(exc)])
    config.clear()
    config.update(study)
    if main:
        print(results_line(study), file=sys.stderr)
    for problem in gconfig.unmet_inputs(study) if main else []:
        print(f"gentax: note: {problem} (a run stops before its first job)", file=sys.stderr)


def results_line(cfg: dict) -> str:
    """Where this study's outputs go: the first line of a dry-run, a run and ``gentax plan``."""
    return f"gentax: preset {cfg['preset']}: its outputs go under {gpaths.results(cfg)}/ (config key results)"


def on_start(cfg: dict) -> None:
    """The Snakefile's ``onstart`` (a run, not a dry-run: ``gentax plan`` previews the same): stop
    when an input every job needs is missing (``unmet_inputs``), a GPU job does not fit its GPUs
    (``memory.check``) or the study does not fit the results folder's disk (``cost.study_disk_problem``);
    else follow the jobs' progress on the console (``gentax.progress.follow``)."""
    problems = gconfig.unmet_inputs(cfg)
    if not problems:
        try:
            memory.check(cfg)
            problems = [problem for problem in [cost.study_disk_problem(cfg, base=os.getcwd())] if problem]
        except ConfigError as exc:
            problems = [str(exc)]
    if problems:
        _stop(problems)
    print(f"gentax: each job's progress goes to its log (the `log:` line of its block): tail -f "
          f"{gpaths.logs(cfg)}/<its log>; the running jobs' latest lines follow here every "
          f"{progress.EVERY_S:g} s (gentax/progress.py)", file=sys.stderr)
    progress.follow(gpaths.logs(cfg))
