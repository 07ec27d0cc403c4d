"""The one environment protocol every domain implements: text reset/step, gymnasium-style.

docs/domains.md "The protocol" states the contract and the step rules (``SUCCESS_REWARD`` on the
winning step; ``INVALID_PENALTY`` for an invalid step, which leaves the state unchanged and still
uses a step; ``max_steps`` steps without a win truncate), docs/contracts.md "Domains" the
signatures. Subclasses implement ``_make_task``, ``_reset``, ``_step`` (raising ``InvalidAction``
to reject an action without touching the state) and ``expert_action``; the base class owns step
counting, rewards, limits and the action-text checks, so every domain behaves alike.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, ClassVar, NamedTuple

from gentax.errors import GentaxError

SUCCESS_REWARD = 10.0
INVALID_PENALTY = -0.1
SPLITS = ("train", "eval")
MAX_ACTION_CHARS = 512  # longer "actions" are model babble, never a real command

_NON_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")


@dataclasses.dataclass(frozen=True)
class Task:
    """One task instance. ``spec`` is JSON-serialisable and fully determines the episode."""

    domain: str
    split: str
    seed: int
    spec: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)

    @property
    def id(self) -> str:
        return f"{self.domain}/{self.split}/{self.seed}"


class Observation(NamedTuple):
    """What the agent is shown: a NamedTuple, cheaper to build than a frozen dataclass (one per step)."""

    text: str
    goal: str
    admissible: tuple[str, ...] = ()


class InvalidAction(Exception):
    """Raised by ``_step`` to reject an action; the env state must be unchanged."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class DomainEnv:
    """Base class of all domains (module docstring)."""

    name: ClassVar[str] = ""
    default_max_steps: ClassVar[int] = 50
    #: domain options and their defaults (difficulty knobs etc.); unknown options are an error
    default_options: ClassVar[dict[str, Any]] = {}
    #: True when an env's reset / step / expert_action mostly waits on a process of its own (a
    #: JVM): ``gentax.domains.pool`` then calls a batch's envs from threads at once, so their
    #: engines work side by side. Only for envs that share no state with each other in this process.
    concurrent_calls: ClassVar[bool] = False

    def __init__(self, split: str = "train", seed: int = 0, max_steps: int | None = None, **options):
        if split not in SPLITS:
            raise GentaxError(f"unknown split {split!r} for domain {self.name!r}; valid: {', '.join(SPLITS)}")
        self.options = self.check_options(options)
        self.split = split
        self.seed = int(seed)
        self.max_steps = int(max_steps if max_steps is not None else self.default_max_steps)
        if self.max_steps < 1:
            raise GentaxError(f"max_steps must be >= 1, got {self.max_steps}")
        self.current_task: Task | None = None
        self._extra_info: dict[str, Any] | None = None  # set by ``_step``: extra keys of a valid step's info
        self._obs: Observation | None = None
        self._steps = 0
        self._done = True

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` over ``default_options``, every value checked without building anything (so
        the plan checks a config with this code); GentaxError names the bad option. Subclasses
        extend it; ``__init__`` calls it first."""
        unknown = sorted(set(options) - set(cls.default_options))
        if unknown:
            valid = ", ".join(sorted(cls.default_options)) or "(none)"
            raise GentaxError(f"unknown option(s) {', '.join(unknown)} for domain {cls.name!r}; valid: {valid}")
        return {**cls.default_options, **options}

    # ---- public protocol -------------------------------------------------------------------
    def task(self, seed: int) -> Task:
        return self._make_task(int(seed))

    def reset(self, task: Task | None = None) -> Observation:
        task = task if task is not None else self.task(self.seed)
        if task.domain != self.name:
            raise GentaxError(f"task {task.id} belongs to domain {task.domain!r}, not {self.name!r}")
        self.current_task = task
        self._obs = self._reset(task)
        self._steps = 0
        self._done = False
        return self._obs

    def step(self, action: str) -> tuple[Observation, float, bool, dict[str, Any]]:
        if self._done:
            self._require_running()
        reason = _check_action_text(action)
        if reason is not None:
            if reason != _IRREGULAR_SPACE:
                return self._finish(None, False, reason)
            action = " ".join(action.split())
        try:
            result = self._step(action)
        except InvalidAction as exc:
            return self._finish(None, False, exc.reason)
        obs, won, ended = result if len(result) == 3 else (*result, False)
        return self._finish(obs, won, None, ended=ended)

    def step_invalid(self, reason: str) -> tuple[Observation, float, bool, dict[str, Any]]:
        """Count a step whose model output had no usable action (parse failure)."""
        self._require_running()
        return self._finish(None, False, reason)

    def expert_action(self) -> str:
        raise NotImplementedError

    @property
    def observation(self) -> Observation:
        if self._obs is None:
            raise RuntimeError("call reset() first")
        return self._obs

    @property
    def steps(self) -> int:
        return self._steps

    @property
    def done(self) -> bool:
        return self._done

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- subclass hooks --------------------------------------------------------------------
    def _make_task(self, seed: int) -> Task:
        raise NotImplementedError

    def _reset(self, task: Task) -> Observation:
        raise NotImplementedError

    def _step(self, action: str) -> tuple[Observation, bool] | tuple[Observation, bool, bool]:
        """Apply a whitespace-normalised action; return (observation, won) or
        (observation, won, ended) — ``ended`` finishes the episode even when not won — or raise
        InvalidAction."""
        raise NotImplementedError

    # ---- internals -------------------------------------------------------------------------
    def _require_running(self) -> None:
        if self._done:
            raise RuntimeError(f"{self.name}: episode is over (or never started); call reset()")

    def _finish(self, obs: Observation | None, won: bool, reason: str | None, ended: bool = False):
        self._steps += 1
        valid = reason is None
        if valid:
            self._obs = obs
        reward = INVALID_PENALTY if not valid else (SUCCESS_REWARD if won else 0.0)
        truncated = not (won or ended) and self._steps >= self.max_steps
        self._done = won or ended or truncated
        info = {"won": bool(won), "valid": valid, "reason": reason, "steps": self._steps, "truncated": truncated}
        if self._extra_info is not None:
            if valid:
                info.update(self._extra_info)
            self._extra_info = None
        return self._obs, reward, self._done, info


_IRREGULAR_SPACE = "irregular_space"  # not a reason: the action only needs " ".join(a.split())


def _check_action_text(action: Any) -> str | None:
    """Reason code when ``action`` cannot be a command at all, ``_IRREGULAR_SPACE`` when it only
    needs its whitespace normalised, else None (the common case, kept cheap: once per step)."""
    if not isinstance(action, str):
        return "non_text"
    if not action or action.isspace():
        return "empty"
    if len(action) > MAX_ACTION_CHARS:
        return "too_long"
    if "\ufffd" in action:
        return "non_text"
    if not action.isprintable():
        return "non_text" if _NON_TEXT.search(action) else _IRREGULAR_SPACE
    if "  " in action or action[0] == " " or action[-1] == " ":
        return _IRREGULAR_SPACE
    return None
