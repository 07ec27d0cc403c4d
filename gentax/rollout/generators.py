"""Text generators behind one interface: chat prompts in, sampled responses with token data out.

    gen  = make_generator(kind, model_path, **kw)      # kind: "hf" | "vllm" | "expert"
    outs = gen.generate(prompts, params, hints=None, prefixes=None)  # one Generation per prompt, same order

Contract (docs/contracts.md "Generators"; docs/rollout.md has the overview):

- ``prompts``: chat message lists, turned into ids by ``chat_prompt_ids`` (the chat template with
  the generation prompt) in every generator; ``Generation.prompt_ids`` is exactly what the model saw.
- ``params``: one ``SamplingParams`` (request ``i`` samples with seed ``derive_seed(params.seed, i)``)
  or one per prompt, each used as given (the collector seeds every trajectory step itself, so a
  trajectory's samples do not depend on what shares its batch).
- ``temperature == 0`` is greedy, ``top_p`` nucleus sampling, at most ``max_new_tokens`` tokens;
  generation stops at the model's EOS token(s) or when the text ends with one of ``params.stop``
  (default ``("</action>",)``: nothing after the action is used). The stop string stays in ``text``;
  the EOS token stays in ``response_ids`` (the policy must learn to stop) but not in ``text``.
  ``finish_reason`` is ``"stop"`` or ``"length"`` (cut at ``max_new_tokens``).
- ``logprobs[i]``: the log-probability of ``response_ids[i]`` under the model's raw distribution
  (temperature 1, no top-p), as vLLM's default ``raw_logprobs`` mode returns it.
- ``prefixes``: optional per-prompt ids of a FORCED assistant prefix (the filler arm's
  ``<think>FILLER</think>``, ``gentax.agent.filler``): part of ``prompt_ids`` (context, never trained
  on), not of ``text``/``response_ids``.
- ``hints``: optional per-prompt dicts; only a generator with ``needs_expert_action = True``
  (``ExpertGenerator``) reads them: ``{"expert_action": str, "think": bool}``.

``hf``'s random draws are counter-based (``token_uniform``), so batch composition changes its
outputs only through float rounding; ``vllm`` seeds each request. Only a GPU exercises the ``vllm``
generator and ``hf`` on CUDA; without one the tests check the vLLM mapping against a stand-in module.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from gentax import io as gio
from gentax.agent.parse import format_response
from gentax.dtype import attention_implementation, compute_dtype, deterministic_kernels
from gentax.errors import GentaxError

log = logging.getLogger(__name__)

GENERATORS = ("hf", "vllm", "expert")
DEFAULT_STOP = ("</action>",)
#: tokens decoded at the end of a response to look for a stop string (stop strings are short)
_STOP_WINDOW_TOKENS = 16
_GREEDY_BELOW = 1e-5


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int = 0
    stop: tuple[str, ...] = DEFAULT_STOP

    def __post_init__(self):
        if self.temperature < 0:
            raise GentaxError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise GentaxError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise GentaxError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        object.__setattr__(self, "stop", tuple(self.stop))


@dataclasses.dataclass
class Generation:
    text: str
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float] | None
    finish_reason: str  # "stop" | "length"


@runtime_checkable
class Generator(Protocol):
    def generate(
        self,
        prompts: list[list[dict[str, str]]],
        params: SamplingParams | Sequence[SamplingParams],
        hints: Sequence[Mapping[str, Any]] | None = None,
        prefixes: Sequence[Sequence[int] | None] | None = None,
    ) -> list[Generation]: ...


def derive_seed(*parts: Any) -> int:
    """A stable 63-bit seed from any parts (ints, strings): same parts -> same seed, on every
    machine and Python version (unlike ``hash``)."""
    digest = hashlib.blake2b(repr(tuple(parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def per_request_params(params: SamplingParams | Sequence[SamplingParams], n: int) -> list[SamplingParams]:
    """One SamplingParams per request (see the module docstring for the seeding rule)."""
    if isinstance(params, SamplingParams):
        return [dataclasses.replace(params, seed=derive_seed(params.seed, i)) for i in range(n)]
    params = list(params)
    if len(params) != n:
        raise ValueError(f"{len(params)} sampling params for {n} prompts")
    return params


_MASK64 = (1 << 64) - 1


def _mix64(value: int) -> int:
    """splitmix64's finaliser: a bijection of 64-bit integers whose outputs look independent."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def token_uniform(seed: int, index: int) -> float:
    """The uniform draw in [0, 1) behind token ``index`` of the request seeded ``seed``: a function of
    the two alone (counter-based), so a request samples the same tokens whatever shares its batch,
    in whatever process, on whatever device (given the same probabilities)."""
    return (_mix64(_mix64(seed & _MASK64) ^ index) >> 11) * 2.0**-53


