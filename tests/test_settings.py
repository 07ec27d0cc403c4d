"""`gentax plan --settings`: every job kind's effective settings, the paper's stated values pinned."""

import json
import re
from pathlib import Path

import pytest

from gentax.study import plan as gplan
from gentax.study import config as gconfig
from gentax.study.preview import settings as gsettings

pytest.importorskip("verl")  # the RL settings are verl's Hydra overrides

REPO = Path(__file__).resolve().parents[1]

# What the paper states (docs/STUDY.md), as each job receives it: (kind, printed name) -> value
PAPER_STATES = {
    ("study", "inits.v1.rl"): {"train_domain": "webshop", "steps": 20, "seed": 0},
    ("study", "inits.v1.domains"): ["alfworld", "webshop", "sokoban"],
    ("study", "inits.v2.domains"): ["alfworld", "webshop", "sokoban", "sciworld"],
    ("study", "grid.seeds"): [0, 1, 2],
    ("study", "grid.steps"): 150,
    ("study", "grid.runs"): 60,
    ("study", "grid.extended"): {"v1/sokoban": 300, "v2/sokoban": 300, "v2/sciworld": 240},
    ("study", "augmentation.v1"): {"p": 1.0, "eps": {"alfworld": 300, "webshop": 30, "sokoban": 80}},
    ("study", "augmentation.v2"): {"p": 0.5, "eps": {"alfworld": 200, "webshop": 40, "sokoban": 80}},
    ("study", "cluster.gpus_per_node"): 8,
    ("study", "cluster.gpu_memory_gib"): 80,
    ("rl", "algorithm.adv_estimator"): "grpo",
    ("rl", "actor_rollout_ref.rollout.n"): 8,
    ("rl", "data.train_batch_size"): 16,
    ("rl", "actor_rollout_ref.actor.optim.lr"): 1e-6,
    ("rl", "actor_rollout_ref.actor.use_kl_loss"): True,
    ("rl", "actor_rollout_ref.actor.kl_loss_coef"): 0.01,
    ("rl", "actor_rollout_ref.actor.kl_loss_type"): "low_var_kl",
    ("rl", "actor_rollout_ref.rollout.temperature"): 1.0,
    ("rl", "actor_rollout_ref.rollout.val_kwargs.temperature"): 0.4,
    ("rl", "trainer.total_training_steps"): 150,
    ("rl", "trainer.save_freq"): 15,
    ("rl", "trainer.n_gpus_per_node"): 8,
    ("rl", "gentax.history_length"): 2,
    ("rl", "gentax.invalid_penalty"): 0.1,
    ("rl", "gentax.advantage_normalisation"): "trajectory",
    ("sft", "stage"): "sft",
    ("sft", "max_steps"): 100,
    ("sft_data", "mix"): {"sciworld": 19, "alfworld": 3, "webshop": 1},
    ("sft_data", "sources"): {"sciworld": "expert", "alfworld": "v1", "webshop": "v1"},
    ("eval", "temperature"): 0.4,
    ("eval", "window"): 4,
    ("properties", "init"): "v2",
    ("properties", "episodes"): 128,
    ("properties", "t_max"): 50,
    ("domains", "alfworld.max_steps"): 50,
    ("domains", "webshop.max_steps"): 15,
    ("domains", "sokoban.max_steps"): 15,
    ("domains", "sciworld.max_steps"): 50,
}
# The open choices of the paper preset, with the value and source the paper preset gives them
OPEN_CHOICES = {
    ("rl", "actor_rollout_ref.actor.entropy_coeff"): (0.0, "verl"),
    ("rl", "gentax.invalid_penalty_placement"): ("after_normalisation", "ours"),
    ("rl", "actor_rollout_ref.rollout.top_p"): (1.0, "verl"),
    ("rl", "data.max_response_length"): (512, "verl-agent"),
    ("rl", "data.max_prompt_length"): (6144, "ours"),
    ("sft", "learning_rate"): (1e-5, "LlamaFactory"),
    ("sft", "global_batch_size"): (16, "LlamaFactory"),
    ("sft", "lr_scheduler_type"): ("cosine", "LlamaFactory"),
    ("sft", "warmup_steps"): (0.1, "LlamaFactory"),
    ("sft", "finetuning_type"): ("full", "LlamaFactory"),
    ("sft", "deepspeed"): (str(REPO / "config" / "deepspeed" / "zero3.json"), "LlamaFactory"),
    ("sft_data", "epochs_over_mix"): (0.497, "ours"),
    ("eval", "episodes"): (128, "ours"),
    ("eval", "top_p"): (1.0, "verl"),
    ("properties", "temperature"): (0.4, "ours"),
}


@pytest.fixture(scope="module")
def paper():
    return gconfig.load_config([REPO / "config" / "config.yaml"])


