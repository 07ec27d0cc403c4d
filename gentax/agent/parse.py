"""Parse a model response into an action, or an invalid result with a reason code.

A response is ``<think>reasoning</think><action>command</action>`` (think mode) or
``<action>command</action>`` (no-think mode; filler mode reads the generated text by the no-think
rules). Tags are case-insensitive; action tags inside the think block are reasoning, ignored. The
reasons (``REASONS``, checked in that order) are tabled in docs/agent.md "Parser". The command is
normalised (whitespace collapsed, one pair of surrounding quotes and a trailing period dropped),
then judged by the domain spec's ``action_syntax``; an empty ``admissible`` leaves it to the env.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

from gentax.agent.prompts import mode_of
from gentax.domains.spec import spec

REASONS = (
    "no_action_tag",
    "unclosed_think",
    "unclosed_action",
    "multiple_actions",
    "no_think",
    "empty",
    "not_admissible",
)

_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.IGNORECASE | re.DOTALL)
_ACTION_BLOCK = re.compile(r"<action>(.*?)</action>", re.IGNORECASE | re.DOTALL)
_OPEN_THINK = re.compile(r"<think>", re.IGNORECASE)
_OPEN_ACTION = re.compile(r"<action>", re.IGNORECASE)
_QUOTES = "'\"`"


@dataclasses.dataclass(frozen=True)
class Parsed:
    action: str | None  # normalised action when valid, else None
    reason: str | None  # None when valid; else one of REASONS
    think: str | None  # the reasoning text, when a complete think block was given
    raw_action: str | None = None  # the text inside the action tag, as written (for logs)

    @property
    def valid(self) -> bool:
        return self.reason is None


def parse_response(
    text: str, *, domain: str, admissible: Sequence[str] = (), think: bool | str = True
) -> Parsed:
    """Parse ``text`` (see the module docstring for the rules and reason codes)."""
    think = mode_of(think) == "on"  # filler: the think block is not part of the generated text

    action_syntax = spec(domain).action_syntax  # an unknown domain is one GentaxError
    think_spans = [m.span() for m in _THINK_BLOCK.finditer(text)]
    think_blocks = [m.group(1).strip() for m in _THINK_BLOCK.finditer(text)]
    think_text = think_blocks[0] if think_blocks else None

    def outside_think(pos: int) -> bool:
        return not any(start <= pos < end for start, end in think_spans)

    actions = [m for m in _ACTION_BLOCK.finditer(text) if outside_think(m.start())]
    open_think = any(outside_think(m.start()) for m in _OPEN_THINK.finditer(text))

    def invalid(reason: str, raw: str | None = None) -> Parsed:
        return Parsed(action=None, reason=reason, think=think_text, raw_action=raw)

    if not actions:
        if think and open_think:
            return invalid("unclosed_think")
        if any(outside_think(m.start()) for m in _OPEN_ACTION.finditer(text)):
            return invalid("unclosed_action")
        return invalid("no_action_tag")
    if len(actions) > 1:
        return invalid("multiple_actions", actions[0].group(1))
    match = actions[0]
    raw = match.group(1)
    if think and not any(end <= match.start() for _, end in think_spans):
        return invalid("unclosed_think" if open_think else "no_think", raw)
    command = _strip_decoration(" ".join(raw.split()))
    if not command:
        return invalid("empty", raw)
    action, reason = action_syntax(command, admissible)
    if reason is not None:
        return invalid(reason, raw)
    return Parsed(action=action, reason=None, think=think_text, raw_action=raw)


def think_text(text: str) -> str | None:
    """The content of the first complete ``<think>…</think>`` block of ``text`` (stripped), or None."""
    match = _THINK_BLOCK.search(text)
    return match.group(1).strip() if match else None


def format_response(action: str, think_text: str | None) -> str:
    """The response that ``parse_response`` reads back as ``action`` (and ``think_text``)."""
    if think_text is None:
        return f"<action>{action}</action>"
    return f"<think>{think_text}</think>\n<action>{action}</action>"


# ---- normalisation before the domain's action syntax ------------------------------------------
def _strip_decoration(command: str) -> str:
    if len(command) >= 2 and command[0] == command[-1] and command[0] in _QUOTES:
        command = command[1:-1].strip()
    if command.endswith(".") and not command.endswith(".."):
        command = command[:-1].rstrip()
    return command
