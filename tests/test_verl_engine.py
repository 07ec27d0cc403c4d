"""Engine verl up to the GPU boundary, on CPU, with verl's real classes.

Covered here: config mapping + Hydra composition + verl's own validation and dataclass
conversion, `--print-config`, the task parquet read by verl's RLHFDataset, EnvStepAgentLoop
driven by a stand-in generation server (verl's real tokenizer path, our real collector and
Sokoban env), the per-row TransferQueue fields and our advantages against verl's own
multi-trajectory GRPO, the registered trainer/TaskRunner hooks, and the checkpoint export with
verl's real model merger. What only a GPU cluster runs is listed in verl_engine's docstring.
"""

from __future__ import annotations

import asyncio
import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("verl")
from omegaconf import OmegaConf  # noqa: E402

from gentax.errors import ConfigError  # noqa: E402
from gentax.train import grpo, runs, verl_engine  # noqa: E402
from gentax.train.config import load_rl_config  # noqa: E402
from rl_helpers import PAPER_RL, SMALL_MAX_STEPS, make_run, make_tiny_model, small_rl  # noqa: E402

def _run(cfg, domain: str, variant: str, seed: int, max_steps: dict | None = None, augmentation: dict | None = None):
    """A run spec named like ``gentax train rl --domain --variant --seed``: 2 steps, a small run's
    step limits (``max_steps`` over them)."""
    return make_run(domain, variant, seed, 2, max_steps={**SMALL_MAX_STEPS, **(max_steps or {})},
                    augmentation=augmentation)


pytestmark = pytest.mark.slow  # importing verl and composing its config takes ~30 s on 2 busy cores


@pytest.fixture(scope="module")
def printed_config(tmp_path_factory):
    """`gentax train rl --engine verl --print-config` for a V1 aug run, parsed back."""
    from gentax.cli import main

    run_dir = tmp_path_factory.mktemp("verl_run")
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["train", "rl", "--engine", "verl", "--print-config", "--init", "/models/Llama-3.1-8B-Instruct",
                     "--domain", "webshop", "--variant", "aug", "--seed", "2", "--steps", "0:20", "--out", str(run_dir)])
    assert code == 0
    assert not any(run_dir.iterdir()), "--print-config must not write anything"
    return OmegaConf.create(out.getvalue()), run_dir


def test_print_config_maps_the_paper_recipe(printed_config):
    config, run_dir = printed_config
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    assert rollout.n == 8 and config.data.train_batch_size == 16  # 16 tasks x group 8
    assert actor.ppo_mini_batch_size * rollout.n == 256  # step samples per optimizer step
    assert actor.optim.lr == 1e-6 and actor.use_kl_loss and actor.kl_loss_coef == 0.01
    assert actor.kl_loss_type == "low_var_kl" and actor.loss_agg_mode == "token-mean"
    assert actor.clip_ratio_low == actor.clip_ratio_high == 0.2 and actor.entropy_coeff == 0
    assert rollout.temperature == 1.0 and rollout.val_kwargs.temperature == 0.4
    assert rollout.name == "vllm" and rollout.agent.default_agent_loop == "gentax_env"
    assert Path(rollout.agent.agent_loop_config_path).is_file()
    assert config.trainer.use_v1 and config.trainer.v1.trainer_mode == "gentax_sync"
    assert config.trainer.save_freq == 15 and config.trainer.resume_mode == "auto"
    assert config.trainer.total_training_steps == 20 and config.trainer.n_gpus_per_node == 8
    assert config.trainer.default_local_dir == str(run_dir.resolve() / "verl")
    # the processes verl starts: no reward worker (our agent loop scores), a storage unit per GPU
    # up to verl's 8, Ray without its dashboard's modules
    assert config.reward.num_workers == 0 and config.transfer_queue.backend.SimpleStorage.num_data_storage_units == 8
    assert rollout.agent.num_workers == 8  # 128 trajectories a step: one agent-loop worker per 16
    assert config.ray_kwargs.ray_init.include_dashboard is False
    assert config.algorithm.adv_estimator == "grpo" and not config.algorithm.use_kl_in_reward
    python_path = config.ray_kwargs.ray_init.runtime_env.env_vars.PYTHONPATH.split(":")
    assert str(Path(verl_engine.__file__).resolve().parents[2]) in python_path  # Ray workers import gentax
    g = config.gentax
    assert g.run.train == [["webshop", 1]] and g.run.think == "on" and g.run.variant == "aug"
    assert g.run.augmentation.eps.webshop == 30 and g.run.augmentation.p == 1.0 and g.run.domains.webshop.max_steps == 15
    assert g.seed == 2 and g.advantage_normalisation == "trajectory" and g.invalid_penalty == 0.1


