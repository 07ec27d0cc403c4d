"""Every config error is one line naming the problem, with no traceback: through `snakemake -n`,
`bash scripts/run.sh` and `gentax plan`. An unknown key names the file that set it and the
closest valid key; a domain knob is reported under the key the user wrote; nested `--config`
values are read as in a config file.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from clones import PLAIN_ENV

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-n"]
GENTAX_PLAN = [sys.executable, "-m", "gentax", "plan"]


def the_error(proc: subprocess.CompletedProcess) -> str:
    """The one error line of a failed command (asserting it is one, with no traceback or warning)."""
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text[-2000:]
    assert "Traceback" not in text and 'File "' not in text and "WARNING" not in text, text[-2000:]
    errors = [line for line in text.splitlines() if "rror" in line]
    assert len(errors) == 1, text[-2000:]
    return errors[0]


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture()
def write(tmp_path):
    def _write(name: str, text: str) -> Path:
        (tmp_path / name).write_text(text)
        return tmp_path / name
    return _write


def test_an_unknown_preset_is_one_line_with_a_suggestion():
    assert the_error(run([*SNAKEMAKE, "--config", "preset=embeded"])) == (
        "gentax: error: config key preset: unknown preset 'embeded' (did you mean embedded?); valid: paper, embedded, gpu1")


def test_an_unknown_key_names_its_file_and_the_closest_key(write):
    typo = write("typo.yaml", "eval: {episdoes: 4}\n")
    line = the_error(run([*SNAKEMAKE, "--configfile", str(typo)]))
    assert line.startswith("gentax: error: config key eval.episdoes: unknown key (did you mean episodes?); valid: ")
    assert line.endswith(f"(set in {typo})")
    assert the_error(run([*GENTAX_PLAN, "--config", str(typo)])) == line  # gentax plan says the same


def test_a_misspelled_domain_knob_is_reported_under_the_key_written(write):
    knob = write("knob.yaml", "domains: {sokoban: {max_steps: 15, options: {room_sise: 5}}}\n")
    line = the_error(run([*SNAKEMAKE, "--configfile", str(knob)]))
    assert line.startswith("gentax: error: config key domains.sokoban.options.room_sise: unknown option(s) room_sise")
    assert line.endswith(f"(did you mean room_size?) (set in {knob})")


@pytest.mark.parametrize("key, value, replaced_by", [
    ("steps", "150", "grid.steps"),
    ("max_steps", "{sokoban: 6}", "domains.<domain>.max_steps"),
    ("env_options", "{sokoban: {room_size: 5}}", "domains.<domain>.options"),
    ("augmentation", "{p: 0.5}", "augmentation.kind and augmentation.<init>.p / .eps"),
])
def test_a_removed_rl_key_names_the_key_that_replaced_it(write, key, value, replaced_by):
    """What a run is (its steps, step limits, knobs, augmentation) is its run spec's, set by the
    workflow config's grid/domains/augmentation keys: the RL section's old copies are refused."""
    old = write("old.yaml", f"rl: {{{key}: {value}}}\n")
    line = the_error(run([*GENTAX_PLAN, "--config", str(old)]))
    assert line.startswith(f"gentax: error: config key rl.{key}: no RL key any more: the run spec holds it; "
                           f"set {replaced_by}")
    assert line.endswith(f"(set in {old})")


def test_an_rl_key_the_study_sets_elsewhere_is_refused_naming_that_key(write):
    """The validation inside an RL run plays at the evaluations' temperature (config.study_rl): an
    rl.val_temperature of its own would make the two disagree."""
    own = write("own.yaml", "rl: {val_temperature: 0.7}\n")
    line = the_error(run([*GENTAX_PLAN, "--config", str(own)]))
    assert line.startswith("gentax: error: config key rl.val_temperature: set by eval.temperature")
    assert line.endswith(f"(set in {own})")


def test_a_removed_rl_key_in_a_command_lines_config_names_its_replacement(write):
    old = write("rl.yaml", "rl: {steps: 20, group_size: 4}\n")
    proc = run([sys.executable, "-m", "gentax", "train", "rl", "--config", str(old), "--init", "/m", "--domain",
                "sokoban", "--out", str(old.parent / "run"), "--print-config"])
    assert the_error(proc) == (f"gentax: error: {old}: RL config key steps: no RL key any more: the run spec holds "
                               "it; set grid.steps (inits.v1.rl.steps for Ckpt V1, grid.extended for longer runs); "
                               "gentax train rl: --steps A:B")


def test_a_quoted_integer_gets_the_integer_hint(write):
    quoted = write("quoted.yaml", 'eval: {episodes: "8"}\n')
    assert the_error(run([*SNAKEMAKE, "--configfile", str(quoted)])) == (
        "gentax: error: config key eval.episodes: '8' is not of type 'integer' (YAML reads '8' as text, "
        f"not a number: write 8, without quotes) (set in {quoted})")


def test_a_nested_config_override_sets_a_number():
    from snakemake_plans import planned_jobs

    def episodes(*config: str) -> set:
        return {domain["episodes"] for verb, spec in planned_jobs("--forceall", *config) if verb == "eval"
                for domain in spec["domains"]}

    nested, default = episodes("--config", "eval={episodes: 4}"), episodes()
    # the evaluations play the number 4 (not the text "4"); a domain with its own episodes keeps them
    assert 4 in nested and 4 not in default and nested - {4} <= default


@pytest.mark.parametrize("text, message", [
    ("eval: {episodes: 4\n", "not valid YAML at line 2, column 1: expected ',' or '}', but got '<stream end>'"),
    ("", "empty; a config file is a mapping of keys (e.g. `eval: {episodes: 4}`)"),
], ids=["yaml-syntax", "empty"])
def test_a_config_file_snakemake_cannot_read_is_named(write, text, message):
    bad = write("bad.yaml", text)
    proc = subprocess.run(["bash", "scripts/run.sh", "-n", "--configfile", str(bad)], cwd=REPO, env=PLAIN_ENV,
                          capture_output=True, text=True, timeout=600)
    assert the_error(proc) == f"gentax: error: {bad}: {message}"


def test_gentax_plan_target_needs_cost_and_a_bad_target_stops_first(write):
    assert the_error(run([*GENTAX_PLAN, "--target", "results/tables/table5_augmentation.csv"])) == (
        "gentax: error: --target says which table or figure to price: give it with --cost")
    broken = write("broken.yaml", "eval: {episdoes: 4}\n")  # checked after the target: the target's error comes first
    line = the_error(run([*GENTAX_PLAN, "--cost", "--target", "results/tables/table99.csv", "--config", str(broken)]))
    assert line.startswith("gentax: error: unknown table or figure 'table99'; known: table2_success, ")


def test_a_bad_profile_is_called_a_profile_and_deepspeed_stays_quiet(tmp_path):
    """The paper preset's memory check imports DeepSpeed: its accelerator warning is not printed."""
    proc = run([*GENTAX_PLAN, "--cost", "--profile", str(tmp_path / "nowhere")])
    assert the_error(proc) == (f"gentax: error: Snakemake profile not found: {tmp_path / 'nowhere'} "
                               "(a profile is a folder with a config.yaml)")
    assert "accelerator" not in proc.stderr


