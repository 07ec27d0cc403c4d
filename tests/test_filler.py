"""Filler thinking (gentax.agent.filler): exact token counts under the policy's tokenizer, no
reasoning text, seeded shuffles; the prompt, parser, generators and collector in filler mode."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest

from gentax.agent.filler import FillerSpec, filler_ids, shuffled_ids, think_prefix_ids
from gentax.agent.parse import parse_response
from gentax.agent.prompts import build_messages, mode_of
from gentax.errors import ConfigError, GentaxError

REAL_THINKING = (
    "The box is left of the goal, so I should push it right: first walk around it to its left side.",
    "Moving up would hit the wall; going down twice puts me below the box, then push up.",
)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from gentax.rollout.embedded_model import embedded_model_path

    return AutoTokenizer.from_pretrained(embedded_model_path())


def _in_context(tokenizer, ids):
    """The filler ids as they sit in the context: between the <think> and </think> tag ids."""
    return _between_tags(tokenizer, think_prefix_ids(tokenizer, ids))


def _between_tags(tokenizer, prefix):
    open_ids = tokenizer("<think>", add_special_tokens=False)["input_ids"]
    close_ids = tokenizer("</think>\n", add_special_tokens=False)["input_ids"]
    assert prefix[: len(open_ids)] == open_ids and prefix[len(prefix) - len(close_ids):] == close_ids
    return prefix[len(open_ids): len(prefix) - len(close_ids)]


@pytest.mark.parametrize("count", [0, 1, 7, 100, 333])
@pytest.mark.parametrize("source", ["repeat", "shuffle"])
def test_the_filler_has_exactly_the_promised_token_count(tokenizer, source, count):
    spec = FillerSpec(tokens=count, source=source, texts=REAL_THINKING)
    ids = filler_ids(spec, tokenizer, seed=3)
    assert len(_in_context(tokenizer, ids)) == count
    assert _in_context(tokenizer, ids) == ids


def test_repeat_filler_holds_no_word_of_real_thinking(tokenizer):
    for token in (".", "…"):
        text = tokenizer.decode(filler_ids(FillerSpec(tokens=64, token=token), tokenizer, seed=0))
        assert set(text) == set(token)
        words = {w.lower() for t in REAL_THINKING for w in re.findall(r"[A-Za-z]+", t)}
        assert not words & {w.lower() for w in re.findall(r"[A-Za-z]+", text)}
    with pytest.raises(ConfigError, match="single token"):
        filler_ids(FillerSpec(tokens=3, token=" thinking hard"), tokenizer, seed=0)


def test_shuffle_filler_is_the_same_multiset_in_another_order_seeded(tokenizer):
    real = [tid for t in REAL_THINKING for tid in tokenizer(t.strip(), add_special_tokens=False)["input_ids"]]
    spec = FillerSpec(tokens=len(real), source="shuffle", texts=REAL_THINKING)
    ids = filler_ids(spec, tokenizer, seed=11)
    assert collections.Counter(ids) == collections.Counter(real)  # the same tokens ...
    assert ids != real  # ... not in the original order
    assert filler_ids(spec, tokenizer, seed=11) == ids  # reproducible
    assert filler_ids(spec, tokenizer, seed=12) != ids  # and the seed matters
    longer = filler_ids(FillerSpec(tokens=2 * len(real) + 5, source="shuffle", texts=REAL_THINKING), tokenizer, seed=0)
    assert set(longer) <= set(real) and len(longer) == 2 * len(real) + 5
    # a pool whose only order is the original comes back as it is, not an endless redraw
    assert shuffled_ids([[5, 5, 5]], 3, seed=0) == [5, 5, 5]
    assert shuffled_ids([[1, 2]], 2, seed=0) == [2, 1]


def test_bad_filler_specs_are_one_clear_error():
    with pytest.raises(ConfigError, match="integer >= 0"):
        FillerSpec(tokens=-1)
    with pytest.raises(ConfigError, match="unknown filler source"):
        FillerSpec(tokens=3, source="lorem")
    with pytest.raises(ConfigError, match="real thinking texts"):
        FillerSpec(tokens=3, source="shuffle", texts=("  ",))
    assert FillerSpec(tokens=0, source="shuffle").tokens == 0  # nothing to shuffle is fine at 0 tokens


def test_prompt_and_parser_in_filler_mode():
    from gentax.domains.base import Observation

    obs = Observation(text="#####\n#@$.#\n#####", admissible=("up", "down", "left", "right"), goal="push the box")
    on = build_messages("sokoban", obs, [], 0, think=True)
    assert build_messages("sokoban", obs, [], 0, think="filler") == on  # the same question as the thinking arm
    assert build_messages("sokoban", obs, [], 0, think="off") != on
    assert mode_of(True) == "on" and mode_of(False) == "off" and mode_of("filler") == "filler"
    with pytest.raises(GentaxError, match="unknown think mode"):
        mode_of("maybe")
    # the generated text after the forced think block holds the action only
    parsed = parse_response("<action>Left</action>", domain="sokoban", admissible=obs.admissible, think="filler")
    assert parsed.valid and parsed.action == "left" and parsed.think is None
    assert parse_response("<action>Left</action>", domain="sokoban", admissible=obs.admissible, think=True).reason == "no_think"
    assert parse_response("left", domain="sokoban", admissible=obs.admissible, think="filler").reason == "no_action_tag"


def test_collector_forces_the_filler_and_records_a_filler_step(tokenizer, tmp_path):
    from gentax.rollout.collector import CollectConfig, collect
    from gentax.rollout.embedded_model import embedded_model_path
    from gentax.rollout.generators import ExpertGenerator, chat_prompt_ids

    expert = ExpertGenerator(str(embedded_model_path()))
    spec = FillerSpec(tokens=37, source="shuffle", texts=REAL_THINKING)
    cfg = CollectConfig(domain="sokoban", split="eval", think="filler", filler=spec, max_steps=3)
    rollouts = collect(expert, [0, 1], cfg, progress=False)
    steps = rollouts.steps_frame()
    assert steps["valid"].all() and (steps["think_tokens"] == 37).all()
    assert steps["response"].str.fullmatch(r"<action>[^<]+</action>").all()  # the policy wrote the action only
    for row, tokens in zip(steps.to_dict("records"), rollouts.tokens):
        messages = [{"role": "user", "content": row["prompt"]}]
        context = chat_prompt_ids(expert.tokenizer, messages)
        assert tokens.prompt_ids[: len(context)] == context  # the prompt, then the forced prefix ...
        forced = _between_tags(tokenizer, tokens.prompt_ids[len(context):])
        assert len(forced) == 37 and tokenizer.decode(forced) == row["filler"]
        assert "<think>" not in tokenizer.decode(tokens.response_ids)  # ... which is not a generated token
    assert steps["filler"].nunique() > 1  # every step draws its own shuffle
    again = collect(expert, [0, 1], cfg, progress=False).steps_frame()
    assert again["filler"].tolist() == steps["filler"].tolist()
    # thinking on: think_tokens counts the generated block; off: none
    on = collect(expert, [0], CollectConfig(domain="sokoban", split="eval", max_steps=2), progress=False).steps_frame()
    think = "The next step towards the goal is: " + on["action"].iloc[0] + "."
    assert on["think_tokens"].iloc[0] == len(tokenizer(think, add_special_tokens=False)["input_ids"])
    assert on["filler"].isna().all()
    off = collect(expert, [0], CollectConfig(domain="sokoban", split="eval", max_steps=2, think=False), progress=False)
    assert off.steps_frame()["think_tokens"].isna().all()


def test_filler_mode_misconfigurations_are_errors():
    from gentax.rollout.collector import CollectConfig, collect
    from gentax.rollout.generators import ExpertGenerator

    with pytest.raises(GentaxError, match="needs a filler spec"):
        CollectConfig(domain="sokoban", split="eval", think="filler").validate()
    with pytest.raises(GentaxError, match="needs think mode 'filler'"):
        CollectConfig(domain="sokoban", split="eval", filler=FillerSpec(tokens=3)).validate()
    cfg = CollectConfig(domain="sokoban", split="eval", think="filler", filler=FillerSpec(tokens=3))
    with pytest.raises(GentaxError, match="needs a generator with a tokenizer"):
        collect(ExpertGenerator(), [0], cfg, progress=False)


def test_hf_generator_continues_after_a_forced_prefix(tmp_path):
    from rl_helpers import make_tiny_model

    from gentax.rollout.generators import HFGenerator, SamplingParams, chat_prompt_ids

    gen = HFGenerator(str(make_tiny_model(tmp_path / "tiny")), device="cpu")
    prompts = [[{"role": "user", "content": "go"}], [{"role": "user", "content": "stop"}]]
    prefix = think_prefix_ids(gen.tokenizer, filler_ids(FillerSpec(tokens=5), gen.tokenizer, seed=0))
    params = [SamplingParams(temperature=0.0, max_new_tokens=4, stop=())] * 2
    forced, plain = gen.generate(prompts, params, prefixes=[prefix, None])
    assert forced.prompt_ids == chat_prompt_ids(gen.tokenizer, prompts[0]) + prefix  # the context holds it ...
    assert plain.prompt_ids == chat_prompt_ids(gen.tokenizer, prompts[1])
    (direct,) = gen.generate_ids([forced.prompt_ids], params[:1])
    assert forced.response_ids == direct.response_ids and len(forced.response_ids) <= 4  # ... and is not generated
    with pytest.raises(GentaxError, match="forced prefixes"):
        gen.generate(prompts, params, prefixes=[prefix])


# ---- training (local engine) ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from rl_helpers import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def _thinking_run(folder, means, texts=REAL_THINKING):
    """A stand-in for the matching thinking run: its metrics.csv means and kept think blocks."""
    import pandas as pd

    from gentax.train import runs

    folder.mkdir(parents=True)
    pd.DataFrame({"step": range(1, len(means) + 1), runs.THINK_TOKENS_MEAN: means}).to_csv(folder / runs.METRICS_FILE, index=False)
    for step in range(1, len(means) + 1):
        runs.write_think_samples(folder, step, list(texts), seed=0)
    return folder


def test_filler_samples_keep_the_filler_in_the_context_and_out_of_the_loss(tiny):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from rl_helpers import TINY_RL

    from gentax.rollout.collector import collect
    from gentax.rollout.generators import HFGenerator
    from rl_helpers import make_run, small_rl
    from gentax.train.local_engine import _collect_config, samples_from_rollouts

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    gen = HFGenerator.from_model(AutoModelForCausalLM.from_pretrained(tiny), tokenizer)
    cfg = small_rl(TINY_RL)
    spec = FillerSpec(tokens=12)
    run = make_run("sokoban", "filler", 0, 1, init=str(tiny))
    assert run.think == "filler"  # the variant registry's thinking mode (gentax.runspec)
    ccfg = _collect_config(cfg, run, domain="sokoban", split="train", seed=1, group_size=2, temperature=1.0,
                           filler=spec)
    rollouts = collect(gen, [5], ccfg, progress=False)
    samples = samples_from_rollouts(rollouts, cfg)
    prefix = think_prefix_ids(tokenizer, filler_ids(spec, tokenizer, seed=0))
    assert len(samples) == rollouts.steps.num_rows >= 2
    for prompt, response in zip(samples.prompts, samples.responses):
        assert prompt[-len(prefix):] == prefix  # in the context the update sees ...
        assert len(response) <= cfg.max_new_tokens and prefix[1:] != response[: len(prefix) - 1]  # ... not a trained token
    assert "<think>" in rollouts.steps_frame()["prompt"].iloc[0]  # the thinking prompt


def test_filler_run_takes_the_thinking_runs_mean_at_each_step(tiny, tmp_path):
    import pandas as pd
    from rl_helpers import TINY_RL, make_run

    from gentax.train import runs
    from gentax.train.jobs import train_rl

    assert train_rl("local", TINY_RL, init=str(tiny), run=make_run("sokoban", "default", 0, 1, init=str(tiny)), start=0,
                    end=1, run_dir=str(tmp_path / "thinking"), progress=False) == 0
    assert runs.THINK_TOKENS_MEAN in pd.read_csv(tmp_path / "thinking" / runs.METRICS_FILE)  # what a filler run reads
    assert runs.think_reference(tmp_path / "thinking", 1)[0] >= 0
    reference = _thinking_run(tmp_path / "default", [9.4, 21.0])
    section = {**TINY_RL, "filler": {"source": "shuffle", "token": ".", "reference": str(reference)}}
    where = dict(init=str(tiny), run=make_run("sokoban", "filler", 0, 2, init=str(tiny)), start=0, end=2,
                 progress=False)
    assert train_rl("local", section, run_dir=str(tmp_path / "filler"), **where) == 0
    log = pd.read_csv(tmp_path / "filler" / runs.METRICS_FILE)
    assert log["filler_tokens"].tolist() == [9, 21] == log[runs.THINK_TOKENS_MEAN].tolist()
    assert not (tmp_path / "filler" / runs.THINK_SAMPLES).exists()  # only thinking runs keep think blocks
    with pytest.raises(ConfigError, match="no row for step 3"):
        runs.think_reference(reference, 3)
    with pytest.raises(ConfigError, match="has no metrics.csv"):
        runs.think_reference(tmp_path / "nowhere", 1)
    with pytest.raises(ConfigError, match="filler.reference"):
        train_rl("local", TINY_RL, run_dir=str(tmp_path / "other"), **where)
    with pytest.raises(ConfigError, match="local engine only"):
        train_rl("verl", section, run_dir=str(tmp_path / "verl"), **where)
    with pytest.raises(ConfigError, match="filler"):
        train_rl("local", {**TINY_RL, "filler": {"source": "lorem", "token": "."}}, run_dir=str(tmp_path / "x"), **where)


# ---- evaluation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["repeat", "shuffle"])
def test_filler_evaluation_is_matched_to_the_thinking_evaluation_of_the_same_cell(tmp_path, source):
    import json

    import pyarrow.parquet as pq

    from gentax.cli import main
    from gentax.rollout.embedded_model import embedded_model_path

    common = ["eval", "--generator", "expert", "--model", str(embedded_model_path()), "--domain", "sokoban",
              "--episodes", "2", "--max-steps", "4", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "think.parquet")]) == 0
    thinking = json.loads((tmp_path / "think.json").read_text())
    assert thinking["think_tokens_mean"] > 5  # the expert's think blocks, counted
    assert main([*common, "--think", "filler", "--filler-reference", str(tmp_path / "think.json"),
                 "--filler-source", source, "--out", str(tmp_path / "filler.parquet")]) == 0
    filler = json.loads((tmp_path / "filler.json").read_text())
    assert filler["think"] == "filler" and filler["filler"]["source"] == source
    assert filler["think_tokens_mean"] == filler["filler"]["tokens"] == round(thinking["think_tokens_mean"])
    steps = pq.read_table(tmp_path / "filler.steps.parquet").to_pandas()
    assert steps["response"].str.startswith("<action>").all() and steps["filler"].notna().all()
    assert main([*common, "--think", "filler", "--filler-reference", str(tmp_path / "think.json"),
                 "--filler-tokens", "3", "--out", str(tmp_path / "fixed.parquet")]) == 0
    assert json.loads((tmp_path / "fixed.json").read_text())["think_tokens_mean"] == 3
    assert main([*common, "--filler-tokens", "3", "--out", str(tmp_path / "bad.parquet")]) != 0
    assert main([*common, "--think", "filler", "--out", str(tmp_path / "bad.parquet")]) != 0


# ---- the plan --------------------------------------------------------------------------------------
def _paper(**filler):
    import copy

    from gentax.study import config as gconfig

    cfg = gconfig.load_config(["config/config.yaml"])
    cfg = copy.deepcopy(cfg)
    cfg["controls"]["filler"].update(filler)
    if filler.get("enabled"):
        cfg["engines"]["rl"] = "local"
    return cfg


def test_the_paper_grid_with_filler_plans_exactly_the_extra_runs_and_evals(tmp_path):
    import copy

    from snakemake_plans import planned_work

    from gentax.study import dag
    from gentax.study import plan as gplan
    from gentax.study import config as gconfig

    off = _paper()
    no_block = copy.deepcopy(off)
    del no_block["controls"]
    gconfig.validate(no_block)
    assert gplan.plan(off) == gplan.plan(no_block)  # off: unchanged
    on = _paper(enabled=True)
    gconfig.validate(on)
    local_off = {**copy.deepcopy(off), "engines": on["engines"]}
    extra = set(gplan.runs(on)) - set(gplan.runs(local_off))
    seeds = on["grid"]["seeds"]
    assert {(r.init, r.train_domain, r.variant, r.seed, r.steps, r.think) for r in extra} == {
        ("v2", d, "filler", s, 150, "filler") for d in ("alfworld", "webshop", "sokoban", "sciworld") for s in seeds}
    assert len(gplan.runs(on)) == len(gplan.runs(off)) + len(extra)
    v2_domains = len(on["inits"]["v2"]["domains"])
    counts_on, counts_off = gplan.plan(on)["counts"], gplan.plan(local_off)["counts"]
    assert counts_on["checkpoint_evals"] - counts_off["checkpoint_evals"] == len(extra) * on["eval"]["window"] * v2_domains
    assert counts_on["segments"] - counts_off["segments"] == len(extra)
    assert gplan.base_variants(on, "v2") == ["default", "nothink", "filler"] and gplan.base_variants(on, "v1") == ["default", "nothink"]
    local = tmp_path / "local.yaml"  # the local engine, the filler arm off (tests/filler_on.yaml less the arm)
    local.write_text("engines: {rl: local}\n")
    work_on = planned_work(*dag.study_args("paper", [Path(__file__).parent / "filler_on.yaml"]))
    work_off = planned_work(*dag.study_args("paper", [local]))

    def jobs(work, rule):
        return [job.units for job in work if job.rule == rule]

    assert sorted(jobs(work_on, "rl_segment")) == sorted(jobs(work_off, "rl_segment") + [150] * len(extra))
    episodes = on["eval"]["episodes"]
    assert len(jobs(work_on, "eval_checkpoint_v2")) - len(jobs(work_off, "eval_checkpoint_v2")) == (
        len(extra) * on["eval"]["window"] + 1)  # one job per checkpoint, + the V2 base row in filler mode
    assert sorted(jobs(work_on, "eval_checkpoint_v1")) == sorted(jobs(work_off, "eval_checkpoint_v1"))
    assert set(jobs(work_on, "eval_checkpoint_v2")) == {episodes * v2_domains}  # every job plays V2's domains
    assert gplan.filler_reference(on, gplan.find_run(on, "v2", "sokoban", "filler", 1)) == gplan.find_run(
        on, "v2", "sokoban", "default", 1)


def test_filler_control_misconfigurations_name_the_key():
    from gentax.study import config as gconfig

    cfg = _paper(enabled=True)
    cfg["engines"]["rl"] = "verl"
    with pytest.raises(ConfigError, match="controls.filler.experiments.0: the filler arm runs on the local engine only"):
        gconfig.validate(cfg)
    with pytest.raises(ConfigError, match="experiments.0.train_domains: sciworld is not an evaluated domain of v1"):
        gconfig.validate(_paper(enabled=True, experiments=[{"init": "v1", "train_domains": ["sciworld"]}]))
    cfg = _paper(enabled=True)
    cfg["grid"]["experiments"] = [e for e in cfg["grid"]["experiments"] if e["variant"] != "default" or e["init"] != "v2"]
    cfg["grid"]["extended"] = [e for e in cfg["grid"]["extended"] if e["init"] != "v2"]
    with pytest.raises(ConfigError, match="has no thinking run to match"):
        gconfig.validate(cfg)
    with pytest.raises(ConfigError, match="controls.filler.source"):
        gconfig.validate(_paper(source="lorem"))


# ---- the workflow's jobs (rule -> gentax.study.jobs spec -> `gentax VERB --job SPEC`) --------------
def test_workflow_job_hands_the_filler_run_its_thinking_runs_folder():
    """rule rl_segment -> gentax.study.jobs.rl_segment: a filler run's spec names the thinking run's
    folder whose per-step means the filler run takes, in its RL section (what `gentax train rl`
    then reads: test_filler_run_takes_the_thinking_runs_mean_at_each_step)."""
    from gentax.study import plan as gplan
    from gentax.study import config as gconfig
    from gentax.study import jobs, paths

    cfg = gconfig.load_config(["config/config.yaml", "config/embedded.yaml"])
    run = gplan.find_run(cfg, "v2", "sokoban", "filler", 0)
    thinking = gplan.filler_reference(cfg, run)
    folder = paths.run_dir(cfg, thinking.init, thinking.train_domain, thinking.variant_label, thinking.seed)
    spec = jobs.rl_segment(cfg, run, start=0, end=1, save_every=1, init_model="m", run_folder="r", manifest="r/m.json",
                           filler_reference=folder)
    assert spec["rl"]["filler"] == {"source": "repeat", "token": ".", "reference": "results/embedded/runs/v2/sokoban/default/seed0"}
    assert spec["run_spec"]["think"] == "filler"
    plain = jobs.rl_segment(cfg, thinking, start=0, end=1, save_every=1, init_model="m", run_folder="r", manifest="m")
    assert plain["rl"]["filler"]["reference"] is None


def test_eval_job_spec_of_a_filler_evaluation():
    from gentax.study import config as gconfig
    from gentax.study import jobs

    cfg = gconfig.load_config(["config/config.yaml", "config/embedded.yaml"])
    cfg["controls"]["filler"]["source"] = "shuffle"
    args = dict(model="m", think="filler", tasks_files={"sokoban": "t.json", "webshop": "w.json"},
                out_jsons={"sokoban": "e.json", "webshop": "f.json"})
    references = {"sokoban": "x.json", "webshop": "y.json"}

    def fillers(spec):
        return [entry["filler"] for entry in spec["domains"]]

    assert fillers(jobs.eval_checkpoint(cfg, **args, filler_references=references)) == [
        {"reference": "x.json", "source": "shuffle", "token": ".", "tokens": None},
        {"reference": "y.json", "source": "shuffle", "token": ".", "tokens": None}]
    cfg["controls"]["filler"]["eval_tokens"] = 12
    assert [f["tokens"] for f in fillers(jobs.eval_checkpoint(cfg, **args, filler_references=references))] == [12, 12]
    assert fillers(jobs.eval_checkpoint(cfg, **{**args, "think": "on"})) == [None, None]
