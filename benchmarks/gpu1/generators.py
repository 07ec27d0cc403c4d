"""The vllm generator against the hf generator on one checkpoint's evaluation: the workflow's own
evaluation job (gentax.study.jobs.eval_checkpoint) run with each, at the same time on the same GPU,
then their speed and successes side by side with the tables' paired test (before = hf).

    python3 benchmarks/gpu1/generators.py MODEL --tasks TASKS.json --work DIR [--domain sokoban]
        [--configfile config/gpu1_paper_engines.yaml ...]

Prints a table per generator and the paired test (a part of a GPU run's summary).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GENERATORS = ("hf", "vllm")


def study_config(configfiles: list[Path]) -> dict:
    from gentax.io import deep_merge, read_yaml
    from gentax.study import config as gconfig

    overrides: dict = {"preset": "gpu1"}
    for path in configfiles:
        overrides = deep_merge(overrides, read_yaml(path))
    return gconfig.load_config(gconfig.with_preset(read_yaml(REPO / "config" / "config.yaml"), overrides, default="paper"))


def job_specs(cfg: dict, model: str, domain: str, tasks: Path, work: Path) -> dict[str, dict]:
    from gentax.study import jobs

    specs = {}
    for generator in GENERATORS:
        spec = jobs.eval_checkpoint(cfg, model=model, think="on", tasks_files={domain: str(tasks)},
                                    out_jsons={domain: str(work / generator / f"{domain}.json")})
        specs[generator] = {**spec, "generator": generator}
    return specs


def task_outcomes(episodes: Path) -> dict[int, float]:
    import pandas as pd

    frame = pd.read_parquet(episodes, columns=["task_seed", "won"])
    return frame.groupby("task_seed")["won"].mean().to_dict()


def main(argv=None) -> int:
    import numpy as np

    from gentax.analysis.stats import format_p, paired_test
    from gentax.rollout.jobs import evaluations

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--tasks", type=Path, required=True, help="the domain's task manifest (results/tasks/DOMAIN.json)")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--domain", default="sokoban")
    ap.add_argument("--configfile", type=Path, action="append", default=[], help="laid over the gpu1 preset, in order")
    args = ap.parse_args(argv)
    cfg = study_config(args.configfile)
    specs = job_specs(cfg, args.model, args.domain, args.tasks, args.work)
    running, started = {}, time.perf_counter()
    for generator, spec in specs.items():
        (args.work / generator).mkdir(parents=True, exist_ok=True)
        log = (args.work / generator / "eval.log").open("w")
        running[generator] = subprocess.Popen([str(REPO / "bin" / "gentax"), "eval", "--job", json.dumps(spec)],
                                              stdout=log, stderr=subprocess.STDOUT)
    results = {}
    for generator, process in running.items():
        rc = process.wait()
        log_text = (args.work / generator / "eval.log").read_text()
        if rc != 0:
            print(f"{generator}: gentax eval failed (exit {rc}); its log: {args.work / generator / 'eval.log'}")
            print(log_text[-3000:])
            return 1
        summary = json.loads((args.work / generator / f"{args.domain}.json").read_text())
        ready = re.search(r"vllm engine ready in ([0-9.]+) s", log_text)
        results[generator] = {**summary["timing"], "success_rate": summary["success_rate"],
                              "job_wall_s": time.perf_counter() - started, "engine_start": ready.group(1) if ready else "-",
                              "outcomes": task_outcomes(args.work / generator / f"{args.domain}.episodes.parquet")}
    tasks = sorted(set(results["hf"]["outcomes"]) & set(results["vllm"]["outcomes"]))
    test = paired_test([tuple(np.array([[results[g]["outcomes"][t] for t in tasks]]) for g in GENERATORS)])
    speed = (results["vllm"]["tokens_per_s"] or float("nan")) / (results["hf"]["tokens_per_s"] or float("nan"))
    lines = [f"# {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; {args.domain}, {len(tasks)} paired tasks, "
             f"temperature {evaluations(specs['vllm'])[0]['temperature']}, model {args.model}",
             "generator  success  tokens/s  generate s  engine start s  job wall s"]
    for generator in GENERATORS:
        r = results[generator]
        lines.append(f"{generator:9}  {r['success_rate']:7.3f}  {r['tokens_per_s']:8.1f}  {r['generate_s']:10.1f}  "
                     f"{r['engine_start']:>14}  {r['job_wall_s']:10.1f}")
    lines.append(f"vllm / hf tokens/s: {speed:.2f}; paired test (before = hf): vllm won {test.wins}, lost {test.losses} "
                 f"of {test.tasks} tasks, p {format_p(test.p_value)}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
