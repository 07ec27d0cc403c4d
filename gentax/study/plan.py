"""The study's plan: the expansion of a validated config into runs, jobs and artifacts.

One place for "what the study consists of", used by the Snakefile's input functions
(rules/common.smk), the job specs (``gentax.study.jobs``) and ``gentax plan``. Loading and
validating the config is ``gentax.study.config``. Contract:

- ``runs(cfg)`` lists every RL run after V1 as a resolved ``gentax.runspec.RunSpec`` (``Run`` is
  the same class): init, training domains with weights (``train_domain`` is its path label),
  variant, seed, steps, thinking, augmentation and the training domains' settings; built here once
  and handed as it is to the rules, the engines and evaluation. An extended run (Tables 4/9/10) is
  the default run with more steps, never a second run. ``v1_run(cfg)`` is Ckpt V1's training run.
- ``segments(cfg, run)`` splits a run into resumable training segments: ``[(0, 150), (150, 300)]``;
  segment k+1 resumes from the state segment k saved. ``checkpoint_keep(cfg, run, end)`` = what a
  segment keeps of the run's checkpoints (``disk.keep_checkpoints``).
- ``eval_steps(cfg, run, part)`` = the checkpoints evaluated: the last ``eval.window`` checkpoints at
  ``grid.steps`` ("main") and at an extended run's own last step ("extended"), or all checkpoints
  with ``eval.all_checkpoints``.
- What each table/figure is and reads is its entry in the registry (``gentax.analysis.artifacts``):
  ``table_names``, ``figure_names``, ``artifact_variants``, ``artifact_runs``, ``artifact_reads`` /
  ``artifact_inputs`` and ``artifact_path`` derive from it, and the Snakefile's input functions
  (rules/common.smk) call them. Which jobs a table needs is Snakemake's DAG of those rules
  (``gentax.study.dag``), which ``gentax plan --cost`` prices: no copy of the graph is kept here.
"""

from __future__ import annotations

import dataclasses
import functools
from types import MappingProxyType
from typing import Any

from gentax import runspec
from gentax.analysis import artifacts
from gentax.domains.base import INVALID_PENALTY
from gentax.domains.spec import is_mixture, mixture_weights, names, specs
from gentax.dtype import sft_precision
from gentax.errors import ConfigError, KeyProblem, is_integer
from gentax.runspec import RunSpec
from gentax.study import paths
from gentax.study.controls import ControlLevel, control_levels, enabled, property_path
from gentax.train.runs import saved_steps
from gentax.train.sft_config import PRESETS as SFT_PRESETS
from gentax.train.sft_config import load_sft_config

VARIANTS = runspec.variant_names()  # what each means: gentax/runspec.py


def __getattr__(name: str):
    """The per-artifact lists the Snakefile's input functions read, derived from the registry
    (``gentax.analysis.artifacts``) on each use."""
    if name in _DERIVED_LISTS:
        return _DERIVED_LISTS[name]()
    raise AttributeError(name)


def _variants_of(kind: str) -> dict[str, list[str]]:
    return {n: list(artifacts.get(n).variants) for n in artifacts.names(kind, planned="always")}


_DERIVED_LISTS = {
    "TABLE_VARIANTS": lambda: _variants_of("table"),  # the always-planned tables: the variants each reads
    "FIGURE_VARIANTS": lambda: _variants_of("figure"),
    "TABLES_WITH_PROPERTIES": lambda: {a.name for a in artifacts.entries() if a.properties},
    "WITH_EXTENDED": lambda: {a.name for a in artifacts.entries() if a.extended},
    "MIXTURE_ARTIFACTS": lambda: artifacts.names(planned="mixtures"),
    "CONTROL_NAMES": lambda: artifacts.names(planned="controls"),
}


Run = RunSpec  # a planned run (gentax.runspec)


def sft_domains(cfg: dict, preset: str) -> list[str]:
    """The domains the SFT stage ``preset``'s data comes from (its mix: ``study_sft``)."""
    return load_sft_config(study_sft(cfg, preset)).active_domains()


def eval_episodes(cfg: dict, domain: str) -> int:
    """Held-out tasks evaluated on ``domain`` (its task manifest, every checkpoint's evaluation):
    ``eval.episodes_per_domain[domain]`` where given, else ``eval.episodes``."""
    ev = cfg["eval"]
    return int((ev.get("episodes_per_domain") or {}).get(domain, ev["episodes"]))


def property_log_domains(cfg: dict) -> set[str]:
    """The domains with a property log in the plan: Table 3's (every domain of ``properties.init``)
    and each level of the controls' (its training domain)."""
    return set(eval_domains(cfg, cfg["properties"]["init"])) | {level.train_domain for level in control_levels(cfg)}


