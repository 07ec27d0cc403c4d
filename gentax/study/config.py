"""The study's config: loading, the presets, validation (one line per error, naming the key).

Contract:

- ``study_config(preset, configfiles)`` is the study config of a preset, resolved and validated:
  config/config.yaml (``STUDY_FILE``), the preset's overlay, the user's files. It is the package's one
  reader of the workflow's config file (tests/test_config_reader.py): a command whose options
  default to study values gets them at the command-line boundary (``gentax.cli``, through
  ``command_line_defaults``), never by reading the file itself; the Snakefile reads the file it
  was started with and hands it to ``with_preset``.
- ``command_line_defaults(cfg)``: per command (``gentax eval``, ``properties``, ``tables``,
  ``train rl``, ``sft``, ``augment preview``), the study values its options default to.
- ``with_preset(base, overrides)`` builds the study from config/config.yaml (``base``), the preset's
  overlay (``PRESET_OVERLAYS``: ``paper`` none, ``embedded`` config/embedded.yaml, ``gpu1``
  config/gpu1.yaml over config/embedded.yaml's sections that ``OVERLAY_PARENTS`` names: ``overlay_layers``)
  and the user's layers, each domain section that sets no step limit given its
  domain's own (``with_step_limits``: the env's ``default_max_steps``); ``cli_overrides`` types nested ``--config`` values as
  in a file; ``check_configfiles`` reads files the way ``snakemake --configfile`` will.
- ``load_config(paths_or_dict)`` merges YAML files (later ones override, dicts deep-merged, lists
  replaced, as Snakemake merges ``--configfile``) and validates.
- ``validate(cfg)``: ``config_schema.yaml`` (filled in from the domain and variant registries,
  ``schema()``; ``schema_file()`` writes it for ``snakemake.utils.validate``), cross-field rules,
  every domain's knobs (its own ``check_options``) and the engines' own loaders of the RL and SFT
  sections; with ``cluster.memory_check`` it also sizes every GPU training job (``gentax.study.memory``). A ``ConfigError`` names the key, the file that
  set it (``config_sources``) and the closest valid key.
- ``unmet_inputs(cfg)`` lists what the jobs need from this machine (the base model folder, a
  writable results folder).

The expansion of a valid config into runs, jobs and artifacts is ``gentax.study.plan``, which
imports nothing of this module (so the memory check may read the plan).
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any, Iterable, Iterator

from gentax import runspec
from gentax.domains import domain_class
from gentax.domains.spec import mixture_weights, names
from gentax.errors import ConfigError, GentaxError, KeyProblem, did_you_mean, is_integer, number_hint, unknown_key
from gentax.io import REPO_ROOT, deep_merge, read_yaml, repo_path
from gentax.study.controls import check_controls, not_evaluated
from gentax.study.plan import (SFT_BLOCKS, eval_filler, filler_experiments, rollout_settings, study_rl, study_sft,
                               table_settings)
from gentax.train.sft_config import load_sft_config

SCHEMA_PATH = Path(__file__).with_name("config_schema.yaml")


@functools.lru_cache(maxsize=1)
def _validator():
    """The schema's validator, whose ``integer`` is an int (not 8.0, which JSON Schema counts as one):
    one rule for whole numbers in every section (``gentax.errors.number_hint``; the RL and SFT
    loaders and the job specs refuse 8.0 too)."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine("integer", lambda _checker, value: is_integer(value))
    return jsonschema.validators.extend(base, type_checker=checker)(schema())


def schema() -> dict:
    """``config_schema.yaml`` with its lists filled in from the registries: the domain-name enum and
    the required ``domains`` sections (``gentax.domains.spec``), the variant-name enum
    (``gentax.runspec``), the preset enum (``PRESET_OVERLAYS``). Only the enums are filled in: each
    ``$def``'s title and description stay (config/README.md shows them)."""
    out = read_yaml(SCHEMA_PATH)
    domains = list(names())
    out["$defs"]["domain_name"]["enum"] = domains
    out["$defs"]["variant_name"]["enum"] = list(runspec.variant_names())
    out["properties"]["preset"]["enum"] = list(PRESET_OVERLAYS)
    section = out["properties"]["domains"]
    section["required"] = domains
    section["propertyNames"] = {"$ref": "#/$defs/domain_name"}
    return out


