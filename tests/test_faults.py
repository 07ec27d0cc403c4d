"""Faults lose nothing and hide nothing: kills around a checkpoint save (during an eval write:
tests/test_evalfile.py), temporaries left by killed writes (of every output), one writer per output
(run folder, SFT, evaluation), a trainer's processes ended with it (vLLM engines outside its
process group included), damaged checkpoints named with their recovery (eval files:
tests/test_evalfile.py), every reader of a result file (JSON, CSV, Parquet, YAML, safetensors, optimizer state) naming a cut one and the job that
rebuilds it, bad outputs refused before any work.

A kill is simulated in-process by raising ``Killed`` (a BaseException, so no ``except Exception``
swallows it) at the chosen point, or is a real SIGKILL of a child process;
``benchmarks/kill_points.py`` kills every job kind at every atomic write with a real SIGKILL.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from gentax.errors import GentaxError
from gentax.rollout import evaluation
from gentax.train import local_engine, runs
from gentax.train.jobs import train_rl
from gentax.train.processes import alive
from rl_helpers import TINY_RL, make_run, make_tiny_model
from test_evalfile import expert_eval

ROOT = Path(__file__).resolve().parents[1]


class Killed(BaseException):
    """Stands for SIGKILL at an injection point."""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def train(run_dir, init, steps, domain="sokoban"):
    start, end = steps
    return train_rl("local", dict(TINY_RL), init=str(init), run=make_run(domain, "default", 0, end, init=str(init)),
                    start=start, end=end, run_dir=str(run_dir), progress=False)


@pytest.fixture(scope="module")
def straight_run(tiny, tmp_path_factory):
    run = tmp_path_factory.mktemp("straight") / "run"
    assert train(run, tiny, (0, 3)) == 0
    return run


@contextlib.contextmanager
def lock_held_elsewhere(module: str, lock: str, path: Path):
    """Another process holding ``lock`` (an expression over ``module``'s names, of ``sys.argv[1]``)
    on ``path`` for the body; SIGKILLed when the body ends, as a crashed holder would be."""
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys, time\nfrom {module}\nwith {lock}:\n    print('held', flush=True)\n"
         "    time.sleep(600)\n", str(path)],
        stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


def temporaries(folder: Path) -> list[Path]:
    return sorted(folder.rglob(".*.tmp"))


# ---- 1. a kill between saving a checkpoint and logging its metrics row ----------------------------
@pytest.mark.parametrize("point", ["before_save", "after_save"])
def test_a_kill_around_a_checkpoint_save_loses_no_metrics_row(tiny, straight_run, tmp_path, monkeypatch, point):
    real_save = local_engine.Policy.save

    def save(self, target, optimizer, step):
        if step == 2 and point == "before_save":
            raise Killed
        real_save(self, target, optimizer, step)
        if step == 2 and point == "after_save":
            raise Killed

    run = tmp_path / "run"
    monkeypatch.setattr(local_engine.Policy, "save", save)
    with pytest.raises(Killed):
        train(run, tiny, (0, 3))
    monkeypatch.undo()
    assert train(run, tiny, (0, 3)) == 0
    ours, straight = pd.read_csv(run / runs.METRICS_FILE), pd.read_csv(straight_run / runs.METRICS_FILE)
    assert ours["step"].tolist() == [1, 2, 3]
    pd.testing.assert_series_equal(ours["loss"], straight["loss"])


# ---- 2. temporaries of killed writes -------------------------------------------------------------
def test_temporaries_of_killed_writes_are_removed(tiny, tmp_path, capsys):
    run = tmp_path / "run"
    half_checkpoint = run / "checkpoints" / ".step_2.k1ll3d.tmp" / "step_2"
    half_checkpoint.mkdir(parents=True)
    (half_checkpoint / "model.safetensors").write_bytes(b"\0" * 1024)
    (run / ".metrics.csv.k1ll3d.tmp").mkdir()
    # a kill while a thinking run wrote a step's think samples (seen in CI, 2026-12-01)
    (run / "think_samples" / ".step_2.json.k1ll3d.tmp").mkdir(parents=True)
    assert train(run, tiny, (0, 1)) == 0
    assert temporaries(run) == []
    assert "removed" in capsys.readouterr().out

    folder = tmp_path / "eval"
    (folder / ".sokoban.episodes.parquet.k1ll3d.tmp").mkdir(parents=True)
    (folder / ".other.json.k1ll3d.tmp").mkdir()  # another output's write in progress: not ours to remove
    expert_eval(folder / "sokoban", 2)
    assert temporaries(folder) == [folder / ".other.json.k1ll3d.tmp"]


# ---- 6. two trainers on one run folder ------------------------------------------------------------
def test_one_trainer_per_run_folder_and_a_dead_holders_lock_is_taken_over(tiny, tmp_path, capsys):
    run = tmp_path / "run"
    with lock_held_elsewhere("gentax.train import runs", "runs.locked(sys.argv[1])", run) as holder:
        with pytest.raises(GentaxError, match=f"in use by pid {holder.pid} on host {socket.gethostname()}"):
            train(run, tiny, (0, 1))
        assert not (run / runs.CHECKPOINTS).exists()
    assert train(run, tiny, (0, 1)) == 0  # the killed holder's lock is taken over
    assert f"took over the lock of {run} from pid {holder.pid}" in capsys.readouterr().out
    assert train(run, tiny, (1, 1)) == 0  # a finished trainer leaves the lock free
    assert "took over" not in capsys.readouterr().out


# ---- 5. crashed episodes hidden in the tables ------------------------------------------------------
JAVA_TRACE = ("An error occurred while calling o41.step.\nTraceback (most recent call last):\n"
              '  File "py4j/java_gateway.py", line 1038, in send_command\n'
              "py4j.protocol.Py4JNetworkError: Answer from Java side is empty")


def test_env_errors_are_left_out_of_success_rates_and_named_in_one_line(tmp_path, monkeypatch, caplog):
    from gentax.domains.sokoban import SokobanEnv

    real_step = SokobanEnv._step

    def dies_on_odd_tasks(self, action):
        if self.current_task.seed % 2:
            raise RuntimeError(JAVA_TRACE)
        return real_step(self, action)

    monkeypatch.setattr(SokobanEnv, "_step", dies_on_odd_tasks)
    summary = expert_eval(tmp_path / "sokoban", 4)
    assert (summary["success_rate"], summary["scored_episodes"], summary["errors"]) == (1.0, 2, 2)
    assert summary["error_rate"] == 0.5 and summary["errors_as_losses"] is False
    reason = "RuntimeError: An error occurred while calling o41.step.: py4j.protocol.Py4JNetworkError: Answer from Java side is empty"
    assert summary["error_reasons"] == {reason: 2}
    assert set(pd.read_parquet(tmp_path / "sokoban.episodes.parquet")["error"].dropna()) == {reason}
    assert sum("Traceback" in r.getMessage() for r in caplog.records) == 2  # the full text: once per failure
    from gentax.rollout.collector import CollectConfig
    from gentax.rollout.generators import make_generator

    counted = evaluation.evaluate(make_generator("expert", None), [0, 1, 2, 3], CollectConfig(domain="sokoban", split="eval"),
                                  str(tmp_path / "counted"), progress=False, errors_as_losses=True)
    assert counted["success_rate"] == 0.5 and counted["scored_episodes"] == 4


def test_tables_flag_cells_with_env_errors():
    from gentax.analysis.synthetic import synthetic_summary
    from analysis_cases import study
    from gentax.analysis.tables import ERROR_MARK, Settings, compute_tables, render

    summary = synthetic_summary(seeds=(0, 1))
    summary["error_rate"] = 0.0
    sick = (summary["init"] == "v2") & (summary["train_domain"] == "sokoban") & (summary["variant"] == "default")
    summary.loc[sick & (summary["eval_domain"] == "sciworld"), "error_rate"] = 0.5  # a dying JVM
    summary.loc[sick & (summary["eval_domain"] == "webshop"), "error_rate"] = 0.01
    analysis = compute_tables(summary, None, settings=Settings(**study(n_boot=0, error_mark_pct=5)))
    table2 = analysis.tables["table2_success"]
    row = table2.data.set_index(["init", "train_domain", "eval_domain"]).loc[("v2", "sokoban", "sciworld")]
    assert row["error_pct"] == pytest.approx(50.0)
    markdown = render(table2)["md"]
    marked = [line for line in markdown.splitlines() if ERROR_MARK in line and line.startswith("|")]
    assert len(marked) == 1 and "| V2 " in marked[0] and "| sokoban " in marked[0]
    assert any("v2/sokoban/default on sciworld 50.0%" in n and "2 cell(s)" in n for n in analysis.notes)
    assert any("more than 5% of episodes" in n for n in table2.notes)


# ---- 7. every atomic write removes what a killed write of the same output left -------------------
KILLED_WRITE = """
import os, signal, sys
from gentax import io as gio
with gio.atomic_path(sys.argv[1]) as tmp:
    (tmp.mkdir() if sys.argv[2] == "folder" else tmp.write_text("half"))
    os.kill(os.getpid(), signal.SIGKILL)
"""
HELD_WRITE = """
import sys, time
from gentax import io as gio
with gio.atomic_path(sys.argv[1]) as tmp:
    tmp.write_text("in progress")
    print("writing", flush=True)
    time.sleep(600)
"""


def python(code: str, *args: str, **kwargs):
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], env={"PYTHONPATH": str(ROOT)}, **kwargs)


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_the_next_write_of_an_output_removes_what_a_killed_write_of_it_left(tmp_path, kind):
    from gentax.io import write_text

    target = tmp_path / "tables" / "table2_success.md"
    assert python(KILLED_WRITE, target, kind).returncode == -signal.SIGKILL
    assert len(temporaries(tmp_path)) == 1
    write_text(tmp_path / "tables" / "other.md", "x")  # another output's write leaves it alone
    assert len(temporaries(tmp_path)) == 1
    if kind == "folder":
        target.mkdir()
    write_text(target, "done\n")
    assert temporaries(tmp_path) == [] and target.read_text() == "done\n"


def test_a_live_writers_temporary_is_kept_and_the_dead_ones_removed(tmp_path):
    from gentax import io as gio

    target = tmp_path / "summary.csv"
    writer = subprocess.Popen([sys.executable, "-c", HELD_WRITE, str(target)], stdout=subprocess.PIPE, text=True,
                              env={"PYTHONPATH": str(ROOT)})
    try:
        assert writer.stdout.readline().strip() == "writing"
        live = temporaries(tmp_path)
        assert python(KILLED_WRITE, target, "file").returncode == -signal.SIGKILL
        dead = [p for p in temporaries(tmp_path) if p not in live]
        assert len(live) == len(dead) == 1 and gio.remove_temporaries(tmp_path) == dead
        gio.write_text(target, "mine\n")
        assert temporaries(tmp_path) == live  # the live writer's stays
    finally:
        writer.kill()
        writer.wait()
    gio.write_text(target, "mine\n")
    assert temporaries(tmp_path) == []


# ---- 8. SFT: one trainer per output; the trainer dies with its job --------------------------------
FAKE_LLAMAFACTORY = """#!{python}
import json, os, pathlib, sys, time, yaml
args = yaml.safe_load(open(sys.argv[2]))
out = pathlib.Path(args["output_dir"])
out.mkdir(parents=True, exist_ok=True)
if os.environ.get("FAKE_SFT_HOLD"):
    pathlib.Path(os.environ["FAKE_SFT_HOLD"]).write_text(str(os.getpid()))
    time.sleep(600)
(out / "config.json").write_text(json.dumps({{"model_type": "llama"}}))
(out / "model.safetensors").write_bytes(b"weights" * 100)
(out / "trainer_log.jsonl").write_text(json.dumps({{"loss": 1.0}}) + "\\n")
"""


@pytest.fixture
def sft_job(tiny, tmp_path):
    """(config, data folder, init model) of an SFT job whose LlamaFactory is a stand-in script."""
    from gentax.study.config import study_config
    from gentax.study.config import study_sft
    from gentax.train.sft_config import load_sft_config
    from gentax.train.sft_data import DATASET_INFO, DATASET_NAME

    cli = tmp_path / "llamafactory-cli"
    cli.write_text(FAKE_LLAMAFACTORY.format(python=sys.executable))
    cli.chmod(0o755)
    data = tmp_path / "data"
    data.mkdir()
    (data / "dataset_info.json").write_text(json.dumps(DATASET_INFO))
    example = {"conversations": [{"from": "human", "value": "push the box"}, {"from": "gpt", "value": "up"}]}
    (data / DATASET_INFO[DATASET_NAME]["file_name"]).write_text(json.dumps([example]))
    cfg = load_sft_config({**study_sft(study_config("embedded", check=False), "embedded-base"),
                           "llamafactory_cli": str(cli), "steps": 1, "batch_size": 1, "micro_batch_size": 1})
    return cfg, data, tiny


def test_sft_output_has_one_writer_and_a_manifest(sft_job, tmp_path):
    from gentax import io as gio
    from gentax.train.sft import train_sft

    out = tmp_path / "init" / "v2" / "model"
    with lock_held_elsewhere("gentax import io", "io.output_lock(sys.argv[1], 'SFT output')", out) as holder:
        with pytest.raises(GentaxError, match=f"SFT output {out} is in use by pid {holder.pid}"):
            train_sft(*sft_job, out, stream=open("/dev/null", "w"))
        assert not out.exists()
    train_sft(*sft_job, out, stream=open("/dev/null", "w"))
    assert gio.manifest_problem(out) is None and (out / gio.MANIFEST_FILE).is_file()
    with open(out / "model.safetensors", "r+b") as fh:
        fh.truncate(10)
    assert gio.manifest_problem(out) == f"{out / 'model.safetensors'}: 10 bytes, 700 written"


SFT_JOB = """
import pickle, sys
from gentax.train.sft import train_sft
cfg, data, init, out = pickle.loads(bytes.fromhex(sys.argv[1]))
train_sft(cfg, data, init, out)
"""


def test_a_killed_sft_job_takes_its_trainer_with_it_and_the_rerun_cleans_up(sft_job, tmp_path):
    import pickle

    import psutil

    from gentax.train.sft import train_sft

    out = tmp_path / "model"
    started = tmp_path / "trainer.pid"
    job = subprocess.Popen([sys.executable, "-c", SFT_JOB, pickle.dumps((*sft_job, out)).hex()],
                           env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "FAKE_SFT_HOLD": str(started)},
                           stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (started.is_file() and started.read_text()):  # the stand-in trainer is running
            assert job.poll() is None and time.monotonic() < deadline, "the SFT job never started its trainer"
            time.sleep(0.1)
        trainer = psutil.Process(int(started.read_text()))
    finally:
        job.kill()
        job.wait()
    gone, left = psutil.wait_procs([trainer], timeout=30)
    assert gone and not left  # the job's death reached its trainer (SIGTERM from the kernel)
    assert len(temporaries(tmp_path)) == 1
    train_sft(*sft_job, out, stream=open("/dev/null", "w"))
    assert temporaries(tmp_path) == [] and (out / "config.json").is_file()


# ---- 9. whatever ends a trainer ends the processes it started (Ray, vLLM engines) -----------------
VLLM_TITLES = ("VLLM::EngineCore", "VLLM::Worker")
#: a trainer that starts two processes outside its session, titled like vLLM's engine processes
FAKE_TRAINER = """
import subprocess, sys, time
from gentax.train import runs
with runs.locked(sys.argv[1]):
    engines = [subprocess.Popen(["setsid", "bash", "-c", f"exec -a {title} sleep 600"]) for title in sys.argv[2:]]
    for engine, title in zip(engines, sys.argv[2:]):  # until bash has exec'd (the title shows)
        while not open(f"/proc/{engine.pid}/cmdline", "rb").read().startswith(title.encode()):
            time.sleep(0.01)
    print(" ".join(str(e.pid) for e in engines), flush=True)
    time.sleep(600)
"""


def start_fake_trainer(run: Path):
    from gentax.train.processes import process_name

    trainer = subprocess.Popen([sys.executable, "-c", FAKE_TRAINER, str(run), *VLLM_TITLES], stdout=subprocess.PIPE,
                               text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, start_new_session=True)
    engines = [int(pid) for pid in trainer.stdout.readline().split()]
    assert [process_name(pid) for pid in engines] == list(VLLM_TITLES)
    return trainer, engines


def wait_until_titled(pids: list[int], titles, timeout: float = 30.0) -> None:
    from gentax.train.processes import process_name

    deadline = time.monotonic() + timeout
    while [process_name(pid) for pid in pids] != list(titles):
        assert time.monotonic() < deadline, [process_name(pid) for pid in pids]
        time.sleep(0.05)


def watcher_of(trainer) -> int:
    """The pid of the watcher ``processes.owning`` started for ``trainer`` (in a session of its own)."""
    from gentax.train.processes import descendants

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for pid in descendants(trainer.pid):
            with contextlib.suppress(OSError):
                if f" watch {trainer.pid} ".encode() in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" "):
                    return pid
        time.sleep(0.01)
    raise AssertionError(f"no watcher of trainer {trainer.pid}")


def test_a_killed_trainers_processes_end_without_waiting_for_a_rerun(tmp_path):
    """SIGKILL runs none of the trainer's code: its watcher (its own session, so a kill of the
    trainer's process group leaves it) ends the engines it left, within seconds (the H200 check: 30 s)."""
    trainer, engines = start_fake_trainer(tmp_path / "run")
    watcher = watcher_of(trainer)
    try:
        os.killpg(trainer.pid, signal.SIGKILL)
        trainer.wait()
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in engines + [watcher]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in engines)
        assert not alive(watcher)  # its work done, it exits
    finally:
        for pid in engines + [watcher]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


