"""Engine ``local``: step-wise multi-turn GRPO on one machine (CPU, or one GPU) with torch
(docs/training.md section 3). Per training step k: ``collect`` plays ``group_size`` trajectories of
each of the step's tasks with the current policy (every env step one training sample);
``grpo.step_advantages``; old and reference log-probs recomputed under the update's autocast (each
skipped where it equals the current policy's); ``epochs_per_step`` passes of AdamW mini-batch
updates (``update_policy``); the metrics.csv row (with digests of the tokens trained on and of the
weights, so two runs name the first step where they part), then every ``save_every`` steps a
checkpoint (``Policy.save``): the row first, so a kill at any point resumes with every kept row.

All randomness derives from (run seed, step), so a resumed or extended run repeats exactly what an
uninterrupted one would. Parameters and optimizer are float32 (bf16 weights cannot hold small
updates); rollouts sample a bf16 copy under bf16 autocast.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gentax import io as gio
from gentax import progress as gprogress
from gentax.agent.filler import FillerSpec, mean_think_tokens
from gentax.agent.parse import think_text
from gentax.domains import domain_class
from gentax.dtype import (attention_implementation, compute_dtype, deterministic_attention, deterministic_kernels,
                          strict_determinism)
from gentax.errors import ConfigError, GentaxError
from gentax.io import atomic_path, write_json
from gentax.rollout.collector import CollectConfig, EnvPools
from gentax.rollout.generators import HFGenerator, SamplingParams, default_batch_size, derive_seed, require_model_folder
from gentax.runspec import collect_fields
from gentax.train import grpo, runs
from gentax.train.config import RLConfig
from gentax.train.tracking import TrackedMetricsLog, experiment_name  # metrics.csv + TensorBoard/wandb/MLflow

log = logging.getLogger(__name__)


@dataclass
class Samples:
    """The training samples of one step: token ids, advantages, and per-sample bookkeeping."""

    prompts: list[list[int]]
    responses: list[list[int]]
    advantages: np.ndarray
    truncated_prompts: int = 0

    def __len__(self) -> int:
        return len(self.responses)

    @staticmethod
    def concat(parts: list["Samples"]) -> "Samples":
        if len(parts) == 1:
            return parts[0]
        return Samples([p for part in parts for p in part.prompts], [r for part in parts for r in part.responses],
                       np.concatenate([part.advantages for part in parts]), sum(part.truncated_prompts for part in parts))

    def subset(self, rows) -> "Samples":
        return Samples([self.prompts[i] for i in rows], [self.responses[i] for i in rows], self.advantages[rows],
                       self.truncated_prompts)


def samples_from_rollouts(rollouts, cfg: RLConfig) -> Samples:
    """Step samples of a ``collect`` result, with their GRPO advantages."""
    steps = rollouts.steps_frame()
    episodes = rollouts.episodes_frame()
    traj_row = {int(t): i for i, t in enumerate(episodes["traj_id"])}
    valid = steps["valid"].to_numpy(bool)
    outcomes = np.zeros(len(episodes))
    np.add.at(outcomes, [traj_row[int(t)] for t in steps["traj_id"][valid]], steps["reward"].to_numpy(float)[valid])
    step_traj = np.array([traj_row[int(t)] for t in steps["traj_id"]], dtype=np.int64)
    advantages = grpo.step_advantages(outcomes, episodes["group_id"].to_numpy(), step_traj, ~valid,
                                      mode=cfg.advantage_normalisation, invalid_penalty=cfg.invalid_penalty,
                                      penalty_placement=cfg.invalid_penalty_placement)
    prompts, responses, keep, truncated = [], [], [], 0
    for i, tokens in enumerate(rollouts.tokens):
        if not tokens.response_ids:  # nothing the policy produced: nothing to train on
            continue
        prompt = list(tokens.prompt_ids)
        if len(prompt) > cfg.max_prompt_tokens:
            prompt, truncated = prompt[-cfg.max_prompt_tokens :], truncated + 1
        prompts.append(prompt)
        responses.append(list(tokens.response_ids)[: cfg.max_new_tokens])
        keep.append(i)
    return Samples(prompts, responses, advantages[keep], truncated)


def autocast_dtype(setting: str, device_type: str):
    """The local engine's autocast dtype (None: none): ``bf16``, ``none``, or ``auto`` = bf16 where
    ``gentax.dtype.compute_dtype`` picks it for the device (a bf16 GPU, a CPU with native bf16)."""
    import torch

    if setting == "auto":
        return torch.bfloat16 if compute_dtype("auto", device_type) == "bfloat16" else None
    return torch.bfloat16 if setting == "bf16" else None


class Policy:
    """The trained model (optionally LoRA-wrapped), its tokenizer, and the reference policy."""

    def __init__(self, cfg: RLConfig, init: str | Path, resume_dir: Path | None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.cfg = cfg
        self.init = str(init)
        self.device = torch.device("cuda" if cfg.device == "auto" and torch.cuda.is_available() else
                                   ("cpu" if cfg.device == "auto" else cfg.device))
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ConfigError("RL config device=cuda but no CUDA device is available")
        deterministic_kernels(self.device)  # before the first CUDA product: the same bits in two runs
        dtype = getattr(torch, cfg.dtype)
        self.autocast_dtype = autocast_dtype(cfg.autocast, self.device.type)
        self._rollout_copy = None  # the bf16 weights rollouts sample from (generator())
        load = {"dtype": dtype}
        with gio.reading(self.init, "initial policy", "delete it and rerun the job that wrote it"):
            self.tokenizer = AutoTokenizer.from_pretrained(self.init)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        weights = resume_dir if resume_dir is not None and not cfg.lora_rank else self.init
        with gio.reading(weights, "checkpoint" if weights == resume_dir else "initial policy",
                         runs.resume_fix(resume_dir) if weights == resume_dir else "delete it and rerun the job that wrote it"):
            model = AutoModelForCausalLM.from_pretrained(weights, **load)
        model = model.to(self.device)
        self.reference = None
        if cfg.lora_rank:
            from peft import LoraConfig, PeftModel, get_peft_model

            if resume_dir is not None:
                adapter = resume_dir / runs.STATE_DIR / "adapter"
                with gio.reading(adapter, "LoRA adapter", runs.resume_fix(resume_dir)):
                    model = PeftModel.from_pretrained(model, adapter, is_trainable=True)
            else:
                model = get_peft_model(model, LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=0.0,
                                                         target_modules="all-linear", task_type="CAUSAL_LM"))
        elif cfg.kl_coef > 0:
            self.reference = AutoModelForCausalLM.from_pretrained(self.init, **load).to(self.device).eval()
            self.reference.requires_grad_(False)
        self.model = model

    def trainable_parameters(self):
        return [p for p in self.model.parameters() if p.requires_grad]

    @contextlib.contextmanager
    def reference_model(self):
        """The reference policy: the frozen init copy, or the LoRA model with adapters off."""
        if self.cfg.lora_rank:
            with self.model.disable_adapter():
                yield self.model
        else:
            yield self.reference

    def autocast(self):
        import torch

        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def generator(self):
        """A generator sampling from the current policy. Under bf16 autocast with full fine-tuning it
        samples a bf16 copy of the weights, refreshed from the float32 master weights at every call
        (decoding reads half the bytes; autocast over float32 weights is barely faster than float32).
        With LoRA, or without autocast, it samples the policy itself."""
        import torch

        size = max(self.cfg.micro_batch_size, default_batch_size(self.device))
        if self.autocast_dtype is None or self.cfg.lora_rank:
            return HFGenerator.from_model(self.model, self.tokenizer, max_batch_size=size, autocast_dtype=self.autocast_dtype)
        if self._rollout_copy is None:
            self._rollout_copy = copy.deepcopy(self.model).eval().requires_grad_(False)
            for param in self._rollout_copy.parameters():  # parameters only: buffers (rotary) stay float32
                param.grad = None
                param.data = param.data.to(self.autocast_dtype)
            # the kernel gentax.dtype picks for bf16 sampling; the trained model keeps sdpa, whose
            # backward does not store every layer's attention matrix (eager's does: GBs on CPU)
            self._rollout_copy.set_attn_implementation(attention_implementation("bfloat16", self.device.type))
        else:
            with torch.no_grad():
                for target, source in zip(self._rollout_copy.parameters(), self.model.parameters()):
                    target.copy_(source)
        return HFGenerator.from_model(self._rollout_copy, self.tokenizer, max_batch_size=size)

    def logprobs(self, model, prompts, responses, *, with_entropy: bool = False, entropy_grad: bool = False):
        """Per-token log-probs, mask (and entropies, with their graph only with ``entropy_grad``) of
        ``responses`` given ``prompts``: [B, R] tensors. Prompts are left-padded and responses
        right-padded, so only the last R+1 positions go through the LM head."""
        import torch

        from gentax.rollout import cpu_inference

        n = len(prompts)
        width_p, width_r = max(map(len, prompts)), max(map(len, responses))
        ids = torch.full((n, width_p + width_r), self.pad_id, dtype=torch.long)
        attention = torch.zeros((n, width_p + width_r), dtype=torch.long)
        for row, (p, r) in enumerate(zip(prompts, responses)):
            ids[row, width_p - len(p) : width_p + len(r)] = torch.tensor(p + r, dtype=torch.long)
            attention[row, width_p - len(p) : width_p + len(r)] = 1
        ids, attention = ids.to(self.device), attention.to(self.device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        with self.autocast(), cpu_inference.attention_for(model, n, ids.shape[1], self.autocast_dtype):
            out = model(input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=False,
                        logits_to_keep=width_r + 1)
        logits = out.logits[:, :width_r, :].float() / self.cfg.temperature
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, ids[:, width_p:, None]).squeeze(-1)
        mask = attention[:, width_p:].float()
        entropy = None
        if with_entropy:
            with contextlib.nullcontext() if entropy_grad else torch.no_grad():
                entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logp, mask, entropy

    def save(self, target: Path, optimizer, step: int) -> None:
        """Write checkpoint ``target`` atomically (manifests last): an HF folder (full weights, or with
        LoRA the merged model or the peft adapter: ``lora_save``) and ``runs.STATE_DIR``, what a resume
        needs beyond the weights (optimizer and RNG state, the step, the LoRA adapter)."""
        import torch

        with atomic_path(target) as tmp:
            if self.cfg.lora_rank and self.cfg.lora_save == "merged":
                copy.deepcopy(self.model).merge_and_unload().save_pretrained(tmp)
            else:  # full weights, or the peft adapter (adapter_config.json names the base path)
                self.model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            state = tmp / runs.STATE_DIR
            state.mkdir()
            # through Python file objects: a full disk is an OSError (ENOSPC) naming the file, where torch's
            # own writer of a path says only "inline_container.cc ... unexpected pos" (gentax.io.write_failure)
            with open(state / "optimizer.pt", "wb") as fh:
                torch.save(optimizer.state_dict(), fh)
            with open(state / "rng.pt", "wb") as fh:
                torch.save({"torch": torch.get_rng_state()}, fh)
            if self.cfg.lora_rank:
                self.model.save_pretrained(state / "adapter")
            write_json(state / "state.json", {"step": step, "init": self.init, "lora_rank": self.cfg.lora_rank})
            gio.write_manifest(state)
            gio.write_manifest(tmp, exclude=(runs.STATE_DIR,))  # last: the state is pruned on its own


def _chunks(items: list[int], size: int):
    for lo in range(0, len(items), size):
        yield items[lo : lo + size]


def _pad(rows, width: int, device):
    import torch

    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out.to(device)


def frozen_logprobs(policy: Policy, model, samples: Samples, order: list[int], micro: int):
    """Per-sample 1-D tensors of ``model``'s log-probs (no grad), in micro-batches taken in ``order``."""
    import torch

    out = [None] * len(samples)
    with torch.no_grad():
        for idx in _chunks(order, micro):
            logp, _, _ = policy.logprobs(model, [samples.prompts[i] for i in idx], [samples.responses[i] for i in idx])
            for row, i in enumerate(idx):
                out[i] = logp[row, : len(samples.responses[i])].cpu()
    return out


