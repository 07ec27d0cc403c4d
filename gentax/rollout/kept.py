"""What lets an evaluation job of several domains rerun only the domains whose evaluation changed.

Snakemake reruns a job whole, so each domain's result is kept beside the outputs under the key of
what it depends on, and a rerun puts back the results whose key is unchanged::

    key = result_key(settings, model=..., tasks=..., filler_reference=...)
    summary = restore(prefix, key)   # the three files back (hard links, the JSON last), or None
    keep(prefix, key)                # after the domain's result was written

The key hashes the domain's settings, the task manifest's and filler reference's bytes, the model
folder's files (name, size, modification time) and every file of the gentax package. Kept results
live in ``<result folder>/.kept/`` and are put back only when their tables match the JSON's
digests. ``GENTAX_EVAL_REPLAY=1`` plays every domain.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Mapping

from gentax import io as gio
from gentax.evalfile import DIGESTS, output_files

KEPT = ".kept"
REPLAY_ENV = "GENTAX_EVAL_REPLAY"


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over the gentax package's files (names and bytes), once per process."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _file_digest(path: str | None) -> str | None:
    return None if path is None else gio.file_digest(path)["sha256"]


def result_key(settings: Mapping[str, Any], *, model: str | None, tasks: str, filler_reference: str | None) -> str:
    """The key of one domain's result: what it depends on (module docstring), 24 hex digits."""
    model_files = None if model is None else gio.files_stat(model)
    parts = {"settings": dict(settings), "tasks": _file_digest(tasks), "model": model_files,
             "filler_reference": _file_digest(filler_reference), "code": code_digest()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _kept(prefix: str, key: str) -> list[Path]:
    folder, name = Path(prefix).parent, Path(prefix).name
    # ".kept" last: a glob for the results' *.json or *.parquet does not find what is kept
    return [folder / KEPT / f"{name}.{key}{path.removeprefix(prefix)}{KEPT}" for path in output_files(prefix)]


def restore(prefix: str, key: str) -> dict | None:
    """Put the result kept under ``key`` back at ``prefix`` (tables first, the JSON last, each
    linked to a temporary name and renamed); its summary, or None when there is none to put back
    (or ``GENTAX_EVAL_REPLAY=1``)."""
    if os.environ.get(REPLAY_ENV) == "1":
        return None
    kept = _kept(prefix, key)
    if not all(path.is_file() for path in kept):
        return None
    try:
        summary = json.loads(kept[0].read_text())
        digests = summary[DIGESTS]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    targets = output_files(prefix)
    if any(digests.get(Path(target).name) != gio.file_digest(path) for target, path in zip(targets[1:], kept[1:])):
        return None  # a kept table changed: play the domain again
    gio.remove_outputs(targets)
    for path, target in zip(kept[1:], targets[1:]):
        _link(path, Path(target))
    _link(kept[0], Path(targets[0]), copy=True)  # the JSON last: it marks the result complete
    return summary


def keep(prefix: str, key: str) -> None:
    """Keep the result at ``prefix`` under ``key``, in place of what was kept for it before."""
    kept = _kept(prefix, key)
    kept[0].parent.mkdir(exist_ok=True)
    name = Path(prefix).name
    for old in kept[0].parent.glob(f"{name}.*"):
        if not old.name.startswith(f"{name}.{key}."):
            old.unlink(missing_ok=True)
    for index, (target, path) in enumerate(zip(output_files(prefix), kept)):
        _link(Path(target), path, copy=index == 0)


def _link(source: Path, target: Path, copy: bool = False) -> None:
    """``target`` becomes a hard link to ``source`` (a copy with ``copy`` or where the file system
    has no hard links), atomically (``gentax.io.atomic_path``: a kill leaves no temporary behind)."""
    with gio.atomic_path(target) as temporary:
        try:
            if copy:
                shutil.copyfile(source, temporary)
            else:
                os.link(source, temporary)
        except OSError:
            shutil.copyfile(source, temporary)
