"""Budget preview: what the study (or one table) will spend, before it is launched.

``estimate(cfg, resources, names)`` prices the jobs of ``gentax.study.plan.jobs`` (the same jobs the
Snakefile declares; tests/test_cost.py checks them against Snakemake's dry-run) with

- the time figures of config ``cost`` (stated with their source there): minutes per RL step,
  seconds per SFT step, seconds per rollout episode (evaluation, property and SFT-data jobs) and
  a start-up time per timed job (model load, vLLM start), and
- the GPUs each rule gets from a Snakemake profile (``profile_resources``: its
  ``default-resources`` and ``set-resources``), read from any of the SLURM plugin's ways to ask for
  them: ``gpu: 8``, ``gres: "gpu:8"`` (or ``"gpu:a100:8"``), ``gpus_per_task: 8`` (times
  ``tasks``); a value it cannot read, or two that disagree, is a ConfigError naming the rule. A
  one-GPU profile (profiles/gpu1) shares its GPU out as ``gpu_jobs`` slots: its ``resources:
  [gpu_jobs=N]`` is the pool, and a job holding k slots counts as k/N of one GPU (N jobs at once
  keep the one GPU; their GPU-hours add up to the wall time of the GPU).

Hours of a job = start-up + units x figure; GPU-hours = hours x the job's GPUs. Bookkeeping jobs
(task splits, summaries, tables, figures) take no GPU and are counted, not timed. A job whose
estimate exceeds the ``runtime`` the profile gives its rule is flagged: SLURM would kill it.
``gentax plan --cost`` prints ``report(...)``; the Snakefile prints ``summary_line(...)`` in a dry-run.
A study whose jobs get no GPU (the embedded one) is priced in CPU job-hours.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from gentax import io as gio
from gentax.study import plan as gplan
from gentax.errors import ConfigError

#: timed rules -> (unit, config key of the time figure, seconds per figure unit)
TIMED = {
    "rl_v1": ("steps", "rl_step_minutes", 60.0),
    "rl_segment": ("steps", "rl_step_minutes", 60.0),
    "sft_v2": ("steps", "sft_step_seconds", 1.0),
    "embedded_base": ("steps", "sft_step_seconds", 1.0),
    "sft_data": ("episodes", "rollout_episode_seconds", 1.0),
    **{rule: ("episodes", "rollout_episode_seconds", 1.0) for rule in gplan.EVAL_RULES},  # a checkpoint's domains
    "properties": ("episodes", "rollout_episode_seconds", 1.0),
    "control_properties": ("episodes", "rollout_episode_seconds", 1.0),  # a level's property log (controls)
}


#: config ``cost`` figure -> how ``report`` shows it
FIGURES = {"rl_step_minutes": "{:g} min per RL step", "sft_step_seconds": "{:g} s per SFT step",
           "rollout_episode_seconds": "{:g} s per episode", "job_start_minutes": "{:g} min start-up per job"}


@dataclass(frozen=True)
class RuleCost:
    rule: str
    jobs: int
    units: int
    unit: str | None          # None: a bookkeeping job (not timed)
    hours: float              # all its jobs together
    gpus: float               # per job
    longest_hours: float      # the longest single job
    runtime_hours: float | None  # the profile's limit for one job of this rule

    @property
    def gpu_hours(self) -> float:
        return self.hours * self.gpus

    @property
    def over_limit(self) -> bool:
        return self.runtime_hours is not None and self.longest_hours > self.runtime_hours


def _resource_map(value: Any) -> dict[str, Any]:
    """Resources as a plain mapping: a profile's mapping or list of 'k=v', or Snakemake's parsed
    ``Resources`` (whose values are ``Resource`` objects; ones computed per job are left out)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {key: plain for key, val in value.items() if (plain := _fixed(val)) is not None}
    out = {}
    for item in value:
        key, _, val = str(item).partition("=")
        out[key.strip()] = val.strip()
    return out


def _fixed(value: Any) -> Any:
    """A resource's fixed value; None for one computed per job (a function of the job)."""
    try:
        value = getattr(value, "value", value)  # Snakemake's Resource raises for a computed one
    except ValueError:
        return None
    return None if callable(value) else value


def _number(value: Any, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what}: {value!r} is not a number") from None


