"""The controls (difficulty sweep, richness sweep): config block, tables, figure."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from analysis_cases import base, run, study
from gentax.study import controls
from gentax.io import REPO_ROOT, deep_merge
from gentax.study import plan as gplan
from gentax.study import config as gconfig
from gentax.analysis import controls as control_tables
from gentax.analysis.tables import Settings, build_one, compute_tables, render
from gentax.errors import ConfigError, GentaxError

WINDOW = (105, 120, 135, 150)


def _levels(**columns) -> pd.DataFrame:
    frame = pd.DataFrame({
        "control": ["difficulty", "difficulty", "richness"],
        "level": ["easy", "hard", "eps0"],
        "label": ["difficulty-easy", "difficulty-hard", "richness-eps0"],
        "init": "v1", "train_domain": "sokoban", "variant": ["default", "default", "aug"],
        "richness": [1000.0, 1000.0, 1000.0], "tokens_per_obs": [300.0, 300.0, 300.0],
        "complexity": [30.0, 45.0, 30.0], "success": [0.5, 0.1, 0.5],
    })
    return frame.assign(**columns)


def _hand_summary() -> pd.DataFrame:
    """V1 base OOD (alfworld, webshop) = 20 + 30 = 50 points. difficulty-easy: seed 0 keeps them
    (ΔOOD 0), seed 1 gains 10 points on alfworld (+20 %): mean ΔOOD +10. difficulty-hard: one
    seed losing 10 points (−20 %). richness-eps0: never evaluated on webshop (undefined)."""
    rows = base("v1", {"alfworld": 0.20, "webshop": 0.30, "sokoban": 0.10})
    rows += run("v1", "sokoban", {"alfworld": [0.20, 0.30], "webshop": 0.30, "sokoban": [0.40, 0.50]},
                variant="difficulty-easy")
    rows += run("v1", "sokoban", {"alfworld": 0.15, "webshop": 0.25, "sokoban": 0.2}, variant="difficulty-hard",
                seeds=(0,))
    rows += run("v1", "sokoban", {"alfworld": 0.15, "sokoban": 0.2}, variant="richness-eps0")
    return pd.DataFrame(rows)


def test_sweep_table_gives_delta_ood_with_a_seed_interval_and_undefined_cells_as_such(tmp_path):
    analysis = compute_tables(_hand_summary(), None, controls=_levels(), settings=Settings(**study()))
    sweep = analysis.tables["controls_sweep"].data.set_index("level")
    assert sweep.at["easy", "delta_ood_pct"] == pytest.approx(10.0)
    assert sweep.at["easy", "delta_ood_ci_low"] == pytest.approx(0.0)     # both seeds drawn as seed 0
    assert sweep.at["easy", "delta_ood_ci_high"] == pytest.approx(20.0)   # ... or as seed 1
    assert sweep.at["easy", "delta_id"] == pytest.approx(35.0)            # 45 % on sokoban vs base 10 %
    assert sweep.at["hard", "delta_ood_pct"] == pytest.approx(-20.0)
    assert math.isnan(sweep.at["hard", "delta_ood_ci_low"]) and "one seed" in sweep.at["hard", "note"]
    assert math.isnan(sweep.at["eps0", "delta_ood_pct"]) and "missing OOD success on webshop" in sweep.at["eps0", "note"]
    assert sweep.at["easy", "richness_tokens"] == 300.0 and sweep.at["hard", "base_success_pct"] == pytest.approx(10.0)
    md = render(analysis.tables["controls_sweep"])["md"]
    assert "—" in md and "nan" not in md.lower()
    # the control labels are read by a table: no "variant(s) in no table" note for them
    assert not any("in no table" in n for n in analysis.notes)


def test_regression_recovers_exact_slopes_and_states_the_runs():
    # 4 settings x 2 seeds on an exact plane: ΔOOD = 5 + 2 per 1,000 characters − 3 per step
    settings = [(1000.0, 30.0), (2000.0, 30.0), (1000.0, 40.0), (3000.0, 45.0)]
    points = {("v1", "sokoban", f"l{i}", seed): (r, c, 5 + 2 * r / 1000 - 3 * c)
              for i, (r, c) in enumerate(settings) for seed in (0, 1)}
    fit = control_tables.regression(points, n_boot=200, seed=0).set_index("term")
    assert fit.at["intercept", "estimate"] == pytest.approx(5.0)
    assert fit.at["richness", "estimate"] == pytest.approx(2.0)
    assert fit.at["complexity", "estimate"] == pytest.approx(-3.0)
    assert fit.at["complexity", "ci_low"] == pytest.approx(-3.0) and fit.at["complexity", "ci_high"] == pytest.approx(-3.0)
    assert set(fit["n_runs"]) == {8} and set(fit["n_settings"]) == {4}
    assert 100 <= fit.at["richness", "draws_used"] <= 200 and fit.at["richness", "r2"] == pytest.approx(1.0)


def test_regression_on_settings_that_do_not_determine_both_slopes_is_undefined_not_zero():
    # richness and complexity move together exactly: no way to tell them apart
    points = {("v1", "sokoban", f"l{i}", 0): (1000.0 * i, 10.0 * i, float(i)) for i in (1, 2, 3)}
    fit = control_tables.regression(points, n_boot=50, seed=0)
    assert fit["estimate"].isna().all() and fit["note"].str.startswith("undefined").all()
    assert control_tables.regression({}, n_boot=50, seed=0)["estimate"].isna().all()


def test_controls_table_and_figure_build_from_the_synthetic_sweeps(tmp_path):
    from gentax.analysis.synthetic import synthetic_controls, synthetic_summary

    rows, levels = synthetic_controls(seeds=(0, 1), episodes=1024, every=75)
    summary = synthetic_summary(seeds=(0,), episodes=16, every=75)
    summary = pd.concat([summary[summary["train_domain"] == "base"], rows])
    summary_path, levels_path = tmp_path / "summary.csv", tmp_path / "levels.csv"
    summary.to_csv(summary_path, index=False)
    levels.to_csv(levels_path, index=False)
    outputs = {ext: tmp_path / f"controls_regression.{ext}" for ext in ("csv", "md", "tex")}
    build_one("controls_regression", [str(summary_path)], None, outputs, **study(controls=str(levels_path),
              window=(75, 150), n_boot=200))
    fit = pd.read_csv(outputs["csv"]).set_index("term")
    assert fit.at["complexity", "estimate"] < 0 and set(fit["n_runs"]) == {12}  # the planted tax grows with complexity
    assert "(12 runs)" in outputs["md"].read_text()
    figure = {ext: tmp_path / f"controls_delta_ood.{ext}" for ext in ("png", "svg")}
    build_one("controls_delta_ood", [str(summary_path)], None, figure, **study(controls=str(levels_path), window=(75, 150),
              n_boot=50))
    assert figure["png"].stat().st_size > 0 and "difficulty sweep" in figure["svg"].read_text()


def test_without_the_controls_input_the_tables_are_empty_and_no_figure_is_drawn(tmp_path):
    outputs = {ext: tmp_path / f"controls_sweep.{ext}" for ext in ("csv", "md", "tex")}
    build_one("controls_sweep", _hand_summary(), None, outputs, **study(window=WINDOW))
    assert pd.read_csv(outputs["csv"]).empty
    from gentax.analysis.tables import build_all

    analysis = build_all(_hand_summary(), None, tmp_path / "all", **study(window=WINDOW, n_boot=0))
    assert "controls_sweep" not in analysis.tables and not (tmp_path / "all" / "figures" / "controls_delta_ood.png").exists()


def test_bad_controls_properties_name_the_problem():
    with pytest.raises(GentaxError, match="unknown control 'speed'"):
        control_tables.load_levels(_levels(control=["speed", "difficulty", "richness"]))
    with pytest.raises(GentaxError, match="lack column"):
        control_tables.load_levels(_levels().drop(columns="complexity"))


def _paper(**block) -> dict:
    return deep_merge(gconfig.load_config([REPO_ROOT / "config" / "config.yaml"]), {"controls": block})


def test_the_controls_block_expands_into_levels_checked_by_the_domains_knobs():
    assert controls.control_levels(gconfig.load_config([REPO_ROOT / "config" / "config.yaml"])) == []  # off in the paper preset
    levels = controls.control_levels(_paper(difficulty={"enabled": True}, richness={"enabled": True}))
    assert [lv.label for lv in levels] == ["difficulty-short", "difficulty-medium", "difficulty-long",
                                           "richness-eps0", "richness-eps80", "richness-eps240"]
    hard = levels[2]
    assert hard.domain == {"max_steps": 15, "options": {"min_solution_length": 7, "max_solution_length": 9}}
    assert levels[4].augmentation == {"kind": "distractor", "p": 1.0, "eps": 80} and levels[4].variant == "aug"
    bad = _paper(difficulty={"enabled": True, "levels": [{"name": "a", "options": {"room_size": 99}}, {"name": "b"}]})
    with pytest.raises(ConfigError, match=r"controls\.difficulty\.levels\.0\.options \(a\): sokoban option room_size"):
        gconfig.validate(bad)
    with pytest.raises(ConfigError, match=r"controls\.richness\.train_domain: sciworld is not an evaluated domain of v1"):
        gconfig.validate(_paper(richness={"enabled": True, "init": "v1", "train_domain": "sciworld"}))
    with pytest.raises(ConfigError, match=r"controls\.difficulty\.levels"):
        gconfig.validate(_paper(difficulty={"enabled": True, "levels": [{"name": "a"}]}))  # one level
    row = controls.property_row(hard, hard.label, {"richness": 1900.0, "complexity": 47.0, "success": 0.1, "other": 1})
    assert row["label"] == "difficulty-long" and "min_solution_length=7" in row["setting"] and "other" not in row
    assert np.isclose(row["richness"], 1900.0)


def test_the_paper_grid_with_the_controls_enabled_plans_exactly_the_extra_runs_and_evals(tmp_path):
    on = tmp_path / "controls.yaml"
    on.write_text("controls: {difficulty: {enabled: true}, richness: {enabled: true}}\n")
    from snakemake_plans import dry_run_counts, extra_jobs

    paper = dry_run_counts("--profile", "profiles/slurm")
    planned = dry_run_counts("--profile", "profiles/slurm", "--configfile", str(on))
    # V2 Sokoban: 3 difficulty levels + richness eps 80 and 240 (p 1.0, unlike the grid's aug run) x 3 seeds =
    # 15 runs of one segment, evaluated at the last 4 checkpoints (a job each, V2's 4 domains); richness eps 0 IS the
    # grid's V2 Sokoban default run (read up to step 150) and its property log Table 3's Sokoban log
    assert extra_jobs(paper, planned) == {
        "rl_segment": 15, "eval_checkpoint_v2": 15 * 4, "run_summary": 15, "control_properties": 5,
        "controls_properties_table": 1, "table": 2, "figure": 1}
    # a level's property log is a GPU rollout job on the cluster, like Table 3's, and priced as one
    import yaml

    from gentax.study.preview import cost

    profile = yaml.safe_load((REPO_ROOT / "profiles" / "slurm" / "config.yaml").read_text())["set-resources"]
    assert profile["control_properties"] == profile["properties"]
    # and what gentax plan prices is what Snakemake plans, each level's log timed by its episodes
    from snakemake_plans import planned_work

    from gentax.study import dag

    work = planned_work(*dag.study_args("paper", [on]))
    assert Counter(job.rule for job in work) == {rule: n for rule, n in planned.items() if rule != "all"}
    cfg = gconfig.load_config([REPO_ROOT / "config" / "config.yaml", on])
    assert {job.units for job in work if job.rule == "control_properties"} == {cfg["properties"]["episodes"]}
    costs = {c.rule: c for c in cost.estimate(cfg, cost.profile_resources(REPO_ROOT / "profiles" / "slurm"), work)}
    assert costs["control_properties"].gpu_hours > 0


def test_a_control_level_is_a_run_spec_named_by_its_label():
    import dataclasses

    from gentax.runspec import RunSpec

    cfg = _paper(difficulty={"enabled": True}, richness={"enabled": True})
    long = gplan.find_run(cfg, "v2", "sokoban", "difficulty-long", 1)
    assert (long.variant, long.think, long.augmentation, long.path) == ("default", "on", None, "v2/sokoban/difficulty-long/seed1")
    assert long.domains == {"sokoban": {"max_steps": 15, "options": {"min_solution_length": 7, "max_solution_length": 9}}}
    assert RunSpec.from_dict(long.to_dict()) == long and long.to_dict()["label"] == "difficulty-long"
    rich = gplan.find_run(cfg, "v2", "sokoban", "richness-eps240", 0)
    assert rich.variant == "aug" and rich.augmentation == {"kind": "distractor", "p": 1.0, "eps": {"sokoban": 240}}
    # eps 0 inserts nothing: it is the grid's V2 Sokoban default run, read, not trained again
    eps0 = next(lv for lv in controls.control_levels(cfg) if lv.label == "richness-eps0")
    assert gplan.level_run_label(cfg, eps0) == "default"
    with pytest.raises(ConfigError, match="no planned run"):
        gplan.find_run(cfg, "v2", "sokoban", "richness-eps0", 0)
    # a grid run's spec (its rl_segment job param) carries no label: the grid reruns nothing
    assert "label" not in gplan.find_run(cfg, "v2", "sokoban", "default", 0).to_dict()
    with pytest.raises(GentaxError, match="run spec key label"):
        dataclasses.replace(long, label="aug")  # a label never shadows a registered variant
    # each level's property log: its own, except where its states are the domain's as configured
    paths = dict(zip([lv.label for lv in controls.control_levels(cfg)], gplan.control_property_paths(cfg)))
    assert paths["richness-eps0"] == "properties/sokoban.json"
    assert paths["richness-eps240"] == "properties/controls/richness-eps240/sokoban.json"
    params = {f"{p['control']}-{p['level']}": p for p in gplan.control_property_params(cfg)}
    assert params["richness-eps240"]["augmentation"]["eps"] == 240 and params["richness-eps0"]["run_label"] == "default"


def test_gentax_plan_lists_what_each_level_reads():
    cfg = gconfig.load_config([REPO_ROOT / "config" / "config.yaml", REPO_ROOT / "config" / "embedded.yaml",
                             {"preset": "embedded"}])
    shown = {(c["control"], c["level"]): c for c in gplan.plan(cfg)["controls"]}
    assert shown["difficulty", "longer"]["own_runs"] and not shown["richness", "eps80"]["own_runs"]
    assert shown["richness", "eps80"]["runs"] == "aug" and shown["richness", "eps0"]["runs"] == "default"
    assert gplan.plan(gconfig.load_config([REPO_ROOT / "config" / "config.yaml"]))["controls"] == []


def test_a_control_run_trains_at_its_level_through_the_workflow_job(tmp_path):
    """rule rl_segment -> `gentax train rl --job` with a control level's run spec: the run folder gets
    the labelled spec and the engine plays the level's setting (here: episodes of one step)."""
    import json

    from gentax.runspec import RunSpec
    from gentax.study import jobs
    from gentax.train import runs
    from rl_helpers import TINY_RL, make_tiny_model, run_job, small_rl

    cfg = _paper(difficulty={"enabled": True, "init": "v1", "train_domain": "sokoban",
                             "levels": [{"name": "one_move", "max_steps": 1}, {"name": "three", "max_steps": 3}]})
    run = gplan.control_run(controls.control_levels(cfg)[0], seed=0, steps=1)
    run_dir = tmp_path / "runs" / run.path
    spec = jobs.rl_segment(cfg, run, start=0, end=1, save_every=1, init_model=str(make_tiny_model(tmp_path / "tiny")),
                           run_folder=str(run_dir), manifest=str(run_dir / "segment_0_1.json"))
    spec.update(engine="local", rl=small_rl(TINY_RL).to_dict())  # a tiny model's numbers, not the paper's
    assert run_job("train rl", spec) == 0
    assert RunSpec.from_dict(json.loads((run_dir / runs.RUN_SPEC_FILE).read_text())) == run
    assert json.loads((run_dir / runs.RUN_FILE).read_text())["variant"] == "difficulty-one_move"
    assert pd.read_csv(run_dir / runs.METRICS_FILE).iloc[0]["episode_length"] == 1.0  # the level's max_steps
    assert json.loads((run_dir / "segment_0_1.json").read_text())["checkpoints"] == {"1": str(run_dir / "checkpoints" / "step_1")}


