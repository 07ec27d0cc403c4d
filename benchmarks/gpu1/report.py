"""Figures of a workstation-study run on one GPU, from its results folder (what
benchmarks/gpu1/device.sh brings back as results.tar.xz, unpacked): per job kind wall time, GPU
busy fraction while such jobs ran, generation tokens/s against the GPU's limits, where an RL
step's time goes, each RL attempt's start-up (its log: the attempt's start line to the trainer's
"step N begins" line) and, with --record (drive.py's folder), each kill and what it left. Prints the
report, headed by the date, the commit and the machine: the per-job-kind part of a GPU run's summary
(benchmarks/gpu_runs/).

    python benchmarks/gpu1/report.py RESULTS_DIR --machine "one NVIDIA H200" [--record RECORD_DIR]

Ceilings: the H200's bf16 peak and HBM bandwidth (``PEAK_FLOPS``, ``HBM_BYTES_PER_S``). GPU busy is
nvidia-smi's utilization.gpu over the job's interval: the GPU's, not the job's, when jobs overlap.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import re
import statistics
import subprocess
from collections import defaultdict
from pathlib import Path

PEAK_FLOPS = 790e12
HBM_BYTES_PER_S = 4.3e12
PARAMS = 134.5e6          # SmolLM2-135M (tied embeddings)
MODEL_BYTES = 2 * PARAMS  # bf16 weights read once per decode step
ATTEMPT = re.compile(r"^==== gentax attempt (\d+): .*?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC: gentax train rl")
FIRST_STEP = re.compile(r"gentax: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC step (\d+) begins")
#: verl's timestamped set-up lines (trainer_base.py ``_setup``), in their order: where a start-up went
VERL_MARK = re.compile(r"INFO:(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+:(create worker group|actor and ref model engine "
                       r"initialized|reward loop manager initialized|checkpoint engine manager initialized|all "
                       r"initialize finished)")
VERL_PHASES = ("old_log_prob_s", "ref_log_prob_s", "weight_sync_s", "save_s")  # verl's step beside rollout and update


def job_kind(tsv: Path, bench: Path) -> str:
    parts = tsv.relative_to(bench).parts
    if parts[0] in ("eval", "runs"):
        return f"{parts[0]} ({parts[2] == 'base' and 'base' or 'grid'})"
    return f"{parts[0]}/{Path(parts[-1]).stem}" if parts[0] in ("model", "init") else parts[0]


def gpu_samples(path: Path) -> list[tuple[float, float, float]]:
    out = []
    if not path.is_file():
        return out
    for row in csv.reader(path.open()):
        try:
            t = dt.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc).timestamp()
            out.append((t, float(row[1].split()[0]), float(row[2].split()[0])))
        except (ValueError, IndexError):
            continue
    return out


def busy(samples, start: float, end: float) -> float | None:
    """The GPU's mean utilization (0-1) over the samples between ``start`` and ``end``."""
    inside = [u for t, u, _ in samples if start <= t <= end]
    return statistics.fmean(inside) / 100 if inside else None


def utc(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc).timestamp()


