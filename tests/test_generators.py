"""Generators: sampling parameters, seeding, the vLLM mapping (against a stand-in module with
vLLM's interface: no GPU here), the expert, and a real tiny generation with the embedded model."""

from __future__ import annotations

import sys
import types

import pytest

from gentax.errors import GentaxError
from gentax.rollout.generators import (
    ExpertGenerator,
    HFGenerator,
    SamplingParams,
    chat_prompt_ids,
    derive_seed,
    generation_from_vllm,
    make_generator,
    per_request_params,
    vllm_sampling_kwargs,
)


def test_sampling_params_are_checked():
    assert SamplingParams().stop == ("</action>",)
    for bad in ({"temperature": -1}, {"top_p": 0.0}, {"top_p": 1.5}, {"max_new_tokens": 0}):
        with pytest.raises(GentaxError):
            SamplingParams(**bad)


def test_seeds_are_stable_and_per_request():
    assert derive_seed(0, "sample", 3, 1) == derive_seed(0, "sample", 3, 1)
    assert len({derive_seed(0, "sample", j, t) for j in range(10) for t in range(10)}) == 100
    assert 0 <= derive_seed("x") < 2**63
    shared = per_request_params(SamplingParams(seed=7, temperature=0.3), 3)
    assert [p.seed for p in shared] == [derive_seed(7, i) for i in range(3)]
    assert all(p.temperature == 0.3 for p in shared)
    own = [SamplingParams(seed=s) for s in (5, 6)]
    assert per_request_params(own, 2) == own
    with pytest.raises(ValueError):
        per_request_params(own, 3)


def test_make_generator_rejects_bad_input(tmp_path):
    with pytest.raises(GentaxError, match="unknown generator"):
        make_generator("openai", "x")
    with pytest.raises(GentaxError, match="needs a model folder"):
        make_generator("hf", None)
    with pytest.raises(GentaxError, match="no config.json"):
        make_generator("hf", str(tmp_path))
    no_template = types.SimpleNamespace(chat_template=None)
    with pytest.raises(GentaxError, match="no chat template"):
        HFGenerator.from_model(types.SimpleNamespace(name_or_path="base-model"), no_template)


# ---- vLLM, without vLLM --------------------------------------------------------------------------
class CharTokenizer:
    """A stand-in tokenizer: one id per character, a ChatML-like template."""

    chat_template = "<role>content ... <assistant>"

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True):
        assert add_generation_prompt and not tokenize
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def __call__(self, text, add_special_tokens=True):
        assert not add_special_tokens
        return {"input_ids": [ord(c) for c in text]}


def fake_vllm_module(calls: dict) -> types.ModuleType:
    module = types.ModuleType("vllm")

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class LLM:
        def __init__(self, **kw):
            calls["engine"] = kw

        def get_tokenizer(self):
            return CharTokenizer()

        def generate(self, prompts, sampling_params=None, use_tqdm=True):
            calls["prompts"], calls["sampling"] = prompts, [s.kw for s in sampling_params]
            outs = []
            for i, prompt in enumerate(prompts):
                ids = [10 + i, 11, 12]
                logprobs = [{tok: types.SimpleNamespace(logprob=-0.1 * (k + 1)), 999: types.SimpleNamespace(logprob=-9.0)}
                            for k, tok in enumerate(ids)]
                completion = types.SimpleNamespace(text=f"<action>a{i}</action>", token_ids=ids, logprobs=logprobs,
                                                   finish_reason="stop" if i == 0 else "length")
                outs.append(types.SimpleNamespace(prompt_token_ids=prompt["prompt_token_ids"], outputs=[completion]))
            return outs

    module.SamplingParams, module.LLM = SamplingParams, LLM
    return module


def test_vllm_sampling_params_map_one_to_one():
    kw = vllm_sampling_kwargs(SamplingParams(temperature=0.4, top_p=0.9, max_new_tokens=33, seed=5))
    assert kw["temperature"] == 0.4 and kw["top_p"] == 0.9 and kw["max_tokens"] == 33 and kw["seed"] == 5
    assert kw["stop"] == ["</action>"] and kw["include_stop_str_in_output"] is True
    assert kw["logprobs"] == 0 and kw["n"] == 1


