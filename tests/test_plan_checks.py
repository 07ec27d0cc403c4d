"""Every job's check of its spec against its inputs, at plan time and by the job itself (issue:
the embedded study stopped because its Sokoban property logs refused their task manifest).

- The plan-time check (``gentax.study.checks``, run by Snakemake for every job it builds) passes
  over the embedded, one-GPU, paper and SLURM-smoke plans, and stops a plan whose manifests are
  too short, naming the job, the key and the file.
- Each evaluation, property-log and table job of the embedded plan runs its own ``--check``
  against real task manifests (built here: they are cheap), so a mismatch like the one that
  stopped the study fails in seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gentax.cli import main as gentax_main
from snakemake_plans import REPO, planned_jobs

PLANS = {  # gentax plan's arguments for each plan the workflow ships
    "embedded": ["--preset", "embedded"],
    "gpu1": ["--preset", "gpu1"],
    "paper": ["--preset", "paper"],
    "slurm-smoke": ["--preset", "embedded", "--config", str(REPO / "tests" / "smoke_config.yaml")],
}


def _gentax(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gentax", *args], cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_shipped_plan_passes_the_plan_check(name):
    proc = _gentax("plan", "--check", *PLANS[name])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "every job's spec agrees with the inputs the plan writes" in proc.stdout


#: the manifest rule before this check existed: a manifest listed the evaluations' count only
OLD_MANIFEST_RULE = ("import sys, gentax.study.jobs as j; j.manifest_size = lambda cfg, d: j.eval_episodes(cfg, d); "
                     "from snakemake.cli import main; sys.argv = ['snakemake', *sys.argv[1:]]; main()")


def test_a_plan_whose_manifests_are_too_short_stops_at_the_dry_run_naming_the_job(tmp_path):
    """Property logs of 16 episodes over manifests of 8 (the old rule): `snakemake -n` stops in one
    line naming the job, its key and the manifest; under the shipped rule the same config plans."""
    config = tmp_path / "long_logs.yaml"
    config.write_text("properties: {episodes: 16}\n")
    args = ["-n", "--quiet", "rules", "--cores", "1", "--configfile", str(config), "--config", "preset=embedded"]
    old = subprocess.run([sys.executable, "-c", OLD_MANIFEST_RULE, *args], cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert old.returncode == 2, old.stderr[-2000:]
    errors = [line for line in old.stderr.splitlines() if line.startswith("gentax: error:")]
    assert len(errors) == 1, old.stderr[-2000:]
    assert "a job that would refuse to start: job 'properties' (domain=" in errors[0]
    assert "episodes: results/embedded/tasks/" in errors[0] and "lists 8 tasks, the job plays 16" in errors[0]

    proc = _gentax("plan", "--check", "--preset", "embedded", "--config", str(config))
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def embedded_jobs():
    return planned_jobs("--profile", "profiles/embedded")


CHECKED_VERBS = ("eval", "properties", "summarize", "table", "figure", "properties-table", "controls-properties-table")


def _placeholders(jobs: list[tuple[str, dict]]) -> None:
    """What no manifest is (models, evaluations, summaries, property logs) as empty stand-ins: the
    checks read their presence only."""
    for verb, spec in jobs:
        if verb in ("eval", "properties"):
            Path(spec["model"]).mkdir(parents=True, exist_ok=True)
            (Path(spec["model"]) / "config.json").write_text("{}")
        for key in ("inputs", "summaries", "training", "properties", "controls"):
            value = spec.get(key) if verb not in ("eval", "properties") else None
            for path in [value] if isinstance(value, str) else (value or []):
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).touch()


def test_each_embedded_job_passes_its_own_check_against_real_manifests(embedded_jobs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the specs' paths are relative: results/ lands here
    verbs = [verb for verb, _ in embedded_jobs]
    assert verbs.count("tasks") == 4 and verbs.count("properties") == 6 and verbs.count("eval") == 15  # a job a checkpoint
    for verb, spec in embedded_jobs:
        if verb == "tasks":
            assert gentax_main(["tasks", "--job", json.dumps(spec)]) == 0
    sokoban = json.loads(Path("results/embedded/tasks/sokoban.json").read_text())
    assert len(sokoban["seeds"]) == 16  # eval.episodes_per_domain; its property logs play the first few
    _placeholders(embedded_jobs)
    checked = 0
    for verb, spec in embedded_jobs:
        if verb in CHECKED_VERBS:
            assert gentax_main([*verb.split(), "--job", json.dumps(spec), "--check"]) == 0, (verb, spec)
            checked += 1
    assert checked == sum(verbs.count(v) for v in CHECKED_VERBS)
    assert capsys.readouterr().out.count("--check: the spec agrees with its inputs") == checked

    # a manifest too short for its property logs: their check refuses, in one line naming key and file
    spec = next(s for verb, s in embedded_jobs if verb == "properties" and s["domain"] == "sokoban")
    short = spec["episodes"] - 1
    Path("results/embedded/tasks/sokoban.json").write_text(json.dumps({**sokoban, "seeds": sokoban["seeds"][:short]}))
    assert gentax_main(["properties", "--job", json.dumps(spec), "--check"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"gentax: error: gentax properties --job: episodes: results/embedded/tasks/sokoban.json lists {short} "
                            f"tasks, the job plays {spec['episodes']}"), error
    assert "\n" not in error


def test_a_job_plays_the_first_episodes_of_its_manifest(embedded_jobs, tmp_path, monkeypatch):
    """A property log of N < 16 episodes on the 16-task Sokoban manifest plays seeds 0..N-1, as the
    evaluations' first N (docs/workflow.md "Task manifests")."""
    from gentax.jobspec import OnDisk
    from gentax.rollout.jobs import PropertiesJob, task_seeds

    monkeypatch.chdir(tmp_path)
    spec = next(s for verb, s in embedded_jobs if verb == "properties" and s["domain"] == "sokoban")
    Path(spec["model"]).mkdir(parents=True)
    (Path(spec["model"]) / "config.json").write_text("{}")
    Path("results/embedded/tasks").mkdir(parents=True)
    Path(spec["tasks"]).write_text(json.dumps({"domain": "sokoban", "split": "eval", "seeds": list(range(16))}))
    episodes = spec["episodes"]
    spec = PropertiesJob.read(spec)
    assert episodes < 16 and PropertiesJob.problems(spec, OnDisk()) == [] and task_seeds(spec) == list(range(episodes))


@pytest.mark.parametrize("verb, spec, words", [
    ("tasks", {"domain": "chess", "episodes": 0}, ["domain: 'chess' is no registered domain", "episodes: a whole number"]),
    ("train rl", {"init": "nowhere", "start": 3, "end": 3},  # its run_spec: the typed read's (test_one_line_errors)
     ["init: nowhere is no model folder", "start/end: a segment trains steps"]),
    ("controls-properties-table", {"levels": [{}, {}], "inputs": ["a.json"]},
     ["inputs: a.json is not there", "levels: 2 levels but 1 property logs"]),
])
def test_each_check_names_every_key_that_disagrees(verb, spec, words, tmp_path, monkeypatch):
    from gentax.jobspec import OnDisk
    from gentax.study.checks import problems

    monkeypatch.chdir(tmp_path)
    found = problems(verb, spec, OnDisk())
    assert len(found) == len(words)
    for problem, word in zip(found, words):
        assert problem.startswith(word), found
