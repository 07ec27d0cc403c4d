"""Budget preview (gentax.study.preview.cost, ``gentax plan --cost``) and the disk check of a run.

It prices the jobs of Snakemake's own DAG (gentax.study.dag), each job's work read from its spec:
the jobs ``gentax plan --cost`` builds from a preset and config files are those a user's
``snakemake -n`` plans (the paper grid, a table, a figure, the filler arm, the embedded study, a
controls table), and the units are what the jobs' commands run (the golden job-settings dump); the
arithmetic against the config's time figures and the profiles' GPUs; the disk a plan writes.
"""

import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from snakemake_plans import dry_run_text as dry_run
from snakemake_plans import job_counts, planned_work

from gentax.study import dag, jobs
from gentax.study.preview import cost
from gentax.study import plan as gplan
from gentax.study import config as gconfig
from gentax.errors import ConfigError
from gentax.io import deep_merge, read_yaml

REPO = Path(__file__).resolve().parents[1]


def paper():
    return gconfig.load_config([REPO / "config" / "config.yaml"])


def embedded():
    return gconfig.load_config([REPO / "config" / "config.yaml", REPO / "config" / "embedded.yaml", {"preset": "embedded"}])


def counts(work) -> dict[str, int]:
    return dict(Counter(job.rule for job in work))


def study_work(preset: str, *files: str, target: str | None = None) -> tuple:
    """What ``gentax plan --preset PRESET --config FILES [--target]`` prices: the work of the DAG it builds."""
    cfg = gconfig.study_config(preset, [REPO / f for f in files])
    targets = [gplan.artifact_path(cfg, target)] if target else []
    return planned_work(*dag.study_args(preset, [REPO / f for f in files], targets))


@pytest.fixture(scope="module")
def paper_work():
    return study_work("paper")


@pytest.mark.parametrize("args, preset, files, target", [
    (["--profile", "profiles/slurm"], "paper", [], None),
    (["--forceall"], "embedded", [], None),
    (["--forceall", "results/embedded/tables/controls_sweep.csv"], "embedded", [], "controls_sweep"),
    (["--forceall", "results/embedded/figures/training_curves.png"], "embedded", [], "training_curves"),
], ids=["paper", "embedded", "embedded-controls-table", "embedded-training-curves"])  # the filler rules: the
#    embedded preset's (its filler control is on); tests/test_filler.py plans the paper with them
def test_priced_jobs_are_the_jobs_snakemake_plans(args, preset, files, target):
    """The DAG gentax plan builds (a preset and config files, every job forced) has the jobs of the
    user's dry-run under the profile (the dry-run prints no budget of its own: gentax plan --cost does)."""
    text = dry_run(*args)
    planned = job_counts(text)
    planned.pop("all", None)
    assert counts(study_work(preset, *files, target=target)) == planned
    assert "gentax budget" not in text


def test_each_job_is_priced_by_what_its_command_runs(paper_work):
    """Units are read from each job's spec: the RL steps priced are the steps the dumped RL commands
    train (tests/golden: what every job of the paper plan receives), an evaluation job's episodes
    those of its initial policy's eval domains, and bookkeeping verbs are not timed."""
    golden = json.loads(gzip.decompress((REPO / "tests" / "golden" / "jobs_paper.json.gz").read_bytes()))["jobs"]
    trained = [job["settings"]["commands"][0]["args"]["steps"] for job in golden if job["rule"] in ("rl_v1", "rl_segment")]
    priced = [job.units for job in paper_work if job.verb == "train rl"]
    assert sorted(priced) == sorted(int(b) - int(a) for a, b in (steps.split(":") for steps in trained))
    cfg = paper()
    for job in paper_work:
        if job.verb == "eval":
            init = job.rule.removeprefix("eval_checkpoint_")
            assert job.units == sum(jobs.eval_episodes(cfg, d) for d in gplan.eval_domains(cfg, init))
    assert {job.verb for job in paper_work if job.units is None} == {"tasks", "summarize", "table", "figure",
                                                                     "properties-table"}
    # V2's SFT data rolls out the V1 model on the domains its mix takes from V1 (ALFWorld, WebShop); the
    # expert plays SciWorld's
    sft = cfg["inits"]["v2"]["sft"]
    assert [job.units for job in paper_work if job.rule == "sft_data"] == [2 * sft["v1_episodes_per_domain"]]


