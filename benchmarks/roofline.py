"""The machine's own limits, and how close generation and the local engine's update come to them.

    python benchmarks/roofline.py [--threads 1] [--model PATH] [--prompts 4] [--prompt-tokens 330]
                                  [--new-tokens 40] [--dtypes float32,bfloat16] [--rounds 1]

Measured on the machine it runs on, in one run (so the ratios hold whatever the machine's speed):
- matrix-product peak per dtype: a 1024x576 by 576x1536 product (the embedded model's MLP shape)
  and a 2048 cube, best of several, in GFLOP/s;
- memory bandwidth: a 512 MB tensor copy, bytes read + written per second, and a 512 MB sum,
  bytes read per second (best of several each); the decode floor uses the higher of the two;
- the ``hf`` generator (gentax.rollout.generators.HFGenerator) on the embedded model
  (SmolLM2-135M): prefill tokens/s of ``--prompts`` prompts of ``--prompt-tokens`` tokens, as a
  fraction of the dtype's matrix peak (2 x non-embedding parameters FLOPs per token, plus the
  attention products); decode ms per step of the same batch against its floor, the weight bytes
  read once per step divided by the bandwidth: the generator's decode loop (its ``stats``,
  sampling included; before 2026-12-03 the whole call less a separately timed prefill, which
  moved with that prefill's noise) with the fast step (gentax.rollout.llama_decode: what jobs run)
  and with transformers' forward, in bf16 that with the sampling levers
  (gentax.rollout.cpu_inference: grouped attention, prepacked linears) on and off, all in one run;
  and what a step's parts take on their own: every weight product of the fast step once on a
  [batch, in] input (the weight streaming a step cannot avoid) and the sampler on the batch's
  logits (``generators.sample_rows``: softmax, CDF and one search per row, batched), and the fast
  step's attention products (two ``bmm`` a layer over KV buffers of the prompt and the new tokens);
  the rest of a step is ~1,000 small calls (norms, rotary, softmax, residual adds, cache writes);
- the shared-prefix lever: prefill of a GRPO group (``--prompts`` copies of one prompt) with
  the common prefix prefilled once (the generator's default) and without, in one run;
- the local engine's update: its own ``Policy.logprobs`` over the same prompts + sampled
  responses (the LM head on the response positions only) and a policy-gradient backward, tokens/s
  against the peak (6 x body parameters FLOPs per token, 6 x LM-head parameters per response
  position, 3 x the attention products).

Prints the commit, the CPU's model and the date, then one table and the CPU flags that decide
the dtype (avx512_bf16, amx_bf16). Timings
depend on whatever else runs on the machine: run it on an idle one. Even idle, the shares of one
machine moved by 4-8 points between runs (docs/performance.md); ``--rounds N`` measures
everything N times and ends with each share's median and range.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def machine() -> dict:
    """What a record of a measurement says first: the commit (``+changes`` with uncommitted
    changes to tracked files), the CPU's model name and bf16 flags, the date, the package versions."""
    import torch
    import transformers

    from gentax.dtype import BF16_FLAGS, cpu_flags

    def git(*args):
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 platform.processor())
    return {"commit": commit, "cpu": model, "cpu_bf16_flags": sorted(cpu_flags() & set(BF16_FLAGS)),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "torch": torch.__version__, "transformers": transformers.__version__}


def machine_line(header: dict) -> str:
    return (f"commit {header['commit']}; {header['cpu']} (bf16 flags: {', '.join(header['cpu_bf16_flags']) or 'none'}); "
            f"{header['date']}; torch {header['torch']}, transformers {header['transformers']}")


def best_of(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def cpu_flags() -> set[str]:
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.split(":", 1)[-1].split())


def matmul_peak(dtype, repeats: int) -> float:
    import torch

    best = 0.0
    for m, k, n in ((1024, 576, 1536), (2048, 2048, 2048)):
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        seconds = best_of(lambda: a @ b, repeats)
        best = max(best, 2 * m * k * n / seconds / 1e9)
    return best


