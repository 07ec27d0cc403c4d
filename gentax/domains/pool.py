"""A batch of domain envs stepped together, in-process or in worker processes (docs/domains.md
"Env pool").

``EnvPool`` holds one env per slot: ``reset(tasks)`` puts ``tasks[i]`` in slot ``i``; ``step``,
``step_invalid`` and ``expert_actions`` touch only the slots named and return per slot what
``DomainEnv.step`` returns. With ``num_workers=W > 0`` slot ``i`` lives in spawned worker
``i % W`` (env seed ``seed + i``), and one call steps the workers in parallel. A failure never
passes as a plain zero: an exception while stepping, or a worker that died (it is restarted), ends
the slots' episodes as failed (reward 0, ``done``, ``info["error"]``, a warning logged). Errors
while resetting are raised; a reset that a worker died in is retried once.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import traceback
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from gentax.domains import domain_class, make
from gentax.domains.base import SPLITS, Observation, Task
from gentax.errors import GentaxError, short_reason

log = logging.getLogger(__name__)

StepResult = tuple[Observation, float, bool, dict[str, Any]]
_POLL_S = 0.5
#: most envs of one process called at once (``DomainEnv.concurrent_calls``): a batch's worth
_MAX_THREADS = 64


class _Slots:
    """The envs of one process (the pool's own in inline mode, or one worker's); a domain whose
    envs set ``concurrent_calls`` has a call's envs run from threads at once."""

    def __init__(self, domain: str, split: str, seed: int, max_steps: int | None, options: dict[str, Any]):
        self.args = (domain, split, seed, max_steps, options)
        self.envs: dict[int, Any] = {}
        self._threads = ThreadPoolExecutor(thread_name_prefix=f"gentax-{domain}", max_workers=_MAX_THREADS) \
            if domain_class(domain).concurrent_calls else None

    def _each(self, items: list, call) -> list:
        """``call(item)`` for every item, at once when the domain allows it; in items' order.
        An exception from any item propagates (after every item has finished)."""
        if self._threads is None or len(items) < 2:
            return [call(item) for item in items]
        futures = [self._threads.submit(call, item) for item in items]
        wait(futures)  # no env is left mid-call when one raises
        return [future.result() for future in futures]

    def reset(self, items: list[tuple[int, Task]]) -> list[Observation]:
        domain, split, seed, max_steps, options = self.args
        for slot, _ in items:
            if slot not in self.envs:
                self.envs[slot] = make(domain, split=split, seed=seed + slot, max_steps=max_steps, **options)
        return self._each(items, lambda item: self.envs[item[0]].reset(item[1]))

    def step(self, items: list[tuple[int, str]], invalid: bool = False) -> list[tuple[str, Any]]:
        """Per item ("ok", result) or ("error", message); a failed env is dropped."""
        def one(item):
            env = self.envs[item[0]]
            return env.step_invalid(item[1]) if invalid else env.step(item[1])
        return self._guarded(items, one)

    def expert(self, slots: list[int]) -> list[tuple[str, Any]]:
        return self._guarded([(slot, None) for slot in slots], lambda item: self.envs[item[0]].expert_action())

    def _guarded(self, items: list[tuple[int, Any]], call) -> list[tuple[str, Any]]:
        def one(item):
            try:
                return ("ok", call(item))
            except Exception as exc:  # noqa: BLE001 - any engine failure ends the episode, visibly
                return ("error", f"{type(exc).__name__}: {exc}")
        out = self._each(items, one)
        for (slot, _), (status, _) in zip(items, out):
            if status == "error":
                self.drop(slot)
        return out

    def drop(self, slot: int) -> None:
        env = self.envs.pop(slot, None)
        if env is not None:
            try:
                env.close()
            except Exception:  # noqa: BLE001 - a broken env may fail to close; it is gone anyway
                pass

    def close(self) -> None:
        for slot in list(self.envs):
            self.drop(slot)
        if self._threads is not None:
            self._threads.shutdown(wait=True)


