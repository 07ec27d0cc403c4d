"""Experiment tracking (gentax.train.tracking): TensorBoard by default, the same names in both engines.

A tiny local run's TensorBoard event files are read back with TensorBoard's own reader; every
documented metric must be there at every step, with metrics.csv's value. The verl engine's side
is its composed Hydra config (verl's real ``ppo_trainer`` config): ``trainer.logger`` and the
TensorBoard folder its Ray workers get. SFT: LlamaFactory's ``report_to`` (the two-step
LlamaFactory run in tests/test_sft.py reads its event file back).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gentax.errors import ConfigError
from gentax.train import runs, tracking
from gentax.train.jobs import train_rl
from rl_helpers import PAPER_RL, TINY_RL, make_run, make_tiny_model

STEPS = 2


def read_scalars(folder: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("tracking")
    model = make_tiny_model(base / "model")
    run = base / "run"
    assert train_rl("local", dict(TINY_RL), init=str(model), run=make_run("sokoban", "default", 0, STEPS, init=str(model)),
                    start=0, end=STEPS, run_dir=str(run), progress=False) == 0
    return run


def test_local_run_logs_every_documented_metric_at_every_step(tiny_run):
    folder = tiny_run / tracking.TENSORBOARD_DIR
    assert list(folder.glob("events.out.tfevents.*")), "no TensorBoard event file in the run folder"
    scalars = read_scalars(folder)
    csv = pd.read_csv(tiny_run / runs.METRICS_FILE).set_index("step")
    names = tracking.documented_names()
    assert "gentax/id_success" in names and "actor/pg_loss" in names and "timing_s/step" in names
    for name in names:
        assert name in scalars, f"{name} missing from TensorBoard (have {sorted(scalars)})"
        assert sorted(scalars[name]) == list(range(1, STEPS + 1)), name
    # the tracked value is metrics.csv's, under the shared name
    for column, name in (("id_success", "gentax/id_success"), ("pg_loss", "actor/pg_loss"), ("kl", "actor/kl_loss"),
                         ("invalid_rate", "gentax/invalid_rate")):
        for step in range(1, STEPS + 1):
            assert scalars[name][step] == pytest.approx(csv.loc[step, column], rel=1e-5, abs=1e-7), (name, step)


def test_no_backend_means_metrics_csv_only(tmp_path):
    model = make_tiny_model(tmp_path / "model")
    run = tmp_path / "run"
    train_rl("local", dict(TINY_RL), init=str(model), run=make_run("sokoban", "default", 0, 1, init=str(model)), start=0,
             end=1, run_dir=str(run), progress=False, tracking={"backends": []})
    assert (run / runs.METRICS_FILE).is_file() and not (run / tracking.TENSORBOARD_DIR).exists()


def test_verl_engine_logs_through_verls_own_logger_into_the_run_folder(tmp_path):
    from gentax.train.config import load_rl_config
    from gentax.train.verl_engine import build_config

    cfg = load_rl_config(PAPER_RL)
    run = make_run("webshop", "default", 1, 15, init="/models/x")
    config = build_config(cfg, model_path="/models/x", run=run, run_dir=tmp_path / "run", end_step=15, write_data=False)
    assert list(config.trainer.logger) == ["console", "tensorboard"]
    env = config.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.TENSORBOARD_DIR == str((tmp_path / "run" / tracking.TENSORBOARD_DIR).resolve())
    assert config.trainer.experiment_name == tracking.experiment_name("webshop", "default", 1)
    from gentax.train import verl_agent
    from gentax.train.verl_shared import VERL_METRICS

    assert tracking.VERL_METRICS is VERL_METRICS is verl_agent.VERL_METRICS  # one mapping, both engines
    off = build_config(cfg, model_path="/models/x", run=run, run_dir=tmp_path / "run", end_step=15, write_data=False,
                       tracking={"backends": []})
    assert list(off.trainer.logger) == ["console"]


def test_bad_sections_and_missing_backends_name_the_problem(monkeypatch):
    with pytest.raises(ConfigError, match="tracking.backends"):
        tracking.load_section({"backends": ["neptune"]})
    with pytest.raises(ConfigError, match="unknown key"):
        tracking.load_section({"dir": "x"})
    real = tracking.importlib.util.find_spec
    monkeypatch.setattr(tracking.importlib.util, "find_spec", lambda name: None if name == "mlflow" else real(name))
    with pytest.raises(ConfigError, match="mlflow is enabled but not installed"):
        tracking.load_section({"backends": ["tensorboard", "mlflow"]})


def test_sft_reports_through_llamafactorys_report_to(tmp_path):
    args, env = tracking.sft_report_args(tracking.load_section(None), logging_dir=tmp_path / "m" / "tensorboard",
                                         out_dir=tmp_path / "m")
    assert args["report_to"] == ["tensorboard"]
    assert env == {"TENSORBOARD_LOGGING_DIR": str(tmp_path / "m" / "tensorboard")}
    args, _ = tracking.sft_report_args(tracking.load_section({"backends": []}), logging_dir="x", out_dir="m")
    assert args == {"report_to": "none"}


def test_a_local_run_logging_to_tensorboard_does_not_import_verl(tmp_path):
    """Importing verl (and Ray with it) cost each local RL job ~7 s of start-up; the local engine
    logs under verl's names (gentax.train.verl_shared.VERL_METRICS) without it."""
    import os
    import subprocess
    import sys

    model = make_tiny_model(tmp_path / "model")
    code = ("import sys; from gentax.train.jobs import train_rl; from rl_helpers import TINY_RL, make_run; "
            f"code = train_rl('local', dict(TINY_RL), init={str(model)!r}, run=make_run(init={str(model)!r}, steps=1), "
            f"start=0, end=1, run_dir={str(tmp_path / 'run')!r}, progress=False); "
            "print(code, sorted({m.split('.')[0] for m in sys.modules} & {'verl', 'ray'}))")
    tests = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests.parent), str(tests)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "0 []"
    assert list((tmp_path / "run" / tracking.TENSORBOARD_DIR).glob("events.out.tfevents.*"))
