"""SFT data and LlamaFactory training (gentax.train.sft_config / sft_data / sft / sft_cli).

Real components throughout: the collector with the scripted expert on the real Sokoban and WebShop
envs, LlamaFactory's own dataset loader and template in the SFT venv, and a real 2-step
LlamaFactory run on the embedded SmolLM2-135M-Instruct (slow; sequence lengths kept short).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from gentax.agent.parse import parse_response
from gentax.errors import ConfigError, GentaxError
from gentax.train import sft_data
from gentax.train.sft import find_llamafactory_cli, llamafactory_args
from gentax.train.sft_config import load_sft_config, read_sft_file
from gentax.train.sft_data import DATASET_INFO, DATASET_NAME, apportion, build_sft_data, read_examples

ADMISSIBLE_LIST = re.compile(r"\nAdmissible actions: \[(.*)\]\n", re.DOTALL)


def study_section(stage: str = "v2", **keys) -> dict:
    """The paper study's SFT section of ``stage`` (what its workflow job receives,
    ``gentax.study.plan.study_sft``) with ``keys`` laid over, as ``gentax sft --config`` lays a file."""
    from gentax.study.config import study_config
    from gentax.study.plan import study_sft

    return {**study_sft(study_config("paper", check=False), stage), **keys}


# ---- the mix ------------------------------------------------------------------------------------
def test_apportion_is_exact_for_the_paper_mix():
    assert apportion(3220, {"sciworld": 19, "alfworld": 3, "webshop": 1}) == {"sciworld": 2660, "alfworld": 420, "webshop": 140}
    assert apportion(46, {"sciworld": 19, "alfworld": 3, "webshop": 1}) == {"sciworld": 38, "alfworld": 6, "webshop": 2}
    # 3200 is not a multiple of 23: quotas 2643.48, 417.39, 139.13 -> the one left-over pair goes to
    # the largest remainder (sciworld)
    assert apportion(3200, {"sciworld": 19, "alfworld": 3, "webshop": 1}) == {"sciworld": 2644, "alfworld": 417, "webshop": 139}


def test_apportion_ties_go_to_the_domain_listed_first():
    assert apportion(3, {"b": 1, "a": 1}) == {"b": 2, "a": 1}
    assert apportion(3, {"a": 1, "b": 1}) == {"a": 2, "b": 1}
    assert apportion(5, {"a": 1, "b": 0, "c": 1}) == {"a": 3, "b": 0, "c": 2}


def test_apportion_is_largest_remainder_on_random_cases():
    rng = random.Random(7)
    for _ in range(300):
        weights = {f"d{i}": rng.randint(0, 30) for i in range(rng.randint(1, 5))}
        if not any(weights.values()):
            continue
        total = rng.randint(0, 5000)
        counts = apportion(total, weights)
        quota = {d: Fraction(total * w, sum(weights.values())) for d, w in weights.items()}
        assert sum(counts.values()) == total
        assert all(abs(counts[d] - quota[d]) < 1 for d in weights)
        # Hamilton: a domain rounded up never has a smaller remainder than one rounded down
        up = [quota[d] - int(quota[d]) for d in weights if counts[d] > quota[d]]
        down = [quota[d] - int(quota[d]) for d in weights if counts[d] == int(quota[d]) and quota[d] != int(quota[d])]
        if up and down:
            assert min(up) >= max(down)


# ---- config --------------------------------------------------------------------------------------
def test_study_sections_and_errors(tmp_path):
    v2 = load_sft_config(study_section())
    assert (v2.steps, v2.mix, v2.lora_rank) == (100, {"sciworld": 19, "alfworld": 3, "webshop": 1}, 0)
    assert v2.sources == {"sciworld": "expert", "alfworld": "v1", "webshop": "v1"}
    base = load_sft_config(study_section("embedded-base", steps=5))
    assert base.steps == 5 and set(base.mix) == {"alfworld", "webshop", "sokoban", "sciworld"}
    assert set(base.sources.values()) == {"expert"}
    # a source the mix takes no domain from needs no episodes budget; one it takes a domain from does
    assert base.v1_episodes_per_domain is None and "v1_episodes_per_domain" not in study_section("embedded-base")
    v1_source = study_section("embedded-base", sources={**base.sources, "webshop": "v1"})
    with pytest.raises(ConfigError, match="SFT config key v1_episodes_per_domain: missing: a study value"):
        load_sft_config(v1_source)
    assert load_sft_config({**v1_source, "v1_episodes_per_domain": 3}).v1_episodes_per_domain == 3
    with pytest.raises(ConfigError, match="v1_episodes_per_domain: must be an integer >= 1"):
        load_sft_config({**v1_source, "v1_episodes_per_domain": 0})
    assert load_sft_config(study_section(mix={"webshop": 1})).mix == {"webshop": 1}  # replaced whole, not merged
    with pytest.raises(ConfigError, match="SFT config key .*: unknown key"):
        load_sft_config(study_section(stepz=3))
    with pytest.raises(ConfigError, match="mix"):
        load_sft_config(study_section(mix={"minecraft": 1}))
    with pytest.raises(ConfigError, match="sources"):
        load_sft_config(study_section(mix={"sokoban": 1}))  # v2 gives sokoban no source
    with pytest.raises(ConfigError, match="batch_size"):
        load_sft_config(study_section(batch_size=10, micro_batch_size=4))
    with pytest.raises(ConfigError, match="freeze_layers"):
        load_sft_config(study_section(lora_rank=8, freeze_layers=2))
    # the engine's defaults hold no study value: a section without one names it
    with pytest.raises(ConfigError, match="SFT config key pairs: missing: a study value"):
        load_sft_config({})
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"sft": {"steps": 7}, "embedded_base": {"steps": 9},
                                      "domains": {"sokoban": {"max_steps": 4}}, "seed": 3}))
    assert read_sft_file(config, "v2") == ({"steps": 7}, {"sokoban": {"max_steps": 4}}, 3)
    assert read_sft_file(config, "embedded-base")[0] == {"steps": 9}
    with pytest.raises(ConfigError, match="unknown SFT preset"):
        read_sft_file(config, "v3")


def test_a_mix_weight_of_0_drops_the_domain_and_its_source():
    """Config files merge key by key: an override's weight 0 is how a domain leaves config/config.yaml's mix,
    and its source leaves with it (a job's section holds only what it reads)."""
    from gentax.study.config import study_config
    from gentax.study.plan import study_sft

    cfg = study_config("paper", check=False)
    cfg["inits"]["v2"]["sft"]["mix"]["alfworld"] = 0
    section = study_sft(cfg, "v2")
    assert set(section["mix"]) == set(section["sources"]) == {"sciworld", "webshop"}


def test_no_sft_default_is_a_study_value():
    """sft_defaults.yaml holds engine internals only (issue #41 item 2, #56 item 6): none of its keys is
    one the paper's SFT block (config/config.yaml inits.v2.sft) sets or one the study fills from another
    setting (plan.SFT_FROM_STUDY); no SFT block of config/config.yaml or a preset's overlay sets one of
    them but a memory knob sized for the stage's machine (micro_batch_size), nor repeats its value."""
    from gentax.io import read_yaml
    from gentax.study.config import PRESET_OVERLAYS, STUDY_FILE
    from gentax.study.plan import SFT_BLOCKS, SFT_FROM_STUDY
    from gentax.train.sft_config import engine_defaults

    defaults = engine_defaults()
    assert not set(defaults) & set(SFT_FROM_STUDY)
    assert not set(defaults) & set(read_yaml(STUDY_FILE)["inits"]["v2"]["sft"])
    for path in [STUDY_FILE, *filter(None, PRESET_OVERLAYS.values())]:
        for block in SFT_BLOCKS.values():
            section = read_yaml(path)
            for part in block.split("."):
                section = section.get(part) if isinstance(section, dict) else None
            repeated = {key: value for key, value in (section or {}).items() if defaults.get(key, object()) == value}
            assert not repeated, f"{path.name} {block} repeats sft_defaults.yaml: {repeated}"
            assert set(section or {}) & set(defaults) <= {"micro_batch_size"}, f"{path.name} {block} sets an engine key"


def test_a_preset_restates_no_sft_value_of_config_yaml():
    """A preset's overlay sets only the SFT values it changes: one home for each (config/config.yaml's otherwise)."""
    from gentax.io import read_yaml
    from gentax.study.config import PRESET_OVERLAYS, STUDY_FILE

    paper = read_yaml(STUDY_FILE)
    for path in filter(None, PRESET_OVERLAYS.values()):
        overlay = read_yaml(path)
        for block in ("embedded_base", "inits"):
            own, base = overlay.get(block) or {}, paper[block]
            if block == "inits":
                own, base = (own.get("v2") or {}).get("sft") or {}, base["v2"]["sft"]
            repeated = {key: value for key, value in own.items() if base.get(key, object()) == value}
            assert not repeated, f"{path.name} restates config/config.yaml's {block}: {repeated}"


@pytest.mark.parametrize("study, stage", [("paper", "v2"), ("paper", "embedded-base"), ("embedded", "v2"),
                                          ("embedded", "embedded-base"), ("gpu1", "embedded-base")])
def test_a_command_line_runs_the_section_its_workflow_job_receives(study, stage, tmp_path):
    """``gentax sft build-data`` / ``train`` without --config: the resolved part and the domains'
    settings that the workflow's job of the same stage and study receives (gentax.study.jobs)."""
    from gentax.cli import _study_defaults, build_parser
    from gentax.study import jobs
    from gentax.study.config import study_config
    from gentax.train.sft_cli import _load

    cfg = study_config(study)
    args = build_parser().parse_args(["sft", "train", "--preset", stage, "--study-preset", study, "--data", "d",
                                      "--init", "i", "--out", "o"])
    args.study_defaults = _study_defaults(args)
    section, domains = _load(args)
    data = jobs.sft_data(cfg, preset=stage, out="o", v1_model=None)
    assert (section.data().to_dict(), domains) == (data["sft"], data["domains"])
    assert section.train().to_dict() == jobs.sft_train(cfg, preset=stage, data="d", init_model="i", out="o")["sft"]
    # a --config file is laid over the study's section key by key; its domains over the study's
    mine = tmp_path / "mine.yaml"
    block = "sft" if stage == "v2" else "embedded_base"  # the file's block of the stage (read_sft_file)
    mine.write_text(yaml.safe_dump({block: {"steps": 3}, "seed": 7, "domains": {"sokoban": {"max_steps": 2}}}))
    args = build_parser().parse_args(["sft", "build-data", "--preset", stage, "--study-preset", study, "--config",
                                      str(mine), "--out", "o"])
    args.study_defaults = _study_defaults(args)
    section, domains = _load(args)
    assert (section.steps, section.seed, section.pairs) == (3, 7, data["sft"]["pairs"])
    if "sokoban" in domains:
        assert domains["sokoban"] == {**data["domains"]["sokoban"], "max_steps": 2}


def test_paper_sft_hands_llamafactory_zero3_on_several_gpus(tmp_path):
    """The v2 preset's DeepSpeed ZeRO-3 config reaches LlamaFactory on a multi-GPU node, never on one device."""
    cfg = load_sft_config(study_section())
    node = llamafactory_args(cfg, tmp_path, tmp_path, tmp_path / "o", 6656, 8)
    zero = json.loads(Path(node["deepspeed"]).read_text())["zero_optimization"]
    assert zero["stage"] == 3 and "offload_optimizer" not in zero
    assert (node["per_device_train_batch_size"], node["gradient_accumulation_steps"]) == (2, 1)  # 2 x 8 GPUs = 16
    assert node["finetuning_type"] == "full" and node["learning_rate"] == 1e-5
    assert "deepspeed" not in llamafactory_args(cfg, tmp_path, tmp_path, tmp_path / "o", 6656, 1)
    assert node["bf16"] and not node["use_cpu"] and node["full_determinism"]  # two runs agree on a GPU


def test_bf16_on_a_cpu_tells_the_trainer_it_trains_on_the_cpu(tmp_path, monkeypatch):
    from gentax.train import sft

    monkeypatch.setattr(sft, "_cuda_available", lambda: False)
    bf16 = llamafactory_args(load_sft_config(study_section("embedded-base", precision="bf16")), tmp_path, tmp_path,
                             tmp_path / "o", 4096, 1)
    assert bf16["bf16"] and bf16["use_cpu"]  # HF Trainer refuses bf16 on a CPU without use_cpu
    auto = llamafactory_args(load_sft_config(study_section("embedded-base")), tmp_path, tmp_path, tmp_path / "o", 4096, 1)
    assert not auto["bf16"] and auto["use_cpu"]  # auto: fp32 on a CPU (gentax/train/sft.py says why)
    assert not auto["full_determinism"]  # a CPU run keeps its kernels


def test_engines_dtype_overrides_the_sft_precision():
    from gentax.dtype import sft_precision
    from gentax.errors import ConfigError

    assert [sft_precision(s) for s in ("auto", "bfloat16", "float32")] == ["auto", "bf16", "fp32"]
    with pytest.raises(ConfigError, match="float16"):
        sft_precision("float16")


# ---- the dataset ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def expert_data(tmp_path_factory):
    """A small expert dataset on the two cheap domains (real envs, real collector)."""
    cfg = load_sft_config(study_section("embedded-base", pairs=9, mix={"sokoban": 2, "webshop": 1},
                                        sources={"sokoban": "expert", "webshop": "expert"},
                                        expert_episodes_per_domain=2, seed=5))
    out = tmp_path_factory.mktemp("sft") / "data"
    manifest = build_sft_data(cfg, out, domains={"sokoban": {"max_steps": 8}, "webshop": {"max_steps": 8}},
                              progress=False)
    return out, manifest


def _admissible(prompt: str) -> list[str] | None:
    """The admissible list shown in a step prompt (None when the prompt shows a capped list)."""
    match = ADMISSIBLE_LIST.search(prompt)
    assert match, "every step prompt lists the admissible actions"
    if "more not shown)" in match.group(1):
        return None
    return re.findall(r"'((?:[^'\\]|\\.)*)'", match.group(1))


def test_mix_counts_are_exact(expert_data):
    import pandas as pd

    out, manifest = expert_data
    rows = pd.read_parquet(out / "pairs.parquet")
    assert manifest["counts"] == {"sokoban": 6, "webshop": 3}
    assert rows["domain"].value_counts().to_dict() == {"sokoban": 6, "webshop": 3}
    assert len(read_examples(out)) == 9 == manifest["examples"]
    # pairs are distinct steps (drawn without replacement)
    assert not rows.duplicated(["domain", "round", "traj_id", "step"]).any()


def test_every_assistant_turn_parses_as_valid(expert_data):
    import pandas as pd

    out, _ = expert_data
    rows = pd.read_parquet(out / "pairs.parquet")
    for example, domain in zip(read_examples(out), rows["domain"]):
        user, assistant = example["conversations"]
        assert (user["from"], assistant["from"]) == ("human", "gpt")
        admissible = _admissible(user["value"])
        parsed = parse_response(assistant["value"], domain=domain, admissible=admissible or ())
        assert parsed.valid, (assistant["value"], parsed.reason)
        assert parsed.think == study_section("embedded-base")["expert_think"]  # the templated rationale


def test_prompts_are_the_agents_own_step_prompts(expert_data):
    """A first-step example's user turn is exactly build_messages on the env's first observation."""
    import pandas as pd

    from gentax.agent.prompts import build_messages
    from gentax.domains import make

    out, _ = expert_data
    rows = pd.read_parquet(out / "pairs.parquet")
    checked = 0
    for example, row in zip(read_examples(out), rows.itertuples()):
        if row.step != 0:
            continue
        with make(row.domain, split="train", max_steps=8) as env:
            obs = env.reset(env.task(row.task_seed))
        expected = build_messages(row.domain, obs, [], 0, think=True, history_length=2)
        assert expected == [{"role": "user", "content": example["conversations"][0]["value"]}]
        checked += 1
    assert checked >= 1


def test_v1_steps_keep_failed_episodes_and_drop_invalid_steps():
    """V1 pairs: not filtered by success; steps without an env-accepted action are not pairs."""
    from gentax.rollout.schema import EPISODE_SCHEMA, STEP_SCHEMA, Rollouts, table_from_rows

    def step(step, response, action, valid, reason=None, traj=0):
        return {"run": "r", "domain": "sokoban", "split": "train", "task_seed": 1, "group_id": traj, "traj_id": traj,
                "step": step, "prompt": f"prompt {traj}/{step}", "response": response, "action": action,
                "valid": valid, "reason": reason, "reward": 0.0 if valid else -0.1, "done": False, "won": False,
                "obs_chars": 10, "augmented": False, "admissible_count": 4, "error": None, "finish_reason": "stop",
                "prompt_tokens": 5, "response_tokens": 5, "think_tokens": None, "filler": None}

    steps = [
        step(0, "<think>box is left</think> <action>Left</action> trailing", "left", True),
        step(1, "<action>up</action>", None, False, "no_think"),
        step(2, "<think>hmm</think><action>jump</action>", None, False, "not_admissible"),
        step(0, "<think>go</think><action>down</action>", "down", True, traj=1),
    ]
    episodes = [{"run": "r", "domain": "sokoban", "split": "train", "task_seed": 1, "group_id": t, "traj_id": t,
                 "length": 3, "return": -0.2, "won": False, "invalid_steps": 2, "augmented": False,
                 "truncated": True, "response_tokens": 15, "error": None} for t in (0, 1)]
    rollouts = Rollouts(table_from_rows(steps, STEP_SCHEMA), table_from_rows(episodes, EPISODE_SCHEMA))
    pairs = sft_data._usable_pairs(rollouts, "sokoban", "v1", 0, think=True)
    assert [(row["traj_id"], row["step"], row["episode_won"]) for _, row in pairs] == [(0, 0, False), (1, 0, False)]
    assert pairs[0][0]["conversations"][1]["value"] == "<think>box is left</think>\n<action>left</action>"


def test_v2_needs_the_v1_model(tmp_path):
    with pytest.raises(GentaxError, match="--v1"):
        build_sft_data(load_sft_config(study_section(pairs=23)), tmp_path / "d")
    assert not (tmp_path / "d").exists()


def test_cli_reports_bad_input_in_one_line(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("sft: {stepz: 1}\n")
    proc = subprocess.run([sys.executable, "-m", "gentax", "sft", "build-data", "--config", str(config),
                           "--out", str(tmp_path / "d")], capture_output=True, text=True)
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"gentax: error: {config}: SFT config key stepz: unknown key (did you mean steps?); "
                           "valid: pairs, mix, ")


# ---- LlamaFactory ------------------------------------------------------------------------------
_LLAMAFACTORY_ENCODE = """
import json, sys, yaml
from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
args = yaml.safe_load(open(sys.argv[1]))
model_args, data_args, training_args, finetuning_args, _ = get_train_args(args)
module = load_tokenizer(model_args)
template = get_template_and_fix_tokenizer(module["tokenizer"], data_args)
dataset = get_dataset(template, model_args, data_args, training_args, "sft", **module)["train_dataset"]
print("ENCODED" + json.dumps([{"input_ids": r["input_ids"], "labels": r["labels"]} for r in dataset]))
"""


def _sft_python():
    try:
        cli = find_llamafactory_cli(load_sft_config(study_section()))
    except GentaxError as exc:
        pytest.fail(f"the SFT venv is part of the install (scripts/setup.sh): {exc}")
    return cli.parent / "python"


@pytest.fixture(scope="module")
def embedded_model():
    from gentax.rollout.embedded_model import embedded_model_path

    return embedded_model_path()


@pytest.mark.slow
def test_llamafactory_reads_the_dataset_with_the_models_own_chat_template(expert_data, embedded_model, tmp_path):
    """dataset_info.json is what LlamaFactory expects, and LlamaFactory tokenises every example as
    the rollout generators do: chat-templated prompt (no loss) + response + end of turn (loss)."""
    from transformers import AutoTokenizer

    from gentax.rollout.generators import chat_prompt_ids

    out, _ = expert_data
    assert json.loads((out / "dataset_info.json").read_text()) == DATASET_INFO
    args = llamafactory_args(load_sft_config(study_section("embedded-base")), out, embedded_model, tmp_path / "o", 4096, 1)
    (tmp_path / "args.yaml").write_text(yaml.safe_dump(args))
    (tmp_path / "encode.py").write_text(_LLAMAFACTORY_ENCODE)
    proc = subprocess.run([str(_sft_python()), str(tmp_path / "encode.py"), str(tmp_path / "args.yaml")],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    encoded = json.loads(proc.stdout.split("ENCODED", 1)[1])
    tokenizer = AutoTokenizer.from_pretrained(embedded_model)
    examples = read_examples(out)
    assert len(encoded) == len(examples)
    for example, record in zip(examples, encoded):
        user, assistant = example["conversations"]
        prompt = chat_prompt_ids(tokenizer, [{"role": "user", "content": user["value"]}])
        response = tokenizer(assistant["value"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        ids, labels = record["input_ids"], record["labels"]
        assert ids[: len(prompt) + len(response)] == prompt + response
        assert labels[: len(prompt)] == [-100] * len(prompt)
        assert labels[len(prompt): len(prompt) + len(response)] == response
        # at most the template's newline after the end-of-turn token follows
        assert len(ids) - len(prompt) - len(response) <= 1


@pytest.mark.slow
def test_two_step_llamafactory_run_saves_a_model_that_loads_and_generates(expert_data, embedded_model, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gentax.train.sft import train_sft

    out, _ = expert_data
    cfg = load_sft_config(study_section("embedded-base", steps=2, batch_size=1, micro_batch_size=1, freeze_layers=2,
                                        lr=1e-4))
    # short sequences: a 2-example copy of the dataset (the shortest examples)
    small = tmp_path / "small"
    small.mkdir()
    examples = sorted(read_examples(out), key=lambda e: len(e["conversations"][0]["value"]))[:2]
    (small / "train.json").write_text(json.dumps(examples))
    (small / "dataset_info.json").write_text(json.dumps(DATASET_INFO))
    model_dir = train_sft(cfg, small, embedded_model, tmp_path / "model", stream=open(tmp_path / "log", "w"))

    summary = json.loads((model_dir / "gentax_sft.json").read_text())
    assert summary["steps"] == 2 and summary["final_loss"] is not None
    assert yaml.safe_load((model_dir / "sft_llamafactory.yaml").read_text())["max_steps"] == 2
    assert not list(tmp_path.glob(".model.*.tmp"))  # no temporary left behind (.model.lock, its writer lock, stays)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert model.config.use_cache is True
    before = AutoModelForCausalLM.from_pretrained(embedded_model, dtype=torch.float32)
    changed = [name for name, p in model.named_parameters() if not torch.equal(p, before.state_dict()[name].float())]
    assert changed and all(".layers.28." in n or ".layers.29." in n for n in changed)  # the last 2 layers only
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Say hi."}], add_generation_prompt=True,
                                           return_tensors="pt", return_dict=True)
    generated = model.generate(**prompt, max_new_tokens=5, do_sample=False)
    assert generated.shape[1] > prompt["input_ids"].shape[1]
    assert DATASET_NAME in json.loads((small / "dataset_info.json").read_text())
    # LlamaFactory's own reporting (tracking defaults: TensorBoard) wrote the loss of both steps
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(model_dir / "tensorboard"))
    events.Reload()
    assert sorted(e.step for e in events.Scalars("train/loss")) == [1, 2], events.Tags()["scalars"]
