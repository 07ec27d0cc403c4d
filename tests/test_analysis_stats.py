"""Bootstrap intervals (over seeds, over episodes) and rank stability, all seeded."""

import math

import numpy as np
import pandas as pd
import pytest

from analysis_cases import STUDY, base, run
from gentax.analysis import stats
from gentax.analysis.summary import domains_of, load_summary, window_rows


def study_domains(init):  # the config's domains of an init, as the tables read them
    return domains_of(init, STUDY["init_domains"])


def windowed(rows) -> pd.DataFrame:
    return window_rows(load_summary(pd.DataFrame(rows)), (105, 120, 135, 150))[0]


KEY = ("v1", "alfworld", "default", "alfworld")


def test_seed_bootstrap_draws_are_means_of_resampled_seeds():
    rows = windowed(run("v1", "alfworld", {"alfworld": [0.25, 0.35]}))
    draws = stats.bootstrap(rows, n_boot=1000, seed=3)
    assert set(np.round(draws.seeds[KEY], 6)) == {25.0, 30.0, 35.0}
    assert abs(np.mean(draws.seeds[KEY] == 30.0) - 0.5) < 0.06  # P(one of each) = 1/2
    ci = stats.success_intervals(draws).loc[KEY]
    assert (ci.ci_seeds_low_pct, ci.ci_seeds_high_pct) == (25.0, 35.0)
    assert np.isnan(ci.ci_episodes_low_pct)  # no episode counts given


def test_episode_bootstrap_matches_the_binomial_spread():
    rows = windowed(run("v1", "alfworld", {"alfworld": 0.5}, seeds=(0,), episodes=100))
    draws = stats.bootstrap(rows, n_boot=4000, seed=0)
    assert np.all(draws.seeds[KEY] == 50.0)  # one seed: no spread over seeds
    # 4 checkpoints x 100 episodes at p = 0.5: sd of the mean = 100 * sqrt(0.25 / 400) = 2.5 points
    assert np.std(draws.episodes[KEY]) == pytest.approx(2.5, rel=0.08)
    ci = stats.success_intervals(draws).loc[KEY]
    assert ci.ci_episodes_low_pct == pytest.approx(50 - 1.96 * 2.5, abs=0.6)
    assert ci.ci_episodes_high_pct == pytest.approx(50 + 1.96 * 2.5, abs=0.6)


def test_bootstrap_is_seeded_and_independent_of_other_runs():
    one = run("v1", "alfworld", {"alfworld": [0.2, 0.3, 0.4], "webshop": [0.1, 0.2, 0.3]}, seeds=(0, 1, 2))
    other = run("v1", "webshop", {"alfworld": [0.5, 0.6, 0.7]}, seeds=(0, 1, 2))
    a = stats.bootstrap(windowed(one), 200, seed=1)
    b = stats.bootstrap(windowed(one + other), 200, seed=1)
    c = stats.bootstrap(windowed(one), 200, seed=2)
    np.testing.assert_array_equal(a.seeds[KEY], b.seeds[KEY])
    assert not np.array_equal(a.seeds[KEY], c.seeds[KEY])
    # one seed draw serves every eval domain of a run: the two columns move together
    ws = ("v1", "alfworld", "default", "webshop")
    np.testing.assert_allclose(a.seeds[KEY] - a.seeds[ws], 10.0)


def stability_case():
    """V1: alfworld's score is 3; webshop's is rank(alfworld column) + 1 and sokoban's
    rank(alfworld column) + 2, where webshop's alfworld success is 20/25/30 and sokoban's
    24/25/26 with probabilities 1/4, 1/2, 1/4 under the seed bootstrap."""
    rows = base("v1", {"alfworld": 0.2, "webshop": 0.3, "sokoban": 0.1})
    rows += run("v1", "alfworld", {"alfworld": 0.5, "webshop": 0.28, "sokoban": 0.08})
    rows += run("v1", "webshop", {"alfworld": [0.20, 0.30], "webshop": 0.6, "sokoban": 0.09})
    rows += run("v1", "sokoban", {"alfworld": [0.24, 0.26], "webshop": 0.25, "sokoban": 0.4})
    return windowed(rows)


