"""Where every file of the study lives under the config's ``results`` folder: one spelling for the
rules, the job specs and the plan. A rule's output pattern is the same function called with
wildcards (``tasks(cfg, "{domain}")``); ``relative_*`` give a path under the results folder.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from gentax.evalfile import output_files
from gentax.runspec import run_path


def results(cfg: dict) -> str:
    return cfg["results"]


def logs(cfg: dict) -> str:
    return f"{results(cfg)}/logs"


# ---- a job is named after what it writes (``job_name``): its log's and its benchmark's name --------
def log(cfg: dict, name: str) -> str:
    return f"{logs(cfg)}/{name}.log"


def benchmark(cfg: dict, name: str) -> str:
    return f"{results(cfg)}/benchmarks/{name}.tsv"


def job_name(cfg: dict, written: str) -> str:
    """The name of the job that writes ``written`` (a rule's output pattern): the pattern under the
    results folder less its extension, ``tasks/{domain}`` for ``tasks(cfg, "{domain}")``."""
    prefix = f"{results(cfg)}/"
    if not written.startswith(prefix):
        raise ValueError(f"{written!r} is not under the results folder {results(cfg)!r}: no job name")
    return str(PurePosixPath(written[len(prefix):]).with_suffix(""))


#: the jobs named otherwise than what they write: Ckpt V1's training, V2's SFT data and SFT, Table 3's table
V1_JOB = "init/v1"
V2_SFT_DATA_JOB = "init/v2_sft_data"
V2_JOB = "init/v2"
PROPERTIES_TABLE_JOB = "properties/table"


def under(cfg: dict, relative: str) -> str:
    """A path relative to the results folder (a ``relative_*`` one), under it."""
    return f"{results(cfg)}/{relative}"


def tasks(cfg: dict, domain: str) -> str:
    return f"{results(cfg)}/tasks/{domain}.json"


def trajectories(summary: str) -> dict[str, str]:
    """The trajectory tables written before the summary ``X.json``: ``{"steps": ..., "episodes": ...}``."""
    return dict(zip(("steps", "episodes"), output_files(summary.removesuffix(".json"))[1:]))


def rollout_out(summary: str) -> str:
    """The ``out`` of the rollout that writes the summary ``X.json``: ``X.parquet``."""
    return f"{summary.removesuffix('.json')}.parquet"


# ---- models -------------------------------------------------------------------------------------
def embedded_model(cfg: dict) -> str:
    return f"{results(cfg)}/model/embedded"


def embedded_base_data(cfg: dict) -> str:
    return f"{results(cfg)}/model/embedded_base_data"


def embedded_base(cfg: dict) -> str:
    return f"{results(cfg)}/model/embedded_base"


def base_model_input(cfg: dict) -> str | list:
    """The dependency that stands for the base model (a rule output when embedded)."""
    return embedded_base(cfg) if cfg["model"]["embedded"] else []


def base_model(cfg: dict) -> str:
    return embedded_base(cfg) if cfg["model"]["embedded"] else cfg["model"]["base"]


def v1_run_dir(cfg: dict) -> str:
    return f"{results(cfg)}/init/v1/run"


def v1_steps(cfg: dict) -> int:
    return int(cfg["inits"]["v1"]["rl"]["steps"])


def v2_sft_data(cfg: dict) -> str:
    return f"{results(cfg)}/init/v2/sft_data"


def v2_model(cfg: dict) -> str:
    return f"{results(cfg)}/init/v2/model"


def init_model_input(cfg: dict, init: str) -> str:
    """The file a job that starts from an initial policy waits for (V1: its training manifest)."""
    if init == "v1":
        return segment_manifest(v1_run_dir(cfg), 0, v1_steps(cfg))
    return v2_model(cfg)


def init_model(cfg: dict, init: str) -> str:
    """The HF folder of an initial policy."""
    if init == "v1":
        return checkpoint(v1_run_dir(cfg), v1_steps(cfg))
    return v2_model(cfg)


# ---- runs ---------------------------------------------------------------------------------------
def run_folder(cfg: dict, path: str) -> str:
    """The folder of the run whose ``run_path`` is ``path``."""
    return f"{results(cfg)}/runs/{path}"


def run_dir(cfg: dict, init: str, train_domain: str, variant: str, seed: Any) -> str:
    return run_folder(cfg, run_path(init, train_domain, variant, seed))


def segment_manifest(run_folder: str, start: int, end: int) -> str:
    return f"{run_folder}/segment_{start}_{end}.json"


def checkpoint(run_folder: str, step: Any) -> str:
    return f"{run_folder}/checkpoints/step_{step}"


def evaluated_checkpoint(init: str, train_domain: str, variant: str, seed: Any, step: Any) -> str:
    """An evaluated checkpoint's name: its folder under ``eval/`` and its evaluation job's log."""
    return f"{run_path(init, train_domain, variant, seed)}/step{step}"


def eval_folder(cfg: dict, init: str, train_domain: str, variant: str, seed: Any, step: Any) -> str:
    """One checkpoint's evaluations (one job: every eval domain of its initial policy)."""
    return f"{results(cfg)}/eval/{evaluated_checkpoint(init, train_domain, variant, seed, step)}"


def eval_file(cfg: dict, init: str, train_domain: str, variant: str, seed: Any, step: Any, eval_domain: str) -> str:
    return f"{eval_folder(cfg, init, train_domain, variant, seed, step)}/{eval_domain}.json"


def run_summary(cfg: dict, part: str, run_path: str) -> str:
    return f"{results(cfg)}/summary/{part}/{run_path}.csv"


def base_summary(cfg: dict, init: str, variant: str) -> str:
    return f"{results(cfg)}/summary/base/{init}/{variant}.csv"


# ---- property logs, tables, figures ---------------------------------------------------------------
def relative_properties(domain: str) -> str:
    """Table 3's property log of ``domain``."""
    return f"properties/{domain}.json"


def relative_control_properties(label: str, domain: str) -> str:
    """The property log of a control level (named by its label) on its training domain."""
    return f"properties/controls/{label}/{domain}.json"


#: the controls' properties table (one row per level)
RELATIVE_CONTROLS_TABLE = "properties/controls.csv"


def properties(cfg: dict, domain: str) -> str:
    return under(cfg, relative_properties(domain))


def properties_table(cfg: dict) -> str:
    return f"{results(cfg)}/properties/properties.csv"


def controls_table(cfg: dict) -> str:
    return under(cfg, RELATIVE_CONTROLS_TABLE)


def table(cfg: dict, name: str, ext: str = "csv") -> str:
    return f"{results(cfg)}/tables/{name}.{ext}"


def figure(cfg: dict, name: str, ext: str = "png") -> str:
    return f"{results(cfg)}/figures/{name}.{ext}"
