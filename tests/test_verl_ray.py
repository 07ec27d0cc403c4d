"""verl's Ray-side machinery on CPU, with verl's real classes and a local Ray instance.

- the two crashes the first GPU run of the verl engine hit, caught without a GPU: the metadata
  ``_compute_advantage`` returns (verl's real TransferQueue, in-process) and the sample tags verl's
  own ``_compute_metrics`` reads, fed by the agent loop's outputs through verl's own
  ``AgentLoopWorkerTQ._agent_loop_postprocess``;
- gentax's rollout backend ``hf`` (gentax/train/verl_hf_rollout.py): registration in a fresh process
  through verl's plugin variable; verl's ``LLMServerManager`` launching it; concurrent ``generate``
  calls through verl's client whose log-probs equal teacher forcing of the same model; a weight
  sync through the worker-side adapter, after which greedy output equals a reference model holding
  the synced weights; micro-batching of concurrent requests.
What still needs a GPU (FSDP, the trainer's fit loop, CUDA) ran in the GPU smoke on 1 and 2 H200s
(benchmarks/gpu_runs/verl_smoke_2026-11-30.md).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

pytest.importorskip("verl")
ray = pytest.importorskip("ray")
from omegaconf import OmegaConf  # noqa: E402

from gentax.train import grpo, verl_engine  # noqa: E402
from rl_helpers import SMALL_MAX_STEPS, make_run, make_tiny_model, small_rl  # noqa: E402

pytestmark = pytest.mark.slow  # a local Ray instance and verl's imports: ~40 s in all on 2 cores

REPO = str(Path(__file__).resolve().parents[1])
PLUGIN_VAR, PLUGIN_MODULE = verl_engine.PLUGIN_ENV


@pytest.fixture(scope="module")
def local_ray():
    """A private local Ray instance whose workers import this checkout and gentax's verl plugin."""
    if ray.is_initialized():
        ray.shutdown()
    python_path = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, namespace="gentax-tests",
             runtime_env={"env_vars": {"PYTHONPATH": python_path, PLUGIN_VAR: PLUGIN_MODULE,
                                       "TOKENIZERS_PARALLELISM": "false"}})
    import transfer_queue as tq

    tq.init()
    yield
    tq.close()
    ray.shutdown()


# ---- crash 1: the metadata _compute_advantage returns --------------------------------------------
def put_rows(tq, partition: str, layout: dict) -> "KVBatchMeta":  # noqa: F821
    """Rows as verl's agent loop stores them (response_mask + extra_fields), plus one padding row."""
    from tensordict import TensorDict
    from transfer_queue import KVBatchMeta
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    keys, rows, tags = [], [], []
    for (uid, session), (outcome, valid) in layout.items():
        for i, ok in enumerate(valid):
            keys.append(f"{uid}_{session}_{i}")
            rows.append({"response_mask": torch.ones(3 + i, dtype=torch.int64),
                         "extra_fields": {"gentax": {"outcome": outcome, "valid": ok}}})
            tags.append({})
    keys.append("pad9_0_0")
    rows.append({"response_mask": torch.zeros(1, dtype=torch.int64), "extra_fields": {}})
    tags.append({"is_padding": True})
    fields: TensorDict = list_of_dict_to_tensordict(rows)
    meta = tq.kv_batch_put(keys=keys, partition_id=partition, fields=fields, tags=tags)
    return KVBatchMeta(keys=meta.keys, tags=tags, partition_id=partition, fields=meta.fields)


