"""Glue between Snakemake jobs and gentax: one function per workflow step.

``workflow_scripts/*.py`` are one-liners that hand the ``snakemake`` object's fields to these
functions. Each function runs the user-facing ``gentax`` command for its step in a subprocess
(the same command a user would type; its output goes to the rule's log), so the workflow and the
CLI cannot drift apart. Per-job settings arrive as the rule's ``params`` (a config slice), which
Snakemake tracks: changing e.g. one domain's augmentation eps reruns only the jobs that read it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import yaml

from gentax import io as gio
from gentax import provenance
from gentax.errors import GentaxError
from gentax.plan import sft_section

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # so the subprocess runs this same gentax


def run_gentax(args: Sequence[Any], log: str | os.PathLike) -> None:
    """Run ``python -m gentax ARGS`` with stdout/stderr appended to ``log``; raise on failure."""
    argv = [sys.executable, "-m", "gentax", *map(str, args)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as fh:
        fh.write("$ " + " ".join(argv) + "\n")
        fh.flush()
        code = subprocess.call(argv, stdout=fh, stderr=subprocess.STDOUT, env=env)
    if code != 0:
        raise GentaxError(f"`gentax {' '.join(map(str, args))}` failed with exit code {code}; see {log}")


def write_job_config(path: str | os.PathLike, **sections: Any) -> str:
    """Write a job's config slice (YAML) atomically; returns the path."""
    gio.write_text(path, yaml.safe_dump(_plain(sections), sort_keys=True))
    return str(path)


def _plain(obj: Any) -> Any:
    """Snakemake hands params as its own Namedlist/dict subclasses; YAML wants plain types."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def _tracking(smk) -> dict:
    """The workflow's tracking section: read from the config, not a job param, so that switching a
    backend on does not rerun training."""
    return _plain(smk.config.get("tracking") or {})


def _provenance(smk, **subjects: Any) -> dict:
    """The provenance record of this job's result: its params are the config slice that made it;
    ``compute``: the dtype the job's model computed in (engines.dtype, chosen by gentax.dtype)."""
    from gentax import dtype

    record = provenance.record(config=_plain(dict(smk.params.items())), **subjects)
    return {**record, "compute": dtype.record(smk.params.get("dtype") or "auto", _job_device())}


def _job_device() -> str:
    """cuda where the job has a GPU (what the engines and the hf generator pick), else cpu."""
    return "cuda" if provenance.machine()["gpus"] else "cpu"


def _embed_provenance(path: str | os.PathLike, record: dict) -> None:
    """Add ``record`` under key "provenance" to the JSON result at ``path`` (rewritten atomically)."""
    data = json.loads(Path(path).read_text())
    gio.write_json(path, {**data, "provenance": record})


def _domain_args(domain: dict) -> list[str]:
    args = ["--max-steps", domain["max_steps"]]
    for key, value in sorted(_plain(domain.get("options") or {}).items()):
        args += ["--option", f"{key}={json.dumps(value, separators=(',', ':'))}"]
    return args


# ---- one function per rule (rules/*.smk) ----------------------------------------------------------
def tasks(smk) -> None:
    p = smk.params
    run_gentax(["tasks", "--domain", smk.wildcards.domain, "--episodes", p.episodes,
                *_domain_args(p.domain), "--out", smk.output[0]], smk.log[0])


def embedded_model(smk) -> None:
    run_gentax(["model", "embedded", "--out", smk.output[0]], smk.log[0])


def rl_section(rl: dict, *, save_every: int, rollout: str | None = None, dtype: str = "auto") -> dict:
    """config.yaml -> the RL section `gentax train rl --config` reads (gentax/train/rl_defaults.yaml).

    The one place where the workflow's config maps onto the RL engines' config; the engines map it
    on to verl's Hydra overrides (gentax.train.verl_engine) or the local engine. What is specific
    to the run (its domains' settings, augmentation, thinking) is not here but in its run spec
    (``gentax.runspec``), which the job hands the engine beside this section.
    """
    section = {**_plain(rl), "save_every": int(save_every)}
    if dtype != "auto":  # engines.dtype overrides the run-time choice (gentax.dtype)
        from gentax.dtype import rl_autocast

        section["autocast"] = rl_autocast(dtype)
    if rollout:  # engines.rollout -> the verl engine's rollout backend
        section["verl"] = {**section.get("verl", {}), "rollout": rollout}
    return section


RUN_SPEC_FILE = "run_spec.json"  # in the run folder: the run spec its segments were trained with


