"""The study plan: config validation (one clear message naming the key) and the grid expansion."""

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gentax import runspec as grunspec
from gentax.study import plan as gplan
from gentax.study import config as gconfig
from gentax.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def paper():
    return gconfig.load_config([REPO / "config" / "config.yaml"])


@pytest.fixture(scope="module")
def embedded():
    return gconfig.load_config([REPO / "config" / "config.yaml", REPO / "config" / "embedded.yaml"])


def test_paper_grid_is_60_runs(paper):
    runs = gplan.runs(paper)
    assert len(runs) == 60
    by_variant = {v: sum(r.variant == v for r in runs) for v in grunspec.variant_names()}
    assert by_variant == {"default": 21, "aug": 18, "nothink": 21, "filler": 0}  # filler: controls.filler is off
    assert not any(r.train_domain == "sciworld" and r.init == "v1" for r in runs)
    extended = {(r.init, r.train_domain): r.steps for r in runs if r.steps != 150}
    assert extended == {("v1", "sokoban"): 300, ("v2", "sokoban"): 300, ("v2", "sciworld"): 240}


def test_extended_run_continues_the_default_run(paper):
    run = gplan.find_run(paper, "v2", "sciworld", "default", 1)
    assert gplan.segments(paper, run) == [(0, 150), (150, 240)]
    assert gplan.eval_steps(paper, run) == [105, 120, 135, 150, 195, 210, 225, 240]
    assert gplan.segment_of(paper, run, 150) == (0, 150)
    assert gplan.segment_of(paper, run, 195) == (150, 240)
    plain = gplan.find_run(paper, "v1", "webshop", "aug", 0)
    assert gplan.segments(paper, plain) == [(0, 150)]
    assert gplan.eval_steps(paper, plain) == [105, 120, 135, 150]


def test_embedded_preset_is_valid_and_small(embedded):
    runs = gplan.runs(embedded)
    assert 0 < len(runs) <= 12
    assert {r.variant for r in runs} == set(grunspec.variant_names())
    assert embedded["engines"] == {"rl": "local", "rollout": "vllm", "generator": "hf", "dtype": "auto"}


def _broken(paper, path, value):
    cfg = copy.deepcopy(paper)
    node = cfg
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return cfg