def test_composed_config_passes_verl_validation_and_dataclasses(printed_config, tmp_path):
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import FSDPActorConfig, RolloutConfig

    cfg = small_rl({"advantage_normalisation": "cross_step"})
    config = verl_engine.build_config(cfg, model_path="/m", run=_run(cfg, "sokoban", "nothink", 0),
                                      run_dir=tmp_path, end_step=3)
    OmegaConf.resolve(config)  # every interpolation resolves
    assert isinstance(omega_conf_to_dataclass(config.actor_rollout_ref.actor), FSDPActorConfig)
    assert isinstance(omega_conf_to_dataclass(config.actor_rollout_ref.rollout), RolloutConfig)
    assert config.gentax.run.think == "off" and config.gentax.run.augmentation is None
    assert config.gentax.advantage_normalisation == "cross_step"
    assert config.transfer_queue.backend.SimpleStorage.num_data_storage_units == 1  # one GPU
    assert config.actor_rollout_ref.rollout.agent.num_workers == 1  # a step of fewer than 16 trajectories
    assert (tmp_path / "verl_data" / "train.parquet").is_file()
    with pytest.raises(ConfigError, match="verl config does not compose"):
        verl_engine.compose_verl_config(["actor_rollout_ref.actor.no_such_key=1"])


def test_hydra_values_are_quoted_safely():
    assert verl_engine._hydra_value("/a b/c'd") == "'/a b/c\\'d'"
    assert verl_engine._hydra_value("1e-6") == "'1e-6'" and verl_engine._hydra_value(True) == "true"
    assert verl_engine._hydra_value({"a": [1, None]}) == "{a:[1,null]}"


def test_task_rows_load_in_verls_dataset(tmp_path):
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from gentax.rollout.embedded_model import embedded_model_path

    cfg = small_rl({"tasks_per_step": 3, "val_tasks": 2})
    train, val = verl_engine.write_task_files(tmp_path, cfg, _run(cfg, "sokoban", "default", 7))
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    data_cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512, "return_raw_chat": True,
                                 "filter_overlong_prompts": False, "truncation": "error"})
    dataset = RLHFDataset([str(train)], tokenizer, data_cfg)
    rows = [dataset[i] for i in range(len(dataset))]
    assert [r["extra_info"]["slot"] for r in rows] == [0, 1, 2] and rows[0]["agent_name"] == "gentax_env"
    val_rows = [RLHFDataset([str(val)], tokenizer, data_cfg)[i] for i in range(2)]
    assert [r["extra_info"]["task_seed"] for r in val_rows] == [runs.task_seed(7, 0, s) for s in range(2)]


# ---- the agent loop against a stand-in server -----------------------------------------------------
class StandInServer:
    """`server_manager.generate` of verl's LLMServerClient: scripted responses per call."""

    def __init__(self, tokenizer, texts):
        self.tokenizer, self.texts, self.calls = tokenizer, list(texts), []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.calls.append({"prompt_ids": list(prompt_ids), "sampling_params": dict(sampling_params)})
        text = self.texts[(len(self.calls) - 1) % len(self.texts)]
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed")


