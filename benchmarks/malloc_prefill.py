"""glibc's malloc defaults against gentax.malloc.tune(), each in a fresh process, in one run.

    python benchmarks/malloc_prefill.py [--calls 10] [--prompts 8] [--threads 1]

Each child loads the embedded model (the dtype gentax.dtype picks, with the hf generator's CPU
levers), then prefills ``--prompts`` random prompts ``--calls`` times, each call 13 tokens wider
than the one before (as an evaluation's turns are), and prints its prefill tokens/s per call and
its user and system CPU seconds. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time


def child(args) -> None:
    if args.tuned:
        from gentax import malloc

        assert malloc.tune(), "glibc did not take the settings"
    import torch

    from gentax.rollout.embedded_model import embedded_model_path
    from gentax.rollout.generators import HFGenerator

    torch.set_num_threads(args.threads)
    generator = HFGenerator(str(embedded_model_path()), device="cpu")  # its dtype choice and CPU levers
    model, dtype = generator.model.eval(), generator.compute_dtype
    gen = torch.Generator().manual_seed(0)
    rates = []
    for call in range(args.calls):
        width = 300 + 13 * call
        ids = torch.randint(100, 40000, (args.prompts, width), generator=gen)
        start = time.perf_counter()
        with torch.inference_mode():
            model(input_ids=ids, use_cache=True, logits_to_keep=1)
        rates.append(args.prompts * width / (time.perf_counter() - start))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{dtype}; prefill tokens/s per call: {' '.join(f'{r:.0f}' for r in rates)}; "
          f"mean {sum(rates) / len(rates):.0f}; user {usage.ru_utime:.1f} s, system {usage.ru_stime:.1f} s, "
          f"max RSS {usage.ru_maxrss / 1e6:.2f} GB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tuned", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    common = [sys.executable, __file__, "--child", "--calls", str(args.calls), "--prompts", str(args.prompts),
              "--threads", str(args.threads)]
    for label, extra in (("glibc defaults", []), ("gentax.malloc.tune()", ["--tuned"])):
        out = subprocess.run(common + extra, env=env, capture_output=True, text=True, check=True)
        print(f"{label:22s} {out.stdout.strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()
