"""The hf generator's decode on a GPU: speed of its two decode paths, and whether they give the same tokens.

    python benchmarks/gpu1/decode.py OUT.json --model DIR                 # a model folder (the embedded model)
    python benchmarks/gpu1/decode.py OUT.json --random TOKENIZER_DIR     # SmolLM2-135M's shape, random weights

Decode paths (``HFGenerator.fast_decode``, ``cuda_graphs``): "transformers" (the model's own forward
each step, the path of the one-GPU reference run of 2026-12-02), "fast" (gentax.rollout.llama_decode:
fused products, one static KV cache, batched attention; one Python call a kernel, the path of the
2026-12-03 run) and "graph" (the same step captured once a micro-batch as a CUDA graph and replayed,
finished rows kept in the batch: the default on a GPU). Measured, each written to OUT.json as it is
done and printed:

- ``speed``: decode tokens/s (response tokens over the decode loop's seconds, sampling included) at
  each ``--batches`` size, temperature 1.0, ``--tokens`` new tokens a row and no stop string, the
  model in bf16 as an evaluation loads it (``dtype auto`` on a bf16 GPU), one process alone on the GPU;
- ``greedy``: the prompt set of benchmarks/records/decode_prompts.json (four prompts of every
  domain, one ``generate`` call per domain as an evaluation batches them), greedy, each path against
  "graph": the prompts whose tokens differ and the largest |log-prob difference| before the first difference
  (benchmarks/decode_equivalence.py's ``compare``) of the bf16 model (the local RL engine samples a
  bf16 copy of its policy: the same path);
- ``sampled``: the prompt set sampled at temperature 1.0 (seeded per request, the "graph" path) three ways: together,
  one prompt a call, and reversed among 48 other prompts; the share of requests whose tokens equal
  the first way's (the draws are counter-based, so only the logits' rounding across batch shapes
  can move a token).

With ``--random`` the weights are drawn (seed 0) in the embedded model's shape: the speed is the
same; the token comparison is harder (near-flat logits have more near-ties).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: decode_equivalence's prompt set and comparison

from decode_equivalence import DOMAINS, PROMPTS, compare  # noqa: E402

#: SmolLM2-135M-Instruct's architecture (the embedded model's config.json), for --random
EMBEDDED_SHAPE = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                      num_key_value_heads=3, max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0,
                      tie_word_embeddings=True, vocab_size=49152)
PATHS = ("transformers", "fast", "graph")  # "graph" last: the others are compared with it


def load(args, dtype):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    if args.model:
        tokenizer = AutoTokenizer.from_pretrained(args.model)
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype, attn_implementation="sdpa")
    else:
        tokenizer = AutoTokenizer.from_pretrained(args.random)
        torch.manual_seed(0)
        config = LlamaConfig(**EMBEDDED_SHAPE, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
        model = LlamaForCausalLM(config).to(dtype)
        model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.to(args.device).eval(), tokenizer


def generator(model, tokenizer, decode: str):
    from gentax.rollout.generators import HFGenerator

    gen = HFGenerator.from_model(model, tokenizer, max_batch_size=256)
    gen.fast_decode, gen.cuda_graphs = decode != "transformers", decode == "graph"
    gen.reuse_prefix = False  # each call prefills in full: calls stay independent of the ones before
    return gen


def speed(model, tokenizer, prompts, batches, tokens, repeats=3) -> list[dict]:
    from gentax.rollout.generators import SamplingParams

    rows = []
    for decode in PATHS:
        gen = generator(model, tokenizer, decode)
        for batch in batches:
            messages = [prompts[i % len(prompts)]["messages"] for i in range(batch)]
            params = [SamplingParams(temperature=1.0, max_new_tokens=tokens, stop=(), seed=i) for i in range(batch)]
            gen.generate(messages, params)  # warm-up: kernels, allocator
            best = None
            for _ in range(repeats):
                before = dict(gen.stats)
                gen.generate(messages, params)  # the decode loop reads every step's tokens back: synchronised
                made = gen.stats["response_tokens"] - before["response_tokens"]
                seconds = gen.stats["decode_s"] - before["decode_s"]
                rate = made / seconds
                best = max(best or 0.0, rate)
            rows.append({"decode": decode, "batch": batch, "tokens_per_s": round(best, 1),
                         "step_ms": round(1000 * batch / best, 3)})
            print(f"speed {decode:12s} batch {batch:4d}: {best:10.1f} tokens/s ({1000 * batch / best:.2f} ms a step)", flush=True)
    return rows


def greedy(model, tokenizer, prompts) -> dict:
    from gentax.rollout.generators import SamplingParams

    results = {}
    for decode in PATHS:
        gen = generator(model, tokenizer, decode)
        results[decode] = {}
        for domain in DOMAINS:
            batch = [p for p in prompts if p["domain"] == domain]
            params = [SamplingParams(temperature=0.0, max_new_tokens=p["max_new_tokens"]) for p in batch]
            for prompt, out in zip(batch, gen.generate([p["messages"] for p in batch], params)):
                results[decode][prompt["id"]] = {"response_ids": out.response_ids, "logprobs": out.logprobs}
    return {f"{decode}_vs_graph": compare(results[decode], results["graph"]) for decode in PATHS[:-1]}


def sampled(model, tokenizer, prompts) -> dict:
    from gentax.rollout.generators import SamplingParams

    gen = generator(model, tokenizer, "graph")
    messages = [p["messages"] for p in prompts]
    params = [SamplingParams(temperature=1.0, max_new_tokens=p["max_new_tokens"], seed=1000 + i) for i, p in enumerate(prompts)]
    together = [g.response_ids for g in gen.generate(messages, params)]
    alone = [gen.generate([m], [p])[0].response_ids for m, p in zip(messages, params)]
    others = [SamplingParams(temperature=1.0, max_new_tokens=40, seed=5000 + i) for i in range(48)]
    mixed = gen.generate([prompts[i % len(prompts)]["messages"] for i in range(48)] + messages[::-1], others + params[::-1])
    among = [g.response_ids for g in mixed[48:]][::-1]
    return {"requests": len(prompts), "alone_equal": sum(a == b for a, b in zip(together, alone)),
            "among_others_equal": sum(a == b for a, b in zip(together, among))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a model folder")
    source.add_argument("--random", metavar="TOKENIZER_DIR", help="the embedded model's shape, random weights")
    parser.add_argument("--batches", default="1,16,64,256")
    parser.add_argument("--tokens", type=int, default=40, help="new tokens a row in the speed runs (the evaluations' limit)")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test of this script")
    args = parser.parse_args()
    import torch

    prompts = [p for p in json.loads(PROMPTS.read_text())["prompts"]]
    record = {"made_by": "benchmarks/gpu1/decode.py",
              "device": torch.cuda.get_device_name() if args.device == "cuda" else args.device,
              "torch": torch.__version__, "model": args.model or f"random weights, tokenizer {args.random}",
              "date": time.strftime("%Y-%m-%d %H:%M:%S")}

    def write():
        args.out.write_text(json.dumps(record, indent=1) + "\n")

    model, tokenizer = load(args, torch.bfloat16)
    record["greedy_bf16"] = greedy(model, tokenizer, prompts)
    print("greedy bf16 model:", json.dumps(record["greedy_bf16"]), flush=True)
    write()
    record["sampled"] = sampled(model, tokenizer, prompts)
    print("sampled:", json.dumps(record["sampled"]), flush=True)
    write()
    record["speed"] = speed(model, tokenizer, prompts, [int(b) for b in args.batches.split(",")], args.tokens)
    write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
