"""WebShop domain: the official score on hand-made cases, catalogs, pages and navigation."""

from __future__ import annotations

import json
import math

import pytest

from gentax.domains import make
from gentax.domains.webshop import catalog as cat
from gentax.domains.webshop import official
from gentax.domains.webshop.engine import PRODUCT_WINDOW
from gentax.domains.webshop.reward import (
    attribute_matches,
    fuzzy_ratio,
    normalize_colour,
    option_matches,
    purchase_score,
    type_reward,
)
from gentax.errors import GentaxError


# ---- score -----------------------------------------------------------------------------------------
def product(**overrides):
    base = {
        "query": "hiking boots",
        "product_category": "Shoes › Men › Outdoor › Hiking Boots",
        "name": "Trailmark Waterproof Leather Hiking Boots for Men",
        "Title": "Trailmark Waterproof Leather Hiking Boots for Men",
        "BulletPoints": ["Vibram outsole", "Padded collar"],
        "Description": "A boot with a steel shank and breathable lining.",
        "Attributes": ["waterproof", "leather upper", "rubber sole"],
    }
    return {**base, **overrides}


def goal(**overrides):
    base = {
        "query": "hiking boots",
        "product_category": "Shoes › Men › Outdoor › Hiking Boots",
        "name": "Trailmark Waterproof Leather Hiking Boots for Men",
        "attributes": ["waterproof", "rubber sole"],
        "goal_options": ["brown", "10 wide"],
        "price_upper": 80.0,
    }
    return {**base, **overrides}


def test_perfect_purchase_scores_one():
    score, info = purchase_score(product(), goal(), 79.0, {"color": "dark brown", "size": "10 wide"})
    assert score == 1.0 and info["r_type"] == 1.0 and info["r_price"] is True


def test_each_missing_part_costs_its_share():
    options = {"color": "brown", "size": "10 wide"}
    # price above the bound: 4 of 5 parts
    assert purchase_score(product(), goal(), 95.0, options)[0] == pytest.approx(4 / 5)
    # one option wrong: 4 of 5
    assert purchase_score(product(), goal(), 50.0, {"color": "black", "size": "10 wide"})[0] == pytest.approx(4 / 5)
    # no option chosen at all: 3 of 5
    assert purchase_score(product(), goal(), 50.0, {})[0] == pytest.approx(3 / 5)
    # an attribute the product lacks everywhere: 4 of 5
    assert purchase_score(product(), goal(attributes=["waterproof", "memory foam"]), 50.0, options)[0] == pytest.approx(4 / 5)


def test_attribute_matching_fuzzy_and_in_text():
    p = product(Attributes=["essential oil", "tea tree"])
    assert attribute_matches(p, ["essential oils"]) == 1  # token_set_ratio 96 > 85
    assert attribute_matches(p, ["steel shank"]) == 1  # found in the description
    assert attribute_matches(p, ["vibram outsole"]) == 1  # found in a bullet point (lower-cased)
    assert attribute_matches(p, ["tea bags"]) == 0
    assert fuzzy_ratio("Tea-Tree!", "tea tree") == 100  # thefuzz preprocessing: case, punctuation


def test_option_matching_normalises_colours():
    assert normalize_colour("heather grey") == "grey"
    assert normalize_colour("navy blue") == "blue"  # first word of the (alphabetical) vocabulary
    assert option_matches(["heather grey", "x-large"], ["grey", "x-large"]) == 2
    assert option_matches(["small"], ["x-large"]) == 0
    assert option_matches(["pack of 12", "powder snow"], ["cool powder snow", "pack of 12"]) == 2


def test_type_reward_levels():
    same = type_reward(product(), goal())
    assert same["r_type"] == 1.0 and same["query_match"] and same["category_match"] and same["title_score"] == 1.0
    other = product(query="lamp", product_category="Home › Lighting › Lamps", name="Lumen Brass Desk Lamp")
    assert type_reward(other, goal())["r_type"] == 0.0  # no shared title noun
    assert purchase_score(other, goal(), 10.0, {"color": "brown", "size": "10 wide"})[0] == 0.0
    # shares 1 of 6 title nouns (0.167), no query/category match -> 0.5
    half = product(query="x", product_category="A › B", name="Trailmark Desk Lamp")
    g6 = goal(name="Trailmark Alpine Hiking Boots Vibram Outsole")
    assert type_reward(half, g6)["r_type"] == 0.5
    # shares 1 of 11 (< 0.1) -> 0.1
    g11 = goal(name="Trailmark Alpine Summit Ridge Trek Hiking Boots Vibram Outsole Gore Membrane")
    assert type_reward(half, g11)["r_type"] == 0.1