def test_vllm_generator_through_a_stand_in_module(monkeypatch, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    calls: dict = {}
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm_module(calls))
    gen = make_generator("vllm", str(tmp_path), tensor_parallel_size=2, enforce_eager=True)
    assert calls["engine"]["model"] == str(tmp_path) and calls["engine"]["tensor_parallel_size"] == 2
    assert calls["engine"]["enforce_eager"] is True
    prompts = [[{"role": "user", "content": "hi"}], [{"role": "user", "content": "yo"}]]
    outs = gen.generate(prompts, SamplingParams(temperature=1.0, seed=3, max_new_tokens=7))
    # prompts go in as token ids of the chat template, each request with its own seed
    assert calls["prompts"][0]["prompt_token_ids"] == chat_prompt_ids(CharTokenizer(), prompts[0])
    assert [s["seed"] for s in calls["sampling"]] == [derive_seed(3, 0), derive_seed(3, 1)]
    assert all(s["max_tokens"] == 7 for s in calls["sampling"])
    assert outs[0].response_ids == [10, 11, 12] and outs[1].response_ids == [11, 11, 12]
    assert outs[0].logprobs == pytest.approx([-0.1, -0.2, -0.3])  # the sampled token's, not the others'
    assert [o.finish_reason for o in outs] == ["stop", "length"]
    assert outs[1].text == "<action>a1</action>" and outs[0].prompt_ids == calls["prompts"][0]["prompt_token_ids"]


def test_vllm_output_without_logprobs_and_odd_finish_reasons():
    completion = types.SimpleNamespace(text="x", token_ids=(5,), logprobs=None, finish_reason="abort")
    gen = generation_from_vllm(types.SimpleNamespace(prompt_token_ids=[1], outputs=[completion]))
    assert gen.logprobs is None and gen.finish_reason == "length" and gen.response_ids == [5]


