"""Provenance: a small record of what produced a result (code, config, model, tasks, packages, machine).

``record(config=..., model=..., tasks=..., inputs=...)`` returns::

    {"gentax": {"version", "commit", "dirty"},      # git commit of this checkout (null outside git)
     "config_sha256": ...,                          # canonical JSON of the job's config slice (its params)
     "model": {"path", "sha256"},                   # the HF folder's defining files (weights, configs, tokenizer)
     "tasks": {"path", "fingerprint"},              # the eval task manifest's fingerprint (gentax tasks)
     "inputs": {path: sha256},                      # small input files (e.g. a table's run summaries)
     "packages": {torch, transformers, verl, vllm, snakemake},   # installed versions, null when absent
     "machine": {"platform", "python", "cpu", "cores", "gpus"},
     "created": UTC time}

Keys whose subject a job does not have are left out. The jobs (``job_record``) embed it in JSON
results or write it beside an output (``beside``: ``<stem>.provenance.json``); ``report_labels``
is what the Snakemake report shows. Package versions come from importlib.metadata (no imports).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from gentax.errors import GentaxError
from gentax.io import file_digest, read_result_json

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("torch", "transformers", "verl", "vllm", "snakemake")
#: the files that define a model folder (logs, trainer state and provenance beside them do not)
MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "chat_template.jinja", "*.safetensors", "pytorch_model*.bin")
SUFFIX = ".provenance.json"


def config_hash(config: Any) -> str:
    """sha256 of a config slice as canonical JSON (key order and container types do not matter)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def file_hash(path: str | os.PathLike) -> str:
    return file_digest(path)["sha256"]


def model_hash(folder: str | os.PathLike) -> str:
    """sha256 over the names and contents of the files that define an HF model folder."""
    folder = Path(folder)
    files = sorted({p for pattern in MODEL_FILES for p in folder.glob(pattern) if p.is_file()})
    if not files:
        raise GentaxError(f"{folder}: no model files ({', '.join(MODEL_FILES)}) to fingerprint")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + file_hash(path).encode() + b"\n")
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def code_version() -> dict[str, Any]:
    """gentax's version and the git commit of this checkout (``dirty``: tracked files changed)."""
    from gentax import __version__

    def git(*args: str) -> str | None:
        if shutil.which("git") is None:
            return None
        done = subprocess.run(["git", "-C", str(PACKAGE_ROOT), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no")) if commit else None
    return {"version": __version__, "commit": commit, "dirty": dirty}


@functools.lru_cache(maxsize=1)
def packages() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


@functools.lru_cache(maxsize=1)
def machine() -> dict[str, Any]:
    cpu = platform.processor() or None
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    gpus: list[str] = []
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
        if done.returncode == 0:
            gpus = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu": cpu,
            "cores": os.cpu_count(), "gpus": gpus}


def record(*, config: Any = None, model: str | os.PathLike | None = None, tasks: str | os.PathLike | None = None,
           inputs: Iterable[str | os.PathLike] = ()) -> dict[str, Any]:
    """The provenance record of one result (see the module docstring)."""
    out: dict[str, Any] = {"gentax": code_version()}
    if config is not None:
        out["config_sha256"] = config_hash(config)
    if model is not None:
        out["model"] = {"path": str(model), "sha256": model_hash(model)}
    if tasks is not None:
        manifest = json.loads(Path(tasks).read_text())
        out["tasks"] = {"path": str(tasks), "fingerprint": manifest.get("fingerprint")}
    inputs = [str(p) for p in inputs]
    if inputs:
        out["inputs"] = {p: file_hash(p) for p in inputs}
    out["packages"] = packages()
    out["machine"] = machine()
    out["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return out


def job_record(spec: Any, dtype_setting: str | None = "auto", **subjects: Any) -> dict[str, Any]:
    """The provenance record of a workflow job's result: ``record`` with the job's spec as its config
    (``gentax.jobspec``), and ``compute``: the dtype the job's model computed in (``engines.dtype``,
    chosen by ``gentax.dtype`` for the device the job has)."""
    from gentax import dtype

    device = "cuda" if machine()["gpus"] else "cpu"  # what the engines and the hf generator pick
    return {**record(config=spec, **subjects), "compute": dtype.record(dtype_setting or "auto", device)}


def beside(output: str | os.PathLike) -> Path:
    """Where the record of ``output`` sits: ``results/tables/t.csv`` -> ``results/tables/t.provenance.json``."""
    path = Path(output)
    return path.with_name(path.name.split(".", 1)[0] + SUFFIX) if path.suffix else path.with_name(path.name + SUFFIX)


def report_labels(name: str, path: str | os.PathLike) -> dict[str, str]:
    """The columns the Snakemake report shows for one table/figure: its name and its provenance."""
    rec = read_result_json(path, keys=("gentax", "packages", "machine", "created"))
    code = rec["gentax"]
    commit = (code["commit"][:12] if code["commit"] else "not a git checkout") + (" (dirty)" if code.get("dirty") else "")
    labels = {"name": name, "gentax": str(code["version"]), "commit": commit,
              "config sha256": str(rec.get("config_sha256", ""))[:12]}
    labels.update({pkg: version or "-" for pkg, version in rec["packages"].items()})
    gpus = rec["machine"].get("gpus") or []
    labels["machine"] = f"{rec['machine'].get('cpu')}" + (f", {len(gpus)} x {gpus[0]}" if gpus else ", no GPU")
    labels["created"] = rec["created"]
    return labels
