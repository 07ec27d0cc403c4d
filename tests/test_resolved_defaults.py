"""config/resolved/<preset>.yaml is what each preset resolves to (issue #41 item 2): the generated
listing of every resolved default, compared here as CI compares it."""

from __future__ import annotations

from pathlib import Path

import yaml
from by_path import load

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load("scripts/resolved_defaults.py")


def test_the_checked_in_listings_are_what_the_presets_resolve_to(capsys):
    assert _script().main(["--check"]) == 0, capsys.readouterr().err


def test_a_listing_holds_the_study_values_the_commands_default_to():
    """The values that had lived as package constants (the bootstrap count, the checkpoint window) and
    the RL engine's study values are the listing's, from config/config.yaml."""
    paper = yaml.safe_load((ROOT / "config" / "resolved" / "paper.yaml").read_text())
    assert paper["command_line"]["tables"]["bootstrap"] == paper["study"]["eval"]["bootstrap"] == 1000
    assert paper["command_line"]["tables"]["window"] == [105, 120, 135, 150]
    assert paper["rl"]["group_size"] == paper["study"]["rl"]["group_size"]
    embedded = yaml.safe_load((ROOT / "config" / "resolved" / "embedded.yaml").read_text())
    assert embedded["command_line"]["tables"]["window"] == [embedded["study"]["grid"]["steps"]]


def test_a_changed_listing_is_caught(tmp_path, monkeypatch, capsys):
    script = _script()
    monkeypatch.setattr(script, "OUT", tmp_path)
    assert script.main(["--write"]) == 0
    path = tmp_path / "paper.yaml"
    path.write_text(path.read_text().replace("bootstrap: 1000", "bootstrap: 999", 1))
    assert script.main(["--check"]) == 1
    assert "paper.yaml" in capsys.readouterr().err
