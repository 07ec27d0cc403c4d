"""A decode KV cache allocated once per micro-batch, for the ``hf`` generator's decode steps through
transformers' forward (gentax.rollout.llama_decode keeps its own).

    cache, mask = preallocate(cache, mask, extra)   # after the prefill, before the first decode step

transformers' ``DynamicCache`` grows by ``torch.cat``, copying every layer's cache at every step.
``preallocate`` copies a prefilled cache once into buffers of its final width (transformers'
``StaticLayer``) and extends the 2D mask with 1s. The causal mask hides the columns not yet
written (zeros, softmax weight exactly 0), so outputs change only by the rounding of products over
a wider key axis (docs/rollout.md "Preallocated KV cache"). The prefill's own KV tensors are not
touched (the generator keeps them for prefix reuse).
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
