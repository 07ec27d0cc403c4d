"""State Information Augmentation: counts, reversibility, safety, determinism, rate, transitions."""

import math
import random
import re

import pytest
from agent_observations import REAL_REQUIRED, SLOW, expert_episode, is_real, observations, shared_env

from gentax.agent.parse import format_response, parse_response
from gentax.agent.prompts import build_messages
from gentax.domains import make
from gentax.domains.alfworld import ALFWORLD_TYPES
from gentax.domains.augment import (
    CHARS_PER_TOKEN,
    DOMAINS,
    DONOR_CHARS_PER_TOKEN,
    KINDS,
    MONITOR_SHOWS,
    NOMINAL_TOKENS,
    Augmented,
    TrajectoryAugmenter,
    augment,
    observation_bank,
    strip_inserted,
)
from gentax.domains.sciworld import SCIWORLD_THINGS
from gentax.errors import GentaxError

EPS = (0, 5, 10, 12, 30, 40, 80, 200, 300)
COORD = re.compile(r"\((\d+), (\d+)\)")


def all_observations():
    return [(domain, obs) for domain in DOMAINS for obs in observations(domain)]


def test_required_domains_use_real_envs():
    for domain in REAL_REQUIRED:
        assert is_real(domain)
        assert observations(domain)[0].text == make(domain).reset().text


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("kind", ["distractor", "fixed_boilerplate", "shuffled"])
def test_count_is_floor_eps_over_nominal_size(domain, kind):
    for obs in observations(domain):
        for eps in EPS:
            result = augment(domain, obs.text, eps, random.Random(eps), kind)
            assert len(result.inserted) == eps // NOMINAL_TOKENS[domain]
            assert (result.text == obs.text) == (not result.inserted)


@pytest.mark.parametrize("kind", KINDS)
def test_removing_inserted_snippets_gives_back_the_original(kind):
    for domain, obs in all_observations():
        for seed in range(3):
            result = augment(domain, obs.text, 120, random.Random(seed), kind, goal=obs.goal)
            assert result.inserted, (domain, kind)
            position = 0
            for snippet in result.inserted:  # listed in order of appearance, verbatim
                found = result.text.find(snippet, position)
                assert found >= 0
                position = found + len(snippet)
            assert strip_inserted(domain, result.text, result.inserted) == obs.text


def test_sokoban_distractors_lie_outside_the_room_and_never_on_a_real_cell():
    for obs in observations("sokoban"):
        cells = {(int(r), int(c)) for r, c in COORD.findall(obs.text)}
        rows, cols = max(r for r, _ in cells) + 1, max(c for _, c in cells) + 1
        for seed in range(20):
            result = augment("sokoban", obs.text, 640, random.Random(seed))
            assert len(result.inserted) == 64
            placed = []
            for line in result.inserted:
                match = re.fullmatch(r"\((\d+), (\d+)\) shows an? [A-Z][a-z]+( [a-z]+)* \(beyond the wall; unreachable\)", line)
                assert match, line
                r, c = int(match.group(1)), int(match.group(2))
                assert (r, c) not in cells and (r >= rows or c >= cols)
                placed.append((r, c))
            assert len(set(placed)) == len(placed)
            for line in result.text.splitlines():  # each distractor is a whole line
                assert line in result.inserted or line in obs.text.splitlines()


def test_alfworld_sentences_follow_sentence_ends_and_name_no_real_object():
    for obs in observations("alfworld"):
        result = augment("alfworld", obs.text, 120, random.Random(1), goal=obs.goal)
        for snippet in result.inserted:
            at = result.text.index(snippet)
            assert result.text[at - 1] == " " and result.text[at - 2] in ".!?"
            assert re.fullmatch(r"[A-Z][a-z ]+, there is an? [a-z ]+ [1-9] that [a-z ,'-]+\.", snippet), snippet
            if "Your task is to:" in obs.text:  # the task statement stays free of distractors
                assert at < result.text.index("Your task is to:")
        for action in obs.admissible:
            assert not any(kind in action for kind in ALFWORLD_TYPES)
        banner = "-= Welcome to TextWorld, ALFRED! =-"
        if banner in obs.text:  # "!" before "=-" is no sentence end: the banner stays whole
            assert banner in augment("alfworld", obs.text, 1200, random.Random(0)).text


