"""SciWorld on the real ScienceWorld JVM: expert wins, invalid actions, determinism, a killed
worker or JVM ends the episode failed with an error and the next reset starts a fresh one.

JVMs take seconds to start, so one env (one JVM) is shared per module; tests that need other
options build envs without a JVM (task drawing needs none) or switch an option temporarily.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from gentax.domains import make
from gentax.domains.base import Task
from gentax.domains.pool import EnvPool
from gentax.domains.sciworld import NO_MATCH, effective_simplifications, survey, task_table
from gentax.errors import GentaxError

pytest.importorskip("scienceworld")

# short tasks (gold sequences of 3-15 steps) keep the JVM work small
SHORT = ["find-non-living-thing", "lifespan-longest-lived", "chemistry-mix-paint-secondary-color", "find-animal"]


@pytest.fixture(scope="module")
def env():
    environment = make("sciworld", split="eval", seed=0, tasks=SHORT)
    yield environment
    environment.close()


def play_expert(env, task, before=()):
    """Observation texts of an expert episode (after the actions ``before``) and the last info."""
    texts = [env.reset(task).text]
    for action in before:
        texts.append(env.step(action)[0].text)
    info = {}
    while not env.done:
        obs, reward, done, info = env.step(env.expert_action())
        assert info["valid"], info
        texts.append(obs.text)
    return texts, info


def test_expert_wins_within_the_surveyed_length(env):
    for seed in range(len(SHORT)):
        task = env.task(seed)
        _, info = play_expert(env, task)
        assert info["won"] and info["steps"] == task.spec["gold_length"], (task.spec, info)


def test_jvm_heap_is_capped(env):
    env.reset(env.task(0))
    assert env.worker_info["jvm_max_heap_mb"] == 768
    assert "-XX:+UseSerialGC" not in env.worker_info["jvm_flags"]


LEAN = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def test_jvm_options_reach_the_jvm_and_change_no_episode(env):
    lean = make("sciworld", split="eval", seed=0, max_steps=env.max_steps, **{**env.options, "jvm_options": LEAN})
    try:
        task = env.task(2)
        lean.reset(task)
        assert set(LEAN) <= set(lean.worker_info["jvm_flags"])
        assert play_expert(lean, task) == play_expert(env, task)
    finally:
        lean.close()


@pytest.mark.parametrize("bad", ["-XX:+UseSerialGC", ["UseSerialGC"], [1]])
def test_jvm_options_must_be_a_list_of_flags(bad):
    with pytest.raises(GentaxError, match="jvm_options must be a list of JVM flags"):
        make("sciworld", split="eval", jvm_options=bad)


def test_a_closed_envs_jvm_is_waited_for_so_the_jobs_cpu_time_counts_it():
    """The worker waits for its JVM before it exits, so the JVM's CPU time reaches the job's
    RUSAGE_CHILDREN (the line a job's log ends with: gentax.joblog); a JVM left to die after its
    worker (as before) was counted nowhere."""
    import resource

    environment = make("sciworld", split="eval", seed=0, tasks=SHORT)
    environment.reset(environment.task(0))
    jvm = environment.worker_info["jvm_pid"]
    with open(f"/proc/{jvm}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    jvm_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime so far
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    environment.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    gained = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert jvm_cpu > 0.5 and gained >= jvm_cpu, (jvm_cpu, gained)  # a JVM's start-up alone is ~1-2 CPU-s
    assert not os.path.exists(f"/proc/{jvm}")


def test_unknown_command_is_invalid_and_changes_nothing(env):
    task = env.task(1)
    plain, _ = play_expert(env, task)
    first = env.reset(task)
    for bad in ("fly to the moon", "0", "pick up the unicorn", "open"):
        obs, reward, done, info = env.step(bad)
        assert (info["valid"], info["reason"], reward, done) == (False, "not_admissible", -0.1, False)
        assert obs == first
    texts, info = play_expert(env, task)  # the rejected actions left no trace
    assert texts == plain and info["won"]


def test_runs_are_deterministic_and_a_late_expert_replays_the_episode(env):
    task = env.task(2)
    plain, _ = play_expert(env, task)
    again, _ = play_expert(env, task)
    assert again == plain
    detour, info = play_expert(env, task, before=["inventory", "look around"])  # gold cached
    env._gold_cache.clear()  # now the gold is made after two steps: reload + replay them
    late, late_info = play_expert(env, task, before=["inventory", "look around"])
    assert late == detour and info["won"] and late_info["won"]


def test_ambiguous_action_is_answered_with_the_first_reading(env):
    spec = {"task_name": "grow-plant", "variation": 0, "simplifications": effective_simplifications("grow-plant", "easy")}
    env.reset(Task("sciworld", "eval", 0, spec))
    for action in ("teleport to kitchen", "pick up seed jar", "teleport to greenhouse"):
        assert env.step(action)[3]["valid"]
    # four identical apple seeds: the engine asks which one; the env answers "0" itself
    obs, _, _, info = env.step("move apple seed in seed jar to flower pot 3")
    assert info["valid"] and obs.text == "You move the apple seed to the flower pot 3."
    assert env.step("0")[3]["reason"] == "not_admissible"  # no question pending
    assert "apple seed" in env.step("look at flower pot 3")[0].text


def test_task_draws_are_deterministic_and_follow_the_package_splits():
    table = task_table()
    for split, package_split, extra in (("train", "train", {}), ("eval", "dev", {}), ("eval", "test", {"eval_split": "test"})):
        a, b = make("sciworld", split=split, seed=0, **extra), make("sciworld", split=split, seed=9, **extra)
        tasks = [a.task(s) for s in range(60)]
        assert tasks == [b.task(s) for s in range(60)]
        assert [t.spec for t in tasks] == [b.task(s).spec for s in range(60)]
        names = {t.spec["task_name"] for t in tasks}
        assert len(names) == len(a.eligible) > 10  # every allowed task comes up
        for t in tasks:
            lo, hi = table["tasks"][t.spec["task_name"]]["splits"][package_split]
            assert lo <= t.spec["variation"] < hi and t.spec["package_split"] == package_split
            assert 3 <= t.spec["gold_length"] <= a.max_steps


def test_length_filter_and_task_options():
    env = make("sciworld", split="train", max_gold_length=8)
    specs = [env.task(s).spec for s in range(40)]
    assert all(3 <= s["gold_length"] <= 8 for s in specs) and len({s["task_name"] for s in specs}) >= 3
    by_id = make("sciworld", split="eval", tasks=["1-1"])  # ids work as well as names
    assert {by_id.task(s).spec["task_name"] for s in range(5)} == {"boil"}
    electrical = make("sciworld", tasks=["power-component"]).task(0).spec["simplifications"]
    assert "noElectricalAction" not in electrical and "teleportAction" in electrical
    assert effective_simplifications("boil", "easy").split(",")[-1] == "noElectricalAction"


@pytest.mark.parametrize("options, message", [
    ({"tasks": ["boil", "juggle"]}, "unknown sciworld task 'juggle'"),
    ({"simplifications": "easy,fly"}, "unknown sciworld simplification 'fly'"),
    ({"eval_split": "train"}, "eval_split"),
    ({"admissible": "all"}, "admissible"),
    ({"describe_new_room": "yes"}, "describe_new_room must be true or false"),
    ({"max_gold_length": 1}, "of 3 to 1 steps"),
    ({"min_gold_length": 60}, "of 60 to 50 steps"),
    ({"simplifications": "openDoors", "max_gold_length": 20}, "max_gold_length needs the surveyed simplifications"),
    ({"simplifications": "openDoors", "min_gold_length": 1}, "min_gold_length needs the surveyed"),
])
def test_bad_options_are_one_clear_error(options, message):
    with pytest.raises(GentaxError, match=message):
        make("sciworld", split="eval", **options)


def test_describe_new_room_shows_where_the_agent_arrived_and_costs_no_step(env):
    task = next(env.task(s) for s in range(len(SHORT)) if env.task(s).spec["task_name"] == "lifespan-longest-lived")
    plain, plain_info = play_expert(env, task)
    env.options["describe_new_room"] = True
    try:
        described, info = play_expert(env, task)
    finally:
        env.options["describe_new_room"] = False
    assert info["won"] and info["steps"] == plain_info["steps"]  # the look is free: same episode
    arrivals = [i for i, text in enumerate(plain) if text.startswith("You move to")]
    assert "You move to the outside." in [plain[i].strip() for i in arrivals], plain  # to the animals
    for i, (before, after) in enumerate(zip(plain, described)):
        if i in arrivals:  # the bare answer, then the room it names, with what is in it
            room = before.strip().removeprefix("You move to the").rstrip(".").strip()
            assert after.startswith(before.rstrip()) and f"called the {room}. " in after, after
            assert after.count("\n") > before.count("\n") + 2
        else:
            assert after == before, (i, before, after)


def test_valid_action_list_is_capped_and_playable(env):
    env.options["admissible"], env.options["admissible_cap"] = "valid", 12
    try:
        obs = env.reset(env.task(0))
        assert 1 < len(obs.admissible) <= 12
        assert len({a.split()[0] for a in obs.admissible}) > 3  # templates taken in turn
        obs2, _, _, info = env.step(obs.admissible[0])
        assert info["valid"] and obs2.text != NO_MATCH
    finally:
        env.options["admissible"], env.options["admissible_cap"] = "templates", 64


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["jvm_pid", "pid"])
def test_killed_jvm_or_worker_ends_the_episode_with_an_error_then_a_fresh_worker(env, victim, capfd):
    task = env.task(3)
    plain, _ = play_expert(env, task)
    env.reset(task)
    env.step(env.expert_action())
    old = env.worker_info
    capfd.readouterr()
    os.kill(old[victim], signal.SIGKILL)
    obs, reward, done, info = env.step(env.expert_action())
    assert done and reward == 0.0 and not info["won"] and "sciworld" in info["error"], info
    assert "\n" not in info["error"] and len(info["error"]) <= 200  # one short reason
    assert capfd.readouterr().err.count("Traceback") <= 1  # the traceback in the log once, not per py4j call
    assert env.worker_info is None
    with pytest.raises(RuntimeError):
        env.step("look around")
    texts, info = play_expert(env, task)  # a fresh worker and JVM: the very same episode
    assert texts == plain and info["won"] and env.worker_info["pid"] != old["pid"]


@pytest.mark.slow
def test_pool_reports_a_dead_jvm_as_a_failed_episode(env):
    with EnvPool("sciworld", "eval", tasks=SHORT) as pool:
        task = env.task(0)
        pool.reset([task])
        os.kill(pool._inline.envs[0].worker_info["jvm_pid"], signal.SIGKILL)
        obs, reward, done, info = pool.step(pool.expert_actions([0]))[0]
        assert done and not info["won"] and "error" in info
        pool.reset([task])  # a fresh env (and worker)
        while True:
            (_, _, done, info), = pool.step(pool.expert_actions([0])).values()
            if done:
                break
        assert info["won"]


def test_a_task_spec_alone_defines_the_episode(env):
    spec = {"task_name": "lifespan-longest-lived", "variation": 0,
            "simplifications": effective_simplifications("lifespan-longest-lived", "easy")}
    _, info = play_expert(env, Task("sciworld", "eval", 0, spec))
    assert info["won"]


def test_table_split_ranges_match_the_package(env):
    table = task_table()
    for name in ("boil", "find-animal"):
        live = env._live_worker().call("splits", name)
        for split, (lo, hi) in table["tasks"][name]["splits"].items():
            assert live[split] == list(range(lo, hi)), (name, split)


@pytest.mark.slow
def test_survey_reproduces_the_committed_table(tmp_path):
    out = tmp_path / "table.json"
    # 6 of the 16 committed train samples: random.sample draws the same first picks for k = 6 and 16
    made = survey(out, tasks=["lifespan-longest-lived"], per_split={"train": 6, "dev": 0, "test": 0}, log=lambda _: None)
    assert json.loads(out.read_text()) == made
    got, committed = made["tasks"]["lifespan-longest-lived"], task_table()["tasks"]["lifespan-longest-lived"]
    assert got["splits"] == committed["splits"] and got["id"] == committed["id"] == "7-1"
    assert len(got["gold_steps"]["train"]) == 6 and not got["gold_steps"]["dev"]
    assert got["gold_steps"]["train"].items() <= committed["gold_steps"]["train"].items()


@pytest.mark.slow
def test_a_pools_jvms_start_side_by_side_and_play_what_one_env_plays(env):
    """SciWorld envs are called from threads at once (concurrent_calls): their JVMs start together,
    every episode is the one a lone env plays, and a killed JVM fails its episode alone."""
    tasks = [env.task(s) for s in range(3)]
    alone = [play_expert(env, task) for task in tasks]
    with EnvPool("sciworld", "eval", tasks=SHORT) as pool:
        texts = [[o.text] for o in pool.reset(tasks)]
        infos = [w.worker_info for w in pool._inline.envs.values()]
        assert max(i["launched_at"] for i in infos) < min(i["ready_at"] for i in infos)  # all three starting at once
        live, last = set(range(3)), {}
        while live:
            for slot, (obs, _, done, info) in pool.step(pool.expert_actions(sorted(live))).items():
                texts[slot].append(obs.text)
                last[slot] = info
                if done:
                    live.discard(slot)
        assert [(t, last[s]["won"]) for s, t in enumerate(texts)] == [(t, i["won"]) for t, i in alone]
        pool.reset(tasks)
        os.kill(pool._inline.envs[1].worker_info["jvm_pid"], signal.SIGKILL)
        results = pool.step(pool.expert_actions([0, 1, 2]))
        assert "error" in results[1][3] and results[1][2]
        assert all("error" not in results[s][3] for s in (0, 2))