def test_compute_advantage_returns_metadata_listing_advantages(local_ray):
    """The actor update reads the fields its metadata lists; before the fix the trainer returned the
    incoming metadata (no "advantages") and verl's ppo_loss raised KeyError on the GPU."""
    import transfer_queue as tq

    from gentax.train.verl_agent import GentaxPPOTrainer

    layout = {("g1", 0): (10.0, [True, False]), ("g1", 1): (0.0, [True, True, True]), ("g2", 0): (0.0, [False])}
    batch = put_rows(tq, "adv", layout)
    assert "advantages" not in batch.fields
    trainer = object.__new__(GentaxPPOTrainer)
    trainer.config = OmegaConf.create({"gentax": {"advantage_normalisation": "trajectory", "invalid_penalty": 0.1,
                                                  "invalid_penalty_placement": "after_normalisation"}})
    metrics = {}
    out = trainer._compute_advantage(batch, metrics)
    assert {"advantages", "returns", "response_mask"} <= set(out.fields)
    data = tq.kv_batch_get_by_meta(out)  # what the next stage gets: every field the metadata lists
    win, lose = grpo.group_advantages([10.0, 0.0], ["g1", "g1"])
    expected = [win, win - 0.1, lose, lose, lose, -0.1, 0.0]  # g2: one trajectory -> 0 - penalty
    for row, value in enumerate(expected):
        adv, mask = data["advantages"][row], data["response_mask"][row]
        assert adv.shape == mask.shape and torch.allclose(adv, torch.full_like(adv, value))
        assert torch.equal(data["returns"][row], adv)
    assert metrics["gentax/adv_abs_max"] == pytest.approx(max(abs(v) for v in expected))


# ---- crash 2: the agent loop's outputs through verl's own postprocess and _compute_metrics -------
class ClientLikeServer:
    """``server_manager.generate`` as verl's ``LLMServerClient`` answers it: the server's TokenOutput
    with ``min/max_global_steps`` set from its ``global_steps`` (llm_server.py)."""

    def __init__(self, tokenizer, texts, global_steps: int):
        self.tokenizer, self.texts, self.calls, self.global_steps = tokenizer, list(texts), 0, global_steps

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        text = self.texts[self.calls % len(self.texts)]
        self.calls += 1
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        steps = self.global_steps
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed",
                           extra_fields={"global_steps": steps, "min_global_steps": steps, "max_global_steps": steps})


def test_agent_loop_outputs_pass_verls_postprocess_and_compute_metrics(local_ray, tmp_path, monkeypatch, capsys):
    """Before the fix each step's extra_fields lost min/max_global_steps, and verl's _compute_metrics
    raised TypeError (int(None)) at the first step on the GPU."""
    import transfer_queue as tq
    from transfer_queue import KVBatchMeta
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.trainer.ppo.metric_utils import RolloutMoELoadBalanceMetricsAccumulator
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from gentax.rollout.embedded_model import embedded_model_path
    from gentax.train.verl_agent import EnvStepAgentLoop, GentaxPPOTrainer

    cfg = small_rl({"max_new_tokens": 32})
    run = make_run("sokoban", "default", 1, 3, max_steps=2)
    config = verl_engine.build_config(cfg, model_path=str(embedded_model_path()), run=run, run_dir=tmp_path, end_step=3)
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    worker_cls = getattr(AgentLoopWorkerTQ, "__ray_actor_class__", AgentLoopWorkerTQ)  # a ray.remote class
    worker = object.__new__(worker_cls)  # only what _agent_loop_postprocess reads
    worker.reward_loop_worker_handles, worker.processor, worker.distillation_enabled = None, None, False

    async def episodes():
        for session, texts in enumerate((["<think>a</think><action>up</action>"], ["no tags"])):
            loop = EnvStepAgentLoop(trainer_config=DictConfigWrap(config), server_manager=ClientLikeServer(
                tokenizer, texts, global_steps=2), tokenizer=tokenizer, processor=None, dataset_cls=RLHFDataset,
                data_config=DictConfigWrap(config.data), hf_model_type="llama")
            kwargs = {"extra_info": {"slot": 0, "split": "train", "index": 0}, "global_steps": 3,
                      "session_id": session, "uid": "u7", "raw_prompt": [{"role": "user", "content": "x"}]}
            outputs = await loop.run({"temperature": 1.0, "top_p": 1.0, "logprobs": True}, **kwargs)
            assert all(o.extra_fields["min_global_steps"] == 2 for o in outputs)
            await worker._agent_loop_postprocess(outputs, False, **kwargs)

    asyncio.run(episodes())
    stored = tq.kv_list("train")["train"]
    keys = sorted(stored)
    assert keys and all(k.startswith("u7_") for k in keys)
    batch = KVBatchMeta(keys=keys, tags=[stored[k] for k in keys], partition_id="train")
    assert all(tag["min_global_steps"] == 2 and tag["max_global_steps"] == 2 for tag in batch.tags)

    trainer = object.__new__(GentaxPPOTrainer)
    trainer.config = config
    trainer.use_critic = False
    trainer.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: 1)
    trainer._rollout_moe_lb_metrics_accumulator = RolloutMoELoadBalanceMetricsAccumulator(
        model_config=config.actor_rollout_ref.model)
    metrics = {"actor/pg_loss": 0.25}
    batch = trainer._compute_advantage(batch, metrics)
    # fit: step() (rollout, advantages, update) -> save checkpoint -> _compute_metrics. The row must be
    # in metrics.csv before the save, so a kill between save and _compute_metrics loses nothing.
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    monkeypatch.setattr(PPOTrainerSync, "step", lambda self, metrics, timing_raw: batch)
    trainer.global_steps = 3
    capsys.readouterr()
    assert trainer.step(metrics, {}) is batch
    assert trainer.step(metrics, {}) is batch
    # the job log's mark of where this attempt's start-up ended: at its first step only
    assert capsys.readouterr().out.count("step 3 begins (start-up done)") == 1
    import pandas as pd

    early = pd.read_csv(tmp_path / "metrics.csv")
    assert early["step"].tolist() == [3] and early["pg_loss"].tolist() == [0.25] and "seconds" not in early
    timing = {"step": 1.0, "gen": 0.5, "update_actor": 0.3}
    trainer._compute_metrics(batch, metrics, timing, global_steps=3, epoch=0)
    assert metrics["training/off_policy/trajectory_staleness/mean"] == 0  # (3 - 1) - 2
    assert metrics["gentax/id_success"] == 0.0 and 0 < metrics["gentax/invalid_rate"] < 1
    final = pd.read_csv(tmp_path / "metrics.csv")
    assert final["step"].tolist() == [3] and final["seconds"].tolist() == [1.0]  # the same row, completed


