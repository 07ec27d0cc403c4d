"""`gentax eval` / `gentax properties` end to end on Sokoban with the expert generator (fast), the
files they write, and bad input."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from gentax.cli import main
from gentax.errors import GentaxError
from gentax.rollout.schema import EPISODE_SCHEMA, STEP_SCHEMA


def test_eval_writes_tables_then_summary(tmp_path, capsys):
    out = tmp_path / "eval" / "sokoban.parquet"
    code = main(["eval", "--generator", "expert", "--domain", "sokoban", "--episodes", "3", "--max-steps", "15",
                 "--first-task", "5", "--quiet", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "success rate 1.000" in printed and "invalid rate 0.000" in printed
    summary = json.loads((tmp_path / "eval" / "sokoban.json").read_text())
    assert summary["success_rate"] == 1.0 and summary["episodes"] == 3 and summary["task_seeds"] == [5, 6, 7]
    assert summary["domain"] == "sokoban" and summary["sampling"]["temperature"] == 0.4 and summary["think"] is True
    steps = pq.read_table(tmp_path / "eval" / "sokoban.steps.parquet")
    episodes = pq.read_table(tmp_path / "eval" / "sokoban.episodes.parquet")
    assert steps.schema.equals(STEP_SCHEMA, check_metadata=False) and episodes.schema.equals(EPISODE_SCHEMA, check_metadata=False)
    assert episodes.column("task_seed").to_pylist() == [5, 6, 7]
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == [
        ".sokoban.json.lock", "sokoban.episodes.parquet", "sokoban.json", "sokoban.steps.parquet"]  # the writers' lock


def test_the_log_says_where_a_domains_generation_time_went(capsys):
    """The hf generator's stats since the domain began (a merged job's generator plays several
    domains), one line; a generator without the split (expert, vllm) prints none."""
    from types import SimpleNamespace

    from gentax.rollout.jobs import print_generation

    before = {"prefill_s": 10.0, "prefill_positions": 1000, "reused_tokens": 50, "decode_s": 4.0, "response_tokens": 90}
    after = {"prefill_s": 31.5, "prefill_positions": 16000, "reused_tokens": 2050, "decode_s": 12.25,
             "response_tokens": 754, "calls": 9}
    print_generation(before, SimpleNamespace(stats=after))
    print_generation({}, SimpleNamespace(stats={"calls": 3, "seconds": 1.0}))
    assert capsys.readouterr().out == ("generation: prefill 21.5 s (15,000 positions computed, 2,000 reused), "
                                       "decode 8.2 s (664 tokens)\n")


def test_no_think_and_options_reach_the_collector(tmp_path):
    out = tmp_path / "x.parquet"
    assert main(["eval", "--generator", "expert", "--domain", "sokoban", "--episodes", "1", "--no-think", "--quiet",
                 "--option", "max_solution_length=8", "--out", str(out)]) == 0
    summary = json.loads((tmp_path / "x.json").read_text())
    assert summary["think"] is False and summary["env_options"] == {"max_solution_length": 8}
    responses = pq.read_table(tmp_path / "x.steps.parquet").column("response").to_pylist()
    assert all(r.startswith("<action>") for r in responses)


def test_properties_writes_measures(tmp_path, capsys):
    out = tmp_path / "props.parquet"
    assert main(["properties", "--generator", "expert", "--domain", "sokoban", "--episodes", "2", "--t-max", "50",
                 "--quiet", "--out", str(out)]) == 0
    report = json.loads((tmp_path / "props.json").read_text())
    assert report["t_max"] == 50 and report["max_steps"] == 50 and report["domain"] == "sokoban"
    measures = report["measures"]
    assert measures["success"] == 1.0 and measures["richness"] > 100 and 1 <= measures["complexity"] < 50
    assert "richness" in capsys.readouterr().out


def test_properties_of_augmented_states_measure_the_richer_text(tmp_path):
    # a richness level of the controls: the property log sees the states its runs train on
    plain, rich = tmp_path / "plain.parquet", tmp_path / "rich.parquet"
    common = ["properties", "--generator", "expert", "--domain", "sokoban", "--episodes", "2", "--t-max", "50", "--quiet"]
    assert main([*common, "--out", str(plain)]) == 0
    assert main([*common, "--aug-eps", "80", "--aug-p", "1.0", "--out", str(rich)]) == 0
    plain_report, rich_report = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("plain", "rich"))
    assert rich_report["augmentation"] == {"eps": 80, "p": 1.0, "kind": "distractor"}
    assert rich_report["measures"]["augmented_fraction"] == 1.0 and plain_report["measures"]["augmented_fraction"] == 0.0
    assert rich_report["measures"]["richness"] > plain_report["measures"]["richness"] + 100


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["eval", "--domain", "chess", "--episodes", "1", "--generator", "expert", "--out", str(tmp_path / "a.parquet")]) == 2
    assert "unknown domain 'chess'" in capsys.readouterr().err
    assert main(["eval", "--domain", "sokoban", "--episodes", "1", "--model", str(tmp_path), "--out", str(tmp_path / "b.parquet")]) == 2
    assert "no config.json" in capsys.readouterr().err
    assert main(["eval", "--domain", "sokoban", "--episodes", "1", "--model", str(tmp_path / "missing"),
                 "--out", str(tmp_path / "b.parquet")]) == 2
    assert f"model folder {tmp_path / 'missing'} does not exist" in capsys.readouterr().err
    assert main(["eval", "--domain", "sokoban", "--episodes", "0", "--generator", "expert", "--out", str(tmp_path / "c.parquet")]) == 2
    assert not list(tmp_path.glob("*.parquet"))


def test_run_summary_rows_carry_each_tasks_outcome(tmp_path):
    """The workflow's summary row of an evaluation holds its success per task, read from the
    episodes table beside the JSON, and loads as analysis input (paired ΔID intervals)."""
    import pandas as pd

    from gentax.analysis.summary import load_summary, parse_task_outcomes
    from gentax.study import jobs

    step = tmp_path / "eval" / "v1" / "sokoban" / "default" / "seed0" / "step2"
    assert main(["eval", "--generator", "expert", "--domain", "sokoban", "--episodes", "4", "--max-steps", "2",
                 "--first-task", "5", "--quiet", "--out", str(step / "sokoban.parquet")]) == 0
    out = tmp_path / "summary.csv"
    spec = jobs.encode(jobs.summary([str(step / "sokoban.json")],
                                    {"init": "v1", "train_domain": "sokoban", "variant": "default", "seed": 0}, str(out)))
    assert main(["summarize", "--job", spec]) == 0
    row = load_summary(out).iloc[0]
    outcomes = parse_task_outcomes(row["task_outcomes"])
    won = pq.read_table(step / "sokoban.episodes.parquet").column("won").to_pylist()
    assert sorted(outcomes) == [5, 6, 7, 8] and list(outcomes.values()) == [float(w) for w in won]
    assert row["success"] == sum(won) / 4 and row["step"] == 2

    (step / "sokoban.episodes.parquet").unlink()
    assert main(["summarize", "--job", spec]) == 2  # one line: "...episodes.parquet is missing; rebuild it: ..."
    assert pd.read_csv(out)["task_outcomes"].iloc[0] == row["task_outcomes"]  # the earlier summary is kept


@pytest.mark.parametrize("verb", ["eval", "properties"])
def test_a_command_line_plays_as_the_workflow_job_of_its_study(verb, tmp_path):
    """What `gentax eval` / `properties` leave out is what the workflow's job of the study receives
    (issue #41 item 2): sampling, generator, dtype, seed, the domain's step limit and knobs, ...; and
    a filler evaluation's source, token and length."""
    from gentax.cli import _study_defaults, build_parser
    from gentax.rollout.cli import spec_from_args
    from gentax.rollout.jobs import evaluations
    from gentax.study import jobs
    from gentax.study.config import study_config
    from gentax.study.plan import eval_filler

    cfg, out = study_config("embedded"), str(tmp_path / "x.json")

    def command_line(*options):
        args = build_parser().parse_args([verb, "--preset", "embedded", "--domain", "sokoban", "--model", "m",
                                          "--episodes", "8", "--out", str(tmp_path / "x.parquet"), *options])
        args.study_defaults = _study_defaults(args)
        spec = spec_from_args(args)
        return evaluations(spec)[0] if verb == "eval" else spec.to_dict()

    if verb == "eval":
        [job] = evaluations(jobs.eval_checkpoint(cfg, model="m", think="on", tasks_files={"sokoban": "t.json"},
                                                 out_jsons={"sokoban": out}))
        keys = ["max_steps"]
    else:
        job = jobs.properties(cfg, domain="sokoban", settings=jobs.domain_settings(cfg, "sokoban"), model="m",
                              tasks_file="t.json", out_json=out)
        keys = ["t_max"]
    keys += ["temperature", "top_p", "max_new_tokens", "history_length", "generator", "dtype", "seed", "options",
             "errors_as_losses"]
    line = command_line()
    assert {key: line[key] for key in keys} == {key: job[key] for key in keys}
    assert job["options"] and line["generator"] == cfg["engines"]["generator"] == "hf"  # the study's, not a constant
    filler = command_line("--think", "filler", "--filler-reference", "r.json")["filler"]
    assert filler == {"reference": "r.json", **eval_filler(cfg)}
    assert command_line("--option", "room_size=6")["options"] == {**job["options"], "room_size": 6}
