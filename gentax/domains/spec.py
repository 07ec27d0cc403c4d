"""What a domain is: everything domain-specific, declared once per domain, and the one registry.

A domain module declares ``SPEC = DomainSpec(...)``; ``specs()`` collects the built-in modules
(``BUILTIN_MODULES``), then those named in the environment variable ``GENTAX_DOMAINS``
(comma-separated module names, read by every process of the workflow). Every other list of
domains is derived from this registry. docs/domains.md "What a domain is" describes the fields
and how to add a domain; docs/contracts.md "Domains" the signatures.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
from typing import Any, Callable, Sequence

from gentax.errors import GentaxError

BUILTIN_MODULES = (
    "gentax.domains.alfworld",
    "gentax.domains.webshop",
    "gentax.domains.sokoban",
    "gentax.domains.sciworld",
)
ENV_VAR = "GENTAX_DOMAINS"

ActionSyntax = Callable[[str, Sequence[str]], "tuple[str | None, str | None]"]


def action_key(text: str) -> str:
    """How actions are compared: whitespace collapsed, lower case."""
    return " ".join(text.split()).lower()


def exact_action(command: str, admissible: Sequence[str]) -> tuple[str | None, str | None]:
    """The action syntax of domains with a closed action list: ``command`` (already normalised
    by the parser) matches an admissible action ignoring case and whitespace; the env's own
    spelling is returned. With no admissible list the env decides (lower-cased command)."""
    if not admissible:
        return command.lower(), None
    table = {action_key(a): a for a in admissible}
    found = table.get(command.lower())
    return (found, None) if found is not None else (None, "not_admissible")


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """A domain's augmentation sources (``gentax.domains.augment`` documents each field's use)."""

    nominal_tokens: int  # tokens per inserted distractor
    donor_chars_per_token: float  # characters per token of this domain's observations (cross_domain)
    separator: str  # how a snippet is joined to this domain's text
    monitor_shows: str  # "There is a monitor showing <this>: ..." (cross_domain)
    #: (text, count, rng, goal_keywords, layout) -> [(position, snippet)]
    distractors: Callable[..., list]
    #: the goal read from an observation text ("" when the observation does not state it)
    goal_in: Callable[[str], str] | None = None
    #: text -> gentax.domains.augment.Layout (where snippets may go); None: the separator's default
    layout: Callable[[str], Any] | None = None


@dataclasses.dataclass(frozen=True)
class DomainSpec:
    name: str
    env: str  # "module:Class": owns the knobs, the step limit and the expert; imported on first use
    intro: str  # the step prompt's opening line
    #: (command, admissible) -> (action | None, reason | None): ``exact_action`` or the domain's own
    action_syntax: ActionSyntax
    rule: str = ""  # a rule line of the step prompt, shown when ``rule_when(obs)`` (None: always)
    rule_when: Callable[[Any], bool] | None = None
    max_admissible_shown: int | None = None  # the prompt's cap on the admissible list
    augmentation: Augmentation | None = None  # None: no sources, so only eps 0 is allowed
    warm_start: bool = True  # the embedded base model's SFT warm start has expert demos of it

    def env_class(self):
        module, cls = self.env.split(":")
        env_class = getattr(importlib.import_module(module), cls)
        if env_class.name != self.name:
            raise GentaxError(f"domain {self.name!r}: env class {self.env} is named {env_class.name!r}")
        return env_class

    def augmentation_or_error(self) -> Augmentation:
        if self.augmentation is None:
            raise GentaxError(f"domain {self.name!r} declares no augmentation sources (its spec's augmentation is None)")
        return self.augmentation


def _modules() -> list[str]:
    extra = [m.strip() for m in os.environ.get(ENV_VAR, "").split(",") if m.strip()]
    return list(BUILTIN_MODULES) + [m for m in extra if m not in BUILTIN_MODULES]


#: DomainSpec fields that were removed, and where their values live now (a study value is the config's)
REMOVED_FIELDS = {
    "aug_eps": "the study config's augmentation.v1.eps.<domain>",
    "max_steps": "the env class's default_max_steps (the study config's domains.<domain>.max_steps overrides it)",
}


@functools.lru_cache(maxsize=None)
def _load(modules: tuple[str, ...]) -> dict[str, DomainSpec]:
    out: dict[str, DomainSpec] = {}
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise GentaxError(f"domain module {module_name!r} (from {ENV_VAR}) cannot be imported: {exc}") from None
        except TypeError as exc:  # SPEC = DomainSpec(...) with a field it no longer has
            removed = [f for f in REMOVED_FIELDS if f"unexpected keyword argument '{f}'" in str(exc)]
            if not removed:
                raise
            raise GentaxError(f"domain module {module_name!r}: DomainSpec has no field {removed[0]!r} any more; "
                              f"its value belongs in {REMOVED_FIELDS[removed[0]]}") from None
        found = getattr(module, "SPEC", None)
        if not isinstance(found, DomainSpec):
            raise GentaxError(f"domain module {module_name!r} has no SPEC = DomainSpec(...)")
        if found.name in out:
            raise GentaxError(f"domain {found.name!r} is declared twice (second time by {module_name})")
        out[found.name] = found
    return out


def specs() -> dict[str, DomainSpec]:
    """Every registered domain's spec, built-ins first (the study's order)."""
    return dict(_load(tuple(_modules())))


def names() -> tuple[str, ...]:
    return tuple(specs())


def spec(name: str) -> DomainSpec:
    registered = specs()
    if name not in registered:
        raise GentaxError(f"unknown domain {name!r}; valid: {', '.join(sorted(registered))}")
    return registered[name]


def check_domain(name: str) -> str:
    """``name`` when it is a registered domain, else the one unknown-domain GentaxError."""
    spec(name)
    return name


# ---- training on a mixture of domains ----------------------------------------------------------
MIX_SEP = "+"
WEIGHT_SEP = "*"


def mixture_weights(train_domain: str) -> dict[str, int]:
    """The domains a run trains on, with their integer weights: ``"webshop"`` -> {webshop: 1};
    a mixture ``"alfworld+webshop"`` (equal weights) or ``"alfworld*3+webshop"`` -> {alfworld: 3,
    webshop: 1}. Every member must be a registered domain, each at most once."""
    weights: dict[str, int] = {}
    for part in train_domain.split(MIX_SEP):
        name, _, weight = part.partition(WEIGHT_SEP)
        check_domain(name)
        if name in weights:
            raise GentaxError(f"training domain {train_domain!r} names {name!r} twice")
        if weight and (not weight.isdigit() or int(weight) < 1):
            raise GentaxError(f"training domain {train_domain!r}: weight of {name!r} must be an integer >= 1")
        weights[name] = int(weight or 1)
    return weights


def mixture_name(weights: dict[str, int]) -> str:
    """The inverse of ``mixture_weights`` (weight 1 is left out of the name)."""
    return MIX_SEP.join(name if w == 1 else f"{name}{WEIGHT_SEP}{w}" for name, w in weights.items())


def is_mixture(train_domain: str) -> bool:
    return MIX_SEP in train_domain
