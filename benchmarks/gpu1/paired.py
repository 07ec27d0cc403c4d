"""ΔID / ΔOOD of every evaluated run of a results folder against its initial policy on the same
held-out tasks, with the exact paired test (two-sided binomial on the discordant tasks, i.e. exact
McNemar: one evaluation a side) and Holm's correction over the ID tests. For a partial run, where Table 2
is not built yet. One seed at a time: each row holds its trained seed fixed, so it says which tasks that
run moved, not that another seed would (the tables' rule adds a test over seeds: docs/tables.md "Resolved").

    python benchmarks/gpu1/paired.py RESULTS_DIR [--out paired.csv]

A run's checkpoint is the last evaluated step; its base row is eval/<init>/base/<variant>/ (the aug
arm, which changes training only, against the default base row).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import pyarrow.parquet as pq
from scipy.stats import binomtest


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the input order."""
    order = sorted(range(len(pvalues)), key=pvalues.__getitem__)
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def outcomes(path: Path) -> dict[int, bool]:
    table = pq.read_table(path, columns=["task_seed", "won", "error"]).to_pylist()
    return {row["task_seed"]: bool(row["won"]) for row in table if row["error"] is None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--out")
    args = ap.parse_args()
    root = Path(args.results) / "eval"
    rows = []
    for run in sorted(p for p in root.glob("*/*/*/seed*") if p.parts[-3] != "base"):
        init, train_domain, variant, seed = run.parts[-4:]
        step = max(run.glob("step*"), key=lambda p: int(p.name[4:]))
        for episodes in sorted(step.glob("*.episodes.parquet")):
            domain = episodes.name.split(".")[0]
            base = root / init / "base" / ("default" if variant == "aug" else variant) / "seed0" / "step0" / episodes.name
            if not base.is_file():
                continue
            after, before = outcomes(episodes), outcomes(base)
            tasks = sorted(set(after) & set(before))
            wins = sum(after[t] and not before[t] for t in tasks)
            losses = sum(before[t] and not after[t] for t in tasks)
            p = binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
            rows.append({"init": init, "train_domain": train_domain, "variant": variant, "seed": seed[4:],
                         "step": step.name[4:], "eval_domain": domain, "kind": "ID" if domain == train_domain else "OOD",
                         "tasks": len(tasks), "base_pct": 100 * sum(before[t] for t in tasks) / len(tasks),
                         "run_pct": 100 * sum(after[t] for t in tasks) / len(tasks), "wins": wins, "losses": losses,
                         "p_exact": p})
    for kind in ("ID", "OOD"):
        chosen = [r for r in rows if r["kind"] == kind]
        if chosen:
            for r, q in zip(chosen, holm([r["p_exact"] for r in chosen])):
                r["p_holm"] = q
    print(f"{'run':32s} {'eval':9s} {'kind':4s} {'n':>3s} {'base%':>6s} {'run%':>6s} {'Δ':>6s} {'W/L':>7s} {'p':>8s} {'p Holm':>8s}")
    for r in rows:
        name = f"{r['init']} {r['train_domain']} {r['variant']} s{r['seed']} step{r['step']}"
        print(f"{name:32s} {r['eval_domain']:9s} {r['kind']:4s} {r['tasks']:3d} {r['base_pct']:6.1f} {r['run_pct']:6.1f}"
              f" {r['run_pct'] - r['base_pct']:+6.1f} {r['wins']:3d}/{r['losses']:<3d} {r['p_exact']:8.4f} {r['p_holm']:8.4f}")
    if args.out and rows:
        with open(args.out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
