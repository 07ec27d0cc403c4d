"""The SFT configuration: the section, its two parts, one loader (the data builder's and the trainer's).

``load_sft_config(section) -> SFTConfig``: an SFT section over ``engine_defaults()``
(``sft_defaults.yaml``: the engine keys that are no study choice), checked and frozen. The study's
values have no default here (``gentax.study.config.study_sft`` builds the section). Its parts are
``SFTData`` (``gentax sft build-data``) and ``SFTTrain`` (``gentax sft train``): ``cfg.data()`` /
``cfg.train()``; a job's spec holds its verb's part. An unknown, bad or missing key is a
``KeyProblem`` naming it, except the episodes budget of a source the mix takes nothing from
(``BUDGETS``), which is null. ``read_sft_file`` reads a command line's ``--config`` (docs/sft.md).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from gentax.errors import ConfigError, KeyProblem, is_integer, unknown_key
from gentax.io import read_yaml
from gentax.train.config import key_checker

DEFAULTS_FILE = Path(__file__).with_name("sft_defaults.yaml")
PRESETS = ("v2", "embedded-base")
SOURCES = ("expert", "v1")
#: each source's episodes per collection round and domain: a study key only where the mix takes a domain
#: from that source (unset otherwise: null, as the embedded warm start's V1 budget)
BUDGETS = {"expert": "expert_episodes_per_domain", "v1": "v1_episodes_per_domain"}
GENERATORS = ("hf", "vllm")
PRECISIONS = ("auto", "bf16", "fp32")
SWITCHES = ("auto", True, False)
_SECTION_KEY = {"v2": "sft", "embedded-base": "embedded_base"}  # a --config file's block of each stage
_RESERVED = ("domains", "seed", "tracking")  # tracking: gentax.train.tracking


class _Part:
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class _Mix(_Part):
    def active_domains(self) -> list[str]:
        """Domains with a positive mix weight, in the mix's order."""
        return [domain for domain, weight in self.mix.items() if weight > 0]


@dataclasses.dataclass(frozen=True)
class SFTData(_Mix):
    """What ``gentax sft build-data`` reads: the mix, how the ``--v1`` model is sampled, what the agent sees."""
    # the mix
    pairs: int
    mix: dict[str, int]
    sources: dict[str, str]
    v1_episodes_per_domain: int | None
    expert_episodes_per_domain: int | None
    max_rounds: int
    split: str
    # what the agent sees, how the --v1 model is sampled
    think: bool
    history_length: int
    generator: str
    temperature: float
    top_p: float
    max_new_tokens: int
    env_workers: int
    expert_think: str
    seed: int


@dataclasses.dataclass(frozen=True)
class SFTTrain(_Part):
    """What ``gentax sft train`` reads: LlamaFactory's training."""
    steps: int
    lr: float
    batch_size: int
    micro_batch_size: int
    lr_scheduler: str
    warmup_ratio: float
    weight_decay: float
    max_grad_norm: float
    cutoff_len: int | None
    template: str | None
    lora_rank: int
    lora_alpha: int
    lora_target: str
    freeze_layers: int
    precision: str
    gradient_checkpointing: Any
    deepspeed: str | None
    llamafactory_cli: str | None
    extra: dict[str, Any]
    seed: int


class _Section(_Mix):
    """The whole SFT section: ``SFTData``'s keys and ``SFTTrain``'s (``seed`` once)."""

    def data(self) -> SFTData:
        return SFTData(**{f.name: getattr(self, f.name) for f in dataclasses.fields(SFTData)})

    def train(self) -> SFTTrain:
        return SFTTrain(**{f.name: getattr(self, f.name) for f in dataclasses.fields(SFTTrain)})


SFTConfig = dataclasses.make_dataclass(
    "SFTConfig", [(f.name, f.type) for f in dataclasses.fields(SFTData) if f.name != "seed"]
    + [(f.name, f.type) for f in dataclasses.fields(SFTTrain)], bases=(_Section,), frozen=True,
    namespace={"__module__": __name__})