def sample_rows(logits, params: Sequence[SamplingParams], indices: Sequence[int]):
    """The next token of every row of ``logits`` [rows, vocab] (float32), as a tensor on their device:
    greedy where a row's temperature is 0; else inverse-CDF sampling (in vocabulary order) of
    softmax(logits / temperature), cut to the nucleus ``top_p``, at the uniform ``token_uniform(seed, index)``
    of the row's request and token index. A handful of batched calls whatever the number of rows."""
    import torch

    device = logits.device
    tokens = torch.argmax(logits, dim=-1)
    greedy_rows = [p.temperature < _GREEDY_BELOW for p in params]
    if all(greedy_rows):
        return tokens
    greedy = torch.tensor(greedy_rows, device=device)
    temperature = torch.tensor([max(p.temperature, _GREEDY_BELOW) for p in params], device=device)
    probs = torch.softmax(logits / temperature[:, None], dim=-1)
    nucleus = [k for k, p in enumerate(params) if p.top_p < 1.0]
    if nucleus:  # those rows alone: a row's tokens must not depend on which rows share its batch
        rows = torch.tensor(nucleus, device=device)
        cut = probs[rows]
        ordered, ids = torch.sort(cut, dim=-1, descending=True)
        # keep the smallest most-probable prefix whose mass reaches top_p (always at least one token)
        drop = ordered.cumsum(-1) - ordered >= torch.tensor([params[k].top_p for k in nucleus], device=device)[:, None]
        probs[rows] = cut.masked_fill(torch.zeros_like(drop).scatter(1, ids, drop), 0.0)
    cdf = probs.cumsum(-1)  # in vocabulary order for every row
    total = cdf[:, -1:]
    uniform = torch.tensor([token_uniform(p.seed, i) for p, i in zip(params, indices)], device=device,
                           dtype=cdf.dtype)[:, None]
    # the first column whose cumulative mass passes the draw: a token of positive probability (the
    # draw stays below the total, so the column exists)
    target = torch.minimum(uniform * total, torch.nextafter(total, torch.zeros_like(total)))
    sampled = torch.searchsorted(cdf, target, right=True)[:, 0]
    return torch.where(greedy, tokens, sampled)