def reference_logprobs(policy: Policy, samples: Samples, micro: int):
    """Per-sample 1-D tensors of reference log-probs (no grad)."""
    with policy.reference_model() as ref:
        return frozen_logprobs(policy, ref, samples, sorted(range(len(samples)), key=lambda i: len(samples.prompts[i])),
                               micro)


def micro_batch_backward(policy: Policy, prompts, responses, advantages, tokens: float, loss_cfg: grpo.LossConfig, *,
                         old=None, ref=None, entropy_grad: bool = False):
    """One micro-batch's forward and backward of the update, its gradients added to the model's (the
    GRPO loss over ``tokens``, the mini-batch's response tokens; deterministic kernels:
    ``gentax.dtype``). ``old`` / ``ref``: per-sample log-prob rows; None: this pass's own, detached
    (the policy still is the old one; the reference is the old one). Returns (logp, mask, entropy,
    loss, sums)."""
    import torch

    with deterministic_attention(policy.device):  # a kernel whose backward repeats (gentax.dtype)
        logp, mask, entropy = policy.logprobs(policy.model, prompts, responses, with_entropy=True, entropy_grad=entropy_grad)
    width = logp.shape[1]
    old_t = logp.detach() if old is None else _pad(old, width, logp.device)
    ref_t = old_t if ref is None else _pad(ref, width, logp.device)
    adv = torch.tensor(advantages, dtype=torch.float32, device=logp.device)
    loss, sums = grpo.grpo_loss(logp, old_t, ref_t, adv, mask, tokens, loss_cfg, entropy=entropy)
    with strict_determinism(logp.device):  # the attention backward's deterministic kernel (gentax.dtype)
        loss.backward()
    return logp, mask, entropy, loss, sums


