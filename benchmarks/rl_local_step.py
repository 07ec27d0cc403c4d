"""Seconds per training step of the local RL engine, per domain (prints a table; no asserts).

    python benchmarks/rl_local_step.py [--domains sokoban webshop ...] [--steps 2] [--group N]
        [--tasks N] [--max-steps N] [--max-new-tokens N] [--model DIR] [--lora-rank N] [--out DIR]

Runs ``gentax train rl --engine local`` (through ``train_rl``) on the embedded model (default;
``--model results/model/embedded_base`` for the warm-started base) with the embedded preset and
the embedded study's RL section and domain knobs (config/embedded.yaml); the sizes given here
replace the config's. Then it prints each step's metrics.csv row: wall seconds split into
rollout and update, samples and tokens, success, invalid rate, loss, KL, entropy. Step time
scales with samples x prompt length (every sample is a forward for generation, one for the
reference and a forward+backward for the update).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    import pandas as pd
    from gentax.study.config import study_config
    from gentax.study.plan import study_rl

    from gentax.dtype import rl_autocast
    from gentax.rollout.embedded_model import embedded_model_path
    from gentax.runspec import from_defaults
    from gentax.train.cli import train_rl

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", nargs="+", default=["sokoban", "webshop", "alfworld", "sciworld"])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--group", type=int, help="default: config/embedded.yaml rl.group_size")
    parser.add_argument("--tasks", type=int, help="default: rl.tasks_per_step")
    parser.add_argument("--max-steps", type=int, help="episode step limit (default: each domain's max_steps)")
    parser.add_argument("--max-new-tokens", type=int, help="default: rl.max_new_tokens")
    parser.add_argument("--lora-rank", type=int, help="default: rl.lora_rank")
    parser.add_argument("--model", default=None, help="HF folder (default: the embedded model)")
    parser.add_argument("--out", default=None, help="where the runs go (default: a temporary folder)")
    parser.add_argument("--dtypes", default="auto", help="engines.dtype values to compare, comma-separated")
    args = parser.parse_args()

    embedded = study_config("embedded")  # the embedded study, resolved (config/config.yaml under config/embedded.yaml)
    model = args.model or str(embedded_model_path())
    out = Path(args.out or tempfile.mkdtemp(prefix="rl_bench_"))
    columns = ["step", "seconds", "cpu_s", "rollout_s", "update_s", "samples", "prompt_tokens_mean", "response_tokens",
               "tokens_per_s", "train_tokens_per_s",
               "id_success", "invalid_rate", "loss", "kl", "entropy", "adv_std"]
    rl = study_rl(embedded)  # the RL block as the study's jobs get it (val_temperature from eval)
    for key, value in (("group_size", args.group), ("tasks_per_step", args.tasks),
                       ("max_new_tokens", args.max_new_tokens), ("lora_rank", args.lora_rank)):
        if value is not None:
            rl[key] = value
    print(f"model {model}; RL section {rl}; {os.cpu_count()} cpus; load {os.getloadavg()[0]:.1f}")
    for domain in args.domains:
        for setting in args.dtypes.split(","):
            section = {**rl, "save_every": args.steps, "autocast": rl_autocast(setting)}
            settings = {"max_steps": args.max_steps or embedded["domains"][domain]["max_steps"],
                        "options": embedded["domains"][domain].get("options", {})}
            run = from_defaults(init=model, domain=domain, variant="default", seed=0, steps=args.steps,
                                domains={domain: settings})
            started = time.perf_counter()
            train_rl("local", section, init=model, run=run, start=0, end=args.steps,
                     run_dir=str(out / setting / domain), progress=False)
            log = pd.read_csv(out / setting / domain / "metrics.csv")
            print(f"\n== {domain}, dtype {setting}: {args.steps} steps in {time.perf_counter() - started:.0f} s "
                  f"(load {os.getloadavg()[0]:.1f})")
            print(log[[c for c in columns if c in log]].to_string(index=False, float_format=lambda v: f"{v:.4g}"))

if __name__ == "__main__":
    main()