def _gres_gpus(gres: Any, rule: str) -> float:
    """The GPUs of a SLURM ``gres`` string: ``gpu``, ``gpu:8``, ``gpu:a100:8``, comma-separated
    with other resources (``gpu:2,nvme:1``); 0 when it names no GPU."""
    total = 0.0
    for item in str(gres).split(","):
        name, *rest = item.strip().split(":")
        if name != "gpu":
            continue
        count = rest[-1] if rest and rest[-1].isdigit() else None
        if rest and count is None and len(rest) > 1:
            raise ConfigError(f"resources of {rule}: gres {gres!r}: cannot read the GPU count (write gpu:N or gpu:TYPE:N)")
        total += float(count) if count is not None else 1.0
    return total


#: a one-GPU profile's slots of its GPU (module docstring)
SHARED_GPU = "gpu_jobs"


def _gpus(merged: dict[str, Any], rule: str, pool: float | None = None) -> float:
    """GPUs per job from ``gpu``, ``gres``, ``gpus_per_task`` x ``tasks`` or its ``gpu_jobs``
    share of a ``pool`` of slots on one GPU; they must agree."""
    ways = {}
    if merged.get(SHARED_GPU) not in (None, ""):
        slots = _number(merged[SHARED_GPU], f"resources of {rule}: {SHARED_GPU}")
        if not pool:
            raise ConfigError(f"resources of {rule}: {SHARED_GPU}={slots:g} but the profile has no pool of them "
                              f"(resources: [{SHARED_GPU}=N]: N jobs share one GPU)")
        ways[SHARED_GPU] = slots / pool
    if merged.get("gpu") not in (None, ""):
        ways["gpu"] = _number(merged["gpu"], f"resources of {rule}: gpu")
    if merged.get("gres") not in (None, ""):
        ways["gres"] = _gres_gpus(merged["gres"], rule)
    if merged.get("gpus_per_task") not in (None, ""):
        tasks = _number(merged.get("tasks", 1) or 1, f"resources of {rule}: tasks")
        ways["gpus_per_task"] = _number(merged["gpus_per_task"], f"resources of {rule}: gpus_per_task") * tasks
    if len(set(ways.values())) > 1:
        said = ", ".join(f"{key} -> {value:g}" for key, value in ways.items())
        raise ConfigError(f"resources of {rule}: the GPU requests disagree ({said}); give one")
    return next(iter(ways.values()), 0.0)


def resources_from(default: Any, per_rule: dict[str, Any] | None, pools: Any = None) -> dict[str, dict[str, float]]:
    """``{rule: {"gpu": n, "runtime": minutes or absent}}`` from default and per-rule resources and
    the profile's global ``resources`` (``pools``: a one-GPU profile's ``gpu_jobs`` slots)."""
    base = _resource_map(default)
    pool = _resource_map(pools).get(SHARED_GPU)
    pool = _number(pool, f"resources: {SHARED_GPU}") if pool not in (None, "") else None
    out = {}
    for rule in {*TIMED, *(per_rule or {})}:
        merged = {**base, **_resource_map((per_rule or {}).get(rule))}
        entry = {"gpu": _gpus(merged, rule, pool)}
        if merged.get("runtime") not in (None, ""):
            entry["runtime"] = _number(merged["runtime"], f"resources of {rule}: runtime")
        out[rule] = entry
    return out


#: rules that were renamed: old name -> what replaced it (a profile that still names it is told)
RENAMED_RULES = {"eval_checkpoint": "eval_checkpoint_v1 and eval_checkpoint_v2 (one evaluation job per checkpoint)"}


def unknown_rules(per_rule: Any, rules: Iterable[str]) -> str | None:
    """What is wrong when a profile's ``set-resources`` names rules the workflow does not have
    (None: nothing), one line naming each and, for a renamed rule, what replaced it."""
    unknown = sorted(set(map(str, per_rule or {})) - set(rules))
    if not unknown:
        return None
    said = "; ".join(f"{rule} (now {RENAMED_RULES[rule]})" if rule in RENAMED_RULES else rule for rule in unknown)
    return f"the profile's set-resources names rules this workflow does not have: {said}; rename or remove them"