@pytest.fixture(scope="module")
def agent_setup(tmp_path_factory):
    """A composed run config (Sokoban, 3-step episodes) and the embedded model's tokenizer."""
    from transformers import AutoTokenizer

    from gentax.rollout.embedded_model import embedded_model_path

    run_dir = tmp_path_factory.mktemp("agent")
    cfg = small_rl({"max_new_tokens": 64})
    config = verl_engine.build_config(cfg, model_path=str(embedded_model_path()),
                                      run=_run(cfg, "sokoban", "default", 3, max_steps={"sokoban": 3}),
                                      run_dir=run_dir, end_step=5)
    return config, AutoTokenizer.from_pretrained(embedded_model_path())


def run_episode(config, tokenizer, server):
    """EnvStepAgentLoop.run for dataset row slot 1 at training step 4, as verl's worker calls it."""
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from gentax.train.verl_agent import EnvStepAgentLoop

    async def episode():
        loop = EnvStepAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer,
                                processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data),
                                hf_model_type="llama")
        return await loop.run({"temperature": 1.0, "top_p": 1.0, "logprobs": True},
                              extra_info={"slot": 1, "split": "train", "index": 1}, global_steps=4, session_id=0,
                              uid="u1", raw_prompt=[{"role": "user", "content": "ignored"}])

    return asyncio.run(episode())


SCRIPT = ["<think>go</think><action>up</action>", "no tags here", "<think>go</think><action>left</action>"]


@pytest.fixture(scope="module")
def agent_outputs(agent_setup):
    """One Sokoban episode (3 steps: valid, invalid, valid) through EnvStepAgentLoop."""
    config, tokenizer = agent_setup
    server = StandInServer(tokenizer, SCRIPT)
    return run_episode(config, tokenizer, server), server, tokenizer


def test_agent_loop_emits_one_sample_per_step(agent_outputs):
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

    from gentax.rollout.generators import chat_prompt_ids

    outputs, server, tokenizer = agent_outputs
    assert len(outputs) == 3 and all(isinstance(o, AgentLoopOutput) for o in outputs)
    infos = [o.extra_fields["gentax"] for o in outputs]
    assert [i["step"] for i in infos] == [0, 1, 2] and [i["valid"] for i in infos] == [True, False, True]
    assert infos[1]["reason"] == "no_action_tag" and all(i["outcome"] == 0.0 for i in infos)
    for output, call in zip(outputs, server.calls):
        assert output.prompt_ids == call["prompt_ids"]  # exactly what the server saw
        assert output.response_mask == [1] * len(output.response_ids) and output.response_logprobs[0] == -0.25
        text = tokenizer.decode(output.prompt_ids)
        assert "Sokoban" in text and "You are now at step" in text  # gentax's step prompt, chat template applied
    # the task follows the run's schedule (seed 3, step 4, slot 1), and verl's tokenizer path gives
    # exactly the ids of our generators' chat_prompt_ids for gentax's step prompt
    from gentax.agent.prompts import build_messages
    from gentax.domains import make

    env = make("sokoban", split="train", max_steps=3)
    obs = env.reset(env.task(runs.task_seed(3, 4, 1)))
    assert outputs[0].prompt_ids == chat_prompt_ids(tokenizer, build_messages("sokoban", obs, [], 0))
    # step 2's prompt shows the history of steps 0-1 (fresh message per step, not one growing chat)
    assert "Prior to this step, you have already taken 2 step(s)" in tokenizer.decode(outputs[2].prompt_ids)
    assert outputs[-1].reward_score == 0.0 and outputs[-1].extra_fields["reward_extra_info"]["invalid_steps"] == 1.0
    assert all(o.reward_score is None for o in outputs[:-1])  # verl broadcasts the final one
    assert server.calls[0]["sampling_params"]["temperature"] == 1.0


def test_a_workers_later_episodes_reuse_its_envs_and_play_the_same(agent_setup, agent_outputs):
    """The agent-loop worker's envs start once (verl_agent.ENV_POOLS), not once per episode; an
    episode on a reused env is the episode a fresh one plays."""
    from gentax.train import verl_agent

    config, tokenizer = agent_setup
    first, _, _ = agent_outputs
    built = verl_agent.ENV_POOLS.pools()
    assert built >= 1
    again = run_episode(config, tokenizer, StandInServer(tokenizer, SCRIPT))
    assert verl_agent.ENV_POOLS.pools() == built
    assert [o.prompt_ids for o in again] == [o.prompt_ids for o in first]
    assert [o.extra_fields["gentax"] for o in again] == [o.extra_fields["gentax"] for o in first]


