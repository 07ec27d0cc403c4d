"""Engine local: training mechanics, checkpoints, resume after a real kill, run extension.

Mechanics tests use a tiny random-init model with the embedded model's tokenizer (see
rl_helpers); one slow test trains the real embedded model for a step.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from gentax.errors import ConfigError
from gentax.train import runs
from gentax.train.jobs import train_rl
from rl_helpers import TINY_MAX_STEPS, TINY_RL, make_run, make_tiny_model, small_rl

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def train(run_dir, init, steps, section=None, domain="sokoban", variant="default", seed=0, max_steps=TINY_MAX_STEPS):
    start, end = steps
    run = make_run(domain, variant, seed, end, init=str(init), max_steps=max_steps)
    return train_rl("local", {**TINY_RL, **(section or {})}, init=str(init), run=run,
                    start=start, end=end, run_dir=str(run_dir), progress=False)


def weights(folder):
    from safetensors.torch import load_file

    return load_file(str(Path(folder) / "model.safetensors"))


@pytest.fixture(scope="module")
def straight_run(tiny, tmp_path_factory):
    """0:3 in one go: the reference for resume and extension."""
    run = tmp_path_factory.mktemp("straight") / "run"
    assert train(run, tiny, (0, 3)) == 0
    return run


def test_training_steps_are_logged_finite_and_move_the_weights(straight_run, tiny):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log = pd.read_csv(straight_run / runs.METRICS_FILE)
    assert log["step"].tolist() == [1, 2, 3]
    for column in ("loss", "pg_loss", "kl", "entropy", "adv_mean", "adv_std", "grad_norm", "id_success",
                   "invalid_rate", "return_mean", "seconds", "tokens_per_s"):
        assert log[column].map(math.isfinite).all(), column
    assert (log["samples"] >= 2).all() and (log["updates"] >= 1).all()
    assert log["kl"].iloc[0] == pytest.approx(0.0, abs=1e-9) and log["kl"].iloc[-1] > 0  # moves away from the init
    assert (log["entropy"] > 0).all() and {"invalid/no_action_tag", "invalid/not_admissible"} <= set(log.columns)
    assert runs.checkpoint_steps(straight_run) == [1, 2, 3]
    # only the newest runs.STATES_KEPT checkpoints keep the resume state
    assert [s for s in (1, 2, 3) if (runs.checkpoint_dir(straight_run, s) / runs.STATE_DIR).exists()] == [2, 3]
    model = AutoModelForCausalLM.from_pretrained(runs.checkpoint_dir(straight_run, 3))
    AutoTokenizer.from_pretrained(runs.checkpoint_dir(straight_run, 3))
    assert model.dtype == torch.float32  # small updates must survive saving
    before, after = weights(tiny), weights(runs.checkpoint_dir(straight_run, 3))
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_extension_continues_the_run_exactly_and_never_retrains(straight_run, tiny, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(run, tiny, (0, 2)) == 0
    assert train(run, tiny, (2, 3)) == 0
    assert "resuming" in capsys.readouterr().out
    assert pd.read_csv(run / runs.METRICS_FILE)["step"].tolist() == [1, 2, 3]
    ours, ref = weights(runs.checkpoint_dir(run, 3)), weights(runs.checkpoint_dir(straight_run, 3))
    assert all(torch.equal(ours[k], ref[k]) for k in ref)  # identical to the uninterrupted run
    straight = pd.read_csv(straight_run / runs.METRICS_FILE)
    extended = pd.read_csv(run / runs.METRICS_FILE)
    pd.testing.assert_series_equal(extended["loss"], straight["loss"])
    # the step digests say so too: the same tokens trained on, the same weights after each update
    for column in ("rollout_sha256", "weights_checksum"):
        pd.testing.assert_series_equal(extended[column], straight[column])
        assert straight[column].str.fullmatch("[0-9a-f]{16}").all() and straight[column].nunique() == 3
    # asking again trains nothing; a stretch that does not start at a saved step is refused
    assert train(run, tiny, (2, 3)) == 0 and "nothing to train" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="no checkpoint at step 5"):
        train(run, tiny, (5, 6))
    with pytest.raises(ConfigError, match="different run"):
        train(run, tiny, (3, 4), domain="webshop")


def test_a_run_trained_with_another_recipe_or_init_is_stale_and_trains_again(tiny, tmp_path, capsys):
    """What Snakemake reruns after a config or upstream change: the job must not keep the old steps."""
    import shutil

    init = tmp_path / "init"
    shutil.copytree(tiny, init)
    run, fresh = tmp_path / "run", tmp_path / "fresh"
    assert train(run, init, (0, 1)) == 0
    capsys.readouterr()
    assert train(run, init, (0, 1), {"max_update_samples": 3}) == 0
    out = capsys.readouterr().out
    assert "another recipe (config.max_update_samples changed)" in out and "nothing to train" not in out
    assert pd.read_csv(run / runs.METRICS_FILE)["update_samples"].tolist() == [3]
    assert train(fresh, init, (0, 1), {"max_update_samples": 3}) == 0
    ours, ref = weights(runs.checkpoint_dir(run, 1)), weights(runs.checkpoint_dir(fresh, 1))
    assert all(torch.equal(ours[k], ref[k]) for k in ref)  # as a run that never had the stale steps
    with pytest.raises(ConfigError, match="cannot continue it"):  # a later segment of a stale run
        train(run, init, (1, 2))
    os.utime(init / "model.safetensors", ns=(1, 1))  # the initial policy written again
    capsys.readouterr()
    assert train(run, init, (0, 1), {"max_update_samples": 3}) == 0
    assert "another recipe (init_fingerprint changed)" in capsys.readouterr().out


def test_update_on_a_subset_of_step_samples(tiny, tmp_path):
    run = tmp_path / "run"
    assert train(run, tiny, (0, 1), {"max_update_samples": 3}) == 0
    row = pd.read_csv(run / runs.METRICS_FILE).iloc[0]
    assert row["samples"] == 4 and row["update_samples"] == 3  # 2 trajectories x 2 steps played, 3 trained on


@pytest.mark.slow
def test_resume_after_a_real_kill(straight_run, tiny, tmp_path):
    """Kill the training process mid-run (SIGKILL); the rerun resumes from the newest checkpoint."""
    run = tmp_path / "run"
    config = tmp_path / "rl.yaml"
    config.write_text(yaml.safe_dump({"rl": TINY_RL}))
    run_spec = tmp_path / "run_spec.json"  # the straight run's (its 2-step episodes)
    run_spec.write_text(make_run("sokoban", "default", 0, 3, init=str(tiny)).to_json())
    cmd = [sys.executable, "-m", "gentax", "train", "rl", "--engine", "local", "--config", str(config),
           "--init", str(tiny), "--run-spec", str(run_spec), "--steps", "0:3", "--out", str(run), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        while not runs.checkpoint_dir(run, 1).is_dir():
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "no checkpoint within 10 minutes"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed_at = max(runs.checkpoint_steps(run))
    assert killed_at < 3
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"resuming {run} from step {killed_at}" in done.stdout
    assert pd.read_csv(run / runs.METRICS_FILE)["step"].tolist() == [1, 2, 3]  # each step once
    ours, ref = weights(runs.checkpoint_dir(run, 3)), weights(runs.checkpoint_dir(straight_run, 3))
    assert all(torch.equal(ours[k], ref[k]) for k in ref)
    assert not list(run.glob("**/.*.tmp"))  # no half-written checkpoint left behind


@pytest.mark.slow
@pytest.mark.parametrize("save", ["adapter", "merged"])
def test_lora_checkpoints_load_and_resume(tiny, tmp_path, save):
    from transformers import AutoModelForCausalLM

    run = tmp_path / "run"
    lora = {"lora_rank": 4, "lora_alpha": 8, "lora_save": save}
    assert train(run, tiny, (0, 1), lora) == 0
    ckpt = runs.checkpoint_dir(run, 1)
    if save == "adapter":
        import json

        assert json.loads((ckpt / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny)
        assert (ckpt / "adapter_model.safetensors").stat().st_size < 1_000_000  # small checkpoints
    else:
        assert (ckpt / "model.safetensors").is_file() and not (ckpt / "adapter_config.json").exists()
    model = AutoModelForCausalLM.from_pretrained(ckpt)  # HF-loadable either way (peft integration)
    base = AutoModelForCausalLM.from_pretrained(tiny)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert not torch.allclose(model(ids).logits, base(ids).logits)  # the adapter is applied
    assert train(run, tiny, (1, 2), lora) == 0
    assert pd.read_csv(run / runs.METRICS_FILE)["step"].tolist() == [1, 2]


def test_variants_change_what_the_agent_sees(tiny, tmp_path):
    """nothink drops the think instruction; aug inserts distractors (augmented steps logged)."""
    from gentax.rollout.collector import collect
    from gentax.rollout.generators import HFGenerator
    from gentax.train.local_engine import _collect_config

    cfg = small_rl(TINY_RL)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gen = HFGenerator.from_model(AutoModelForCausalLM.from_pretrained(tiny), AutoTokenizer.from_pretrained(tiny))
    seen = {}
    for variant in ("default", "aug", "nothink"):
        run = make_run("sokoban", variant, 0, 1, init=str(tiny), augmentation={"p": 1.0, "eps": {"sokoban": 80}})
        ccfg = _collect_config(cfg, run, domain="sokoban", split="train", seed=1, group_size=1, temperature=1.0)
        steps = collect(gen, [5], ccfg, progress=False).steps_frame()
        seen[variant] = steps
    assert not seen["default"]["augmented"].any() and seen["aug"]["augmented"].all()
    assert "<think>" in seen["default"]["prompt"][0] and "<think>" not in seen["nothink"]["prompt"][0]


@pytest.mark.slow
def test_embedded_model_trains_a_step(tmp_path):
    from gentax.rollout.embedded_model import embedded_model_path

    run = tmp_path / "run"
    section = {"max_new_tokens": 16, "mini_batch_size": 64, "lr": 1e-5}
    assert train(run, embedded_model_path(), (0, 1), section, max_steps=1) == 0  # one turn: 2 samples to update on
    row = pd.read_csv(run / runs.METRICS_FILE).iloc[0]
    assert all(math.isfinite(row[c]) for c in ("loss", "kl", "entropy", "adv_std"))
    assert row["entropy"] > 0.0


def test_entropy_coeff_and_penalty_placement_reach_the_local_update(tiny):
    """entropy_coeff enters the loss (and its gradient); invalid_penalty_placement the advantages."""
    import dataclasses

    import numpy as np

    from gentax.train.local_engine import Policy, Samples, samples_from_rollouts, update_policy

    base = small_rl({**TINY_RL, "kl_coef": 0.0, "weight_decay": 0.0, "mini_batch_size": 2})
    samples = Samples(prompts=[[1, 2, 3], [4, 5]], responses=[[6, 7], [8]], advantages=np.zeros(2))
    stats = {}
    for coeff in (0.0, 0.5):
        cfg = dataclasses.replace(base, entropy_coeff=coeff)
        policy = Policy(cfg, tiny, None)
        optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=cfg.lr, weight_decay=0.0)
        stats[coeff] = update_policy(policy, optimizer, samples, cfg, np.random.default_rng(0))
    # zero advantages and no KL: without the entropy term there is no loss and no gradient
    assert stats[0.0]["loss"] == 0.0 and stats[0.0]["grad_norm"] == 0.0
    assert stats[0.5]["entropy"] > 0 and stats[0.5]["grad_norm"] > 0
    assert stats[0.5]["loss"] == pytest.approx(-0.5 * stats[0.5]["entropy"], rel=1e-5)

    class FakeRollouts:  # one group of two 2-step trajectories; trajectory 1's second step invalid
        tokens = [type("T", (), {"prompt_ids": [1, 2], "response_ids": [3]})()] * 4

        def steps_frame(self):
            return pd.DataFrame({"traj_id": [0, 0, 1, 1], "valid": [True, True, True, False],
                                 "reward": [0.0, 10.0, 0.0, 0.0]})

        def episodes_frame(self):
            return pd.DataFrame({"traj_id": [0, 1], "group_id": [0, 0]})

    after = samples_from_rollouts(FakeRollouts(), base).advantages
    inside = samples_from_rollouts(FakeRollouts(), dataclasses.replace(base, invalid_penalty_placement="in_return")).advantages
    np.testing.assert_allclose(after[3] - after[2], -0.1)  # in advantage units
    # inside the score: divided by the group's std of first-sample scores (10 and 0)
    assert inside[3] - inside[2] == pytest.approx(-0.1 / np.std([10.0, 0.0], ddof=1), rel=1e-4)


def test_a_non_finite_gradient_is_dropped_and_counted(tiny, monkeypatch):
    """As verl's actor: an update whose gradient norm is not finite (a bf16 overflow on the GPU) leaves
    the weights and the optimizer state as they were, and the step's metrics count it."""
    import numpy as np

    from gentax.train import grpo
    from gentax.train.local_engine import Policy, Samples, update_policy

    cfg = small_rl({**TINY_RL, "kl_coef": 0.0, "mini_batch_size": 2})
    samples = Samples(prompts=[[1, 2, 3], [4, 5]], responses=[[6, 7], [8]], advantages=np.array([1.0, -1.0]))
    policy = Policy(cfg, tiny, None)
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=cfg.lr)
    before = [p.detach().clone() for p in policy.trainable_parameters()]
    real_loss = grpo.grpo_loss
    monkeypatch.setattr(grpo, "grpo_loss", lambda *a, **k: (lambda loss, sums: (loss * float("nan"), sums))(*real_loss(*a, **k)))
    stats = update_policy(policy, optimizer, samples, cfg, np.random.default_rng(0))
    assert stats["skipped_updates"] == 1 and stats["updates"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, policy.trainable_parameters()))
    assert not optimizer.state  # no step was taken
    monkeypatch.setattr(grpo, "grpo_loss", real_loss)
    stats = update_policy(policy, optimizer, samples, cfg, np.random.default_rng(0))
    assert stats["skipped_updates"] == 0 and stats["updates"] == 1
    assert not all(torch.equal(a, b) for a, b in zip(before, policy.trainable_parameters()))


