"""gentax.train.grpo against verl's own functions on the same data."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from gentax.train import grpo
from gentax.train.config import load_rl_config
from rl_helpers import PAPER_RL

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
#: the paper study's advantage and loss settings (config/config.yaml's rl block as the study resolves it)
PAPER_ADVANTAGES = {"mode": PAPER_RL["advantage_normalisation"], "invalid_penalty": PAPER_RL["invalid_penalty"],
                    "penalty_placement": PAPER_RL["invalid_penalty_placement"]}
PAPER_LOSS = grpo.LossConfig.from_rl(load_rl_config(PAPER_RL))


def step_advantages(*args, **changes):
    """``grpo.step_advantages`` with the paper's settings but ``changes``."""
    return grpo.step_advantages(*args, **{**PAPER_ADVANTAGES, **changes})


def verl_grpo(scores, group_ids, eps=1e-6, norm_by_std=True):
    """verl's compute_grpo_outcome_advantage on scalar scores (reward on the last token)."""
    n = len(scores)
    rewards = torch.zeros(n, 5, dtype=torch.float32)
    rewards[:, -1] = torch.tensor(scores, dtype=torch.float32)
    mask = torch.ones(n, 5)
    adv, _ = core_algos.compute_grpo_outcome_advantage(
        rewards, mask, np.array(group_ids, dtype=object), epsilon=eps, norm_adv_by_std_in_grpo=norm_by_std
    )
    assert torch.allclose(adv, adv[:, :1].expand_as(adv))  # one value per sample
    return adv[:, 0].numpy()


CASES = {
    "group of 8, sparse 10/0 rewards": ([10, 0, 0, 10, 0, 0, 0, 0], [0] * 8),
    "16 groups of 8, random": None,  # filled below
    "groups of 1, 2 and 5": ([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0], [7, 1, 1, 2, 2, 2, 2, 2]),
    "ties: all equal (std 0)": ([0, 0, 0, 0], ["a", "a", "a", "a"]),
    "ties: all 10 in one group, mixed in another": ([10, 10, 10, 0, 10, 0.0], [0, 0, 0, 1, 1, 1]),
    "interleaved string ids, penalties": ([9.9, -0.1, 0.0, 10.0, -0.2, 0.0], ["x", "y", "x", "y", "x", "y"]),
}
_rng = np.random.default_rng(0)
CASES["16 groups of 8, random"] = (
    list(_rng.choice([0.0, 10.0], size=128) - 0.1 * _rng.integers(0, 3, size=128)),
    list(np.repeat(np.arange(16), 8)[_rng.permutation(128)]),
)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("norm_by_std", [True, False])
def test_group_advantages_equal_verl(name, norm_by_std):
    scores, groups = CASES[name]
    ours = grpo.group_advantages(scores, groups, norm_by_std=norm_by_std)
    theirs = verl_grpo(scores, groups, norm_by_std=norm_by_std)
    assert ours.shape == (len(scores),)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-4)


def test_group_advantages_properties():
    adv = grpo.group_advantages([10, 0, 0, 0], [0, 0, 0, 0])
    assert adv[0] > 0 > adv[1] and abs(adv.sum()) < 1e-9  # zero mean within a group
    assert np.all(grpo.group_advantages([5, 5, 5], [1, 1, 1]) == 0)  # std 0 -> 0, not nan
    assert grpo.group_advantages([7.0], [0])[0] == pytest.approx(7.0 / (1 + 1e-6))  # group of one
    with pytest.raises(ValueError):
        grpo.group_advantages([1, 2], [0])


def test_step_advantages_trajectory_mode():
    # two groups: trajectories 0-2 (task A), 3-4 (task B); trajectory 0 has 3 steps, one invalid
    outcomes = [10.0, 0.0, 0.0, 0.0, 0.0]
    traj_groups = ["A", "A", "A", "B", "B"]
    step_traj = [0, 0, 0, 1, 2, 2, 3, 4]
    invalid = [False, True, False, False, False, False, True, False]
    adv = step_advantages(outcomes, traj_groups, step_traj, invalid)
    traj_adv = grpo.group_advantages(outcomes, traj_groups)
    expected = traj_adv[step_traj] - 0.1 * np.array(invalid)
    np.testing.assert_allclose(adv, expected)
    # a group whose outcomes are all equal still penalises exactly the invalid step, by 0.1
    assert adv[6] == pytest.approx(-0.1) and adv[7] == 0.0


def test_step_advantages_step_mode_equals_verl_on_samples():
    # verl-agent's cross-step mode = verl's GRPO over all step samples, each scored outcome + penalty
    outcomes = np.array([10.0, 0.0, 10.0, 0.0])
    traj_groups = np.array([0, 0, 1, 1])
    step_traj = np.array([0, 0, 1, 1, 1, 2, 3, 3])
    invalid = np.array([0, 1, 0, 0, 1, 0, 0, 0], dtype=bool)
    adv = step_advantages(outcomes, traj_groups, step_traj, invalid, mode="cross_step", penalty_placement="in_return")
    np.testing.assert_allclose(
        adv, verl_grpo(outcomes[step_traj] - 0.1 * invalid, traj_groups[step_traj]), rtol=1e-5, atol=1e-4
    )
    with pytest.raises(ValueError, match="unknown advantage mode"):
        step_advantages(outcomes, traj_groups, step_traj, invalid, mode="nope")
    with pytest.raises(ValueError, match="unknown penalty placement"):
        step_advantages(outcomes, traj_groups, step_traj, invalid, penalty_placement="before")


