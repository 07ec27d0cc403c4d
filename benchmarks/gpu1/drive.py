"""Snakemake on the GPU machine under watch: the run with a time limit, the GPU sampled (whole and
per job), the kills of a kill plan with what each left behind, and a record of all of it.

    python3 benchmarks/gpu1/drive.py RECORD_DIR --seconds N [--kill KIND:RUN@WHEN ...]
        [--compare SCRIPT_ARGS] [--commit C] -- SNAKEMAKE_ARGS...

Run from the repository the results belong to (benchmarks/gpu1/device.sh runs it in its copy of
the code); Snakemake runs as ``python3 -m snakemake SNAKEMAKE_ARGS`` in a process group of its own
(Ctrl-C's target) and is stopped with SIGINT to that group when N seconds have passed, as a user's
Ctrl-C stops it; what was running is marked incomplete and rerun by the next call.

What it writes into RECORD_DIR while it runs (rewritten every few seconds, so a call that ends
early still brings back a partial record):
- ``gpu_samples.csv``: nvidia-smi's timestamp, utilization and memory used, every 0.5 s
  (benchmarks/gpu1/report.py reads it);
- ``drive.json``: the machine, the Snakemake runs (return code, seconds), every job seen (its
  ``gentax VERB --job SPEC`` process: start, end, peak GPU memory of its processes, from
  nvidia-smi's compute apps mapped to the job by process ancestry), every RL attempt (its steps as
  metrics.csv logged them, with times, and the time to its first training step), and the kills.

A kill plan entry ``KIND:RUN@WHEN`` stops the RL job whose run folder contains RUN: KIND is
``sigkill`` (the trainer process: what a crash or an OOM killer does), ``sigterm`` (the trainer
process: SLURM's preemption, scancel) or ``sigint`` (Snakemake's process group: Ctrl-C; Snakemake
is started again, and its --rerun-incomplete reruns the job); WHEN is a step N (fire MID_STEP_S
after this attempt logged step N: mid-way through step N+1) or ``first`` (fire half a step into
this attempt's first step, from the start-up and step times seen so far). The entries fire in
order, each once. For each kill the record holds the job's processes before (pid and title: the
trainer, Ray's raylet and workers, vLLM's ``VLLM::*`` engines: everything that carries its
trainer's token, ``gentax.train.processes``), their GPU memory, and every 0.5 s for 30 s after
the kill which of them are left and the GPU memory in use; the rerun's steps are its attempt's.
A kill due after --kill-until seconds is skipped (recorded as such), so that the reruns still fit.

``--compare 'ARGS'`` starts ``python3 benchmarks/gpu1/generators.py ARGS`` once the first
argument (a model folder) exists, beside the workflow (its output goes to RECORD_DIR/compare.log).
Linux only (/proc), standard library and gentax.train.processes only.
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
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from gentax.train import processes  # noqa: E402  (stdlib only: runs before anything is installed)

KINDS = ("sigkill", "sigterm", "sigint")
MID_STEP_S = 4.0       # a kill "after step N" fires this long into step N+1 (its rollout)
WATCH_AFTER_KILL_S = 30.0
TICK_S = 0.5


@dataclass
class Kill:
    kind: str
    run: str
    when: str  # a step number, or "first"
    fired: float | None = None
    job: str | None = None
    trainer_pid: int | None = None
    token: str | None = None
    steps_before: list[int] = field(default_factory=list)
    before: list[dict] = field(default_factory=list)   # {pid, title, gpu_mib}
    gpu_used_mib_at_job_start: float | None = None
    gpu_used_mib_before: float | None = None
    skipped: str | None = None
    after: list[dict] = field(default_factory=list)    # {t, left: [titles], gpu_used_mib, gpu_mib_of_left}
    all_gone_after_s: float | None = None
    left_after_30_s: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> "Kill":
        kind, _, rest = text.partition(":")
        run, _, when = rest.partition("@")
        if kind not in KINDS or not run or not (when == "first" or when.isdigit()):
            raise SystemExit(f"--kill {text!r}: KIND:RUN@STEP or KIND:RUN@first, KIND one of {', '.join(KINDS)}")
        return cls(kind, run, when)


def boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
BOOT = boot_time()


def proc_table() -> dict[int, tuple[int, float, list[str]]]:
    """pid -> (parent pid, start time as epoch seconds, argv) of every process now."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            raw = Path(f"/proc/{pid}/stat").read_bytes()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = raw[raw.rindex(b")") + 2:].split()
        out[pid] = (int(fields[1]), BOOT + int(fields[19]) / CLOCK_TICKS,
                    [a.decode(errors="replace") for a in argv if a])
    return out


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


