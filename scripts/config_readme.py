"""Write or check config/README.md: every key of the workflow config, generated from its schema.

    python scripts/config_readme.py --write     # regenerate config/README.md
    python scripts/config_readme.py --check     # exit 1 when config/README.md differs from what --write writes

Keys, types and descriptions come from ``gentax.study.config.schema()`` (a ``$def``'s ``title`` names
its type); defaults from config/config.yaml ("—": unset); the types of the open sections ``rl`` and
``inits.v2.sft`` from the engine loaders' dataclasses (``ENGINE_SECTIONS``); the domains' knobs from
the built-in registry (``GENTAX_DOMAINS`` is ignored). A key without a description, or one the schema
and the dataclass disagree on, is a ConfigError, so the file cannot fall behind the schema.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "config" / "README.md"
#: the open sections: a section's dotted key -> (module, dataclass) of the engine loader that checks its keys
ENGINE_SECTIONS = {"rl": ("gentax.train.config", "RLConfig"), "inits.v2.sft": ("gentax.train.sft_config", "SFTConfig")}
#: a dataclass field's annotation (a string: the modules use postponed annotations) as a type's words
PYTHON_TYPES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean", "None": "null", "Any": "any"}
#: the longest default shown whole; a longer one is cut (text) or counted (lists, mappings)
SHOWN_CHARS = 80
BOUNDS = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<"}
UNSET = "—"


@dataclasses.dataclass(frozen=True)
class Row:
    key: str
    type: str
    default: str
    description: str


class Readme:
    """The README's text from ``schema`` and ``study`` (config/config.yaml); ``problems``: every key
    it cannot describe (``text`` raises them together)."""

    def __init__(self, schema: dict, study: dict):
        self.schema, self.study, self.problems = schema, study, []

    def resolve(self, node: dict) -> dict:
        """``node`` with its ``$ref`` laid under its own keywords (its own description wins)."""
        if "$ref" not in node:
            return node
        target = self.resolve(self.schema["$defs"][node["$ref"].rsplit("/", 1)[-1]])
        return {**target, **{k: v for k, v in node.items() if k != "$ref"}}

    def type_text(self, node: dict) -> str:
        """A type in words: a titled ``$def`` by its title, else from the validation keywords."""
        node = self.resolve(node)
        if "title" in node:
            return node["title"]
        if "enum" in node:
            return "one of " + ", ".join(f"`{value}`" for value in node["enum"])
        if "const" in node:
            return f"`{node['const']}`"
        if "oneOf" in node:
            return " or ".join(self.type_text(option) for option in node["oneOf"])
        kind = node.get("type")
        if isinstance(kind, list):
            return " or ".join(kind)
        if kind == "array":
            items = self.resolve(node.get("items", {}))
            text = "list of mappings" if "properties" in items else f"list of {self.type_text(items)}"
            extras = (["distinct"] if node.get("uniqueItems") else []) + \
                     ([f"at least {node['minItems']}"] if node.get("minItems", 0) > 1 else [])
            return text + (f" ({', '.join(extras)})" if extras else "")
        if kind == "object":
            if isinstance(node.get("additionalProperties"), dict) and "properties" not in node:
                key = self.type_text(node["propertyNames"]) if "propertyNames" in node else "name"
                return f"mapping: {key} → {self.type_text(node['additionalProperties'])}"
            return "mapping"
        if kind in ("integer", "number"):
            if "minimum" in node and "maximum" in node:
                return f"{kind} in [{node['minimum']}, {node['maximum']}]"
            bounds = [f"{sign} {node[key]}" for key, sign in BOUNDS.items() if key in node]
            return " ".join([kind, " and ".join(bounds)]).strip()
        if kind == "string":
            return "string" + (", not empty" if node.get("minLength") else "") + \
                (f", matching `{node['pattern']}`" if "pattern" in node else "")
        return kind or "any"

    def description(self, key: str, node: dict) -> str:
        text = self.resolve(node).get("description")
        if not text:
            self.problems.append(f"{key}: no description in the schema")
        return text or ""

    def rows(self, node: dict, key: str, required: bool, default: Any) -> list[Row]:
        """The rows of ``key`` (dotted; ``[]``: a list's entries, ``<domain>``: a mapping's names)
        and every key under it; ``default``: its value in config/config.yaml (``UNSET``, ``PerName``)."""
        node = self.resolve(node)
        if key in ENGINE_SECTIONS:
            return self.engine_rows(node, key, default)
        kind = self.type_text(node) + ("" if required else ", optional")
        own = Row(key, kind, "" if "properties" in node else shown(default), self.description(key, node))
        out = [own]
        if "properties" in node:
            for name, child in node["properties"].items():
                out += self.rows(child, f"{key}.{name}", name in node.get("required", []), under(default, name))
        elif isinstance(node.get("additionalProperties"), dict) and "properties" in self.resolve(node["additionalProperties"]):
            entries = self.resolve(node["additionalProperties"])
            name = f"<{self.type_text(node['propertyNames'])}>" if "propertyNames" in node else "<name>"
            per_name = PerName(default) if isinstance(default, dict) else UNSET
            out[0] = dataclasses.replace(own, type="mapping", default="")
            for child, sub in entries["properties"].items():
                out += self.rows(sub, f"{key}.{name}.{child}", child in entries.get("required", []), under(per_name, child))
        elif node.get("type") == "array" and "properties" in self.resolve(node.get("items", {})):
            items = self.resolve(node["items"])
            for child, sub in items["properties"].items():
                out += self.rows(sub, f"{key}[].{child}", child in items.get("required", []), "")
        return out

    def engine_rows(self, node: dict, key: str, default: Any) -> list[Row]:
        """An open section: its row, then one per described key, typed by the engine's dataclass."""
        module, name = ENGINE_SECTIONS[key]
        fields = {f.name: f.type for f in dataclasses.fields(getattr(importlib.import_module(module), name))}
        described = node.get("properties", {})
        set_here = default if isinstance(default, dict) else {}
        self.problems += [f"{key}.{k}: set in config/config.yaml, not described in the schema" for k in set_here if k not in described]
        self.problems += [f"{key}.{k}: described in the schema, no key of {name}" for k in described if k not in fields]
        out = [Row(key, self.type_text(node), "", self.description(key, node))]
        for child, sub in described.items():
            out.append(Row(f"{key}.{child}", python_type(fields.get(child, "")), shown(set_here.get(child, UNSET)),
                           self.description(f"{key}.{child}", sub)))
        return out

    def text(self, presets: dict, knobs: dict[str, dict]) -> str:
        from gentax.errors import ConfigError

        top = self.schema["properties"]
        required = self.schema.get("required", [])
        leaves, sections = [], []
        for name, node in top.items():
            if "properties" in self.resolve(node) or isinstance(self.resolve(node).get("additionalProperties"), dict):
                sections.append(name)
            else:
                leaves += self.rows(node, name, name in required, self.study.get(name, UNSET))
        parts = [HEADER, intro(presets), "## Top level\n", table(leaves)]
        for name in sections:
            node = top[name]
            rows = self.rows(node, name, name in required, self.study.get(name, UNSET))[1:]
            about = self.description(name, node)
            parts += [f"## `{name}`\n", ("" if name in required else "Optional. ") + prose(about[:1].upper() + about[1:]) + "\n",
                      table(rows)]
            if name == "domains":
                parts.append(knob_list(knobs))
        parts += ["## Types\n", "The types that the tables name by a word:\n",
                  "\n".join(f"- **{node['title']}**: {self.type_text({k: v for k, v in node.items() if k != 'title'})}"
                            f"; {prose(node['description'])}" for node in self.schema["$defs"].values() if "title" in node) + "\n"]
        if self.problems:
            raise ConfigError("config/README.md cannot describe: " + "; ".join(dict.fromkeys(self.problems)))
        return "\n".join(parts)


