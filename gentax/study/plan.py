"""The study's plan: a validated config expanded into runs, checkpoints and artifacts, for the
rules (rules/common.smk), the job specs (``gentax.study.jobs``) and ``gentax plan``. ``runs``: every
RL run after Ckpt V1 as a ``gentax.runspec.RunSpec``, built once; an extended run is trained in
``segments``. What a table reads derives from its registry entry (``gentax.analysis.artifacts``);
which jobs it needs is Snakemake's DAG (no copy of the graph is kept here).
"""

from __future__ import annotations

import dataclasses
import functools
from types import MappingProxyType
from typing import Any

from gentax import runspec
from gentax.analysis import artifacts
from gentax.domains.spec import is_mixture, mixture_weights, names
from gentax.errors import ConfigError
from gentax.runspec import RunSpec
from gentax.study import paths
from gentax.study.config import filler_experiments, study_sft
from gentax.study.controls import ControlLevel, control_levels, property_path
from gentax.train.runs import saved_steps
from gentax.train.sft_config import load_sft_config


def sft_domains(cfg: dict, preset: str) -> list[str]:
    """The domains the SFT stage ``preset``'s data comes from (its mix: ``study_sft``)."""
    return load_sft_config(study_sft(cfg, preset)).active_domains()


def rollout_batch_size(cfg: dict, domain: str) -> int | None:
    """``eval.batch_size_per_domain`` of ``domain`` (None: all of a job's episodes in one batch)."""
    size = (cfg["eval"].get("batch_size_per_domain") or {}).get(domain)
    return None if size is None else int(size)


def rollout_settings(cfg: dict, kind: str) -> dict[str, Any]:
    """What the workflow hands ``gentax eval`` (kind "eval") or ``gentax properties``, but an
    evaluation's episodes (per domain: ``jobs.eval_episodes``)."""
    ev = cfg["eval"]
    out = {
        **({"episodes": cfg[kind]["episodes"]} if kind != "eval" else {}),
        "temperature": cfg[kind]["temperature"],
        "top_p": ev["top_p"],
        "max_new_tokens": ev.get("max_new_tokens", cfg["rl"]["max_new_tokens"]),
        "history_length": cfg["rl"]["history_length"],
        "generator": cfg["engines"]["generator"],
        "dtype": cfg["engines"].get("dtype", "auto"),
        "seed": cfg["seed"],
    }
    if kind == "properties":
        out["t_max"] = cfg["properties"]["t_max"]
    else:
        out["errors_as_losses"] = ev.get("errors_as_losses", False)
    return out


# ---- the grid --------------------------------------------------------------------------------
def runs(cfg: dict) -> list[RunSpec]:
    """Every planned RL run after V1: the grid's (with the mixtures' and the filler arm's), then the
    control runs that are no grid run; built once per distinct config (the rules ask once per job)."""
    return list(_planned(_plan_key(cfg))[0])


def _plan_key(cfg: dict) -> str:
    """What the planned runs depend on, as the cache key of ``_planned``."""
    import json

    return json.dumps([{k: cfg.get(k, {}) for k in ("grid", "domains", "augmentation", "controls")},
                       repr(runspec.VARIANTS), names()], sort_keys=True, default=str)


@functools.lru_cache(maxsize=8)
def _planned(key: str) -> tuple[tuple[RunSpec, ...], MappingProxyType]:
    """(every planned run, {control level label: the variant label of the runs it reads})."""
    import json

    cfg = json.loads(key)[0]
    grid = _grid_runs(cfg)
    new, labels = _control_plan(cfg, grid)
    return tuple(grid + new), MappingProxyType(labels)


