"""Atomic writes: a result file is either absent or complete, never half-written.

Write to a temporary sibling, fsync, then ``os.replace`` (atomic on POSIX within one
filesystem). For folders, build in a temporary sibling folder and rename it into place.

A kill (SIGKILL, preemption) during a write leaves its temporary sibling behind
(``.<name>.<random>.tmp``, see ``atomic_path``); the owner of an output removes those of its
own names with ``remove_temporaries`` when it starts again (and after success). Outputs that
belong together are cleared with ``remove_outputs`` before they are rewritten, the marker of
completeness first, so a kill can never leave an old marker beside new files.

``exclusive(path, what)`` is a lock file that says who holds it (host, pid, since when); the
kernel drops the lock when its holder dies, so a lock left by a dead process is taken over.

Config files: ``read_yaml`` is their one reader; ``repo_path`` resolves a path they give
(relative ones from ``REPO_ROOT``, the repository's root, config.yaml's folder).
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import fcntl
import json
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from gentax.errors import ConfigError, GentaxError

TEMP_SUFFIX = ".tmp"
REPO_ROOT = Path(__file__).resolve().parents[1]  # config.yaml's folder


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success move it onto ``path``.

    Works for files and folders: whatever the body creates at the yielded path replaces
    ``path``. On an exception the temporary is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent))
    target = tmp / path.name
    try:
        yield target
        if target.is_file():
            with open(target, "rb") as fh:
                os.fsync(fh.fileno())
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(target, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def repo_path(path: str | os.PathLike) -> Path:
    """A path in a config file: absolute as given; relative ones from the repository root."""
    path = Path(path)
    return path if path.is_absolute() else REPO_ROOT / path


def read_yaml(path: str | os.PathLike) -> dict:
    """The one YAML reader of config files: a mapping, or ConfigError naming the file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:  # one line: where and what (PyYAML's text spans several)
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return data


def deep_merge(base: dict, override: dict) -> dict:
    """The one merge of config layers: ``override`` over ``base``, mappings merged key by key at
    every depth, anything else (lists included) replaced; inputs are not modified."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def default_cache_dir() -> Path:
    """``$GENTAX_CACHE`` or ``~/.cache/gentax``: where derived artefacts are kept between runs."""
    return Path(os.environ.get("GENTAX_CACHE") or Path.home() / ".cache" / "gentax")


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def remove_temporaries(folder: str | os.PathLike, names: str | Iterable[str] = "*") -> list[Path]:
    """Remove what killed ``atomic_path`` writes left in ``folder`` for the given output names
    (glob patterns; "*" = every output there). Only the owner of those outputs may call this: a
    temporary of a write in progress looks the same. Returns the removed paths."""
    folder = Path(folder)
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for name in [names] if isinstance(names, str) else names:
        for tmp in sorted(folder.glob(f".{name}.*{TEMP_SUFFIX}")):
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def remove_outputs(paths: Iterable[str | os.PathLike]) -> None:
    """Delete ``paths`` in the order given (put the marker of completeness first)."""
    for path in map(Path, paths):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def _holder_text(fh) -> str:
    fh.seek(0)
    try:
        holder = json.loads(fh.read() or "{}")
    except ValueError:
        holder = {}
    if not holder:
        return "another process"
    return f"pid {holder.get('pid')} on host {holder.get('host')} (since {holder.get('since')})"


@contextlib.contextmanager
def exclusive(path: str | os.PathLike, what: str) -> Iterator[str | None]:
    """Hold an exclusive lock on ``path`` (created if needed) for the body; raise GentaxError
    naming the holder (host, pid, start time) when another live process holds it.

    POSIX record locks (``fcntl.lockf``): the kernel releases them when the holder exits or is
    killed, also over NFS with its lock service, so a lock file left by a dead process is simply
    taken over. Yields the previous holder ("pid P on host H ...") when one is recorded, else None.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")
    try:
        try:
            fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise GentaxError(f"{what} is in use by {_holder_text(fh)}; wait for it to finish or stop it "
                              f"(lock file {path})") from None
        previous = _holder_text(fh) if path.stat().st_size else None
        fh.seek(0)
        fh.truncate()
        since = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        fh.write(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": since}) + "\n")
        fh.flush()
        try:
            yield previous
        finally:
            fh.seek(0)
            fh.truncate()  # an empty file: nobody holds it (the file itself stays; deleting it races)
            fh.flush()
    finally:
        fh.close()  # closing drops the lock
