"""GRPO for step-wise multi-turn agents: all of the algorithm's math in one file, plain numpy/torch,
shared by the local engine, the verl engine's custom pieces and the tests (docs/training.md section 2).

A *sample* is one step of an episode (that step's prompt -> the response); a *group* is the
trajectories of one task. A trajectory's *outcome* is the sum of its env rewards on valid steps; an
invalid step carries ``-invalid_penalty`` on its own sample only.

- ``group_advantages``: GRPO's outcome normalisation, identical to verl's
  ``compute_grpo_outcome_advantage`` (unbiased std; mean 0 / std 1 for a group of one).
- ``step_advantages``: per-sample advantages. ``mode`` ``"trajectory"`` (the paper's): each
  trajectory's outcome counts once in its group's statistics and every step gets its advantage;
  ``"cross_step"`` (verl-agent's default): each sample's score is normalised over all samples of its
  group. ``penalty_placement`` ``"after_normalisation"`` (the study's) adds ``-invalid_penalty`` to
  the normalised advantage, in advantage units; ``"in_return"`` (verl-agent's reading) puts it in
  the sample's score before normalising (with ``trajectory``, each trajectory counts with its first
  sample's score), so a group of equal outcomes (std 0) divides a later penalty by ``eps``.
- ``grpo_loss``: per response token, PPO's clipped ratio with verl's dual clip, plus ``kl_coef`` x
  the k3 KL estimate to the reference (verl's ``low_var_kl``), minus ``entropy_coeff`` x the token
  entropy, as a token mean over the mini-batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ADVANTAGE_MODES = ("trajectory", "cross_step")
PENALTY_PLACEMENTS = ("after_normalisation", "in_return")


def group_advantages(scores, group_ids, eps: float = 1e-6, *, norm_by_std: bool = True) -> np.ndarray:
    """GRPO advantage of each score within its group, in input order: ``(s - mean_g) / (std_g + eps)``
    with the unbiased std (a group of one: mean 0, std 1, as in verl); ``norm_by_std=False``: ``s - mean_g``."""
    return normalise_in_groups(scores, group_ids, scores, group_ids, eps, norm_by_std=norm_by_std)


def normalise_in_groups(values, value_groups, ref_scores, ref_groups, eps: float = 1e-6, *,
                        norm_by_std: bool = True) -> np.ndarray:
    """``(v - mean_g) / (std_g + eps)`` for each value, with mean/std of its group's REFERENCE scores (as
    ``group_advantages``); a value whose group has no reference score is a ``ValueError``."""
    values = np.asarray(values, dtype=np.float64)
    ref_scores = np.asarray(ref_scores, dtype=np.float64)
    value_groups, ref_groups = np.asarray(value_groups), np.asarray(ref_groups)
    for name, a, g in (("scores", values, value_groups), ("reference scores", ref_scores, ref_groups)):
        if a.ndim != 1 or g.shape != a.shape:
            raise ValueError(f"{name} and their group ids must be 1-D of equal length, got {a.shape} and {g.shape}")
    out = np.empty_like(values)
    for group in np.unique(value_groups):
        s = ref_scores[ref_groups == group]
        if not len(s):
            raise ValueError(f"group {group!r} has no reference score")
        mean, std = (s.mean(), s.std(ddof=1)) if len(s) > 1 else (0.0, 1.0)
        members = value_groups == group
        out[members] = (values[members] - mean) / (std + eps) if norm_by_std else values[members] - mean
    return out


def step_advantages(outcomes, traj_group_ids, step_traj, step_invalid, *, mode: str, invalid_penalty: float,
                    penalty_placement: str, eps: float = 1e-6, norm_by_std: bool = True) -> np.ndarray:
    """One advantage per step sample (module docstring: the modes and placements). outcomes[i],
    traj_group_ids[i]: trajectory i's outcome and group; step_traj[k], step_invalid[k]: sample k's
    trajectory and whether its action was invalid. A trajectory's samples come in step order."""
    if mode not in ADVANTAGE_MODES:
        raise ValueError(f"unknown advantage mode {mode!r}; valid: {', '.join(ADVANTAGE_MODES)}")
    if penalty_placement not in PENALTY_PLACEMENTS:
        raise ValueError(f"unknown penalty placement {penalty_placement!r}; valid: {', '.join(PENALTY_PLACEMENTS)}")
    outcomes = np.asarray(outcomes, dtype=np.float64)
    traj_group_ids = np.asarray(traj_group_ids)
    step_traj = np.asarray(step_traj, dtype=np.int64)
    penalty = -float(invalid_penalty) * np.asarray(step_invalid, dtype=np.float64)
    step_groups = traj_group_ids[step_traj]
    if penalty_placement == "after_normalisation":
        if mode == "trajectory":
            return group_advantages(outcomes, traj_group_ids, eps, norm_by_std=norm_by_std)[step_traj] + penalty
        return group_advantages(outcomes[step_traj], step_groups, eps, norm_by_std=norm_by_std) + penalty
    scores = outcomes[step_traj] + penalty
    if mode == "cross_step":
        return group_advantages(scores, step_groups, eps, norm_by_std=norm_by_std)
    _, first = np.unique(step_traj, return_index=True)  # each trajectory's first sample
    return normalise_in_groups(scores, step_groups, scores[first], step_groups[first], eps, norm_by_std=norm_by_std)


