"""The power preview (gentax.study.power): its laws against the tables' own test by simulation,
and `gentax plan --power` on both presets."""

import math

import numpy as np
import pytest

from gentax.analysis import stats
from gentax.study import power


def test_the_p_table_is_the_sign_test():
    table = power._p_table(24)
    for wins in range(25):
        for losses in range(25 - wins):
            assert table[wins, losses] == pytest.approx(stats.sign_test(wins, losses), abs=1e-12)


def test_won_lost_law_sums_to_one_and_convolves_domains():
    law = power.won_lost_distribution([(16, 0.3, 0.1), (8, 0.2, 0.2)])
    assert law.sum() == pytest.approx(1.0) and law.shape == (25, 25)
    w = np.arange(25)[:, None]
    assert float((law * w).sum()) == pytest.approx(16 * 0.3 + 8 * 0.2)  # E[wins]


@pytest.mark.parametrize("p0, delta, tasks, run_evals, cells, trials", [
    (0.15, 50.0, 16, 1, 5, 1500),    # the embedded study's shape: one evaluation each, exact law
    (0.20, 15.0, 64, 12, 2, 500),    # the paper's shape: 3 seeds x 4 checkpoints vs one base evaluation
    (0.35, 12.5, 128, 4, 3, 400),
])
def test_power_agrees_with_a_simulated_detection_rate(p0, delta, tasks, run_evals, cells, trials):
    """Within 5 points of the share of seeded simulated tables (one effect cell, the others null)
    where the tables' own test and Holm resolve the effect cell."""
    predicted = power.delta_id_power(p0, delta, tasks, run_evals, stats.TEST_LEVEL, cells)
    simulated = power.simulate_detection(p0, delta, tasks, run_evals, stats.TEST_LEVEL, cells, trials, seed=1)
    assert 0.3 < predicted < 0.9  # a setting where power is neither 0 nor 1 (else the check says nothing)
    assert abs(predicted - simulated) < 0.05, (predicted, simulated)


def test_smallest_delta_id_reaches_the_power_and_a_smaller_one_does_not():
    smallest = power.smallest_delta_id(0.2, 64, 12, 0.05, 2)
    assert power.delta_id_power(0.2, smallest, 64, 12, 0.05, 2) >= power.POWER
    assert power.delta_id_power(0.2, smallest - 0.5, 64, 12, 0.05, 2) < power.POWER
    # 8 tasks at 15 % cannot be resolved at 80 % power (at most 7 tasks won: p >= 0.016 > 0.05/7 with 7 cells)
    assert math.isnan(power.smallest_delta_id(0.15, 8, 1, 0.05, 7))


def test_plan_power_prints_both_presets(capsys):
    from gentax.study import cli as plan_cli

    for preset in ("embedded", "paper"):
        import argparse

        parser = argparse.ArgumentParser()
        plan_cli.register(parser.add_subparsers())
        args = parser.parse_args(["plan", "--preset", preset, "--power"])
        assert args.func(args) == 0
        out = capsys.readouterr().out
        assert f"({preset} preset)" in out and "table2_success:" in out and "smallest ΔID" in out