def bandwidth(repeats: int) -> tuple[float, float]:
    """(GB/s of a 512 MB copy, bytes read + written; GB/s of a 512 MB sum, bytes read)."""
    import torch

    src = torch.ones(128 * 1024 * 1024, dtype=torch.float32)  # 512 MB
    dst = torch.empty_like(src)
    nbytes = src.numel() * 4
    copy_s, read_s = best_of(lambda: dst.copy_(src), repeats), best_of(src.sum, repeats)
    return 2 * nbytes / copy_s / 1e9, nbytes / read_s / 1e9


def decode_seconds(generator, prompts, params, variants, repeats: int) -> dict:
    """{(fast, levers): the least time the generator's decode loop took (its ``stats["decode_s"]``:
    the steps after the prefill, sampling included)} over ``repeats`` calls of each variant, taken
    in turn after a warm-up round (so a change of the machine's load reaches every variant);
    seeded: the same tokens each call."""
    from gentax.rollout import cpu_inference

    times = {variant: [] for variant in variants}
    for _ in range(repeats + 1):
        for fast, levers in variants:
            generator.fast_decode = fast
            cpu_inference.accelerate(generator.model, enabled=levers)
            before = generator.stats["decode_s"]
            generator.generate_ids(prompts, params)
            times[fast, levers].append(generator.stats["decode_s"] - before)
    return {variant: min(seconds[1:]) for variant, seconds in times.items()}


def decode_parts(generator, rows: int, params, repeats: int, width: int) -> tuple[float, float, float | None]:
    """(ms of every weight product of a decode step once on a [rows, in] input, ms of sampling
    ``rows`` rows, ms of the fast step's attention products over KV buffers ``width`` columns wide
    (None without the fast step)): the parts of a decode step that can be timed alone, as jobs run
    it (the fast step's fused, packed products where it applies; else the model's linear layers)."""
    import torch

    from gentax.rollout.generators import sample_rows

    model = generator.model
    dtype = next(model.parameters()).dtype
    decoder = generator._llama_decoder()
    if decoder is not None:
        decoder._refresh()
        products = [(p, p.in_features) for layer in decoder._layers for p in (layer.qkv, layer.out, layer.gate_up, layer.down)]
        products.append((decoder._head, decoder._head.in_features))
    else:
        products = [(m, m.in_features) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    inputs = {width: torch.randn(rows, width, dtype=dtype) for _, width in products}
    vocab = model.config.vocab_size
    logits = torch.randn(rows, vocab)

    def all_linears():
        for product, width in products:
            product(inputs[width])

    def sample():  # the batched sampler a decode step calls (token index 0 for every row)
        sample_rows(logits, params[:rows], [0] * rows).tolist()

    attention = None
    if decoder is not None:  # its two products a layer, each layer's buffers its own (read from memory)
        batch, groups = rows * decoder.kv_heads, decoder.heads // decoder.kv_heads
        layers = len(decoder._layers)
        keys = torch.randn(layers, batch, width, decoder.head_dim, dtype=dtype)
        values = torch.randn(layers, batch, width, decoder.head_dim, dtype=dtype)
        query = torch.randn(batch, groups, decoder.head_dim, dtype=dtype)
        probs = torch.softmax(torch.randn(batch, groups, width), dim=-1).to(dtype)

        def attention():
            for layer in range(layers):
                torch.bmm(query, keys[layer].transpose(1, 2))
                torch.bmm(probs, values[layer])

    with torch.inference_mode():
        return (best_of(all_linears, repeats) * 1000, best_of(sample, repeats) * 1000,
                None if attention is None else best_of(attention, repeats) * 1000)


def model_flops(model) -> tuple[int, int]:
    """(matrix parameters without the LM head, with it): the embedding lookup costs no FLOPs."""
    embed = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight.numel()
    total = sum(p.numel() for p in model.parameters())  # a tied head is counted once, as the embedding
    body = total - embed - (0 if model.config.tie_word_embeddings else head)
    return body, body + head


def attention_flops(model, tokens: int) -> float:
    """Per-sequence QK^T and AV products of a causal prefill of ``tokens`` tokens."""
    c = model.config
    return 2 * 2 * c.num_hidden_layers * c.hidden_size * tokens * tokens / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default=None, help="HF folder (default: the embedded model)")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=330)
    parser.add_argument("--new-tokens", type=int, default=40)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every measurement this many times and print each share's median and range")
    args = parser.parse_args()

    from gentax import malloc

    malloc.tune()  # as every gentax job does (gentax/malloc.py; benchmarks/malloc_prefill.py)
    import torch
    from gentax.rollout.embedded_model import embedded_model_path

    torch.set_num_threads(args.threads)
    print(machine_line(machine()))
    flags = cpu_flags()
    path = args.model or str(embedded_model_path())
    shares: dict[str, list[tuple[float, str]]] = {}  # label -> (share, unit) of each round
    for round_ in range(args.rounds):
        torch.manual_seed(0)
        rows = measure(args, path)
        if args.rounds > 1:
            print(f"round {round_ + 1} of {args.rounds}")
        print_table(args, flags, torch.__version__, rows)
        for label, *_, share in rows:
            if share is not None:
                shares.setdefault(label, []).append(share)
    if args.rounds > 1:  # the spread of the shares between rounds on one machine
        print(f"\nshares over {args.rounds} rounds: median [lowest, highest]")
        width = max(map(len, shares))
        for label, values in shares.items():
            numbers, unit = [v for v, _ in values], values[0][1]
            show = (lambda v: f"{v:.0%}") if unit == "%" else (lambda v: f"{v:.2f}x")
            print(f"{label.ljust(width)}  {show(statistics.median(numbers))} "
                  f"[{show(min(numbers))}, {show(max(numbers))}]")


