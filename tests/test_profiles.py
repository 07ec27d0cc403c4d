"""A profile means what it says: `--profile profiles/slurm` is the only profile applied (the
embedded study's profiles/embedded is not a workflow profile, so its threads never reach a cluster
job), and account and partition set where profiles/slurm documents them reach every job without
dropping its other default resources."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from clones import PLAIN_ENV
from snakemake_plans import dry_run_text

from gentax.clone import snakemake_argv

REPO = Path(__file__).resolve().parents[1]
SLURM = REPO / "profiles" / "slurm" / "config.yaml"


def job_resources(text: str) -> dict[str, list[dict[str, str]]]:
    """{rule: [each job's resources as printed by the dry-run]}."""
    out: dict[str, list[dict[str, str]]] = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", text):
        head = re.match(r"(?:local)?rule (\w+):", block)
        res = re.search(r"^\s+resources: (.*)$", block, re.M)
        if head and res:
            pairs = dict(item.split("=", 1) for item in res.group(1).split(", "))
            out.setdefault(head.group(1), []).append(pairs)
    return out


def test_the_slurm_profile_alone_applies():
    text = dry_run_text("--profile", "profiles/slurm")
    assert "workflow specific profile" not in text
    assert not re.search(r"^\s+threads: ", text, re.M), "a job got threads the SLURM profile does not set"
    assert "Using profile profiles/slurm for setting" in text


@pytest.fixture(scope="module")
def site_profile(tmp_path_factory):
    """profiles/slurm with its documented account and partition lines filled in."""
    text = SLURM.read_text()
    for key, value in (("slurm_account", "acct"), ("slurm_partition", "part")):
        line = re.search(rf"^  # {key}: .*$", text, re.M)
        assert line, f"profiles/slurm/config.yaml documents no {key} line"
        text = text.replace(line.group(0), f"  {key}: {value}")
    folder = tmp_path_factory.mktemp("site") / "slurm"
    folder.mkdir()
    (folder / "config.yaml").write_text(text)
    return folder


def test_each_job_kind_gets_the_profiles_resources_with_account_and_partition(site_profile):
    profile = yaml.safe_load((site_profile / "config.yaml").read_text())
    jobs = job_resources(dry_run_text("--profile", str(site_profile), "results/paper/tables/table3_ranking.csv"))
    assert {"tasks", "rl_v1", "sft_data", "sft_v2", "rl_segment", "eval_checkpoint_v1", "eval_checkpoint_v2",
            "properties"} <= set(jobs)
    site = {key: str(profile["default-resources"][key]) for key in ("slurm_account", "slurm_partition", "nodes")}
    for rule, each in jobs.items():
        per_rule = {key: str(value) for key, value in profile["set-resources"].get(rule, {}).items()}
        for resources in each:
            # a rule's own resources (a summary's small mem_mb) may replace a default; none is dropped
            assert set(profile["default-resources"]) <= set(resources), rule
            assert {key: resources[key] for key in site} == site, rule
            assert {key: resources.get(key) for key in per_rule} == per_rule, rule


def test_run_sh_applies_the_embedded_profile_only_without_a_profile():
    assert snakemake_argv(["-n"]) == ["--profile", "profiles/embedded", "-n"]
    assert snakemake_argv(["-n", "--profile", "profiles/slurm"]) == ["-n", "--profile", "profiles/slurm"]
    assert snakemake_argv(["--profile=profiles/slurm"]) == ["--profile=profiles/slurm"]


def test_a_config_on_the_command_line_keeps_the_profiles_preset():
    """Snakemake replaces a profile's `config:` with the command line's: run.sh keeps it underneath."""
    assert snakemake_argv(["--profile", str(SLURM.parent), "--config", "seed=1"]) == [
        "--profile", str(SLURM.parent), "--config", "preset=paper", "seed=1"]
    proc = subprocess.run(["bash", "scripts/run.sh", "results/paper/tables/table2_success.csv", "-n", "--profile",
                           "profiles/slurm", "--config", "seed=1"], cwd=REPO, env=PLAIN_ENV, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"engine":"verl"' in proc.stdout and '"engine":"local"' not in proc.stdout  # the paper's RL jobs


def test_a_profile_naming_a_rule_the_workflow_has_not_is_one_error(tmp_path):
    """A site profile copied before `eval_checkpoint` became one rule per initial policy would lose
    its evaluation jobs' GPU requests without a word: the plan check stops, naming the rule and its
    heirs (Snakemake ignores a set-resources entry of a rule it has not); the shipped profile passes."""
    text = (REPO / "profiles" / "slurm" / "config.yaml").read_text().replace("eval_checkpoint_v1:", "eval_checkpoint:")
    (tmp_path / "config.yaml").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "gentax", "plan", "--check", "--profile", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2
    assert ("gentax: error: the profile's set-resources names rules this workflow does not have: eval_checkpoint "
            "(now eval_checkpoint_v1 and eval_checkpoint_v2") in proc.stderr, proc.stderr[-2000:]
