"""The plan-time GPU memory check: DeepSpeed's own estimators on the 8B architecture, plus activations."""

import copy
import json
from pathlib import Path

import pytest

from gentax.study import config as gconfig
from gentax.errors import ConfigError
from gentax.study.preview import memory

pytest.importorskip("deepspeed")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def paper():
    return gconfig.load_config([REPO / "config" / "config.yaml"])


def test_the_architecture_is_llama_3_1_8b_counted_without_weights(paper, tmp_path, monkeypatch):
    monkeypatch.setenv("GENTAX_CACHE", str(tmp_path))
    memory.architecture.cache_clear()
    arch = memory.architecture(paper["cluster"]["model_config"])
    (cached,) = (tmp_path / "architectures").glob("*.json")  # counted once, then read from here
    assert memory.counted(json.loads((REPO / paper["cluster"]["model_config"]).read_text())) == arch
    cached.write_text(json.dumps({**json.loads(cached.read_text()), "layers": 99}))
    memory.architecture.cache_clear()
    assert memory.architecture(paper["cluster"]["model_config"]).layers == 99  # read, not counted again
    cached.write_text("{")
    memory.architecture.cache_clear()
    assert memory.architecture(paper["cluster"]["model_config"]) == arch  # an unreadable one: counted again
    monkeypatch.setenv("GENTAX_CACHE", str(cached))  # a file, no folder: nothing can be written under it
    memory.architecture.cache_clear()
    assert memory.architecture(paper["cluster"]["model_config"]) == arch
    memory.architecture.cache_clear()
    assert arch.total_params == 8_030_261_248  # Llama-3.1-8B's published 8.03B
    assert arch.largest_layer_params == 128_256 * 4_096  # the embedding (and the untied LM head)
    assert (arch.layers, arch.hidden, arch.kv, arch.intermediate) == (32, 4096, 1024, 14336)


def test_paper_preset_fits_with_its_stated_margin(paper):
    jobs = {job.job: job for job in memory.check_memory(paper)}
    assert set(jobs) == {"sft_v2", "rl actor update", "rl log-probs", "rl rollout", "rl checkpoint save"}
    assert all(job.fits and job.budget_gib == pytest.approx(72.0) for job in jobs.values())  # 80 GiB x (1 - 0.10)
    sft = jobs["sft_v2"]
    # DeepSpeed's ZeRO-3 estimate on 8 GPUs at the measured 16 bytes per parameter (its 18) shared by 8, + 4 bytes
    # x the largest layer
    assert sft.model_states_gib * memory.GIB == pytest.approx(16 * 8_030_261_248 / 8 + 4 * 128_256 * 4_096, rel=1e-9)
    assert "ZeRO-3 over 8 GPUs" in sft.how and "2 x 6656 tokens" in sft.how  # micro-batch 2, prompt 6144 + 512
    assert 30 < sft.total_gib < 40  # ~35 GiB: ~37 GiB of headroom
    assert jobs["rl rollout"].vllm_gib == pytest.approx(40.0)  # gpu_memory_utilization 0.5 x 80
    # the save: the measured 16 bytes per parameter of verl's FSDP actor, shared by 8; the rollout 12
    assert jobs["rl checkpoint save"].total_gib * memory.GIB == pytest.approx(16 * 8_030_261_248 / 8, rel=1e-9)
    assert jobs["rl rollout"].model_states_gib * memory.GIB == pytest.approx(12 * 8_030_261_248 / 8, rel=1e-9)


def test_sft_without_zero3_fails_at_plan_time_naming_the_job_and_numbers(paper):
    cfg = copy.deepcopy(paper)
    cfg["inits"]["v2"]["sft"]["deepspeed"] = None
    with pytest.raises(ConfigError, match=r"sft_v2: model states 149\.6 \+ activations 18\.4 = 168\.0 GiB per GPU "
                                          r"vs budget 72\.0 GiB \(DOES NOT FIT.*no ZeRO.*ZeRO-3 DeepSpeed config"):
        memory.check(cfg)
    cfg["cluster"]["memory_check"] = False  # the switch the embedded preset uses
    assert memory.check(cfg) == []


def test_zero_stage_and_offload_come_from_the_deepspeed_json(paper, tmp_path):
    arch = memory.architecture(paper["cluster"]["model_config"])
    stage2 = tmp_path / "z2.json"
    stage2.write_text(json.dumps({"zero_optimization": {"stage": 2}}))
    assert memory.deepspeed_settings(str(stage2))["zero_stage"] == 2
    offload = tmp_path / "z3off.json"
    offload.write_text(json.dumps({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
                                                         "offload_param": {"device": "cpu"}}}))
    settings = memory.deepspeed_settings(str(offload))
    assert settings == {"zero_stage": 3, "offload_optimizer": True, "offload_params": True}
    offloaded = memory.model_states_bytes(arch, gpus_per_node=8, **settings)
    assert offloaded == 4 * arch.largest_layer_params  # only the gathered layer stays on the GPU
    with pytest.raises(ConfigError, match="stages 0, 2 and 3"):
        memory.model_states_bytes(arch, zero_stage=1, gpus_per_node=8)


def test_rl_actor_without_gradient_checkpointing_fails(paper):
    cfg = copy.deepcopy(paper)
    cfg["rl"]["verl"] = {"gradient_checkpointing": False}
    with pytest.raises(ConfigError, match=r"rl actor update: model states 18\.8 \+ activations \d+\.\d = .*"
                                          r"DOES NOT FIT.*gradient_checkpointing"):
        memory.check_memory(cfg)
