"""ALFWorld: generated games in the official format, played by the real TextWorld engine.

Games are generated once per test session into a temporary cache (small scenes, so the
planner and the engine stay quick); the tests share them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gentax.domains import make
from gentax.domains.alfworld import engine as alf_engine
from gentax.domains.alfworld import scenegen
from gentax.errors import GentaxError

SMALL = {"max_receptacles": 8, "max_objects": 10}
SEEDS = range(6)  # task types rotate with the seed: one game of each type


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("alfworld-cache")


@pytest.fixture(scope="module")
def env(cache):
    environment = make("alfworld", split="eval", cache_dir=str(cache), **SMALL)
    yield environment
    environment.close()


@pytest.fixture(scope="module")
def played(env):
    """Per seed: the task, its first observation, and the expert's episode."""
    out = {}
    argv = list(sys.argv)
    for seed in SEEDS:
        task = env.task(seed)
        first = env.reset(task)
        actions, info = [], {}
        while not env.done:
            actions.append(env.expert_action())
            _, _, _, info = env.step(actions[-1])
        out[seed] = {"task": task, "first": first, "actions": actions, "info": info}
    assert sys.argv == argv, "fast-downward's translator must not leak its sys.argv"
    return out


def game_folder(task) -> Path:
    return Path(task.spec["game_file"]).parent


@pytest.mark.slow
def test_expert_wins_every_task_type(played):
    types = set()
    for seed, run in played.items():
        info = run["info"]
        assert info["won"] and info["valid"] and not info["truncated"], (seed, run["actions"], info)
        traj = json.loads((game_folder(run["task"]) / "traj_data.json").read_text())
        types.add(traj["task_type"])
        assert traj["task_type"] == run["task"].spec["task_type"]
        assert run["first"].text.startswith("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room.")
        assert run["first"].text.endswith(f"Your task is to: {run['first'].goal}")
        assert "help" not in run["first"].admissible and "look" in run["first"].admissible
    assert types == set(scenegen.TASK_TYPES)


def test_games_use_the_official_format(played):
    for run in played.values():
        folder = game_folder(run["task"])
        game = json.loads((folder / "game.tw-pddl").read_text())
        assert set(game) == {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"}
        assert game["solvable"] is True and game["walkthrough"] == run["actions"]
        assert "UNKNOWN GOAL" not in game["grammar"] and run["first"].goal[:-1] in game["grammar"]
        assert game["pddl_problem"].lstrip().startswith("(define (problem") and "(:goal" in game["pddl_problem"]
        traj = json.loads((folder / "traj_data.json").read_text())
        assert traj["scene"]["floor_plan"].startswith("FloorPlan")
        assert set(traj["pddl_params"]) >= {"object_target", "parent_target", "toggle_target"}


def test_train_and_eval_use_disjoint_floor_plans(played):
    train, evaluation = set(scenegen.split_floor_plans("train")), set(scenegen.split_floor_plans("eval"))
    assert not train & evaluation
    assert train | evaluation == set(scenegen.all_floor_plans()) and len(train | evaluation) == 120
    for run in played.values():
        traj = json.loads((game_folder(run["task"]) / "traj_data.json").read_text())
        assert traj["scene"]["scene_num"] in evaluation


def test_generation_is_deterministic(env, played, tmp_path):
    """Same (split, seed, options) -> the same file bytes and first observation, anywhere."""
    other = make("alfworld", split="eval", cache_dir=str(tmp_path), **SMALL)
    try:
        task = other.task(0)
        first = other.reset(task)
        for name in ("game.tw-pddl", "traj_data.json"):
            assert (game_folder(task) / name).read_bytes() == (game_folder(played[0]["task"]) / name).read_bytes()
        assert first == played[0]["first"]
        assert task.spec["game_file"] != played[0]["task"].spec["game_file"]
        train = make("alfworld", split="train", cache_dir=str(tmp_path), **SMALL).task(0)
        assert game_folder(train) != game_folder(task)  # a split never shares a game folder
    finally:
        other.close()
    # another process with another hash seed writes the same bytes
    code = (
        "import sys; from gentax.domains.alfworld import engine, scenegen; "
        "opts = scenegen.SceneOptions.parse(max_receptacles=8, max_objects=10); "
        "print(scenegen.generate_game(engine.make_engine(), 'eval', 1, opts, sys.argv[1]))"
    )
    env_vars = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "proc")], env=env_vars,
                         capture_output=True, text=True, check=True)
    assert Path(out.stdout.strip()).read_bytes() == Path(played[1]["task"].spec["game_file"]).read_bytes()


def test_scene_check_rejects_solved_and_unsolvable_games(env, played):
    game = json.loads(Path(played[0]["task"].spec["game_file"]).read_text())  # pick_and_place_simple
    assert scenegen.check_game(env.engine, game)[0] is None
    problem = game["pddl_problem"]
    goal_type = re.search(r"\(objectType \?o (\w+)\)", problem).group(1)
    recep_type = re.search(r"\(receptacleType \?r (\w+)\)", problem).group(1)
    # unsolvable: the goal asks for an object class no receptacle holds (teddy bears never sit in one)
    unsolvable = problem.replace(f"(objectType ?o {goal_type})", "(objectType ?o TeddyBearType)")
    assert scenegen.check_game(env.engine, dict(game, pddl_problem=unsolvable))[0] == "unsolvable"
    # already solved: a target object starts in a receptacle of the goal class
    target = re.search(rf"\(objectType (\S+) {goal_type}\)", problem).group(1)
    recep = re.search(rf"\(receptacleType (\S+) {recep_type}\)", problem).group(1)
    solved = problem.replace("(atLocation agent1", f"(inReceptacle {target} {recep})\n        (atLocation agent1")
    assert scenegen.check_game(env.engine, dict(game, pddl_problem=solved))[0] == "already_solved"