def _grid_runs(cfg: dict) -> list[RunSpec]:
    out = []
    extended = {(e["init"], e["variant"], e["train_domain"]): e["steps"] for e in cfg["grid"].get("extended", [])}
    for exp in cfg["grid"]["experiments"]:
        for domain in exp["train_domains"]:
            steps = extended.get((exp["init"], exp["variant"], domain), cfg["grid"]["steps"])
            for seed in cfg["grid"]["seeds"]:
                out.append(runspec.build(cfg, exp["init"], domain, exp["variant"], int(seed), int(steps)))
    for exp in mixture_experiments(cfg):  # beyond the paper: training on a mixture of domains
        for mixture in exp["mixtures"]:
            for seed in cfg["grid"]["seeds"]:
                out.append(runspec.build(cfg, exp["init"], mixture, exp["variant"], int(seed), int(cfg["grid"]["steps"])))
    for exp in filler_experiments(cfg):  # beyond the paper: the filler-thinking arm (controls.filler)
        for domain in exp["train_domains"]:
            for seed in cfg["grid"]["seeds"]:
                out.append(runspec.build(cfg, exp["init"], domain, runspec.FILLER_VARIANT, int(seed),
                                         int(cfg["grid"]["steps"])))
    return out


def filler_settings(cfg: dict) -> dict[str, Any]:
    """What a filler job needs of ``controls.filler``: source, token, eval_tokens."""
    block = cfg["controls"]["filler"]
    return {key: block[key] for key in ("source", "token", "eval_tokens")}


def eval_filler(cfg: dict) -> dict[str, Any]:
    """A filler-mode evaluation's ``source``, ``token`` and ``tokens`` (None: the matched thinking
    evaluation's mean think tokens)."""
    filler = filler_settings(cfg)
    return {"source": filler["source"], "token": filler["token"],
            "tokens": None if filler["eval_tokens"] == "matched" else int(filler["eval_tokens"])}


def filler_reference(cfg: dict, run: RunSpec) -> RunSpec:
    """The default-variant run a filler run matches: its mean think tokens are the filler lengths."""
    return find_run(cfg, run.init, run.train_domain, runspec.DEFAULT_VARIANT, run.seed)


def v1_run(cfg: dict) -> RunSpec:
    """Ckpt V1's training run (from the base model; default variant): what rule rl_v1 trains."""
    v1 = cfg["inits"]["v1"]["rl"]
    return runspec.build(cfg, "base", v1["train_domain"], runspec.DEFAULT_VARIANT, int(v1["seed"]), int(v1["steps"]))


def mixture_experiments(cfg: dict) -> list[dict]:
    """``grid.mixtures.experiments`` when ``grid.mixtures.enabled``, else none."""
    block = cfg["grid"].get("mixtures") or {}
    return list(block.get("experiments", [])) if block.get("enabled") else []


def find_run(cfg: dict, init: str, train_domain: str, variant: str, seed: int) -> RunSpec:
    """The planned run of a run folder (``variant``: its variant label, a control run's label)."""
    for run in runs(cfg):
        if (run.init, run.train_domain, run.variant_label, run.seed) == (init, train_domain, variant, int(seed)):
            return run
    raise ConfigError(f"no planned run {runspec.run_path(init, train_domain, variant, seed)}")


def segments(cfg: dict, run: RunSpec) -> list[tuple[int, int]]:
    base = cfg["grid"]["steps"]
    return [(0, base)] if run.steps <= base else [(0, base), (base, run.steps)]


def checkpoint_steps(cfg: dict, end: int) -> list[int]:
    every = cfg["rl"]["save_every"]
    return list(range(every, end + 1, every))


def table_settings(cfg: dict) -> dict[str, Any]:
    """What a table or figure job receives beside its files (``gentax.analysis.tables.Settings``),
    and what ``gentax tables`` defaults to."""
    from gentax.analysis.summary import config_settings  # function-local: defers pandas

    return {"window": window(cfg, cfg["grid"]["steps"]), "bootstrap": int(cfg["eval"]["bootstrap"]), "seed": int(cfg["seed"]),
            "error_mark_pct": float(cfg["eval"]["error_mark_pct"]), **config_settings(cfg)}


