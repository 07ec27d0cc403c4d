"""The compute dtype: the fastest correct one for the machine a job runs on, chosen in one place.

    compute_dtype(setting="auto", device="cpu") -> "bfloat16" | "float32" | "float16"

``setting`` is config/config.yaml's ``engines.dtype`` (``auto`` | ``float32`` | ``bfloat16``; ``float16``
too, for a GPU without bf16); anything but ``auto`` is returned as it is. ``auto``:

- CPU: ``bfloat16`` when /proc/cpuinfo lists a native bf16 instruction (``avx512_bf16``:
  AVX-512 BF16 dot products; ``amx_bf16``: AMX tiles), where a bf16 matrix product runs ~2x an
  fp32 one (the roofline, docs/performance.md); ``float32`` elsewhere
  (AVX2-only CPUs emulate bf16 and run it slower than fp32);
- CUDA: ``bfloat16`` when the GPU supports it (Ampere and newer), else ``float32``.

Who uses it: the ``hf`` generator loads its weights in this dtype (``dtype="auto"``); the local
RL engine keeps float32 master weights and optimizer state and runs its forward passes (rollout
generation, old/reference/update log-probs) under autocast to this dtype when it is bf16
(``autocast: auto``); the study layer maps ``engines.dtype`` onto both (``gentax.study.jobs.rl_section``,
``gentax.study.plan.study_sft``).
The dtype a job chose is written into its results: evaluation summaries (``dtype``) and the
provenance record (``compute``) of every workflow result.
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

from gentax.errors import ConfigError

SETTINGS = ("auto", "float32", "bfloat16", "float16")
#: /proc/cpuinfo flags of native bf16 arithmetic
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU feature flags of the first processor in ``cpuinfo`` (default: /proc/cpuinfo;
    empty where it cannot be read, e.g. macOS)."""
    if cpuinfo is None:
        cpuinfo = _read_cpuinfo()
    for line in cpuinfo.splitlines():
        if line.startswith(("flags", "Features")):  # x86 | ARM
            return frozenset(line.split(":", 1)[-1].split())
    return frozenset()


@functools.lru_cache(maxsize=1)
def _read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    return bool(cpu_flags(cpuinfo) & set(BF16_FLAGS))


def compute_dtype(setting: str = "auto", device: str = "cpu", *, cpuinfo: str | None = None) -> str:
    """The dtype to compute in (see the module docstring); ConfigError on an unknown setting."""
    if setting not in SETTINGS:
        raise ConfigError(f"unknown dtype {setting!r}; valid: {', '.join(SETTINGS)}")
    if setting != "auto":
        return setting
    if str(device).startswith("cuda"):
        import torch

        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    return "bfloat16" if cpu_has_bf16(cpuinfo) else "float32"


def record(setting: str = "auto", device: str = "cpu") -> dict[str, object]:
    """What the provenance record says about the choice: the setting, the dtype, the CPU's bf16 flags."""
    flags = sorted(cpu_flags() & set(BF16_FLAGS))
    return {"setting": setting, "dtype": compute_dtype(setting, device), "device": device, "cpu_bf16_flags": flags}


#: engines.dtype -> the local RL engine's ``autocast`` key (gentax/train/rl_defaults.yaml)
_RL_AUTOCAST = {"auto": "auto", "bfloat16": "bf16", "float32": "none"}


def rl_autocast(setting: str) -> str:
    """config/config.yaml's ``engines.dtype`` as the RL section's ``autocast`` (the one mapping; the
    generator takes the setting itself as its ``dtype``)."""
    if setting not in _RL_AUTOCAST:
        raise ConfigError(f"engines.dtype {setting!r} is not valid for the RL engines; valid: {', '.join(_RL_AUTOCAST)}")
    return _RL_AUTOCAST[setting]


#: engines.dtype -> the SFT section's ``precision`` (gentax/train/sft_defaults.yaml)
_SFT_PRECISION = {"auto": "auto", "bfloat16": "bf16", "float32": "fp32"}


