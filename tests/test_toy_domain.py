"""Issue 14's done-when for a fifth domain: ONE module outside gentax/domains/ (tests/toy_domain.py),
registered the documented way (GENTAX_DOMAINS), goes through the plan, a Snakemake dry-run, a short
evaluation and the tables without touching any other file of the project. Issue 41's for a table
beside it: ONE entry in a module outside gentax/analysis/ (tests/toy_table.py, GENTAX_ARTIFACTS) is
planned, priced (cost and power) and built, with the toy domain in its rows."""

from __future__ import annotations

import json
import os
import re
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
eval:
  power_base_success: {toy: 0.3}
"""


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "GENTAX_DOMAINS": "toy_domain", "GENTAX_ARTIFACTS": "toy_table", "PYTHONPATH": path}


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
    out = _run("-m", "gentax", "plan", "--config", "config/config.yaml", "--config", "config/embedded.yaml",
               "--config", str(toy_config), "--json")
    plan = json.JSONDecoder().raw_decode(out[out.index("{"):])[0]  # stdout's JSON, stderr's notes after it
    runs = {(r["init"], r["train_domain"], r["variant"]) for r in plan["runs"]}
    assert runs == {("v2", "toy", "default"), ("v2", "sokoban", "default"), ("v2", "toy", "aug")}


def test_a_dry_run_plans_training_and_evaluation_on_the_toy_domain(toy_config):
    target = "results/embedded/summary/main/v2/toy/aug/seed0.csv"
    text = _run("-m", "snakemake", "-n", target, "--configfile", str(toy_config), "--config", "preset=embedded")
    counts = job_counts(text)
    assert counts["rl_segment"] == 1  # the embedded grid's 2 steps in one segment
    assert counts["eval_checkpoint_v2"] == 1  # the last checkpoint, on V2's four eval domains in one job
    assert "results/embedded/tasks/toy.json" in text and "results/embedded/eval/v2/toy/aug/seed0/step2/toy.json" in text


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
    # the config's V2 domains with the toy (as TOY_CONFIG's inits.v2.domains, here with ALFWorld too)
    _run("-m", "gentax", "tables", "--summary", str(summary), "--out", str(tmp_path / "tables"), "--window", "75,150",
         "--bootstrap", "20", "--no-figures", "--init-domains", "v2=alfworld,webshop,sokoban,sciworld,toy")
    table2 = pd.read_csv(tmp_path / "tables" / "table2_success.csv")
    toy = table2[(table2["init"] == "v2") & (table2["train_domain"] == "toy")]
    assert set(toy["eval_domain"]) == {"webshop", "sokoban", "sciworld", "toy", "alfworld"}
    assert toy.loc[toy["eval_domain"] == "toy", "is_id"].all() and "toy" in set(table2["eval_domain"])
    assert "toy" not in set(table2.loc[table2["init"] == "v1", "eval_domain"])  # not among the config's V1 domains
    # the full build loops over the registry: the toy table is built too, with the toy domain's row
    built = pd.read_csv(tmp_path / "tables" / "toy_table.csv")
    assert ("v2", "toy") in set(zip(built["init"], built["train_domain"]))


def test_a_toy_table_entry_is_planned_priced_and_built_by_its_job(toy_config, tmp_path):
    target = "results/embedded/tables/toy_table.csv"
    text = _run("-m", "snakemake", "-n", "-p", target, "--configfile", str(toy_config), "--config", "preset=embedded")
    counts = job_counts(text)
    assert counts["table"] == 1 and counts["rl_segment"] == 3  # its variants' runs: toy, sokoban default; toy aug
    assert "results/embedded/summary/main/v2/toy/aug/seed0.csv" in text
    config = ["--config", "config/config.yaml", "--config", "config/embedded.yaml", "--config", str(toy_config)]
    cost = _run("-m", "gentax", "plan", *config, "--cost", "--target", target)
    assert re.search(r"\btable 1\b", cost) and re.search(r"^rl_segment +3 ", cost, re.M), cost  # its job and its runs
    power = _run("-m", "gentax", "plan", *config, "--power")
    assert "toy_table: 2 ΔID cell(s) tested" in power and "V2  toy" in power.split("toy_table:")[1]
    # the table job's own command: its spec from the plan, only its builder run
    spec = json.loads(text.split("gentax table --job ")[1].split(" --log")[0].strip("'"))
    summary = tmp_path / "summary.csv"
    script = ("import sys; from gentax.analysis.synthetic import synthetic_summary; "
              "synthetic_summary(seeds=(0,), episodes=16, every=1, steps=2).to_csv(sys.argv[1], index=False)")
    _run("-c", script, str(summary))
    spec.update(summaries=[str(summary)], outputs={e: str(tmp_path / f"toy_table.{e}") for e in ("csv", "md", "tex")},
                provenance=str(tmp_path / "toy_table.provenance.json"))
    assert spec["init_domains"]["v2"] == ["webshop", "sokoban", "sciworld", "toy"]  # the config's, as the job reads it
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    _run("-m", "gentax", "table", "--job", f"@{tmp_path / 'spec.json'}")
    built = pd.read_csv(tmp_path / "toy_table.csv")
    assert set(built.loc[built["init"] == "v2", "train_domain"]) == {"webshop", "sokoban", "sciworld", "toy"}


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


def test_a_domain_module_setting_a_removed_spec_field_is_told_where_its_value_went(tmp_path):
    """A domain written for an older gentax (SPEC = DomainSpec(..., aug_eps=...)) is one line naming the
    study-config key that holds the value now, not a TypeError's traceback."""
    (tmp_path / "old_toy.py").write_text((REPO / "tests" / "toy_domain.py").read_text().replace(
        "SPEC = DomainSpec(", "SPEC = DomainSpec(aug_eps=4, ", 1))
    env = {**_env(), "GENTAX_DOMAINS": "old_toy", "PYTHONPATH": f"{tmp_path}{os.pathsep}{_env()['PYTHONPATH']}"}
    proc = subprocess.run([sys.executable, "-m", "gentax", "eval", "--generator", "expert", "--domain", "sokoban",
                           "--episodes", "1", "--out", str(tmp_path / "a.parquet")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip() == ("gentax: error: domain module 'old_toy': DomainSpec has no field 'aug_eps' any more; "
                                   "its value belongs in the study config's augmentation.v1.eps.<domain>")
