"""The package's one reader of the workflow's config file (issue #41 item 2): ``gentax.study.config``
(``STUDY_FILE``, ``study_config``). Every other module gets study values as arguments; a command
line's defaults come through ``gentax.cli`` (``gentax.jobspec.add_study_arguments``). Read from the source with ast:
a string constant naming the file ``config.yaml`` (a path part, not prose in a docstring or help
text) appears only in the loader, and in the two readers of a *Snakemake profile's* config.yaml."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENTAX = ROOT / "gentax"
LOADER = "gentax/study/config.py"
#: a Snakemake profile folder's config.yaml (its resources and `config:` entries), not the workflow's
PROFILE_READERS = {"gentax/study/preview/cost.py", "gentax/clone.py"}


def _names_config_file(path: Path) -> list[int]:
    """Lines of ``path`` whose string constant is the file name ``config.yaml`` or a path ending in it."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.strip()
            if text == "config.yaml" or (text.endswith("/config.yaml") and " " not in text):
                lines.append(node.lineno)
    return lines


def test_only_the_study_layer_loader_names_the_workflow_config_file():
    found = {str(path.relative_to(ROOT)): lines for path in sorted(GENTAX.rglob("*.py"))
             if (lines := _names_config_file(path))}
    assert LOADER in found, "the scan no longer sees the loader's own STUDY_FILE: the check is blind"
    readers = set(found) - {LOADER} - PROFILE_READERS
    assert not readers, (f"modules that name config.yaml by path: {sorted(readers)} (lines {[found[r] for r in sorted(readers)]}); "
                         "take the study values as arguments (gentax.study.config.study_config at the command line)")


def test_no_module_keeps_a_study_config_constant():
    """The old names of a second reader (train/config.py's STUDY_CONFIG, study/cli.py's DEFAULT_CONFIG) stay gone."""
    for path in GENTAX.rglob("*.py"):
        names = {node.id for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Name)}
        assert not names & {"STUDY_CONFIG", "DEFAULT_CONFIG"}, path


def test_a_command_line_default_is_the_study_presets(tmp_path):
    """``gentax tables`` without --window takes the preset's window (the last eval.window checkpoints):
    the embedded study's one checkpoint at grid.steps 2, the paper's 105..150."""
    from gentax.cli import build_parser, _study_defaults

    for preset, window in (("embedded", [2]), ("paper", [105, 120, 135, 150])):
        args = build_parser().parse_args(["tables", "--summary", "s.csv", "--out", str(tmp_path), "--preset", preset])
        assert _study_defaults(args)()["window"] == window


def test_train_rl_takes_its_engine_and_seed_from_the_study(tmp_path, capsys):
    """A run named on the command line: engines.rl's engine (the embedded study's local engine prints
    its RL section and run spec), the grid's first seed and grid.steps."""
    import yaml

    from gentax.cli import main
    from gentax.study.config import study_config

    cfg = study_config("embedded")
    assert main(["train", "rl", "--preset", "embedded", "--print-config", "--init", "/m", "--domain", "sokoban",
                 "--out", str(tmp_path / "run")]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert cfg["engines"]["rl"] == "local" and "run_spec" in printed  # the local engine's print (verl's: its config)
    assert printed["run_spec"]["seed"] == cfg["grid"]["seeds"][0] and printed["run_spec"]["steps"] == cfg["grid"]["steps"]


def test_augment_preview_takes_its_kind_from_the_study(tmp_path, capsys):
    from gentax.cli import main

    mine = tmp_path / "mine.yaml"
    mine.write_text("augmentation: {kind: fixed_boilerplate}\n")
    previews = []
    for options in (["--study-config", str(mine)], ["--kind", "fixed_boilerplate"], ["--kind", "distractor"]):
        assert main(["augment", "preview", "--domain", "sokoban", "--eps", "80", "--json", *options]) == 0
        previews.append(capsys.readouterr().out)
    assert previews[0] == previews[1] != previews[2]
