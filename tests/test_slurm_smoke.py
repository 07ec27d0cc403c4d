"""End-to-end smoke of the workflow through the real SLURM executor plugin.

A throwaway single-node SLURM cluster (scripts/slurm-local.sh: slurmctld + slurmd + munge, 16 fake
GPUs as gres, no accounting daemon) runs a reduced grid (tests/smoke_config.yaml) with the
profile users run on a cluster (profiles/slurm), scaled down only where this machine cannot hold
a cluster's requests (cpus/memory per job); the GPU counts are kept so 8-GPU requests must
schedule. The model is a tiny random-init Llama with SmolLM2's tokenizer, so every job is short.
Afterwards the stale-rerun behaviour is checked on the finished results: nothing to do; editing
one eval file reruns only its downstream; changing one augmentation eps reruns only the jobs
that read it.

Preemption: two copies of the finished workflow extend one run (a second segment,
1 -> EXTENDED_STEPS); in one copy the segment's SLURM job is `scancel`ed mid-training, as a
preemption would; Snakemake's retry resubmits it, it resumes from its last checkpoint, and every
step, table and final weight equals the uninterrupted copy's. The copies run in the background from
the moment the grid has finished, while the other tests check the finished workflow (they only read
it, or edit it after the copies were taken); the module's last test waits for them.
On the same finished run: every result carries its provenance record, and the
HTML report (`snakemake --report`) opens in headless Chromium with every marked table and
figure and its provenance row (tests/report_browser.py).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from clones import copy_checkout
from report_browser import walk_report
from snakemake_plans import job_counts

from gentax import provenance

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.slurm]
TARGETS = ["results/paper/tables/table2_success.csv", "results/paper/tables/table5_augmentation.csv",
           "results/paper/figures/delta_ood_augmentation.png"]  # the paper preset's folder (profiles/slurm)


#: fake GPUs of the one test node: two of the profile's 8-GPU jobs at once, as two 8-GPU nodes would run
#: them (with 8, every GPU job waited for the one before it to end)
FAKE_GPUS = 16


def slurm_up() -> None:
    subprocess.run(["bash", str(REPO / "scripts" / "slurm-local.sh"), "up"], check=True, stdout=subprocess.DEVNULL,
                   timeout=900, env={**os.environ, "SLURM_FAKE_GPUS": str(FAKE_GPUS)})


def tiny_model(out: Path) -> Path:
    """A 2-layer random-init Llama with SmolLM2's tokenizer and chat template (seeded)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from gentax.rollout.embedded_model import embedded_model_path

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def ci_profile(dest: Path) -> Path:
    """profiles/slurm with per-job cpus/memory/runtime shrunk to this node; GPUs, partition untouched."""
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    for rule, res in profile["set-resources"].items():
        res.update(cpus_per_task=1, mem_mb=1500, runtime=30)
    profile["default-resources"].update(mem_mb=1000, runtime=30)
    profile.update({"jobs": 2, "slurm-status-command": "squeue",
                    "slurm-init-seconds-before-status-checks": 2, "seconds-between-status-checks": 2,
                    "latency-wait": 5, "retries": 0, "keep-going": False})
    dest.mkdir(parents=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(profile))
    return dest


@pytest.fixture(scope="module")
def workdir():
    slurm_up()  # installs SLURM when missing (needs root, as CI has), (re)starts the daemons
    # Not pytest's tmp_path: SLURM jobs run outside this process and pytest prunes old tmp dirs.
    base = Path(tempfile.mkdtemp(prefix="gentax-slurm-smoke-"))
    work = base / "wf"
    copy_checkout(work)
    model = tiny_model(base / "tiny_model")
    profile = ci_profile(base / "profile")
    yield {"work": work, "model": model, "profile": profile}
    shutil.rmtree(base, ignore_errors=True)


def snakemake_command(wd, *args, configfiles=()) -> list[str]:
    """Targets and flags first: --configfile/--config take every word after them. Overrides go in
    YAML files: --config leaves nested values as strings. Snakemake polls SLURM at the profile's
    interval (tests/snakemake_steady_polling.py)."""
    return [sys.executable, "tests/snakemake_steady_polling.py", *args, "--profile", str(wd["profile"]),
            "--configfile", "config/config.yaml", "tests/smoke_config.yaml", *map(str, configfiles), "--config", f"model={{base: {wd['model']}}}"]


def snakemake(wd, *args, configfiles=(), timeout=1500):
    return subprocess.run(snakemake_command(wd, *args, configfiles=configfiles), cwd=wd["work"],
                          capture_output=True, text=True, timeout=timeout)