def read_steps(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return []
    try:
        with path.open() as fh:
            return [row for row in csv.DictReader(fh) if row.get("step")]
    except (OSError, csv.Error):
        return []


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
        self.rl_runs: dict[str, dict] = {}       # run folder -> {"attempts": [...]}
        self.kills = [Kill.parse(k) for k in args.kill]
        self.snakemake_runs: list[dict] = []
        self.snakemake: subprocess.Popen | None = None
        self.compare: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.machine = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                                      capture_output=True, text=True).stdout.strip() if shutil.which("nvidia-smi") else None
        self.gpu.read()
        self.gpu_baseline_mib = self.gpu.used_mib

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
                              "end": None, "gpu_peak_mib": 0.0, "gpu_used_mib_at_start": self.gpu.used_mib}
            if verb == "train rl":
                run = self.rl_runs.setdefault(spec["out"], {"attempts": []})
                run["attempts"].append({"pid": pid, "steps": f"{spec.get('start')}:{spec.get('end')}",
                                        "start": round(started - self.t0, 1), "end": None, "logged": {},
                                        "first_step_after_s": None})
        for pid, job in self.jobs.items():
            if job["end"] is None and pid not in seen:
                job["end"] = round(now - self.t0, 1)
                for run in self.rl_runs.values():
                    for attempt in run["attempts"]:
                        if attempt["pid"] == pid and attempt["end"] is None:
                            attempt["end"] = job["end"]
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
        # RL steps as they are logged, per attempt
        for run_dir, run in self.rl_runs.items():
            live = [a for a in run["attempts"] if a["end"] is None]
            if not live:
                continue
            attempt = live[-1]
            for row in read_steps(Path(run_dir)):
                step = str(int(float(row["step"])))
                if any(step in a["logged"] for a in run["attempts"]):
                    continue
                attempt["logged"][step] = {"at": round(now - attempt["start"] - self.t0, 1),
                                           **{k: row.get(k) for k in ("seconds", "rollout_s", "old_log_prob_s",
                                                                      "ref_log_prob_s", "update_s", "weight_sync_s",
                                                                      "save_s", "tokens_per_s_per_gpu",
                                                                      "actor_peak_gpu_gb", "response_tokens_mean",
                                                                      "id_success", "samples")}}
                if attempt["first_step_after_s"] is None:
                    attempt["first_step_after_s"] = attempt["logged"][step]["at"]

    def startup_and_step_s(self) -> tuple[float, float] | None:
        """(seconds from a verl attempt's start to its first step's start, a step's seconds), from
        the attempts seen so far."""
        starts, steps = [], []
        for run in self.rl_runs.values():
            for attempt in run["attempts"]:
                for info in attempt["logged"].values():
                    try:
                        steps.append(float(info["seconds"]))
                    except (TypeError, ValueError):
                        pass
                first = attempt["first_step_after_s"]
                if first is not None and attempt["logged"]:
                    info = next(iter(attempt["logged"].values()))
                    try:
                        starts.append(first - float(info["seconds"]))
                    except (TypeError, ValueError):
                        pass
        if not starts or not steps:
            return None
        return min(starts), sorted(steps)[len(steps) // 2]

    # ---- killing ------------------------------------------------------------------------------
    def due(self, kill: Kill, table) -> tuple[int, dict] | None:
        for pid, job in self.jobs.items():
            if job["end"] is not None or job["verb"] != "train rl" or kill.run not in job["label"] or pid not in table:
                continue
            run_dir = next((d for d, r in self.rl_runs.items() if any(a["pid"] == pid for a in r["attempts"])), None)
            attempt = next(a for a in self.rl_runs[run_dir]["attempts"] if a["pid"] == pid)
            age = time.time() - self.t0 - attempt["start"]
            if kill.when == "first":
                timing = self.startup_and_step_s()
                if timing and age >= timing[0] + 0.5 * timing[1]:
                    return pid, attempt
            elif kill.when in attempt["logged"]:
                logged_at = attempt["logged"][kill.when]["at"]
                if age >= logged_at + MID_STEP_S:
                    return pid, attempt
        return None

    def job_processes(self, trainer: int, table) -> tuple[str | None, list[int]]:
        """(the trainer's token, its processes: the trainer, its descendants, whatever carries the token)."""
        below = processes.descendants(trainer)
        token = None
        for pid in below:
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            for item in env:
                if item.startswith(processes.OWNER_ENV.encode() + b"="):
                    token = item.split(b"=", 1)[1].decode()
                    break
            if token:
                break
        marked = processes.processes_marked(processes.OWNER_ENV, token) if token else []
        return token, sorted({trainer, *below, *marked})

    def fire(self, kill: Kill, trainer: int, attempt: dict, table) -> None:
        kill.token, pids = self.job_processes(trainer, table)
        started = {pid: table[pid][1] for pid in pids if pid in table}
        kill.trainer_pid, kill.job = trainer, self.jobs[trainer]["label"]
        kill.steps_before = sorted(int(s) for s in attempt["logged"])
        kill.before = [{"pid": pid, "title": processes.process_name(pid), "gpu_mib": self.gpu.per_pid.get(pid, 0.0)}
                       for pid in pids]
        kill.gpu_used_mib_at_job_start = self.jobs[trainer]["gpu_used_mib_at_start"]
        kill.gpu_used_mib_before = self.gpu.used_mib
        kill.fired = round(time.time() - self.t0, 1)
        print(f"drive: {kill.kind} {kill.job} (pid {trainer}, {len(pids)} processes) at {kill.fired} s", flush=True)
        if kill.kind == "sigkill":
            os.kill(trainer, signal.SIGKILL)
        elif kill.kind == "sigterm":
            os.kill(trainer, signal.SIGTERM)
        else:
            os.killpg(self.snakemake.pid, signal.SIGINT)
        threading.Thread(target=self.watch_after, args=(kill, started), daemon=True).start()

    def watch_after(self, kill: Kill, started: dict[int, float]) -> None:
        t_fire = time.time()
        while time.time() - t_fire <= WATCH_AFTER_KILL_S:
            table = proc_table()
            left = [pid for pid, t in started.items() if pid in table and abs(table[pid][1] - t) < 1]
            if kill.token:
                left = sorted(set(left) | set(processes.processes_marked(processes.OWNER_ENV, kill.token)))
            left = [pid for pid in left if processes._alive(pid)]
            elapsed = round(time.time() - t_fire, 1)
            with self.lock:
                kill.after.append({"t": elapsed, "left": [f"{pid} {processes.process_name(pid)}" for pid in left],
                                   "gpu_used_mib": self.gpu.used_mib,
                                   "gpu_mib_of_left": sum(self.gpu.per_pid.get(pid, 0.0) for pid in left)})
                if not left and kill.all_gone_after_s is None:
                    kill.all_gone_after_s = elapsed
                kill.left_after_30_s = kill.after[-1]["left"]
            time.sleep(TICK_S)

    # ---- running ------------------------------------------------------------------------------
    def start_snakemake(self) -> None:
        log = (self.record_dir / f"snakemake_{len(self.snakemake_runs)}.log").open("w")
        self.snakemake = subprocess.Popen([sys.executable, "-m", "snakemake", *self.args.snakemake], stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        self.snakemake_runs.append({"start": round(time.time() - self.t0, 1), "end": None, "returncode": None,
                                    "log": log.name})
        print(f"drive: snakemake started (run {len(self.snakemake_runs)})", flush=True)

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
        with self.lock:
            record = {"machine": self.machine, "commit": self.args.commit,
                      "date": dt.datetime.fromtimestamp(self.t0, dt.timezone.utc).isoformat(timespec="seconds"),
                      "seconds": round(time.time() - self.t0, 1), "gpu_baseline_mib": self.gpu_baseline_mib,
                      "snakemake_args": self.args.snakemake, "snakemake_runs": self.snakemake_runs,
                      "jobs": sorted(self.jobs.values(), key=lambda j: j["start"]),
                      "rl_runs": {str(Path(d)).removeprefix(self.results).lstrip("/"): r for d, r in self.rl_runs.items()},
                      "kills": [asdict(k) for k in self.kills],
                      "compare_returncode": None if self.compare is None else self.compare.poll()}
        tmp = self.record_dir / "drive.json.tmp"
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.rename(self.record_dir / "drive.json")

    def run(self) -> int:
        deadline = self.t0 + self.args.seconds
        self.start_snakemake()
        pending = list(self.kills)
        last_write = 0.0
        stopped = False
        while True:
            table = proc_table()
            self.tick(table)
            self.maybe_compare()
            if pending and not stopped:
                hit = self.due(pending[0], table)
                if hit and time.time() - self.t0 > self.args.kill_until:
                    pending.pop(0).skipped = f"due at {time.time() - self.t0:.0f} s, after --kill-until {self.args.kill_until:.0f} s"
                elif hit:
                    self.fire(pending.pop(0), *hit, table)
            rc = self.snakemake.poll()
            if rc is not None:
                run = self.snakemake_runs[-1]
                run["end"], run["returncode"] = round(time.time() - self.t0, 1), rc
                restart = any(k.kind == "sigint" and k.fired is not None and k.fired >= run["start"] for k in self.kills)
                if restart and not stopped and time.time() < deadline:
                    time.sleep(WATCH_AFTER_KILL_S)  # the kill's 30 s watch, before a new run starts jobs
                    self.start_snakemake()
                else:
                    break
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
        if self.compare is not None:
            try:
                self.compare.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.compare.pid, signal.SIGINT)
        time.sleep(1)
        self.tick(proc_table())
        self.write()
        print(f"drive: done after {time.time() - self.t0:.0f} s, snakemake exit {self.snakemake_runs[-1]['returncode']}",
              flush=True)
        return self.snakemake_runs[-1]["returncode"] or 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("record_dir", type=Path)
    ap.add_argument("--seconds", type=float, required=True, help="stop Snakemake (SIGINT) after this long")
    ap.add_argument("--results", default="results", help="the results folder (for job labels)")
    ap.add_argument("--kill", action="append", default=[], help="KIND:RUN@STEP|first (module doc)")
    ap.add_argument("--kill-until", type=float, default=float("inf"),
                    help="a kill due later than this (seconds) is skipped: the run must still end in time")
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
