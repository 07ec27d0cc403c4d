"""Engine ``verl``: multi-turn, step-wise GRPO on upstream verl 0.9.1 (FSDP actor + vLLM rollout;
docs/training.md section 4: tasks, checkpoints, resume, launch).

``train_verl`` composes verl's own Hydra config (``ppo_trainer``) with ``verl_overrides`` (the ONE
place where gentax's RL section becomes verl settings) and calls verl's ``run_ppo`` with a
TaskRunner that first imports ``gentax.train.verl_agent`` (our trainer must be registered in the
process that runs it). Extension point (checked against verl 0.9.1): the V1 trainer's agent loops
may return a LIST of ``AgentLoopOutput``, each stored as its own sample, so one agent loop per
episode (``verl_agent.EnvStepAgentLoop``, our collector against verl's rollout servers) emits one
sample per env step without copying trainer code; the trainer overrides only
``_compute_advantage`` (``gentax.train.grpo``) and ``_compute_metrics`` (metrics.csv). Tasks follow
the local engine's schedule (``runs.task_seed``, ``runs.step_task_domains``); each saved FSDP
checkpoint is exported to ``RUN_DIR/checkpoints/step_<N>`` (``export_checkpoint``).

What ran where: CPU tests (tests/test_verl_engine.py, tests/test_verl_ray.py) cover the config
mapping, the agent loop, our trainer's TransferQueue reads and writes against verl's real queue and
``_compute_metrics``, and the ``hf`` rollout backend under verl's ``LLMServerManager``. ``run_ppo``
itself ran on 1 and 2 GPUs with the ``hf`` backend (docs/training.md section 5.3) and on one GPU with
a vLLM server and the one-GPU process sizes below (benchmarks/gpu_runs/gpu1_paper_engines_2026-12-06.md).
Only a GPU cluster exercises: vLLM at tensor parallel > 1 and its weight sync across GPUs; more than
2 GPUs (8 ranks, lcm(dp, mini-batch) padding at that width), multi-node Ray; an 8B model under FSDP;
in-training validation; the paper node's process sizes (8 storage units, 8 agent-loop workers).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from pathlib import Path
from typing import Any

from gentax.errors import ConfigError
from gentax.runspec import RunSpec
from gentax.train import runs
from gentax.train.config import RLConfig
from gentax.train.verl_shared import AGENT_NAME, TRAINER_MODE, export_checkpoint  # noqa: F401  (re-exported)

#: verl_plugin's (variable, module): importing verl_plugin itself needs verl, so it is named here
PLUGIN_ENV = ("VERL_USE_EXTERNAL_MODULES", "gentax.train.verl_plugin")
AGENT_LOOPS_YAML = Path(__file__).with_name("verl_agent_loops.yaml")
VERL_DIR = runs.VERL_DIR  # its FSDP checkpoints (the run folder layout: gentax.train.runs)


#: trajectories an agent-loop worker plays a step (the paper's 128 get verl's 8 workers)
TRAJECTORIES_PER_AGENT_WORKER = 16


def agent_loop_workers(trajectories: int, at_most: int) -> int:
    """Agent-loop workers for a step of ``trajectories``: one per ``TRAJECTORIES_PER_AGENT_WORKER``,
    at least 1, at most ``at_most`` (config ``verl.agent_workers``), and a divisor of the step's
    trajectories (verl's ``AgentLoopManager`` splits the batch into equal chunks)."""
    workers = max(1, min(at_most, trajectories // TRAJECTORIES_PER_AGENT_WORKER))
    while trajectories % workers:
        workers -= 1
    return workers


def episode_settings(cfg: RLConfig, *, run: RunSpec, run_dir: str | Path) -> dict[str, Any]:
    """What ``EnvStepAgentLoop`` needs to run an episode (config key ``gentax``): the run spec as it
    is (``run``: the agent loop builds each episode's collector settings from it with
    ``runspec.collect_fields``, as the local engine does) and the engine's own settings."""
    return {
        "run": run.to_dict(),
        "seed": run.seed,
        "tasks_per_step": cfg.tasks_per_step,
        "history_length": cfg.history_length,
        "advantage_normalisation": cfg.advantage_normalisation,
        "invalid_penalty": cfg.invalid_penalty,
        "invalid_penalty_placement": cfg.invalid_penalty_placement,
        "run_dir": str(Path(run_dir).resolve()),
    }


def verl_overrides(
    cfg: RLConfig,
    *,
    model_path: str,
    run: RunSpec,
    run_dir: str | Path,
    end_step: int,
    train_file: str | Path,
    val_file: str | Path,
    tracking: dict[str, Any] | None = None,
) -> list[str]:
    """gentax's RL section -> verl Hydra overrides (on top of verl's ``ppo_trainer`` config)."""
    from gentax.train import tracking as gtracking

    v = cfg.verl
    if v["n_gpus_per_node"] is None:  # the study fills it (config.study_rl); a section built without it has none
        raise ConfigError("RL config key verl.n_gpus_per_node: not set: a verl run needs its GPUs per node (the "
                          "study's cluster.gpus_per_node; gentax train rl: --preset, or rl.verl.n_gpus_per_node in --config)")
    run_dir = Path(run_dir).resolve()
    track = gtracking.load_section(tracking)
    seed = run.seed
    seq_len = cfg.max_prompt_tokens + cfg.max_new_tokens
    tokens_per_gpu = max(seq_len, int(v["micro_batch_per_gpu"]) * seq_len)
    settings = episode_settings(cfg, run=run, run_dir=run_dir)
    pairs: list[tuple[str, Any]] = [
        # --- algorithm: GRPO; our trainer computes the advantages with gentax.train.grpo
        ("algorithm.adv_estimator", "grpo"),
        ("algorithm.norm_adv_by_std_in_grpo", True),
        ("algorithm.use_kl_in_reward", False),
        # --- data: one row per group slot; one epoch = one training step (see module doc)
        ("data.train_files", str(train_file)),
        ("data.val_files", str(val_file)),
        ("data.train_batch_size", cfg.tasks_per_step),
        ("data.max_prompt_length", cfg.max_prompt_tokens),
        ("data.max_response_length", cfg.max_new_tokens),
        ("data.shuffle", False),
        ("data.filter_overlong_prompts", False),
        ("data.return_raw_chat", True),
        ("data.dataloader_num_workers", 0),
        ("data.seed", seed),
        # --- model
        ("actor_rollout_ref.model.path", model_path),
        # remove-padding needs flash-attn's kernels; with sdpa/eager verl runs padded batches
        ("actor_rollout_ref.model.use_remove_padding", v["attn_implementation"] == "flash_attention_2"),
        ("+actor_rollout_ref.model.override_config.attn_implementation", v["attn_implementation"]),
        ("actor_rollout_ref.model.enable_gradient_checkpointing", bool(v["gradient_checkpointing"])),
        ("actor_rollout_ref.model.lora_rank", cfg.lora_rank),
        ("actor_rollout_ref.model.lora_alpha", cfg.lora_alpha),
        # --- actor: AdamW, PPO clip, low-variance KL loss, token-mean
        ("actor_rollout_ref.actor.optim.lr", cfg.lr),
        ("actor_rollout_ref.actor.optim.weight_decay", cfg.weight_decay),
        ("actor_rollout_ref.actor.optim.clip_grad", cfg.grad_clip),
        ("actor_rollout_ref.actor.grad_clip", cfg.grad_clip),
        # verl counts mini-batches in prompts x rollout.n samples; ours are step samples
        ("actor_rollout_ref.actor.ppo_mini_batch_size", cfg.mini_batch_size // cfg.group_size),
        ("actor_rollout_ref.actor.use_dynamic_bsz", True),  # micro-batches by tokens (lengths vary a lot)
        ("actor_rollout_ref.actor.ppo_max_token_len_per_gpu", tokens_per_gpu),
        ("actor_rollout_ref.actor.ppo_epochs", cfg.epochs_per_step),
        ("actor_rollout_ref.actor.clip_ratio", cfg.clip_ratio),
        ("actor_rollout_ref.actor.clip_ratio_low", cfg.clip_ratio),
        ("actor_rollout_ref.actor.clip_ratio_high", cfg.clip_ratio),
        ("actor_rollout_ref.actor.clip_ratio_c", cfg.clip_ratio_c),
        ("actor_rollout_ref.actor.loss_agg_mode", "token-mean"),
        ("actor_rollout_ref.actor.use_kl_loss", True),
        ("actor_rollout_ref.actor.kl_loss_coef", cfg.kl_coef),
        ("actor_rollout_ref.actor.kl_loss_type", "low_var_kl"),
        ("actor_rollout_ref.actor.entropy_coeff", cfg.entropy_coeff),
        ("actor_rollout_ref.actor.data_loader_seed", seed),
        ("actor_rollout_ref.actor.fsdp_config.param_offload", bool(v["param_offload"])),
        ("actor_rollout_ref.actor.fsdp_config.optimizer_offload", bool(v["optimizer_offload"])),
        ("actor_rollout_ref.ref.fsdp_config.param_offload", True),
        # --- rollout: vLLM (or gentax's `hf`, verl_hf_rollout.py) servers driven by our agent loop
        ("actor_rollout_ref.rollout.name", v["rollout"]),
        ("actor_rollout_ref.rollout.mode", "async"),
        ("actor_rollout_ref.rollout.n", cfg.group_size),
        ("actor_rollout_ref.rollout.temperature", cfg.temperature),
        ("actor_rollout_ref.rollout.top_p", cfg.top_p),
        ("actor_rollout_ref.rollout.seed", seed),
        ("actor_rollout_ref.rollout.tensor_model_parallel_size", int(v["rollout_tp"])),
        ("actor_rollout_ref.rollout.gpu_memory_utilization", float(v["gpu_memory_utilization"])),
        ("actor_rollout_ref.rollout.max_model_len", seq_len),
        ("actor_rollout_ref.rollout.max_num_batched_tokens", max(8192, seq_len)),
        ("actor_rollout_ref.rollout.calculate_log_probs", True),
        ("actor_rollout_ref.rollout.val_kwargs.temperature", cfg.val_temperature),
        ("actor_rollout_ref.rollout.val_kwargs.top_p", cfg.top_p),
        ("actor_rollout_ref.rollout.val_kwargs.do_sample", True),
        ("actor_rollout_ref.rollout.val_kwargs.n", 1),
        ("actor_rollout_ref.rollout.agent.default_agent_loop", AGENT_NAME),
        ("actor_rollout_ref.rollout.agent.agent_loop_config_path", str(AGENT_LOOPS_YAML)),
        # --- processes verl starts (each a Ray worker importing verl), sized from the batch and the
        # GPUs, not verl's 8 of each: agent-loop workers from the step's trajectories; no reward worker
        # (verl's score the episodes an agent loop left unscored; EnvStepAgentLoop scores every
        # one); TransferQueue's storage units one per GPU, at most verl's 8
        ("actor_rollout_ref.rollout.agent.num_workers",
         agent_loop_workers(cfg.tasks_per_step * cfg.group_size, int(v["agent_workers"]))),
        ("reward.num_workers", 0),
        ("transfer_queue.backend.SimpleStorage.num_data_storage_units", min(8, int(v["nnodes"]) * int(v["n_gpus_per_node"]))),
        # Ray without its dashboard's head modules (10 processes that no job reads)
        ("+ray_kwargs.ray_init.include_dashboard", False),
        # --- trainer: V1, our registered sync trainer, checkpoints + auto resume
        ("trainer.use_v1", True),
        ("trainer.v1.trainer_mode", TRAINER_MODE),
        ("trainer.nnodes", int(v["nnodes"])),
        ("trainer.n_gpus_per_node", int(v["n_gpus_per_node"])),
        ("trainer.total_training_steps", end_step),
        ("trainer.total_epochs", end_step),  # one epoch per step (see module doc)
        ("trainer.save_freq", cfg.save_every),
        ("trainer.resume_mode", "auto"),
        ("trainer.default_local_dir", str(run_dir / VERL_DIR)),
        ("trainer.max_actor_ckpt_to_keep", 1),
        ("trainer.checkpoint_callback_class", "gentax.train.verl_agent.ExportCheckpoint"),
        ("trainer.test_freq", cfg.val_every if cfg.val_every and cfg.val_tasks else -1),
        ("trainer.val_before_train", bool(cfg.val_every and cfg.val_tasks)),
        # --- tracking: verl's own logger, same names as the local engine (gentax.train.tracking)
        ("trainer.logger", gtracking.verl_logger(track)),
        ("trainer.project_name", track["project"]),
        ("trainer.experiment_name", gtracking.experiment_name(run.train_domain, run.variant_label, seed)),
    ]
    pairs += [(f"+ray_kwargs.ray_init.runtime_env.env_vars.{k}", v) for k, v in gtracking.verl_env(track, run_dir).items()]
    # Ray workers (agent loops, the trainer) must import gentax: put this checkout on their path
    package_root = str(Path(__file__).resolve().parents[2])
    python_path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    pairs.append(("+ray_kwargs.ray_init.runtime_env.env_vars.PYTHONPATH", python_path))
    # every verl process imports gentax's plugin on `import verl`: rollout.name=hf resolves there
    plugin_var, plugin_module = PLUGIN_ENV
    pairs.append((f"+ray_kwargs.ray_init.runtime_env.env_vars.{plugin_var}", plugin_module))
    overrides = [f"{key}={_hydra_value(value)}" for key, value in pairs]
    run_fields = settings.pop("run")  # one override per field: gentax.run.<field> (readable, printed one by one)
    overrides += [f"+gentax.run.{key}={_hydra_value(value)}" for key, value in run_fields.items()]
    overrides += [f"+gentax.{key}={_hydra_value(value)}" for key, value in settings.items()]
    return overrides + [str(o) for o in v.get("overrides", [])]


_PLAIN = re.compile(r"^[A-Za-z0-9_./:+\-]*$")


def _hydra_value(value: Any) -> str:
    """A Python value as a Hydra override literal (strings quoted when they need it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_hydra_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if text and _PLAIN.match(text) and text not in ("true", "false", "null") and not _is_number(text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def compose_verl_config(overrides: list[str]):
    """verl's ``ppo_trainer`` config composed with ``overrides`` (Hydra, as verl's own CLI does)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="verl.trainer.config", version_base=None):
            return compose(config_name="ppo_trainer", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"verl config does not compose: {exc}") from exc


def validate_verl_config(config) -> None:
    """verl's own ``validate_config`` (batch-size divisibility, mutually exclusive options...)."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    try:
        with contextlib.redirect_stdout(sys.stderr):  # verl prints its verdict; stdout is for --print-config
            validate_config(config=config, use_reference_policy=need_reference_policy(config),
                            use_critic=need_critic(config))
    except (AssertionError, ValueError) as exc:
        raise ConfigError(f"verl rejects the config: {exc}") from exc


def task_rows(cfg: RLConfig, run: RunSpec) -> dict[str, list[dict[str, Any]]]:
    """The dataset rows: ``train`` has one row per group slot (the agent loop draws each step's
    task seed and, for a mixture, its domain from the run's schedule: ``runs.task_seed``,
    ``runs.step_task_domains``); ``eval`` has ``val_tasks`` held-out tasks of each training domain.
    Every row carries its domain (train rows: the run's one domain, or "" for a mixture, where the
    domain changes per step)."""

    def row(split: str, slot: int, domain: str, task_seed: int) -> dict[str, Any]:
        return {
            "data_source": f"gentax/{domain or run.train_domain}",
            "agent_name": AGENT_NAME,
            # the agent loop ignores the prompt: it builds each step's prompt from the env
            "prompt": [{"role": "user", "content": f"{domain or run.train_domain} {split} slot {slot}"}],
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": {"index": slot, "slot": slot, "split": split, "domain": domain, "task_seed": task_seed},
        }

    single = run.train[0][0] if len(run.train) == 1 else ""
    train = [row("train", slot, single, -1) for slot in range(cfg.tasks_per_step)]
    n_val = max(cfg.val_tasks, 1)
    val = [row("eval", k * n_val + slot, domain, runs.task_seed(run.seed, 0, slot))
           for k, domain in enumerate(run.weights) for slot in range(n_val)]
    return {"train": train, "eval": val}


def write_task_files(run_dir: str | Path, cfg: RLConfig, run: RunSpec) -> tuple[Path, Path]:
    """The train parquet and the validation parquet (``task_rows``)."""
    import pandas as pd

    from gentax.io import atomic_path

    folder = Path(run_dir) / runs.VERL_DATA
    folder.mkdir(parents=True, exist_ok=True)
    train, val = folder / "train.parquet", folder / "val.parquet"
    rows = task_rows(cfg, run)
    for path, data in ((train, rows["train"]), (val, rows["eval"])):
        with atomic_path(path) as tmp:
            pd.DataFrame(data).to_parquet(tmp, index=False)
    return train, val


def build_config(cfg: RLConfig, *, model_path: str, run: RunSpec, run_dir: str | Path, end_step: int,
                 write_data: bool = True, tracking: dict[str, Any] | None = None):
    """Compose (and validate) the full verl config of a run; writes the task parquet files."""
    if write_data:
        train_file, val_file = write_task_files(run_dir, cfg, run)
    else:
        train_file = val_file = Path(run_dir) / runs.VERL_DATA / "train.parquet"
    overrides = verl_overrides(cfg, model_path=model_path, run=run, run_dir=run_dir, end_step=end_step,
                               train_file=train_file, val_file=val_file, tracking=tracking)
    config = compose_verl_config(overrides)
    validate_verl_config(config)
    return config


def verl_checkpoint_steps(run_dir: str | Path) -> list[int]:
    """Steps of the FSDP checkpoints verl left in RUN_DIR/verl (only the tracked one is resumable)."""
    root = Path(run_dir) / VERL_DIR
    if not root.is_dir():
        return []
    return sorted(int(p.name.split("_")[-1]) for p in root.glob("global_step_*") if p.name.split("_")[-1].isdigit())


def export_pending(run_dir: str | Path) -> list[int]:
    """Export every FSDP checkpoint of the run that has no intact HF folder yet (after a kill, or a
    damaged one: named on stdout, then exported again)."""
    done = set(runs.checkpoint_steps(run_dir))
    exported = []
    for step in verl_checkpoint_steps(run_dir):
        actor = Path(run_dir) / VERL_DIR / f"global_step_{step}" / "actor"
        if step in done and (problem := runs.checkpoint_problem(run_dir, step)):
            print(f"gentax: {runs.checkpoint_dir(run_dir, step)} is damaged ({problem}); exporting it again from {actor}")
            done.discard(step)
        if step not in done and (actor / "fsdp_config.json").is_file():
            export_checkpoint(actor, runs.checkpoint_dir(run_dir, step))
            exported.append(step)
    return exported


def _task_runner_class():
    """verl's V1 TaskRunner, first importing our verl pieces in the Ray actor that runs the trainer."""
    import ray
    from verl.trainer.main_ppo import TaskRunnerV1

    class GentaxTaskRunner(TaskRunnerV1.__ray_actor_class__):
        def run(self, config):
            import gentax.train.verl_agent  # noqa: F401  registers trainer "gentax_sync"
            import gentax.train.verl_plugin  # noqa: F401  registers rollout "hf"

            return super().run(config)

    return ray.remote(GentaxTaskRunner)


def train_verl(cfg: RLConfig, *, init: str, run: RunSpec, start: int, end: int, run_dir: str | Path,
               print_config: bool = False, tracking: dict[str, Any] | None = None) -> int:
    """Run (or resume/extend) one verl training run of ``run``; see the module docstring."""
    run_dir = Path(run_dir)
    if not print_config:  # before the task parquets are written: a stale run's folder is emptied
        run_dir.mkdir(parents=True, exist_ok=True)
        identity = {"engine": "verl", "init": str(init), "domain": run.train_domain, "variant": run.variant_label,
                    "seed": run.seed, "run_spec": run.to_dict()}
        runs.check_identity(run_dir, identity, cfg.to_dict(), start)
    config = build_config(cfg, model_path=init, run=run, run_dir=run_dir, end_step=end, write_data=not print_config,
                          tracking=tracking)
    if print_config:
        from omegaconf import OmegaConf

        print(OmegaConf.to_yaml(config))
        return 0
    export_pending(run_dir)  # a kill between save and export leaves an FSDP checkpoint behind
    latest = max(verl_checkpoint_steps(run_dir) + runs.checkpoint_steps(run_dir), default=0)
    if latest >= end:
        print(f"gentax: {run_dir} already holds step {latest}; nothing to train for --steps {start}:{end}")
        return 0
    runs.resume_step(run_dir, start, end, available=[latest] if latest else [])  # verl resumes from `latest`
    from verl.trainer.main_ppo import run_ppo

    import gentax.train.verl_plugin  # noqa: F401  rollout "hf" in the driver too

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    run_ppo(config, task_runner_class=_task_runner_class())
    export_pending(run_dir)
    return 0