def test_distractors_avoid_goal_words():
    text = "You arrive at desk 1. On the desk 1, you see a pen 1."
    for seed in range(30):
        result = augment("alfworld", text, 240, random.Random(seed), goal="put a guitar and an umbrella in drawer.")
        assert not any("guitar" in s or "umbrella" in s for s in result.inserted)
    shop = "Instruction: [SEP] i want a wool hoodie and sunglasses [SEP] Back to Search [SEP] B0ABCDEFGH [SEP] Hoodie [SEP] $9.99"
    for seed in range(30):
        result = augment("webshop", shop, 200, random.Random(seed))  # goal read from the page itself
        assert not any(re.search(r"hoodie|sunglass", s, re.I) for s in result.inserted)
    page = observations("webshop")[1].text  # a real results page (no instruction in it)
    for seed in range(30):
        augmenter = TrajectoryAugmenter("webshop", 200, 1.0, "distractor", seed=seed, goal="a wool hoodie and sunglasses")
        assert not any(re.search(r"hoodie|sunglass", s, re.I) for s in augmenter(page, 1).inserted)


def test_webshop_snippets_by_page_type_and_never_clickable():
    for obs in observations("webshop"):
        segments = obs.text.split(" [SEP] ")
        results_page = "Next >" in segments or any(re.fullmatch(r"[A-Z0-9]{10}", s) for s in segments)
        item_page = any(s.lower() == "buy now" for s in segments)
        clickables = {a.lower() for a in obs.admissible}
        kinds = set()
        for seed in range(10):
            result = augment("webshop", obs.text, 200, random.Random(seed), goal=obs.goal)
            for snippet in result.inserted:
                kind = "ad" if snippet.startswith("[AD]") else "listing" if snippet.startswith("Warning: out of stock") else "feature"
                kinds.add(kind)
                assert f"click[{snippet.lower()}]" not in clickables and snippet.lower() not in clickables
                sep = " [SEP] " if "[SEP]" in obs.text else "\n"  # the bare search page has one line
                before = result.text[: result.text.index(snippet)]
                assert before.endswith(sep)
                original_before = before[: -len(sep)]
                while any(original_before.endswith(sep + s) for s in result.inserted):
                    other = next(s for s in result.inserted if original_before.endswith(sep + s))
                    original_before = original_before[: -len(sep + other)]  # same boundary
                assert not original_before.endswith(":")
                if kind == "listing":
                    assert results_page and re.search(r"\$[\d.]+$", original_before)
                if kind == "feature":
                    assert item_page and snippet.startswith("Extra feature: ")
                parsed = parse_response(f"<action>click[{snippet}]</action>", domain="webshop", admissible=obs.admissible, think=False)
                assert parsed.reason == "not_admissible"
        assert kinds == {"ad"} | ({"listing"} if results_page else set()) | ({"feature"} if item_page else set())


def test_sciworld_distractors_are_not_scienceworld_objects():
    for obs in observations("sciworld"):
        result = augment("sciworld", obs.text, 120, random.Random(0), goal=obs.goal)
        for snippet in result.inserted:
            assert snippet.startswith("Also here: ") and snippet.endswith("(out of reach).")
            assert any(thing in snippet for thing in SCIWORLD_THINGS)
            assert result.text[result.text.index(snippet) - 1] == "\n"


def test_control_arms_match_the_distractor_arm_in_count_position_and_length():
    for domain, obs in all_observations():
        plain = augment(domain, obs.text, 100, random.Random(7), "distractor")
        fixed = augment(domain, obs.text, 100, random.Random(7), "fixed_boilerplate")
        shuffled = augment(domain, obs.text, 100, random.Random(7), "shuffled")
        assert [len(s) for s in fixed.inserted] == [len(s) for s in plain.inserted]
        assert len(fixed.text) == len(plain.text)
        assert [sorted(s.split()) for s in shuffled.inserted] == [sorted(s.split()) for s in plain.inserted]
        assert shuffled.inserted != plain.inserted


