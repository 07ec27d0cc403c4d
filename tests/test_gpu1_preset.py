"""The workstation study on one GPU (`preset: gpu1`, config/gpu1.yaml, profiles/gpu1) and its
reference size (config/gpu1_reference.yaml): what the preset promises, checked without a GPU."""

import itertools

import pytest
import yaml

from gentax.study import plan as gplan
from gentax.study import config as gconfig
from gentax.domains.spec import names as domain_names
from gentax.io import deep_merge, read_yaml
from snakemake_plans import REPO, dry_run_counts, dry_run_text

REFERENCE = REPO / "config" / "gpu1_reference.yaml"
PROFILE = REPO / "profiles" / "gpu1"
GPU_RULES = ("embedded_base", "rl_v1", "sft_data", "sft_v2", "rl_segment", "eval_checkpoint_v1", "eval_checkpoint_v2",
             "properties")


def study(*layers: dict) -> dict:
    overrides: dict = {"preset": "gpu1"}
    for layer in layers:
        overrides = deep_merge(overrides, layer)
    return gconfig.load_config(gconfig.with_preset(read_yaml(REPO / "config" / "config.yaml"), overrides, default="paper"))


@pytest.fixture(scope="module", params=["hour", "reference"])
def sized(request):
    return request.param, study(read_yaml(REFERENCE)) if request.param == "reference" else study()


def test_the_profile_selects_the_preset_and_shares_the_gpu():
    profile = read_yaml(PROFILE / "config.yaml")
    assert profile["config"] == ["preset=gpu1"]
    slots = dict(item.split("=") for item in profile["resources"])
    assert int(slots["gpu_jobs"]) >= 1
    assert all(profile["set-resources"][rule]["gpu_jobs"] == 1 for rule in GPU_RULES)


def test_the_preset_is_the_papers_grid_on_one_gpu(sized):
    size, cfg = sized
    assert cfg["preset"] == "gpu1"
    assert cfg["engines"]["rl"] == "local" and cfg["engines"]["generator"] == "hf"
    assert cfg["rl"]["group_size"] == 8
    assert len(cfg["grid"]["seeds"]) >= (3 if size == "hour" else 2)  # seed-level intervals need two
    assert cfg["eval"]["episodes"] >= 64 and all(n >= 64 for n in cfg["eval"].get("episodes_per_domain", {}).values())
    assert cfg["eval"]["window"] == 1  # the last checkpoint
    cells = {(e["init"], e["variant"], d) for e in cfg["grid"]["experiments"] for d in e["train_domains"]}
    v1_domains = [d for d in domain_names() if d != "sciworld"]
    expected = {("v1", v, d) for v, d in itertools.product(("default", "aug", "nothink"), v1_domains)}
    expected |= {("v2", v, d) for v in ("default", "nothink") for d in domain_names()}
    expected |= {("v2", "aug", d) for d in v1_domains}  # SciWorld has no augmentation arm (the paper's Table 5)
    assert cells == expected


def test_the_reference_differs_only_in_steps_tasks_per_step_and_seeds():
    hour, reference = study(), study(read_yaml(REFERENCE))
    assert reference["grid"]["steps"] < hour["grid"]["steps"]
    assert reference["rl"]["tasks_per_step"] <= hour["rl"]["tasks_per_step"]
    assert reference["grid"]["experiments"] == hour["grid"]["experiments"]
    assert set(reference["grid"]["seeds"]) < set(hour["grid"]["seeds"])
    assert reference["eval"] == hour["eval"] and reference["domains"] == hour["domains"]
    # every checkpoint the grid's evaluations read is saved (the last step of each run)
    for cfg in (hour, reference):
        assert cfg["grid"]["steps"] % cfg["rl"]["save_every"] == 0


def test_gentax_plan_counts_the_grid(sized):
    _, cfg = sized
    counts = gplan.plan(cfg)["counts"]
    seeds = len(cfg["grid"]["seeds"])
    assert counts["runs"] == counts["segments"] == 20 * seeds
    # V1 runs are evaluated on V1's 3 domains, V2 runs on V2's 4: 9 and 11 cells a seed
    assert counts["checkpoint_evals"] == (9 * 3 + 11 * 4) * seeds


def test_the_overlay_restates_nothing_of_the_embedded_sections_beneath_it():
    """config/gpu1.yaml is laid over config/embedded.yaml's model, engines, domains and cluster
    (gconfig.OVERLAY_PARENTS) and sets only what differs from them; the study still runs the embedded
    model with the embedded knobs but those it changes."""
    def leaves(node, path=()):
        if isinstance(node, dict) and node:
            for key, value in node.items():
                yield from leaves(value, path + (key,))
        else:
            yield path, node

    (parent, inherited), (own_file, own) = gconfig.overlay_layers("gpu1")
    assert (parent.name, own_file.name, set(inherited)) == ("embedded.yaml", "gpu1.yaml",
                                                           {"model", "engines", "domains", "cluster"})
    beneath = dict(leaves(inherited))
    assert {path for path, value in leaves(own) if beneath.get(path, object()) == value} == set()
    cfg = study()
    assert cfg["model"]["embedded"] is True and cfg["cluster"]["gpus_per_node"] == 1
    assert cfg["domains"]["sokoban"] == {"max_steps": 6, "options": inherited["domains"]["sokoban"]["options"]}
    assert cfg["domains"]["webshop"]["options"]["goal_options"] == 0  # the embedded preset's (gpu1 had set it first)


def test_an_unknown_preset_names_the_valid_ones():
    with pytest.raises(gplan.ConfigError, match="gpu1"):
        gconfig.with_preset({}, {"preset": "gpu9"})


@pytest.mark.parametrize("scale", ["hour", "reference"])
def test_the_dry_run_plans_every_job_on_the_shared_gpu(scale, tmp_path_factory):
    results = tmp_path_factory.mktemp(f"gpu1_{scale}")
    args = ["--profile", str(PROFILE), "--workflow-profile", "none", "--config", "preset=gpu1", f"results={results}"]
    if scale == "reference":
        args += ["--configfile", str(REFERENCE)]
    counts = dry_run_counts(*args)
    seeds = 3 if scale == "hour" else 2
    assert counts["rl_segment"] == 20 * seeds
    # a job per checkpoint: the grid's last checkpoints + the base rows (2 variants); 71 per seed + 14 one-domain evaluations
    assert (counts["eval_checkpoint_v1"], counts["eval_checkpoint_v2"]) == (9 * seeds + 2, 11 * seeds + 2)
    assert 3 * counts["eval_checkpoint_v1"] + 4 * counts["eval_checkpoint_v2"] == 71 * seeds + 14
    assert counts["embedded_base"] == counts["rl_v1"] == counts["sft_v2"] == 1
    text = dry_run_text(*args)
    assert "gpu_jobs=1" in text


def test_the_hf_generator_batches_wider_on_a_gpu():
    import torch

    from gentax.rollout.generators import default_batch_size

    assert default_batch_size("cpu") == 16
    assert default_batch_size("cuda") == default_batch_size(torch.device("cuda", 0)) == 256
