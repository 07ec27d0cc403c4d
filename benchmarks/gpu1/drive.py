"""Snakemake on the GPU machine under watch: the run with a time limit, the GPU sampled (whole and
per job), the kills of a kill plan with what each left behind, and a record of all of it.

    python3 benchmarks/gpu1/drive.py RECORD_DIR --seconds N [--kill KIND:RUN@STEP ...] [--compare SCRIPT_ARGS]
        [--commit C] -- SNAKEMAKE_ARGS...

Snakemake runs in a process group of its own, stopped with SIGINT (as Ctrl-C) after N seconds. Into
RECORD_DIR, rewritten every few seconds: ``gpu_samples.csv`` (nvidia-smi every 0.5 s) and
``drive.json`` (the machine, the run, every ``gentax VERB --job SPEC`` job seen: start, end, peak GPU
memory by process ancestry; the kills). A kill ``KIND:RUN@STEP`` (KIND sigkill: a crash or the OOM
killer; sigterm: SLURM's preemption or scancel) hits the trainer of the RL job whose label holds RUN,
MID_STEP_S after its metrics.csv logged step STEP (inside the next step), once; it records the job's
processes (the trainer, its descendants, whatever carries its token: gentax.train.processes) and
their GPU memory, then for WATCH_AFTER_KILL_S which are left and the GPU memory in use. What the retry
trained is in its run's log and metrics.csv. ``--compare 'ARGS'`` starts
benchmarks/gpu1/generators.py ARGS once its model folder exists. Standard library, psutil (the GPU
machine's image) and gentax.train.processes (its process walk, marks, titles and liveness).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil  # in the GPU machine's image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from gentax.train import processes  # noqa: E402  (standard library only)

TICK_S = 0.5
KILL_SIGNALS = {"sigkill": signal.SIGKILL, "sigterm": signal.SIGTERM}
MID_STEP_S = 4.0  # a kill after step N fires this long into step N+1 (its rollout)
WATCH_AFTER_KILL_S = 30.0


def parse_kill(text: str) -> dict:
    kind, _, rest = text.partition(":")
    run, _, step = rest.partition("@")
    if kind not in KILL_SIGNALS or not run or not step.isdigit():
        raise SystemExit(f"--kill {text!r}: KIND:RUN@STEP, KIND one of {', '.join(KILL_SIGNALS)}")
    return {"kill": text, "kind": kind, "run": run, "after_step": int(step), "fired": None}


def logged_steps(run_dir: str) -> set[int]:
    """The steps a run's metrics.csv holds now."""
    try:
        with open(Path(run_dir) / "metrics.csv") as fh:
            return {int(float(row["step"])) for row in csv.DictReader(fh) if row.get("step")}
    except (OSError, ValueError, KeyError, csv.Error):
        return set()


def job_processes(trainer: int) -> list[int]:
    """The trainer, its descendants and whatever carries its token (Ray starts some processes with
    an environment of their own; the token is set inside the trainer, so its children show it)."""
    below = processes.descendants(trainer)
    tokens = set()
    for pid in below:
        try:
            tokens.add(psutil.Process(pid).environ().get(processes.OWNER_ENV))
        except psutil.Error:
            continue
    marked = [pid for token in tokens - {None} for pid in processes.processes_marked(processes.OWNER_ENV, token)]
    return [pid for pid in sorted({trainer, *below, *marked}) if processes.alive(pid)]


def proc_table() -> dict[int, tuple[int, float, list[str]]]:
    """pid -> (parent pid, start time as epoch seconds, argv) of every process now."""
    return {p.info["pid"]: (p.info["ppid"], p.info["create_time"], p.info["cmdline"] or [])
            for p in psutil.process_iter(["pid", "ppid", "create_time", "cmdline"])}


def job_path(pid: int, path: str | None) -> str | None:
    """A job's path as the job sees it (relative to its working folder)."""
    try:
        return str(Path(psutil.Process(pid).cwd()) / path) if path else None
    except psutil.Error:
        return path


def descends_from(pid: int, roots: set[int], table) -> bool:
    hops = 0
    while pid in table and hops < 64:
        pid, hops = table[pid][0], hops + 1
        if pid in roots:
            return True
    return False


def gentax_job(argv: list[str]) -> tuple[str, dict] | None:
    """(verb, spec) of a ``gentax VERB ... --job SPEC`` process (bin/gentax or python -m gentax), else None."""
    if "--job" not in argv:
        return None
    for i, arg in enumerate(argv):
        if arg.endswith("/gentax") or arg == "gentax" or (arg == "-m" and argv[i + 1:i + 2] == ["gentax"]):
            rest = argv[i + (2 if arg == "-m" else 1):]
            break
    else:
        return None
    try:
        spec = json.loads(argv[argv.index("--job") + 1])
    except (IndexError, ValueError):
        return None
    words = [w for w in rest[: rest.index("--job")] if not w.startswith("-")] if "--job" in rest else rest[:1]
    return " ".join(words), spec if isinstance(spec, dict) else {}


