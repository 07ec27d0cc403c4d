"""A fifth, toy domain declared in ONE module outside gentax/domains/ (tests/test_toy_domain.py).

Registered the documented way: ``GENTAX_DOMAINS=toy_domain`` with this folder on the Python path
(docs/domains.md "Adding a domain"). The task: press the button the goal names.
"""

from __future__ import annotations

import random
from typing import Any

from gentax.domains.base import DomainEnv, Observation, Task
from gentax.domains.spec import Augmentation, DomainSpec, exact_action
from gentax.errors import GentaxError


class ToyEnv(DomainEnv):
    name = "toy"
    default_max_steps = 4
    default_options = {"buttons": 3}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        merged = super().check_options(options)
        buttons = merged["buttons"]
        if isinstance(buttons, bool) or not isinstance(buttons, int) or not 2 <= buttons <= 9:
            raise GentaxError(f"toy option buttons must be an int in 2..9, got {buttons!r}")
        return merged

    def _make_task(self, seed: int) -> Task:
        target = random.Random(f"toy:{self.split}:{seed}").randint(1, self.options["buttons"])
        return Task(self.name, self.split, seed, {"target": target})

    def _actions(self) -> tuple[str, ...]:
        return tuple(f"press {i}" for i in range(1, self.options["buttons"] + 1))

    def _reset(self, task: Task) -> Observation:
        return Observation("You see a row of buttons.", f"press button {task.spec['target']}", self._actions())

    def _step(self, action: str):
        if action not in self._actions():
            from gentax.domains.base import InvalidAction

            raise InvalidAction("not_admissible", action)
        won = action == f"press {self.current_task.spec['target']}"
        return self._obs._replace(text="A light turns on." if won else "Nothing happens."), won

    def expert_action(self) -> str:
        return f"press {self.current_task.spec['target']}"


def _distractors(text, count, rng, keywords, layout):
    return [(rng.choice(layout.boundaries), "A toy robot hums in the corner.") for _ in range(count)]


SPEC = DomainSpec(
    name="toy",
    env="toy_domain:ToyEnv",
    intro="You are an agent in a room of buttons.",
    rule="Answer with press N.",
    action_syntax=exact_action,
    augmentation=Augmentation(nominal_tokens=8, donor_chars_per_token=4.0, separator="\n",
                              monitor_shows="a room of buttons", distractors=_distractors),
    warm_start=False,
)