def test_fixed_boilerplate_is_one_fixed_text():
    from gentax.domains.augment import FIXED_TEXT

    obs = observations("sokoban")[0]
    result = augment("sokoban", obs.text, 300, random.Random(0), "fixed_boilerplate")
    for snippet in result.inserted:
        assert (FIXED_TEXT * 3).startswith(snippet[:-1])


def test_cross_domain_shows_other_domains_real_observations():
    bank = observation_bank()
    assert set(REAL_REQUIRED) <= set(bank)
    for domain, obs in all_observations():
        result = augment(domain, obs.text, 300, random.Random(3), "cross_domain", goal=obs.goal)
        assert result.inserted
        tokens = 0.0
        for snippet in result.inserted:
            prefix, _, shown = snippet.partition(": ")
            assert prefix.startswith("There is a monitor showing ")
            donor = next(d for d, what in MONITOR_SHOWS.items() if prefix.endswith(what))
            assert donor != domain
            tokens += (len(prefix) + 3) / CHARS_PER_TOKEN + len(shown) / DONOR_CHARS_PER_TOKEN[donor]
            donor_texts = [" ".join(t.split()) for d, texts in bank.items() if d != domain for t in texts]
            body = shown[:-4] if shown.endswith(" ...") else shown
            body = body[4:] if body.startswith("... ") else body
            assert any(body in t for t in donor_texts)
        assert tokens <= 300
        assert augment(domain, obs.text, 15, random.Random(3), "cross_domain").inserted == []


@pytest.mark.parametrize("kind", KINDS)
def test_deterministic_given_the_rng_and_sensitive_to_the_seed(kind):
    for domain, obs in all_observations():
        first = augment(domain, obs.text, 80, random.Random(11), kind)
        assert first == augment(domain, obs.text, 80, random.Random(11), kind)
        others = {augment(domain, obs.text, 80, random.Random(s), kind).text for s in range(5)}
        assert len(others) > 1


def test_trajectory_augmenter_is_deterministic_per_step_and_seed():
    obs = observations("sokoban")
    a = TrajectoryAugmenter("sokoban", 80, 1.0, "distractor", seed=5)
    b = TrajectoryAugmenter("sokoban", 80, 1.0, "distractor", seed=5)
    forward = [a(o.text, t) for t, o in enumerate(obs)]
    backward = [b(o.text, t) for t, o in reversed(list(enumerate(obs)))][::-1]
    assert forward == backward  # no hidden state: step t depends on (seed, t) only
    other = TrajectoryAugmenter("sokoban", 80, 1.0, "distractor", seed=6)
    assert [other(o.text, t) for t, o in enumerate(obs)] != forward
    assert a(obs[0].text, 0) != a(obs[0].text, 1)  # steps differ


def test_inactive_trajectory_is_the_identity():
    off = TrajectoryAugmenter("alfworld", 300, 0.0, "distractor", seed=1)
    assert not off.active
    text = observations("alfworld")[0].text
    assert off(text, 0) == Augmented(text, [])
    assert not TrajectoryAugmenter("alfworld", 0, 1.0, "distractor", seed=1).active


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_empirical_rate_of_augmented_trajectories_matches_p(p):
    n = 4000
    rate = sum(TrajectoryAugmenter("webshop", 40, p, "distractor", seed=s).active for s in range(n)) / n
    assert abs(rate - p) <= 4.5 * math.sqrt(p * (1 - p) / n)


def test_active_decision_is_shared_across_arms():
    for seed in range(200):
        decisions = {
            TrajectoryAugmenter(domain, eps, 0.5, kind, seed=seed).active
            for domain in DOMAINS for eps in (40, 300) for kind in KINDS
        }
        assert len(decisions) == 1


