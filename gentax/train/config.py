"""The RL configuration: one dataclass, one loader.

``load_rl_config(section) -> RLConfig``: an RL section over ``engine_defaults()`` (``rl_defaults.yaml``:
the engine keys that are no study choice, each documented there), checked and frozen. The study's
recipe has no default here: the section holds it (``gentax.study.config.study_rl``). An unknown,
missing or bad key is a ``KeyProblem`` naming it; a key the run spec holds instead
(``REPLACED_KEYS``) names what replaced it. Both engines read every field (tests/test_spec_once.py).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from gentax.errors import ConfigError, KeyProblem, is_integer, number_hint, unknown_key
from gentax.io import deep_merge, read_yaml
from gentax.train.grpo import ADVANTAGE_MODES, PENALTY_PLACEMENTS

DEFAULTS_FILE = Path(__file__).with_name("rl_defaults.yaml")
ROLLOUT_BACKENDS = ("vllm", "hf")  # verl's rollout.name (hf: gentax/train/verl_hf_rollout.py)
ATTN_IMPLEMENTATIONS = ("flash_attention_2", "sdpa", "eager")

#: RL keys that are no more: what a run is belongs to its run spec (gentax.runspec), set in the
#: workflow config by the keys named here; a section that sets one gets this line
REPLACED_KEYS = {
    "steps": "grid.steps (inits.v1.rl.steps for Ckpt V1, grid.extended for longer runs); "
             "gentax train rl: --steps A:B",
    "max_steps": "domains.<domain>.max_steps; gentax train rl: a --run-spec file",
    "env_options": "domains.<domain>.options; gentax train rl: a --run-spec file",
    "augmentation": "augmentation.kind and augmentation.<init>.p / .eps; gentax train rl: a --run-spec file",
}


@dataclasses.dataclass(frozen=True)
class RLConfig:
    group_size: int
    tasks_per_step: int
    save_every: int
    lr: float
    kl_coef: float
    clip_ratio: float
    clip_ratio_c: float
    temperature: float
    top_p: float
    val_temperature: float
    max_new_tokens: int
    max_prompt_tokens: int
    history_length: int
    advantage_normalisation: str
    invalid_penalty: float
    invalid_penalty_placement: str
    entropy_coeff: float
    epochs_per_step: int
    mini_batch_size: int
    micro_batch_size: int
    max_update_samples: int
    weight_decay: float
    grad_clip: float
    env_workers: int
    filler: dict[str, Any]
    val_every: int
    val_tasks: int
    lora_rank: int
    lora_alpha: int
    lora_save: str
    dtype: str
    autocast: str
    device: str
    verl: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@lru_cache(maxsize=None)
def engine_defaults() -> dict[str, Any]:
    """The engine keys' defaults (rl_defaults.yaml): every RL key that is no study choice."""
    return read_yaml(DEFAULTS_FILE)


def load_rl_config(section: Mapping[str, Any]) -> RLConfig:
    """Validated ``RLConfig`` from ``section`` over ``engine_defaults()`` (see module doc); a study
    key the section leaves out is a ``KeyProblem`` naming it."""
    base = engine_defaults()
    section = dict(section or {})
    known = [f.name for f in dataclasses.fields(RLConfig)]
    unknown = [key for key in section if key not in known]
    if unknown:
        key = unknown[0]
        if key in REPLACED_KEYS:
            raise KeyProblem("RL config", (key,), f"no RL key any more: the run spec holds it; set {REPLACED_KEYS[key]}")
        raise KeyProblem("RL config", (key,), f"{unknown_key(key, known)} ({DEFAULTS_FILE.name} documents each)")
    merged = deep_merge(base, section)
    missing = [key for key in known if key not in merged]
    if missing:
        raise KeyProblem("RL config", (missing[0],), "missing: a study value, which the study config's rl block "
                                                      "holds (config/config.yaml; gentax train rl: --preset)")
    if "verl" in section and isinstance(section["verl"], Mapping):
        unknown = [key for key in section["verl"] if key not in base["verl"]]
        if unknown:
            raise KeyProblem("RL config", ("verl", unknown[0]), unknown_key(unknown[0], base["verl"]))
    cfg = RLConfig(**merged)
    _validate(cfg)
    return cfg


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def key_checker(cfg, section: str):
    """``need(ok, key, what)``: ``key`` of ``cfg`` (a dotted path: ``verl.rollout``) is wrong unless
    ``ok``: one ``KeyProblem`` of ``section`` naming it, its value and what it must be."""
    def need(ok: bool, key: str, what: str, *, integer: bool = False) -> None:
        if not ok:
            path = key.split(".")
            value = getattr(cfg, path[0])
            for part in path[1:]:
                value = value.get(part) if isinstance(value, Mapping) else None
            raise KeyProblem(section, path, f"{what}, got {value!r}{number_hint(value, integer=integer)}")

    return need


