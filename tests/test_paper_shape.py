"""The plan-time memory check (gentax.study.preview.memory) against the paper model's shape as measured on one
H200 (benchmarks/gpu_runs/paper_shape_2026-12-03.md: Llama-3.1-8B's config.json at 4 and 8 layers
with the embedded tokenizer's 49,152-token vocabulary, random bf16 weights; verl with vLLM rollouts
on one rank without flash-attn, LlamaFactory's ZeRO-3 SFT step)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAPER = json.loads((REPO / "config" / "models" / "Llama-3.1-8B-Instruct.json").read_text())
#: the stand-in tokenizer's facts (the embedded SmolLM2's, its vocabulary padded to a multiple of 64)
TOKENIZER = {"vocab_size": 49152, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
GPU_TOTAL_GIB = 140.4013671875  # the measuring H200, as torch saw it
#: what one GPU forced on the paper preset's sections in the measured runs
RL_ONE_GPU = {"tasks_per_step": 2, "save_every": 2, "verl": {
    "n_gpus_per_node": 1, "rollout_tp": 1, "attn_implementation": "sdpa", "agent_workers": 2,
    "gpu_memory_utilization": 0.2849}}
SFT_ONE_GPU = {"steps": 2}
#: (run, layers, section) -> {the check's job: the measured GiB it is held against}: torch's peak
#: allocated in the process that runs the phase, but the rollout against nvidia-smi's whole-GPU peak
#: (vLLM's pool is a process of its own, which the actor worker's counter does not see)
MEASURED = {
    ("rl_L4", 4, "rl"): {"rl rollout": 56.802, "rl log-probs": 81.823, "rl actor update": 52.184,
                         "rl checkpoint save": 19.063},
    ("rl_L8", 8, "rl"): {"rl rollout": 66.697, "rl log-probs": 89.528, "rl actor update": 67.36,
                         "rl checkpoint save": 32.064},
    ("sft_L8", 8, "sft"): {"sft_v2": 40.632},
}


def measured_config(layers: int, section: str, tmp: Path, gpu_gib: float = GPU_TOTAL_GIB) -> dict:
    """config/config.yaml with a measured run's section laid over it and ``cluster`` set to the
    measuring GPU and the stand-in's shape (the paper's config.json at ``layers`` layers and the
    stand-in tokenizer's vocabulary)."""
    from gentax.io import deep_merge, read_yaml
    from gentax.study.config import with_step_limits

    shape = tmp / f"shape_L{layers}.json"
    shape.write_text(json.dumps({**PAPER, **TOKENIZER, "num_hidden_layers": layers}))
    layer = {"cluster": {"gpus_per_node": 1, "gpu_memory_gib": round(gpu_gib, 2), "model_config": str(shape)}}
    if section == "rl":
        layer["rl"] = RL_ONE_GPU
    else:
        layer["inits"] = {"v2": {"sft": SFT_ONE_GPU}}
    return with_step_limits(deep_merge(read_yaml(REPO / "config" / "config.yaml"), layer))


def test_the_memory_check_meets_the_measured_peaks_within_15_percent(tmp_path):
    """gentax.study.preview.memory at each measured run's shape and settings against what the run measured:
    the update, the log-prob pass, the checkpoint save and the SFT step against torch's peak, the
    rollout against nvidia-smi's."""
    from gentax.study.preview import memory

    checked = []
    for (run, layers, section), measured in MEASURED.items():
        memory.architecture.cache_clear()
        predicted = {job.job: job for job in memory.job_estimates(measured_config(layers, section, tmp_path))}
        for job, gib in measured.items():
            assert 0.85 <= predicted[job].total_gib / gib <= 1.15, (run, job, predicted[job].total_gib, gib)
            checked.append((run, job))
    memory.architecture.cache_clear()
    assert len(checked) == 9


def test_the_check_refuses_the_measured_run_on_the_papers_80_gib_gpu(tmp_path):
    """The 8-layer run as measured (its log-prob pass peaked at 89.5 GiB of torch allocations) does not
    fit an A100-80G: the plan-time check must say so, naming the phase."""
    from gentax.errors import ConfigError
    from gentax.study.preview import memory

    memory.architecture.cache_clear()
    with pytest.raises(ConfigError, match=r"rl log-probs: model states 24\.0 \+ activations 67\.\d = 91\.\d GiB "
                                          r"per GPU vs budget 72\.0 GiB \(DOES NOT FIT"):
        memory.check_memory(measured_config(8, "rl", tmp_path, gpu_gib=80))
    memory.architecture.cache_clear()