def update_policy(policy: Policy, optimizer, samples: Samples, cfg: RLConfig, rng: np.random.Generator, *,
                  at_reference: bool = False) -> dict[str, float]:
    """``epochs_per_step`` x mini-batch AdamW updates on the GRPO loss; returns token-mean stats.
    ``at_reference``: the policy still IS the reference (step 1), so no reference forward."""
    import torch

    model, micro = policy.model, cfg.micro_batch_size
    loss_cfg = grpo.LossConfig.from_rl(cfg)
    n = len(samples)
    updates = cfg.epochs_per_step * -(-n // cfg.mini_batch_size)
    zeros = [torch.zeros(len(r)) for r in samples.responses]
    same_as_old = cfg.kl_coef > 0 and at_reference
    ref = zeros if cfg.kl_coef == 0 or same_as_old else reference_logprobs(policy, samples, micro)
    old = None
    if updates > 1:  # the policy moves between updates: freeze its log-probs before the first one
        model.eval()
        old = frozen_logprobs(policy, model, samples, list(range(n)), micro)
    model.train()
    params = policy.trainable_parameters()
    totals = {"pg_loss": 0.0, "kl": 0.0, "clipfrac": 0.0, "ratio": 0.0, "entropy": 0.0, "loss": 0.0, "tokens": 0.0}
    grad_norms, skipped = [], 0
    for _ in range(cfg.epochs_per_step):
        order = rng.permutation(n).tolist()
        for mini in _chunks(order, cfg.mini_batch_size):
            tokens = float(sum(len(samples.responses[i]) for i in mini))
            optimizer.zero_grad(set_to_none=True)
            for idx in _chunks(sorted(mini, key=lambda i: len(samples.prompts[i]) + len(samples.responses[i])), micro):
                _, mask, entropy, loss, sums = micro_batch_backward(
                    policy, [samples.prompts[i] for i in idx], [samples.responses[i] for i in idx],
                    samples.advantages[idx], tokens, loss_cfg, old=None if old is None else [old[i] for i in idx],
                    ref=None if same_as_old else [ref[i] for i in idx], entropy_grad=cfg.entropy_coeff > 0)
                for key, value in sums.items():
                    totals[key] += value
                totals["entropy"] += float((entropy.detach() * mask).sum())
                totals["loss"] += float(loss.detach()) * tokens
                totals["tokens"] += float(mask.sum())
            norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip))
            if not math.isfinite(norm):  # as verl's actor: a non-finite gradient is dropped, never applied
                skipped += 1
                log.warning("update skipped: gradient norm %s (an overflow, e.g. in bf16); the weights are unchanged", norm)
                optimizer.zero_grad(set_to_none=True)
                continue
            grad_norms.append(norm)
            optimizer.step()
    model.eval()
    count = max(totals.pop("tokens"), 1.0)
    stats = {key: value / count for key, value in totals.items()}
    stats.update(grad_norm=float(np.mean(grad_norms)) if grad_norms else float("nan"), updates=float(len(grad_norms)),
                 skipped_updates=float(skipped))
    return stats


