"""Seconds per ALFWorld reset without and with the per-process game cache (``engine.GameCache``).

    python benchmarks/alfworld_reset.py [--games 4] [--resets 5] [--split eval] [--scene study|whole]
                                        [--option KEY=VALUE ...] [--cache DIR]

Generates task seeds ``0 .. games - 1`` first (untimed; into a fresh temporary folder, or
``--cache``), then per game times ``--resets`` resets of one env with no process cache
(``GAME_CACHE = None``: TextWorld parses the grammar and translates the PDDL on every reset)
and ``--resets`` resets with a fresh cache (the first one parses, the others reuse). Prints
per game the median of each, the cached env's first reset, and the ratio; then the medians
over all games. Scene: ``study`` (default) is the ALFWorld scene of config/embedded.yaml and
config/gpu1.yaml, ``whole`` the whole floor plan; ``--option`` overrides a knob. Timings live
here, never in tests.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from gentax.domains import make
from gentax.domains.alfworld import engine as alf_engine
from gentax.domains.cli import parse_options

SCENES = {
    "study": {"task_types": ["pick_and_place", "look_at_obj"], "max_receptacles": 4, "max_objects": 6},
    "whole": {},
}


def reset_seconds(env, task, resets: int) -> list[float]:
    seconds = []
    for _ in range(resets):
        start = time.perf_counter()
        env.reset(task)
        seconds.append(time.perf_counter() - start)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=4)
    parser.add_argument("--resets", type=int, default=5)
    parser.add_argument("--split", default="eval")
    parser.add_argument("--scene", choices=sorted(SCENES), default="study")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cache", default=None)
    args = parser.parse_args(argv)
    options = SCENES[args.scene] | parse_options(args.option)
    cache_dir = args.cache or tempfile.mkdtemp(prefix="gentax-alfworld-reset-")
    with make("alfworld", split=args.split, cache_dir=cache_dir, **options) as env:
        tasks = [env.task(seed) for seed in range(args.games)]
        for task in tasks:
            env.game_file(task)  # generate now, untimed
        print(f"scene {options}, {args.resets} resets per game and setting")
        print(f"{'seed':>5} {'task type':32} {'no cache s':>10} {'cache s':>8} {'first s':>8} {'ratio':>6}")
        without, with_cache = [], []
        for task in tasks:
            alf_engine.GAME_CACHE = None
            plain = statistics.median(reset_seconds(env, task, args.resets))
            alf_engine.GAME_CACHE = alf_engine.GameCache()
            cached_runs = reset_seconds(env, task, args.resets)
            cached = statistics.median(cached_runs)
            without.append(plain)
            with_cache.append(cached)
            print(f"{task.seed:5d} {task.spec.get('task_type', '-'):32} {plain:10.3f} {cached:8.3f} "
                  f"{cached_runs[0]:8.3f} {plain / cached:5.1f}x")
    print(f"median reset seconds over {len(tasks)} games: no cache {statistics.median(without):.3f}, "
          f"cache {statistics.median(with_cache):.3f} ({statistics.median(without) / statistics.median(with_cache):.1f}x)")
    print(f"games: {cache_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