def test_generator_redraws_rejected_scenes(env, tmp_path, monkeypatch):
    real_check = scenegen.check_game
    calls = []

    def reject_first(engine, game):
        calls.append(1)
        return ("unsolvable", []) if len(calls) == 1 else real_check(engine, game)

    monkeypatch.setattr(scenegen, "check_game", reject_first)
    opts = scenegen.SceneOptions.parse(**SMALL)
    game_file = scenegen.generate_game(env.engine, "train", 3, opts, tmp_path)
    meta = json.loads((game_file.parent / "traj_data.json").read_text())["gentax"]
    assert meta["rejected"].get("unsolvable") == 1 and meta["attempt"] >= 1
    assert json.loads(game_file.read_text())["solvable"] is True


def test_expert_replans_after_the_agent_leaves_its_plan(env, played):
    run = played[5]  # pick_two_obj_and_place
    obs = env.reset(run["task"])
    detour = next(a for a in obs.admissible if a.startswith("go to ") and a != run["actions"][0])
    env.step(detour)
    while not env.done:
        _, _, _, info = env.step(env.expert_action())
    assert info["won"], info


def test_not_admissible_is_invalid_and_changes_nothing(env, played):
    before = env.reset(played[2]["task"])
    obs, reward, done, info = env.step("take the moon from the sky")
    assert (info["valid"], info["reason"], reward, obs) == (False, "not_admissible", pytest.approx(-0.1), before)
    obs, reward, done, info = env.step("look")
    assert info["valid"] and obs.text != before.text


def _fake_official_data(root: Path, played) -> dict[str, Path]:
    """json_2.1.1 with one generated game per official split folder."""
    placed = {}
    for split_dir, seed in (("train", 0), ("valid_seen", 1), ("valid_unseen", 2)):
        src = game_folder(played[seed]["task"])
        traj = json.loads((src / "traj_data.json").read_text())
        dst = root / "json_2.1.1" / split_dir / f"{traj['task_type']}-X-None-Y-{traj['scene']['scene_num']}" / "trial_T0"
        shutil.copytree(src, dst)
        placed[split_dir] = dst / "game.tw-pddl"
    return placed


def test_official_data_is_used_when_present(played, tmp_path, monkeypatch):
    placed = _fake_official_data(tmp_path / "data", played)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "data"))
    cases = (("train", {}, "train", 0), ("eval", {}, "valid_unseen", 2), ("eval", {"eval_split": "eval_in_distribution"}, "valid_seen", 1))
    for split, extra, split_dir, seed in cases:
        env = make("alfworld", split=split, cache_dir=str(tmp_path / "cache"), **extra)
        try:
            assert env.source == "official"
            task = env.task(7)
            assert task.spec["game_file"] == str(placed[split_dir])
            assert env.reset(task) == played[seed]["first"]
            while not env.done:
                _, _, _, info = env.step(env.expert_action())
            assert info["won"]
        finally:
            env.close()
    assert make("alfworld", split="eval", source="generated").source == "generated"
    # official games of other task types are filtered out, as alfworld's own loader does
    with pytest.raises(GentaxError, match="no solvable games"):
        make("alfworld", split="eval", task_types=["pick_two"]).task(0)
    monkeypatch.delenv("ALFWORLD_DATA")
    with pytest.raises(GentaxError, match="json_2.1.1"):
        make("alfworld", source="official")


def test_bad_options_are_one_clear_error():
    for options, match in (
        ({"task_types": ["juggle"]}, "unknown alfworld task type 'juggle'"),
        ({"max_receptacles": 1}, "max_receptacles"),
        ({"source": "web"}, "source must be one of"),
        ({"eval_split": "valid_unseen"}, "eval_split must be one of"),
    ):
        with pytest.raises(GentaxError, match=match):
            make("alfworld", **options)


def test_importing_alfworld_writes_nothing_to_home(tmp_path):
    code = (
        "import os, gentax.domains.alfworld.engine as e; e.import_alfworld('info'); "
        "e.import_alfworld('agents.environment.alfred_tw_env'); print(os.environ.get('ALFWORLD_DATA'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"} | {"HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"
    assert not (tmp_path / ".cache" / "alfworld").exists()
    assert alf_engine.alfworld_root().is_dir()


def test_fast_downward_copies_live_in_memory_not_on_disk(tmp_path, monkeypatch):
    """Each live engine needs its own copy of libdownward.so (one global planning state); fast-downward
    writes each to $TMPDIR, where a loaded copy keeps its 33 MB until the process ends. gentax loads
    them from memfds of the bytes read once per process (engine.load_library): none under $TMPDIR."""
    import tempfile

    from gentax.domains.alfworld import engine

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(engine, "_RELEASED_LIBS", [])  # copies other tests' engines released stay theirs

    def copies():
        maps = Path("/proc/self/maps").read_text().splitlines()
        return {line.split()[4]: line.split(None, 5)[-1] for line in maps if "libdownward" in line}

    before = copies()
    first, second = engine.make_engine(), engine.make_engine()
    new = {inode: name for inode, name in copies().items() if inode not in before}
    assert len(new) == 2 and all(name.startswith("/memfd:libdownward.so") for name in new.values()), new
    assert first.unwrapped.downward_lib._handle != second.unwrapped.downward_lib._handle
    assert not list(tmp_path.iterdir())  # nothing left on disk
    engine.close_engine(first)
    engine.close_engine(second)
    assert not {inode for inode in copies() if inode not in before} - set(new)  # closed copies are reused
