"""The ``hf`` generator's decode step for Llama-architecture models (the embedded SmolLM2) on a CPU
or a CUDA GPU: one token per row through the model in ~42 torch calls a layer (1,257 a step of the
embedded model; transformers' forward: 2,010, or 7,129 with the calls those make, torch's profiler).
On a GPU, where each call is a kernel launch, that count is the step's time at small batches.

    decoder = LlamaDecoder.for_model(model)          # None where it does not apply (``unsupported``)
    state = decoder.start(cache, mask, extra)        # after the prefill: its KV in a static cache
    logits = decoder.step(state, tokens, positions)  # [rows, vocab], the model's dtype
    state.keep(index)                                # rows that finished leave the batch

Why it is faster (docs/performance.md; ``python benchmarks/roofline.py``, rows "decode"): a decode
step of a 135M model on one CPU thread streams its weights through small products and spends the
rest on small calls. Here

- each layer's q/k/v and gate/up weights are concatenated into one product each, and every weight
  is kept in oneDNN's blocked layout (``_reorder_linear_weight``; in float32 too, where MKL's
  ``F.linear`` streamed a 4-row decode's weights at ~6 GB/s and oneDNN's kernel at ~10), rebuilt
  when a parameter changed (its version counter: the local engine updates weights in place
  between calls). The cost: one more copy of the weights in memory;
- the KV cache of every layer is one tensor for keys and one for values, allocated once per
  micro-batch with room for its whole response (as gentax.rollout.kv_cache's); a step writes its
  column in place, and a row that leaves is one index over all layers;
- the attention reads a KV head once for its group of query heads (sdpa's path copies the cache
  once per query head, ``repeat_kv``, at every step), with an additive mask updated one column a step;
- the rotary angles are computed once a step, and q and k rotated in one go.

Contract: the arithmetic of transformers' eager forward with gentax.rollout.cpu_inference's levers
(RMSNorm, rotary, attention, MLP: the same ops in the same dtype and order; the attention over
the whole preallocated width, its unwritten columns masked). bf16: equal to that path bit for bit
where the fused products round as the separate ones (checked on an AVX2 CPU, where bf16 runs
``F.linear``; oneDNN's packed bf16 kernels gave fused and separate products the same bits on the
AVX-512 BF16 EPYC, benchmarks/fused_projections.py, and may not with AMX: bf16 rounding then).
float32: transformers runs sdpa's flash kernel and MKL's products there, this step eager attention
and oneDNN's products, so logits differ by float32 rounding (~1e-4 of logits up to ~30). Bounded
in tests/test_llama_decode.py; greedy tokens of every domain's prompts against those recorded
before this step existed: benchmarks/decode_equivalence.py. Only under ``torch.inference_mode``.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

_BATCH_HINT = 8  # oneDNN's layout hint: decode micro-batches are 1-16 rows


def unsupported(model) -> str | None:
    """Why ``model`` cannot decode here (None: it can): a plain transformers ``LlamaForCausalLM``
    in float32 or bf16 on a CPU or a CUDA GPU, without biases, with SiLU and the default rotary
    embedding."""
    from transformers import LlamaForCausalLM

    if type(model) is not LlamaForCausalLM:
        return f"{type(model).__name__} is not a plain LlamaForCausalLM"
    param = next(model.parameters())
    if param.device.type not in ("cpu", "cuda") or param.dtype not in (torch.float32, torch.bfloat16):
        return f"{param.dtype} on {param.device.type}: float32 or bfloat16 on a CPU or a CUDA GPU only"
    config = model.config
    rope = getattr(config, "rope_parameters", None) or {}
    if config.attention_bias or config.mlp_bias or config.hidden_act != "silu":
        return "biases or an activation other than SiLU"
    if rope.get("rope_type", "default") != "default" or model.model.rotary_emb.attention_scaling != 1.0:
        return f"rotary embedding {rope.get('rope_type')!r}: only the default one"
    if getattr(config, "pretraining_tp", 1) > 1:
        return "pretraining_tp > 1"
    return None


class _Product:
    """``x @ weight.T`` for [rows, in] inputs, with the weight in oneDNN's blocked layout (packed
    once) or, where oneDNN cannot pack it (bf16 on a CPU without AVX-512), as it is."""

    __slots__ = ("weight", "packed", "in_features")

    def __init__(self, weight: torch.Tensor):
        self.packed = self.weight = None
        self.in_features = weight.shape[1]
        if weight.device.type == "cpu" and (weight.dtype == torch.float32 or torch.ops.mkldnn._is_mkldnn_bf16_supported()):
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), _BATCH_HINT)
        else:
            self.weight = weight.contiguous()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is None:
            return F.linear(x, self.weight)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")


@dataclasses.dataclass
class _Layer:
    input_norm: torch.Tensor
    post_norm: torch.Tensor
    qkv: _Product
    out: _Product
    gate_up: _Product
    down: _Product


@dataclasses.dataclass
class DecodeState:
    """A micro-batch's KV cache and mask between decode steps."""

    keys: torch.Tensor  # [layers, rows, kv heads, width, head dim]
    values: torch.Tensor
    mask: torch.Tensor  # [rows, width], additive: 0 where a row attends, the dtype's lowest value elsewhere
    column: int  # the column the next step writes

    def keep(self, index: torch.Tensor) -> None:
        """Keep only the rows ``index`` (in that order)."""
        self.keys, self.values, self.mask = self.keys[:, index], self.values[:, index], self.mask[index]


