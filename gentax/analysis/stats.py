"""Bootstrap confidence intervals and rank stability (beyond the paper, which reports neither).

Resampling unit (for one run = (init, train_domain, variant) at one window):

- *seeds*: draw the run's seeds with replacement; a draw's value is the mean of the drawn
  seeds' window means. The same seed draw is used for every eval domain of the run (a seed's
  evaluations on different domains come from the same trained model).
- *seeds + episodes* (only when every row of the cell has an ``episodes`` count): additionally
  redraw each drawn checkpoint's successes, k ~ Binomial(episodes, success), which is exactly
  resampling its episodes with replacement.

The 95% interval is the 2.5th-97.5th percentile of the draws, in percent. With three seeds the
seed bootstrap has only ten distinct outcomes: read it as a rough band, not an exact interval.

ΔID (the run's success on its training domain minus its initial policy's): where every row of
the run's cell and of the base cell has ``task_outcomes`` (success per held-out task; every
checkpoint is evaluated on the same tasks), the interval is *paired*: one draw resamples the
tasks shared by all those rows with replacement (the same tasks for the run's checkpoints and for
the initial policy) and the run's seeds, so a task that both solve, or both fail, adds no noise to
the difference. The initial policy's seeds (usually one) are averaged, not resampled. Without task
outcomes the interval is that of the run's draws minus the initial policy's draws (independent).

Exact paired tests (beside each interval; the bootstrap percentile interval is anti-conservative
with few discordant tasks: 4 tasks won and none lost of 16 excludes 0 in every bootstrap seed, while
the exact two-sided p is 0.125). ``delta_id_test``: per shared task, the run's success (mean over its
seeds and window checkpoints) minus the initial policy's; the tasks where that difference is
positive are wins, negative losses, zero ties (dropped). ``sign_test``: the two-sided exact binomial
test of wins among the discordant tasks at 1/2 (``scipy.stats.binomtest``); with one evaluation per
task on each side this is McNemar's exact test. 5 wins and 0 losses give p = 0.0625; an exact 5 %
test needs 6 and none. ``delta_ood_test`` pools the tasks of every OOD domain (the with run's
success minus the without run's per task), so its sign follows the ΔOOD formula's numerator when
the domains have equal task counts. ``holm``: Holm's step-down adjustment over the cells one table
tests; ``resolved`` = adjusted p below the level (and, with more than one seed, the interval, which
resamples seeds, excluding 0).

Rank stability: for each init, the share of draws (seeds + episodes where available) in which
each training domain has the best (lowest) OOD ranking score; domains tied for best all count,
so shares can sum to more than 1. "v1+v2" uses the sum of the two inits' scores per draw.

All randomness comes from ``numpy.random.default_rng([seed, crc32(run)])``: a run's draws
depend only on the seed and its own data, not on which other runs are present.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

import numpy as np
import pandas as pd
from scipy.stats import binomtest, hypergeom

from gentax.analysis import ranking
from gentax.analysis.summary import CELL_KEY, RUN_KEY, TASK_OUTCOMES, parse_task_outcomes

CI_LEVEL = 0.95
DEFAULT_BOOTSTRAP = 1000
#: the exact tests' level: a cell is resolved when its Holm-adjusted p is below it
TEST_LEVEL = 0.05


@dataclass
class BootstrapDraws:
    """Bootstrap draws (percent) per cell key (init, train_domain, variant, eval_domain)."""

    n_boot: int
    seeds: dict[tuple, np.ndarray] = field(default_factory=dict)
    episodes: dict[tuple, np.ndarray] = field(default_factory=dict)

    def best_available(self, key: tuple) -> np.ndarray | None:
        """Seeds + episodes draws where episode counts exist, else seed draws, else None."""
        return self.episodes.get(key, self.seeds.get(key))


def _run_rng(seed: int, run: tuple) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32("/".join(map(str, run)).encode())])


def bootstrap(rows: pd.DataFrame, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0) -> BootstrapDraws:
    """Draw ``n_boot`` bootstrap means of every cell of windowed rows (``summary.window_rows``)."""
    out = BootstrapDraws(n_boot=n_boot)
    if n_boot <= 0 or rows.empty:
        return out
    has_episodes = "episodes" in rows.columns
    for run, run_rows in rows.groupby(list(RUN_KEY), sort=True):
        rng = _run_rng(seed, run)
        run_seeds = np.sort(run_rows["seed"].unique())
        shared = rng.integers(0, len(run_seeds), size=(n_boot, len(run_seeds)))
        for eval_domain, cell in run_rows.groupby("eval_domain", sort=True):
            key = tuple(run) + (eval_domain,)
            # Windowed rows: every seed has the same checkpoints, so (seed, step) is a grid.
            cell = cell.sort_values(["seed", "step"])
            cell_seeds = cell["seed"].unique()
            shape = (len(cell_seeds), len(cell) // len(cell_seeds))
            if np.array_equal(cell_seeds, run_seeds):
                index = shared
            else:  # this eval domain lacks some of the run's seeds
                index = rng.integers(0, len(cell_seeds), size=(n_boot, len(cell_seeds)))
            p = cell["success"].to_numpy(dtype=float).reshape(shape)
            out.seeds[key] = p.mean(axis=1)[index].mean(axis=1) * 100.0
            if has_episodes and cell["episodes"].notna().all():
                n = cell["episodes"].to_numpy().astype(np.int64).reshape(shape)
                wins = rng.binomial(n[index], p[index])
                out.episodes[key] = (wins / n[index]).mean(axis=(1, 2)) * 100.0
    return out


def interval(draws: np.ndarray | None) -> tuple[float, float]:
    """The 95% percentile interval of bootstrap draws; (NaN, NaN) for none."""
    if draws is None:
        return math.nan, math.nan
    tail = (1.0 - CI_LEVEL) / 2.0 * 100.0
    low, high = np.percentile(draws, [tail, 100.0 - tail])
    return float(low), float(high)


def success_intervals(draws: BootstrapDraws) -> pd.DataFrame:
    """95% intervals per cell: ``ci_seeds_low_pct`` ... ``ci_episodes_high_pct`` (NaN when
    there are no episode counts), indexed like ``summary.cell_means``."""
    records = []
    for key in sorted(draws.seeds):
        seeds_low, seeds_high = interval(draws.seeds[key])
        episodes_low, episodes_high = interval(draws.episodes.get(key))
        records.append(dict(zip(CELL_KEY, key), ci_seeds_low_pct=seeds_low, ci_seeds_high_pct=seeds_high,
                            ci_episodes_low_pct=episodes_low, ci_episodes_high_pct=episodes_high))
    columns = list(CELL_KEY) + ["ci_seeds_low_pct", "ci_seeds_high_pct",
                                "ci_episodes_low_pct", "ci_episodes_high_pct"]
    return pd.DataFrame.from_records(records, columns=columns).set_index(list(CELL_KEY))


class DeltaOodInterval(NamedTuple):
    """A ΔOOD's 95% bootstrap interval and how many of the draws left ΔOOD undefined."""

    low: float
    high: float
    undefined: int
    draws: int

    def note(self) -> str:
        """The undefined draws in words ("" when every draw was defined)."""
        if not self.undefined:
            return ""
        return f"ΔOOD undefined in {self.undefined} of {self.draws} bootstrap draws (OOD base sum 0), left out of its interval"


