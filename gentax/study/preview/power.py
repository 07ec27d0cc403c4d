"""Power preview (``gentax plan --power``): the smallest ΔID and ΔOOD each table can resolve.

The smallest effect the tables' own rule (``gentax.analysis.stats``: the task-paired exact test AND
the seed-level test, Holm over a table's cells) resolves with probability ``POWER`` in the table's
strongest cell, simulated through the rule's batched functions (``DRAWS`` replicates per effect,
common random numbers, bisection on a 0.5 grid). Model: tasks alike, evaluations independent, a
seed's checkpoints alike, a trained seed's rate drawn around its side's mean with sd τ
(``eval.seed_sd``; ``SEED_LAWS``). The model and its assumptions: docs/tables.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Sequence

import numpy as np
from scipy.stats import beta as beta_law
from scipy.stats import binom

from gentax.analysis import artifacts, stats
from gentax.domains.spec import is_mixture
from gentax.errors import ConfigError
from gentax.io import read_result_csv, repo_path
from gentax.study import paths
from gentax.study import plan as gplan
from gentax.study.jobs import eval_episodes

POWER = 0.8
#: replicates per power estimate (Monte Carlo standard error <= 0.63 points near 80 % power)
DRAWS = 4000
#: ΔID search step (points) and ΔOOD search step (percent)
_STEP = 0.5


@dataclass(frozen=True)
class Design:
    """One tested cell: seeds per trained side, window checkpoints per seed, the cells of its table
    (Holm's family), the level, and ``seed_sd`` (the floor of a side's seed variance, ``stats.seed_side``)."""

    seeds: int
    checkpoints: int
    cells: int
    level: float
    seed_sd: float = 0.0

    @property
    def cell_level(self) -> float:
        """Holm's first step: the level a table's strongest cell must reach."""
        return self.level / max(self.cells, 1)


#: the seed laws the simulation draws a trained seed's success from (``seed_rates``): a Beta, or two
#: modes ("a run took off or it did not") with the high mode's probability q
SEED_LAWS = {"beta": None, "two-mode": 0.5, "take-off": 0.2}


def seed_rates(quantiles: np.ndarray, mean, sd: float, law: str = "beta") -> np.ndarray:
    """Success rates of trained seeds: the ``quantiles`` of a law with ``mean`` and sd ``sd``
    (``SEED_LAWS``), increasing in the quantile. Beta: sd capped at sqrt(mean (1 − mean) / 2). Two
    modes: mean + sd sqrt((1 − q) / q) with probability q, else mean − sd sqrt(q / (1 − q)), sd capped
    to stay in [0, 1]."""
    mean = np.clip(np.asarray(mean, dtype=float), 0.0, 1.0)
    q = SEED_LAWS[law]
    if q is not None:
        up, down = math.sqrt((1.0 - q) / q), math.sqrt(q / (1.0 - q))
        spread = np.minimum(sd, np.minimum((1.0 - mean) / up, mean / down))
        return np.where(quantiles > 1.0 - q, mean + spread * up, mean - spread * down)
    variance = np.minimum(sd ** 2, mean * (1.0 - mean) / 2.0)
    inner = (mean > 0) & (mean < 1) & (variance > 0)
    safe_mean = np.where(inner, mean, 0.5)
    concentration = np.where(inner, safe_mean * (1.0 - safe_mean) / np.where(inner, variance, 1.0) - 1.0, 1.0)
    drawn = beta_law.ppf(quantiles, safe_mean * concentration, (1.0 - safe_mean) * concentration)
    return np.where(inner, drawn, mean)


def successes(uniforms: np.ndarray, rates: np.ndarray, evaluations: int) -> np.ndarray:
    """Binomial(``evaluations``, rate) successes by inverse CDF of one uniform each (monotone in the
    rate for fixed uniforms); ``rates`` broadcast against ``uniforms``."""
    count = np.zeros(uniforms.shape, dtype=np.int64)
    for k in range(evaluations):
        count += uniforms > binom.cdf(k, evaluations, rates)
    return count


class DeltaIdDraws:
    """The uniforms of ``draws`` ΔID replicates: seed quantiles, per-(seed, task) and base per-task ones."""

    def __init__(self, tasks: int, seeds: int, draws: int, seed: int):
        rng = np.random.default_rng([seed, tasks, seeds])
        self.seed_quantiles = rng.random((draws, seeds))
        self.evaluations = rng.random((draws, seeds, tasks), dtype=np.float32)
        self.base = rng.random((draws, tasks), dtype=np.float32)

    def head(self, count: int) -> "DeltaIdDraws":
        """The first ``count`` replicates (views, not copies)."""
        part = object.__new__(DeltaIdDraws)
        part.seed_quantiles, part.evaluations, part.base = (self.seed_quantiles[:count], self.evaluations[:count],
                                                            self.base[:count])
        return part


class Tests(NamedTuple):
    """Per replicate, the seed-level and task-paired p-values (``stats.RuleTest``: the rule's is the larger)."""

    seeds: np.ndarray
    tasks: np.ndarray

    @property
    def rule(self) -> np.ndarray:
        return np.maximum(self.seeds, self.tasks)


class Rejections(NamedTuple):
    """Per replicate: whether the rule resolves the cell, and whether the task-paired test alone rejects."""

    rule: np.ndarray
    tasks: np.ndarray


def _trained_variance(per_seed: np.ndarray, evaluations: list[np.ndarray], design: Design) -> np.ndarray:
    """``stats.seed_side``'s variance of a trained side, batched over replicates; NaN with one seed."""
    seeds = design.seeds
    if seeds < 2:
        return np.full(per_seed.shape[0], np.nan)
    floor = (design.seed_sd * len(evaluations)) ** 2
    for successes_ in evaluations:
        count = successes_[0].size * design.checkpoints
        smoothed = (successes_.sum(axis=(1, 2)) + 1.0) / (count + 2.0)
        floor = floor + seeds * smoothed * (1.0 - smoothed) / count
    return np.maximum(per_seed.var(axis=1, ddof=1), floor) / seeds


def delta_id_tests(p0: float, delta_points: float, tasks: int, design: Design, tau: float, draws: DeltaIdDraws,
                   law: str = "beta") -> Tests:
    """Per replicate, the rule's two p-values for a ΔID of ``delta_points`` from base rate ``p0``:
    the run's seeds x checkpoints against one base evaluation per task."""
    m = design.seeds * design.checkpoints
    rates = seed_rates(draws.seed_quantiles, p0 + delta_points / 100.0, tau, law)
    run = successes(draws.evaluations, rates[:, :, None], design.checkpoints)  # (draws, seeds, tasks)
    base = (draws.base < p0).astype(np.int64)
    # the seed-level test: the run's per-seed means against the base's mean and binomial bound
    per_seed = run.mean(axis=2) / design.checkpoints
    smoothed = (base.sum(axis=1) + 1.0) / (tasks + 2.0)
    effect = per_seed.mean(axis=1) - base.mean(axis=1)
    seeds_p = stats.seed_level_p(effect, [smoothed * (1 - smoothed) / tasks, _trained_variance(per_seed, [run], design)],
                                 [math.inf, design.seeds - 1.0])
    after = run.sum(axis=1)
    if m == 1:  # one evaluation a side: the sign test
        tasks_p = stats.sign_test_p((after > base).sum(axis=1), (after < base).sum(axis=1))
    else:
        tasks_p = stats.one_before_permutation_p(after, m, base)
    return Tests(seeds_p, tasks_p)


def delta_id_rejections(p0: float, delta_points: float, tasks: int, design: Design, tau: float,
                        draws: DeltaIdDraws, law: str = "beta") -> Rejections:
    """Per replicate, whether the rule resolves a ΔID (``delta_id_tests``) at ``design.cell_level``."""
    tests = delta_id_tests(p0, delta_points, tasks, design, tau, draws, law)
    return Rejections(stats.rejects(tests.rule, design.cell_level), stats.rejects(tests.tasks, design.cell_level))


class DeltaOodDraws:
    """The uniforms of ``draws`` ΔOOD replicates, per arm: seed quantiles (shared by a seed's OOD
    domains) and per-(seed, task) uniforms, every OOD domain's tasks side by side."""

    def __init__(self, tasks: Sequence[int], seeds: int, draws: int, seed: int):
        rng = np.random.default_rng([seed, *tasks, seeds, 1])
        self.seed_quantiles = [rng.random((draws, seeds)) for _ in range(2)]
        self.evaluations = [rng.random((draws, seeds, sum(tasks)), dtype=np.float32) for _ in range(2)]

    def head(self, count: int) -> "DeltaOodDraws":
        """The first ``count`` replicates (views, not copies)."""
        part = object.__new__(DeltaOodDraws)
        part.seed_quantiles = [q[:count] for q in self.seed_quantiles]
        part.evaluations = [e[:count] for e in self.evaluations]
        return part


def delta_ood_tests(rates: Sequence[float], tasks: Sequence[int], change_pct: float, design: Design,
                    tau: float, draws: DeltaOodDraws, law: str = "beta") -> Tests:
    """Per replicate, the rule's two p-values for a ΔOOD of ``change_pct`` (every OOD rate x
    (1 + change / 100)), intervention against default run."""
    bounds = np.cumsum([0, *tasks])
    arms = []
    for arm, factor in enumerate((1.0, 1.0 + change_pct / 100.0)):
        arms.append([  # per domain (draws, seeds, tasks): its tasks at its seeds' rates
            successes(draws.evaluations[arm][:, :, lo:hi],
                      seed_rates(draws.seed_quantiles[arm], rate * factor, tau, law)[:, :, None], design.checkpoints)
            for rate, lo, hi in zip(rates, bounds[:-1], bounds[1:])])
    # the seed-level test: Σ_domains a seed's mean success, Banerjee over the two arms' seeds
    seed_values = [sum(domain.mean(axis=2) for domain in arm) / design.checkpoints for arm in arms]
    effect = seed_values[1].mean(axis=1) - seed_values[0].mean(axis=1)
    variances = [_trained_variance(values, arm, design) for values, arm in zip(seed_values, arms)]
    seeds_p = stats.seed_level_p(effect, variances, [design.seeds - 1.0] * 2)
    # the task-paired test: both arms have seeds x checkpoints evaluations per task, so the sign test
    totals = [np.concatenate(arm, axis=2).sum(axis=1) for arm in arms]
    tasks_p = stats.sign_test_p((totals[1] > totals[0]).sum(axis=1), (totals[1] < totals[0]).sum(axis=1))
    return Tests(seeds_p, tasks_p)


def delta_ood_rejections(rates: Sequence[float], tasks: Sequence[int], change_pct: float, design: Design,
                         tau: float, draws: DeltaOodDraws, law: str = "beta") -> Rejections:
    """Per replicate, whether the rule resolves a ΔOOD (``delta_ood_tests``) at ``design.cell_level``."""
    tests = delta_ood_tests(rates, tasks, change_pct, design, tau, draws, law)
    return Rejections(stats.rejects(tests.rule, design.cell_level), stats.rejects(tests.tasks, design.cell_level))


#: a bisection step first looks at 1/_COARSE_SHARE of the replicates, and at all of them only where
#: that estimate is within ``_COARSE_MARGIN`` standard errors of ``POWER``: the same answer, faster
_COARSE_SHARE = 8
_COARSE_MARGIN = 4.0


def _smallest(rejections, draws, grid: np.ndarray) -> float:
    """The first grid value whose power reaches ``POWER``, by bisection (power rises along the
    grid: common random numbers); NaN when not even the last does."""
    total = draws.evaluations[0].shape[0] if isinstance(draws.evaluations, list) else draws.evaluations.shape[0]
    coarse = draws.head(max(total // _COARSE_SHARE, 1))
    coarse_se = math.sqrt(POWER * (1 - POWER) / max(total // _COARSE_SHARE, 1))

    def reaches(value: float) -> bool:
        estimate = float(rejections(float(value), coarse).rule.mean())
        if abs(estimate - POWER) > _COARSE_MARGIN * coarse_se:
            return estimate >= POWER
        return float(rejections(float(value), draws).rule.mean()) >= POWER

    if grid.size == 0 or not reaches(grid[-1]):
        return math.nan
    low, high = -1, grid.size - 1  # grid[high] reaches POWER; grid[low] does not (or there is none)
    while high - low > 1:
        middle = (low + high) // 2
        if reaches(grid[middle]):
            high = middle
        else:
            low = middle
    return float(grid[high])


def delta_id_power(p0: float, delta_points: float, tasks: int, design: Design, tau: float,
                   draws: int = DRAWS, seed: int = 0) -> float:
    """Share of ``draws`` simulated ΔID cells (module doc) that the rule resolves."""
    if design.seeds < 2:
        return 0.0
    return float(delta_id_rejections(p0, delta_points, tasks, design, tau, _id_draws(tasks, design.seeds, draws, seed)).rule.mean())


def smallest_delta_id(p0: float, tasks: int, design: Design, tau: float, draws: int = DRAWS, seed: int = 0) -> float:
    """The smallest ΔID (points, on a 0.5 grid) with power >= ``POWER``; NaN when none."""
    if design.seeds < 2:
        return math.nan
    grid = np.arange(_STEP, 100.0 * (1.0 - p0) + 1e-9, _STEP)
    return _smallest(lambda delta, part: delta_id_rejections(p0, delta, tasks, design, tau, part),
                     _id_draws(tasks, design.seeds, draws, seed), grid)


def smallest_delta_ood(rates: Sequence[float], tasks: Sequence[int], design: Design, tau: float, sign: int,
                       draws: int = DRAWS, seed: int = 0) -> float:
    """The smallest ΔOOD (percent; ``sign`` +1 up, -1 down) with power >= ``POWER``; NaN when none."""
    if design.seeds < 2:
        return math.nan
    top = 100.0 if sign < 0 else 100.0 * (1.0 / max(max(rates), 1e-9) - 1.0)
    grid = np.arange(_STEP, min(top, 1000.0) + 1e-9, _STEP)
    return sign * _smallest(lambda size, part: delta_ood_rejections(rates, tasks, sign * size, design, tau, part),
                            _ood_draws(tuple(tasks), design.seeds, draws, seed), grid)


#: the replicates' uniforms of a design (the same for every level, cell count and effect)
_id_draws = lru_cache(maxsize=2)(lambda tasks, seeds, draws, seed: DeltaIdDraws(tasks, seeds, draws, seed))
_ood_draws = lru_cache(maxsize=2)(lambda tasks, seeds, draws, seed: DeltaOodDraws(tasks, seeds, draws, seed))


# ---------------------------------------------------------------- the configured study


def base_rates(cfg: dict, init: str) -> tuple[dict[str, float], str]:
    """Each domain's base success (the base evaluation where it exists, else
    ``eval.power_base_success``) and where it came from."""
    assumed = {d: float(v) for d, v in cfg["eval"].get("power_base_success", {}).items()}
    path = repo_path(paths.base_summary(cfg, init, "default"))
    source = "config eval.power_base_success"
    if path.is_file():
        measured = read_result_csv(path).groupby("eval_domain")["success"].mean().to_dict()
        assumed, source = {**assumed, **{d: float(v) for d, v in measured.items()}}, str(path)
    missing = [d for d in gplan.eval_domains(cfg, init) if d not in assumed]
    if missing:
        raise ConfigError(f"config key eval.power_base_success: no base success for {', '.join(missing)} "
                          f"({init.upper()}'s domains without a base evaluation in {path.parent}): set it there")
    return assumed, source


def seed_spread(cfg: dict) -> dict[str, float]:
    """τ of ΔID (``id``) and ΔOOD (``ood``): config ``eval.seed_sd``."""
    spread = cfg["eval"]["seed_sd"]
    return {"id": float(spread["id"]), "ood": float(spread["ood"])}


@dataclass(frozen=True)
class TableCells:
    """What one table tests: ``kind`` ("ΔID" or "ΔOOD") over ``cells`` (init, training domain)."""

    table: str
    kind: str
    cells: tuple[tuple[str, str], ...]


def tested_cells(cfg: dict) -> list[TableCells]:
    """The cells each planned table tests (``gentax.analysis.artifacts.Tested``), in registry order."""
    by_variant: dict[str, set] = {}
    for r in gplan.runs(cfg):
        if not r.label and not is_mixture(r.train_domain):
            by_variant.setdefault(r.variant, set()).add((r.init, r.train_domain, r.steps))
    out = []
    for name in gplan.table_names(cfg):
        tested = artifacts.get(name).tests
        if tested is None:
            continue
        runs = by_variant.get(tested.variant, ())
        if tested.extended:  # each long run is tested at the default window and at its last checkpoints
            cells = tuple(c for c in sorted({(i, t) for i, t, s in runs if s > cfg["grid"]["steps"]}) for _ in (0, 1))
        else:
            cells = tuple(sorted({(i, t) for i, t, _ in runs}))
        if cells:
            out.append(TableCells(name, tested.effect, cells))
    return out


def preview(cfg: dict) -> dict:
    """Per table and cell: the smallest resolvable ΔID (points) or ΔOOD (percent, up and down)."""
    level = float(cfg["eval"]["test_level"])
    seeds = len(cfg["grid"]["seeds"])
    checkpoints = len([s for s in gplan.window(cfg, cfg["grid"]["steps"]) if s > 0])
    tau = seed_spread(cfg)
    rates, sources = {}, {}
    for init in ("v1", "v2"):
        rates[init], sources[init] = base_rates(cfg, init)
    tables = []
    smallest_id = lru_cache(maxsize=None)(smallest_delta_id)  # rows of one table often share a design
    smallest_ood = lru_cache(maxsize=None)(smallest_delta_ood)
    for t in tested_cells(cfg):
        design = Design(seeds, checkpoints, len(t.cells), level, tau["id" if t.kind == "ΔID" else "ood"])
        rows = []
        for init, train in dict.fromkeys(t.cells):
            if t.kind == "ΔID":
                tasks = eval_episodes(cfg, train)
                p0 = rates[init][train]
                rows.append({"init": init, "train_domain": train, "tasks": tasks, "base_pct": 100 * p0,
                             "smallest": smallest_id(p0, tasks, design, tau["id"])})
            else:
                ood = [e for e in gplan.eval_domains(cfg, init) if e != train]
                ood_rates = tuple(rates[init][e] for e in ood)
                ood_tasks = tuple(eval_episodes(cfg, e) for e in ood)
                rows.append({"init": init, "train_domain": train, "tasks": sum(ood_tasks),
                             "base_pct": 100 * float(np.mean(ood_rates)),
                             "smallest_up": smallest_ood(ood_rates, ood_tasks, design, tau["ood"], +1),
                             "smallest_down": smallest_ood(ood_rates, ood_tasks, design, tau["ood"], -1)})
        tables.append({"table": t.table, "kind": t.kind, "cells": len(t.cells), "rows": rows})
    return {"preset": cfg["preset"], "level": level, "power": POWER, "seeds": seeds, "checkpoints": checkpoints,
            "seed_sd": tau, "base_rates": rates, "base_rate_sources": sources, "tables": tables}


def _fmt(value: float, unit: str) -> str:
    return "none" if math.isnan(value) else f"{value:+.1f}{unit}"


def render(result: dict) -> str:
    """The preview as text (what ``gentax plan --power`` prints)."""
    tau = result["seed_sd"]
    lines = [f"Power preview ({result['preset']} preset): the smallest effect the tables' rule (task-paired exact "
             f"test AND seed-level test) resolves with {result['power']:.0%} power at level {result['level']:g}, "
             f"Holm over each table's cells; {result['seeds']} seed(s) x {result['checkpoints']} checkpoint(s) per "
             f"run's number; seed sd τ {100 * tau['id']:.1f} points (ΔID), {100 * tau['ood']:.1f} (ΔOOD) "
             "(config eval.seed_sd: the seeds' spread simulated and the floor the rule allows for)",
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
    if result["seeds"] < 2:
        lines.append("one seed: the variance between training seeds cannot be estimated, so no cell can be resolved")
    lines.append(f"none: not even success 0 % / 100 % would be resolved that often (fewer cells, more seeds or a "
                 f"smaller τ lower it). Model: tasks alike, evaluations independent, a seed's rate Beta with sd τ; "
                 f"the cell the table's strongest, the others null (Holm's first step, level / cells); {DRAWS} "
                 "simulated tables per effect; gentax/study/preview/power.py. A cell not resolved is not shown to have no effect")
    return "\n".join(lines) + "\n"