def test_rank_stability_shares_match_the_exact_probabilities():
    draws = stats.bootstrap(stability_case(), n_boot=3000, seed=0)
    table = stats.rank_stability(draws, study_domains, ("v1", "v2"), "default").set_index(["init", "train_domain"])
    # webshop is always best (2, or tied at 3); sokoban and alfworld tie it at 3 exactly when
    # sokoban is >= 0.5 above webshop on alfworld: webshop 20 (1/4), or 25 with sokoban 26 (1/8)
    assert table.loc[("v1", "webshop"), "share_best_pct"] == 100.0
    assert table.loc[("v1", "sokoban"), "share_best_pct"] == pytest.approx(37.5, abs=3.5)
    assert table.loc[("v1", "alfworld"), "share_best_pct"] == pytest.approx(
        table.loc[("v1", "sokoban"), "share_best_pct"])
    assert table.loc[("v1", "alfworld"), "score_mean"] == 3.0
    assert list(table.index.get_level_values("init").unique()) == ["v1"]  # no V2 runs at all
    again = stats.rank_stability(stats.bootstrap(stability_case(), 3000, seed=0), study_domains, ("v1",), "default")
    pd.testing.assert_frame_equal(again.reset_index(drop=True), table.reset_index().reset_index(drop=True))


def outcomes(won: set[int], tasks: int = 16) -> dict:
    """The ``task_outcomes`` column of rows whose policy wins exactly the tasks in ``won``."""
    text = " ".join(f"{t}:{int(t in won)}" for t in range(tasks))
    return {"task_outcomes": text, "episodes": tasks}


def delta_id_case(with_outcomes: bool = True) -> pd.DataFrame:
    """Base wins tasks 0-7 of 16 (50 %), the run wins 0-11 at every checkpoint (75 %): ΔID +25,
    the 4 extra tasks won and none lost."""
    base_cols, run_cols = outcomes(set(range(8))), outcomes(set(range(12)))
    if not with_outcomes:
        base_cols.pop("task_outcomes"), run_cols.pop("task_outcomes")
    rows = base("v1", {"sokoban": 0.5}, **base_cols)
    rows += run("v1", "sokoban", {"sokoban": 0.75}, seeds=(0,), **run_cols)
    return windowed(rows)


SOKOBAN_RUN, SOKOBAN_BASE = ("v1", "sokoban", "default", "sokoban"), ("v1", "base", "default", "sokoban")


def test_paired_delta_id_interval_resamples_the_tasks_both_were_evaluated_on():
    low, high, method = stats.delta_id_interval(delta_id_case(), SOKOBAN_RUN, SOKOBAN_BASE, 4000, seed=0)
    # a draw's ΔID = 100 x K / 16 with K ~ Binomial(16, 1/4) (draws of the 4 tasks only the run wins):
    # P(K = 0) = 1.0 %, P(K <= 1) = 6.3 % -> 2.5th percentile 6.25; P(K <= 7) = 97.3 %, P(K <= 8) = 99.3 % -> 50
    assert method == "paired tasks"
    assert (low, high) == (6.25, 50.0)
    # the same successes without task outcomes: the independent difference spans 0
    rows = delta_id_case(with_outcomes=False)
    draws = stats.bootstrap(rows, 4000, seed=0)
    low, high, method = stats.delta_id_interval(rows, SOKOBAN_RUN, SOKOBAN_BASE, 4000, seed=0, draws=draws)
    assert method == "independent" and low < 0 < 25 < high