def delta_ood_interval(draws: BootstrapDraws, run_keys: dict[str, tuple], base_keys: dict[str, tuple],
                       base_means: dict[str, float], delta: Callable) -> DeltaOodInterval:
    """95% interval of a ΔOOD: ``delta(without, with_)`` (the tables' formula) per draw, with the
    run's draws of each OOD eval domain (``run_keys``: eval domain -> cell key; best available)
    and the initial policy's (``base_keys``; its fixed mean ``base_means`` where it has no draws).
    Draws where ΔOOD is undefined are left out of the interval and counted (``undefined``);
    (NaN, NaN) when the run has no draws or no draw is defined."""
    cells = {e: draws.best_available(key) for e, key in run_keys.items()}
    if not cells or any(c is None for c in cells.values()):
        return DeltaOodInterval(math.nan, math.nan, 0, 0)
    bases = {e: draws.best_available(key) for e, key in base_keys.items()}
    values = np.array([delta({e: base_means[e] if bases[e] is None else float(bases[e][b]) for e in cells},
                             {e: float(cells[e][b]) for e in cells})[0] for b in range(draws.n_boot)])
    defined = values[~np.isnan(values)]
    low, high = interval(defined) if defined.size else (math.nan, math.nan)
    return DeltaOodInterval(low, high, int(values.size - defined.size), int(values.size))