# ---- token-level loss (torch) ------------------------------------------------------------------


@dataclass(frozen=True)
class LossConfig:
    """The loss's settings, no defaults: the study's are its RL config's (``from_rl``)."""

    clip_low: float
    clip_high: float
    clip_ratio_c: float  # dual clip: bounds the loss of negative-advantage tokens
    kl_coef: float  # low-variance KL (k3) to the reference policy
    entropy_coeff: float  # entropy bonus (verl's actor.entropy_coeff); 0: no entropy term

    @classmethod
    def from_rl(cls, rl) -> "LossConfig":
        """The loss of an RL config (``gentax.train.config.RLConfig``): PPO's clip on both sides."""
        return cls(clip_low=rl.clip_ratio, clip_high=rl.clip_ratio, clip_ratio_c=rl.clip_ratio_c, kl_coef=rl.kl_coef,
                   entropy_coeff=rl.entropy_coeff)


def masked_sum(x, mask):
    return (x * mask).sum()


def kl_k3(logprobs, ref_logprobs):
    """Low-variance KL estimate per token (Schulman's k3), clamped to [-10, 10] as in verl."""
    import torch

    log_ratio = torch.clamp(ref_logprobs - logprobs, -20.0, 20.0)
    return torch.clamp(torch.exp(log_ratio) - log_ratio - 1.0, -10.0, 10.0)


def clipped_policy_loss(logprobs, old_logprobs, advantages, cfg: LossConfig):
    """Per-token PPO loss with verl's dual clip; returns (loss, clipped) tensors of the input shape."""
    import torch

    ratio = torch.exp(torch.clamp(logprobs - old_logprobs, -20.0, 20.0))
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
    loss = torch.maximum(unclipped, clipped)
    dual = torch.minimum(loss, -advantages * cfg.clip_ratio_c)
    loss = torch.where(advantages < 0, dual, loss)
    return loss, (clipped > unclipped).float()


def grpo_loss(logprobs, old_logprobs, ref_logprobs, advantages, mask, num_tokens: float, cfg: LossConfig,
              entropy=None):
    """Token-mean GRPO loss of one (micro-)batch and its statistics: ``(loss, sums)``, ``sums`` the
    token sums of pg_loss, kl, clipfrac and ratio. Tensors are [batch, response_len], ``advantages``
    [batch] or per token; ``num_tokens`` counts the whole mini-batch's response tokens, so micro-batch
    losses add up to its token mean. ``entropy`` (per token, with its graph) is needed when
    ``cfg.entropy_coeff > 0``."""
    import torch

    mask = mask.to(logprobs.dtype)
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logprobs)
    pg, clipped = clipped_policy_loss(logprobs, old_logprobs, advantages, cfg)
    kl = kl_k3(logprobs, ref_logprobs)
    per_token = pg + cfg.kl_coef * kl
    if cfg.entropy_coeff:
        if entropy is None:
            raise ValueError("entropy_coeff > 0 needs the per-token entropy")
        per_token = per_token - cfg.entropy_coeff * entropy
    loss = masked_sum(per_token, mask) / num_tokens
    with torch.no_grad():
        sums = {
            "pg_loss": masked_sum(pg, mask).item(),
            "kl": masked_sum(kl, mask).item(),
            "clipfrac": masked_sum(clipped, mask).item(),
            "ratio": masked_sum(torch.exp(logprobs - old_logprobs), mask).item(),
        }
    return loss, sums