class PerName(dict):
    """The values of a ``<name>`` key: its value under each name of the mapping it stands for."""


def under(default: Any, name: str) -> Any:
    """The value of key ``name`` under ``default`` (``UNSET`` where there is none)."""
    if isinstance(default, PerName):
        found = {entry: value[name] for entry, value in default.items() if isinstance(value, dict) and name in value}
        return PerName(found) if found else UNSET
    return default.get(name, UNSET) if isinstance(default, dict) else UNSET


def shown(value: Any) -> str:
    """A default as shown: text as it is, else one-line YAML; cut or counted past ``SHOWN_CHARS``."""
    import yaml

    if isinstance(value, str) and value in (UNSET, ""):
        return value
    if isinstance(value, PerName):
        value = dict(value)
    if isinstance(value, str):
        text = value
    else:
        text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10**6, allow_unicode=True)
        text = text.strip().removesuffix("\n...").strip()  # a scalar's end-of-document mark
    if len(text) > SHOWN_CHARS:
        if isinstance(value, (list, dict)):
            return f"{len(value)} {'entries' if isinstance(value, list) else 'keys'} (config/config.yaml)"
        text = text[:SHOWN_CHARS - 1].rstrip() + "…"
    return code(text)


def code(text: str) -> str:
    """``text`` as a Markdown code span, whatever backticks it holds."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def python_type(annotation: str) -> str:
    """A dataclass field's annotation in words: ``int | None`` -> "integer or null"."""
    words = []
    for part in annotation.split("|"):
        part = part.strip()
        base = part.split("[", 1)[0]
        words.append("mapping" if base == "dict" else "list" if base == "list" else PYTHON_TYPES.get(base, part))
    return " or ".join(words)


