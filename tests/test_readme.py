"""The README's first lines are the two commands a new user types: one runs the study, one runs the
tests, each setting itself up on first use (scripts/setup.sh).

Both are run here exactly as the README writes them, from a fresh clone and a plain shell (nothing
sourced, no venv on PATH): the study command in dry-run form and for one real job, the test command
on one test. The paper's budget shown in docs/workflow.md is what `gentax plan --cost` prints now (so
the docs cannot drift from the config's figures).
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from clones import PLAIN_ENV, copy_checkout

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def code_blocks() -> list[str]:
    return re.findall(r"```(?:\w+)?\n(.*?)```", README, re.S)


def commands(block: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def readme_command(what: str) -> list[str]:
    """The first block's command that runs ``what`` (scripts/run.sh or scripts/test.sh), as words."""
    return next(c for c in commands(code_blocks()[0]) if what in c).split()


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory):
    return copy_checkout(tmp_path_factory.mktemp("clone"))


def test_first_lines_are_two_commands_run_and_test():
    first = code_blocks()[0]
    assert README.index(first) < 1500  # on the first screen, right after the introduction
    assert commands(first) == ["bash scripts/run.sh", "bash scripts/test.sh"]


def test_the_run_command_works_on_a_fresh_clone_from_a_plain_shell(fresh_clone, tmp_path):
    run = readme_command("scripts/run.sh")
    plan = subprocess.run([*run, "-n", "--forceall"], cwd=fresh_clone, env=PLAIN_ENV, capture_output=True, text=True,
                          timeout=600)
    text = plan.stdout + plan.stderr
    assert plan.returncode == 0, text[-3000:]
    assert "Job stats" in text and "total" in text
    assert "gentax setup: " in text  # it set itself up (or said it is set up)
    # a real job through the same command (a task split into a scratch results folder)
    target = tmp_path / "results" / "tasks" / "sokoban.json"
    job = subprocess.run([*run, str(target), "--cores", "1", "--config", f"results={tmp_path / 'results'}"],
                         cwd=fresh_clone, env=PLAIN_ENV, capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, (job.stdout + job.stderr)[-3000:]
    assert '"fingerprint"' in target.read_text()


def test_the_test_command_works_on_a_fresh_clone_from_a_plain_shell(fresh_clone):
    test = readme_command("scripts/test.sh")
    one = "tests/test_cost.py::test_gpus_from_gres_and_gpus_per_task_equal_gpu[gres]"
    proc = subprocess.run([*test, one], cwd=fresh_clone, env=PLAIN_ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "1 passed" in proc.stdout


def machine_free(printed: str) -> str:
    """``gentax plan --cost``'s output with its machine-dependent lines (the free space of the disk the
    results folder is on, where that folder is, and whether the plan fits it) as the README shows them."""
    printed = re.sub(r"^  free: .*$", "  free: <the free space of the disk the results folder is on>", printed, flags=re.M)
    return re.sub(r"^WARNING: the plan writes .*$", "<a warning if the plan does not fit that disk>", printed, flags=re.M)


def test_the_docs_show_the_paper_budget_as_gentax_plan_cost_prints_it():
    """The README points at docs/workflow.md for the paper's budget (issue #56: details belong in docs/).
    The paper preset's profile named as a user names it, relative to the checkout, is shown so."""
    printed = subprocess.run([sys.executable, "-m", "gentax", "plan", "--cost", "--profile", "profiles/slurm"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout
    assert "resources of profiles/slurm" in printed and "eval_checkpoint_v1" in printed
    printed = machine_free(printed)
    blocks = re.findall(r"```(?:\w+)?\n(.*?)```", (REPO / "docs" / "workflow.md").read_text(), re.S)
    assert any(block == printed for block in blocks), "docs/workflow.md's budget block is not `gentax plan --cost`'s output"
    assert "docs/workflow.md" in README and "gentax plan --cost" in README
