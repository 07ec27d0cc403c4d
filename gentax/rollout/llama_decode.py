"""The ``hf`` generator's decode step for Llama-architecture models (the embedded SmolLM2) on a CPU
or a CUDA GPU, in a fraction of transformers' torch calls (docs/rollout.md "Fast decode step").

    decoder = LlamaDecoder.for_model(model)          # None where it does not apply (``unsupported``)
    state = decoder.start(cache, mask, extra)        # after the prefill: its KV in a static cache
    logits = decoder.step(state, tokens, positions)  # [rows, vocab], the model's dtype
    state.keep(index)                                # rows that finished leave the batch

Fused q/k/v and gate/up products in oneDNN's blocked layout (rebuilt when a parameter's version
changes), one KV tensor for all layers, grouped-query attention without copying the cache; on CUDA,
``start(..., graph=True)`` replays each step as one captured graph (``_GraphedStep``). Contract:
transformers' eager arithmetic with gentax.rollout.cpu_inference's levers, op for op (bf16: bit for
bit where fused products round as separate ones; float32: within float32 rounding, as eager
attention and oneDNN stand for sdpa and MKL: tests/test_llama_decode.py). Only under
``torch.inference_mode``.
"""

from __future__ import annotations

import contextlib
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
    graph: "_GraphedStep | None" = None  # the micro-batch's captured step (``start(graph=True)``)

    def keep(self, index: torch.Tensor) -> None:
        """Keep only the rows ``index`` (in that order)."""
        if self.graph is not None:  # fixed shapes: the rows stay, fewer are read
            self.graph.keep(index)
        else:
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

    def start(self, cache, mask: torch.Tensor, extra: int, graph: bool = False) -> DecodeState:
        """The state after a prefill: ``cache`` (transformers' ``Cache``, per layer keys and values
        [rows, kv heads, columns, head dim]) and its 2D mask [rows, columns] copied into buffers
        with room for ``extra`` more tokens a row. ``graph``: the steps through ``_GraphedStep``
        (captured as a CUDA graph on a GPU; on a CPU the same fixed-shape step runs uncaptured)."""
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
        state = DecodeState(keys, values, additive, columns)
        if graph:
            state.graph = _GraphedStep(self, keys, values, additive)
        return state

    def step(self, state: DecodeState, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits [rows, vocab] of feeding ``tokens`` [rows] at rotary ``positions`` [rows]; writes
        their keys and values into column ``state.column`` and moves it on. Under ``graph`` the
        logits are a view of the graph's output, overwritten by the next step."""
        if state.graph is not None:
            logits = state.graph(tokens, positions, state.column)
        else:
            logits = self.forward(state.keys, state.values, state.mask, tokens, positions, state.column)
        state.column += 1
        return logits

    def forward(self, all_keys: torch.Tensor, all_values: torch.Tensor, additive: torch.Tensor,
                tokens: torch.Tensor, positions: torch.Tensor, column: int | torch.Tensor) -> torch.Tensor:
        """One step's arithmetic over the cache buffers (``DecodeState``'s fields); ``column`` a
        number, or a one-element tensor (the graph's: read when the kernels run, not when captured)."""
        rows = tokens.shape[0]
        heads, kv_heads, dim, dtype = self.heads, self.kv_heads, self.head_dim, self.dtype
        groups, half = heads // kv_heads, self.head_dim // 2
        _write_column(additive, 1, column, 0.0)  # every row attends to the token it feeds now
        # the rotary angles as transformers computes them (float32, cos/sin over both halves), then
        # rotate_half(x) * sin as the halves swapped times (-sin, sin): the same products, negated exactly
        angles = positions.float()[:, None] * self._inv_freq[None, :]
        both = torch.cat((angles, angles), dim=-1)
        cos = both.cos().to(dtype).view(rows, 1, 2, half)
        sin = both.sin().to(dtype).view(rows, 1, 2, half) * self._sign
        hidden = F.embedding(tokens, self._embed)
        mask = additive[:, None, :]  # [rows, 1, width]: the same for every query head
        width = additive.shape[1]
        for index, layer in enumerate(self._layers):
            qkv = layer.qkv(_rms_norm(hidden, layer.input_norm, self.eps))
            halves = qkv[:, : (heads + kv_heads) * dim].view(rows, heads + kv_heads, 2, half)
            rotated = (halves * cos + halves.flip(2) * sin).view(rows, heads + kv_heads, dim)
            keys, values = all_keys[index], all_values[index]  # [rows, kv heads, width, dim]
            _write_column(keys, 2, column, rotated[:, heads:])
            _write_column(values, 2, column, qkv[:, (heads + kv_heads) * dim :].view(rows, kv_heads, dim))
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
        return self._head(_rms_norm(hidden, self._final_norm, self.eps))


def _write_column(buffer: torch.Tensor, dim: int, column: int | torch.Tensor, value) -> None:
    """``buffer``'s slice ``column`` along ``dim`` set to ``value`` (a number, or a tensor shaped as
    the slice): by index where ``column`` is a number, by ``index_copy_``/``index_fill_`` where it
    is a one-element tensor."""
    if isinstance(column, int):
        target = buffer.select(dim, column)
        target.copy_(value) if torch.is_tensor(value) else target.fill_(value)
    elif torch.is_tensor(value):
        buffer.index_copy_(dim, column, value.unsqueeze(dim))
    else:
        buffer.index_fill_(dim, column, value)


@contextlib.contextmanager
def _plain_index_writes():
    """Deterministic-algorithms mode off while a step is captured: its only index writes set one
    column at one index (no duplicates to order), the same bits either way, and the mode's
    sorting index_put is not made to be captured. Restored after."""
    enabled, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


class _GraphedStep:
    """A micro-batch's decode step over fixed buffers: its tokens, positions and column are copied
    into tensors the step reads, so one capture serves every step. On a CUDA device the first call
    runs the step once (lazy initialisation of cuBLAS and the allocator, outside the capture; it
    writes the same column the replay then writes again, with the same values) and captures it as
    a CUDA graph; every call replays it. On a CPU the step runs as it is (no capture): the tests'
    view of the same buffers and bookkeeping."""

    def __init__(self, decoder: LlamaDecoder, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor):
        rows, device = mask.shape[0], mask.device
        self._step = lambda: decoder.forward(keys, values, mask, self.tokens, self.positions, self.column)
        self.tokens = torch.zeros(rows, dtype=torch.long, device=device)
        self.positions = torch.zeros(rows, dtype=torch.long, device=device)
        self.column = torch.zeros(1, dtype=torch.long, device=device)
        self.live: torch.Tensor | None = None  # the rows read (None: all), in the caller's order
        self.graph, self.logits = None, None

    def keep(self, index: torch.Tensor) -> None:
        self.live = index if self.live is None else self.live[index]

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, column: int) -> torch.Tensor:
        if self.live is None:
            self.tokens.copy_(tokens)
            self.positions.copy_(positions)
        else:  # finished rows keep feeding their last token: computed, never read
            self.tokens.index_copy_(0, self.live, tokens)
            self.positions.index_copy_(0, self.live, positions)
        self.column.fill_(column)
        if self.tokens.device.type != "cuda":
            self.logits = self._step()
        elif self.graph is None:
            self._capture()
        else:
            self.graph.replay()
        return self.logits if self.live is None else self.logits.index_select(0, self.live)

    def _capture(self) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with _plain_index_writes():
            with torch.cuda.stream(side):
                self._step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.logits = self._step()
        graph.replay()  # capturing ran nothing: this is the step
        self.graph = graph


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
