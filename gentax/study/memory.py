"""Plan-time GPU memory check of the training jobs: does each fit its GPUs, and by how much?

Contract: ``job_estimates(cfg) -> list[JobMemory]`` for a workflow config (``gentax.study.plan``), one per
GPU training job kind of the preset (``sft_v2``; ``rl`` when ``engines.rl`` is verl), each with its
numbers in GiB; ``check_memory(cfg)`` raises ``ConfigError`` naming the job and its numbers when
one does not fit. ``gentax.study.config.validate`` calls it when ``cluster.memory_check`` is on, so a
preset that cannot run is an error at plan time, not after hours in a cluster queue.

Model states (parameters, gradients, optimizer states) come from DeepSpeed's OWN estimators
(``deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs``,
``stage_1_and_2.estimate_zero2_model_states_mem_needs``), fed with the parameter count of the base
model's architecture (``cluster.model_config``, an HF ``config.json``) instantiated on torch's meta
device, so no weights are needed:

- SFT (LlamaFactory, full fine-tuning): the DeepSpeed JSON it is handed (``inits.v2.sft.deepspeed``)
  over ``cluster.gpus_per_node`` GPUs: ZeRO-3 -> the stage-3 estimate, ZeRO-2 -> the stage-2 one,
  offload flags from the JSON's ``offload_optimizer`` / ``offload_param``; ZeRO-3 without offload
  at the measured bytes a parameter (``ZERO3_STATE_BYTES``) in the stage-3 estimate's place.
  Without DeepSpeed (or stage 0) nothing is partitioned: every GPU holds all states, DeepSpeed's
  stage-2 estimate for one GPU. Stage 1 has no DeepSpeed estimator and is refused.
- RL (verl's FSDP actor): FSDP FULL_SHARD partitions like ZeRO-3, over ``trainer.n_gpus_per_node``
  x ``trainer.nnodes``, with ``param_offload`` / ``optimizer_offload`` as verl receives them
  (``gentax.study.settings.rl_settings``). The phases outside the update hold the measured bytes a
  parameter (``FSDP_RESIDENT_BYTES``, ``FSDP_SAVE_BYTES``): the rollout (vLLM's
  ``gpu_memory_utilization`` share of the GPU beside them), the log-prob pass and the checkpoint save.

Activations are our estimate (bf16; FlashAttention/SDPA, so no sequence x sequence scores), per
token of the largest micro-batch a GPU processes:

- with gradient checkpointing, each layer's input is kept (``L h`` values) and one layer is
  recomputed at a time in the backward pass: its RMSNorm inputs/outputs, q/o projections,
  attention output and residuals (``9 h``), k/v before and after RoPE (``3 kv``), and the
  SwiGLU MLP's gate, up, activation and product (``4 I``); without checkpointing every layer's;
- the LM head's logits, ``V`` x bytes per entry: with Hugging Face's loss (LlamaFactory) the figure
  fitted to the measured SFT step (``LOGIT_BYTES["hf_loss"]``); 4 with verl (bf16 logits and their
  gradient; flash-attn's in-place cross entropy), plus 4 when verl computes entropies
  (``entropy_coeff`` != 0: softmax and product).

Tokens per micro-batch: SFT ``micro_batch_size`` x sequence length (``cutoff_len``, or when null
``max_prompt_tokens + max_new_tokens``, the longest step the agent sees); RL verl's
``ppo_max_token_len_per_gpu``. A job fits when its estimate is at most ``(1 - memory_margin)`` x
``gpu_memory_gib`` (the margin covers the CUDA context, NCCL buffers and allocator fragmentation).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from functools import lru_cache
from typing import Any

from gentax.errors import ConfigError
from gentax.io import repo_path
from gentax.study.plan import study_rl, study_sft
from gentax.train.sft_config import load_sft_config

GIB = 1024**3
BF16 = 2
#: bytes per logit entry (token x vocabulary) beside a micro-batch's layer activations. verl, verl_entropy:
#: our count of the tensors (module doc), for the cluster's path (flash-attn installed: verl's in-place cross
#: entropy). hf_loss (LlamaFactory's SFT step): a ONE-DEPTH FIT to the measured step (the paper's shape at 8
#: layers on one GPU, ZeRO-3): torch's peak less the states at ZERO3_STATE_BYTES (and DeepSpeed's 4 x the
#: largest layer) leaves 7.6 bytes a logit entry, rounded up. One depth cannot tell the loss's temporaries from
#: the layers' or from states the step holds only at its peak: this is the figure that makes states +
#: activations meet that peak, not a count (ours was 14: bf16 logits, their fp32 copy, fp32 log-softmax, fp32
#: gradient, all at once). verl_unfused / verl_unfused_log_probs: MEASURED for verl without flash-attn
#: (attn_implementation sdpa/eager: padded batches, torch's log-softmax, entropies for the metrics) at 4 and 8
#: layers of the paper's shape, per token of ppo_max_token_len_per_gpu (fitted at 4 layers; 8 layers within 2 %);
#: verl_log_probs: the cluster path's log-prob pass, NOT measured: verl's figure scaled by the measured
#: log-prob / update ratio of the unfused path (51 / 20). The measurement: docs/paper_shape.md.
LOGIT_BYTES = {"hf_loss": 8, "verl": 4, "verl_entropy": 8, "verl_log_probs": 11,
               "verl_unfused": 20, "verl_unfused_log_probs": 51}
#: bytes a parameter of verl's FSDP actor on its GPUs outside the update's passes, MEASURED (torch's peak
#: allocated) at 4 and 8 layers of the paper's shape: the line through the two depths over their parameters has
#: slope 12 in the rollout and 16 in the checkpoint save, intercept ~0. Read as fp32 parameters (4) and Adam's two
#: moments (8), the gradients freed, in the rollout and the log-prob passes; the fp32 gradients (4) still held
#: when verl saves after the update. The update keeps DeepSpeed's ZeRO-3 estimate (18 and the largest layer): its
#: own line's slope, 18.7 bytes a parameter (1.0 of them the kept layer inputs), is nearer 18 than 16.
FSDP_RESIDENT_BYTES = 12
FSDP_SAVE_BYTES = 16
#: what each offload flag takes off the GPU outside the update (our reading, not measured): param_offload the
#: fp32 parameters, which verl loads back for the save (its FSDP engine's save_checkpoint; counted there with
#: their gradients); optimizer_offload Adam's moments, in the save too
FSDP_OFFLOADED_BYTES = {"param_offload": 4, "optimizer_offload": 8}
#: bytes a parameter of LlamaFactory's ZeRO-3 states without offload, MEASURED at 8 layers of the paper's shape
#: (the HF Trainer's tracker: allocated after the two steps, the states alone, activations freed: 16.05).
#: DeepSpeed's stage-3 estimator counts 18; its 4 x the largest layer (a gathered layer, transient) is kept.
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
    """The architecture of an HF ``config.json``, counted on torch's meta device (no weights)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    path = repo_path(config_json)
    if not path.is_file():
        raise ConfigError(f"config key cluster.model_config: {path} not found (an HF config.json of model.base)")
    data = json.loads(path.read_text())
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
    """Import DeepSpeed (for its estimators: arithmetic only) without its "Setting accelerator to
    CPU" warning on a machine without CUDA: name the CPU accelerator it would pick, for the import
    only (the variable is restored, so no job this process starts inherits it)."""
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
    """The V2 SFT job (LlamaFactory), or None when it is not full fine-tuning (see the module doc)."""
    from gentax.train.config import load_rl_config  # function-local: defers numpy (gentax.train.grpo)

    sft = load_sft_config(study_sft(cfg, "v2"))
    if sft.lora_rank or sft.freeze_layers:
        return None
    rl = load_rl_config(study_rl(cfg))
    cluster = cfg["cluster"]
    gpus = int(cluster["gpus_per_node"])
    ds = deepspeed_settings(sft.deepspeed)
    if ds == {"zero_stage": 3, "offload_optimizer": False, "offload_params": False}:
        # DeepSpeed's stage-3 estimate (4 x the largest layer + 18 bytes a parameter over the GPUs) at the
        # measured bytes a parameter
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
    from gentax.study.settings import rl_settings  # function-local: defers numpy and hydra (the verl view)

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
    """Every GPU training job kind of the preset (see the module docstring)."""
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