def test_gpu_hours_follow_the_time_figures_and_the_profiles_gpus(paper_work):
    cfg = paper()
    fig = cfg["cost"]
    rows = {c.rule: c for c in cost.estimate(cfg, cost.profile_resources(REPO / "profiles" / "slurm"), paper_work)}
    seg = rows["rl_segment"]
    # 60 first segments of 150 steps + continuations: Sokoban 150->300 (V1, V2) and SciWorld 150->240, 3 seeds
    assert seg.jobs == 69 and seg.units == 60 * 150 + 3 * (150 + 150 + 90) and seg.gpus == 8
    expected = (seg.jobs * fig["job_start_minutes"] / 60 + seg.units * fig["rl_step_minutes"] / 60) * 8
    assert seg.gpu_hours == pytest.approx(expected)
    for init in ("v1", "v2"):  # a job per checkpoint: one start-up, every eval domain's episodes
        ev = rows[f"eval_checkpoint_{init}"]
        domains = len(cfg["inits"][init]["domains"])
        assert ev.gpus == 1 and ev.units == ev.jobs * cfg["eval"]["episodes"] * domains
        assert ev.gpu_hours == pytest.approx(ev.jobs * fig["job_start_minutes"] / 60
                                             + ev.units * fig["rollout_episode_seconds"] / 3600)
    assert rows["table"].gpu_hours == 0 and rows["table"].jobs == 9
    # the measured figures (26.9 min a step, an upper figure) put a 150-step segment at 67 h, past the
    # profile's 48 h: flagged (a killed segment resumes from its last checkpoint on the profile's retry)
    assert [c.rule for c in rows.values() if c.over_limit] == ["rl_segment"]


