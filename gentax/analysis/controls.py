"""The controls' tables (beyond the paper): ΔOOD against measured difficulty and richness.

Inputs: the success summary (the control runs' and the base rows) and the controls' properties
table, one row per level of a sweep (``gentax.study.controls.property_row``; its columns:
``LEVEL_COLUMNS`` plus the optional setting, order, tokens_per_obs, success). Outputs
(``controls_tables``): ``controls_sweep`` (per level: its measured properties beside its ΔOOD and
95% interval, as ``mixture_ood``'s) and ``controls_regression`` (OLS of each run's per-seed ΔOOD
on measured richness and complexity, case-resampled intervals). Definitions, columns and when each
number is undefined (NaN in the CSV, "—" shown, never 0): docs/tables.md "Controls".
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
import pandas as pd

from gentax.analysis import stats
from gentax.analysis.formatting import MISSING, Table, number, signed
from gentax.analysis.formulas import delta_ood
from gentax.analysis.summary import BASE, CELL_KEY, _read_tables, seed_values
from gentax.errors import GentaxError

SWEEP_TABLE = "controls_sweep"
REGRESSION_TABLE = "controls_regression"
CONTROLS = ("difficulty", "richness")
LEVEL_COLUMNS = ("control", "level", "label", "init", "train_domain", "variant", "richness", "complexity")
RICHNESS_UNIT = 1000.0  # the regression's richness slope is per 1,000 characters
#: Share of bootstrap resamples that must determine the fit for its interval to be reported.
MIN_DEFINED_DRAWS = 0.5


def load_levels(source) -> pd.DataFrame:
    """Read (path, DataFrame or list of them) and validate the controls' properties table."""
    df = _read_tables(source, "controls properties")
    missing = [c for c in LEVEL_COLUMNS if c not in df.columns]
    if missing:
        raise GentaxError(f"controls properties lack column(s) {', '.join(missing)}")
    bad = df[~df["control"].isin(CONTROLS)]
    if len(bad):
        raise GentaxError(f"controls properties: unknown control {bad['control'].iloc[0]!r} at {bad['_where'].iloc[0]} "
                          f"(valid: {', '.join(CONTROLS)})")
    duplicated = df.duplicated(["control", "level"], keep=False)
    if duplicated.any():
        raise GentaxError(f"controls properties: duplicate (control, level) at {', '.join(df['_where'][duplicated])}")
    for column in ("richness", "complexity", "tokens_per_obs", "success"):
        if column in df.columns:
            values = pd.to_numeric(df[column], errors="coerce")
            unparsable = values.isna() & df[column].notna()
            if unparsable.any():
                raise GentaxError(f"controls properties: {column} is not a number at "
                                  f"{', '.join(df['_where'][unparsable])}")
            df[column] = values
    if "order" not in df.columns:
        df["order"] = df.groupby("control").cumcount()
    for column in ("tokens_per_obs", "success"):
        if column not in df.columns:
            df[column] = math.nan
    df["setting"] = df["setting"].fillna("") if "setting" in df.columns else ""
    return df.drop(columns="_where").sort_values(["control", "order"], kind="stable").reset_index(drop=True)


def _ood_domains(values, init: str, train: str) -> list[str]:
    return [e for e in values.settings.domains(init) if e != train]


def _seed_deltas(per_seed: pd.DataFrame, base: dict[str, float], init, train, label) -> dict[int, float]:
    """{seed: ΔOOD of that seed's run} for the seeds evaluated on every OOD domain."""

    cell = per_seed[(per_seed["init"] == init) & (per_seed["train_domain"] == train) & (per_seed["variant"] == label)]
    out = {}
    for seed, group in cell.groupby("seed"):
        success = dict(zip(group["eval_domain"], group["success"] * 100.0))
        value, _ = delta_ood(base, {e: success.get(e, math.nan) for e in base})
        if not math.isnan(value):
            out[int(seed)] = value
    return out


