"""The paper's engines on the one-GPU grid (config/gpu1_paper_engines.yaml over profiles/gpu1): its
dry-run plans exactly the slice (Ckpt V1, one verl run on Sokoban in two segments, the last four
checkpoints of each segment's end on all four domains, V1's property log, Tables 2 and 4; the V2
chain only for the base rows every table compares with), with the paper preset's engines in the
job specs the SLURM profile's rules give."""

import json
import re
import shlex

import pytest

from snakemake_plans import REPO, dry_run_text, job_counts

OVERLAY = REPO / "config" / "gpu1_paper_engines.yaml"
PROFILE = REPO / "profiles" / "gpu1"
#: the targets benchmarks/gpu1/device.sh is given for the slice (docs/gpu1.md)
TARGETS = ("tables/table2_success.csv", "tables/table4_extended.csv", "properties/properties.csv")
DOMAINS = {"alfworld", "webshop", "sokoban", "sciworld"}


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    results = tmp_path_factory.mktemp("gpu1_paper_engines")
    text = dry_run_text("-p", "--profile", str(PROFILE), "--workflow-profile", "none", "--configfile", str(OVERLAY),
                        "--config", "preset=gpu1", f"results={results}", "--", *(f"{results}/{t}" for t in TARGETS))
    specs = []
    for line in text.splitlines():
        if line.startswith("Shell command: gentax ") and " --job " in line:  # -p's line of each job
            words = shlex.split(line.removeprefix("Shell command: ").split(" >> ")[0])
            specs.append((" ".join(words[1:words.index("--job")]), json.loads(words[words.index("--job") + 1])))
    return str(results), text, specs


def test_the_dry_run_lists_exactly_the_slice(plan):
    _, text, _ = plan
    assert job_counts(text) == {
        "tasks": 4, "embedded_model": 1, "embedded_base_data": 1, "embedded_base": 1,   # the embedded model
        "rl_v1": 1, "rl_segment": 2,                       # Ckpt V1; the Sokoban run's two segments
        "eval_checkpoint_v1": 6, "eval_checkpoint_v2": 1,  # a job per checkpoint (its 4 domains): 5 + V1's and V2's base rows
        "properties": 4, "properties_table": 1,            # V1's property log
        "sft_data": 1, "sft_v2": 1,                        # V2, for its base rows
        "run_summary": 2, "base_summary": 2, "table": 2}


def test_the_jobs_run_the_paper_presets_engines(plan):
    results, _, specs = plan
    rl = [spec for verb, spec in specs if verb == "train rl"]
    assert sorted((s["out"][len(results):], s["start"], s["end"]) for s in rl) == [
        ("/init/v1/run", 0, 2), ("/runs/v1/sokoban/default/seed0", 0, 4), ("/runs/v1/sokoban/default/seed0", 4, 5)]
    for spec in rl:
        assert spec["engine"] == "verl" and spec["rl"]["verl"]["rollout"] == "vllm"
        assert spec["rl"]["verl"]["n_gpus_per_node"] == 1 and spec["rl"]["verl"]["rollout_tp"] == 1
        assert "actor_rollout_ref.rollout.enforce_eager=true" in spec["rl"]["verl"]["overrides"]
    rollouts = [spec for verb, spec in specs if verb in ("eval", "properties")]
    assert len(rollouts) == 7 + 4 and all(s["generator"] == "vllm" for s in rollouts)


def test_the_last_four_checkpoints_of_each_segment_end_on_all_four_domains(plan):
    results, _, specs = plan
    evaluated = {}
    for verb, spec in specs:
        if verb == "eval":
            for entry in spec["domains"]:
                m = re.search(r"/eval/(\w+)/(\w+)/default/seed0/step(\d+)/(\w+)\.parquet$", entry["out"])
                evaluated.setdefault((m.group(1), m.group(2), int(m.group(3))), set()).add(m.group(4))
    assert evaluated == {**{("v1", "sokoban", step): DOMAINS for step in (1, 2, 3, 4, 5)},
                         ("v1", "base", 0): DOMAINS, ("v2", "base", 0): DOMAINS}