def planned_jobs(proc) -> dict[str, int]:
    return job_counts(proc.stdout + proc.stderr)


@pytest.fixture(scope="module")
def finished(workdir):
    proc = snakemake(workdir, *TARGETS)
    log = proc.stdout[-4000:] + proc.stderr[-6000:]
    assert proc.returncode == 0, log
    return workdir, proc


def test_the_reduced_grid_runs_through_slurm(finished):
    wd, proc = finished
    text = proc.stdout + proc.stderr
    assert "slurm" in text.lower() and "Job" in text
    for target in TARGETS:
        table = wd["work"] / target
        assert table.is_file() and table.stat().st_size > 0
    t5 = (wd["work"] / TARGETS[1]).read_text()
    assert "sokoban" in t5
    # every job went through sbatch (one SLURM job id per submitted job) but the bookkeeping the
    # Snakefile declares as localrules, which ran in Snakemake's own process
    local = set(re.search(r"^localrules: (.+)$", (REPO / "Snakefile").read_text(), flags=re.M).group(1).split(", "))
    planned = planned_jobs(proc)
    submitted = set(re.findall(r"submitted with SLURM jobid (\d+)", text))
    assert len(submitted) == sum(n for rule, n in planned.items() if rule not in local | {"all"}) >= 12, text[-3000:]
    ran_locally = Counter(re.findall(r"^localrule (\w+):", text, flags=re.M))
    del ran_locally["all"]
    assert ran_locally == {rule: n for rule, n in planned.items() if rule in local}, text[-3000:]


def test_the_jobs_progress_is_in_their_logs_and_on_the_console(finished):
    """Each RL segment's and evaluation's log has its progress lines (gentax/progress.py), and
    Snakemake's console showed running jobs' latest lines (the Snakefile's onstart follower)."""
    wd, proc = finished
    logs = wd["work"] / "results" / "paper" / "logs"
    segment = next(logs.rglob("segment_0_*.log")).read_text()
    assert re.search(r"^gentax progress: RL sokoban/\w+ s\d+: step \d+/\d+, ", segment, flags=re.M), segment[-3000:]
    evaluation = next(p for p in logs.rglob("*.log") if "/eval/" in str(p)).read_text()
    assert re.search(r"^gentax progress: eval \w+.*: episode \d+/\d+, .*, done$", evaluation, flags=re.M), evaluation[-3000:]
    assert re.search(r"^gentax: running: \[\S+\.log\] ", proc.stderr, flags=re.M), proc.stderr[-3000:]


def test_nothing_is_stale_after_the_run(finished):
    wd, _ = finished
    assert planned_jobs(snakemake(wd, "-n", *TARGETS)) == {}


EXTENDED_STEPS = 7  # the cancel comes at step 2 or 3: steps enough after it that the segment is still running
EXTENDED_TARGETS = TARGETS + ["results/paper/tables/table4_extended.csv"]
EXTENDED_RUN = "results/paper/runs/v1/sokoban/default/seed0"


def extended_copy(wd, name: str) -> dict:
    """A copy of the finished workflow (results and .snakemake included) whose v1/sokoban/default
    run is extended to EXTENDED_STEPS: one new segment, its evals, summary and table 4."""
    work = wd["work"].parent / name
    shutil.copytree(wd["work"], work, symlinks=True)
    override = work / "extend.yaml"
    override.write_text(yaml.safe_dump({"grid": {"extended": [
        {"init": "v1", "variant": "default", "train_domain": "sokoban", "steps": EXTENDED_STEPS}]}}))
    return {**wd, "work": work, "override": override}


def squeue_job(comment_part: str, workdir: Path) -> str | None:
    """The SLURM id of the queued job whose comment has ``comment_part`` and that runs in ``workdir``."""
    out = subprocess.run(["squeue", "-h", "-o", "%i|%k|%Z"], capture_output=True, text=True, check=True).stdout
    rows = [line.split("|") for line in out.splitlines()]
    return next((r[0] for r in rows if comment_part in r[1] and Path(r[2]).resolve() == workdir.resolve()), None)


def start_snakemake(wd, *args) -> tuple[subprocess.Popen, Path]:
    """Run the extended workflow in the background; its output goes to a file (a pipe could fill)."""
    out = wd["work"] / "snakemake.out"
    cmd = snakemake_command(wd, *EXTENDED_TARGETS, *args, configfiles=[wd["override"]])
    with open(out, "w") as fh:
        return subprocess.Popen(cmd, cwd=wd["work"], stdout=fh, stderr=subprocess.STDOUT, text=True), out


PREEMPT_TEST = "test_a_preempted_rl_segment_resumes_and_changes_nothing"