@lru_cache(maxsize=None)
def engine_defaults() -> dict[str, Any]:
    """The engine keys' defaults (sft_defaults.yaml): every SFT key that is no study choice."""
    return read_yaml(DEFAULTS_FILE)


def load_sft_config(section: Mapping[str, Any]) -> SFTConfig:
    """Validated ``SFTConfig`` from ``section`` over ``engine_defaults()`` (see the module doc); a
    study key the section leaves out is a ``KeyProblem`` naming it."""
    section = dict(section or {})
    known = [f.name for f in dataclasses.fields(SFTConfig)]
    unknown = [key for key in section if key not in known]
    if unknown:
        raise KeyProblem("SFT config", (unknown[0],), f"{unknown_key(unknown[0], known)} ({DEFAULTS_FILE.name} "
                                                       "and config/config.yaml's inits.v2.sft document each)")
    merged = {**engine_defaults(), **section}
    mix, sources = merged.get("mix"), merged.get("sources")
    if isinstance(mix, dict) and isinstance(sources, dict):  # else the check below names what is wrong
        used = {sources.get(domain) for domain, weight in mix.items() if weight}
        merged.update({key: None for source, key in BUDGETS.items() if source not in used and key not in merged})
    missing = [key for key in known if key not in merged]
    if missing:
        raise KeyProblem("SFT config", (missing[0],), "missing: a study value, which the study's SFT section holds "
                                                       "(gentax.study.config.study_sft: config/config.yaml inits.v2.sft / "
                                                       "embedded_base and what it takes from the study; gentax sft: "
                                                       "--study-preset)")
    cfg = SFTConfig(**merged)
    _validate_data(cfg)
    _validate_train(cfg)
    return cfg