def level_results(rows: pd.DataFrame, values, levels: pd.DataFrame, draws: stats.BootstrapDraws | None):
    """Per level: its ΔOOD, interval and runs; and the regression's points (one per run)."""

    per_seed = seed_values(rows) if len(rows) else pd.DataFrame(columns=[*CELL_KEY, "seed", "success"])
    records, points = [], {}
    for level in levels.itertuples(index=False):
        init, train, label = level.init, level.train_domain, level.label
        ood = _ood_domains(values, init, train)
        base = {e: values.base(init, e, level.variant) for e in ood}
        cells = [values.cell(init, train, label, e) for e in ood]
        change, note = delta_ood(base, {e: c["mean_pct"] for e, c in zip(ood, cells)})
        n_seeds = min((c["n_seeds"] for c in cells), default=math.nan)
        low, high = math.nan, math.nan
        if not math.isnan(change):
            if n_seeds < 2:
                note = "one seed: no seed interval"
            elif draws is None or draws.n_boot == 0:
                note = "no bootstrap draws (bootstrap off)"
            else:  # the same interval as mixture_ood's (stats.delta_ood_interval)
                base_keys = {e: (init, BASE, values.base_variant(init, e, level.variant), e) for e in ood}
                ci = stats.delta_ood_interval(draws, {e: (init, train, label, e) for e in ood}, base_keys,
                                              base, delta_ood)
                low, high, note = ci.low, ci.high, ci.note()
        id_success = values.mean(init, train, label, train)
        records.append({
            "control": level.control, "level": level.level, "setting": level.setting, "init": init,
            "train_domain": train, "run": label,
            "richness_chars": level.richness, "richness_tokens": level.tokens_per_obs, "complexity": level.complexity,
            "base_success_pct": level.success * 100.0, "n_seeds": n_seeds,
            "id_success_pct": id_success, "delta_id": id_success - values.base(init, train, level.variant),
            "ood_success_pct": float(np.mean([c["mean_pct"] for c in cells])) if cells else math.nan,
            "delta_ood_pct": change, "delta_ood_ci_low": low, "delta_ood_ci_high": high, "note": note,
        })
        if math.isnan(level.richness) or math.isnan(level.complexity):
            continue
        for seed, delta in _seed_deltas(per_seed, base, init, train, label).items():
            # a run in both sweeps (a reused grid run) is one point
            points[(init, train, label, seed)] = (level.richness, level.complexity, delta)
    return pd.DataFrame.from_records(records, columns=SWEEP_COLUMNS), points


SWEEP_COLUMNS = ["control", "level", "setting", "init", "train_domain", "run", "richness_chars", "richness_tokens",
                 "complexity", "base_success_pct", "n_seeds", "id_success_pct", "delta_id", "ood_success_pct",
                 "delta_ood_pct", "delta_ood_ci_low", "delta_ood_ci_high", "note"]
TERMS = (("intercept", "ΔOOD points"), ("richness", "ΔOOD points per 1,000 characters"),
         ("complexity", "ΔOOD points per step"))
REGRESSION_COLUMNS = ["term", "unit", "estimate", "ci_low", "ci_high", "standardized", "n_runs", "n_settings",
                      "draws_used", "r2", "note"]


def _fit(x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """OLS coefficients of y on [1, x]; None when the design does not determine them."""
    design = np.column_stack([np.ones(len(x)), x])
    if np.linalg.matrix_rank(design) < design.shape[1]:
        return None
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    return coef


def regression(points: dict[tuple, tuple[float, float, float]], n_boot: int, seed: int) -> pd.DataFrame:
    """OLS of each run's ΔOOD on its level's richness (per 1,000 characters) and complexity (per
    step), 95% intervals from resampling the runs with replacement (given when at least
    ``MIN_DEFINED_DRAWS`` of the resamples determine the fit); undefined (a note) when the points
    do not determine both slopes."""
    data = np.array(list(points.values()), dtype=float).reshape(-1, 3)
    x = np.column_stack([data[:, 0] / RICHNESS_UNIT, data[:, 1]])
    y = data[:, 2]
    n_runs, n_settings = len(data), len({(r, c) for r, c, _ in data})
    coef = _fit(x, y) if n_runs else None
    notes = [""] * 3
    low = high = np.full(3, math.nan)
    used, r2, standardized = 0, math.nan, np.full(3, math.nan)
    if coef is None:
        notes = [f"undefined: {n_runs} run(s) at {n_settings} setting(s) do not determine both slopes "
                 "(needs three settings whose richness and complexity do not move together exactly)"] * 3
        coef = np.full(3, math.nan)
    else:
        residual = y - np.column_stack([np.ones(n_runs), x]) @ coef
        spread = float(((y - y.mean()) ** 2).sum())
        r2 = 1.0 - float((residual ** 2).sum()) / spread if spread > 0 else math.nan
        standardized = np.concatenate([[math.nan], coef[1:] * x.std(axis=0, ddof=1)]) if n_runs > 1 else standardized
        rng = np.random.default_rng([int(seed), zlib.crc32(REGRESSION_TABLE.encode())])
        fits = []
        for _ in range(max(n_boot, 0)):
            index = rng.integers(0, n_runs, size=n_runs)
            fit = _fit(x[index], y[index])
            if fit is not None:
                fits.append(fit)
        used = len(fits)
        if n_boot and used >= MIN_DEFINED_DRAWS * n_boot:
            bounds = [stats.interval(np.array(fits)[:, k]) for k in range(3)]
            low, high = np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])
        else:
            why = "bootstrap off" if not n_boot else (f"only {used} of {n_boot} resamples of the runs determine "
                                                      "the fit (too few distinct settings)")
            notes = [f"no interval: {why}"] * 3
    records = [{"term": term, "unit": unit, "estimate": float(coef[k]), "ci_low": float(low[k]),
                "ci_high": float(high[k]), "standardized": float(standardized[k]), "n_runs": n_runs,
                "n_settings": n_settings, "draws_used": used, "r2": r2, "note": notes[k]}
               for k, (term, unit) in enumerate(TERMS)]
    return pd.DataFrame.from_records(records, columns=REGRESSION_COLUMNS)