def test_paired_delta_id_interval_resamples_seeds_and_averages_the_window():
    rows = base("v1", {"sokoban": 0.5}, **outcomes(set(range(8))))
    # seed 0 always ends on the base's tasks (ΔID 0), seed 1 wins 4 more at every checkpoint (ΔID +25)
    rows += run("v1", "sokoban", {"sokoban": 0.5}, seeds=(0,), **outcomes(set(range(8))))
    rows += run("v1", "sokoban", {"sokoban": 0.75}, seeds=(1,), **outcomes(set(range(12))))
    low, high, _ = stats.delta_id_interval(windowed(rows), SOKOBAN_RUN, SOKOBAN_BASE, 4000, seed=0)
    # a seed draw of (0, 0) gives exactly 0 with probability 1/4: the interval starts at 0
    assert low == 0.0 and 25.0 <= high <= 50.0


def test_delta_id_interval_is_undefined_without_draws_or_rows():
    assert stats.delta_id_interval(delta_id_case(), SOKOBAN_RUN, SOKOBAN_BASE, 0)[2] == ""
    # no task in common (evaluated on other tasks): not paired; the independent draws serve
    rows = base("v1", {"sokoban": 0.5}, task_outcomes="100:1 101:0", episodes=2)
    rows += run("v1", "sokoban", {"sokoban": 0.5}, seeds=(0,), task_outcomes="0:1 1:0", episodes=2)
    rows = windowed(rows)
    method = stats.delta_id_interval(rows, SOKOBAN_RUN, SOKOBAN_BASE, 100, draws=stats.bootstrap(rows, 100))[2]
    assert method == "independent"
    missing = ("v1", "webshop", "default", "webshop")
    low, high, method = stats.delta_id_interval(delta_id_case(), missing, SOKOBAN_BASE, 100)
    assert np.isnan(low) and np.isnan(high) and method == ""


@pytest.mark.parametrize("text, problem", [
    ("0:1 1:x", "malformed"), ("0:1 1", "malformed"), ("0:1 0:0", "appears twice"), ("0:2", "outside"),
    ("0:1 1:1", "average 1, but its success is 0.5"),
])
def test_bad_task_outcomes_are_named(text, problem):
    from gentax.errors import GentaxError

    rows = base("v1", {"sokoban": 0.5}, task_outcomes=text)
    with pytest.raises(GentaxError, match=f"task_outcomes of row 1 .*{problem}|task_outcomes of row 1 {problem}"):
        load_summary(pd.DataFrame(rows))


# ---------------------------------------------------------------- exact paired tests


def won_lost_case(wins: int, losses: int, tasks: int = 16, init: str = "v1", train: str = "sokoban",
                  seeds=(0,)) -> list[dict]:
    """The run wins tasks [0, wins + 4), the base [wins, wins + 4) and the last ``losses`` tasks:
    ``wins`` tasks won by the run alone, ``losses`` by the base alone, 4 by both; one checkpoint
    (window (150,)), so each side has one evaluation per task (the embedded study's shape)."""
    base_won = set(range(wins, wins + 4)) | set(range(tasks - losses, tasks))
    run_won = set(range(0, wins + 4))
    rows = base(init, {train: len(base_won) / tasks}, **outcomes(base_won, tasks))
    rows += run(init, train, {train: len(run_won) / tasks}, seeds=seeds, steps=(150,), **outcomes(run_won, tasks))
    return window_rows(load_summary(pd.DataFrame(rows)), (150,))[0]


def test_sign_test_is_exact_mcnemar():
    assert stats.sign_test(5, 0) == pytest.approx(0.0625)  # 2 x (1/2)^5
    assert stats.sign_test(6, 0) == pytest.approx(0.03125)
    assert stats.sign_test(4, 0) == pytest.approx(0.125)
    assert stats.sign_test(3, 3) == 1.0 and stats.sign_test(0, 0) == 1.0  # no discordant task: no evidence
    assert stats.sign_test(0, 6) == stats.sign_test(6, 0)


