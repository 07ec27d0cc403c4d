"""Adding a table is ONE registry entry (gentax.analysis.artifacts) plus its builder: the plan
builds it, the cost preview prices it and build_one writes it, with no other list to touch."""

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
from test_analysis_figures_cli import figure_case

from gentax.study import cost
from gentax.study import plan as gplan
from gentax.study import config as gconfig
from gentax.analysis import artifacts, figures, tables
from gentax.analysis.formatting import Table
from gentax.errors import ConfigError, GentaxError

REPO = Path(__file__).resolve().parents[1]
TOY = artifacts.Artifact("toy_best_run", "table", f"{__name__}:toy_best_run", variants=("default", "aug"))


def toy_best_run(analysis, name):
    """The builder: each training domain's best ID success over its variants."""
    success = analysis.values.success.reset_index()
    trained = success[(success["train_domain"] == success["eval_domain"])]
    best = trained.groupby("train_domain", as_index=False)["mean_pct"].max()
    return Table(name, "Toy: best ID success per training domain", best)


@pytest.fixture
def with_toy(monkeypatch):
    monkeypatch.setattr(artifacts, "ARTIFACTS", (*artifacts.ARTIFACTS, TOY))


@pytest.fixture(scope="module")
def paper():
    return gconfig.load_config([REPO / "config.yaml"])


def test_one_entry_plans_prices_and_builds_a_new_table(with_toy, paper, tmp_path):
    assert "toy_best_run" in gplan.table_names(paper) and "toy_best_run" in tables.TABLE_NAMES
    assert gplan.TABLE_VARIANTS["toy_best_run"] == ["default", "aug"]
    assert {r.variant_label for r in gplan.artifact_runs(paper, "toy_best_run")} == {"default", "aug"}
    inputs = gplan.artifact_inputs(paper, "toy_best_run", "R")
    assert set(inputs) == {"summaries"} and "R/summary/base/v1/default.csv" in inputs["summaries"]
    jobs = gplan.jobs(paper, ["toy_best_run"])
    assert jobs["table"] == [0] and jobs["rl_segment"] and jobs["eval_checkpoint_v1"]  # its runs' whole chain
    priced = {c.rule: c for c in cost.estimate(paper, cost.profile_resources(REPO / "profiles" / "slurm"),
                                               ["toy_best_run"])}
    assert priced["table"].jobs == 1 and priced["rl_segment"].gpu_hours > 0
    summary = tmp_path / "summary.csv"
    figure_case().to_csv(summary, index=False)
    outputs = {ext: tmp_path / f"toy.{ext}" for ext in ("csv", "md", "tex")}
    tables.build_one("toy_best_run", [summary], None, outputs, window=[105, 120, 135, 150])
    built = pd.read_csv(outputs["csv"])
    assert list(built.columns) == ["train_domain", "mean_pct"] and len(built) > 0


def test_without_the_entry_the_name_is_unknown_everywhere(paper):
    assert "toy_best_run" not in gplan.table_names(paper)
    with pytest.raises(ConfigError, match="unknown table or figure 'toy_best_run'"):
        gplan.jobs(paper, ["toy_best_run"])
    with pytest.raises(GentaxError, match="unknown table or figure 'toy_best_run'"):
        tables.build_one("toy_best_run", [], None, {})


def test_the_registry_is_the_one_list_of_names():
    assert tables.TABLE_NAMES + figures.FIGURE_NAMES == artifacts.names()
    assert set(gplan.CONTROL_NAMES) == {a.name for a in artifacts.ARTIFACTS if a.planned == "controls"}
    assert gplan.WITH_EXTENDED == {"table4_extended", "training_curves"}
    assert gplan.TABLES_WITH_PROPERTIES == {"table3_ranking", "ood_vs_properties"}
    with pytest.raises(GentaxError, match="kind must be one of"):
        dataclasses.replace(TOY, kind="chart")
