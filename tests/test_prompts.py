"""Step prompts: verl-agent layout, history window, think/no-think, admissible cap, compactness."""

import random
import re

import pytest
from agent_observations import SLOW, observations

from gentax.agent.prompts import MAX_ADMISSIBLE_SHOWN, build_messages, format_admissible, observation_from_prompt
from gentax.domains import DOMAINS
from gentax.domains.augment import augment
from gentax.domains.base import Observation
from gentax.errors import GentaxError


def content(*args, **kwargs):
    messages = build_messages(*args, **kwargs)
    assert len(messages) == 1 and messages[0]["role"] == "user"
    return messages[0]["content"]


@pytest.mark.parametrize("domain", [pytest.param(d, marks=pytest.mark.slow) if d in SLOW else d for d in DOMAINS])
def test_first_step_prompt_holds_task_observation_actions_and_instruction(domain):
    """(The slow params start the shared ALFWorld / ScienceWorld envs for the session.)"""
    obs = observations(domain)[0]
    text = content(domain, obs, [], 0)
    goal = re.sub(r"^your task is to:? ?", "", obs.goal.strip(), flags=re.I)
    assert f"Your task is to: {goal}" in text and text.count("task is to") == 1 + obs.text.count("task is to")
    assert "Prior to this step" not in text and "[Observation" not in text
    assert f"You are now at step 1. Current observation:\n{obs.text}\n" in text
    shown = obs.admissible[: MAX_ADMISSIBLE_SHOWN[domain] or len(obs.admissible)]
    assert all(f"'{a}'" in text for a in shown)
    assert "<think> </think>" in text and "<action> </action>" in text
    assert text.index(goal) < text.index("Current observation") < text.index("Admissible actions")
    assert observation_from_prompt(text) == obs.text


@pytest.mark.parametrize("domain", DOMAINS)
def test_history_window_shows_the_last_pairs_numbered_by_step(domain):
    seen = observations(domain)
    history = [(f"observation number {i}", f"action number {i}") for i in range(1, 6)]
    text = content(domain, seen[-1], history, 5, history_length=2)
    assert "already taken 5 step(s)" in text and "most recent 2 observation(s)" in text
    assert "[Observation 4: 'observation number 4', Action 4: 'action number 4']" in text
    assert "[Observation 5: 'observation number 5', Action 5: 'action number 5']" in text
    assert "number 3" not in text
    assert "You are now at step 6." in text
    assert observation_from_prompt(text) == seen[-1].text
    short = content(domain, seen[-1], history[:1], 1, history_length=2)
    assert "most recent 1 observation(s)" in short and "[Observation 1: 'observation number 1'" in short
    none = content(domain, seen[-1], history, 5, history_length=0)  # verl-agent's no-history template
    assert "step(s)" not in none and "You are now at step" not in none and "[Observation" not in none
    assert f"Current observation:\n{seen[-1].text}\n" in none and observation_from_prompt(none) == seen[-1].text


def test_no_think_mode_asks_for_the_action_only():
    obs = observations("sokoban")[0]
    text = content("sokoban", obs, [], 0, think=False)
    assert "<think>" not in text and "<action> </action>" in text and "nothing else" in text


def test_sciworld_template_hint_only_with_templates():
    hint = "replace each OBJ"
    templates = Observation("You move to the hallway.", "Your task is to boil water.", ("open OBJ", "look around"))
    concrete = Observation("You move to the hallway.", "Your task is to boil water.", ("open door", "look around"))
    assert hint in content("sciworld", templates, [], 0)
    assert hint not in content("sciworld", concrete, [], 0)
    assert "Your task is to: boil water." in content("sciworld", concrete, [], 0)


def test_sciworld_admissible_list_is_capped_and_says_so():
    many = tuple(f"focus on object {i}" for i in range(5000))
    obs = Observation("This room is called the kitchen.", "boil water", many)
    text = content("sciworld", obs, [], 0)
    assert "'focus on object 49'" in text and "'focus on object 50'" not in text
    assert "... (4950 more not shown)]" in text
    assert len(text) < 2500
    full = content("sciworld", obs, [], 0, max_admissible=None)
    assert "'focus on object 4999'" in full
    assert format_admissible(("a", "b"), 5) == "'a', 'b'"


@pytest.mark.parametrize("domain", DOMAINS)
def test_prompt_overhead_is_compact(domain):
    """Everything but the task, observations and actions stays under ~700 characters."""
    obs = observations(domain)[-1]
    history = [(o.text, "some action") for o in observations(domain)[:2]]
    text = content(domain, obs, history, 2)
    variable = len(obs.goal) + len(obs.text) + sum(len(o) + len(a) for o, a in history)
    variable += len(format_admissible(obs.admissible, MAX_ADMISSIBLE_SHOWN[domain]))
    assert len(text) - variable < 700


@pytest.mark.parametrize("domain", DOMAINS)
def test_augmented_observation_is_what_the_prompt_shows(domain):
    obs = observations(domain)[0]
    seen = augment(domain, obs.text, 80, random.Random(0), goal=obs.goal)
    text = content(domain, Observation(seen.text, obs.goal, obs.admissible), [], 0)
    assert observation_from_prompt(text) == seen.text
    assert all(snippet in text for snippet in seen.inserted)


def test_bad_input_is_a_clear_error():
    obs = observations("sokoban")[0]
    with pytest.raises(GentaxError, match="unknown domain"):
        build_messages("chess", obs, [], 0)
    with pytest.raises(GentaxError, match="history_length"):
        build_messages("sokoban", obs, [], 0, history_length=-1)
    with pytest.raises(GentaxError, match="not rendered"):
        observation_from_prompt("hello")
