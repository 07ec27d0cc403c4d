"""Power preview (``gentax plan --power``): the smallest ΔID and ΔOOD each table can resolve.

Before GPU-hours are spent: for the configured held-out tasks per domain (``plan.eval_episodes``),
checkpoints per run's number (``eval.window``), seeds (``grid.seeds``) and the level
(``eval.test_level``), the smallest effect that the tables' exact test (``stats.sign_test`` over
tasks, Holm over the table's tested cells) resolves with probability ``POWER`` (80 %).

Model (stated, not hidden): every task of a domain alike, every evaluation of a task an
independent Bernoulli draw at the policy's success rate; a side's per-task value is the mean of
its evaluations (the run: seeds x window checkpoints; the initial policy: one). Tasks that differ
in difficulty give fewer discordant tasks for the same Δ, so this is the cautious end. A cell's
power is that of Holm's first step, p < level / cells: what the cell needs when it is the table's
strongest effect and the other cells are null. With one evaluation per task and side the law is
exact (the sign test's); a run's several evaluations against one base evaluation use the
permutation test (``stats.paired_test``), priced by its normal approximation.
``simulate_detection`` checks both by Monte Carlo through the tables' own test and ``stats.resolve``.

- ΔID (Tables 2, 4): base rate p0 of the training domain -> p0 + Δ; the smallest Δ (points).
- ΔOOD (Tables 5, 7: intervention run vs default run; the OOD domains' tasks pooled): every OOD
  domain's success moves by the same relative change r (percent, the ΔOOD formula's value) from
  its rate; both sides are trained runs. The smallest increase and the smallest decrease.

Base rates: each domain's mean success of the initial policy's base evaluation
(``<results>/summary/base/<init>/default.csv``) where it exists, else ``eval.power_base_success``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np
from scipy.signal import fftconvolve
from scipy.special import gammaln, xlogy
from scipy.stats import binom, norm

from gentax.analysis import stats
from gentax.io import repo_path
from gentax.study import plan as gplan

POWER = 0.8
#: ΔID search step (points) and ΔOOD search step (percent)
_STEP = 0.5


@dataclass(frozen=True)
class Arm:
    """One side of a paired comparison on one domain: success rate and evaluations per task."""

    rate: float
    evaluations: int


def task_outcome_probabilities(before: Arm, after: Arm) -> tuple[float, float]:
    """P(a task is won), P(lost): the mean of ``after``'s evaluations above (below) ``before``'s."""
    a = np.arange(after.evaluations + 1) / after.evaluations
    b = np.arange(before.evaluations + 1) / before.evaluations
    pa = binom.pmf(np.arange(after.evaluations + 1), after.evaluations, min(max(after.rate, 0.0), 1.0))
    pb = binom.pmf(np.arange(before.evaluations + 1), before.evaluations, min(max(before.rate, 0.0), 1.0))
    joint = np.outer(pa, pb)
    diff = a[:, None] - b[None, :]
    return float(joint[diff > 1e-12].sum()), float(joint[diff < -1e-12].sum())


def won_lost_distribution(groups: Sequence[tuple[int, float, float]]) -> np.ndarray:
    """P(W = w, L = l) over tasks: ``groups`` = (tasks, P(win), P(loss)) per domain; a domain's
    (W, L) is multinomial, the domains' laws convolved."""
    dist = np.ones((1, 1))
    for tasks, win, loss in groups:
        w = np.arange(tasks + 1)[:, None]
        l = np.arange(tasks + 1)[None, :]
        ties = tasks - w - l
        tie = max(0.0, 1.0 - win - loss)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_pmf = (gammaln(tasks + 1) - gammaln(w + 1) - gammaln(l + 1) - gammaln(np.maximum(ties, 0) + 1)
                       + xlogy(w, win) + xlogy(l, loss) + xlogy(np.maximum(ties, 0), tie))
        group = np.where(ties >= 0, np.exp(log_pmf), 0.0)
        dist = np.clip(fftconvolve(dist, group), 0.0, None) if dist.size > 1 else group
    return dist


@lru_cache(maxsize=8)
def _p_table(n: int) -> np.ndarray:
    """p[w, l] of ``stats.sign_test(w, l)`` for w + l <= n (NaN beyond): the two-sided exact
    binomial p at 1/2, 2 x the smaller tail, capped at 1 (what ``scipy.stats.binomtest`` gives
    for a symmetric null; ``tests/test_power.py`` checks the two agree)."""
    w = np.arange(n + 1)[:, None]
    l = np.arange(n + 1)[None, :]
    d = w + l
    with np.errstate(invalid="ignore"):
        p = np.minimum(1.0, 2.0 * binom.cdf(np.minimum(w, l), d, 0.5))
    p[d == 0] = 1.0
    return np.where(d <= n, p, np.nan)


def detection_probability(groups: Sequence[tuple[int, float, float]], level: float, cells: int) -> float:
    """P(p < level / cells) for the won/lost law of ``groups`` (Holm's first step)."""
    dist = won_lost_distribution(groups)
    p = _p_table(dist.shape[0] - 1)
    return float(dist[np.nan_to_num(p, nan=1.0) < level / max(cells, 1)].sum())


