"""SciWorld: ScienceWorld tasks (the ``scienceworld`` 1.2.3 package, a Scala simulator on a JVM).

docs/sciworld.md is the full description: process model, determinism, tasks and splits,
observations, admissibility, win and failure, the expert and the knobs. In short, a
``SciworldEnv`` holds no JVM: on the first ``reset`` it starts a worker process (``_serve``) that
owns one. A worker or JVM that dies, hangs past ``timeout_s`` or fails ends the episode as failed
(``info["error"]``; ``expert_action`` raises ``WorkerError``), and the next ``reset`` starts a
fresh worker. Tasks are drawn from the survey in ``sciworld_tasks.json`` (``survey`` below).
"""

from __future__ import annotations

import functools
import json
import logging
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

import gentax
from gentax.domains.augment import allowed, article
from gentax.domains.base import DomainEnv, InvalidAction, Observation, Task
from gentax.domains.spec import Augmentation, DomainSpec, action_key
from gentax.errors import GentaxError, short_reason
from gentax.io import write_json

TABLE_PATH = Path(__file__).with_name("sciworld_tasks.json")
NO_MATCH = "No known action matches that input."
AMBIGUOUS = "Ambiguous request"
SIMPLIFICATIONS = ("teleportAction", "selfWateringFlowerPots", "openContainers", "openDoors", "noElectricalAction")
DEFAULT_SIMPLIFICATIONS = "easy"
EVAL_SPLITS = ("dev", "test")
ADMISSIBLE_MODES = ("templates", "valid")
FALLBACK_ACTION = "look around"
#: a constant identity hash code: every run of a variation is identical (docs/sciworld.md "Determinism")
DETERMINISTIC_JVM_OPTIONS = ("-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2")
SLOW_TIMEOUT_S = 600.0  # JVM start-up and gold generation (up to a minute per variation, more under load)


class WorkerError(RuntimeError):
    """The SciWorld worker (or its JVM) failed; ``fatal`` when the worker is gone."""

    def __init__(self, message: str, fatal: bool = True):
        super().__init__(message)
        self.fatal = fatal


def outcome(score: int, completed: bool) -> tuple[bool, bool]:
    """(won, ended) from ScienceWorld's score (0..100, negative when failed) and completion."""
    won = score >= 100 or (completed and score > 0)
    return won, won or completed or score < 0


# ---- task table ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def task_table() -> dict[str, Any]:
    """The committed survey (``survey``)."""
    return json.loads(TABLE_PATH.read_text())


def is_electrical(task_name: str) -> bool:
    return "power-component" in task_name or "conductivity" in task_name


def effective_simplifications(task_name: str, simplifications: str) -> str:
    """The simplification string loaded for ``task_name`` ("easy" spelled out, and without
    ``noElectricalAction`` for the electrical tasks, which the package refuses otherwise)."""
    names = [s for s in simplifications.split(",") if s]
    if "easy" in names:
        names = [s for s in names if s != "easy"] + list(SIMPLIFICATIONS)
    names = list(dict.fromkeys(names))
    if is_electrical(task_name):
        names = [s for s in names if s != "noElectricalAction"]
    return ",".join(names)


def _check_simplifications(simplifications: Any) -> str:
    if not isinstance(simplifications, str):
        raise GentaxError(f"sciworld option simplifications must be a string, got {simplifications!r}")
    for name in simplifications.split(","):
        if name and name != "easy" and name not in SIMPLIFICATIONS:
            raise GentaxError(f"unknown sciworld simplification {name!r}; valid: easy, {', '.join(SIMPLIFICATIONS)}")
    return simplifications


def _resolve_task_names(tasks: Any, table: dict[str, Any]) -> list[str]:
    known = table["tasks"]
    if tasks is None:
        return list(known)
    if isinstance(tasks, str):
        tasks = [t for t in tasks.split(",") if t]
    by_id = {info["id"]: name for name, info in known.items()}
    names = []
    for task in tasks:
        name = by_id.get(str(task), str(task))
        if name not in known:
            raise GentaxError(f"unknown sciworld task {task!r}; valid: {', '.join(known)} (or ids 1-1 .. 10-2)")
        names.append(name)
    if not names:
        raise GentaxError("sciworld option tasks is empty")
    return list(dict.fromkeys(names))