class LlamaDecoder:
    """Decode steps of one ``LlamaForCausalLM`` (see the module docstring). Its weights are read
    from the model at ``start`` whenever a parameter changed since the last (its version counter)."""

    def __init__(self, model):
        config = model.config
        self.model = model
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.scaling = self.head_dim**-0.5
        self.dtype = next(model.parameters()).dtype
        self.device = next(model.parameters()).device
        self._layers: list[_Layer] = []
        self._weights_key = None

    @classmethod
    def for_model(cls, model) -> "LlamaDecoder | None":
        return None if unsupported(model) else cls(model)

    def _refresh(self) -> None:
        """(Re)build the fused and packed weights where any parameter changed (or was replaced)."""
        params = list(self.model.parameters())
        key = tuple((p.data_ptr(), p._version) for p in params)
        if key == self._weights_key:
            return
        self._layers = []  # drop the old copies before making new ones
        with torch.inference_mode(False), torch.no_grad():  # plain tensors: usable in and out of inference mode
            for layer in self.model.model.layers:
                attention, mlp = layer.self_attn, layer.mlp
                self._layers.append(_Layer(
                    layer.input_layernorm.weight.detach(), layer.post_attention_layernorm.weight.detach(),
                    _Product(torch.cat([attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight])),
                    _Product(attention.o_proj.weight), _Product(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])),
                    _Product(mlp.down_proj.weight)))
            self._head = _Product(self.model.lm_head.weight)
        self._embed = self.model.model.embed_tokens.weight
        self._final_norm = self.model.model.norm.weight
        self._inv_freq = self.model.model.rotary_emb.inv_freq.float()
        self._sign = torch.tensor([-1.0, 1.0], dtype=self.dtype, device=self.device).view(1, 1, 2, 1)
        self._weights_key = key

    def start(self, cache, mask: torch.Tensor, extra: int) -> DecodeState:
        """The state after a prefill: ``cache`` (transformers' ``Cache``, per layer keys and values
        [rows, kv heads, columns, head dim]) and its 2D mask [rows, columns] copied into buffers
        with room for ``extra`` more tokens a row."""
        self._refresh()
        rows, columns = mask.shape
        first = cache.layers[0].keys
        shape = (len(cache.layers), rows, first.shape[1], columns + extra, first.shape[-1])
        keys, values = first.new_zeros(shape), first.new_zeros(shape)
        for index, layer in enumerate(cache.layers):
            keys[index, :, :, :columns] = layer.keys
            values[index, :, :, :columns] = layer.values
        lowest = torch.finfo(self.dtype).min
        additive = torch.full((rows, columns + extra), lowest, dtype=self.dtype, device=mask.device)
        additive[:, :columns].masked_fill_(mask.bool(), 0.0)
        return DecodeState(keys, values, additive, columns)

    def step(self, state: DecodeState, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits [rows, vocab] of feeding ``tokens`` [rows] at rotary ``positions`` [rows]; writes
        their keys and values into column ``state.column`` and moves it on."""
        rows, column = tokens.shape[0], state.column
        heads, kv_heads, dim, dtype = self.heads, self.kv_heads, self.head_dim, self.dtype
        groups, half = heads // kv_heads, self.head_dim // 2
        state.mask[:, column] = 0.0  # every row attends to the token it feeds now
        # the rotary angles as transformers computes them (float32, cos/sin over both halves), then
        # rotate_half(x) * sin as the halves swapped times (-sin, sin): the same products, negated exactly
        angles = positions.float()[:, None] * self._inv_freq[None, :]
        both = torch.cat((angles, angles), dim=-1)
        cos = both.cos().to(dtype).view(rows, 1, 2, half)
        sin = both.sin().to(dtype).view(rows, 1, 2, half) * self._sign
        hidden = F.embedding(tokens, self._embed)
        mask = state.mask[:, None, :]  # [rows, 1, width]: the same for every query head
        width = state.mask.shape[1]
        for index, layer in enumerate(self._layers):
            qkv = layer.qkv(_rms_norm(hidden, layer.input_norm, self.eps))
            halves = qkv[:, : (heads + kv_heads) * dim].view(rows, heads + kv_heads, 2, half)
            rotated = (halves * cos + halves.flip(2) * sin).view(rows, heads + kv_heads, dim)
            keys, values = state.keys[index], state.values[index]  # [rows, kv heads, width, dim]
            keys[:, :, column] = rotated[:, heads:]
            values[:, :, column] = qkv[:, (heads + kv_heads) * dim :].view(rows, kv_heads, dim)
            # a KV head's query heads as the rows of one product (no copy of the cache per query
            # head): [rows x kv heads, groups, dim] against [rows x kv heads, width, dim]
            query = rotated[:, :heads].reshape(rows * kv_heads, groups, dim)
            scores = torch.bmm(query, keys.view(rows * kv_heads, width, dim).transpose(1, 2)) * self.scaling
            scores = scores.view(rows, heads, width) + mask
            probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(dtype)
            attended = torch.bmm(probs.view(rows * kv_heads, groups, width), values.view(rows * kv_heads, width, dim))
            hidden = hidden + layer.out(attended.view(rows, heads * dim))
            gate, up = layer.gate_up(_rms_norm(hidden, layer.post_norm, self.eps)).chunk(2, dim=-1)
            hidden = hidden + layer.down(F.silu(gate) * up)
        state.column += 1
        return self._head(_rms_norm(hidden, self._final_norm, self.eps))


def _rms_norm(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' ``LlamaRMSNorm``: in float32 torch's own (one call for eight; the same bits on
    torch 2.13's CPU kernels), in bf16 op for op (float32 statistics, then two bf16 roundings that
    torch's would make one)."""
    if hidden.dtype == torch.float32:
        return F.rms_norm(hidden, weight.shape, weight, eps)
    dtype = hidden.dtype
    hidden = hidden.to(torch.float32)
    hidden = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + eps)
    return weight * hidden.to(dtype)