def test_delta_id_test_counts_discordant_tasks_5_of_16_is_not_resolved_6_is():
    five = won_lost_case(5, 0)
    test = stats.delta_id_test(five, SOKOBAN_RUN, SOKOBAN_BASE)
    assert (test.wins, test.losses, test.tasks) == (5, 0, 16) and test.p_value == pytest.approx(0.0625)
    assert stats.resolve([test.p_value], 0.05)[1] == [False]
    six = stats.delta_id_test(won_lost_case(6, 0), SOKOBAN_RUN, SOKOBAN_BASE)
    assert six.p_value == pytest.approx(0.03125) and stats.resolve([six.p_value], 0.05)[1] == [True]
    # losses count against: 6 won, 1 lost is p = 0.125
    mixed = stats.delta_id_test(won_lost_case(6, 1), SOKOBAN_RUN, SOKOBAN_BASE)
    assert (mixed.wins, mixed.losses) == (6, 1) and mixed.p_value == pytest.approx(0.125)
    # no task outcomes: no test
    assert stats.delta_id_test(delta_id_case(with_outcomes=False), SOKOBAN_RUN, SOKOBAN_BASE) is None


def test_holm_adjusts_over_the_cells_a_table_tests():
    # alone, p = 0.03 resolves; beside two other tested cells it needs 0.05 / 3
    assert stats.resolve([0.03], 0.05)[1] == [True]
    adjusted, resolved = stats.resolve([0.03, 0.2, 0.5, float("nan")], 0.05)
    np.testing.assert_allclose(adjusted[:3], [0.09, 0.4, 0.5])
    assert np.isnan(adjusted[3]) and resolved == [False, False, False, None]
    # step-down: the smallest at m = 3, the next at 2 (running maximum), the largest as is
    np.testing.assert_allclose(stats.holm([0.01, 0.02, 0.04]), [0.03, 0.04, 0.04])
    assert stats.resolve([0.01, 0.02, 0.04], 0.05)[1] == [True, True, True]


def test_per_seed_delta_ids():
    rows = base("v1", {"sokoban": 0.5}, **outcomes(set(range(8))))
    rows += run("v1", "sokoban", {"sokoban": 0.5}, seeds=(0,), **outcomes(set(range(8))))
    rows += run("v1", "sokoban", {"sokoban": 0.75}, seeds=(1,), **outcomes(set(range(12))))
    assert stats.per_seed_delta_id(windowed(rows), SOKOBAN_RUN, SOKOBAN_BASE) == {0: 0.0, 1: 25.0}


def test_delta_ood_interval_counts_undefined_draws():
    from gentax.analysis.tables import delta_ood

    draws = stats.BootstrapDraws(n_boot=10)
    draws.seeds[("v2", "a", "default", "c")] = np.full(10, 30.0)
    draws.seeds[("v2", "base", "default", "c")] = np.array([0.0] * 3 + [20.0] * 7)  # 3 draws: base sum 0
    ci = stats.delta_ood_interval(draws, {"c": ("v2", "a", "default", "c")}, {"c": ("v2", "base", "default", "c")},
                                  {"c": 14.0}, delta_ood)
    assert (ci.low, ci.high, ci.undefined, ci.draws) == (50.0, 50.0, 3, 10)
    assert "undefined in 3 of 10 bootstrap draws" in ci.note()


def test_more_run_evaluations_than_base_ones_use_the_permutation_test():
    """16 tasks the base fails once each, the run (12 evaluations per task) wins one of 12 on each:
    the run's mean (1/12) beats the base's 0 on all 16 tasks, which the sign test would call
    p = 3e-5, though that is what equal rates (1/13) give. Under exchange of each task's 13
    evaluations, k ~ Binomial(16, 1/13) tasks put their success on the base's slot and
    T = (16 - k) / 12 - k; |T| >= 16/12 for k = 0 or k >= 3."""
    from scipy.stats import binom

    base_values, run_values = np.zeros((1, 16)), np.zeros((12, 16))
    run_values[0] = 1.0
    test = stats.paired_test([(base_values, run_values)])
    assert (test.wins, test.losses) == (16, 0)
    expected = binom.pmf(0, 16, 1 / 13) + binom.sf(2, 16, 1 / 13)
    assert test.p_value == pytest.approx(expected) and test.p_value > 0.3
    # equal evaluation counts: the sign test (symmetric under the null)
    assert stats.paired_test([(np.zeros((1, 6)), np.ones((1, 6)))]).p_value == pytest.approx(0.03125)


