"""snakemake.utils.validate against the config schema (issue #41 item 5): the Snakefile hands it the
schema gentax checks with, as a file (gentax.study.config.schema_file)."""

from __future__ import annotations

import copy

import pytest
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

import gentax.study.config as gconfig
from gentax.io import read_yaml


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
