"""Each clone runs its own code: the shared venvs hold third-party packages only (scripts/setup.sh),
and every entry point (scripts/run.sh, bin/gentax, the Snakefile's jobs) puts its own clone first.

Two fresh clones on one machine, one with a changed config: each `gentax plan` reflects its own.
A setup that finds gentax installed in a venv (an older setup's editable install of another
clone) removes it and says so; a setup with nothing to do says that too.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from clones import PLAIN_ENV, copy_checkout

REPO = Path(__file__).resolve().parents[1]


def run_in(clone: Path, *args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/run.sh", *args], cwd=clone, env=env or PLAIN_ENV, capture_output=True,
                          text=True, timeout=600)


def test_two_clones_each_plan_their_own_config(tmp_path):
    first, second = copy_checkout(tmp_path / "first"), copy_checkout(tmp_path / "second")
    config = second / "config" / "config.yaml"
    text = config.read_text()
    assert "  seeds: [0, 1, 2]\n" in text
    config.write_text(text.replace("  seeds: [0, 1, 2]\n", "  seeds: [0]\n"))
    plans = {clone.name: run_in(clone, "gentax", "plan", "--json") for clone in (first, second)}
    for proc in plans.values():
        assert proc.returncode == 0, proc.stderr[-3000:]
    runs = {name: json.loads(proc.stdout)["counts"]["runs"] for name, proc in plans.items()}
    assert runs == {"first": 60, "second": 20}


def test_gentax_version_names_the_clone_it_runs_from(tmp_path):
    clone = copy_checkout(tmp_path / "clone")
    for proc in (run_in(clone, "gentax", "--version"),
                 subprocess.run([str(clone / "bin" / "gentax"), "--version"], cwd="/", env=PLAIN_ENV,
                                capture_output=True, text=True, timeout=120)):
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("gentax 0.1.0 from ") and f" from {clone} (" in proc.stdout


def installed_editable(venv: Path, source: Path) -> None:
    """What ``pip install -e SOURCE`` leaves in ``venv`` for a package named gentax (its .pth and
    dist-info with the PEP 610 record of where it came from), written directly: no build needed."""
    site = next((venv / "lib").glob("python3*/site-packages"))
    info = site / "gentax-0.0.1.dist-info"
    info.mkdir()
    (site / "__editable__.gentax-0.0.1.pth").write_text(f"{source}\n")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gentax\nVersion: 0.0.1\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "direct_url.json").write_text(json.dumps({"url": source.as_uri(), "dir_info": {"editable": True}}))
    files = ["__editable__.gentax-0.0.1.pth", *(f"{info.name}/{n}" for n in ("METADATA", "INSTALLER", "direct_url.json", "RECORD"))]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


def test_a_second_setup_says_what_it_found_and_what_it_did(tmp_path):
    """A venv holding another clone's gentax (editable, as the old setup installed it): removed, said."""
    venv, other = tmp_path / "venv", tmp_path / "other-clone"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    (other / "gentax").mkdir(parents=True)
    (other / "gentax" / "__init__.py").write_text("")
    installed_editable(venv, other)
    # with no PYTHONPATH (the test command sets one to this checkout): what the venv itself brings
    assert subprocess.run([str(venv / "bin" / "python"), "-c", "import gentax"], cwd="/", env=PLAIN_ENV).returncode == 0
    env = {**PLAIN_ENV, "GENTAX_VENV": str(venv), "GENTAX_SFT_VENV": str(tmp_path / "no-sft-venv")}
    stamp = subprocess.run(["bash", "scripts/setup.sh", "--stamp"], cwd=REPO, env=env, capture_output=True,
                           text=True, check=True).stdout.strip()
    Path(stamp).touch()  # the third-party packages are in place: only the gentax install is left to find

    first = subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert f"gentax setup: found gentax installed in {venv} from {other}; removed it" in first.stderr
    assert "up to date" in first.stderr
    still = subprocess.run([str(venv / "bin" / "python"), "-c", "import gentax"], cwd="/", env=PLAIN_ENV,
                           capture_output=True)
    assert still.returncode != 0  # the venv no longer brings any clone's gentax

    second = subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0 and "removed" not in second.stderr
    assert f"gentax setup: {venv} and {env['GENTAX_SFT_VENV']} are up to date" in second.stderr
    assert f"this clone's code runs from {REPO}" in second.stderr


@pytest.mark.parametrize("tool, args, expect", [
    ("gentax", ["--version"], "gentax 0.1.0 from"),
    ("snakemake", ["--version"], "9."),
    ("python", ["-c", "import gentax, sys; print(gentax.__file__)"], str(REPO / "gentax" / "__init__.py")),
])
def test_run_sh_runs_each_tool_of_this_clone_without_sourcing_anything(tool, args, expect):
    proc = run_in(REPO, tool, *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert expect in proc.stdout