def startups(logs: Path) -> list[tuple[str, int, int, float, list[tuple[str, float]]]]:
    """(job log, attempt, its first step, seconds from the attempt's start to that step's start, verl's
    set-up marks as (mark, seconds from the attempt's start)) of every verl RL attempt that reached a step."""
    out, attempt = [], None
    for log in sorted(logs.rglob("*.log")):
        for line in log.open(errors="replace"):
            if found := ATTEMPT.match(line):
                attempt, marks = (int(found[1]), utc(found[2])), []
            elif attempt and (found := VERL_MARK.search(line)):
                marks.append((found[2], utc(found[1]) - attempt[1]))
            elif attempt and (found := FIRST_STEP.search(line)):
                out.append((str(log.relative_to(logs)), attempt[0], int(found[2]), utc(found[1]) - attempt[1], marks))
                attempt = None
        attempt = None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--machine", required=True, help="the machine, in words (the report's first line)")
    ap.add_argument("--record", type=Path, help="drive.py's record folder (its drive.json): the kills")
    args = ap.parse_args()
    results = Path(args.results)
    bench = results / "benchmarks"
    samples = gpu_samples(results / "gpu_samples.csv")
    kinds: dict[str, list[dict]] = defaultdict(list)
    for tsv in sorted(bench.rglob("*.tsv")):
        rows = list(csv.DictReader(tsv.open(), delimiter="\t"))
        if rows:
            wall, end = float(rows[-1]["s"]), tsv.stat().st_mtime
            kinds[job_kind(tsv, bench)].append({"wall_s": wall, "cpu_s": float(rows[-1]["cpu_time"]),
                                                "gpu_busy": busy(samples, end - wall, end)})
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit}; {args.machine}; "
          f"python benchmarks/gpu1/report.py {args.results}")
    print(f"{'job kind':24s} {'jobs':>4s} {'wall s med':>10s} {'max':>7s} {'cpu s med':>9s} {'GPU busy':>8s}")
    for kind, jobs in sorted(kinds.items()):
        utils = [j["gpu_busy"] for j in jobs if j["gpu_busy"] is not None]
        print(f"{kind:24s} {len(jobs):4d} {statistics.median(j['wall_s'] for j in jobs):10.1f} "
              f"{max(j['wall_s'] for j in jobs):7.1f} {statistics.median(j['cpu_s'] for j in jobs):9.1f} "
              f"{f'{statistics.fmean(utils):.0%}' if utils else '-':>8s}")
    gen = [t for s in sorted((results / "eval").rglob("*.json")) if (t := json.loads(s.read_text()).get("timing") or {})
           and t.get("generate_s")]
    if gen:  # generation inside the evaluation jobs
        wall = statistics.median(g["wall_s"] for g in gen)
        gen_s = statistics.median(g["generate_s"] for g in gen)
        tps = statistics.median(g["tokens_per_s"] for g in gen)
        prompt_tps = statistics.median(g["prompt_tokens"] / g["generate_s"] for g in gen)
        batch = statistics.median(g["episodes"] for g in gen)
        decode_ceiling, prefill_ceiling = batch * HBM_BYTES_PER_S / MODEL_BYTES, PEAK_FLOPS / (2 * PARAMS)
        print(f"\neval collection (median of {len(gen)}): {wall:.1f} s in the job's collect, {gen_s:.1f} s generating;"
              f" {tps:,.0f} new tokens/s at batch {batch:.0f} = {tps / decode_ceiling:.3%} of the decode ceiling"
              f" ({decode_ceiling:,.0f}/s); {prompt_tps:,.0f} prompt tokens/s (counted once per turn, KV reuse aside)"
              f" = {prompt_tps / prefill_ceiling:.2%} of the prefill ceiling ({prefill_ceiling:,.0f}/s)")
    steps = [{k: float(v) for k, v in row.items() if v} for metrics in sorted((results / "runs").rglob("metrics.csv"))
             for row in csv.DictReader(metrics.open())]
    if steps:  # the local engine's step figures, or verl's (its own phases, no update throughput)
        later = [s for s in steps if s["step"] > 1] or steps
        med = {k: statistics.median(s[k] for s in later if k in s) for k in {k for s in later for k in s}}
        line = (f"\nRL step (median of {len(later)} steps after each run's first): {med['seconds']:.1f} s = rollout"
                f" {med['rollout_s']:.1f} s + update {med['update_s']:.1f} s")
        if "train_tokens_per_s" in med:
            line += (f"; {med['samples']:.0f} step samples; rollout {med['tokens_per_s']:.0f} new tokens/s, update"
                     f" {med['train_tokens_per_s']:,.0f} tokens/s = {med['train_tokens_per_s'] * 6 * PARAMS / PEAK_FLOPS:.2%}"
                     " of the bf16 peak (6 x parameters FLOP a token)")
        else:
            line += "".join(f"; {k} {med[k]:.1f} s" for k in VERL_PHASES if k in med)
        print(line)
    for log, attempt, step, seconds, marks in startups(results / "logs"):
        print(f"start-up {seconds:5.0f} s: {log} attempt {attempt}, to the start of step {step}"
              + "".join(f"; {mark} {t:.0f} s" for mark, t in marks))
    kills = json.loads((args.record / "drive.json").read_text()).get("kills", []) if args.record else []
    for kill in (k for k in kills if k.get("fired") is not None):
        gone = kill["all_gone_after_s"]
        print(f"kill {kill['kill']} at {kill['fired']} s: {len(kill['before'])} processes "
              f"({sum(b['gpu_mib'] for b in kill['before']):,.0f} MiB on the GPU), "
              f"{'all gone after ' + str(gone) + ' s' if gone is not None else 'left: ' + ', '.join(kill['after'][-1]['left'])}; "
              f"GPU memory {kill['gpu_used_mib_before']} -> {kill['after'][-1]['gpu_used_mib']} MiB")
    if samples:
        print(f"\nGPU over the whole sampled span ({samples[-1][0] - samples[0][0]:.0f} s): mean busy "
              f"{statistics.fmean(u for _, u, _ in samples):.0f} %, peak memory {max(m for *_, m in samples) / 1024:.1f} GiB "
              "(all processes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
