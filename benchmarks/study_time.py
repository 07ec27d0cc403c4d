"""Per-job-kind time of a finished workflow run, from Snakemake's benchmark files and the jobs' logs.

    python benchmarks/study_time.py [RESULTS]        # default: results/embedded

Wall seconds from each rule's ``RESULTS/benchmarks/<job>.tsv`` (the mean of its rows); CPU seconds
from the job's log (its last ``gentax.joblog.USED`` line) where it has one, since Snakemake's sampled
``cpu_time`` misses up to a job's last 30 s. Prints a markdown table per job kind, then the sums (the
wall sum is not the study's wall time when jobs ran in parallel).
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this clone's gentax
from gentax.joblog import usage  # noqa: E402

#: (pattern on the benchmark path below benchmarks/, without .tsv; job kind), first match wins
KINDS = (
    (r"model/embedded$", "embedded model (convert)"),
    (r"model/embedded_base_data$", "warm start: expert data"),
    (r"model/embedded_base$", "warm start: SFT"),
    (r"tasks/", "task manifests"),
    (r"init/v1$", "Ckpt V1: RL"),
    (r"init/v2_sft_data$", "Ckpt V2: SFT data"),
    (r"init/v2$", "Ckpt V2: SFT"),
    (r"runs/", "RL segments"),
    (r"eval/[^/]+/base/", "evaluations: initial policies"),
    (r"eval/", "evaluations: checkpoints"),
    (r"properties/table$", "properties table"),
    (r"properties/", "property logs"),
    (r"summary/", "run summaries"),
    (r"tables/", "tables"),
    (r"figures/", "figures"),
)


def job_kind(name: str) -> str:
    for pattern, kind in KINDS:
        if re.search(pattern, name):
            return kind
    return "other: " + name.split("/", 1)[0]


def read_benchmark(path: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one benchmark file: the mean over its rows (Snakemake's repeats)."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    if not rows or "s" not in rows[0] or "cpu_time" not in rows[0]:
        raise SystemExit(f"{path}: not a Snakemake benchmark file (needs columns s and cpu_time)")

    def mean(column: str) -> float:
        values = [float(r[column]) for r in rows if r[column] not in ("", "NA", "-")]
        return sum(values) / len(values) if values else 0.0

    return mean("s"), mean("cpu_time")


def logged_cpu(results: Path, name: str) -> float | None:
    """The CPU seconds the job ``name``'s log says its last ended attempt used (None: no such line)."""
    log = results / "logs" / f"{name}.log"
    used = usage(log) if log.is_file() else None
    return None if used is None else used["cpu_s"]


def kind_table(results: str | Path) -> dict[str, list[float]]:
    """{kind: [jobs, wall s, CPU s, jobs whose CPU s is the benchmark file's]} over
    ``results/benchmarks/**/*.tsv``, in KINDS order."""
    results = Path(results)
    folder = results / "benchmarks"
    files = sorted(folder.rglob("*.tsv"))
    if not files:
        raise SystemExit(f"no benchmark files under {folder} (run the workflow first)")
    order = [kind for _, kind in KINDS]
    table: dict[str, list[float]] = {}
    for path in files:
        name = path.relative_to(folder).with_suffix("").as_posix()
        wall, sampled_cpu = read_benchmark(path)
        cpu = logged_cpu(results, name)
        row = table.setdefault(job_kind(name), [0, 0.0, 0.0, 0])
        row[0] += 1
        row[1] += wall
        row[2] += sampled_cpu if cpu is None else cpu
        row[3] += cpu is None
    return dict(sorted(table.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))


def markdown(table: dict[str, list[float]]) -> str:
    lines = ["| job kind | jobs | wall s | CPU s | CPU s sampled by Snakemake (jobs) |", "|---|---:|---:|---:|---:|"]
    for kind, (jobs, wall, cpu, sampled) in table.items():
        lines.append(f"| {kind} | {jobs:.0f} | {wall:,.0f} | {cpu:,.0f} | {sampled:.0f} |")
    jobs, wall, cpu, sampled = (sum(row[i] for row in table.values()) for i in range(4))
    lines.append(f"| **sum** | {jobs:.0f} | {wall:,.0f} | {cpu:,.0f} | {sampled:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", default="results/embedded")
    args = parser.parse_args(argv)
    print(markdown(kind_table(args.results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
