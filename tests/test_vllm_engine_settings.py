"""The vllm generator's machine settings (``generators.VLLM_ENGINE_ENV``): unset, vLLM's defaults (a
job with a GPU to itself); set, a small share of a GPU that several jobs share, a fixed KV cache and eager mode; a
keyword still wins; a value that does not parse names its variable. Through the stand-in vLLM module
of tests/test_generators.py (no GPU here)."""

import sys

import pytest

from gentax.errors import GentaxError
from gentax.rollout.generators import make_generator, vllm_engine_settings
from test_generators import fake_vllm_module


@pytest.fixture
def engine(monkeypatch, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    calls: dict = {}
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm_module(calls))
    for variable in ("GENTAX_VLLM_GPU_MEMORY_UTILIZATION", "GENTAX_VLLM_ENFORCE_EAGER", "GENTAX_VLLM_KV_CACHE_GIB"):
        monkeypatch.delenv(variable, raising=False)

    def build(**kw):
        generator = make_generator("vllm", str(tmp_path), **kw)
        return generator, calls["engine"]

    return build


def test_unset_the_engine_takes_vllms_defaults(engine):
    generator, kw = engine()
    assert kw["gpu_memory_utilization"] == 0.85 and "enforce_eager" not in kw and "kv_cache_memory_bytes" not in kw
    assert generator.engine_start_s >= 0


def test_a_shared_gpu_sets_the_share_and_eager_mode(engine, monkeypatch):
    monkeypatch.setenv("GENTAX_VLLM_GPU_MEMORY_UTILIZATION", "0.05")
    monkeypatch.setenv("GENTAX_VLLM_ENFORCE_EAGER", "1")
    monkeypatch.setenv("GENTAX_VLLM_KV_CACHE_GIB", "1.5")
    _, kw = engine()
    assert kw["gpu_memory_utilization"] == 0.05 and kw["enforce_eager"] is True
    assert kw["kv_cache_memory_bytes"] == 3 * 2**29  # a fixed KV cache: no profiling of a GPU others use


def test_a_keyword_wins_over_the_machine(engine, monkeypatch):
    monkeypatch.setenv("GENTAX_VLLM_GPU_MEMORY_UTILIZATION", "0.05")
    monkeypatch.setenv("GENTAX_VLLM_ENFORCE_EAGER", "true")
    _, kw = engine(gpu_memory_utilization=0.5, enforce_eager=False)
    assert kw["gpu_memory_utilization"] == 0.5 and kw["enforce_eager"] is False


def test_a_value_that_does_not_parse_names_its_variable():
    with pytest.raises(GentaxError, match="GENTAX_VLLM_GPU_MEMORY_UTILIZATION='a lot'"):
        vllm_engine_settings({"GENTAX_VLLM_GPU_MEMORY_UTILIZATION": "a lot"})
    assert vllm_engine_settings({"GENTAX_VLLM_ENFORCE_EAGER": "0"}) == {"enforce_eager": False}
    with pytest.raises(GentaxError, match="GENTAX_VLLM_KV_CACHE_GIB='2G'"):
        vllm_engine_settings({"GENTAX_VLLM_KV_CACHE_GIB": "2G"})
    assert vllm_engine_settings({}) == {}
