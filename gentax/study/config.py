"""The study's config: loading (``study_config``, ``with_preset``: config/config.yaml, the preset's
overlay, the user's files), validation (``validate``: the schema, the rules that span keys, the
domains' knobs and the engines' loaders; one line per error naming the key and the file that set it)
and the RL and SFT sections the jobs receive (``study_rl``, ``study_sft``). The bottom of the study
layer, and the package's one reader of the workflow's config file (tests/test_config_reader.py).
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any, Iterable, Iterator

from gentax import runspec
from gentax.domains import domain_class
from gentax.domains.base import INVALID_PENALTY
from gentax.domains import spec as domain_spec
from gentax.domains.spec import mixture_weights, names, specs
from gentax.dtype import sft_precision
from gentax.errors import ConfigError, GentaxError, KeyProblem, did_you_mean, is_integer, number_hint, unknown_key
from gentax.io import REPO_ROOT, deep_merge, read_yaml, repo_path
from gentax.train.config import load_rl_config
from gentax.train.sft_config import PRESETS as SFT_PRESETS
from gentax.train.sft_config import load_sft_config

SCHEMA_PATH = Path(__file__).with_name("config_schema.yaml")


@functools.lru_cache(maxsize=1)
def _validator():
    """The schema's validator, whose ``integer`` is an int, not 8.0."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine("integer", lambda _checker, value: is_integer(value))
    return jsonschema.validators.extend(base, type_checker=checker)(schema())


def schema() -> dict:
    """``config_schema.yaml`` with the domain, variant and preset lists filled in from the registries."""
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
    """``schema()`` as a JSON file for the ``with`` block (``snakemake.utils.validate`` reads files only)."""
    import json
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gentax-schema-") as folder:
        path = Path(folder) / SCHEMA_PATH.with_suffix(".json").name
        path.write_text(json.dumps(schema()))
        yield path


#: The study presets: the overlay laid over config/config.yaml (the paper's study) before the user's
#: overrides. (An SFT job's ``preset`` names its SFT stage instead: ``SFT_BLOCKS``.)
PRESET_OVERLAYS = {"paper": None, "embedded": REPO_ROOT / "config" / "embedded.yaml",
                   "gpu1": REPO_ROOT / "config" / "gpu1.yaml"}
#: a preset whose overlay is laid over sections of another preset's, so it sets only what differs
OVERLAY_PARENTS = {"gpu1": ("embedded", ("model", "engines", "domains", "cluster"))}
#: the workflow's config file, the paper's study: the base every preset's overlay is laid over
STUDY_FILE = REPO_ROOT / "config" / "config.yaml"


def study_config(preset: str | None = None, configfiles: Iterable[str | Path] = (), *, check: bool = True) -> dict:
    """The study config of ``preset`` (else what ``configfiles`` set, else paper), as the Snakefile
    resolves it. ``check=False`` skips ``validate`` (a command line's defaults from a shipped preset)."""
    overrides: dict = {}
    for layer in [read_yaml(path) for path in configfiles] + [{"preset": preset} if preset else {}]:
        overrides = deep_merge(overrides, layer)
    cfg = with_preset(read_yaml(STUDY_FILE), overrides, default="paper")
    if check:
        validate(cfg, sources=config_sources(cfg["preset"], configfiles))
    return cfg


def with_preset(base: dict, overrides: dict, default: str = "embedded") -> dict:
    """``base`` (config/config.yaml), the preset's overlay, then ``overrides`` (the user's, merged in
    order), which always win. The preset is ``overrides["preset"]``, else ``default``; ``{preset}``
    in ``results`` becomes its name."""
    preset = overrides.get("preset") or default
    if preset not in PRESET_OVERLAYS:
        raise ConfigError(f"config key preset: unknown preset {preset!r}{did_you_mean(str(preset), PRESET_OVERLAYS)}; "
                          f"valid: {', '.join(PRESET_OVERLAYS)}")
    cfg = base
    for _, layer in overlay_layers(preset):
        cfg = deep_merge(cfg, layer)
    cfg = deep_merge(cfg, overrides)
    cfg["preset"] = preset
    return with_step_limits(with_results(cfg))


def with_results(cfg: dict) -> dict:
    """``cfg`` with ``{preset}`` in ``results`` replaced by its preset's name (``paper`` if it names none)."""
    if isinstance(cfg.get("results"), str):
        cfg["results"] = cfg["results"].replace("{preset}", str(cfg.get("preset") or "paper"))
    return cfg