def test_prompts_cut_by_verls_prompt_length_are_counted(agent_setup, agent_outputs):
    config, tokenizer = agent_setup
    assert agent_outputs[0][0].extra_fields["gentax"]["prompts_truncated"] == 0
    short = OmegaConf.merge(config, {"actor_rollout_ref": {"rollout": {"prompt_length": 200}}})
    outputs = run_episode(short, tokenizer, StandInServer(tokenizer, SCRIPT))
    assert outputs[0].extra_fields["gentax"]["prompts_truncated"] == 3 and len(outputs[0].prompt_ids) == 200


def test_outputs_become_verl_rows_and_advantages(agent_outputs):
    """The per-key fields AgentLoopWorkerTQ stores (as_dict + list_of_dict_to_tensordict), read back
    as GentaxPPOTrainer._compute_advantage reads them."""
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    from gentax.train.verl_agent import step_sample_advantages

    outputs, _, _ = agent_outputs
    # a second trajectory of the same group that "won", built from the first (same prompts)
    fields, keys = [], []
    for session, outcome in ((0, 0.0), (1, 10.0)):
        for i, output in enumerate(outputs):
            out = output.model_copy(deep=True)
            out.extra_fields["gentax"]["outcome"] = outcome
            if i == len(outputs) - 1:
                out.reward_score = outcome
            field = out.as_dict()
            keys.append(f"u1_{session}_{i}")
            fields.append(field)
    assert fields[2]["rm_scores"][-1] == 0.0 and fields[5]["rm_scores"][-1] == 10.0
    table = list_of_dict_to_tensordict(fields)
    infos = [f["gentax"] for f in list(table["extra_fields"])]
    adv = step_sample_advantages(keys, infos, [False] * 6, mode="trajectory", invalid_penalty=0.1,
                                 penalty_placement="after_normalisation")
    winner, loser = grpo.group_advantages([0.0, 10.0], ["u1", "u1"])[::-1]
    np.testing.assert_allclose(adv, [loser, loser - 0.1, loser, winner, winner - 0.1, winner])


def test_step_sample_advantages_equal_verls_multi_trajectory_grpo():
    """Without invalid steps, trajectory mode == verl's compute_advantage_for_multi_trajectories."""
    from verl.protocol import DataProto
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    from gentax.train.verl_agent import step_sample_advantages

    rng = np.random.default_rng(0)
    keys, infos = [], []
    for uid in ("a-1", "b-2", "c-3"):
        for session in range(4):
            outcome = float(rng.choice([0.0, 10.0]))
            for i in range(int(rng.integers(1, 5))):
                keys.append(f"{uid}_{session}_{i}")
                infos.append({"outcome": outcome, "valid": True})
    keys.append("padabc_0_0")  # verl's no-op padding row
    infos.append({"outcome": 0.0, "valid": True})
    n, width = len(keys), 6
    mask = torch.ones(n, width)
    mask[-1] = 0
    rewards = torch.zeros(n, width)
    rewards[:, -1] = torch.tensor([i["outcome"] for i in infos])
    data = DataProto.from_dict(tensors={"token_level_rewards": rewards, "response_mask": mask},
                               non_tensors={"uid": np.array([k.rsplit("_", 2)[0] for k in keys], dtype=object)})
    verl_adv = compute_advantage_for_multi_trajectories(data, batch_keys=keys, adv_estimator="grpo").batch["advantages"]
    ours = step_sample_advantages(keys, infos, [False] * (n - 1) + [True], mode="trajectory", invalid_penalty=0.1,
                                  penalty_placement="after_normalisation")
    np.testing.assert_allclose(ours[:-1], verl_adv[:-1, 0].numpy(), rtol=1e-5, atol=1e-5)
    assert ours[-1] == 0.0


