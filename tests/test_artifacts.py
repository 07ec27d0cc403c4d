"""Adding a table is ONE registry entry (gentax.analysis.artifacts) plus its builder: the plan
builds it, the cost preview prices it and build_one writes it, with no other list to touch."""

import dataclasses
import os
from pathlib import Path

import pandas as pd
import pytest
from analysis_cases import study
from test_analysis_figures_cli import figure_case

from gentax.study import dag
from gentax.study.preview import cost, power
from gentax.study import plan as gplan
from gentax.study import config as gconfig
from gentax.analysis import artifacts, figures, tables
from gentax.analysis.formatting import Table
from gentax.errors import ConfigError, GentaxError

REPO = Path(__file__).resolve().parents[1]
TOY = artifacts.Artifact("toy_best_run", "table", f"{__name__}:toy_best_run", variants=("default", "aug"),
                         tests=artifacts.Tested("ΔID", "aug"))


def toy_best_run(analysis, name):
    """The builder: each training domain's best ID success over its variants."""
    success = analysis.values.success.reset_index()
    trained = success[(success["train_domain"] == success["eval_domain"])]
    best = trained.groupby("train_domain", as_index=False)["mean_pct"].max()
    return Table(name, "Toy: best ID success per training domain", best)


ARTIFACTS = (TOY,)  # this module as a study extension's: GENTAX_ARTIFACTS=test_artifacts


@pytest.fixture
def with_toy(monkeypatch):
    """The entry registered the documented way, for this process and the dry-runs it starts."""
    monkeypatch.setenv(artifacts.ENV_VAR, __name__)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))


@pytest.fixture(scope="module")
def paper():
    return gconfig.load_config([REPO / "config" / "config.yaml"])


def test_one_entry_plans_prices_and_builds_a_new_table(with_toy, paper, tmp_path):
    assert "toy_best_run" in gplan.table_names(paper) and "toy_best_run" in tables.TABLE_NAMES
    assert gplan.artifact_variants("toy_best_run") == ["default", "aug"]
    assert {r.variant_label for r in gplan.artifact_runs(paper, "toy_best_run")} == {"default", "aug"}
    inputs = gplan.artifact_inputs({**paper, "results": "R"}, "toy_best_run")
    assert set(inputs) == {"summaries"} and "R/summary/base/v1/default.csv" in inputs["summaries"]
    # Snakemake's DAG of it (a dry-run, whose Snakefile reads the entry too): its job and its runs' whole
    # chain, each run of its two variants trained and evaluated
    jobs = dag.build(dag.study_args("paper", targets=[gplan.artifact_path(paper, "toy_best_run")]))
    assert [job.spec["name"] for job in jobs if job.rule == "table"] == ["toy_best_run"]
    runs = {(r.init, r.train_domain, r.variant_label, r.seed) for r in gplan.artifact_runs(paper, "toy_best_run")}
    trained = {tuple(job.wildcards[k] for k in ("init", "train_domain", "variant", "seed")) for job in jobs
               if job.rule == "rl_segment"}
    assert trained == {(i, d, v, str(s)) for i, d, v, s in runs}
    assert {"rl_v1", "sft_v2", "eval_checkpoint_v1", "eval_checkpoint_v2"} <= {job.rule for job in jobs}
    priced = {c.rule: c for c in cost.estimate(paper, cost.profile_resources(REPO / "profiles" / "slurm"),
                                               cost.work(jobs))}
    assert priced["table"].jobs == 1 and priced["rl_segment"].gpu_hours > 0
    tested = {c.table: c for c in power.tested_cells(paper)}  # its entry says what it tests: the power preview prices it
    assert list(tested) == ["table2_success", "table4_extended", "table5_augmentation", "table7_thinking", "toy_best_run"]
    assert tested["toy_best_run"].kind == "ΔID" and tested["toy_best_run"].cells == tested["table5_augmentation"].cells
    summary = tmp_path / "summary.csv"
    figure_case().to_csv(summary, index=False)
    outputs = {ext: tmp_path / f"toy.{ext}" for ext in ("csv", "md", "tex")}
    tables.build_one("toy_best_run", [summary], None, outputs, **study(window=[105, 120, 135, 150]))
    built = pd.read_csv(outputs["csv"])
    assert list(built.columns) == ["train_domain", "mean_pct"] and len(built) > 0


def test_without_the_entry_the_name_is_unknown_everywhere(paper):
    assert "toy_best_run" not in gplan.table_names(paper)
    with pytest.raises(ConfigError, match="unknown table or figure 'toy_best_run'"):
        gplan.artifact_path(paper, "toy_best_run")
    with pytest.raises(GentaxError, match="unknown table or figure 'toy_best_run'"):
        tables.build_one("toy_best_run", [], None, {})


def test_the_registry_is_the_one_list_of_names():
    assert tables.TABLE_NAMES + figures.FIGURE_NAMES == artifacts.names()
    assert set(artifacts.names(planned="controls")) == {a.name for a in artifacts.ARTIFACTS if a.planned == "controls"}
    assert {a.name for a in artifacts.entries() if a.extended} == {"table4_extended", "training_curves"}
    assert {a.name for a in artifacts.entries() if a.properties} == {"table3_ranking", "ood_vs_properties"}
    with pytest.raises(GentaxError, match="kind must be one of"):
        dataclasses.replace(TOY, kind="chart")


def test_a_table_job_computes_its_table_and_what_it_reads_only(tmp_path, monkeypatch):
    summary = tmp_path / "summary.csv"
    figure_case().to_csv(summary, index=False)

    def never(*args, **kwargs):
        raise AssertionError("another table's builder ran")

    monkeypatch.setattr(tables, "table2_success", never)
    monkeypatch.setattr(tables, "table4_extended", never)
    outputs = {ext: tmp_path / f"t5.{ext}" for ext in ("csv", "md", "tex")}
    analysis = tables.build_one("table5_augmentation", [summary], None, outputs, **study(window=[105, 120, 135, 150]))
    assert "draws" not in vars(analysis) and "extended" not in vars(analysis)  # shared values: computed on first use
    assert pd.read_csv(outputs["csv"])["variant"].eq("aug").all()
    monkeypatch.undo()
    calls = []
    monkeypatch.setattr(tables.stats, "bootstrap", lambda *a, **k: calls.append(a) or tables.stats.BootstrapDraws(n_boot=0))
    analysis = tables.analyse(summary, None, settings=tables.Settings(**study(n_boot=10)))
    analysis.table("success_ci"), analysis.table("rank_stability"), analysis.table("table2_success")
    assert len(calls) == 1  # the draws are shared: computed once for the three tables that read them
    assert analysis.table("success_ci") is analysis.table("success_ci")


def test_the_power_preview_prices_the_tables_whose_entry_says_what_they_test(paper):
    tested = {c.table: c for c in power.tested_cells(paper)}
    assert {n for n in tested} == {a.name for a in artifacts.ARTIFACTS if a.tests}
    assert tested["table4_extended"].cells == (("v1", "sokoban"),) * 2 + (("v2", "sciworld"),) * 2 + (("v2", "sokoban"),) * 2
    assert tested["table7_thinking"].kind == "ΔOOD" and len(tested["table7_thinking"].cells) == 7
    with pytest.raises(GentaxError, match="only a table tests cells"):
        dataclasses.replace(artifacts.get("training_curves"), tests=artifacts.Tested("ΔID"))