# ---- the hf rollout backend ----------------------------------------------------------------------
def test_plugin_variable_registers_hf_in_a_fresh_process():
    code = ("import verl\n"
            "from verl.workers.rollout.replica import RolloutReplicaRegistry\n"
            "from verl.workers.rollout.base import get_rollout_class\n"
            "r = RolloutReplicaRegistry.get('hf'); a = get_rollout_class('hf', 'async')\n"
            "print(r.__module__ + '.' + r.__name__, a.__module__ + '.' + a.__name__)\n")
    env = {**os.environ, "PYTHONPATH": REPO, PLUGIN_VAR: PLUGIN_MODULE}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["gentax.train.verl_hf_rollout.HFReplica",
                                   "gentax.train.verl_hf_rollout.HFServerAdapter"]
    env.pop(PLUGIN_VAR)  # without the variable verl knows no 'hf'
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "Unknown rollout mode: hf" in done.stderr


@ray.remote
class StandInFSDPWorker:
    """Where verl's hybrid replica starts its server: an actor of the FSDP worker group."""

    def ready(self):
        return True


@pytest.fixture(scope="module")
def hf_servers(local_ray, tmp_path_factory):
    """verl's LLMServerManager with rollout.name=hf over a 1-worker group, a tiny model."""
    from verl.workers.rollout.llm_server import LLMServerManager

    import gentax.train.verl_plugin  # noqa: F401  registers 'hf' in this (driver) process

    root = tmp_path_factory.mktemp("hf_rollout")
    model = make_tiny_model(root / "tiny", seed=0)
    cfg = small_rl({"max_new_tokens": 8, "verl": {"rollout": "hf", "attn_implementation": "sdpa"}})
    run = make_run("sokoban", "default", 5, 1, max_steps=SMALL_MAX_STEPS, init=str(model))
    config = verl_engine.build_config(cfg, model_path=str(model), run=run, run_dir=root / "run", end_step=1)
    assert config.actor_rollout_ref.rollout.name == "hf" and not config.actor_rollout_ref.model.use_remove_padding
    worker = StandInFSDPWorker.remote()
    ray.get(worker.ready.remote())
    group = SimpleNamespace(workers=[worker], world_size=1)
    manager = LLMServerManager.create(config, worker_group=group)
    return SimpleNamespace(config=config, manager=manager, client=manager.get_client(), model=model, root=root)


