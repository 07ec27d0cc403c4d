"""Figures of a workstation-study run on one GPU, from its results folder (what
benchmarks/gpu1/device.sh brings back as results.tar.xz, unpacked): per job kind wall time, GPU
busy fraction while such jobs ran, generation tokens/s against the GPU's limits, and where an RL
step's time goes. Prints a table and writes a JSON record (with commit, machine and date).

    python benchmarks/gpu1/report.py RESULTS_DIR --machine "one NVIDIA H200" --out RECORD.json

Ceilings (measured on the lent H200, KINDS.md): bf16 matrix products 790 TFLOP/s, HBM copy 4.3 TB/s.
Decode ceiling at batch B: B tokens per (model bytes / bandwidth); prefill ceiling: 2 x parameters
FLOP per prompt token at the bf16 peak. GPU busy = nvidia-smi's utilization.gpu (the share of time
a kernel ran, from any process) averaged over the samples inside the job's interval: with several
jobs at once it is the GPU's, not the job's.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import statistics
import subprocess
from collections import defaultdict
from pathlib import Path

PEAK_FLOPS = 790e12
HBM_BYTES_PER_S = 4.3e12
PARAMS = 134.5e6          # SmolLM2-135M (tied embeddings)
MODEL_BYTES = 2 * PARAMS  # bf16 weights read once per decode step


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


def busy(samples, start: float, end: float) -> tuple[float | None, float | None]:
    inside = [(u, m) for t, u, m in samples if start <= t <= end]
    if not inside:
        return None, None
    return statistics.fmean(u for u, _ in inside) / 100, max(m for _, m in inside) / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    results = Path(args.results)
    bench = results / "benchmarks"
    samples = gpu_samples(results / "gpu_samples.csv")
    kinds: dict[str, list[dict]] = defaultdict(list)
    for tsv in sorted(bench.rglob("*.tsv")):
        rows = list(csv.DictReader(tsv.open(), delimiter="\t"))
        if not rows:
            continue
        wall, end = float(rows[-1]["s"]), tsv.stat().st_mtime
        util, mem = busy(samples, end - wall, end)
        kinds[job_kind(tsv, bench)].append({"job": str(tsv.relative_to(bench).with_suffix("")), "wall_s": wall,
                                            "cpu_s": float(rows[-1]["cpu_time"]), "gpu_busy": util, "gpu_mem_gib_all": mem})
    # generation inside the jobs: eval summaries and RL metrics
    gen = []
    for summary in sorted((results / "eval").rglob("*.json")):
        t = json.loads(summary.read_text()).get("timing") or {}
        if t.get("generate_s"):
            gen.append({"job": str(summary.relative_to(results).with_suffix("")), "kind": "eval", **t})
    rl_steps = []
    for metrics in sorted((results / "runs").rglob("metrics.csv")):
        for row in csv.DictReader(metrics.open()):
            rl_steps.append({"run": str(metrics.parent.relative_to(results)), **{k: float(v) for k, v in row.items()
                             if k in ("step", "seconds", "rollout_s", "update_s", "tokens_per_s", "train_tokens_per_s",
                                      "trajectories", "samples", "response_tokens", "prompt_tokens_mean", "id_success")}})
    record = {"commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
              "machine": args.machine, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "ceilings": {"bf16_flops": PEAK_FLOPS, "hbm_bytes_per_s": HBM_BYTES_PER_S, "model_bytes": MODEL_BYTES},
              "job_kinds": {}, "eval_generation": {}, "rl_step": {}}
    print(f"{'job kind':24s} {'jobs':>4s} {'wall s med':>10s} {'max':>7s} {'cpu s med':>9s} {'GPU busy':>8s}")
    for kind, jobs in sorted(kinds.items()):
        utils = [j["gpu_busy"] for j in jobs if j["gpu_busy"] is not None]
        row = {"jobs": len(jobs), "wall_s_median": statistics.median(j["wall_s"] for j in jobs),
               "wall_s_max": max(j["wall_s"] for j in jobs), "cpu_s_median": statistics.median(j["cpu_s"] for j in jobs),
               "gpu_busy_mean": statistics.fmean(utils) if utils else None, "per_job": jobs}
        record["job_kinds"][kind] = row
        busy_txt = f"{row['gpu_busy_mean']:.0%}" if utils else "-"
        print(f"{kind:24s} {len(jobs):4d} {row['wall_s_median']:10.1f} {row['wall_s_max']:7.1f} {row['cpu_s_median']:9.1f} {busy_txt:>8s}")
    if gen:
        wall = statistics.median(g["wall_s"] for g in gen)
        gen_s = statistics.median(g["generate_s"] for g in gen)
        tps = statistics.median(g["tokens_per_s"] for g in gen)
        prompt_tps = statistics.median(g["prompt_tokens"] / g["generate_s"] for g in gen)
        batch = statistics.median(g["episodes"] for g in gen)
        decode_ceiling = batch * HBM_BYTES_PER_S / MODEL_BYTES
        prefill_ceiling = PEAK_FLOPS / (2 * PARAMS)
        record["eval_generation"] = {"jobs": len(gen), "collect_wall_s_median": wall, "generate_s_median": gen_s,
                                     "decode_tokens_per_s_median": tps, "prompt_tokens_per_s_median": prompt_tps,
                                     "batch_median": batch, "decode_ceiling_tokens_per_s": decode_ceiling,
                                     "prefill_ceiling_tokens_per_s": prefill_ceiling, "per_job": gen}
        print(f"\neval collection (median of {len(gen)}): {wall:.1f} s in the job's collect, {gen_s:.1f} s generating;"
              f" {tps:,.0f} new tokens/s at batch {batch:.0f} = {tps / decode_ceiling:.3%} of the decode ceiling"
              f" ({decode_ceiling:,.0f}/s); {prompt_tps:,.0f} prompt tokens/s (counted once per turn, KV reuse aside)"
              f" = {prompt_tps / prefill_ceiling:.2%} of the prefill ceiling ({prefill_ceiling:,.0f}/s)")
    if rl_steps:
        later = [s for s in rl_steps if s["step"] > 1] or rl_steps
        med = {k: statistics.median(s[k] for s in later) for k in ("seconds", "rollout_s", "update_s", "tokens_per_s",
                                                                   "train_tokens_per_s", "samples")}
        record["rl_step"] = {"steps": len(rl_steps), "median_after_step_1": med, "per_step": rl_steps}
        print(f"\nRL step (median of {len(later)} steps after each run's first): {med['seconds']:.1f} s = rollout"
              f" {med['rollout_s']:.1f} s + update {med['update_s']:.1f} s; {med['samples']:.0f} step samples;"
              f" rollout {med['tokens_per_s']:.0f} new tokens/s, update {med['train_tokens_per_s']:,.0f} tokens/s"
              f" = {med['train_tokens_per_s'] * 6 * PARAMS / PEAK_FLOPS:.2%} of the bf16 peak (6 x parameters FLOP a token)")
    if samples:
        span = samples[-1][0] - samples[0][0]
        print(f"\nGPU over the whole sampled span ({span:.0f} s): mean busy {statistics.fmean(u for _, u, _ in samples):.0f} %,"
              f" peak memory {max(m for *_, m in samples) / 1024:.1f} GiB (all processes)")
        record["gpu_overall"] = {"span_s": span, "busy_mean": statistics.fmean(u for _, u, _ in samples) / 100,
                                 "peak_mem_gib": max(m for *_, m in samples) / 1024}
    Path(args.out).write_text(json.dumps(record, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