# ---- catalog -----------------------------------------------------------------------------------------
def test_generator_is_deterministic_and_prefix_stable():
    a = cat.generate_catalog(num_products=60)
    assert a == cat.generate_catalog(num_products=60)
    small = cat.generate_catalog(num_products=25)
    assert small["products"] == a["products"][:25]
    assert cat.generate_catalog(num_products=25, seed=1)["products"] != small["products"]


def test_committed_catalog_is_the_generators_output():
    committed = cat.read_catalog_files(cat.DATA_DIR)
    assert committed == json.loads(json.dumps(cat.generate_catalog(**cat.DEFAULT_PARAMS)))
    assert len(committed["products"]) == 300


def test_catalog_loads_like_the_official_loader(tmp_path):
    products = [
        {"asin": "B000000001", "name": "Acme Red Kettle", "full_description": "An electric kettle.",
         "small_description": "Boils fast", "pricing": "$10.00 - $20.00", "images": [""],
         "customization_options": {"Color": [{"value": "Red/Black", "image": None}], "Size": None},
         "query": " Kettle ", "category": "kitchen", "product_category": "Home › Kitchen › Kettles"},
        {"asin": "B000000001", "name": "duplicate", "query": "x"},
        {"asin": "B0000000001234", "name": "asin too long", "query": "x"},
        {"asin": "B000000002", "name": "Acme Toaster", "full_description": "", "small_description": [],
         "pricing": "", "images": [""], "customization_options": None, "query": "toaster",
         "category": "kitchen", "product_category": "Home › Kitchen › Toasters"},
    ]
    attributes = {"B000000001": {"attributes": ["fast boil"]}}
    human = {"B000000001": [{"instruction": "i want a red kettle.", "instruction_attributes": ["fast boil"],
                             "instruction_options": ["red | black"]}],
             "B000000002": [{"instruction": "a toaster", "instruction_attributes": [], "instruction_options": []}]}
    for name, obj in (("items_shuffle_1000.json", products), ("items_ins_v2_1000.json", attributes), ("items_human_ins.json", human)):
        (tmp_path / name).write_text(json.dumps(obj))
    loaded = cat.load_catalog(cat.read_catalog_files(tmp_path))
    assert [p["asin"] for p in loaded.products] == ["B000000001", "B000000002"]
    kettle, toaster = loaded.products
    assert kettle["options"] == {"color": ["red | black"]} and kettle["query"] == "kettle"
    assert kettle["BulletPoints"] == ["Boils fast"] and kettle["Price"] == "$10.0 to $20.0"
    assert 10.0 <= loaded.prices["B000000001"] <= 20.0
    assert toaster["Attributes"] == ["DUMMY_ATTR"] and toaster["Price"] == "$100.0"
    (only_goal,) = loaded.goals  # the toaster instruction names no attribute: skipped
    assert only_goal["instruction_text"].startswith("i want a red kettle, and price lower than ")
    assert only_goal["price_upper"] in (20.0, 30.0, 40.0, 50.0) and only_goal["price_upper"] > loaded.prices["B000000001"]
    env = make("webshop", split="eval", catalog_dir=str(tmp_path))
    env.reset(env.task(0))
    while not env.done:
        _, reward, _, info = env.step(env.expert_action())
    assert info["won"] and reward == 10.0 and info["webshop_score"] == 1.0


def test_bad_catalog_options():
    with pytest.raises(GentaxError, match="catalog_dir"):
        make("webshop", catalog_dir="/nonexistent/webshop")
    with pytest.raises(GentaxError, match="goal_attributes"):
        make("webshop", goal_attributes=7)
    with pytest.raises(GentaxError, match="catalog_size"):
        make("webshop", catalog_size=0)
    with pytest.raises(GentaxError, match="results_per_page"):
        make("webshop", results_per_page=0)


