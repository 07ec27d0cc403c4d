"""WebShop: search a product catalog and buy what the instruction asks for (see ``env``).

This module declares the domain (``SPEC``): its action syntax (``webshop_action``) and its
augmentation sources, 10-token ads, unselectable listings (results pages) and extra features
(item pages), inserted between ``[SEP]`` segments but never right after a label (pages without
``[SEP]``: at line ends); no button carries their text.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

from gentax.domains.augment import Layout, allowed, line_layout
from gentax.domains.spec import Augmentation, DomainSpec, action_key


def __getattr__(name: str):
    # lazy, so ``python -m gentax.domains.webshop.catalog`` does not import the env first
    if name == "WebshopEnv":
        from gentax.domains.webshop.env import WebshopEnv  # function-local: see the comment above

        return WebshopEnv
    raise AttributeError(name)


__all__ = ["WebshopEnv", "SPEC"]

_COMMAND = re.compile(r"(search|click)\s*\[(.*)\]", re.IGNORECASE | re.DOTALL)


def webshop_action(command: str, admissible: Sequence[str]) -> tuple[str | None, str | None]:
    """``search[query]`` is valid whenever the page has a search bar (an admissible
    ``search[...]`` entry); the query text is free. ``click[x]`` is valid when ``x`` equals an
    admissible ``click[...]`` target ignoring case and whitespace; the env's spelling is returned.
    Anything else is ``not_admissible``; an empty bracket is ``empty``."""
    match = _COMMAND.fullmatch(command)
    if not match:
        return None, "not_admissible"
    verb, argument = match.group(1).lower(), " ".join(match.group(2).split())
    if not argument:
        return None, "empty"
    if verb == "search":
        has_search = not admissible or any(a.strip().lower().startswith("search[") for a in admissible)
        return (f"search[{argument}]", None) if has_search else (None, "not_admissible")
    if not admissible:
        return f"click[{argument}]", None
    targets = {}
    for entry in admissible:
        clickable = _COMMAND.fullmatch(entry.strip())
        if clickable and clickable.group(1).lower() == "click":
            targets[action_key(clickable.group(2))] = entry
    found = targets.get(argument.lower())
    return (found, None) if found is not None else (None, "not_admissible")


# ---- augmentation sources -------------------------------------------------------------------
WEBSHOP_ADJECTIVES = (
    "cozy", "stylish", "durable", "lightweight", "classic", "premium", "vintage", "handmade",
)  # fmt: skip
WEBSHOP_PRODUCTS = (  # (plural for ads, singular for fake listings)
    ("cardigans", "cardigan"), ("hoodies", "hoodie"), ("sneakers", "sneaker"),
    ("desk lamps", "desk lamp"), ("backpacks", "backpack"), ("coffee mugs", "coffee mug"),
    ("headphones", "headphone set"), ("blankets", "blanket"), ("sunglasses", "pair of sunglasses"),
    ("scented candles", "scented candle"), ("wall clocks", "wall clock"), ("umbrellas", "umbrella"),
)  # fmt: skip
WEBSHOP_AD_TEMPLATES = (
    "[AD] {pct}% off — shop {adj} {products} today!",
    "[AD] Free shipping on {adj} {products} this week!",
    "[AD] Members save {pct}% on {adj} {products}!",
)
WEBSHOP_FEATURES = (
    "Extra feature: the listing photo was taken on a {day}",
    "Extra feature: the shipping box has a small {color} logo",
    "Extra feature: a {color} thank-you card is included",
    "Extra feature: the manual is printed on recycled paper",
    "Extra feature: the barcode label sits on the {side} side of the box",
)
WEBSHOP_FILLERS = {
    "day": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
    "color": ("teal", "maroon", "lavender", "mustard", "olive"),
    "side": ("left", "right", "bottom"),
}
SEPARATOR = " [SEP] "
_ASIN = re.compile(r"^[A-Z0-9]{10}$")


@dataclasses.dataclass(frozen=True)
class WebshopLayout(Layout):
    after_price: list[int] = dataclasses.field(default_factory=list)  # boundaries right after a price (result lists)
    results_page: bool = False
    item_page: bool = False


def webshop_layout(text: str) -> WebshopLayout:
    """Between ``[SEP]`` segments, never right after a label; a page without ``[SEP]``: line ends."""
    if "[SEP]" not in text:
        lines = line_layout(text)
        return WebshopLayout(lines.separator, lines.boundaries)
    segments = text.split(SEPARATOR)
    boundaries, after_price, position = [], [], 0
    for index, segment in enumerate(segments):
        position += len(segment)
        label = segment.strip().endswith(":")
        if not label:
            boundaries.append(position)
            if segment.strip().startswith("$"):
                after_price.append(position)
        position += len(SEPARATOR) if index < len(segments) - 1 else 0
    stripped = [s.strip() for s in segments]
    results = any(_ASIN.match(s) for s in stripped) or "Next >" in stripped
    item = any(s.lower() == "buy now" for s in stripped)
    return WebshopLayout(SEPARATOR, boundaries or [len(text)], after_price, results, item)


def webshop_goal(text: str) -> str:
    match = re.search(r"Instruction:\s*(?:\[SEP\])?\s*(.+?)(?:\[SEP\]|\n|$)", text)
    return match.group(1) if match else ""


#: how ``webshop_distractors`` picks each distractor's kind (printed by ``gentax plan --settings``)
DISTRACTOR_KINDS = ("one of the kinds the page allows, drawn uniformly per distractor: an ad line (every page), "
                    "an unselectable listing (results pages), an extra feature (item pages)")


def webshop_distractors(text, count, rng, keywords, layout):
    products = allowed(WEBSHOP_PRODUCTS, keywords, lambda p: " ".join(p))
    adjectives = allowed(WEBSHOP_ADJECTIVES, keywords)
    fillers = {k: allowed(v, keywords) for k, v in WEBSHOP_FILLERS.items()}
    features = allowed(WEBSHOP_FEATURES, keywords, lambda f: re.sub(r"\{\w+\}", "", f))
    kinds = ["ad"] + (["listing"] if layout.results_page else []) + (["feature"] if layout.item_page else [])
    placed = []
    for _ in range(count):
        kind = rng.choice(kinds)
        plural, singular = rng.choice(products)
        if kind == "ad":
            snippet = rng.choice(WEBSHOP_AD_TEMPLATES).format(
                pct=rng.choice((10, 15, 20, 25, 30, 40, 50)), adj=rng.choice(adjectives), products=plural
            )
            where = layout.boundaries
        elif kind == "listing":
            snippet = f"Warning: out of stock {rng.choice(adjectives)} {singular} (cannot be selected)"
            where = layout.after_price or layout.boundaries
        else:
            template = rng.choice(features)
            snippet = template.format(**{k: rng.choice(v) for k, v in fillers.items()})
            where = layout.boundaries
        placed.append((rng.choice(where), snippet))
    return placed


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
        nominal_tokens=10, donor_chars_per_token=2.2, separator=SEPARATOR, monitor_shows="a shopping webpage",
        distractors=webshop_distractors, goal_in=webshop_goal, layout=webshop_layout,
    ),
)
