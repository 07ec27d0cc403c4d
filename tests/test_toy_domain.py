"""Issue 14's done-when for a fifth domain: ONE module outside gentax/domains/ (tests/toy_domain.py),
registered the documented way (GENTAX_DOMAINS), goes through the plan, a Snakemake dry-run, a short
evaluation and the tables without touching any other file of the project."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from snakemake_plans import job_counts

REPO = Path(__file__).resolve().parents[1]
TOY_CONFIG = """
domains:
  toy: {max_steps: 3, options: {buttons: 3}}
inits:
  v2:
    domains: [webshop, sokoban, sciworld, toy]
grid:
  experiments:
    - {init: v2, variant: default, train_domains: [toy, sokoban]}
    - {init: v2, variant: aug, train_domains: [toy]}
  extended: []
  mixtures: {enabled: false, experiments: []}
controls: {difficulty: {enabled: false}, richness: {enabled: false}, filler: {enabled: false}}
augmentation:
  v2: {p: 0.5, eps: {toy: 16}}
"""


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "GENTAX_DOMAINS": "toy_domain", "PYTHONPATH": path}


def _run(*args: str, cwd: Path = REPO) -> str:
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def toy_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("toy") / "toy.yaml"
    path.write_text(TOY_CONFIG)
    return path


def test_the_plan_has_the_toy_runs(toy_config):
    out = _run("-m", "gentax", "plan", "--config", "config.yaml", "--config", "config/embedded.yaml",
               "--config", str(toy_config), "--json")
    runs = {(r["init"], r["train_domain"], r["variant"]) for r in json.loads(out[out.index("{"):])["runs"]}
    assert runs == {("v2", "toy", "default"), ("v2", "sokoban", "default"), ("v2", "toy", "aug")}


def test_a_dry_run_plans_training_and_evaluation_on_the_toy_domain(toy_config):
    target = "results/summary/main/v2/toy/aug/seed0.csv"
    text = _run("-m", "snakemake", "-n", target, "--configfile", str(toy_config), "--config", "preset=embedded")
    counts = job_counts(text)
    assert counts["rl_segment"] == 1  # the embedded grid's 2 steps in one segment
    assert counts["eval_checkpoint_v2"] == 1  # the last checkpoint, on V2's four eval domains in one job
    assert "results/tasks/toy.json" in text and "results/eval/v2/toy/aug/seed0/step2/toy.json" in text


def test_a_short_evaluation_and_the_tables_include_the_toy_domain(tmp_path):
    out = tmp_path / "eval" / "toy.parquet"
    _run("-m", "gentax", "eval", "--generator", "expert", "--domain", "toy", "--episodes", "3", "--quiet",
         "--out", str(out))
    assert json.loads((tmp_path / "eval" / "toy.json").read_text())["success_rate"] == 1.0
    # the tables of a summary whose V2 grid has the toy domain (numbers: synthetic draws)
    script = ("import sys; from gentax.analysis.synthetic import synthetic_summary; "
              "synthetic_summary(seeds=(0, 1), episodes=16, every=75, steps=150).to_csv(sys.argv[1], index=False)")
    summary = tmp_path / "summary.csv"
    _run("-c", script, str(summary))
    assert "toy" in set(pd.read_csv(summary)["eval_domain"])
    _run("-m", "gentax", "tables", "--summary", str(summary), "--out", str(tmp_path / "tables"), "--window", "75,150",
         "--bootstrap", "20", "--no-figures")
    table2 = pd.read_csv(tmp_path / "tables" / "table2_success.csv")
    toy = table2[(table2["init"] == "v2") & (table2["train_domain"] == "toy")]
    assert set(toy["eval_domain"]) == {"webshop", "sokoban", "sciworld", "toy", "alfworld"}
    assert toy.loc[toy["eval_domain"] == "toy", "is_id"].all() and "toy" in set(table2["eval_domain"])


def test_without_registration_the_toy_domain_is_one_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gentax", "eval", "--generator", "expert", "--domain", "toy",
                           "--episodes", "1", "--out", str(tmp_path / "t.parquet")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown domain 'toy'" in proc.stderr


def test_a_registered_module_that_is_missing_or_declares_nothing_is_one_clear_error(tmp_path):
    env = {**_env(), "GENTAX_DOMAINS": "no_such_domain_module"}
    proc = subprocess.run([sys.executable, "-m", "gentax", "eval", "--generator", "expert", "--domain", "sokoban",
                           "--episodes", "1", "--out", str(tmp_path / "a.parquet")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "domain module 'no_such_domain_module' (from GENTAX_DOMAINS) cannot be imported" in proc.stderr
    env["GENTAX_DOMAINS"] = "snakemake_plans"  # importable, but no SPEC
    proc = subprocess.run([sys.executable, "-m", "gentax", "eval", "--generator", "expert", "--domain", "sokoban",
                           "--episodes", "1", "--out", str(tmp_path / "b.parquet")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "domain module 'snakemake_plans' has no SPEC = DomainSpec(...)" in proc.stderr
