"""WebShop behind the gentax protocol: search -> results -> item page with options -> Buy Now.

docs/domains.md "WebShop" describes the site, the score, the catalog and the knobs. Task seed
``s`` plays goal ``s % len(split goals)`` of the fixed goal order (``spec["goal_index"]``: its
place in the whole order). ``Buy Now`` ends the episode: won when WebShop's score is exactly 1.0,
else failed; ``info["webshop_score"]`` carries the raw score on that step. Backend ``"gentax"``
steps ``engine.WebShopEngine`` on a ``catalog``; ``"official"`` the official text env (``official``).
"""

from __future__ import annotations

from typing import Any

from gentax.domains.base import DomainEnv, Observation, Task
from gentax.domains.webshop.catalog import DEFAULT_PARAMS, get_catalog, split_goals
from gentax.domains.webshop.engine import PRODUCT_WINDOW, WebShopEngine
from gentax.errors import GentaxError


BACKENDS = ("gentax", "official")


class WebshopEnv(DomainEnv):
    name = "webshop"
    default_max_steps = 15
    default_options = {
        "catalog_dir": None,
        "catalog_size": None,
        "goal_attributes": DEFAULT_PARAMS["goal_attributes"],
        "goal_options": DEFAULT_PARAMS["goal_options"],
        "catalog_seed": DEFAULT_PARAMS["seed"],
        "show_attrs": False,
        "backend": "gentax",
        "results_per_page": PRODUCT_WINDOW,
    }

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        opts = super().check_options(options)
        for key in ("goal_attributes", "goal_options", "catalog_seed"):
            if isinstance(opts[key], bool) or not isinstance(opts[key], int):
                raise GentaxError(f"webshop option {key} must be an int, got {opts[key]!r}")
        size = opts["catalog_size"]
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise GentaxError(f"webshop option catalog_size must be a positive int or None, got {size!r}")
        if opts["backend"] not in BACKENDS:
            raise GentaxError(f"webshop option backend must be one of {', '.join(BACKENDS)}, got {opts['backend']!r}")
        generated = {k: opts[k] for k in ("goal_attributes", "goal_options", "catalog_seed")}
        if (opts["catalog_dir"] is not None or opts["backend"] != "gentax") and generated != {k: cls.default_options[k] for k in generated}:
            raise GentaxError("webshop options goal_attributes/goal_options/catalog_seed apply to generated catalogs only")
        per_page = opts["results_per_page"]
        if isinstance(per_page, bool) or not isinstance(per_page, int) or per_page < 1:
            raise GentaxError(f"webshop option results_per_page must be an int >= 1, got {per_page!r}")
        if opts["backend"] == "official" and per_page != PRODUCT_WINDOW:
            raise GentaxError(f"webshop option results_per_page applies to backend 'gentax' only (the official site lists {PRODUCT_WINDOW})")
        if opts["backend"] == "official" and opts["catalog_dir"] is not None:
            raise GentaxError("webshop backend 'official' reads the data web_agent_site was installed with; catalog_dir is for backend 'gentax'")
        return opts

    def __init__(self, split: str = "train", seed: int = 0, max_steps: int | None = None, **options):
        super().__init__(split=split, seed=seed, max_steps=max_steps, **options)
        opts = self.options
        size, per_page = opts["catalog_size"], opts["results_per_page"]
        if opts["backend"] == "official":
            # function-local: the official backend needs the optional web_agent_site package
            from gentax.domains.webshop.official import OfficialEngine, official_server

            self.catalog = None
            self.engine = OfficialEngine(official_server(size, bool(opts["show_attrs"])))
            all_goals = self.engine.goals
        elif opts["backend"] == "gentax":
            catalog_dir = None if opts["catalog_dir"] is None else str(opts["catalog_dir"])
            self.catalog = get_catalog(catalog_dir, size, opts["goal_attributes"], opts["goal_options"], opts["catalog_seed"])
            self.engine = WebShopEngine(self.catalog, show_attrs=bool(opts["show_attrs"]), results_per_page=per_page)
            all_goals = self.catalog.goals
        self.goals = split_goals(all_goals, self.split)
        self._eval_count = len(split_goals(all_goals, "eval"))
        if not self.goals:
            raise GentaxError(f"webshop catalog has no {self.split} goals ({len(all_goals)} goals in all)")

    def _make_task(self, seed: int) -> Task:
        index = seed % len(self.goals)
        return Task(self.name, self.split, seed, {**self.goals[index], "goal_index": self._goal_number(index)})

    def _goal_number(self, index: int) -> int:
        """Position of the split's ``index``-th goal in the whole goal order (the session number
        the official server uses)."""
        return index if self.split == "eval" else self._eval_count + index

    def _reset(self, task: Task) -> Observation:
        self.engine.reset(task.spec)
        return self._observation()

    def _step(self, action: str) -> tuple[Observation, bool, bool]:
        engine = self.engine
        engine.act(action)
        if not engine.done:
            return Observation(engine.text, engine.goal["instruction_text"], engine.admissible), False, False
        self._extra_info = {"webshop_score": engine.score}
        return self._observation(), abs(engine.score - 1.0) < 1e-9, True

    def expert_action(self) -> str:
        return self.engine.expert_action()

    def _observation(self) -> Observation:
        return Observation(text=self.engine.text, goal=self.engine.goal["instruction_text"], admissible=self.engine.admissible)
