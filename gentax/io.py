"""Files: a result is either absent or complete, never half-written; one writer at a time.

- ``atomic_path``: write to a temporary sibling (a folder holding a locked ``.writer`` file), fsync,
  ``os.replace``. A killed write leaves its temporary; ``remove_temporaries`` removes those whose
  writer is gone (anyone may call it; ``atomic_path`` does for the name it writes).
  ``remove_outputs`` clears outputs that belong together, the marker of completeness first.
- ``write_manifest`` / ``manifest_problem`` / ``file_digest``: sizes and sha256 of what was written.
- ``exclusive`` / ``output_lock``: a lock file naming its holder; the kernel drops it when the
  holder dies, so a dead holder's lock is taken over.
- ``write_failure``: a write the machine refuses (full disk, quota, permission, read-only:
  ``WRITE_ERRNOS``) as one GentaxError naming the path, the cause and the free space.
- ``read_yaml`` / ``repo_path``: config files; ``read_result_json`` / ``_csv`` / ``_parquet``: a job's
  result, where a missing or damaged one is one GentaxError naming the job that rebuilds it.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import errno
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from gentax.errors import ConfigError, GentaxError

TEMP_SUFFIX = ".tmp"
REPO_ROOT = Path(__file__).resolve().parents[1]  # the clone: the package's parent and the Snakefile's folder
#: inside each temporary: the file its writer keeps locked while it writes
WRITER_FILE = ".writer"
#: the manifest of a folder: {relative path: {"bytes": size, "sha256": hex}} of every other file
MANIFEST_FILE = "gentax_manifest.json"
#: temporaries this process is writing now (the cleaner must not touch them: opening and closing
#: their writer file here would drop this process's own lock on it, a POSIX record-lock rule)
_LIVE_TEMPORARIES: set[Path] = set()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success whatever the body created there (a file or
    a folder) replaces ``path``; on an exception ``path`` is left untouched. First removes what
    killed writes of ``path`` left (``remove_temporaries``)."""
    path = Path(path)
    with refused_writes(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_temporaries(path.parent, glob.escape(path.name))
        tmp, writer = _new_temporary(path)
    target = tmp / path.name
    try:
        with refused_writes(path, inside=tmp):  # the body's writes too: a full disk is one line naming path
            yield target
            if target.is_file():
                with open(target, "rb") as fh:
                    os.fsync(fh.fileno())
            _commit(target, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # what a refused write left takes no more space
        _LIVE_TEMPORARIES.discard(tmp)
        writer.close()


#: errno of a write the machine refuses: a full disk or quota, a file too large, no permission, a
#: read-only filesystem, an immutable folder (chattr +i: EPERM)
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS}
#: libraries that write without Python's file objects say the errno in text (safetensors: "(os error 28)")
_OS_ERROR_TEXT = re.compile(r"os error (\d+)")


def _refused_errno(exc: BaseException) -> int | None:
    """The ``WRITE_ERRNOS`` member ``exc`` stands for, else None."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code is None and not isinstance(exc, OSError):
        found = _OS_ERROR_TEXT.search(str(exc))
        code = int(found.group(1)) if found else None
        if code is None and "inline_container" in str(exc) and "unexpected pos" in str(exc):
            code = errno.ENOSPC  # torch.save to a path: its zip writer's short write (a full disk) says no errno
    return code if code in WRITE_ERRNOS else None


def free_space(path: str | os.PathLike) -> str:
    """"N free of M on MOUNT" for the filesystem that holds ``path`` (its nearest existing folder)."""
    where = Path(os.path.abspath(path))
    while not where.exists() and where != where.parent:
        where = where.parent
    mount = where
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    try:
        usage = shutil.disk_usage(where)
    except OSError:
        return "free space unknown"
    return f"{_size(usage.free)} free of {_size(usage.total)} on {mount}"


def _size(n: float) -> str:
    """A byte count as people read it: 0 B, 9.7 MiB, 1.8 TiB."""
    unit = "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            break
        n /= 1024
    return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"


def write_failure(path: str | os.PathLike, exc: BaseException, label: str = "") -> GentaxError | None:
    """The one line for a write of ``path`` (``label``, default the path, names it: "evaluation
    output X") that ``exc`` ended because the machine refused it (``WRITE_ERRNOS``): the path, the
    cause, the file the refusal named where it is another, the free space there and the fix; None
    for any other error."""
    code = _refused_errno(exc)
    if code is None:
        return None
    named = getattr(exc, "filename", None)
    at = f" at {named}" if named and str(named) != str(path) else ""
    full = code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    fix = ("free space there (or set results: to a folder on a larger disk), then rerun the job" if full else
           "make the folder writable (or set results: to a writable folder), then rerun the job")
    return GentaxError(f"cannot write {label or path}: {os.strerror(code)} [{errno.errorcode[code]}]{at}; "
                       f"{free_space(path)}; {fix}")


@contextlib.contextmanager
def refused_writes(path: str | os.PathLike, label: str = "", inside: Path | None = None) -> Iterator[None]:
    """Around writes of ``path``: one that the machine refuses is ``write_failure``'s one line. With
    ``inside`` (a temporary), a refusal naming a file elsewhere is no write of ``path``: it goes on
    as it is (a read of an input the body may make, say)."""
    try:
        yield
    except GentaxError:
        raise
    except Exception as exc:  # noqa: BLE001 -- re-raised unless it is a refused write
        named = getattr(exc, "filename", None)
        if inside is not None and named and not Path(os.path.abspath(named)).is_relative_to(os.path.abspath(inside)):
            raise
        failure = write_failure(path, exc, label)
        if failure is None:
            raise
        raise failure from None


def _commit(target: Path, path: Path) -> None:
    """The rename that completes every atomic write (one function: benchmarks/kill_points.py stops
    a process here, at each write of the workflow)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    os.replace(target, path)


def _new_temporary(path: Path):
    """A fresh temporary folder beside ``path`` with its writer file locked by this process. A
    cleaner may take a just-made one for a dead writer's (not locked yet) and remove it: then the
    lock fails or the writer file is gone, and we make another."""
    while True:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent))
        _LIVE_TEMPORARIES.add(tmp)
        try:
            writer = open(tmp / WRITER_FILE, "a")
        except FileNotFoundError:
            _LIVE_TEMPORARIES.discard(tmp)
            continue
        try:
            fcntl.lockf(writer, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.stat(tmp / WRITER_FILE).st_ino == os.fstat(writer.fileno()).st_ino:
                return tmp, writer
        except OSError:
            pass
        writer.close()
        _LIVE_TEMPORARIES.discard(tmp)


def _remove_if_abandoned(tmp: Path) -> bool:
    """Remove temporary ``tmp`` when no live writer holds it; True when removed."""
    if tmp in _LIVE_TEMPORARIES:
        return False
    if not tmp.is_dir() or tmp.is_symlink():
        tmp.unlink(missing_ok=True)  # atomic_path makes folders; a plain file has no writer to ask
        return True
    try:
        writer = open(tmp / WRITER_FILE, "a")
    except OSError:  # removed meanwhile, or not ours to open (another user's): leave it
        return False
    with writer:
        try:
            fcntl.lockf(writer, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # its writer is alive
        shutil.rmtree(tmp, ignore_errors=True)
    return True


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


def files_stat(folder: str | os.PathLike) -> list[tuple[str, int, int]]:
    """(name below ``folder``, size, modification time in ns) of every file under it, sorted: what
    changes when a folder's files are written again, without reading them."""
    folder = Path(folder)
    return [(str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()]


def file_digest(path: str | os.PathLike) -> dict[str, Any]:
    """{"bytes": size, "sha256": hex} of one file."""
    with open(path, "rb") as fh:
        return {"bytes": os.path.getsize(path), "sha256": hashlib.file_digest(fh, "sha256").hexdigest()}


def digest_problem(path: str | os.PathLike, expected: dict[str, Any], deep: bool = True) -> str | None:
    """What is wrong with ``path`` against its recorded ``file_digest`` (None: it matches; with
    ``deep=False`` only the size is compared, which finds truncation without reading the file)."""
    path = Path(path)
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size != expected["bytes"]:
        return f"{size} bytes, {expected['bytes']} written"
    if deep and file_digest(path)["sha256"] != expected["sha256"]:
        return "content differs from what was written (sha256)"
    return None


def write_manifest(folder: str | os.PathLike, exclude: Iterable[str] = ()) -> Path:
    """Record every file of ``folder`` (size, sha256) in ``folder/MANIFEST_FILE``, but those under
    the subfolders named in ``exclude`` (they keep their own); call it last."""
    folder = Path(folder)
    exclude = set(exclude)
    files = {str(p.relative_to(folder)): file_digest(p) for p in sorted(folder.rglob("*"))
             if p.is_file() and p.name != MANIFEST_FILE and p.relative_to(folder).parts[0] not in exclude}
    path = folder / MANIFEST_FILE
    path.write_text(json.dumps(files, indent=1, sort_keys=True) + "\n")
    return path


def manifest_problem(folder: str | os.PathLike, deep: bool = True) -> str | None:
    """The first file of ``folder`` that differs from its manifest, as "FILE: what" (None: every
    file matches, or the folder has no manifest); ``deep=False``: sizes only (``digest_problem``)."""
    folder = Path(folder)
    path = folder / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        files = json.loads(path.read_text())
    except ValueError:
        return f"{path}: not valid JSON"
    for name, expected in files.items():
        problem = digest_problem(folder / name, expected, deep)
        if problem:
            return f"{folder / name}: {problem}"
    return None


def rebuild_hint(path: str | os.PathLike) -> str:
    """The one command that rebuilds the workflow output ``path`` (the job that wrote it)."""
    return f"rebuild it: snakemake --force {path} (with the --profile/--configfile of the run)"


def result_problem(path: str | os.PathLike, problem: str, fix: str | None = None) -> GentaxError:
    """The error of a result that is "missing" or damaged (``problem``), naming it and ``fix``."""
    state = "is missing" if problem == "missing" else f"is corrupt ({problem})"
    return GentaxError(f"{path} {state}; {fix or rebuild_hint(path)}")


def read_result_json(path: str | os.PathLike, *, keys: Iterable[str] = (), fix: str | None = None) -> Any:
    """The JSON a job wrote at ``path`` (an object holding ``keys``, when given); missing, not JSON
    (a cut file) or without a key: one GentaxError naming it and ``fix`` (default ``rebuild_hint``)."""
    path = Path(path)
    if not path.is_file():
        raise result_problem(path, "missing", fix)
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise result_problem(path, f"not JSON: {exc}", fix) from None
    lacking = [key for key in keys if not isinstance(data, dict) or key not in data]
    if lacking:
        raise result_problem(path, f"no {', '.join(lacking)} in it", fix)
    return data


def read_result_csv(path: str | os.PathLike, *, fix: str | None = None):
    """The CSV table a job wrote at ``path`` as a DataFrame; missing, cut short (every table gentax
    writes ends with a line end: a cut one's last row would read as a row of blanks) or not a CSV
    table: one GentaxError naming it and ``fix``. A file cut exactly at a line end reads as fewer
    rows: only a recorded digest finds that (the evaluations' tables have one)."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise result_problem(path, "missing", fix)
    size = path.stat().st_size
    if size:
        with open(path, "rb") as fh:
            fh.seek(size - 1)
            if fh.read(1) != b"\n":
                raise result_problem(path, "cut short: its last line has no line end", fix)
    try:
        return pd.read_csv(path)
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError and EmptyDataError are ValueErrors
        raise result_problem(path, f"not a CSV table: {str(exc).strip().splitlines()[0]}", fix) from None


def read_result_parquet(path: str | os.PathLike, *, fix: str | None = None, **options):
    """The Parquet table a job wrote at ``path`` (pyarrow's ``read_table(path, **options)``);
    missing or unreadable (a cut file has no footer): one GentaxError naming it and ``fix``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise result_problem(path, "missing", fix)
    try:
        return pq.read_table(path, **options)
    except (OSError, pa.ArrowException) as exc:
        raise result_problem(path, f"not a readable Parquet file: {str(exc).strip().splitlines()[0]}", fix) from None


def _load_errors() -> tuple[type[BaseException], ...]:
    """What a library raises on a damaged file it loads: OSError and ValueError (transformers: an
    unreadable config or tokenizer), EOFError, safetensors' SafetensorError (a cut header)."""
    errors: list[type[BaseException]] = [OSError, ValueError, EOFError]
    try:
        from safetensors import SafetensorError

        errors.append(SafetensorError)
    except ImportError:  # no safetensors here: nothing loads it
        pass
    return tuple(errors)


@contextlib.contextmanager
def reading(path: str | os.PathLike, what: str, fix: str, also: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """Around a library's load of the result ``path`` (transformers' ``from_pretrained``,
    ``torch.load``): its errors on a damaged file (``_load_errors``, plus ``also``: torch.load's
    RuntimeError for a broken zip) are one GentaxError naming ``what`` ``path`` and ``fix``. Wrap
    the load alone: an error of the work after it (a device's) is no damaged file."""
    from gentax.errors import short_reason

    try:
        yield
    except _load_errors() + also as exc:
        raise GentaxError(f"{what} {path} is corrupt ({type(exc).__name__}: {short_reason(str(exc))}); {fix}") from None


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def remove_temporaries(folder: str | os.PathLike, names: str | Iterable[str] = "*") -> list[Path]:
    """Remove what killed ``atomic_path`` writes left in ``folder`` for the given output names
    (glob patterns; "*" = every output there). A temporary whose writer is still alive (here or
    in another process, on any host that shares the lock service) is kept. Returns the removed."""
    folder = Path(folder)
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for name in [names] if isinstance(names, str) else names:
        for tmp in sorted(folder.glob(f".{name}.*{TEMP_SUFFIX}")):
            if _remove_if_abandoned(tmp):
                removed.append(tmp)
    return removed


def remove_outputs(paths: Iterable[str | os.PathLike]) -> None:
    """Delete ``paths`` in the order given (put the marker of completeness first)."""
    for path in map(Path, paths):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def _read_holder(fh) -> dict[str, Any]:
    fh.seek(0)
    try:
        holder = json.loads(fh.read() or "{}")
    except ValueError:
        holder = {}
    return holder if isinstance(holder, dict) else {}


def describe_holder(holder: dict[str, Any] | None) -> str:
    """"pid P on host H (since T)" for a lock file's record ("another process" when empty)."""
    if not holder:
        return "another process"
    return f"pid {holder.get('pid')} on host {holder.get('host')} (since {holder.get('since')})"


@contextlib.contextmanager
def exclusive(path: str | os.PathLike, what: str, record: dict[str, Any] | None = None) -> Iterator[dict | None]:
    """Hold an exclusive lock on ``path`` (created if needed) for the body; GentaxError naming the
    holder (host, pid, since) when another live process holds it, or the place when the lock file
    cannot be made there.

    POSIX record locks (``fcntl.lockf``): the kernel releases them when the holder exits or is
    killed, also over NFS with its lock service. The file records host, pid, start time and
    ``record``'s keys while held (empty when free). Yields the previous holder's record when a dead
    holder's lock was taken over, else None. A lock this process holds already is held on for the
    body without a second descriptor (closing one would drop the process's POSIX lock), so a job
    may take its output's lock before its heavy imports and the code under it take it again. A
    probe file made and removed in the folder makes one that cannot be written fail at once."""
    path = Path(path)
    key = Path(os.path.realpath(path))  # one key per file, whatever the path (a results symlink)
    if holds(key):  # this process holds it (a job took its output's lock before the code under it)
        yield None
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a+")
    except OSError as exc:  # before any work: a place that cannot be written is bad input
        raise write_failure(path.parent, exc, what) or GentaxError(
            f"cannot write {what}: {exc.strerror} ({exc.filename}); choose a writable path") from None
    try:
        try:
            fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise GentaxError(f"{what} is in use by {describe_holder(_read_holder(fh))}; wait for it to finish or "
                              f"stop it (lock file {path})") from None
        _probe(path.parent, what)  # the folder itself: its lock file may be an old one (chattr +i leaves it writable)
        previous = _read_holder(fh) or None
        fh.seek(0)
        fh.truncate()
        since = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        fh.write(json.dumps({**(record or {}), "host": socket.gethostname(), "pid": os.getpid(), "since": since}) + "\n")
        fh.flush()
        _HELD[key] = os.getpid()
        try:
            yield previous
        finally:
            del _HELD[key]
            fh.seek(0)
            fh.truncate()  # an empty file: nobody holds it (the file itself stays; deleting it races)
            fh.flush()
    finally:
        fh.close()  # closing drops the lock


#: lock files held (their real paths) -> the pid that holds each: a forked child inherits this
#: table but not the POSIX locks, so it holds only those of its own pid
_HELD: dict[Path, int] = {}
#: the prefix of the probe file a lock writes and removes in its folder
PROBE_PREFIX = ".gentax-probe."


def _probe(folder: Path, what: str) -> None:
    """Create and remove a file in ``folder``: GentaxError (``write_failure``) when it cannot be written."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=PROBE_PREFIX, suffix=TEMP_SUFFIX)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise write_failure(folder, exc, what) or GentaxError(
            f"cannot write {what}: {exc.strerror} ({exc.filename}); choose a writable path") from None


def holds(path: str | os.PathLike) -> bool:
    """This process holds the lock file ``path`` (``exclusive``)."""
    return _HELD.get(Path(os.path.realpath(path))) == os.getpid()


def output_lock(path: str | os.PathLike, what: str):
    """``exclusive`` on ``.<name>.lock`` beside output ``path`` (a file or folder): one writer at a
    time; a second fails at once naming the first. GentaxError at once when the folder of
    ``path`` cannot be written (so no work is done first)."""
    path = Path(path)
    return exclusive(path.parent / f".{path.name}.lock", f"{what} {path}")