@contextlib.contextmanager
def schema_file() -> Iterator[Path]:
    """``schema()`` as a JSON file that exists for the length of the ``with`` block: what the
    Snakefile hands ``snakemake.utils.validate``, which reads a schema from a file only (Snakemake
    9), while the lists the registries fill in exist only at load time. A private temporary folder
    per call: nothing is left in the working directory, no two processes share the file."""
    import json
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gentax-schema-") as folder:
        path = Path(folder) / SCHEMA_PATH.with_suffix(".json").name
        path.write_text(json.dumps(schema()))
        yield path


#: The study presets: which overlay is laid over config/config.yaml (the paper's study) before the user's
#: own overrides. This is the only meaning of "preset" in the workflow config; an SFT job's ``preset``
#: (the ``--preset`` of ``gentax sft build-data`` and ``train``) names its SFT stage instead (v2 |
#: embedded-base: ``plan.SFT_BLOCKS``).
PRESET_OVERLAYS = {"paper": None, "embedded": REPO_ROOT / "config" / "embedded.yaml",
                   "gpu1": REPO_ROOT / "config" / "gpu1.yaml"}
#: a preset whose overlay is laid over sections of another preset's overlay, so it sets only what differs:
#: the workstation study runs the embedded model with the embedded study's engines, domain knobs and cluster
OVERLAY_PARENTS = {"gpu1": ("embedded", ("model", "engines", "domains", "cluster"))}
#: the workflow's config file, the paper's study: the base every preset's overlay is laid over
STUDY_FILE = REPO_ROOT / "config" / "config.yaml"


def study_config(preset: str | None = None, configfiles: Iterable[str | Path] = (), *, memory: bool = False,
                 check: bool = True) -> dict:
    """The study config of ``preset``, resolved and validated as ``gentax plan`` and the Snakefile
    resolve it: config/config.yaml, the preset's overlay, then ``configfiles`` in order (as ``snakemake
    --configfile`` lays them). The preset is ``preset`` when given, else what the files set, else
    paper. ``memory``: also run the GPU memory check (``validate``). A bad key is a ConfigError
    naming it and the file that set it. ``check=False`` skips ``validate``: for the shipped presets
    alone (CI checks them: config/resolved), read by a command line whose domain may be one a
    ``GENTAX_DOMAINS`` module adds, which the study config has no section for."""
    overrides: dict = {}
    for layer in [read_yaml(path) for path in configfiles] + [{"preset": preset} if preset else {}]:
        overrides = deep_merge(overrides, layer)
    cfg = with_preset(read_yaml(STUDY_FILE), overrides, default="paper")
    if check:
        validate(cfg, memory=memory, sources=config_sources(cfg["preset"], configfiles))
    return cfg


