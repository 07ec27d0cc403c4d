"""The paper-shape stand-in (benchmarks/paper_shape/model.py) and the measurement's inputs
(benchmarks/paper_shape/measure.py): the shape comes from the paper's config.json, ``--layers``
changes only the depth, the vocabulary is the tokenizer's; the synthetic SFT examples have the
preset's length under the stand-in tokenizer. The GPU measurement itself runs only on the GPU
machine (benchmarks/paper_shape/device.sh)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import by_path

from rl_helpers import PAPER_RL, make_run

REPO = Path(__file__).resolve().parents[1]
PAPER = json.loads((REPO / "config" / "models" / "Llama-3.1-8B-Instruct.json").read_text())
TOKENIZER = {"vocab_size": 49152, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}


def _load(name: str):
    path = REPO / "benchmarks" / "paper_shape" / f"{name}.py"
    sys.path.insert(0, str(path.parent))
    return by_path.load(str(path.relative_to(REPO)), f"paper_shape_{name}")


model = _load("model")


def test_full_depth_keeps_every_architecture_value_but_the_vocabulary():
    config = model.shape_config(PAPER, TOKENIZER)
    changed = {k for k in PAPER if config[k] != PAPER[k]}
    assert changed == {"vocab_size", "bos_token_id", "eos_token_id"}
    assert config["num_hidden_layers"] == 32 and config["vocab_size"] == 49152
    assert "128256" in config["gentax_shape"]["vocab"]


@pytest.mark.parametrize("layers", [1, 8, 16, 32])
def test_layers_changes_the_depth_only(layers):
    full, cut = model.shape_config(PAPER, TOKENIZER), model.shape_config(PAPER, TOKENIZER, layers=layers)
    assert cut["num_hidden_layers"] == layers
    assert {k: v for k, v in cut.items() if k not in ("num_hidden_layers", "gentax_shape")} == \
           {k: v for k, v in full.items() if k not in ("num_hidden_layers", "gentax_shape")}
    assert cut["gentax_shape"]["layers"] == f"{layers} of 32"


@pytest.mark.parametrize("layers", [0, 33, -1])
def test_a_depth_outside_the_paper_models_is_refused(layers):
    with pytest.raises(ValueError, match=f"--layers {layers}: must be between 1 and the paper model's 32"):
        model.shape_config(PAPER, TOKENIZER, layers=layers)


@pytest.fixture(scope="module")
def tokenizer_dir():
    from gentax.rollout.embedded_model import embedded_model_path

    return embedded_model_path()


def test_built_folder_has_the_shape_and_loads(tmp_path, tokenizer_dir):
    """A reduced copy of the paper's config (small widths) so the CPU builds it in seconds: the
    builder takes widths, heads and RoPE from the file it is given and the depth from --layers."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    small = {**PAPER, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16}
    config_path = tmp_path / "paper.json"
    config_path.write_text(json.dumps(small))
    out = tmp_path / "stand_in"
    saved = model.build(out, tokenizer_dir=tokenizer_dir, layers=3, config_path=config_path)
    assert saved["num_hidden_layers"] == 3 and saved["intermediate_size"] == 128
    loaded = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert loaded.config.vocab_size >= len(tok) and loaded.config.vocab_size % 64 == 0
    assert loaded.config.num_key_value_heads == 2 and loaded.config.rope_parameters["rope_type"] == "llama3"
    assert len(loaded.model.layers) == 3
    assert not loaded.config.tie_word_embeddings
    weights = dict(loaded.named_parameters())
    assert weights["model.layers.2.mlp.up_proj.weight"].dtype == torch.bfloat16
    assert 0.015 < float(weights["model.layers.2.mlp.up_proj.weight"].detach().float().std()) < 0.025  # initialised
    assert tok.chat_template
    assert not out.with_name(out.name + ".tmp").exists()


def test_the_synthetic_sft_examples_have_the_presets_length(tmp_path, tokenizer_dir):
    from transformers import AutoTokenizer

    from gentax.train.sft import example_token_lengths
    from gentax.train.sft_data import read_examples

    measure = _load("measure")
    examples = measure.sft_examples(tokenizer_dir, 6144, 512, 3)
    measure.write_sft_data(tmp_path / "data", examples)
    lengths = example_token_lengths(read_examples(tmp_path / "data"), AutoTokenizer.from_pretrained(tokenizer_dir))
    assert lengths == [6144 + 512] * 3


def test_the_rl_settings_change_only_what_one_gpu_forces():
    """measure.py's RL section over the paper preset: a reduced batch and the one-GPU engine settings;
    vLLM gets the preset's 40 GiB (0.5 of 80) of whatever GPU it runs on."""
    from gentax.train.config import load_rl_config

    measure = _load("measure")
    section = measure.rl_config(140.0)["rl"]
    assert section["verl"]["gpu_memory_utilization"] == pytest.approx(40 / 140, abs=1e-4)
    paper, measured = load_rl_config(PAPER_RL), load_rl_config({**PAPER_RL, **section})
    assert (measured.group_size, measured.lr, measured.max_new_tokens, measured.max_prompt_tokens) == \
           (paper.group_size, paper.lr, paper.max_new_tokens, paper.max_prompt_tokens)
    for key in ("micro_batch_per_gpu", "gradient_checkpointing", "param_offload", "optimizer_offload", "rollout"):
        assert measured.verl[key] == paper.verl[key]
    assert measured.tasks_per_step == 2 and measured.verl["n_gpus_per_node"] == 1


