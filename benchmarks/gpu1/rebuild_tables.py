"""Rebuild the one-GPU reference run's tables from its committed summaries, under the current code.

The reference run (docs/gpu1.md) finished 27 of its 40 RL runs, so its own table jobs built Tables 2,
3, 4, 6 and 8 only. This builds every table (``gentax.analysis.tables.build_all``, no figures) from
the run summaries and base summaries that finished (``reference/run/summary/``), with the run's
settings (window = its last checkpoint, step 6; bootstrap seed 0; its V2 SFT mix), into
``reference/rebuilt/``, and writes ``reference/rebuilt/RECORD.txt`` (commit, date, machine, the
command) beside them. Cells whose aug / nothink run did not finish are empty; some arms have one
seed where the default has two (Tables 5 and 7: such cells cannot be resolved).

    python benchmarks/gpu1/rebuild_tables.py
"""

from __future__ import annotations

import datetime
import glob
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

REFERENCE = REPO / "benchmarks" / "gpu1" / "reference"
OUT = REFERENCE / "rebuilt"
#: the reference run's settings (its Snakemake log's `gentax table --job` lines)
WINDOW = (6,)
SFT_MIX = ("alfworld", "webshop", "sciworld")
BOOTSTRAP, ERROR_MARK_PCT, TEST_LEVEL = 1000, 5.0, 0.05


def main() -> int:
    import os

    import pandas as pd

    from gentax import provenance
    from gentax.analysis.tables import build_all

    os.chdir(REPO)  # the manifest names its inputs relative to the repository, not this machine
    reference = REFERENCE.relative_to(REPO)
    files = sorted(glob.glob(str(reference / "run" / "summary" / "**" / "*.csv"), recursive=True))
    summary = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    analysis = build_all(summary, reference / "run" / "properties" / "properties.csv", OUT, window=WINDOW, seed=0,
                         n_boot=BOOTSTRAP, error_mark_pct=ERROR_MARK_PCT, test_level=TEST_LEVEL, figures=False,
                         sft_mix=SFT_MIX)
    code, machine = provenance.code_version(), provenance.machine()
    (OUT / "RECORD.txt").write_text(
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {code['commit']}"
        f"{' (dirty)' if code['dirty'] else ''}, {machine['cpu']}, {machine['cores']} cores; "
        "python benchmarks/gpu1/rebuild_tables.py\n"
        f"{len(files)} summaries ({len(summary)} rows) of benchmarks/gpu1/reference/run/summary/, window "
        f"{','.join(map(str, WINDOW))}, bootstrap seed 0, {analysis.settings.n_boot} draws, test level "
        f"{analysis.settings.test_level:g}, SFT mix {', '.join(SFT_MIX)}\n")
    print(f"wrote {OUT.relative_to(REPO)}: {', '.join(sorted(analysis.tables))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
