"""Faster bf16 sampling on a CPU with transformers' eager arithmetic, and the same attention for the
local engine's bf16 log-prob passes (docs/rollout.md "bf16 on CPU").

    accelerate(model, enabled=True) -> tuple[str, ...]   # the levers applied (empty: none)
    with attention_for(model, rows, length, autocast_dtype): ...   # a log-prob forward (+ backward)

Two levers for a bf16 model's forward on a CPU: grouped attention (``GROUPED_ATTENTION``: eager
attention that reads a KV head once for its query heads instead of ``repeat_kv``) and prepacked
linear weights (``PackedLinear``: oneDNN's blocked layout, reordered only when the weight's
version changes). The same products in the same order: logits equal the eager path's bit for bit
without AMX, and to bf16 rounding with it (tests/test_cpu_inference.py). Float32 and GPU models
keep their kernels. ``attention_for`` uses the grouped attention for a bf16-autocast log-prob pass
on a CPU while the attention matrices its backward keeps stay under ``TRAIN_ATTENTION_BYTES``.
"""

from __future__ import annotations

import contextlib

import torch

#: transformers ``attn_implementation`` name of the grouped eager attention
GROUPED_ATTENTION = "gentax_grouped_eager"
_BATCH_HINT = 8  # oneDNN's layout hint: decode micro-batches are 1-16 rows
#: attention matrices a log-prob pass with gradients may keep for its backward under eager attention
TRAIN_ATTENTION_BYTES = 2 << 30  # as stored_attention_bytes estimates it


def grouped_eager_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """transformers' eager attention without ``repeat_kv``: query [B, H, Q, D], key/value
    [B, KV, L, D] with H = KV x G; returns ([B, Q, H, D], weights). Query head h reads KV head h // G,
    as in ``repeat_kv``."""
    batch, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    grouped = query.reshape(batch, kv_heads, groups * q_len, dim)
    weights = torch.matmul(grouped, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        mask = attention_mask[:, :, None, :, : key.shape[-2]]  # [B, 1, 1, Q, L]: the same for every group
        weights = (weights.view(batch, kv_heads, groups, q_len, -1) + mask).view(batch, kv_heads, groups * q_len, -1)
    weights = torch.nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    out = torch.matmul(weights, value).view(batch, heads, q_len, dim).transpose(1, 2).contiguous()
    return out, weights


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(GROUPED_ATTENTION, grouped_eager_attention)
    AttentionMaskInterface.register(GROUPED_ATTENTION, eager_mask)


_register()


class PackedLinear(torch.nn.Linear):
    """An ``nn.Linear`` (its class swapped in place: same parameters and state-dict names) whose
    bf16 inference calls use a weight reordered once per weight version."""

    _packed: torch.Tensor | None = None
    _packed_version: int = -1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight
        if not (torch.is_inference_mode_enabled() and x.dtype == weight.dtype == torch.bfloat16 and x.device.type == "cpu"):
            return super().forward(x)
        if self._packed is None or self._packed_version != weight._version:
            with torch.inference_mode(False), torch.no_grad():
                self._packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), _BATCH_HINT)
            self._packed_version = weight._version
        flat = x.reshape(-1, x.shape[-1])
        out = torch.ops.mkldnn._linear_pointwise(flat, self._packed, self.bias, "none", [], "")
        return out.reshape(*x.shape[:-1], self.out_features)


def _applies(model) -> bool:
    param = next(model.parameters())
    return param.device.type == "cpu" and param.dtype == torch.bfloat16 and torch.backends.mkldnn.is_available()


def accelerate(model, enabled: bool = True) -> tuple[str, ...]:
    """Switch ``model``'s levers on (or off with ``enabled=False``); returns those now on. A model
    that is not bf16 on a CPU, or whose attention is not eager, keeps its kernels."""
    if not _applies(model):
        return ()
    attention = getattr(getattr(model, "config", None), "_attn_implementation", None)  # None: not a transformers model
    levers = []
    if attention in ("eager", GROUPED_ATTENTION):
        model.set_attn_implementation(GROUPED_ATTENTION if enabled else "eager")
        if enabled:
            levers.append("grouped attention")
    pack = enabled and _packing_supported()
    for module in model.modules():
        if type(module) in (torch.nn.Linear, PackedLinear):
            module.__class__ = PackedLinear if pack else torch.nn.Linear
            module._packed = None  # an instance attribute: dropped with the class, rebuilt on use
    if pack:
        levers.append("prepacked linears")
    return tuple(levers)


def _packing_supported() -> bool:
    """oneDNN's bf16 weight reorder needs AVX-512 BW/VL/DQ or AVX-NE-CONVERT; elsewhere (e.g. an
    AVX2-only CPU running bf16 emulated) it raises, and ``F.linear`` is the only path."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def stored_attention_bytes(config, rows: int, length: int) -> int:
    """What eager attention keeps for the backward of one pass: per layer and head a [length,
    length] matrix of bf16 scores, float32 softmax and bf16 probabilities (8 bytes an entry)."""
    return config.num_hidden_layers * rows * config.num_attention_heads * length * length * 8


@contextlib.contextmanager
def attention_for(model, rows: int, length: int, autocast_dtype):
    """The grouped eager attention for one log-prob pass of ``rows`` x ``length`` tokens where it
    applies (module docstring); the model's own attention elsewhere, and again afterwards."""
    config = model.config
    use = (autocast_dtype is torch.bfloat16 and next(model.parameters()).device.type == "cpu"
           and config._attn_implementation == "sdpa"
           and (not torch.is_grad_enabled() or stored_attention_bytes(config, rows, length) <= TRAIN_ATTENTION_BYTES))
    if not use:
        yield
        return
    model.set_attn_implementation(GROUPED_ATTENTION)
    try:
        yield
    finally:
        model.set_attn_implementation("sdpa")
