"""The hf generator's fast decode step (gentax.rollout.llama_decode) against transformers' own
forward on the embedded model cut to its first layers (tests/rl_helpers.py: its shapes and
weights, a tenth of the work): logits of a left-padded prefill's next steps equal to float32
rounding in float32 (transformers runs sdpa and MKL there, the step eager attention and oneDNN)
and bit for bit in bf16 on a CPU without AMX (the same ops in the same order; with AMX oneDNN may
pick other kernels for the fused products: bf16 rounding, the same argmax); greedy and seeded
tokens of the generator equal with the step on and off (a seeded draw may part at a near-tie of its
CDF, checked), rows leaving the batch at different
steps; a weight changed in place is read again; models it cannot run keep transformers' forward;
the fixed-shape step that a GPU captures as a CUDA graph (run uncaptured on the CPU) gives the
eager step's logits, rows leaving the batch included.""" 

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gentax.dtype import attention_implementation, cpu_flags  # noqa: E402
from gentax.rollout import cpu_inference, llama_decode  # noqa: E402
from gentax.rollout.generators import HFGenerator, SamplingParams, token_uniform  # noqa: E402

EXACT_BF16 = "amx_bf16" not in cpu_flags()
STEPS = 4


def _model(cut_model_folder, dtype: str):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(cut_model_folder, dtype=getattr(torch, dtype),
                                                 attn_implementation=attention_implementation(dtype, "cpu")).eval()
    cpu_inference.accelerate(model)  # as the generator runs it (bf16: grouped attention, packed linears)
    return model


def _decode(model, decoder=None, graph=False, leave_after=None) -> torch.Tensor:
    """Logits [STEPS, rows, vocab] of STEPS decode steps after a prefill of 3 rows, one padded by 7,
    into a cache with room for two more tokens than fed (unwritten columns masked): through
    ``decoder``'s step (``graph``: its fixed-shape step), or without one transformers' forward.
    ``leave_after`` k: row 1 leaves the batch after step k (its later logits: zeros)."""
    from gentax.rollout.kv_cache import preallocate

    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 40000, (3, 40), generator=gen)
    mask = torch.ones(3, 40, dtype=torch.long)
    mask[1, :7] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    tokens = torch.randint(100, 4000, (STEPS, 3), generator=gen)
    logits = []
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
        last = positions[:, -1]
        if decoder is None:
            cache, mask = preallocate(out.past_key_values, mask, STEPS + 2)
        else:
            state = decoder.start(out.past_key_values, mask, STEPS + 2, graph=graph)
        rows = torch.arange(3)
        for step in range(STEPS):
            last = last + 1
            if decoder is not None:
                if step == leave_after:
                    keep = torch.tensor([0, 2])
                    state.keep(keep)
                    rows, last = rows[keep], last[keep]
                full = torch.zeros(3, model.config.vocab_size, dtype=model.dtype)
                full[rows] = decoder.step(state, tokens[step][rows], last)
                logits.append(full)
            else:
                logits.append(model(input_ids=tokens[step][:, None], attention_mask=mask, position_ids=last[:, None],
                                    past_key_values=cache, use_cache=True).logits[:, -1])
    return torch.stack(logits).float()


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fast_step_gives_transformers_logits(cut_model_folder, dtype):
    model = _model(cut_model_folder, dtype)
    assert llama_decode.unsupported(model) is None
    plain, fast = _decode(model), _decode(model, llama_decode.LlamaDecoder.for_model(model))
    assert torch.equal(plain.argmax(-1), fast.argmax(-1))
    if dtype == "float32":  # measured: largest difference 7e-5 of logits up to ~30
        assert torch.allclose(plain, fast, rtol=0, atol=1e-3)
    elif EXACT_BF16:
        assert torch.equal(plain, fast)
    else:  # bf16 rounding of other kernels (one bf16 step of a logit near 32 is 0.25)
        difference = (plain - fast).abs()
        assert difference.max() <= 0.5 and difference.mean() < 0.01