def delta_id_power(p0: float, delta_points: float, tasks: int, run_evals: int, level: float, cells: int) -> float:
    """Power of a ΔID of ``delta_points`` from base rate ``p0`` on ``tasks`` tasks, the run with
    ``run_evals`` evaluations per task against one of the initial policy. One each: the exact
    sign test's law. More: ``stats.paired_test`` uses the within-task permutation test, whose
    power is taken from its normal approximation (T's mean and variance under the model; its null
    variance per task S (m + 1 − S) / m² at S successes of the m + 1 evaluations)."""
    p1 = min(1.0, p0 + delta_points / 100.0)
    if run_evals == 1:
        win, loss = task_outcome_probabilities(Arm(p0, 1), Arm(p1, 1))
        return detection_probability([(tasks, win, loss)], level, cells)
    m = run_evals
    mean_s = m * p1 + p0
    second_s = m * p1 * (1 - p1) + p0 * (1 - p0) + mean_s ** 2
    null_sd = math.sqrt(tasks * ((m + 1) * mean_s - second_s) / m ** 2)
    sd = math.sqrt(tasks * (p1 * (1 - p1) / m + p0 * (1 - p0)))
    if sd == 0:
        return 1.0 if tasks * (p1 - p0) > 0 else 0.0
    z = norm.isf(level / max(cells, 1) / 2)
    shift = tasks * (p1 - p0)
    return float(norm.sf((z * null_sd - shift) / sd) + norm.cdf((-z * null_sd - shift) / sd))


def delta_ood_power(rates: dict[str, float], tasks: dict[str, int], change_pct: float, run_evals: int,
                    level: float, cells: int) -> float:
    """Power of a ΔOOD of ``change_pct`` (every OOD domain's rate x (1 + change/100)), intervention
    run vs default run, each with ``run_evals`` evaluations per task, the domains' tasks pooled."""
    groups = []
    for domain, rate in rates.items():
        win, loss = task_outcome_probabilities(Arm(rate, run_evals), Arm(rate * (1 + change_pct / 100.0), run_evals))
        groups.append((tasks[domain], win, loss))
    return detection_probability(groups, level, cells)


def smallest_delta_id(p0: float, tasks: int, run_evals: int, level: float, cells: int) -> float:
    """The smallest ΔID (points, on a 0.5 grid) with power >= ``POWER``; NaN when none up to 100 %."""
    for delta in np.arange(_STEP, 100.0 * (1.0 - p0) + 1e-9, _STEP):
        if delta_id_power(p0, float(delta), tasks, run_evals, level, cells) >= POWER:
            return float(delta)
    return math.nan


def smallest_delta_ood(rates: dict[str, float], tasks: dict[str, int], run_evals: int, level: float,
                       cells: int, sign: int) -> float:
    """The smallest ΔOOD (percent; ``sign`` +1 an increase, -1 a decrease) with power >= ``POWER``;
    NaN when none (a decrease stops at -100 %, an increase where a rate would pass 100 %)."""
    top = 100.0 if sign < 0 else 100.0 * (1.0 / max(max(rates.values()), 1e-9) - 1.0)
    for size in np.arange(_STEP, min(top, 1000.0) + 1e-9, _STEP):
        if delta_ood_power(rates, tasks, sign * float(size), run_evals, level, cells) >= POWER:
            return sign * float(size)
    return math.nan


# ---------------------------------------------------------------- the configured study


def base_rates(cfg: dict, init: str) -> tuple[dict[str, float], str]:
    """Each domain's assumed base success and where it came from (module doc)."""
    import pandas as pd

    assumed = {d: float(v) for d, v in cfg["eval"].get("power_base_success", {}).items()}
    path = repo_path(cfg["results"]) / "summary" / "base" / init / "default.csv"
    if path.is_file():
        measured = pd.read_csv(path).groupby("eval_domain")["success"].mean().to_dict()
        return {**assumed, **{d: float(v) for d, v in measured.items()}}, str(path)
    return assumed, "config eval.power_base_success"


@dataclass(frozen=True)
class TableCells:
    """What one table tests: ``kind`` ("ΔID" or "ΔOOD") over ``cells`` (init, training domain)."""

    table: str
    kind: str
    cells: tuple[tuple[str, str], ...]


def tested_cells(cfg: dict) -> list[TableCells]:
    """The cells each table tests under the configured grid."""
    runs = gplan.runs(cfg)
    by_variant: dict[str, set] = {}
    for r in runs:
        if not r.label:
            by_variant.setdefault(r.variant, set()).add((r.init, r.train_domain, r.steps))
    default = sorted({(i, t) for i, t, _ in by_variant.get("default", ()) if "+" not in t})
    long_runs = sorted({(i, t) for i, t, s in by_variant.get("default", ()) if s > cfg["grid"]["steps"]})
    out = [TableCells("table2_success", "ΔID", tuple(default))]
    if long_runs:  # each long run is tested at the default window and at its last checkpoints
        out.append(TableCells("table4_extended", "ΔID", tuple(c for c in long_runs for _ in (0, 1))))
    for table, variant in (("table5_augmentation", "aug"), ("table7_thinking", "nothink")):
        cells = sorted({(i, t) for i, t, _ in by_variant.get(variant, ())})
        if cells:
            out.append(TableCells(table, "ΔOOD", tuple(cells)))
    return out