def chat_prompt_ids(tokenizer, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of ``messages`` under the tokenizer's chat template, ready for the reply."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def context_ids(tokenizer, prompts: list[list[dict[str, str]]], prefixes=None) -> list[list[int]]:
    """Each prompt's ``chat_prompt_ids`` followed by its forced prefix ids (if any)."""
    if prefixes is not None and len(prefixes) != len(prompts):
        raise GentaxError(f"{len(prefixes)} forced prefixes for {len(prompts)} prompts")
    prefixes = prefixes if prefixes is not None else [None] * len(prompts)
    return [chat_prompt_ids(tokenizer, messages) + list(prefix or ()) for messages, prefix in zip(prompts, prefixes)]


def _counted(stats: dict, results: list[Generation], start: float) -> list[Generation]:
    """``results`` of one ``generate`` call begun at ``start``, counted into a generator's ``stats``."""
    stats["calls"] += 1
    stats["prompt_tokens"] += sum(len(g.prompt_ids) for g in results)
    stats["response_tokens"] += sum(len(g.response_ids) for g in results)
    stats["seconds"] += time.perf_counter() - start
    return results


def _require_chat_template(tokenizer, where: str) -> None:
    if not getattr(tokenizer, "chat_template", None):
        raise GentaxError(f"the tokenizer of {where} has no chat template; an instruct/chat model folder is needed")


def make_generator(kind: str, model_path: str | None = None, **kw) -> Generator:
    """Build a generator by name: ``hf`` / ``vllm`` need a model folder; ``expert`` optionally
    takes one (only to tokenise, so its ``Generation`` carries token ids)."""
    if kind == "hf":
        return HFGenerator(_require_model(kind, model_path), **kw)
    if kind == "vllm":
        return VLLMGenerator(_require_model(kind, model_path), **kw)
    if kind == "expert":
        return ExpertGenerator(model_path, **kw)
    raise GentaxError(f"unknown generator {kind!r}; valid: {', '.join(GENERATORS)}")


def _require_model(kind: str, model_path: str | None) -> str:
    if not model_path:
        raise GentaxError(f"generator {kind!r} needs a model folder")
    return require_model_folder(model_path, "model folder")


def require_model_folder(path: str | os.PathLike, what: str) -> str:
    """``path`` as a string when it is an HF model folder; else GentaxError saying which is wrong:
    it does not exist, is not a folder, has no config.json, or a file is shorter or longer than
    its manifest says (``gentax.io.manifest_problem``)."""
    folder = Path(path)
    if not folder.exists():
        raise GentaxError(f"{what} {path} does not exist")
    if not folder.is_dir():
        raise GentaxError(f"{what} {path} is not a folder (expected an HF model folder)")
    if not (folder / "config.json").is_file():
        raise GentaxError(f"{what} {path} has no config.json (expected an HF model folder)")
    damaged = gio.manifest_problem(folder, deep=False)  # sizes: a truncated file, without reading the weights
    if damaged:
        raise GentaxError(f"{what} {path} is damaged ({damaged}); delete it and rerun the job that wrote it")
    return str(path)


# ---- transformers ----------------------------------------------------------------------------
@dataclasses.dataclass
class _KeptPrompt:
    """A prompt an ``HFGenerator`` prefilled, with its prefill's KV cache (``layers``: per layer
    (keys, values) [rows, kv heads, columns, dim]); ``columns``: the row's own columns, in order."""

    ids: list[int]
    layers: list
    row: int
    columns: Any


def prefill_groups(lengths: Sequence[int], call_tokens: float) -> list[list[int]]:
    """Rows (indices into ``lengths``, prompt lengths) split into groups to prefill one call each,
    each group padded to its own longest row: the split with the fewest padded tokens plus
    ``call_tokens`` per call (what a call's fixed cost is worth in prompt tokens). Rows of a group
    are adjacent in length order; equal lengths give one group."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    ordered = [lengths[i] for i in order]
    best = [0.0] + [float("inf")] * len(order)  # best[j]: cost of the first j rows in length order
    start = [0] * (len(order) + 1)
    for j in range(1, len(order) + 1):
        for i in range(j):  # rows i..j-1 form the last group, padded to ordered[j - 1]
            cost = best[i] + (j - i) * ordered[j - 1] + call_tokens
            if cost < best[j]:
                best[j], start[j] = cost, i
    groups, j = [], len(order)
    while j:
        groups.append(order[start[j] : j])
        j = start[j]
    return groups[::-1]


#: prompts per forward pass when none is given: on a CPU 16 rows are compute-bound already; on a GPU a
#: small model's decode step is launch-bound, so a whole eval or GRPO step goes at once
DEFAULT_BATCH_SIZE = {"cpu": 16, "cuda": 256}


def default_batch_size(device) -> int:
    """The hf generator's micro-batch on ``device`` (a name or ``torch.device``) when none is given."""
    return DEFAULT_BATCH_SIZE.get(getattr(device, "type", str(device).split(":")[0]), DEFAULT_BATCH_SIZE["cpu"])


class HFGenerator:
    """Batched sampling with transformers on CPU or GPU (LEFT padding, KV cache).

    ``HFGenerator(model_path, device=None, dtype="auto", max_batch_size=None)``, or
    ``HFGenerator.from_model(model, tokenizer, autocast_dtype=None)`` for a model in memory (the
    local RL engine's policy). ``device`` None: CUDA when available; ``dtype`` "auto":
    ``gentax.dtype.compute_dtype``; ``compute_dtype`` says what the products run in. Prompts go in
    micro-batches of ``max_batch_size`` (``default_batch_size``), grouped by length; finished rows
    leave the micro-batch at once. The prefill and decode levers set in ``_setup`` are described in
    docs/rollout.md.
    """

    needs_expert_action = False

    def __init__(self, model_path: str, *, device: str | None = None, dtype: str = "auto",
                 max_batch_size: int | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        deterministic_kernels(device)  # before the first CUDA product: the same bits in two runs
        chosen = compute_dtype(dtype, device)
        with gio.reading(model_path, "model folder", "delete it and rerun the job that wrote it"):
            tokenizer = AutoTokenizer.from_pretrained(model_path)
            model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, chosen),
                                                         attn_implementation=attention_implementation(chosen, device))
        model = model.to(device)
        self._setup(model, tokenizer, max_batch_size or default_batch_size(device))

    @classmethod
    def from_model(cls, model, tokenizer, *, max_batch_size: int = 16, autocast_dtype=None) -> "HFGenerator":
        self = cls.__new__(cls)
        self._setup(model, tokenizer, max_batch_size, autocast_dtype)
        return self

    def _setup(self, model, tokenizer, max_batch_size: int, autocast_dtype=None) -> None:
        from gentax.rollout import cpu_inference

        if max_batch_size < 1:
            raise GentaxError(f"max_batch_size must be >= 1, got {max_batch_size}")
        _require_chat_template(tokenizer, getattr(model, "name_or_path", "the model"))
        self.model, self.tokenizer, self.max_batch_size = model, tokenizer, int(max_batch_size)
        self.autocast_dtype = autocast_dtype
        # docs/rollout.md: shared prefix, grouped prefill, reused prefix, preallocated KV, fast decode
        self.share_prefix, self.min_shared_prefix = True, 16  # a micro-batch's common prefix prefilled once
        self.group_prefill, self.group_call_tokens = True, 32  # prefill_groups; a call's cost in prompt tokens
        self.reuse_prefix, self.min_reused_prefix = True, 16  # the previous call's prompt KV, while the weights stay
        #: the KV a call keeps for the next (the newest micro-batches'); the peak is about twice this
        self.kept_bytes_limit = 1 << 30
        self.preallocate_kv = True  # gentax.rollout.kv_cache: no cache copy at every decode step
        #: decode steps through gentax.rollout.llama_decode where it runs the model (not under autocast)
        self.fast_decode = autocast_dtype is None
        self.cuda_graphs = True  # on CUDA, each micro-batch's fast decode steps replay one captured graph
        self._decoder = None  # built on first use: (model, LlamaDecoder or None)
        self._kept: list[_KeptPrompt] = []  # the previous call's prompts with their KV cache
        self._kept_weights: tuple | None = None
        # bf16 on a CPU: grouped attention and prepacked weights (gentax.rollout.cpu_inference)
        self.cpu_levers = () if autocast_dtype is not None else cpu_inference.accelerate(model)
        self.compute_dtype = str(autocast_dtype or model.dtype).removeprefix("torch.")
        eos = model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        if tokenizer.eos_token_id is not None:
            eos.append(tokenizer.eos_token_id)
        self.eos_ids = sorted(set(eos))
        if not self.eos_ids:
            raise GentaxError("the model defines no EOS token; cannot tell where a response ends")
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]
        #: prefill_positions: what the prefills computed (padding included); reused_tokens: prompt tokens
        #: whose KV came from elsewhere; prefill_s / decode_s: wall seconds (sampling in decode_s)
        self.stats = {"calls": 0, "prompt_tokens": 0, "response_tokens": 0, "seconds": 0.0,
                      "prefill_positions": 0, "reused_tokens": 0, "prefill_s": 0.0, "decode_s": 0.0}

    @property
    def device(self):
        return next(self.model.parameters()).device

    def generate(self, prompts, params, hints=None, prefixes=None) -> list[Generation]:
        start = time.perf_counter()
        per_request = per_request_params(params, len(prompts))
        prompt_ids = context_ids(self.tokenizer, prompts, prefixes)
        return _counted(self.stats, self.generate_ids(prompt_ids, per_request), start)

    def generate_ids(self, prompt_ids: list[list[int]], params: list[SamplingParams]) -> list[Generation]:
        """Token ids in, one ``Generation`` per prompt (same order), one ``SamplingParams`` each: the core
        of ``generate``, which the verl ``hf`` rollout server calls too (gentax.train.verl_hf_rollout)."""
        results: list[Generation | None] = [None] * len(prompt_ids)
        import torch

        order = sorted(range(len(prompt_ids)), key=lambda i: len(prompt_ids[i]))
        was_training = self.model.training  # a policy lent by a trainer: sample without dropout
        self.model.eval()
        weights = (id(self.model), sum(p._version for p in self.model.parameters()))  # changed by any update
        earlier = self._kept if self.reuse_prefix and weights == self._kept_weights else []
        self._kept, self._kept_weights = [], weights  # this call's prompts, for the next call
        # one autocast context around all chunks: the weights are cast once (autocast's cache)
        cast = torch.autocast(self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None)
        try:
            with cast:
                for lo in range(0, len(order), self.max_batch_size):
                    chunk = order[lo : lo + self.max_batch_size]
                    for i, generation in zip(chunk, self._generate_chunk([prompt_ids[i] for i in chunk],
                                                                         [params[i] for i in chunk], earlier)):
                        results[i] = generation
        finally:
            self.model.train(was_training)
        return results

    def _llama_decoder(self):
        """The model's ``LlamaDecoder`` where ``fast_decode`` is on and it runs the model, else None."""
        if not self.fast_decode or self.autocast_dtype is not None:
            return None
        if self._decoder is None or self._decoder[0] is not self.model:
            from gentax.rollout.llama_decode import LlamaDecoder

            self._decoder = (self.model, LlamaDecoder.for_model(self.model))
        return self._decoder[1]

    def clear_prefix_cache(self) -> None:
        """Drop the KV kept for ``reuse_prefix`` (it holds the last call's prefill cache)."""
        self._kept, self._kept_weights = [], None

    def _generate_chunk(self, prompt_ids: list[list[int]], params: list[SamplingParams],
                        earlier: list[_KeptPrompt]) -> list[Generation]:
        import torch

        device, n = self.device, len(prompt_ids)
        limit = [p.max_new_tokens for p in params]
        responses: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        finish = ["length"] * n
        live = list(range(n))  # original row of each row still in the batch
        eos = set(self.eos_ids)
        with torch.inference_mode():
            started = time.perf_counter()
            next_logits, cache, mask = self._prefill(prompt_ids, earlier)
            last_pos = mask.sum(-1) - 1  # LEFT padding: a row's last token is its last column
            decoder = self._llama_decoder()
            if decoder is not None:  # room for every token fed back (the last one never is)
                state = decoder.start(cache, mask, max(limit) - 1, graph=self.cuda_graphs and device.type == "cuda")
            elif self.preallocate_kv:
                from gentax.rollout.kv_cache import preallocate

                cache, mask = preallocate(cache, mask, max(limit) - 1)
            decoding = time.perf_counter()
            self.stats["prefill_s"] += decoding - started
            while True:
                logits = next_logits.float()
                # sample every row in one go on the device, then read tokens and logprobs back together
                picked = sample_rows(logits, [params[row] for row in live], [len(responses[row]) for row in live])
                picked_logprobs = torch.log_softmax(logits, dim=-1).gather(1, picked[:, None])[:, 0]
                tokens, token_logprobs = picked.tolist(), picked_logprobs.tolist()
                keep = []
                for k, (row, token) in enumerate(zip(live, tokens)):
                    responses[row].append(token)
                    logprobs[row].append(token_logprobs[k])
                    if token in eos or self._hit_stop(responses[row], params[row].stop):
                        finish[row] = "stop"
                    elif len(responses[row]) < limit[row]:
                        keep.append(k)
                if not keep:
                    break
                if len(keep) < len(live):  # drop finished rows from the batch and the cache
                    index = torch.tensor(keep, device=device)
                    if decoder is not None:
                        state.keep(index)
                    else:
                        cache.batch_select_indices(index)
                        mask = mask[index]
                    last_pos, picked = last_pos[index], picked[index]
                    live = [live[k] for k in keep]
                last_pos = last_pos + 1
                if decoder is not None:
                    next_logits = decoder.step(state, picked, last_pos)
                    continue
                if not self.preallocate_kv:
                    mask = torch.cat([mask, mask.new_ones((len(live), 1))], dim=1)
                next_logits = self.model(input_ids=picked[:, None], attention_mask=mask, position_ids=last_pos[:, None],
                                         past_key_values=cache, use_cache=True).logits[:, -1, :]
            self.stats["decode_s"] += time.perf_counter() - decoding
        return [Generation(self.tokenizer.decode(responses[row], skip_special_tokens=True), list(prompt_ids[row]),
                           responses[row], logprobs[row], finish[row]) for row in range(n)]

    def _prefill(self, prompt_ids: list[list[int]], earlier: list[_KeptPrompt]):
        """(first logits [rows, vocab], KV cache, attention mask [rows, columns]) of a micro-batch.

        Each row starts from the longest KV it can reuse (``_reusable``): a kept prompt of the
        previous call, or the prefix every row of the micro-batch shares, prefilled once here
        (``_shared_prefix``) and kept too. The rest is prefilled by ``_prefill_rows``."""
        reusable = earlier + self._kept if self.reuse_prefix else []
        known = [self._reusable(ids, reusable) for ids in prompt_ids]
        shared = self._shared_prefix(prompt_ids)
        if shared > min(length for length, _ in known):
            prefix = prompt_ids[0][:shared]
            _, cache, mask = self._prefill_rows([prefix], [self._reusable(prefix, reusable)])
            prefix_entry = self._keep([prefix], cache, mask)
            known = [self._reusable(ids, prefix_entry, minimum=1) if length < shared else (length, kv)
                     for ids, (length, kv) in zip(prompt_ids, known)]
        logits, cache, mask = self._prefill_rows(prompt_ids, known)
        self._keep(prompt_ids, cache, mask)
        self.stats["reused_tokens"] += sum(length for length, _ in known)
        return logits, cache, mask

    def _prefill_rows(self, prompt_ids: list[list[int]], known: list[tuple[int, list | None]]):
        """Prefill each row after its ``known`` prefix (length, per-layer (keys, values) [kv heads,
        length, dim]), in the groups of ``prefill_groups`` (by the length left to prefill), each
        padded only to its own longest row. Returns (first logits, cache, mask) laid out as one
        batch: [padding | known prefix | padding | rest], both parts right-aligned, exactly as if
        the rows had been prefilled together (the decode steps cannot tell)."""
        import torch
        from transformers import DynamicCache

        device, n = self.device, len(prompt_ids)
        done = [length for length, _ in known]
        rest = [len(ids) - length for ids, length in zip(prompt_ids, done)]
        width_known, width = max(done), max(rest)
        batch_mask = torch.zeros((n, width_known + width), dtype=torch.long, device=device)
        for row in range(n):
            batch_mask[row, width_known - done[row] : width_known] = 1
            batch_mask[row, width_known + width - rest[row] :] = 1
        groups = prefill_groups(rest, self.group_call_tokens) if self.group_prefill else []
        if len(groups) <= 1:
            groups = [list(range(n))]  # one call in the batch's own row order
        logits = merged = None
        for group in groups:
            rows = torch.tensor(group, device=device)
            group_known, group_width = max(done[r] for r in group), max(rest[r] for r in group)
            ids = torch.full((len(group), group_width), self.pad_id, dtype=torch.long)
            for k, r in enumerate(group):
                ids[k, group_width - rest[r] :] = torch.tensor(prompt_ids[r][done[r] :], dtype=torch.long)
            mask = torch.cat([batch_mask[rows, width_known - group_known : width_known],
                              batch_mask[rows, width_known + width - group_width :]], dim=1)
            positions = ((mask.cumsum(-1) - 1).clamp(min=0))[:, group_known:]
            cache = None
            if group_known:
                cache = DynamicCache()
                reused = [(k, known[r][1]) for k, r in enumerate(group) if done[r]]
                for layer, (sample, _) in enumerate(reused[0][1]):  # each row's known KV, right-aligned
                    keys = sample.new_zeros((len(group), sample.shape[0], group_known, sample.shape[-1]))
                    values = torch.zeros_like(keys)
                    for k, row_kv in reused:
                        row_keys, row_values = row_kv[layer]
                        keys[k, :, group_known - row_keys.shape[1] :] = row_keys
                        values[k, :, group_known - row_keys.shape[1] :] = row_values
                    cache.update(keys, values, layer)
            out = self.model(input_ids=ids.to(device), attention_mask=mask, position_ids=positions,
                             past_key_values=cache, use_cache=True, logits_to_keep=1)
            self.stats["prefill_positions"] += ids.numel()
            if len(groups) == 1:
                return out.logits[:, -1, :], out.past_key_values, batch_mask
            if merged is None:
                logits = out.logits.new_empty((n, out.logits.shape[-1]))
                merged = [(layer.keys.new_zeros((n, layer.keys.shape[1], width_known + width, layer.keys.shape[-1])),
                           layer.values.new_zeros((n, layer.values.shape[1], width_known + width, layer.values.shape[-1])))
                          for layer in out.past_key_values.layers]
            logits[rows] = out.logits[:, -1, :]
            for (keys, values), layer in zip(merged, out.past_key_values.layers):
                known_cols = slice(width_known - group_known, width_known)
                keys[rows, :, known_cols], values[rows, :, known_cols] = layer.keys[:, :, :group_known], layer.values[:, :, :group_known]
                keys[rows, :, width_known + width - group_width :] = layer.keys[:, :, group_known:]
                values[rows, :, width_known + width - group_width :] = layer.values[:, :, group_known:]
        cache = DynamicCache()
        for layer, (keys, values) in enumerate(merged):
            cache.update(keys, values, layer)
        return logits, cache, batch_mask

    def _keep(self, prompt_ids: list[list[int]], cache, mask) -> list[_KeptPrompt]:
        """A prefill's prompts with references to its KV tensors (decoding appends to new tensors,
        so these stay as they are), kept for the next prefills when ``reuse_prefix`` is on."""
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        entries = [_KeptPrompt(list(ids), layers, row, mask[row].nonzero()[:, 0]) for row, ids in enumerate(prompt_ids)]
        if self.reuse_prefix:
            self._kept.extend(entries)
            caches = list({id(e.layers): e.layers for e in self._kept}.values())  # oldest first
            size = lambda layers: sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)  # noqa: E731
            total = sum(map(size, caches))
            while caches and total > self.kept_bytes_limit:  # drop the oldest micro-batches' KV
                oldest = caches.pop(0)
                total -= size(oldest)
                self._kept = [e for e in self._kept if e.layers is not oldest]
        return entries

    def _reusable(self, ids: list[int], kept: list[_KeptPrompt], minimum: int | None = None) -> tuple[int, list | None]:
        """(length, per-layer (keys, values) [kv heads, length, dim]) of the longest prefix of
        ``ids`` whose KV a kept prompt holds, leaving at least the last token to prefill; (0, None)
        when shorter than ``minimum`` (default ``min_reused_prefix``)."""
        best, source = 0, None
        for entry in kept:
            length = min(len(os.path.commonprefix([ids, entry.ids])), len(ids) - 1)
            if length > best:
                best, source = length, entry
        if source is None or best < (self.min_reused_prefix if minimum is None else minimum):
            return 0, None
        columns = source.columns[:best]
        return best, [(keys[source.row][:, columns], values[source.row][:, columns]) for keys, values in source.layers]

    def _shared_prefix(self, prompt_ids: list[list[int]]) -> int:
        """Length of the prefix all prompts share, at least ``min_shared_prefix`` (else 0), leaving every
        prompt its last token (whose position gives the first logits)."""
        if not self.share_prefix or len(prompt_ids) < 2:
            return 0
        shortest = min(len(ids) for ids in prompt_ids) - 1
        length = min(len(os.path.commonprefix(prompt_ids)), shortest)  # commonprefix takes any sequences
        return length if length >= self.min_shared_prefix else 0

    def _hit_stop(self, response: list[int], stop: tuple[str, ...]) -> bool:
        if not stop:
            return False
        tail = self.tokenizer.decode(response[-_STOP_WINDOW_TOKENS:], skip_special_tokens=True)
        return any(s in tail for s in stop)


