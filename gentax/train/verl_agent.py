"""The gentax pieces that run inside verl's Ray processes (engine ``verl``; see verl_engine.py).

- ``EnvStepAgentLoop`` (agent ``gentax_env``, registered through verl_agent_loops.yaml): one instance
  per episode. It runs OUR collector for one trajectory of the row's task, on an env leased from the
  worker's ``ENV_POOLS``, with ``ServerGenerator`` sending each step's prompt to verl's rollout
  servers (vLLM, or gentax's ``hf``), and returns one ``AgentLoopOutput`` per env step (that step's
  prompt -> response), the step's facts in ``extra_fields["gentax"]``; the last one also carries
  ``reward_score`` (the outcome) and ``reward_extra_info``, which verl copies onto the earlier steps.
- ``GentaxPPOTrainer`` (``trainer.v1.trainer_mode=gentax_sync``): verl's synchronous V1 trainer
  whose ``_compute_advantage`` uses ``gentax.train.grpo.step_advantages`` and whose
  ``_compute_metrics`` also writes the run's ``metrics.csv`` row.
- ``ExportCheckpoint``: converts each saved FSDP checkpoint into ``RUN_DIR/checkpoints/step_<N>``.

Only a GPU cluster runs these inside verl (vLLM servers, TransferQueue, FSDP workers). The CPU
tests drive ``EnvStepAgentLoop.run`` with a stand-in server manager and verl's real tokenizer
path, and check ``step_sample_advantages`` / ``outputs_from_rollouts`` on real rollouts.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import re
import time
from typing import Any, Sequence
from uuid import uuid4

import numpy as np
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.trainer.ppo.checkpoint_callback import CheckpointCallback
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from gentax.rollout.collector import EnvPools
from gentax.train import grpo, runs
from gentax.train.verl_shared import AGENT_NAME, TRAINER_MODE, VERL_METRICS, export_checkpoint

log = logging.getLogger(__name__)

#: this agent-loop worker's envs, kept across its episodes (closed when the process exits)
ENV_POOLS = EnvPools()
atexit.register(ENV_POOLS.close)


# ---- rollout: one episode -> one sample per step ------------------------------------------------
class ServerGenerator:
    """A gentax ``Generator`` over verl's async server manager. ``generate``, called from the
    collector's thread, runs the requests concurrently on the agent loop's event loop and waits for
    them; prompts are tokenised by verl's own agent-loop path (``ct_build_initial_tokens``) and sampled
    with verl's ``sampling_params``, at most ``response_length`` tokens."""

    needs_expert_action = False

    def __init__(self, agent: AgentLoopBase, sampling_params: dict[str, Any], response_length: int):
        self.agent = agent
        self.sampling_params = dict(sampling_params)
        self.response_length = int(response_length)
        self.seconds = 0.0
        self.truncated = 0  # prompts left-truncated to rollout.prompt_length
        self.weight_versions: list[int] = []  # the servers' global_steps of each generation

    def generate(self, prompts, params=None, hints=None):
        future = asyncio.run_coroutine_threadsafe(self._generate_all(prompts), self.agent.loop)
        return future.result()

    async def _generate_all(self, prompts):
        start = time.perf_counter()
        out = await asyncio.gather(*(self._generate_one(messages) for messages in prompts))
        self.seconds += time.perf_counter() - start
        return out

    async def _generate_one(self, messages):
        from gentax.rollout.generators import Generation

        agent = self.agent
        # verl's own tokenisation (ct_build_initial_tokens), unrolled to see whether verl's cap on
        # rollout.prompt_length cuts the prompt's beginning (the task text): such steps are counted
        full = await agent.loop.run_in_executor(None, agent.continuous_token_builder.build_initial_tokens, messages)
        prompt_ids = agent._cap_text_prompt_length(full)
        self.truncated += len(prompt_ids) < len(full)
        output = await self.agent.server_manager.generate(
            request_id=uuid4().hex, prompt_ids=prompt_ids, sampling_params=dict(self.sampling_params)
        )
        for key in ("min_global_steps", "max_global_steps"):
            if output.extra_fields.get(key) is not None:
                self.weight_versions.append(int(output.extra_fields[key]))
        response_ids = list(output.token_ids)[: self.response_length]
        if not response_ids:  # verl's reward placement needs >= 1 response token
            response_ids = [self.agent.tokenizer.eos_token_id]
        logprobs = list(output.log_probs)[: len(response_ids)] if output.log_probs else None
        finish = "length" if len(output.token_ids) >= self.response_length else "stop"
        text = self.agent.tokenizer.decode(response_ids, skip_special_tokens=True)
        return Generation(text=text, prompt_ids=list(prompt_ids), response_ids=response_ids, logprobs=logprobs,
                          finish_reason=finish)


