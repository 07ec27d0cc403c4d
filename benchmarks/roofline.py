"""The machine's own limits, and how close generation and the local engine's update come to them.

    python benchmarks/roofline.py [--threads 1] [--model PATH] [--prompts 4] [--prompt-tokens 330]
                                  [--new-tokens 40] [--dtypes bfloat16,float32] [--write]

In one run, so the ratios hold whatever the machine's speed: the matrix-product peak per dtype and
the memory bandwidth; then, on the embedded model with the ``hf`` generator, prefill against the peak
(2 x body parameters FLOPs a token plus attention), a GRPO group's shared-prefix prefill, decode ms a
step against its floor (weight bytes / bandwidth) with the fast step and transformers' forward, the
fast step's parts, and the local engine's update against the peak (6 x parameters FLOPs a token).
``--write`` makes the table the record benchmarks/records/roofline.tsv. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import time

from common import record_header, write_record


def best_of(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def matmul_peak(dtype, repeats: int) -> float:
    import torch

    best = 0.0
    for m, k, n in ((1024, 576, 1536), (2048, 2048, 2048)):
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        best = max(best, 2 * m * k * n / best_of(lambda: a @ b, repeats) / 1e9)
    return best


def bandwidth(repeats: int) -> tuple[float, float]:
    """(GB/s of a 512 MB copy, bytes read + written; GB/s of a 512 MB sum, bytes read)."""
    import torch

    src = torch.ones(128 * 1024 * 1024, dtype=torch.float32)
    dst = torch.empty_like(src)
    nbytes = src.numel() * 4
    return 2 * nbytes / best_of(lambda: dst.copy_(src), repeats) / 1e9, nbytes / best_of(src.sum, repeats) / 1e9


def decode_ms(generator, prompts, params, steps: int, repeats: int) -> dict[bool, float]:
    """{fast step?: ms a decode step}, the least of ``repeats`` calls of each (taken in turn after a
    warm-up round, so a change of the machine's load reaches both); seeded: the same tokens each call."""
    times = {True: [], False: []}
    for _ in range(repeats + 1):
        for fast in times:
            generator.fast_decode = fast
            before = generator.stats["decode_s"]
            generator.generate_ids(prompts, params)
            times[fast].append(generator.stats["decode_s"] - before)
    generator.fast_decode = True
    return {fast: min(seconds[1:]) / max(steps - 1, 1) * 1000 for fast, seconds in times.items()}


def step_parts(generator, rows: int, params, repeats: int, width: int) -> tuple[float, float, float]:
    """ms of the fast step's weight products once on a [rows, in] input, of sampling ``rows`` rows,
    and of its attention products over KV buffers ``width`` columns wide (each layer's its own)."""
    import torch

    from gentax.rollout.generators import sample_rows

    dtype = next(generator.model.parameters()).dtype
    decoder = generator._llama_decoder()
    decoder._refresh()
    products = [p for layer in decoder._layers for p in (layer.qkv, layer.out, layer.gate_up, layer.down)]
    products.append(decoder._head)
    inputs = {p.in_features: torch.randn(rows, p.in_features, dtype=dtype) for p in products}
    logits = torch.randn(rows, generator.model.config.vocab_size)
    batch, groups, layers = rows * decoder.kv_heads, decoder.heads // decoder.kv_heads, len(decoder._layers)
    keys = torch.randn(layers, batch, width, decoder.head_dim, dtype=dtype)
    values = torch.randn(layers, batch, width, decoder.head_dim, dtype=dtype)
    query = torch.randn(batch, groups, decoder.head_dim, dtype=dtype)
    probs = torch.softmax(torch.randn(batch, groups, width), dim=-1).to(dtype)

    def linears():
        for product in products:
            product(inputs[product.in_features])

    def attention():
        for layer in range(layers):
            torch.bmm(query, keys[layer].transpose(1, 2))
            torch.bmm(probs, values[layer])

    with torch.inference_mode():
        return tuple(best_of(fn, repeats) * 1000 for fn in (
            linears, lambda: sample_rows(logits, params[:rows], [0] * rows).tolist(), attention))


def attention_flops(model, tokens: int) -> float:
    """Per-sequence QK^T and AV products of a causal prefill of ``tokens`` tokens."""
    c = model.config
    return 2 * 2 * c.num_hidden_layers * c.hidden_size * tokens * tokens / 2


def measure(args, path: str) -> list[tuple[str, str, str, str]]:
    """Every measurement: rows of (what, measured, limit, share)."""
    import torch

    from gentax.rollout.generators import HFGenerator, SamplingParams
    from gentax.study.config import study_config
    from gentax.study.config import study_rl
    from gentax.train.config import load_rl_config
    from gentax.train.local_engine import Policy

    copy_bw, read_bw = bandwidth(args.repeats)
    bw = max(copy_bw, read_bw)
    dtypes = args.dtypes.split(",")
    peak = {name: matmul_peak(getattr(torch, name), args.repeats) for name in dtypes}
    rows = [("matrix products", ", ".join(f"{n} {peak[n]:.1f}" for n in dtypes) + " GFLOP/s", "", ""),
            ("memory", f"copy {copy_bw:.1f} GB/s, read {read_bw:.1f} GB/s", "", "")]
    for name in dtypes:
        torch.manual_seed(0)
        generator = HFGenerator(path, device="cpu", dtype=name, max_batch_size=args.prompts)
        generator.reuse_prefix = False  # the same prompts again and again: every call prefills them in full
        model = generator.model
        embed, head = model.get_input_embeddings().weight.numel(), model.get_output_embeddings().weight.numel()
        body = sum(p.numel() for p in model.parameters()) - embed - (0 if model.config.tie_word_embeddings else head)
        prompts = [torch.randint(100, model.config.vocab_size, (args.prompt_tokens,)).tolist() for _ in range(args.prompts)]
        tokens = args.prompts * args.prompt_tokens

        def prefill():
            with torch.inference_mode():
                model(input_ids=torch.tensor(prompts), use_cache=False, logits_to_keep=1)

        seconds = best_of(prefill, args.repeats)
        flops = 2 * body * tokens + args.prompts * attention_flops(model, args.prompt_tokens)
        rows.append((f"prefill {name}", f"{tokens / seconds:.0f} tokens/s", f"{name} peak",
                     f"{flops / seconds / 1e9 / peak[name]:.0%}"))

        # a GRPO group: --prompts copies of one prompt, the shared prefix prefilled once or not
        group, one = [prompts[0]] * args.prompts, [SamplingParams(temperature=1.0, max_new_tokens=1, seed=i, stop=()) for i in range(args.prompts)]
        shared = {}
        for on in (True, False):
            generator.share_prefix = on
            shared[on] = best_of(lambda: generator.generate_ids(group, one), args.repeats)
        generator.share_prefix = True
        rows.append((f"prefill of a GRPO group {name}, shared prefix on/off",
                     f"{tokens / shared[True]:.0f}/{tokens / shared[False]:.0f} tokens/s", "",
                     f"{shared[False] / shared[True]:.1f}x"))

        params = [SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens, seed=i, stop=()) for i in range(args.prompts)]
        outs = generator.generate_ids(prompts, params)
        steps = max(len(o.response_ids) for o in outs)
        floor = sum(p.numel() * p.element_size() for p in model.parameters()) / (bw * 1e9) * 1000
        step = decode_ms(generator, prompts, params, steps, args.repeats)
        for fast, label in ((True, "fast step"), (False, "transformers' forward")):
            rows.append((f"decode batch {args.prompts} {name}, {label}", f"{step[fast]:.1f} ms per step",
                         f"weights/bandwidth {floor:.1f} ms", f"{step[fast] / floor:.2f}x the floor"))
        linear, sample, attention = step_parts(generator, args.prompts, params, args.repeats,
                                               args.prompt_tokens + args.new_tokens - 1)
        rows.append((f"{name} decode step parts (fast step)", f"linears {linear:.1f}, attention products "
                     f"{attention:.1f}, sampling {sample:.1f}, rest {step[True] - linear - attention - sample:.1f} ms",
                     f"linears vs {floor:.1f} ms floor", f"{linear / floor:.2f}x"))

        # the local engine's update: Policy.logprobs (the LM head on the response positions only) and a backward
        rl = {**study_rl(study_config("paper")), "autocast": "bf16" if name == "bfloat16" else "none", "kl_coef": 0.0}
        policy = Policy(load_rl_config(rl), path, None)
        policy.model.train()
        responses = [o.response_ids for o in outs]
        update_tokens = sum(len(p) + len(r) for p, r in zip(prompts, responses))

        def update():
            logp, mask, _ = policy.logprobs(policy.model, prompts, responses)
            (-(logp * mask).sum() / mask.sum()).backward()
            policy.model.zero_grad(set_to_none=True)

        seconds = best_of(update, max(1, args.repeats - 1))
        flops = (6 * body * update_tokens + 6 * head * args.prompts * (max(map(len, responses)) + 1)
                 + 3 * args.prompts * attention_flops(policy.model, args.prompt_tokens + steps))
        rows.append(("local-engine update, " + ("fp32 weights, bf16 autocast" if name == "bfloat16" else name),
                     f"{update_tokens / seconds:.0f} tokens/s", f"{name} peak", f"{flops / seconds / 1e9 / peak[name]:.0%}"))
        del generator, model, policy
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default=None, help="HF folder (default: the embedded model)")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=330)
    parser.add_argument("--new-tokens", type=int, default=40)
    parser.add_argument("--dtypes", default="bfloat16,float32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write the record benchmarks/records/roofline.tsv")
    args = parser.parse_args()

    from gentax import malloc

    malloc.tune()  # as every gentax job does
    import torch

    from gentax.dtype import BF16_FLAGS, cpu_flags
    from gentax.rollout.embedded_model import embedded_model_path

    torch.set_num_threads(args.threads)
    rows = measure(args, args.model or str(embedded_model_path()))
    header = (record_header(f"python benchmarks/roofline.py --dtypes {args.dtypes}") + f"\n# {args.threads} thread(s); "
              f"bf16 flags: {', '.join(sorted(cpu_flags() & set(BF16_FLAGS))) or 'none'}; torch {torch.__version__}; "
              f"SmolLM2-135M, {args.prompts} prompts of {args.prompt_tokens} tokens, {args.new_tokens} new tokens")
    text = "\n".join([header, "what\tmeasured\tlimit\tshare", *("\t".join(row) for row in rows)]) + "\n"
    print(text)
    if args.write:
        write_record("roofline.tsv", text)


if __name__ == "__main__":
    main()
