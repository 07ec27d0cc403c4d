"""The processes a trainer starts end with it, however it ends.

A trainer's helpers (Ray's raylet and workers, vLLM's engine processes) outlive a kill of the
trainer and of its process group, keeping their GPU memory. So ``owning(token)`` puts
``OWNER_ENV=token`` into the trainer's environment, which every process it starts inherits, and on
leaving (success, an exception, SIGTERM) SIGKILLs what carries the token and every descendant it
started. Against SIGKILL a watcher (this file run as a script, in a session of its own) does the
same within ``WATCH_SECONDS`` of the trainer's end; should it die too, the next trainer that takes
the run-folder lock over ends them (``gentax.train.runs.locked``). Linux only (it reads /proc), with
nothing beyond the standard library, so the GPU smoke's bare machine can use it too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from typing import Iterator

OWNER_ENV = "GENTAX_TRAINER"
#: how often the watcher looks whether its trainer is still there (seconds)
WATCH_SECONDS = 0.25


def new_token() -> str:
    """A token no other trainer has: host, pid and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _pids() -> list[int]:
    return [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()]


def _read(pid: int, what: str) -> bytes | None:
    try:
        with open(f"/proc/{pid}/{what}", "rb") as fh:
            return fh.read()
    except OSError:  # gone, or another user's
        return None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time in clock ticks) from /proc/PID/stat."""
    raw = _read(pid, "stat")
    if raw is None:
        return None
    fields = raw[raw.rindex(b")") + 2:].split()  # the command name (in parentheses) may hold spaces
    return fields[0].decode(), int(fields[1]), int(fields[19])


def process_name(pid: int) -> str:
    """Its process title (argv[0] as it shows it: vLLM renames its processes ``VLLM::EngineCore``)."""
    raw = _read(pid, "cmdline") or b""
    return raw.split(b"\0")[0].decode(errors="replace") or "?"


def processes_marked(name: str, value: str) -> list[int]:
    """Pids of this host's processes (other than this one) whose environment has ``name=value``;
    those of other users cannot be read and are left out."""
    needle = f"{name}={value}".encode()
    return [pid for pid in _pids() if pid != os.getpid() and needle in (_read(pid, "environ") or b"").split(b"\0")]


def descendants(pid: int | None = None) -> list[int]:
    """Pids of the processes below ``pid`` (default: this one), children first."""
    children: dict[int, list[int]] = {}
    for other in _pids():
        stat = _stat(other)
        if stat:
            children.setdefault(stat[1], []).append(other)
    found, todo = [], [os.getpid() if pid is None else pid]
    while todo:
        below = children.get(todo.pop(0), [])
        found += below
        todo += below
    return found


def alive(pid: int) -> bool:
    """The process is there and not a zombie (one of ours is reaped)."""
    stat = _stat(pid)
    if stat is None:
        return False
    if stat[0] == "Z":  # a zombie holds nothing; reap it when it is ours
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


def kill(pids: list[int], timeout: float = 10.0) -> list[str]:
    """SIGKILL ``pids`` and wait up to ``timeout`` s until they are gone; "pid P (NAME)" of each."""
    ended = []
    for pid in dict.fromkeys(pids):
        name = process_name(pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        ended.append(f"pid {pid} ({name})")
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return ended


def end_marked(name: str, value: str, timeout: float = 10.0) -> list[str]:
    """SIGKILL what ``processes_marked(name, value)`` finds until a look finds none (a process caught
    in ``exec`` shows an empty environment for a moment; one may fork meanwhile) or ``timeout`` passes;
    "pid P (NAME)" of each."""
    ended, deadline = [], time.monotonic() + timeout
    while (marked := processes_marked(name, value)) and time.monotonic() < deadline:
        ended += kill(marked, max(deadline - time.monotonic(), 0.0))
    return list(dict.fromkeys(ended))


def _exit_on_sigterm(signum, _frame):
    sys.exit(128 + signum)  # unwinds through ``owning``'s finally (Ray's own handler does the same)


def _started(pid: int) -> int | None:
    stat = _stat(pid)
    return stat[2] if stat else None


def start_watcher(token: str, pid: int | None = None) -> subprocess.Popen:
    """A process, in a session of its own, that ends every process marked ``token`` once ``pid``
    (default: this one) is gone, however it ended, and then exits (``watch``)."""
    pid = os.getpid() if pid is None else pid
    return subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), "watch", str(pid), token],
                            stdin=subprocess.DEVNULL, start_new_session=True)


def watch(pid: int, token: str) -> list[str]:
    """Wait until ``pid`` (the process that has it now) is gone, then end what carries ``token`` and
    every process it had below it while it ran (Ray starts some agents with an environment of their
    own, without the token); what was ended."""
    started = _started(pid)
    below: set[tuple[int, int | None]] = set()
    while started is not None and alive(pid) and _started(pid) == started:
        below |= {(child, _started(child)) for child in descendants(pid)}
        time.sleep(WATCH_SECONDS)
    still_there = [child for child, when in below
                   if child != os.getpid() and when is not None and _started(child) == when]  # not the watcher
    return kill(sorted(set(still_there) | set(processes_marked(OWNER_ENV, token))))


@contextlib.contextmanager
def owning(token: str) -> Iterator[None]:
    """Mark everything started inside as this trainer's; end what is left of it on leaving, or,
    when this process is killed outright, the watcher does (module doc)."""
    before = {(pid, _started(pid)) for pid in descendants()}
    previous_env = os.environ.get(OWNER_ENV)
    os.environ[OWNER_ENV] = token
    start_watcher(token)  # a descendant started inside: ended below like the rest on a normal exit
    main_thread = threading.current_thread() is threading.main_thread()
    previous_handler = signal.signal(signal.SIGTERM, _exit_on_sigterm) if main_thread else None
    try:
        yield
    finally:
        started_inside = [pid for pid in descendants() if (pid, _started(pid)) not in before]
        kill(started_inside + processes_marked(OWNER_ENV, token))
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
        if previous_env is None:
            os.environ.pop(OWNER_ENV, None)
        else:
            os.environ[OWNER_ENV] = previous_env


if __name__ == "__main__":  # the watcher (start_watcher): python processes.py watch PID TOKEN
    if len(sys.argv) != 4 or sys.argv[1] != "watch":
        sys.exit("usage: processes.py watch PID TOKEN")
    for line in watch(int(sys.argv[2]), sys.argv[3]):
        print(f"gentax: ended {line}, left by the killed trainer {sys.argv[2]}", file=sys.stderr, flush=True)
