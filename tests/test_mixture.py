"""Training on a mixture of domains (issue 14, part 4): the run name, how a step's tasks are split
over the domains, and one local-engine step on a tiny model that trains on both domains."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gentax.domains.spec import mixture_name, mixture_weights
from gentax.errors import ConfigError, GentaxError
from gentax.train import runs
from gentax.train.cli import train_rl
from rl_helpers import TINY_RL, make_tiny_model


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


def test_the_verl_engine_refuses_a_mixture():
    with pytest.raises(ConfigError, match="local engine only"):
        train_rl("verl", {}, init="x", domain="webshop+sokoban", variant="default", seed=0, start=0, end=1,
                 run_dir="unused", print_config=True)


def test_a_mixture_run_trains_one_step_on_both_domains(tmp_path):
    tiny = make_tiny_model(tmp_path / "tiny")
    run = tmp_path / "run"
    section = {**TINY_RL, "tasks_per_step": 2}
    assert train_rl("local", section, init=str(tiny), domain="webshop+sokoban", variant="default", seed=0, start=0,
                    end=1, run_dir=str(run), preset="embedded", progress=False) == 0
    row = pd.read_csv(run / runs.METRICS_FILE).iloc[0]
    # one task of each domain, each a GRPO group of 2 trajectories; both domains' steps are trained on
    assert row["trajectories"] == 4
    assert not math.isnan(row["id_success/webshop"]) and not math.isnan(row["id_success/sokoban"])
    assert row["update_samples"] == row["samples"] >= 4
    assert (run / "checkpoints" / "step_1" / "config.json").is_file()
