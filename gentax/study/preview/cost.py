"""Budget preview (``gentax plan --cost``): what the study (or one table) will spend, before it runs.

``estimate`` prices the jobs of Snakemake's DAG (``gentax.study.dag``), each job's work read from
its spec (``TIMED``), with config ``cost``'s time figures and the GPUs a Snakemake profile gives
each rule (``gpu``, ``gres``, ``gpus_per_task`` x ``tasks``, or a one-GPU profile's ``gpu_jobs``
slots: k of N slots count as k/N of the GPU). Hours = start-up + units x figure; GPU-hours = hours x
GPUs; bookkeeping jobs are counted, not timed; a job over its rule's ``runtime`` is flagged.
Disk (``disk_need``, ``disk_report``, ``disk_problem``): what the planned jobs leave under the
results folder beside its disk's free space; a run whose study does not fit stops before its first
job (``study_disk_problem``, the Snakefile's ``onstart``). docs/workflow.md has the details.
"""

from __future__ import annotations

import json
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from gentax import io as gio
from gentax.study import dag
from gentax.study.config import STUDY_FILE
from gentax.study import paths as gpaths
from gentax.study import plan as gplan
from gentax.study.jobs import resolved_rl
from gentax.train import runs as truns
from gentax.errors import ConfigError


def _v1_episodes(spec: Mapping[str, Any]) -> int | None:
    """An SFT data job's V1 episodes in its first round: ``v1_episodes_per_domain`` per domain its
    mix takes from V1 (the expert's are CPU work, not timed). None for a job that rolls out no model."""
    if spec["v1"] is None:
        return None
    sft = spec["sft"]
    from_v1 = [domain for domain, weight in sft["mix"].items() if weight > 0 and sft["sources"][domain] == "v1"]
    return int(sft["v1_episodes_per_domain"]) * len(from_v1) if from_v1 else 0


#: verb -> (unit, config ``cost`` key of its time figure, seconds per figure unit, its units read
#: from its spec); every other verb is bookkeeping: counted, not timed
TIMED: dict[str, tuple[str, str, float, Callable[[Mapping[str, Any]], int | None]]] = {
    "train rl": ("steps", "rl_step_minutes", 60.0, lambda spec: spec["end"] - spec["start"]),  # its segment's
    "sft train": ("steps", "sft_step_seconds", 1.0, lambda spec: spec["sft"]["steps"]),
    "sft build-data": ("episodes", "rollout_episode_seconds", 1.0, _v1_episodes),
    "eval": ("episodes", "rollout_episode_seconds", 1.0,  # a checkpoint's, over its eval domains
             lambda spec: sum(domain["episodes"] for domain in spec["domains"])),
    "properties": ("episodes", "rollout_episode_seconds", 1.0, lambda spec: spec["episodes"]),  # a property log's
}


@dataclass(frozen=True)
class Work:
    """One planned job as the preview prices it; ``units`` None: a bookkeeping job."""

    rule: str
    verb: str
    units: int | None


def work(jobs: Iterable[dag.PlannedJob]) -> list[Work]:
    """The work of each of ``jobs`` but rule ``all``'s."""
    out = []
    for job in jobs:
        if job.verb is None:
            continue
        units = TIMED[job.verb][3](job.spec) if job.verb in TIMED else None
        out.append(Work(job.rule, job.verb, None if units is None else int(units)))
    return out


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
    """A profile's resources as a mapping (given as one, or as a list of 'k=v'), unset ones left out."""
    if isinstance(value, Mapping) or not value:
        return {key: val for key, val in (value or {}).items() if val is not None}
    return {key.strip(): val.strip() for key, _, val in (str(item).partition("=") for item in value)}


def _number(value: Any, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what}: {value!r} is not a number") from None