def manifest_size(cfg: dict, domain: str) -> int:
    """Tasks in ``domain``'s task manifest: the most any job of the plan plays from it (its
    evaluations' ``eval_episodes``, its property logs' ``properties.episodes``). Every job plays the
    first ``episodes`` tasks of the manifest, a prefix, so a domain's evaluations and property logs
    share their first tasks (docs/workflow.md, "Task manifests")."""
    logs = int(cfg["properties"]["episodes"]) if domain in property_log_domains(cfg) else 0
    return max(eval_episodes(cfg, domain), logs)


def rollout_batch_size(cfg: dict, domain: str) -> int | None:
    """Episodes in flight at once in ``domain``'s evaluations and property logs
    (``eval.batch_size_per_domain``; None: all of a job's episodes in one batch)."""
    size = (cfg["eval"].get("batch_size_per_domain") or {}).get(domain)
    return None if size is None else int(size)


def rollout_settings(cfg: dict, kind: str) -> dict[str, Any]:
    """What the workflow hands ``gentax eval`` (kind "eval") or ``gentax properties`` ("properties"):
    the rules' params and the printed settings (``gentax plan --settings``) both come from here.
    An evaluation's episode count depends on its domain: ``eval_episodes``, not part of this."""
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


#: RL keys whose value is another study setting's: never set under ``rl:`` (``study_rl`` fills them)
RL_FROM_STUDY = {"val_temperature": "eval.temperature"}


def study_rl(cfg: dict) -> dict[str, Any]:
    """The study's RL block as the RL engines' loader reads it: config ``rl:`` with the RL keys whose
    value is another setting's (``RL_FROM_STUDY``): the validation inside an RL run plays at the
    evaluations' temperature. A config that sets one of them under ``rl:`` is refused, naming the key
    that holds it. The penalty of an invalid step's sample is the envs' (``INVALID_PENALTY``) unless
    ``rl.invalid_penalty`` sets another. A run's GPUs (``verl.n_gpus_per_node``) are the cluster's (``cluster.gpus_per_node``,
    the SFT job's too) unless ``rl.verl.n_gpus_per_node`` gives RL its own count."""
    rl = _filled_from_study(cfg, cfg["rl"], RL_FROM_STUDY, "RL config", "rl",
                            "the RL run's validation plays as the evaluations do")
    rl.setdefault("invalid_penalty", -INVALID_PENALTY)  # the envs' reward of an invalid step, unless rl sets one
    verl = dict(rl.get("verl") or {})
    if verl.get("n_gpus_per_node") is None and "cluster" in cfg:
        rl["verl"] = {**verl, "n_gpus_per_node": cfg["cluster"]["gpus_per_node"]}
    return rl


#: the SFT stages (``gentax.train.sft_config.PRESETS``) and the study config block holding each one's values
SFT_BLOCKS = dict(zip(SFT_PRESETS, ("inits.v2.sft", "embedded_base")))
#: SFT keys whose value is another study setting's: never set in an SFT block (``study_sft`` fills them)
SFT_FROM_STUDY = {"history_length": "rl.history_length", "max_new_tokens": "rl.max_new_tokens",
                  "temperature": "rl.temperature", "top_p": "rl.top_p", "generator": "engines.generator",
                  "seed": "seed"}


def _setting(cfg: dict, dotted: str) -> Any:
    node = cfg
    for part in dotted.split("."):
        node = node[part]
    return node


def _filled_from_study(cfg: dict, block: dict, from_study: dict[str, str], section: str, where: str,
                       why: str) -> dict[str, Any]:
    """``block`` (the config's ``where``) with each key of ``from_study`` set to the study setting it
    names; a block that sets one itself is refused (a ``section`` ``KeyProblem``, saying ``why``)."""
    for key, source in from_study.items():
        if key in block:
            raise KeyProblem(section, (key,), f"set by {source} ({why}); remove {where}.{key}")
    return {**block, **{key: _setting(cfg, source) for key, source in from_study.items()}}


