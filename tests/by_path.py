"""A script or benchmark of this checkout as a module, loaded from its file (they are no package)."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load(relative: str, name: str | None = None) -> ModuleType:
    """The module at ``REPO / relative`` (e.g. ``scripts/config_readme.py``), freshly executed and
    registered under ``name`` (default: its file's stem; its dataclasses look their module up in
    ``sys.modules``)."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