def _worker_main(conn, args) -> None:
    slots = _Slots(*args)
    try:
        while True:
            try:
                cmd, payload = conn.recv()
            except EOFError:
                break
            if cmd == "close":
                break
            try:
                if cmd == "reset":
                    result = slots.reset(payload)
                elif cmd == "step":
                    result = slots.step(payload)
                elif cmd == "invalid":
                    result = slots.step(payload, invalid=True)
                else:
                    result = slots.expert(payload)
                conn.send(("ok", result))
            except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
                gentax_error = isinstance(exc, GentaxError)
                conn.send(("raise", (gentax_error, f"{type(exc).__name__}: {exc}", traceback.format_exc())))
    finally:
        slots.close()


class _WorkerDied(Exception):
    pass


class _Worker:
    def __init__(self, index: int, args: tuple, ctx):
        self.index, self.args, self.ctx = index, args, ctx
        self.start()

    def start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker_main, args=(child, self.args), daemon=True, name=f"gentax-env-{self.index}")
        self.proc.start()
        child.close()

    def send(self, cmd: str, payload: Any) -> None:
        try:
            self.conn.send((cmd, payload))
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            pass  # the death shows up in receive()

    def receive(self) -> Any:
        while True:
            try:
                if self.conn.poll(_POLL_S):
                    status, value = self.conn.recv()
                    break
            except (EOFError, ConnectionResetError, OSError):
                raise _WorkerDied(self.describe_death()) from None
            if not self.proc.is_alive():
                raise _WorkerDied(self.describe_death())
        if status == "raise":
            is_gentax, message, trace = value
            if is_gentax:
                raise GentaxError(message.split(": ", 1)[-1])
            raise RuntimeError(f"env worker {self.index} failed: {message}\n{trace}")
        return value

    def describe_death(self) -> str:
        self.proc.join(timeout=5)
        return f"env worker {self.index} (pid {self.proc.pid}) died (exit code {self.proc.exitcode})"

    def restart(self) -> None:
        self.stop()
        self.start()

    def stop(self) -> None:
        try:
            self.conn.send(("close", None))
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()