def _spread_note(sweep: pd.DataFrame, control: str, held: str, column: str) -> list[str]:
    """How much the property a sweep holds fixed moved between its levels, as measured."""
    measured = sweep.loc[sweep["control"] == control, column].dropna()
    if len(measured) < 2 or measured.min() <= 0:
        return []
    spread = 100.0 * (measured.max() / measured.min() - 1.0)
    return [f"{control} sweep: the {held} it holds fixed varies by {spread:.0f}% between its levels, as measured"]


def _sweep_display(sweep: pd.DataFrame) -> pd.DataFrame:
    """The Markdown/LaTeX view: one line per level, the interval beside its ΔOOD."""

    def with_interval(r) -> str:
        if math.isnan(r.delta_ood_ci_low):
            return signed(r.delta_ood_pct)
        return f"{signed(r.delta_ood_pct)} [{signed(r.delta_ood_ci_low)}, {signed(r.delta_ood_ci_high)}]"

    rows = [{"control": r.control, "level": r.level, "setting": r.setting, "init": r.init.upper(),
             "train_domain": r.train_domain, "richness (chars / tokens)":
                 f"{number(r.richness_chars, 0)} / {number(r.richness_tokens, 0)}",
             "complexity": number(r.complexity), "base success %": number(r.base_success_pct),
             "seeds": MISSING if math.isnan(r.n_seeds) else f"{r.n_seeds:.0f}", "ΔID": signed(r.delta_id),
             "ΔOOD % [95% CI]": with_interval(r), "note": r.note} for r in sweep.itertuples()]
    return pd.DataFrame(rows, columns=["control", "level", "setting", "init", "train_domain", "richness (chars / tokens)",
                                       "complexity", "base success %", "seeds", "ΔID", "ΔOOD % [95% CI]", "note"])


def controls_tables(rows: pd.DataFrame, values, levels: pd.DataFrame | None,
                    draws: stats.BootstrapDraws | None, n_boot: int, seed: int) -> list[Any]:
    """The two tables (``gentax.analysis.formatting.Table``); empty ones without levels."""

    if levels is None or levels.empty:
        sweep, points = pd.DataFrame(columns=SWEEP_COLUMNS), {}
    else:
        sweep, points = level_results(rows, values, levels, draws)
    fit = regression(points, n_boot, seed)
    notes = ["ΔOOD = 100 × Σ_e (G_run(e) − G_base(e)) / Σ_e G_base(e) over the init's domains other than the "
             "training domain; 95% interval: seed bootstrap; richness = mean characters (and tokens) per state, "
             "complexity = mean length with failures counted T_max (Table 3), measured per level with the base policy",
             "difficulty levels: augmentation off; richness levels: the domain as configured, augmented at eps"]
    notes += _spread_note(sweep, "difficulty", "richness", "richness_chars")
    notes += _spread_note(sweep, "richness", "planning complexity", "complexity")
    n_runs = int(fit["n_runs"].iloc[0])
    return [
        Table(SWEEP_TABLE, "Controls: ΔOOD against measured difficulty (at fixed richness) and against measured "
              "richness (at fixed difficulty)", sweep, _sweep_display(sweep), notes),
        Table(REGRESSION_TABLE, f"Controls: ΔOOD regressed on measured richness and complexity ({n_runs} runs)", fit,
              None, ["ordinary least squares over the control runs (one point per run and seed); 95% intervals from "
                     "resampling the runs; standardized = slope × the predictor's standard deviation over the runs"]),
    ]


def build(analysis, name: str):
    """The registry builder of both tables (``gentax.analysis.artifacts``), over a
    ``gentax.analysis.tables.Analysis``: the pair is computed once per analysis (``Analysis.shared``),
    empty without the controls' properties table."""
    def both():
        if analysis.controls is None:
            tables = controls_tables(analysis.summary.iloc[0:0], analysis.values, None, None, 0, 0)
        else:
            s = analysis.settings
            tables = controls_tables(analysis.values.rows, analysis.values, analysis.controls, analysis.draws,
                                     s.n_boot, s.seed)
        return {t.name: t for t in tables}

    return analysis.shared("controls_tables", both)[name]
