"""Training on a mixture of domains: the run name, how a step's tasks are split
over the domains, and one local-engine step on a tiny model that trains on both domains."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from gentax.domains.spec import mixture_name, mixture_weights
from gentax.errors import ConfigError, GentaxError
from gentax.io import deep_merge
from gentax.train import runs
from gentax.train.jobs import train_rl
from rl_helpers import TINY_RL, make_run, make_tiny_model

REPO = Path(__file__).resolve().parents[1]


def test_a_mixture_is_named_by_its_domains_and_weights():
    assert mixture_weights("webshop") == {"webshop": 1}
    assert mixture_weights("alfworld*3+webshop") == {"alfworld": 3, "webshop": 1}
    assert mixture_name({"alfworld": 3, "webshop": 1}) == "alfworld*3+webshop"
    with pytest.raises(GentaxError, match="unknown domain 'chess'"):
        mixture_weights("webshop+chess")
    with pytest.raises(GentaxError, match="names 'webshop' twice"):
        mixture_weights("webshop+webshop")
    with pytest.raises(GentaxError, match="weight of 'webshop' must be an integer >= 1"):
        mixture_weights("webshop*0+sokoban")


def test_a_step_splits_its_tasks_over_the_domains_by_weight():
    assert sorted(runs.step_task_domains(0, 1, 2, {"webshop": 1, "sokoban": 1})) == ["sokoban", "webshop"]
    assert runs.step_task_domains(0, 1, 4, {"alfworld": 3, "webshop": 1}) == ["alfworld"] * 3 + ["webshop"]
    # one task per step: drawn by weight, seeded (the same every time), in proportion over a run
    draws = [runs.step_task_domains(7, step, 1, {"alfworld": 3, "webshop": 1})[0] for step in range(1, 401)]
    assert draws == [runs.step_task_domains(7, step, 1, {"alfworld": 3, "webshop": 1})[0] for step in range(1, 401)]
    assert 0.68 < draws.count("alfworld") / len(draws) < 0.82


def test_a_mixture_run_trains_one_step_on_both_domains(tmp_path):
    tiny = make_tiny_model(tmp_path / "tiny")
    run = tmp_path / "run"
    section = {**TINY_RL, "tasks_per_step": 2}
    assert train_rl("local", section, init=str(tiny), run=make_run("webshop+sokoban", "default", 0, 1, init=str(tiny)),
                    start=0, end=1, run_dir=str(run), progress=False) == 0
    row = pd.read_csv(run / runs.METRICS_FILE).iloc[0]
    # one task of each domain, each a GRPO group of 2 trajectories; both domains' steps are trained on
    assert row["trajectories"] == 4
    assert not math.isnan(row["id_success/webshop"]) and not math.isnan(row["id_success/sokoban"])
    assert row["update_samples"] == row["samples"] >= 4
    assert (run / "checkpoints" / "step_1" / "config.json").is_file()


def test_the_paper_grid_with_the_mixture_block_plans_exactly_the_extra_runs_and_evals(tmp_path):
    on = tmp_path / "mixtures.yaml"
    on.write_text("grid: {mixtures: {enabled: true}}\n")
    from snakemake_plans import dry_run_counts, extra_jobs

    paper = dry_run_counts("--profile", "profiles/slurm")
    mixed = dry_run_counts("--profile", "profiles/slurm", "--configfile", str(on))
    # V2 x {alfworld+webshop, sokoban+sciworld} x 3 seeds: 6 runs of one segment each, evaluated at
    # the last 4 checkpoints (a job each, all 4 of V2's domains), one summary each, the mixture table and figure
    assert extra_jobs(paper, mixed) == {"rl_segment": 6, "eval_checkpoint_v2": 6 * 4, "run_summary": 6, "table": 1,
                                        "figure": 1}


def test_a_mixture_must_name_known_evaluated_domains():
    from gentax.study import plan as gplan
    from gentax.study import config as gconfig

    paper = gconfig.load_config(["config/config.yaml"])
    bad = {"grid": {"mixtures": {"enabled": True, "experiments": [
        {"init": "v1", "variant": "default", "mixtures": ["webshop+sciworld"]}]}}}
    with pytest.raises(ConfigError, match=r"grid\.mixtures\.experiments\.0\.mixtures\.0: sciworld is not an evaluated domain of v1"):
        gconfig.validate(deep_merge(paper, bad))
    # a block that is off plans nothing: a config whose inits evaluate fewer domains still plans,
    # but a name that is no mixture of known domains is an error even there
    off = deep_merge(bad, {"grid": {"mixtures": {"enabled": False}}})
    gconfig.validate(deep_merge(paper, off))
    unknown = deep_merge(paper, deep_merge(off, {"grid": {"mixtures": {"experiments": [
        {"init": "v1", "variant": "default", "mixtures": ["webshop+chess"]}]}}}))
    with pytest.raises(ConfigError, match=r"grid\.mixtures\.experiments\.0\.mixtures\.0"):
        gconfig.validate(unknown)


def test_the_mixture_table_compares_the_mixture_with_its_members(tmp_path):
    from gentax.analysis.synthetic import synthetic_summary
    from analysis_cases import study
    from gentax.analysis.tables import build_one

    summary = synthetic_summary(seeds=(0, 1), episodes=16, every=75, steps=150)
    mixture = summary[(summary["init"] == "v2") & (summary["train_domain"] == "webshop")
                      & (summary["variant"] == "default")].assign(train_domain="webshop+sokoban")
    mixture["success"] = 0.5  # every eval domain at 50 %
    path = tmp_path / "summary.csv"
    pd.concat([summary, mixture]).to_csv(path, index=False)
    outputs = {ext: tmp_path / f"mixture_ood.{ext}" for ext in ("csv", "md", "tex")}
    build_one("mixture_ood", str(path), None, outputs, **study(window=(75, 150)))
    table = pd.read_csv(outputs["csv"]).set_index("run")
    assert list(table.index) == ["webshop+sokoban", "webshop", "sokoban"]
    assert set(table["ood_domains"]) == {"alfworld sciworld"}  # OOD = V2's domains outside the mixture
    assert table.loc["webshop+sokoban", "ood_success_pct"] == 50.0
    base = summary[(summary["init"] == "v2") & (summary["train_domain"] == "base")].set_index("eval_domain")["success"]
    expected = 100 * (2 * 0.5 - base["alfworld"] - base["sciworld"]) / (base["alfworld"] + base["sciworld"])
    assert table.loc["webshop+sokoban", "delta_ood_pct"] == pytest.approx(expected)
    assert not table["delta_ood_pct"].isna().any()
    # 95% bootstrap intervals (seeds + episodes of the run and of the initial policy) around each ΔOOD
    low, high = table["delta_ood_ci_low_pct"], table["delta_ood_ci_high_pct"]
    assert (low <= table["delta_ood_pct"] + 1e-9).all() and (table["delta_ood_pct"] <= high + 1e-9).all()
    assert (high - low > 0).all()  # 16 episodes per checkpoint: the interval has a width
    figure = {ext: tmp_path / f"mixture_delta_ood.{ext}" for ext in ("png", "svg")}
    build_one("mixture_delta_ood", str(path), None, figure, **study(window=(75, 150)))
    svg = figure["svg"].read_text()
    assert figure["png"].stat().st_size > 0 and "V2 webshop+sokoban" in svg and "mixture run" in svg


def test_the_mixture_interval_follows_the_seeds():
    """A ΔOOD interval from seed draws only: a run whose seeds agree has a zero-width interval at
    its ΔOOD; one whose seeds differ has a wider one (the draws are the tables' ΔOOD formula)."""
    import numpy as np

    from gentax.analysis import stats
    from gentax.analysis.tables import delta_ood

    draws = stats.BootstrapDraws(n_boot=200)
    rng = np.random.default_rng(0)
    draws.seeds[("v2", "a+b", "default", "c")] = np.full(200, 30.0)
    draws.seeds[("v2", "a", "default", "c")] = rng.choice([10.0, 50.0], size=200)
    base = {"c": 20.0}
    keys = {"c": ("v2", "base", "default", "c")}  # no draws: the base mean is held fixed
    assert stats.delta_ood_interval(draws, {"c": ("v2", "a+b", "default", "c")}, keys, base, delta_ood)[:2] == (50.0, 50.0)
    low, high, undefined, _ = stats.delta_ood_interval(draws, {"c": ("v2", "a", "default", "c")}, keys, base, delta_ood)
    assert (low, high, undefined) == (-50.0, 150.0, 0)
    assert all(np.isnan(stats.delta_ood_interval(draws, {"c": ("v2", "x", "default", "c")}, keys, base, delta_ood)[:2]))


def test_the_workflow_hands_a_mixture_run_every_member_settings():
    """The run spec of a mixture run carries each member's settings and augmentation budget, and
    the collector settings of each member's episodes (both engines: runspec.collect_fields) follow."""
    from gentax.study import config as gconfig
    from gentax import runspec

    cfg = gconfig.load_config([REPO / "config" / "config.yaml"])
    cfg["domains"]["webshop"] = {"max_steps": 8, "options": {"results_per_page": 3}}
    cfg["domains"]["sokoban"] = {"max_steps": 6}
    cfg["augmentation"]["v2"] = {"p": 0.5, "eps": {"webshop": 40, "sokoban": 80}}
    run = runspec.build(cfg, "v2", "webshop+sokoban", "aug", 0, 150)
    webshop, sokoban = (runspec.collect_fields(run, d, "train") for d in ("webshop", "sokoban"))
    assert webshop["max_steps"] == 8 and sokoban["max_steps"] == 6
    assert webshop["env_options"] == {"results_per_page": 3} and sokoban["env_options"] == {}
    assert webshop["aug_eps"] == 40 and sokoban["aug_eps"] == 80 and webshop["aug_p"] == sokoban["aug_p"] == 0.5