def test_entropy_coeff_and_penalty_placement_reach_verl(tmp_path):
    """The two RL options as verl receives them, and the trainer's advantages in any row order."""
    from gentax.train.verl_agent import step_sample_advantages

    cfg = small_rl({"entropy_coeff": 0.001, "invalid_penalty_placement": "in_return"})
    config = verl_engine.build_config(cfg, model_path="/m", run=_run(cfg, "sokoban", "default", 0),
                                      run_dir=tmp_path, end_step=2, write_data=False)
    assert config.actor_rollout_ref.actor.entropy_coeff == 0.001
    assert config.gentax.invalid_penalty_placement == "in_return"
    # rows of two trajectories of one group, shuffled as TransferQueue may return them
    keys = ["g_0_0", "g_0_1", "g_0_2", "g_1_0", "g_1_1"]
    infos = [{"outcome": 10.0, "valid": v} for v in (True, False, True)] + [{"outcome": 0.0, "valid": v} for v in (False, True)]
    order = [4, 1, 3, 0, 2]
    shuffled = step_sample_advantages([keys[i] for i in order], [infos[i] for i in order], [False] * 5,
                                      mode="trajectory", invalid_penalty=0.1, penalty_placement="in_return")
    expected = grpo.step_advantages([10.0, 0.0], ["g", "g"], [0, 0, 0, 1, 1], [False, True, False, True, False],
                                    mode="trajectory", invalid_penalty=0.1, penalty_placement="in_return")
    np.testing.assert_allclose(shuffled, expected[order])
    assert not np.allclose(expected, grpo.step_advantages([10.0, 0.0], ["g", "g"], [0, 0, 0, 1, 1],
                                                          [False, True, False, True, False], mode="trajectory",
                                                          invalid_penalty=0.1, penalty_placement="after_normalisation"))


def test_registered_trainer_agent_loop_and_task_runner():
    import gentax.train.verl_agent as va
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.main_ppo import TaskRunnerV1
    from verl.trainer.ppo.v1 import PPOTrainerSync, get_trainer_cls

    assert get_trainer_cls("gentax_sync") is va.GentaxPPOTrainer and issubclass(va.GentaxPPOTrainer, PPOTrainerSync)
    assert _agent_loop_registry["gentax_env"]["_target_"].endswith("EnvStepAgentLoop")
    yaml_entry = OmegaConf.load(verl_engine.AGENT_LOOPS_YAML)[0]
    assert yaml_entry.name == "gentax_env" and yaml_entry._target_ == "gentax.train.verl_agent.EnvStepAgentLoop"
    ours = verl_engine._task_runner_class().__ray_metadata__.modified_class.__mro__[1]
    assert ours.__name__ == "GentaxTaskRunner" and issubclass(ours, TaskRunnerV1.__ray_actor_class__)
    assert "run" in vars(ours)  # imports gentax.train.verl_agent before verl's run


