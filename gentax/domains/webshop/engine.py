"""The WebShop site as a text state machine, without the gentax protocol (what the env wraps).

Pages, their text and the actions follow the official text env (``observation_mode="text"``: the
page's visible strings joined by `` [SEP] ``; ``search[query]`` and ``click[<clickable>]``), minus
the "WebShop / Instruction: / <goal>" header that verl-agent strips too; docs/domains.md "WebShop"
shows each page. Admissible actions are listed as verl-agent lists them. Unlike upstream (which
ignores an unknown click with reward 0), an action the page does not offer raises
``InvalidAction`` and changes nothing. ``Buy Now`` ends the episode with WebShop's score.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Collection, Mapping, Sequence

from gentax.domains.base import InvalidAction
from gentax.domains.webshop.catalog import Catalog
from gentax.domains.webshop.reward import FUZZY_THRESHOLD, fuzzy_ratio, normalize_colour, purchase_score

PRODUCT_WINDOW = 10
SEP = " [SEP] "
BACK, NEXT, PREV, BUY = "back to search", "next >", "< prev", "buy now"
SUB_PAGES = {"description": "Description", "features": "Features", "reviews": "Reviews", "attributes": "Attributes"}
SEARCH_TEMPLATE = "search[<your query>]"
_ACTION = re.compile(r"(search|click)\[(.+)\]", re.DOTALL)
_PRICE_CLAUSE = re.compile(r", and price lower than [\d.]+ dollars$")


def check_action(action: str, done: bool, has_search_bar: bool, clickables: Collection[str]) -> tuple[str, str]:
    """``(verb, argument)`` of an action the page offers (lower-cased, as upstream lower-cases
    the argument); InvalidAction for anything else."""
    if done:
        raise InvalidAction("episode_over", "the purchase is made")
    match = _ACTION.fullmatch(action.strip().lower())
    if match is None:
        raise InvalidAction("not_admissible", "actions are search[query] or click[button]")
    verb, arg = match.group(1), match.group(2).strip()
    if verb == "search":
        if not has_search_bar:
            raise InvalidAction("not_admissible", "this page has no search bar (click back to search)")
        if not arg:
            raise InvalidAction("not_admissible", "empty search query")
    elif arg not in clickables:
        raise InvalidAction("not_admissible", f"nothing to click named {arg[:60]!r} on this page")
    return verb, arg


def admissible_actions(has_search_bar: bool, clickables: Collection[str]) -> tuple[str, ...]:
    """A page's admissible actions as verl-agent lists them."""
    return ((SEARCH_TEMPLATE,) if has_search_bar else ()) + tuple(f"click[{c}]" for c in clickables)


