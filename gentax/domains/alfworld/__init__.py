"""ALFWorld domain: the real TextWorld engine on official or procedurally generated games
(docs/alfworld.md). ``env`` is the protocol class, ``scenegen`` writes games, ``engine`` assembles
TextWorld's PDDL environment. This module declares the domain (``SPEC``) and its augmentation
sources: 12-token sentences about objects ALFWorld does not have, at sentence ends before the task.
"""

import re

from gentax.domains.alfworld.env import AlfworldEnv
from gentax.domains.augment import Layout, allowed, article, sentence_layout
from gentax.domains.spec import Augmentation, DomainSpec, exact_action

__all__ = ["AlfworldEnv", "SPEC"]

ALFWORLD_TYPES = (
    "umbrella", "guitar", "backpack", "scarf", "globe", "chess set", "yoga mat", "toy train",
    "picture frame", "bird cage", "rubber duck", "piggy bank", "hourglass", "thermos",
    "harmonica", "skateboard", "suitcase", "sewing kit", "flashlight", "paperweight",
    "wind chime", "tape measure", "birdhouse", "sun hat", "trophy", "lunchbox", "stapler",
    "calculator",
)  # fmt: skip
ALFWORLD_DESCRIPTIONS = (
    "is covered in dust", "looks brand new", "has a small crack on one side",
    "is slightly tilted", "has a faded sticker on it", "seems to be missing a part",
    "is painted a pale blue", "smells faintly of cedar", "has a chipped corner",
    "is wrapped in brown paper", "looks a bit worn out", "still has a price tag attached",
    "is partly hidden in shadow", "has scratches along its edge", "sits at an odd angle",
    "feels cold to the touch", "has a name written on it", "was clearly used long ago",
    "is decorated with tiny stars",
)  # fmt: skip
ALFWORLD_PLACES = (
    "Near the entrance", "In a corner of the room", "Next to the door", "On the floor",
    "Against the far wall", "By the doorway", "Under the ceiling light", "Close to the wall",
    "In the middle of the floor", "Beside the radiator",
)  # fmt: skip
TASK_MARKER = "Your task is to:"


def alfworld_layout(text: str) -> Layout:
    """Sentence ends, kept ahead of the task statement so it stays free of distractors."""
    return sentence_layout(text, " ", before=TASK_MARKER)


def alfworld_goal(text: str) -> str:
    match = re.search(re.escape(TASK_MARKER) + r"\s*(.+)", text)
    return match.group(1) if match else ""


def alfworld_distractors(text, count, rng, keywords, layout):
    types = allowed(ALFWORLD_TYPES, keywords)
    descriptions = allowed(ALFWORLD_DESCRIPTIONS, keywords)
    placed = []
    for _ in range(count):
        kind = rng.choice(types)
        sentence = (
            f"{rng.choice(ALFWORLD_PLACES)}, there is {article(kind)} {kind} {rng.randint(1, 9)} "
            f"that {rng.choice(descriptions)}."
        )
        placed.append((rng.choice(layout.boundaries), sentence))
    return placed


#: everything domain-specific about ALFWorld (gentax.domains.spec)
SPEC = DomainSpec(
    name="alfworld",
    env="gentax.domains.alfworld.env:AlfworldEnv",
    intro="You are an expert agent in the ALFRED household environment (ALFWorld).",
    action_syntax=exact_action,
    augmentation=Augmentation(
        nominal_tokens=12, donor_chars_per_token=2.7, separator=" ", monitor_shows="a household simulation",
        distractors=alfworld_distractors, goal_in=alfworld_goal, layout=alfworld_layout,
    ),
)