def test_export_checkpoint_with_verls_model_merger(tmp_path):
    """A world-size-1 checkpoint in verl's FSDP layout -> HF folder via `python -m verl.model_merger`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = make_tiny_model(tmp_path / "tiny")
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    actor = tmp_path / "run" / "verl" / "global_step_3" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    torch.save(model.state_dict(), actor / "model_world_size_1_rank_0.pt")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        if (model_dir / name).exists():
            (actor / "huggingface" / name).write_bytes((model_dir / name).read_bytes())
    (tmp_path / "run" / "verl" / "latest_checkpointed_iteration.txt").write_text("3")
    assert verl_engine.verl_checkpoint_steps(tmp_path / "run") == [3]
    assert verl_engine.export_pending(tmp_path / "run") == [3]
    target = runs.checkpoint_dir(tmp_path / "run", 3)
    merged = AutoModelForCausalLM.from_pretrained(target)
    AutoTokenizer.from_pretrained(target)
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(merged.state_dict()[name].float(), tensor.bfloat16().float())
    assert verl_engine.export_pending(tmp_path / "run") == []  # already exported
    with pytest.raises(Exception, match="not a verl FSDP actor checkpoint"):
        verl_engine.export_checkpoint(tmp_path, tmp_path / "x")


# GentaxPPOTrainer._compute_advantage / _compute_metrics against verl's real TransferQueue and
# verl's own _compute_metrics: tests/test_verl_ray.py (a local Ray instance)


def test_rollout_backend_is_one_checked_setting():
    """verl.rollout (workflow: engines.rollout) reaches verl's rollout.name; a bad value is one error."""
    cfg = small_rl({"verl": {"rollout": "hf", "rollout_tp": 1, "attn_implementation": "sdpa"}})
    overrides = verl_engine.verl_overrides(cfg, model_path="/m", run=_run(cfg, "sokoban", "default", 0),
                                           run_dir="/tmp/r", end_step=1, train_file="t", val_file="v")
    assert "actor_rollout_ref.rollout.name=hf" in overrides
    assert "actor_rollout_ref.model.use_remove_padding=false" in overrides
    assert "+actor_rollout_ref.model.override_config.attn_implementation=sdpa" in overrides
    assert "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES=gentax.train.verl_plugin" in overrides
    from gentax.study.jobs import rl_section

    job = rl_section({"lr": 1.0e-6}, save_every=15, rollout="hf")  # the workflow's engines.rollout, in the job's RL section
    assert job["verl"] == {"rollout": "hf"}
    assert load_rl_config({**PAPER_RL, **job, "verl": {"rollout": "hf", "rollout_tp": 1}}).verl["rollout"] == "hf"
    with pytest.raises(ConfigError, match="RL config key verl.rollout: must be one of vllm, hf, got .sglang."):
        load_rl_config({**PAPER_RL, "verl": {"rollout": "sglang"}})
    with pytest.raises(ConfigError, match="RL config key verl.rollout_tp: must be 1 with verl.rollout hf"):
        load_rl_config({**PAPER_RL, "verl": {"rollout": "hf"}})  # the paper's tensor parallel 2


def test_a_runs_gpus_are_the_clusters_unless_rl_sets_its_own():
    """verl.n_gpus_per_node has one home by default (issue #41 item 2): the study's
    cluster.gpus_per_node, the SFT job's too, filled in by config.study_rl; rl.verl.n_gpus_per_node
    gives RL a count of its own. The engine's defaults hold none, and a verl run without one is refused."""
    from gentax.study.config import study_config
    from gentax.study.jobs import resolved_rl
    from gentax.train.config import engine_defaults

    assert engine_defaults()["verl"]["n_gpus_per_node"] is None
    cfg = study_config("paper", check=False)
    assert resolved_rl(cfg, save_every=15)["verl"]["n_gpus_per_node"] == cfg["cluster"]["gpus_per_node"] == 8
    cfg["cluster"]["gpus_per_node"] = 4
    assert resolved_rl(cfg, save_every=15)["verl"]["n_gpus_per_node"] == 4
    cfg["rl"]["verl"] = {"n_gpus_per_node": 2}
    assert resolved_rl(cfg, save_every=15)["verl"]["n_gpus_per_node"] == 2
    unset = load_rl_config({**PAPER_RL, "verl": {"rollout": "vllm"}})
    with pytest.raises(ConfigError, match="RL config key verl.n_gpus_per_node: not set"):
        verl_engine.verl_overrides(unset, model_path="/m", run=_run(unset, "sokoban", "default", 0), run_dir="/tmp/r",
                                   end_step=1, train_file="t", val_file="v")
    with pytest.raises(ConfigError, match="RL config key verl.n_gpus_per_node: must be an integer >= 1"):
        load_rl_config({**PAPER_RL, "verl": {"n_gpus_per_node": 0}})