def teacher_forced_logprobs(model, prompt_ids, response_ids) -> list[float]:
    ids = torch.tensor([list(prompt_ids) + list(response_ids)])
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    logp = torch.log_softmax(logits[len(prompt_ids) - 1: -1], dim=-1)
    return logp.gather(1, torch.tensor(response_ids)[:, None])[:, 0].tolist()


def test_llm_server_manager_serves_logprobs_equal_to_teacher_forcing(hf_servers):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.workers.rollout.replica import TokenOutput

    assert hf_servers.manager.get_addresses() == ["hf_server_0"]
    tokenizer = AutoTokenizer.from_pretrained(hf_servers.model)
    prompts = [tokenizer(text)["input_ids"] for text in ("push the box", "a longer prompt about a shop", "hi")]
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}

    async def many():
        return await asyncio.gather(*(hf_servers.client.generate(f"r{i}", prompt_ids=p, sampling_params=dict(params))
                                      for i, p in enumerate(prompts * 2)))

    outputs = asyncio.run(many())
    model = AutoModelForCausalLM.from_pretrained(hf_servers.model, dtype=torch.float32).eval()
    eos = set(model.generation_config.eos_token_id if isinstance(model.generation_config.eos_token_id, list)
              else [model.generation_config.eos_token_id])
    for prompt, out in zip(prompts * 2, outputs):
        assert isinstance(out, TokenOutput) and 1 <= len(out.token_ids) <= 8
        assert len(out.log_probs) == len(out.token_ids) and out.stop_reason == "completed"
        assert out.extra_fields["global_steps"] == 0 and out.extra_fields["min_global_steps"] == 0
        assert not eos & set(out.token_ids[:-1])  # generation stops at EOS, which is kept
        np.testing.assert_allclose(out.log_probs, teacher_forced_logprobs(model, prompt, out.token_ids), atol=2e-4)


def test_weight_sync_through_the_adapter_changes_greedy_output(hf_servers, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gentax.train.verl_hf_rollout import HFServerAdapter

    config = hf_servers.config
    new_model = AutoModelForCausalLM.from_pretrained(make_tiny_model(hf_servers.root / "tiny_1", seed=1),
                                                     dtype=torch.float32).eval()
    with torch.no_grad():  # a tiny tied-embedding model greedily repeats its input; flipped, it cannot
        new_model.model.norm.weight.mul_(-1)
    tokenizer = AutoTokenizer.from_pretrained(hf_servers.model)
    prompt = tokenizer("which way to the target?")["input_ids"]
    greedy = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "logprobs": False}

    def served():
        return asyncio.run(hf_servers.client.generate("g", prompt_ids=prompt, sampling_params=dict(greedy)))

    with torch.no_grad():
        reference = new_model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                       do_sample=False, max_new_tokens=8)[0, len(prompt):]
    reference = reference.tolist()
    eos = new_model.generation_config.eos_token_id
    if eos in reference:
        reference = reference[: reference.index(eos) + 1]
    assert served().token_ids != reference  # the server still holds the step-0 weights

    monkeypatch.setenv("RANK", "0")
    adapter = HFServerAdapter(config.actor_rollout_ref.rollout, config.actor_rollout_ref.model, device_mesh=None)
    adapter.bucket_bytes = 64 << 10  # several buckets even for the tiny model
    asyncio.run(adapter.update_weights(iter(new_model.state_dict().items()), global_steps=3))
    out = served()
    assert out.token_ids == reference and out.extra_fields["global_steps"] == 3
    stats = ray.get(ray.get_actor("hf_server_0").get_stats.remote())
    assert stats["weight_syncs"] == 1 and stats["device"] == "cpu"