def overlay_layers(preset: str) -> list[tuple[Path, dict]]:
    """(file, what it lays) of each layer of ``preset``'s overlay in merge order: its parent's
    sections (``OVERLAY_PARENTS``), then its own file; none for paper."""
    overlay = PRESET_OVERLAYS[preset]
    if overlay is None:
        return []
    parent, sections = OVERLAY_PARENTS.get(preset, (None, ()))
    inherited = [(path, {key: value for key, value in layer.items() if key in sections})
                 for path, layer in overlay_layers(parent)] if parent else []
    return inherited + [(overlay, read_yaml(overlay))]


def with_step_limits(cfg: dict) -> dict:
    """``cfg`` with each registered domain's section that sets no ``max_steps`` given its env's
    ``default_max_steps`` (the limit's one home), first in the section; the rest is the schema's to judge."""
    sections = cfg.get("domains")
    if isinstance(sections, dict):
        cfg["domains"] = {d: {"max_steps": domain_class(d).default_max_steps, **s}
                          if d in names() and isinstance(s, dict) else s for d, s in sections.items()}
    return cfg


def cli_overrides(overrides: dict, cli: dict) -> dict:
    """``overrides`` (Snakemake's merged --configfile files and --config pairs) with every nested
    ``--config`` value read as YAML (Snakemake leaves each leaf of ``key={a: 4}`` text)."""
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
    """(name, data) of each layer of the study config in merge order: what ``validate`` names beside a bad key."""
    def label(path: Path) -> str:
        return str(path.resolve().relative_to(REPO_ROOT)) if path.resolve().is_relative_to(REPO_ROOT) else str(path)

    layers = [(STUDY_FILE, read_yaml(STUDY_FILE)), *(overlay_layers(preset) if preset in PRESET_OVERLAYS else []),
              *((path, read_yaml(path)) for path in map(Path, configfiles))]
    out = [(label(path), data) for path, data in layers]
    return out + ([("--config", dict(cli))] if cli else [])


def check_configfiles(paths: Iterable[str | Path]) -> None:
    """Each ``snakemake --configfile`` file read, so one that cannot be read is named (Snakemake's message does not)."""
    for path in map(Path, paths):
        if path.is_file() and not path.read_text().strip():
            raise ConfigError(f"{path}: empty; a config file is a mapping of keys (e.g. `eval: {{episodes: 4}}`)")
        read_yaml(path)


def unmet_inputs(cfg: dict) -> list[str]:
    """What the jobs need from this machine that is not there, one line each: the base model folder
    (unless ``model.embedded``) and a writable results folder, every folder in it writable too (a
    rerun removes a job's old outputs first). A run stops on any (the Snakefile's onstart); a plan
    only says them."""
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
    elif results.is_dir():
        locked = next((Path(root) for root, _, _ in os.walk(results) if not os.access(root, os.W_OK | os.X_OK)), None)
        if locked is not None:
            problems.append(f"config key results: {locked} cannot be written (read-only or immutable), so a rerun could "
                            "not replace its outputs; make it writable (chmod u+w, chattr -i) or set results: elsewhere")
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
    cfg = with_step_limits(with_results(cfg))
    validate(cfg, sources=named)
    return cfg