# ---- pages and navigation ----------------------------------------------------------------------------
@pytest.fixture()
def env():
    e = make("webshop", split="eval", seed=0)
    e.reset(e.task(0))
    return e


def test_navigation_between_pages(env):
    assert env.observation.text == "Search" and env.observation.admissible == ("search[<your query>]",)
    obs, reward, done, info = env.step("search[tea]")
    assert info["valid"] and not done and reward == 0.0
    total = len(env.engine.results)
    assert obs.text.startswith(f"Back to Search [SEP] Page 1 (Total results: {total}) [SEP] Next > [SEP] ")
    assert total > PRODUCT_WINDOW
    page1 = [a for a in obs.admissible if a.startswith("click[b0")]
    assert len(page1) == PRODUCT_WINDOW
    obs2, *_ = env.step("click[Next >]")  # case-insensitive, as upstream lower-cases the argument
    assert "Page 2" in obs2.text and "click[< prev]" in obs2.admissible
    assert not set(page1) & set(obs2.admissible)
    obs1, *_ = env.step("click[< prev]")
    assert obs1.text == obs.text
    item, *_ = env.step(page1[0])
    asin = page1[0][len("click[") : -1].upper()
    product = env.catalog.by_asin[asin]
    assert item.text.startswith("Back to Search [SEP] < Prev [SEP] ") and item.text.endswith("[SEP] Buy Now")
    assert product["Title"] in item.text and f"Price: {product['Price']}" in item.text
    value = next(iter(product["options"].values()))[0]
    _, _, _, info = env.step(f"click[{value}]")
    assert info["valid"] and value in env.engine.options.values()
    desc, *_ = env.step("click[description]")
    assert desc.text == f"Back to Search [SEP] < Prev [SEP] {product['Description']}"
    back, *_ = env.step("click[< prev]")
    assert back.text == item.text
    obs_search, _, done, _ = env.step("click[back to search]")
    assert obs_search.text == "Search" and not done


def test_actions_the_page_does_not_offer_are_invalid(env):
    env.step("search[tea]")
    before = env.observation
    for action in ("search[coffee]", "click[buy now]", "click[b0nothing00]", "buy[it]", "click[]"):
        obs, reward, done, info = env.step(action)
        assert (reward, info["valid"], done) == (-0.1, False, False) and info["reason"] == "not_admissible"
        assert obs == before


def test_buying_the_wrong_product_ends_the_episode_failed(env):
    target = env.current_task.spec["asin"]
    env.step("search[" + env.current_task.spec["query"] + "]")
    other = next(a for a in env.observation.admissible if a.startswith("click[b0") and target.lower() not in a)
    env.step(other)
    obs, reward, done, info = env.step("click[buy now]")
    assert done and not info["won"] and reward == 0.0 and not info["truncated"]
    assert 0.0 <= info["webshop_score"] < 1.0
    assert obs.text.startswith("Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] ")
    assert math.isclose(float(obs.text.rsplit(" [SEP] ", 1)[1]), info["webshop_score"])


def test_expert_pages_through_results_when_needed(env):
    spec = env.current_task.spec
    env.step("search[" + spec["category"] + "]")  # a vague query: the target is rarely on page 1
    while not env.done:
        _, _, _, info = env.step(env.expert_action())
    assert info["won"]


def test_results_per_page_shortens_result_pages_and_the_expert_still_wins():
    short = make("webshop", split="eval", seed=0, results_per_page=3)
    short.reset(short.task(0))
    obs = short.step(short.expert_action())[0]  # the expert's search
    product_links = [name for name, asin in short.engine.clickables.items() if asin is not None]
    assert len(product_links) == 3 and "click[next >]" in obs.admissible
    assert all(f"click[{name}]" in obs.admissible for name in product_links)
    while not short.done:
        _, _, _, info = short.step(short.expert_action())
    assert info["won"]


def test_expert_wins_every_generated_goal():
    for split in ("eval", "train"):
        e = make("webshop", split=split)
        for seed in range(len(e.goals)):
            e.reset(e.task(seed))
            while not e.done:
                _, _, _, info = e.step(e.expert_action())
            assert info["won"], (split, seed)


