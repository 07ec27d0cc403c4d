"""One config source: config/config.yaml, the preset's overlay, then the user's overrides.

`snakemake --configfile mine.yaml` keeps the embedded preset (it used to switch silently to the
paper study), and an override of a value config/embedded.yaml sets takes effect (it used to be
overwritten by the overlay); `gentax plan` layers the same way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gentax.study import config as gconfig
from gentax.errors import ConfigError
from gentax.io import read_yaml
from snakemake_plans import dry_run_counts

REPO = Path(__file__).resolve().parents[1]
TWO_SEEDS = "grid: {seeds: [0, 1]}\n"  # config/embedded.yaml sets grid.seeds: [0]



def test_a_configfile_keeps_the_embedded_preset_and_overrides_what_it_sets(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(TWO_SEEDS)
    plain = dry_run_counts()
    with_mine = dry_run_counts("--configfile", str(mine))
    assert "embedded_model" in with_mine  # still the embedded study, not the paper's 8B grid
    assert with_mine["rl_segment"] == 2 * plain["rl_segment"]  # the override of grid.seeds took effect
    assert with_mine["rl_v1"] == plain["rl_v1"] == 1


def test_with_preset_layers_base_overlay_then_overrides():
    base = read_yaml(REPO / "config" / "config.yaml")
    embedded = gconfig.with_preset(base, {"grid": {"seeds": [0, 1]}})
    assert embedded["preset"] == "embedded" and embedded["model"]["embedded"] is True
    assert embedded["grid"]["seeds"] == [0, 1] and embedded["grid"]["steps"] == 2  # override wins, overlay kept
    paper = gconfig.with_preset(base, {"preset": "paper"})
    assert paper["grid"]["seeds"] == base["grid"]["seeds"] and paper["model"]["embedded"] is False
    with pytest.raises(ConfigError, match="config key preset: unknown preset 'tiny'"):
        gconfig.with_preset(base, {"preset": "tiny"})


def test_a_domain_section_without_a_step_limit_takes_its_envs_own():
    """The step limit's one home is the env class (``default_max_steps``); the study config's
    ``domains.<d>.max_steps`` overrides it (the embedded overlay does), else is derived from it."""
    from gentax.domains import domain_class

    base = read_yaml(REPO / "config" / "config.yaml")
    assert all("max_steps" not in section for section in base["domains"].values())
    paper = gconfig.with_preset(base, {"preset": "paper", "domains": {"webshop": {"max_steps": 9}}})
    assert {d: s["max_steps"] for d, s in paper["domains"].items()} == {
        "alfworld": 50, "webshop": 9, "sokoban": 15, "sciworld": 50} == {
        **{d: domain_class(d).default_max_steps for d in paper["domains"]}, "webshop": 9}
    assert gconfig.with_preset(base, {})["domains"]["sokoban"]["max_steps"] == 6  # config/embedded.yaml's


def test_gentax_plan_layers_the_same_way(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(TWO_SEEDS)
    proc = subprocess.run([sys.executable, "-m", "gentax", "plan", "--preset", "embedded",
                           "--config", str(mine)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "seed 1" in proc.stdout and "v1  webshop   default  seed 0  2 steps" in proc.stdout


def _files(jobs) -> set[str]:
    return {path for job in jobs for path in (*job.output, *job.log)}


def test_each_presets_study_writes_under_a_folder_of_its_own():
    """Issue #60: config ``results: results/{preset}``. The embedded and the one-GPU study of one
    clone (their whole DAGs, every output and log) share no path, each under its own folder; a
    ``results:`` of the user's own still wins."""
    from gentax.study import dag

    embedded, gpu1 = (_files(dag.build(dag.study_args(preset))) for preset in ("embedded", "gpu1"))
    assert len(embedded) > 100 and len(gpu1) > 100 and not embedded & gpu1
    assert all(path.startswith("results/embedded/") for path in embedded)
    assert all(path.startswith("results/gpu1/") for path in gpu1)
    assert gconfig.study_config("paper")["results"] == "results/paper"
    assert gconfig.with_preset(read_yaml(gconfig.STUDY_FILE), {"preset": "gpu1", "results": "out"})["results"] == "out"


def test_a_run_of_one_preset_leaves_the_others_files_as_they_were(tmp_path):
    """A fresh clone runs one job of the embedded study, then one of the one-GPU study (its profile,
    as the README says): the second plans and runs its own job only, and every file of the first is
    byte-identical after it."""
    from clones import PLAIN_ENV, copy_checkout

    clone = copy_checkout(tmp_path / "clone")
    no_disk_check = tmp_path / "no_disk_check.yaml"  # the one-GPU study's whole plan needs ~62 GiB: not this test's point
    no_disk_check.write_text("disk: {check_free_space: false}\n")

    def run(*args: str) -> str:
        done = subprocess.run(["bash", "scripts/run.sh", *args, "--cores", "1", "--configfile", str(no_disk_check)],
                              cwd=clone, env=PLAIN_ENV,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        return done.stdout + done.stderr

    run("results/embedded/tasks/sokoban.json")
    first = {p: p.read_bytes() for p in (clone / "results" / "embedded").rglob("*") if p.is_file()}
    assert clone / "results" / "embedded" / "tasks" / "sokoban.json" in first
    said = run("--profile", "profiles/gpu1", "results/gpu1/tasks/sokoban.json")
    assert "preset gpu1: its outputs go under results/gpu1/" in said and "results/embedded" not in said
    assert (clone / "results" / "gpu1" / "tasks" / "sokoban.json").is_file()
    assert {p: p.read_bytes() for p in (clone / "results" / "embedded").rglob("*") if p.is_file()} == first


@pytest.mark.parametrize("preset", [p for p, overlay in gconfig.PRESET_OVERLAYS.items() if overlay])
def test_a_preset_with_its_own_cost_figures_says_where_each_comes_from(preset):
    """`gentax plan --cost` prints each time figure with its source sentence; a preset that sets its
    own figures but inherits the paper's sentences would describe an 8-GPU extrapolation beside a
    CPU fit."""
    base = read_yaml(REPO / "config" / "config.yaml")
    resolved = gconfig.with_preset(base, {"preset": preset})
    paper = base["cost"]
    for key in paper["sources"]:
        if resolved["cost"][key] != paper[key]:
            assert resolved["cost"]["sources"][key] != paper["sources"][key], f"{preset}: cost.sources.{key}"