def test_gentax_plan_config_layers_over_config_yaml(write):
    seeds = write("seeds.yaml", "grid: {seeds: [0]}\n")  # one key: the rest comes from config/config.yaml
    proc = run([*GENTAX_PLAN, "--config", str(seeds)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("20 RL runs")


@pytest.mark.parametrize("override, message", [
    ("model={base: /nonexistent/Llama, embedded: false}",
     "config key model.base: /nonexistent/Llama not found; every training and evaluation job loads it"),
    ("model={base: config, embedded: false}",
     f"config key model.base: {REPO / 'config'} holds no config.json (not a Hugging Face model folder); "
     "every training and evaluation job loads it"),
], ids=["missing", "not-a-model"])
def test_a_missing_base_model_stops_the_run_before_its_first_job(tmp_path, override, message):
    target = tmp_path / "results" / "tasks" / "sokoban.json"
    cfg = ["--config", f"results={tmp_path / 'results'}", override]
    plan = run([*SNAKEMAKE, str(target), *cfg])  # a dry-run (maybe away from the cluster) only says it
    assert plan.returncode == 0 and f"gentax: note: {message} (a run stops before its first job)" in plan.stderr
    proc = run([sys.executable, "-m", "snakemake", str(target), "--cores", "1", *cfg])
    assert the_error(proc) == f"gentax: error: {message}"
    assert not target.exists()


def test_a_results_folder_that_cannot_be_written_stops_the_run(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = run([sys.executable, "-m", "snakemake", str(blocker / "results" / "tasks" / "sokoban.json"), "--cores", "1",
                "--config", f"results={blocker / 'results'}"])
    assert the_error(proc) == (f"gentax: error: config key results: {blocker / 'results'} cannot be written "
                               f"({blocker} is not a writable folder)")
