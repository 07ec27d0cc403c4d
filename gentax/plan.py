"""The study's plan: config loading/validation and the expansion of the grid into runs.

One place for "what the study consists of", used by the Snakefile's input functions
(rules/common.smk) and by ``gentax plan``. Contract:

- ``load_config(paths_or_dict)`` merges YAML files (later ones override, dicts deep-merged,
  lists replaced — as Snakemake merges ``--configfile``), validates against
  ``gentax/config_schema.yaml`` plus cross-field rules and every domain's knobs (the domain's own
  ``check_options``), and raises ``ConfigError`` naming the key; with ``cluster.memory_check`` it
  also sizes every GPU training job (``gentax.train.memory``): a preset whose SFT or RL actor does
  not fit its GPUs is an error here, at plan time. Every error is one line: an unknown key names
  the file that set it (``config_sources``) and the closest valid key; ``with_preset`` and
  ``cli_overrides`` build the study from config.yaml, the preset's overlay and the user's layers
  (nested ``--config`` values typed as in a file); ``check_configfiles`` reads files the way
  ``snakemake --configfile`` will; ``unmet_inputs`` lists what the jobs need from this machine
  (the base model folder, a writable results folder).
- ``runs(cfg)`` lists every RL run after V1 as a resolved ``gentax.runspec.RunSpec`` (``Run`` is
  the same class): init, training domains with weights (``train_domain`` is its path label),
  variant, seed, steps, thinking, augmentation and the training domains' settings; built here once
  and handed as it is to the rules, the engines and evaluation. An extended run (Tables 4/9/10) is
  the default run with more steps, never a second run. ``v1_run(cfg)`` is Ckpt V1's training run.
- ``segments(cfg, run)`` splits a run into resumable training segments: ``[(0, 150), (150, 300)]``;
  segment k+1 resumes from the state segment k saved.
- ``eval_steps(cfg, run, part)`` = the checkpoints evaluated: the last ``eval.window`` checkpoints at
  ``grid.steps`` ("main") and at an extended run's own last step ("extended"), or all checkpoints
  with ``eval.all_checkpoints``.
- ``jobs(cfg, names)`` = the jobs the workflow runs to build the tables/figures ``names`` (default:
  all), by rule, each with its work units (training steps or episodes): what ``gentax plan --cost``
  prices. What each table/figure is and reads is its entry in the registry
  (``gentax.analysis.artifacts``): ``table_names``, ``figure_names``, ``artifact_variants``,
  ``artifact_runs``, ``artifact_reads`` / ``artifact_inputs`` and ``jobs`` derive from it, and the
  Snakefile's input functions (rules/common.smk) call them; tests/test_cost.py checks ``jobs``
  against Snakemake's own dry-run.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable

from gentax import runspec
from gentax.analysis import artifacts
from gentax.controls import (PROPERTIES_TABLE, ControlLevel, check_controls, control_levels, enabled, not_evaluated,
                             property_path)
from gentax.domains import domain_class
from gentax.domains.spec import is_mixture, mixture_weights, names
from gentax.errors import ConfigError, GentaxError, yaml_number_hint
from gentax.io import REPO_ROOT, deep_merge, read_yaml, repo_path  # noqa: F401  (REPO_ROOT, repo_path: read as gplan.*)
from gentax.runspec import RunSpec
from gentax.train.sft_config import load_sft_config, sft_section  # noqa: F401  (sft_section: read as gplan.sft_section)

SCHEMA_PATH = Path(__file__).with_name("config_schema.yaml")
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
    "TABLES_WITH_PROPERTIES": lambda: {a.name for a in artifacts.ARTIFACTS if a.properties},
    "WITH_EXTENDED": lambda: {a.name for a in artifacts.ARTIFACTS if a.extended},
    "MIXTURE_ARTIFACTS": lambda: artifacts.names(planned="mixtures"),
    "CONTROL_NAMES": lambda: artifacts.names(planned="controls"),
}


Run = RunSpec  # a planned run (gentax.runspec)


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema

    return jsonschema.Draft202012Validator(schema())


def schema() -> dict:
    """``config_schema.yaml`` with its domain lists filled in from the domain registry
    (``gentax.domains.spec``): the domain-name enum and the required ``domains`` sections."""
    out = read_yaml(SCHEMA_PATH)
    domains = list(names())
    out["$defs"]["domain_name"] = {"enum": domains}
    out["$defs"]["variant_name"] = {"enum": list(runspec.variant_names())}
    out["properties"]["preset"]["enum"] = list(PRESET_OVERLAYS)
    section = out["properties"]["domains"]
    section["required"] = domains
    section["propertyNames"] = {"$ref": "#/$defs/domain_name"}
    return out


#: The study presets: which overlay is laid over config.yaml (the paper's study) before the user's
#: own overrides. This is the only meaning of "preset" in the workflow config; the engines' defaults
#: files (gentax/train/rl_defaults.yaml, sft_defaults.yaml) have one section per study preset
#: (rl: paper | embedded | gpu1; sft: v2 | embedded-base, the two SFT stages of those studies).
PRESET_OVERLAYS = {"paper": None, "embedded": REPO_ROOT / "config" / "embedded.yaml",
                   "gpu1": REPO_ROOT / "config" / "gpu1.yaml"}


def with_preset(base: dict, overrides: dict, default: str = "embedded") -> dict:
    """The study config: ``base`` (config.yaml), then the preset's overlay, then ``overrides``
    (the user's files and key=values, already merged in order), so an override always wins,
    also over a value the overlay sets. The preset is ``overrides["preset"]`` when given (the
    Snakemake profile or a file sets it), else ``default`` (a plain ``snakemake``: embedded)."""
    preset = overrides.get("preset") or default
    if preset not in PRESET_OVERLAYS:
        raise ConfigError(f"config key preset: unknown preset {preset!r}{did_you_mean(str(preset), PRESET_OVERLAYS)}; "
                          f"valid: {', '.join(PRESET_OVERLAYS)}")
    overlay = PRESET_OVERLAYS[preset]
    cfg = deep_merge(deep_merge(base, read_yaml(overlay) if overlay else {}), overrides)
    cfg["preset"] = preset
    return cfg


def cli_overrides(overrides: dict, cli: dict) -> dict:
    """``overrides`` (Snakemake's merged --configfile files and --config pairs) with every nested
    ``--config`` value read as YAML, as a config file reads it: Snakemake types a top-level
    ``key=value`` (int, float, bool) but leaves each leaf of ``key={a: 4}`` text."""
    import yaml

    def typed(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: typed(v) for key, v in value.items()}
        if isinstance(value, list):
            return [typed(v) for v in value]
        if isinstance(value, str) and value.strip():
            try:
                return yaml.safe_load(value)
            except yaml.YAMLError:
                return value
        return value

    nested = {key: typed(value) for key, value in cli.items() if isinstance(value, (dict, list))}
    return deep_merge(overrides, nested)


def config_sources(preset: str, configfiles: Iterable[str | Path] = (), cli: dict | None = None) -> list[tuple[str, dict]]:
    """Where each layer of the study config comes from, in merge order: config.yaml, the preset's
    overlay, the user's files, ``--config``: what ``validate`` names beside a bad key."""
    def label(path: Path) -> str:
        return str(path.resolve().relative_to(REPO_ROOT)) if path.resolve().is_relative_to(REPO_ROOT) else str(path)

    overlay = PRESET_OVERLAYS.get(preset)
    files = [REPO_ROOT / "config.yaml", *([overlay] if overlay else []), *map(Path, configfiles)]
    out = [(label(path), read_yaml(path)) for path in files]
    return out + ([("--config", dict(cli))] if cli else [])


def check_configfiles(paths: Iterable[str | Path]) -> None:
    """Each file given to ``snakemake --configfile`` read as Snakemake will read it, so that one it
    cannot read is named (Snakemake's own message names no file): ConfigError for a missing file,
    a YAML error, an empty file or one whose top level is not a mapping."""
    for path in map(Path, paths):
        if path.is_file() and not path.read_text().strip():
            raise ConfigError(f"{path}: empty; a config file is a mapping of keys (e.g. `eval: {{episodes: 4}}`)")
        read_yaml(path)


def unmet_inputs(cfg: dict) -> list[str]:
    """What the jobs will need from this machine that is not there, one line each: the base model
    (``model.base``, unless ``model.embedded``: a folder holding a config.json) and a writable
    results folder. The Snakefile stops a run on any before its first job (``onstart``); a dry-run
    and ``gentax plan`` only say them (a plan may be made away from the cluster)."""
    import os

    problems = []
    if not cfg["model"]["embedded"]:
        base = repo_path(cfg["model"]["base"])
        if not (base / "config.json").is_file():
            what = "holds no config.json (not a Hugging Face model folder)" if base.is_dir() else "not found"
            problems.append(f"config key model.base: {base} {what}; every training and evaluation job loads it")
    results = repo_path(cfg["results"])
    existing = next(p for p in (results, *results.parents) if p.exists())
    if not (existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)):
        problems.append(f"config key results: {results} cannot be written ({existing} is not a writable folder)")
    return problems


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the closest of ``choices`` to a misspelled ``word``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _set_in(sources: list[tuple[str, dict]], path: list) -> str | None:
    """The last source (file or --config) that sets the key at ``path``: the one that wins."""
    found = None
    for name, data in sources:
        node: Any = data
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                break
        else:
            found = name
    return found


def load_config(sources: str | Path | dict | Iterable[str | Path | dict]) -> dict:
    """Merge config files/dicts in order and validate; raises ConfigError naming the bad key."""
    if isinstance(sources, (str, Path, dict)):
        sources = [sources]
    cfg: dict = {}
    named: list[tuple[str, dict]] = []
    for i, src in enumerate(sources):
        data = src if isinstance(src, dict) else read_yaml(src)
        named.append((f"layer {i}" if isinstance(src, dict) else str(src), data))
        cfg = deep_merge(cfg, data)
    validate(cfg, sources=named)
    return cfg


def validate(cfg: dict, *, memory: bool = True, sources: list[tuple[str, dict]] | None = None) -> None:
    """Schema + cross-field rules; ``memory=False`` skips the GPU memory check (a cluster job
    re-reading the Snakefile: the main process has checked). ``sources`` (``config_sources``):
    the layers ``cfg`` was merged from, so a bad key's error names the file that set it."""
    errors = sorted(_validator().iter_errors(cfg), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        raise _schema_error(errors, sources or [])
    _check_domain_options(cfg, sources or [])  # before the controls, whose levels lay their knobs over these
    _check_cross_fields(cfg)
    if memory and cfg.get("cluster", {}).get("memory_check"):
        # function-local: gentax.train.memory reads gentax.settings, which reads this module (the one
        # import cycle left; docs/contracts.md "Layers" says how the study package's split ends it)
        from gentax.train.memory import check_memory

        check_memory(cfg)  # every GPU training job fits its GPUs (DeepSpeed's estimators + activations)


def _schema_error(errors: list, sources: list[tuple[str, dict]]) -> ConfigError:
    """One line for the schema's best-matching error: the key, what is wrong, a did-you-mean for an
    unknown key, the number hint for text that reads as a number, and the file that set it."""
    import jsonschema

    err = jsonschema.exceptions.best_match(errors)
    path = list(err.absolute_path)
    message = err.message
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = err.schema.get("properties", {})
        unknown = [key for key in err.instance if key not in known]
        if unknown:
            path.append(unknown[0])
            message = f"unknown key{did_you_mean(str(unknown[0]), known)}; valid: {', '.join(known)}"
    elif err.validator == "type":
        wanted = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
        message += yaml_number_hint(err.instance, integer="integer" in wanted and "number" not in wanted)
    key = ".".join(str(p) for p in path) or "(top level)"
    where = _set_in(sources, path) if path else None
    return ConfigError(f"config key {key}: {message}" + (f" (set in {where})" if where else ""))


def _check_cross_fields(cfg: dict) -> None:
    save_every = cfg["rl"]["save_every"]
    steps = cfg["grid"]["steps"]
    window = cfg["eval"]["window"]
    if steps % save_every:
        raise ConfigError(f"config key grid.steps: {steps} is not a multiple of rl.save_every ({save_every})")
    if window * save_every > steps:
        raise ConfigError(f"config key eval.window: {window} checkpoints every {save_every} steps do not fit in grid.steps ({steps})")
    inits = cfg["inits"]
    if cfg["inits"]["v1"]["rl"]["train_domain"] not in inits["v1"]["domains"]:
        raise ConfigError("config key inits.v1.rl.train_domain: must be one of inits.v1.domains")
    if cfg["properties"]["init"] not in inits:
        raise ConfigError("config key properties.init: unknown init")
    for i, exp in enumerate(cfg["grid"]["experiments"]):
        allowed = inits[exp["init"]]["domains"]
        for d in exp["train_domains"]:
            if d not in allowed:
                raise not_evaluated(cfg, f"config key grid.experiments.{i}.train_domains", exp["init"], d)
            if _needs_eps(exp["variant"], d) and d not in cfg["augmentation"][exp["init"]]["eps"]:
                raise ConfigError(f"config key augmentation.{exp['init']}.eps.{d}: missing (needed by grid.experiments.{i})")
    _check_mixtures(cfg)
    _check_filler(cfg)
    check_controls(cfg)
    planned = {(e["init"], e["variant"], d) for e in cfg["grid"]["experiments"] for d in e["train_domains"]}
    for i, ext in enumerate(cfg["grid"].get("extended", [])):
        key = f"config key grid.extended.{i}"
        if (ext["init"], ext["variant"], ext["train_domain"]) not in planned:
            raise ConfigError(f"{key}: extends a run that grid.experiments does not plan")
        if ext["steps"] <= steps or ext["steps"] % save_every:
            raise ConfigError(f"{key}.steps: must exceed grid.steps ({steps}) and be a multiple of rl.save_every ({save_every})")
    if cfg["model"]["embedded"] and "embedded_base" not in cfg:
        raise ConfigError("config key embedded_base: required when model.embedded is true")
    _check_engine_sections(cfg)


def _check_mixtures(cfg: dict) -> None:
    """Every mixture of ``grid.mixtures``: two or more known domains (checked also while the block is
    off); when it is on, each an evaluated domain of the init, with an augmentation budget when the
    variant is aug (a block that is off plans nothing, so another config's inits need not match it)."""
    block = cfg["grid"].get("mixtures") or {}
    for i, exp in enumerate(block.get("experiments", [])):
        allowed = cfg["inits"][exp["init"]]["domains"]
        for k, mixture in enumerate(exp["mixtures"]):
            key = f"config key grid.mixtures.experiments.{i}.mixtures.{k}"
            try:
                weights = mixture_weights(mixture)
            except GentaxError as exc:
                raise ConfigError(f"{key}: {exc}") from None
            if len(weights) < 2:
                raise ConfigError(f"{key}: a mixture names two or more domains joined by '+', got {mixture!r}")
            if not block.get("enabled", False):
                continue
            for d in weights:
                if d not in allowed:
                    raise not_evaluated(cfg, key, exp["init"], d)
                if _needs_eps(exp["variant"], d) and d not in cfg["augmentation"][exp["init"]]["eps"]:
                    raise ConfigError(f"config key augmentation.{exp['init']}.eps.{d}: missing (needed by {key})")


def _check_filler(cfg: dict) -> None:
    """Every planned filler-thinking experiment (``controls.filler`` when enabled, or a grid entry of
    a variant in thinking mode filler): each domain an evaluated domain of the init with the
    matching thinking (default) run planned, and the local RL engine (docs/STUDY.md)."""
    planned = [(f"config key controls.filler.experiments.{i}", exp) for i, exp in enumerate(filler_experiments(cfg))]
    planned += [(f"config key grid.experiments.{i}", exp) for i, exp in enumerate(cfg["grid"]["experiments"])
                if runspec.think_mode(exp["variant"]) == "filler"]
    for key, exp in planned:
        allowed = cfg["inits"][exp["init"]]["domains"]
        thinking = {d for e in cfg["grid"]["experiments"] if e["init"] == exp["init"] and e["variant"] == runspec.DEFAULT_VARIANT
                    for d in e["train_domains"]}
        for d in exp["train_domains"]:
            if d not in allowed:
                raise not_evaluated(cfg, f"{key}.train_domains", exp["init"], d)
            if d not in thinking:
                raise ConfigError(f"{key}.train_domains: {d} has no thinking run to match: grid.experiments plans no "
                                  f"{exp['init']} default run on {d}")
        if cfg["engines"]["rl"] != "local":
            raise ConfigError(f"{key}: the filler arm runs on the local engine only (engines.rl is "
                              f"{cfg['engines']['rl']!r}; set engines.rl: local or plan no filler runs)")


def _needs_eps(variant: str, domain: str) -> bool:
    """A run of ``variant`` on ``domain`` reads the config's augmentation budget of ``domain``."""
    v = runspec.variant(variant)
    return v.augment and domain not in v.aug_eps


def _check_domain_options(cfg: dict, sources: list[tuple[str, dict]]) -> None:
    """Every domain's knobs, checked by the domain's own declarations (``DomainEnv.check_options``),
    reported under the key the user wrote (and the file that set it)."""
    for name, section in cfg["domains"].items():
        options = dict(section.get("options") or {})
        cls = domain_class(name)
        try:
            cls.check_options(options)
        except GentaxError as exc:
            unknown = [key for key in options if key not in cls.default_options]
            path = ["domains", name, "options", *unknown[:1]]
            hint = did_you_mean(unknown[0], cls.default_options) if unknown else ""
            where = _set_in(sources, path)
            raise ConfigError(f"config key {'.'.join(path)}: {exc}{hint}" + (f" (set in {where})" if where else "")) from None


def sft_domains(sft: dict, preset: str = "v2") -> list[str]:
    """The domains an SFT section's data comes from (its mix after the preset's defaults)."""
    return load_sft_config(sft_section(sft), preset=preset).active_domains()


def _check_engine_sections(cfg: dict) -> None:
    """The RL and SFT sections are validated by the engines' own loaders (one place for their keys)."""
    from gentax.train.config import load_rl_config  # function-local: defers numpy (gentax.train.grpo)

    checks = [("rl", lambda: load_rl_config(cfg["rl"])),
              ("inits.v2.sft", lambda: load_sft_config(sft_section(cfg["inits"]["v2"]["sft"]), preset="v2"))]
    if cfg["model"]["embedded"]:
        checks.append(("embedded_base", lambda: load_sft_config(sft_section(cfg["embedded_base"]), preset="embedded-base")))
    for key, check in checks:
        try:
            check()
        except ConfigError as exc:
            raise ConfigError(f"config key {key}: {exc}") from None


def eval_episodes(cfg: dict, domain: str) -> int:
    """Held-out tasks evaluated on ``domain`` (its task manifest, every checkpoint's evaluation):
    ``eval.episodes_per_domain[domain]`` where given, else ``eval.episodes``."""
    ev = cfg["eval"]
    return int((ev.get("episodes_per_domain") or {}).get(domain, ev["episodes"]))


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
    raise ConfigError(f"no planned run {init}/{train_domain}/{variant}/seed{seed}")


def segments(cfg: dict, run: Run) -> list[tuple[int, int]]:
    base = cfg["grid"]["steps"]
    return [(0, base)] if run.steps <= base else [(0, base), (base, run.steps)]


def checkpoint_steps(cfg: dict, end: int) -> list[int]:
    every = cfg["rl"]["save_every"]
    return list(range(every, end + 1, every))


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


def segment_of(cfg: dict, run: Run, step: int) -> tuple[int, int]:
    for start, end in segments(cfg, run):
        if start < step <= end:
            return start, end
    raise ConfigError(f"step {step} is outside run {run.path} (0, {run.steps}]")


def eval_domains(cfg: dict, init: str) -> list[str]:
    return list(cfg["inits"][init]["domains"])


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
            "base_evals": sum(len(eval_domains(cfg, i)) for i in cfg["inits"]),
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
    return [a.name for a in artifacts.ARTIFACTS if (kind is None or a.kind == kind) and a.planned in holds]


def table_names(cfg: dict) -> list[str]:
    """The tables the workflow builds (``artifact_names``)."""
    return artifact_names(cfg, "table")


# ---- controls (gentax.controls) ----------------------------------------------------------
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


def artifact_inputs(cfg: dict, name: str, results: str) -> dict[str, Any]:
    """The input files of the rule that builds table/figure ``name`` under the results folder
    ``results`` (``artifact_reads`` as paths): ``summaries``, and ``properties`` / ``controls``
    when it reads them."""
    reads = artifact_reads(cfg, name)
    inputs: dict[str, Any] = {"summaries": sorted(
        {f"{results}/summary/{part}/{run.path}.csv" for run, part in reads.runs}
        | {f"{results}/summary/base/{init}/{v}.csv" for init, v in reads.bases})}
    if reads.properties:
        inputs["properties"] = f"{results}/properties/properties.csv"
    if reads.controls:
        inputs["controls"] = f"{results}/{PROPERTIES_TABLE}"
    return inputs


def jobs(cfg: dict, names: Iterable[str] | None = None) -> dict[str, list[int]]:
    """The jobs that build the tables/figures ``names`` (default: all of them) from nothing.

    ``{rule: [units of each job]}`` where units are training steps (``rl_v1``, ``rl_segment``,
    ``sft_v2``, ``embedded_base``), episodes (``eval_checkpoint``, ``properties``, ``sft_data``: the
    V1 episodes it rolls out) or 0 (bookkeeping jobs). What each table/figure reads comes from its
    registry entry (``artifact_reads``, the same function as the rules' ``artifact_inputs``); from
    there it follows the rules' input functions (run summary -> checkpoint evaluations -> training
    segments; SFT and V1 below V2), which tests/test_cost.py checks against Snakemake's dry-run.
    """
    names = list(names) if names is not None else [*table_names(cfg), *figure_names(cfg)]
    out: dict[str, list[int]] = defaultdict(list)
    parts: dict[Run, set[str]] = {}
    bases: set[tuple[str, str]] = set()
    with_properties = with_controls = False
    for name in names:
        reads = artifact_reads(cfg, name)  # the registry entry's inputs, as the rule's input function reads them
        out[_artifact(name).kind].append(0)
        for run, part in reads.runs:
            parts.setdefault(run, set()).add(part)
        bases |= set(reads.bases)
        with_properties |= reads.properties
        with_controls |= reads.controls
    task_domains: set[str] = set()
    for run, wanted in parts.items():
        steps = [s for part in sorted(wanted) for s in eval_steps(cfg, run, part)]
        last = max(end for _, end in {segment_of(cfg, run, s) for s in steps})
        out["rl_segment"] += [end - start for start, end in segments(cfg, run) if end <= last]
        out["eval_checkpoint"] += [eval_episodes(cfg, d) for _ in steps for d in eval_domains(cfg, run.init)]
        out["run_summary"] += [0] * len(wanted)
        task_domains |= set(eval_domains(cfg, run.init))
    for init, _ in sorted(bases):
        out["eval_checkpoint"] += [eval_episodes(cfg, d) for d in eval_domains(cfg, init)]
        out["base_summary"].append(0)
        task_domains |= set(eval_domains(cfg, init))
    inits = {run.init for run in parts} | {init for init, _ in bases}
    logs: set[str] = set()  # property logs: Table 3's per domain, the controls' per level
    if with_properties:
        logs |= {f"properties/{d}.json" for d in eval_domains(cfg, cfg["properties"]["init"])}
        out["properties_table"].append(0)
    if with_controls:
        logs |= set(control_property_paths(cfg))
        out["controls_properties_table"].append(0)
    for log in sorted(logs):
        out["control_properties" if log.startswith("properties/controls/") else "properties"].append(
            cfg["properties"]["episodes"])
        task_domains.add(Path(log).stem)
    if logs:
        inits.add(cfg["properties"]["init"])
    if "v2" in inits:
        inits.add("v1")
        sft = load_sft_config(sft_section(cfg["inits"]["v2"]["sft"]), preset="v2")
        out["sft_data"].append(sft.v1_episodes_per_domain * len(sft.mix))  # at most: per collection round
        out["sft_v2"].append(sft.steps)
        task_domains |= set(sft.mix)
    if "v1" in inits:
        out["rl_v1"].append(int(cfg["inits"]["v1"]["rl"]["steps"]))
        task_domains.add(cfg["inits"]["v1"]["rl"]["train_domain"])
        if cfg["model"]["embedded"]:
            base = load_sft_config(sft_section(cfg["embedded_base"]), preset="embedded-base")
            out["embedded_model"].append(0)
            out["embedded_base_data"].append(0)
            out["embedded_base"].append(int(base.steps))
            task_domains |= set(base.active_domains())  # the warm start's demos
    out["tasks"] += [0] * len(task_domains)
    return dict(out)
