"""Experiment tracking: where training metrics go besides ``metrics.csv`` (both RL engines and SFT;
docs/training.md section 8 describes the ``tracking`` section, ``DEFAULTS`` when absent).

Both RL engines log under the same names: the verl engine through verl's own tracker
(``verl_logger``, ``verl_env``), the local engine through ``TrackedMetricsLog`` (``metric_names``:
verl's key where verl computes that quantity, ``VERL_METRICS``, else ``gentax/<column>``). SFT
reports through the HF Trainer's ``report_to`` (``sft_report_args``). An enabled backend that is
not installed is an error naming it (``load_section``).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from gentax.agent.parse import REASONS
from gentax.errors import ConfigError
from gentax.io import read_yaml
from gentax.train import runs
from gentax.train.verl_shared import VERL_METRICS  # importable without verl

BACKENDS = ("tensorboard", "wandb", "mlflow")
DEFAULTS = {"backends": ["tensorboard"], "project": "gentax", "mlflow_uri": None}
TENSORBOARD_DIR = "tensorboard"
#: the package each backend needs
_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}

#: metrics.csv columns both engines write, logged under verl's own names (``verl_shared.VERL_METRICS``)
SHARED_COLUMNS = ("pg_loss", "kl", "entropy", "clipfrac", "grad_norm", "adv_mean", "adv_std", "adv_abs_max",
                  "rollout_s", "update_s", "seconds")


def documented_names() -> list[str]:
    """The tracked names both RL engines log at every training step."""
    rollout = ["id_success", "return_mean", "episode_length", "trajectories", "samples", "invalid_rate",
               *(f"invalid/{reason}" for reason in sorted(REASONS))]
    return [f"gentax/{name}" for name in rollout] + [VERL_METRICS[c] for c in SHARED_COLUMNS]


def load_section(section: dict[str, Any] | None) -> dict[str, Any]:
    """The tracking section with defaults filled in; ConfigError naming a bad key or a missing package."""
    section = dict(section or {})
    unknown = sorted(set(section) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"tracking: unknown key(s) {', '.join(unknown)}; valid: {', '.join(DEFAULTS)}")
    out = {**DEFAULTS, **section}
    backends = out["backends"]
    if not isinstance(backends, list) or any(b not in BACKENDS for b in backends):
        raise ConfigError(f"tracking.backends: {backends!r}; a list of {', '.join(BACKENDS)}")
    for backend in backends:
        if importlib.util.find_spec(_PACKAGES[backend]) is None:
            raise ConfigError(f"tracking.backends: {backend} is enabled but not installed "
                              f"(pip install {_PACKAGES[backend]}, or leave it out)")
    return out


def metric_names(row: dict[str, Any]) -> dict[str, float]:
    """A metrics.csv row as tracked scalars (``step`` is the x axis, not a scalar)."""
    return {VERL_METRICS.get(column, f"gentax/{column}"): float(value) for column, value in row.items()
            if column != "step" and isinstance(value, (int, float))}


def experiment_name(domain: str, variant: str, seed: int) -> str:
    return f"{domain}-{variant}-s{seed}"


def verl_env(section: dict[str, Any], run_dir: str | Path) -> dict[str, str]:
    """Environment verl's Tracking reads (the TensorBoard folder and the MLflow URI of this run); the
    verl engine hands it to its Ray workers, where the trainer builds verl's Tracking."""
    run_dir = Path(run_dir).resolve()
    env = {"TENSORBOARD_DIR": str(run_dir / TENSORBOARD_DIR)}
    if "mlflow" in section["backends"]:
        env["MLFLOW_TRACKING_URI"] = section["mlflow_uri"] or os.environ.get("MLFLOW_TRACKING_URI") \
            or (run_dir / "mlruns").as_uri()
    return env


def verl_logger(section: dict[str, Any]) -> list[str]:
    """verl's ``trainer.logger``: its console log plus the enabled backends."""
    return ["console", *section["backends"]]


def open_tracker(section: dict[str, Any], run_dir: str | Path, *, experiment: str, config: dict | None = None):
    """verl's ``Tracking`` for the local engine (None when no backend is enabled)."""
    if not section["backends"]:
        return None
    os.environ.update(verl_env(section, run_dir))  # verl's Tracking reads its folders from the environment
    if list(section["backends"]) == ["tensorboard"]:
        return _TensorBoardOnly(os.environ["TENSORBOARD_DIR"])
    from verl.utils.tracking import Tracking

    return Tracking(project_name=section["project"], experiment_name=experiment,
                    default_backend=list(section["backends"]), config=config)


class _TensorBoardOnly:
    """TensorBoard alone, written as verl's Tracking writes it (torch's ``SummaryWriter``, one scalar
    per name and step, in the same folder), sparing a local RL job verl's and Ray's import."""

    def __init__(self, folder: str):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(folder)

    def log(self, data: dict[str, float], step: int) -> None:
        for name, value in data.items():
            self.writer.add_scalar(name, value, step)

    def finish(self) -> None:
        self.writer.close()


class TrackedMetricsLog(runs.MetricsLog):
    """``runs.MetricsLog`` that also logs each appended row to the run's trackers (the local engine;
    verl logs its own). ``close`` flushes them (TensorBoard writes its events on close)."""

    def __init__(self, run_dir: str | Path, resume_from: int, *, tracking: dict[str, Any] | None, experiment: str,
                 config: dict | None = None):
        super().__init__(run_dir, resume_from)
        self.tracker = open_tracker(load_section(tracking), run_dir, experiment=experiment, config=config)

    def append(self, row: dict[str, Any]) -> None:
        super().append(row)
        if self.tracker is not None:
            self.tracker.log(metric_names(row), step=int(row["step"]))

    def close(self) -> None:
        if self.tracker is not None:
            self.tracker.finish()


def sft_report_args(section: dict[str, Any], *, logging_dir: str | Path, out_dir: str | Path
                    ) -> tuple[dict[str, Any], dict[str, str]]:
    """LlamaFactory arguments (the HF Trainer's ``report_to``, ``run_name``) and the environment its
    reporters read (``TENSORBOARD_LOGGING_DIR``: transformers 5 deprecates the ``logging_dir``
    argument), for an SFT run writing the model folder ``out_dir``."""
    backends = section["backends"]
    out_dir = Path(out_dir).resolve()
    args: dict[str, Any] = {"report_to": list(backends) if backends else "none"}
    env = {}
    if backends:
        args["run_name"] = f"sft-{out_dir.name}"
    if "tensorboard" in backends:
        env["TENSORBOARD_LOGGING_DIR"] = str(logging_dir)
    if "wandb" in backends:
        env.update(WANDB_DISABLED="false", WANDB_PROJECT=section["project"])
    if "mlflow" in backends:
        env.update(MLFLOW_TRACKING_URI=section["mlflow_uri"] or os.environ.get("MLFLOW_TRACKING_URI")
                   or (out_dir.parent / "mlruns").as_uri(), MLFLOW_EXPERIMENT_NAME=section["project"])
    return args, env


def read_section(path: str | Path | None) -> dict[str, Any] | None:
    """The ``tracking`` mapping of a config file (None when the file has none)."""
    if path is None:
        return None
    section = read_yaml(path).get("tracking")
    if section is not None and not isinstance(section, dict):
        raise ConfigError(f"{path}: tracking must be a mapping")
    return section