def preview(cfg: dict) -> dict:
    """Per table and cell: the smallest resolvable ΔID (points) or ΔOOD (percent, up and down)."""
    level = float(cfg["eval"].get("test_level", stats.TEST_LEVEL))
    seeds = len(cfg["grid"]["seeds"])
    checkpoints = len([s for s in gplan.window(cfg, cfg["grid"]["steps"]) if s > 0])
    run_evals = seeds * checkpoints
    rates, sources = {}, {}
    for init in ("v1", "v2"):
        rates[init], sources[init] = base_rates(cfg, init)
    tables = []
    for t in tested_cells(cfg):
        rows = []
        for init, train in dict.fromkeys(t.cells):
            if t.kind == "ΔID":
                tasks = gplan.eval_episodes(cfg, train)
                p0 = rates[init][train]
                rows.append({"init": init, "train_domain": train, "tasks": tasks, "base_pct": 100 * p0,
                             "smallest": smallest_delta_id(p0, tasks, run_evals, level, len(t.cells))})
            else:
                ood = [e for e in gplan.eval_domains(cfg, init) if e != train]
                ood_rates = {e: rates[init][e] for e in ood}
                ood_tasks = {e: gplan.eval_episodes(cfg, e) for e in ood}
                rows.append({"init": init, "train_domain": train, "tasks": sum(ood_tasks.values()),
                             "base_pct": 100 * float(np.mean(list(ood_rates.values()))),
                             "smallest_up": smallest_delta_ood(ood_rates, ood_tasks, run_evals, level, len(t.cells), +1),
                             "smallest_down": smallest_delta_ood(ood_rates, ood_tasks, run_evals, level, len(t.cells), -1)})
        tables.append({"table": t.table, "kind": t.kind, "cells": len(t.cells), "rows": rows})
    return {"preset": cfg["preset"], "level": level, "power": POWER, "seeds": seeds, "checkpoints": checkpoints,
            "base_rates": rates, "base_rate_sources": sources, "tables": tables}


def _fmt(value: float, unit: str) -> str:
    return "none" if math.isnan(value) else f"{value:+.1f}{unit}"


def render(result: dict) -> str:
    """The preview as text (what ``gentax plan --power`` prints)."""
    lines = [f"Power preview ({result['preset']} preset): the smallest effect the tables' exact paired test over "
             f"tasks resolves with {result['power']:.0%} power at level {result['level']:g}, Holm over each table's "
             f"cells; {result['seeds']} seed(s) x {result['checkpoints']} checkpoint(s) per run's number",
             "assumed base success: " + "; ".join(
                 f"{init.upper()} " + ", ".join(f"{d} {100 * r:.0f}%" for d, r in sorted(rates.items()))
                 + f" ({result['base_rate_sources'][init]})" for init, rates in result["base_rates"].items())]
    for t in result["tables"]:
        lines.append(f"{t['table']}: {t['cells']} {t['kind']} cell(s) tested")
        for r in t["rows"]:
            where = f"  {r['init'].upper():<3} {r['train_domain']:<9} {r['tasks']:>4} tasks, base {r['base_pct']:4.1f}%: "
            if t["kind"] == "ΔID":
                lines.append(where + f"smallest ΔID {_fmt(r['smallest'], ' points')}")
            else:
                lines.append(where + f"smallest ΔOOD up {_fmt(r['smallest_up'], ' %')}, "
                                     f"down {_fmt(r['smallest_down'], ' %')}")
    lines.append("none: not even success 0 % / 100 % would be resolved that often. Model: tasks alike, evaluations "
                 "independent; Holm's first step (level / cells); gentax/study/power.py")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the check


def simulate_detection(p0: float, delta_points: float, tasks: int, run_evals: int, level: float, cells: int,
                       trials: int, seed: int) -> float:
    """Monte-Carlo share of trials in which one ΔID cell of ``delta_points`` is resolved beside
    ``cells - 1`` null cells (same base rate), through the tables' ``stats.paired_test`` and
    ``stats.resolve`` (Holm): the check of ``delta_id_power``'s law, approximation and first-step bound."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        p_values = []
        for cell in range(cells):
            base = (rng.random((1, tasks)) < p0).astype(float)
            rate = p0 + (delta_points / 100.0 if cell == 0 else 0.0)
            run = (rng.random((run_evals, tasks)) < rate).astype(float)
            p_values.append(stats.paired_test([(base, run)]).p_value)
        hits += stats.resolve(p_values, level)[1][0]
    return hits / trials
