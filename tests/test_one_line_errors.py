"""Every bad input ends in one line that names the file (or key) and the fix, with exit status 2 and
no traceback (issue 42).

- Job specs are read into their typed structure (``gentax.study.checks.KINDS``, the one the plan builds
  them through) before any work: a wrong-typed value of any key of any verb's spec is one line
  naming the verb, the key, the value and the type wanted.
- Config errors of every section are worded alike: ``rl:``, ``inits.v2.sft`` and the cross-field
  rules name the file that set the key and the closest valid key, as the schema's keys do; one rule
  for numbers given as text or as floats.
- The commands the errors print are real: each runs its ``--help``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from gentax import jobspec
from gentax.cli import build_parser
from gentax.study.checks import KINDS
from gentax.cli import main as gentax_main
from snakemake_plans import REPO, planned_jobs


@pytest.fixture(scope="module")
def spec_of_each_verb() -> dict[str, dict]:
    """One job spec of each verb, as the embedded plan writes it (its `snakemake -n -p` commands)."""
    specs: dict[str, dict] = {}
    for verb, spec in planned_jobs("--profile", "profiles/embedded"):
        specs.setdefault(verb, spec)
    return specs


def wrong_value(kind):
    """A JSON value that the annotation ``kind`` refuses (text first: a number given as "abc")."""
    return next(value for value in ("abc", 1.5, [1], {"a": 1}, True)
                if jobspec.type_problem(value, kind, "key") is not None)


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


# ---- 1. job specs, typed --------------------------------------------------------------------------
def test_the_embedded_plan_has_a_job_of_every_verb(spec_of_each_verb):
    assert set(spec_of_each_verb) == set(KINDS)


def test_a_wrong_typed_value_of_any_key_of_any_verb_is_one_line(spec_of_each_verb, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # nothing the specs name is here: the type is refused before any input is read
    checked = 0
    for verb, spec in sorted(spec_of_each_verb.items()):
        kind = KINDS[verb]
        hints = typing.get_type_hints(kind)
        for key in kind.field_names():
            value = wrong_value(hints[key])
            assert gentax_main([*verb.split(), "--job", json.dumps({**spec, key: value})]) == 2, (verb, key)
            line = error_line(capsys)
            assert line.startswith(f"gentax: error: gentax {verb} --job: key {key}: {json.dumps(value)} ("), line
            assert " is not " in line, line
            checked += 1
    assert checked == sum(len(kind.field_names()) for kind in KINDS.values())


@pytest.mark.parametrize("verb, key, value, line", [
    ("eval", "max_new_tokens", "abc", 'key max_new_tokens: "abc" (a string) is not an integer'),
    ("train rl", "end", "abc", 'key end: "abc" (a string) is not an integer'),
    ("table", "seed", "abc", 'key seed: "abc" (a string) is not an integer'),
    ("tasks", "episodes", 8.0, "key episodes: 8.0 (a number) is not an integer (an integer takes no decimal "
                               "point: write 8)"),
    ("summarize", "inputs", ["a.json", 3], "key inputs[1]: 3 (an integer) is not a string"),
    ("properties-table", "inputs", "a.json", 'key inputs: "a.json" (a string) is not a list of strings'),
])
def test_the_probes_of_the_issue_are_one_line_from_a_real_process(spec_of_each_verb, verb, key, value, line, tmp_path):
    """Through the command itself (exit status, nothing else printed), in a folder where no input is."""
    proc = subprocess.run([sys.executable, "-m", "gentax", *verb.split(), "--job",
                           json.dumps({**spec_of_each_verb[verb], key: value})],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [f"gentax: error: gentax {verb} --job: {line}"]


_FILLER = {"reference": "think.json", "source": "repeat", "token": ".", "tokens": None}


def _eval_domain(spec: dict, **changes) -> list[dict]:
    """An eval spec's ``domains`` with its first domain's keys changed."""
    return [{**spec["domains"][0], **changes}, *spec["domains"][1:]]


@pytest.mark.parametrize("verb, key, value, line", [
    ("eval", "domains", lambda spec: _eval_domain(spec, filler={**_FILLER, "tokens": "abc"}),
     'key domains[0].filler.tokens: "abc" (a string) is not an integer or null'),
    ("eval", "domains", lambda spec: _eval_domain(spec, filler={k: v for k, v in _FILLER.items() if k != "source"}),
     "key domains[0].filler: missing key(s) source"),
    ("eval", "domains", lambda spec: _eval_domain(spec, episodes="abc"),
     'key domains[0].episodes: "abc" (a string) is not an integer'),
    ("properties", "augmentation", {"eps": 80, "p": "x", "kind": "distractors"},
     'key augmentation.p: "x" (a string) is not a number'),
    ("controls-properties-table", "levels", [{"run_label": "x", "bogus": 1}], "key levels[0]: missing key(s) control, level, order, "),
    ("train rl", "run_spec", {"variant": "default"}, "key run_spec: "),
])
def test_a_wrong_value_inside_a_nested_part_of_a_spec_is_one_line(spec_of_each_verb, verb, key, value, line,
                                                                   tmp_path, monkeypatch, capsys):
    """The spec's nested parts (an evaluation's domains and their filler arms, a property log's
    augmentation, a control level) are typed as its top-level keys are: the path inside names the key."""
    monkeypatch.chdir(tmp_path)
    spec = spec_of_each_verb[verb]
    value = value(spec) if callable(value) else value
    assert gentax_main([*verb.split(), "--job", json.dumps({**spec, key: value})]) == 2
    assert error_line(capsys).startswith(f"gentax: error: gentax {verb} --job: {line}")


@pytest.mark.parametrize("verb, section, key, value, line", [
    ("train rl", "rl", "group_size", "8.0", 'key rl.group_size: "8.0" (a string) is not an integer (YAML reads'),
    ("train rl", "rl", "lrr", 1e-5, "key rl: unknown key(s) lrr"),
    ("sft train", "sft", "steps", 8.0, "key sft.steps: 8.0 (a number) is not an integer (an integer takes no "
                                       "decimal point: write 8)"),
])
def test_a_resolved_config_section_in_a_spec_names_its_key_under_the_verb(spec_of_each_verb, verb, section, key,
                                                                          value, line, tmp_path, monkeypatch, capsys):
    """The RL and SFT sections a spec carries are read (keys and types) before its inputs, worded as a spec key."""
    monkeypatch.chdir(tmp_path)
    spec = spec_of_each_verb[verb]
    assert gentax_main([*verb.split(), "--job", json.dumps({**spec, section: {**spec[section], key: value}})]) == 2
    assert error_line(capsys).startswith(f"gentax: error: gentax {verb} --job: {line}")


def test_a_plan_cannot_write_a_spec_its_verb_would_refuse():
    """The plan builds every spec through the verb's job kind: a key the verb does not read, or a
    value of the wrong type, stops the plan (the two cannot drift)."""
    from gentax.errors import GentaxError

    with pytest.raises(GentaxError, match=r"^gentax summarize --job: key out: null is not a string$"):
        KINDS["summarize"].build(inputs=[], keys={}, out=None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'episodes'"):
        KINDS["summarize"].build(inputs=[], keys={}, out="x.csv", episodes=3)


# ---- 4. config errors of every section alike ------------------------------------------------------
@pytest.mark.parametrize("text, line", [
    ("rl: {lrr: 1.0e-5}", "config key rl.lrr: unknown key (did you mean lr?); valid: group_size, tasks_per_step, "),
    ("inits: {v2: {sft: {stepz: 3}}}", "config key inits.v2.sft.stepz: unknown key (did you mean steps?); valid: pairs, "),
    ("cluster: {gpus_per_nodes: 8}", "config key cluster.gpus_per_nodes: unknown key (did you mean gpus_per_node?); "),
    ("rl: {verl: {rollot: hf}}", "config key rl.verl.rollot: unknown key (did you mean rollout?); valid: "),
    ('rl: {group_size: "8.0"}', "config key rl.group_size: must be an integer >= 1, got '8.0' (YAML reads '8.0' as "
                                "text, not a number: write 8, without quotes)"),
    ('rl: {lr: "1e-5"}', "config key rl.lr: must be a number > 0, got '1e-5' (YAML reads 1e-5 as text, not a number: "
                         "write 1.0e-5)"),
    ("rl: {group_size: 8.0}", "config key rl.group_size: must be an integer >= 1, got 8.0 (an integer takes no "
                              "decimal point: write 8)"),
    ("eval: {episodes: 8.0}", "config key eval.episodes: 8.0 is not of type 'integer' (an integer takes no decimal "
                              "point: write 8)"),
    ('inits: {v2: {sft: {mix: {sciworld: "19"}}}}', "config key inits.v2.sft.mix.sciworld: a mix weight must be an "
                                                    "integer >= 0, got '19' (YAML reads '19' as text, not a number: "
                                                    "write 19, without quotes)"),
    ("grid: {steps: 149}", "config key grid.steps: 149 is not a multiple of rl.save_every (15)"),
    ("inits: {v2: {sft: {temperature: 0.7}}}", "config key inits.v2.sft.temperature: set by rl.temperature (the SFT "
                                               "jobs take it from there, as the RL and evaluation jobs do); remove "
                                               "inits.v2.sft.temperature"),
    ("embedded_base: {seed: 3}", "config key embedded_base.seed: set by seed "),
], ids=["rl-typo", "sft-typo", "cluster-typo", "verl-typo", "rl-quoted-float", "rl-yaml-float", "rl-float-int",
        "eval-float-int", "sft-quoted-weight", "cross-field", "sft-from-study", "warm-start-from-study"])
def test_every_config_section_names_the_key_the_file_and_the_fix(text, line, tmp_path, capsys):
    """`gentax plan` (the same validation as `snakemake -n`) on the paper preset with one layer."""
    layer = tmp_path / "mine.yaml"
    layer.write_text(text + "\n")
    assert gentax_main(["plan", "--preset", "paper", "--config", str(layer)]) == 2
    error = error_line(capsys)
    assert error.startswith(f"gentax: error: {line}"), error
    assert error.endswith(f"(set in {layer})"), error


def test_the_engines_own_config_files_are_named_with_the_key(tmp_path, capsys):
    """`gentax train rl --config` / `gentax sft build-data --config`: the file, the key, did-you-mean."""
    rl = tmp_path / "rl.yaml"
    rl.write_text("rl: {lrr: 1.0e-5}\n")
    assert gentax_main(["train", "rl", "--config", str(rl), "--init", str(tmp_path), "--domain", "sokoban",
                        "--out", str(tmp_path / "run")]) == 2
    assert error_line(capsys).startswith(f"gentax: error: {rl}: RL config key lrr: unknown key (did you mean lr?)")
    sft = tmp_path / "sft.yaml"
    sft.write_text("sft: {steps: 8.0}\n")
    assert gentax_main(["sft", "build-data", "--config", str(sft), "--out", str(tmp_path / "data")]) == 2
    assert error_line(capsys) == (f"gentax: error: {sft}: SFT config key steps: must be an integer >= 1, got 8.0 "
                                  "(an integer takes no decimal point: write 8)")


# ---- 7. the commands the errors print are real ----------------------------------------------------
def _subcommands(parser) -> dict:
    import argparse

    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def runs_its_help(words: list[str]) -> bool:
    """``gentax WORDS --help`` exits 0 (a real command), printing its help."""
    try:
        build_parser().parse_args([*words, "--help"])
    except SystemExit as exc:
        return exc.code == 0
    return False


def printed_commands(lines: list[str]) -> set[tuple[str, ...]]:
    """The ``gentax VERB ...`` commands named in error lines (the words before the first option,
    colon or comma)."""
    found = set()
    for line in lines:
        for match in re.finditer(r"\bgentax ((?:[a-z][a-z0-9-]* ?)+?)(?= --|:|,|\)|$)", line.removeprefix("gentax: ")):
            found.add(tuple(match.group(1).split()))
    return found


def test_the_commands_every_verbs_errors_print_run_their_help(spec_of_each_verb, tmp_path, monkeypatch, capsys):
    """Each verb's errors (a wrong-typed key, a missing input under --check, --check without --job, a
    command line without its options) name commands whose --help runs."""
    monkeypatch.chdir(tmp_path)
    lines = []
    for verb, spec in sorted(spec_of_each_verb.items()):
        kind = KINDS[verb]
        first = kind.field_names()[0]
        wrong = {**spec, first: wrong_value(typing.get_type_hints(kind)[first])}
        for argv in ([*verb.split(), "--job", json.dumps(wrong)], [*verb.split(), "--job", json.dumps(spec), "--check"],
                     [*verb.split(), "--check"], verb.split()):
            try:
                code = gentax_main(argv)
            except SystemExit as exc:  # argparse: a required option left out (its usage line names the command)
                code = exc.code
            err = capsys.readouterr().err.strip()
            assert code in (0, 2) and "Traceback" not in err, (argv, err)  # 0: a --check with no input to miss
            lines += [line for line in err.splitlines() if "error" in line]
    commands = printed_commands(lines)
    assert {words[:2] if words[0] in ("train", "sft", "model") else words[:1] for words in commands} >= \
        {tuple(verb.split()) for verb in KINDS}, commands
    assert [words for words in commands if not runs_its_help(list(words))] == []


def test_every_command_the_code_names_is_real():
    """Each ``gentax A B`` the package's sources name (messages, docstrings): A is a command and, where
    A has subcommands, B is one of them (``gentax build-data`` once stood for ``gentax sft build-data``)."""
    top = _subcommands(build_parser())
    groups = {name: _subcommands(parser) for name, parser in top.items()}
    subcommands = {sub for group in groups.values() for sub in group}
    wrong = []
    for path in sorted((REPO / "gentax").rglob("*.py")):
        for match in re.finditer(r"gentax ([a-z][a-z0-9-]*)(?: (\S+))?", path.read_text()):
            first, second = match.group(1), (match.group(2) or "").strip("`'\",.;:()")
            if first in top:
                if groups[first] and second and not second.startswith("{") and second not in groups[first]:
                    wrong.append(f"{path.relative_to(REPO)}: {match.group(0)}")
                elif not runs_its_help([first, *([second] if groups[first] and second in groups[first] else [])]):
                    wrong.append(f"{path.relative_to(REPO)}: {match.group(0)} (--help fails)")
            elif first in subcommands:
                wrong.append(f"{path.relative_to(REPO)}: {match.group(0)} (a subcommand without its command)")
    assert wrong == []