# three tasks x 2 trajectories; task C's outcomes are equal (std 0), with an invalid second step
PLACEMENT_CASE = dict(
    outcomes=np.array([10.0, 0.0, 10.0, 10.0, 0.0, 0.0]),
    traj_groups=np.array(["A", "A", "B", "B", "C", "C"]),
    step_traj=np.array([0, 0, 0, 1, 2, 3, 3, 4, 4, 5]),
    invalid=np.array([1, 0, 1, 0, 0, 1, 0, 0, 1, 0], dtype=bool),
)


def test_penalty_after_normalisation_in_both_modes():
    c = PLACEMENT_CASE
    penalty = -0.1 * c["invalid"]
    traj = step_advantages(c["outcomes"], c["traj_groups"], c["step_traj"], c["invalid"])
    np.testing.assert_allclose(traj, verl_grpo(c["outcomes"], c["traj_groups"])[c["step_traj"]] + penalty, rtol=1e-5, atol=1e-4)
    cross = step_advantages(c["outcomes"], c["traj_groups"], c["step_traj"], c["invalid"], mode="cross_step")
    step_groups = c["traj_groups"][c["step_traj"]]
    np.testing.assert_allclose(cross, verl_grpo(c["outcomes"][c["step_traj"]], step_groups) + penalty, rtol=1e-5, atol=1e-4)
    assert traj[8] == pytest.approx(-0.1) and cross[8] == pytest.approx(-0.1)  # std-0 group: just the penalty


def test_penalty_in_return_with_trajectory_statistics_is_verl_agents_episode_norm():
    """verl-agent, compute_mean_std_cross_steps=False: each sample's score (outcome - its penalty)
    normalised by the mean/std of ONE score per trajectory: that of its first sample."""
    c = PLACEMENT_CASE
    scores = c["outcomes"][c["step_traj"]] - 0.1 * c["invalid"]
    adv = step_advantages(c["outcomes"], c["traj_groups"], c["step_traj"], c["invalid"], penalty_placement="in_return")
    first = {0: 0, 1: 3, 2: 4, 3: 5, 4: 7, 5: 9}  # trajectory -> index of its first sample
    groups = c["traj_groups"][c["step_traj"]]
    expected = []
    for k, score in enumerate(scores):
        ref = [scores[first[t]] for t in first if c["traj_groups"][t] == groups[k]]
        expected.append((score - np.mean(ref)) / (np.std(ref, ddof=1) + 1e-6))
    np.testing.assert_allclose(adv, expected)
    # the std-0 group C: the invalid second step's penalty is divided by eps (why it is not the default)
    assert adv[8] == pytest.approx(-0.1 / 1e-6, rel=1e-6)
    assert adv[7] == adv[9] == 0.0
    # no invalid step: every placement and mode gives the paper's trajectory advantages
    none = np.zeros_like(c["invalid"])
    base = step_advantages(c["outcomes"], c["traj_groups"], c["step_traj"], none)
    np.testing.assert_allclose(step_advantages(c["outcomes"], c["traj_groups"], c["step_traj"], none,
                                                    penalty_placement="in_return"), base)


def _loss_inputs(seed=0, b=6, t=9):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(b, t, generator=g) * 3
    old = logp + 0.3 * torch.randn(b, t, generator=g)  # ratios well outside [0.8, 1.2]
    ref = logp + 0.5 * torch.randn(b, t, generator=g)
    adv = torch.randn(b, generator=g) * 2
    mask = (torch.rand(b, t, generator=g) > 0.25).float()
    mask[:, 0] = 1
    return logp, old, ref, adv, mask


def test_policy_loss_equals_verl_vanilla():
    from omegaconf import OmegaConf

    logp, old, ref, adv, mask = _loss_inputs()
    cfg = dataclasses.replace(PAPER_LOSS, clip_low=0.2, clip_high=0.28, clip_ratio_c=3.0, kl_coef=0.0)
    loss, sums = grpo.grpo_loss(logp, old, ref, adv, mask, num_tokens=mask.sum().item(), cfg=cfg)
    actor_cfg = OmegaConf.create(
        {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 3.0, "global_batch_info": {}}
    )
    verl_loss, metrics = core_algos.compute_policy_loss_vanilla(
        old, logp, adv[:, None].expand_as(logp), mask, loss_agg_mode="token-mean", config=actor_cfg
    )
    assert loss.item() == pytest.approx(verl_loss.item(), rel=1e-5, abs=1e-6)
    assert sums["clipfrac"] / mask.sum().item() == pytest.approx(metrics["actor/pg_clipfrac"], rel=1e-5)
    assert metrics["actor/pg_clipfrac"] > 0  # the clip is exercised


