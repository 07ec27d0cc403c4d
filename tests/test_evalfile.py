"""An evaluation's files (gentax.evalfile), written by a real evaluation (the expert on Sokoban):
a kill after the tables never leaves the old JSON beside them, and ``read_eval`` names a damaged
or missing file with the command that rebuilds it, and an all-error result with its recovery.
(Their temporaries and their one-writer lock: tests/test_faults.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gentax import evalfile
from gentax.errors import GentaxError


class Killed(BaseException):
    """Stands for SIGKILL at an injection point."""


def expert_eval(prefix: Path, episodes: int) -> dict:
    from gentax.rollout import evaluation
    from gentax.rollout.collector import CollectConfig
    from gentax.rollout.generators import make_generator

    cfg = CollectConfig(domain="sokoban", split="eval", max_steps=15)
    return evaluation.evaluate(make_generator("expert", None), list(range(episodes)), cfg, str(prefix), progress=False)


def test_a_kill_after_the_tables_never_leaves_the_old_summary(tmp_path, monkeypatch):
    prefix = tmp_path / "sokoban"
    assert expert_eval(prefix, 2)["episodes"] == 2

    def killed(*_args, **_kwargs):
        raise Killed

    monkeypatch.setattr(evalfile, "write_json", killed)
    with pytest.raises(Killed):
        expert_eval(prefix, 6)
    monkeypatch.undo()
    assert not Path(f"{prefix}.json").exists()  # no complete result: Snakemake reruns the job
    assert pd.read_parquet(f"{prefix}.episodes.parquet")["task_seed"].tolist() == list(range(6))
    expert_eval(prefix, 6)
    summary = json.loads(Path(f"{prefix}.json").read_text())
    assert summary["episodes"] == 6 == len(pd.read_parquet(f"{prefix}.episodes.parquet"))


def test_a_damaged_eval_result_names_the_file_and_the_command_that_rebuilds_it(tmp_path):
    prefix = tmp_path / "step3" / "sokoban"
    expert_eval(prefix, 2)
    json_path = f"{prefix}.json"
    summary, episodes = evalfile.read_eval(json_path)
    assert summary["episodes"] == len(episodes) == 2
    table = Path(f"{prefix}.episodes.parquet")
    size = table.stat().st_size
    with open(table, "r+b") as fh:
        fh.truncate(size - 7)
    with pytest.raises(GentaxError, match=rf"^{table} is corrupt \({size - 7} bytes, {size} written\); "
                                          rf"rebuild it: snakemake --force {json_path} "):
        evalfile.read_eval(json_path)
    table.unlink()
    with pytest.raises(GentaxError, match=rf"^{table} is missing; rebuild it: snakemake --force {json_path}"):
        evalfile.read_eval(json_path)
    Path(json_path).write_text('{"episodes": 2, "succ')  # a JSON cut short
    with pytest.raises(GentaxError, match=rf"^{json_path} is corrupt \(not JSON"):
        evalfile.read_eval(json_path)
    Path(json_path).unlink()
    with pytest.raises(GentaxError, match=rf"^{json_path} is missing; rebuild it"):
        evalfile.read_eval(json_path)


def test_an_eval_that_only_met_env_errors_says_how_to_recover(tmp_path, monkeypatch):
    from gentax.domains.sokoban import SokobanEnv

    def dies(self, action):
        raise RuntimeError("Answer from Java side is empty")

    monkeypatch.setattr(SokobanEnv, "_step", dies)
    expert_eval(tmp_path / "sokoban", 2)
    with pytest.raises(GentaxError, match=r"an env error ended every one of its 2 episodes \(RuntimeError: Answer from "
                                          r"Java side is empty\); fix the cause .*snakemake --force .*"
                                          r"eval.errors_as_losses: true"):
        evalfile.read_eval(tmp_path / "sokoban.json")