def preempt_segment(proc: subprocess.Popen, wd: dict, found: dict) -> None:
    """Wait for a checkpoint of the new segment (step 2 or later), then `scancel` its SLURM job, as a
    preemption would: ``found["cancelled"]`` is the last step saved then, ``found["error"]`` what
    went wrong (raised by the test)."""
    run = wd["work"] / EXTENDED_RUN
    try:
        deadline = time.monotonic() + 900
        while True:
            assert proc.poll() is None, "the workflow ended before its RL segment could be cancelled"
            assert time.monotonic() < deadline, "no checkpoint of the extended segment within 15 minutes"
            saved = [int(p.name.split("_")[1]) for p in (run / "checkpoints").glob("step_*")]
            if max(saved, default=0) >= 2:
                slurm_id = squeue_job(f"rule_rl_segment_wildcards_v1_sokoban_default_0_1_{EXTENDED_STEPS}", wd["work"])
                assert slurm_id, "the RL segment's SLURM job is not in squeue"
                subprocess.run(["scancel", slurm_id], check=True)
                found["cancelled"] = max(saved)
                return
            time.sleep(0.1)
    except BaseException as exc:  # noqa: BLE001 - handed to the test, which raises it
        found["error"] = exc


@pytest.fixture(scope="module", autouse=True)
def preemption(request, finished):
    """Both extended copies start as soon as the grid has finished and run in the background (a
    thread preempts the one) while the module's other tests check the finished workflow, which the
    copies do not touch; test_a_preempted_rl_segment_resumes_and_changes_nothing, the module's last,
    waits for them and checks. Started only when that test is selected."""
    if not any(item.originalname == PREEMPT_TEST and item.path == request.path for item in request.session.items):
        yield None
        return
    wd, _ = finished
    straight, preempted = extended_copy(wd, "wf_straight"), extended_copy(wd, "wf_preempted")
    # both copies at once: the uninterrupted one is the reference, the other one is preempted
    jobs = [start_snakemake(straight), start_snakemake(preempted, "--retries", "1")]
    found: dict = {}
    watcher = threading.Thread(target=preempt_segment, args=(jobs[1][0], preempted, found), daemon=True)
    watcher.start()
    try:
        yield {"straight": straight, "preempted": preempted, "jobs": jobs, "watcher": watcher, "found": found}
    finally:
        for proc, _ in jobs:
            if proc.poll() is None:
                proc.kill()


def test_results_carry_their_provenance(finished):
    wd, _ = finished
    results = wd["work"] / "results" / "paper"
    eval_file = results / "eval" / "v1" / "sokoban" / "aug" / "seed0" / "step1" / "sokoban.json"
    record = json.loads(eval_file.read_text())["provenance"]
    tasks = json.loads((results / "tasks" / "sokoban.json").read_text())
    assert record["tasks"]["fingerprint"] == tasks["fingerprint"]
    checkpoint = results / "runs" / "v1" / "sokoban" / "aug" / "seed0" / "checkpoints" / "step_1"
    assert record["model"]["sha256"] == provenance.model_hash(checkpoint)
    assert len(record["config_sha256"]) == 64 and record["packages"]["torch"] and record["packages"]["snakemake"]
    assert set(record["machine"]) >= {"cpu", "gpus", "cores"} and "commit" in record["gentax"]
    assert record["compute"]["dtype"] == json.loads(eval_file.read_text())["dtype"] in ("float32", "bfloat16")
    segment = json.loads((checkpoint.parents[1] / "segment_0_1.json").read_text())
    assert segment["provenance"]["model"]["path"].endswith("init/v1/run/checkpoints/step_1")  # the run's init
    for target in TARGETS:
        beside = provenance.beside(wd["work"] / target)
        inputs = json.loads(beside.read_text())["inputs"]
        assert inputs and all(len(h) == 64 for h in inputs.values()), target
    assert json.loads((results / "init" / "v2" / "model.provenance.json").read_text())["model"]["sha256"]


def test_report_opens_in_a_browser_with_every_table_and_figure(finished, tmp_path):
    wd, _ = finished
    report = tmp_path / "report.html"
    proc = snakemake(wd, *TARGETS, "--report", str(report))
    assert proc.returncode == 0 and report.is_file(), proc.stderr[-3000:]
    seen = walk_report(report, screenshot=tmp_path / "report.png")
    assert not seen["errors"], seen["errors"]
    assert set(seen["marked"]) == set(TARGETS)  # every table and figure the workflow marked
    for target in TARGETS:
        name = Path(target).stem
        record = json.loads(provenance.beside(wd["work"] / target).read_text())
        assert record["config_sha256"][:12] in seen["rows"][name], seen["rows"][name]
        assert record["packages"]["torch"] in seen["rows"][name]
        if target.endswith(".png"):
            assert seen["shown"][name] == "1 png image(s)"
        else:
            assert seen["shown"][name] == (wd["work"] / target).read_text()
    assert (tmp_path / "report.png").read_bytes().startswith(b"\x89PNG")