# ---- vLLM ------------------------------------------------------------------------------------
def vllm_sampling_kwargs(params: SamplingParams) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for our ``params`` (1:1, plus what makes the
    outputs match ``HFGenerator``: the stop string kept, the sampled token's logprob returned)."""
    return {
        "n": 1,
        "temperature": float(params.temperature),
        "top_p": float(params.top_p),
        "max_tokens": int(params.max_new_tokens),
        "seed": int(params.seed),
        "stop": list(params.stop),
        "include_stop_str_in_output": True,
        "skip_special_tokens": True,
        "logprobs": 0,  # 0 = only the sampled token's logprob
    }


def generation_from_vllm(request_output) -> Generation:
    """Our ``Generation`` from one ``vllm.RequestOutput`` (first completion)."""
    completion = request_output.outputs[0]
    response_ids = list(completion.token_ids)
    logprobs = None
    if completion.logprobs is not None:
        logprobs = [float(position[token].logprob) for position, token in zip(completion.logprobs, response_ids)]
    finish = "stop" if completion.finish_reason == "stop" else "length"
    return Generation(text=completion.text, prompt_ids=list(request_output.prompt_token_ids),
                      response_ids=response_ids, logprobs=logprobs, finish_reason=finish)


#: the vllm engine's settings that belong to the machine, not to the study (no job spec holds them):
#: vLLM's keyword -> (environment variable, parser). Unset, vLLM's defaults hold (a GPU to itself);
#: jobs that share one GPU (profiles/gpu1) each take a small share, and a short job starts faster eager.
#: A shared GPU also wants a fixed KV cache (GiB): vLLM sizes it from the share by profiling the GPU's
#: free memory, which other jobs' allocations at that moment shrink (a negative KV cache, the engine
#: refusing to start); a size given skips that profiling.
VLLM_ENGINE_ENV = {
    "gpu_memory_utilization": ("GENTAX_VLLM_GPU_MEMORY_UTILIZATION", float),
    "enforce_eager": ("GENTAX_VLLM_ENFORCE_EAGER", lambda text: text.strip().lower() in ("1", "true", "yes")),
    "kv_cache_memory_bytes": ("GENTAX_VLLM_KV_CACHE_GIB", lambda text: int(float(text) * 2**30)),
}


def vllm_engine_settings(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``VLLM_ENGINE_ENV`` settings that ``environ`` (default ``os.environ``) sets, parsed; a
    value that does not parse is one GentaxError naming the variable."""
    environ = os.environ if environ is None else environ
    out = {}
    for key, (variable, parse) in VLLM_ENGINE_ENV.items():
        if environ.get(variable, "").strip():
            try:
                out[key] = parse(environ[variable])
            except ValueError:
                raise GentaxError(f"{variable}={environ[variable]!r} is no valid {key} for vLLM") from None
    return out


class VLLMGenerator:
    """vLLM's offline engine (GPU only). Extra keywords go to ``vllm.LLM``; the machine's settings
    (``VLLM_ENGINE_ENV``) apply where no keyword sets them. Prompts are tokenised here
    (``chat_prompt_ids``) and sent as ids, so both model generators see identical prompts."""

    needs_expert_action = False

    def __init__(self, model_path: str, *, tensor_parallel_size: int = 1, gpu_memory_utilization: float | None = None,
                 dtype: str = "auto", max_model_len: int | None = None, **engine_kw):
        start = time.perf_counter()
        try:
            import vllm
        except ImportError as exc:
            raise GentaxError(f"generator 'vllm' needs the vllm package and a GPU ({exc}); use the 'hf' generator "
                              "on CPU") from None
        machine = vllm_engine_settings()
        if gpu_memory_utilization is None:
            gpu_memory_utilization = machine.pop("gpu_memory_utilization", 0.85)
        engine_kw = {**{k: v for k, v in machine.items() if k != "gpu_memory_utilization"}, **engine_kw}
        self._vllm = vllm
        self.llm = vllm.LLM(model=model_path, tensor_parallel_size=tensor_parallel_size,
                            gpu_memory_utilization=gpu_memory_utilization, dtype=dtype, max_model_len=max_model_len,
                            **engine_kw)
        self.engine_start_s = time.perf_counter() - start
        log.info("vllm engine ready in %.1f s (gpu_memory_utilization %s, %s)", self.engine_start_s,
                 gpu_memory_utilization, ", ".join(f"{k} {v}" for k, v in engine_kw.items()) or "vLLM's defaults")
        self.tokenizer = self.llm.get_tokenizer()
        _require_chat_template(self.tokenizer, model_path)
        # what vLLM resolved "auto" to, where its engine says (the attribute path differs across versions)
        resolved = getattr(getattr(getattr(self.llm, "llm_engine", None), "model_config", None), "dtype", dtype)
        self.compute_dtype = str(resolved).removeprefix("torch.")
        self.stats = {"calls": 0, "prompt_tokens": 0, "response_tokens": 0, "seconds": 0.0}

    def generate(self, prompts, params, hints=None, prefixes=None) -> list[Generation]:
        start = time.perf_counter()
        per_request = per_request_params(params, len(prompts))
        token_prompts = [{"prompt_token_ids": ids} for ids in context_ids(self.tokenizer, prompts, prefixes)]
        sampling = [self._vllm.SamplingParams(**vllm_sampling_kwargs(p)) for p in per_request]
        outputs = self.llm.generate(token_prompts, sampling_params=sampling, use_tqdm=False)
        return _counted(self.stats, [generation_from_vllm(o) for o in outputs], start)


# ---- scripted expert -------------------------------------------------------------------------
DEFAULT_EXPERT_THINK = "The next step towards the goal is: {action}."


class ExpertGenerator:
    """Answers every prompt with the env expert's action (the ``hints`` the collector passes),
    ``format_response(action, think_template.format(action=...))``, without reasoning where the hint's
    ``think`` is False (think off, or filler mode's forced block). With a ``model_path`` prompt and
    response are tokenised (SFT data); otherwise the id lists are empty. ``logprobs`` is None."""

    needs_expert_action = True

    def __init__(self, model_path: str | None = None, *, think_template: str = DEFAULT_EXPERT_THINK):
        self.think_template = think_template
        self.tokenizer = None
        if model_path:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.stats = {"calls": 0, "prompt_tokens": 0, "response_tokens": 0, "seconds": 0.0}

    def generate(self, prompts, params, hints=None, prefixes=None) -> list[Generation]:
        if hints is None or len(hints) != len(prompts) or any("expert_action" not in h for h in hints):
            raise GentaxError("the expert generator needs hints with each prompt's expert_action (run it through the collector)")
        if prefixes is not None and self.tokenizer is None:
            raise GentaxError("the expert generator needs a model folder (a tokenizer) to take forced prefixes")
        contexts = context_ids(self.tokenizer, prompts, prefixes) if self.tokenizer is not None else None
        results = []
        for row, (messages, hint) in enumerate(zip(prompts, hints)):
            action = hint["expert_action"]
            think_text = self.think_template.format(action=action) if hint.get("think", True) else None
            text = format_response(action, think_text)
            prompt_ids, response_ids = [], []
            if self.tokenizer is not None:
                prompt_ids = contexts[row]
                response_ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
                if self.tokenizer.eos_token_id is not None:
                    response_ids.append(self.tokenizer.eos_token_id)
            results.append(Generation(text, prompt_ids, response_ids, None, "stop"))
        self.stats["calls"] += 1
        self.stats["response_tokens"] += sum(len(g.response_ids) for g in results)
        return results