def test_vllm_missing_is_one_clear_error(monkeypatch, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(GentaxError, match="needs the vllm package"):
        make_generator("vllm", str(tmp_path))


# ---- expert ----------------------------------------------------------------------------------------
def test_expert_answers_with_the_hinted_action():
    gen = ExpertGenerator()
    msgs = [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]
    outs = gen.generate(msgs, SamplingParams(), [{"expert_action": "go north", "think": True}, {"expert_action": "up", "think": False}])
    assert outs[0].text == "<think>The next step towards the goal is: go north.</think>\n<action>go north</action>"
    assert outs[1].text == "<action>up</action>"
    assert all(o.finish_reason == "stop" and o.logprobs is None for o in outs)
    with pytest.raises(GentaxError, match="needs hints"):
        gen.generate(msgs, SamplingParams())


# ---- the embedded model (real weights) ------------------------------------------------------------
FRANCE = [{"role": "user", "content": "What is the capital of France? Answer in one short sentence."}]
STORY = [{"role": "user", "content": "Tell me a long story about a robot."}]


@pytest.fixture(scope="module")
def embedded():
    from gentax.rollout.embedded_model import embedded_model_path

    # float32: these tests compare log-probs across batch compositions to 1e-3; in bf16, padding
    # alone moves them by up to ~0.12 nats (tests/test_dtype.py bounds bf16 against fp32)
    return HFGenerator(str(embedded_model_path()), device="cpu", dtype="float32", max_batch_size=2)


@pytest.fixture(scope="module")
def cut(cut_model_folder):
    """The same generator on the embedded model cut to its first layers (tests/conftest.py): for
    the tests that compare two ways of computing the same tokens, which need its shapes and
    weights, not its answers."""
    return HFGenerator(str(cut_model_folder), device="cpu", dtype="float32", max_batch_size=2)


@pytest.mark.slow
def test_embedded_model_folder_is_a_plain_hf_chat_model(embedded):
    import json
    from pathlib import Path

    folder = Path(embedded.model.name_or_path)
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "bfloat16"
    assert (folder / "model.safetensors").stat().st_mode & 0o044, "weights must be readable like the other files"
    assert embedded.tokenizer.chat_template and embedded.tokenizer.eos_token == "<|im_end|>"
    ids = chat_prompt_ids(embedded.tokenizer, FRANCE)
    assert embedded.tokenizer.decode(ids).endswith("<|im_start|>assistant\n")


@pytest.mark.slow
def test_embedded_batched_generation_equals_one_by_one_and_reproduces(embedded):
    import torch

    params = [SamplingParams(temperature=0.0, max_new_tokens=16), SamplingParams(temperature=1.0, max_new_tokens=6, seed=11)]
    batch = embedded.generate([FRANCE, STORY], params)
    # the greedy answer ends with EOS before the longer sampled one: the batch shrinks mid-way
    assert batch[0].finish_reason == "stop" and batch[0].response_ids[-1] in embedded.eos_ids
    assert "Paris" in batch[0].text and "<|im_end|>" not in batch[0].text
    assert batch[1].finish_reason == "length" and len(batch[1].response_ids) == 6
    single = [embedded.generate([p], [sp])[0] for p, sp in zip([FRANCE, STORY], params)]
    for b, s in zip(batch, single):
        assert b.response_ids == s.response_ids and b.text == s.text
        assert b.logprobs == pytest.approx(s.logprobs, abs=1e-3)
    # logprobs are those of the sampled tokens under the raw model: check with a teacher-forced pass
    row = batch[1]
    ids = torch.tensor([row.prompt_ids + row.response_ids])
    with torch.inference_mode():
        logits = embedded.model(input_ids=ids).logits[0].float()
    start = len(row.prompt_ids) - 1
    forced = torch.log_softmax(logits[start : start + len(row.response_ids)], -1)
    expected = forced[torch.arange(len(row.response_ids)), torch.tensor(row.response_ids)].tolist()
    assert row.logprobs == pytest.approx(expected, abs=1e-3)


@pytest.mark.slow
def test_embedded_stops_at_a_stop_string(embedded):
    free = embedded.generate([STORY], [SamplingParams(temperature=0.0, max_new_tokens=10, stop=())])[0]
    assert free.finish_reason == "length"
    stop = free.text.strip().split()[2]  # a word in the middle of the free answer
    cut = embedded.generate([STORY], [SamplingParams(temperature=0.0, max_new_tokens=10, stop=(stop,))])[0]
    assert cut.finish_reason == "stop" and stop in cut.text
    assert len(cut.response_ids) < len(free.response_ids) and free.response_ids[: len(cut.response_ids)] == cut.response_ids


@pytest.mark.slow
def test_embedded_model_through_the_collector(embedded):
    from gentax.rollout.collector import CollectConfig, collect

    cfg = CollectConfig(domain="sokoban", split="eval", max_steps=1, sampling=SamplingParams(max_new_tokens=8))
    embedded.model.train()  # as a trainer would lend it: sampled in eval mode, handed back as it was
    rollouts = collect(embedded, [0], cfg, progress=False)
    assert embedded.model.training
    embedded.model.eval()
    (row,) = rollouts.steps_frame().to_dict("records")
    tokens = rollouts.tokens[0]
    assert row["prompt_tokens"] == len(tokens.prompt_ids) > 100
    assert row["response_tokens"] == len(tokens.response_ids) == len(tokens.logprobs) <= 8
    assert embedded.tokenizer.decode(tokens.response_ids, skip_special_tokens=True) == row["response"]
    assert row["done"] and (row["valid"] or row["reason"])


@pytest.mark.slow
def test_shared_prefix_prefilled_once_gives_the_same_output(cut):
    """A GRPO group (one prompt, several seeds) and prompts sharing the chat template + an intro:
    with the prefix prefilled once and its KV cache repeated, greedy and seeded samples are the
    same tokens as without, log-probs equal to float rounding."""
    intro = "You are an agent in a text game. Read the observation and answer with one action. "
    prompts = [FRANCE] * 3 + [[{"role": "user", "content": intro + "Observation: you see a box."}],
                              [{"role": "user", "content": intro + "Observation: a door, closed and locked."}]]
    params = [SamplingParams(temperature=0.0, max_new_tokens=12)] + [
        SamplingParams(temperature=1.0, max_new_tokens=12, seed=s) for s in (1, 2)] + [
        SamplingParams(temperature=0.0, max_new_tokens=12)] * 2
    ids = [chat_prompt_ids(cut.tokenizer, p) for p in prompts]
    assert cut._shared_prefix(ids[:3]) == len(ids[0]) - 1  # identical prompts: all but the last token
    assert cut._shared_prefix(ids[3:]) > len(chat_prompt_ids(cut.tokenizer, [{"role": "user", "content": ""}]))
    cut.max_batch_size = 3
    try:
        shared = cut.generate(prompts, params)
        cut.share_prefix = False
        plain = cut.generate(prompts, params)
    finally:
        cut.share_prefix, cut.max_batch_size = True, 2
    for a, b in zip(shared, plain):
        assert a.response_ids == b.response_ids and a.text == b.text and a.finish_reason == b.finish_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)