def window(cfg: dict, end: int) -> list[int]:
    every, k = cfg["rl"]["save_every"], cfg["eval"]["window"]
    return [end - every * i for i in reversed(range(k))]


def eval_steps(cfg: dict, run: RunSpec, part: str | None = None) -> list[int]:
    """Checkpoints to evaluate; ``part`` "main" keeps those up to ``grid.steps``, "extended" the rest."""
    if cfg["eval"].get("all_checkpoints"):
        steps = checkpoint_steps(cfg, run.steps)
    else:
        steps = sorted(set(window(cfg, cfg["grid"]["steps"])) | set(window(cfg, run.steps)))
    main_end = cfg["grid"]["steps"]
    if part == "main":
        return [s for s in steps if s <= main_end]
    if part == "extended":
        return [s for s in steps if s > main_end]
    return steps


def keep_evaluated(cfg: dict) -> bool:
    """``disk.keep_checkpoints: evaluated``: runs keep only the checkpoints the plan reads."""
    return (cfg.get("disk") or {}).get("keep_checkpoints", "all") == "evaluated"


def kept_steps(cfg: dict, run: RunSpec) -> list[int]:
    """The checkpoints of ``run`` whose weights stay: all it saves, or with ``keep_evaluated`` those
    its evaluations read (both parts: a later segment never drops one an evaluation still needs)."""
    if keep_evaluated(cfg):
        return eval_steps(cfg, run)
    every = int(cfg["rl"]["save_every"])
    return sorted({step for start, end in segments(cfg, run) for step in saved_steps(start, end, every)})


def checkpoint_keep(cfg: dict, run: RunSpec, end: int) -> dict[str, Any] | None:
    """What the segment of ``run`` ending at ``end`` keeps (``gentax.train.jobs.CheckpointKeep``;
    None: everything); the resume state stays only while a later segment will resume from it."""
    if not keep_evaluated(cfg):
        return None
    return {"steps": kept_steps(cfg, run), "resume_state": any(start >= end for start, _ in segments(cfg, run))}


def v1_checkpoint_keep(cfg: dict) -> dict[str, Any] | None:
    """``checkpoint_keep`` of Ckpt V1's one training job: its last checkpoint (the initial policy V1)."""
    if not keep_evaluated(cfg):
        return None
    return {"steps": [int(cfg["inits"]["v1"]["rl"]["steps"])], "resume_state": False}


def segment_of(cfg: dict, run: RunSpec, step: int) -> tuple[int, int]:
    for start, end in segments(cfg, run):
        if start < step <= end:
            return start, end
    raise ConfigError(f"step {step} is outside run {run.path} (0, {run.steps}]")


def eval_domains(cfg: dict, init: str) -> list[str]:
    return list(cfg["inits"][init]["domains"])


def eval_rule(init: str) -> str:
    """The evaluation rule of ``init`` (one per initial policy: its domains are the rule's outputs)."""
    return f"eval_checkpoint_{init}"


def plan(cfg: dict) -> dict[str, Any]:
    """The whole study as data (``gentax plan --json``)."""
    rs = runs(cfg)
    evals = sum(len(eval_steps(cfg, r)) * len(eval_domains(cfg, r.init)) for r in rs)
    return {
        "runs": [r.row() for r in rs],
        "initial_policies": {
            "v1": {"train_domain": cfg["inits"]["v1"]["rl"]["train_domain"], "steps": cfg["inits"]["v1"]["rl"]["steps"]},
            "v2": {"sft_steps": cfg["inits"]["v2"]["sft"]["steps"], "mix": cfg["inits"]["v2"]["sft"]["mix"]},
        },
        "counts": {
            "runs": len(rs),
            "segments": sum(len(segments(cfg, r)) for r in rs),
            "checkpoint_evals": evals,
            "base_evals": sum(len(base_variants(cfg, i)) * len(eval_domains(cfg, i)) for i in cfg["inits"]),
        },
        # each level of the controls: the runs it reads and its property log
        "controls": [{"control": p["control"], "level": p["level"], "setting": ControlLevel(**{
            k: v for k, v in p.items() if k != "run_label"}).setting(), "runs": p["run_label"],
            "own_runs": p["run_label"] == f"{p['control']}-{p['level']}", "property_log": path}
            for p, path in zip(control_property_params(cfg), control_property_paths(cfg))],
    }


