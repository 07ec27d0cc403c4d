"""The verl engine end to end on 1-2 GPUs, with gentax's ``hf`` rollout backend (no vLLM needed).

Two halves (docs/training.md §5.3):

    # on a CPU machine with the project's venv: the carried bundle (wheels, demonstrations, tokenizer)
    python benchmarks/verl_gpu_smoke/smoke.py prepare
    # on the GPU machine (CUDA torch + transformers there; nothing downloaded):
    bash benchmarks/verl_gpu_smoke/run.sh OUT_DIR [PHASE ...]

``run.sh`` installs the bundle and calls ``smoke.py gpu --out OUT_DIR --phases ...``. Phases:

- ``warm-start``: a small Llama with SmolLM2's tokenizer (smoke.yaml ``smoke.model``), fine-tuned on
  the GPU on the expert demonstrations made on CPU, so the policy sometimes succeeds (a random model
  is invalid at every step: only the penalty would move it).
- ``verl1-sokoban``: ``gentax train rl --engine verl`` on 1 GPU, steps 0:3; the run is killed with
  SIGKILL (its whole process group, every process that inherited its attempt's marker and any Ray or
  vLLM process by name, as a preempted job's cgroup: ``kill_everything``) once step 2's checkpoint is
  exported, then rerun with the same command: no process may be left (``alive_after_kill``), and it
  must resume at step 3 and train no step twice.
- ``verl1-kills`` (not in the default phases): steps 0:4 on Sokoban, stopped mid-step three times
  (after step 1, 2 and 3 are saved) by ``KILLS`` in turn — SIGKILL to the trainer, SIGTERM to the
  trainer, SIGINT to its process group — and started again each time with the same command; nothing
  in the smoke ends a process: after each kill it only watches (30 s) which of the trainer's
  processes are left and whether nvidia-smi's memory is back to its value before the first attempt.
  Checks: every step trained once, each rerun resumed after the last checkpoint, nothing left and the
  memory back within 30 s of each kill. ``GENTAX_SMOKE_KILLS`` (default sigkill,sigterm,sigint): the
  kills, in order (steps 0:kills+1); ``GENTAX_SMOKE_KILLS_UNTIL`` (s, default 300): a kill whose
  attempt would start later is left out, so the last attempt still ends inside one device call.
- ``verl1-webshop``: the same on WebShop, 3 steps, no kill.
- ``verl2-sokoban``: 2 GPUs (2 FSDP ranks, 2 ``hf`` replicas), 3 steps; its checkpoints are merged
  from 2-rank shards; then ``gentax eval`` of the merged step-3 model with the ``hf`` generator.
- ``local1-sokoban``: the local engine on the same GPU, same model, config and steps (CUDA, bf16
  autocast), for the cost ratio verl / local.
- ``verl1-mixture`` (optional, not in the default phases): training on the mixture
  ``webshop+sokoban`` (``MIXTURE``) on 1 GPU, 3 steps: each step's 2 tasks are one of each domain
  (``runs.step_task_domains``); it also checks that ``id_success/<domain>`` is logged for both
  domains at every step.

Each training phase checks, per step: samples > 0, reward std > 0 (reported, a toy policy may not
reach it on WebShop), loss / KL / entropy / grad norm finite, KL > 0 after the first update; a
checkpoint at every save; and writes ``OUT/<phase>.metrics.csv`` plus one line in
``OUT/smoke.json`` (checks, per-step time split, peak GPU memory from nvidia-smi, the hf servers'
own tokens/s). Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONFIG = HERE / "smoke.yaml"
MIXTURE = "webshop+sokoban"  # phase verl1-mixture (or local1-mixture): the smoke's two domains, equal weights
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
                   "chat_template.jinja")


def load_config() -> dict:
    import yaml

    return yaml.safe_load(CONFIG.read_text())


def write_run_spec(run_dir: Path, policy: Path, domain: str, end: int) -> Path:
    """The run a smoke command trains, as a ``--run-spec`` file beside ``run_dir``: ``domain`` (or a
    mixture), seed 0, ``end`` steps, each domain's step limit and knobs smoke.yaml's ``domains``."""
    sys.path.insert(0, str(REPO))
    from gentax.domains.spec import mixture_weights
    from gentax.runspec import from_defaults

    settings = load_config()["domains"]
    run = from_defaults(init=str(policy), domain=domain, variant="default", seed=0, steps=end,
                        domains={d: settings[d] for d in mixture_weights(domain)})
    path = run_dir.parent / f"{run_dir.name}.run_spec.json"
    path.write_text(run.to_json())
    return path


# ---- CPU side ---------------------------------------------------------------------------------
def prepare(bundle: Path) -> None:
    """Wheels (scripts/gpu_bundle.sh), expert demonstrations and the tokenizer, under ``bundle``."""
    from gentax.rollout.embedded_model import embedded_model_path

    bundle.mkdir(parents=True, exist_ok=True)
    if not (bundle / "bundle.tar.xz").is_file():
        subprocess.run(["bash", str(REPO / "scripts" / "gpu_bundle.sh"), str(bundle)], check=True)
    demos = bundle / "demos"
    if not (demos / "train.json").is_file():
        subprocess.run([sys.executable, "-m", "gentax", "sft", "build-data", "--preset", "embedded-base",
                        "--config", str(CONFIG), "--out", str(demos), "--quiet"], check=True)
    tokenizer = bundle / "tokenizer"
    tokenizer.mkdir(exist_ok=True)
    source = embedded_model_path()
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, tokenizer / name)
    print(f"bundle ready in {bundle}: {sum(f.stat().st_size for f in bundle.rglob('*') if f.is_file()) >> 20} MiB")


# ---- GPU side ---------------------------------------------------------------------------------
def warm_start(bundle: Path, out: Path, cfg: dict) -> dict:
    """A small Llama with SmolLM2's tokenizer, fine-tuned on the expert pairs (loss on the answer)."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    from gentax.rollout.generators import chat_prompt_ids
    from gentax.train.sft_data import read_examples

    spec, train = cfg["smoke"]["model"], cfg["smoke"]["warm_start"]
    device = "cuda" if torch.cuda.is_available() else "cpu"  # CPU: only to try the script out
    tokenizer = AutoTokenizer.from_pretrained(bundle / "tokenizer")
    generation = GenerationConfig.from_pretrained(bundle / "tokenizer")
    torch.manual_seed(int(train["seed"]))
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), max_position_embeddings=4096, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=generation.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, **spec)).to(device)
    examples = []
    for example in read_examples(bundle / "demos"):  # sharegpt: human (the step prompt), gpt (the answer)
        turns = example["conversations"]
        prompt = chat_prompt_ids(tokenizer, [{"role": "user", "content": turns[0]["value"]}])
        answer = tokenizer(turns[-1]["value"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        examples.append((prompt, answer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(train["lr"]), weight_decay=0.0)
    rng = torch.Generator().manual_seed(int(train["seed"]))
    start, losses = time.perf_counter(), []
    for _ in range(int(os.environ.get("GENTAX_SMOKE_WARM_STEPS", train["steps"]))):
        batch = [examples[i] for i in torch.randint(len(examples), (int(train["batch_size"]),), generator=rng)]
        width = max(len(p) + len(a) for p, a in batch)
        ids = torch.full((len(batch), width), tokenizer.pad_token_id or 0)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (p, a) in enumerate(batch):
            ids[row, : len(p) + len(a)] = torch.tensor(p + a)
            labels[row, len(p): len(p) + len(a)] = torch.tensor(a)
            mask[row, : len(p) + len(a)] = 1
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    generation.save_pretrained(out)
    return {"examples": len(examples), "steps": len(losses), "loss_first": losses[0], "loss_last": losses[-1],
            "seconds": round(time.perf_counter() - start, 1),
            "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1)}


class GPUMemoryPeak:
    """The peak of nvidia-smi's memory.used per GPU while a phase runs (every process on the GPU:
    the FSDP workers and the hf servers)."""

    def __init__(self):
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self._stop.is_set():
            if not shutil.which("nvidia-smi"):
                return
            done = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                                  capture_output=True, text=True)
            for line in done.stdout.splitlines():
                index, used = (int(x) for x in line.split(","))
                self.peak[index] = max(self.peak.get(index, 0), used)
            self._stop.wait(0.5)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


#: the environment variable that marks every process of one trainer attempt (``gentax.train.processes``)
ATTEMPT_ENV = "GENTAX_SMOKE_ATTEMPT"
#: process titles of what a trainer leaves outside its process group: Ray, and vLLM's engine processes
LEFT_BEHIND = ("raylet", "gcs_server", "ray::", "ray/dashboard", "default_worker.py", "VLLM::EngineCore", "VLLM::Worker")


def kill_everything(process: subprocess.Popen) -> list[str]:
    """SIGKILL the training's process group, every process that inherited its attempt's marker
    (Ray's raylet and workers and vLLM's engine processes leave the group) and any Ray or vLLM
    process left by name: what a preempted job's cgroup gets. Returns what is still alive after
    (the record's check: empty)."""
    from gentax.train import processes

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    marker = getattr(process, "gentax_attempt", None)
    if marker:
        processes.end_marked(ATTEMPT_ENV, marker)
    processes.kill(left_behind())
    return [f"pid {pid} ({processes.process_name(pid)})" for pid in left_behind()]


def left_behind() -> list[int]:
    """Pids of this user's processes whose title names Ray or vLLM (``LEFT_BEHIND``)."""
    from gentax.train import processes

    return [pid for pid in processes.descendants(1)
            if pid != os.getpid() and any(name in _cmdline(pid) for name in LEFT_BEHIND)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def train(policy: Path, run_dir: Path, *, engine: str, domain: str, steps: str, gpus: int, log_path: Path,
          kill_after: int | None = None) -> dict:
    """One ``gentax train rl`` command (twice when ``kill_after``): return code, wall time, what it logged."""
    config = run_dir.parent / f"{run_dir.name}.rl.yaml"
    import yaml

    rl = load_config()["rl"]
    rl["verl"]["n_gpus_per_node"] = gpus
    config.write_text(yaml.safe_dump({"rl": rl}))
    run_spec = write_run_spec(run_dir, policy, domain, int(steps.split(":")[1]))
    command = [sys.executable, "-m", "gentax", "train", "rl", "--engine", engine,
               "--config", str(config), "--init", str(policy), "--run-spec", str(run_spec),
               "--steps", steps, "--out", str(run_dir), "--no-progress"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(gpus))}
    result = {"command": " ".join(command[1:]), "runs": []}
    for attempt in range(2 if kill_after else 1):
        start = time.perf_counter()
        with open(log_path, "a") as log:
            log.write(f"\n===== attempt {attempt + 1}: {' '.join(command)}\n")
            log.flush()
            marker = uuid.uuid4().hex
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**env, ATTEMPT_ENV: marker},
                                       start_new_session=True)
            process.gentax_attempt = marker
            _RUNNING[:] = [process]
            killed, left = False, []
            while process.poll() is None:
                time.sleep(1)
                if attempt == 0 and kill_after and (run_dir / "checkpoints" / f"step_{kill_after}" / "config.json").is_file():
                    left = kill_everything(process)
                    killed = True
            rows = read_metrics(run_dir)
            result["runs"].append({"returncode": process.returncode, "killed": killed, "alive_after_kill": left,
                                   "seconds": round(time.perf_counter() - start, 1),
                                   "steps_in_metrics": [int(r["step"]) for r in rows]})
    return result


#: the kills of phase ``verl1-kills``: each stops the trainer mid-step, the next attempt resumes
KILLS = {"sigkill": "SIGKILL to the trainer (a crash, the OOM killer)",
         "sigterm": "SIGTERM to the trainer (SLURM's preemption, scancel)",
         "sigint": "SIGINT to the trainer's process group (Ctrl-C to a job in the foreground)"}
KILL_WATCH_S = 30.0


def gpu_memory() -> tuple[float | None, dict[int, float]]:
    """(MiB in use on GPU 0, {pid: MiB} of its compute processes), from nvidia-smi."""
    if not shutil.which("nvidia-smi"):
        return None, {}
    used = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True).stdout.split()
    per_pid = {}
    for row in subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True).stdout.strip().splitlines():
        try:
            pid, mib = row.split(",")
            per_pid[int(pid)] = float(mib)
        except ValueError:
            continue
    return (float(used[0]) if used else None), per_pid