# ---------------------------------------------------------------- the decision rule's parts


def test_sign_test_p_is_binomtest_elementwise():
    from scipy.stats import binomtest

    wins, losses = np.meshgrid(np.arange(15), np.arange(15), indexing="ij")
    batched = stats.sign_test_p(wins, losses)
    for w in range(15):
        for l in range(15):
            expected = binomtest(w, w + l, 0.5).pvalue if w + l else 1.0
            assert batched[w, l] == pytest.approx(expected, abs=1e-12)


def test_one_before_permutation_p_is_the_enumerated_law():
    """Every assignment of each task's before slot to one of its m + 1 evaluations, enumerated
    (tiny cases), against the batched exact law; and ``paired_test`` uses it."""
    import itertools

    rng = np.random.default_rng(5)
    for _ in range(40):
        tasks, m = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        joint = (rng.random((m + 1, tasks)) < rng.random()).astype(int)  # row 0: the before side
        observed = joint[1:].mean(axis=0).sum() - joint[0].sum()
        extreme = 0
        for slots in itertools.product(range(m + 1), repeat=tasks):
            before = np.array([joint[s, t] for t, s in enumerate(slots)])
            after_sum = joint.sum(axis=0) - before
            extreme += abs((after_sum / m).sum() - before.sum()) >= abs(observed) - 1e-9
        expected = extreme / (m + 1) ** tasks
        got = stats.one_before_permutation_p(joint[1:].sum(axis=0), m, joint[0])
        assert got == pytest.approx(expected, abs=1e-12)
        if m > 1:
            test = stats.paired_test([(joint[:1].astype(float), joint[1:].astype(float))])
            assert test.method == "permutation" and test.p_value == pytest.approx(expected, abs=1e-12)


def test_monte_carlo_permutation_p_counts_the_observed_assignment():
    """Fractional task values (several episodes each) take the Monte Carlo branch: p =
    (count + 1) / (draws + 1), so the most extreme arrangement possible still has p > 0."""
    before, after = np.full((1, 30), 0.0), np.full((3, 30), 0.5)
    test = stats.paired_test([(before, after)])
    assert test.method == "permutation, Monte Carlo"
    assert 0 < test.p_value <= 40 / (stats.PERMUTATION_DRAWS + 1)
    assert (test.p_value * (stats.PERMUTATION_DRAWS + 1)) == pytest.approx(round(test.p_value * (stats.PERMUTATION_DRAWS + 1)))


def test_rejects_at_the_level_itself():
    assert stats.rejects(0.05, 0.05) and not stats.rejects(0.0500001, 0.05) and not stats.rejects(float("nan"), 0.05)
    assert stats.resolve([0.025, 0.025], 0.05)[1] == [True, True]  # Holm: 2 x 0.025 = 0.05 <= 0.05


def test_seed_level_p_reduces_to_the_normal_and_to_students_t():
    """A fixed side alone (the other side's seeds identical): the normal test on its binomial
    bound; a trained side whose other side is (almost) exactly known: Student's t on its seeds."""
    from scipy.stats import norm, t

    assert float(stats.seed_level_p(0.1, [0.0025, 0.0], [math.inf, 1.0])) == pytest.approx(2 * norm.sf(2.0), rel=1e-6)
    assert float(stats.seed_level_p(0.3, [1e-14, 0.01], [math.inf, 2.0])) == pytest.approx(2 * t.sf(3.0, 2), rel=1e-5)
    assert np.isnan(stats.seed_level_p(0.3, [0.001, float("nan")], [math.inf, 0.0]))  # one seed: no test
    assert float(stats.seed_level_p(0.0, [0.001, 0.001], [math.inf, 2.0])) == 1.0


