"""Provenance records (gentax.provenance): what they hold and when their hashes change.

The workflow's use of them (evaluation summaries, segment manifests, tables and figures, the
report's columns) is checked on a finished run in tests/test_slurm_smoke.py.
"""

import json
import subprocess

import pytest

from gentax import provenance
from gentax.errors import GentaxError


@pytest.fixture
def model(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "model.safetensors").write_bytes(b"weights-0")
    (folder / "llamafactory.log").write_text("a log is not the model")
    return folder


def test_record_holds_code_config_model_tasks_packages_and_machine(model, tmp_path):
    tasks = tmp_path / "webshop.json"
    tasks.write_text(json.dumps({"domain": "webshop", "seeds": [0, 1], "fingerprint": "f" * 64}))
    rec = provenance.record(config={"b": 1, "a": [1, 2]}, model=model, tasks=tasks, inputs=[tasks])
    assert rec["gentax"]["version"] and "commit" in rec["gentax"] and "dirty" in rec["gentax"]
    assert rec["config_sha256"] == provenance.config_hash({"a": [1, 2], "b": 1})  # key order does not matter
    assert rec["model"]["sha256"] == provenance.model_hash(model)
    assert rec["tasks"]["fingerprint"] == "f" * 64
    assert rec["inputs"] == {str(tasks): provenance.file_hash(tasks)}
    assert set(rec["packages"]) == {"torch", "transformers", "verl", "vllm", "snakemake"}
    assert rec["packages"]["torch"] and rec["packages"]["snakemake"]  # installed here; vllm may be None
    assert rec["machine"]["cores"] >= 1 and rec["machine"]["cpu"] and isinstance(rec["machine"]["gpus"], list)
    json.dumps(rec)  # a plain JSON record


def test_hashes_change_with_what_they_stand_for(model):
    assert provenance.config_hash({"lr": 1e-6}) != provenance.config_hash({"lr": 2e-6})
    before = provenance.model_hash(model)
    (model / "llamafactory.log").write_text("logs beside the model do not change its hash")
    assert provenance.model_hash(model) == before
    (model / "model.safetensors").write_bytes(b"weights-1")
    assert provenance.model_hash(model) != before
    with pytest.raises(GentaxError, match="no model files"):
        provenance.model_hash(model / "missing")


def test_commit_and_dirty_state_of_a_checkout(tmp_path, monkeypatch):
    repo = tmp_path / "checkout"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "f.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "f.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setattr(provenance, "PACKAGE_ROOT", repo)
    provenance.code_version.cache_clear()
    try:
        assert provenance.code_version()["commit"] == head and provenance.code_version()["dirty"] is False
        (repo / "f.py").write_text("x = 2\n")
        provenance.code_version.cache_clear()
        assert provenance.code_version()["dirty"] is True
        monkeypatch.setattr(provenance, "PACKAGE_ROOT", tmp_path / "not-git")
        provenance.code_version.cache_clear()
        assert provenance.code_version()["commit"] is None
    finally:
        provenance.code_version.cache_clear()


def test_records_sit_beside_their_outputs_and_become_report_columns(model, tmp_path):
    assert provenance.beside("results/tables/table2_success.csv").name == "table2_success.provenance.json"
    assert provenance.beside("results/figures/training_curves.png").name == "training_curves.provenance.json"
    assert provenance.beside("results/init/v2/model").as_posix() == "results/init/v2/model.provenance.json"
    path = tmp_path / "t.provenance.json"
    path.write_text(json.dumps(provenance.record(config={"a": 1}, model=model)))
    labels = provenance.report_labels("table2_success", path)
    assert labels["name"] == "table2_success"
    assert labels["config sha256"] == provenance.config_hash({"a": 1})[:12]
    assert {"gentax", "commit", "torch", "transformers", "verl", "vllm", "snakemake", "machine"} <= set(labels)
    assert all(isinstance(v, str) for v in labels.values())  # Snakemake's report takes strings or numbers