@pytest.mark.parametrize("split", ["train", "eval"])
def test_both_engines_build_the_same_collector_settings_from_a_run_spec(tmp_path, split):
    """The verl agent loop's and the local engine's collector settings for the same run spec and
    split are equal (one function: runspec.collect_fields); only training episodes are augmented."""
    from gentax.rollout.generators import SamplingParams
    from gentax.train.local_engine import _collect_config
    from gentax.train.verl_agent import episode_config

    cfg = small_rl({"env_workers": 0})
    run = _run(cfg, "webshop+sokoban", "aug", 3, max_steps={"webshop": 7},
               augmentation={"p": 0.5, "eps": {"webshop": 40, "sokoban": 80}})
    config = verl_engine.build_config(cfg, model_path="/m", run=run, run_dir=tmp_path, end_step=2, write_data=False)
    for domain in ("webshop", "sokoban"):
        sampling = SamplingParams(temperature=0.4, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens, seed=11)
        verl = episode_config(config.gentax, domain=domain, split=split, sampling=sampling, seed=11)
        local = _collect_config(cfg, run, domain=domain, split=split, seed=11, group_size=1, temperature=0.4)
        assert verl == local
        assert verl.aug_eps == ({"webshop": 40, "sokoban": 80}[domain] if split == "train" else 0)
    assert verl.max_steps == SMALL_MAX_STEPS["sokoban"] and episode_config(
        config.gentax, domain="webshop", split=split, sampling=SamplingParams(), seed=0).max_steps == 7


def test_a_mixture_run_composes_and_its_rows_carry_their_domain(tmp_path):
    """verl engine, mixture: the config composes with the run spec of both members; train rows are
    one per group slot (their domain comes from the step's schedule), validation rows are
    ``val_tasks`` held-out tasks of each member, each row naming its domain and data source."""
    from gentax.train.verl_agent import episode_task, validation_metrics

    cfg = small_rl({"tasks_per_step": 3, "val_tasks": 2, "val_every": 1})
    run = _run(cfg, "webshop*2+sokoban", "default", 5)
    config = verl_engine.build_config(cfg, model_path="/m", run=run, run_dir=tmp_path, end_step=2)
    assert config.gentax.run.train == [["webshop", 2], ["sokoban", 1]] and config.gentax.tasks_per_step == 3
    rows = verl_engine.task_rows(cfg, run)
    assert [r["extra_info"]["domain"] for r in rows["train"]] == ["", "", ""]
    assert [r["extra_info"]["domain"] for r in rows["eval"]] == ["webshop", "webshop", "sokoban", "sokoban"]
    assert {r["data_source"] for r in rows["eval"]} == {"gentax/webshop", "gentax/sokoban"}
    for step in (1, 2, 7):
        drawn = [episode_task(config.gentax, r["extra_info"], step)[0] for r in rows["train"]]
        assert drawn == runs.step_task_domains(5, step, 3, {"webshop": 2, "sokoban": 1})
    domain, split, seed = episode_task(config.gentax, rows["eval"][3]["extra_info"], 4)
    assert (domain, split, seed) == ("sokoban", "eval", runs.task_seed(5, 0, 1))
    val = validation_metrics({"val-core/gentax/webshop/won/mean@1": 0.5, "val-core/gentax/sokoban/won/mean@1": 0.25,
                              "val-aux/gentax/sokoban/episode_length/mean@1": 9.0})
    assert val == {"val_success": 0.375, "val_success/webshop": 0.5, "val_success/sokoban": 0.25}


@pytest.mark.parametrize("trajectories, at_most, workers", [
    (128, 8, 8),   # the paper's step: 16 tasks x 8
    (32, 8, 2),    # the one-GPU preset's
    (16, 8, 1),    # the one-GPU slice's and reference size's
    (4, 2, 1),     # the embedded study's
    (512, 8, 8),   # capped by verl.agent_workers
    (48, 8, 3),
    (80, 8, 5),
    (56, 8, 2),    # 3 does not divide 56: the next divisor below
    (7, 8, 1),
])
def test_agent_loop_workers_from_the_step_trajectories(trajectories, at_most, workers):
    got = verl_engine.agent_loop_workers(trajectories, at_most)
    assert got == workers and trajectories % got == 0  # verl splits the batch into equal chunks
