"""The compute dtype: the fastest correct one for the machine a job runs on, chosen in one place.

``compute_dtype(setting, device)``: ``setting`` is config ``engines.dtype`` (auto | float32 |
bfloat16 | float16), returned as it is unless ``auto``. ``auto``: on a CPU ``bfloat16`` where
/proc/cpuinfo lists native bf16 (``avx512_bf16``, ``amx_bf16``; AVX2-only CPUs emulate bf16 and run
it slower than fp32), else ``float32``; on CUDA ``bfloat16`` where the GPU supports it, else
``float32``. The ``hf`` generator loads its weights in it; the local RL engine keeps fp32 master
weights and autocasts its forward passes to it when bf16. Each job records its choice (evaluation
summaries' ``dtype``, provenance's ``compute``).
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


def compute_dtype(setting: str = "auto", device: str = "cpu", *, cpuinfo: str | None = None) -> str:
    """The dtype to compute in (see the module docstring); ConfigError on an unknown setting."""
    if setting not in SETTINGS:
        raise ConfigError(f"unknown dtype {setting!r}; valid: {', '.join(SETTINGS)}")
    if setting != "auto":
        return setting
    if str(device).startswith("cuda"):
        import torch

        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    return "bfloat16" if cpu_flags(cpuinfo) & set(BF16_FLAGS) else "float32"


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
    """transformers' ``attn_implementation`` for a model computing in ``dtype`` on ``device``: ``eager``
    for bf16 on a CPU, where torch's CPU flash-attention kernel in bf16 is slow for one-token decode
    steps and no faster for prefill (docs/performance.md); ``sdpa`` elsewhere. For inference only: a
    trained model keeps ``sdpa``, since eager's backward stores every layer's attention matrix."""
    return "eager" if dtype == "bfloat16" and not str(device).startswith("cuda") else "sdpa"


#: cuBLAS's setting for bitwise reproducible products (NVIDIA's cuBLAS guide, "Results
#: reproducibility"; torch's ``use_deterministic_algorithms`` asks for it)
CUBLAS_WORKSPACE_CONFIG = ":4096:8"


def deterministic_kernels(device) -> None:
    """Make the CUDA work of this process repeatable, where ``device`` is a CUDA device (else nothing):
    cuBLAS's reproducible workspace and torch's deterministic algorithms, warn-only (the sampler's
    float ``cumsum`` has no deterministic CUDA kernel). Training also needs ``strict_determinism``
    around its backward. Call it before the process's first CUDA product (cuBLAS reads the variable
    when it starts)."""
    if not str(device).startswith("cuda"):
        return
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False


@contextlib.contextmanager
def strict_determinism(device):
    """Within: torch's deterministic mode strict (an op without a deterministic kernel raises) on a
    CUDA ``device``; else nothing; restored after. For a backward pass: sdpa's cuDNN and
    memory-efficient attention backward takes its deterministic algorithm only in the strict mode
    (in warn-only mode two runs' weights differ). The mode is global: the autograd threads see it.
    sdpa picks its kernel in the forward: see ``deterministic_attention``."""
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
    """Within, on a CUDA ``device``: sdpa may not pick cuDNN attention, whose gradients differ between
    runs on a shared GPU; flash, memory-efficient and math attention stay (deterministic backward
    under ``strict_determinism``; memory-efficient stays because math attention keeps every layer's
    attention weights for the backward, too much for jobs sharing a GPU). Else nothing. For a
    training forward (warn-only mode) whose backward runs in ``strict_determinism``; strict mode
    around the whole forward would raise at float ``cumsum``."""
    if not str(device).startswith("cuda"):
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        yield
