"""``gentax domains check``: play a domain's expert on N tasks (seeds ``seed ..``, in lockstep batches
through ``EnvPool``) and report success rate, observation size and episode length; exit 1 when the
expert failed an episode (docs/domains.md "Checking a domain"). ``gentax tasks``: a domain's
held-out task manifest (``gentax.domains.tasks``).
"""

from __future__ import annotations

import argparse
import json
import time

from gentax import jobspec
from gentax.domains import make
from gentax.domains.pool import EnvPool
from gentax.domains.tasks import TasksJob
from gentax.errors import GentaxError
from gentax.io import write_json


def register(subparsers) -> None:
    domains = subparsers.add_parser("domains", help="agent domains (ALFWorld, WebShop, Sokoban, SciWorld)")
    sub = domains.add_subparsers(dest="domains_command", required=True, metavar="SUBCOMMAND")
    check = sub.add_parser("check", help="play the expert on N tasks; report success, observation size, length")
    check.add_argument("--domain", required=True)
    check.add_argument("--episodes", type=int, default=10)
    check.add_argument("--split", default="eval")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--json", dest="json_path", default=None, help="also write the report here (JSON)")
    check.add_argument("--num-workers", type=int, default=0)
    check.add_argument("--max-steps", type=int, default=None)
    check.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                       help="domain option (difficulty knob); VALUE is JSON when it parses, else a string")
    check.set_defaults(func=run_check)

    tasks = subparsers.add_parser("tasks", help="write a domain's held-out eval task manifest (seeds + fingerprint)")
    jobspec.add_arguments(tasks)
    tasks.add_argument("--domain")
    tasks.add_argument("--episodes", type=int, help="number of eval tasks (seeds 0..N-1)")
    tasks.add_argument("--split", default="eval")
    tasks.add_argument("--max-steps", type=int, default=None)
    tasks.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                       help="domain option (difficulty knob); VALUE is JSON when it parses, else a string")
    tasks.add_argument("--out")
    tasks.set_defaults(func=run_tasks)


def run_tasks(args: argparse.Namespace) -> int:
    spec = jobspec.take(TasksJob, args)
    if args.check:
        return 0
    if spec is None:
        if args.domain is None or args.episodes is None or args.out is None:
            raise GentaxError("gentax tasks: give --domain, --episodes and --out (or --job SPEC)")
        spec = TasksJob(domain=args.domain, episodes=args.episodes, split=args.split, max_steps=args.max_steps,
                        options=parse_options(args.option), out=args.out)
    manifest = spec.run()
    print(f"{spec.domain}: {len(manifest['seeds'])} {spec.split} tasks, fingerprint {manifest['fingerprint'][:16]}")
    return 0


def parse_options(pairs: list[str]) -> dict:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise GentaxError(f"--option expects KEY=VALUE, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def check_domain(domain: str, episodes: int, split: str = "eval", seed: int = 0, *, num_workers: int = 0,
                 max_steps: int | None = None, **options) -> dict:
    """Play the expert on ``episodes`` tasks; the report ``gentax domains check`` prints."""
    if episodes < 1:
        raise GentaxError(f"--episodes must be >= 1, got {episodes}")
    started = time.perf_counter()
    with make(domain, split=split, seed=seed, max_steps=max_steps, **options) as planner:
        tasks = [planner.task(seed + i) for i in range(episodes)]
    wins, lengths, obs_chars, failed, errors, steps = 0, [], [], [], [], 0
    batch = max(1, num_workers)
    with EnvPool(domain, split, num_workers=num_workers, seed=seed, max_steps=max_steps, **options) as pool:
        for start in range(0, episodes, batch):
            chunk = tasks[start : start + batch]
            current = dict(enumerate(pool.reset(chunk)))
            live = set(current)
            while live:
                slots = sorted(live)
                obs_chars += [len(current[s].text) for s in slots]
                results = pool.step(pool.expert_actions(slots))
                steps += len(results)
                for slot, (obs, _reward, done, info) in results.items():
                    current[slot] = obs
                    if not done:
                        continue
                    live.discard(slot)
                    lengths.append(info["steps"])
                    wins += bool(info["won"])
                    if not info["won"]:
                        failed.append(chunk[slot].seed)
                    if "error" in info:
                        errors.append({"seed": chunk[slot].seed, "error": info["error"]})
    elapsed = time.perf_counter() - started
    return {
        "domain": domain,
        "split": split,
        "seed": seed,
        "episodes": episodes,
        "options": options,
        "max_steps": max_steps,
        "success_rate": wins / episodes,
        "mean_obs_chars": sum(obs_chars) / len(obs_chars),
        "mean_length": sum(lengths) / len(lengths),
        "failed_seeds": sorted(failed),
        "errors": errors,
        "steps": steps,
        "seconds": round(elapsed, 3),
        "steps_per_s": round(steps / elapsed, 1) if elapsed > 0 else None,
    }


def run_check(args: argparse.Namespace) -> int:
    report = check_domain(
        args.domain, args.episodes, args.split, args.seed, num_workers=args.num_workers,
        max_steps=args.max_steps, **parse_options(args.option),
    )
    print(
        f"{report['domain']} {report['split']}: {report['episodes']} episodes, success_rate {report['success_rate']:.3f}, "
        f"mean_obs_chars {report['mean_obs_chars']:.1f}, mean_length {report['mean_length']:.2f}, "
        f"{report['steps_per_s']} steps/s"
    )
    if report["failed_seeds"]:
        print(f"expert failed on task seeds {report['failed_seeds']}" + (f"; errors: {report['errors']}" if report["errors"] else ""))
    if args.json_path:
        write_json(args.json_path, report)
    return 0 if not report["failed_seeds"] else 1
