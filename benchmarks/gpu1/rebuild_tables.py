"""Rebuild the one-GPU reference run's tables from its committed summaries, under the current code.

The reference run (benchmarks/gpu_runs/gpu1_reference_2026-12-02.md) finished 27 of its 40 RL runs,
so its own table jobs built Tables 2, 3, 4, 6 and 8 only. This builds every table
(``gentax.analysis.tables.build_all``, no figures) from the run and base summaries that finished and
its property table (``gpu1_reference_2026-12-02.tar.gz`` beside the summary), with the run's settings
(window = its last checkpoint, step 6; bootstrap seed 0; its V2 SFT mix), and writes Tables 2, 4, 5,
6 and 7 with the commit, date and machine as one record, benchmarks/records/gpu1_reference_tables.md.
Cells whose aug / nothink run did not finish are empty; some arms have one seed where the default has
two (Tables 5 and 7: such cells cannot be resolved).

    python benchmarks/gpu1/rebuild_tables.py
"""

from __future__ import annotations

import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from common import record_header, write_record  # noqa: E402

ARCHIVE = REPO / "benchmarks" / "gpu_runs" / "gpu1_reference_2026-12-02.tar.gz"
RECORD = "gpu1_reference_tables.md"
#: the reference run's settings (its Snakemake log's `gentax table --job` lines)
WINDOW = (6,)
SFT_MIX = ("alfworld", "webshop", "sciworld")
BOOTSTRAP, ERROR_MARK_PCT, TEST_LEVEL = 1000, 5.0, 0.05
SHOWN = ("table2_success", "table4_extended", "table5_augmentation", "table6_relative_change", "table7_thinking")


def reference_inputs():
    """(summary, properties) of the reference run as DataFrames: every run and base summary that
    finished (the summaries' rows, in the order of their files' paths) and the property table."""
    import pandas as pd

    with tarfile.open(ARCHIVE) as tar:
        return tuple(pd.read_csv(tar.extractfile(name)) for name in ("summary.csv", "properties.csv"))


def main() -> int:
    from gentax.analysis.tables import build_all

    summary, properties = reference_inputs()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tables"
        analysis = build_all(summary, properties, out, window=WINDOW, seed=0, n_boot=BOOTSTRAP,
                             error_mark_pct=ERROR_MARK_PCT, test_level=TEST_LEVEL, figures=False, sft_mix=SFT_MIX)
        tables = [(out / f"{name}.md").read_text().strip() for name in SHOWN if (out / f"{name}.md").is_file()]
    header = record_header("python benchmarks/gpu1/rebuild_tables.py")
    settings = (f"{len(summary)} summary rows of {ARCHIVE.relative_to(REPO)}, window {','.join(map(str, WINDOW))}, "
                f"bootstrap seed 0, {analysis.settings.n_boot} draws, test level {analysis.settings.test_level:g}, "
                f"SFT mix {', '.join(SFT_MIX)}; built: {', '.join(sorted(analysis.tables))}")
    write_record(RECORD, "\n\n".join([f"{header}\n{settings}", *tables]) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