def _task_matrix(rows: pd.DataFrame) -> tuple[list[int], np.ndarray] | None:
    """Success per (row, task) of rows that all have ``task_outcomes``, over the tasks they all
    share; None when a row lacks them or no task is shared."""
    if rows.empty or TASK_OUTCOMES not in rows.columns or rows[TASK_OUTCOMES].isna().any():
        return None
    parsed = [parse_task_outcomes(text) for text in rows[TASK_OUTCOMES]]
    tasks = sorted(set.intersection(*(set(p) for p in parsed)))
    if not tasks:
        return None
    return tasks, np.array([[p[t] for t in tasks] for p in parsed], dtype=float)


def delta_id_interval(rows: pd.DataFrame, run: tuple, base: tuple, n_boot: int, seed: int = 0,
                      draws: BootstrapDraws | None = None) -> tuple[float, float, str]:
    """95% interval (percent) of a run's ΔID and how it was drawn (module doc): ``"paired tasks"``,
    ``"independent"`` (from ``draws``), or ``""`` with (NaN, NaN) when neither is possible.

    ``rows``: windowed rows (``summary.window_rows``) holding the run's cell ``run`` = (init,
    train_domain, variant, eval_domain = train_domain) and the base cell ``base``."""
    if n_boot <= 0:
        return math.nan, math.nan, ""
    key = list(CELL_KEY)
    run_rows = rows[(rows[key] == pd.Series(run, index=key)).all(axis=1)].sort_values(["seed", "step"])
    base_rows = rows[(rows[key] == pd.Series(base, index=key)).all(axis=1)]
    if run_rows.empty or base_rows.empty:
        return math.nan, math.nan, ""
    matrix = _task_matrix(pd.concat([run_rows, base_rows]))
    if matrix is not None:
        tasks, values = matrix
        run_values, base_values = values[: len(run_rows)], values[len(run_rows):]
        seeds = run_rows["seed"].unique()
        per_seed = run_values.reshape(len(seeds), -1, len(tasks)).mean(axis=1)  # seed x task, window averaged
        rng = _run_rng(seed, tuple(run) + ("delta_id",))
        weights = rng.multinomial(len(tasks), np.full(len(tasks), 1.0 / len(tasks)), size=n_boot) / len(tasks)
        seed_draw = rng.integers(0, len(seeds), size=(n_boot, len(seeds)))
        run_draw = np.take_along_axis(weights @ per_seed.T, seed_draw, axis=1).mean(axis=1)
        low, high = interval((run_draw - weights @ base_values.mean(axis=0)) * 100.0)
        return low, high, "paired tasks"
    run_draws, base_draws = (draws.best_available(k) for k in (run, base)) if draws else (None, None)
    if run_draws is None or base_draws is None:
        return math.nan, math.nan, ""
    low, high = interval(run_draws - base_draws)
    return low, high, "independent"


