"""Sokoban domain: gym-sokoban rooms, coordinate-list observation, rules, BFS expert, knobs."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from gentax.domains import make
from gentax.domains.sokoban import ACTIONS, gym_sokoban_env
from gentax.errors import GentaxError

COORD = r"\(\d+, \d+\)"
LINE_FORMATS = [
    ("Walls", rf"Walls: {COORD}(, {COORD})*"),
    ("Floor", rf"Floor: {COORD}(, {COORD})*"),
    ("Player", rf"Player: {COORD}"),
    ("Box", rf"Box: {COORD}"),
    ("Target", rf"Target: {COORD}"),
]


def coords(line: str) -> list[tuple[int, int]]:
    return [(int(r), int(c)) for r, c in re.findall(r"\((\d+), (\d+)\)", line)]


def parse(text: str) -> dict[str, list[tuple[int, int]]]:
    lines = {line.split(":")[0]: line for line in text.splitlines()}
    for key, pattern in LINE_FORMATS:
        assert re.fullmatch(pattern, lines[key]), lines[key]
    return {key: coords(lines[key]) for key, _ in LINE_FORMATS}


@pytest.fixture(scope="module")
def env():
    return make("sokoban", split="eval", seed=0)


def test_rooms_are_small_one_box_and_not_trivial(env):
    for seed in range(8):
        task = env.task(seed)
        cells = parse(env.reset(task).text)
        assert task.spec["room_size"] == [6, 6]
        assert len(cells["Box"]) == 1 and len(cells["Target"]) == 1
        assert 3 <= len(task.spec["solution"]) <= 15
        everything = set(cells["Walls"]) | set(cells["Floor"])
        assert everything == {(r, c) for r in range(6) for c in range(6)}
        assert not set(cells["Walls"]) & set(cells["Floor"])
        assert {cells["Player"][0], cells["Box"][0], cells["Target"][0]} <= set(cells["Floor"])


def test_task_draw_leaves_global_rngs_alone(env):
    random.seed(123)
    np.random.seed(123)
    expected = (random.random(), np.random.rand())
    random.seed(123)
    np.random.seed(123)
    env.task(41)
    assert (random.random(), np.random.rand()) == expected


def test_tasks_drawn_from_threads_at_once_are_those_drawn_alone():
    """verl's agent loops make tasks from several threads: gym-sokoban's draws from the global RNGs
    must not interleave (without the module's lock most of these rooms differ)."""
    from concurrent.futures import ThreadPoolExecutor

    seeds = range(40)
    alone = [make("sokoban", split="eval", seed=0).task(seed).spec for seed in seeds]
    with ThreadPoolExecutor(4) as threads:
        together = list(threads.map(lambda seed: make("sokoban", split="eval", seed=0).task(seed).spec, seeds))
    assert together == alone


def test_expert_plays_a_shortest_solution(env):
    for seed in range(6):
        task = env.task(seed)
        env.reset(task)
        while not env.done:
            _, reward, _, info = env.step(env.expert_action())
        assert info["won"] and reward == 10.0
        assert env.steps == len(task.spec["solution"])


def test_bumping_a_wall_is_a_valid_no_op(env):
    obs = env.reset(env.task(2))
    player = parse(obs.text)["Player"][0]
    walls = set(parse(obs.text)["Walls"])
    deltas = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
    bump = next(a for a, (dr, dc) in deltas.items() if (player[0] + dr, player[1] + dc) in walls)
    obs2, reward, done, info = env.step(bump.upper())  # case-insensitive
    assert info["valid"] and reward == 0.0 and not done and obs2.text == obs.text


def test_rules_match_gym_sokoban_env(env):
    """Random play: our transition equals gym-sokoban's own SokobanEnv push/move step."""
    rng = random.Random(7)
    for seed in range(5):
        raw = gym_sokoban_env(env.task(seed).spec)
        env.reset(env.task(seed))
        for _ in range(40):
            action = rng.choice(ACTIONS)
            raw._push(1 + ACTIONS.index(action))  # gym-sokoban: 1..4 = push up/down/left/right
            obs, _, done, info = env.step(action)
            cells = parse(obs.text)
            assert cells["Player"] == [tuple(int(x) for x in raw.player_position)]
            raw_boxes = sorted(zip(*map(list, np.nonzero(np.isin(raw.room_state, (3, 4))))))
            assert cells["Box"] == [(int(r), int(c)) for r, c in raw_boxes]
            assert info["won"] == raw._check_if_all_boxes_on_target()
            if done:
                break


def test_difficulty_knobs():
    hard = make("sokoban", seed=0, min_solution_length=7, max_solution_length=0)
    assert all(len(hard.task(s).spec["solution"]) >= 7 for s in range(3))
    two = make("sokoban", seed=0, num_boxes=2, room_size=7)
    task = two.task(0)
    assert len(task.spec["boxes"]) == 2 and task.spec["room_size"] == [7, 7]
    box_line = next(line for line in two.reset(task).text.splitlines() if line.startswith("Box: "))
    assert len(coords(box_line)) == 2
    while not two.done:
        _, _, _, info = two.step(two.expert_action())
    assert info["won"]


def test_floor_only_observation_states_the_same_room_and_keeps_distractors_off_it():
    from gentax.domains.sokoban import sokoban_distractor_cells

    listed, floor_only = make("sokoban", seed=0, room_size=5), make("sokoban", seed=0, room_size=5, list_walls=False)
    full, short = listed.reset(listed.task(3)).text, floor_only.reset(floor_only.task(3)).text
    assert "Walls: " in full and "Walls: " not in short and "every cell not listed as floor is a wall" in short
    lines = lambda text, key: next(line for line in text.splitlines() if line.startswith(key))  # noqa: E731
    for key in ("Floor: ", "Player: ", "Box: ", "Target: "):
        assert lines(full, key) == lines(short, key)
    walls, floor = set(coords(lines(full, "Walls: "))), set(coords(lines(short, "Floor: ")))
    assert not walls & floor and len(walls | floor) == 25
    # the distractors' cells lie outside the 5x5 room, as when its walls are listed
    cells = sokoban_distractor_cells(short, 6, random.Random(0))
    assert all(r >= 5 or c >= 5 for r, c in cells)
    assert sokoban_distractor_cells(full, 6, random.Random(0)) == cells


@pytest.mark.parametrize(
    "options",
    [{"room_size": 3}, {"num_boxes": 0}, {"min_solution_length": 9, "max_solution_length": 4}, {"wall_colour": 1},
     {"list_walls": "no"}],
)
def test_bad_options_are_one_clear_error(options):
    with pytest.raises(GentaxError, match="sokoban"):
        make("sokoban", **options)