def test_knobs_shape_the_goals():
    easy = make("webshop", split="eval", goal_attributes=1, goal_options=0, catalog_size=40)
    assert len(easy.catalog.products) == 40
    task = easy.task(3)
    assert len(task.spec["attributes"]) == 1 and task.spec["goal_options"] == []
    assert " with " not in task.spec["instruction_text"]
    hard = make("webshop", split="eval", goal_attributes=3)
    assert all(len(hard.task(s).spec["attributes"]) == 3 for s in range(5))
    default = make("webshop", split="eval")
    assert [default.task(s).spec["asin"] for s in range(5)] == [default.goals[s]["asin"] for s in range(5)]


# ---- the official web_agent_site behind the same protocol (skipped where it is not installed) ----

@pytest.mark.skipif(official.available(), reason="web_agent_site is installed")
def test_official_backend_absent_is_one_clear_error():
    with pytest.raises(GentaxError, match="web_agent_site"):
        make("webshop", backend="official")
    with pytest.raises(GentaxError, match="backend"):
        make("webshop", backend="amazon")


@pytest.mark.slow
@pytest.mark.skipif(not official.available(), reason="the official web_agent_site package is not installed")
def test_official_backend_plays_through_the_protocol():
    env = make("webshop", split="eval", backend="official", catalog_size=1000)
    again = make("webshop", split="eval", backend="official", catalog_size=1000)
    assert env.task(0).spec == again.task(0).spec  # price bounds drawn with the global RNG pinned
    obs = env.reset(env.task(0))
    assert obs.text == "Search" and obs.admissible == ("search[<your query>]",)
    obs2, reward, _, info = env.step("click[buy now]")
    assert (reward, info["valid"], obs2) == (pytest.approx(-0.1), False, obs)
    wins = 0
    for seed in range(3):
        env.reset(env.task(seed))
        while not env.done:
            _, _, _, info = env.step(env.expert_action())
        assert 0.0 <= info.get("webshop_score", 0.0) <= 1.0
        wins += info["won"]
    assert wins >= 1  # human goals are not always perfectly reachable upstream


class _OfficialPageStandIn:
    """Stands in for the official ``WebAgentTextEnv`` (text mode), with its page format: every page
    starts with the header "WebShop [SEP] Instruction: [SEP] <goal>" (the ``<h4>Instruction: <br>
    goal</h4>`` block), ``instruction_text`` is that h4's whole text, parts are joined by " [SEP] "."""

    GOAL = "i need a long clip-in hair extension which is natural looking, and price lower than 40.00 dollars"

    def __init__(self):
        self.page = "search"
        self.instruction_text = f"Instruction: {self.GOAL}"

    @property
    def observation(self):
        header = ["WebShop", "Instruction:", self.GOAL]
        body = {"search": ["Search"],
                "results": ["Back to Search", "Page 1 (Total results: 50)", "Next >", "B09C337K8S",
                            "Clip in Hair Extensions, 22 inch", "$19.99"]}[self.page]
        return " [SEP] ".join(header + body)

    def reset(self, session=None):
        self.page = "search"
        return self.observation, None

    def step(self, action):
        self.page = "results"
        return self.observation, 0.0, False, None

    def get_available_actions(self):
        if self.page == "search":
            return {"has_search_bar": True, "clickables": ["search"]}
        return {"has_search_bar": False, "clickables": ["back to search", "next >", "b09c337k8s"]}


def test_official_adapter_drops_the_official_page_header():
    """The official page format without the package: its header used to reach the agent."""
    engine = official.OfficialEngine(server=None, env=_OfficialPageStandIn())
    assert engine.reset({"goal_index": 0, "instruction_text": _OfficialPageStandIn.GOAL}) == "Search"
    assert engine.admissible == ("search[<your query>]",)
    text = engine.act("search[clip in hair extension]")
    assert text.startswith("Back to Search [SEP] Page 1 (Total results: 50)")
    assert "Instruction:" not in text and _OfficialPageStandIn.GOAL not in text
    assert engine.admissible == ("click[back to search]", "click[next >]", "click[b09c337k8s]")
    assert official.without_header(["Instruction: buy socks", "Search"]) == ["Search"]