@pytest.mark.parametrize("path,value,needle", [
    (("rl", "group_size"), 1, "config key rl.group_size: GRPO needs at least 2 rollouts per task, got 1"),
    (("rl", "lr"), "fast", "config key rl.lr: must be a number > 0, got 'fast'"),
    (("rl", "lr"), "1e-5", "config key rl.lr: must be a number > 0, got '1e-5' (YAML reads 1e-5 as text, "
                           "not a number: write 1.0e-5)"),
    (("eval", "temperature"), "4e-1", "config key eval.temperature: '4e-1' is not of type 'number' (YAML reads "
                                      "4e-1 as text, not a number: write 4.0e-1)"),
    (("eval", "window"), 20, "config key eval.window"),
    (("grid", "steps"), 140, "config key grid.steps"),
    (("augmentation", "v2", "p"), 1.5, "config key augmentation.v2.p"),
    (("engines", "rl"), "deepspeed", "config key engines.rl"),
])
def test_bad_value_names_the_key(paper, path, value, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        gconfig.validate(_broken(paper, path, value))


def test_cross_field_errors_name_the_key(paper):
    cfg = copy.deepcopy(paper)
    cfg["grid"]["experiments"][0]["train_domains"] = ["sciworld"]  # V1 leaves SciWorld out
    with pytest.raises(ConfigError, match=r"grid\.experiments\.0\.train_domains: sciworld"):
        gconfig.validate(cfg)
    cfg = copy.deepcopy(paper)
    del cfg["augmentation"]["v1"]["eps"]["sokoban"]
    with pytest.raises(ConfigError, match=r"augmentation\.v1\.eps\.sokoban"):
        gconfig.validate(cfg)
    cfg = copy.deepcopy(paper)
    cfg["grid"]["extended"][0]["steps"] = 100
    with pytest.raises(ConfigError, match=r"grid\.extended\.0\.steps"):
        gconfig.validate(cfg)


@pytest.mark.parametrize("options,needle", [
    ({"room_sise": 5}, "config key domains.sokoban.options.room_sise: unknown option(s) room_sise for domain 'sokoban'"),
    ({"room_size": -3}, "config key domains.sokoban.options: sokoban option room_size must be an int"),
    ({"min_solution_length": 9, "max_solution_length": 4}, "max_solution_length 4 < min_solution_length 9"),
])
def test_domain_knobs_are_checked_at_plan_time(paper, options, needle):
    """A bad knob once passed validation and failed only when a job ran."""
    with pytest.raises(ConfigError) as err:
        gconfig.validate(_broken(paper, ("domains", "sokoban", "options"), options))
    assert needle in str(err.value)


@pytest.mark.parametrize("domain,options,needle", [
    ("sciworld", {"tasks": ["boil-everything"]}, "unknown sciworld task"),
    ("sciworld", {"jvm_heap_mb": 0}, "jvm_heap_mb must be a positive integer"),
    ("sciworld", {"jvm_heap_mb": True}, "jvm_heap_mb must be a positive integer, got True"),  # a bool is no int
    ("alfworld", {"task_types": ["juggle"]}, "unknown alfworld task type"),
    ("webshop", {"backend": "amazon"}, "webshop option backend must be one of gentax, official"),
])
def test_every_domain_checks_its_knobs_without_building_an_env(paper, domain, options, needle):
    with pytest.raises(ConfigError, match=f"config key domains\\.{domain}\\.options: .*{needle}"):
        gconfig.validate(_broken(paper, ("domains", domain, "options"), options))


def test_unknown_key_is_rejected(paper):
    cfg = _broken(paper, ("rl", "learning_rate"), 1e-6)
    with pytest.raises(ConfigError, match="learning_rate"):
        gconfig.validate(cfg)


def test_plan_cli_json(tmp_path):
    out = subprocess.run([sys.executable, "-m", "gentax", "plan", "--json"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    plan = json.loads(out)
    assert len(plan["runs"]) == 60
    assert set(plan["runs"][0]) == {"init", "train_domain", "variant", "seed", "steps"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("rl: {group_size: 0}\n")
    proc = subprocess.run([sys.executable, "-m", "gentax", "plan", "--config", str(REPO / "config" / "config.yaml"),
                           "--config", str(bad)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"gentax: error: config key rl.group_size: must be an integer >= 1, got 0 (set in {bad})"]


def test_plan_cli_names_a_bad_domain_knob_in_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("domains: {sokoban: {max_steps: 15, options: {room_size: -3}}}\n")
    proc = subprocess.run([sys.executable, "-m", "gentax", "plan", "--config", str(REPO / "config" / "config.yaml"),
                           "--config", str(bad)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "gentax: error: config key domains.sokoban.options: sokoban option room_size must be an int or "
        f"[rows, cols] in 5..20, got -3 (set in {bad})"]


def test_a_domain_can_have_its_own_eval_episodes(embedded, tmp_path):
    """eval.episodes_per_domain: that domain's evaluations (and the work the budget preview reads
    from their specs) use its count, the others eval.episodes; an unknown domain or a count below 1
    is one clear error."""
    from snakemake_plans import planned_work

    from gentax.study import dag
    from gentax.study.jobs import eval_episodes

    cfg = copy.deepcopy(embedded)
    cfg["eval"]["episodes_per_domain"] = {**cfg["eval"].get("episodes_per_domain", {}), "sokoban": 32}
    gconfig.validate(cfg)
    assert eval_episodes(cfg, "sokoban") == 32
    assert eval_episodes(cfg, "webshop") == cfg["eval"]["episodes"]
    before = eval_episodes(embedded, "sokoban")
    own = tmp_path / "sokoban_episodes.yaml"
    own.write_text("eval: {episodes_per_domain: {sokoban: 32}}\n")
    work, plain = planned_work(*dag.study_args("embedded", [own])), planned_work(*dag.study_args("embedded"))
    for rule in map(gplan.eval_rule, embedded["inits"]):  # one job per checkpoint, each with Sokoban among its domains
        units = [job.units for job in work if job.rule == rule]
        assert len(units) == len([job for job in plain if job.rule == rule]) > 0
        assert units == [job.units + 32 - before for job in plain if job.rule == rule]
    for bad, needle in (({"chess": 4}, "episodes_per_domain"), ({"sokoban": 0}, "episodes_per_domain")):
        cfg["eval"]["episodes_per_domain"] = bad
        with pytest.raises(ConfigError, match=needle):
            gconfig.validate(cfg)


def test_a_domain_can_have_its_own_eval_batch_size(embedded, tmp_path):
    """eval.batch_size_per_domain: that domain's eval and property-log jobs play that many episodes
    at a time (the rollout command keeps it: it is no engine default), the others all at once."""
    from gentax.rollout.jobs import evaluations, with_internals
    from gentax.study import jobs as gjobs

    cfg = copy.deepcopy(embedded)
    cfg["eval"]["batch_size_per_domain"] = {"sciworld": 3}
    gconfig.validate(cfg)
    manifest = tmp_path / "tasks.json"
    model = tmp_path / "model"  # the job's check reads that a model folder is there
    model.mkdir()
    (model / "config.json").write_text("{}")
    domains = ("sciworld", "sokoban")
    manifests = {d: tmp_path / f"{d}.tasks.json" for d in domains}
    for domain, path in manifests.items():
        path.write_text(json.dumps({"domain": domain, "split": "eval",
                                    "seeds": list(range(gjobs.eval_episodes(cfg, domain)))}))
    spec = gjobs.eval_checkpoint(cfg, model=str(model), think="on", tasks_files={d: str(p) for d, p in manifests.items()},
                                 out_jsons={d: str(tmp_path / f"{d}.json") for d in domains})
    assert [with_internals(s)["batch_size"] for s in evaluations(spec)] == [3, None]
    manifest.write_text(manifests["sciworld"].read_text())
    prop = gjobs.properties(cfg, domain="sciworld", settings=gjobs.domain_settings(cfg, "sciworld"), model=str(model),
                            tasks_file=str(manifest), out_json=str(tmp_path / "p.json"))
    assert prop["batch_size"] == 3
    for bad in ({"chess": 4}, {"sciworld": 0}):
        cfg["eval"]["batch_size_per_domain"] = bad
        with pytest.raises(ConfigError, match="batch_size_per_domain"):
            gconfig.validate(cfg)


def test_gentax_plan_counts_the_evaluations_the_workflow_runs():
    """`gentax plan`'s counts are the DAG's: every checkpoint evaluation and every initial policy's
    evaluation as each thinking mode its runs use (the paper grid: default and nothink)."""
    from snakemake_plans import dry_run_counts

    from gentax.study import config as gconfig
    from gentax.study import plan as gplan

    from gentax.io import REPO_ROOT

    counts = gplan.plan(gconfig.load_config([REPO_ROOT / "config" / "config.yaml"]))["counts"]
    assert counts["base_evals"] == 14  # V1 on 3 domains + V2 on 4, each as default and nothink
    dag = dry_run_counts("--profile", "profiles/slurm")
    cfg = gconfig.load_config([REPO_ROOT / "config" / "config.yaml"])
    assert sum(dag[gplan.eval_rule(init)] * len(gplan.eval_domains(cfg, init)) for init in ("v1", "v2")) == (
        counts["checkpoint_evals"] + counts["base_evals"])  # a job per checkpoint, its init's domains each