def command_line_defaults(cfg: dict) -> dict[str, dict[str, Any]]:
    """What each command's options default to when its command line leaves them out, from the
    study config ``cfg``: the values its workflow job would receive, taken from the job specs'
    own builders (``gentax.study.plan.rollout_settings``, ``eval_filler``, ``table_settings``,
    ``study_rl``, ``study_sft``; ``gentax.study.jobs.domain_settings``), so a command line and a job
    agree. ``domains`` is the study's episode settings of every domain (step limit and knobs; a
    command line's own are laid over them). ``eval`` / ``properties``: also the filler arm's
    (``--think filler``). ``train rl``: ``engine`` (``engines.rl``), ``rl`` the study's RL block
    (what ``--config`` is laid over), ``run`` a run named on the command line
    (``gentax.runspec.from_defaults``' arguments): ``grid.steps``, the grid's first seed, every
    domain's episode settings (``domains``) and the augmentation kind with V1's p and per-domain
    budgets ``eps`` (``--variant aug``). ``sft`` (``gentax sft build-data`` and ``train``):
    ``stages``, each SFT stage's section (what ``--config`` is laid over). ``augment preview``: the
    augmentation ``kind``."""
    from gentax.study.jobs import domain_settings  # function-local: defers numpy (gentax.train.grpo)

    augmentation = {"kind": cfg["augmentation"]["kind"], "p": cfg["augmentation"]["v1"]["p"]}
    domains = {domain: domain_settings(cfg, domain) for domain in cfg["domains"]}
    rollout = {"domains": domains, "filler": eval_filler(cfg)}
    run_augmentation = {**augmentation, "eps": {d: int(eps) for d, eps in cfg["augmentation"]["v1"]["eps"].items()}}
    return {"eval": {**rollout_settings(cfg, "eval"), **rollout},
            "properties": {**rollout_settings(cfg, "properties"), "augmentation": augmentation, **rollout},
            "tables": table_settings(cfg),
            "train rl": {"engine": cfg["engines"]["rl"], "rl": study_rl(cfg),
                         "run": {"steps": cfg["grid"]["steps"], "seed": cfg["grid"]["seeds"][0], "domains": domains,
                                 "augmentation": run_augmentation}},
            "sft": {"stages": {stage: study_sft(cfg, stage) for stage in SFT_BLOCKS}, "domains": domains},
            "augment preview": {"kind": cfg["augmentation"]["kind"]}}


def with_preset(base: dict, overrides: dict, default: str = "embedded") -> dict:
    """The study config: ``base`` (config/config.yaml), then the preset's overlay, then ``overrides``
    (the user's files and key=values, already merged in order), so an override always wins,
    also over a value the overlay sets. The preset is ``overrides["preset"]`` when given (the
    Snakemake profile or a file sets it), else ``default`` (a plain ``snakemake``: embedded)."""
    preset = overrides.get("preset") or default
    if preset not in PRESET_OVERLAYS:
        raise ConfigError(f"config key preset: unknown preset {preset!r}{did_you_mean(str(preset), PRESET_OVERLAYS)}; "
                          f"valid: {', '.join(PRESET_OVERLAYS)}")
    cfg = base
    for _, layer in overlay_layers(preset):
        cfg = deep_merge(cfg, layer)
    cfg = deep_merge(cfg, overrides)
    cfg["preset"] = preset
    return with_step_limits(cfg)


def overlay_layers(preset: str) -> list[tuple[Path, dict]]:
    """(file, what it lays) of each layer of ``preset``'s overlay, in merge order: its parent's sections
    (``OVERLAY_PARENTS``), then its own file (``PRESET_OVERLAYS``); none for paper."""
    overlay = PRESET_OVERLAYS[preset]
    if overlay is None:
        return []
    parent, sections = OVERLAY_PARENTS.get(preset, (None, ()))
    inherited = [(path, {key: value for key, value in layer.items() if key in sections})
                 for path, layer in overlay_layers(parent)] if parent else []
    return inherited + [(overlay, read_yaml(overlay))]


def with_step_limits(cfg: dict) -> dict:
    """``cfg`` with each registered domain's section that sets no ``max_steps`` given the domain's own
    step limit (its env's ``default_max_steps``, the limit's one home); ``max_steps`` comes first in
    every section; every other key and section is left as it is, for the schema to judge."""
    sections = cfg.get("domains")
    if isinstance(sections, dict):
        cfg["domains"] = {d: {"max_steps": domain_class(d).default_max_steps, **s}
                          if d in names() and isinstance(s, dict) else s for d, s in sections.items()}
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
    """Where each layer of the study config comes from, in merge order: config/config.yaml, the preset's
    overlay, the user's files, ``--config``: what ``validate`` names beside a bad key."""
    def label(path: Path) -> str:
        return str(path.resolve().relative_to(REPO_ROOT)) if path.resolve().is_relative_to(REPO_ROOT) else str(path)

    layers = [(STUDY_FILE, read_yaml(STUDY_FILE)), *(overlay_layers(preset) if preset in PRESET_OVERLAYS else []),
              *((path, read_yaml(path)) for path in map(Path, configfiles))]
    out = [(label(path), data) for path, data in layers]
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
    cfg = with_step_limits(cfg)
    validate(cfg, sources=named)
    return cfg


