"""The generator's levers (prefill, and the decode KV cache) on and off in one run, on whole
evaluations as the eval jobs run them; and the decode step (the fast step or transformers' forward).

    python benchmarks/prefill_levers.py --model results/model/embedded_base [--domains webshop,sciworld]
                                        [--repeats 2] [--threads 1]

For each domain: the embedded preset's evaluation (`gentax eval` arguments from
benchmarks/eval_model.py, hf generator, in this process) collected in four settings,
alternately ``--repeats`` times each: all levers on (what the jobs run), decode steps through
transformers' forward ("hf step"), that with the KV cache grown by concatenation, prefix reuse
off, both prefill levers off. The levers (gentax.rollout.generators.HFGenerator, docs/rollout.md):
- ``group_prefill``: a micro-batch's prompts prefilled in groups of similar length, each padded
  only to its own longest prompt (``prefill_groups``);
- ``reuse_prefix``: the previous call's KV reused for a prompt that begins with one of its
  prompts (an episode's intro and task, one turn later);
- ``preallocate_kv``: decoding into a KV cache allocated once per micro-batch for its whole
  response length (gentax.rollout.kv_cache) instead of one grown by ``torch.cat`` every step
  (transformers' forward only: the fast step has its own static cache);
- ``fast_decode``: decode steps through gentax.rollout.llama_decode where it runs the model.
Printed per domain and setting: the collector's generation seconds (best of the repeats) and
the generator's own split of them (``stats``: prefill seconds, decode-step seconds with sampling),
the prompt positions the prefill calls computed (padding included), and whether the responses
equal those of the first setting. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from eval_model import eval_arguments  # noqa: E402  (the eval jobs' arguments)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--domains", default="webshop,sciworld,alfworld,sokoban")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (an eval job runs on one core)")
    args = ap.parse_args()

    from gentax import malloc

    malloc.tune()  # as every gentax job does
    import torch

    from gentax.cli import build_parser
    from gentax.study.config import load_config
    from gentax.study.plan import eval_episodes
    from gentax.rollout import cli as rollout_cli
    from gentax.rollout.collector import collect

    torch.set_num_threads(args.threads)
    cfg = load_config([str(REPO / "config" / "config.yaml"), str(REPO / "config/embedded.yaml")])
    out = Path(tempfile.mkdtemp(prefix="gentax-prefill-"))  # eval_arguments needs an --out
    print(f"{'domain':10} {'levers':>9} {'generate s':>10} {'/ both off':>9} {'prefill s':>9} {'decode s':>8} "
          f"{'prefilled positions':>19} {'same responses':>14}")
    for domain in args.domains.split(","):
        parsed = build_parser().parse_args(eval_arguments(cfg, domain, args.model, eval_episodes(cfg, domain), out))
        generator, seeds, collect_cfg, _, _ = rollout_cli._setup(parsed)
        settings = {"all on": (True, True, True, True), "hf step": (True, True, True, False),
                    "kv grown": (True, True, False, False), "reuse off": (True, False, True, True),
                    "both off": (False, False, True, True)}
        best, split, prefilled, responses = {}, {}, {}, {}
        for _ in range(args.repeats):
            for name, (grouped, reuse, preallocate, fast) in settings.items():
                generator.group_prefill, generator.reuse_prefix, generator.preallocate_kv = grouped, reuse, preallocate
                generator.fast_decode = fast
                generator.clear_prefix_cache()  # nothing carried over from the previous setting's run
                before = dict(generator.stats)
                rollouts = collect(generator, seeds, collect_cfg, progress=False)
                if rollouts.stats["generate_s"] < best.get(name, float("inf")):
                    best[name] = rollouts.stats["generate_s"]
                    split[name] = [generator.stats[k] - before[k] for k in ("prefill_s", "decode_s")]
                prefilled[name] = generator.stats["prefill_positions"] - before["prefill_positions"]
                responses[name] = [t.response_ids for t in rollouts.tokens]
        for name in settings:
            print(f"{domain:10} {name:>9} {best[name]:10.1f} {best[name] / best['both off']:9.2f} {split[name][0]:9.1f} "
                  f"{split[name][1]:8.1f} {prefilled[name]:19,} "
                  f"{str(responses[name] == responses['all on']):>14}", flush=True)


if __name__ == "__main__":
    main()