def test_prefill_groups_split_rows_where_padding_costs_more_than_a_call():
    from gentax.rollout.generators import prefill_groups

    assert prefill_groups([100, 100, 100], 32) == [[0, 1, 2]]  # equal lengths: one call
    # two short rows and two long ones, given out of order: padding the short ones to 340 would cost
    # 2 x 185 tokens, a second call 32
    assert prefill_groups([340, 155, 338, 157], 32) == [[1, 3], [2, 0]]
    assert prefill_groups([340, 155, 338, 157], 10_000) == [[1, 3, 2, 0]]  # calls dearer than any padding
    assert prefill_groups([7], 32) == [[0]]


def test_prefill_groups_is_the_cheapest_split_in_length_order():
    import itertools
    import random

    from gentax.rollout.generators import prefill_groups

    rng = random.Random(0)
    for _ in range(200):
        lengths = [rng.randint(1, 400) for _ in range(rng.randint(1, 7))]
        call = rng.choice([0, 16, 32, 500])
        cost = lambda groups: sum(len(g) * max(lengths[i] for i in g) + call for g in groups)  # noqa: E731
        groups = prefill_groups(lengths, call)
        assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        best = min(cost([order[a:b] for a, b in zip((0, *cuts), (*cuts, len(order)))])
                   for k in range(len(order)) for cuts in itertools.combinations(range(1, len(order)), k))
        assert cost(groups) == best


@pytest.mark.slow
def test_grouped_prefill_gives_the_same_output(cut):
    """Prompts of very different lengths, prefilled in groups each padded to its own longest
    prompt and merged into one LEFT-padded cache: greedy and seeded samples are the same tokens as
    with one padded prefill, log-probs equal to float rounding."""
    from gentax.rollout.generators import prefill_groups

    intro = "You are an agent in a text game. Read the observation and answer with one action. "
    prompts = [[{"role": "user", "content": intro + "Observation: " + text}] for text in (
        "a box.", "a door, closed.", "a long corridor " * 30 + "ends at a door.", "a hall " * 28 + "with a key.")]
    ids = [chat_prompt_ids(cut.tokenizer, p) for p in prompts]
    shared = cut._shared_prefix(ids)
    assert len(prefill_groups([len(i) - shared for i in ids], cut.group_call_tokens)) >= 2  # the merged path
    params = [SamplingParams(temperature=0.0, max_new_tokens=12), SamplingParams(temperature=1.0, max_new_tokens=12, seed=3),
              SamplingParams(temperature=1.0, max_new_tokens=12, seed=4), SamplingParams(temperature=0.0, max_new_tokens=12)]
    cut.max_batch_size = 4
    try:
        for min_shared in (16, 10**6):  # with the shared prefix prefilled once, and without one
            cut.min_shared_prefix, cut.group_prefill = min_shared, True
            grouped = cut.generate(prompts, params)
            cut.group_prefill = False
            padded = cut.generate(prompts, params)
            for a, b in zip(grouped, padded):
                assert a.response_ids == b.response_ids and a.text == b.text and a.finish_reason == b.finish_reason
                assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)
    finally:
        cut.group_prefill, cut.min_shared_prefix, cut.max_batch_size = True, 16, 2