def _gres_gpus(gres: Any, rule: str) -> float:
    """The GPUs of a SLURM ``gres`` string (``gpu``, ``gpu:8``, ``gpu:a100:8``, ``gpu:2,nvme:1``); 0: none."""
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
    """GPUs per job from any of the ways to ask for them (module docstring); they must agree."""
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


#: the entry of ``resources_from`` for every rule set-resources does not name (no rule's name)
ANY_RULE = "default-resources"


def resources_from(default: Any, per_rule: dict[str, Any] | None, pools: Any = None) -> dict[str, dict[str, float]]:
    """``{rule: {"gpu": n, "runtime": minutes or absent}}`` from a profile's default and per-rule
    resources and its ``resources`` (``pools``); other rules get ``ANY_RULE``'s."""
    base = _resource_map(default)
    pool = _resource_map(pools).get(SHARED_GPU)
    pool = _number(pool, f"resources: {SHARED_GPU}") if pool not in (None, "") else None
    out = {}
    for rule in {ANY_RULE, *(per_rule or {})}:
        merged = {**base, **_resource_map((per_rule or {}).get(rule))}
        entry = {"gpu": _gpus(merged, rule, pool)}
        if merged.get("runtime") not in (None, ""):
            entry["runtime"] = _number(merged["runtime"], f"resources of {rule}: runtime")
        out[rule] = entry
    return out


def rule_resources(resources: dict[str, dict[str, float]], rule: str) -> dict[str, float]:
    """What ``resources`` (``resources_from``) give one job of ``rule``."""
    return resources.get(rule, resources.get(ANY_RULE, {}))


#: old rule name -> what replaced it (a profile that still names it is told)
RENAMED_RULES = {"eval_checkpoint": "eval_checkpoint_v1 and eval_checkpoint_v2 (one evaluation job per checkpoint)"}


def unknown_rules(per_rule: Any, rules: Iterable[str]) -> str | None:
    """One line naming each rule a profile's ``set-resources`` names that the workflow lacks; None: none."""
    unknown = sorted(set(map(str, per_rule or {})) - set(rules))
    if not unknown:
        return None
    said = "; ".join(f"{rule} (now {RENAMED_RULES[rule]})" if rule in RENAMED_RULES else rule for rule in unknown)
    return f"the profile's set-resources names rules this workflow does not have: {said}; rename or remove them"


def read_profile(profile: str | Path) -> dict[str, Any]:
    """A Snakemake profile folder's config.yaml."""
    path = Path(profile)
    path = path / "config.yaml" if path.is_dir() else path
    if not path.is_file():
        raise ConfigError(f"Snakemake profile not found: {profile} (a profile is a folder with a config.yaml)")
    return gio.read_yaml(path)


def profile_resources(profile: str | Path) -> dict[str, dict[str, float]]:
    """The resources a Snakemake profile folder (its config.yaml) gives each rule."""
    data = read_profile(profile)
    return resources_from(data.get("default-resources"), data.get("set-resources"), data.get("resources"))


def profile_at_once(profile: str | Path) -> int | None:
    """The RL jobs a Snakemake profile folder runs at once (``rl_at_once``)."""
    data = read_profile(profile)
    return rl_at_once(profile_resources(profile), jobs=data.get("jobs"), cores=data.get("cores"))


def estimate(cfg: dict, resources: dict[str, dict[str, float]], planned: Iterable[Work]) -> list[RuleCost]:
    """One ``RuleCost`` per rule with jobs in ``planned``: timed rules first, each in pipeline order."""
    figures = cfg["cost"]
    by_rule: dict[str, list[Work]] = {}
    for job in planned:
        by_rule.setdefault(job.rule, []).append(job)
    out = []
    for rule in sorted(by_rule, key=lambda rule: by_rule[rule][0].units is None):  # stable: first jobs' order
        jobs, res = by_rule[rule], rule_resources(resources, rule)
        runtime = res.get("runtime")
        if jobs[0].units is None:
            out.append(RuleCost(rule, len(jobs), 0, None, 0.0, 0.0, 0.0, None))
            continue
        unit, key, scale, _ = TIMED[jobs[0].verb]
        start_h = figures["job_start_minutes"] / 60
        per_unit_h = figures[key] * scale / 3600
        hours = [start_h + job.units * per_unit_h for job in jobs]
        out.append(RuleCost(rule, len(jobs), sum(job.units for job in jobs), unit, sum(hours), res.get("gpu", 0.0),
                            max(hours), runtime / 60 if runtime else None))
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