def episode_task(settings, extra_info: dict, global_steps: int) -> tuple[str, str, int]:
    """(domain, split, task seed) of a dataset row (``verl_engine.task_rows``): a train row follows
    the run's step schedule (task seed from (run seed, step, slot); for a mixture the domain of the
    slot from ``runs.step_task_domains``, the local engine's split), an eval row names both."""
    split = extra_info.get("split", "train")
    if split != "train":
        return str(extra_info["domain"]), split, int(extra_info["task_seed"])
    run = run_spec(settings)
    seed, step, slot = run.seed, int(global_steps), int(extra_info["slot"])
    if len(run.train) == 1:
        domain = run.train[0][0]
    else:
        domain = runs.step_task_domains(seed, step, int(settings["tasks_per_step"]), run.weights)[slot]
    return domain, split, runs.task_seed(seed, step, slot)


def run_spec(settings):
    """The run spec of the ``gentax`` config section (``gentax.run.*``, ``verl_engine.episode_settings``)."""
    from gentax.runspec import RunSpec

    return RunSpec.from_dict(settings["run"])


def episode_config(settings, *, domain: str, split: str, sampling, seed: int):
    """The collector settings of one episode: ``runspec.collect_fields`` of the run spec (the same
    function the local engine uses), one trajectory, in-process env."""
    from gentax.rollout.collector import CollectConfig
    from gentax.runspec import collect_fields

    return CollectConfig(**collect_fields(run_spec(settings), domain, split), history_length=int(settings["history_length"]),
                         group_size=1, sampling=sampling, num_workers=0, seed=seed)


def outputs_from_rollouts(rollouts, *, generate_seconds: float = 0.0, truncated: int = 0,
                          weight_versions: Sequence[int] = ()) -> list[AgentLoopOutput]:
    """One ``AgentLoopOutput`` per step of a one-trajectory ``Rollouts`` (see module doc). Every step's
    ``extra_fields`` carries the min and max of ``weight_versions`` (the ``min/max_global_steps`` verl's
    server client reported), which verl copies into the sample tags its ``_compute_metrics`` reads
    (a tag without them is a TypeError there)."""
    steps = rollouts.steps_frame()
    episode = rollouts.episodes_frame().iloc[0]
    tokens = rollouts.tokens
    outcome = float(steps.loc[steps["valid"], "reward"].sum())
    metrics = AgentLoopMetrics(generate_sequences=generate_seconds / max(len(steps), 1))
    versions = ({"min_global_steps": min(weight_versions), "max_global_steps": max(weight_versions)}
                if weight_versions else {})
    outputs = []
    for k, (_, row) in enumerate(steps.iterrows()):
        tok = tokens[k]
        response_ids = list(tok.response_ids) or [0]
        info = {
            "outcome": outcome,
            "step": int(row["step"]),
            "valid": bool(row["valid"]),
            "reason": row["reason"] if isinstance(row["reason"], str) else None,
            "reward": float(row["reward"]),
            "won": bool(episode["won"]),
            "domain": str(episode["domain"]),
            "length": int(episode["length"]),
            "return": float(episode["return"]),
            "error": bool(episode.get("error") or False),
            "prompts_truncated": int(truncated) if k == 0 else 0,  # per episode, counted once
        }
        outputs.append(
            AgentLoopOutput(
                prompt_ids=list(tok.prompt_ids),
                response_ids=response_ids,
                response_mask=[1] * len(response_ids),
                response_logprobs=list(tok.logprobs) if tok.logprobs is not None else None,
                num_turns=2,
                metrics=metrics,
                extra_fields={"gentax": info, **versions},
            )
        )
    final = outputs[-1]
    final.reward_score = outcome
    final.extra_fields["reward_extra_info"] = {
        "won": float(episode["won"]),
        "episode_length": float(episode["length"]),
        "invalid_steps": float(episode["invalid_steps"]),
    }
    return outputs