#: a trainer that starts an agent with an environment of its own (no token), as Ray starts its
#: dashboard and runtime-env agents
UNMARKED_AGENT_TRAINER = """
import subprocess, sys, time
from gentax.train import runs
with runs.locked(sys.argv[1]):
    agent = subprocess.Popen(["setsid", "bash", "-c", "exec -a ray::DashboardAgent sleep 600"], env={"PATH": "/usr/bin:/bin"})
    while not open(f"/proc/{agent.pid}/cmdline", "rb").read().startswith(b"ray::"):
        time.sleep(0.01)
    print(agent.pid, flush=True)
    time.sleep(600)
"""


def test_a_killed_trainers_unmarked_children_end_too(tmp_path):
    trainer = subprocess.Popen([sys.executable, "-c", UNMARKED_AGENT_TRAINER, str(tmp_path / "run")], stdout=subprocess.PIPE,
                               text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, start_new_session=True)
    agent = int(trainer.stdout.readline())
    try:
        time.sleep(1.0)  # the watcher has seen it below the trainer
        os.killpg(trainer.pid, signal.SIGKILL)
        trainer.wait()
        deadline = time.monotonic() + 15
        while alive(agent) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(agent)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(agent, signal.SIGKILL)


def test_taking_over_a_killed_trainers_lock_ends_the_processes_it_left(tmp_path, capsys):
    run = tmp_path / "run"
    trainer, engines = start_fake_trainer(run)
    try:
        os.kill(watcher_of(trainer), signal.SIGKILL)  # the watcher killed too: the takeover is the second line
        os.killpg(trainer.pid, signal.SIGKILL)  # the trainer and its process group: the engines are elsewhere
        trainer.wait()
        assert all(alive(pid) for pid in engines)  # what the smoke's kill left on the H200
        with runs.locked(run) as previous:
            assert f"pid {trainer.pid}" in previous
        assert not any(alive(pid) for pid in engines)
        out = capsys.readouterr().out
        assert all(f"ended pid {pid} ({title})" in out for pid, title in zip(engines, VLLM_TITLES))
    finally:
        for pid in engines:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_stopped_trainer_ends_its_processes(tmp_path):
    trainer, engines = start_fake_trainer(tmp_path / "run")
    try:
        trainer.send_signal(signal.SIGTERM)  # a preempted or cancelled job
        assert trainer.wait(timeout=60) == 128 + signal.SIGTERM
        assert not any(alive(pid) for pid in engines)
    finally:
        for pid in engines:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# ---- 10. damaged files are found, named, and recovered from ---------------------------------------
