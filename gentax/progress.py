"""A long job's progress in its log, and the running jobs' latest lines on the console.

In a job (``job``): a line ``gentax progress: WHAT: step 3/6, 12/16 episodes of this step, 83 tok/s,
1m02s elapsed, ETA 2m10s`` at every finished unit and, from a daemon thread, at least every
``EVERY_S`` seconds while a unit runs. One active job per process: the collector, beneath every
job kind, reports episodes and tokens to it through the module functions (no-ops without one), so
they need not be threaded through every call. On the console (``follow``, started by the
Snakefile's ``onstart`` on a real run): a daemon thread in Snakemake's process prints each job
log's latest new progress line every ``GENTAX_PROGRESS_EVERY`` seconds (0: none).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

#: seconds between progress lines of a busy job, and between the console's looks at the logs
EVERY_S = 15.0
PREFIX = "gentax progress: "

_active: "Job | None" = None


def _span(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Job:
    """The progress of one job: ``total`` units (RL steps, episodes) of which ``done`` are finished;
    within the running unit, its episodes finished of planned, and the tokens generated. A job counted
    in episodes (``unit="episode"``) advances with each finished episode."""

    def __init__(self, what: str, total: int, unit: str, *, every: float = EVERY_S, stream=None, done: int = 0):
        self.what, self.total, self.unit, self.every = what, int(total), unit, float(every)
        self.stream = stream or sys.stdout
        self.started = time.monotonic()
        self.first_done = self.done = int(done)  # a resumed run starts past 0: its rate counts this attempt's
        self.unit_episodes: tuple[int, int] | None = None
        self.token_count, self._lock, self._stop = 0, threading.Lock(), threading.Event()
        self._thread: threading.Thread | None = None
        self._outer: Job | None = None
        self._said = ""

    # ---- what the work reports ----
    def advance(self, units: int = 1) -> None:
        with self._lock:
            self.done += units
            self.unit_episodes = None
        self.say()

    def at(self, done: int, total: int) -> None:
        """``done`` of ``total`` units, as a child process reports them (LlamaFactory's step counter)."""
        with self._lock:
            self.done, self.total = int(done), int(total)

    def episodes_planned(self, total: int) -> None:
        """``total`` more episodes in the running unit (a mixture's step collects once per domain)."""
        with self._lock:
            done, planned = self.unit_episodes or (0, 0)
            self.unit_episodes = (done, planned + int(total))

    def episode_finished(self) -> None:
        with self._lock:
            done, total = self.unit_episodes or (0, 0)
            self.unit_episodes = (done + 1, total)
            if self.unit == "episode":
                self.done += 1

    def tokens(self, count: int) -> None:
        with self._lock:
            self.token_count += int(count)

    # ---- the line ----
    def line(self) -> str:
        with self._lock:
            elapsed = time.monotonic() - self.started
            parts = [f"{self.unit} {self.done}/{self.total}"] if self.total > 0 else []  # 0: no count (an export)
            if self.unit_episodes and self.unit != "episode":
                parts.append(f"{self.unit_episodes[0]}/{self.unit_episodes[1]} episodes of {self.unit} {self.done + 1}")
            if self.token_count and elapsed > 0:
                parts.append(f"{self.token_count / elapsed:.0f} tok/s")
            parts.append(f"{_span(elapsed)} elapsed")
            finished = self.done - self.first_done
            if 0 < finished and self.done < self.total:
                parts.append(f"ETA {_span(elapsed / finished * (self.total - self.done))}")
            elif self.done >= self.total > 0:
                parts.append("done")
        return f"{PREFIX}{self.what}: {', '.join(parts)}"

    def say(self, *, unless_said: bool = False) -> None:
        line = self.line()
        if unless_said and line == self._said:
            return
        self._said = line
        try:  # one write: the job's own output (LlamaFactory's, echoed) shares the stream
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed or full log: progress is no reason to stop the job
            pass

    # ---- the heartbeat ----
    def start(self) -> "Job":
        """Make this the active job, say its first line, and start the heartbeat."""
        global _active
        self._outer, _active = _active, self  # a job inside another (an evaluation in a training run) nests
        self.say()
        if self.every > 0:
            self._thread = threading.Thread(target=self._beat, name="gentax-progress", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the heartbeat and say the last line (where it ended), unless just said."""
        global _active
        self._stop.set()
        if self._thread is not None:  # its last line, if it was saying one, comes before the final one
            self._thread.join(timeout=5)
        self.say(unless_said=True)
        if _active is self:
            _active = self._outer

    def __enter__(self) -> "Job":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            self.say()


def job(what: str, total: int, unit: str, *, done: int = 0, every: float | None = None) -> Job:
    """``with progress.job("RL sokoban/default s0", 6, "step", done=2) as p: ... p.advance()``."""
    return Job(what, total, unit, done=done, every=EVERY_S if every is None else every)


def episodes_planned(total: int) -> None:
    """The active job's running unit plays ``total`` episodes (the collector, at its start)."""
    if _active is not None:
        _active.episodes_planned(total)


def episode_finished() -> None:
    """One more episode of the active job's running unit finished (the collector)."""
    if _active is not None:
        _active.episode_finished()


def tokens(count: int) -> None:
    """``count`` more tokens generated in the active job (the collector)."""
    if _active is not None:
        _active.tokens(count)


# ---- the console --------------------------------------------------------------------------------
def latest_line(log: Path, tail_bytes: int = 16384) -> str | None:
    """The last progress line of ``log`` (its last ``tail_bytes``), or None."""
    try:
        with open(log, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(fh.tell() - tail_bytes, 0))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    found = [line for line in text.splitlines() if line.startswith(PREFIX)]
    return found[-1][len(PREFIX):] if found else None


def new_lines(logs: Path, seen: dict[Path, str], since: float) -> Iterator[str]:
    """``[log] line`` for each ``*.log`` below ``logs`` written since ``since`` (a time.time()) whose
    latest progress line differs from the one in ``seen`` (updated)."""
    if not logs.is_dir():
        return
    for log in sorted(logs.rglob("*.log")):
        try:
            if log.stat().st_mtime < since:
                continue
        except OSError:
            continue
        line = latest_line(log)
        if line is not None and seen.get(log) != line:
            seen[log] = line
            yield f"[{log.relative_to(logs)}] {line}"


def follow(logs: str | os.PathLike, every: float | None = None, stream=None) -> threading.Thread | None:
    """Start the console's daemon thread over the job logs below ``logs`` (module doc); None when
    switched off (``GENTAX_PROGRESS_EVERY=0``)."""
    if every is None:
        given = os.environ.get("GENTAX_PROGRESS_EVERY", str(EVERY_S))
        try:
            every = float(given)
        except ValueError:
            print(f"gentax: note: GENTAX_PROGRESS_EVERY={given!r} is no number of seconds; no progress lines "
                  "on the console", file=sys.stderr)
            return None
    if every <= 0:
        return None
    stream = stream or sys.stderr
    logs, seen = Path(logs), {}

    def watch() -> None:
        last = time.time()
        while True:
            time.sleep(every)
            now = time.time()
            try:  # a log folder removed mid-scan, a closed console: the next look tries again
                for line in new_lines(logs, seen, last - every):
                    print(f"gentax: running: {line}", file=stream, flush=True)
            except (OSError, ValueError):
                pass
            last = now

    thread = threading.Thread(target=watch, name="gentax-progress-follow", daemon=True)
    thread.start()
    return thread