def study_sft(cfg: dict, preset: str) -> dict[str, Any]:
    """The SFT section a job of the SFT stage ``preset`` (``SFT_BLOCKS``) receives, as the SFT
    engine's loader reads it (``load_sft_config``; its ``data()`` / ``train()`` are the two jobs'
    parts): the stage's block of the study config, where a mix weight of 0 drops that domain and its
    source (config files merge key by key, so an override cannot delete a key of config/config.yaml's); for the
    embedded warm start without a mix of its own, weight 1 and the expert for every domain whose spec
    has ``warm_start`` (``gentax.domains.spec``); the keys whose value is another setting's
    (``SFT_FROM_STUDY``: the V1 model is sampled as in its RL rollouts and sees what the RL runs'
    agent sees); ``engines.dtype``, when not ``auto``, as its ``precision``. The one builder of an
    SFT section in the study layer: the jobs, the plan's pricing, the config check, the memory
    check, ``gentax plan --settings`` and ``gentax sft``'s defaults all read it. A block that sets a
    key of ``SFT_FROM_STUDY`` is refused (``KeyProblem``), naming the key that holds it."""
    if preset not in SFT_BLOCKS:
        raise ConfigError(f"unknown SFT preset {preset!r}; valid: {', '.join(SFT_BLOCKS)}")
    section = dict(_setting(cfg, SFT_BLOCKS[preset]) or {})
    if "mix" in section and isinstance(section["mix"], dict):  # a weight that is no number stays, for the loader to name it
        section["mix"] = {d: w for d, w in section["mix"].items() if not (is_integer(w) and w <= 0)}
        if isinstance(section.get("sources"), dict):  # likewise merged key by key: only the mix's domains have one
            section["sources"] = {d: s for d, s in section["sources"].items() if d in section["mix"]}
    if preset == "embedded-base":
        warm_start = [d for d, s in specs().items() if s.warm_start]
        section.setdefault("mix", {d: 1 for d in warm_start})
        section.setdefault("sources", {d: "expert" for d in warm_start})
    section = _filled_from_study(cfg, section, SFT_FROM_STUDY, "SFT config", SFT_BLOCKS[preset],
                                 "the SFT jobs take it from there, as the RL and evaluation jobs do")
    dtype = cfg["engines"].get("dtype", "auto")
    if dtype != "auto":
        section["precision"] = sft_precision(dtype)
    return section


# ---- the grid --------------------------------------------------------------------------------
def runs(cfg: dict) -> list[RunSpec]:
    """Every planned RL run after V1, resolved once (see the module docstring): the grid's, then
    the control runs (``controls``) that are no grid run. The Snakefile's input functions ask for
    them once per job, so they are built once per distinct config (and registry)."""
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


def filler_experiments(cfg: dict) -> list[dict]:
    """``controls.filler.experiments`` when ``controls.filler.enabled``, else none."""
    block = enabled(cfg, "filler")
    return list(block.get("experiments", [])) if block else []


def filler_settings(cfg: dict) -> dict[str, Any]:
    """What a filler job needs of ``controls.filler``: source, token, eval_tokens."""
    block = cfg["controls"]["filler"]
    return {key: block[key] for key in ("source", "token", "eval_tokens")}


def eval_filler(cfg: dict) -> dict[str, Any]:
    """What a filler-mode evaluation plays with beside the thinking evaluation it matches: the
    filler's ``source`` and ``token``, and its length ``tokens`` (None: that evaluation's mean think
    tokens, ``controls.filler.eval_tokens: matched``; else that count)."""
    filler = filler_settings(cfg)
    return {"source": filler["source"], "token": filler["token"],
            "tokens": None if filler["eval_tokens"] == "matched" else int(filler["eval_tokens"])}


def filler_reference(cfg: dict, run: Run) -> Run:
    """The thinking run a filler run matches (same init, training domain, seed; variant default):
    its per-step mean think tokens are the filler run's filler lengths."""
    return find_run(cfg, run.init, run.train_domain, runspec.DEFAULT_VARIANT, run.seed)


def v1_run(cfg: dict) -> RunSpec:
    """Ckpt V1's training run (from the base model; default variant): what rule rl_v1 trains."""
    v1 = cfg["inits"]["v1"]["rl"]
    return runspec.build(cfg, "base", v1["train_domain"], runspec.DEFAULT_VARIANT, int(v1["seed"]), int(v1["steps"]))


def mixture_experiments(cfg: dict) -> list[dict]:
    """``grid.mixtures.experiments`` when ``grid.mixtures.enabled``, else none."""
    block = cfg["grid"].get("mixtures") or {}
    return list(block.get("experiments", [])) if block.get("enabled") else []


def find_run(cfg: dict, init: str, train_domain: str, variant: str, seed: int) -> Run:
    """The planned run of a run folder (``variant``: its variant label, a control run's label)."""
    for run in runs(cfg):
        if (run.init, run.train_domain, run.variant_label, run.seed) == (init, train_domain, variant, int(seed)):
            return run
    raise ConfigError(f"no planned run {runspec.run_path(init, train_domain, variant, seed)}")


