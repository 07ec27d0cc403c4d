"""The one registry of the study's tables and figures: each is one ``Artifact`` entry.

Contract and what derives from it (the plan's lists and inputs, the power preview, ``build_one``,
the full build): docs/contracts.md "Tables and figures". Adding a table is one entry here plus its
builder; a study extension may keep its entries in a module of its own with a module-level
``ARTIFACTS`` tuple, named in ``GENTAX_ARTIFACTS`` (comma-separated module names, read by every
process like ``GENTAX_DOMAINS``; tests/toy_table.py).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Callable

from gentax.errors import GentaxError

ENV_VAR = "GENTAX_ARTIFACTS"
KINDS = ("table", "figure")
PLANNED = ("always", "mixtures", "controls")
EFFECTS = ("ΔID", "ΔOOD")


@dataclasses.dataclass(frozen=True)
class Tested:
    """What a table's decision rule tests, so that ``gentax plan --power`` prices it
    (``gentax.study.preview.power``): ``effect`` "ΔID" (each ``variant`` run against its initial policy) or
    "ΔOOD" (each ``variant`` run against the default run of its init and training domain, the OOD
    domains' tasks pooled); with ``extended``, the default runs trained beyond ``grid.steps``, each
    tested twice (at the default window and at its last checkpoints). Mixture runs are not tested."""

    effect: str
    variant: str = "default"
    extended: bool = False

    def __post_init__(self):
        if self.effect not in EFFECTS:
            raise GentaxError(f"tested effect must be one of {EFFECTS}, got {self.effect!r}")


@dataclasses.dataclass(frozen=True)
class Artifact:
    """``kind``: table (CSV, Markdown, LaTeX) or figure (PNG, SVG). ``build``: "module:function",
    imported on first use (planning never imports pandas or matplotlib), called as
    ``function(analysis, name)`` with a ``gentax.analysis.tables.Analysis``. ``variants``: the run
    variants it reads (every init's base rows come along; one planned with the mixtures or the
    controls reads their runs instead: ``gentax.study.plan.artifact_runs``). ``properties`` /
    ``controls`` / ``extended``: whether it reads the properties table, the controls' properties
    table, the extended runs' summaries; ``training``: each run's per-step training metrics (its
    ``metrics.csv``, read beside the record of the run's last segment). ``bootstrap``: whether it needs the draws (else built
    with ``n_boot=0``). ``planned``: always, mixtures (``grid.mixtures`` enabled) or controls (a
    ``controls`` sweep enabled). ``tests``: what its decision rule tests, for the power preview."""

    name: str
    kind: str
    build: str
    variants: tuple[str, ...] = ("default",)
    properties: bool = False
    controls: bool = False
    extended: bool = False
    training: bool = False
    bootstrap: bool = False
    planned: str = "always"
    tests: Tested | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise GentaxError(f"artifact {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.planned not in PLANNED:
            raise GentaxError(f"artifact {self.name!r}: planned must be one of {PLANNED}, got {self.planned!r}")
        if ":" not in self.build:
            raise GentaxError(f"artifact {self.name!r}: build must be 'module:function', got {self.build!r}")
        if self.tests is not None and self.kind != "table":
            raise GentaxError(f"artifact {self.name!r}: only a table tests cells (tests=)")


def _table(name, function=None, module="tables", **kw) -> Artifact:
    """A built-in table, built by ``gentax.analysis.<module>.<function>`` (default: its name)."""
    return Artifact(name, "table", f"gentax.analysis.{module}:{function or name}", **kw)


def _figure(name, **kw) -> Artifact:
    return Artifact(name, "figure", f"gentax.analysis.figures:{name}", **kw)


ARTIFACTS: tuple[Artifact, ...] = (
    _table("table2_success", bootstrap=True, tests=Tested("ΔID")),
    _table("table3_ranking", properties=True),
    _table("table4_extended", "build_table4", extended=True, bootstrap=True, tests=Tested("ΔID", extended=True)),
    _table("table5_augmentation", variants=("default", "aug"), tests=Tested("ΔOOD", "aug")),
    _table("table6_relative_change"),
    # filler: runs only with controls.filler (its rows a Holm family of their own, not priced)
    _table("table7_thinking", variants=("default", "nothink", "filler"), tests=Tested("ΔOOD", "nothink")),
    _table("table8_rank_detail"),
    # beyond the paper: every cell's intervals; the share of resamples ranked best; grid.mixtures; controls
    _table("success_ci", "build_success_ci", variants=("default", "aug", "nothink", "filler"), bootstrap=True),
    _table("rank_stability", "build_rank_stability", bootstrap=True),
    _table("mixture_ood", bootstrap=True, planned="mixtures"),
    _table("controls_sweep", "build", "controls", controls=True, bootstrap=True, planned="controls"),
    _table("controls_regression", "build", "controls", controls=True, bootstrap=True, planned="controls"),
    _figure("ood_vs_properties", properties=True),
    _figure("delta_ood_augmentation", variants=("default", "aug")),
    _figure("delta_ood_thinking", variants=("default", "nothink", "filler")),
    _figure("training_curves", variants=("default", "aug", "nothink", "filler"), extended=True, training=True),
    _figure("mixture_delta_ood", bootstrap=True, planned="mixtures"),
    _figure("controls_delta_ood", controls=True, bootstrap=True, planned="controls"),
)


def _extensions() -> list[Artifact]:
    """The entries of the modules ``GENTAX_ARTIFACTS`` names, each with a module-level ``ARTIFACTS``."""
    out = []
    for module_name in [m.strip() for m in os.environ.get(ENV_VAR, "").split(",") if m.strip()]:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise GentaxError(f"artifact module {module_name!r} (from {ENV_VAR}) cannot be imported: {exc}") from None
        found = getattr(module, "ARTIFACTS", None)
        if not isinstance(found, (tuple, list)) or not all(isinstance(a, Artifact) for a in found):
            raise GentaxError(f"artifact module {module_name!r} has no ARTIFACTS = (Artifact(...), ...)")
        out += found
    return out


def entries() -> tuple[Artifact, ...]:
    """Every registered entry, in order: ``ARTIFACTS``, then those of the ``GENTAX_ARTIFACTS`` modules."""
    return tuple(_by_name().values())


def _by_name() -> dict[str, Artifact]:
    # read at call time, so a test (or a study extension) that replaces ARTIFACTS is seen everywhere
    found: dict[str, Artifact] = {}
    for artifact in (*ARTIFACTS, *_extensions()):
        if artifact.name in found:
            raise GentaxError(f"artifact {artifact.name!r} is registered twice")
        found[artifact.name] = artifact
    return found


def get(name: str) -> Artifact:
    registered = _by_name()
    if name not in registered:
        raise GentaxError(f"unknown table or figure {name!r}; known: {', '.join(registered)}")
    return registered[name]


def names(kind: str | None = None, planned: str | None = None) -> tuple[str, ...]:
    """The registered names, in registry order, of one ``kind`` and/or one ``planned`` condition."""
    return tuple(a.name for a in _by_name().values()
                 if (kind is None or a.kind == kind) and (planned is None or a.planned == planned))


def builder(name: str) -> Callable:
    """The entry's build function, imported now."""
    module, function = get(name).build.split(":")
    return getattr(importlib.import_module(module), function)