def test_a_truncated_checkpoint_is_named_and_the_run_resumes_from_the_one_before(tiny, straight_run, tmp_path, capsys):
    import shutil

    from safetensors.torch import load_file

    run = tmp_path / "run"
    shutil.copytree(straight_run, run)
    weights = runs.checkpoint_dir(run, 3) / "model.safetensors"
    with open(weights, "r+b") as fh:
        fh.truncate(weights.stat().st_size // 2)
    assert train(run, tiny, (0, 3)) == 0
    out = capsys.readouterr().out
    assert f"not resuming from {runs.checkpoint_dir(run, 3)}: {weights}: " in out and "resuming" in out
    assert f"resuming {run} from step 2" in out
    ours, straight = load_file(weights), load_file(runs.checkpoint_dir(straight_run, 3) / "model.safetensors")
    assert ours.keys() == straight.keys() and all((ours[k] == straight[k]).all() for k in ours)
    pd.testing.assert_frame_equal(pd.read_csv(run / runs.METRICS_FILE)[["step", "loss"]],
                                  pd.read_csv(straight_run / runs.METRICS_FILE)[["step", "loss"]])


def test_an_unwritable_eval_output_fails_before_any_episode(tmp_path, monkeypatch, capsys):
    from gentax.cli import main

    def no_episodes(*_args, **_kwargs):
        raise AssertionError("an episode ran")

    monkeypatch.setattr(evaluation, "collect", no_episodes)
    (tmp_path / "results").write_text("a file where the output folder should be")
    out = tmp_path / "results" / "eval" / "sokoban.parquet"
    assert main(["eval", "--generator", "expert", "--domain", "sokoban", "--episodes", "2", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gentax: error: cannot write evaluation output {tmp_path}/results/eval/sokoban.json: ")
    assert len(err.splitlines()) == 1


def test_two_evaluations_of_one_output_do_not_run_at_once(tmp_path, monkeypatch):
    prefix = tmp_path / "sokoban"
    with lock_held_elsewhere("gentax import evalfile", "evalfile.output_lock(sys.argv[1])", prefix) as holder:
        with pytest.raises(GentaxError, match=f"evaluation output {prefix}.json is in use by pid {holder.pid}"):
            expert_eval(prefix, 2)
    assert expert_eval(prefix, 2)["episodes"] == 2


def test_a_missing_model_folder_is_one_line_naming_it(tmp_path, capsys):
    from gentax.cli import main

    missing = tmp_path / "init" / "v2" / "model"
    assert main(["eval", "--model", str(missing), "--domain", "sokoban", "--episodes", "1", "--quiet",
                 "--out", str(tmp_path / "x.parquet")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"gentax: error: model folder {missing} does not exist"


def test_a_truncated_model_folder_is_one_line_naming_the_file(tmp_path, capsys):
    from gentax import io as gio
    from gentax.cli import main

    model = tmp_path / "init" / "v2" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"w" * 1000)
    gio.write_manifest(model)
    with open(model / "model.safetensors", "r+b") as fh:
        fh.truncate(600)
    assert main(["eval", "--model", str(model), "--domain", "sokoban", "--episodes", "1", "--quiet",
                 "--out", str(tmp_path / "x.parquet")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"gentax: error: model folder {model} is damaged ({model / 'model.safetensors'}: 600 bytes, 1000 written); "
        "delete it and rerun the job that wrote it")


# ---- 11. every reader of a result file names a cut one and the job that rebuilds it ----------------
def cut(path: Path, keep: float = 0.5) -> None:
    """Truncate ``path`` to ``keep`` of its size, as a disk that filled or a copy cut short leaves it."""
    with open(path, "r+b") as fh:
        fh.truncate(int(path.stat().st_size * keep))


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_a_cut_property_log_is_named_with_the_job_that_rebuilds_it(tmp_path, capsys):
    """properties-table once ended in json.decoder.JSONDecodeError naming no file."""
    from gentax.cli import main

    log = tmp_path / "properties" / "sokoban.json"
    log.parent.mkdir()
    log.write_text(json.dumps({"domain": "sokoban", "measures": {"obs_chars": 120.5, "t_mean": 7.0}}))
    cut(log)
    spec = {"inputs": [str(log)], "out": str(tmp_path / "properties.csv")}
    assert main(["properties-table", "--job", json.dumps(spec)]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"gentax: error: {log} is corrupt (not JSON: ") and \
        line.endswith(f"rebuild it: snakemake --force {log} (with the --profile/--configfile of the run)")
    assert not (tmp_path / "properties.csv").exists()


def test_a_cut_property_log_of_the_controls_is_named_too(tmp_path, capsys):
    from gentax.cli import main

    log = tmp_path / "richness-eps80.json"
    log.write_text(json.dumps({"domain": "sokoban", "measures": {"obs_chars": 120.5}}))
    cut(log)
    level = {"control": "richness", "level": "eps80", "order": 0, "init": "v2", "train_domain": "sokoban",
             "variant": "aug", "domain": {"max_steps": 15, "options": {}},
             "augmentation": {"kind": "distractors", "p": 0.5, "eps": 80}, "run_label": "x"}
    spec = {"levels": [level], "inputs": [str(log)], "out": str(tmp_path / "controls.csv")}
    assert main(["controls-properties-table", "--job", json.dumps(spec)]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"gentax: error: {log} is corrupt (not JSON: ") and \
        line.endswith(f"rebuild it: snakemake --force {log} (with the --profile/--configfile of the run)")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_cut_summary_table_is_named_with_the_job_that_rebuilds_it(tmp_path, suffix):
    """A cut CSV once read as fewer rows or a row of blanks (pandas reads what is there)."""
    from gentax.analysis.summary import load_summary

    frame = pd.DataFrame({"init": ["v1"] * 40, "train_domain": ["webshop"] * 40, "variant": ["default"] * 40,
                          "seed": [0] * 40, "step": list(range(40)), "eval_domain": ["sokoban"] * 40,
                          "success": [0.5] * 40})
    path = tmp_path / f"seed0{suffix}"
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    cut(path, 0.6)
    with pytest.raises(GentaxError, match=rf"^{path} is corrupt \((cut short: its last line has no line end|not a "
                                          rf"readable Parquet file: .*)\); rebuild it: snakemake --force {path} "):
        load_summary(path)


def test_a_cut_metrics_log_is_named_and_no_step_of_it_is_lost_quietly(tiny, straight_run, tmp_path):
    """metrics.csv cut mid-row: the resume once read a row of blanks for the cut step."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(straight_run, run)
    metrics = run / runs.METRICS_FILE
    cut(metrics, 0.7)
    with pytest.raises(GentaxError, match=rf"^{metrics} is corrupt \(cut short: its last line has no line end\); "
                                          rf"it holds the metrics of every trained step, .*delete the run folder {run} "):
        train(run, tiny, (0, 4))


def test_a_cut_run_record_is_named(tiny, straight_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(straight_run, run)
    cut(run / runs.RUN_FILE)
    with pytest.raises(GentaxError, match=rf"^{run / runs.RUN_FILE} is corrupt \(not JSON: .*\); it names the run"):
        train(run, tiny, (0, 3))


def test_cut_weights_in_a_model_folder_without_a_manifest_are_one_line(tiny, tmp_path, capsys):
    """A model folder no gentax job wrote (no manifest to compare): safetensors' own error on the cut
    header, once a raw SafetensorError traceback, names the folder."""
    import shutil

    from gentax.cli import main

    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    (model / "gentax_manifest.json").unlink(missing_ok=True)
    cut(model / "model.safetensors")
    assert main(["eval", "--model", str(model), "--generator", "hf", "--domain", "sokoban", "--episodes", "1", "--quiet",
                 "--out", str(tmp_path / "x.parquet")]) == 2
    assert one_error_line(capsys) == (
        f"gentax: error: model folder {model} is corrupt (SafetensorError: Error while deserializing header: "
        "incomplete metadata, file not fully covered); delete it and rerun the job that wrote it")


def test_a_cut_optimizer_state_without_a_manifest_is_one_line(tiny, straight_run, tmp_path):
    """The resume state's manifest finds a cut file (the run resumes from the checkpoint before); a
    state without one (written before manifests) once ended in torch's raw zip error."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(straight_run, run)
    state = runs.checkpoint_dir(run, 3) / runs.STATE_DIR
    (state / "gentax_manifest.json").unlink()
    cut(state / "optimizer.pt")
    with pytest.raises(GentaxError, match=rf"^optimizer state {state / 'optimizer.pt'} is corrupt \(RuntimeError: "
                                          rf".*\); delete {runs.checkpoint_dir(run, 3)} and rerun the job: the run "
                                          "resumes from the checkpoint before it$"):
        train(run, tiny, (0, 4))


def test_a_cut_config_file_is_named(tmp_path):
    """YAML: the config files and a run spec (JSON is YAML) have one reader that names them."""
    from gentax.errors import ConfigError
    from gentax.io import read_yaml

    spec = tmp_path / "run_spec.json"
    spec.write_text(json.dumps({"init": "v1", "train": [["webshop", 1]], "variant": "default"}))
    cut(spec)
    with pytest.raises(ConfigError, match=rf"^{spec}: not valid YAML at line 1, column \d+: "):
        read_yaml(spec)


# ---- 12. a full disk and an unwritable folder: one line naming the path, the cause, the free space ---
@contextlib.contextmanager
def small_disk(where: Path, size: str):
    """A tmpfs of ``size`` mounted at ``where`` for the body (skips the test where mounting is not allowed)."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small disk here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:  # lazily: a failed write's file may still be open in the traceback's frames
        subprocess.run(["umount", "--lazy", str(where)], check=True)


def test_a_disk_that_fills_during_a_checkpoint_save_is_one_line(tiny, tmp_path):
    """The first checkpoint (weights 12.6 MB, optimizer state 25 MB) does not fit: once two raw
    tracebacks ending in torch's inline_container.cc; now one line, the temporary removed, nothing
    committed."""
    with small_disk(tmp_path / "disk", "40m") as disk:
        run = disk / "run"
        with pytest.raises(GentaxError) as failed:
            train(run, tiny, (0, 1))
        line = str(failed.value)
        assert "\n" not in line
        assert line.startswith(f"cannot write {runs.checkpoint_dir(run, 1)}: No space left on device [ENOSPC]; "), line
        assert line.endswith(f"free of 40.0 MiB on {disk}; free space there (or set results: to a folder on a larger "
                             "disk), then rerun the job"), line
        assert temporaries(run) == [] and runs.checkpoint_steps(run) == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EPERM, errno.EDQUOT],
                         ids=lambda code: errno.errorcode[code])
def test_a_refused_result_write_is_one_line_naming_the_path_the_cause_and_the_free_space(tmp_path, capsys, code):
    from gentax import io as gio
    from gentax.cli import main

    out = tmp_path / "results" / "table.csv"
    with pytest.raises(GentaxError) as failed:
        with gio.atomic_path(out) as tmp:
            raise OSError(code, os.strerror(code), str(tmp))
    fix = "free space there" if code in (errno.ENOSPC, errno.EDQUOT) else "make the folder writable"
    assert re.fullmatch(rf"cannot write {out}: {os.strerror(code)} \[{errno.errorcode[code]}\] at {tmp}; "
                        rf"\S+ \S+ free of \S+ \S+ on /\S*; {fix} .*then rerun the job", str(failed.value)), failed.value
    assert temporaries(out.parent) == [] and not out.exists()

    # a write outside an atomic write (a log, an append): the command's one line, exit 2
    def refused(*_args, **_kwargs):
        raise OSError(code, os.strerror(code), str(tmp_path / "results" / "metrics.csv"))

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr("gentax.domains.cli.check_domain", refused)
    try:
        assert main(["domains", "check", "--domain", "sokoban", "--episodes", "1"]) == 2
    finally:
        monkeypatch.undo()
    assert one_error_line(capsys).startswith(
        f"gentax: error: cannot write {tmp_path}/results/metrics.csv: {os.strerror(code)} [{errno.errorcode[code]}]; ")


@pytest.mark.parametrize("message", [
    "[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534",  # torch.save to a path
    "Error while serializing: I/O error: No space left on device (os error 28)",  # safetensors
])
def test_libraries_that_say_a_full_disk_in_words_are_read_as_one(tmp_path, message):
    from gentax import io as gio

    out = tmp_path / "model"
    with pytest.raises(GentaxError, match=rf"^cannot write {out}: No space left on device \[ENOSPC\]; "):
        with gio.atomic_path(out):
            raise RuntimeError(message)


@contextlib.contextmanager
def immutable(folder: Path):
    """``chattr +i`` on ``folder`` for the body: nothing can be made in it, its files stay writable
    (skips the test where the filesystem or the user cannot set it)."""
    made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make {folder} immutable here: {made.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_the_write_check_at_a_jobs_start_tests_the_folder_not_an_old_lock_file(tmp_path, monkeypatch, capsys):
    """An evaluation folder that cannot be written although its lock file is there (chattr +i): the
    up-front check once passed on the old lock, a batch of episodes was played, then a raw
    PermissionError on the Parquet temporary."""
    from gentax.cli import main

    def no_episodes(*_args, **_kwargs):
        raise AssertionError("an episode ran")

    out = tmp_path / "eval" / "sokoban.parquet"
    expert_eval(out.with_suffix(""), 1)  # an earlier evaluation: its lock file is there
    assert (out.parent / ".sokoban.json.lock").is_file()
    monkeypatch.setattr(evaluation, "collect", no_episodes)
    with immutable(out.parent):
        assert main(["eval", "--generator", "expert", "--domain", "sokoban", "--episodes", "2", "--quiet",
                     "--out", str(out)]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"gentax: error: cannot write evaluation output {out.parent}/sokoban.json: Operation not "
                           f"permitted [EPERM] at {out.parent}/.gentax-probe."), line
    assert line.endswith("make the folder writable (or set results: to a writable folder), then rerun the job"), line


# ---- 13. a trainer or writer takes its output's lock before its heavy imports -----------------------
#: verb -> (the output its lock guards, from its spec; the holder's lock expression over `sys.argv[1]`)
LOCKS = {
    "train rl": (lambda spec: spec["out"], "gentax.train import runs", "runs.locked(sys.argv[1])"),
    "sft train": (lambda spec: spec["out"], "gentax import io", "io.output_lock(sys.argv[1], 'SFT output')"),
    "sft build-data": (lambda spec: spec["out"], "gentax import io", "io.output_lock(sys.argv[1], 'SFT dataset')"),
    "eval": (lambda spec: spec["domains"][-1]["out"][: -len(".parquet")], "gentax import evalfile",
             "evalfile.output_lock(sys.argv[1])"),  # its last domain's: every domain's lock is taken first
    "properties": (lambda spec: spec["out"][: -len(".parquet")], "gentax import evalfile",
                   "evalfile.output_lock(sys.argv[1])"),
    "model embedded": (lambda spec: spec["out"], "gentax import io", "io.output_lock(sys.argv[1], 'model folder')"),
}
#: what makes a job slow to start: none of it may load before the lock refuses a second job
HEAVY = ("torch", "transformers", "llamafactory", "verl", "ray", "vllm", "tensorboard")
REFUSED_BY = """import sys, time
started = time.perf_counter()
from gentax.cli import main
code = main(sys.argv[1:])
print("refused after", round(time.perf_counter() - started, 2), "s; loaded:",
      [name for name in {heavy!r} if name in sys.modules], file=sys.stderr)
sys.exit(code)
"""


@pytest.fixture(scope="module")
def writer_specs(tmp_path_factory):
    """One job spec of each trainer and writer, as the embedded plan writes them, with its inputs
    stood in for (a model folder is a config.json, a dataset folder its dataset_info.json)."""
    from snakemake_plans import planned_jobs

    where = tmp_path_factory.mktemp("writers")
    specs = {}
    for verb, spec in planned_jobs("--profile", "profiles/embedded"):
        if verb in LOCKS and verb not in specs:
            specs[verb] = spec
    for spec in specs.values():
        for key in ("init", "model", "v1"):
            if spec.get(key):
                (where / spec[key]).mkdir(parents=True, exist_ok=True)
                (where / spec[key] / "config.json").write_text("{}")
        if spec.get("data"):
            (where / spec["data"]).mkdir(parents=True, exist_ok=True)
            (where / spec["data"] / "dataset_info.json").write_text("{}")
    manifests = {}  # an evaluation's (each domain's) or property log's task manifest, as many tasks as
    for verb, spec in specs.items():  # the jobs reading it play (which jobs come first varies by plan)
        for rollout in spec["domains"] if verb == "eval" else [spec] if verb == "properties" else []:
            manifests[rollout["tasks"]] = (rollout["domain"], max(rollout["episodes"], manifests.get(rollout["tasks"], ("", 0))[1]))
    for tasks, (domain, episodes) in manifests.items():
        (where / tasks).parent.mkdir(parents=True, exist_ok=True)
        (where / tasks).write_text(json.dumps({"domain": domain, "split": "eval", "seeds": list(range(episodes))}))
    return where, specs


@pytest.mark.parametrize("verb", sorted(LOCKS))
def test_a_second_trainer_or_writer_is_refused_before_its_heavy_imports(writer_specs, verb):
    """The SFT trainer once took its lock after loading the tokenizer and every example (16.7 s)."""
    where, specs = writer_specs
    spec = specs[verb]
    output, module, lock = LOCKS[verb]
    with lock_held_elsewhere(module, lock, where / output(spec)) as holder:
        proc = subprocess.run([sys.executable, "-c", REFUSED_BY.format(heavy=HEAVY), *verb.split(), "--job",
                               json.dumps(spec)], cwd=where, capture_output=True, text=True, timeout=120,
                              env={"PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"]})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 2 and f"is in use by pid {holder.pid} on host" in lines[0], lines
    # refused before torch, transformers, LlamaFactory, verl: what makes it quick, asserted exactly (the
    # seconds it prints are a timing, not asserted: a loaded 2-core machine took 2.1-2.4 s, 2026-12-03)
    assert lines[1].endswith("loaded: []"), lines


# ---- 14. a job's log keeps every attempt ------------------------------------------------------------
ORPHAN = """import pathlib, sys, time
from gentax import io, joblog
log, out, go = sys.argv[1:]
joblog.attach(log, "gentax sft train (the orphan of a killed Snakemake)")
with io.output_lock(out, "SFT output"):
    print("training step 1", flush=True)
    while not pathlib.Path(go).exists():
        time.sleep(0.05)
    print("training step 2; committed the model", flush=True)
"""


def test_an_orphans_log_and_a_refused_retrys_line_both_survive(writer_specs, tmp_path):
    """Snakemake SIGKILLed while LlamaFactory trains V2, then --unlock and a rerun: the rerun's
    refused attempt once replaced the log (a new inode) with its one line, and the orphan's whole
    training log, written into the removed file, was gone."""
    from gentax import joblog

    where, specs = writer_specs
    spec = specs["sft train"]
    log, go = tmp_path / "logs" / "init" / "v2.log", tmp_path / "go"
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"]}
    orphan = subprocess.Popen([sys.executable, "-c", ORPHAN, str(log), str(where / spec["out"]), str(go)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not (log.is_file() and "training step 1" in log.read_text()):
            assert time.monotonic() < deadline and orphan.poll() is None, "the orphan did not start"
            time.sleep(0.05)
        log.unlink()  # what Snakemake does to a job's declared log before the rerun's attempt
        retry = subprocess.run([sys.executable, "-m", "gentax", "sft", "train", "--job", json.dumps(spec), "--log",
                                str(log)], cwd=where, env=env, capture_output=True, text=True, timeout=120)
        assert retry.returncode == 2 and retry.stderr == "" and retry.stdout == ""  # all of it went to the log
        go.touch()
        assert orphan.wait(timeout=60) == 0
    finally:
        if orphan.poll() is None:
            orphan.kill()
    everything = log.read_text().splitlines()
    # each attempt ends with what it used (gentax.joblog.USED), the refused retry's first
    used = [line for line in everything if line.startswith(joblog.USED)]
    assert [line.split(":")[0] for line in used] == [f"{joblog.USED}2", f"{joblog.USED}1"], used
    assert joblog.usage(log)["attempt"] == 1 and joblog.usage(log)["wall_s"] > 0  # the orphan waited
    lines = [line for line in everything if not line.startswith(joblog.USED)]
    assert lines[0].startswith(f"{joblog.HEADER}1: host {socket.gethostname()}, pid {orphan.pid}, ")
    assert lines[0].endswith(" UTC: gentax sft train (the orphan of a killed Snakemake)")
    assert lines[1] == "training step 1"
    assert lines[2].startswith(f"{joblog.HEADER}2: host {socket.gethostname()}, pid {retry_pid(lines[2])}, ")
    assert lines[2].endswith(" UTC: gentax sft train")
    assert lines[3].startswith("gentax: error: SFT output ") and f"is in use by pid {orphan.pid}" in lines[3]
    assert lines[4:] == ["training step 2; committed the model"]
    assert os.stat(log).st_ino == os.stat(joblog.history(log)).st_ino  # one file, two names


def retry_pid(header: str) -> int:
    return int(re.search(r"pid (\d+),", header).group(1))


def test_snakemake_keeps_a_jobs_log_across_its_attempts(tmp_path):
    """Snakemake removes a job's declared log before each attempt; the log still holds both runs of a
    job (a forced rerun here), each under its header, and `snakemake -n -p` shows one command."""
    results = tmp_path / "results"
    target = results / "tasks" / "sokoban.json"
    snakemake = [sys.executable, "-m", "snakemake", str(target), "--cores", "1", "--config", f"results={results}"]
    plan = subprocess.run([*snakemake, "-n", "-p", "--forcerun", "tasks"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    commands = [line for line in (plan.stdout + plan.stderr).splitlines() if line.startswith("Shell command: ")]
    assert len(commands) == 1 and commands[0].startswith("Shell command: gentax tasks --job '"), plan.stderr[-3000:]
    assert commands[0].endswith(f" --log {results}/logs/tasks/sokoban.log"), commands
    for attempt in (1, 2):
        proc = subprocess.run([*snakemake, "--forcerun", "tasks"], cwd=ROOT, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    text = (results / "logs" / "tasks" / "sokoban.log").read_text()
    headers = [line for line in text.splitlines() if line.startswith("==== gentax attempt ")]
    assert [h.split(":")[0] for h in headers] == ["==== gentax attempt 1", "==== gentax attempt 2"], text
    assert all(h.endswith(" UTC: gentax tasks") for h in headers), headers
    assert text.count("sokoban: 16 eval tasks, fingerprint ") == 2, text


def test_the_log_option_is_read_in_both_spellings():
    """``--log FILE`` and ``--log=FILE`` (argparse takes both): the log is attached before the parser."""
    from gentax.joblog import option

    assert option(["eval", "--job", "{}", "--log", "a.log"]) == "a.log"
    assert option(["eval", "--job", "{}", "--log=b.log"]) == "b.log"
    assert option(["eval", "--job", "{}"]) is None
