"""SIGKILL every kind of gentax job at every atomic write it makes, rerun it, and print what was recovered.

    python benchmarks/kill_points.py [--out DIR] [--only KIND,...] [--write]

Each job kind is the ``gentax`` command a workflow rule runs (``jobs``), on the smallest inputs that
exercise it. A ``sitecustomize`` hook (benchmarks/kill_hook) wraps the rename completing every atomic
write: each job runs uninterrupted, logging its writes; then, per write site (``kill_points``), again
from scratch, SIGKILLed just before that rename, and rerun. Per point: the temporaries left, whether
a result the kill left is consistent, whether the rerun's outputs equal the uninterrupted run's (the
saved torch RNG state apart: ``is_rng_state``), manifests intact, what was trained twice.
``--write`` makes the report the record benchmarks/records/kill_points.txt; exit 1 when a point is
not recovered.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from common import REPO as ROOT
from common import record_header, untimed, untimed_frame, write_record

HOOK = ROOT / "benchmarks" / "kill_hook"
sys.path.insert(0, str(ROOT / "tests"))  # rl_helpers: the tiny model the RL tests train

KILL_STEP = 2
#: files and folders whose content is a log of the run (times, progress), not a result
LOG_NAMES = {"tensorboard", "llamafactory.log", "trainer_log.jsonl", "train_results.json"}


@dataclass
class Job:
    kind: str
    argv: Callable[[Path], list[str]]  # the command, given the job's folder
    setup: Callable[[Path], None] = lambda job: None  # inputs / earlier results the job meets
    check_left: Callable[[Path], str | None] = lambda job: None  # what is inconsistent after the kill
    sample: Callable[[list[str]], list[str]] | None = None  # which write sites to kill at (default all)
    points: list[dict] = field(default_factory=list)


def run(argv: list[str], *, log: Path | None = None, kill_at: str | None = None, nth: int = 1):
    env = {k: v for k, v in os.environ.items() if k != "GENTAX_KILL_AT"}
    env["PYTHONPATH"] = os.pathsep.join([str(HOOK), str(ROOT)])
    if log:
        env["GENTAX_KILL_LOG"] = str(log)
    if kill_at:
        env.update(GENTAX_KILL_AT=kill_at, GENTAX_KILL_NTH=str(nth))
    return subprocess.run([sys.executable, "-m", "gentax", *argv], env=env, capture_output=True, text=True,
                          timeout=1800, cwd=ROOT)


def temporaries(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*.tmp"))


def kill_points(log: list[str]) -> list[tuple[str, int]]:
    """(path, k-th write of it) for each write site (a path, its step numbers as one site) of an
    uninterrupted run's write log: the step-``KILL_STEP`` write where a site repeats, else its first."""
    occurrences: dict[str, list[tuple[str, int]]] = {}
    counts: dict[str, int] = {}
    for path in log:
        counts[path] = counts.get(path, 0) + 1
        occurrences.setdefault(re.sub(r"(step_?)\d+", r"\1N", path), []).append((path, counts[path]))
    at_step = re.compile(rf"step_?{KILL_STEP}(?!\d)")
    return [next(((path, nth) for path, nth in found if at_step.search(path) or nth == KILL_STEP), found[0])
            for found in occurrences.values()]


# ---- comparing a job's outputs with the uninterrupted run's -----------------------------------------
def _same_file(a: Path, b: Path) -> bool:
    import pandas as pd

    if a.suffix == ".json":
        return untimed(json.loads(a.read_text())) == untimed(json.loads(b.read_text()))
    if a.suffix == ".csv":
        return untimed_frame(a).equals(untimed_frame(b))
    if a.suffix == ".parquet":
        return pd.read_parquet(a).equals(pd.read_parquet(b))
    if a.suffix == ".pt":  # torch.save stamps each file with a fresh serialization id: compare what it holds
        import torch

        return _same_objects(torch.load(a, weights_only=True), torch.load(b, weights_only=True))
    return a.read_bytes() == b.read_bytes()


def _same_objects(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_objects(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same_objects, a, b))
    return a == b


def results(folder: Path) -> dict[str, Path]:
    """The result files of a job folder: not hidden, not logs, not manifests (checked on their own)."""
    from gentax.io import MANIFEST_FILE

    out = {}
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") or part in LOG_NAMES for part in rel.parts) \
                and path.name != MANIFEST_FILE:
            out[str(rel)] = path
    return out


def differences(ours: Path, reference: Path) -> list[str]:
    a, b = results(ours), results(reference)
    diff = sorted(set(a) ^ set(b))
    return diff + sorted(name for name in set(a) & set(b) if not _same_file(a[name], b[name]))