def job_label(verb: str, spec: dict, results: str) -> str:
    """A job's name in the record: its verb and its output, relative to the results folder; an RL
    job's also names its steps (the folder is the run's, shared by its segments)."""
    out = str(spec.get("out") or spec.get("output") or "")
    out = out[len(results):].lstrip("/") if results and out.startswith(results) else out
    steps = f" {spec['start']}:{spec['end']}" if verb == "train rl" and "start" in spec else ""
    return f"{verb} {out}{steps}".strip()


class GPU:
    """nvidia-smi, read each tick: memory used and utilization, and memory per process."""

    def __init__(self, samples: Path):
        self.samples = samples.open("a")
        self.used_mib: float | None = None
        self.per_pid: dict[int, float] = {}

    def read(self) -> None:
        if not shutil.which("nvidia-smi"):  # a CPU machine: trying the driver out
            return
        done = subprocess.run(["nvidia-smi", "--query-gpu=timestamp,utilization.gpu,memory.used", "--format=csv,noheader"],
                              capture_output=True, text=True)
        line = done.stdout.strip().splitlines()[:1]
        if line:
            self.samples.write(line[0] + "\n")
            self.samples.flush()
            try:
                self.used_mib = float(line[0].split(",")[2].split()[0])
            except (IndexError, ValueError):
                pass
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True).stdout
        per_pid = {}
        for row in apps.strip().splitlines():
            try:
                pid, mib = row.split(",")
                per_pid[int(pid)] = float(mib)
            except ValueError:
                continue
        self.per_pid = per_pid


