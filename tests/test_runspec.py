"""The run spec (gentax/runspec.py): one place for what a variant means and what a run is."""

import dataclasses
import json
from pathlib import Path

import pytest

from gentax.study import plan as gplan
from gentax.study import config as gconfig
from gentax import runspec
from gentax.errors import GentaxError
from gentax.runspec import RunSpec

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def paper():
    return gconfig.load_config([REPO / "config" / "config.yaml"])


def test_every_planned_run_round_trips_through_json(paper):
    runs = gplan.runs(paper)
    for run in runs:
        assert RunSpec.from_dict(json.loads(run.to_json())) == run
    aug = gplan.find_run(paper, "v2", "webshop", "aug", 1)
    assert aug.augmentation == {"kind": "distractor", "p": 0.5, "eps": {"webshop": 40}}
    assert aug.domains == {"webshop": {"max_steps": 15, "options": {}}} and aug.think == "on"
    nothink = gplan.find_run(paper, "v1", "sokoban", "nothink", 0)
    assert nothink.think == "off" and nothink.augmentation is None and nothink.train_domain == "sokoban"
    assert len(set(runs)) == len(runs)  # hashable by identity: the plan's dict keys


def test_a_mixture_run_spec_carries_every_member(paper):
    cfg = json.loads(json.dumps(paper))
    cfg["grid"]["mixtures"]["enabled"] = True
    cfg["domains"]["webshop"]["options"] = {"results_per_page": 3}
    mixed = [r for r in gplan.runs(cfg) if len(r.train) > 1]
    assert mixed and {r.train_domain for r in mixed} == {"alfworld+webshop", "sokoban+sciworld"}
    run = next(r for r in mixed if r.train_domain == "alfworld+webshop")
    assert run.train == (("alfworld", 1), ("webshop", 1)) and run.path == "v2/alfworld+webshop/default/seed0"
    assert run.domains == {"alfworld": {"max_steps": 50, "options": {}},
                           "webshop": {"max_steps": 15, "options": {"results_per_page": 3}}}
    aug = runspec.build(cfg, "v2", "alfworld*3+webshop", "aug", 0, 150)
    assert aug.weights == {"alfworld": 3, "webshop": 1} and aug.augmentation["eps"] == {"alfworld": 200, "webshop": 40}
    assert RunSpec.from_dict(json.loads(aug.to_json())) == aug


