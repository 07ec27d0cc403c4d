"""The GPU memory check of a study's training jobs (``check``: with ``cluster.memory_check``, a
``ConfigError`` naming a job that does not fit its GPUs and its numbers).

``job_estimates``: one ``JobMemory`` per GPU training job kind (``sft_v2``; the verl actor's phases),
in GiB: model states by DeepSpeed's own estimators on ``cluster.model_config``'s parameter count
(the model built on torch's meta device), partitioned as the SFT job's DeepSpeed config or verl's
FSDP (ZeRO-3) say; activations per token of the largest micro-batch (bf16, with or without gradient
checkpointing) plus the LM head's logits. A job fits within ``(1 - memory_margin)`` x
``gpu_memory_gib``. The figures marked *measured* were fitted to peaks at the paper's shape
(docs/paper_shape.md; tests/test_paper_shape.py holds the check within 15 % of them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import sys
from functools import lru_cache
from typing import Any

from gentax.errors import ConfigError, GentaxError
from gentax.io import default_cache_dir, repo_path, write_json
from gentax.study.config import study_rl, study_sft
from gentax.train.config import load_rl_config
from gentax.train.sft_config import load_sft_config

GIB = 1024**3
BF16 = 2
#: bytes per logit entry (token x vocabulary) beside a micro-batch's layer activations: ``verl`` and
#: ``verl_entropy`` counted on the flash-attn path; ``hf_loss`` (SFT) and the ``verl_unfused*`` ones
#: (without flash-attn) measured; ``verl_log_probs`` scaled from the unfused path's measured ratio
LOGIT_BYTES = {"hf_loss": 8, "verl": 4, "verl_entropy": 8, "verl_log_probs": 11,
               "verl_unfused": 20, "verl_unfused_log_probs": 51}
#: bytes a parameter of verl's FSDP actor outside the update, measured: fp32 parameters and Adam's
#: moments (12), with the fp32 gradients in the checkpoint save (16)
FSDP_RESIDENT_BYTES = 12
FSDP_SAVE_BYTES = 16
#: what each offload flag takes off the GPU outside the update (our reading): the fp32 parameters, Adam's moments
FSDP_OFFLOADED_BYTES = {"param_offload": 4, "optimizer_offload": 8}
#: bytes a parameter of LlamaFactory's ZeRO-3 states without offload, measured (DeepSpeed's estimator counts 18)
ZERO3_STATE_BYTES = 16


@dataclasses.dataclass(frozen=True)
class Architecture:
    """What the estimates need of a causal LM: its parameter counts and activation shapes."""

    total_params: int
    largest_layer_params: int  # DeepSpeed's "largest layer": the most parameters one module owns
    layers: int
    hidden: int
    kv: int  # key/value width: kv heads x head dim
    intermediate: int
    vocab: int

    def activation_bytes_per_token(self, *, checkpointing: bool, logit_bytes: int) -> int:
        layer = BF16 * (9 * self.hidden + 3 * self.kv + 4 * self.intermediate)
        kept = BF16 * self.layers * self.hidden + layer if checkpointing else self.layers * layer
        return kept + self.vocab * logit_bytes


@lru_cache(maxsize=8)
def architecture(config_json: str) -> Architecture:
    """The architecture of an HF ``config.json``: counted once per config and transformers version
    (``counted``), then read from the cache (``gentax.io.default_cache_dir``), since importing
    transformers to count would add seconds to every ``gentax plan`` and run start."""
    from importlib.metadata import version

    path = repo_path(config_json)
    if not path.is_file():
        raise ConfigError(f"config key cluster.model_config: {path} not found (an HF config.json of model.base)")
    text = path.read_text()
    key = hashlib.sha256(f"{version('transformers')}\n{text}".encode()).hexdigest()[:24]
    cached = default_cache_dir() / "architectures" / f"{key}.json"
    with contextlib.suppress(OSError, ValueError, TypeError):  # none yet, or unreadable: count again
        return Architecture(**json.loads(cached.read_text()))
    arch = counted(json.loads(text))
    with contextlib.suppress(OSError, GentaxError):  # a cache it cannot write: count again next time
        write_json(cached, dataclasses.asdict(arch))
    return arch


def counted(data: dict) -> Architecture:
    """The architecture of an HF config (``config.json``'s dict), counted on torch's meta device (no weights)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    data = dict(data)
    config = AutoConfig.for_model(data.pop("model_type"), **data)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    largest = max(sum(p.numel() for p in module.parameters(recurse=False)) for module in model.modules())
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return Architecture(
        total_params=sum(p.numel() for p in model.parameters()),  # shared (tied) weights once
        largest_layer_params=largest,
        layers=config.num_hidden_layers,
        hidden=config.hidden_size,
        kv=getattr(config, "num_key_value_heads", config.num_attention_heads) * head_dim,
        intermediate=config.intermediate_size,
        vocab=config.vocab_size,
    )


@dataclasses.dataclass(frozen=True)
class JobMemory:
    """One job's per-GPU estimate (GiB) and how it was made."""

    job: str
    how: str  # the partitioning and the micro-batch, in words
    model_states_gib: float
    activations_gib: float
    budget_gib: float
    advice: str  # what to change when it does not fit
    vllm_gib: float = 0.0  # vLLM's share of the GPU during the rollout phase

    @property
    def total_gib(self) -> float:
        return self.model_states_gib + self.activations_gib + self.vllm_gib

    @property
    def fits(self) -> bool:
        return self.total_gib <= self.budget_gib

    def line(self) -> str:
        parts = f"model states {self.model_states_gib:.1f}"
        parts += f" + vLLM {self.vllm_gib:.1f}" if self.vllm_gib else f" + activations {self.activations_gib:.1f}"
        verdict = "fits" if self.fits else "DOES NOT FIT"
        return (f"{self.job}: {parts} = {self.total_gib:.1f} GiB per GPU vs budget {self.budget_gib:.1f} GiB "
                f"({verdict}, headroom {self.budget_gib - self.total_gib:+.1f} GiB; {self.how})")


@contextlib.contextmanager
def _quiet_accelerator():
    """Import DeepSpeed without its "Setting accelerator to CPU" warning on a machine without CUDA:
    ``DS_ACCELERATOR=cpu`` for the import only."""
    import os

    import torch

    if "DS_ACCELERATOR" in os.environ or torch.cuda.is_available():
        yield
        return
    os.environ["DS_ACCELERATOR"] = "cpu"
    try:
        yield
    finally:
        del os.environ["DS_ACCELERATOR"]


def model_states_bytes(arch: Architecture, *, zero_stage: int, gpus_per_node: int, nodes: int = 1,
                       offload_optimizer: bool = False, offload_params: bool = False) -> int:
    """Per-GPU bytes of parameters, gradients and optimizer states: DeepSpeed's estimators."""
    with contextlib.redirect_stdout(sys.stderr), _quiet_accelerator():  # DeepSpeed logs to stdout
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
        from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    if zero_stage == 3:
        return estimate_zero3_model_states_mem_needs(
            arch.total_params, arch.largest_layer_params, num_gpus_per_node=gpus_per_node, num_nodes=nodes,
            cpu_offload=offload_optimizer, cpu_offload_params=offload_params, zero_init=True)[1]
    if zero_stage == 2:
        return estimate_zero2_model_states_mem_needs(arch.total_params, num_gpus_per_node=gpus_per_node,
                                                     num_nodes=nodes, cpu_offload=offload_optimizer)[1]
    if zero_stage == 0:  # data parallel: every GPU holds everything = the stage-2 estimate on one GPU
        return estimate_zero2_model_states_mem_needs(arch.total_params, num_gpus_per_node=1, cpu_offload=False)[1]
    raise ConfigError(f"ZeRO stage {zero_stage}: the memory check knows stages 0, 2 and 3 (DeepSpeed's estimators)")


def deepspeed_settings(path: str | None) -> dict[str, Any]:
    """ZeRO stage and offload flags of a DeepSpeed JSON config (stage 0 without one)."""
    if not path:
        return {"zero_stage": 0, "offload_optimizer": False, "offload_params": False}
    file = repo_path(path)
    if not file.is_file():
        raise ConfigError(f"DeepSpeed config {file} not found")
    try:
        zero = json.loads(file.read_text()).get("zero_optimization", {})
    except json.JSONDecodeError as exc:
        raise ConfigError(f"DeepSpeed config {file}: not valid JSON: {exc}") from None

    def offloaded(key: str) -> bool:
        return str((zero.get(key) or {}).get("device", "none")).lower() in ("cpu", "nvme")

    return {"zero_stage": int(zero.get("stage", 0)), "offload_optimizer": offloaded("offload_optimizer"),
            "offload_params": offloaded("offload_param")}


def _budget(cluster: dict) -> float:
    return float(cluster["gpu_memory_gib"]) * (1.0 - float(cluster["memory_margin"]))


def sft_estimate(cfg: dict, arch: Architecture) -> JobMemory | None:
    """The V2 SFT job (LlamaFactory), or None when it is not full fine-tuning."""
    sft = load_sft_config(study_sft(cfg, "v2"))
    if sft.lora_rank or sft.freeze_layers:
        return None
    rl = load_rl_config(study_rl(cfg))
    cluster = cfg["cluster"]
    gpus = int(cluster["gpus_per_node"])
    ds = deepspeed_settings(sft.deepspeed)
    if ds == {"zero_stage": 3, "offload_optimizer": False, "offload_params": False}:
        # DeepSpeed's stage-3 estimate at the measured bytes a parameter
        states = 4 * arch.largest_layer_params + ZERO3_STATE_BYTES * arch.total_params / gpus
    else:
        states = model_states_bytes(arch, gpus_per_node=gpus, **ds)
    seq = sft.cutoff_len or rl.max_prompt_tokens + rl.max_new_tokens
    tokens = sft.micro_batch_size * seq
    checkpointing = sft.gradient_checkpointing in ("auto", True)  # auto: on with CUDA
    acts = tokens * arch.activation_bytes_per_token(checkpointing=checkpointing, logit_bytes=LOGIT_BYTES["hf_loss"])
    how = (f"ZeRO-{ds['zero_stage']} over {gpus} GPUs" if ds["zero_stage"] else f"no ZeRO ({gpus} full replicas)")
    how += f", micro-batch {sft.micro_batch_size} x {seq} tokens"
    advice = ("hand LlamaFactory a ZeRO-3 DeepSpeed config (inits.v2.sft.deepspeed: config/deepspeed/zero3.json), "
              "or lower inits.v2.sft.micro_batch_size")
    return JobMemory("sft_v2", how, states / GIB, acts / GIB, _budget(cluster), advice)


def rl_estimates(cfg: dict, arch: Architecture) -> list[JobMemory]:
    """The verl actor update and the rollout phase of an RL run (its settings as verl receives them)."""
    from gentax.study.preview.settings import rl_settings  # function-local: defers hydra (the verl view)

    v = rl_settings(cfg)
    actor, model = "actor_rollout_ref.actor.", "actor_rollout_ref.model."
    gpus, nodes = int(v["trainer.n_gpus_per_node"]), int(v["trainer.nnodes"])
    states = model_states_bytes(arch, zero_stage=3, gpus_per_node=gpus, nodes=nodes,
                                offload_optimizer=bool(v[actor + "fsdp_config.optimizer_offload"]),
                                offload_params=bool(v[actor + "fsdp_config.param_offload"]))
    tokens = int(v[actor + "ppo_max_token_len_per_gpu"])
    fused = bool(v[model + "use_remove_padding"])  # on with flash_attention_2: flash-attn is installed
    logit = LOGIT_BYTES[("verl_entropy" if float(v[actor + "entropy_coeff"]) else "verl") if fused else "verl_unfused"]
    checkpointing = bool(v[model + "enable_gradient_checkpointing"])
    acts = tokens * arch.activation_bytes_per_token(checkpointing=checkpointing, logit_bytes=logit)
    # outside the update its states at the measured bytes a parameter, less what is offloaded; the log-prob
    # pass keeps no layer inputs but has wider logit temporaries
    offloaded = {flag: bytes_ if v[actor + "fsdp_config." + flag] else 0 for flag, bytes_ in FSDP_OFFLOADED_BYTES.items()}
    per_gpu = arch.total_params / (gpus * nodes)
    resident = per_gpu * (FSDP_RESIDENT_BYTES - sum(offloaded.values()))
    saved = per_gpu * (FSDP_SAVE_BYTES - offloaded["optimizer_offload"])  # verl loads offloaded parameters to save
    probs = tokens * (BF16 * (9 * arch.hidden + 3 * arch.kv + 4 * arch.intermediate)
                      + arch.vocab * LOGIT_BYTES["verl_log_probs" if fused else "verl_unfused_log_probs"])
    budget = _budget(cfg["cluster"])
    share = float(v["actor_rollout_ref.rollout.gpu_memory_utilization"]) * float(cfg["cluster"]["gpu_memory_gib"])
    world = f"FSDP full shard (ZeRO-3) over {gpus * nodes} GPUs"
    return [
        JobMemory("rl actor update", f"{world}, {tokens} tokens per micro-batch", states / GIB, acts / GIB, budget,
                  "turn on rl.verl.gradient_checkpointing, lower rl.verl.micro_batch_per_gpu, or offload (rl.verl)"),
        JobMemory("rl log-probs", f"{world}, {tokens} tokens per micro-batch, forward only", resident / GIB,
                  probs / GIB, budget, "lower rl.verl.micro_batch_per_gpu (the log-prob pass's token budget too), "
                  "or offload (rl.verl)"),
        JobMemory("rl rollout", f"{world}, vLLM's gpu_memory_utilization share beside the actor", resident / GIB, 0.0,
                  budget, "lower rl.verl.gpu_memory_utilization, or offload (rl.verl)", vllm_gib=share),
        JobMemory("rl checkpoint save", f"{world}, the actor's states with its gradients", saved / GIB, 0.0, budget,
                  "offload the optimizer (rl.verl.optimizer_offload)"),
    ]


def job_estimates(cfg: dict) -> list[JobMemory]:
    """Every GPU training job kind of the preset."""
    arch = architecture(str(cfg["cluster"]["model_config"]))
    jobs = [job for job in [sft_estimate(cfg, arch)] if job is not None]
    if cfg["engines"]["rl"] == "verl":
        jobs += rl_estimates(cfg, arch)
    return jobs


def check_memory(cfg: dict) -> list[JobMemory]:
    """``job_estimates``, raising ConfigError (job and numbers) when one does not fit."""
    jobs = job_estimates(cfg)
    bad = [job for job in jobs if not job.fits]
    if bad:
        gpu = cfg["cluster"]["gpu_memory_gib"]
        margin = cfg["cluster"]["memory_margin"]
        raise ConfigError(f"config key cluster: a job does not fit its {gpu} GiB GPUs (margin {margin:.0%}): "
                          + "; ".join(f"{job.line()}: {job.advice}" for job in bad))
    return jobs


def check(cfg: dict) -> list[JobMemory]:
    """The study's memory check: with ``cluster.memory_check``, ``check_memory(cfg)``; else []."""
    return check_memory(cfg) if (cfg.get("cluster") or {}).get("memory_check") else []
