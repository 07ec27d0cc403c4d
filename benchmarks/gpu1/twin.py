"""Do two runs of one config agree? What the second run (the "twin", which ran fewer targets) made,
compared with the same files of the first, by ``benchmarks/equivalence.py``'s ``compare``: RL
metrics and evaluation episodes less their timings, every trained model's weights and the training
data by sha256, evaluation
summaries less timings and provenance, tables.

    python3 benchmarks/gpu1/twin.py FIRST_RUN TWIN_RUN [--out twin.json]   # folders holding results/

Prints one line per artifact kind (how many compared, which differ); ``--out`` writes the lines as
JSON. Standard library and pandas only (the GPU machine's image).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: equivalence's comparison

from equivalence import compare  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("twin", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = compare(args.twin, args.first)  # the twin's files, each against the first run's
    print("\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps({"twin": str(args.twin), "first": str(args.first), "compared": lines}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
