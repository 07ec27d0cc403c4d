"""One RL step and one SFT step of the paper model's shape on one GPU: seconds and peak memory per phase.

    python benchmarks/paper_shape/measure.py OUT_DIR --tokenizer DIR [--work DIR] [--phases rl:4,sft:4,sft:8,rl:8]

Runs on the GPU machine (benchmarks/paper_shape/device.sh sets up the carried bundle). Each phase
``KIND:LAYERS`` builds the stand-in model (benchmarks/paper_shape/model.py: Llama-3.1-8B's shape at
LAYERS decoder layers, random bf16 weights, the embedded tokenizer), then:

- ``rl``: ``gentax train rl --engine verl`` on Sokoban, steps 0:2 (the second step is the measured
  one; both are recorded), with the paper preset's RL settings (config/config.yaml's ``rl:`` block over
  gentax/train/rl_defaults.yaml) except what one GPU forces: ``RL_ONE_GPU`` below, each with its reason,
  and the run spec's (``run_spec``) 3-turn episodes (``EPISODE_TURNS``).
  The trainer's phase trace (gentax.train.verl_agent.traced_timer) gives each phase's interval and
  the actor worker's torch peak;
- ``sft``: ``gentax sft train`` (LlamaFactory) with the paper's V2 SFT section and its ZeRO-3 JSON
  (``SFT_ONE_GPU``), on synthetic examples of the preset's full length (``max_prompt_tokens +
  max_new_tokens`` tokens, the length the memory check assumes); torch's peak comes from the HF
  Trainer's memory metrics (``skip_memory_metrics: false``).

A sampler thread reads the GPU's used memory (NVML, what nvidia-smi shows) every 0.1 s; a phase's
nvidia-smi peak is the largest sample inside its interval. Everything goes to OUT_DIR as it happens
(``records.jsonl``: one line per phase run; ``<phase>.log``; ``<phase>.trace.jsonl``;
``gpu_samples.csv``), so a call that runs out of time still returns what finished. A phase that
fails is recorded with its exit status and the run goes on to the next.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO)]  # model.py beside this file; gentax from the checkout
import model as shape_model  # noqa: E402  (benchmarks/paper_shape/model.py)

#: what one GPU forces on the paper preset's RL settings (the rest is config/config.yaml's as it is)
RL_ONE_GPU = {
    "tasks_per_step": 2,          # 2 tasks x 8 rollouts = 16 episodes (the preset: 16 x 8)
    "save_every": 2,              # the checkpoint of step 2 is the save measured
    "verl": {
        "n_gpus_per_node": 1,     # one GPU: FSDP over one rank (no sharding)
        "rollout_tp": 1,
        "attn_implementation": "sdpa",   # flash-attn has no wheel for the GPU machine's torch: no remove-padding
        "agent_workers": 2,
        # the preset's vLLM share in GiB (0.5 of an 80 GiB GPU = 40 GiB) as a share of this GPU
        "gpu_memory_utilization": None,  # filled in from the GPU's size (rl_config)
    },
}
PRESET_VLLM_GIB = 0.5 * 80
#: what one GPU forces on the paper's V2 SFT section
SFT_ONE_GPU = {
    "steps": 2,                   # the second optimizer step is the measured one
    "extra": {"deepspeed": str(REPO / "config" / "deepspeed" / "zero3.json"),  # gentax hands it over only
              "skip_memory_metrics": False},                                   # above one device
}
GIB = 1024**3


#: the measured run's Sokoban step limit (its run spec's): 3 turns an episode, 48 step samples, enough to
#: fill the update's micro-batches
EPISODE_TURNS = 3


def rl_config(gpu_gib: float) -> dict:
    cfg = json.loads(json.dumps(RL_ONE_GPU))
    cfg["verl"]["gpu_memory_utilization"] = round(PRESET_VLLM_GIB / gpu_gib, 4)
    return {"rl": cfg}


def run_spec(model_dir: Path) -> dict:
    """The measured run: Sokoban, seed 0, steps 0:2, ``EPISODE_TURNS``-turn episodes (gentax.runspec)."""
    from gentax.runspec import from_defaults

    return from_defaults(init=str(model_dir), domain="sokoban", variant="default", seed=0, steps=2,
                         domains={"sokoban": {"max_steps": EPISODE_TURNS, "options": {}}}).to_dict()


class Sampler(threading.Thread):
    """GPU 0's used memory (bytes, NVML) every ``every`` seconds, appended to ``path`` as ``time,used``."""

    def __init__(self, path: Path, every: float = 0.1):
        super().__init__(daemon=True)
        import pynvml

        pynvml.nvmlInit()
        self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        self.path, self.every, self.samples = path, every, []
        self.total = pynvml.nvmlDeviceGetMemoryInfo(self.handle).total

    def used(self) -> int:
        return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used

    def run(self) -> None:
        with self.path.open("a") as fh:
            while True:
                row = (time.time(), self.used())
                self.samples.append(row)
                fh.write(f"{row[0]:.2f},{row[1]}\n")
                fh.flush()
                time.sleep(self.every)

    def peak(self, start: float, end: float) -> float | None:
        inside = [used for t, used in list(self.samples) if start <= t <= end]
        return max(inside) / GIB if inside else None


