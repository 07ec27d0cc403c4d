"""Env seconds of an RL run's rollouts: a fresh env pool each step (before) against one pool kept
for the run (``EnvPools``), with a domain's envs called one after another or side by side
(``DomainEnv.concurrent_calls``), in one run.

    python benchmarks/env_pool_reuse.py [--domain sciworld] [--config config/gpu1.yaml] [--batch 16]
                                        [--steps 3] [--arms fresh-serial,kept-serial,kept-concurrent]

Each arm collects ``--steps`` "RL steps" of ``--batch`` train episodes (task seeds 0.. of step k
shifted by k x batch, as a run draws new tasks each step) with the domain's step limit and options
from ``--config`` (the preset's ``domains.<domain>``), through the real collector and pool. The
generator is a stand-in that answers every turn with the same valid action ("look around" in
SciWorld, "look" in ALFWorld, ...: ``STAND_IN``), so the figures are the envs' and the collector's,
no model: what an RL step spends outside generation. Arms:

- ``fresh-serial``: a new pool every step, envs called in turn (the local engine before EnvPools;
  SciWorld: every step starts its batch's JVMs one after another);
- ``kept-serial``: one pool for all steps (``EnvPools``), envs called in turn;
- ``kept-concurrent``: one pool, a batch's envs called from threads at once (what runs now for a
  domain with ``concurrent_calls``; for others it equals ``kept-serial``).

Printed per arm: seconds per step (first step apart: it starts the envs), reset and env seconds,
and the machine's CPU seconds over the arm (``/proc/stat``: every process, JVMs included, so run it
on an idle machine). Timings live here, never in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import subprocess
import time
from pathlib import Path

from gentax.domains import domain_class
from gentax.rollout.collector import CollectConfig, EnvPools, collect
from gentax.rollout.generators import Generation
from gentax.study.config import study_config

#: one valid, harmless action per domain: the stand-in generator's every answer
STAND_IN = {"sciworld": "look around", "alfworld": "look", "webshop": "search[shoes]", "sokoban": "up"}
ARMS = ("fresh-serial", "kept-serial", "kept-concurrent")


class StandIn:
    """Answers every prompt with the domain's STAND_IN action (no model)."""

    def __init__(self, action: str):
        self.text = f"<think>look</think><action>{action}</action>"

    def generate(self, prompts, params, hints=None, prefixes=None):
        return [Generation(self.text, [1], [2], None, "stop") for _ in prompts]


def machine_cpu_s() -> float:
    """CPU seconds every process of the machine has used (user + system), from /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system = (int(v) for v in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def concurrency(domain: str, on: bool):
    cls = domain_class(domain)
    saved = cls.concurrent_calls
    cls.concurrent_calls = on
    try:
        yield
    finally:
        cls.concurrent_calls = saved


def run_arm(arm: str, domain: str, settings: dict, batch: int, steps: int) -> dict:
    generator = StandIn(STAND_IN[domain])
    per_step, resets, envs = [], [], []
    cpu0 = machine_cpu_s()
    with concurrency(domain, arm.endswith("concurrent")), EnvPools() as pools:
        for step in range(steps):
            cfg = CollectConfig(domain=domain, split="train", max_steps=settings["max_steps"],
                                env_options=dict(settings.get("options") or {}), seed=step)
            seeds = list(range(step * batch, (step + 1) * batch))
            run = collect if arm.startswith("fresh") else pools.collect
            started = time.perf_counter()
            rollouts = run(generator, seeds, cfg, progress=False)
            per_step.append(time.perf_counter() - started)
            resets.append(rollouts.stats["reset_s"])
            envs.append(rollouts.stats["env_s"])
    cpu = machine_cpu_s() - cpu0
    return {"arm": arm, "first_s": per_step[0], "later_s": sum(per_step[1:]) / max(1, steps - 1),
            "reset_s": sum(resets) / steps, "env_s": sum(envs) / steps, "machine_cpu_s": cpu, "total_s": sum(per_step)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="sciworld", choices=sorted(STAND_IN))
    parser.add_argument("--config", default="config/gpu1.yaml", help="a preset whose domains.<domain> to use")
    parser.add_argument("--batch", type=int, default=16, help="episodes a step (the gpu1 preset's RL step: 2 x 8 = 16)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--arms", default=",".join(ARMS))
    args = parser.parse_args(argv)
    settings = study_config(configfiles=[args.config], check=False)["domains"][args.domain]  # as its preset lays it
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# {args.domain} ({args.config}: max_steps {settings['max_steps']}), {args.batch} episodes x {args.steps} steps a "
          f"run, stand-in generator; commit {commit}, {platform.node()} ({os.cpu_count()} cores), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.1f} at the start")
    print("arm               first step s  later steps s  reset s/step  env s/step  machine CPU s  total s")
    for arm in args.arms.split(","):
        row = run_arm(arm, args.domain, settings, args.batch, args.steps)
        print(f"{arm:17s} {row['first_s']:12.1f} {row['later_s']:14.1f} {row['reset_s']:13.1f} {row['env_s']:11.1f} "
              f"{row['machine_cpu_s']:14.1f} {row['total_s']:8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
