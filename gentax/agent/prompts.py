"""Step prompts: ONE fresh user message per step, in the structure verl-agent uses.

The trajectory is not one growing chat: every step the agent gets a new message holding the
domain intro and goal (and the spec's rule line), the last ``history_length`` (observation seen,
action taken) pairs with the step count, the current observation, the admissible actions (capped
at the spec's ``max_admissible_shown``) and the answer instruction; ``history_length`` 0 is
verl-agent's no-history template (no step count); docs/agent.md "Step prompts" shows the
layout with rendered examples. Think modes (``MODES``): ``on`` reasons then acts, ``off`` acts
only, ``filler`` uses the ``on`` prompt with a forced think block (``gentax.agent.filler``).
``observation_from_prompt`` recovers the current observation from a rendered prompt.
"""

from __future__ import annotations

import re
from typing import Sequence

from gentax.domains.base import Observation
from gentax.domains.spec import spec, specs
from gentax.errors import GentaxError

_GOAL_PREFIX = re.compile(r"^\s*your task is to:?\s*", re.IGNORECASE)


def __getattr__(name: str):
    if name == "MAX_ADMISSIBLE_SHOWN":  # derived from the domain specs (gentax.domains.spec)
        return {d: s.max_admissible_shown for d, s in specs().items()}
    raise AttributeError(name)


MODES = ("on", "off", "filler")


def mode_of(think: bool | str) -> str:
    """``"on"``, ``"off"`` or ``"filler"`` from a mode name or a bool (True: on); else GentaxError."""
    if isinstance(think, bool):
        return "on" if think else "off"
    if think not in MODES:
        raise GentaxError(f"unknown think mode {think!r}; valid: {', '.join(MODES)}")
    return think


DOMAIN_DEFAULT = object()  # sentinel: use the domain spec's max_admissible_shown

CURRENT_MARKER = "Current observation:\n"
ADMISSIBLE_MARKER = "\nAdmissible actions: ["

_THINK_INSTRUCTION = (
    "Now choose the next action. First reason step by step about the current situation inside "
    "<think> </think> tags, then give exactly one admissible action inside <action> </action> tags."
)
_NO_THINK_INSTRUCTION = (
    "Now choose the next action. Reply with exactly one admissible action inside "
    "<action> </action> tags and nothing else."
)


def build_messages(
    domain: str,
    obs: Observation,
    history: Sequence[tuple[str, str]],
    step: int,
    *,
    think: bool | str = True,
    history_length: int = 2,
    max_admissible: int | None | object = DOMAIN_DEFAULT,
) -> list[dict[str, str]]:
    """The chat messages for one step (see the module docstring for the layout)."""
    declared = spec(domain)  # an unknown domain is one GentaxError
    if history_length < 0:
        raise GentaxError(f"history_length must be >= 0, got {history_length}")
    if step < 0:
        raise GentaxError(f"step must be >= 0, got {step}")
    cap = declared.max_admissible_shown if max_admissible is DOMAIN_DEFAULT else max_admissible

    goal = _GOAL_PREFIX.sub("", obs.goal).strip()  # ScienceWorld's goal starts "Your task is to"
    lines = [f"{declared.intro} Your task is to: {goal}"]
    if declared.rule and (declared.rule_when is None or declared.rule_when(obs)):
        lines.append(declared.rule)
    if history_length == 0:  # verl-agent's no-history template: no step count, so a step's prompt
        lines.append(f"{CURRENT_MARKER}{obs.text}")  # shares its episode's last one up to the first change
    else:
        recent = list(history[-history_length:]) if step > 0 else []
        if recent:
            lines.append(
                f"Prior to this step, you have already taken {step} step(s). Below are the most "
                f"recent {len(recent)} observation(s) and the action(s) you took:"
            )
            first = step - len(recent) + 1  # history holds every past step, oldest first
            for offset, (seen, action) in enumerate(recent):
                number = first + offset
                lines.append(f"[Observation {number}: '{seen}', Action {number}: '{action}']")
        elif step > 0:
            lines.append(f"Prior to this step, you have already taken {step} step(s).")
        lines.append(f"You are now at step {step + 1}. {CURRENT_MARKER}{obs.text}")
    lines.append(ADMISSIBLE_MARKER.lstrip("\n") + format_admissible(obs.admissible, cap) + "]")
    lines.append(_NO_THINK_INSTRUCTION if mode_of(think) == "off" else _THINK_INSTRUCTION)
    return [{"role": "user", "content": "\n".join(lines)}]


def format_admissible(actions: Sequence[str], cap: int | None = None) -> str:
    """``'a', 'b', ...``; beyond ``cap`` entries: ``... (N more not shown)``."""
    shown = list(actions) if cap is None else list(actions)[:cap]
    text = ", ".join(f"'{a}'" for a in shown)
    hidden = len(actions) - len(shown)
    if hidden > 0:
        text += f", ... ({hidden} more not shown)"
    return text


def observation_from_prompt(prompt: str) -> str:
    """The current observation inside a prompt rendered by ``build_messages``."""
    start = prompt.rfind(CURRENT_MARKER)
    end = prompt.rfind(ADMISSIBLE_MARKER)
    if start < 0 or end < start:
        raise GentaxError("prompt was not rendered by gentax.agent.prompts (no current-observation markers)")
    return prompt[start + len(CURRENT_MARKER) : end]
