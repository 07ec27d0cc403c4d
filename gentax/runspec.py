"""What a run is: the variant registry and the run spec, one place for both (docs/contracts.md "Runs").

A variant (``VariantSpec`` in ``VARIANTS``) says how a run differs from the default recipe: its
thinking mode (``THINK_MODES``), whether its training rollouts are augmented, and optional
overrides of the training domains' settings and budgets. A ``RunSpec`` is one RL run resolved once
by the plan (``build``; ``from_defaults`` for a command line; ``plan.control_run`` for a control
level, named by its ``label``); ``collect_fields`` is the one place that turns it into collector
settings (augmentation on the ``train`` split only).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from typing import Any, Mapping

from gentax.agent.prompts import MODES
from gentax.errors import GentaxError, key_problems

#: the agent's think modes (gentax.agent.prompts.MODES) as collector settings (CollectConfig fields):
#: "on" the paper's prompt (think=True), "off" Table 7's (think=False), "filler" beyond the paper
#: (the engine adds the FillerSpec, gentax.agent.filler)
THINK_MODES: dict[str, dict[str, Any]] = {mode: {"think": {"on": True, "off": False}.get(mode, mode)} for mode in MODES}


@dataclasses.dataclass(frozen=True)
class VariantSpec:
    """What a run variant means (see the module docstring)."""

    name: str
    think: str
    augment: bool
    description: str
    domains: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    aug_eps: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.think not in THINK_MODES:
            raise GentaxError(f"variant {self.name!r}: unknown thinking mode {self.think!r}; valid: {', '.join(THINK_MODES)}")
        unknown = {k for overrides in self.domains.values() for k in overrides} - {"max_steps", "options"}
        if unknown:
            raise GentaxError(f"variant {self.name!r}: domain overrides take max_steps and options, not {', '.join(sorted(unknown))}")


VARIANTS: dict[str, VariantSpec] = {v.name: v for v in (
    VariantSpec("default", think="on", augment=False, description="the paper's recipe: thinking on, no augmentation"),
    VariantSpec("aug", think="on", augment=True, description="State Information Augmentation of the training rollouts (Table 5)"),
    VariantSpec("nothink", think="off", augment=False, description="thinking off in training and evaluation (Table 7)"),
    VariantSpec("filler", think="filler", augment=False,
                description="filler thinking: the think block is neutral filler of the matching default run's mean "
                            "think-token count, no reasoning (controls.filler; Table 7's filler rows; local engine only)"),
)}
DEFAULT_VARIANT = "default"
FILLER_VARIANT = "filler"  # the variant controls.filler plans (gentax.study.plan.filler_experiments)


def variant(name: str) -> VariantSpec:
    try:
        return VARIANTS[name]
    except (KeyError, TypeError):
        raise GentaxError(f"unknown variant {name!r}; valid: {', '.join(VARIANTS)}") from None


def variant_names() -> tuple[str, ...]:
    return tuple(VARIANTS)


def think_mode(variant_name: str) -> str:
    """The thinking mode a variant's runs are trained and evaluated with."""
    return variant(variant_name).think


def base_variant(variant_name: str) -> str:
    """The variant whose initial-policy ("base") evaluation stands for this variant's: the first
    registered variant with the same thinking mode (the base model is never trained, so only the
    thinking mode changes what it is evaluated as)."""
    mode = think_mode(variant_name)
    return next(name for name, v in VARIANTS.items() if v.think == mode)


def augments(variant_name: str) -> bool:
    return variant(variant_name).augment


def think_fields(mode: str) -> dict[str, Any]:
    """The collector settings (``CollectConfig`` fields) of a thinking mode."""
    try:
        return dict(THINK_MODES[mode])
    except (KeyError, TypeError):
        raise GentaxError(f"unknown thinking mode {mode!r}; valid: {', '.join(THINK_MODES)}") from None