def validate(cfg: dict, *, memory: bool = True, sources: list[tuple[str, dict]] | None = None) -> None:
    """Schema + cross-field rules; ``memory=False`` skips the GPU memory check (a cluster job
    re-reading the Snakefile: the main process has checked). ``sources`` (``config_sources``):
    the layers ``cfg`` was merged from, so a bad key's error names the file that set it."""
    sources = sources or []
    errors = sorted(_validator().iter_errors(cfg), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        raise _schema_error(errors, sources)
    try:
        _check_domain_options(cfg, sources)  # before the controls, whose levels lay their knobs over these
        _check_cross_fields(cfg, sources)
        if memory and cfg.get("cluster", {}).get("memory_check"):
            # function-local: gentax.study.memory reads gentax.study.settings, which reads this module (the one
            # import cycle left; docs/contracts.md "Layers" says how the study package's split ends it)
            from gentax.study.memory import check_memory

            check_memory(cfg)  # every GPU training job fits its GPUs (DeepSpeed's estimators + activations)
    except ConfigError as exc:
        raise _named_source(exc, sources) from None


def _named_source(exc: ConfigError, sources: list[tuple[str, dict]]) -> ConfigError:
    """A check's error ("config key a.b.c: ...") with the file that set the key, as the schema's
    errors have it: every section's errors alike (cross-field rules, controls, the memory check)."""
    import re

    message = str(exc)
    named = re.match(r"config key ([\w.\-]+)", message)
    if not named or "(set in " in message:
        return ConfigError(message)
    path = [int(part) if part.isdigit() else part for part in named.group(1).split(".")]
    while path and _set_in(sources, path) is None:  # a key given by no layer (a default): its section's file
        path.pop()
    where = _set_in(sources, path) if path else None
    return ConfigError(message + (f" (set in {where})" if where else ""))


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
            message = unknown_key(str(unknown[0]), known)
    elif err.validator == "type":
        wanted = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
        message += number_hint(err.instance, integer="integer" in wanted and "number" not in wanted)
    key = ".".join(str(p) for p in path) or "(top level)"
    where = _set_in(sources, path) if path else None
    return ConfigError(f"config key {key}: {message}" + (f" (set in {where})" if where else ""))


def _check_cross_fields(cfg: dict, sources: list[tuple[str, dict]]) -> None:
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
    _check_engine_sections(cfg, sources)


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


def _check_engine_sections(cfg: dict, sources: list[tuple[str, dict]]) -> None:
    """The RL and SFT sections are validated by the engines' own loaders (one place for their keys),
    whose errors (``KeyProblem``) are worded as the schema's: the key under the section the user
    wrote, did-you-mean for an unknown one, the number hint, the file that set it."""
    from gentax.train.config import load_rl_config  # function-local: defers numpy (gentax.train.grpo)

    checks = [("rl", lambda: load_rl_config(study_rl(cfg)))]
    checks += [(block, functools.partial(lambda stage: load_sft_config(study_sft(cfg, stage)), stage))
               for stage, block in SFT_BLOCKS.items()
               if block.split(".")[0] in cfg]  # each SFT stage the config has (load_config may be given no embedded_base)
    for key, check in checks:
        try:
            check()
        except KeyProblem as exc:
            path = [*key.split("."), *exc.key]
            where = _set_in(sources, path)
            raise ConfigError(f"config key {'.'.join(map(str, path))}: {exc.problem}"
                              + (f" (set in {where})" if where else "")) from None
        except ConfigError as exc:
            raise ConfigError(f"config key {key}: {exc}") from None