def profile_resources(profile: str | Path) -> dict[str, dict[str, float]]:
    """The resources a Snakemake profile folder (its config.yaml) gives each rule."""
    path = Path(profile)
    path = path / "config.yaml" if path.is_dir() else path
    if not path.is_file():
        raise ConfigError(f"Snakemake profile not found: {profile} (a profile is a folder with a config.yaml)")
    data = gio.read_yaml(path)
    return resources_from(data.get("default-resources"), data.get("set-resources"), data.get("resources"))


def estimate(cfg: dict, resources: dict[str, dict[str, float]], names: Iterable[str] | None = None) -> list[RuleCost]:
    """One ``RuleCost`` per rule with jobs, timed rules first (in pipeline order)."""
    figures = cfg["cost"]
    planned = gplan.jobs(cfg, names)
    order = [*TIMED, *sorted(r for r in planned if r not in TIMED)]
    out = []
    for rule in order:
        if rule not in planned:
            continue
        units = planned[rule]
        res = resources.get(rule, {})
        runtime = res.get("runtime")
        if rule in TIMED:
            unit, key, scale = TIMED[rule]
            start_h = figures["job_start_minutes"] / 60
            per_unit_h = figures[key] * scale / 3600
            hours = [start_h + n * per_unit_h for n in units]
            out.append(RuleCost(rule, len(units), sum(units), unit, sum(hours), res.get("gpu", 0.0), max(hours),
                                runtime / 60 if runtime else None))
        else:
            out.append(RuleCost(rule, len(units), 0, None, 0.0, 0.0, 0.0, None))
    return out


def totals(costs: list[RuleCost]) -> dict[str, float]:
    return {"jobs": sum(c.jobs for c in costs), "gpu_hours": sum(c.gpu_hours for c in costs),
            "job_hours": sum(c.hours for c in costs)}


def _hours(total: dict[str, float]) -> str:
    """The headline figure: GPU-hours, or CPU job-hours when no job gets a GPU."""
    if total["gpu_hours"] == 0:
        return f"{_num(total['job_hours'])} CPU job-hours (no job gets a GPU)"
    return f"{_num(total['gpu_hours'])} GPU-hours ({_num(total['job_hours'])} job-hours)"


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def report(cfg: dict, costs: list[RuleCost], *, where: str, target: str | None = None) -> str:
    """The table ``gentax plan --cost`` prints."""
    total = totals(costs)
    head = f"Budget preview: preset {cfg.get('preset', 'paper')}, resources of {where}"
    lines = [head + (f", target {target}" if target else ""),
             f"{'rule':<19}{'jobs':>6}{'work':>20}{'job-hours':>11}{'GPUs/job':>10}{'GPU-hours':>11}"]
    for c in costs:
        if c.unit is None:
            continue
        work = f"{c.units:,} {c.unit}"
        lines.append(f"{c.rule:<19}{c.jobs:>6,}{work:>20}{_num(c.hours):>11}{c.gpus:>10.3g}{_num(c.gpu_hours):>11}")
    cpu = [f"{c.rule} {c.jobs}" for c in costs if c.unit is None]
    if cpu:
        lines += textwrap.wrap("CPU-only bookkeeping jobs (not timed): " + ", ".join(cpu), width=100,
                               subsequent_indent="  ")
    lines.append(f"total: {total['jobs']:,} jobs, {_hours(total)}")
    for c in costs:
        if c.over_limit:
            lines.append(f"WARNING: one {c.rule} job is estimated at {c.longest_hours:.1f} h, over the "
                         f"{c.runtime_hours:.1f} h runtime the profile gives it: raise its runtime")
    fig = cfg["cost"]
    own = fig.get("sources", {})
    lines.append("time figures (config cost), each with where it comes from:")
    for key, shown in FIGURES.items():
        said = own.get(key, "see source below" if own else "source below")
        lines += textwrap.wrap(f"- {shown.format(fig[key])}: {' '.join(said.split())}", width=100,
                               subsequent_indent="    ")
    lines += textwrap.wrap("source: " + " ".join(str(fig["source"]).split()), width=100, subsequent_indent="  ")
    return "\n".join(lines)


def summary_line(cfg: dict, resources: dict[str, dict[str, float]]) -> str:
    """One line for the dry-run's output: the whole study's estimate."""
    total = totals(estimate(cfg, resources))
    return (f"gentax budget estimate (whole study, preset {cfg.get('preset', 'paper')}): {total['jobs']:,} jobs, "
            f"{_hours(total)}; per job kind and per target: gentax plan --cost")