def test_the_controls_properties_table_job_feeds_the_tables(tmp_path):
    """rule controls_properties_table -> `gentax controls-properties-table --job`: one row per level
    from its property log, which the controls' tables read (control_tables.load_levels)."""
    import json

    from gentax.study import jobs
    from rl_helpers import run_job

    cfg = gconfig.load_config([REPO_ROOT / "config" / "config.yaml", REPO_ROOT / "config" / "embedded.yaml",
                             {"preset": "embedded"}])
    logs = []
    for i, path in enumerate(gplan.control_property_paths(cfg)):
        logs.append(tmp_path / f"log{i}.json")
        logs[-1].write_text(json.dumps({"domain": "sokoban", "measures": {
            "richness": 400.0 + 100 * i, "complexity": 5.0, "success": 0.5, "tokens_per_obs": 150.0}}))
    out = tmp_path / "controls.csv"
    assert run_job("controls-properties-table",
                   jobs.controls_properties_table(gplan.control_property_params(cfg), logs, str(out))) == 0
    levels = control_tables.load_levels(str(out)).set_index("level")
    assert list(levels.index) == ["configured", "longer", "eps0", "eps80"]
    assert levels.at["eps80", "label"] == "aug" and levels.at["longer", "label"] == "difficulty-longer"
    assert levels.at["eps80", "richness"] == 700.0 and levels.at["eps80", "setting"] == "eps=80, p=0.5"


