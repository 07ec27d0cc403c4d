"""The processes a trainer starts end with it, however it ends.

A trainer's helpers outlive a kill of the trainer and of its process group: Ray makes the driver
a process-group leader and starts raylet and its workers itself, and vLLM's engine processes
(``VLLM::EngineCore``, ``VLLM::Worker``) are children of Ray workers; killed that way on an H200
they kept 43.6 GB of GPU memory. So each trainer is marked instead: ``owning(token)`` puts
``OWNER_ENV=token`` into its environment, which every process it starts after that inherits
(Ray hands its environment to raylet and the workers, multiprocessing to vLLM's engine), and
on leaving (success, an exception, SIGTERM: a preempted or stopped job) SIGKILLs every process
still carrying the token. A trainer killed by SIGKILL runs no code; the run-folder lock records
the token, and the next trainer that takes the lock over ends the dead one's processes
(``gentax.train.runs.locked``). A child the trainer forks without exec keeps the environment
the trainer was started with; ``owning`` also ends the descendants the trainer started inside it.

    processes_marked(name, value) -> [psutil.Process]   this user's processes on this host with name=value
    end_marked(name, value) -> ["pid P (NAME)", ...]   SIGKILL them and wait
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import uuid
from typing import Iterator

OWNER_ENV = "GENTAX_TRAINER"


def new_token() -> str:
    """A token no other trainer has: host, pid and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def processes_marked(name: str, value: str) -> list:
    """Processes of this host (other than this one) whose environment has ``name=value``; those
    of other users cannot be read and are left out."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(name) == value:
                found.append(proc)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def _kill(procs: list, timeout: float) -> list[str]:
    import psutil

    ended = []
    for proc in procs:
        try:
            ended.append(f"pid {proc.pid} ({proc.name()})")
            proc.kill()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    psutil.wait_procs(procs, timeout=timeout)
    return ended


def end_marked(name: str, value: str, timeout: float = 10.0) -> list[str]:
    """SIGKILL every process ``processes_marked(name, value)`` finds; wait up to ``timeout`` s
    for them to go. Returns what was ended ("pid P (NAME)")."""
    return _kill(processes_marked(name, value), timeout)


def _exit_on_sigterm(signum, _frame):
    sys.exit(128 + signum)  # unwinds through ``owning``'s finally (Ray's own handler does the same)


@contextlib.contextmanager
def owning(token: str) -> Iterator[None]:
    """Mark everything started inside as this trainer's; end what is left of it on leaving."""
    import psutil

    before = {(p.pid, _started(p)) for p in psutil.Process().children(recursive=True)}
    previous_env = os.environ.get(OWNER_ENV)
    os.environ[OWNER_ENV] = token
    previous_handler = signal.signal(signal.SIGTERM, _exit_on_sigterm) if _main_thread() else None
    try:
        yield
    finally:
        descendants = [p for p in psutil.Process().children(recursive=True) if (p.pid, _started(p)) not in before]
        _kill(descendants + [p for p in processes_marked(OWNER_ENV, token) if p not in descendants], timeout=10.0)
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
        if previous_env is None:
            os.environ.pop(OWNER_ENV, None)
        else:
            os.environ[OWNER_ENV] = previous_env


def _started(proc) -> float | None:
    import psutil

    try:
        return proc.create_time()
    except psutil.Error:
        return None


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
