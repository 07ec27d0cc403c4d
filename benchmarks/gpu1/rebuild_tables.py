"""Rebuild the one-GPU runs' tables from their committed summaries, under the current code.

The runs of ``RUNS`` (reference size: 2 seeds, 6 RL steps; docs/gpu1.md) keep their summaries as one
archive each in benchmarks/gpu_runs/; this builds every table with the run's settings and today's
rule (the gpu1 preset's ``eval.seed_sd``) and writes ``SHOWN`` of each as the record
benchmarks/records/gpu1_reference_tables.md. Cells whose run did not finish are empty.

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

RUNS = {"gpu1_reference_2026-12-02": "the reference run", "gpu1_2026-12-04c": "the run of 2026-12-04c"}
RECORD = "gpu1_reference_tables.md"
#: the reference run's settings (its Snakemake log's `gentax table --job` lines)
WINDOW = (6,)
SFT_MIX = ("alfworld", "webshop", "sciworld")
BOOTSTRAP, ERROR_MARK_PCT, TEST_LEVEL = 1000, 5.0, 0.05
SHOWN = ("table2_success", "table4_extended", "table5_augmentation", "table6_relative_change", "table7_thinking")


def archive(run: str) -> Path:
    return REPO / "benchmarks" / "gpu_runs" / f"{run}.tar.gz"


def reference_inputs(run: str = "gpu1_reference_2026-12-02"):
    """(summary, properties or None) of a run as DataFrames: every run and base summary that
    finished (the summaries' rows, in the order of their files' paths) and its property table."""
    import pandas as pd

    with tarfile.open(archive(run)) as tar:
        names = tar.getnames()
        return tuple(pd.read_csv(tar.extractfile(name)) if name in names else None
                     for name in ("summary.csv", "properties.csv"))


def main() -> int:
    from gentax.analysis.tables import build_all
    from gentax.study.config import study_config

    seed_sd = study_config("gpu1")["eval"]["seed_sd"]  # the rule's bound today (the runs had none)
    parts = [record_header("python benchmarks/gpu1/rebuild_tables.py")]
    for run, what in RUNS.items():
        summary, properties = reference_inputs(run)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "tables"
            analysis = build_all(summary, properties, out, window=WINDOW, seed=0, n_boot=BOOTSTRAP,
                                 error_mark_pct=ERROR_MARK_PCT, test_level=TEST_LEVEL, seed_sd=seed_sd, figures=False,
                                 sft_mix=SFT_MIX)
            tables = [(out / f"{name}.md").read_text().strip() for name in SHOWN if (out / f"{name}.md").is_file()]
        parts += [f"## {what}\n\n{len(summary)} summary rows of {archive(run).relative_to(REPO)}, window "
                  f"{','.join(map(str, WINDOW))}, bootstrap seed 0, {analysis.settings.n_boot} draws, test level "
                  f"{analysis.settings.test_level:g}, seed sd {seed_sd['id']:g} (ΔID) / {seed_sd['ood']:g} (ΔOOD), "
                  f"SFT mix {', '.join(SFT_MIX)}; built: {', '.join(sorted(analysis.tables))}", *tables]
    write_record(RECORD, "\n\n".join(parts) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