def trainer_processes(trainer: int) -> tuple[str | None, list[int]]:
    """(the trainer's token, every process of it: itself, its descendants, whatever carries the token;
    ``gentax.train.processes``: Ray's raylet and workers, the rollout servers, vLLM's engines)."""
    from gentax.train import processes

    below = processes.descendants(trainer)
    token = None
    for pid in below:
        for item in (processes._read(pid, "environ") or b"").split(b"\0"):
            if item.startswith(processes.OWNER_ENV.encode() + b"="):
                token = item.split(b"=", 1)[1].decode()
        if token:
            break
    marked = processes.processes_marked(processes.OWNER_ENV, token) if token else []
    return token, sorted({trainer, *below, *marked})


def kill_and_watch(process: subprocess.Popen, kind: str, baseline_mib: float | None) -> dict:
    """Send ``kind`` (KILLS) and watch for KILL_WATCH_S: which of the trainer's processes are left and
    the GPU memory in use, every 0.5 s. Nothing here ends a process: what ends them is the project's
    own code (``processes.owning``: its finally on SIGTERM / SIGINT, its watcher after a SIGKILL)."""
    from gentax.train import processes

    token, pids = trainer_processes(process.pid)
    used, per_pid = gpu_memory()
    record = {"kind": kind, "what": KILLS[kind], "gpu_used_mib_before_job": baseline_mib, "gpu_used_mib_at_kill": used,
              "processes_at_kill": [{"pid": pid, "title": processes.process_name(pid), "gpu_mib": per_pid.get(pid, 0.0)}
                                    for pid in pids], "timeline": []}
    start = time.perf_counter()
    if kind == "sigint":
        os.killpg(process.pid, signal.SIGINT)
    else:
        os.kill(process.pid, signal.SIGKILL if kind == "sigkill" else signal.SIGTERM)
    while time.perf_counter() - start <= KILL_WATCH_S:
        # the trainer is this process's child: poll() reads its exit status (_alive would reap it unread)
        left = [pid for pid in pids if (process.poll() is None if pid == process.pid else processes._alive(pid))]
        if token:
            left = sorted(set(left) | set(processes.processes_marked(processes.OWNER_ENV, token)))
        used, per_pid = gpu_memory()
        elapsed = round(time.perf_counter() - start, 1)
        record["timeline"].append({"t": elapsed, "left": [f"{pid} {processes.process_name(pid)}" for pid in left],
                                   "gpu_used_mib": used})
        if record.get("all_gone_after_s") is None and not left:
            record["all_gone_after_s"] = elapsed
        if (record.get("memory_back_after_s") is None and used is not None and baseline_mib is not None
                and used <= baseline_mib + 256):
            record["memory_back_after_s"] = elapsed
        if record.get("all_gone_after_s") is not None and record.get("memory_back_after_s") is not None:
            break
        time.sleep(0.5)
    process.wait()
    record["returncode"] = process.returncode
    record["left_at_end"] = record["timeline"][-1]["left"] if record["timeline"] else []
    record["gpu_used_mib_at_end"] = record["timeline"][-1]["gpu_used_mib"] if record["timeline"] else None
    return record


