"""Where every artifact of the study lives, relative to the working directory (config ``results``).

One place for the layout: the Snakefile's rules and input functions (rules/common.smk) and the job
specs (``gentax.study.jobs``) build every path here, so a job's spec and the rule that runs it name
the same files. Contract: each function takes the validated workflow config first and returns a
``str`` path (or ``[]`` where an artifact does not exist in this config, for rule inputs).
"""

from __future__ import annotations

from typing import Any


def results(cfg: dict) -> str:
    return cfg["results"]


def log(cfg: dict, name: str) -> str:
    return f"{results(cfg)}/logs/{name}.log"


def benchmark(cfg: dict, name: str) -> str:
    return f"{results(cfg)}/benchmarks/{name}.tsv"


def tasks(cfg: dict, domain: str) -> str:
    return f"{results(cfg)}/tasks/{domain}.json"


# ---- models -------------------------------------------------------------------------------------
def embedded_model(cfg: dict) -> str:
    return f"{results(cfg)}/model/embedded"


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
def run_dir(cfg: dict, init: str, train_domain: str, variant: str, seed: Any) -> str:
    return f"{results(cfg)}/runs/{init}/{train_domain}/{variant}/seed{seed}"


def segment_manifest(run_folder: str, start: int, end: int) -> str:
    return f"{run_folder}/segment_{start}_{end}.json"


def checkpoint(run_folder: str, step: Any) -> str:
    return f"{run_folder}/checkpoints/step_{step}"


def eval_file(cfg: dict, init: str, train_domain: str, variant: str, seed: Any, step: Any, eval_domain: str) -> str:
    return f"{results(cfg)}/eval/{init}/{train_domain}/{variant}/seed{seed}/step{step}/{eval_domain}.json"


def run_summary(cfg: dict, part: str, run_path: str) -> str:
    return f"{results(cfg)}/summary/{part}/{run_path}.csv"


def base_summary(cfg: dict, init: str, variant: str) -> str:
    return f"{results(cfg)}/summary/base/{init}/{variant}.csv"


# ---- property logs, tables, figures ---------------------------------------------------------------
def properties(cfg: dict, domain: str) -> str:
    return f"{results(cfg)}/properties/{domain}.json"


def properties_table(cfg: dict) -> str:
    return f"{results(cfg)}/properties/properties.csv"


def table(cfg: dict, name: str, ext: str = "csv") -> str:
    return f"{results(cfg)}/tables/{name}.{ext}"


def figure(cfg: dict, name: str, ext: str = "png") -> str:
    return f"{results(cfg)}/figures/{name}.{ext}"