@register(AGENT_NAME)
class EnvStepAgentLoop(AgentLoopBase):
    """One env episode through our collector; one output per step (see the module docstring)."""

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> list[AgentLoopOutput]:
        from gentax.rollout.generators import SamplingParams, derive_seed

        settings = self.config.gentax
        extra_info = dict(kwargs.get("extra_info") or {})
        global_steps = int(kwargs.get("global_steps", 0) or 0)
        domain, split, task_seed = episode_task(settings, extra_info, global_steps)
        session = int(kwargs.get("session_id", 0))
        response_length = int(self.rollout_config.response_length)
        # the per-trajectory seed (augmentation decision, env randomness) differs per session
        episode_seed = derive_seed(int(settings["seed"]), split, global_steps, task_seed, session)
        sampling = SamplingParams(temperature=float(sampling_params.get("temperature", 1.0)),
                                  top_p=float(sampling_params.get("top_p", 1.0)), max_new_tokens=response_length,
                                  seed=episode_seed)
        cfg = episode_config(settings, domain=domain, split=split, sampling=sampling, seed=episode_seed)
        generator = ServerGenerator(self, sampling_params, response_length)
        # the collector (and the env) run in a thread: env steps never block the event loop
        rollouts = await self.loop.run_in_executor(None, lambda: ENV_POOLS.collect(generator, [task_seed], cfg))
        return outputs_from_rollouts(rollouts, generate_seconds=generator.seconds, truncated=generator.truncated,
                                     weight_versions=generator.weight_versions)


# ---- trainer: advantages and metrics -----------------------------------------------------------
def step_sample_advantages(
    keys: Sequence[str],
    infos: Sequence[dict | None],
    is_padding: Sequence[bool],
    *,
    mode: str,
    invalid_penalty: float,
    penalty_placement: str,
) -> np.ndarray:
    """One advantage per TransferQueue row (0 for verl's padding rows).

    Row keys are ``{uid}_{session}_{index}`` (uid = the task's group, session = the trajectory);
    ``infos[i]`` is the row's ``extra_fields["gentax"]``.
    """
    out = np.zeros(len(keys))
    rows = sorted((i for i in range(len(keys)) if not is_padding[i]), key=lambda i: _step_order(keys[i]))
    traj_index: dict[tuple[str, str], int] = {}
    outcomes, groups, step_traj, invalid = [], [], [], []
    for i in rows:
        uid, session, _ = keys[i].rsplit("_", 2)
        if (uid, session) not in traj_index:
            traj_index[(uid, session)] = len(outcomes)
            outcomes.append(float(infos[i]["outcome"]))
            groups.append(uid)
        step_traj.append(traj_index[(uid, session)])
        invalid.append(not infos[i]["valid"])
    if rows:
        out[rows] = grpo.step_advantages(outcomes, groups, step_traj, invalid, mode=mode, invalid_penalty=invalid_penalty,
                                         penalty_placement=penalty_placement)
    return out


def _step_order(key: str) -> tuple[str, str, int]:
    """Sort key of a row key ``{uid}_{session}_{index}``: a trajectory's samples in step order."""
    uid, session, index = key.rsplit("_", 2)
    return uid, session, int(index)


def step_frames(rows: Sequence[tuple[str, dict]]):
    """(steps, episodes) DataFrames for ``runs.rollout_metrics`` from (row key, gentax info) pairs."""
    import pandas as pd

    steps = pd.DataFrame([{"traj": key.rsplit("_", 1)[0], "valid": info["valid"], "reason": info["reason"]}
                          for key, info in rows], columns=["traj", "valid", "reason"])
    episodes = {}
    for key, info in rows:
        episodes.setdefault(key.rsplit("_", 1)[0], {"won": info["won"], "return": info["return"], "length": info["length"],
                                                    "domain": info.get("domain")})
    return steps, pd.DataFrame(list(episodes.values()), columns=["won", "return", "length", "domain"])


def _as_list(values) -> list:
    return values.tolist() if hasattr(values, "tolist") else list(values)