# ---- the environment (caller side) --------------------------------------------------------------
class SciworldEnv(DomainEnv):
    name = "sciworld"
    default_max_steps = 50
    concurrent_calls = True  # each env's JVM is its own process: a batch's start, load and steps overlap
    default_options = {
        "tasks": None,
        "eval_split": "dev",
        "min_gold_length": 3,
        "max_gold_length": None,
        "simplifications": DEFAULT_SIMPLIFICATIONS,
        "admissible": "templates",
        "admissible_cap": 64,
        "jvm_heap_mb": 768,
        "jvm_options": [],
        "deterministic": True,
        "describe_new_room": False,
        "timeout_s": 120.0,
    }

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        opts = super().check_options(options)
        if opts["eval_split"] not in EVAL_SPLITS:
            raise GentaxError(f"sciworld option eval_split must be one of {', '.join(EVAL_SPLITS)}, got {opts['eval_split']!r}")
        if opts["admissible"] not in ADMISSIBLE_MODES:
            raise GentaxError(f"sciworld option admissible must be one of {', '.join(ADMISSIBLE_MODES)}, got {opts['admissible']!r}")
        for key in ("admissible_cap", "jvm_heap_mb"):
            if not isinstance(opts[key], int) or isinstance(opts[key], bool) or opts[key] < 1:
                raise GentaxError(f"sciworld option {key} must be a positive integer, got {opts[key]!r}")
        flags = opts["jvm_options"]
        if not isinstance(flags, (list, tuple)) or not all(isinstance(f, str) and f.startswith("-") for f in flags):
            raise GentaxError(f"sciworld option jvm_options must be a list of JVM flags (each starting with '-'), got {flags!r}")
        if not isinstance(opts["describe_new_room"], bool):
            raise GentaxError(f"sciworld option describe_new_room must be true or false, got {opts['describe_new_room']!r}")
        if not isinstance(opts["timeout_s"], (int, float)) or isinstance(opts["timeout_s"], bool) or opts["timeout_s"] <= 0:
            raise GentaxError(f"sciworld option timeout_s must be positive, got {opts['timeout_s']!r}")
        limit = opts["max_gold_length"]
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            raise GentaxError(f"sciworld option max_gold_length must be a positive integer or None, got {limit!r}")
        if not isinstance(opts["min_gold_length"], int) or isinstance(opts["min_gold_length"], bool):
            raise GentaxError(f"sciworld option min_gold_length must be an integer, got {opts['min_gold_length']!r}")
        _check_simplifications(opts["simplifications"])
        if opts["tasks"] is not None:
            _resolve_task_names(opts["tasks"], task_table())
        return opts

    def __init__(self, split: str = "train", seed: int = 0, max_steps: int | None = None, **options):
        super().__init__(split=split, seed=seed, max_steps=max_steps, **options)
        opts = self.options
        limit = opts["max_gold_length"]
        self._length_options = sorted({"min_gold_length", "max_gold_length"} & set(options))
        # bound now: eligibility must not follow a later change of env.max_steps
        self.length_limit = self.max_steps if limit is None else limit
        self.simplifications = opts["simplifications"]
        self.package_split = "train" if split == "train" else opts["eval_split"]
        if opts["tasks"] is not None or self._length_options:
            self.eligible  # bad task names or an impossible filter fail here, not at the first task()
        self._worker: _WorkerClient | None = None
        self._gold_cache: dict[tuple[str, int, str], list[str]] = {}
        self._history: list[str] = []  # the episode's valid actions (replayed when the gold is made late)
        self._templates: tuple[str, ...] = ()

    # ---- tasks ------------------------------------------------------------------------------
    @functools.cached_property
    def eligible(self) -> dict[str, list[int]]:
        """task name -> the variations a task seed may pick (shuffled per task and split); read
        from the survey table on first use, so an env that only plays given tasks needs none."""
        table = task_table()
        names = _resolve_task_names(self.options["tasks"], table)
        surveyed = self.simplifications == table["simplifications"]
        if not surveyed and self._length_options:
            raise GentaxError(
                f"sciworld option {' and '.join(self._length_options)} needs the surveyed simplifications "
                f"{table['simplifications']!r}; with {self.simplifications!r} gold lengths are unknown (leave it unset)")
        shortest, limit = self.options["min_gold_length"], self.length_limit
        pool = {}
        for name in names:
            info = table["tasks"][name]
            if surveyed:
                lengths = info["gold_steps"].get(self.package_split, {})
                variations = sorted(int(v) for v, n in lengths.items() if n is not None and shortest <= n <= limit)
            else:
                variations = list(range(*info["splits"][self.package_split]))
            if variations:
                pool[name] = random.Random(f"sciworld/{self.package_split}/{name}").sample(variations, len(variations))
        if not pool:
            raise GentaxError(
                f"no sciworld {self.package_split} variation of tasks {', '.join(names)} has a gold sequence of "
                f"{shortest} to {limit} steps (change min_gold_length / max_gold_length / max_steps or the tasks)")
        return pool

    @functools.cached_property
    def _task_order(self) -> list[str]:
        return random.Random(f"sciworld/tasks/{self.package_split}").sample(sorted(self.eligible), len(self.eligible))

    def _make_task(self, seed: int) -> Task:
        order = self._task_order
        name = order[seed % len(order)]
        variations = self.eligible[name]
        variation = variations[(seed // len(order)) % len(variations)]
        info = task_table()["tasks"][name]
        gold = info["gold_steps"].get(self.package_split, {}).get(str(variation))
        spec = {
            "task_name": name,
            "task_id": info["id"],
            "variation": variation,
            "package_split": self.package_split,
            "simplifications": effective_simplifications(name, self.simplifications),
            "gold_length": gold if self.simplifications == task_table()["simplifications"] else None,
        }
        return Task(self.name, self.split, seed, spec)

    # ---- episode ----------------------------------------------------------------------------
    def _reset(self, task: Task) -> Observation:
        spec = task.spec
        self._history = []
        for attempt in (1, 2):  # a worker found dead at reset is replaced once
            worker = self._live_worker()
            try:
                loaded = worker.call("load", spec["task_name"], spec["variation"], spec["simplifications"])
                break
            except WorkerError:
                self._drop_worker()
                if attempt == 2:
                    raise
        self._templates = tuple(loaded["templates"])
        return self._observation(loaded["text"], loaded["goal"])

    def _step(self, action: str) -> tuple[Observation, bool, bool]:
        result = self._call("act", action, self.options["describe_new_room"])
        if result["no_match"]:
            raise InvalidAction("not_admissible", NO_MATCH)
        self._history.append(action)
        won, ended = outcome(result["score"], result["completed"])
        return self._observation(result["text"], self.observation.goal), won, ended

    def step(self, action: str):
        try:
            return super().step(action)
        except WorkerError as exc:
            return self._failed(exc)

    def expert_action(self) -> str:
        if self.current_task is None:
            raise RuntimeError("call reset() first")
        gold = self._gold()
        position = 0
        for action in self._history:
            if position < len(gold) and action == gold[position]:
                position += 1
        return gold[position] if position < len(gold) else FALLBACK_ACTION

    def close(self) -> None:
        self._drop_worker()

    def __del__(self):
        try:
            self._drop_worker()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # ---- worker facts (monitoring, tests) ---------------------------------------------------
    @property
    def worker_info(self) -> dict[str, Any] | None:
        """pid, jvm_pid, jvm_max_heap_mb, jvm_flags (what the JVM runs with), start_s and its interval
        (``launched_at``, ``ready_at``: ``time.monotonic()`` of this process) of the live worker (None when none)."""
        return dict(self._worker.info) if self._worker is not None and self._worker.alive else None

    # ---- internals --------------------------------------------------------------------------
    def _observation(self, text: str, goal: str) -> Observation:
        if self.options["admissible"] == "valid":
            admissible = tuple(self._call("valid_actions", self.options["admissible_cap"]))
        else:
            admissible = self._templates
        return Observation(text=text, goal=goal, admissible=admissible)

    def _gold(self) -> list[str]:
        spec = self.current_task.spec
        key = (spec["task_name"], spec["variation"], spec["simplifications"])
        if key not in self._gold_cache:
            try:
                gold = self._call("gold", *key, list(self._history), timeout=SLOW_TIMEOUT_S)
            except WorkerError:
                self._done = True  # the episode cannot go on; the next reset starts a fresh worker
                raise
            self._gold_cache[key] = gold
        return self._gold_cache[key]

    def _call(self, method: str, *args, timeout: float | None = None):
        if self._worker is None or not self._worker.alive:
            raise WorkerError("sciworld worker is gone (it died earlier); reset to start a fresh one")
        try:
            return self._worker.call(method, *args, timeout=timeout)
        except WorkerError as exc:
            if exc.fatal:
                self._drop_worker()
            raise

    def _failed(self, exc: WorkerError):
        self._steps += 1
        self._done = True
        info = {"won": False, "valid": True, "reason": None, "steps": self._steps, "truncated": False, "error": f"sciworld: {exc}"}
        return self._obs, 0.0, True, info

    def _live_worker(self) -> _WorkerClient:
        if self._worker is None or not self._worker.alive:
            self._drop_worker()
            self._worker = _WorkerClient(self.options["jvm_heap_mb"], float(self.options["timeout_s"]),
                                         deterministic=bool(self.options["deterministic"]),
                                         extra_jvm_options=tuple(self.options["jvm_options"]))
        return self._worker

    def _drop_worker(self) -> None:
        worker, self._worker = getattr(self, "_worker", None), None
        if worker is not None:
            worker.close()


# ---- the worker: client (caller side) and server (child side) ----------------------------------
class _WorkerClient:
    """A child process owning one ScienceWorld JVM, driven by request/answer messages."""

    def __init__(self, heap_mb: int, timeout_s: float, deterministic: bool = True,
                 extra_jvm_options: Sequence[str] = ()):
        import shutil

        if shutil.which("java") is None:
            raise GentaxError("sciworld needs a Java runtime (17) on PATH: apt-get install openjdk-17-jre-headless "
                              "(scripts/setup.sh installs it)")
        self.timeout_s = timeout_s
        ours, theirs = multiprocessing.Pipe()
        env = dict(os.environ)
        java_options = ([f"-Xmx{heap_mb}m"] + (list(DETERMINISTIC_JVM_OPTIONS) if deterministic else [])
                        + list(extra_jvm_options))
        env["JAVA_TOOL_OPTIONS"] = " ".join([env.get("JAVA_TOOL_OPTIONS", ""), *java_options]).strip()
        # the child imports gentax from wherever this process did (checkouts put it on sys.path)
        root = str(Path(gentax.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        fd = theirs.fileno()
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"from gentax.domains.sciworld import _serve; _serve({fd})"],
            pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
            start_new_session=True,  # worker + JVM in one process group: one kill ends both
        )
        theirs.close()
        self.conn = ours
        self.alive = True
        try:
            self.info = self._answer(max(timeout_s, SLOW_TIMEOUT_S), "start")
        except WorkerError as exc:
            raise WorkerError(f"could not start the ScienceWorld JVM: {exc}") from None
        self.info.update(start_s=round(time.monotonic() - started, 3), launched_at=started, ready_at=time.monotonic())

    def call(self, method: str, *args, timeout: float | None = None):
        try:
            self.conn.send((method, args))
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            pass  # the death shows in _answer
        return self._answer(timeout or self.timeout_s, method)

    def _answer(self, timeout: float, what: str):
        try:
            ready = self.conn.poll(timeout)
            if not ready:
                self.close()
                raise WorkerError(f"worker pid {self.proc.pid} gave no answer to {what!r} within {timeout:g} s (killed)")
            status, value = self.conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            self.close()
            raise WorkerError(f"worker pid {self.proc.pid} died during {what!r} (exit code {self.proc.returncode})") from None
        if status == "ok":
            return value
        if status == "engine_error":  # a Java exception: the JVM lives on, this episode does not
            raise WorkerError(f"ScienceWorld failed on {what!r}: {value}", fatal=False)
        self.close()
        raise WorkerError(f"worker pid {self.proc.pid} failed during {what!r}: {value}")

    def close(self) -> None:
        if not self.alive:
            return
        self.alive = False
        try:
            self.conn.send(("close", ()))
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            pass
        self.conn.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        try:  # the JVM, and a worker that did not exit, share the worker's process group
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()


def _serve(fd: int) -> None:
    """Worker main loop: own a ScienceWorld JVM; answer (method, args) with (status, value)."""
    from multiprocessing.connection import Connection

    conn = Connection(fd)
    _exit_with_parent()
    _quiet_py4j()
    try:
        engine = _Engine()
    except BaseException:  # noqa: BLE001 - reported to the caller, which raises
        conn.send(("crashed", _logged_reason(traceback.format_exc(limit=3))))
        return
    conn.send(("ok", engine.facts()))
    from py4j.protocol import Py4JJavaError

    try:
        while True:
            try:
                method, args = conn.recv()
            except (EOFError, OSError):
                break  # the caller is gone
            if method == "close":
                break
            try:
                value = getattr(engine, method)(*args)
            except Py4JJavaError as exc:
                conn.send(("engine_error", _logged_reason(str(exc), java=True)))
            except BaseException:  # noqa: BLE001 - a dead JVM, a bug: this worker is done
                conn.send(("crashed", _logged_reason(traceback.format_exc(limit=3))))
                break
            else:
                conn.send(("ok", value))
    finally:
        try:
            engine.close()
        except Exception:  # noqa: BLE001 - a dead JVM cannot be closed cleanly; the failure is reported already
            pass


def _quiet_py4j() -> None:
    """py4j logs a traceback at every call that meets a dead JVM, partly through the root logger
    (``logging.exception``); the worker reports the failure itself, once."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    inside_py4j = f"{os.sep}py4j{os.sep}"
    logging.getLogger().addFilter(lambda record: inside_py4j not in record.pathname)


def _logged_reason(text: str, java: bool = False) -> str:
    """Write a failure's full text to stderr (the job log) once; return its one-line reason."""
    sys.stderr.write(f"sciworld worker pid {os.getpid()}: {text.rstrip()}\n")
    sys.stderr.flush()
    if java:  # "An error occurred while calling o0.step.\n: java.lang.X: message\n\tat ...": the X line
        thrown = next((line[2:] for line in text.splitlines() if line.startswith(": ")), None)
        if thrown:
            return short_reason(thrown)
    return short_reason(text)


def _exit_with_parent(poll_s: float = 1.0) -> None:
    """Exit (the JVM follows: its stdin pipe breaks) as soon as the caller is gone, even while a
    long engine call (gold generation: up to minutes) keeps the main loop from reading EOF."""
    import threading

    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


def _room_line(look: str) -> str:
    return look.strip().split("\n", 1)[0]


class _Engine:
    """Child side: the package's ScienceWorldEnv, driven through its simulator handle
    (``server``) so a step does not also compute the look/inventory/valid-action extras."""

    def __init__(self):
        from scienceworld import ScienceWorldEnv

        self.env = ScienceWorldEnv("")
        self.server = self.env.server
        self.room = ""  # the agent's room, from the first line of a look ("This room is called the X.")

    def facts(self) -> dict[str, Any]:
        runtime = self.env._gateway.jvm.java.lang.Runtime.getRuntime()
        return {
            "pid": os.getpid(),
            "jvm_pid": self.env._gateway.java_process.pid,  # private attribute: the only handle on it
            "jvm_max_heap_mb": round(runtime.maxMemory() / 2**20),
            "jvm_flags": [str(a) for a in self.env._gateway.jvm.java.lang.management.ManagementFactory
                          .getRuntimeMXBean().getInputArguments()],
        }

    def load(self, task_name: str, variation: int, simplifications: str, gold: bool = False) -> dict[str, Any]:
        self.env.load(task_name, variation, simplifications, generateGoldPath=gold)
        text = self.server.step("look around")  # the package's own first move (ScienceWorldEnv.reset)
        self.room = _room_line(text)
        goal = self.server.freeActionTaskDesc()
        goal = goal.split(":", 1)[1].strip() if goal.lower().startswith("task description:") else goal.strip()
        return {"text": text, "goal": goal, "templates": list(self.server.getPossibleActions())}

    def act(self, action: str, describe_new_room: bool = False) -> dict[str, Any]:
        text = self.server.step(action)
        if text.startswith(AMBIGUOUS):  # answer the engine's question with its first reading
            text = self.server.step("0")
        if text.strip() == NO_MATCH:
            return {"no_match": True}
        if describe_new_room:
            look = self.server.freeActionLook()  # free: no time step, no score change
            room = _room_line(look)
            if room != self.room:
                self.room = room
                text = f"{text.rstrip()}\n{look}"
        return {
            "no_match": False,
            "text": text,
            "score": int(round(100 * self.server.getScore())),
            "completed": bool(self.server.getCompleted()),
        }

    def valid_actions(self, cap: int) -> list[str]:
        data = json.loads(self.server.getValidActionObjectCombinationsJSON())["validActions"]
        by_template: dict[Any, list[str]] = {}
        for entry in data:
            by_template.setdefault(entry["template_id"], []).append(entry["action"])
        groups = [by_template[k] for k in sorted(by_template, key=str)]
        out: list[str] = []
        for i in range(max((len(g) for g in groups), default=0)):
            out.extend(g[i] for g in groups if i < len(g))
        return list(dict.fromkeys(out))[:cap]

    def splits(self, task_name: str) -> dict[str, list[int]]:
        self.env.load(task_name, 0, "")
        return {
            "train": list(self.env.get_variations_train()),
            "dev": list(self.env.get_variations_dev()),
            "test": list(self.env.get_variations_test()),
        }

    def gold(self, task_name: str, variation: int, simplifications: str, replay: list[str]) -> list[str]:
        """The gold sequence as this env plays it: without the actions the engine rejects (the
        generator also tries names that no longer fit, e.g. a substance that has melted, and
        the digits it answers ambiguity prompts with, which the env answers itself), and
        ending at the win. Then back to the episode's state: reload, replay ``replay``."""
        # The gold agent caches search paths per start room across loads (its only state that
        # outlives a load): cleared, the gold sequence does not depend on what this JVM ran before.
        self.env._gateway.jvm.scienceworld.goldagent.PathFinder.precomputedExhaustivePaths().clear()
        self.load(task_name, variation, simplifications, gold=True)  # reloads after generating
        playable = []
        for action in self.server.getGoldActionSequence():
            result = self.act(action)
            if result["no_match"]:
                continue
            playable.append(action)
            if any(outcome(result["score"], result["completed"])):
                break
        self.load(task_name, variation, simplifications)
        for action in replay:
            self.act(action)
        self.room = _room_line(self.server.freeActionLook())  # where the replay left the agent
        return playable

    def close(self) -> None:
        jvm = getattr(self.env._gateway, "java_process", None)  # private attribute: the only handle on it
        try:
            self.env.close()
        except Exception:  # noqa: BLE001 - a dead JVM cannot be closed politely
            pass
        if jvm is not None:  # ended and waited for by this worker, so the job's CPU time counts it (gentax.joblog)
            jvm.kill()
            jvm.wait()


# ---- the survey behind sciworld_tasks.json ------------------------------------------------------
SURVEY_PER_SPLIT = {"train": 16, "dev": 8, "test": 8}
SURVEY_MAX_STEPS = 200
#: one sample per split: gold sequences of 75+ steps (far over the study's limit of 50) that take
#: one to several minutes each to generate
SURVEY_SPARSE = ("grow-fruit", "mendelian-genetics-known-plant", "mendelian-genetics-unknown-plant")


def survey(out: Path = TABLE_PATH, *, per_split: dict[str, int] | None = None, max_steps: int = SURVEY_MAX_STEPS,
           simplifications: str = DEFAULT_SIMPLIFICATIONS, tasks: list[str] | None = None, log=print) -> dict[str, Any]:
    """Write the task table: every task's split ranges, and for a seeded sample of each split's
    variations the steps the expert needs to win through ``SciworldEnv`` (null: it did not win
    within ``max_steps``). The ``SURVEY_SPARSE`` tasks get one sample per split. With ``tasks``,
    only those entries of an existing table at ``out`` are redone. The file is rewritten after
    every task, so an interrupted survey keeps what it measured."""
    from scienceworld.constants import ID2TASK

    per_split = {**SURVEY_PER_SPLIT, **(per_split or {})}
    ids = {name: task_id for task_id, name in ID2TASK.items()}
    names = tasks or list(ids)
    table: dict[str, Any] = {
        "package": "scienceworld 1.2.3",
        "simplifications": simplifications,
        "survey": {"per_split": per_split, "sparse_tasks": list(SURVEY_SPARSE), "max_steps": max_steps},
        "tasks": {},
    }
    if tasks and Path(out).exists():
        old = json.loads(Path(out).read_text())
        if (old["simplifications"], old["survey"]) != (table["simplifications"], table["survey"]):
            raise GentaxError(f"{out} was surveyed with other settings; redo it whole (leave out --tasks)")
        table["tasks"] = old["tasks"]
    env = SciworldEnv(split="train", max_steps=max_steps, simplifications=simplifications)
    try:
        for name in names:
            splits = env._live_worker().call("splits", name)
            ranges = {}
            for split, variations in splits.items():
                lo, hi = min(variations), max(variations) + 1
                if sorted(variations) != list(range(lo, hi)):
                    raise RuntimeError(f"{name} {split}: variations are not one range")
                ranges[split] = [lo, hi]
            info = {"id": ids[name], "splits": ranges, "gold_steps": {}}
            started = time.monotonic()
            samples = {k: 1 for k in per_split} if name in SURVEY_SPARSE else per_split
            for split, variations in splits.items():
                rng = random.Random(f"sciworld/survey/{name}/{split}")
                chosen = rng.sample(variations, min(samples[split], len(variations)))
                info["gold_steps"][split] = {}
                for variation in chosen:
                    steps = _expert_steps(env, name, variation, split, simplifications)
                    info["gold_steps"][split][str(variation)] = steps
                    if steps is None:
                        log(f"  {name} {split} variation {variation}: the gold sequence did not win within {max_steps} steps")
            table["tasks"][name] = info
            table["tasks"] = {n: table["tasks"][n] for n in ids if n in table["tasks"]}  # package order
            won = [n for by_var in info["gold_steps"].values() for n in by_var.values() if n is not None]
            total = sum(len(v) for v in info["gold_steps"].values())
            log(f"{name}: {len(won)}/{total} won, gold steps {min(won, default=None)}..{max(won, default=None)}, "
                f"{time.monotonic() - started:.0f} s")
            write_json(out, table)
    finally:
        env.close()
    return table


def _expert_steps(env: SciworldEnv, name: str, variation: int, split: str, simplifications: str) -> int | None:
    spec = {"task_name": name, "task_id": "", "variation": variation, "package_split": split,
            "simplifications": effective_simplifications(name, simplifications), "gold_length": None}
    env.reset(Task(env.name, env.split, variation, spec))
    info: dict[str, Any] = {}
    budget = len(env._gold()) + 1  # past the end of the gold sequence the expert only looks around
    while not env.done and env.steps < budget:
        _, _, _, info = env.step(env.expert_action())
    return info["steps"] if info.get("won") else None


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m gentax.domains.sciworld", description="SciWorld task survey")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("survey", help=f"rewrite {TABLE_PATH.name}: split ranges and gold-sequence lengths")
    cmd.add_argument("--out", type=Path, default=TABLE_PATH)
    cmd.add_argument("--train", type=int, default=SURVEY_PER_SPLIT["train"], help="variations sampled per task")
    cmd.add_argument("--dev", type=int, default=SURVEY_PER_SPLIT["dev"])
    cmd.add_argument("--test", type=int, default=SURVEY_PER_SPLIT["test"])
    cmd.add_argument("--max-steps", type=int, default=SURVEY_MAX_STEPS)
    cmd.add_argument("--tasks", default=None, help="comma-separated task names (default: all 30)")
    args = parser.parse_args(argv)
    survey(args.out, per_split={"train": args.train, "dev": args.dev, "test": args.test}, max_steps=args.max_steps,
           tasks=args.tasks.split(",") if args.tasks else None, log=lambda m: print(m, flush=True))
    return 0


# ---- the agent's view: action syntax, rule line, augmentation sources -------------------------
_PLACEHOLDER = re.compile(r"\b(?:OBJ|LOC)\d*\b|<[^<>]+>")
_TEMPLATE_PLACEHOLDER = re.compile(r"\b(?:OBJ|LOC)\d*\b")


def template_action(command: str, admissible: Sequence[str]) -> tuple[str | None, str | None]:
    """Lower-cased; valid when it equals an admissible action, or fills an admissible TEMPLATE
    (placeholders ``OBJ``, ``LOC``, ``OBJ1``…, or ``<...>`` match any text). The list may be
    huge; the whole list given is checked, not just what the prompt showed."""
    action = command.lower()
    if not admissible:
        return action, None
    if action in {action_key(a) for a in admissible}:
        return action, None
    if any(pattern.fullmatch(action) for pattern in _templates(tuple(admissible))):
        return action, None
    return None, "not_admissible"


@functools.lru_cache(maxsize=64)
def _templates(admissible: tuple[str, ...]) -> list[re.Pattern]:
    patterns = []
    for entry in admissible:
        parts = _PLACEHOLDER.split(" ".join(entry.split()))
        if len(parts) == 1:
            continue  # a concrete action, not a template
        literal = [re.escape(part.lower()) for part in parts]
        patterns.append(re.compile("(.+?)".join(literal)))
    return patterns


def has_templates(obs: Observation) -> bool:
    """Whether the admissible list holds OBJ/LOC templates (the prompt shows the rule line then)."""
    return any(map(_TEMPLATE_PLACEHOLDER.search, obs.admissible))


#: 12-token lines "Also here: a dusty poster of the periodic table (out of reach)." naming lab
#: objects ScienceWorld does not have
SCIWORLD_THINGS = (
    "poster of the periodic table", "framed lab safety certificate", "brass microscope model",
    "stack of graph paper", "broken centrifuge", "spectrometer with a dead screen",
    "pair of cracked safety goggles", "box of latex gloves", "old lab coat on a hook",
    "plastic model of a DNA helix", "chalkboard covered in formulas", "empty pipette rack",
    "stack of old lab notebooks", "magnetic stirrer without a power cord", "rolled-up star chart",
    "cork board with expired notices",
)  # fmt: skip
SCIWORLD_ADJECTIVES = ("dusty", "faded", "worn", "tidy", "slightly bent", "forgotten")


def sciworld_distractors(text, count, rng, keywords, layout):
    things = allowed(SCIWORLD_THINGS, keywords)
    placed = []
    for _ in range(count):
        thing = f"{rng.choice(SCIWORLD_ADJECTIVES)} {rng.choice(things)}"
        placed.append((rng.choice(layout.boundaries), f"Also here: {article(thing)} {thing} (out of reach)."))
    return placed


#: everything domain-specific about ScienceWorld (gentax.domains.spec)
SPEC = DomainSpec(
    name="sciworld",
    env="gentax.domains.sciworld:SciworldEnv",
    intro="You are an expert agent in the ScienceWorld text environment.",
    rule=(
        "Actions listed with OBJ are templates: replace each OBJ with the name of an object, "
        "door or room from the observation (e.g. open door to hallway, go to hallway)."
    ),
    rule_when=has_templates,  # only when the admissible list holds templates
    max_admissible_shown=50,  # valid-action lists run into the thousands
    action_syntax=template_action,
    augmentation=Augmentation(
        nominal_tokens=12, donor_chars_per_token=4.0, separator="\n", monitor_shows="a science lab simulation",
        distractors=sciworld_distractors,
    ),
)

if __name__ == "__main__":
    sys.exit(main())
