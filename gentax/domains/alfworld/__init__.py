"""ALFWorld domain: the real TextWorld engine on official or procedurally generated games.

``AlfworldEnv`` (``env.py``) is the protocol class; ``scenegen`` writes games in the official
format from the floor plans the alfworld wheel ships; ``engine`` assembles TextWorld's PDDL
environment with alfworld's wrappers and the fast-downward planner expert.
"""

from gentax.agent.parse import exact_action
from gentax.domains.alfworld.env import AlfworldEnv
from gentax.domains.augment import alfworld_distractors, alfworld_goal
from gentax.domains.spec import Augmentation, DomainSpec

__all__ = ["AlfworldEnv", "SPEC"]

#: everything domain-specific about ALFWorld (gentax.domains.spec)
SPEC = DomainSpec(
    name="alfworld",
    env="gentax.domains.alfworld.env:AlfworldEnv",
    intro="You are an expert agent in the ALFRED household environment (ALFWorld).",
    action_syntax=exact_action,
    augmentation=Augmentation(
        nominal_tokens=12, donor_chars_per_token=2.7, separator=" ", monitor_shows="a household simulation",
        distractors=alfworld_distractors, goal_in=alfworld_goal,
    ),
    embedded_max_steps=10,
    aug_eps=300,
)