def is_rng_state(name: str) -> bool:
    """The local engine's saved torch RNG state: no result draws from it (every random choice comes
    from (seed, step)) and a resumed process drew from it differently, so it is reported apart."""
    return name.endswith("gentax_state/rng.pt")


def damaged_manifests(folder: Path) -> list[str]:
    from gentax.io import MANIFEST_FILE, manifest_problem

    return [problem for m in folder.rglob(MANIFEST_FILE) if ".tmp" not in str(m) and (problem := manifest_problem(m.parent))]


# ---- the job kinds ------------------------------------------------------------------------------------
def jobs(work: Path) -> list[Job]:
    import yaml

    from gentax.analysis.synthetic import synthetic_properties, synthetic_summary
    from rl_helpers import TINY_RL, make_run, make_tiny_model

    inputs = work / "inputs"
    tiny = make_tiny_model(inputs / "tiny")
    sft_config = inputs / "sft.yaml"
    sft_config.write_text(yaml.safe_dump({
        "sft": {"steps": 1, "lr": 1.0e-5, "batch_size": 2, "micro_batch_size": 1, "pairs": 2,
                "mix": {"webshop": 1, "sciworld": 0, "alfworld": 0}, "v1_episodes_per_domain": 1, "max_rounds": 1,
                "sources": {"webshop": "expert"}},
        "domains": {"webshop": {"max_steps": 2, "options": {}}}}))
    rl_config = inputs / "rl.yaml"
    rl_config.write_text(yaml.safe_dump({"rl": TINY_RL}))
    run_spec = inputs / "run_spec.json"  # Sokoban, 2-step episodes
    run_spec.write_text(make_run("sokoban", "default", 0, 3, init=str(tiny)).to_json())
    summary, properties = inputs / "summary.csv", inputs / "properties.csv"
    synthetic_summary(seeds=(0, 1)).to_csv(summary, index=False)
    synthetic_properties().to_csv(properties, index=False)
    data_argv = ["sft", "build-data", "--config", str(sft_config), "--v1", str(tiny), "--quiet"]
    sft_data = inputs / "sft_data"
    done = run([*data_argv, "--out", str(sft_data)])
    if done.returncode:
        raise SystemExit(f"building the SFT inputs failed:\n{done.stdout}{done.stderr}")

    def eval_argv(episodes: int):
        return lambda job: ["eval", "--generator", "expert", "--domain", "sokoban", "--episodes", str(episodes),
                            "--quiet", "--out", str(job / "eval" / "sokoban.parquet")]

    def eval_left(job: Path) -> str | None:
        from gentax.errors import GentaxError
        from gentax.evalfile import read_eval

        if not (job / "eval" / "sokoban.json").is_file():
            return None
        try:
            read_eval(job / "eval" / "sokoban.json")
        except GentaxError as exc:
            return str(exc)
        return None

    def one_per_kind(sites: list[str]) -> list[str]:
        """The first write of each file type (tables: csv, md, tex; figures: png, svg; ...) and the last."""
        first = {}
        for path in sites:
            first.setdefault(Path(path).suffix, path)
        return sorted(set(first.values()) | {sites[-1]}, key=sites.index)

    return [
        Job("model", lambda job: ["model", "embedded", "--out", str(job / "model")]),
        Job("sft_data", lambda job: [*data_argv, "--out", str(job / "data")]),
        Job("sft", lambda job: ["sft", "train", "--config", str(sft_config), "--data", str(sft_data), "--init", str(tiny),
                                "--out", str(job / "model")]),
        Job("rl", lambda job: ["train", "rl", "--engine", "local", "--config", str(rl_config),
                               "--init", str(tiny), "--run-spec", str(run_spec), "--steps", "0:3",
                               "--out", str(job / "run"), "--no-progress"]),
        Job("eval", eval_argv(6), setup=lambda job: _must(run(eval_argv(2)(job))), check_left=eval_left),
        Job("properties", lambda job: ["properties", "--generator", "expert", "--domain", "sokoban", "--episodes", "2",
                                       "--t-max", "5", "--quiet", "--out", str(job / "props" / "sokoban.parquet")]),
        Job("tables", lambda job: ["tables", "--summary", str(summary), "--properties", str(properties), "--bootstrap", "0",
                                   "--out", str(job / "tables")], sample=one_per_kind),
    ]


def _must(done: subprocess.CompletedProcess) -> None:
    if done.returncode:
        raise SystemExit(f"a job's setup failed:\n{done.stdout}{done.stderr}")


def _resumed_from(stdout: str) -> int:
    found = re.findall(r"resuming .* from step (\d+)", stdout)
    return int(found[-1]) if found else 0