def read_sft_file(path: str | Path, preset: str = "v2") -> tuple[dict[str, Any], dict[str, dict[str, Any]], int | None]:
    """(section, domains, seed) of a YAML config file (see the module docstring)."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown SFT preset {preset!r}; valid: {', '.join(PRESETS)}")
    data = read_yaml(path)
    key = _SECTION_KEY[preset]
    if key in data:
        section = data[key]
    else:
        section = {k: v for k, v in data.items() if k not in _RESERVED}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: the {key} section must be a mapping")
    domains = data.get("domains") or {}
    if not isinstance(domains, dict) or not all(isinstance(v, dict) for v in domains.values()):
        raise ConfigError(f"{path}: domains must map a domain to {{max_steps: N, options: {{...}}}}")
    for name, settings in domains.items():
        unknown = sorted(set(settings) - {"max_steps", "options"})
        if unknown:
            raise ConfigError(f"{path}: domains.{name}: unknown key(s) {', '.join(unknown)}; valid: max_steps, options")
    seed = data.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ConfigError(f"{path}: seed must be an integer, got {seed!r}")
    return section, domains, seed


def _at_least(value: Any, low: int) -> bool:
    return is_integer(value) and value >= low


def _number(value: Any, low: float, *, strict: bool) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and (value > low if strict else value >= low)


def _validate_data(cfg: SFTData) -> None:
    from gentax.domains import REGISTRY, SPLITS

    need = key_checker(cfg, "SFT config")
    for key in ("pairs", "max_rounds", "max_new_tokens"):
        need(_at_least(getattr(cfg, key), 1), key, "must be an integer >= 1", integer=True)
    for key in ("history_length", "env_workers", "seed"):
        need(_at_least(getattr(cfg, key), 0), key, "must be an integer >= 0", integer=True)
    for key in ("temperature", "top_p"):
        need(_number(getattr(cfg, key), 0, strict=True), key, "must be a number > 0")
    need(cfg.top_p <= 1, "top_p", "must be <= 1")
    need(isinstance(cfg.mix, dict) and bool(cfg.mix) and all(d in REGISTRY for d in cfg.mix), "mix",
         f"must map domains ({', '.join(REGISTRY)}) to weights")
    for domain, weight in cfg.mix.items():
        need(_at_least(weight, 0), f"mix.{domain}", "a mix weight must be an integer >= 0", integer=True)
    need(any(w > 0 for w in cfg.mix.values()), "mix", "weights must be integers >= 0, at least one > 0")
    need(isinstance(cfg.sources, dict) and all(cfg.sources.get(d) in SOURCES for d in cfg.active_domains()), "sources",
         f"must give every domain of the mix a source ({', '.join(SOURCES)})")
    need(cfg.pairs >= len(cfg.active_domains()), "pairs", "must be at least the number of domains in the mix")
    used = {cfg.sources[domain] for domain in cfg.active_domains()}
    for source, key in BUDGETS.items():
        if source in used or getattr(cfg, key) is not None:
            need(_at_least(getattr(cfg, key), 1), key, "must be an integer >= 1", integer=True)
    need(cfg.split in SPLITS, "split", f"must be one of {', '.join(SPLITS)}")
    need(isinstance(cfg.think, bool), "think", "must be true or false")
    need(cfg.generator in GENERATORS, "generator", f"must be one of {', '.join(GENERATORS)}")
    need(isinstance(cfg.expert_think, str) and bool(cfg.expert_think.strip()), "expert_think", "must be a non-empty text")
    try:
        cfg.expert_think.format(action="x")
    except (KeyError, IndexError, ValueError):
        need(False, "expert_think", "may use only the placeholder {action}")


def _validate_train(cfg: SFTTrain) -> None:
    need = key_checker(cfg, "SFT config")
    for key in ("steps", "batch_size", "micro_batch_size", "lora_alpha"):
        need(_at_least(getattr(cfg, key), 1), key, "must be an integer >= 1", integer=True)
    for key in ("lora_rank", "freeze_layers", "seed"):
        need(_at_least(getattr(cfg, key), 0), key, "must be an integer >= 0", integer=True)
    for key in ("lr", "max_grad_norm"):
        need(_number(getattr(cfg, key), 0, strict=True), key, "must be a number > 0")
    for key in ("warmup_ratio", "weight_decay"):
        need(_number(getattr(cfg, key), 0, strict=False), key, "must be a number >= 0")
    need(cfg.warmup_ratio < 1, "warmup_ratio", "must be < 1")
    need(cfg.batch_size % cfg.micro_batch_size == 0, "batch_size",
         f"must be a multiple of micro_batch_size={cfg.micro_batch_size}")
    need(cfg.cutoff_len is None or _at_least(cfg.cutoff_len, 16), "cutoff_len", "must be null or an integer >= 16",
         integer=True)
    need(cfg.template is None or (isinstance(cfg.template, str) and bool(cfg.template)), "template",
         "must be null (the tokenizer's own chat template) or a LlamaFactory template name")
    need(cfg.lora_rank == 0 or cfg.freeze_layers == 0, "freeze_layers", "LoRA (lora_rank > 0) and freeze tuning exclude each other")
    need(cfg.precision in PRECISIONS, "precision", f"must be one of {', '.join(PRECISIONS)}")
    need(cfg.gradient_checkpointing in SWITCHES, "gradient_checkpointing", "must be one of auto, true, false")
    need(isinstance(cfg.lr_scheduler, str) and bool(cfg.lr_scheduler), "lr_scheduler", "must be a scheduler name")
    need(isinstance(cfg.lora_target, str) and bool(cfg.lora_target), "lora_target", "must be a module list or 'all'")
    need(cfg.deepspeed is None or isinstance(cfg.deepspeed, str), "deepspeed", "must be null or a path")
    need(cfg.llamafactory_cli is None or isinstance(cfg.llamafactory_cli, str), "llamafactory_cli", "must be null or a path")
    need(isinstance(cfg.extra, dict), "extra", "must be a mapping of LlamaFactory arguments")