def test_concurrent_requests_share_one_generate_call(tmp_path):
    """Requests that arrive together are one micro-batch (one HFGenerator.generate_ids call)."""
    from gentax.train.verl_hf_rollout import HFGenerationServer

    model = make_tiny_model(tmp_path / "tiny")
    server = HFGenerationServer(str(model), replica_rank=0, seed=0, response_length=4, max_model_len=256,
                                max_batch_size=8)
    calls = []
    original = server.generator.generate_ids
    server.generator.generate_ids = lambda ids, params: calls.append(len(ids)) or original(ids, params)

    async def six():
        return await asyncio.gather(*(server.generate([1, 2, 3 + i], {"temperature": 1.0, "logprobs": True}, f"r{i}")
                                      for i in range(6)))

    outs = asyncio.run(six())
    assert calls == [6] and len(outs) == 6 and all(len(o.log_probs) == len(o.token_ids) for o in outs)
    with pytest.raises(Exception, match="top_k"):
        asyncio.run(server.generate([1, 2], {"top_k": 5}, "bad"))


def test_a_mixture_run_plays_each_slot_in_its_domain_and_logs_per_domain_success(local_ray, tmp_path):
    """verl engine, mixture webshop+sokoban: each dataset slot's group plays the domain the run's
    schedule gives it that step (runs.step_task_domains, the local engine's split), every episode's
    samples carry their domain through verl's postprocess, and the metrics.csv row has the
    per-domain training success."""
    import transfer_queue as tq
    from transfer_queue import KVBatchMeta
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from gentax.rollout.embedded_model import embedded_model_path
    from gentax.train import runs
    from gentax.train.verl_agent import EnvStepAgentLoop, GentaxPPOTrainer

    cfg = small_rl({"max_new_tokens": 32, "group_size": 2, "mini_batch_size": 4})
    run = make_run("webshop+sokoban", "default", 1, 3, max_steps=2)
    config = verl_engine.build_config(cfg, model_path=str(embedded_model_path()), run=run, run_dir=tmp_path, end_step=3)
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    worker = object.__new__(getattr(AgentLoopWorkerTQ, "__ray_actor_class__", AgentLoopWorkerTQ))
    worker.reward_loop_worker_handles, worker.processor, worker.distillation_enabled = None, None, False
    step = 3
    scheduled = runs.step_task_domains(1, step, 2, {"webshop": 1, "sokoban": 1})
    assert sorted(scheduled) == ["sokoban", "webshop"]
    played = {}

    async def episodes():
        for slot in range(2):
            for session in range(2):  # one GRPO group: the slot's task, twice
                loop = EnvStepAgentLoop(trainer_config=DictConfigWrap(config), server_manager=ClientLikeServer(
                    tokenizer, ["no tags"], global_steps=2), tokenizer=tokenizer, processor=None,
                    dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), hf_model_type="llama")
                kwargs = {"extra_info": {"slot": slot, "split": "train", "index": slot, "domain": ""},
                          "global_steps": step, "session_id": session, "uid": f"mix{slot}",
                          "raw_prompt": [{"role": "user", "content": "x"}]}
                outputs = await loop.run({"temperature": 1.0, "top_p": 1.0, "logprobs": True}, **kwargs)
                played.setdefault(slot, set()).update(o.extra_fields["gentax"]["domain"] for o in outputs)
                await worker._agent_loop_postprocess(outputs, False, **kwargs)

    asyncio.run(episodes())
    assert played == {0: {scheduled[0]}, 1: {scheduled[1]}}
    stored = tq.kv_list("train")["train"]
    keys = sorted(k for k in stored if k.startswith("mix"))
    batch = KVBatchMeta(keys=keys, tags=[stored[k] for k in keys], partition_id="train")
    trainer = object.__new__(GentaxPPOTrainer)
    trainer.config = config
    metrics = {}
    trainer._log_row(batch, metrics, step)
    import pandas as pd

    row = pd.read_csv(tmp_path / "metrics.csv").iloc[0]
    assert row["step"] == step and row["trajectories"] == 4
    assert row["id_success/webshop"] == 0.0 and row["id_success/sokoban"] == 0.0  # no valid action: no win
    assert metrics["gentax/id_success/webshop"] == 0.0
