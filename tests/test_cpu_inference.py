"""The bf16 CPU sampling levers (gentax.rollout.cpu_inference) change speed only: logits equal
the eager kernels' bit for bit on a CPU without AMX, and to bf16 rounding with AMX (oneDNN picks
other kernels for the grouped attention's shapes there), with the same sampled tokens; a weight
changed in place is repacked; float32 models, autocast and gradients keep transformers' own
kernels."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gentax.dtype import cpu_flags  # noqa: E402
from gentax.rollout import cpu_inference  # noqa: E402

#: oneDNN runs the grouped and the per-head attention products with the same kernels (bit for bit)
#: on AVX-512 BF16 CPUs; with AMX tiles it picks other kernels for some shapes (gentax.rollout.cpu_inference)
EXACT = "amx_bf16" not in cpu_flags()


@pytest.fixture(scope="module")
def bf16_model(cut_model_folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(cut_model_folder, dtype=torch.bfloat16, attn_implementation="eager").eval()


def _prefill_and_decode(model) -> torch.Tensor:
    """Logits of a left-padded prefill and three decode steps (3 rows, one padded by 7)."""
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 40000, (3, 40), generator=gen)
    mask = torch.ones(3, 40, dtype=torch.long)
    mask[1, :7] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    logits = []
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
        logits.append(out.logits)
        cache, last = out.past_key_values, positions[:, -1:]
        for step in range(3):
            token = torch.randint(100, 4000, (3, 1), generator=gen)
            mask, last = torch.cat([mask, mask.new_ones(3, 1)], 1), last + 1
            out = model(input_ids=token, attention_mask=mask, position_ids=last, past_key_values=cache, use_cache=True)
            logits.append(out.logits)
    return torch.cat(logits, 1)


#: oneDNN's bf16 weight reorder runs on this CPU (AVX-512 BW/VL/DQ or AVX-NE-CONVERT): the packing lever is on
PACKS = cpu_inference._packing_supported()
LEVERS = ("grouped attention", "prepacked linears") if PACKS else ("grouped attention",)


def test_levers_give_the_eager_logits_bit_for_bit(bf16_model):
    assert cpu_inference.accelerate(bf16_model, enabled=False) == ()
    names = list(bf16_model.state_dict())
    assert bf16_model.config._attn_implementation == "eager"
    assert type(bf16_model.lm_head) is torch.nn.Linear
    eager = _prefill_and_decode(bf16_model)
    try:
        assert cpu_inference.accelerate(bf16_model) == LEVERS
        assert bf16_model.config._attn_implementation == cpu_inference.GROUPED_ATTENTION
        packed = type(bf16_model.model.layers[0].mlp.down_proj) is cpu_inference.PackedLinear
        assert packed == PACKS
        fast = _prefill_and_decode(bf16_model)
        assert (bf16_model.lm_head._packed is not None) == PACKS  # the packed path did run where it can
        assert list(bf16_model.state_dict()) == names  # the same parameters under the same names
    finally:
        cpu_inference.accelerate(bf16_model, enabled=False)
    if EXACT:
        assert torch.equal(eager, fast)
    else:  # bf16 rounding of other kernels (one bf16 step of a logit near 32 is 0.25), same argmax
        difference = (eager.float() - fast.float()).abs()
        assert difference.max() <= 0.5 and difference.mean() < 0.01
        assert torch.equal(eager.argmax(-1), fast.argmax(-1))


def test_generator_samples_the_same_tokens_with_levers_on_and_off(cut_model_folder):
    from gentax.rollout.generators import HFGenerator, SamplingParams

    gen = HFGenerator(str(cut_model_folder), device="cpu", dtype="bfloat16", max_batch_size=4)
    gen.fast_decode = False  # decode through the model's forward too, where the levers act (the fast step: tests/test_llama_decode.py)
    assert gen.cpu_levers == LEVERS
    prompts = [[{"role": "user", "content": f"Room {i}: you see a box and a key. Pick one action."}] for i in range(3)]
    params = [SamplingParams(temperature=1.0, max_new_tokens=12, seed=i, stop=()) for i in range(3)]
    fast = gen.generate(prompts, params)
    cpu_inference.accelerate(gen.model, enabled=False)
    eager = gen.generate(prompts, params)
    assert [g.response_ids for g in fast] == [g.response_ids for g in eager]
    for a, b in zip(fast, eager):  # with AMX: bf16 rounding (up to ~0.25 nats measured)
        assert a.logprobs == (b.logprobs if EXACT else pytest.approx(b.logprobs, abs=0.5))


def test_a_cpu_without_the_bf16_reorder_keeps_plain_linears(bf16_model, monkeypatch):
    """Where oneDNN cannot reorder bf16 weights it raises at the first call: the lever stays off."""
    monkeypatch.setattr(cpu_inference, "_packing_supported", lambda: False)
    try:
        assert cpu_inference.accelerate(bf16_model) == ("grouped attention",)
        assert type(bf16_model.lm_head) is torch.nn.Linear
    finally:
        cpu_inference.accelerate(bf16_model, enabled=False)


@pytest.mark.skipif(not PACKS, reason="oneDNN's bf16 weight reorder needs AVX-512 BW/VL/DQ or AVX-NE-CONVERT")
def test_a_weight_changed_in_place_is_repacked():
    layer = torch.nn.Linear(64, 32, bias=False).to(torch.bfloat16)
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    cpu_inference.accelerate(torch.nn.Sequential(layer))  # no config: linears only
    with torch.inference_mode():
        before = layer(x)
    with torch.no_grad():
        layer.weight.mul_(2)  # the local engine's per-step refresh of its rollout copy
    with torch.inference_mode():
        after = layer(x)
    assert torch.equal(after, torch.nn.functional.linear(x, layer.weight))
    assert not torch.equal(before, after)


def test_float32_models_autocast_and_gradients_keep_transformers_kernels():
    fp32 = torch.nn.Sequential(torch.nn.Linear(8, 8))
    assert cpu_inference.accelerate(fp32) == ()
    assert type(fp32[0]) is torch.nn.Linear
    layer = torch.nn.Linear(8, 4, bias=False).to(torch.bfloat16)
    cpu_inference.accelerate(torch.nn.Sequential(layer))
    x = torch.randn(2, 8, dtype=torch.bfloat16, requires_grad=True)
    layer(x).sum().backward()  # outside inference mode: F.linear, with its gradient
    assert x.grad is not None and layer._packed is None


# ---- the local engine's log-prob passes ------------------------------------------------------------
def test_logprob_passes_use_grouped_attention_within_the_memory_budget(tmp_path, monkeypatch):
    from gentax.train.local_engine import Policy
    from rl_helpers import TINY_RL, make_tiny_model, small_rl

    policy = Policy(small_rl({**TINY_RL, "autocast": "bf16", "kl_coef": 0.0}),
                    make_tiny_model(tmp_path / "tiny"), None)
    model = policy.model
    seen = []
    monkeypatch.setattr(type(model), "forward", _recording(type(model).forward, seen))
    prompts, responses = [[5, 6, 7, 8], [9, 10]], [[11, 12], [13]]
    policy.logprobs(model, prompts, responses)  # with gradients, small: grouped
    monkeypatch.setattr(cpu_inference, "TRAIN_ATTENTION_BYTES", 0)
    policy.logprobs(model, prompts, responses)  # with gradients, over the budget: the model's sdpa
    with torch.no_grad():
        policy.logprobs(model, prompts, responses)  # no backward, nothing kept: grouped
    assert seen == [cpu_inference.GROUPED_ATTENTION, "sdpa", cpu_inference.GROUPED_ATTENTION]
    assert model.config._attn_implementation == "sdpa"  # restored after each pass
    assert cpu_inference.stored_attention_bytes(model.config, 2, 6) == 2 * 2 * 4 * 36 * 8

    plain = Policy(small_rl({**TINY_RL, "autocast": "none", "kl_coef": 0.0}),
                   tmp_path / "tiny", None)
    seen.clear()  # the same model class: its forward still records
    with torch.no_grad():
        plain.logprobs(plain.model, prompts, responses)
    assert seen == ["sdpa"]  # float32: transformers' kernels


def _recording(forward, seen):
    def wrapped(self, *args, **kwargs):
        seen.append(self.config._attn_implementation)
        return forward(self, *args, **kwargs)
    return wrapped