def test_cli_prints_the_table_and_flags_a_job_over_the_profiles_runtime(tmp_path, paper_work):
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    profile["set-resources"]["rl_segment"]["runtime"] = 600  # 10 h: a 150-step segment needs more
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(profile))
    out = subprocess.run([sys.executable, "-m", "gentax", "plan", "--cost", "--profile", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    assert "rl_segment" in out and "eval_checkpoint_v2" in out and "GPU-hours" in out
    assert "WARNING: one rl_segment job" in out and "10.0 h runtime" in out
    assert "source: extrapolated from one H200" in out  # the figures say where they come from,
    assert "- 26.9 min per RL step: upper figure" in out  # each beside its own source
    total = cost.totals(cost.estimate(paper(), cost.profile_resources(tmp_path), paper_work))
    assert f"{total['gpu_hours']:,.0f} GPU-hours" in out


def test_unknown_target_and_missing_figures_name_the_problem():
    with pytest.raises(ConfigError, match="unknown table or figure 'table99'"):
        gplan.artifact_path(paper(), "table99")
    with pytest.raises(ConfigError, match="table 'controls_sweep' is not planned for this config"):
        gplan.artifact_path(paper(), "controls_sweep")  # the controls are off in the paper's config
    cfg = paper()
    del cfg["cost"]["rl_step_minutes"]
    with pytest.raises(ConfigError, match="config key cost"):
        gconfig.validate(cfg)


def slurm_profile_with(rule: str, **gpus) -> dict:
    """profiles/slurm's resources with ``rule``'s GPU request written another way."""
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    res = {k: v for k, v in profile["set-resources"][rule].items() if k != "gpu"}
    profile["set-resources"][rule] = {**res, **gpus}
    return cost.resources_from(profile["default-resources"], profile["set-resources"])


@pytest.mark.parametrize("way", [{"gres": "gpu:8"}, {"gres": "gpu:a100:8"}, {"gres": "gpu:8,nvme:1"},
                                 {"gpus_per_task": 8}, {"gpus_per_task": 4, "tasks": 2}, {"gpu": 8, "gres": "gpu:8"}],
                         ids=["gres", "gres-typed", "gres-list", "gpus_per_task", "gpus_per_task-x-tasks", "gpu-and-gres"])
def test_gpus_from_gres_and_gpus_per_task_equal_gpu(way, paper_work):
    """The SLURM plugin's three ways to ask for GPUs price the same GPU-hours."""
    cfg = paper()
    as_gpu = cost.totals(cost.estimate(cfg, cost.profile_resources(REPO / "profiles" / "slurm"), paper_work))
    other = cost.totals(cost.estimate(cfg, slurm_profile_with("rl_segment", **way), paper_work))
    assert other["gpu_hours"] == pytest.approx(as_gpu["gpu_hours"]) and as_gpu["gpu_hours"] > 0


@pytest.mark.parametrize("way, message", [
    ({"gres": "gpu:a100:lots"}, "resources of rl_segment: gres 'gpu:a100:lots': cannot read the GPU count (write gpu:N or gpu:TYPE:N)"),
    ({"gpu": 8, "gres": "gpu:4"}, "resources of rl_segment: the GPU requests disagree (gpu -> 8, gres -> 4); give one"),
    ({"gpus_per_task": "eight"}, "resources of rl_segment: gpus_per_task: 'eight' is not a number"),
])
def test_a_gpu_request_it_cannot_read_is_refused(way, message):
    with pytest.raises(ConfigError) as err:
        slurm_profile_with("rl_segment", **way)
    assert str(err.value) == message


def total_line(cfg: dict, resources: dict, work) -> str:
    """The total line of ``gentax plan --cost``'s table."""
    table = cost.report(cfg, cost.estimate(cfg, resources, work), where="a profile").splitlines()
    return next(line for line in table if line.startswith("total: "))


def test_a_cpu_study_is_priced_in_cpu_job_hours():
    line = total_line(embedded(), cost.profile_resources(REPO / "profiles" / "embedded"), study_work("embedded"))
    assert "CPU job-hours (no job gets a GPU)" in line and "GPU-hours" not in line


def test_the_one_gpu_profile_prices_its_shared_gpu():
    """profiles/gpu1: 12 `gpu_jobs` slots of one GPU; a GPU job holds one, so 1/12 of the GPU, and
    the study is priced in GPU-hours (what the one GPU is busy), not as CPU jobs."""
    gpu1 = gconfig.load_config(gconfig.with_preset(read_yaml(REPO / "config" / "config.yaml"), {"preset": "gpu1"}))
    resources = cost.profile_resources(REPO / "profiles" / "gpu1")
    assert resources["rl_segment"]["gpu"] == resources["eval_checkpoint_v2"]["gpu"] == pytest.approx(1 / 12)
    work = study_work("gpu1")
    costs = cost.estimate(gpu1, resources, work)
    rows = {c.rule: c for c in costs}
    assert rows["rl_segment"].gpu_hours == pytest.approx(rows["rl_segment"].hours / 12)
    total = cost.totals(costs)
    assert total["gpu_hours"] == pytest.approx(sum(c.hours for c in costs if c.gpus) / 12)
    assert total["gpu_hours"] > 0
    assert "GPU-hours" in total_line(gpu1, resources, work)
    with pytest.raises(ConfigError, match="gpu_jobs=1 but the profile has no pool"):
        cost.resources_from(None, {"rl_segment": {"gpu_jobs": 1}})


def gpu1(*layers):
    """The gpu1 study (its overlay over config/config.yaml, as the preset lays it) under ``layers``."""
    overrides = {"preset": "gpu1"}
    for layer in layers:
        overrides = deep_merge(overrides, layer if isinstance(layer, dict) else read_yaml(layer))
    return gconfig.load_config(gconfig.with_preset(read_yaml(REPO / "config" / "config.yaml"), overrides))


def test_the_disk_estimate_counts_the_checkpoints_each_run_keeps():
    """The one-GPU reference size (40 runs + Ckpt V1, one checkpoint each): with every checkpoint kept
    (the run that filled its machine's 64 GiB disk) each keeps fp32 weights and an AdamW state of 8 bytes
    a parameter; with disk.keep_checkpoints: evaluated (the preset's) the weights only."""
    params = cost.parameter_count("config/models/SmolLM2-135M-Instruct.json")
    assert params == 134_515_008 and cost.parameter_count("config/models/Llama-3.1-8B-Instruct.json") == 8_030_261_248
    reference = REPO / "config" / "gpu1_reference.yaml"
    study = study_work("gpu1", "config/gpu1_reference.yaml")  # what to keep changes no job's work
    kept = cost.disk_need(gpu1(reference, {"disk": {"keep_checkpoints": "all"}}), study, at_once=12)
    assert (kept.checkpoints, kept.weights, kept.states, kept.training) == (41, 41 * 4 * params, 41 * 8 * params, 0)
    assert 60 * 2**30 < kept.total < 66 * 2**30  # measured: 61.4 GiB of checkpoints and optimizer states
    pruned = cost.disk_need(gpu1(reference), study, at_once=12)
    assert (pruned.weights, pruned.states, pruned.training) == (41 * 4 * params, 0, 12 * 8 * params)
    hour = cost.disk_need(gpu1(), study_work("gpu1"), at_once=12)  # steps 10 and 20 saved, 20 evaluated; Ckpt V1
    assert hour.checkpoints == 61 and hour.training == 12 * (2 * 8 * params + 4 * params)
    one = cost.disk_need(gpu1(), [cost.Work("rl_segment", "train rl", 20)], at_once=12)  # one of its 61 RL jobs
    assert (one.checkpoints, one.weights, one.training) == (1, 4 * params, 2 * 8 * params + 4 * params)


def test_a_plan_that_does_not_fit_its_disk_is_refused_in_one_line(monkeypatch, tmp_path):
    """The check of what a run's jobs write: a small free-space figure (no large file written)
    refuses, naming what they write and the free space; disk.check_free_space: false skips it; a
    run of no RL job needs little, one of half the RL jobs about half; ``gentax plan --cost`` prints
    both figures."""
    cfg = gpu1({"results": str(tmp_path / "results")})
    study = study_work("gpu1")
    monkeypatch.setattr(cost, "disk_free", lambda folder: (5 * 2**30, tmp_path))
    problem = cost.disk_problem(cfg, study, at_once=12)
    assert problem.startswith("the plan writes 62.4 GiB under ") and "its disk has 5.0 GiB free" in problem
    assert "\n" not in problem
    assert cost.disk_problem({**cfg, "disk": {**cfg["disk"], "check_free_space": False}}, study, at_once=12) is None
    evaluations = [cost.Work("tasks", "tasks", None), cost.Work("eval_checkpoint_v1", "eval", 48)]
    assert cost.disk_problem(cfg, evaluations, at_once=12) is None
    half = [cost.Work("rl_segment", "train rl", 20)] * 30  # of the 61 RL jobs
    assert "writes 45.1 GiB" in cost.disk_problem(cfg, half, at_once=12)
    monkeypatch.setattr(cost, "written", lambda folder: 60 * 2**30)  # a rerun: most of it there already
    assert cost.disk_problem(cfg, study, at_once=12) is None
    monkeypatch.setattr(cost, "written", lambda folder: 0)
    monkeypatch.setattr(cost, "disk_free", lambda folder: (100 * 2**30, tmp_path))
    assert cost.disk_problem(cfg, study, at_once=12) is None
    lines = cost.disk_report(cfg, cost.disk_need(cfg, study, 12))
    assert lines[0] == f"disk (disk.keep_checkpoints: evaluated): the plan writes 62.4 GiB under {tmp_path}/results/"
    assert lines[-1].startswith("  free: 100.0 GiB on the disk of ")


def test_a_run_is_checked_against_the_whole_studys_plan(monkeypatch, tmp_path):
    """The Snakefile's onstart prices the whole study of the config the run resolved (a dry-run of it),
    its RL jobs at once as its preset's profile runs them (profiles/gpu1: 12), as gentax plan --cost does."""
    cfg = gpu1({"results": str(tmp_path / "results")})
    monkeypatch.setattr(cost, "disk_free", lambda folder: (5 * 2**30, tmp_path))
    problem = cost.study_disk_problem(cfg)
    assert problem == cost.disk_problem(cfg, study_work("gpu1"), at_once=12) and "writes 62.4 GiB" in problem
    assert cost.study_disk_problem({**cfg, "disk": {**cfg["disk"], "check_free_space": False}}) is None


def test_each_rl_job_spec_names_what_it_keeps_only_when_the_config_prunes():
    """The plan resolves what an RL job keeps (plan.checkpoint_keep): the run's evaluated steps, and the
    resume state only while a later segment is planned (an extended run's first one); the spec holds
    ``keep`` only then, so under the default (all) every spec is as it was (the golden dumps)."""
    from gentax.train.jobs import RLJob

    cfg = gpu1({"grid": {"extended": [{"init": "v1", "variant": "default", "train_domain": "sokoban", "steps": 40}]}})
    extended = gplan.find_run(cfg, "v1", "sokoban", "default", 0)
    assert gplan.checkpoint_keep(cfg, extended, 20) == {"steps": [20, 40], "resume_state": True}
    assert gplan.checkpoint_keep(cfg, extended, 40) == {"steps": [20, 40], "resume_state": False}
    assert gplan.checkpoint_keep(cfg, gplan.find_run(cfg, "v2", "webshop", "aug", 1), 20) == \
        {"steps": [20], "resume_state": False}
    assert gplan.v1_checkpoint_keep(cfg) == {"steps": [10], "resume_state": False}
    args = dict(start=0, end=20, save_every=10, init_model="m", run_folder="r", manifest="r/segment_0_20.json")
    spec = jobs.rl_segment(cfg, extended, keep=gplan.checkpoint_keep(cfg, extended, 20), **args)
    assert RLJob.read(spec)["keep"] == {"steps": [20, 40], "resume_state": True}
    plain = jobs.rl_segment({**cfg, "disk": {"keep_checkpoints": "all"}}, extended, **args)
    assert "keep" not in plain and RLJob.read(plain)["keep"] is None