@pytest.mark.slow
def test_reused_prefix_of_the_previous_call_gives_the_same_output(cut):
    """Two turns of three episodes: each second-turn prompt begins with its episode's intro and
    task (its first-turn prompt up to the observation). With the previous call's KV reused, the
    second call prefills fewer positions and samples the same tokens, log-probs equal to float
    rounding; a weight update in between drops what was kept."""
    import torch

    tasks = ["put a red book on the shelf", "find the silver key and open the chest", "water the plant " * 6]
    turn = lambda task, obs: [{"role": "user", "content": f"You are an agent in a text game. Your task is: {task}.\n"  # noqa: E731
                                                           f"Observation: {obs}\nAnswer with one action."}]
    first = [turn(t, "you are in a room.") for t in tasks]
    second = [turn(t, f"you moved {k + 1} steps north " * (k + 1)) for k, t in enumerate(tasks)]
    params = [SamplingParams(temperature=0.0, max_new_tokens=8), SamplingParams(temperature=1.0, max_new_tokens=8, seed=5),
              SamplingParams(temperature=1.0, max_new_tokens=8, seed=6)]
    positions = [0]
    forward = cut.model.forward

    def counting(*a, input_ids=None, **kw):
        if input_ids.shape[1] > 1:
            positions[0] += input_ids.numel()
        return forward(*a, input_ids=input_ids, **kw)

    cut.model.forward, cut.max_batch_size = counting, 3
    try:
        results, reused_tokens = {}, {}
        for reuse in (True, False):
            cut.reuse_prefix = reuse
            cut.generate(first, params)
            positions[0], before = 0, dict(cut.stats)
            results[reuse] = cut.generate(second, params), positions[0]
            assert cut.stats["prefill_positions"] - before["prefill_positions"] == positions[0]
            reused_tokens[reuse] = cut.stats["reused_tokens"] - before["reused_tokens"]
        cut.reuse_prefix = True
        cut.generate(first, params)
        with torch.no_grad():
            cut.model.model.norm.weight.add_(0.0)  # an in-place update: its version changes
        positions[0] = 0
        cut.generate(second, params)
        assert positions[0] == results[False][1]  # nothing reused across the update
        cut.kept_bytes_limit = 0  # nothing kept at all
        cut.generate(first, params)
        positions[0] = 0
        cut.generate(second, params)
        assert positions[0] == results[False][1] and not cut._kept
    finally:
        del cut.model.forward
        cut.reuse_prefix, cut.max_batch_size, cut.kept_bytes_limit = True, 2, 1 << 30
    (reused, reused_positions), (plain, plain_positions) = results[True], results[False]
    assert reused_positions < plain_positions
    assert reused_tokens[True] > reused_tokens[False]  # off: only the shared prefix, once per row
    for a, b in zip(reused, plain):
        assert a.response_ids == b.response_ids and a.text == b.text and a.finish_reason == b.finish_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "autocast"])
