"""ALFWorld's per-process game cache (``engine.GameCache``): a game is parsed and translated once
per process, and episodes play exactly as without the cache.

Every episode replays one fixed action script per game (its stored plan with a look, an
inventory and a command that is not admissible mixed in), played by the real TextWorld engine
on small generated games; what an episode returns (observations, rewards, dones, infos) is
compared between runs without the cache, with a fresh cache (twice) and with two envs sharing
the cache, stepped in turns. Work is counted with the cache's own counters, never timed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gentax.domains import make
from gentax.domains.alfworld import engine as alf_engine

SMALL = {"max_receptacles": 8, "max_objects": 10}
SEEDS = (0, 1, 5)  # pick-and-place, look-at, pick-two


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    """Per seed: (task, action script); the games are generated here, once."""
    cache_dir = tmp_path_factory.mktemp("alfworld-cache")
    out = {}
    with make("alfworld", split="eval", cache_dir=str(cache_dir), **SMALL) as env:
        for seed in SEEDS:
            task = env.task(seed)
            plan = json.loads(Path(env.game_file(task)).read_text())["walkthrough"]
            out[seed] = (task, ["inventory", "dance with the toaster", *plan[:1], "look", *plan[1:]])
    return {"cache_dir": str(cache_dir), "games": out}


def new_env(games):
    return make("alfworld", split="eval", cache_dir=games["cache_dir"], **SMALL)


def episode_steps(env, task, script):
    """The episode's first observation, then (observation, reward, done, info) per action."""
    yield env.reset(task)
    for action in script:
        yield env.step(action)


def play(env, task, script) -> list:
    return list(episode_steps(env, task, script))


def play_all(games) -> dict[int, list]:
    with new_env(games) as env:
        return {seed: play(env, task, script) for seed, (task, script) in games["games"].items()}


@pytest.fixture(scope="module")
def uncached(games):
    """The reference episodes, played without the process cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(alf_engine, "GAME_CACHE", None)
        return play_all(games)


@pytest.fixture
def cache(monkeypatch):
    """A fresh, empty process cache for the test (its counters start at 0)."""
    fresh = alf_engine.GameCache()
    monkeypatch.setattr(alf_engine, "GAME_CACHE", fresh)
    return fresh


def test_reference_episodes_win(uncached, games):
    for seed, trace in uncached.items():
        *_, (_, reward, done, info) = trace
        assert done and info["won"] and reward == 10.0, (seed, info)
        assert [step[3]["valid"] for step in trace[1:]].count(False) == 1  # the non-admissible command


def test_episodes_are_identical_with_the_cache(uncached, games, cache):
    assert play_all(games) == uncached
    assert play_all(games) == uncached  # the second round is served from the cache
    assert cache.grammars.made == len(SEEDS) and cache.translations.made == 2 * len(SEEDS)


def test_two_envs_sharing_the_cache_in_turns(uncached, games, cache):
    """Two live envs on the same game, stepped alternately, each play the reference episode."""
    with new_env(games) as first, new_env(games) as second:
        for seed, (task, script) in games["games"].items():
            traces = ([], [])
            for steps in zip(episode_steps(first, task, script), episode_steps(second, task, script)):
                for trace, step in zip(traces, steps):
                    trace.append(step)
            assert traces == (uncached[seed], uncached[seed]), seed
    assert cache.grammars.made == len(SEEDS) and cache.translations.made == 2 * len(SEEDS)


def test_second_reset_of_a_game_parses_nothing(games, cache):
    task, _ = games["games"][SEEDS[0]]
    with new_env(games) as env:
        env.reset(task)
        assert (cache.grammars.made, cache.translations.made) == (1, 2)  # plain and optimized
        reused = cache.grammars.reused, cache.translations.reused
        env.reset(task)
    assert (cache.grammars.made, cache.translations.made) == (1, 2)
    assert cache.grammars.reused == reused[0] + 1 and cache.translations.reused > reused[1]


def test_the_cache_forgets_the_least_recently_used_game(uncached, games, monkeypatch):
    small = alf_engine.GameCache(max_games=1)
    monkeypatch.setattr(alf_engine, "GAME_CACHE", small)
    (task_a, script_a), (task_b, _) = games["games"][SEEDS[0]], games["games"][SEEDS[1]]
    with new_env(games) as env:
        for task in (task_a, task_b, task_a):
            env.reset(task)
            assert len(small.grammars.entries) == 1 and len(small.translations.entries) <= 2
        assert small.grammars.made == 3  # game a was evicted by game b
        assert play(env, task_a, script_a) == uncached[SEEDS[0]]


def test_resets_reuse_the_engines_library_copy(games, monkeypatch):
    """fast-downward's library is copied per engine, never per game or reset."""
    import fast_downward

    loads = []
    real_load = fast_downward.load_lib
    monkeypatch.setattr(fast_downward, "load_lib", lambda: loads.append(1) or real_load())
    with new_env(games) as env:
        env.reset(games["games"][SEEDS[0]][0])
        copies = len(loads)  # 0 or 1: a closed engine's copy may be reused
        for task, _ in games["games"].values():
            env.reset(task)
    assert len(loads) == copies <= 1