class WebShopEngine:
    def __init__(self, catalog: Catalog, show_attrs: bool = False, results_per_page: int = PRODUCT_WINDOW):
        self.catalog = catalog
        self.show_attrs = show_attrs
        self.results_per_page = results_per_page
        self.goal: Mapping[str, Any] = {}
        self.done = True

    # ---- session -----------------------------------------------------------------------------
    def reset(self, goal: Mapping[str, Any]) -> str:
        self.goal = goal
        self.searches: list[str] = []
        self.score: float | None = None
        self.score_info: dict[str, Any] = {}
        self.done = False
        self._to_search_page()
        return self.text

    def act(self, action: str) -> str:
        """Apply ``action``; return the new page text, or raise InvalidAction (state unchanged)."""
        verb, arg = check_action(action, self.done, self.page == "search", self.clickables)
        if verb == "search":
            self._search(arg)
        else:
            self._click(arg)
        self._render()
        return self.text

    # ---- transitions ---------------------------------------------------------------------------
    def _to_search_page(self) -> None:
        self.page, self.keywords, self.results, self.page_no = "search", "", [], 1
        self.asin: str | None = None
        self.options: dict[str, str] = {}
        self._render()

    def _search(self, query: str) -> None:
        self.searches.append(query)
        self.keywords = query
        self.results = self.catalog.engine.search(query)
        self.page, self.page_no = "results", 1

    def _click(self, arg: str) -> None:
        if arg == BACK:
            self._to_search_page()
        elif arg == NEXT:
            self.page_no += 1
        elif arg == PREV:
            if self.page == "results":
                self.page_no -= 1
            elif self.page == "item":
                self.page, self.asin, self.options = "results", None, {}
            else:
                self.page = "item"
        elif arg == BUY:
            product = self.catalog.by_asin[self.asin]
            self.score, self.score_info = purchase_score(product, self.goal, self.catalog.prices[self.asin], self.options)
            self.page, self.done = "done", True
        elif arg in SUB_PAGES and self.page == "item":
            self.page = SUB_PAGES[arg]
        elif self.page == "results":
            self.page, self.asin, self.options = "item", self.clickables[arg], {}
        else:  # an option value: the (last) option group offering it, as upstream's radio lookup
            group = [name for name, values in self.product["options"].items() if arg in values][-1]
            self.options[group] = arg

    # ---- pages ------------------------------------------------------------------------------------
    @property
    def product(self) -> dict[str, Any]:
        return self.catalog.by_asin[self.asin]

    def _render(self) -> None:
        """Set ``text``, ``clickables`` (name -> ASIN for product links, else None; page order)
        and ``admissible``."""
        page = self.page
        clicks: list[str] = []
        links: dict[str, str] = {}
        if page == "search":
            parts = ["Search"]
        elif page == "done":
            parts = ["Thank you for shopping with us!", "Your score (min 0.0, max 1.0)", str(self.score)]
        elif page == "results":
            shown = self.results[(self.page_no - 1) * self.results_per_page : self.page_no * self.results_per_page]
            parts = ["Back to Search", f"Page {self.page_no} (Total results: {len(self.results)})"]
            clicks = [BACK]
            if self.page_no > 1:
                parts.append("< Prev")
                clicks.append(PREV)
            parts.append("Next >")
            clicks.append(NEXT)
            for asin in shown:
                product = self.catalog.by_asin[asin]
                parts += [asin, product["Title"], product["Price"]]
                clicks.append(asin.lower())
                links[asin.lower()] = asin
        elif page == "item":
            product = self.product
            parts = ["Back to Search", "< Prev"]
            option_values = []
            for name, values in product["options"].items():
                parts += [name, *values]
                option_values += values
            buttons = ["Description", "Features", "Reviews"] + (["Attributes"] if self.show_attrs else [])
            parts += [product["Title"], f"Price: {product['Price']}", f"Rating: {product['Rating']}", *buttons, "Buy Now"]
            clicks = [BACK, PREV, *(b.lower() for b in buttons), BUY, *option_values]
        else:  # a product sub page
            product = self.product
            parts = ["Back to Search", "< Prev"]
            if page == "Description":
                parts.append(product["Description"])
            elif page == "Features":
                parts += product["BulletPoints"]
            elif page == "Attributes":
                parts += [*product["Attributes"], product["category"], product["query"], product["product_category"]]
            clicks = [BACK, PREV]
        self.text = SEP.join(p.strip() for p in parts)
        self.clickables = {c: links.get(c) for c in clicks}
        self.admissible = admissible_actions(page == "search", self.clickables)

    # ---- expert ------------------------------------------------------------------------------------
    def expert_action(self) -> str:
        page = self.page if self.page in ("search", "results", "item", "done") else "sub"
        return expert_action(ExpertView(
            page=page,
            searches=len(self.searches),
            clickables=self.clickables,
            more_results=self.page_no * self.results_per_page < len(self.results),
            asin=self.asin,
            selected=tuple(self.options.values()),
            product_options=self.product["options"] if self.asin else {},
            goal=self.goal,
            target_title=self.catalog.by_asin[self.goal["asin"]]["Title"],
        ))


@dataclasses.dataclass(frozen=True)
class ExpertView:
    """What the expert needs to see of a WebShop session (ours or the official one's)."""

    page: str  # "search" | "results" | "item" | "sub" (Description, ...) | "done"
    searches: int  # searches made so far this episode
    clickables: Collection[str]
    more_results: bool  # a results page after this one holds hits
    asin: str | None  # the product shown on an item page
    selected: Collection[str]  # option values chosen on it
    product_options: Mapping[str, Sequence[str]]
    goal: Mapping[str, Any]
    target_title: str


def expert_action(view: ExpertView) -> str:
    """Search with the goal's words (then with the goal product's title), page through the
    results to the goal product, choose the goal's options, buy."""
    target = view.goal["asin"]
    if view.page == "search":
        query = view.target_title if view.searches else _PRICE_CLAUSE.sub("", view.goal["instruction_text"])
        return f"search[{query.lower()}]"
    if view.page == "results":
        if target.lower() in view.clickables:
            return f"click[{target.lower()}]"
        return f"click[{NEXT}]" if view.more_results else f"click[{BACK}]"
    if view.page == "item":
        if view.asin != target:
            return f"click[{PREV}]"
        goal_options = view.goal["goal_options"]  # a dict for upstream's synthetic goals
        goal_options = list(goal_options.values()) if isinstance(goal_options, Mapping) else goal_options
        for value in wanted_option_values(view.product_options, goal_options):
            if value not in view.selected:
                return f"click[{value}]"
        return f"click[{BUY}]"
    return f"click[{PREV}]"


def wanted_option_values(product_options: Mapping[str, Sequence[str]], goal_options: Sequence[str]) -> list[str]:
    """Per goal option, the product's option value that matches it best (as the score matches)."""
    values = [v for vs in product_options.values() for v in vs]
    wanted = []
    for goal_option in goal_options:
        norm = normalize_colour(goal_option)
        scored = [(fuzzy_ratio(normalize_colour(v), norm), v == goal_option, -i, v) for i, v in enumerate(values)]
        if scored:
            score, _, _, best = max(scored)
            if score > FUZZY_THRESHOLD:
                wanted.append(best)
    return wanted
