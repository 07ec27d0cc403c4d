"""The workflow's plan, checked with Snakemake itself (dry-runs and lint; nothing is executed).

The stale-rerun behaviour (change one parameter / touch one eval file) needs real outputs and is
covered by the end-to-end SLURM smoke (tests/test_slurm_smoke.py).
"""

import subprocess
import sys
from pathlib import Path

import pytest
from snakemake_plans import dry_run_counts as dry_run
from snakemake_plans import dry_run_text, job_counts

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


@pytest.fixture(scope="module")
def paper_plan():
    return dry_run("--profile", "profiles/slurm")


def test_paper_dry_run_declares_the_whole_study(paper_plan):
    c = paper_plan
    # 60 runs after V1; 3 of them continued (Sokoban 300 for V1 and V2, SciWorld 240 for V2).
    assert c["rl_segment"] == 60 + 9  # 60 first segments + 9 continuations (3 runs x 3 seeds)
    assert c["rl_v1"] == 1 and c["sft_data"] == 1 and c["sft_v2"] == 1
    assert "embedded_model" not in c  # the paper preset uses a local base model folder
    # one job per checkpoint (its init's eval domains: V1 3, V2 4): the last four checkpoints of each run,
    # the extended windows and the base rows; 998 evaluations of one domain each
    assert c["eval_checkpoint_v1"] == 122 and c["eval_checkpoint_v2"] == 158
    assert 3 * c["eval_checkpoint_v1"] + 4 * c["eval_checkpoint_v2"] == 998
    assert c["properties"] == 4 and c["tasks"] == 4
    assert c["table"] == 9 and c["figure"] == 4  # tables 2-8 + bootstrap CIs + rank stability


def test_one_table_runs_only_what_it_needs():
    c = dry_run("--profile", "profiles/slurm", "results/paper/tables/table5_augmentation.csv")
    # default + aug runs only (21 + 18), no extended training, no nothink runs, no properties
    assert c["rl_segment"] == 39
    assert c["table"] == 1 and "figure" not in c and "properties" not in c
    assert c["run_summary"] == 39


def test_embedded_default_plan_builds_the_embedded_model():
    text = dry_run_text("--forceall")  # the whole plan, whatever a local results/ already holds
    c = job_counts(text)
    for rule in ("embedded_model", "embedded_base_data", "embedded_base", "rl_v1", "sft_v2", "properties"):
        assert c.get(rule, 0) >= 1, rule
    # tables 2-8 + bootstrap CIs + rank stability + mixture_ood + the controls' sweep and regression;
    # the paper's 4 figures + the mixture's + the controls'
    assert c["table"] == 9 + 1 + 2 and c["figure"] == 4 + 1 + 1
    # the controls: one run of its own (V1 Sokoban with longer solutions), evaluated on V1's
    # 3 domains; the richness levels read the grid's V2 Sokoban default and aug runs; two property logs
    assert c["control_properties"] == 2 and c["controls_properties_table"] == 1
    assert "results/embedded/runs/v1/sokoban/difficulty-longer/seed0/segment_0_2.json" in text
    assert "results/embedded/properties/controls/richness-eps80/sokoban.json" in text
    # the embedded grid's only nothink run starts from V2: V1 is never evaluated with thinking off
    assert "results/embedded/eval/v2/base/nothink/seed0/step0/sokoban.json" in text
    assert "results/embedded/eval/v1/base/nothink/" not in text


def test_embedded_serial_chain_gets_both_cores():
    # Snakemake exports OMP_NUM_THREADS = threads (default 1): without the embedded profile's
    # set-threads the warm start and V1/V2 would train on one of the two cores
    text = dry_run_text("--profile", "profiles/embedded", "--forceall", "results/embedded/model/embedded_base")
    block = text.split("rule embedded_base:", 1)[1].split("\n\n", 1)[0]
    assert "threads: 2" in block, block
    assert "priority: 10" in block, block  # the critical path goes first (rules/common.smk CHAIN_PRIORITY)


@pytest.mark.parametrize("profile", [[], ["--profile", "profiles/slurm"]])
def test_lint_is_clean(profile):
    proc = subprocess.run([*SNAKEMAKE, "--lint", *profile], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Lints for" not in proc.stdout + proc.stderr


def test_bad_config_stops_with_one_message_naming_the_key():
    proc = subprocess.run([*SNAKEMAKE, "-n", "--config", "rl={group_size: 1}"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert "config key rl" in proc.stdout + proc.stderr


def test_paper_preset_that_does_not_fit_its_gpus_stops_the_plan(tmp_path):
    """The memory check before any job (`gentax plan --check`, and a run's start: onstart): the paper
    preset's SFT without DeepSpeed (plain data parallel)."""
    no_zero = tmp_path / "no_zero.yaml"
    no_zero.write_text("inits: {v2: {sft: {deepspeed: null}}}\n")
    proc = subprocess.run([sys.executable, "-m", "gentax", "plan", "--check", "--preset", "paper", "--config",
                           str(no_zero)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert "sft_v2: model states 149.6 + activations 18.4 = 168.0 GiB per GPU" in proc.stdout + proc.stderr


def test_a_bad_domain_knob_stops_the_slurm_dry_run(tmp_path):
    """The dry-run once passed and the job failed after queueing."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("domains: {sokoban: {max_steps: 15, options: {room_sise: 5}}}\n")
    proc = subprocess.run([*SNAKEMAKE, "-n", "--profile", "profiles/slurm", "--configfile", "config/config.yaml", str(bad)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert "config key domains.sokoban.options.room_sise: unknown option(s) room_sise" in proc.stdout + proc.stderr