def sft_precision(setting: str) -> str:
    """config/config.yaml's ``engines.dtype`` as the SFT section's ``precision`` (LlamaFactory trains in
    bf16 or fp32 only)."""
    if setting not in _SFT_PRECISION:
        raise ConfigError(f"engines.dtype {setting!r} is not valid for SFT (LlamaFactory); valid: {', '.join(_SFT_PRECISION)}")
    return _SFT_PRECISION[setting]


def attention_implementation(dtype: str, device: str = "cpu") -> str:
    """transformers' ``attn_implementation`` for a model computing in ``dtype`` on ``device``.

    ``eager`` for bf16 on a CPU: torch's CPU flash-attention kernel in bf16 is slow for one-token
    decode steps (40 of 97 ms per step of the embedded model, batch 4, 330 cached tokens; eager's
    matrix products take 8 ms) and no faster for prefill (523 vs 422 tokens/s, eager vs sdpa);
    ``sdpa`` elsewhere. For inference only: a trained model keeps ``sdpa``, since eager's backward
    stores every layer's attention matrix (several GB for the local engine's update). The ``hf``
    generator then computes that eager attention without copying the KV cache per query head
    (gentax.rollout.cpu_inference: the same logits; bit for bit on a CPU without AMX)."""
    return "eager" if dtype == "bfloat16" and not str(device).startswith("cuda") else "sdpa"


#: cuBLAS's setting for bitwise reproducible products (NVIDIA's cuBLAS guide, "Results
#: reproducibility"; torch's ``use_deterministic_algorithms`` asks for it)
CUBLAS_WORKSPACE_CONFIG = ":4096:8"


def deterministic_kernels(device) -> None:
    """Make the CUDA work of this process repeatable, where ``device`` is a CUDA device (else nothing):
    cuBLAS's reproducible workspace and torch's deterministic algorithms where they exist (a warning
    where an op has none, not an error: the sampler's float ``cumsum`` has none on CUDA), so that two
    runs of a job give the same bits whatever else shares the GPU. Not enough for training: the
    attention backward needs ``strict_determinism`` (without it two runs' trained weights differed
    on a GPU: docs/gpu1.md "Two runs agree"). Call it before the process's first CUDA
    product: cuBLAS reads the variable when it starts."""
    if not str(device).startswith("cuda"):
        return
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False


@contextlib.contextmanager
def strict_determinism(device):
    """Within: torch's deterministic mode strict (an op without a deterministic kernel raises) on a
    CUDA ``device``; else nothing. For a backward pass: the attention backward of sdpa's cuDNN and
    memory-efficient kernels takes its deterministic algorithm only in the strict mode (torch's
    attention_backward.cu; in warn-only mode it warns "cuDNN Attention defaults to a
    non-deterministic algorithm" and splits the keys, so two runs' weights differ). The mode is global: the autograd threads see it. Restored after. Not
    enough alone: sdpa picks its kernel in the forward (``deterministic_attention``)."""
    if not str(device).startswith("cuda"):
        yield
        return
    import torch

    enabled, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=False)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


@contextlib.contextmanager
def deterministic_attention(device):
    """Within, on a CUDA ``device``: sdpa may not pick cuDNN attention; flash, memory-efficient and
    math attention stay (their backward is deterministic in ``strict_determinism``); else nothing.
    sdpa chooses its kernel in the forward, where the jobs' mode is warn-only. On a GPU shared by
    several processes, the engine's update pass gives bit-equal gradients within and across
    processes with sdpa limited to flash, memory-efficient or math attention, or with eager
    attention, and different ones with cuDNN attention (what sdpa may pick as the model loads).
    Memory-efficient attention stays because math attention keeps each layer's (rows x heads x tokens
    x tokens) weights for the backward, which ran 12 jobs sharing a GPU out of memory; with this set
    two runs of the initial chain agree bit for bit (docs/gpu1.md "Two runs agree").
    Strict mode around the whole forward would choose the same way but raises at any op without a
    deterministic CUDA kernel (float ``cumsum`` has none). For a training forward whose backward runs
    in ``strict_determinism``."""
    if not str(device).startswith("cuda"):
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        yield
