"""Bootstrap intervals, rank stability and the tables' decision rule ("resolved"): all beyond the
paper, which reports neither intervals nor tests. docs/tables.md "Beyond the paper" gives the
reasoning and the rule's measured guarantees; the definitions and assumptions are here.

Bootstrap, per run (init, train_domain, variant) at one window: *seeds*, the run's seeds drawn with
replacement, a draw's value the mean of the drawn seeds' window means, one seed draw for every eval
domain of the run (a seed's evaluations come from one trained model); *seeds + episodes* (only when
every row of the cell has ``episodes``), each drawn checkpoint's successes also redrawn as
Binomial(episodes, success), exactly resampling its episodes. Intervals are the 2.5-97.5th
percentiles of the draws, in percent; with three seeds the seed bootstrap has ten distinct
outcomes: a rough band. ΔID's interval (``delta_id_interval``) is *paired* where every row of the
run's cell and of the base cell has ``task_outcomes`` (every checkpoint evaluated on the same
tasks): a draw resamples the shared tasks, the same task draw for every seed and for the initial
policy, and independently the run's seeds (crossed, not nested); the initial policy's seeds are
averaged. Without task outcomes: the run's draws minus the initial policy's (independent). The
intervals describe and do not decide: with 2-3 seeds a percentile interval over seeds is
anti-conservative (two seeds of the same sign exclude 0 half the time under the null).

"Resolved" (``RuleTest``, ``resolve``): the task-paired exact test AND the seed-level test both
reject, Holm over the cells one table tests, at p ≤ level (``rejects``: the one boundary rule).

- Task-paired (``paired_test``): per shared task each side's success is its mean over its rows
  (seeds x window checkpoints); after ahead = win, behind = loss, level = tie (dropped). Equal
  evaluation counts on both sides: the exact two-sided sign test (McNemar's at one evaluation a
  side); unequal: the within-task permutation test of Σ_tasks (after mean − before mean), exact for
  0/1 outcomes, Monte Carlo for fractional ones. Assumption: it holds the trained seeds fixed, its
  null treating a task's evaluations as exchangeable between the sides, which a seed-to-seed shift
  of the policy breaks: alone it rejects null cells far above its level once seeds spread.
- Seed-level (``seed_side``, ``seed_test``): a trained side's per-seed values (Σ over the
  comparison's domains of the seed's mean over its rows and tasks), their mean, and variance
  max(s², floor) / seeds with seeds − 1 df, the floor being one seed's own evaluation noise plus
  the allowed seed spread τ (``eval.seed_sd``); a fixed side (the initial policy): its mean, a
  binomial bound on its variance, df ∞. Banerjee's (1961) test, valid for any ratio of the unknown
  seed variance to the evaluation noise when a side's seed values are near normal
  (``seed_level_rejects``). The floor keeps tied seeds (s² = 0) from resolving a cell on the
  initial policy's noise alone, and a two-mode or skewed seed law from faking a difference when
  all seeds land on one side: the rule holds its level for seed spreads up to τ under those laws.
  One seed on a trained side: no test (NaN); the cell cannot be resolved.
- ``RuleTest.p_value`` = the larger p, valid whichever of the two assumptions holds; ``holm``
  adjusts it over a table's cells with both tests.

Rank stability: per init, the share of draws in which each training domain has the best (lowest)
OOD ranking score (ties for best all count, so shares can sum past 1); "v1+v2" sums the inits'
scores per draw. All randomness comes from ``numpy.random.default_rng([seed, crc32(run)])``: a
run's draws depend only on the seed and its own data.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

import numpy as np
import pandas as pd
from scipy.stats import binom, hypergeom, norm
from scipy.stats import t as student_t

from gentax.analysis import ranking
from gentax.analysis.summary import BASE, CELL_KEY, RUN_KEY, TASK_OUTCOMES, parse_task_outcomes

CI_LEVEL = 0.95


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


def bootstrap(rows: pd.DataFrame, n_boot: int, seed: int = 0) -> BootstrapDraws:
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
    run_rows, base_rows = _cell_rows(rows, run).sort_values(["seed", "step"]), _cell_rows(rows, base)
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


#: The one boundary convention of every test here: a test rejects, and a cell is resolved, when its
#: p-value is at or below the level (p ≤ α). A valid p-value has P(p ≤ u) ≤ u under the null for
#: every u, so "p ≤ α" is the level-α test; ``rejects`` is the only place that compares.
def rejects(p_value, level: float):
    """Whether p-value(s) reject at ``level`` (p ≤ level; NaN never rejects)."""
    return np.asarray(p_value) <= level


@dataclass(frozen=True)
class PairedTest:
    """An exact paired test over tasks: tasks won and lost (ties dropped), the two-sided p and the
    test that ran (``PAIRED_METHODS``)."""

    wins: int
    losses: int
    tasks: int
    p_value: float
    method: str = "sign"


#: the task-paired tests ``paired_test`` chooses between, in words (the tables' notes name the one that ran)
PAIRED_METHODS = {
    "sign": "exact two-sided sign test on the won/lost tasks (binomial at 1/2; McNemar's exact test where "
            "each side has one evaluation per task)",
    "permutation": "exact within-task permutation test (each task's evaluations exchangeable between the "
                   "sides; its exact law)",
    "permutation, Monte Carlo": "within-task permutation test estimated from {draws} seeded permutations, "
                                "p = (count + 1) / (draws + 1)",
}


def sign_test_p(wins, losses) -> np.ndarray:
    """Two-sided exact sign test of ``wins`` among ``wins + losses`` discordant pairs at 1/2,
    element-wise over arrays: 2 x the smaller binomial tail, capped at 1 (the null is symmetric, so
    this is ``scipy.stats.binomtest``'s two-sided p); 1 without discordant pairs."""
    wins, losses = np.asarray(wins), np.asarray(losses)
    if np.any(wins < 0) or np.any(losses < 0):
        raise ValueError(f"wins and losses must be >= 0, got {wins}, {losses}")
    discordant = wins + losses
    p = np.minimum(1.0, 2.0 * binom.cdf(np.minimum(wins, losses), discordant, 0.5))
    return np.where(discordant == 0, 1.0, p)


def sign_test(wins: int, losses: int) -> float:
    """``sign_test_p`` of one pair of counts (McNemar's exact test at one evaluation per task and side)."""
    return float(sign_test_p(wins, losses))


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


class CellValues(NamedTuple):
    """One cell's evaluations on the tasks a comparison shares: ``values`` (rows = evaluations, i.e.
    seed x checkpoint; columns = tasks) and the seed of each row."""

    values: np.ndarray
    seeds: np.ndarray


def cell_task_values(rows: pd.DataFrame, cells: Sequence[tuple]) -> list[CellValues] | None:
    """Per cell, its success per (row, task) over the tasks every row of every cell shares, with
    each row's seed; None when a row lacks task outcomes, a cell has no rows or no task is shared."""
    parts = [_cell_rows(rows, c).sort_values(["seed", "step"]) for c in cells]
    if any(p.empty for p in parts):
        return None
    matrix = _task_matrix(pd.concat(parts))
    if matrix is None:
        return None
    values = matrix[1]
    bounds = np.cumsum([0] + [len(p) for p in parts])
    return [CellValues(values[a:b], p["seed"].to_numpy()) for a, b, p in zip(bounds[:-1], bounds[1:], parts)]


def task_values(rows: pd.DataFrame, cells: Sequence[tuple]) -> list[np.ndarray] | None:
    """Per cell, its success per (row, task): a row = one evaluation (seed, checkpoint), over the
    tasks every row of every cell shares; None when a row lacks task outcomes, a cell has no rows
    or no task is shared (``cell_task_values`` without the seeds)."""
    cells_values = cell_task_values(rows, cells)
    return None if cells_values is None else [c.values for c in cells_values]


#: permutation draws where task values are fractions (several episodes of a task in one evaluation)
PERMUTATION_DRAWS = 20000


def one_before_permutation_p(after_successes, after_evaluations: int, before) -> np.ndarray:
    """Exact two-sided p of the within-task permutation test (``_permutation_p``) where the before
    side has one 0/1 evaluation per task and the after side ``after_evaluations`` 0/1 evaluations
    per task (a run's seeds x checkpoints against its initial policy), batched over leading axes.

    ``after_successes`` (..., tasks): the after side's successes per task (0..after_evaluations);
    ``before`` (..., tasks): the before side's 0/1 outcome per task. Under the null a task's
    m + 1 evaluations (m = after_evaluations) are exchangeable, so the before slot holds a success
    with probability s / (m + 1) at s successes, independently per task, and
    T = Σ_tasks (after mean − before) = S / m − K (m + 1) / m with S = Σ s and K the before slots'
    successes: T is affine in K, whose law is Poisson-binomial (computed exactly, task by task).
    Compared on the integer lattice T x m, so the p is exact, not rounded."""
    after_successes = np.asarray(after_successes, dtype=np.int64)
    before = np.asarray(before, dtype=np.int64)
    m = int(after_evaluations)
    if m < 1:
        raise ValueError(f"after_evaluations must be >= 1, got {after_evaluations}")
    successes = after_successes + before
    q = successes / (m + 1)
    tasks = successes.shape[-1]
    law = np.zeros(successes.shape[:-1] + (tasks + 1,))
    law[..., 0] = 1.0
    for t in range(tasks):  # multiply in (1 - q_t + q_t z), over the support reached so far
        q_t = q[..., t:t + 1]
        carried = law[..., :t + 1] * q_t
        law[..., :t + 1] *= 1.0 - q_t
        law[..., 1:t + 2] += carried
    k = np.arange(tasks + 1)
    lattice = np.abs(successes.sum(axis=-1)[..., None] - k * (m + 1))
    observed = np.abs(after_successes.sum(axis=-1) - before.sum(axis=-1) * m)
    return np.minimum(1.0, (law * (lattice >= observed[..., None])).sum(axis=-1))


def _permutation_p(pairs: Sequence[tuple[np.ndarray, np.ndarray]], seed: int = 0) -> tuple[float, str]:
    """Two-sided p of T = Σ_tasks (mean of the after evaluations − mean of the before ones) under
    the null that a task's evaluations are exchangeable between the sides: every assignment of a
    task's values to the before side's slots is equally likely, independently per task (E T = 0),
    and the method (a ``PAIRED_METHODS`` key). Exact where every value is 0 or 1 (one episode per
    task and evaluation): with one before evaluation per task and the same after count everywhere
    ``one_before_permutation_p``; otherwise a task's before-side sum is hypergeometric and T lives
    on a lattice, so the tasks' laws convolve exactly. Else estimated from ``PERMUTATION_DRAWS``
    seeded draws as (count + 1) / (draws + 1), the observed assignment counted as one of them, so
    p is never 0 and P(p ≤ u) ≤ u holds for the estimate itself."""
    observed = sum(float(after.mean(axis=0).sum() - before.mean(axis=0).sum()) for before, after in pairs)
    binary = all(np.isin(m, (0.0, 1.0)).all() for pair in pairs for m in pair)
    if not binary:
        rng = np.random.default_rng(seed)
        total = np.zeros(PERMUTATION_DRAWS)
        for before, after in pairs:
            joint, nb = np.concatenate([before, after]), before.shape[0]
            for task in range(joint.shape[1]):
                shuffled = rng.permuted(np.tile(joint[:, task], (PERMUTATION_DRAWS, 1)), axis=1)
                total += shuffled[:, nb:].mean(axis=1) - shuffled[:, :nb].mean(axis=1)
        count = int(np.sum(np.abs(total) >= abs(observed) - 1e-9))
        return (count + 1) / (PERMUTATION_DRAWS + 1), "permutation, Monte Carlo"
    if len({after.shape[0] for _, after in pairs}) == 1 and all(before.shape[0] == 1 for before, _ in pairs):
        after_successes = np.concatenate([after.sum(axis=0) for _, after in pairs]).astype(int)
        before = np.concatenate([before[0] for before, _ in pairs]).astype(int)
        return float(one_before_permutation_p(after_successes, pairs[0][1].shape[0], before)), "permutation"
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
    return float(min(1.0, law[np.abs(support) >= round(abs(observed) * scale) - 1e-9].sum())), "permutation"


def paired_test(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> PairedTest:
    """The exact paired test of (before, after) evaluation matrices (rows = evaluations, columns =
    tasks; one pair per domain, tasks pooled). Wins / losses: tasks where the after side's mean is
    above / below the before side's. With as many evaluations per task on both sides the difference
    is symmetric under the null and p is ``sign_test``; otherwise (a run's seeds x checkpoints
    against one base evaluation, where the sign test would be biased) ``_permutation_p``.
    ``method`` says which ran (``PAIRED_METHODS``)."""
    differences = np.concatenate([after.mean(axis=0) - before.mean(axis=0) for before, after in pairs])
    wins, losses = int(np.sum(differences > 1e-12)), int(np.sum(differences < -1e-12))
    balanced = all(before.shape[0] == after.shape[0] for before, after in pairs)
    p, method = (sign_test(wins, losses), "sign") if balanced else _permutation_p(pairs)
    return PairedTest(wins, losses, int(differences.size), p, method)


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


# ---------------------------------------------------------------- the seed-level test


class SeedSide(NamedTuple):
    """One side of a comparison at the seed level (``seed_side``): its value (a fraction, summed
    over the comparison's domains), the estimated variance of that value, the degrees of freedom of
    that estimate (``math.inf`` for a fixed policy, whose variance is a binomial bound, not
    estimated from seeds; 0 when it cannot be estimated) and its number of seeds."""

    value: float
    variance: float
    df: float
    seeds: int


def _binomial_variance(values: np.ndarray) -> float:
    """A bound on the variance of the mean of ``values`` (0/1 outcomes, or fractions of episodes):
    p̃ (1 − p̃) / count with p̃ = (successes + 1) / (count + 2). Tasks that differ in difficulty, or
    several episodes a value, vary less; the +1 / +2 keeps 0 % or 100 % from claiming no variance."""
    smoothed = (float(values.sum()) + 1.0) / (values.size + 2.0)
    return smoothed * (1.0 - smoothed) / values.size


def seed_side(domains: Sequence[CellValues], fixed: bool, seed_sd: float = 0.0) -> SeedSide:
    """A side's ``SeedSide`` from its evaluations on each domain of the comparison (one
    ``CellValues`` per domain: rows = evaluations, columns = the shared tasks).

    Fixed (the initial policy, one model; its rows, whatever their seed, are repeated evaluations
    and are averaged): value Σ_domains the mean over all its rows and tasks, variance
    Σ_domains ``_binomial_variance``, df ∞.

    Trained (a run's seeds are independent training runs): a seed's value is Σ_domains the mean
    over its rows (window checkpoints) and the domain's tasks, over the seeds every domain has; the
    side's value is the mean over seeds. Its variance is max(s², floor) / seeds with seeds − 1
    degrees of freedom, s² the seed values' sample variance and floor what one seed's value varies
    at least: its own evaluation noise over its tasks and checkpoints (Σ_domains, binomial) plus
    the seed spread the rule assumes, ``seed_sd`` per domain (config ``eval.seed_sd``; the domains
    of a seed move together, so (domains x seed_sd)²; why: the module docstring). One seed: no
    estimate (variance NaN, df 0)."""
    if fixed:
        return SeedSide(sum(float(c.values.mean()) for c in domains), sum(_binomial_variance(c.values) for c in domains),
                        math.inf, 1)
    common = sorted(set.intersection(*(set(cell.seeds.tolist()) for cell in domains)))
    per_seed = np.array([sum(float(cell.values[cell.seeds == s].mean()) for cell in domains) for s in common])
    seeds = len(common)
    if seeds < 2:
        return SeedSide(float(per_seed.mean()) if seeds else math.nan, math.nan, 0.0, seeds)
    own = [cell.values[np.isin(cell.seeds, common)] for cell in domains]
    floor = (seed_sd * len(domains)) ** 2 + seeds * sum(_binomial_variance(values) for values in own)
    return SeedSide(float(per_seed.mean()), max(float(per_seed.var(ddof=1)), floor) / seeds, seeds - 1.0, seeds)


#: the smallest p the seed-level test reports (its bisection's lower end)
_SMALLEST_SEED_P = 1e-16


def _two_sided_quantile(alpha, df: float):
    """The (1 − α/2) quantile of Student's t with ``df`` degrees of freedom (the normal's at ∞)."""
    return norm.isf(alpha / 2.0) if math.isinf(df) else student_t.isf(alpha / 2.0, df)


def seed_level_rejects(effect, variances: Sequence, dfs: Sequence[float], level: float) -> np.ndarray:
    """Banerjee's (1961) test of "no difference" at ``level``, element-wise over arrays: reject when
    effect² > Σ_sides q_side² x variance_side, q_side the two-sided ``level`` quantile of t with the
    side's degrees of freedom (the normal's for a fixed side). Valid for any ratio of the sides'
    true variances (the seed variance τ is unknown): with X the effect under the null and
    g(x) = P(χ²₁ > x), convex, P(reject) = E g(Σ λ_side A_side) ≤ Σ λ_side E g(A_side) = level,
    where λ_side = the side's share of X's variance and A_side = q² x χ²_df / df, each E g(A_side)
    being exactly the level of the side's own t test. A side without a variance estimate (one
    seed: df 0) never lets the test reject; nor does a total variance estimate of 0 (every seed
    identical: no spread to judge by)."""
    effect = np.asarray(effect, dtype=float)
    threshold = np.zeros(np.broadcast(effect, *variances).shape)
    estimable = np.ones(threshold.shape, dtype=bool)
    for variance, df in zip(variances, dfs):
        variance = np.asarray(variance, dtype=float)
        if df <= 0:
            estimable &= False
            continue
        threshold = threshold + _two_sided_quantile(level, df) ** 2 * variance
        estimable &= ~np.isnan(variance)
    total = sum(np.asarray(v, dtype=float) for v in variances)
    return estimable & (total > 0) & (effect ** 2 > threshold)


def seed_level_p(effect, variances: Sequence, dfs: Sequence[float], iterations: int = 64) -> np.ndarray:
    """The p-value of ``seed_level_rejects``: the smallest level at which it rejects (its rejection
    regions are nested: the quantiles fall as the level rises), found by bisection on log level
    down to ``_SMALLEST_SEED_P``; element-wise over arrays; NaN where a side has no variance
    estimate (df 0), 1 where the effect or the total variance estimate is 0."""
    effect = np.asarray(effect, dtype=float)
    shape = np.broadcast(effect, *variances).shape
    if any(df <= 0 for df in dfs):
        return np.full(shape, math.nan)
    low = np.full(shape, math.log(_SMALLEST_SEED_P))
    high = np.zeros(shape)
    for _ in range(iterations):
        middle = (low + high) / 2.0
        rejected = seed_level_rejects(effect, variances, dfs, np.exp(middle))
        high = np.where(rejected, middle, high)
        low = np.where(rejected, low, middle)
    p = np.exp(high)
    total = sum(np.asarray(v, dtype=float) for v in variances)
    p = np.where((effect == 0) | (total == 0), 1.0, p)
    return np.where(np.isnan(total), math.nan, p)


@dataclass(frozen=True)
class SeedTest:
    """The seed-level test of a comparison: effect (after − before, points), its p (NaN when a
    trained side has one seed) and each side's seeds (0 = a fixed policy)."""

    effect_pct: float
    p_value: float
    seeds_before: int
    seeds_after: int

    def text(self) -> str:
        if math.isnan(self.p_value):
            return "one seed"
        return f"seeds p {format_p(self.p_value)}"


def seed_test(before: SeedSide, after: SeedSide) -> SeedTest:
    """Banerjee's test (``seed_level_p``) of after.value − before.value = 0 over the two sides'
    variance estimates."""
    effect = after.value - before.value
    p = float(seed_level_p(effect, [before.variance, after.variance], [before.df, after.df]))
    seeds = [0 if math.isinf(side.df) else side.seeds for side in (before, after)]
    return SeedTest(100.0 * effect, p, *seeds)


@dataclass(frozen=True)
class RuleTest:
    """What decides "resolved" for one cell: the task-paired exact test AND the seed-level test.
    ``p_value`` = the larger of the two: P(max ≤ u) ≤ min(P(p_tasks ≤ u), P(p_seeds ≤ u)) ≤ u when
    either is valid, so it is a valid p whatever the seed variance (the seed test covers it) and
    exact-conditional on the seeds where the seed variance is 0 (the task test); NaN when the seed
    test cannot run (one seed on a trained side)."""

    tasks: PairedTest
    seeds: SeedTest

    @property
    def p_value(self) -> float:
        if math.isnan(self.seeds.p_value):
            return math.nan
        return max(self.tasks.p_value, self.seeds.p_value)


def _rule_test(rows: pd.DataFrame, pairs: Sequence[tuple[tuple, tuple]], seed_sd: float) -> RuleTest | None:
    """``RuleTest`` of (before cell, after cell) pairs, one per domain, the domains pooled; a cell
    whose training domain is ``BASE`` is a fixed policy; a trained side's seed spread is at least
    ``seed_sd`` (``seed_side``); None without task outcomes."""
    befores, afters = [], []
    for before, after in pairs:
        cells = cell_task_values(rows, [before, after])
        if cells is None:
            return None
        befores.append(cells[0])
        afters.append(cells[1])
    if not pairs:
        return None
    tasks = paired_test([(b.values, a.values) for b, a in zip(befores, afters)])
    sides = [seed_side(side, fixed=pairs[0][i][1] == BASE, seed_sd=seed_sd) for i, side in enumerate((befores, afters))]
    return RuleTest(tasks, seed_test(*sides))


def delta_id_rule(rows: pd.DataFrame, run: tuple, base: tuple, *, seed_sd: float) -> RuleTest | None:
    """The decision rule of a ΔID: the run's cell against the base cell (``RuleTest``), the run's
    seeds spreading at least ``seed_sd`` (config ``eval.seed_sd.id``)."""
    return _rule_test(rows, [(base, run)], seed_sd)


def delta_ood_rule(rows: pd.DataFrame, pairs: Sequence[tuple[tuple, tuple]], *, seed_sd: float) -> RuleTest | None:
    """The decision rule of a ΔOOD: ``pairs`` = (without cell, with cell) per OOD domain, the
    domains' tasks pooled for the task test and the domains' successes summed per seed for the
    seed test (the ΔOOD formula's numerator, Σ_e G_with(e) − G_without(e)), each domain's seeds
    spreading at least ``seed_sd`` (config ``eval.seed_sd.ood``)."""
    return _rule_test(rows, pairs, seed_sd)


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


def resolve(p_values: Sequence[float], level: float) -> tuple[np.ndarray, list[bool | None]]:
    """Holm-adjusted p-values over a table's tested cells and whether each is resolved (adjusted
    p ≤ ``level``, ``rejects``); None for an untested cell (NaN p)."""
    if not 0 < level < 1:
        raise ValueError(f"test level must be in (0, 1), got {level}")
    adjusted = holm(p_values)
    return adjusted, [None if math.isnan(a) else bool(rejects(a, level)) for a in adjusted]


def rank_stability(draws: BootstrapDraws, domains_of: Callable[[str], Sequence[str]], inits: Sequence[str],
                   variant: str, tie_points: float = ranking.TIE_POINTS,
                   decimals: int | None = ranking.RANK_DECIMALS) -> pd.DataFrame:
    """Per init (and "v1+v2"), each training domain's share of draws with the best score,
    plus the mean and 95% interval of its score over the draws."""
    per_init_scores: dict[str, list[dict[str, float]]] = {}
    for init in inits:
        domains = domains_of(init)
        cells = {(t, e): draws.best_available((init, t, variant, e)) for t in domains for e in domains if t != e}
        if all(c is None for c in cells.values()):
            continue
        per_init_scores[init] = [
            ranking.ranking_table({k: (math.nan if v is None else float(v[b])) for k, v in cells.items()}, domains,
                                  tie_points, decimals)[0] for b in range(draws.n_boot)]
    if len(per_init_scores) > 1:
        per_init_scores["+".join(per_init_scores)] = [
            ranking.combined_scores({init: scores[b] for init, scores in per_init_scores.items()})
            for b in range(draws.n_boot)]
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
