"""Does one evaluation job per checkpoint (every domain in one process) cost more CPU than one
process per domain? Both, back to back, on one checkpoint of a finished embedded study.

    python benchmarks/eval_merged_cpu.py STUDY_DIR [--checkpoint results/eval/v2/sokoban]

STUDY_DIR is a clone whose ``snakemake`` run finished (its ``.snakemake/log`` holds the eval jobs'
commands). The first evaluation job whose outputs start with ``--checkpoint`` is run as the workflow
runs it (``gentax eval --job SPEC``, one thread, ``GENTAX_EVAL_REPLAY=1`` so nothing is kept from
the study's run), then once per domain with the same spec cut to that domain. Each run's wall
seconds, the machine's CPU seconds over it (``/proc/stat``: every process, so a JVM that outlives
its job's accounting counts too; run it on an otherwise idle machine) and what the job's log says
it used (``gentax.joblog.USED``). The runs write the same results the study wrote (same spec, same
seeds), into STUDY_DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from roofline import machine, machine_line  # benchmarks/ is the script's folder, first on sys.path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def machine_cpu_seconds() -> float:
    """CPU seconds every process of the machine has used (user, nice, system, irq, softirq)."""
    with open("/proc/stat") as fh:
        fields = fh.readline().split()
    return sum(int(fields[i]) for i in (1, 2, 3, 6, 7)) / os.sysconf("SC_CLK_TCK")


def eval_spec(study: Path, checkpoint: str) -> dict:
    """The ``--job`` spec of the first eval job of ``study``'s Snakemake logs whose outputs start with
    ``checkpoint``."""
    marker = "gentax eval --job '"
    for log in sorted((study / ".snakemake" / "log").glob("*.snakemake.log")):
        for line in log.read_text().splitlines():
            if marker in line:
                spec = json.loads(line.split(marker, 1)[1].split("' --log", 1)[0])
                if spec["domains"][0]["out"].startswith(checkpoint):
                    return spec
    raise SystemExit(f"no eval job writing {checkpoint}* in {study}/.snakemake/log (run the study there first)")


def run(study: Path, spec: dict, log: Path) -> dict:
    from gentax.joblog import usage

    env = {**os.environ, "OMP_NUM_THREADS": "1", "GENTAX_EVAL_REPLAY": "1",
           "PATH": f"{study / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    cpu, started = machine_cpu_seconds(), time.perf_counter()
    subprocess.run(["gentax", "eval", "--job", json.dumps(spec), "--log", str(log)], cwd=study, env=env, check=True)
    wall, cpu = time.perf_counter() - started, machine_cpu_seconds() - cpu
    return {"wall_s": wall, "machine_cpu_s": cpu, "logged_cpu_s": usage(log)["cpu_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", type=Path)
    parser.add_argument("--checkpoint", default="results/eval/v2/sokoban")
    args = parser.parse_args()
    study = args.study.resolve()
    spec = eval_spec(study, args.checkpoint)
    print(machine_line(machine()))
    print(f"evaluation job of {spec['model']}: {', '.join(d['domain'] for d in spec['domains'])}; one thread")
    rows = []
    with tempfile.TemporaryDirectory() as logs:
        rows.append(("one job, every domain", run(study, spec, Path(logs) / "merged.log")))
        for domain in spec["domains"]:
            one = {**spec, "domains": [domain]}
            rows.append((f"one job for {domain['domain']}", run(study, one, Path(logs) / f"{domain['domain']}.log")))
    print(f"{'run':32} {'wall s':>8} {'machine CPU s':>14} {'logged CPU s':>13}")
    for name, r in rows:
        print(f"{name:32} {r['wall_s']:8.1f} {r['machine_cpu_s']:14.1f} {r['logged_cpu_s']:13.1f}")
    split = [r for _, r in rows[1:]]
    sums = {key: sum(r[key] for r in split) for key in split[0]}
    print(f"{'one job per domain, summed':32} {sums['wall_s']:8.1f} {sums['machine_cpu_s']:14.1f} {sums['logged_cpu_s']:13.1f}")
    merged = rows[0][1]
    print(f"merged / per domain: wall {merged['wall_s'] / sums['wall_s']:.2f}, machine CPU "
          f"{merged['machine_cpu_s'] / sums['machine_cpu_s']:.2f}")


if __name__ == "__main__":
    main()
