"""A decode KV cache allocated once per micro-batch, for the ``hf`` generator's decode steps
through transformers' forward (where gentax.rollout.llama_decode, which keeps its own, does not apply).

    cache, mask = preallocate(cache, mask, extra)   # after the prefill, before the first decode step

transformers' ``DynamicCache`` grows by ``torch.cat`` at every decode step, so each step copies
every layer's whole cache (keys and values) into new memory; with 8 rows of ~500 tokens on a
CPU that copying took more time than the attention itself. ``preallocate`` copies a prefilled
micro-batch's cache once into buffers of its final width (transformers' own ``StaticLayer``: a
step writes its column in place and the attention reads the whole buffer) and extends the 2D
attention mask with 1s for the columns to come.

Why the outputs do not change: transformers builds each step's mask from the cache's write
position, masking key columns past it (causal), so a step attends to exactly the columns the
dynamic cache would hold, plus masked columns of zeros, whose softmax weight is exactly 0. The
attention products run over a wider key axis, so kernels picked by shape can round differently:
with the bf16 grouped eager attention of a CPU the test's logits are the same bit for bit (with
AMX too), but a whole evaluation's responses can differ by bf16 rounding, as the prefill levers'
batch shapes bring; with sdpa (float32) the reductions run over the longer key axis and log-probs move by
~1e-5, under bf16 autocast (float32 weights, sdpa in bf16) by bf16 rounding (up to 0.11 nats,
as padding moves bf16 log-probs), with the same tokens in tests/test_generators.py. The prefill's own KV tensors are not touched (the generator keeps
them for the next call's prefix reuse).
"""

from __future__ import annotations

import torch
from transformers import Cache
from transformers.cache_utils import StaticLayer


class PreallocatedLayer(StaticLayer):
    """transformers' ``StaticLayer`` filled from a prefill; it can also drop rows (the rows that
    finished leave the micro-batch)."""

    @classmethod
    def holding(cls, keys: torch.Tensor, values: torch.Tensor, width: int) -> "PreallocatedLayer":
        layer = cls(width)
        layer.lazy_initialization(keys, values)  # zeros [rows, kv heads, width, dim]
        layer.keys[:, :, : keys.shape[2]] = keys
        layer.values[:, :, : values.shape[2]] = values
        layer.cumulative_length.fill_(keys.shape[2])  # the next token's column
        return layer

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        # under autocast a step's new states can be bf16 where the prefill's were float32 (its
        # rotary products); the growing cache's torch.cat promotes them to float32, so do we
        return super().update(key_states.to(self.keys.dtype), value_states.to(self.values.dtype), *args, **kwargs)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.keys, self.values = self.keys[indices], self.values[indices]
        self.max_batch_size = self.keys.shape[0]


def preallocate(cache: Cache, mask: torch.Tensor, extra: int) -> tuple[Cache, torch.Tensor]:
    """(cache, mask) of a prefilled micro-batch (mask [rows, columns]) with room for ``extra`` more
    tokens per row; the decode steps then leave the mask as it is."""
    width = mask.shape[1] + extra
    layers = [PreallocatedLayer.holding(layer.keys, layer.values, width) for layer in cache.layers]
    return Cache(layers=layers), torch.cat([mask, mask.new_ones((mask.shape[0], extra))], dim=1)