def run_logged(argv: list[str], log: Path, env: dict, timeout: float) -> int:
    with log.open("w") as fh:
        fh.write("$ " + " ".join(argv) + "\n")
        fh.flush()
        try:
            return subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=REPO, timeout=timeout,
                                  start_new_session=True).returncode
        except subprocess.TimeoutExpired:
            return 124


def leftovers() -> list[str]:
    """Processes a finished phase left behind (vLLM engines, Ray), which are then ended so that the
    next phase starts from the same GPU memory; the record lists them. Matched by process name, never by
    command line (a shell whose command line names them is not one of them)."""
    import psutil

    ours = {p.pid for p in psutil.Process().parents()} | {os.getpid()}
    found = [p for p in psutil.process_iter(["name"]) if p.pid not in ours
             and (p.info["name"] or "").startswith(("VLLM::", "ray::", "raylet", "gcs_server"))]
    for proc in found:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    if found:
        time.sleep(3)
    return [f"{p.pid} {p.info['name']}" for p in found]


def sft_examples(tokenizer_dir: Path, prompt_tokens: int, response_tokens: int, count: int) -> list[dict]:
    """``count`` examples whose chat-templated prompt has ``prompt_tokens`` tokens and whose response has
    ``response_tokens`` (" a" and " b" are one token each in the stand-in tokenizer)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    empty = tok.apply_chat_template([{"role": "user", "content": ""}], add_generation_prompt=True, tokenize=False)
    overhead = len(tok(empty, add_special_tokens=False)["input_ids"])
    prompt = "a" + " a" * (prompt_tokens - overhead - 1)
    response = "b" + " b" * (response_tokens - 2)  # + the end-of-turn token
    return [{"conversations": [{"from": "human", "value": prompt}, {"from": "gpt", "value": response}]}] * count


def write_sft_data(data_dir: Path, examples: list[dict]) -> None:
    from gentax.train.sft_data import DATA_FILE, DATASET_INFO

    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "dataset_info.json").write_text(json.dumps(DATASET_INFO))
    (data_dir / DATA_FILE).write_text(json.dumps(examples))


def phase_peaks(trace: Path, sampler: Sampler) -> list[dict]:
    rows = [json.loads(line) for line in trace.read_text().splitlines()] if trace.is_file() else []
    for row in rows:
        if "end" in row:
            row["seconds"] = row["end"] - row["start"]
            row["nvidia_smi_peak_gib"] = sampler.peak(row["start"], row["end"])
    return rows


def measure_rl(layers: int, model_dir: Path, work: Path, out: Path, sampler: Sampler, env: dict, timeout: float) -> dict:
    name = f"rl_L{layers}"
    config = work / f"{name}.yaml"
    config.write_text(yaml.safe_dump(rl_config(sampler.total / GIB)))
    run = work / f"{name}.run_spec.json"
    run.write_text(json.dumps(run_spec(model_dir)))
    run_dir, trace = work / name, out / f"{name}.trace.jsonl"
    shutil.rmtree(run_dir, ignore_errors=True)
    argv = [sys.executable, "-m", "gentax", "train", "rl", "--engine", "verl", "--config", str(config),
            "--init", str(model_dir), "--run-spec", str(run), "--steps", "0:2", "--out", str(run_dir), "--no-progress"]
    start = time.time()
    code = run_logged(argv, out / f"{name}.log", {**env, "GENTAX_PHASE_TRACE": str(trace)}, timeout)
    end = time.time()
    record = {"phase": name, "kind": "rl", "layers": layers, "rc": code, "start": start, "end": end,
              "config": {**rl_config(sampler.total / GIB), "run_spec": run_spec(model_dir)},
              "phases": phase_peaks(trace, sampler),
              "nvidia_smi_peak_gib": sampler.peak(start, end)}
    fit = [row for row in record["phases"] if row["phase"] == "fit"]
    gens = [row for row in record["phases"] if row["phase"] == "gen"]
    if fit:
        record["startup_to_fit_s"] = fit[0]["start"] - start
    if gens:
        record["startup_to_first_step_s"] = gens[0]["start"] - start
    metrics = run_dir / "metrics.csv"
    if metrics.is_file():
        shutil.copy2(metrics, out / f"{name}.metrics.csv")
    shutil.rmtree(run_dir, ignore_errors=True)  # its FSDP checkpoint is ~12 bytes a parameter: free the disk
    return record


def measure_sft(layers: int, model_dir: Path, work: Path, out: Path, sampler: Sampler, env: dict, timeout: float,
                tokenizer_dir: Path) -> dict:
    from gentax.study.config import study_config
    from gentax.study.plan import study_rl
    from gentax.train.config import load_rl_config

    name = f"sft_L{layers}"
    rl = load_rl_config(study_rl(study_config("paper")))
    data = work / "sft_data"
    if not data.is_dir():
        write_sft_data(data, sft_examples(tokenizer_dir, rl.max_prompt_tokens, rl.max_new_tokens, 64))
    config = work / f"{name}.yaml"
    config.write_text(yaml.safe_dump({"sft": SFT_ONE_GPU}))
    target = work / name
    shutil.rmtree(target, ignore_errors=True)
    argv = [sys.executable, "-m", "gentax", "sft", "train", "--config", str(config), "--preset", "v2",
            "--data", str(data), "--init", str(model_dir), "--out", str(target)]
    start = time.time()
    code = run_logged(argv, out / f"{name}.log", {**env, "FORCE_TORCHRUN": "1"}, timeout)
    end = time.time()
    record = {"phase": name, "kind": "sft", "layers": layers, "rc": code, "start": start, "end": end,
              "config": {"sft": SFT_ONE_GPU}, "nvidia_smi_peak_gib": sampler.peak(start, end),
              "tokens_per_example": rl.max_prompt_tokens + rl.max_new_tokens}
    for file in ("train_results.json", "all_results.json", "trainer_log.jsonl"):
        if (target / file).is_file():
            shutil.copy2(target / file, out / f"{name}.{file}")
            if file.endswith(".json"):
                record[file] = json.loads((target / file).read_text())
    shutil.rmtree(target, ignore_errors=True)
    return record


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--tokenizer", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/paper_shape"))
    ap.add_argument("--phases", default="rl:4,sft:4,sft:8,rl:8")
    ap.add_argument("--timeout", type=float, default=900, help="seconds a phase may run")
    args = ap.parse_args()
    out, work = args.out.resolve(), args.work.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    sampler = Sampler(out / "gpu_samples.csv")
    sampler.start()
    import torch

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    machine = {"gpu": torch.cuda.get_device_name(0), "gpu_total_gib": sampler.total / GIB,
               "torch": torch.__version__, "host": platform.node(), "cpus": os.cpu_count()}
    with (out / "records.jsonl").open("a") as fh:
        fh.write(json.dumps({"phase": "machine", **machine, "time": time.time()}) + "\n")
    for item in args.phases.split(","):
        kind, layers = item.split(":")
        layers = int(layers)
        model_dir = work / f"model_L{layers}"
        built = time.time()
        if not (model_dir / "config.json").is_file():
            shape_model.build(model_dir, tokenizer_dir=args.tokenizer, layers=layers, device="cuda")
        built = time.time() - built
        torch.cuda.empty_cache()
        time.sleep(1)
        baseline = sampler.used() / GIB
        if kind == "rl":
            record = measure_rl(layers, model_dir, work, out, sampler, env, args.timeout)
        else:
            record = measure_sft(layers, model_dir, work, out, sampler, env, args.timeout, args.tokenizer)
        time.sleep(2)
        record.update(baseline_gib=baseline, after_gib=sampler.used() / GIB, model_build_s=built,
                      left_behind=leftovers())
        with (out / "records.jsonl").open("a") as fh:
            fh.write(json.dumps(record) + "\n")
        print(f"{record['phase']}: rc {record['rc']}, {record['end'] - record['start']:.0f} s, "
              f"nvidia-smi peak {record['nvidia_smi_peak_gib']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
