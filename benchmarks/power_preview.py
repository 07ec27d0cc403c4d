"""Print `gentax plan --power` for the embedded, one-GPU and paper presets, headed by commit, date and
machine: the records benchmarks/records/power_<preset>.txt (`python benchmarks/power_preview.py --write`).

Usage: python benchmarks/power_preview.py [--write]
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PRESETS = ("embedded", "gpu1", "paper")


def main(argv=None) -> int:
    from gentax.study import plan as gplan
    from gentax.study import config as gconfig
    from gentax import provenance
    from gentax.study import power
    from gentax.io import write_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write benchmarks/records/power_<preset>.txt")
    args = parser.parse_args(argv)
    code, machine = provenance.code_version(), provenance.machine()
    header = (f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {code['commit']}"
              f"{' (dirty)' if code['dirty'] else ''}, {machine['cpu']}, {machine['cores']} cores; "
              "python benchmarks/power_preview.py --write\n")
    for preset in PRESETS:
        cfg = gconfig.study_config(preset, memory=True)
        text = header + power.render(power.preview(cfg))
        print(text)
        if args.write:
            write_text(REPO / "benchmarks" / "records" / f"power_{preset}.txt", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
