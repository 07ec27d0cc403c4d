"""The README's first lines are the commands a new user types: one to set up, one to run the study.

The run command must work from a plain shell (no venv on PATH): it plans the embedded study with
its budget line and runs a real job. The budget shown in the README is what `gentax plan --cost`
prints now (so the README cannot drift from the config's figures).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
PLAIN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
             **{k: v for k, v in os.environ.items() if k == "GENTAX_VENV"}}


def code_blocks() -> list[str]:
    return re.findall(r"```(?:\w+)?\n(.*?)```", README, re.S)


def commands(block: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_first_lines_are_two_commands_set_up_and_run():
    first = code_blocks()[0]
    assert README.index(first) < 1500  # on the first screen, right after the introduction
    assert commands(first) == ["bash scripts/setup.sh", "bash scripts/run.sh"]


def test_the_run_command_works_from_a_plain_shell(tmp_path):  # from the repository root, as the README says
    run = commands(code_blocks()[0])[1].split()
    plan = subprocess.run([*run, "-n", "--forceall"], cwd=REPO, env=PLAIN_ENV, capture_output=True, text=True, timeout=600)
    text = plan.stdout + plan.stderr
    assert plan.returncode == 0, text[-3000:]
    assert "gentax budget estimate (whole study, preset embedded)" in text and "Job stats" in text
    # a real job through the same command (a task split into a scratch results folder)
    target = tmp_path / "results" / "tasks" / "sokoban.json"
    job = subprocess.run([*run, str(target), "--cores", "1", "--config", f"results={tmp_path / 'results'}"],
                         cwd=REPO, env=PLAIN_ENV, capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, (job.stdout + job.stderr)[-3000:]
    assert '"fingerprint"' in target.read_text()


def test_readme_shows_the_paper_budget_as_gentax_plan_cost_prints_it():
    printed = subprocess.run([sys.executable, "-m", "gentax", "plan", "--cost"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout
    assert any(block == printed for block in code_blocks()), "README's budget block is not `gentax plan --cost`'s output"