@pytest.mark.parametrize("change,needle", [
    ({"variant": "sideways"}, "unknown variant 'sideways'; valid: default, aug, nothink"),
    ({"colour": "red"}, "run spec: unknown key(s) colour"),
    ({"think": "off"}, "run spec key think: variant 'default' trains with thinking 'on', not 'off'"),
    ({"train": [["chess", 1]]}, "unknown domain 'chess'"),
    ({"augmentation": {"kind": "distractor", "p": 1.0, "eps": {"webshop": 30}}}, "run spec key augmentation"),
    ({"domains": {}}, "run spec key domains"),
    ({"steps": 0}, "run spec key steps"),
])
def test_a_bad_run_spec_is_one_clear_error(change, needle):
    good = RunSpec(init="v1", train=(("webshop", 1),), variant="default", seed=0, steps=5, think="on",
                   augmentation=None, domains={"webshop": {"max_steps": 15, "options": {}}})
    with pytest.raises(GentaxError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        RunSpec.from_dict({**good.to_dict(), **change})
    data = good.to_dict()
    del data["seed"]
    with pytest.raises(GentaxError, match=r"run spec: missing key\(s\) seed"):
        RunSpec.from_dict(data)


def test_a_variant_is_one_entry_of_the_registry(paper, monkeypatch):
    """A new variant (here a harder WebShop with a richer augmentation budget) is one VARIANTS
    entry: the schema accepts it, the plan resolves its overrides into the run spec, and the
    collector settings both engines use follow."""
    hard = runspec.VariantSpec("hard_aug", think="on", augment=True, description="a test variant",
                               domains={"webshop": {"max_steps": 9, "options": {"results_per_page": 2}}},
                               aug_eps={"webshop": 99})
    monkeypatch.setitem(runspec.VARIANTS, "hard_aug", hard)
    monkeypatch.setattr(gconfig, "_validator", gconfig._validator.__wrapped__)  # the schema's enum is read afresh
    cfg = json.loads(json.dumps(paper))
    cfg["grid"]["experiments"].append({"init": "v1", "variant": "hard_aug", "train_domains": ["webshop"]})
    gconfig.validate(cfg)
    run = gplan.find_run(cfg, "v1", "webshop", "hard_aug", 2)
    assert run.domains["webshop"] == {"max_steps": 9, "options": {"results_per_page": 2}}
    assert run.augmentation == {"kind": "distractor", "p": 1.0, "eps": {"webshop": 99}}
    train = runspec.collect_fields(run, "webshop", "train")
    assert train["aug_eps"] == 99 and train["max_steps"] == 9 and train["think"] is True
    assert runspec.collect_fields(run, "webshop", "eval")["aug_eps"] == 0  # validation is never augmented
    assert gplan.base_variants(cfg, "v1") == ["default", "nothink"]  # thinking on: the default base rows


def test_thinking_modes_map_to_the_collector_settings():
    from gentax.rollout.collector import CollectConfig

    fields = {f.name for f in dataclasses.fields(CollectConfig)}
    for mode in runspec.THINK_MODES:
        assert set(runspec.think_fields(mode)) <= fields
    assert runspec.think_mode("nothink") == "off" and runspec.base_variant("aug") == "default"
    assert runspec.think_mode("filler") == "filler" and runspec.base_variant("filler") == "filler"
    with pytest.raises(GentaxError, match="unknown thinking mode 'maybe'"):
        runspec.VariantSpec("x", think="maybe", augment=False, description="")


def test_the_workflow_job_writes_the_run_spec_and_trains_it(paper, tmp_path):
    """rule rl_segment -> `gentax train rl --job`: the job spec's run lands in the run folder as
    run_spec.json and the engine trains exactly that run (here a mixture)."""
    import pandas as pd

    from gentax.study import jobs
    from gentax.train import runs
    from rl_helpers import TINY_RL, make_tiny_model, run_job, small_rl

    tiny = make_tiny_model(tmp_path / "tiny")
    cfg = json.loads(json.dumps(paper))
    cfg["domains"]["webshop"]["max_steps"] = cfg["domains"]["sokoban"]["max_steps"] = 2  # short episodes
    run = runspec.build(cfg, "v2", "webshop+sokoban", "default", 4, 1)
    run_dir = tmp_path / "runs" / run.path
    spec = jobs.rl_segment(cfg, run, start=0, end=1, save_every=1, init_model=str(tiny), run_folder=str(run_dir),
                           manifest=str(run_dir / "segment_0_1.json"))
    spec.update(engine="local", rl=small_rl({**TINY_RL, "tasks_per_step": 2}).to_dict())
    assert run_job("train rl", spec) == 0
    assert RunSpec.from_dict(json.loads((run_dir / runs.RUN_SPEC_FILE).read_text())) == run
    identity = json.loads((run_dir / runs.RUN_FILE).read_text())
    assert identity["domain"] == "webshop+sokoban" and identity["seed"] == 4 and identity["run_spec"] == run.to_dict()
    row = pd.read_csv(run_dir / runs.METRICS_FILE).iloc[0]
    assert {"id_success/webshop", "id_success/sokoban"} <= set(row.index)


def test_gentax_eval_takes_a_thinking_mode(capsys):
    """The workflow hands `gentax eval --think MODE` (the variant's mode); a contradiction is one error."""
    from gentax.cli import main

    args = ["eval", "--model", "unused", "--domain", "sokoban", "--episodes", "1", "--generator", "expert",
            "--out", "unused.parquet"]
    with pytest.raises(SystemExit):
        main([*args, "--think", "sideways"])
    assert "invalid choice: 'sideways'" in capsys.readouterr().err
    assert main([*args, "--think", "on", "--no-think"]) != 0
    assert "--no-think contradicts --think on" in capsys.readouterr().err


def _command_line_run(capsys, tmp_path, domain: str, *options: str) -> dict:
    """The run spec `gentax train rl --domain DOMAIN --variant aug OPTIONS` resolves (the local
    engine's --print-config prints it)."""
    import yaml

    from gentax.cli import main

    assert main(["train", "rl", "--engine", "local", "--print-config", "--init", "/m", "--domain", domain,
                 "--variant", "aug", "--out", str(tmp_path / "run"), *options]) == 0
    return yaml.safe_load(capsys.readouterr().out)["run_spec"]


def test_a_command_line_run_takes_its_step_limits_knobs_and_budgets_from_the_study(paper, tmp_path, capsys):
    """`gentax train rl --domain --variant aug` without --run-spec: each training domain's step limit
    and knobs are the study's domains.<d>, its budget the study's augmentation.v1.eps.<d> and its p
    V1's; a --study-config that changes them changes the run (there is no other source)."""
    run = _command_line_run(capsys, tmp_path, "webshop+sokoban")
    assert run["domains"] == {d: {"max_steps": paper["domains"][d]["max_steps"], "options": {}} for d in ("webshop", "sokoban")}
    assert run["augmentation"] == {"kind": paper["augmentation"]["kind"], "p": paper["augmentation"]["v1"]["p"],
                                   "eps": {d: paper["augmentation"]["v1"]["eps"][d] for d in ("webshop", "sokoban")}}
    mine = tmp_path / "mine.yaml"
    mine.write_text("domains: {webshop: {max_steps: 9, options: {results_per_page: 2}}}\n"
                    "augmentation: {v1: {p: 0.5, eps: {webshop: 55}}}\n")
    changed = _command_line_run(capsys, tmp_path, "webshop+sokoban", "--study-config", str(mine))
    assert changed["domains"] == {"webshop": {"max_steps": 9, "options": {"results_per_page": 2}},
                                  "sokoban": run["domains"]["sokoban"]}
    assert changed["augmentation"] == {**run["augmentation"], "p": 0.5, "eps": {"webshop": 55, "sokoban": 80}}


def test_a_command_line_run_on_a_domain_the_study_has_no_budget_for_is_refused(paper, tmp_path, capsys):
    """The paper study sets V1 no SciWorld budget (V1 leaves SciWorld out): `--domain sciworld
    --variant aug` names the key to set; a --study-config that sets it is the run's budget."""
    from gentax.cli import main

    args = ["train", "rl", "--engine", "local", "--print-config", "--init", "/m", "--domain", "sciworld",
            "--variant", "aug", "--out", str(tmp_path / "run")]
    assert main(args) == 2
    assert "no augmentation budget (eps) for sciworld; a command line takes the study's augmentation.v1.eps.sciworld" \
        in capsys.readouterr().err
    mine = tmp_path / "mine.yaml"
    mine.write_text("augmentation: {v1: {eps: {sciworld: 120}}}\n")
    run = _command_line_run(capsys, tmp_path, "sciworld", "--study-config", str(mine))
    assert run["augmentation"]["eps"] == {"sciworld": 120}
    assert run["domains"]["sciworld"]["max_steps"] == paper["domains"]["sciworld"]["max_steps"]


def test_from_defaults_plays_a_domain_it_is_given_no_settings_for_at_its_envs_own():
    """runspec.from_defaults: a training domain the caller hands no settings for (one a
    GENTAX_DOMAINS module adds, which the study has no section for) runs at its env's own step
    limit and knobs, as `gentax eval` plays it; a training domain without a budget is refused."""
    from gentax.domains import domain_class

    run = runspec.from_defaults(init="/m", domain="webshop+sokoban", variant="default", seed=0, steps=1,
                                domains={"webshop": {"max_steps": 9, "options": {"results_per_page": 2}}})
    assert run.domains == {"webshop": {"max_steps": 9, "options": {"results_per_page": 2}},
                           "sokoban": {"max_steps": domain_class("sokoban").default_max_steps, "options": {}}}
    with pytest.raises(GentaxError, match=r"no augmentation budget \(eps\) for sokoban"):
        runspec.from_defaults(init="/m", domain="webshop+sokoban", variant="aug", seed=0, steps=1, domains={},
                              augmentation={"kind": "distractor", "p": 1.0, "eps": {"webshop": 30}})