def _validate(cfg: RLConfig) -> None:
    need = key_checker(cfg, "RL config")
    for key in ("group_size", "tasks_per_step", "save_every", "max_new_tokens", "max_prompt_tokens",
                "epochs_per_step", "mini_batch_size", "micro_batch_size"):
        value = getattr(cfg, key)
        need(is_integer(value) and value >= 1, key, "must be an integer >= 1", integer=True)
    for key in ("history_length", "env_workers", "val_every", "val_tasks", "lora_rank", "max_update_samples"):
        value = getattr(cfg, key)
        need(is_integer(value) and value >= 0, key, "must be an integer >= 0", integer=True)
    need(cfg.group_size >= 2, "group_size", "GRPO needs at least 2 rollouts per task")
    for key in ("lr", "clip_ratio", "temperature", "top_p", "val_temperature", "grad_clip"):
        value = getattr(cfg, key)
        need(_number(value) and value > 0, key, "must be a number > 0")
    for key in ("kl_coef", "invalid_penalty", "weight_decay", "entropy_coeff"):
        value = getattr(cfg, key)
        need(_number(value) and value >= 0, key, "must be a number >= 0")
    need(_number(cfg.clip_ratio_c), "clip_ratio_c", "must be a number > 1 (dual clip)")
    need(cfg.top_p <= 1, "top_p", "must be <= 1")
    need(cfg.clip_ratio_c > 1, "clip_ratio_c", "must be > 1 (dual clip)")
    need(cfg.advantage_normalisation in ADVANTAGE_MODES, "advantage_normalisation",
         f"must be one of {', '.join(ADVANTAGE_MODES)}")
    need(cfg.invalid_penalty_placement in PENALTY_PLACEMENTS, "invalid_penalty_placement",
         f"must be one of {', '.join(PENALTY_PLACEMENTS)}")
    # cross_step normalises each step sample by the std of its group's step scores, which with the
    # penalty inside are outcomes and penalties mixed: the penalty's size then depends on the group
    need(not (cfg.invalid_penalty_placement == "in_return" and cfg.advantage_normalisation == "cross_step"),
         "invalid_penalty_placement", "in_return cannot go with advantage_normalisation cross_step: the -penalty "
         "would be divided by the std of the group's mixed step scores (outcomes and penalties), so its weight "
         "depends on the group (-2.04 in a 2-trajectory case); use after_normalisation, or in_return with trajectory")
    need(cfg.lora_save in ("merged", "adapter"), "lora_save", "must be one of merged, adapter")
    need(cfg.dtype in ("float32", "bfloat16"), "dtype", "must be one of float32, bfloat16")
    need(cfg.autocast in ("auto", "bf16", "none"), "autocast", "must be one of auto, bf16, none")
    need(cfg.device in ("auto", "cpu", "cuda"), "device", "must be one of auto, cpu, cuda")
    filler = cfg.filler
    need(isinstance(filler, dict) and set(filler) <= {"source", "token", "reference"}
         and filler.get("source") in ("repeat", "shuffle") and isinstance(filler.get("token"), str) and filler.get("token"),
         "filler", "must be {source: repeat | shuffle, token: a non-empty string, reference: the thinking run folder}")
    gpus = cfg.verl.get("n_gpus_per_node")
    need(gpus is None or (is_integer(gpus) and gpus >= 1), "verl.n_gpus_per_node",
         "must be an integer >= 1, or null (the study's cluster.gpus_per_node)", integer=True)
    need(cfg.verl.get("rollout") in ROLLOUT_BACKENDS, "verl.rollout", f"must be one of {', '.join(ROLLOUT_BACKENDS)}")
    need(cfg.verl.get("rollout") != "hf" or cfg.verl.get("rollout_tp") == 1, "verl.rollout_tp",
         "must be 1 with verl.rollout hf (one server per GPU)")
    need(cfg.verl.get("attn_implementation") in ATTN_IMPLEMENTATIONS, "verl.attn_implementation",
         f"must be one of {', '.join(ATTN_IMPLEMENTATIONS)}")
    need(cfg.mini_batch_size % cfg.group_size == 0, "mini_batch_size",
         f"must be a multiple of group_size={cfg.group_size} (verl counts mini-batches in groups)")


def parse_steps(text: str) -> tuple[int, int]:
    """``"A:B"`` -> (A, B): train steps A+1..B, starting from the step-A state."""
    try:
        start, end = (int(part) for part in str(text).split(":"))
    except ValueError:
        raise ConfigError(f"--steps must be A:B with integers A < B (e.g. 0:150), got {text!r}") from None
    if not 0 <= start < end:
        raise ConfigError(f"--steps must be A:B with 0 <= A < B, got {text!r}")
    return start, end


def read_rl_section(path: str | Path) -> dict[str, Any]:
    """The RL section of a YAML file: its ``rl:`` block if it has one, else the whole mapping."""
    data = read_yaml(path)
    section = data.get("rl", data)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: the rl section must be a mapping")
    return section