def segments(cfg: dict, run: Run) -> list[tuple[int, int]]:
    base = cfg["grid"]["steps"]
    return [(0, base)] if run.steps <= base else [(0, base), (base, run.steps)]


def checkpoint_steps(cfg: dict, end: int) -> list[int]:
    every = cfg["rl"]["save_every"]
    return list(range(every, end + 1, every))


def table_settings(cfg: dict) -> dict[str, Any]:
    """What a table or figure job receives beside its files (``gentax.analysis.tables.Settings``
    fields), and what ``gentax tables`` defaults to: the window's checkpoint steps (the last
    ``eval.window`` checkpoints up to ``grid.steps``), the bootstrap draws (``eval.bootstrap``), the
    seed, ``eval.error_mark_pct`` and the study's table settings
    (``gentax.analysis.summary.config_settings``)."""
    from gentax.analysis.summary import config_settings  # function-local: defers pandas

    return {"window": window(cfg, cfg["grid"]["steps"]), "bootstrap": int(cfg["eval"]["bootstrap"]), "seed": int(cfg["seed"]),
            "error_mark_pct": float(cfg["eval"]["error_mark_pct"]), **config_settings(cfg)}


def window(cfg: dict, end: int) -> list[int]:
    every, k = cfg["rl"]["save_every"], cfg["eval"]["window"]
    return [end - every * i for i in reversed(range(k))]


def eval_steps(cfg: dict, run: Run, part: str | None = None) -> list[int]:
    """Checkpoints to evaluate; ``part`` "main" keeps those up to ``grid.steps``, "extended" the
    ones after it (so tables of the 150-step runs never wait for extended training)."""
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
    """Whether runs keep only the checkpoints the plan reads (config ``disk.keep_checkpoints:
    evaluated``); else every checkpoint stays (``all``)."""
    return (cfg.get("disk") or {}).get("keep_checkpoints", "all") == "evaluated"


def kept_steps(cfg: dict, run: Run) -> list[int]:
    """The checkpoints of ``run`` whose weights stay: every one it saves, or with ``keep_evaluated``
    the ones its evaluations read (``eval_steps``, both parts: a later segment never drops an
    earlier segment's evaluated checkpoint before its evaluation has run)."""
    if keep_evaluated(cfg):
        return eval_steps(cfg, run)
    every = int(cfg["rl"]["save_every"])
    return sorted({step for start, end in segments(cfg, run) for step in saved_steps(start, end, every)})


def checkpoint_keep(cfg: dict, run: Run, end: int) -> dict[str, Any] | None:
    """What the training segment of ``run`` that ends at ``end`` keeps when it ends (its job
    spec's ``keep``, ``gentax.jobspec.CheckpointKeep``); None: everything (``disk.keep_checkpoints:
    all``). The newest checkpoint keeps its resume state only while a later segment of the run is
    planned (extended training resumes from it); the run's last segment drops it."""
    if not keep_evaluated(cfg):
        return None
    return {"steps": kept_steps(cfg, run), "resume_state": any(start >= end for start, _ in segments(cfg, run))}


def v1_checkpoint_keep(cfg: dict) -> dict[str, Any] | None:
    """``checkpoint_keep`` of Ckpt V1's one training job: its last checkpoint (the initial policy V1)."""
    if not keep_evaluated(cfg):
        return None
    return {"steps": [int(cfg["inits"]["v1"]["rl"]["steps"])], "resume_state": False}


def segment_of(cfg: dict, run: Run, step: int) -> tuple[int, int]:
    for start, end in segments(cfg, run):
        if start < step <= end:
            return start, end
    raise ConfigError(f"step {step} is outside run {run.path} (0, {run.steps}]")


def eval_domains(cfg: dict, init: str) -> list[str]:
    return list(cfg["inits"][init]["domains"])


def eval_rule(init: str) -> str:
    """The rule whose one job per checkpoint of a run from ``init`` plays every eval domain of
    ``init`` (one rule per initial policy: its domains are the rule's outputs)."""
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
    """The variants an initial policy is evaluated as: one per thinking mode of the runs that start
    from it (``runspec.base_variant``), always the default's (thinking on)."""
    wanted = {runspec.DEFAULT_VARIANT} | {runspec.base_variant(r.variant) for r in runs(cfg) if r.init == init}
    return [v for v in runspec.variant_names() if v in wanted]


def _planned_conditions(cfg: dict) -> set[str]:
    """Which registry ``planned`` conditions hold for ``cfg``."""
    return {"always"} | ({"mixtures"} if mixture_experiments(cfg) else set()) | (
        {"controls"} if control_levels(cfg) else set())