def test_editing_one_eval_file_reruns_only_its_downstream(finished):
    # Snakemake 9 compares checksums of small inputs, so a bare `touch` (same content) reruns
    # nothing; an eval file whose content changed must rerun exactly what reads it.
    wd, _ = finished
    evals = sorted((wd["work"] / "results" / "paper" / "eval" / "v1" / "sokoban" / "aug").rglob("*.json"))  # not .kept/ (its names end .kept)
    assert evals
    data = json.loads(evals[0].read_text())
    data["success_rate"] = 1.0 - data["success_rate"]
    evals[0].write_text(json.dumps(data))
    jobs = planned_jobs(snakemake(wd, "-n", *TARGETS))
    assert jobs == {"run_summary": 1, "table": 1, "figure": 1}  # only table5 and the ΔOOD-augmentation figure read aug runs


def test_changing_one_eps_reruns_only_what_reads_it(finished):
    wd, _ = finished
    override = wd["work"] / "eps_override.yaml"
    override.write_text("augmentation: {v1: {eps: {sokoban: 30}}}\n")  # was 20 (tests/smoke_config.yaml)
    proc = snakemake(wd, "-n", *TARGETS, configfiles=[override])
    jobs = planned_jobs(proc)
    # the one aug run's segment, its eval (1 checkpoint, its 2 domains in one job), its summary, table 5, the ΔOOD figure
    assert jobs == {"rl_segment": 1, "eval_checkpoint_v1": 1, "run_summary": 1, "table": 1, "figure": 1}, proc.stdout[-3000:]


def test_a_preempted_rl_segment_resumes_and_changes_nothing(preemption):
    straight, preempted, jobs = preemption["straight"], preemption["preempted"], preemption["jobs"]
    preemption["watcher"].join()  # the cancel (or what stopped it)
    if "error" in preemption["found"]:
        raise preemption["found"]["error"]
    cancelled = preemption["found"]["cancelled"]
    for proc, _ in jobs:
        proc.wait(timeout=1500)
    outputs = [out.read_text() for _, out in jobs]
    assert jobs[0][0].returncode == 0, outputs[0][-4000:]
    assert jobs[1][0].returncode == 0, outputs[1][-4000:]
    text = outputs[1]
    assert cancelled < EXTENDED_STEPS, "the segment finished before the cancel"
    segment = f"rule_rl_segment/v1_sokoban_default_0_1_{EXTENDED_STEPS}/"
    submissions = [line for line in text.splitlines() if "submitted with SLURM jobid" in line and segment in line]
    assert len(submissions) == 2, text[-4000:]  # the cancelled job and Snakemake's retry
    # scancel's SIGTERM ends the trainer through its handler (gentax.train.processes), which frees
    # the run folder's lock; a SIGKILL would leave it to be taken over. Either way the retry trains.
    log = next((preempted["work"] / "results" / "paper" / "logs").rglob(f"segment_1_{EXTENDED_STEPS}*.log")).read_text()
    assert "is in use by" not in log, log[-3000:]
    from gentax.joblog import HEADER

    assert log.count(HEADER) == 2, log[-3000:]  # the log keeps both attempts, each under its header
    resumed = int(re.search(r"resuming \S+ from step (\d+)", log.split(HEADER)[-1]).group(1))  # the retry's
    assert cancelled <= resumed < EXTENDED_STEPS  # from its last checkpoint, not from the start
    import pandas as pd

    metrics = [pd.read_csv(w["work"] / EXTENDED_RUN / "metrics.csv") for w in (straight, preempted)]
    assert metrics[1]["step"].tolist() == list(range(1, EXTENDED_STEPS + 1))  # no step twice, none lost
    pd.testing.assert_series_equal(metrics[1]["loss"], metrics[0]["loss"])
    last = f"{EXTENDED_RUN}/checkpoints/step_{EXTENDED_STEPS}/model.safetensors"
    assert (preempted["work"] / last).read_bytes() == (straight["work"] / last).read_bytes()
    for table in (t for t in EXTENDED_TARGETS if t.endswith(".csv")):  # the tables (figures are PNGs)
        assert (preempted["work"] / table).read_text() == (straight["work"] / table).read_text(), table
