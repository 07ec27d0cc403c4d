"""The layout a Snakemake user expects (issue #41 item 5; docs/layout.md): the study's config is
config/config.yaml, where the Snakefile and the package both read it, and the workflow catalog's
metadata names profiles and configs that exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from gentax.study.config import PRESET_OVERLAYS, STUDY_FILE

REPO = Path(__file__).resolve().parents[1]


def test_the_snakefile_reads_the_config_file_the_package_reads():
    """The Snakefile spells the path itself (the workflow's side owns its config file): it is
    gentax.study.config.STUDY_FILE, the base the Snakefile's config load lays the preset over."""
    snakefile = (REPO / "Snakefile").read_text()
    configfile = re.search(r'^configfile: "([^"]+)"$', snakefile, flags=re.M).group(1)
    assert REPO / configfile == STUDY_FILE
    assert "with_preset(read_yaml(gconfig.STUDY_FILE)" in (REPO / "gentax" / "study" / "snakefile.py").read_text()
    assert STUDY_FILE == REPO / "config" / "config.yaml" and STUDY_FILE.is_file()
    assert not (REPO / "config.yaml").exists()


def test_the_catalog_metadata_names_profiles_and_configs_that_exist():
    usage = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    flags = shlex.split(usage["mandatory-flags"]["flags"])
    assert flags[0] == "--profile" and (REPO / flags[1] / "config.yaml").is_file(), flags
    desc = usage["mandatory-flags"]["desc"]
    named = set(re.findall(r"\b(?:profiles|config)/[\w.]+", desc))
    assert named >= {f"profiles/{p.name}" for p in (REPO / "profiles").iterdir() if (p / "config.yaml").is_file()}
    assert named >= {str(path.relative_to(REPO)) for path in PRESET_OVERLAYS.values() if path} | {"config/config.yaml"}
    for name in named:
        assert (REPO / name).exists(), f".snakemake-workflow-catalog.yml names {name}, which does not exist"
    deployment = usage["software-stack-deployment"]
    assert set(deployment) == {"conda", "apptainer", "apptainer+conda"}
    assert all(isinstance(value, bool) for value in deployment.values()) and isinstance(usage["report"], bool)