def _filler_spec(cfg: RLConfig, run, step: int):
    """The FillerSpec of training step ``step`` of a run in thinking mode filler (else None)."""
    if run.think != "filler":
        return None
    reference = cfg.filler.get("reference")
    if not reference:
        raise ConfigError(f"RL config filler.reference: the filler arm ({run.variant}) needs the matching thinking "
                          "run's folder")
    tokens, texts = runs.think_reference(reference, step)
    return FillerSpec(tokens=tokens, source=cfg.filler["source"], token=cfg.filler["token"], texts=texts)


def _collect_config(cfg: RLConfig, run, *, domain: str, split: str, seed: int, group_size: int, temperature: float,
                    filler=None):
    """The collector settings of this engine's episodes: the run spec's (``runspec.collect_fields``, as
    the verl engine's) plus the engine's sampling and a filler run's forced think block (``filler``)."""
    sampling = SamplingParams(temperature=temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens, seed=seed)
    return CollectConfig(**collect_fields(run, domain, split), filler=filler, history_length=cfg.history_length,
                         group_size=group_size, sampling=sampling, num_workers=cfg.env_workers, seed=seed)


def _collect_step(policy, cfg: RLConfig, run, *, step: int, step_seed: int, run_id: str, collect,
                  filler=None) -> dict[str, Any]:
    """One step's rollouts, {domain: Rollouts}: the step's tasks split over the run's domains
    (``runs.step_task_domains``; one domain: all of them), one ``collect`` per domain."""
    weights = run.weights
    seeds = runs.step_task_seeds(run.seed, step, cfg.tasks_per_step)
    domains = runs.step_task_domains(run.seed, step, cfg.tasks_per_step, weights)
    parts = {}
    generator = policy.generator()  # once per step: a mixture's domains sample the same weights
    for domain in dict.fromkeys(domains):
        ccfg = _collect_config(cfg, run, domain=domain, split="train", seed=step_seed, group_size=cfg.group_size,
                               temperature=cfg.temperature, filler=filler)
        mine = [s for s, d in zip(seeds, domains) if d == domain]
        parts[domain] = collect(generator, mine, ccfg, run_id=run_id if len(weights) == 1 else f"{run_id}/{domain}",
                                progress=False)
    return parts