class Drive:
    def __init__(self, args):
        self.args = args
        self.record_dir = args.record_dir
        self.record_dir.mkdir(parents=True, exist_ok=True)
        self.results = str(Path(args.results).resolve())
        self.gpu = GPU(self.record_dir / "gpu_samples.csv")
        self.t0 = time.time()
        self.jobs: dict[int, dict] = {}          # trainer/job pid -> record
        self.snakemake: subprocess.Popen | None = None
        self.snakemake_run: dict = {}
        self.compare: subprocess.Popen | None = None
        self.machine = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                                      capture_output=True, text=True).stdout.strip() if shutil.which("nvidia-smi") else None
        self.gpu.read()
        self.gpu_baseline_mib = self.gpu.used_mib
        self.kills = [parse_kill(text) for text in args.kill]
        self.lock = threading.Lock()

    # ---- watching -----------------------------------------------------------------------------
    def tick(self, table) -> None:
        now = time.time()
        self.gpu.read()
        seen = set()
        roots = {p.pid for p in (self.snakemake, self.compare) if p is not None}
        for pid, (_, started, argv) in table.items():
            found = gentax_job(argv)
            if not found or not descends_from(pid, roots, table):  # only this drive's jobs
                continue
            verb, spec = found
            seen.add(pid)
            if pid in self.jobs:
                continue
            label = job_label(verb, spec, self.results)
            self.jobs[pid] = {"label": label, "verb": verb, "pid": pid, "start": round(started - self.t0, 1),
                              "end": None, "gpu_peak_mib": 0.0, "gpu_used_mib_at_start": self.gpu.used_mib,
                              "run_dir": job_path(pid, spec.get("out")) if verb == "train rl" else None}
        for pid, job in self.jobs.items():
            if job["end"] is None and pid not in seen:
                job["end"] = round(now - self.t0, 1)
        # GPU memory per job: a GPU process belongs to the job it descends from
        per_job: dict[int, float] = {}
        for gpu_pid, mib in self.gpu.per_pid.items():
            pid, hops = gpu_pid, 0
            while pid in table and pid not in self.jobs and hops < 64:
                pid, hops = table[pid][0], hops + 1
            if pid in self.jobs:
                per_job[pid] = per_job.get(pid, 0.0) + mib
        for pid, mib in per_job.items():
            self.jobs[pid]["gpu_peak_mib"] = max(self.jobs[pid]["gpu_peak_mib"], mib)
    # ---- killing ------------------------------------------------------------------------------
    def maybe_kill(self) -> None:
        kill = next((k for k in self.kills if k["fired"] is None), None)
        if kill is None:
            return
        for pid, job in self.jobs.items():
            if job["end"] is None and job["run_dir"] and kill["run"] in job["label"]:
                if kill["after_step"] in logged_steps(job["run_dir"]):
                    kill.setdefault("due", time.time() + MID_STEP_S)
                    if time.time() >= kill["due"]:
                        self.fire(kill, pid, job)
                return

    def fire(self, kill: dict, trainer: int, job: dict) -> None:
        procs = job_processes(trainer)
        kill.update(job=job["label"], trainer_pid=trainer, fired=round(time.time() - self.t0, 1),
                    steps_logged_before=sorted(logged_steps(job["run_dir"])), gpu_used_mib_before=self.gpu.used_mib,
                    before=[{"pid": pid, "title": processes.process_name(pid), "gpu_mib": self.gpu.per_pid.get(pid, 0.0)}
                            for pid in procs],
                    after=[], all_gone_after_s=None)
        print(f"drive: {kill['kind']} {job['label']} (pid {trainer}, {len(procs)} processes) at {kill['fired']} s", flush=True)
        os.kill(trainer, KILL_SIGNALS[kill["kind"]])
        threading.Thread(target=self.watch_after, args=(kill, procs), daemon=True).start()

    def watch_after(self, kill: dict, procs: list[int]) -> None:
        fired = time.time()
        while (elapsed := round(time.time() - fired, 1)) <= WATCH_AFTER_KILL_S:
            left = [pid for pid in procs if processes.alive(pid)]
            with self.lock:
                kill["after"].append({"t": elapsed, "left": [f"{pid} {processes.process_name(pid)}" for pid in left],
                                      "gpu_used_mib": self.gpu.used_mib,
                                      "gpu_mib_of_left": sum(self.gpu.per_pid.get(pid, 0.0) for pid in left)})
                if not left and kill["all_gone_after_s"] is None:
                    kill["all_gone_after_s"] = elapsed
            time.sleep(TICK_S)

    # ---- running ------------------------------------------------------------------------------
    def maybe_compare(self) -> None:
        if not self.args.compare or self.compare is not None:
            return
        words = shlex.split(self.args.compare)
        if Path(words[0]).is_dir() and (Path(words[0]) / "config.json").is_file():
            log = (self.record_dir / "compare.log").open("w")
            self.compare = subprocess.Popen([sys.executable, str(HERE / "generators.py"), *words], stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
            print("drive: generator comparison started", flush=True)

    def write(self) -> None:
        record = {"machine": self.machine, "commit": self.args.commit,
                  "date": dt.datetime.fromtimestamp(self.t0, dt.timezone.utc).isoformat(timespec="seconds"),
                  "seconds": round(time.time() - self.t0, 1), "gpu_baseline_mib": self.gpu_baseline_mib,
                  "snakemake_args": self.args.snakemake, "snakemake_runs": [self.snakemake_run],
                  "jobs": sorted(self.jobs.values(), key=lambda j: j["start"]),
                  "compare_returncode": None if self.compare is None else self.compare.poll()}
        with self.lock:
            record["kills"] = json.loads(json.dumps(self.kills))
        tmp = self.record_dir / "drive.json.tmp"
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.rename(self.record_dir / "drive.json")

    def run(self) -> int:
        log = (self.record_dir / "snakemake_0.log").open("w")
        self.snakemake = subprocess.Popen([sys.executable, "-m", "snakemake", *self.args.snakemake], stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        self.snakemake_run = {"start": 0.0, "end": None, "returncode": None, "log": log.name}
        deadline, last_write, stopped = self.t0 + self.args.seconds, 0.0, False
        while (rc := self.snakemake.poll()) is None:
            self.tick(proc_table())
            self.maybe_compare()
            self.maybe_kill()
            if time.time() >= deadline and not stopped:
                print("drive: time is up: SIGINT to snakemake", flush=True)
                os.killpg(self.snakemake.pid, signal.SIGINT)
                stopped, deadline = True, time.time() + 60
            elif stopped and time.time() >= deadline:
                os.killpg(self.snakemake.pid, signal.SIGKILL)
            if time.time() - last_write > 5:
                self.write()
                last_write = time.time()
            time.sleep(TICK_S)
        self.snakemake_run.update(end=round(time.time() - self.t0, 1), returncode=rc)
        if self.compare is not None:
            try:
                self.compare.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.compare.pid, signal.SIGINT)
        time.sleep(1)
        self.tick(proc_table())
        self.write()
        print(f"drive: done after {time.time() - self.t0:.0f} s, snakemake exit {rc}", flush=True)
        return rc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("record_dir", type=Path)
    ap.add_argument("--seconds", type=float, required=True, help="stop Snakemake (SIGINT) after this long")
    ap.add_argument("--results", default="results", help="the results folder (for job labels)")
    ap.add_argument("--kill", action="append", default=[], help="KIND:RUN@STEP (module doc), in order, each once")
    ap.add_argument("--compare", default=None, help="arguments of benchmarks/gpu1/generators.py (its model first)")
    ap.add_argument("--commit", default=None, help="the code's commit (the device's copy has no git)")
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--" not in argv:
        ap.error("give Snakemake's arguments after --")
    split = argv.index("--")
    args = ap.parse_args(argv[:split])
    args.snakemake = argv[split + 1:]
    return Drive(args).run()


if __name__ == "__main__":
    sys.exit(main())