@pytest.mark.slow
def test_a_weight_changed_in_place_is_read_again(cut_model_folder):
    """The local engine updates its policy (and refreshes its rollout copy) in place between calls."""
    model = _model(cut_model_folder, "float32")
    decoder = llama_decode.LlamaDecoder.for_model(model)
    _decode(model, decoder)
    packed = decoder._layers[0].qkv
    with torch.no_grad():
        model.model.layers[0].self_attn.k_proj.weight.mul_(1.5)
        model.model.layers[2].mlp.up_proj.weight.add_(0.01)
    fast = _decode(model, decoder)
    assert decoder._layers[0].qkv is not packed
    assert torch.allclose(_decode(model), fast, rtol=0, atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_generator_gives_the_same_tokens_with_the_fast_step(cut_model_folder, dtype):
    """Greedy and seeded rows of different lengths (their own limits; a stop string where one is
    drawn): the same tokens with the fast step and with transformers' forward, log-probs to float
    rounding; a seeded row may part only where its draw lies within rounding of a CDF boundary
    (a tail draw in float32 can lie 3e-7 from one, with logits 4e-5 apart)."""
    gen = HFGenerator(str(cut_model_folder), device="cpu", dtype=dtype, max_batch_size=4)
    assert gen._llama_decoder() is not None
    under_autocast = HFGenerator.from_model(gen.model, gen.tokenizer, autocast_dtype=torch.bfloat16)
    assert under_autocast._llama_decoder() is None  # the local engine's LoRA sampling: transformers' forward
    prompts = [[{"role": "user", "content": "What is the capital of France? Answer in one short sentence."}],
               [{"role": "user", "content": "Tell me a long story about a robot."}],
               [{"role": "user", "content": "Name three colours of the rainbow, one per line. " * 4}]]
    params = [SamplingParams(temperature=0.0, max_new_tokens=16), SamplingParams(temperature=1.0, max_new_tokens=6, seed=7),
              SamplingParams(temperature=1.0, max_new_tokens=16, seed=8, stop=("three",))]
    fast = gen.generate(prompts, params)
    gen.fast_decode = False
    gen.clear_prefix_cache()  # the same prefill as the first call's
    plain = gen.generate(prompts, params)
    assert len({len(g.response_ids) for g in plain}) >= 2  # rows left the batch at different steps
    tie_band = 1e-4 if dtype == "float32" else 1e-2
    for prompt, p, a, b in zip(prompts, params, fast, plain):
        same = _common_prefix(a.response_ids, b.response_ids)
        if same < max(len(a.response_ids), len(b.response_ids)):
            # a seeded draw in the vocabulary's tail may land between two CDF boundaries that the
            # paths' rounding orders differently: allowed only there, and the row's rest is moot
            assert p.temperature > 0, f"greedy tokens differ at {same}"
            gap = _draw_gap(gen, prompt, a.response_ids[:same], a.response_ids[same], token_uniform(p.seed, same))
            assert gap < tie_band, f"token {same} differs with the draw {gap:.2e} from the fast token's CDF interval"
            continue
        assert a.text == b.text and a.finish_reason == b.finish_reason
        if dtype == "float32" or not EXACT_BF16:
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3 if dtype == "float32" else 0.5)
        else:
            assert a.logprobs == b.logprobs


def _common_prefix(a: list[int], b: list[int]) -> int:
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _draw_gap(gen, prompt, response_prefix: list[int], token: int, uniform: float) -> float:
    """How far ``uniform`` lies from ``token``'s interval of the inverse CDF (vocabulary order, float64)
    of transformers' next-token distribution after ``response_prefix``: 0 inside it."""
    from gentax.rollout.generators import chat_prompt_ids

    ids = torch.tensor([chat_prompt_ids(gen.tokenizer, prompt) + response_prefix])
    with torch.no_grad():
        logits = gen.model(ids).logits[0, -1].double()
    cdf = torch.softmax(logits, -1).cumsum(-1)
    low, high = (float(cdf[token - 1]) if token else 0.0), float(cdf[token])
    return max(low - uniform, uniform - high, 0.0)


def test_models_it_cannot_run_keep_transformers_forward():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1)
    assert llama_decode.unsupported(LlamaForCausalLM(config)) is None
    assert "bias" in llama_decode.unsupported(LlamaForCausalLM(LlamaConfig(**{**config.to_dict(), "attention_bias": True})))
    assert "float16" in llama_decode.unsupported(LlamaForCausalLM(config).to(torch.float16))
    assert "LlamaForCausalLM" in llama_decode.unsupported(torch.nn.Linear(2, 2))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fixed_shape_step_gives_the_eager_steps_logits(cut_model_folder, dtype):
    """The step a GPU captures (tokens, positions and column read from buffers, finished rows kept
    and ignored) computes what the eager step computes: bit for bit while every row is in the
    batch; after a row left, the eager step's smaller products round within bf16 of it."""
    model = _model(cut_model_folder, dtype)
    decoder = llama_decode.LlamaDecoder.for_model(model)
    assert torch.equal(_decode(model, decoder), _decode(model, decoder, graph=True))
    eager, fixed = _decode(model, decoder, leave_after=2), _decode(model, decoder, graph=True, leave_after=2)
    assert torch.equal(eager[:, 1], fixed[:, 1]) and not fixed[2:, 1].any()  # the row that left: read no more
    assert torch.equal(eager[:2], fixed[:2])
    assert torch.equal(eager.argmax(-1), fixed.argmax(-1))
    assert torch.allclose(eager, fixed, rtol=0, atol=1e-3 if dtype == "float32" else 0.5)
