"""The collector on the real Sokoban env, pool, prompts, parser and augmenter, with scripted
generators standing in for a model (fast; the real model is in test_generators.py)."""

from __future__ import annotations

import random

import pytest

from gentax.agent.prompts import observation_from_prompt
from gentax.domains.pool import EnvPool
from gentax.errors import GentaxError
from gentax.rollout.collector import CollectConfig, collect
from gentax.rollout.generators import ExpertGenerator, Generation, SamplingParams


class Scripted:
    """Answers with ``respond(call, row, messages, params, hint)``; records every call."""

    def __init__(self, respond, needs_expert_action=False):
        self.respond = respond
        self.needs_expert_action = needs_expert_action
        self.calls: list[dict] = []

    def generate(self, prompts, params, hints=None):
        call = len(self.calls)
        self.calls.append({"prompts": prompts, "params": list(params), "hints": hints})
        out = []
        for row, messages in enumerate(prompts):
            text, finish = self.respond(call, row, messages, params[row], hints[row] if hints else None)
            out.append(Generation(text, [1, 2, 3], [4] * max(1, len(text) // 4), [-0.5] * max(1, len(text) // 4), finish))
        return out


def expert_reply(call, row, messages, params, hint):
    return f"<think>plan</think><action>{hint['expert_action']}</action>", "stop"


def seeded_reply(call, row, messages, params, hint):
    """A 'model' whose answer depends only on its sampling seed and the prompt."""
    admissible = ["up", "down", "left", "right"]
    return f"<think>t</think><action>{random.Random(params.seed).choice(admissible)}</action>", "stop"


def sokoban(**kw) -> CollectConfig:
    return CollectConfig(domain="sokoban", split="eval", **kw)


def current_observation(prompt: str) -> str:
    return observation_from_prompt(prompt)


def test_lockstep_one_call_per_turn_with_exactly_the_active_trajectories():
    gen = Scripted(expert_reply, needs_expert_action=True)
    rollouts = collect(gen, [0, 1, 2, 3], sokoban(group_size=2), run_id="r", progress=False)
    episodes = rollouts.episodes_frame()
    assert list(episodes["traj_id"]) == list(range(8))
    assert list(episodes["group_id"]) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert episodes["won"].all()  # the expert solves every task
    lengths = list(episodes["length"])
    assert len(set(lengths)) > 1, "tasks of different lengths are needed to see drop-out"
    # turn t holds exactly the trajectories still running: one call each, no more, no fewer
    assert len(gen.calls) == max(lengths)
    for turn, call in enumerate(gen.calls):
        assert len(call["prompts"]) == sum(length > turn for length in lengths)
    # every prompt of a call is a different trajectory's: its hint (expert action) was used
    steps = rollouts.steps_frame()
    assert len(steps) == sum(lengths) == len(rollouts.tokens)
    assert (steps.groupby("traj_id")["step"].max() + 1).tolist() == lengths
    assert steps.loc[steps["done"], "traj_id"].tolist() == list(range(8))
    assert (steps["run"] == "r").all() and (steps["valid"]).all()


def test_drop_out_finished_trajectories_are_never_prompted_again():
    gen = Scripted(expert_reply, needs_expert_action=True)
    rollouts = collect(gen, [0, 1, 2], sokoban(max_steps=15), progress=False)
    lengths = rollouts.episodes_frame()["length"].tolist()
    shortest = min(lengths)
    # after the shortest finishes, the next call has one prompt fewer per finished trajectory
    assert len(gen.calls[shortest]["prompts"]) == sum(length > shortest for length in lengths)
    assert len(gen.calls[shortest - 1]["prompts"]) == 3


BAD_OUTPUTS = [
    ("", "stop"),  # empty
    ("blah " * 400, "length"),  # endless: cut at max_new_tokens
    ("I will go up now.", "stop"),  # no tags
    ("<think>\x00\ufffd\x07</think><action>\x01\x02\ufffd</action>", "stop"),  # odd tokens
    ("<think>thinking forever about the box and", "length"),  # cut while thinking
    ("<think>a</think><action>up</action><action>down</action>", "stop"),  # two actions
    ("<think>a</think><action>jump</action>", "stop"),  # not admissible
    ("<action>up</action>", "stop"),  # no think block in think mode
]


def test_bad_outputs_never_crash_and_count_as_invalid_steps():
    gen = Scripted(lambda call, row, m, p, h: BAD_OUTPUTS[(call + row) % len(BAD_OUTPUTS)])
    rollouts = collect(gen, list(range(4)), sokoban(max_steps=len(BAD_OUTPUTS)), progress=False)
    steps = rollouts.steps_frame()
    assert len(steps) == 4 * len(BAD_OUTPUTS)  # every episode ran to the step limit
    assert not steps["valid"].any()
    assert (steps["reward"] == -0.1).all()
    assert steps["reason"].notna().all()
    assert {"no_action_tag", "unclosed_think", "multiple_actions", "not_admissible", "no_think"} <= set(steps["reason"])
    assert steps["action"].isna().all()
    assert set(steps["finish_reason"]) == {"stop", "length"}
    episodes = rollouts.episodes_frame()
    assert (episodes["invalid_steps"] == len(BAD_OUTPUTS)).all() and episodes["truncated"].all()
    assert not episodes["won"].any()
    # invalid steps do not move the env: every prompt of a trajectory shows the same state
    for _, group in steps.groupby("traj_id"):
        assert group["prompt"].map(current_observation).nunique() == 1


def test_augmentation_changes_what_the_agent_sees_not_the_env():
    plain_gen = Scripted(seeded_reply)
    aug_gen = Scripted(seeded_reply)
    plain = collect(plain_gen, [0, 1], sokoban(max_steps=6), progress=False).steps_frame()
    aug = collect(aug_gen, [0, 1], sokoban(max_steps=6, aug_eps=80, aug_p=1.0), progress=False)
    steps = aug.steps_frame()
    assert aug.episodes_frame()["augmented"].all() and steps["augmented"].all()
    # the same actions lead to the same transitions and rewards
    columns = ["traj_id", "step", "action", "valid", "reason", "reward", "done", "won", "admissible_count"]
    assert steps[columns].equals(plain[columns])
    assert (steps["obs_chars"] > plain["obs_chars"]).all()
    for seen, original in zip(steps["prompt"], plain["prompt"]):
        seen_obs, original_obs = current_observation(seen), current_observation(original)
        assert "unreachable" in seen_obs and "unreachable" not in original_obs
        assert set(original_obs.splitlines()) <= set(seen_obs.splitlines())  # only insertions
    # the history shows what the agent saw (augmented), not the env's text
    later = steps[steps["step"] >= 1]["prompt"]
    assert all("Observation" in p and p.count("unreachable") > current_observation(p).count("unreachable") for p in later)


def test_augmentation_probability_is_decided_per_trajectory_from_the_seed():
    cfg = sokoban(max_steps=1, aug_eps=80, aug_p=0.5, group_size=4)
    first = collect(Scripted(seeded_reply), list(range(4)), cfg, progress=False)
    again = collect(Scripted(seeded_reply), list(range(4)), cfg, progress=False)
    flags = first.episodes_frame()["augmented"]
    assert 0 < flags.sum() < len(flags)
    assert flags.tolist() == again.episodes_frame()["augmented"].tolist()
    steps = first.steps_frame()
    assert steps["augmented"].tolist() == flags.tolist()  # one step each


def test_same_seed_same_rollouts_regardless_of_batching():
    cfg = sokoban(max_steps=5, group_size=2, sampling=SamplingParams(temperature=1.0))
    whole = collect(Scripted(seeded_reply), [3, 4, 5], cfg, progress=False).steps_frame()
    batched = collect(Scripted(seeded_reply), [3, 4, 5], CollectConfig(**{**cfg.__dict__, "batch_size": 2}), progress=False)
    assert batched.stats["episodes"] == 6
    assert whole.equals(batched.steps_frame())
    other = collect(Scripted(seeded_reply), [3, 4, 5], CollectConfig(**{**cfg.__dict__, "seed": 1}), progress=False).steps_frame()
    assert not whole["action"].equals(other["action"])
    # the members of a group sample with seeds of their own
    gen = Scripted(seeded_reply)
    collect(gen, [3], CollectConfig(**{**cfg.__dict__, "group_size": 8}), progress=False)
    assert len({p.seed for p in gen.calls[0]["params"]}) == 8


def test_expert_generator_through_the_collector_solves_sokoban():
    rollouts = collect(ExpertGenerator(), [0, 1], sokoban(), progress=False)
    assert rollouts.success_rate == 1.0 and rollouts.invalid_rate == 0.0
    steps = rollouts.steps_frame()
    assert steps["response"].str.startswith("<think>").all()
    nothink = collect(ExpertGenerator(), [0], sokoban(think=False), progress=False).steps_frame()
    assert nothink["response"].str.startswith("<action>").all() and nothink["valid"].all()


def test_an_env_failure_ends_its_episode_with_the_error_recorded():
    class FailingPool(EnvPool):
        def step(self, actions):
            results = super().step(actions)
            if 1 in results and not results[1][2]:
                obs, _, _, info = results[1]
                self._done[1] = True
                results[1] = (obs, 0.0, True, {**info, "error": "engine crashed"})
            return results

    with FailingPool("sokoban", "eval") as pool:
        rollouts = collect(ExpertGenerator(), [0, 1, 2], sokoban(), pool=pool, progress=False)
    episodes = rollouts.episodes_frame()
    assert episodes.loc[1, "error"] == "engine crashed" and not episodes.loc[1, "won"] and episodes.loc[1, "length"] == 1
    assert episodes.loc[[0, 2], "won"].all() and episodes.loc[[0, 2], "error"].isna().all()


def test_bad_configuration_and_generator_contract_violations_are_errors():
    with pytest.raises(GentaxError, match="unknown domain"):
        collect(ExpertGenerator(), [0], CollectConfig(domain="chess", split="eval"), progress=False)
    with pytest.raises(GentaxError, match="group_size"):
        collect(ExpertGenerator(), [0], sokoban(group_size=0), progress=False)
    with pytest.raises(GentaxError, match="task seed"):
        collect(ExpertGenerator(), [], sokoban(), progress=False)
    short = Scripted(seeded_reply)
    short.generate = lambda prompts, params, hints=None: []
    with pytest.raises(RuntimeError, match="0 results for 2 prompts"):
        collect(short, [0, 1], sokoban(), progress=False)
    with EnvPool("sokoban", "train") as pool, pytest.raises(GentaxError, match="pool is for"):
        collect(ExpertGenerator(), [0], sokoban(), pool=pool, progress=False)


def test_timing_stats_add_up():
    rollouts = collect(Scripted(seeded_reply), [0, 1], sokoban(max_steps=3), progress=False)
    stats = rollouts.stats
    assert stats["steps"] == 6 and stats["turns"] == 3
    assert stats["generate_s"] + stats["env_s"] + stats["reset_s"] + stats["other_s"] <= stats["wall_s"]
    assert stats["reset_s"] > 0 and stats["env_s"] > 0
    assert stats["response_tokens"] == rollouts.steps_frame()["response_tokens"].sum()


def test_env_pools_keep_one_pool_per_settings_and_play_what_fresh_pools_play():
    """An RL run's steps collect through EnvPools: the envs start once, the episodes do not change."""
    from gentax.rollout.collector import EnvPools

    sampled = Scripted(seeded_reply)
    fresh = [collect(sampled, seeds, sokoban(seed=step), progress=False).episodes_frame() for step, seeds in
             enumerate([[0, 1], [2, 3, 4], [0, 1]])]
    with EnvPools() as pools:
        kept = [pools.collect(sampled, seeds, sokoban(seed=step), progress=False).episodes_frame() for step, seeds in
                enumerate([[0, 1], [2, 3, 4], [0, 1]])]
        other = pools.collect(sampled, [0], sokoban(max_steps=3), progress=False)  # other settings: its own pool
        assert pools.pools() == 2 and other.episodes_frame().loc[0, "length"] <= 3
        pool = pools._all[0]
    for a, b in zip(fresh, kept):
        assert a.equals(b)
    assert pool._closed  # closed with the cache


def test_env_pools_lease_a_pool_to_each_concurrent_call():
    """verl's agent loops collect one episode each from threads at once: each call gets a pool of its
    own (never two episodes on one env at once), the pools are reused by later calls, and the
    episodes are those of fresh pools."""
    import threading

    from gentax.rollout.collector import EnvPools

    seeds = [0, 1, 2, 3]
    fresh = [collect(Scripted(seeded_reply), [s], sokoban(seed=s), progress=False).episodes_frame() for s in seeds]
    barrier = threading.Barrier(2)

    class Meeting(Scripted):  # two episodes' first generate calls wait for each other: truly concurrent
        met = False

        def generate(self, prompts, params, hints=None):
            if not self.met:
                self.met = True
                barrier.wait(timeout=30)
            return super().generate(prompts, params, hints)

    with EnvPools() as pools:
        results = {}

        def play(seed):
            results[seed] = pools.collect(Meeting(seeded_reply), [seed], sokoban(seed=seed), progress=False).episodes_frame()

        for pair in (seeds[:2], seeds[2:]):  # two at once, then two more on the same pools
            threads = [threading.Thread(target=play, args=(s,)) for s in pair]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
        assert pools.pools() == 2
    for seed, frame in zip(seeds, fresh):
        assert results[seed].drop(columns="run_id", errors="ignore").equals(frame.drop(columns="run_id", errors="ignore"))
