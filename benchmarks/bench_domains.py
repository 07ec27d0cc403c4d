"""Steps per second of each domain through gentax beside the raw package env, in one run.

    python benchmarks/bench_domains.py [--domains sokoban,webshop,alfworld,sciworld] [--tasks 20] [--rounds 5]

For every domain in ``ROWS`` (domain -> (gentax ``Runner`` factory, raw one)): the expert's action
scripts replayed through the gentax env and the raw engine, alternating ``--rounds`` times, only the
step calls timed. Prints the steps/s of each and the wrapper overhead (target <= 5 %). To add a
domain, write its raw runner and add a row.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from typing import Any

from gentax.domains import Task, make


class Runner:
    """``reset(task)``, ``prepare(action) -> native`` (untimed; the action text by default), ``step(native)``."""

    def prepare(self, action: str) -> Any:
        return action


class GentaxRunner(Runner):
    """Any domain through the protocol (``env.step`` with the action text)."""

    def __init__(self, domain: str, split: str):
        self.env = make(domain, split=split, max_steps=1000)

    def reset(self, task: Task) -> None:
        self.env.reset(task)

    def step(self, native: str):
        return self.env.step(native)


class RawSokoban(Runner):
    """gym-sokoban's own SokobanEnv room stepping: what ``SokobanEnv.step`` does (push/move,
    reward, done check) without drawing the RGB frame it renders every step."""

    def __init__(self, split: str):
        from gentax.domains.sokoban import ACTIONS

        self.codes = {a: 1 + i for i, a in enumerate(ACTIONS)}  # gym-sokoban 1..4 = push up/down/left/right

    def reset(self, task: Task) -> None:
        from gentax.domains.sokoban import gym_sokoban_env

        self.env = gym_sokoban_env(task.spec)

    def prepare(self, action: str) -> int:
        return self.codes[action]

    def step(self, native: int):
        env = self.env
        env.num_env_steps += 1
        env._push(native)
        env._calc_reward()
        return env.reward_last, env._check_if_done()


class RawWebShop(Runner):
    """gentax's WebShop IS the package: its engine (site state machine + score) without the
    protocol layer (action-text checks, Observation, info, step counting)."""

    def __init__(self, split: str):
        self.env = make("webshop", split=split)  # for its catalog and engine only

    def reset(self, task: Task) -> None:
        self.env.engine.reset(task.spec)

    def step(self, native: str):
        return self.env.engine.act(native)


class RawAlfworld(Runner):
    """alfworld's TextWorld stack (PddlEnv -> AlfredDemangler -> AlfredInfos) stepped directly."""

    def __init__(self, split: str):
        from gentax.domains.alfworld import engine as alf_engine

        self.alf = alf_engine
        self.games = make("alfworld", split=split)  # only to find (or generate) the game files
        self.engine = alf_engine.make_engine()

    def reset(self, task: Task) -> None:
        self.alf.load_game(self.engine, self.games.game_file(task))

    def step(self, native: str):
        return self.engine.step(native)


class RawSciworld(Runner):
    """The scienceworld package's ``ScienceWorldEnv`` in this process, stepped through its simulator
    handle with the work gentax's worker does per step, so the difference is gentax's process hop +
    protocol (its public ``step`` also lists the valid actions every step: far slower)."""

    def __init__(self, split: str):
        import os

        from scienceworld import ScienceWorldEnv

        from gentax.domains.sciworld import DETERMINISTIC_JVM_OPTIONS

        saved = os.environ.get("JAVA_TOOL_OPTIONS")
        os.environ["JAVA_TOOL_OPTIONS"] = " ".join(["-Xmx768m", *DETERMINISTIC_JVM_OPTIONS])  # the same JVM as gentax's
        try:
            self.env = ScienceWorldEnv("")
        finally:
            if saved is None:
                os.environ.pop("JAVA_TOOL_OPTIONS")
            else:
                os.environ["JAVA_TOOL_OPTIONS"] = saved
        self.server = self.env.server

    def reset(self, task: Task) -> None:
        spec = task.spec
        self.env.load(spec["task_name"], spec["variation"], spec["simplifications"])
        self.server.step("look around")

    def step(self, native: str):
        text = self.server.step(native)
        if text.startswith("Ambiguous request"):
            text = self.server.step("0")
        return text, self.server.getScore(), self.server.getCompleted()


#: domain -> (its gentax runner, its raw runner), each made from the split
ROWS = {domain: (functools.partial(GentaxRunner, domain), raw) for domain, raw in (
    ("sokoban", RawSokoban), ("webshop", RawWebShop), ("alfworld", RawAlfworld), ("sciworld", RawSciworld))}


def expert_scripts(domain: str, split: str, n: int) -> list[tuple[Task, list[str]]]:
    env = make(domain, split=split, max_steps=1000)
    scripts = []
    for seed in range(n):
        task = env.task(seed)
        env.reset(task)
        actions = []
        while not env.done:
            actions.append(env.expert_action())
            env.step(actions[-1])
        scripts.append((task, actions))
    env.close()
    return scripts


def time_episode(runner: Runner, task: Task, actions: list[str]) -> float:
    runner.reset(task)
    natives = [runner.prepare(a) for a in actions]
    step = runner.step
    start = time.perf_counter()
    for native in natives:
        step(native)
    return time.perf_counter() - start


def bench(domain: str, split: str, tasks: int, rounds: int) -> dict[str, float]:
    """Per episode, the fastest of ``rounds`` replays (gentax and raw alternate, order swapped
    every round), summed: the machine is shared, and the minimum is the least-disturbed run."""
    make_gentax, make_raw = ROWS[domain]
    scripts = expert_scripts(domain, split, tasks)
    runners = {"gentax": make_gentax(split), "raw": make_raw(split)}
    best = {name: [float("inf")] * len(scripts) for name in runners}
    for round_no in range(rounds + 1):  # round 0 warms caches and is not counted
        order = ("gentax", "raw") if round_no % 2 else ("raw", "gentax")
        for i, (task, actions) in enumerate(scripts):
            for name in order:
                elapsed = time_episode(runners[name], task, actions)
                if round_no:
                    best[name][i] = min(best[name][i], elapsed)
    steps = sum(len(actions) for _, actions in scripts)
    g, r = sum(best["gentax"]), sum(best["raw"])
    return {"steps": steps, "gentax_steps_per_s": steps / g, "raw_steps_per_s": steps / r, "overhead_pct": 100 * (g / r - 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", default=",".join(ROWS))
    parser.add_argument("--split", default="eval")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{'domain':10} {'steps':>6} {'gentax steps/s':>15} {'raw steps/s':>12} {'overhead':>9}")
    for domain in args.domains.split(","):
        if domain not in ROWS:
            print(f"{domain:10} (no row in ROWS)", file=sys.stderr)
            continue
        r = bench(domain, args.split, args.tasks, args.rounds)
        print(f"{domain:10} {r['steps']:6d} {r['gentax_steps_per_s']:15.0f} {r['raw_steps_per_s']:12.0f} {r['overhead_pct']:8.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
