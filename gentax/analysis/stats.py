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
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from gentax.analysis import ranking
from gentax.analysis.summary import CELL_KEY, RUN_KEY, TASK_OUTCOMES, parse_task_outcomes

CI_LEVEL = 0.95
DEFAULT_BOOTSTRAP = 1000


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


def delta_ood_interval(draws: BootstrapDraws, run_keys: dict[str, tuple], base_keys: dict[str, tuple],
                       base_means: dict[str, float], delta: Callable) -> tuple[float, float]:
    """95% interval of a ΔOOD: ``delta(without, with_)`` (the tables' formula) per draw, with the
    run's draws of each OOD eval domain (``run_keys``: eval domain -> cell key; best available)
    and the initial policy's (``base_keys``; its fixed mean ``base_means`` where it has no draws).
    Draws where ΔOOD is undefined are left out; (NaN, NaN) when the run has no draws."""
    cells = {e: draws.best_available(key) for e, key in run_keys.items()}
    if not cells or any(c is None for c in cells.values()):
        return math.nan, math.nan
    bases = {e: draws.best_available(key) for e, key in base_keys.items()}
    values = np.array([delta({e: base_means[e] if bases[e] is None else float(bases[e][b]) for e in cells},
                             {e: float(cells[e][b]) for e in cells})[0] for b in range(draws.n_boot)])
    defined = values[~np.isnan(values)]
    return interval(defined) if defined.size else (math.nan, math.nan)


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
