"""The OOD ranking score (STUDY.md "Derived measures"; docs/tables.md); lower is better.

Per OOD evaluation domain ``e`` of an initial policy, the training domains other than ``e`` are
sorted by success on ``e`` (percent, rounded to ``decimals`` first, so every rank can be checked
against the printed tables; ``None``: unrounded). The first gets rank 1; each next one shares the
rank of the one *directly before it* when less than ``tie_points`` below it, else takes that rank
+ 1 (dense; ties chain: 50.0, 49.6, 49.2 all rank 1; exactly 0.5 is no tie). A training domain's
score is the sum of its ranks over the domains it is OOD for; NaN when it lacks a value on one of
them (the others are ranked among those with a value). Each init is ranked on its own; "V1+V2" is
the V1 score plus the V2 score (SciWorld, absent from V1, has none).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

TIE_POINTS = 0.5
RANK_DECIMALS = 1
# Rounded differences such as 50.3 - 49.8 are 0.4999999999999929 in binary floating point.
_EPS = 1e-9


def dense_ranks(success: Mapping[str, float], tie_points: float = TIE_POINTS,
                decimals: int | None = RANK_DECIMALS) -> dict[str, int]:
    """Rank competitors by success (percent, higher is better) with the chained tie rule; NaN
    values are left out."""
    present = {k: float(v) for k, v in success.items() if v is not None and not math.isnan(v)}
    if decimals is not None:
        present = {k: round(v, decimals) for k, v in present.items()}
    ordered = sorted(present.items(), key=lambda kv: -kv[1])
    ranks: dict[str, int] = {}
    previous_value, rank = None, 0
    for name, value in ordered:
        if previous_value is None or previous_value - value >= tie_points - _EPS:
            rank += 1
        ranks[name] = rank
        previous_value = value
    return ranks


def ranking_table(success: Mapping[tuple[str, str], float], domains: Sequence[str], tie_points: float = TIE_POINTS,
                  decimals: int | None = RANK_DECIMALS) -> tuple[dict[str, float], dict[tuple[str, str], int]]:
    """Scores and per-eval-domain ranks of one initial policy.

    ``success[(train_domain, eval_domain)]`` is in percent (missing keys or NaN = no run);
    ``domains`` are the policy's training = evaluation domains. Returns
    ``(score by training domain (NaN when undefined), rank by (train_domain, eval_domain))``.
    """
    ranks: dict[tuple[str, str], int] = {}
    for eval_domain in domains:
        competitors = {t: success.get((t, eval_domain), math.nan) for t in domains if t != eval_domain}
        for train_domain, rank in dense_ranks(competitors, tie_points, decimals).items():
            ranks[(train_domain, eval_domain)] = rank
    scores: dict[str, float] = {}
    for train_domain in domains:
        own = [ranks.get((train_domain, e)) for e in domains if e != train_domain]
        scores[train_domain] = math.nan if any(r is None for r in own) else float(sum(own))
    return scores, ranks


def combined_scores(per_init: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """V1+V2: the sum of a training domain's scores over all inits; NaN unless every init
    has a score for it (so SciWorld, which V1 lacks, has none)."""
    names = list(dict.fromkeys(d for scores in per_init.values() for d in scores))
    total = {}
    for name in names:
        values = [scores.get(name, math.nan) for scores in per_init.values()]
        total[name] = math.nan if any(math.isnan(v) for v in values) else float(sum(values))
    return total


def best(scores: Mapping[str, float]) -> list[str]:
    """The training domains with the lowest defined score (all of them when tied)."""
    defined = {k: v for k, v in scores.items() if not math.isnan(v)}
    if not defined:
        return []
    low = min(defined.values())
    return [k for k, v in defined.items() if v == low]