@dataclass(frozen=True)
class PairedTest:
    """An exact paired test over tasks: tasks won and lost (ties dropped) and the two-sided p."""

    wins: int
    losses: int
    tasks: int
    p_value: float

    def text(self) -> str:
        return f"{self.wins}/{self.losses}, p {format_p(self.p_value)}"


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test of ``wins`` among ``wins + losses`` discordant pairs at 1/2
    (McNemar's exact test); 1.0 without discordant pairs (no evidence either way)."""
    if wins < 0 or losses < 0:
        raise ValueError(f"wins and losses must be >= 0, got {wins}, {losses}")
    n = wins + losses
    return 1.0 if n == 0 else float(binomtest(wins, n, 0.5).pvalue)


def format_p(p: float) -> str:
    """Two significant digits, as printed beside an interval (``<0.001`` below that)."""
    if math.isnan(p):
        return "—"
    return "<0.001" if p < 0.001 else f"{p:.2g}"


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN entries are not tested and stay NaN): the i-th
    smallest of m is multiplied by m − i, running maximum, capped at 1."""
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, math.nan)
    tested = np.flatnonzero(~np.isnan(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    m = len(order)
    running = 0.0
    for i, index in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[index]))
        adjusted[index] = running
    return adjusted


def _cell_rows(rows: pd.DataFrame, cell: tuple) -> pd.DataFrame:
    key = list(CELL_KEY)
    return rows[(rows[key] == pd.Series(cell, index=key)).all(axis=1)]


def task_values(rows: pd.DataFrame, cells: Sequence[tuple]) -> list[np.ndarray] | None:
    """Per cell, its success per (row, task): a row = one evaluation (seed, checkpoint), over the
    tasks every row of every cell shares; None when a row lacks task outcomes, a cell has no rows
    or no task is shared."""
    parts = [_cell_rows(rows, c) for c in cells]
    if any(p.empty for p in parts):
        return None
    matrix = _task_matrix(pd.concat(parts))
    if matrix is None:
        return None
    values = matrix[1]
    bounds = np.cumsum([0] + [len(p) for p in parts])
    return [values[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


#: permutation draws where task values are fractions (several episodes of a task in one evaluation)
_PERMUTATION_DRAWS = 20000


def _permutation_p(pairs: Sequence[tuple[np.ndarray, np.ndarray]], seed: int = 0) -> float:
    """Two-sided p of T = Σ_tasks (mean of the after evaluations − mean of the before ones) under
    the null that a task's evaluations are exchangeable between the sides: every assignment of a
    task's values to the before side's slots is equally likely, independently per task (E T = 0).
    Exact where every value is 0 or 1 (one episode per task and evaluation): a task's before-side
    sum is hypergeometric and T lives on a lattice, so the tasks' laws convolve exactly; else
    estimated from ``_PERMUTATION_DRAWS`` seeded draws."""
    observed = sum(float(after.mean(axis=0).sum() - before.mean(axis=0).sum()) for before, after in pairs)
    binary = all(np.isin(m, (0.0, 1.0)).all() for pair in pairs for m in pair)
    if not binary:
        rng = np.random.default_rng(seed)
        total = np.zeros(_PERMUTATION_DRAWS)
        for before, after in pairs:
            joint, nb = np.concatenate([before, after]), before.shape[0]
            for task in range(joint.shape[1]):
                shuffled = rng.permuted(np.tile(joint[:, task], (_PERMUTATION_DRAWS, 1)), axis=1)
                total += shuffled[:, nb:].mean(axis=1) - shuffled[:, :nb].mean(axis=1)
        return float(np.mean(np.abs(total) >= abs(observed) - 1e-9))
    # T x L is an integer for L = the product of every side's evaluation count (lcm would do)
    scale = math.lcm(*(m.shape[0] for pair in pairs for m in pair))
    law, offset = np.ones(1), 0  # law[i] = P(T x scale = i + offset)
    for before, after in pairs:
        nb, na = before.shape[0], after.shape[0]
        for s in np.concatenate([before, after]).sum(axis=0).astype(int):
            if s in (0, nb + na):
                continue  # every assignment gives 0
            k = np.arange(max(0, s - na), min(nb, s) + 1)  # the before side's successes
            weights = hypergeom.pmf(k, nb + na, s, nb)
            lattice = ((s - k) * (scale // na) - k * (scale // nb)).astype(int)
            step = np.zeros(lattice.max() - lattice.min() + 1)
            np.add.at(step, lattice - lattice.min(), weights)
            law, offset = np.convolve(law, step), offset + int(lattice.min())
    support = np.arange(law.size) + offset
    return float(min(1.0, law[np.abs(support) >= round(abs(observed) * scale) - 1e-9].sum()))


def paired_test(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> PairedTest:
    """The exact paired test of (before, after) evaluation matrices (rows = evaluations, columns =
    tasks; one pair per domain, tasks pooled). Wins / losses: tasks where the after side's mean is
    above / below the before side's. When both sides have as many evaluations per task, the
    difference is symmetric under the null and p is ``sign_test`` (McNemar's exact test at one
    evaluation each); otherwise (a run's seeds x checkpoints against one base evaluation, where the
    sign test would be biased) p is the within-task permutation test ``_permutation_p``, which at
    one evaluation per side is the same test."""
    differences = np.concatenate([after.mean(axis=0) - before.mean(axis=0) for before, after in pairs])
    wins, losses = int(np.sum(differences > 1e-12)), int(np.sum(differences < -1e-12))
    balanced = all(before.shape[0] == after.shape[0] for before, after in pairs)
    p = sign_test(wins, losses) if balanced else _permutation_p(pairs)
    return PairedTest(wins, losses, int(differences.size), p)


def delta_id_test(rows: pd.DataFrame, run: tuple, base: tuple) -> PairedTest | None:
    """The exact paired test of a ΔID over the tasks the run's cell and the base cell share
    (``paired_test``, before = the base); None without task outcomes."""
    values = task_values(rows, [base, run])
    return None if values is None else paired_test([tuple(values)])


def delta_ood_test(rows: pd.DataFrame, pairs: Sequence[tuple[tuple, tuple]]) -> PairedTest | None:
    """The exact paired test of a ΔOOD: ``pairs`` = (without cell, with cell) per OOD domain, the
    domains' tasks pooled (``paired_test``); None when a domain lacks task outcomes."""
    matrices = []
    for without, with_ in pairs:
        values = task_values(rows, [without, with_])
        if values is None:
            return None
        matrices.append(tuple(values))
    return paired_test(matrices) if matrices else None


