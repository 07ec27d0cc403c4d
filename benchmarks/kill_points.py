"""SIGKILL a trainer or an evaluation at chosen points, rerun it, and print what was recovered.

    python benchmarks/kill_points.py [--out DIR]

Each probe runs a real ``gentax`` process (a tiny random-init model with the embedded model's
tokenizer, Sokoban, ``--steps 0:3``, a checkpoint every step) that kills itself with SIGKILL at
one point, then reruns the plain command and compares with an uninterrupted run:

- train, before the step-2 checkpoint save (its metrics row is already written)
- train, during the step-2 checkpoint save (inside the temporary folder, after the optimizer state)
- train, just after the step-2 checkpoint save
- train, during the step-2 metrics write (the new metrics.csv written, not yet renamed into place)
- eval (6 episodes, over an earlier 2-episode result), during the write of its steps table
- eval, after both tables, before the summary JSON

For each point it prints what the kill left (temporaries, the result's files) and what the rerun
recovered: metrics rows, whether the final weights and the per-step losses equal the
uninterrupted run's, whether the rerun took over the killed trainer's run-folder lock, and the
temporaries left at the end. Exit status 1 when a point is not
fully recovered. No timing, no asserts on speed: a fault-injection probe (docs/training.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # rl_helpers: the tiny model the RL tests train

TRAIN_POINTS = {
    "before_save": "train: before the step-2 checkpoint save",
    "during_save": "train: during the step-2 checkpoint save",
    "after_save": "train: just after the step-2 checkpoint save",
    "during_metrics": "train: during the step-2 metrics write",
}
EVAL_POINTS = {
    "during_tables": "eval: during the steps-table write",
    "before_summary": "eval: after the tables, before the JSON",
}
KILL_STEP = 2


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(point: str) -> None:
    """Patch the running gentax so that it SIGKILLs itself at ``point`` (child process only)."""
    import pandas as pd
    import pyarrow.parquet as pq
    import torch

    from gentax.rollout import evaluation
    from gentax.train import local_engine

    if point in ("before_save", "after_save"):
        real_save = local_engine.Policy.save

        def save(self, target, optimizer, step):
            if step == KILL_STEP and point == "before_save":
                _die()
            real_save(self, target, optimizer, step)
            if step == KILL_STEP:
                _die()

        local_engine.Policy.save = save
    elif point == "during_save":
        real_torch_save = torch.save

        def torch_save(obj, path, *args, **kwargs):
            if f".step_{KILL_STEP}." in str(path) and str(path).endswith("rng.pt"):
                _die()
            return real_torch_save(obj, path, *args, **kwargs)

        torch.save = torch_save
    elif point == "during_metrics":
        real_to_csv = pd.DataFrame.to_csv

        def to_csv(self, path=None, *args, **kwargs):
            out = real_to_csv(self, path, *args, **kwargs)
            if ".metrics.csv." in str(path) and len(self) == KILL_STEP:
                _die()
            return out

        pd.DataFrame.to_csv = to_csv
    elif point == "during_tables":
        real_write = pq.write_table

        def write_table(table, where, *args, **kwargs):
            real_write(table, where, *args, **kwargs)
            if ".steps.parquet." in str(where):
                _die()

        pq.write_table = write_table
    elif point == "before_summary":
        evaluation.write_json = lambda *args, **kwargs: _die()
    else:
        raise SystemExit(f"unknown point {point}")


def _run(argv: list[str], point: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = ([sys.executable, __file__, "--child", point, "--"] if point else [sys.executable, "-m", "gentax"]) + argv
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)


def _temporaries(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*.tmp"))


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _same_weights(a: Path, b: Path) -> bool:
    import torch

    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def probe_training(work: Path) -> list[dict]:
    import pandas as pd
    import yaml

    from gentax.train import runs
    from rl_helpers import TINY_RL, make_tiny_model

    tiny = make_tiny_model(work / "tiny")
    config = work / "rl.yaml"
    config.write_text(yaml.safe_dump({"rl": TINY_RL}))

    def argv(run: Path) -> list[str]:
        return ["train", "rl", "--engine", "local", "--preset", "embedded", "--config", str(config), "--init", str(tiny),
                "--domain", "sokoban", "--seed", "0", "--steps", "0:3", "--out", str(run), "--no-progress"]

    straight = work / "straight"
    done = _run(argv(straight))
    if done.returncode != 0:
        raise SystemExit(f"the uninterrupted run failed:\n{done.stdout}{done.stderr}")
    reference = pd.read_csv(straight / runs.METRICS_FILE)
    results = []
    for point, label in TRAIN_POINTS.items():
        run = work / point
        killed = _run(argv(run), point)
        left = {"temporaries": _temporaries(run), "checkpoints": runs.checkpoint_steps(run),
                "metrics_rows": pd.read_csv(run / runs.METRICS_FILE)["step"].tolist()
                if (run / runs.METRICS_FILE).is_file() else []}
        rerun = _run(argv(run))
        metrics = pd.read_csv(run / runs.METRICS_FILE) if (run / runs.METRICS_FILE).is_file() else pd.DataFrame()
        resumed = next((line.split("from step ")[-1] for line in rerun.stdout.splitlines() if "resuming" in line), "0")
        recovered = {
            "rerun_ok": rerun.returncode == 0,
            "resumed_from": int(resumed),
            "metrics_rows": metrics["step"].tolist() if len(metrics) else [],
            "losses_equal": len(metrics) == len(reference) and bool((metrics["loss"] == reference["loss"]).all()),
            "weights_equal": rerun.returncode == 0 and _same_weights(runs.checkpoint_dir(run, 3), runs.checkpoint_dir(straight, 3)),
            "temporaries": _temporaries(run),
            "took_over_lock": "took over the lock" in rerun.stdout,  # the killed trainer's run-folder lock
        }
        ok = (killed.returncode == -signal.SIGKILL and recovered["rerun_ok"] and recovered["metrics_rows"] == [1, 2, 3]
              and recovered["losses_equal"] and recovered["weights_equal"] and not recovered["temporaries"])
        results.append({"point": label, "killed": killed.returncode == -signal.SIGKILL, "left": left,
                        "recovered": recovered, "ok": ok, "rerun_log": rerun.stdout + rerun.stderr})
    return results


def probe_evaluation(work: Path) -> list[dict]:
    import pandas as pd

    results = []
    for point, label in EVAL_POINTS.items():
        folder = work / f"eval_{point}"
        out = folder / "sokoban.parquet"

        def argv(episodes: int) -> list[str]:
            return ["eval", "--generator", "expert", "--domain", "sokoban", "--episodes", str(episodes), "--quiet",
                    "--out", str(out)]

        earlier = _run(argv(2))
        if earlier.returncode != 0:
            raise SystemExit(f"the earlier evaluation failed:\n{earlier.stdout}{earlier.stderr}")
        killed = _run(argv(6), point)
        summary = folder / "sokoban.json"
        left = {"temporaries": _temporaries(folder),
                "summary": json.loads(summary.read_text())["episodes"] if summary.is_file() else None,
                "files": sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))}
        rerun = _run(argv(6))
        episodes = len(pd.read_parquet(folder / "sokoban.episodes.parquet")) if rerun.returncode == 0 else None
        recovered = {"rerun_ok": rerun.returncode == 0,
                     "summary_episodes": json.loads(summary.read_text())["episodes"] if summary.is_file() else None,
                     "table_episodes": episodes, "temporaries": _temporaries(folder)}
        # a summary left after the kill must describe the tables beside it (never the old 2 episodes)
        consistent = left["summary"] is None
        ok = (killed.returncode == -signal.SIGKILL and consistent and recovered["rerun_ok"]
              and recovered["summary_episodes"] == episodes == 6 and not recovered["temporaries"])
        results.append({"point": label, "killed": killed.returncode == -signal.SIGKILL, "left": left,
                        "recovered": recovered, "ok": ok, "rerun_log": rerun.stdout + rerun.stderr})
    return results


def _print(results: list[dict]) -> None:
    for r in results:
        rec, left = r["recovered"], r["left"]
        print(f"- {r['point']}: {'killed (SIGKILL)' if r['killed'] else 'NOT KILLED'}")
        print(f"    left by the kill: {json.dumps(left)}")
        print(f"    after the rerun:  {json.dumps(rec)}")
        print(f"    {'recovered, nothing lost, no temporary left' if r['ok'] else 'NOT RECOVERED'}")
        if not r["ok"]:
            print("    rerun output:\n" + "\n".join("      " + line for line in r["rerun_log"].splitlines()[-20:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="work folder (default: a temporary one, removed at the end)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("argv", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _arm(args.child)
        from gentax.cli import main as gentax_main

        return gentax_main(args.argv)
    with tempfile.TemporaryDirectory(prefix="gentax-kill-") as tmp:
        work = Path(args.out or tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = probe_training(work) + probe_evaluation(work)
    _print(results)
    recovered = sum(r["ok"] for r in results)
    print(f"{recovered} of {len(results)} kill points recovered")
    return 0 if recovered == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