def test_a_pruned_run_resumes_exactly_and_keeps_only_what_its_spec_names(straight_run, tiny, tmp_path, capsys):
    """disk.keep_checkpoints: evaluated (gentax.jobspec.CheckpointKeep): segment 0:2 of a run whose
    plan evaluates steps 1 and 3 keeps step 1's weights and step 2 whole (a later segment resumes
    from it); segment 2:3, the last, resumes exactly, then keeps steps 1 and 3 without any resume
    state; asking again trains nothing."""
    from gentax.train.config import load_rl_config
    from rl_helpers import run_job

    cfg = load_rl_config(TINY_RL)
    run, folder = make_run("sokoban", "default", 0, 3, init=str(tiny)), tmp_path / "run"

    def spec(start, end, resume_state):
        return {"engine": "local", "init": str(tiny), "out": str(folder), "start": start, "end": end,
                "rl": cfg.to_dict(), "run_spec": run.to_dict(), "tracking": {"backends": []},
                "manifest": str(folder / f"segment_{start}_{end}.json"), "tasks": None, "dtype": "auto",
                "keep": {"steps": [1, 3], "resume_state": resume_state}}

    def states():
        return [s for s in runs.checkpoint_steps(folder) if (runs.checkpoint_dir(folder, s) / runs.STATE_DIR).exists()]

    assert run_job("train rl", spec(0, 2, True)) == 0
    assert runs.checkpoint_steps(folder) == [1, 2] and states() == [2]
    assert json.loads((folder / "segment_0_2.json").read_text())["checkpoints"] == {"1": str(runs.checkpoint_dir(folder, 1))}
    assert run_job("train rl", spec(2, 3, False)) == 0
    assert "resuming" in capsys.readouterr().out
    assert runs.checkpoint_steps(folder) == [1, 3] and states() == []
    ours, ref = weights(runs.checkpoint_dir(folder, 3)), weights(runs.checkpoint_dir(straight_run, 3))
    assert all(torch.equal(ours[k], ref[k]) for k in ref)  # the uninterrupted run's weights
    assert run_job("train rl", spec(2, 3, False)) == 0 and "nothing to train" in capsys.readouterr().out
    assert runs.checkpoint_steps(folder) == [1, 3]