def base_variants(cfg: dict, init: str) -> list[str]:
    """The variants an initial policy is evaluated as: the default and one per thinking mode of its runs."""
    wanted = {runspec.DEFAULT_VARIANT} | {runspec.base_variant(r.variant) for r in runs(cfg) if r.init == init}
    return [v for v in runspec.variant_names() if v in wanted]


def _planned_conditions(cfg: dict) -> set[str]:
    """Which registry ``planned`` conditions hold for ``cfg``."""
    return {"always"} | ({"mixtures"} if mixture_experiments(cfg) else set()) | (
        {"controls"} if control_levels(cfg) else set())


def artifact_names(cfg: dict, kind: str | None = None) -> list[str]:
    """The tables and/or figures the workflow builds for ``cfg``, in registry order."""
    holds = _planned_conditions(cfg)
    return [a.name for a in artifacts.entries() if (kind is None or a.kind == kind) and a.planned in holds]


def table_names(cfg: dict) -> list[str]:
    """The tables the workflow builds (``artifact_names``)."""
    return artifact_names(cfg, "table")


# ---- controls (gentax.study.controls) ----------------------------------------------------------
def control_property_paths(cfg: dict) -> list[str]:
    """Each level's property log (relative to the results folder), in level order."""
    return [property_path(cfg, level) for level in control_levels(cfg)]


def control_property_params(cfg: dict) -> list[dict]:
    """What the controls' properties table is made of: each level and its runs' variant name."""
    return [{**level._asdict(), "run_label": level_run_label(cfg, level)} for level in control_levels(cfg)]


def control_run(level: ControlLevel, seed: int, steps: int) -> RunSpec:
    """A control level's run: its variant, domain setting and augmentation, named by its label."""
    d = level.train_domain
    aug = ({"kind": level.augmentation["kind"], "p": float(level.augmentation["p"]), "eps": {d: int(level.augmentation["eps"])}}
           if runspec.augments(level.variant) else None)
    return RunSpec(init=level.init, train=((d, 1),), variant=level.variant, seed=int(seed), steps=int(steps),
                   think=runspec.think_mode(level.variant), augmentation=aug, domains={d: dict(level.domain)},
                   label=level.label)


def _control_plan(cfg: dict, grid: list[RunSpec]) -> tuple[list[RunSpec], dict[str, str]]:
    """(the control runs to train, {level label: the variant label of the runs it reads}). A level
    whose run is a grid run (or an earlier level's) in all but name and length reads that run."""
    seeds, steps = [int(s) for s in cfg["grid"]["seeds"]], int(cfg["grid"]["steps"])
    new: list[RunSpec] = []
    labels: dict[str, str] = {}
    for level in control_levels(cfg):
        spec = control_run(level, seeds[0], steps)
        same = next((r for r in grid + new if r.seed == spec.seed
                     and r == dataclasses.replace(spec, label=r.label, steps=r.steps)), None)
        labels[level.label] = same.variant_label if same else level.label
        if same is None:
            new += [control_run(level, seed, steps) for seed in seeds]
    return new, labels


def level_run_label(cfg: dict, level: ControlLevel) -> str:
    """The variant label of the runs a control level reads (its own, or a grid run's it reuses)."""
    return _planned(_plan_key(cfg))[1][level.label]


def variant_labels(cfg: dict) -> list[str]:
    """Every variant name a run folder may have: the registered variants and the control runs' labels."""
    return [*runspec.variant_names(), *sorted({r.label for r in runs(cfg) if r.label})]


