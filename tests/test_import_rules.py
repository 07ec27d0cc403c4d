"""The layering docs/contracts.md states, read from the source: the domains never import the
rollout or training code, and verl_engine / verl_agent do not import each other at module level."""

from __future__ import annotations

import ast
from pathlib import Path

GENTAX = Path(__file__).resolve().parents[1] / "gentax"


def _imports(path: Path, *, module_level_only: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if module_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def test_domains_do_not_import_rollout_or_training_code():
    offenders = {str(p.relative_to(GENTAX)): sorted(m for m in _imports(p) if m.startswith(("gentax.rollout", "gentax.train")))
                 for p in (GENTAX / "domains").rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_verl_engine_and_verl_agent_do_not_import_each_other_at_module_level():
    engine = _imports(GENTAX / "train" / "verl_engine.py", module_level_only=True)
    agent = _imports(GENTAX / "train" / "verl_agent.py")  # anywhere: it runs inside verl
    assert "gentax.train.verl_agent" not in engine
    assert "gentax.train.verl_engine" not in agent
