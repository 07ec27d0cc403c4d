"""The official WebShop (``web_agent_site``) behind the same engine interface, when importable.

``WebshopEnv(backend="official")`` steps the official ``WebAgentTextEnv`` (its SimServer, Lucene
search, pages and ``get_reward``) with the data it was installed with, adapted as our engine is:
no header, verl-agent's admissible list, and an action the page does not offer is an invalid step.
It cannot be installed offline, so its tests skip where it is absent. Upstream draws goal price
bounds from the *global* RNG while loading, so the server is built with that RNG seeded and
restored afterwards: goals are the same in every process, and nothing leaks.
"""

from __future__ import annotations

import contextlib
import functools
import random
import re
from typing import Any, Mapping

from gentax.domains.webshop.engine import PRODUCT_WINDOW, SEP, ExpertView, admissible_actions, check_action, expert_action
from gentax.errors import GentaxError

SUPPORTED_SIZES = (None, 100, 1000, 100000)  # the official search indexes
_TOTAL = re.compile(r"Page (\d+) \(Total results: (\d+)\)")
_PAGES = {"search_results": "results", "item_page": "item", "item_sub_page": "sub", "done": "done"}


def available() -> bool:
    try:
        import web_agent_site.envs.web_agent_text_env  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means "not usable here"
        return False
    return True


@functools.lru_cache(maxsize=4)
def official_server(num_products: int | None, show_attrs: bool):
    """The official SimServer (products, goals, search index), built once per process."""
    if not available():
        raise GentaxError("webshop backend 'official' needs the official web_agent_site package (princeton-nlp/WebShop) importable")
    if num_products not in SUPPORTED_SIZES:
        raise GentaxError(f"webshop backend 'official': catalog_size must be one of {SUPPORTED_SIZES} (its search indexes)")
    from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv

    with _seeded_global_rng(0):
        env = WebAgentTextEnv(observation_mode="text", num_products=num_products, human_goals=True, show_attrs=show_attrs)
    return env.server


@contextlib.contextmanager
def _seeded_global_rng(seed: int):
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


_HEADER_PARTS = 4  # the header is "WebShop", "Instruction:", "<goal>" at the top of every page


def without_header(parts: list[str]) -> list[str]:
    """A page's text parts without the official header "WebShop [SEP] Instruction: [SEP] <goal>"
    (verl-agent drops it too; the goal is in the prompt already). The page's ``<h4>Instruction:
    <br>goal</h4>`` is two text parts; a page whose goal shares the "Instruction:" part is cut
    after that one."""
    for i, part in enumerate(parts[:_HEADER_PARTS]):
        if part.strip() == "Instruction:":
            return parts[i + 2 :]
        if part.strip().startswith("Instruction:"):
            return parts[i + 1 :]
    return parts


class OfficialEngine:
    """``WebAgentTextEnv`` with the interface of ``gentax.domains.webshop.engine.WebShopEngine``."""

    def __init__(self, server, env=None):
        """``env``: a ``WebAgentTextEnv`` on ``server`` (default: built here; tests pass a stand-in)."""
        self.server = server
        if env is None:
            from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv

            with _seeded_global_rng(0):
                env = WebAgentTextEnv(observation_mode="text", server=server)
        self.env = env
        self.goal: Mapping[str, Any] = {}
        self.done = True

    @property
    def goals(self) -> list[dict[str, Any]]:
        return self.server.goals

    def reset(self, goal: Mapping[str, Any]) -> str:
        self.goal = goal
        self.env.reset(session=int(goal["goal_index"]))
        self.searches, self.score, self.done = 0, None, False
        self._read()
        return self.text

    def act(self, action: str) -> str:
        verb, arg = check_action(action, self.done, self.has_search_bar, self.clickables)
        _, reward, done, _ = self.env.step(f"{verb}[{arg}]")
        self.searches += verb == "search"
        if done:
            self.done, self.score = True, float(reward)
        self._read()
        return self.text

    def _read(self) -> None:
        self.text = SEP.join(without_header(self.env.observation.split(SEP)))
        available_actions = self.env.get_available_actions()
        self.has_search_bar = bool(available_actions["has_search_bar"])
        self.clickables = [c for c in available_actions["clickables"] if c != "search"]
        self.admissible = admissible_actions(self.has_search_bar, self.clickables)

    def expert_action(self) -> str:
        session = self.server.user_sessions[self.env.session]
        page = _PAGES.get(self.server.get_page_name(self.env.browser.current_url) or "", "search")
        totals = _TOTAL.search(self.text)
        asin = session.get("asin") if page in ("item", "sub") else None
        products = self.server.product_item_dict
        return expert_action(ExpertView(
            page=page,
            searches=self.searches,
            clickables=self.clickables,
            more_results=bool(totals) and int(totals.group(1)) * PRODUCT_WINDOW < int(totals.group(2)),
            asin=asin,
            selected=tuple(session.get("options", {}).values()),
            product_options=products[asin]["options"] if asin in products else {},
            goal=self.goal,
            target_title=products[self.goal["asin"]]["Title"],
        ))