@pytest.fixture(scope="module")
def paper_settings(paper):
    return gsettings.effective_settings(paper)


def test_paper_preset_prints_every_value_the_paper_states(paper_settings):
    sources = gsettings.sources()
    for (kind, name), value in PAPER_STATES.items():
        assert paper_settings[kind][name] == value, (kind, name)
        assert sources[kind][name][0] == "paper", (kind, name)


def test_every_open_choice_is_printed_with_its_source(paper_settings):
    sources = gsettings.sources()
    for (kind, name), (value, source) in OPEN_CHOICES.items():
        assert paper_settings[kind][name] == value, (kind, name)
        assert sources[kind][name][0] == source, (kind, name)


def test_sources_name_printed_settings_and_docs_list_every_open_choice(paper_settings):
    """No stale name in settings_sources.yaml; docs/STUDY.md's table holds every open choice, same source."""
    study = (REPO / "docs" / "STUDY.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z_]+: [^`]+)` \|[^|]*\|[^|]*\| ([A-Za-z-]+) \|", study, re.M)}
    open_choices = 0
    for kind, names in gsettings.sources().items():
        for name, (source, note) in names.items():
            assert name in paper_settings[kind], f"{kind}: {name} is not printed"
            assert source in ("paper", "verl-agent", "verl", "LlamaFactory", "ours") and note
            if source != "paper":
                open_choices += 1
                assert rows.get(f"{kind}: {name}") == source, f"docs/STUDY.md: no row `{kind}: {name}` | ... | {source}"
    assert open_choices >= len(OPEN_CHOICES)


def test_cli_prints_settings_sources_and_memory(tmp_path, capsys):
    from gentax.cli import main

    assert main(["plan", "--settings"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  actor_rollout_ref\.rollout\.n +8  \[paper\] group size 8", out, re.M)
    assert re.search(r"^  actor_rollout_ref\.actor\.entropy_coeff +0\.0  \[verl\] .*0\.001", out, re.M)
    assert re.search(r"^  learning_rate +1e-05  \[LlamaFactory\]", out, re.M)
    assert re.search(r"^  sft_v2: .* GiB per GPU vs budget 72\.0 GiB \(fits", out, re.M)
    # a departure from the paper preset shows the paper's value instead of a source
    lower = tmp_path / "lower.yaml"
    lower.write_text("rl: {lr: 2.0e-6}\n")
    assert main(["plan", "--settings", "--config", str(REPO / "config" / "config.yaml"), "--config", str(lower)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  actor_rollout_ref\.actor\.optim\.lr +2e-06  \[changed\] the paper preset has 1e-06", out, re.M)
    assert main(["plan", "--settings", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["eval"]["temperature"] == 0.4 and set(data) == set(gsettings.KINDS)


def test_embedded_preset_settings_are_unchanged(paper):
    """The embedded preset's jobs receive what they did before the settings audit (CPU: no DeepSpeed, no entropy)."""
    embedded = gconfig.load_config([REPO / "config" / "config.yaml", REPO / "config" / "embedded.yaml"])
    s = gsettings.effective_settings(embedded)
    assert s["rl"]["entropy_coeff"] == 0.0 and s["rl"]["invalid_penalty_placement"] == "after_normalisation"
    assert "deepspeed" not in s["sft"] and s["sft"]["per_device_train_batch_size"] * s["sft"]["gradient_accumulation_steps"] == 4
    assert s["eval"]["top_p"] == 1.0 and s["properties"]["temperature"] == embedded["eval"]["temperature"]


def test_every_run_the_silent_choices_and_the_composed_verl_config_are_printed(paper, paper_settings, capsys):
    from gentax.cli import main

    runs = paper_settings["runs"]
    assert len(runs) == len(gplan.runs(paper)) == 60  # every grid run, not only the first
    aug_run = next(path for path, spec in runs.items() if spec["augmentation"])
    assert runs[aug_run]["augmentation"]["eps"] and "think" in runs[aug_run]
    sources = gsettings.sources()
    assert paper_settings["sft_data"]["expert_think"] == "The next step towards the goal is: {action}."
    assert sources["sft_data"]["expert_think"][0] == "ours"
    assert paper_settings["study"]["augmentation.webshop.tokens_per_distractor"] == 10
    assert sources["study"]["augmentation.webshop.tokens_per_distractor"][0] == "ours"
    assert "uniformly" in paper_settings["study"]["augmentation.webshop.distractor_kinds"]
    assert main(["plan", "--settings", "--verl"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# verl config composed for run ")
    assert re.search(r"^\s+ppo_mini_batch_size: ", out, re.M) and re.search(r"^\s+kl_loss_coef: 0\.01$", out, re.M)