def measure(args, path) -> list[tuple]:
    """One round of every measurement: rows of (label, measured, limit, share text, (share, "%" or "x") or None)."""
    import torch
    from gentax.rollout import cpu_inference
    from gentax.rollout.generators import HFGenerator, SamplingParams
    from gentax.study.config import study_config
    from gentax.study.plan import study_rl
    from gentax.train.config import load_rl_config
    from gentax.train.local_engine import Policy

    peak = {}
    rows = []
    copy_bw, read_bw = bandwidth(args.repeats)
    bw = max(copy_bw, read_bw)
    rows.append(("memory bandwidth (copy)", f"{copy_bw:.1f} GB/s", "read + written", "", None))
    rows.append(("memory bandwidth (read)", f"{read_bw:.1f} GB/s", "a sum", "", None))
    for name in args.dtypes.split(","):
        dtype = getattr(torch, name)
        peak[name] = matmul_peak(dtype, args.repeats)
        rows.append((f"matrix-product peak {name}", f"{peak[name]:.1f} GFLOP/s", "", "", None))
    for name in args.dtypes.split(","):
        dtype = getattr(torch, name)
        generator = HFGenerator(path, device="cpu", dtype=name, max_batch_size=args.prompts)
        generator.reuse_prefix = False  # the same prompts again and again: every call prefills them in full
        model = generator.model
        non_embed, with_head = model_flops(model)
        vocab = model.config.vocab_size
        prompts = [torch.randint(100, vocab, (args.prompt_tokens,)).tolist() for _ in range(args.prompts)]
        tokens = args.prompts * args.prompt_tokens

        def prefill():
            with torch.inference_mode():
                ids = torch.tensor(prompts)
                model(input_ids=ids, use_cache=False, logits_to_keep=1)

        seconds = best_of(prefill, args.repeats)
        flops = 2 * non_embed * tokens + args.prompts * attention_flops(model, args.prompt_tokens)
        share = flops / seconds / 1e9 / peak[name]
        rows.append((f"prefill {name}", f"{tokens / seconds:.0f} tokens/s", f"{flops / seconds / 1e9:.1f} GFLOP/s",
                     f"{share:.0%} of {name} peak", (share, "%")))

        params = [SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens, seed=i, stop=()) for i in range(args.prompts)]
        outs = generator.generate_ids(prompts, params)
        steps = max(len(o.response_ids) for o in outs)
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        floor_ms = weight_bytes / (bw * 1e9) * 1000
        levers = generator.cpu_levers  # bf16 on a CPU: grouped attention, prepacked linears (same tokens)
        # the decode step as jobs run it first (the fast step where it applies), then transformers'
        # forward, with the levers on and (where there are any) off; all with the same prefill
        variants = [(True, bool(levers))] if generator._llama_decoder() is not None else []
        variants += [(False, True), (False, False)] if levers else [(False, False)]
        decode_s = decode_seconds(generator, prompts, params, variants, args.repeats)
        used_ms = decode_s[variants[0]] / max(steps - 1, 1) * 1000
        for fast, on in variants:
            decode_ms = decode_s[fast, on] / max(steps - 1, 1) * 1000
            label = f"decode {name} (batch {args.prompts}), " + ("fast step" if fast else "transformers' forward") + (
                f", levers {'on' if on else 'off'}" if levers and not fast else "")
            rows.append((label, f"{decode_ms:.1f} ms/step",
                         f"floor {floor_ms:.1f} ms (weights {weight_bytes / 1e6:.0f} MB / bandwidth)",
                         f"{decode_ms / floor_ms:.2f}x the floor", (decode_ms / floor_ms, "x")))
        generator.fast_decode = True
        cpu_inference.accelerate(model, enabled=bool(levers))
        # the fast step's KV buffers: the prompt and room for every token fed back (HFGenerator)
        linear_ms, sample_ms, attention_ms = decode_parts(generator, args.prompts, params, args.repeats,
                                                          args.prompt_tokens + args.new_tokens - 1)
        parts = f"sampling {sample_ms:.1f} ms; " + ("" if attention_ms is None else
                                                    f"attention products {attention_ms:.1f} ms; ")
        rows.append((f"decode {name}: parts of a step", f"linears {linear_ms:.1f} ms",
                     parts + f"the rest {used_ms - linear_ms - sample_ms - (attention_ms or 0.0):.1f} ms",
                     f"linears {linear_ms / floor_ms:.2f}x the floor", (linear_ms / floor_ms, "x")))

        # a GRPO group: --prompts copies of one prompt; its prefill with the shared prefix
        # prefilled once (the generator's default) and without
        group = [prompts[0]] * args.prompts
        one_token = [SamplingParams(temperature=1.0, max_new_tokens=1, seed=i, stop=()) for i in range(args.prompts)]
        timings = {}
        for share in (False, True):
            generator.share_prefix = share
            timings[share] = best_of(lambda: generator.generate_ids(group, one_token), args.repeats)
        rows.append((f"prefill {name}, group of {args.prompts} same prompts", f"{tokens / timings[True]:.0f} tokens/s "
                     f"shared prefix on", f"{tokens / timings[False]:.0f} tokens/s off",
                     f"{timings[False] / timings[True]:.1f}x", (timings[False] / timings[True], "x")))

        # the local engine's update: its own Policy.logprobs (prompts left-padded, responses
        # right-padded, the LM head on the response positions only) and a policy-gradient backward
        policy = Policy(load_rl_config({**study_rl(study_config("paper")), "autocast": "bf16" if name == "bfloat16" else "none", "kl_coef": 0.0}), path, None)
        policy.model.train()
        responses = [o.response_ids for o in outs]
        head_positions = args.prompts * (max(map(len, responses)) + 1)
        update_tokens = sum(len(p) + len(r) for p, r in zip(prompts, responses))

        def update():
            logp, mask, _ = policy.logprobs(policy.model, prompts, responses)
            (-(logp * mask).sum() / mask.sum()).backward()
            policy.model.zero_grad(set_to_none=True)

        seconds = best_of(update, max(1, args.repeats - 1))
        head = with_head - non_embed
        flops = (6 * non_embed * update_tokens + 6 * head * head_positions
                 + 3 * args.prompts * attention_flops(policy.model, args.prompt_tokens + steps))
        label = "update fp32" if name != "bfloat16" else "update fp32 weights, bf16 autocast"
        share = flops / seconds / 1e9 / peak[name]
        rows.append((label, f"{update_tokens / seconds:.0f} tokens/s", f"{flops / seconds / 1e9:.1f} GFLOP/s",
                     f"{share:.0%} of {name} peak", (share, "%")))
        del generator, model, policy
    return rows


def print_table(args, flags, torch_version: str, rows) -> None:
    print(f"threads {args.threads}; CPU flags: " + ", ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
                                                        if f in flags) + f"; torch {torch_version}")
    width = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[:4], width)).rstrip())


if __name__ == "__main__":
    main()
