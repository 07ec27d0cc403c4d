"""The study's change measures, shared by the tables (``gentax.analysis.tables``) and the
controls' tables (``gentax.analysis.controls``); docs/tables.md gives their definitions."""

from __future__ import annotations

import math


def delta_ood(without: dict[str, float], with_: dict[str, float]) -> tuple[float, str]:
    """100 × Σ_e (G_with(e) − G_without(e)) / Σ_e G_without(e) over the OOD domains e.

    Returns (value, note); the value is NaN (with the reason in the note) when a run is
    missing or the denominator is zero.
    """
    missing = sorted(e for e in without if math.isnan(without[e]) or math.isnan(with_.get(e, math.nan)))
    if missing:
        return math.nan, f"ΔOOD undefined: missing OOD success on {', '.join(missing)}"
    denominator = sum(without.values())
    if denominator == 0:
        return math.nan, "ΔOOD undefined: OOD successes without the intervention sum to 0"
    return 100.0 * sum(with_[e] - without[e] for e in without) / denominator, ""


def relative_change(after: float, before: float) -> tuple[float, str]:
    """(after − before) / before × 100; NaN with a note when ``before`` is 0."""
    if math.isnan(after) or math.isnan(before):
        return math.nan, ""
    if before == 0:
        return math.nan, "undefined: initial success is 0"
    return (after - before) / before * 100.0, ""