# ---- disk: what the plan writes beside the free space of the results folder's disk --------------
#: bytes of one step row of a rollout's trajectory tables (prompt, response, observation): rough
STEP_ROW_BYTES = 2048


def parameter_count(config_json: str | Path) -> int:
    """Parameters of a Llama-shaped causal LM from its HF ``config.json``, counted from the shapes
    without torch (a dry-run reads it); tests/test_cost.py checks it against torch's count."""
    path = gio.REPO_ROOT / config_json if not Path(config_json).is_absolute() else Path(config_json)
    if not path.is_file():
        raise ConfigError(f"config key cluster.model_config: {path} not found (an HF config.json of model.base)")
    c = gio.read_yaml(path)  # JSON is YAML
    hidden, layers, heads = int(c["hidden_size"]), int(c["num_hidden_layers"]), int(c["num_attention_heads"])
    head_dim = int(c.get("head_dim") or hidden // heads)
    kv = int(c.get("num_key_value_heads") or heads) * head_dim
    layer = 2 * hidden * heads * head_dim + 2 * hidden * kv + 3 * hidden * int(c["intermediate_size"]) + 2 * hidden
    embed = int(c["vocab_size"]) * hidden
    return embed * (1 if c.get("tie_word_embeddings") else 2) + layers * layer + hidden


def trained_model_config(cfg: dict) -> str | Path | None:
    """The config.json of the model the runs train: ``model.base``'s own where it is here, else
    ``cluster.model_config``. None when neither tells: a ``model.base`` of one's own that is not
    here while ``cluster.model_config`` is still the paper model's."""
    base = cfg["model"].get("base")
    if not cfg["model"].get("embedded") and base and (Path(base) / "config.json").is_file():
        return Path(base).resolve() / "config.json"
    paper = gio.read_yaml(STUDY_FILE)
    if (not cfg["model"].get("embedded") and base != paper["model"]["base"]
            and cfg["cluster"]["model_config"] == paper["cluster"]["model_config"]):
        return None
    return cfg["cluster"]["model_config"]


@dataclass(frozen=True)
class DiskNeed:
    """Bytes the plan leaves on the results folder's disk, and what it holds at most while it runs."""

    weights: int        # the checkpoints the runs keep (their weights)
    states: int         # the resume states they keep (optimizer, the verl engine's FSDP checkpoints)
    training: int       # more while RL jobs train (``at_once`` of them): their newest checkpoints whole
    other: int          # initial policies, evaluations and property logs (rough)
    checkpoints: int    # how many checkpoints the runs keep
    at_once: int        # RL jobs that may train at once
    how: str            # the figures per checkpoint, in words
    unknown: str = ""   # why the model's size, and so every figure, is unknown ("": known)

    @property
    def total(self) -> int:
        return self.weights + self.states + self.training + self.other


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def rl_at_once(resources: dict[str, dict[str, float]], *, jobs: int | None = None, cores: int | None = None) -> int | None:
    """RL jobs that may run at once under a profile (its GPU share, ``jobs``, ``cores``); None: no limit."""
    limits = [int(n) for n in (jobs, cores) if n]
    share = rule_resources(resources, "rl_segment").get("gpu", 0.0)
    if 0 < share < 1:  # a share of one GPU (profiles/gpu1)
        limits.append(int(round(1 / share)))
    return min(limits) if limits else None


#: the verbs whose jobs write checkpoints, and those that write one whole model (fp32) each
RL_VERB = "train rl"
MODEL_VERBS = ("model embedded", "sft train")


def disk_need(cfg: dict, planned: Iterable[Work], at_once: int | None = None) -> DiskNeed:
    """What the jobs ``planned`` write (``DiskNeed``), from the trained model's parameter count and
    what each run keeps (``plan.kept_steps``): the study's checkpoints and resume states as the share
    of its RL jobs that are planned, up to ``at_once`` of them training at once, and the rollouts'
    and whole models' bytes. Local engine: weights in ``rl.dtype``, AdamW state 8 bytes a parameter;
    verl: bf16 weights and one FSDP checkpoint (12 bytes a parameter); LoRA's state not counted."""
    planned = list(planned)
    config_json = trained_model_config(cfg)
    if config_json is None:
        return DiskNeed(0, 0, 0, 0, 0, 0, "", unknown=f"the size of model.base ({cfg['model']['base']}) cannot be read: "
                        "it is not here and cluster.model_config is the paper model's; set it to your model's config.json")
    params = parameter_count(config_json)
    rl = resolved_rl(cfg, save_every=int(cfg["rl"]["save_every"]))
    verl = cfg["engines"]["rl"] == "verl"
    weight = params * (2 if verl or rl["dtype"] == "bfloat16" else 4)
    state = 0 if rl["lora_rank"] else params * (12 if verl else 8)
    states_kept = 1 if verl else truns.STATES_KEPT
    evaluated = gplan.keep_evaluated(cfg)
    v1_steps = int(cfg["inits"]["v1"]["rl"]["steps"])
    kept, states, most_saved = 1, 0 if evaluated else state, 1  # Ckpt V1's run: one checkpoint
    every = int(cfg["rl"]["save_every"])
    runs = gplan.runs(cfg)
    for run in runs:
        steps = gplan.kept_steps(cfg, run)
        kept += len(steps)
        states += 0 if evaluated else state * min(states_kept, len(steps))
        most_saved = max([most_saved] + [len(truns.saved_steps(a, b, every)) for a, b in gplan.segments(cfg, run)])
    rl_jobs = sum(job.verb == RL_VERB for job in planned)
    study_rl_jobs = 1 + sum(len(gplan.segments(cfg, run)) for run in runs)  # Ckpt V1's and every run's segments
    at_once = min(rl_jobs, at_once or rl_jobs)
    # while a job trains with keep evaluated, beyond the weights it keeps: its newest checkpoints whole
    # (local), or its FSDP checkpoint and the segment's other exports (verl)
    whole = min(truns.STATES_KEPT, most_saved)
    per_job = (state + weight * (most_saved - 1) if verl else whole * state + (whole - 1) * weight) if evaluated else 0

    def episodes(verb: str) -> int:
        return sum(job.units or 0 for job in planned if job.verb == verb)

    rows = episodes("eval") * max(int(d["max_steps"]) for d in cfg["domains"].values())  # x the longest step limit
    rows += episodes("properties") * int(cfg["properties"]["t_max"])
    models = sum(job.verb in MODEL_VERBS for job in planned)  # the embedded model, its warm start, V2
    other = rows * STEP_ROW_BYTES + models * params * 4
    how = (f"{params / 1e6:,.0f}M parameters: {_gib(weight)} of weights a checkpoint"
           + (f", {_gib(state)} of resume state" if state else "") + f"; Ckpt V1's at step {v1_steps} included")
    share = min(rl_jobs, study_rl_jobs)  # of study_rl_jobs: integer arithmetic, the whole study's exactly
    return DiskNeed(kept * weight * share // study_rl_jobs, states * share // study_rl_jobs, per_job * at_once,
                    other, kept * share // study_rl_jobs, at_once, how)


def results_folder(cfg: dict, base: str | Path | None = None) -> Path:
    """The results folder as a path (a relative one under ``base``, default the repository)."""
    path = Path(gpaths.results(cfg))
    return path if path.is_absolute() else Path(base or gio.REPO_ROOT) / path


def disk_free(folder: str | Path) -> tuple[int, Path]:
    """(free bytes, the folder asked) of the disk that holds ``folder`` (its nearest existing folder)."""
    import shutil

    where = Path(folder).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    return shutil.disk_usage(where).free, where


def written(folder: str | Path) -> int:
    """Bytes already under ``folder`` (a rerun's outputs: counted as written)."""
    import os

    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def disk_report(cfg: dict, need: DiskNeed, *, base: str | Path | None = None) -> list[str]:
    """The disk lines of ``gentax plan --cost``: what the plan writes beside the free space."""
    folder = results_folder(cfg, base)
    free, where = disk_free(folder)
    there = written(folder) if folder.is_dir() else 0
    keep = (cfg.get("disk") or {}).get("keep_checkpoints", "all")
    if need.unknown:
        return [f"disk (disk.keep_checkpoints: {keep}): what the plan writes under {gpaths.results(cfg)}/ is unknown: "
                f"{need.unknown}", f"  free: {_gib(free)} on the disk of {folder} (measured at {where})"]
    lines = [f"disk (disk.keep_checkpoints: {keep}): the plan writes {_gib(need.total)} under {gpaths.results(cfg)}/",
             f"  {need.checkpoints:,} checkpoints kept: {_gib(need.weights)} ({need.how})",
             f"  resume states kept: {_gib(need.states)}",
             f"  while up to {need.at_once} RL jobs train at once: {_gib(need.training)} more (their newest checkpoints)",
             f"  initial policies, evaluations, property logs: ~{_gib(need.other)}",
             f"  free: {_gib(free)} on the disk of {folder} (measured at {where})"
             + (f"; {_gib(there)} of it written already" if there else "")]
    problem = _disk_problem(need, free, there, folder)
    if problem:
        lines.append(f"WARNING: {problem}")
    return lines


def _disk_problem(need: DiskNeed, free: int, there: int, folder: Path) -> str | None:
    more = need.total - there
    if need.unknown or more <= free:  # unknown: nothing to check against (gentax plan --cost says why)
        return None
    return (f"the plan writes {_gib(need.total)} under {folder} ({_gib(more)} more than is there), but its disk has "
            f"{_gib(free)} free: free space, keep fewer checkpoints (disk.keep_checkpoints: evaluated) or set "
            "disk.check_free_space: false (gentax plan --cost shows the estimate)")


def disk_problem(cfg: dict, planned: Iterable[Work], at_once: int | None = None, *,
                 base: str | Path | None = None) -> str | None:
    """One line when what ``planned`` writes beyond what is there does not fit the results folder's
    disk; None when it fits or ``disk.check_free_space`` is false."""
    if not (cfg.get("disk") or {}).get("check_free_space", True):
        return None
    folder = results_folder(cfg, base)
    return _disk_problem(disk_need(cfg, planned, at_once), disk_free(folder)[0], written(folder), folder)


def study_disk_problem(cfg: dict, *, base: str | Path | None = None) -> str | None:
    """The disk check before a run's first job (the Snakefile's ``onstart``): the whole study's plan
    priced as ``gentax plan --cost`` does (no public interface of Snakemake tells which jobs a run
    starts), less what is written already. None when it fits or ``disk.check_free_space`` is false."""
    if not (cfg.get("disk") or {}).get("check_free_space", True):
        return None  # no dry-run spent on it
    with tempfile.TemporaryDirectory(prefix="gentax-disk-") as folder:
        resolved = Path(folder) / "config.json"  # the study config as the run resolved it
        resolved.write_text(json.dumps(cfg))
        jobs = dag.build(dag.study_args(cfg["preset"], [resolved]))
    return disk_problem(cfg, work(jobs), profile_at_once(dag.PROFILES[cfg["preset"]]), base=base)