def probe(job: Job, work: Path) -> None:
    """Run ``job`` uninterrupted, then killed at each of its write sites and rerun."""
    from gentax.train import runs

    folder, reference = work / job.kind / "job", work / job.kind / "reference"
    folder.mkdir(parents=True)
    job.setup(folder)
    log = work / job.kind / "straight.writes"
    straight = run(job.argv(folder), log=log)
    if straight.returncode:
        raise SystemExit(f"the uninterrupted {job.kind} job failed:\n{straight.stdout}{straight.stderr}")
    shutil.move(folder, reference)  # every point runs at the same path, so paths inside outputs agree
    points = kill_points(log.read_text().splitlines() if log.is_file() else [])
    if job.sample:
        keep = job.sample([path for path, _ in points])
        points = [(path, nth) for path, nth in points if path in keep]
    for number, (path, nth) in enumerate(points):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        job.setup(folder)
        killed = run(job.argv(folder), log=work / job.kind / f"{number}.killed.writes", kill_at=path, nth=nth)
        left = temporaries(folder)
        inconsistent = job.check_left(folder)
        checkpointed = runs.checkpoint_steps(folder / "run") if job.kind == "rl" else []
        rerun = run(job.argv(folder), log=work / job.kind / f"{number}.rerun.writes")
        differ = differences(folder, reference) if rerun.returncode == 0 else ["(rerun failed)"]
        trained_twice = ([s for s in checkpointed if s > _resumed_from(rerun.stdout)] if job.kind == "rl" else [])
        point = {
            "at": f"{'' if nth == 1 else f'write {nth} of '}{Path(path).relative_to(folder) if path.startswith(str(folder)) else path}",
            "killed": killed.returncode == -signal.SIGKILL,
            "left_temporaries": left,
            "left_inconsistent": inconsistent,
            "rerun_ok": rerun.returncode == 0,
            "outputs_differ": [n for n in differ if not is_rng_state(n)],
            "rng_state_differs": [n for n in differ if is_rng_state(n)],
            "damaged_manifests": damaged_manifests(folder),
            "temporaries_after": temporaries(folder),
            "trained_twice": trained_twice,
        }
        if job.kind == "rl":
            point["took_over_lock"] = "took over the lock" in rerun.stdout
        point["ok"] = (point["killed"] and not inconsistent and point["rerun_ok"] and not point["outputs_differ"]
                       and not point["damaged_manifests"] and not point["temporaries_after"] and not trained_twice)
        if not point["ok"]:
            point["rerun_log"] = (killed.stdout + killed.stderr)[-1500:] + "\n--- rerun ---\n" + (rerun.stdout + rerun.stderr)[-3000:]
        job.points.append(point)
        print(f"  {job.kind}: {point['at']}: {'recovered' if point['ok'] else 'NOT RECOVERED'}", file=sys.stderr, flush=True)


def report(all_jobs: list[Job]) -> str:
    lines = []
    for job in all_jobs:
        lines.append(f"{job.kind} ({len(job.points)} kill points)")
        for p in job.points:
            shown = {k: v for k, v in p.items() if k not in ("at", "ok", "rerun_log")}
            lines.append(f"- at the rename of {p['at']}: {'recovered' if p['ok'] else 'NOT RECOVERED'}")
            lines.append(f"    {json.dumps(shown)}")
            if not p["ok"]:
                lines += ["    " + line for line in p["rerun_log"].splitlines()[-25:]]
    points = [p for job in all_jobs for p in job.points]
    lines.append(f"{sum(p['ok'] for p in points)} of {len(points)} kill points recovered: outputs equal to an "
                 "uninterrupted run's, manifests intact, no temporary left, nothing trained twice")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="work folder (default: a temporary one, removed at the end)")
    parser.add_argument("--only", help="comma-separated job kinds (default: all)")
    parser.add_argument("--write", action="store_true", help="write the record benchmarks/records/kill_points.txt")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gentax-kill-") as tmp:
        work = Path(args.out or tmp)
        work.mkdir(parents=True, exist_ok=True)
        all_jobs = jobs(work)
        if args.only:
            wanted = set(args.only.split(","))
            all_jobs = [job for job in all_jobs if job.kind in wanted]
        for job in all_jobs:
            shutil.rmtree(work / job.kind, ignore_errors=True)
            probe(job, work)
    text = record_header(f"python benchmarks/kill_points.py{' --only ' + args.only if args.only else ''}") + "\n" + report(all_jobs)
    print(text)
    if args.write:
        write_record("kill_points.txt", text + "\n")
    return 0 if all(p["ok"] for job in all_jobs for p in job.points) else 1


if __name__ == "__main__":
    sys.exit(main())