def per_seed_success(rows: pd.DataFrame, cell: tuple) -> dict[int, float]:
    """Seed -> the cell's success (percent), that seed's window mean alone."""
    return {int(s): float(g["success"].mean()) * 100.0 for s, g in _cell_rows(rows, cell).groupby("seed")}


def per_seed_delta_id(rows: pd.DataFrame, run: tuple, base: tuple) -> dict[int, float]:
    """Seed -> the run's ΔID (percent) from that seed's window mean alone (base: its mean)."""
    base_rows = _cell_rows(rows, base)
    if base_rows.empty:
        return {}
    base_mean = float(base_rows["success"].mean()) * 100.0
    return {seed: value - base_mean for seed, value in per_seed_success(rows, run).items()}


def resolve(p_values: Sequence[float], level: float, seed_checks: Sequence[bool] | None = None
            ) -> tuple[np.ndarray, list[bool | None]]:
    """Holm-adjusted p-values over a table's tested cells and whether each is resolved
    (adjusted p < ``level`` and its ``seed_checks`` entry true: with several seeds, the interval
    that resamples them excludes 0); None for an untested cell (NaN p)."""
    if not 0 < level < 1:
        raise ValueError(f"test level must be in (0, 1), got {level}")
    adjusted = holm(p_values)
    checks = list(seed_checks) if seed_checks is not None else [True] * len(adjusted)
    return adjusted, [None if math.isnan(a) else bool(a < level and ok) for a, ok in zip(adjusted, checks)]


def rank_stability(
    draws: BootstrapDraws,
    domains_of: Callable[[str], Sequence[str]],
    inits: Sequence[str],
    variant: str,
    tie_points: float = ranking.TIE_POINTS,
    decimals: int | None = ranking.RANK_DECIMALS,
) -> pd.DataFrame:
    """Per init (and "v1+v2"), each training domain's share of draws with the best score,
    plus the mean and 95% interval of its score over the draws."""
    per_init_scores: dict[str, list[dict[str, float]]] = {}
    for init in inits:
        domains = domains_of(init)
        cells = {(t, e): draws.best_available((init, t, variant, e)) for t in domains for e in domains if t != e}
        if all(c is None for c in cells.values()):
            continue
        per_init_scores[init] = [
            ranking.ranking_table(
                {k: (math.nan if v is None else float(v[b])) for k, v in cells.items()},
                domains, tie_points, decimals,
            )[0]
            for b in range(draws.n_boot)
        ]
    if len(per_init_scores) > 1:
        per_init_scores["+".join(per_init_scores)] = [
            ranking.combined_scores({init: scores[b] for init, scores in per_init_scores.items()})
            for b in range(draws.n_boot)
        ]
    records = []
    for label, per_draw in per_init_scores.items():
        names = list(per_draw[0]) if per_draw else []
        winners = [set(ranking.best(scores)) for scores in per_draw]
        for name in names:
            values = np.array([scores[name] for scores in per_draw], dtype=float)
            defined = values[~np.isnan(values)]
            low, high = interval(defined) if defined.size else (math.nan, math.nan)
            records.append({
                "init": label, "train_domain": name,
                "share_best_pct": 100.0 * sum(name in w for w in winners) / len(per_draw),
                "score_mean": float(defined.mean()) if defined.size else math.nan,
                "score_ci_low": low, "score_ci_high": high,
                "draws_with_score": int(defined.size),
            })
    return pd.DataFrame.from_records(records, columns=[
        "init", "train_domain", "share_best_pct", "score_mean", "score_ci_low", "score_ci_high", "draws_with_score"])
