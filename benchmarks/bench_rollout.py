"""Rollout benchmark on the embedded model (CPU): where a turn's wall time goes, and what
batching buys.

    python benchmarks/bench_rollout.py [--domains sokoban,webshop] [--batch 8] [--steps 2]
                                       [--new-tokens 32] [--threads N] [--parts split,throughput]

1. Turn time split: ``collect`` of ``--batch`` trajectories per domain, the collector's clock split
   into generation, env, other and resets; the share outside generation (target <= 10 %).
2. Throughput: ``--batch`` Sokoban prompts generated as one batched call vs one call per prompt,
   each forced to ``--new-tokens`` tokens, in response tokens per second.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", default="sokoban,webshop")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--parts", default="split,throughput", help="which parts to run")
    args = parser.parse_args()

    import torch

    from gentax.rollout.embedded_model import embedded_model_path
    from gentax.rollout.generators import HFGenerator

    if args.threads:
        torch.set_num_threads(args.threads)
    generator = HFGenerator(str(embedded_model_path()), device="cpu", max_batch_size=args.batch)
    generator.reuse_prefix = False  # the same prompts again and again: every call prefills them in full
    print(f"embedded model on CPU, torch threads {torch.get_num_threads()}, batch {args.batch}")

    parts = set(args.parts.split(","))
    if "split" in parts:
        turn_split(args, generator)
    if "throughput" in parts:
        throughput(args, generator)


def turn_split(args, generator) -> None:
    from gentax.rollout.collector import CollectConfig, collect
    from gentax.rollout.generators import SamplingParams

    print("\n== turn time split (collector clock) ==")
    print(f"{'domain':9s} {'steps':>5s} {'generate s':>10s} {'env s':>7s} {'other s':>7s} {'reset s':>7s} {'outside gen':>11s} {'ms/step outside':>15s}")
    for domain in args.domains.split(","):
        cfg = CollectConfig(domain=domain, split="eval", max_steps=args.steps,
                            sampling=SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens))
        stats = collect(generator, list(range(args.batch)), cfg, progress=False).stats
        outside = stats["env_s"] + stats["other_s"]
        share = outside / (outside + stats["generate_s"])
        print(f"{domain:9s} {stats['steps']:5d} {stats['generate_s']:10.2f} {stats['env_s']:7.3f} {stats['other_s']:7.3f} {stats['reset_s']:7.2f} "
              f"{share:10.2%} {1000 * outside / stats['steps']:15.1f}")


def throughput(args, generator) -> None:
    from gentax.agent.prompts import build_messages
    from gentax.domains import make
    from gentax.domains.pool import EnvPool
    from gentax.rollout.generators import SamplingParams

    print("\n== throughput: batched vs one by one ==")
    with EnvPool("sokoban", "eval") as pool:
        with make("sokoban", split="eval") as planner:
            tasks = [planner.task(seed) for seed in range(args.batch)]
        prompts = [build_messages("sokoban", obs, [], 0) for obs in pool.reset(tasks)]
    params = [SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens, seed=i, stop=()) for i in range(len(prompts))]
    generator.generate(prompts[:1], params[:1])  # warm-up
    start = time.perf_counter()
    batched = generator.generate(prompts, params)
    batched_s = time.perf_counter() - start
    start = time.perf_counter()
    single = [generator.generate([p], [sp])[0] for p, sp in zip(prompts, params)]
    single_s = time.perf_counter() - start
    tokens_b = sum(len(g.response_ids) for g in batched)
    tokens_s = sum(len(g.response_ids) for g in single)
    prompt_tokens = sum(len(g.prompt_ids) for g in batched)
    print(f"{len(prompts)} prompts ({prompt_tokens / len(prompts):.0f} prompt tokens each), up to {args.new_tokens} new tokens each")
    print(f"batched    : {tokens_b} tokens in {batched_s:7.2f} s = {tokens_b / batched_s:6.2f} tok/s")
    print(f"one by one : {tokens_s} tokens in {single_s:7.2f} s = {tokens_s / single_s:6.2f} tok/s")
    print(f"speed-up   : {(tokens_b / batched_s) / (tokens_s / single_s):.2f}x")


if __name__ == "__main__":
    main()