def test_seed_level_test_holds_its_level_whatever_the_seed_variance():
    """Banerjee's test of a trained side (2 or 3 seeds, normal seed effects of sd τ plus binomial
    noise) against a fixed policy's mean over 64 tasks: at most the level at every τ (Monte Carlo
    error: 3 standard errors of a nominal rate), though at some τ the variance estimate has one
    degree of freedom and the base's noise is as large as the seeds'."""
    rng = np.random.default_rng(9)
    draws, tasks, level = 40000, 64, 0.05
    for seeds in (2, 3):
        for tau in (0.0, 0.03, 0.1, 0.3):
            seed_rates = 0.4 + rng.normal(0, tau, (draws, seeds))
            run = rng.binomial(tasks, np.clip(seed_rates, 0, 1)) / tasks
            run += (seed_rates - np.clip(seed_rates, 0, 1))  # unclipped: keep the mean exactly at 0.4
            base_mean = rng.binomial(tasks, 0.4, draws) / tasks
            smoothed = (base_mean * tasks + 1) / (tasks + 2)
            rejected = stats.seed_level_rejects(run.mean(axis=1) - base_mean,
                                                [smoothed * (1 - smoothed) / tasks, run.var(axis=1, ddof=1) / seeds],
                                                [math.inf, seeds - 1.0], level)
            assert rejected.mean() <= level + 3 * math.sqrt(level * (1 - level) / draws), (seeds, tau, rejected.mean())


def test_the_rule_takes_the_larger_p_and_needs_two_seeds():
    rows = base("v1", {"sokoban": 0.0}, **outcomes(set()))
    rows += run("v1", "sokoban", {"sokoban": 0.375}, seeds=(0, 1), **outcomes(set(range(6))))
    rule = stats.delta_id_rule(windowed(rows), SOKOBAN_RUN, SOKOBAN_BASE, seed_sd=0.0)
    assert rule.tasks.method == "permutation" and rule.seeds.seeds_after == 2 and rule.seeds.seeds_before == 0
    assert rule.p_value == max(rule.tasks.p_value, rule.seeds.p_value)
    assert rule.seeds.effect_pct == pytest.approx(37.5)
    one = base("v1", {"sokoban": 0.0}, **outcomes(set()))
    one += run("v1", "sokoban", {"sokoban": 0.375}, seeds=(0,), **outcomes(set(range(6))))
    rule = stats.delta_id_rule(windowed(one), SOKOBAN_RUN, SOKOBAN_BASE, seed_sd=0.0)
    assert math.isnan(rule.seeds.p_value) and math.isnan(rule.p_value) and rule.seeds.text() == "one seed"


def _seeds_winning(won_per_seed, tasks, steps=(150,)):
    """Rows of a V1 Sokoban run whose seed i wins the first ``won_per_seed[i]`` of ``tasks`` tasks at
    every checkpoint of ``steps``."""
    rows = []
    for seed, won in enumerate(won_per_seed):
        rows += run("v1", "sokoban", {"sokoban": won / tasks}, seeds=(seed,), steps=steps,
                    **outcomes(set(range(won)), tasks))
    return rows


def _one_checkpoint(rows) -> pd.DataFrame:
    return window_rows(load_summary(pd.DataFrame(rows)), (150,))[0]


