"""The local engine's RL update against its micro-batch size: tokens/s and peak memory of one
mini-batch's forward and backward passes (the engine's own ``local_engine.micro_batch_backward``:
``Policy.logprobs``, the GRPO loss, ``deterministic_attention`` and the strict backward), so that ``rl.micro_batch_size`` is chosen from a
measurement (issue #45): the largest size whose peak memory leaves room for the jobs sharing the GPU,
unless a smaller one is as fast.

    python3 benchmarks/gpu1/update_speed.py OUT.json [--sizes 4,8,16,32,64] [--rows 64] [--repeats 3]
    python3 benchmarks/gpu1/update_speed.py OUT.json --device cpu --tiny   (the CPU test's smoke run)

Model and batch: benchmarks/gpu1/update_twice.py's (SmolLM2-135M's shape, random float32 weights,
bf16 autocast on a GPU; ``--rows`` step samples of an RL step's shape, sorted by length into
micro-batches as the engine does). Per size: the median over ``--repeats`` of one mini-batch's
wall seconds (after one warm-up), prompt+response tokens per second, and the peak memory torch
allocated (``torch.cuda.max_memory_allocated``; a CPU reports none). Printed as a table, written as
JSON with the device, torch version and date.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from update_twice import REPO, _batch, _model, _policy  # noqa: E402  (the same model, batch and Policy)

sys.path.insert(0, str(REPO))


def mini_batch_pass(policy, prompts, responses, advantages, size: int) -> None:
    """One mini-batch's passes as ``gentax.train.local_engine.update_policy`` makes them: sorted by
    length, micro-batches of ``size``, each ``micro_batch_backward``."""
    from gentax.train import grpo
    from gentax.train.local_engine import micro_batch_backward

    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]) + len(responses[i]))
    tokens = float(sum(map(len, responses)))
    policy.model.zero_grad(set_to_none=True)
    for start in range(0, len(order), size):
        idx = order[start : start + size]
        micro_batch_backward(policy, [prompts[i] for i in idx], [responses[i] for i in idx], advantages[idx], tokens,
                             grpo.LossConfig(kl_coef=0.0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--sizes", default="4,8,16,32,64")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    import torch

    from gentax.dtype import deterministic_kernels

    cuda = args.device.startswith("cuda")
    deterministic_kernels(torch.device(args.device))
    model = _model(args.device, args.tiny)
    policy = _policy(model, args.device)
    prompts, responses, advantages = _batch(model.config.vocab_size, args.tiny, args.rows)
    all_tokens = sum(len(p) + len(r) for p, r in zip(prompts, responses))
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        error, seconds, peak = None, [], None
        try:
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            for repeat in range(args.repeats + 1):  # the first is a warm-up
                started = time.perf_counter()
                mini_batch_pass(policy, prompts, responses, advantages, size)
                if cuda:
                    torch.cuda.synchronize()
                if repeat:
                    seconds.append(time.perf_counter() - started)
            peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
        except torch.OutOfMemoryError as exc:
            error = f"out of memory: {str(exc).splitlines()[0][:200]}"
        wall = statistics.median(seconds) if seconds else None
        rows.append({"micro_batch_size": size, "seconds": wall, "tokens_per_s": all_tokens / wall if wall else None,
                     "peak_gib": peak, "error": error})
        print(f"micro-batch {size:4d}: " + (error or f"{wall:.3f} s a mini-batch of {args.rows}, "
                                                    f"{all_tokens / wall:,.0f} tokens/s"
                                                    + (f", peak {peak:.1f} GiB" if peak is not None else "")), flush=True)
    record = {"device": torch.cuda.get_device_name(0) if cuda else "CPU", "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": args.rows, "tokens": all_tokens,
              "repeats": args.repeats, "sizes": rows}
    from gentax.io import write_json

    write_json(args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