def _digests(samples: Samples, policy) -> dict[str, str]:
    """Fingerprints of a step for comparing two runs, 16 hex digits of SHA-256 each: of the samples'
    prompt and response token ids, and of the trainable weights (each tensor's elements read as
    integers of their width and summed exactly in int64 on its device: a changed bit changes it)."""
    import hashlib
    import json

    import torch

    tokens = hashlib.sha256(json.dumps([samples.prompts, samples.responses]).encode()).hexdigest()[:16]
    as_int = {4: torch.int32, 2: torch.int16, 8: torch.int64}
    sums = [int(t.detach().contiguous().view(as_int[t.element_size()]).sum(dtype=torch.int64))
            for t in policy.trainable_parameters()]
    return {"rollout_sha256": tokens, "weights_checksum": hashlib.sha256(str(sums).encode()).hexdigest()[:16]}


def _step_metrics(parts: dict[str, Any], weights: dict[str, int]) -> dict[str, float]:
    """``runs.rollout_metrics`` over all of a step's rollouts plus ``think_tokens_mean``, with
    ``runs.domain_success`` for a mixture."""
    import pandas as pd

    steps = pd.concat([r.steps_frame() for r in parts.values()], ignore_index=True)
    episodes = pd.concat([r.episodes_frame() for r in parts.values()], ignore_index=True)
    return {**runs.rollout_metrics(steps, episodes), runs.THINK_TOKENS_MEAN: mean_think_tokens(steps["think_tokens"]),
            **runs.domain_success(episodes, weights)}


