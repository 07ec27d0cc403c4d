"""The controls the paper lacked: the levels of the config's ``controls`` sweeps (``difficulty``: one
domain at several difficulty levels; ``richness``: at several augmentation budgets ``eps``), each
with its runs (``gentax.study.plan.control_run``) and its own property log, so ΔOOD can be read
against what the run trained on. ``ControlsTableJob``: their table's job. docs/STUDY.md "Controls".
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from gentax import io as gio
from gentax import jobspec
from gentax.jobspec import JobKind
from gentax.study import paths

DIFFICULTY = "difficulty"
RICHNESS = "richness"
KINDS = (DIFFICULTY, RICHNESS)


class ControlLevel(NamedTuple):
    control: str            # difficulty | richness
    level: str              # the level's name (richness: eps<N>)
    order: int              # position in its sweep (the config's order)
    init: str
    train_domain: str
    variant: str            # the registered variant the runs are built on
    domain: dict            # {"max_steps": int, "options": {...}}: the training domain's setting
    augmentation: dict      # {} or {"kind", "p", "eps"}: what the training states get

    @property
    def label(self) -> str:
        """The runs' variant name in paths and in the success summary."""
        return f"{self.control}-{self.level}"

    def setting(self) -> str:
        """What sets this level apart, in words (the tables' ``setting`` column)."""
        if self.control == RICHNESS:
            return f"eps={self.augmentation['eps']}, p={self.augmentation['p']:g}"
        knobs = {"max_steps": self.domain["max_steps"], **self.domain["options"]}
        return ", ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in sorted(knobs.items()))


def enabled(cfg: dict, kind: str) -> dict | None:
    """``controls.<kind>`` when it is enabled, else None."""
    block = (cfg.get("controls") or {}).get(kind) or {}
    return block if block.get("enabled") else None


def _domain_setting(cfg: dict, domain: str, override: dict | None = None) -> dict:
    """The domain's configured setting with a level's override laid over it (options key by key)."""
    base = cfg["domains"][domain]
    override = override or {}
    return {"max_steps": int(override.get("max_steps", base["max_steps"])),
            "options": {**dict(base.get("options") or {}), **dict(override.get("options") or {})}}


def control_levels(cfg: dict) -> list[ControlLevel]:
    out = []
    block = enabled(cfg, DIFFICULTY)
    if block:
        for order, override in enumerate(block["levels"]):
            out.append(ControlLevel(DIFFICULTY, override["name"], order, block["init"], block["train_domain"], block["variant"],
                                    _domain_setting(cfg, block["train_domain"], override), {}))
    block = enabled(cfg, RICHNESS)
    if block:
        kind = cfg["augmentation"]["kind"]
        for order, eps in enumerate(block["eps"]):
            variant = "aug" if eps else "default"  # eps 0: nothing inserted, i.e. the default recipe
            out.append(ControlLevel(RICHNESS, f"eps{int(eps)}", order, block["init"], block["train_domain"], variant,
                                    _domain_setting(cfg, block["train_domain"]),
                                    {"kind": kind, "p": float(block["p"]), "eps": int(eps)}))
    return out


def measures_plain_states(cfg: dict, level: ControlLevel) -> bool:
    """The level's training states are the domain's as configured, without inserted text: its
    property log is Table 3's log of the domain (``properties/<domain>.json``), not a second one."""
    return level.domain == _domain_setting(cfg, level.train_domain) and not level.augmentation.get("eps")


def property_path(cfg: dict, level: ControlLevel) -> str:
    """The level's property log, relative to the results folder."""
    if measures_plain_states(cfg, level):
        return paths.relative_properties(level.train_domain)
    return paths.relative_control_properties(level.label, level.train_domain)


def property_row(level: ControlLevel, run_label: str, measures: dict[str, Any]) -> dict[str, Any]:
    """One row of the controls' properties table: the level, the variant name its runs have in the
    summary (``run_label``: its own label, or a grid run's variant it reuses), its measures."""
    return {"control": level.control, "level": level.level, "order": level.order, "label": run_label,
            "init": level.init, "train_domain": level.train_domain, "variant": level.variant,
            "setting": level.setting(), "eps": level.augmentation.get("eps", 0),
            **{k: measures[k] for k in PROPERTY_MEASURES if k in measures}}


#: The measures of a level's property log carried into the controls' tables.
PROPERTY_MEASURES = ("richness", "tokens_per_obs", "complexity", "success", "n_episodes")


class ControlDomain(typing.TypedDict):
    """A control level's training-domain setting."""
    max_steps: int
    options: dict[str, Any]


class ControlLevelSpec(typing.TypedDict):
    """One level of the controls' table (a ``ControlLevel`` and the variant label of the runs it reads)."""
    control: str
    level: str
    order: int
    init: str
    train_domain: str
    variant: str
    domain: ControlDomain
    augmentation: dict[str, Any]
    run_label: str


@dataclass(frozen=True)
class ControlsTableJob(JobKind):
    """``gentax controls-properties-table``: one row per level of the controls from its property log."""
    verb: ClassVar[str] = "controls-properties-table"
    levels: list[ControlLevelSpec]
    inputs: list[str]
    out: str

    @classmethod
    def problems(cls, spec, inputs) -> list[str]:
        """One property log per level, each there."""
        out = jobspec.file_problems(spec, inputs, "inputs")
        if len(spec["levels"]) != len(spec["inputs"]):
            out.append(f"levels: {len(spec['levels'])} levels but {len(spec['inputs'])} property logs (inputs): one per level")
        return out

    def run(self) -> None:
        import pandas as pd  # function-local: `gentax --help` stays fast

        rows = []
        for level, path in zip(self.levels, self.inputs):
            level = dict(level)
            run_label = level.pop("run_label")
            data = gio.read_result_json(path, keys=("measures",))  # a level's property log (gentax properties)
            rows.append(property_row(ControlLevel(**level), run_label, data["measures"]))
        with gio.atomic_path(self.out) as tmp:
            pd.DataFrame(rows).to_csv(tmp, index=False)
        print(f"wrote {self.out}: {len(rows)} levels")
