"""WebShop product catalogs: a deterministic generator and a reader of the official JSON schema.

The official data cannot be fetched offline, so gentax ships a generated catalog in the official
file formats (``data/``, gzipped: products ``items_shuffle*``, attributes ``items_ins_v2*``, human
instructions ``items_human_ins*``) and reads official files unchanged (``catalog_dir``).
``load_catalog`` follows the official loader, except that where it draws from the global RNG
(price in a range, price bound, goal order) we draw from RNGs seeded by the ASIN, so a catalog
loads identically everywhere. Goals are shuffled with seed 233 as upstream; the first
``min(500, n // 5)`` are ``eval``. Product ``i`` of a generated catalog comes from its own RNG, so
a smaller catalog is a prefix of a larger one. Regenerate the committed files with
``python -m gentax.domains.webshop.catalog --out gentax/domains/webshop/data``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import json
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

from gentax.domains.webshop.search import SearchEngine
from gentax.errors import GentaxError
from gentax.io import atomic_path

DATA_DIR = Path(__file__).parent / "data"
PRODUCTS_FILE = "items_shuffle.json.gz"
ATTRIBUTES_FILE = "items_ins_v2.json.gz"
HUMAN_FILE = "items_human_ins.json.gz"
DEFAULT_PARAMS = {"num_products": 300, "goal_attributes": 2, "goal_options": 2, "seed": 0}
PRICE_STEPS = [10.0 * i for i in range(1, 100)]
NO_PRICE_BOUND = 1_000_000.0
MAX_EVAL_GOALS = 500


# ---- generator vocabulary ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ProductType:
    category: str
    query: str
    path: str
    noun: str
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price: tuple[int, int]


def _t(category, query, path, noun, attributes, options, price) -> ProductType:
    return ProductType(
        category, query, path, noun, tuple(attributes.split("|")),
        {name: tuple(values.split("|")) for name, values in options.items()}, price,
    )


_SIZES = "Small|Medium|Large|X-Large|XX-Large"
TYPES = [
    _t("beauty", "shampoo", "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos", "Shampoo",
       "sulfate free|paraben free|tea tree|argan oil|dry hair|natural ingredients|color treated|cruelty free",
       {"Size": "8 Fl Oz|12 Fl Oz|16.9 Fl Oz|33.8 Fl Oz", "Scent": "Lavender|Coconut|Citrus|Unscented"}, (6, 35)),
    _t("beauty", "face moisturizer", "Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers",
       "Face Moisturizer", "hyaluronic acid|fragrance free|sensitive skin|oil free|long lasting|anti aging|vitamin c|non greasy",
       {"Size": "1.7 Oz|2.5 Oz|4 Oz"}, (9, 60)),
    _t("beauty", "nail polish", "Beauty & Personal Care › Foot, Hand & Nail Care › Nail Art & Polish › Nail Polish",
       "Nail Polish Set", "long lasting|quick dry|non toxic|gel polish|easy apply|high gloss|chip resistant|vegan formula",
       {"Color": "Red|Nude|Pink|Burgundy|Coral|Lilac", "Item Package Quantity": "1|3|6"}, (5, 30)),
    _t("beauty", "hair extensions", "Beauty & Personal Care › Hair Care › Hair Extensions, Wigs & Accessories › Hair Extensions",
       "Clip In Hair Extensions", "natural looking|human hair|heat resistant|easy to use|high quality|thick ends|tangle free|straight hair",
       {"Color": "Natural Black|Dark Brown|Ash Blonde|Auburn", "Size": "14 Inch|18 Inch|22 Inch"}, (15, 90)),
    _t("electronics", "bluetooth speaker", "Electronics › Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth Speakers",
       "Bluetooth Speaker", "waterproof|long battery life|high fidelity|hands free|easy carry|deep bass|wireless charging|dual pairing",
       {"Color": "Black|Blue|Red|Gray"}, (18, 120)),
    _t("electronics", "usb c cable", "Electronics › Computers & Accessories › Cables & Accessories › Cables › USB Cables",
       "USB C Cable", "fast charging|high speed|braided nylon|durable design|data transfer|gold plated|aluminum alloy|tangle free",
       {"Size": "3 Ft|6 Ft|10 Ft", "Item Package Quantity": "1|2|3"}, (6, 25)),
    _t("electronics", "wireless earbuds", "Electronics › Headphones, Earbuds & Accessories › Headphones & Earbuds › Earbud Headphones",
       "Wireless Earbuds", "noise cancelling|long battery life|water resistant|hands free|touch control|deep bass|charging case|ergonomic fit",
       {"Color": "Black|White|Navy|Rose Gold"}, (20, 150)),
    _t("electronics", "tv wall mount", "Electronics › Television & Video › Accessories › TV Mounts, Stands & Turntables › TV Wall & Ceiling Mounts",
       "TV Wall Mount", "heavy duty|easy install|full motion|tilt swivel|steel frame|cable management|space saving|low profile",
       {"Size": "26-55 Inch|37-70 Inch|42-85 Inch"}, (20, 110)),
    _t("fashion", "hoodie", "Clothing, Shoes & Jewelry › Men › Clothing › Fashion Hoodies & Sweatshirts",
       "Pullover Hoodie", "machine wash|long sleeve|soft fabric|relaxed fit|cotton blend|kangaroo pocket|fleece lined|drawstring closure",
       {"Color": "Black|Heather Gray|Navy|Olive|Burgundy", "Size": _SIZES}, (18, 65)),
    _t("fashion", "running shoes", "Clothing, Shoes & Jewelry › Women › Shoes › Athletic › Running",
       "Running Shoes", "non slip|rubber sole|breathable mesh|lightweight|arch support|memory foam|lace up|shock absorbing",
       {"Color": "Black|White|Pink|Gray|Teal", "Size": "6|7|8|9|10"}, (30, 130)),
    _t("fashion", "yoga leggings", "Clothing, Shoes & Jewelry › Women › Clothing › Active › Active Leggings",
       "Yoga Leggings", "high waist|tummy control|squat proof|moisture wicking|four way stretch|hidden pocket|butt lifting|quick dry",
       {"Color": "Black|Navy|Charcoal|Wine|Olive", "Size": "X-Small|" + _SIZES}, (15, 55)),
    _t("fashion", "dress shirt", "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › Dress Shirts",
       "Dress Shirt", "slim fit|wrinkle free|long sleeve|button down|easy care|regular fit|stretch fabric|machine wash",
       {"Color": "White|Light Blue|Black|Pink|Lavender", "Size": _SIZES}, (20, 70)),
    _t("food", "coffee beans", "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Coffee › Roasted Coffee Beans",
       "Whole Bean Coffee", "dark roast|medium roast|single origin|fair trade|usda organic|low acid|rich flavor|freshly roasted",
       {"Size": "12 Ounce|2 Pound|5 Pound"}, (9, 60)),
    _t("food", "protein bars", "Grocery & Gourmet Food › Snack Foods › Bars › Nutrition Bars › Protein Bars",
       "Protein Bars", "gluten free|high protein|low sugar|non gmo|keto friendly|plant based|individually wrapped|no artificial flavors",
       {"Flavor Name": "Chocolate Peanut Butter|Cookie Dough|Vanilla Almond|Salted Caramel", "Size": "12 Count|24 Count"}, (15, 45)),
    _t("food", "green tea", "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Tea › Green Tea",
       "Green Tea Bags", "usda organic|natural ingredients|antioxidant rich|individually wrapped|non gmo|decaffeinated|sugar free|gluten free",
       {"Flavor Name": "Jasmine|Mint|Lemon Ginger|Matcha", "Size": "20 Count|50 Count|100 Count"}, (5, 30)),
    _t("food", "olive oil", "Grocery & Gourmet Food › Pantry Staples › Cooking & Baking › Oils, Vinegars & Salad Dressings › Olive Oil",
       "Extra Virgin Olive Oil", "cold pressed|first press|usda organic|non gmo|glass bottle|rich flavor|single origin|kosher certified",
       {"Size": "16.9 Fl Oz|25.3 Fl Oz|101 Fl Oz"}, (8, 55)),
    _t("furniture", "office chair", "Home & Kitchen › Furniture › Home Office Furniture › Home Office Chairs › Home Office Desk Chairs",
       "Office Chair", "lumbar support|height adjustable|easy assemble|ergonomic design|breathable mesh|swivel wheels|padded armrests|high back",
       {"Color": "Black|Gray|White|Blue"}, (60, 300)),
    _t("furniture", "bookshelf", "Home & Kitchen › Furniture › Living Room Furniture › Bookcases",
       "Bookshelf", "easy assemble|solid wood|storage space|industrial style|engineered wood|space saving|heavy duty|living room",
       {"Color": "Rustic Brown|White|Black|Walnut", "Size": "3 Tier|4 Tier|5 Tier"}, (35, 200)),
    _t("furniture", "bed frame", "Home & Kitchen › Furniture › Bedroom Furniture › Beds, Frames & Bases › Bed Frames",
       "Platform Bed Frame", "metal frame|noise free|easy assemble|under bed storage|no box spring needed|heavy duty|wood slat support|modern design",
       {"Size": "Twin|Full|Queen|King"}, (80, 400)),
    _t("furniture", "coffee table", "Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables",
       "Coffee Table", "living room|storage shelf|easy assemble|solid wood|mid century|tempered glass|lift top|rustic finish",
       {"Color": "Natural|Espresso|White|Gray"}, (50, 350)),
]

BRANDS = (
    "Lumora Verdant Kestrel Aurelio Brisa Nordvik Halcyon Tamsin Oakridge Zephyra Corvell Maplewood "
    "Solenne Quilton Ravela Dunmore Ferrano Glimmer Havenly Istra Juniper Kaleo Lindqvist Moravia "
    "Novella Orrin Pellucid Quarry Rowan Sablewood"
).split()

_DESCRIPTION_TAILS = (
    "Backed by a 30-day money back guarantee.",
    "Designed and tested in our own studio.",
    "A thoughtful gift for family and friends.",
    "Made to last through years of daily use.",
    "Our customers' favourite for three years running.",
)
_BULLET_TAILS = (
    "made for everyday use",
    "tested for quality and safety",
    "loved by thousands of customers",
    "easy to care for",
    "ships in recyclable packaging",
)
_INSTRUCTIONS = (
    "i'm looking for {noun} that is {attrs}",
    "i need {noun} which is {attrs}",
    "find me {noun}, {attrs}",
    "i want to buy {noun} that is {attrs}",
    "please get me {noun} that's {attrs}",
)


def _phrase(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _asin(rng: random.Random, taken: set[str]) -> str:
    while True:
        asin = "B0" + "".join(rng.choice("0123456789ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(8))
        if asin not in taken:
            taken.add(asin)
            return asin


def generate_catalog(num_products: int = 300, goal_attributes: int = 2, goal_options: int = 2, seed: int = 0) -> dict[str, Any]:
    """The three official-schema objects: ``{"products": [...], "attributes": {...}, "human": {...}}``."""
    if not 1 <= num_products <= 100_000:
        raise GentaxError(f"webshop catalog_size must be in 1..100000, got {num_products}")
    if not 1 <= goal_attributes <= 4:
        raise GentaxError(f"webshop goal_attributes must be in 1..4 (products have 4), got {goal_attributes}")
    if not 0 <= goal_options <= 2:
        raise GentaxError(f"webshop goal_options must be in 0..2 (products have at most 2 option groups), got {goal_options}")
    products, attributes, human = [], {}, {}
    taken: set[str] = set()
    for i in range(num_products):
        rng = random.Random(f"webshop-catalog/{seed}/product/{i}")
        kind = TYPES[i % len(TYPES)]
        asin = _asin(rng, taken)
        brand = rng.choice(BRANDS)
        attrs = rng.sample(kind.attributes, 4)
        title = f"{brand} {attrs[0].title()} {kind.noun}"
        if rng.random() < 0.6:
            title += f", {attrs[1].title()}"
        options = {}
        for name, pool in kind.options.items():
            chosen = sorted(rng.sample(range(len(pool)), rng.randint(2, len(pool))))
            options[name] = [{"value": pool[j], "image": None} for j in chosen]
        low, high = kind.price
        price = rng.randint(low, high) + 0.99
        pricing = f"${price:.2f}" if rng.random() < 0.85 else f"${price:.2f} - ${price + rng.randint(3, 20):.2f}"
        products.append({
            "asin": asin,
            "name": title,
            "full_description": (
                f"The {brand} {kind.noun.lower()} is {attrs[2]} and {attrs[3]}. {rng.choice(_DESCRIPTION_TAILS)}"
            ),
            "small_description": [f"{a.title()}: {rng.choice(_BULLET_TAILS)}" for a in rng.sample(attrs, 3)],
            "pricing": pricing,
            "customization_options": options,
            "images": [""],
            "query": kind.query,
            "category": kind.category,
            "product_category": kind.path,
            "brand": brand,
        })
        goal_rng = random.Random(f"webshop-catalog/{seed}/goal/{i}/{goal_attributes}/{goal_options}")
        wanted = goal_rng.sample(attrs, goal_attributes)
        groups = goal_rng.sample(sorted(options), min(goal_options, len(options)))
        wanted_options = [goal_rng.choice(options[g])["value"].lower() for g in sorted(groups)]
        noun = kind.noun.lower()
        article = "" if noun.endswith("s") else ("an " if noun[0] in "aeiou" else "a ")
        text = goal_rng.choice(_INSTRUCTIONS).format(noun=article + noun, attrs=_phrase(wanted))
        if wanted_options:
            text += " with " + ", and ".join(f"{g.lower()}: {v}" for g, v in zip(sorted(groups), wanted_options))
        attributes[asin] = {"attributes": attrs, "instruction": text, "instruction_attributes": wanted}
        human[asin] = [{"instruction": text, "instruction_attributes": wanted, "instruction_options": wanted_options}]
    return {"products": products, "attributes": attributes, "human": human}


def write_catalog(out_dir: str | Path, **params) -> None:
    """Write a generated catalog as the three gzipped official-schema files (atomically)."""
    catalog = generate_catalog(**params)
    out = Path(out_dir)
    for name, key in ((PRODUCTS_FILE, "products"), (ATTRIBUTES_FILE, "attributes"), (HUMAN_FILE, "human")):
        with atomic_path(out / name) as tmp:
            # mtime=0 and no file name in the header: the bytes depend on the content only
            with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as fh:
                fh.write(json.dumps(catalog[key], indent=1, sort_keys=True, ensure_ascii=False).encode())


# ---- loading ------------------------------------------------------------------------------------
@dataclasses.dataclass
class Catalog:
    products: list[dict[str, Any]]
    by_asin: dict[str, dict[str, Any]]
    prices: dict[str, float]
    goals: list[dict[str, Any]]
    engine: SearchEngine


def split_goals(goals: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    """The ``eval`` goals are the first ``min(500, n // 5)`` of the fixed order, ``train`` the rest."""
    n_eval = min(MAX_EVAL_GOALS, max(1, len(goals) // 5))
    return goals[:n_eval] if split == "eval" else goals[n_eval:]


def _read_json(path: Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _find(directory: Path, pattern: str, what: str) -> Path:
    hits = sorted(p for p in directory.glob(pattern) if re.search(r"\.json(\.gz)?$", p.name))
    if not hits:
        raise GentaxError(f"webshop catalog_dir {directory}: no {what} file ({pattern}.json[.gz])")
    return hits[0]


def read_catalog_files(catalog_dir: str | Path) -> dict[str, Any]:
    directory = Path(catalog_dir)
    if not directory.is_dir():
        raise GentaxError(f"webshop catalog_dir {directory} is not a directory")
    return {
        "products": _read_json(_find(directory, "items_shuffle*", "products (items_shuffle)")),
        "attributes": _read_json(_find(directory, "items_ins_v2*", "attributes (items_ins_v2)")),
        "human": _read_json(_find(directory, "items_human_ins*", "human instructions (items_human_ins)")),
    }


def _parse_pricing(pricing: Any) -> tuple[list[float], str]:
    if not pricing:
        return [100.0], "$100.0"
    values = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in str(pricing).split("$")[1:]]
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def load_catalog(raw: dict[str, Any], num_products: int | None = None) -> Catalog:
    """Load official-schema objects as the official loader does (ASINs over 10 characters or repeated
    skipped, options lower-cased, ``DUMMY_ATTR`` for unannotated products) into products, goals
    (human instructions naming an attribute, with a price bound) and a search index."""
    products, by_asin, prices = [], {}, {}
    items = raw["products"] if num_products is None else raw["products"][:num_products]
    for item in items:
        asin = str(item.get("asin", "nan"))
        if asin == "nan" or len(asin) > 10 or asin in by_asin:
            continue
        options: dict[str, list[str]] = {}
        for name, contents in (item.get("customization_options") or {}).items():
            if contents is None:
                continue
            options[name.lower()] = [c["value"].strip().replace("/", " | ").lower() for c in contents]
        bullets = item.get("small_description") or []
        pricing, price_tag = _parse_pricing(item.get("pricing"))
        annotation = raw["attributes"].get(asin, {})
        product = {
            "asin": asin,
            "name": item["name"],
            "Title": item["name"],
            "Description": item.get("full_description") or "",
            "BulletPoints": bullets if isinstance(bullets, list) else [bullets],
            "Price": price_tag,
            "pricing": pricing,
            "options": options,
            "Attributes": annotation.get("attributes") or ["DUMMY_ATTR"],
            "query": str(item.get("query", "")).lower().strip(),
            "category": item.get("category", ""),
            "product_category": item.get("product_category", ""),
            "Rating": "N.A.",
            "Reviews": [],
        }
        products.append(product)
        by_asin[asin] = product
        # a price range is paid at a price inside it (upstream: a global-RNG draw at load)
        prices[asin] = pricing[0] if len(pricing) == 1 else random.Random(f"price/{asin}").uniform(*pricing[:2])
    goals = []
    for product in products:
        asin = product["asin"]
        for k, instruction in enumerate(raw["human"].get(asin, [])):
            wanted = instruction.get("instruction_attributes") or []
            if not wanted:
                continue
            bounds = [p for p in PRICE_STEPS if p > prices[asin]][:4]  # upstream: the larger of two of these
            if len(bounds) >= 2:
                price_upper = max(random.Random(f"goal-price/{asin}/{k}").sample(bounds, 2))
                price_text = f", and price lower than {price_upper:.2f} dollars"
            else:
                price_upper, price_text = NO_PRICE_BOUND, ""
            goals.append({
                "asin": asin,
                "category": product["category"],
                "query": product["query"],
                "name": product["name"],
                "product_category": product["product_category"],
                "instruction_text": instruction["instruction"].strip(".") + price_text,
                "attributes": list(wanted),
                "price_upper": price_upper,
                "goal_options": list(instruction.get("instruction_options") or []),
            })
    random.Random(233).shuffle(goals)
    if not goals:
        raise GentaxError("webshop catalog has no usable goal (human instructions with attributes)")
    return Catalog(products, by_asin, prices, goals, SearchEngine(products))


@functools.lru_cache(maxsize=8)
def get_catalog(catalog_dir: str | None, catalog_size: int | None, goal_attributes: int, goal_options: int, seed: int) -> Catalog:
    """The catalog an env uses, cached per process. Without ``catalog_dir``: the committed generated
    catalog (cut to ``catalog_size``) for the default generator parameters, else one made in memory."""
    if catalog_dir is not None:
        return load_catalog(read_catalog_files(catalog_dir), catalog_size)
    size = DEFAULT_PARAMS["num_products"] if catalog_size is None else catalog_size
    params = {"num_products": size, "goal_attributes": goal_attributes, "goal_options": goal_options, "seed": seed}
    defaults = {**params, "num_products": DEFAULT_PARAMS["num_products"]}
    if defaults == DEFAULT_PARAMS and size <= DEFAULT_PARAMS["num_products"] and (DATA_DIR / PRODUCTS_FILE).exists():
        return load_catalog(read_catalog_files(DATA_DIR), size)
    return load_catalog(generate_catalog(**params))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a generated WebShop catalog (official schema, gzipped).")
    parser.add_argument("--out", required=True)
    for key, value in DEFAULT_PARAMS.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=int, default=value)
    args = parser.parse_args(argv)
    write_catalog(args.out, **{k: getattr(args, k) for k in DEFAULT_PARAMS})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