def test_the_phase_trace_records_each_phase_and_resets_the_peak_inside_step(tmp_path):
    """gentax.train.verl_agent.traced_timer (measure.py's source of per-phase torch peaks) with a
    stand-in worker group: one JSON line per phase, the worker's peak read (and reset) around each
    inner phase but not around "step", and a worker that cannot answer is recorded, not raised."""
    pytest.importorskip("verl")
    import contextlib
    from types import SimpleNamespace

    from gentax.train import verl_agent

    calls = []

    class WorkerGroup:
        def execute_func_rank_zero(self, func, reset):
            calls.append(reset)
            if len(calls) > 3:
                raise RuntimeError("worker gone")
            return [{"torch_max_allocated_gib": 1.5 * len(calls)}]

    @contextlib.contextmanager
    def verl_timer(name, timing_raw, **kwargs):
        yield
        timing_raw[name] = 1.0

    trainer = SimpleNamespace(actor_rollout_wg=WorkerGroup(), global_steps=3)
    path = tmp_path / "trace.jsonl"
    timed = verl_agent.traced_timer(verl_timer, trainer, str(path))
    timing = {}
    with timed("step", timing):
        with timed("gen", timing, color="red"):
            pass
        with timed("update_actor", timing):
            pass
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["phase"] for r in rows] == ["gen", "update_actor", "step"]
    assert calls == [True, True, True, True]  # before and after each inner phase; the last one raised
    assert rows[0]["torch_max_allocated_gib"] == 3.0 and rows[0]["step"] == 3
    assert rows[1]["error"] == "RuntimeError: worker gone"
    assert "torch_max_allocated_gib" not in rows[2] and rows[2]["end"] >= rows[1]["end"]
    assert set(timing) == {"step", "gen", "update_actor"}  # verl's own timing still kept


def test_the_phase_trace_variable_reaches_verls_processes_only_when_set(monkeypatch, tmp_path):
    pytest.importorskip("verl")
    from gentax.train import verl_engine
    from gentax.train.config import load_rl_config

    cfg = load_rl_config(PAPER_RL)
    run = make_run("sokoban", "default", 0, 1)

    def overrides():
        return verl_engine.verl_overrides(cfg, model_path="/m", run=run, run_dir=tmp_path, end_step=1,
                                          train_file="t.parquet", val_file="v.parquet")

    key = f"+ray_kwargs.ray_init.runtime_env.env_vars.{verl_engine.PHASE_TRACE_ENV}="
    monkeypatch.delenv(verl_engine.PHASE_TRACE_ENV, raising=False)
    assert not [o for o in overrides() if o.startswith(key)]
    monkeypatch.setenv(verl_engine.PHASE_TRACE_ENV, "/tmp/trace.jsonl")
    assert [o for o in overrides() if o.startswith(key)] == [key + "/tmp/trace.jsonl"]


RECORD = REPO / "benchmarks" / "paper_shape" / "records" / "2026-12-03"


def test_the_memory_check_meets_the_measured_peaks_within_15_percent():
    """gentax.study.memory at each measured run's shape and settings against the committed record
    (one H200, 4 and 8 layers, verl without flash-attn; the SFT step at 8 layers): the update, the
    log-prob pass, the checkpoint save and the SFT step against torch's peak, the rollout against
    nvidia-smi's (vLLM is a process of its own)."""
    compare = _load("compare")
    machine, records = compare.read_run(RECORD)
    checked = []
    for record in records:
        predicted = compare.predictions(record, machine, 49152)
        for row in compare.measured_rows(record):
            if row["phase"] in compare.PREDICTED_BY:
                job, part, against = compare.PREDICTED_BY[row["phase"]]
                ratio = getattr(predicted[job], part) / row[against]
                assert 0.85 <= ratio <= 1.15, (record["phase"], row["phase"], ratio)
                checked.append((record["phase"], row["phase"]))
    assert sorted(checked) == sorted([(f"rl_L{n}", phase) for n in (4, 8) for phase in
                                      ("gen", "old_log_prob", "update_actor", "save_checkpoint")] + [("sft_L8", "sft")])


def test_the_check_refuses_the_measured_run_on_the_papers_80_gib_gpu():
    """The 8-layer run as measured (its log-prob pass peaked at 89.5 GiB of torch allocations) does not
    fit an A100-80G: the plan-time check must say so, naming the phase."""
    from gentax.errors import ConfigError
    from gentax.study.preview import memory

    compare = _load("compare")
    machine, records = compare.read_run(RECORD)
    record = next(r for r in records if r["phase"] == "rl_L8")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cfg = compare.workflow_config(record, {**machine, "gpu_total_gib": 80},
                                      compare.measured_config(8, 49152, Path(tmp)))
        memory.architecture.cache_clear()
        with pytest.raises(ConfigError, match=r"rl log-probs: model states 24\.0 \+ activations 67\.\d = 91\.\d GiB "
                                              r"per GPU vs budget 72\.0 GiB \(DOES NOT FIT"):
            memory.check_memory(cfg)
    memory.architecture.cache_clear()