def test_a_richness_level_property_job_measures_its_augmented_states(tmp_path):
    """rule control_properties -> `gentax properties --job`: the level's augmentation reaches the
    property log (the expert plays; the states it reads carry the inserted text)."""
    import json

    from gentax.domains.tasks import task_manifest
    from gentax.study import jobs
    from rl_helpers import make_tiny_model, run_job

    cfg = _paper(richness={"enabled": True})
    level = next(lv for lv in controls.control_levels(cfg) if lv.label == "richness-eps240")
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps(task_manifest("sokoban", 2)))
    out = tmp_path / "richness-eps240" / "sokoban.json"
    spec = jobs.properties(cfg, domain="sokoban", settings=level.domain, model=str(make_tiny_model(tmp_path / "tiny")),
                           tasks_file=str(tasks), out_json=str(out), augmentation=level.augmentation)
    spec.update(episodes=2, generator="expert")
    assert run_job("properties", spec) == 0
    report = json.loads(out.read_text())
    assert report["augmentation"] == {"eps": 240, "p": 1.0, "kind": "distractor"}
    assert report["measures"]["augmented_fraction"] == 1.0 and report["env_options"] == {}
    assert report["provenance"]["tasks"]["fingerprint"] == json.loads(tasks.read_text())["fingerprint"]


def test_a_richness_sweep_needs_a_domain_with_augmentation_sources(monkeypatch):
    import dataclasses

    from gentax.domains import spec as domain_spec

    real = domain_spec.spec
    monkeypatch.setattr(domain_spec, "spec", lambda name: dataclasses.replace(real(name), augmentation=None))
    with pytest.raises(ConfigError, match=r"controls\.richness\.train_domain: domain 'sokoban' declares no augmentation"):
        gconfig.check_controls(_paper(richness={"enabled": True}))
    gconfig.check_controls(_paper(richness={"enabled": True, "eps": [0, 0]}))  # nothing inserted: nothing needed