# ---- the run spec ------------------------------------------------------------------------------
def run_path(init: str, train_domain: str, variant_label: str, seed: Any) -> str:
    """A run's folder under ``<results>/runs/``, and its summary's name (``gentax.study.paths``);
    the arguments may be Snakemake wildcards (``"{seed}"``)."""
    return f"{init}/{train_domain}/{variant_label}/seed{seed}"


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One RL run, resolved (see the module docstring). Hashable by its identity (the five keys
    that name its folder); equal when every field is."""

    init: str
    train: tuple[tuple[str, int], ...]
    variant: str
    seed: int
    steps: int
    think: str
    augmentation: Mapping[str, Any] | None
    domains: Mapping[str, Mapping[str, Any]]
    #: a level of a control sweep (``difficulty-short``, ``richness-eps80``; gentax.study.controls), named
    #: by it in paths and tables instead of its variant; empty for a grid run
    label: str = ""

    def __post_init__(self):
        _check(self)

    def __hash__(self) -> int:
        return hash((self.init, self.train, self.variant, self.seed, self.steps, self.label))

    @property
    def variant_label(self) -> str:
        """The run's variant name in paths, wildcards and tables: its label, else its variant."""
        return self.label or self.variant

    @property
    def weights(self) -> dict[str, int]:
        return dict(self.train)

    @property
    def train_domain(self) -> str:
        """The run's label in paths and tables: ``webshop``, or a mixture ``webshop+sokoban``."""
        from gentax.domains.spec import mixture_name

        return mixture_name(self.weights)

    @property
    def path(self) -> str:
        """Relative run folder (under ``<results>/runs/``)."""
        return run_path(self.init, self.train_domain, self.variant_label, self.seed)

    def row(self) -> dict[str, Any]:
        """The run's identity as a plain row (``gentax plan --json``)."""
        return {"init": self.init, "train_domain": self.train_domain, "variant": self.variant_label, "seed": self.seed,
                "steps": self.steps}

    def to_dict(self) -> dict[str, Any]:
        return {"init": self.init, "train": [[d, w] for d, w in self.train], "variant": self.variant,
                "seed": self.seed, "steps": self.steps, "think": self.think,
                "augmentation": copy.deepcopy(_plain(self.augmentation)), "domains": copy.deepcopy(_plain(self.domains)),
                **({"label": self.label} if self.label else {})}  # a grid run's spec (a job param) stays as it was

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunSpec":
        """The inverse of ``to_dict``; a missing or unknown key or a bad value is one GentaxError."""
        if not isinstance(data, Mapping):
            raise GentaxError(f"run spec: expected a mapping, got {type(data).__name__}")
        problems = key_problems(data, [f.name for f in dataclasses.fields(cls) if f.name != "label"],
                                optional=("label",))
        if problems:
            raise GentaxError(f"run spec: {problems}")
        try:
            train = tuple((str(d), int(w)) for d, w in data["train"])
        except (TypeError, ValueError):
            raise GentaxError(f"run spec key train: expected [[domain, weight], ...], got {data['train']!r}") from None
        return cls(init=data["init"], train=train, variant=data["variant"], seed=data["seed"], steps=data["steps"],
                   think=data["think"], augmentation=copy.deepcopy(_plain(data["augmentation"])),
                   domains=copy.deepcopy(_plain(data["domains"])), label=data.get("label", ""))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def _plain(obj: Any) -> Any:
    """Plain dicts/lists (an OmegaConf or Snakemake container as well)."""
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if isinstance(obj, Mapping) or hasattr(obj, "items"):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) or hasattr(obj, "__iter__"):
        return [_plain(v) for v in obj]
    return obj