def test_seeds_that_tie_do_not_resolve_a_cell():
    """Two seeds both at 44 of 64 tasks against a base at 16 of 64 (ΔID +43.8), one checkpoint each:
    the seeds' sample variance is 0, which alone would leave the base's noise as all the variance
    (p 1e-15: how the one-GPU record's only "resolved" cell came about). Each seed's value varies
    at least by its own evaluation noise over its 64 tasks: with 2 seeds (1 degree of freedom) the
    seed-level p is above 0.05, so not even a lone cell at 0.05 is resolved, whatever τ."""
    rows = base("v1", {"sokoban": 16 / 64}, **outcomes(set(range(16)), 64)) + _seeds_winning((44, 44), 64)
    for seed_sd in (0.0, 0.21):
        rule = stats.delta_id_rule(_one_checkpoint(rows), SOKOBAN_RUN, SOKOBAN_BASE, seed_sd=seed_sd)
        assert rule.seeds.effect_pct == pytest.approx(43.75) and rule.tasks.p_value < 1e-6
        assert rule.seeds.p_value > 0.05 and not stats.rejects(rule.p_value, 0.05)
    # without the floor (the rule before it): the base's binomial bound alone
    tied = stats.seed_level_p(0.4375, [(17 / 66) * (49 / 66) / 64, 0.0], [math.inf, 1.0])
    assert tied < 1e-12


def test_a_real_gain_over_three_spread_seeds_still_resolves():
    """Three seeds at 41, 45 and 49 of 64 tasks (ΔID +42 on average, spread 4 tasks) against a base
    at 18 of 64, four checkpoints each: with the seed spread assumed at most 0.05 the floor leaves the
    cell resolved at 0.05 (seed-level p well below it); at the configured 0.21 three seeds cannot tell
    +42 from a spread that large: not resolved."""
    rows = base("v1", {"sokoban": 18 / 64}, **outcomes(set(range(18)), 64))
    rows += _seeds_winning((41, 45, 49), 64, steps=(105, 120, 135, 150))
    small = stats.delta_id_rule(windowed(rows), SOKOBAN_RUN, SOKOBAN_BASE, seed_sd=0.05)
    assert small.seeds.seeds_after == 3 and small.seeds.effect_pct == pytest.approx(100 * (45 - 18) / 64)
    assert small.seeds.p_value < 0.01 and stats.rejects(small.p_value, 0.05)
    configured = stats.delta_id_rule(windowed(rows), SOKOBAN_RUN, SOKOBAN_BASE, seed_sd=0.21)
    assert configured.seeds.p_value > 0.05 and not stats.rejects(configured.p_value, 0.05)


def test_a_trained_sides_seed_variance_is_floored():
    """``seed_side``: max(the seeds' sample variance, (domains x τ)² + one seed's binomial bound) /
    seeds; the sample variance where it is larger; the fixed side unchanged."""
    tied = [stats.CellValues(np.array([[1, 1, 0, 0], [1, 1, 0, 0]], dtype=float), np.array([0, 1]))]
    side = stats.seed_side(tied, fixed=False)
    one_seed = 2 * (5 / 10) * (5 / 10) / 8  # p̃ = (4 + 1) / (8 + 2); per seed: x seeds over all 8 values
    assert (side.value, side.df, side.seeds) == (0.5, 1.0, 2)
    assert side.variance == pytest.approx(one_seed / 2)
    assert stats.seed_side(tied, fixed=False, seed_sd=0.1).variance == pytest.approx((0.01 + one_seed) / 2)
    two_domains = stats.seed_side(tied * 2, fixed=False, seed_sd=0.1)  # the domains of a seed move together
    assert two_domains.variance == pytest.approx((0.04 + 2 * one_seed) / 2)
    apart = [stats.CellValues(np.array([[1, 1, 1, 1], [0, 0, 0, 0]], dtype=float), np.array([0, 1]))]
    assert stats.seed_side(apart, fixed=False).variance == pytest.approx(0.5 / 2)  # sample variance 0.5 wins
    assert stats.seed_side(tied, fixed=True) == stats.SeedSide(0.5, (5 / 10) * (5 / 10) / 8, math.inf, 1)