def test_bad_arguments_are_clear_errors():
    with pytest.raises(GentaxError, match="kind"):
        augment("sokoban", "x", 10, random.Random(0), "noise")
    with pytest.raises(GentaxError, match="domain"):
        augment("chess", "x", 10, random.Random(0))
    with pytest.raises(GentaxError, match="eps"):
        augment("sokoban", "x", -1, random.Random(0))
    with pytest.raises(GentaxError, match="p must be"):
        TrajectoryAugmenter("sokoban", 10, 1.5, "distractor", seed=0)


def _play(env, domain, seed, actions, augmenter):
    """The collector's loop: the agent sees augmented text, the env steps on its own state."""
    obs = env.reset(env.task(seed))
    history, trace, shown = [], [], []
    for step, action in enumerate(actions):
        seen = augmenter(obs.text, step, goal=obs.goal)
        prompt = build_messages(domain, obs.__class__(seen.text, obs.goal, obs.admissible), history, step)
        shown.append(prompt[0]["content"])
        parsed = parse_response(format_response(action, "reasoning"), domain=domain, admissible=obs.admissible)
        if parsed.valid:
            obs, reward, done, info = env.step(parsed.action)
        else:
            obs, reward, done, info = env.step_invalid(parsed.reason)
        trace.append((obs, reward, done, info))
        history.append((seen.text, action))
        if done:
            break
    return trace, shown


@pytest.mark.parametrize(
    "domain", [pytest.param(d, marks=pytest.mark.slow) if d in SLOW else d for d in DOMAINS]
)
def test_augmented_episode_has_the_plain_episodes_transitions_and_rewards(domain):
    if not is_real(domain):
        pytest.skip(f"{domain} env module is not available here")  # required domains never skip
    env = shared_env(domain)
    _, expert = expert_episode(domain, 0)
    actions = ["not a real action", *expert]  # an invalid step first, then the expert's plan
    plain, plain_prompts = _play(env, domain, 0, actions, TrajectoryAugmenter(domain, 0, 0.0, "distractor", seed=0))
    assert plain[0][1] < 0 and not plain[0][3]["valid"]  # the invalid step cost the penalty
    kinds = ("cross_domain",) if domain in SLOW else KINDS
    for kind in kinds:
        augmented, prompts = _play(env, domain, 0, actions, TrajectoryAugmenter(domain, 200, 1.0, kind, seed=0))
        assert len(augmented) == len(plain)
        for step, (seen, expected) in enumerate(zip(augmented, plain)):
            assert _comparable(domain, seen) == _comparable(domain, expected), f"{kind}, step {step}"
        assert all(len(a) > len(p) for a, p in zip(prompts, plain_prompts))


def _comparable(domain, transition):
    """ScienceWorld lists a container's objects in a different order after some resets (seen
    once the gold path was generated), so its texts compare as multisets of listed items."""
    obs, reward, done, info = transition
    items = re.split(r", |\n", obs.text)
    text = sorted(item.strip().rstrip(".") for item in items) if domain == "sciworld" else obs.text
    return text, obs.goal, obs.admissible, reward, done, info


@pytest.mark.parametrize("domain, kind", [("sokoban", "distractor"), ("webshop", "cross_domain"), ("webshop", "shuffled")])
def test_cli_preview_json(domain, kind, capsys):
    import json

    from gentax.cli import main

    assert main(["augment", "preview", "--domain", domain, "--eps", "80", "--kind", kind, "--seed", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    env = make(domain)
    assert out["original"] == env.reset(env.task(2)).text
    assert out["inserted"] and strip_inserted(domain, out["augmented"], out["inserted"]) == out["original"]
    assert main(["augment", "preview", "--domain", domain, "--eps", "80", "--kind", kind, "--seed", "2"]) == 0
    plain = capsys.readouterr().out
    assert out["original"] in plain and out["augmented"] in plain


def test_cli_bad_eps_is_one_line_error(capsys):
    from gentax.cli import main

    assert main(["augment", "preview", "--domain", "sokoban", "--eps", "-3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "eps" in err