def test_kl_equals_verl_low_var_kl_and_total_loss():
    from omegaconf import OmegaConf

    logp, old, ref, adv, mask = _loss_inputs(seed=1)
    ours = grpo.kl_k3(logp, ref)
    theirs = core_algos.kl_penalty(logp, ref, "low_var_kl")
    torch.testing.assert_close(ours, theirs)
    assert torch.all(ours >= 0)
    # total loss = verl policy loss + 0.01 * token-mean(k3), as verl's actor adds kl_loss_coef * kl_loss
    cfg = dataclasses.replace(PAPER_LOSS, kl_coef=0.01)
    loss, sums = grpo.grpo_loss(logp, old, ref, adv, mask, num_tokens=mask.sum().item(), cfg=cfg)
    actor_cfg = OmegaConf.create({"clip_ratio": 0.2, "clip_ratio_low": None, "clip_ratio_high": None, "global_batch_info": {}})
    pg = core_algos.compute_policy_loss_vanilla(old, logp, adv[:, None].expand_as(logp), mask, config=actor_cfg)[0]
    kl = core_algos.agg_loss(theirs, mask, "token-mean")
    assert loss.item() == pytest.approx((pg + 0.01 * kl).item(), rel=1e-5, abs=1e-6)
    assert sums["kl"] / mask.sum().item() == pytest.approx(kl.item(), rel=1e-5)


def test_entropy_term_equals_verls_actor_loss():
    """verl's ppo_loss: policy_loss = pg_loss - entropy_coeff * token-mean(entropy) + kl_coef * kl_loss."""
    from omegaconf import OmegaConf

    logp, old, ref, adv, mask = _loss_inputs(seed=3)
    entropy = torch.rand_like(logp) * 2
    cfg = dataclasses.replace(PAPER_LOSS, kl_coef=0.01, entropy_coeff=0.001)
    loss, _ = grpo.grpo_loss(logp, old, ref, adv, mask, num_tokens=mask.sum().item(), cfg=cfg, entropy=entropy)
    actor_cfg = OmegaConf.create({"clip_ratio": 0.2, "clip_ratio_low": None, "clip_ratio_high": None, "global_batch_info": {}})
    pg = core_algos.compute_policy_loss_vanilla(old, logp, adv[:, None].expand_as(logp), mask, config=actor_cfg)[0]
    kl = core_algos.agg_loss(core_algos.kl_penalty(logp, ref, "low_var_kl"), mask, "token-mean")
    ent = core_algos.agg_loss(entropy, mask, "token-mean")
    assert loss.item() == pytest.approx((pg - 0.001 * ent + 0.01 * kl).item(), rel=1e-5, abs=1e-6)
    without, _ = grpo.grpo_loss(logp, old, ref, adv, mask, num_tokens=mask.sum().item(),
                                cfg=dataclasses.replace(cfg, entropy_coeff=0.0))
    assert without.item() == pytest.approx((pg + 0.01 * kl).item(), rel=1e-5, abs=1e-6)
    with pytest.raises(ValueError, match="needs the per-token entropy"):
        grpo.grpo_loss(logp, old, ref, adv, mask, num_tokens=1.0, cfg=cfg)


def test_micro_batches_add_up_to_token_mean_and_gradients_flow():
    logp, old, ref, adv, mask = _loss_inputs(seed=2)
    logp = logp.clone().requires_grad_(True)
    n = mask.sum().item()
    whole, _ = grpo.grpo_loss(logp, old, ref, adv, mask, num_tokens=n, cfg=PAPER_LOSS)
    parts = sum(grpo.grpo_loss(logp[i : i + 2], old[i : i + 2], ref[i : i + 2], adv[i : i + 2], mask[i : i + 2], n,
                                PAPER_LOSS)[0]
                for i in range(0, 6, 2))
    assert whole.item() == pytest.approx(parts.item(), rel=1e-6)
    whole.backward()
    assert torch.isfinite(logp.grad).all() and logp.grad[mask == 0].abs().max() == 0
    # on-policy (old == current), the gradient pushes up tokens with positive advantage
    lp = old.clone().requires_grad_(True)
    grpo.grpo_loss(lp, old, old, adv, mask, n, dataclasses.replace(PAPER_LOSS, kl_coef=0.0))[0].backward()
    row = int(torch.argmax(adv))
    assert (lp.grad[row][mask[row] > 0] < 0).all()


def test_config_refuses_in_return_penalty_with_cross_step_normalisation():
    """The combination divides the penalty by the std of mixed step scores: a ConfigError naming why."""
    from gentax.errors import ConfigError
    from gentax.train.config import load_rl_config

    with pytest.raises(ConfigError, match="in_return cannot go with advantage_normalisation cross_step"):
        load_rl_config({**PAPER_RL, "advantage_normalisation": "cross_step", "invalid_penalty_placement": "in_return"})
    # each alone is accepted
    assert load_rl_config({**PAPER_RL, "advantage_normalisation": "cross_step"}).invalid_penalty_placement == "after_normalisation"
    assert load_rl_config({**PAPER_RL, "invalid_penalty_placement": "in_return"}).advantage_normalisation == "trajectory"
