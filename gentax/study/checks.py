"""Every job's check of its spec against its inputs (its kind's ``problems``), made at plan time too,
on ``Planned``: the inputs as the plan's jobs will write them. rules/common.smk runs ``plan_problem``
for every job Snakemake builds, so ``snakemake -n`` of a plan with a job that would refuse stops in one line.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Mapping

from gentax.analysis.jobs import FigureJob, PropertiesTableJob, SummaryJob, TableJob
from gentax.domains.spec import names
from gentax.domains.tasks import TasksJob
from gentax.jobspec import JobKind, Manifest, OnDisk
from gentax.rollout.jobs import EmbeddedModelJob, EvalJob, PropertiesJob
from gentax.study import jobs, paths, plan
from gentax.study.controls import ControlsTableJob
from gentax.train.jobs import RLJob, SFTDataJob, SFTTrainJob

#: verb -> its job kind: what its spec holds and its check
KINDS: dict[str, type[JobKind]] = {kind.verb: kind for kind in (
    TasksJob, EmbeddedModelJob, RLJob, SFTDataJob, SFTTrainJob, EvalJob, PropertiesJob, SummaryJob, TableJob,
    FigureJob, PropertiesTableJob, ControlsTableJob)}


class Planned:
    """A job's inputs as the plan of ``cfg`` (the validated workflow config) will write them."""

    def __init__(self, cfg: dict):
        self.manifests = {paths.tasks(cfg, d): Manifest(d, "eval", jobs.manifest_size(cfg, d)) for d in names()}
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
    return KINDS[verb].problems(spec, inputs)


def plan_problem(cfg: dict, verb: str, spec: Mapping[str, Any], job: str) -> str | None:
    """One line naming ``job`` and every key of its spec that disagrees with the plan's inputs, or None."""
    found = problems(verb, spec, planned(cfg))
    if not found:
        return None
    return f"the plan holds a job that would refuse to start: {job} (gentax {verb}): " + "; ".join(found)