@register_trainer(TRAINER_MODE)
class GentaxPPOTrainer(PPOTrainerSync):
    """verl's sync V1 trainer with gentax's advantages and metrics log (see module docstring)."""

    def _compute_advantage(self, batch, metrics):
        import torch
        import transfer_queue as tq
        from tensordict import TensorDict
        from verl.workers.utils.padding import response_to_nested

        settings = self.config.gentax
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["response_mask", "extra_fields"])
        infos = [(fields or {}).get("gentax") for fields in _as_list(data["extra_fields"])]
        padding = [bool(tag.get("is_padding", False)) or infos[i] is None for i, tag in enumerate(batch.tags)]
        adv = step_sample_advantages(batch.keys, infos, padding, mode=str(settings["advantage_normalisation"]),
                                     invalid_penalty=float(settings["invalid_penalty"]),
                                     penalty_placement=str(settings["invalid_penalty_placement"]))
        nested_mask = data["response_mask"]
        if not nested_mask.is_nested:  # equal lengths may come back stacked
            nested_mask = torch.nested.as_nested_tensor(list(nested_mask), layout=torch.jagged)
        mask = nested_mask.to_padded_tensor(0).float()
        advantages = torch.tensor(adv, dtype=torch.float32)[:, None] * mask
        nested = response_to_nested(advantages, nested_mask)
        # the metadata kv_batch_put returns lists the new fields; the actor update reads the fields
        # its metadata lists (returning the incoming `batch` loses "advantages": KeyError in ppo_loss)
        updated = tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                                  fields=TensorDict({"advantages": nested, "returns": nested.clone()},
                                                    batch_size=len(batch)))
        real = np.array([not p for p in padding])
        if real.any():
            metrics.update({"gentax/adv_mean": float(adv[real].mean()), "gentax/adv_std": float(adv[real].std()),
                            "gentax/adv_abs_max": float(np.abs(adv[real]).max())})
        return updated

    def step(self, metrics, timing_raw):
        if getattr(self, "_gentax_stepped", None) is None:  # the job log's mark of where start-up ended
            self._gentax_stepped = True
            print(f"gentax: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} step {self.global_steps} begins "
                  "(start-up done)", flush=True)
        batch = super().step(metrics, timing_raw)
        # this step's row goes to metrics.csv BEFORE verl saves the step's checkpoint (fit saves, then
        # calls _compute_metrics): a kill between the two must not lose the row, since a resume keeps
        # the rows up to its checkpoint. _compute_metrics completes it (step time, validation).
        self._log_row(batch, metrics, self.global_steps)
        return batch

    def _compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
        super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        self._log_row(batch, metrics, global_steps)

    def _log_row(self, batch, metrics, global_steps) -> None:
        """Upsert the step's metrics.csv row: gentax's rollout metrics + the verl metrics known so far."""
        import transfer_queue as tq

        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
        infos = [(fields or {}).get("gentax") for fields in _as_list(data["extra_fields"])]
        rows = [(key, info) for key, info, tag in zip(batch.keys, infos, batch.tags)
                if info is not None and not tag.get("is_padding", False)]
        steps, episodes = step_frames(rows)
        ours = {**runs.rollout_metrics(steps, episodes), **runs.domain_success(episodes, run_spec(self.config.gentax).weights)}
        metrics.update({f"gentax/{name}": value for name, value in ours.items()})
        if getattr(self, "_gentax_log", None) is None:
            self._gentax_log = runs.MetricsLog(self.config.gentax["run_dir"], resume_from=global_steps - 1)
        ours["prompts_truncated"] = float(sum(info.get("prompts_truncated", 0) for _, info in rows))
        row = {"step": global_steps, **ours}
        row.update({name: float(metrics[key]) for name, key in VERL_METRICS.items() if key in metrics})
        row.update(validation_metrics(metrics))
        self._gentax_log.upsert(row)


def validation_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """Validation success of a step when it ran (verl names it ``val-*/<data_source>/won/mean@1``,
    data source ``gentax/<domain>``): ``val_success`` = the mean over the training domains, as the
    local engine logs it, plus ``val_success/<domain>`` for a mixture."""
    found = re.compile(r"^val-[^/]*/gentax/([^/]+)/won/mean@1$")
    rates = {m.group(1): float(v) for k, v in metrics.items() if (m := found.match(k))}
    if not rates:
        return {}
    row = {"val_success": float(np.mean(list(rates.values())))}
    if len(rates) > 1:
        row.update({f"val_success/{d}": rate for d, rate in rates.items()})
    return row


class ExportCheckpoint(CheckpointCallback):
    """After each verl save: FSDP checkpoint -> HF folder RUN_DIR/checkpoints/step_<N>."""

    def on_save(self, trainer, global_step: int, checkpoint_dir: str, async_save: bool = False, **kwargs) -> None:
        from pathlib import Path

        run_dir = self.config.gentax["run_dir"]
        export_checkpoint(Path(checkpoint_dir) / "actor", runs.checkpoint_dir(run_dir, global_step))