class EnvPool:
    def __init__(self, domain: str, split: str, *, num_workers: int = 0, seed: int = 0, max_steps: int | None = None, **options):
        cls = domain_class(domain)  # unknown domain -> GentaxError listing the valid names
        if split not in SPLITS:
            raise GentaxError(f"unknown split {split!r} for domain {domain!r}; valid: {', '.join(SPLITS)}")
        cls.check_options(options)  # a bad knob fails here, not in a worker
        if num_workers < 0:
            raise GentaxError(f"num_workers must be >= 0, got {num_workers}")
        self.domain, self.split, self.num_workers = domain, split, num_workers
        args = (domain, split, int(seed), max_steps, dict(options))
        self._inline = _Slots(*args) if num_workers == 0 else None
        ctx = mp.get_context("spawn")
        self._workers = [_Worker(i, args, ctx) for i in range(num_workers)]
        self._obs: dict[int, Observation] = {}
        self._steps: dict[int, int] = {}
        self._done: dict[int, bool] = {}
        self._lost: dict[int, str] = {}  # slot -> why its episode was lost (not yet reported)
        self._closed = False

    # ---- protocol --------------------------------------------------------------------------------
    def reset(self, tasks: list[Task]) -> list[Observation]:
        items = list(enumerate(tasks))
        if self._inline is not None:
            obs = self._inline.reset(items)
        else:
            by_slot = self._scatter("reset", items, retry=True)
            obs = [by_slot[slot] for slot, _ in items]
        self._obs = dict(enumerate(obs))
        self._steps = {slot: 0 for slot, _ in items}
        self._done = {slot: False for slot, _ in items}
        self._lost = {}
        return obs

    def step(self, actions: dict[int, str]) -> dict[int, StepResult]:
        return self._step(actions, "step")

    def step_invalid(self, reasons: dict[int, str]) -> dict[int, StepResult]:
        return self._step(reasons, "invalid")

    def expert_actions(self, slots: list[int]) -> dict[int, str]:
        """The expert's next action per slot ("" for a slot whose env was lost: stepping it then
        reports the loss)."""
        self._check_running(slots)
        live = [s for s in slots if s not in self._lost]
        if self._inline is not None:
            raw = dict(zip(live, self._inline.expert(live)))
        else:
            raw = self._scatter("expert", [(s, s) for s in live])
        out = {}
        for slot in slots:
            status, value = raw.get(slot, ("error", self._lost.get(slot, "")))
            if status == "error":
                self._lose(slot, value)
                value = ""
            out[slot] = value
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._inline is not None:
            self._inline.close()
        for worker in self._workers:
            worker.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def worker_pids(self) -> list[int | None]:
        """Process ids of the workers (for monitoring and tests)."""
        return [w.proc.pid for w in self._workers]

    # ---- internals ------------------------------------------------------------------------------------
    def _step(self, args: dict[int, str], kind: str) -> dict[int, StepResult]:
        slots = list(args)
        self._check_running(slots)
        results: dict[int, StepResult] = {}
        live = [(s, args[s]) for s in slots if s not in self._lost]
        if self._inline is not None:
            raw = dict(zip([s for s, _ in live], self._inline.step(live, invalid=kind == "invalid")))
        else:
            raw = self._scatter(kind, live)
        for slot in slots:
            status, value = raw.get(slot, ("error", self._lost.get(slot, "env lost")))
            if status == "ok":
                obs, reward, done, info = value
                self._obs[slot], self._steps[slot], self._done[slot] = obs, info["steps"], done
                results[slot] = value
            else:
                results[slot] = self._failed(slot, value)
        return results

    def _failed(self, slot: int, error: str) -> StepResult:
        self._lost.pop(slot, None)
        self._done[slot] = True
        self._steps[slot] += 1
        log.warning("%s slot %d: episode ended failed: %s", self.domain, slot, error)  # the full text, once
        info = {"won": False, "valid": True, "reason": None, "steps": self._steps[slot], "truncated": False,
                "error": short_reason(error)}
        return self._obs[slot], 0.0, True, info

    def _lose(self, slot: int, error: str) -> None:
        if not self._done.get(slot, True):
            self._lost.setdefault(slot, error)
        if self._inline is not None:
            self._inline.drop(slot)

    def _check_running(self, slots: list[int]) -> None:
        if self._closed:
            raise RuntimeError("EnvPool is closed")
        for slot in slots:
            if slot not in self._done:
                raise RuntimeError(f"slot {slot} has no episode; reset() gave {len(self._done)} slots")
            if self._done[slot]:
                raise RuntimeError(f"slot {slot}: episode is over; call reset()")

    def _scatter(self, cmd: str, items: list[tuple[int, Any]], retry: bool = False) -> dict[int, Any]:
        """Send each worker its items, then gather results per slot (handling dead workers)."""
        shares: dict[int, list[tuple[int, Any]]] = {}
        for slot, arg in items:
            shares.setdefault(slot % len(self._workers), []).append((slot, arg))
        payload = {w: (share if cmd != "expert" else [s for s, _ in share]) for w, share in shares.items()}
        for w, share in payload.items():
            self._workers[w].send(cmd, share)
        out: dict[int, Any] = {}
        first_error: Exception | None = None  # raised once every worker's answer is read (pipes stay in step)
        for w, share in shares.items():
            worker = self._workers[w]
            try:
                values = worker.receive()
            except (GentaxError, RuntimeError) as exc:
                first_error = first_error or exc
                continue
            except _WorkerDied as death:
                message = str(death)
                log.warning("%s; restarting it", message)
                worker.restart()
                held = [s for s in self._done if s % len(self._workers) == w]
                if cmd == "reset":
                    if not retry:
                        raise RuntimeError(f"{message} during reset (after a restart)") from None
                    try:
                        out.update(self._scatter_one(w, cmd, share))
                    except (GentaxError, RuntimeError) as exc:
                        first_error = first_error or exc
                    continue
                for slot in held:  # every live episode of that worker is gone
                    self._lose(slot, message)
                values = [("error", message)] * len(share)
            out.update({slot: value for (slot, _), value in zip(share, values)})
        if first_error is not None:
            raise first_error
        return out

    def _scatter_one(self, w: int, cmd: str, share: list[tuple[int, Any]]) -> dict[int, Any]:
        worker = self._workers[w]
        worker.send(cmd, share)
        try:
            values = worker.receive()
        except _WorkerDied as death:
            worker.restart()
            raise RuntimeError(f"{death} during reset, twice") from None
        return {slot: value for (slot, _), value in zip(share, values)}