def rl_segment(smk) -> None:
    """Train steps start+1..end of one run (resuming the run folder), then list its checkpoints.

    The job's ``run_spec`` param (``gentax.plan.runs``, a ``RunSpec.to_dict()``) is written into
    the run folder (``run_spec.json``, atomically) and handed to ``gentax train rl --run-spec``."""
    from gentax.runspec import RunSpec

    p = smk.params
    run_dir = Path(p.run_dir)
    run = RunSpec.from_dict(_plain(p.run_spec))
    spec_file = run_dir / RUN_SPEC_FILE
    gio.write_json(spec_file, run.to_dict())
    section = rl_section(p.rl, save_every=p.save_every, rollout=p.get("rollout"),
                          dtype=p.get("dtype") or "auto")
    if p.get("filler"):  # the filler arm: its thinking run's folder holds the per-step filler lengths
        section["filler"] = filler_rl_section(p.filler, smk.input.thinking)
    job_config = write_job_config(run_dir / f"config_segment_{p.start}_{p.end}.yaml", rl=section,
                                  tracking=_tracking(smk))
    run_gentax(["train", "rl", "--engine", p.engine, "--preset", p.preset, "--config", job_config,
                "--init", p.init_model, "--run-spec", spec_file,
                "--steps", f"{p.start}:{p.end}", "--out", run_dir, "--no-progress"], smk.log[0])
    saved = [s for s in range(p.start + 1, p.end + 1) if s % p.save_every == 0 or s == p.end]
    checkpoints = {str(s): str(run_dir / "checkpoints" / f"step_{s}") for s in saved}
    missing = [path for path in checkpoints.values() if not (Path(path) / "config.json").is_file()]
    if missing:
        raise GentaxError(f"training finished but these HF checkpoints are missing: {', '.join(missing)}")
    record = _provenance(smk, model=p.init_model, tasks=smk.input.get("tasks"))
    gio.write_json(smk.output[0], {"run_dir": str(run_dir), "start": p.start, "end": p.end, "checkpoints": checkpoints,
                                   "provenance": record})


_SFT_SECTION = {"v2": "sft", "embedded-base": "embedded_base"}  # what `gentax sft --preset` reads


def sft_data(smk) -> None:
    """The SFT mix: V2's (v1_model given) or the embedded base's expert warm start."""
    p = smk.params
    preset = "v2" if p.get("v1_model") else "embedded-base"
    out = Path(smk.output[0])
    section = {**sft_section(_plain(p.sft)), "history_length": int(p.rl["history_length"]),
               "max_new_tokens": int(p.rl["max_new_tokens"]), "temperature": float(p.rl["temperature"])}
    if p.get("generator"):
        section["generator"] = p.generator
    job_config = write_job_config(out.parent / f"{out.name}.config.yaml", **{_SFT_SECTION[preset]: section},
                                  domains=_plain(p.domains), seed=int(p.seed))
    args = ["sft", "build-data", "--config", job_config, "--preset", preset, "--out", out, "--quiet"]
    if p.get("v1_model"):
        args += ["--v1", p.v1_model]
    run_gentax(args, smk.log[0])
    gio.write_json(provenance.beside(out), _provenance(smk, model=p.get("v1_model")))


def sft_train_section(sft: dict, *, dtype: str = "auto") -> dict:
    """config.yaml's SFT section as `gentax sft train` reads it, with ``engines.dtype`` (when not
    ``auto``) as its precision, as ``rl_section`` does for the RL engines."""
    section = sft_section(sft)
    if dtype != "auto":  # engines.dtype overrides the run-time choice (gentax.dtype)
        from gentax.dtype import sft_precision

        section["precision"] = sft_precision(dtype)
    return section


def sft_train(smk) -> None:
    p = smk.params
    preset = "embedded-base" if smk.rule == "embedded_base" else "v2"
    out = Path(smk.output[0])
    section = sft_train_section(_plain(p.sft), dtype=p.get("dtype") or "auto")
    job_config = write_job_config(out.parent / f"{out.name}.config.yaml", **{_SFT_SECTION[preset]: section},
                                  seed=int(p.seed), tracking=_tracking(smk))
    run_gentax(["sft", "train", "--config", job_config, "--preset", preset, "--data", smk.input.data,
                "--init", p.init_model, "--out", out], smk.log[0])
    gio.write_json(provenance.beside(out), _provenance(smk, model=p.init_model))


def _rollout_args(p, domain_name: str, domain: dict) -> list[str]:
    return ["--domain", domain_name, "--split", "eval", "--episodes", p.episodes,
            "--temperature", p.temperature, "--top-p", p.top_p, "--max-new-tokens", p.max_new_tokens,
            "--history-length", p.history_length, "--generator", p.generator, "--dtype", p.get("dtype") or "auto", "--seed", p.seed,
            "--quiet", *_domain_args(domain), *(["--errors-as-losses"] if p.get("errors_as_losses") else [])]


def filler_rl_section(filler: dict, thinking_manifest: str) -> dict:
    """The RL section's ``filler`` of a filler run: controls.filler's source and token, and the
    folder of the thinking run it matches (read from that run's segment manifest)."""
    reference = json.loads(Path(thinking_manifest).read_text())["run_dir"]
    return {"source": str(filler["source"]), "token": str(filler["token"]), "reference": str(reference)}


def filler_eval_args(filler: dict, thinking_eval: str) -> list[str]:
    """``gentax eval`` arguments of a filler-mode evaluation matched to ``thinking_eval`` (the
    thinking evaluation of the same cell); ``eval_tokens`` an integer fixes the length instead."""
    args = ["--filler-reference", thinking_eval, "--filler-source", filler["source"], "--filler-token", filler["token"]]
    if filler["eval_tokens"] != "matched":
        args += ["--filler-tokens", int(filler["eval_tokens"])]
    return args


