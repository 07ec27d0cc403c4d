"""A synthetic success summary and properties table over the study's full grid, for examples, the
benchmark and tests only: seeded random draws, not results. Each init's domains (every registered
domain when ``init_domains`` is not given) with base rows; default and ``nothink`` runs of every
training domain, ``aug`` runs of the ``augmented`` domains (default: those declaring augmentation
sources), ``filler`` runs of the given (init, domain) pairs; 3 seeds; checkpoints every 15 steps to
150 (``LONG_RUNS`` longer). Each success is k / n, k ~ Binomial(n = ``episodes``, p).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gentax.analysis.summary import BASE, DEFAULT_VARIANT, INITS, domains_of
from gentax.domains.spec import specs

LONG_RUNS = {("v1", "sokoban"): 300, ("v2", "sokoban"): 300, ("v2", "sciworld"): 240}
_BASE_SUCCESS = {"alfworld": 0.25, "webshop": 0.34, "sokoban": 0.12, "sciworld": 0.10}


def synthetic_summary(seed: int = 0, seeds=(0, 1, 2), episodes: int = 128, every: int = 15,
                      steps: int = 150, filler=(), init_domains=None, augmented=None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    records = []

    def add(init, train, variant, run_seed, step, eval_domain, p, invalid):
        wins = rng.binomial(episodes, float(np.clip(p, 0.0, 1.0)))
        records.append({"init": init, "train_domain": train, "variant": variant, "seed": run_seed,
                        "step": step, "eval_domain": eval_domain, "success": wins / episodes,
                        "invalid_rate": float(np.clip(invalid, 0.0, 1.0)), "episodes": episodes})

    for init in INITS:
        domains = domains_of(init, init_domains)
        aug = augmented[init] if augmented is not None else [d for d, s in specs().items() if s.augmentation]
        for eval_domain in domains:
            add(init, BASE, DEFAULT_VARIANT, 0, 0, eval_domain, _BASE_SUCCESS.get(eval_domain, 0.2), 0.05)
        for train in domains:
            variants = ([DEFAULT_VARIANT, "nothink"] + (["aug"] if train in aug else [])
                        + (["filler"] if (init, train) in set(map(tuple, filler)) else []))
            for variant in variants:
                last = LONG_RUNS.get((init, train), steps) if variant == DEFAULT_VARIANT else steps
                id_gain = rng.uniform(0.2, 0.5)
                ood_tax = rng.uniform(-0.3, 0.05, size=len(domains))
                for run_seed in seeds:
                    for step in range(every, last + 1, every):
                        progress = min(step / steps, 1.5)
                        for i, eval_domain in enumerate(domains):
                            base = _BASE_SUCCESS.get(eval_domain, 0.2)
                            if eval_domain == train:
                                p = base + id_gain * progress
                            else:
                                p = base * (1.0 + ood_tax[i] * progress)
                            invalid = 0.02 if variant != "nothink" else rng.uniform(0.05, 0.3)
                            add(init, train, variant, run_seed, step, eval_domain,
                                p + rng.normal(0.0, 0.02), invalid)
    return pd.DataFrame.from_records(records)


def synthetic_properties() -> pd.DataFrame:
    """The paper's Table 3 property values (richness: mean characters per state; complexity:
    mean trajectory length with failures counted as 50)."""
    return pd.DataFrame({
        "domain": ["alfworld", "webshop", "sokoban", "sciworld"],
        "richness": [1572.0, 3063.0, 3114.0, 2851.0],
        "complexity": [42.0, 33.9, 44.0, 43.5],
    })


def synthetic_controls(seed: int = 0, seeds=(0, 1, 2), episodes: int = 128, steps: int = 150,
                       every: int = 15) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Summary rows of V2 Sokoban control runs and their levels table (``gentax.analysis.controls``).

    Three difficulty levels and three richness levels; the OOD tax planted in them grows with the
    level's complexity and not with its richness (random draws around it: an example, not a result).
    """
    rng = np.random.default_rng(seed)
    levels = pd.DataFrame({
        "control": ["difficulty"] * 3 + ["richness"] * 3,
        "level": ["short", "medium", "long", "eps0", "eps80", "eps240"],
        "order": [0, 1, 2, 0, 1, 2],
        "init": "v2", "train_domain": "sokoban",
        "variant": ["default"] * 3 + ["aug"] * 3,
        "setting": ["min_solution_length=3, max_solution_length=4", "min_solution_length=5, max_solution_length=6",
                    "min_solution_length=7, max_solution_length=9", "eps=0, p=1", "eps=80, p=1", "eps=240, p=1"],
        "richness": [1905.0, 1910.0, 1902.0, 1904.0, 2231.0, 2885.0],
        "tokens_per_obs": [610.0, 612.0, 609.0, 610.0, 690.0, 850.0],
        "complexity": [31.0, 40.0, 47.5, 44.0, 44.5, 45.0],
        "success": [0.45, 0.25, 0.06, 0.14, 0.13, 0.12],
    })
    levels["label"] = levels["control"] + "-" + levels["level"]
    records = []
    for level in levels.itertuples():
        tax = -0.02 * (level.complexity - 25.0)  # relative OOD change, planted on complexity only
        for run_seed in seeds:
            for step in range(every, steps + 1, every):
                for eval_domain in domains_of("v2"):
                    base = _BASE_SUCCESS[eval_domain]
                    p = base + 0.3 * step / steps if eval_domain == "sokoban" else base * (1.0 + tax * step / steps)
                    wins = rng.binomial(episodes, float(np.clip(p + rng.normal(0.0, 0.01), 0.0, 1.0)))
                    records.append({"init": "v2", "train_domain": "sokoban", "variant": level.label, "seed": run_seed,
                                    "step": step, "eval_domain": eval_domain, "success": wins / episodes,
                                    "invalid_rate": 0.02, "episodes": episodes})
    return pd.DataFrame.from_records(records), levels
