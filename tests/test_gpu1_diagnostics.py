"""The GPU diagnostics of the local engine's update run their whole path on a CPU:
benchmarks/gpu1/update_twice.py (which kernel makes the update differ between two processes on a
shared GPU: the engine's own ``Policy.logprobs`` and GRPO loss in two processes, each variant's
forward and gradients compared within and across processes; on a CPU the update is deterministic,
so every comparison is equal) and benchmarks/gpu1/update_speed.py (tokens/s per micro-batch size)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(script: str, tmp_path: Path, *args: str) -> dict:
    """Run benchmarks/gpu1/SCRIPT on the CPU (tiny model) in ``tmp_path``; its JSON record."""
    out = tmp_path / f"{script}.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu1" / f"{script}.py"), str(out), "--device", "cpu",
                    "--tiny", *args], check=True, cwd=tmp_path)
    return json.loads(out.read_text())


@pytest.mark.slow
def test_update_twice_compares_each_variant_within_and_across_processes(tmp_path):
    record = _run("update_twice", tmp_path, "--load", "0", "--repeats", "2", "--variants", "engine,eager")
    assert record["device"] == "CPU" and record["processes"] == 2
    assert [v["variant"] for v in record["variants"]] == ["engine", "eager"]
    for variant in record["variants"]:
        assert variant["error"] is None
        assert all(variant[f"{key}_equal_{where}"] for key in ("forward", "grads") for where in ("within_process", "across_processes"))
        assert len(variant["runs"]) == 2 and all(len(run["grads"]) == 2 for run in variant["runs"])
    # the two attention implementations agree to rounding, not bit for bit: the checksums see bits
    engine, eager = (v["losses"] for v in record["variants"])
    assert float(engine[0]) == pytest.approx(float(eager[0]), abs=1e-4)
    assert not list(tmp_path.glob("update_twice.json.p*"))  # the workers' files are gone


@pytest.mark.slow
def test_update_speed_times_each_micro_batch_size(tmp_path):
    record = _run("update_speed", tmp_path, "--sizes", "4,16", "--rows", "16", "--repeats", "1")
    assert record["device"] == "CPU" and [r["micro_batch_size"] for r in record["sizes"]] == [4, 16]
    assert all(r["error"] is None and r["seconds"] > 0 and r["tokens_per_s"] > 0 for r in record["sizes"])