def eval_checkpoint(smk) -> None:
    """pass@1 of one checkpoint on one eval domain: <out>.json (+ .steps/.episodes.parquet)."""
    p = smk.params
    out = smk.output.summary
    args = ["eval", "--model", p.model, *_rollout_args(p, smk.wildcards.eval_domain, p.domain), "--think", p.think,
            "--out", out[: -len(".json")] + ".parquet"]
    if p.get("filler"):
        args += filler_eval_args(p.filler, smk.input.thinking)
    run_gentax(args, smk.log[0])
    _embed_provenance(out, _provenance(smk, model=p.model, tasks=smk.input.tasks))


def properties(smk) -> None:
    p = smk.params
    domain = {**_plain(p.domain), "max_steps": p.t_max}  # T_max for every domain (STUDY.md Table 3)
    out = smk.output[0]
    aug = _plain(p.get("augmentation") or {})  # a richness level of the controls: its augmented states
    aug_args = ["--aug-eps", aug["eps"], "--aug-p", aug["p"], "--aug-kind", aug["kind"]] if aug.get("eps") else []
    run_gentax(["properties", "--model", p.model, *_rollout_args(p, smk.wildcards.domain, domain), "--t-max", p.t_max,
                *aug_args, "--out", out[: -len(".json")] + ".parquet"], smk.log[0])
    _embed_provenance(out, _provenance(smk, model=p.model, tasks=smk.input.tasks))


def summarize(smk) -> None:
    """Long-format success rows (the analysis input) from the eval JSONs of one run / initial policy,
    with each row's success per task from the episodes table beside its JSON (written before it)."""
    import pandas as pd

    from gentax.analysis.summary import TASK_OUTCOMES, format_task_outcomes
    from gentax.rollout.evaluation import output_files, task_outcomes

    keys = dict(smk.params.run_keys)
    rows = []
    for path in smk.input:
        step_dir = Path(path).parent
        data = json.loads(Path(path).read_text())
        if data["success_rate"] is None:
            raise GentaxError(f"{path}: an env error ended every one of its {data['episodes']} episodes "
                              f"({'; '.join(data['error_reasons'])}); no success rate to report")
        episodes_path = output_files(str(path)[: -len(".json")])[2]
        if not Path(episodes_path).is_file():
            raise GentaxError(f"{path}: its episodes table {episodes_path} is missing (rerun this evaluation)")
        outcomes = task_outcomes(pd.read_parquet(episodes_path), data.get("errors_as_losses", False))
        rows.append({**keys, "step": int(step_dir.name.removeprefix("step")), "eval_domain": data["domain"],
                     "success": data["success_rate"], "invalid_rate": data["invalid_rate"],
                     "episodes": data["scored_episodes"], "mean_length": data["mean_length"],
                     "errors": data["errors"], "error_rate": data["error_rate"],
                     TASK_OUTCOMES: format_task_outcomes(outcomes)})
    frame = pd.DataFrame(rows).sort_values(["step", "eval_domain"])
    with gio.atomic_path(smk.output[0]) as tmp:
        frame.to_csv(tmp, index=False)


def table(smk) -> None:
    _build_one(smk, {"csv": smk.output.csv, "md": smk.output.md, "tex": smk.output.tex})


def figure(smk) -> None:
    _build_one(smk, {"png": smk.output.png, "svg": smk.output.svg})


def _build_one(smk, outputs: dict[str, str]) -> None:
    from gentax.analysis.tables import build_one

    properties, controls = smk.input.get("properties"), smk.input.get("controls")
    with _logged(smk.log[0]):
        build_one(smk.wildcards.name, list(smk.input.summaries), properties, outputs, controls=controls,
                  window=tuple(smk.params.window), seed=int(smk.params.seed),
                  error_mark_pct=float(smk.params.error_mark_pct))
    inputs = [*smk.input.summaries, *[f for f in (properties, controls) if f]]
    gio.write_json(smk.output.provenance, _provenance(smk, inputs=inputs))


def properties_table(smk) -> None:
    """One row per domain from the property logs' JSON summaries (gentax properties)."""
    import pandas as pd

    rows = []
    for path in smk.input:
        data = json.loads(Path(path).read_text())
        rows.append({"domain": data["domain"], **data["measures"]})
    with gio.atomic_path(smk.output[0]) as tmp:
        pd.DataFrame(rows).sort_values("domain").to_csv(tmp, index=False)


def controls_properties_table(smk) -> None:
    """One row per level of the controls (gentax.controls.property_row) from its property log."""
    import pandas as pd

    from gentax.controls import ControlLevel, property_row

    rows = []
    for level, path in zip(smk.params.levels, smk.input):
        level = _plain(dict(level))
        run_label = level.pop("run_label")
        data = json.loads(Path(path).read_text())
        rows.append(property_row(ControlLevel(**level), run_label, data["measures"]))
    with gio.atomic_path(smk.output[0]) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)


@contextlib.contextmanager
def _logged(log: str):
    """Send this process's Python-level stdout/stderr to a job's log file."""
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        yield