def control_level(cfg: dict, label: str) -> ControlLevel:
    for level in control_levels(cfg):
        if level.label == label:
            return level
    raise ConfigError(f"no control level {label!r}; planned: {', '.join(lv.label for lv in control_levels(cfg)) or 'none'}")


def figure_names(cfg: dict) -> list[str]:
    """The figures the workflow builds (``artifact_names``)."""
    return artifact_names(cfg, "figure")


def _artifact(name: str) -> artifacts.Artifact:
    if name not in artifacts.names():
        raise ConfigError(f"unknown table or figure {name!r}; known: {', '.join(artifacts.names())}")
    return artifacts.get(name)


def artifact_runs(cfg: dict, name: str) -> list[RunSpec]:
    """The runs a table or figure reads: its variants' single-domain runs; a mixtures artifact's, the
    mixture runs and their members' runs; a controls artifact's, the runs its levels read."""
    planned = _artifact(name).planned
    if planned == "mixtures":
        mixed = [r for r in runs(cfg) if is_mixture(r.train_domain)]
        members = {(r.init, d, r.variant_label) for r in mixed for d in mixture_weights(r.train_domain)}
        return mixed + [r for r in runs(cfg) if (r.init, r.train_domain, r.variant_label) in members]
    if planned == "controls":
        wanted = {(lv.init, lv.train_domain, level_run_label(cfg, lv)) for lv in control_levels(cfg)}
        return [r for r in runs(cfg) if (r.init, r.train_domain, r.variant_label) in wanted]
    variants = artifact_variants(name)
    return [r for r in runs(cfg) if r.variant_label in variants and not is_mixture(r.train_domain)]


def artifact_variants(name: str, cfg: dict | None = None) -> list[str]:
    """The run variants a table or figure reads (the mixtures' and controls' from ``cfg``, else the default)."""
    artifact = _artifact(name)
    if artifact.planned == "mixtures":
        return sorted({e["variant"] for e in mixture_experiments(cfg)}) if cfg is not None else ["default"]
    if artifact.planned == "controls":  # the base rows their ΔID and ΔOOD compare with
        return sorted({runspec.base_variant(lv.variant) for lv in control_levels(cfg)}) if cfg is not None else ["default"]
    return list(artifact.variants)


def artifact_inputs(cfg: dict, name: str) -> dict[str, Any]:
    """The input files of table/figure ``name`` from its registry entry: ``summaries`` (its runs',
    extended ones where it reads them, its variants' base rows), ``training`` (each run's last
    segment record) and ``properties`` / ``controls``."""
    artifact, variants = _artifact(name), artifact_variants(name, cfg)
    parts = [(run, "main") for run in artifact_runs(cfg, name)]
    if artifact.extended:
        parts += [(run, "extended") for run, _ in list(parts) if eval_steps(cfg, run, "extended")]
    bases = [(init, v) for init in ("v1", "v2") for v in base_variants(cfg, init) if v in variants or v == "default"]
    inputs: dict[str, Any] = {"summaries": sorted({paths.run_summary(cfg, part, run.path) for run, part in parts}
                                                  | {paths.base_summary(cfg, init, v) for init, v in bases})}
    if artifact.training:  # metrics.csv is no declared output: the record of the segment that wrote its last row
        inputs["training"] = sorted({paths.segment_manifest(paths.run_folder(cfg, run.path), *segments(cfg, run)[-1])
                                     for run, _ in parts})
    if artifact.properties:
        inputs["properties"] = paths.properties_table(cfg)
    if artifact.controls:
        inputs["controls"] = paths.controls_table(cfg)
    return inputs


def artifact_path(cfg: dict, name: str) -> str:
    """The file of table/figure ``name`` (csv / png); ConfigError when unknown or not planned."""
    kind = _artifact(name).kind
    if name not in artifact_names(cfg):
        raise ConfigError(f"{kind} {name!r} is not planned for this config (planned: {', '.join(artifact_names(cfg))})")
    return paths.figure(cfg, name) if kind == "figure" else paths.table(cfg, name)