def prose(text: str) -> str:
    """A schema's text as Markdown: ``<`` and ``>`` outside `code` spans as entities (no HTML tags)."""
    parts = text.split("`")
    return "`".join(part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;") for i, part in enumerate(parts))


def table(rows: list[Row]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    lines += [f"| `{row.key}` | {cell(row.type)} | {cell(row.default)} | {cell(prose(row.description))} |" for row in rows]
    return "\n".join(lines) + "\n"


def knob_list(knobs: dict[str, dict]) -> str:
    lines = ["Each domain's knobs (`domains.<domain>.options`) and their defaults, from the domain's own",
             "declaration (`default_options`; meanings and ranges: [docs/domains.md](../docs/domains.md)):", ""]
    for domain, options in knobs.items():
        listed = ", ".join(f"`{name}` {shown(value)}" for name, value in options.items()) or "none"
        lines.append(f"- `{domain}`: {listed}")
    return "\n".join(lines) + "\n"


HEADER = ("# Configuration\n\n"
          "<!-- Generated by `python scripts/config_readme.py --write` from gentax/study/config_schema.yaml and\n"
          "config/config.yaml; do not edit: change those, then regenerate (tests/test_config_schema.py compares). -->\n")


def intro(presets: dict) -> str:
    overlays = "\n".join(f"- `{name}`: " + (f"`{path.relative_to(REPO)}` laid over it" if path else "the file as it is")
                         for name, path in presets.items())
    return (
        "`config/config.yaml` is the paper's study. Every key is below: its type, its value in that file (the\n"
        "default; \"—\": the file leaves it out) and what it does. The study that runs is a preset (key `preset`;\n"
        "a plain `snakemake` runs `embedded`, a profile's `config: [preset=...]` another):\n\n"
        f"{overlays}\n\n"
        "Your `--configfile` files and `--config key=value` pairs go over both and always win; files merge key\n"
        "by key, a list is replaced whole. What each preset resolves to, every value its jobs receive included:\n"
        "`config/resolved/<preset>.yaml`. The workflow and `gentax plan` check a config against the schema\n"
        "(`snakemake.utils.validate`, and gentax's own check, which adds the rules that span keys, each\n"
        "domain's knob check and the engines' loaders): a bad key stops with one line naming it and the file\n"
        "that set it. Relative paths are from the repository's root.\n")


def readme() -> str:
    """The README's text from the built-in registries (``GENTAX_DOMAINS`` unset meanwhile)."""
    from gentax.domains import domain_class
    from gentax.domains.spec import ENV_VAR, names
    from gentax.io import read_yaml
    from gentax.study.config import PRESET_OVERLAYS, STUDY_FILE, schema, with_step_limits

    added = os.environ.pop(ENV_VAR, None)
    try:
        knobs = {name: dict(domain_class(name).default_options) for name in names()}
        return Readme(schema(), with_step_limits(read_yaml(STUDY_FILE))).text(PRESET_OVERLAYS, knobs)
    finally:
        if added is not None:
            os.environ[ENV_VAR] = added


def main(argv: list[str] | None = None) -> int:
    from gentax.generated import write_or_check

    return write_or_check(argv, lambda: {OUT: readme()}, description=__doc__.splitlines()[0], what="config/README.md",
                          source="the schema and config/config.yaml", command="python scripts/config_readme.py")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