def kills(policy: Path, run_dir: Path, *, kinds: list[str], end: int, log_path: Path, give_up_after_s: float,
          engine: str = "verl") -> dict:
    """Phase ``verl1-kills``: ``gentax train rl --engine verl --steps 0:END``, stopped by each kill of
    ``kinds`` in turn mid-step (4 s after the next checkpoint is exported), each time started again
    with the same command, until an attempt trains to END. A kill whose attempt would start after
    ``give_up_after_s`` is left out (recorded), so that the last attempt still fits the call."""
    import yaml

    rl = load_config()["rl"]
    config = run_dir.parent / f"{run_dir.name}.rl.yaml"
    config.write_text(yaml.safe_dump({"rl": rl}))
    run_spec = write_run_spec(run_dir, policy, "sokoban", end)
    command = [sys.executable, "-m", "gentax", "train", "rl", "--engine", engine,
               "--config", str(config), "--init", str(policy), "--run-spec", str(run_spec),
               "--steps", f"0:{end}", "--out", str(run_dir), "--no-progress"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    baseline, _ = gpu_memory()
    phase_start = time.perf_counter()
    result = {"command": " ".join(command[1:]), "gpu_used_mib_before": baseline, "attempts": [], "skipped": []}
    plan = list(kinds) + [None]
    while plan:
        kind = plan.pop(0)
        if kind and time.perf_counter() - phase_start > give_up_after_s:
            result["skipped"].append(kind)
            continue
        done_before = {int(r["step"]) for r in read_metrics(run_dir)}
        start = time.perf_counter()
        with open(log_path, "a") as log:
            log.write(f"\n===== attempt {len(result['attempts']) + 1} ({kind or 'to the end'}): {' '.join(command)}\n")
            log.flush()
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            _RUNNING[:] = [process]
            target = max(done_before, default=0) + 1  # kill mid-step target + 1, once step target is saved
            first_step_s, record = None, None
            while process.poll() is None:
                time.sleep(0.5)
                steps = {int(r["step"]) for r in read_metrics(run_dir)}
                if first_step_s is None and steps - done_before:
                    first_step_s = round(time.perf_counter() - start, 1)
                saved = run_dir / "checkpoints" / f"step_{target}" / "config.json"
                if kind and saved.is_file():
                    time.sleep(4.0)  # into the next step's rollout
                    record = kill_and_watch(process, kind, baseline)
                    break
        trained = sorted({int(r["step"]) for r in read_metrics(run_dir)} - done_before)
        result["attempts"].append({"kind": kind, "returncode": process.returncode, "seconds": round(time.perf_counter() - start, 1),
                                   "first_step_after_s": first_step_s, "resumed_after_step": max(done_before, default=0),
                                   "trained_steps": trained, "kill": record})
        log_path.with_suffix(".partial.json").write_text(json.dumps(result, indent=1, default=str))  # a call cut short
    rows = read_metrics(run_dir)
    steps = [int(r["step"]) for r in rows]
    killed = [a["kill"] for a in result["attempts"] if a["kill"]]
    result["checks"] = {
        "finished": result["attempts"][-1]["returncode"] == 0,
        "every_step_once": steps == list(range(1, end + 1)),
        "each_rerun_resumed_after_the_last_checkpoint": all(
            a["trained_steps"][:1] == [a["resumed_after_step"] + 1] for a in result["attempts"] if a["trained_steps"]),
        "no_process_left_30_s_after_each_kill": all(k.get("all_gone_after_s") is not None for k in killed),
        "gpu_memory_back_30_s_after_each_kill": all(k.get("memory_back_after_s") is not None for k in killed),
    }
    result["metrics"] = rows
    return result


def read_metrics(run_dir: Path) -> list[dict]:
    import pandas as pd

    path = run_dir / "metrics.csv"
    return pd.read_csv(path).to_dict("records") if path.is_file() else []


def check_training(run_dir: Path, result: dict, *, end: int, kill_after: int | None, log_path: Path,
                   domain: str = "") -> dict:
    """The per-step checks (module doc); ``checks`` maps each to True/False."""
    rows = read_metrics(run_dir)
    steps = [int(r["step"]) for r in rows]
    checks = {
        "finished": result["runs"][-1]["returncode"] == 0,
        "every_step_once": steps == list(range(1, end + 1)),
        "samples_every_step": all(r.get("samples", 0) > 0 for r in rows),
        "finite_losses": all(math.isfinite(float(r.get(k, float("nan"))))
                             for r in rows for k in ("pg_loss", "kl", "entropy", "grad_norm") if k in r),
        "kl_after_first_update": all(float(r.get("kl", 0)) > 0 for r in rows[1:]),
        "checkpoint_every_step": all((run_dir / "checkpoints" / f"step_{s}" / "config.json").is_file()
                                     for s in range(1, end + 1)),
    }
    if "+" in domain:  # a mixture: every member's training success at every step
        members = [part.split("*")[0] for part in domain.split("+")]
        checks["success_of_every_domain_every_step"] = bool(rows) and all(
            math.isfinite(float(r.get(f"id_success/{d}", float("nan")))) for r in rows for d in members)
    rewards_vary = [float(r.get("adv_std", 0)) > 0 and 0 < float(r.get("id_success", 0)) < 1 for r in rows]
    if kill_after:
        first, second = result["runs"]
        checks["killed_after_step"] = first["killed"] and kill_after in first["steps_in_metrics"]
        checks["no_process_left_after_kill"] = first["killed"] and not first["alive_after_kill"]
        log_text = log_path.read_text()
        second_log = log_text[log_text.rindex("===== attempt 2"):]
        trained = sorted({int(s) for s in _verl_logged_steps(second_log)})
        checks["resumed_and_trained_only_the_rest"] = trained == list(range(kill_after + 1, end + 1))
        result["rerun_trained_steps"] = trained
    result["checks"] = checks
    result["success_rate_varies_per_step"] = rewards_vary
    result["metrics"] = rows
    return result


def _verl_logged_steps(text: str) -> list[int]:
    """Steps of verl's console logger lines (``(GentaxTaskRunner pid=..) step:N - key:value ...``)."""
    import re

    return [int(m) for m in re.findall(r"\bstep:(\d+) - ", text)]


def hf_server_stats(folder: Path) -> dict:
    stats = {}
    for path in sorted(folder.glob("hf_server_*.json")):
        s = json.loads(path.read_text())
        stats[path.stem] = {**s, "tokens_per_s": round(s["response_tokens"] / s["generate_s"], 1) if s["generate_s"] else None}
    return stats


_RUNNING: list[subprocess.Popen] = []


def _stop_children(signum, frame):
    """A smoke stopped from outside (timeout, scancel) takes its trainer with it: the trainer runs
    in its own process group, which would otherwise outlive the smoke and write into the next run."""
    for process in _RUNNING:
        if process.poll() is None:
            kill_everything(process)
    sys.exit(128 + signum)


def gpu(out: Path, bundle: Path, phases: list[str]) -> int:
    signal.signal(signal.SIGTERM, _stop_children)
    signal.signal(signal.SIGINT, _stop_children)
    cfg = load_config()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("GENTAX_SMOKE_WORK", "/tmp/gentax_smoke"))
    work.mkdir(parents=True, exist_ok=True)
    policy = work / "policy"
    report_path = out / "smoke.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    if shutil.which("nvidia-smi"):
        report.setdefault("machine", subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                                                     "--format=csv,noheader"], capture_output=True, text=True
                                                    ).stdout.strip().splitlines())
    failed = False
    for phase in phases:
        start = time.perf_counter()
        print(f"== {phase}", flush=True)
        if phase == "warm-start":
            report[phase] = warm_start(bundle, policy, cfg)
        elif phase.startswith(("verl", "local")) and phase != "verl1-kills":
            if not (policy / "config.json").is_file():  # a fresh machine: warm-start first
                report["warm-start"] = warm_start(bundle, policy, cfg)
            engine = "verl" if phase.startswith("verl") else "local"
            gpus, domain = int(phase[len(engine)]), phase.split("-", 1)[1]
            domain = MIXTURE if domain == "mixture" else domain
            kill_after = 2 if phase == "verl1-sokoban" else None
            run_dir, log_path = work / phase, out / f"{phase}.log"
            stats_dir = work / f"{phase}.hf_stats"
            shutil.rmtree(run_dir, ignore_errors=True)
            shutil.rmtree(stats_dir, ignore_errors=True)
            stats_dir.mkdir()
            os.environ["GENTAX_HF_ROLLOUT_STATS"] = str(stats_dir)
            with GPUMemoryPeak() as memory:
                result = train(policy, run_dir, engine=engine, domain=domain, steps="0:3", gpus=gpus,
                               log_path=log_path, kill_after=kill_after)
            result = check_training(run_dir, result, end=3, kill_after=kill_after, log_path=log_path, domain=domain)
            result["gpu_memory_peak_mib"] = memory.peak
            result["hf_servers"] = hf_server_stats(stats_dir)
            if (run_dir / "metrics.csv").is_file():
                shutil.copy2(run_dir / "metrics.csv", out / f"{phase}.metrics.csv")
            if engine == "verl":
                result["fsdp_shards_step_3"] = sorted(p.name for p in (run_dir / "verl").glob("global_step_3/actor/model_world_size_*"))
            report[phase] = result
            failed |= not all(result["checks"].values())
        elif phase == "verl1-kills":
            if not (policy / "config.json").is_file():
                report["warm-start"] = warm_start(bundle, policy, cfg)
            run_dir = work / phase
            shutil.rmtree(run_dir, ignore_errors=True)
            kinds = os.environ.get("GENTAX_SMOKE_KILLS", ",".join(KILLS)).split(",")
            result = kills(policy, run_dir, kinds=kinds, end=len(kinds) + 1, log_path=out / f"{phase}.log",
                           give_up_after_s=float(os.environ.get("GENTAX_SMOKE_KILLS_UNTIL", 300)))
            if (run_dir / "metrics.csv").is_file():
                shutil.copy2(run_dir / "metrics.csv", out / f"{phase}.metrics.csv")
            report[phase] = result
            failed |= not all(result["checks"].values())
        elif phase == "eval":
            merged = work / "verl2-sokoban" / "checkpoints" / "step_3"
            target = work / "eval" / "sokoban.parquet"
            done = subprocess.run([sys.executable, "-m", "gentax", "eval", "--model", str(merged), "--domain", "sokoban",
                                   "--episodes", str(cfg["smoke"]["eval_episodes"]), "--generator", "hf",
                                   "--history-length", "0", "--max-new-tokens", "48",
                                   "--max-steps", str(cfg["domains"]["sokoban"]["max_steps"]),
                                   *[a for k, v in cfg["domains"]["sokoban"]["options"].items()
                                     for a in ("--option", f"{k}={json.dumps(v)}")],
                                   "--out", str(target)], capture_output=True, text=True)
            (out / "eval.log").write_text(done.stdout + done.stderr)
            summary = json.loads(target.with_suffix(".json").read_text()) if target.with_suffix(".json").is_file() else {}
            report[phase] = {"returncode": done.returncode, "model": str(merged), "summary": summary}
            failed |= done.returncode != 0
        else:
            raise SystemExit(f"unknown phase {phase!r}")
        report.setdefault("phase_seconds", {})[phase] = round(time.perf_counter() - start, 1)
        report_path.write_text(json.dumps(report, indent=1, default=str))
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--bundle", type=Path, default=REPO / ".gpu_bundle")
    g = sub.add_parser("gpu")
    g.add_argument("--bundle", type=Path, default=REPO / ".gpu_bundle")
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--phases", nargs="+", default=["warm-start", "verl1-sokoban", "verl1-webshop", "verl2-sokoban",
                                                   "eval", "local1-sokoban"])
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.bundle)
        return 0
    return gpu(args.out, args.bundle, args.phases)


if __name__ == "__main__":
    sys.exit(main())
