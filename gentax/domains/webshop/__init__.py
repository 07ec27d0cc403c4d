"""WebShop: search a product catalog and buy what the instruction asks for (see ``env``)."""

from __future__ import annotations

from gentax.agent.parse import webshop_action
from gentax.domains.augment import webshop_distractors, webshop_goal
from gentax.domains.spec import Augmentation, DomainSpec


def __getattr__(name: str):
    # lazy, so ``python -m gentax.domains.webshop.catalog`` does not import the env first
    if name == "WebshopEnv":
        from gentax.domains.webshop.env import WebshopEnv

        return WebshopEnv
    raise AttributeError(name)


__all__ = ["WebshopEnv", "SPEC"]

#: everything domain-specific about WebShop (gentax.domains.spec)
SPEC = DomainSpec(
    name="webshop",
    env="gentax.domains.webshop.env:WebshopEnv",
    intro="You are an expert shopping agent in the WebShop e-commerce website.",
    rule=(
        "Use search[your query] to search and click[button or option] to click a result, an "
        "option or Buy Now; text inside square brackets must match what is shown."
    ),
    action_syntax=webshop_action,
    augmentation=Augmentation(
        nominal_tokens=10, donor_chars_per_token=2.2, separator=" [SEP] ", monitor_shows="a shopping webpage",
        distractors=webshop_distractors, goal_in=webshop_goal,
    ),
    embedded_max_steps=8,
    aug_eps=30,
)