def test_preallocated_kv_cache_gives_the_same_output(cut, dtype, monkeypatch):
    """Decoding into a KV cache allocated once per micro-batch (gentax.rollout.kv_cache) instead of
    one grown by concatenation: rows of different lengths that finish at different steps (their
    own limits; a stop string where one is drawn) sample the same tokens; in bf16 (the CPU's grouped eager
    attention) the log-probs are equal to bf16 rounding (bit for bit on the AMX Xeon of
    2026-12-01; kernels picked by shape may round otherwise), in float32 (sdpa) to ~1e-5, and under bf16
    autocast (float32 weights, sdpa in bf16: the local engine's LoRA sampling) to bf16 rounding
    (up to 0.11 nats measured, as padding moves bf16 log-probs)."""
    import torch

    from gentax.rollout import kv_cache

    if dtype == "autocast":
        gen = HFGenerator.from_model(cut.model, cut.tokenizer, autocast_dtype=torch.bfloat16)
    else:
        gen = cut if dtype == "float32" else HFGenerator(cut.model.name_or_path, device="cpu", dtype=dtype)
    calls, real = [], kv_cache.preallocate
    monkeypatch.setattr(kv_cache, "preallocate", lambda cache, mask, extra: calls.append(extra) or real(cache, mask, extra))
    prompts = [FRANCE, STORY, [{"role": "user", "content": "Name three colours of the rainbow, one per line. " * 4}],
               [{"role": "user", "content": "Count from one to twenty in words."}]]
    params = [SamplingParams(temperature=0.0, max_new_tokens=20), SamplingParams(temperature=1.0, max_new_tokens=9, seed=7),
              SamplingParams(temperature=1.0, max_new_tokens=20, seed=8, stop=("three",)),
              SamplingParams(temperature=0.0, max_new_tokens=14)]
    gen.max_batch_size = 4
    gen.fast_decode = False  # transformers' forward, whose cache this is (tests/test_llama_decode.py: the fast step's)
    try:
        gen.preallocate_kv = True
        gen.clear_prefix_cache()
        preallocated = gen.generate(prompts, params)
        gen.preallocate_kv = False
        gen.clear_prefix_cache()  # the same prefill as the first call's (no KV reused from it)
        grown = gen.generate(prompts, params)
    finally:
        gen.preallocate_kv, gen.max_batch_size, gen.fast_decode = True, 2, gen.autocast_dtype is None
    assert calls == [19]  # one micro-batch, room for its longest response
    split = gen.stats["prefill_s"] + gen.stats["decode_s"]
    assert gen.stats["prefill_s"] > 0 and gen.stats["decode_s"] > 0 and split <= gen.stats["seconds"]
    assert len({len(g.response_ids) for g in grown}) >= 3  # rows left the batch at different steps
    for a, b, p in zip(preallocated, grown, params):
        if dtype == "autocast":
            # bf16 rounding (up to ~0.1 nats) moves a row's distribution enough that a sampled draw,
            # or a greedy pick between two near-equal logits, lands on another token: the same
            # tokens up to there, log-probs to bf16 rounding
            same = next((i for i, (x, y) in enumerate(zip(a.response_ids, b.response_ids)) if x != y), len(a.response_ids))
            assert same > 0 and a.logprobs[:same] == pytest.approx(b.logprobs[:same], abs=0.25)
            continue
        assert a.response_ids == b.response_ids and a.text == b.text and a.finish_reason == b.finish_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4 if dtype == "float32" else 0.25)


def test_a_rows_draw_depends_on_its_request_alone():
    """sample_rows: a row's token is a function of its own logits, seed and token index, whatever
    shares the batch (the same row alone, or among others in any order, samples the same token)."""
    import torch

    from gentax.rollout.generators import sample_rows

    torch.manual_seed(0)
    logits = torch.randn(6, 50) * 3
    params = [SamplingParams(temperature=t, top_p=p, seed=s)
              for t, p, s in [(1.0, 1.0, 1), (0.7, 0.9, 2), (0.0, 1.0, 3), (1.0, 0.5, 4), (1.3, 1.0, 5), (1.0, 1.0, 6)]]
    indices = [0, 3, 1, 7, 2, 5]
    together = sample_rows(logits, params, indices).tolist()
    alone = [sample_rows(logits[k : k + 1], [params[k]], [indices[k]]).item() for k in range(6)]
    reverse = sample_rows(logits.flip(0), params[::-1], indices[::-1]).tolist()[::-1]
    assert together == alone == reverse
    assert together[2] == int(logits[2].argmax())  # temperature 0: greedy
    # the next token index draws anew: not every row repeats its token
    assert sample_rows(logits, params, [i + 1 for i in indices]).tolist() != together


def test_sampled_tokens_follow_the_tempered_nucleus():
    """Over many seeds, sample_rows' tokens follow softmax(logits / temperature) cut to the nucleus:
    nothing outside it, and each token's share within 0.02 of its probability."""
    import torch

    from gentax.rollout.generators import sample_rows

    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    draws = 20000
    for temperature, top_p in [(1.0, 1.0), (0.5, 1.0), (1.0, 0.8)]:
        probs = torch.softmax(logits[0] / temperature, -1)
        if top_p < 1.0:  # the smallest most-probable prefix whose mass reaches top_p
            order = probs.argsort(descending=True)
            keep = (probs[order].cumsum(0) - probs[order]) < top_p
            probs = torch.zeros_like(probs).index_fill(0, order[keep], 1.0) * probs
            probs = probs / probs.sum()
        params = [SamplingParams(temperature=temperature, top_p=top_p, seed=seed) for seed in range(draws)]
        tokens = sample_rows(logits.expand(draws, -1), params, [0] * draws)
        shares = torch.bincount(tokens, minlength=6).float() / draws
        assert (shares[probs == 0] == 0).all()
        assert torch.allclose(shares, probs, atol=0.02), (temperature, top_p, shares, probs)
