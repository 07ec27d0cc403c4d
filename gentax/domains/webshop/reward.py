"""WebShop's purchase score, as the official WebShop (princeton-nlp, ``engine/goal.py``) defines it.

    score = r_type * (attribute matches + option matches + price ok) / (#attributes + #options + 1)

An attribute matches a product attribute fuzzily (thefuzz ``token_set_ratio`` > 85) or occurs in
its title, bullet points or description; an option matches a chosen option fuzzily, both first
mapped to their first colour word; r_type is 1.0 on a shared query, two shared category levels or
over 20 % of the goal title's nouns, else 0.5, then 0.1 under 10 % and 0.0 with none. Success is a
score of exactly 1.0. One deviation: the official noun test uses spaCy's tagger (a model
download); we take content words for nouns (``title_nouns``). Fuzzy scores use rapidfuzz with
thefuzz's preprocessing and rounding, which is what thefuzz runs.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Iterable, Mapping, Sequence

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

FUZZY_THRESHOLD = 85  # "score > 85" counts as a match

# WebShop's colour vocabulary; the first (alphabetical) word contained in an option is its colour
COLOURS = (
    "alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze "
    "brown burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas "
    "coffee cognac copper coral cranberry cream crystal dark denim eggplant elephant espresso "
    "fuchsia gold granite grape graphite grass gray green grey heather indigo ivory ivy khaki "
    "lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight mint mocha "
    "multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple "
    "rainbow red rose royal rust sand sapphire seashell silver skull slate steel stone stonewash "
    "sunflower tan taupe teal tiger turquoise violet walnut wheat white wine yellow"
).split()

# Function words: never nouns (stand-in for spaCy's POS tags, see the module docstring). Title-cased
# product names make spaCy tag most other words PROPN or NOUN, so only closed-class words go.
_NOT_NOUNS = frozenset(
    "a an the and or but nor for of in on at to from by with without into onto over under up down "
    "out off as per via than then so if is are be was were been being it its this that these those "
    "you your our we they their he she his her my me us all any each every both no not only very "
    "more most less few many much some such same other another".split()
)


def fuzzy_ratio(a: str, b: str) -> int:
    """thefuzz ``token_set_ratio`` (default processing: ASCII only, lower-case, punctuation
    to spaces), rounded to an int like thefuzz returns it."""
    a = default_process(_ascii(a))
    b = default_process(_ascii(b))
    if not a or not b:
        return 0
    return int(round(fuzz.token_set_ratio(a, b)))


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode("ascii")


def normalize_colour(option: str) -> str:
    for colour in COLOURS:
        if colour in option:
            return colour
    return option


def title_nouns(title: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", title.lower()) if len(w) > 1 and w not in _NOT_NOUNS]


def type_reward(purchased: Mapping[str, Any], goal: Mapping[str, Any]) -> dict[str, Any]:
    query_match = purchased["query"] == goal["query"]
    bought_levels = {x.strip() for x in purchased["product_category"].split("›")}
    goal_levels = {x.strip() for x in goal["product_category"].split("›")}
    category_match = len(bought_levels & goal_levels) >= 2
    wanted = title_nouns(goal["name"])
    got = title_nouns(purchased["name"])
    title_score = len(set(got) & set(wanted)) / len(wanted) if wanted else 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match, "title_score": title_score}


def attribute_matches(purchased: Mapping[str, Any], goal_attributes: Sequence[str]) -> int:
    text = (
        purchased["Title"].lower(),
        " ".join(purchased["BulletPoints"]).lower(),
        purchased["Description"].lower(),
    )
    matches = 0
    for wanted in goal_attributes:
        if any(fuzzy_ratio(have, wanted) > FUZZY_THRESHOLD for have in purchased["Attributes"]):
            matches += 1
        elif any(wanted in field for field in text):
            matches += 1
    return matches


def option_matches(chosen: Iterable[str], goal_options: Sequence[str]) -> int:
    chosen = [normalize_colour(o) for o in chosen]
    matches = 0
    for wanted in (normalize_colour(o) for o in goal_options):
        if any(fuzzy_ratio(have, wanted) > FUZZY_THRESHOLD for have in chosen):
            matches += 1
    return matches


def purchase_score(
    purchased: Mapping[str, Any], goal: Mapping[str, Any], price: float, chosen_options: Mapping[str, str]
) -> tuple[float, dict[str, Any]]:
    """WebShop's score in [0, 1] for buying ``purchased`` (a loaded product, ``catalog.load_catalog``)
    at ``price`` with ``chosen_options``, and its parts."""
    r_type = type_reward(purchased, goal)
    attributes = list(goal["attributes"])
    options = list(goal["goal_options"].values() if isinstance(goal["goal_options"], dict) else goal["goal_options"])
    n_attr = attribute_matches(purchased, attributes)
    n_opt = option_matches(chosen_options.values(), options)
    price_ok = price <= goal["price_upper"]
    total = (n_attr + n_opt + price_ok) / (len(attributes) + len(options) + 1) * r_type["r_type"]
    info = {
        **r_type,
        "r_att": n_attr / len(attributes) if attributes else None,
        "r_option": n_opt / len(options) if options else None,
        "r_price": price_ok,
    }
    return total, info