def validate(cfg: dict, *, sources: list[tuple[str, dict]] | None = None) -> None:
    """Schema + the rules that span keys + the domains' knobs + the RL and SFT sections. ``sources``
    (``config_sources``): the layers ``cfg`` was merged from, so an error names the file that set the key."""
    sources = sources or []
    errors = sorted(_validator().iter_errors(cfg), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        raise _schema_error(errors, sources)
    try:
        _check_domain_options(cfg)  # before the controls, whose levels lay their knobs over these
        _check_cross_fields(cfg)
    except ConfigError as exc:
        raise _named_source(exc, sources) from None


def _named_source(exc: ConfigError, sources: list[tuple[str, dict]]) -> ConfigError:
    """A check's error ("config key a.b.c: ...") with the file that set the key (or its section)."""
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
    """One line for the schema's best-matching error: key, problem, a hint, the file that set it."""
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
    """Every mixture of ``grid.mixtures``: two or more known domains; when enabled, each evaluated
    by the init, with an augmentation budget when the variant augments."""
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
    """Every planned filler experiment: each domain evaluated by the init, its thinking run planned,
    the local RL engine."""
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


def not_evaluated(cfg: dict, key: str, init: str, domain: str) -> ConfigError:
    """The error for a training domain the init is not evaluated on (``inits.<init>.domains``)."""
    return ConfigError(f"{key}: {domain} is not an evaluated domain of {init} "
                       f"(inits.{init}.domains: {', '.join(cfg['inits'][init]['domains'])})")


def check_controls(cfg: dict) -> None:
    """The enabled sweeps of ``controls``: level names once, the training domain evaluated by the
    init, augmentation sources for a richness sweep, each difficulty level's knobs passing ``check_options``."""
    for kind in ("difficulty", "richness"):
        block = (cfg.get("controls") or {}).get(kind) or {}
        if not block.get("enabled"):
            continue
        key = f"config key controls.{kind}"
        levels = block.get("levels", [])
        level_names = [level["name"] for level in levels]
        if len(set(level_names)) < len(level_names):
            raise ConfigError(f"{key}.levels: a level name is given twice ({', '.join(level_names)})")
        domain = block["train_domain"]
        if domain not in cfg["inits"][block["init"]]["domains"]:
            raise not_evaluated(cfg, f"{key}.train_domain", block["init"], domain)
        if kind == "richness" and any(block["eps"]):
            try:
                domain_spec.spec(domain).augmentation_or_error()
            except GentaxError as exc:
                raise ConfigError(f"{key}.train_domain: {exc}") from None
        for order, level in enumerate(levels if kind == "difficulty" else []):
            options = {**dict(cfg["domains"][domain].get("options") or {}), **dict(level.get("options") or {})}
            try:
                domain_class(domain).check_options(options)
            except GentaxError as exc:
                raise ConfigError(f"{key}.levels.{order}.options ({level['name']}): {exc}") from None


def _needs_eps(variant: str, domain: str) -> bool:
    """A run of ``variant`` on ``domain`` reads the config's augmentation budget of ``domain``."""
    v = runspec.variant(variant)
    return v.augment and domain not in v.aug_eps


def _check_domain_options(cfg: dict) -> None:
    """Every domain's knobs, checked by the domain's own ``check_options``."""
    for name, section in cfg["domains"].items():
        options = dict(section.get("options") or {})
        cls = domain_class(name)
        try:
            cls.check_options(options)
        except GentaxError as exc:
            unknown = [key for key in options if key not in cls.default_options]
            hint = did_you_mean(unknown[0], cls.default_options) if unknown else ""
            raise ConfigError(f"config key {'.'.join(['domains', name, 'options', *unknown[:1]])}: {exc}{hint}") from None


def _check_engine_sections(cfg: dict) -> None:
    """The RL and SFT sections, built by the engines' own loaders, their errors worded as the schema's."""
    checks = [("rl", lambda: load_rl_config(study_rl(cfg)))]
    checks += [(block, functools.partial(lambda stage: load_sft_config(study_sft(cfg, stage)), stage))
               for stage, block in SFT_BLOCKS.items()
               if block.split(".")[0] in cfg]  # each SFT stage the config has (load_config may be given no embedded_base)
    for key, check in checks:
        try:
            check()
        except KeyProblem as exc:
            raise ConfigError(f"config key {'.'.join(map(str, [key, *exc.key]))}: {exc.problem}") from None
        except ConfigError as exc:
            raise ConfigError(f"config key {key}: {exc}") from None


# ---- the RL and SFT sections the jobs receive ------------------------------------------------------
#: RL keys whose value is another study setting's: never set under ``rl:`` (``study_rl`` fills them)
RL_FROM_STUDY = {"val_temperature": "eval.temperature"}


def study_rl(cfg: dict) -> dict[str, Any]:
    """Config ``rl:`` as the RL engines' loader reads it, with ``RL_FROM_STUDY``'s keys filled in, the
    envs' ``INVALID_PENALTY`` and the cluster's GPUs for verl unless ``rl`` sets them."""
    rl = _filled_from_study(cfg, cfg["rl"], RL_FROM_STUDY, "RL config", "rl",
                            "the RL run's validation plays as the evaluations do")
    rl.setdefault("invalid_penalty", -INVALID_PENALTY)
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
    """``block`` with each key of ``from_study`` set to the setting it names; a block that sets one
    itself is refused (a ``KeyProblem`` saying ``why``)."""
    for key, source in from_study.items():
        if key in block:
            raise KeyProblem(section, (key,), f"set by {source} ({why}); remove {where}.{key}")
    return {**block, **{key: _setting(cfg, source) for key, source in from_study.items()}}


def study_sft(cfg: dict, preset: str) -> dict[str, Any]:
    """The SFT section of stage ``preset`` (``SFT_BLOCKS``) as the engine's loader reads it: a mix
    weight of 0 drops the domain and its source (files merge key by key: an override cannot delete a
    key); the embedded warm start without a mix takes the expert on every ``warm_start`` domain;
    ``SFT_FROM_STUDY``'s keys filled in; ``engines.dtype`` as its ``precision``."""
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


def filler_experiments(cfg: dict) -> list[dict]:
    """``controls.filler.experiments`` when ``controls.filler.enabled``, else none."""
    block = (cfg.get("controls") or {}).get("filler") or {}
    return list(block.get("experiments", [])) if block.get("enabled") else []