def _validate(policy, cfg: RLConfig, run, *, run_id: str, collect, filler=None) -> dict[str, float]:
    """In-training validation: ``val_tasks`` held-out tasks of each training domain at the
    validation temperature, never augmented (a filler run: with this step's filler); ``val_success``
    = the mean of the domains' success rates, and per domain for a mixture (``val_success/<domain>``)."""
    rates = {}
    generator = policy.generator()
    for domain in run.weights:
        vcfg = _collect_config(cfg, run, domain=domain, split="eval", seed=derive_seed(run.seed, "val"), group_size=1,
                               temperature=cfg.val_temperature, filler=filler)
        val = collect(generator, [runs.task_seed(run.seed, 0, s) for s in range(cfg.val_tasks)], vcfg,
                      run_id=run_id if len(run.weights) == 1 else f"{run_id}/{domain}", progress=False)
        rates[domain] = float("nan") if val.success_rate is None else float(val.success_rate)
    row = {"val_success": float(np.mean(list(rates.values())))}  # the same number of tasks per domain
    if len(rates) > 1:
        row.update({f"val_success/{d}": rate for d, rate in rates.items()})
    return row


def train_local(cfg: RLConfig, *, init: str | Path, run, start: int, end: int, run_dir: str | Path,
                progress: bool = True, tracking: dict | None = None, keep: list[int] | None = None) -> int:
    """Train steps start+1..end of ``run`` (a ``gentax.runspec.RunSpec``), resuming from its newest
    checkpoint; see module doc. ``keep``: the steps whose checkpoints stay (None: all; a job spec's
    ``keep``, ``runs.prune_checkpoints``)."""
    import torch
    from tqdm.auto import tqdm

    for member in run.weights:  # a domain whose env does not import fails before any model is loaded
        domain_class(member)
    domain, variant, seed, weights = run.train_domain, run.variant_label, run.seed, run.weights
    run_dir = Path(run_dir)
    init = str(init)
    require_model_folder(init, "--init")
    run_dir.mkdir(parents=True, exist_ok=True)
    runs.check_identity(run_dir, {"engine": "local", "init": init, "domain": domain, "variant": variant, "seed": seed,
                                  "run_spec": run.to_dict()}, cfg.to_dict(), start)
    if runs.finished(run_dir, end):  # its resume state dropped when the segment ended (disk.keep_checkpoints)
        print(f"gentax: {run_dir} already holds step {end}; nothing to train for --steps {start}:{end}")
        return 0
    resume = runs.resume_step(run_dir, start, end, available=runs.intact_checkpoint(run_dir, start, end, state=True))
    if resume >= end:
        print(f"gentax: {run_dir} already holds step {resume}; nothing to train for --steps {start}:{end}")
        return 0
    resume_dir = runs.checkpoint_dir(run_dir, resume) if resume > 0 else None
    if resume_dir is not None and not (resume_dir / runs.STATE_DIR / "optimizer.pt").is_file():
        raise GentaxError(f"cannot resume from {resume_dir}: its training state ({runs.STATE_DIR}) is missing")
    policy = Policy(cfg, init, resume_dir)
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay,
                                  betas=(0.9, 0.999))
    if resume_dir is not None:
        state = resume_dir / runs.STATE_DIR
        with gio.reading(state / "optimizer.pt", "optimizer state", runs.resume_fix(resume_dir), also=(RuntimeError,)):
            saved = torch.load(state / "optimizer.pt", map_location=policy.device, weights_only=True)
        optimizer.load_state_dict(saved)
        with gio.reading(state / "rng.pt", "random state", runs.resume_fix(resume_dir), also=(RuntimeError,)):
            torch.set_rng_state(torch.load(state / "rng.pt", weights_only=True)["torch"])
        log.info("resuming %s from step %d", run_dir, resume)
        print(f"gentax: resuming {run_dir} from step {resume}")
    metrics_log = TrackedMetricsLog(run_dir, resume_from=resume, tracking=tracking, config=cfg.to_dict(),
                                    experiment=experiment_name(domain, variant, seed))
    policy.model.eval()
    bar = tqdm(total=end, initial=resume, desc=f"RL {domain}/{variant} s{seed}", unit="step", disable=not progress)
    job_progress = gprogress.job(f"RL {domain}/{variant} s{seed}", end, "step", done=resume)  # the log's line
    pools = EnvPools()  # each domain's envs start once for the job's steps, not once a step
    collect = pools.collect
    try:
        job_progress.start()
        for step in range(resume + 1, end + 1):
            started, cpu_started = time.perf_counter(), time.process_time()
            step_seed = derive_seed(seed, "rl-step", step)
            filler = _filler_spec(cfg, run, step)
            parts = _collect_step(policy, cfg, run, step=step, step_seed=step_seed,
                                  run_id=f"{run_dir.name}/step{step}", collect=collect, filler=filler)
            rollout_s = time.perf_counter() - started
            samples = Samples.concat([samples_from_rollouts(rollouts, cfg) for rollouts in parts.values()])
            if cfg.max_update_samples and len(samples) > cfg.max_update_samples:  # CPU budget knob (module doc)
                pick = np.random.default_rng(derive_seed(seed, "subsample", step)).choice(
                    len(samples), cfg.max_update_samples, replace=False)
                samples = samples.subset(np.sort(pick))
            update_started = time.perf_counter()
            stats = update_policy(policy, optimizer, samples, cfg, np.random.default_rng(derive_seed(seed, "minibatch", step)),
                                  at_reference=step == 1)
            update_s = time.perf_counter() - update_started
            if policy.device.type == "cuda":  # jobs share one GPU (profiles/gpu1): the update's peak blocks go
                torch.cuda.empty_cache()      # back to the others, not kept reserved through the next rollout
            row = {"step": step, **_step_metrics(parts, weights), **stats, **_digests(samples, policy)}
            train_tokens = sum(len(p) + len(r) for p, r in zip(samples.prompts, samples.responses))
            row.update(
                adv_mean=float(samples.advantages.mean()) if len(samples) else float("nan"),
                adv_std=float(samples.advantages.std()) if len(samples) else float("nan"),
                adv_abs_max=float(np.abs(samples.advantages).max()) if len(samples) else float("nan"),
                update_samples=float(len(samples)),
                prompts_truncated=float(samples.truncated_prompts),
                prompt_tokens_mean=float(np.mean([len(p) for p in samples.prompts])) if len(samples) else float("nan"),
                response_tokens=float(sum(r.stats.get("response_tokens", 0) for r in parts.values())),
                tokens_per_s=float(np.mean([r.stats.get("tokens_per_s", float("nan")) for r in parts.values()])),
                train_tokens_per_s=train_tokens / update_s if update_s > 0 else float("nan"),
                rollout_s=rollout_s,
                update_s=update_s,
                lr=cfg.lr,
            )
            if cfg.val_every and cfg.val_tasks and step % cfg.val_every == 0:
                row.update(_validate(policy, cfg, run, run_id=f"{run_dir.name}/val{step}", collect=collect, filler=filler))
            if filler is not None:
                row["filler_tokens"] = float(filler.tokens)
            if run.think == "on":  # the filler arm's shuffle source (runs.think_reference)
                runs.write_think_samples(run_dir, step, _think_texts(parts), run.seed)
            row["seconds"] = time.perf_counter() - started
            row["cpu_s"] = time.process_time() - cpu_started  # all threads; wall time depends on machine load
            metrics_log.append(row)  # before the checkpoint: a kill between the two then loses no row
            if step % cfg.save_every == 0 or step == end:
                policy.save(runs.checkpoint_dir(run_dir, step), optimizer, step)
                runs.prune_checkpoints(run_dir, runs.checkpoint_steps(run_dir) if keep is None else keep, upto=step,
                                       states=runs.STATES_KEPT)
            bar.update(1)
            bar.set_postfix(success=f"{row['id_success']:.2f}", invalid=f"{row['invalid_rate']:.2f}",
                            loss=f"{row['loss']:.3g}", kl=f"{row['kl']:.2g}", s=f"{row['seconds']:.0f}")
            job_progress.advance()
    finally:
        pools.close()
        job_progress.stop()
        bar.close()
        metrics_log.close()
    return 0


def _think_texts(parts: dict[str, Any]) -> list[str]:
    texts = (think_text(r) for rollouts in parts.values() for r in rollouts.steps.column("response").to_pylist())
    return [t for t in texts if t]

