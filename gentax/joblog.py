"""A job's log, kept across its attempts: ``gentax VERB --job SPEC --log FILE`` (docs/workflow.md
"A job's log keeps every attempt").

Snakemake removes a job's declared log before each attempt, so the lines live in a history file
beside it, ``.<name>.attempts``, that nothing removes; the log is a second name of it (a hard
link), made again by each attempt: every attempt's lines, an orphan's included, read under the
log's name. ``attach`` (``gentax.cli.main`` calls it first) appends an attempt's header and points
this process's stdout and stderr there; at exit the attempt adds what it used (wall, CPU, peak
memory from ``getrusage``: the children it waited for, not Ray's workers), which ``usage`` reads
back (Snakemake's benchmark files sample CPU time and miss up to a job's last 30 s).
"""

from __future__ import annotations

import atexit
import datetime
import fcntl
import os
import re
import resource
import socket
import sys
import time
from pathlib import Path

#: the start of every attempt's header line
HEADER = "==== gentax attempt "
#: the start of the line an attempt ends with (no HEADER inside: attempts are counted by HEADER)
USED = "==== gentax used by attempt "
HISTORY_SUFFIX = ".attempts"
_USED_LINE = re.compile(re.escape(USED) + r"(\d+): wall ([\d.]+) s, CPU ([\d.]+) s \(process ([\d.]+) s, "
                        r"children ([\d.]+) s\), peak memory ([\d.]+) GB \(process\), ([\d.]+) GB")


def history(log: str | os.PathLike) -> Path:
    """The file that holds every attempt of ``log`` (beside it: one filesystem, so a hard link works)."""
    log = Path(log)
    return log.with_name(f".{log.name}{HISTORY_SUFFIX}")


def attach(log: str | os.PathLike, command: str) -> int:
    """Append an attempt header for ``command`` to ``log``'s history, make ``log`` a name of it, and
    send this process's stdout and stderr there; returns the attempt's number."""
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(history(log), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # two attempts at once (an orphan and a retry) number and link in turn
    try:
        fd, written = _adopt(log, fd)
        attempt = _attempts(written) + 1
        since = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        os.write(fd, f"{HEADER}{attempt}: host {socket.gethostname()}, pid {os.getpid()}, {since} UTC: "
                     f"{command}\n".encode())
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    atexit.register(_write_usage, attempt, time.perf_counter())
    return attempt


def usage_line(attempt: int, started: float) -> str:
    """The line an attempt that began at ``started`` (``time.perf_counter()``) ends with."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    own_cpu, children_cpu = own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime
    return (f"{USED}{attempt}: wall {time.perf_counter() - started:.1f} s, CPU {own_cpu + children_cpu:.1f} s "
            f"(process {own_cpu:.1f} s, children {children_cpu:.1f} s), peak memory {own.ru_maxrss * 1024 / 1e9:.2f} GB "
            f"(process), {children.ru_maxrss * 1024 / 1e9:.2f} GB (largest child)")  # ru_maxrss: KiB on Linux


def _reap_ended_children() -> None:
    """Wait for the children that ended and were not waited for (a JVM its gateway stopped but never
    reaped), so their CPU counts in RUSAGE_CHILDREN; one still running is left alone."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no children left
            return
        if pid == 0:  # only running ones
            return


def _write_usage(attempt: int, started: float) -> None:
    _reap_ended_children()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed stream: the line goes to the descriptor regardless
            pass
    try:
        os.write(2, (usage_line(attempt, started) + "\n").encode())
    except OSError:
        pass  # the log's disk is full or gone: nothing else to tell it with


def usage(log: str | os.PathLike) -> dict | None:
    """What the last attempt of ``log`` that ended used: {"attempt", "wall_s", "cpu_s", "process_cpu_s",
    "children_cpu_s", "peak_gb", "child_peak_gb"}; None when no attempt wrote its line."""
    found = None
    with open(log, errors="replace") as fh:
        for line in fh:
            if line.startswith(USED):
                found = _USED_LINE.match(line) or found
    if found is None:
        return None
    keys = ("wall_s", "cpu_s", "process_cpu_s", "children_cpu_s", "peak_gb", "child_peak_gb")
    return {"attempt": int(found.group(1)), **dict(zip(keys, map(float, found.groups()[1:])))}


def _adopt(log: Path, fd: int) -> tuple[int, Path]:
    """Make ``log`` a name of the history open at ``fd``; returns the descriptor to write to and its
    file. A log that is another file (written by hand) is appended to the history first, so its
    lines stay. On a filesystem without hard links the log itself is appended to (an attempt
    Snakemake removes is lost there)."""
    kept = os.fstat(fd)
    try:
        found = os.stat(log)
    except FileNotFoundError:
        found = None
    if found is not None and (found.st_dev, found.st_ino) == (kept.st_dev, kept.st_ino):
        return fd, history(log)
    if found is not None:
        with open(log, "rb") as old:
            for block in iter(lambda: old.read(1 << 20), b""):
                os.write(fd, block)
    spare = log.with_name(f".{log.name}.{os.getpid()}.link")
    spare.unlink(missing_ok=True)
    try:
        os.link(history(log), spare)
    except OSError:
        spare.unlink(missing_ok=True)
        os.close(fd)
        return os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644), log
    os.replace(spare, log)  # atomic: the log's name is never missing once it was there
    return fd, history(log)


def _attempts(path: Path) -> int:
    """How many attempt headers the history holds."""
    marker, count, tail = ("\n" + HEADER).encode(), 0, b"\n"  # a header starts the file or a line
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            count += (tail + block).count(marker)
            tail = block[-(len(marker) - 1):]  # a marker across two blocks, never one counted twice
    return count


def option(argv: list[str]) -> str | None:
    """The ``--log FILE`` of a command line (None without one), read before the parser is built: the
    log takes the output of everything after it, the parser's errors included."""
    for at, word in enumerate(argv):
        if word == "--log" and at + 1 < len(argv):
            return argv[at + 1]
        if word.startswith("--log="):  # argparse's other spelling of the same option
            return word.split("=", 1)[1]
    return None
