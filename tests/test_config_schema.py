"""The config schema's readers beside gentax's own check (issue #41 item 5): config/README.md,
generated from it and compared here as CI compares it (scripts/config_readme.py --check), and
snakemake.utils.validate, which the Snakefile hands the same schema as a file (gentax.study.config.schema_file)."""

from __future__ import annotations

import copy
import os

import pytest
from by_path import load
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

import gentax.study.config as gconfig
from gentax.errors import ConfigError
from gentax.io import read_yaml


def _script():
    return load("scripts/config_readme.py")


def _text(script, schema: dict, study: dict) -> str:
    return script.Readme(schema, study).text(gconfig.PRESET_OVERLAYS, {})


def test_the_checked_in_readme_is_what_the_schema_and_the_config_give(capsys):
    assert _script().main(["--check"]) == 0, capsys.readouterr().err


def test_the_readme_does_not_depend_on_the_domains_a_process_adds(monkeypatch, capsys):
    monkeypatch.setenv("GENTAX_DOMAINS", "tests.toy_domain")
    assert _script().main(["--check"]) == 0, capsys.readouterr().err
    assert os.environ["GENTAX_DOMAINS"] == "tests.toy_domain"  # left as it was


def test_a_changed_readme_is_caught(tmp_path, monkeypatch, capsys):
    script = _script()
    monkeypatch.setattr(script, "OUT", tmp_path / "README.md")
    assert script.main(["--write"]) == 0
    text = script.OUT.read_text()
    assert "| `eval.bootstrap` | integer ≥ 0, optional | `1000` |" in text  # type, default from config/config.yaml
    script.OUT.write_text(text.replace("`1000`", "`999`", 1))
    assert script.main(["--check"]) == 1
    assert "README.md: not what `python scripts/config_readme.py --write` writes" in capsys.readouterr().err


def test_a_key_without_a_description_is_refused():
    schema = gconfig.schema()
    del schema["properties"]["eval"]["properties"]["window"]["description"]
    with pytest.raises(ConfigError, match=r"eval\.window: no description in the schema"):
        _text(_script(), schema, read_yaml(gconfig.STUDY_FILE))


def test_an_open_sections_keys_are_described_and_known_to_its_engine():
    """``rl`` and ``inits.v2.sft`` hold descriptions only (their engines' loaders check them): a key
    config/config.yaml sets there needs one, and each described key must be the engine's."""
    study = read_yaml(gconfig.STUDY_FILE)
    study["rl"]["env_workers"] = 0  # an RL key (an engine default) the schema does not describe
    schema = gconfig.schema()
    schema["properties"]["rl"]["properties"]["made_up"] = {"description": "no RLConfig field"}
    with pytest.raises(ConfigError) as caught:
        _text(_script(), schema, study)
    assert "rl.env_workers: set in config/config.yaml, not described" in str(caught.value)
    assert "rl.made_up: described in the schema, no key of RLConfig" in str(caught.value)


@pytest.mark.parametrize("preset", list(gconfig.PRESET_OVERLAYS))
def test_snakemake_validate_accepts_each_preset_against_the_schema_file(preset):
    cfg = gconfig.study_config(preset)
    with gconfig.schema_file() as path:
        validate(cfg, str(path), set_default=False)
        assert gconfig.schema() == read_yaml(path)  # the schema gentax checks with, registry lists filled in
    assert not path.exists()  # a temporary of the block's length


def test_snakemake_validate_refuses_what_the_schema_refuses():
    bad = copy.deepcopy(gconfig.study_config("embedded"))
    bad["eval"]["episdoes"] = 4
    with gconfig.schema_file() as path, pytest.raises(WorkflowError, match="episdoes"):
        validate(bad, str(path), set_default=False)
    bad = copy.deepcopy(gconfig.study_config("embedded"))
    bad["grid"]["experiments"][0]["train_domains"] = ["sokobn"]  # the domain enum, filled in at load time
    with gconfig.schema_file() as path, pytest.raises(WorkflowError, match="sokobn"):
        validate(bad, str(path), set_default=False)
