"""Wall time of ``gentax tables`` on a synthetic summary of the paper's full grid.

    python benchmarks/bench_tables.py [--bootstrap 1000] [--rounds 1] [--keep DIR]

Writes ``gentax.analysis.synthetic`` inputs as CSV, then runs the real command line ``--rounds``
times, with and without figures, and prints the wall and CPU times and the output listing.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gentax.analysis.synthetic import synthetic_properties, synthetic_summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="keep inputs and output here")
    args = parser.parse_args()

    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        return bench(args, args.keep)
    with tempfile.TemporaryDirectory(prefix="bench_tables.") as folder:
        return bench(args, Path(folder))


def bench(args, folder: Path) -> int:
    summary, properties = folder / "summary.csv", folder / "properties.csv"
    frame = synthetic_summary(seed=0)
    frame.to_csv(summary, index=False)
    synthetic_properties().to_csv(properties, index=False)
    runs = frame[frame.train_domain != "base"][["init", "train_domain", "variant", "seed"]].drop_duplicates()
    print(f"summary: {len(frame)} rows, {len(runs)} (run, seed) pairs, "
          f"{frame.step.nunique()} distinct steps -> {summary}")

    out = folder / "tables"
    for label, extra in (("no figures", ["--no-figures"]), ("with figures", [])):
        times, cpu = [], []
        for _ in range(args.rounds):
            command = [sys.executable, "-m", "gentax", "tables", "--summary", str(summary),
                       "--properties", str(properties), "--out", str(out),
                       "--bootstrap", str(args.bootstrap), *extra]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        # CPU time is the figure to compare when the machine is shared (wall time waits for cores)
        print(f"gentax tables --bootstrap {args.bootstrap} ({label}): best wall {min(times):.2f} s, "
              f"best CPU {min(cpu):.2f} s, of {len(times)} (process start included)")

    print(f"output listing of {out}:")
    for path in sorted(out.rglob("*")):
        if path.is_file():
            print(f"  {path.relative_to(out)}  {path.stat().st_size} B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