def artifact_names(cfg: dict, kind: str | None = None) -> list[str]:
    """The tables and/or figures the workflow builds for ``cfg``, in registry order: every
    ``always`` entry, the mixture ones when ``grid.mixtures`` is enabled and the controls' when a
    ``controls`` sweep is (``gentax.analysis.artifacts``)."""
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
    """A control level's run: the level's variant on its training domain, with the level's domain
    setting and augmentation in place of the config's, named by the level's label."""
    d = level.train_domain
    aug = ({"kind": level.augmentation["kind"], "p": float(level.augmentation["p"]), "eps": {d: int(level.augmentation["eps"])}}
           if runspec.augments(level.variant) else None)
    return RunSpec(init=level.init, train=((d, 1),), variant=level.variant, seed=int(seed), steps=int(steps),
                   think=runspec.think_mode(level.variant), augmentation=aug, domains={d: dict(level.domain)},
                   label=level.label)


def _control_plan(cfg: dict, grid: list[RunSpec]) -> tuple[list[RunSpec], dict[str, str]]:
    """(the control runs to train, {level label: the variant label of the runs it reads}). A level
    whose run is a grid run (or an earlier level's) in all but its name and length reads that run
    (the part up to ``grid.steps``): the same run is never trained twice."""
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


def artifact_runs(cfg: dict, name: str) -> list[Run]:
    """The runs a table or figure reads: those of its variants on one domain; an artifact planned
    with the mixtures reads the mixture runs and their members' single-domain runs of the same
    init and variant; one planned with the controls the runs its levels read."""
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
    """The run variants a table or figure reads; ConfigError for an unknown name. For the
    mixtures' and the controls' artifacts they come from ``cfg`` (without it: the default)."""
    artifact = _artifact(name)
    if artifact.planned == "mixtures":
        return sorted({e["variant"] for e in mixture_experiments(cfg)}) if cfg is not None else ["default"]
    if artifact.planned == "controls":  # the base rows their ΔID and ΔOOD compare with
        return sorted({runspec.base_variant(lv.variant) for lv in control_levels(cfg)}) if cfg is not None else ["default"]
    return list(artifact.variants)


@dataclasses.dataclass(frozen=True)
class Reads:
    """What one table or figure reads: run summaries (run, part), base rows (init, variant), and
    whether it reads the properties table and the controls' properties table."""
    runs: tuple[tuple[Run, str], ...]
    bases: tuple[tuple[str, str], ...]
    properties: bool
    controls: bool


def artifact_reads(cfg: dict, name: str) -> Reads:
    """The inputs of table/figure ``name`` from its registry entry: its runs' main summaries (and
    extended ones where the entry reads them and the run has extended checkpoints), the base rows
    of its variants (always the default's), and the properties tables it reads."""
    artifact, variants = _artifact(name), artifact_variants(name, cfg)
    parts = [(run, "main") for run in artifact_runs(cfg, name)]
    if artifact.extended:
        parts += [(run, "extended") for run, _ in list(parts) if eval_steps(cfg, run, "extended")]
    bases = [(init, v) for init in ("v1", "v2") for v in base_variants(cfg, init) if v in variants or v == "default"]
    return Reads(tuple(parts), tuple(bases), artifact.properties, artifact.controls)


def artifact_inputs(cfg: dict, name: str) -> dict[str, Any]:
    """The input files of the rule that builds table/figure ``name`` (``artifact_reads`` as paths):
    ``summaries``, and ``properties`` / ``controls`` when it reads them."""
    reads = artifact_reads(cfg, name)
    inputs: dict[str, Any] = {"summaries": sorted(
        {paths.run_summary(cfg, part, run.path) for run, part in reads.runs}
        | {paths.base_summary(cfg, init, v) for init, v in reads.bases})}
    if reads.properties:
        inputs["properties"] = paths.properties_table(cfg)
    if reads.controls:
        inputs["controls"] = paths.controls_table(cfg)
    return inputs


def artifact_path(cfg: dict, name: str) -> str:
    """The file of table/figure ``name`` (its csv / png): what to ask Snakemake for to build it and
    what it needs; ConfigError for an unknown name or one this config does not plan."""
    kind = _artifact(name).kind
    if name not in artifact_names(cfg):
        raise ConfigError(f"{kind} {name!r} is not planned for this config (planned: {', '.join(artifact_names(cfg))})")
    return paths.figure(cfg, name) if kind == "figure" else paths.table(cfg, name)