def _check(run: RunSpec) -> None:
    from gentax.domains.spec import check_domain

    def bad(key: str, what: str) -> GentaxError:
        return GentaxError(f"run spec key {key}: {what}")

    v = variant(run.variant)
    if not isinstance(run.label, str) or (run.label and (not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", run.label)
                                                         or run.label in VARIANTS)):
        raise bad("label", f"expected empty or a name of [a-z0-9_-] that is no registered variant, got {run.label!r}")
    if not isinstance(run.init, str) or not run.init:
        raise bad("init", f"expected a non-empty name, got {run.init!r}")
    for key in ("seed", "steps"):
        value = getattr(run, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < (1 if key == "steps" else 0):
            raise bad(key, f"expected an integer >= {1 if key == 'steps' else 0}, got {value!r}")
    if not run.train or len({d for d, _ in run.train}) != len(run.train) or any(w < 1 for _, w in run.train):
        raise bad("train", f"expected distinct domains with integer weights >= 1, got {run.train!r}")
    for domain, _ in run.train:
        check_domain(domain)
    if run.think != v.think:
        raise bad("think", f"variant {run.variant!r} trains with thinking {v.think!r}, not {run.think!r}")
    names = [d for d, _ in run.train]
    if not isinstance(run.domains, Mapping) or sorted(run.domains) != sorted(names):
        raise bad("domains", f"expected the settings of exactly the training domains {names}, got {run.domains!r}")
    for domain, settings in run.domains.items():
        if not isinstance(settings, Mapping) or set(settings) != {"max_steps", "options"} \
                or not isinstance(settings["max_steps"], int) or settings["max_steps"] < 1 \
                or not isinstance(settings["options"], Mapping):
            raise bad(f"domains.{domain}", f"expected {{max_steps: integer >= 1, options: {{...}}}}, got {settings!r}")
    if (run.augmentation is None) == v.augment:
        raise bad("augmentation", f"variant {run.variant!r} {'needs' if v.augment else 'has no'} augmentation, "
                                  f"got {run.augmentation!r}")
    if run.augmentation is not None:
        aug = run.augmentation
        if not isinstance(aug, Mapping) or set(aug) != {"kind", "p", "eps"} \
                or not isinstance(aug["p"], (int, float)) or not 0 <= aug["p"] <= 1 \
                or not isinstance(aug["eps"], Mapping) or sorted(aug["eps"]) != sorted(names) \
                or any(not isinstance(e, int) or e < 0 for e in aug["eps"].values()):
            raise bad("augmentation", f"expected {{kind, p in [0, 1], eps: {{domain: integer >= 0}} for {names}}}, "
                                      f"got {aug!r}")


def _resolve(init: str, weights: Mapping[str, int], variant_name: str, seed: int, steps: int, *,
             domain_settings, aug_kind: str, aug_p: float, aug_eps) -> RunSpec:
    """A run spec with the variant's overrides applied (``domain_settings(d)`` -> {max_steps,
    options}; ``aug_eps(d)`` -> the budget of domain d, called only for an augmented variant)."""
    from gentax.io import deep_merge

    v = variant(variant_name)
    domains = {}
    for d in weights:
        base = domain_settings(d)
        base = {"max_steps": int(base["max_steps"]), "options": dict(base.get("options") or {})}
        domains[d] = deep_merge(base, dict(v.domains.get(d, {})))
    augmentation = None
    if v.augment:
        augmentation = {"kind": str(aug_kind), "p": float(aug_p),
                        "eps": {d: int(v.aug_eps[d]) if d in v.aug_eps else int(aug_eps(d)) for d in weights}}
    return RunSpec(init=str(init), train=tuple((d, int(w)) for d, w in weights.items()), variant=v.name,
                   seed=int(seed), steps=int(steps), think=v.think, augmentation=augmentation, domains=domains)


def build(cfg: Mapping[str, Any], init: str, train_domain: str, variant_name: str, seed: int, steps: int) -> RunSpec:
    """The run spec of a planned run from a (validated) workflow config: the training domains'
    ``domains`` sections and the init's ``augmentation`` budget, with the variant's overrides."""
    from gentax.domains.spec import mixture_weights

    aug = cfg["augmentation"]
    return _resolve(init, mixture_weights(train_domain), variant_name, seed, steps,
                    domain_settings=lambda d: cfg["domains"][d], aug_kind=aug["kind"],
                    aug_p=aug.get(init, {}).get("p", 0.0), aug_eps=lambda d: aug[init]["eps"][d])


def from_defaults(*, init: str, domain: str, variant: str, seed: int, steps: int,
                  domains: Mapping[str, Mapping[str, Any]],
                  augmentation: Mapping[str, Any] | None = None) -> RunSpec:
    """The run spec of a run named on the command line (``gentax train rl --domain --variant``), from
    the study values its caller hands in (``gentax.study.jobs.command_line_defaults``). Each training
    domain's settings are ``domains[d]`` ({max_steps, options?}); a domain without an entry (one a
    ``GENTAX_DOMAINS`` module adds) runs at its env's own step limit and knobs, as ``gentax eval``
    plays it. An augmented variant takes ``augmentation`` {kind, p, eps}; a missing budget is an error."""
    from gentax.domains import domain_class
    from gentax.domains.spec import mixture_weights

    aug = augmentation or {}
    if augments(variant):
        missing = [key for key in ("kind", "p") if key not in aug]
        if missing:
            raise GentaxError(f"variant {variant!r} augments its training episodes: give its augmentation's "
                              f"{' and '.join(missing)}")

    def settings(d: str) -> Mapping[str, Any]:
        return domains[d] if d in domains else {"max_steps": domain_class(d).default_max_steps, "options": {}}

    def budget(d: str) -> int:
        eps = aug.get("eps") or {}
        if d not in eps:
            raise GentaxError(f"variant {variant!r} augments its training episodes: no augmentation budget (eps) for "
                              f"{d}; a command line takes the study's augmentation.v1.eps.{d} (set it in a "
                              f"--study-config file) or the run from a --run-spec file")
        return eps[d]

    return _resolve(init, mixture_weights(domain), variant, seed, steps, domain_settings=settings,
                    aug_kind=aug.get("kind"), aug_p=aug.get("p"), aug_eps=budget)


def collect_fields(run: RunSpec, domain: str, split: str) -> dict[str, Any]:
    """The collector settings (``CollectConfig`` fields) of an episode of ``run`` on ``domain`` (one
    of its training domains) in ``split``: the thinking mode's settings, the domain's step limit and
    knobs, and the augmentation, which applies to training episodes only (both engines)."""
    if domain not in run.domains:
        raise GentaxError(f"run {run.path}: {domain!r} is not one of its training domains ({', '.join(run.domains)})")
    aug = run.augmentation if split == "train" else None
    return {
        "domain": domain,
        "split": split,
        **think_fields(run.think),
        "aug_eps": int(aug["eps"][domain]) if aug else 0,
        "aug_p": float(aug["p"]) if aug else 0.0,
        "aug_kind": str(aug["kind"]) if aug else "distractor",
        "max_steps": int(run.domains[domain]["max_steps"]),
        "env_options": dict(run.domains[domain]["options"]),
    }
