"""Faults lose nothing and hide nothing: kills around a checkpoint save and during an
eval write, temporaries left by killed writes, two trainers on one run folder.

A kill is simulated in-process by raising ``Killed`` (a BaseException, so no ``except Exception``
swallows it) at the chosen point; ``benchmarks/kill_points.py`` repeats the same points with a
real SIGKILL of a separate process.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gentax.errors import GentaxError
from gentax.rollout import evaluation
from gentax.train import local_engine, runs
from gentax.train.cli import train_rl
from rl_helpers import TINY_RL, make_tiny_model

ROOT = Path(__file__).resolve().parents[1]


class Killed(BaseException):
    """Stands for SIGKILL at an injection point."""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def train(run_dir, init, steps, domain="sokoban"):
    start, end = steps
    return train_rl("local", dict(TINY_RL), init=str(init), domain=domain, variant="default", seed=0,
                    start=start, end=end, run_dir=str(run_dir), progress=False)


@pytest.fixture(scope="module")
def straight_run(tiny, tmp_path_factory):
    run = tmp_path_factory.mktemp("straight") / "run"
    assert train(run, tiny, (0, 3)) == 0
    return run


def temporaries(folder: Path) -> list[Path]:
    return sorted(folder.rglob(".*.tmp"))


# ---- 1. a kill between saving a checkpoint and logging its metrics row ----------------------------
@pytest.mark.parametrize("point", ["before_save", "after_save"])
def test_a_kill_around_a_checkpoint_save_loses_no_metrics_row(tiny, straight_run, tmp_path, monkeypatch, point):
    real_save = local_engine.Policy.save

    def save(self, target, optimizer, step):
        if step == 2 and point == "before_save":
            raise Killed
        real_save(self, target, optimizer, step)
        if step == 2 and point == "after_save":
            raise Killed

    run = tmp_path / "run"
    monkeypatch.setattr(local_engine.Policy, "save", save)
    with pytest.raises(Killed):
        train(run, tiny, (0, 3))
    monkeypatch.undo()
    assert train(run, tiny, (0, 3)) == 0
    ours, straight = pd.read_csv(run / runs.METRICS_FILE), pd.read_csv(straight_run / runs.METRICS_FILE)
    assert ours["step"].tolist() == [1, 2, 3]
    pd.testing.assert_series_equal(ours["loss"], straight["loss"])


# ---- 2. temporaries of killed writes -------------------------------------------------------------
def test_temporaries_of_killed_writes_are_removed(tiny, tmp_path, capsys):
    run = tmp_path / "run"
    half_checkpoint = run / "checkpoints" / ".step_2.k1ll3d.tmp" / "step_2"
    half_checkpoint.mkdir(parents=True)
    (half_checkpoint / "model.safetensors").write_bytes(b"\0" * 1024)
    (run / ".metrics.csv.k1ll3d.tmp").mkdir()
    # a kill while a thinking run wrote a step's think samples (seen in CI, 2026-12-01)
    (run / "think_samples" / ".step_2.json.k1ll3d.tmp").mkdir(parents=True)
    assert train(run, tiny, (0, 1)) == 0
    assert temporaries(run) == []
    assert "removed" in capsys.readouterr().out

    folder = tmp_path / "eval"
    (folder / ".sokoban.episodes.parquet.k1ll3d.tmp").mkdir(parents=True)
    (folder / ".other.json.k1ll3d.tmp").mkdir()  # another output's write in progress: not ours to remove
    expert_eval(folder / "sokoban", 2)
    assert temporaries(folder) == [folder / ".other.json.k1ll3d.tmp"]


# ---- 3. an old summary beside new trajectories ------------------------------------------------------
def expert_eval(prefix: Path, episodes: int) -> dict:
    from gentax.rollout.collector import CollectConfig
    from gentax.rollout.generators import make_generator

    cfg = CollectConfig(domain="sokoban", split="eval", max_steps=15)
    return evaluation.evaluate(make_generator("expert", None), list(range(episodes)), cfg, str(prefix), progress=False)


def test_a_kill_after_the_tables_never_leaves_the_old_summary(tmp_path, monkeypatch):
    prefix = tmp_path / "sokoban"
    assert expert_eval(prefix, 2)["episodes"] == 2

    def killed(*_args, **_kwargs):
        raise Killed

    monkeypatch.setattr(evaluation, "write_json", killed)
    with pytest.raises(Killed):
        expert_eval(prefix, 6)
    monkeypatch.undo()
    assert not Path(f"{prefix}.json").exists()  # no complete result: Snakemake reruns the job
    assert pd.read_parquet(f"{prefix}.episodes.parquet")["task_seed"].tolist() == list(range(6))
    expert_eval(prefix, 6)
    summary = json.loads(Path(f"{prefix}.json").read_text())
    assert summary["episodes"] == 6 == len(pd.read_parquet(f"{prefix}.episodes.parquet"))


# ---- 6. two trainers on one run folder ------------------------------------------------------------
def test_one_trainer_per_run_folder_and_a_dead_holders_lock_is_taken_over(tiny, tmp_path, capsys):
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom gentax.train import runs\n"
         "with runs.locked(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(600)\n", str(run)],
        stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(GentaxError, match=f"in use by pid {holder.pid} on host {socket.gethostname()}"):
            train(run, tiny, (0, 1))
        assert not (run / runs.CHECKPOINTS).exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert train(run, tiny, (0, 1)) == 0  # the killed holder's lock is taken over
    assert f"took over the lock of {run} from pid {holder.pid}" in capsys.readouterr().out
    assert train(run, tiny, (1, 1)) == 0  # a finished trainer leaves the lock free
    assert "took over" not in capsys.readouterr().out


# ---- 5. crashed episodes hidden in the tables ------------------------------------------------------
JAVA_TRACE = ("An error occurred while calling o41.step.\nTraceback (most recent call last):\n"
              '  File "py4j/java_gateway.py", line 1038, in send_command\n'
              "py4j.protocol.Py4JNetworkError: Answer from Java side is empty")


def test_env_errors_are_left_out_of_success_rates_and_named_in_one_line(tmp_path, monkeypatch, caplog):
    from gentax.domains.sokoban import SokobanEnv

    real_step = SokobanEnv._step

    def dies_on_odd_tasks(self, action):
        if self.current_task.seed % 2:
            raise RuntimeError(JAVA_TRACE)
        return real_step(self, action)

    monkeypatch.setattr(SokobanEnv, "_step", dies_on_odd_tasks)
    summary = expert_eval(tmp_path / "sokoban", 4)
    assert (summary["success_rate"], summary["scored_episodes"], summary["errors"]) == (1.0, 2, 2)
    assert summary["error_rate"] == 0.5 and summary["errors_as_losses"] is False
    reason = "RuntimeError: An error occurred while calling o41.step.: py4j.protocol.Py4JNetworkError: Answer from Java side is empty"
    assert summary["error_reasons"] == {reason: 2}
    assert set(pd.read_parquet(tmp_path / "sokoban.episodes.parquet")["error"].dropna()) == {reason}
    assert sum("Traceback" in r.getMessage() for r in caplog.records) == 2  # the full text: once per failure
    from gentax.rollout.collector import CollectConfig
    from gentax.rollout.generators import make_generator

    counted = evaluation.evaluate(make_generator("expert", None), [0, 1, 2, 3], CollectConfig(domain="sokoban", split="eval"),
                                  str(tmp_path / "counted"), progress=False, errors_as_losses=True)
    assert counted["success_rate"] == 0.5 and counted["scored_episodes"] == 4


def test_tables_flag_cells_with_env_errors():
    from gentax.analysis.synthetic import synthetic_summary
    from gentax.analysis.tables import ERROR_MARK, Settings, compute_tables, render

    summary = synthetic_summary(seeds=(0, 1))
    summary["error_rate"] = 0.0
    sick = (summary["init"] == "v2") & (summary["train_domain"] == "sokoban") & (summary["variant"] == "default")
    summary.loc[sick & (summary["eval_domain"] == "sciworld"), "error_rate"] = 0.5  # a dying JVM
    summary.loc[sick & (summary["eval_domain"] == "webshop"), "error_rate"] = 0.01
    analysis = compute_tables(summary, settings=Settings(n_boot=0, error_mark_pct=5))
    table2 = analysis.tables["table2_success"]
    row = table2.data.set_index(["init", "train_domain", "eval_domain"]).loc[("v2", "sokoban", "sciworld")]
    assert row["error_pct"] == pytest.approx(50.0)
    markdown = render(table2)["md"]
    marked = [line for line in markdown.splitlines() if ERROR_MARK in line and line.startswith("|")]
    assert len(marked) == 1 and "| V2 " in marked[0] and "| sokoban " in marked[0]
    assert any("v2/sokoban/default on sciworld 50.0%" in n and "2 cell(s)" in n for n in analysis.notes)
    assert any("more than 5% of episodes" in n for n in table2.notes)
