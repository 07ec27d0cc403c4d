"""The plan-time memory check (gentax.study.memory) against the paper-shape measurement.

    python benchmarks/paper_shape/compare.py RUN_DIR [--write RECORD_DIR]

RUN_DIR is what benchmarks/paper_shape/device.sh brought back (``out/``: records.jsonl, the phase
traces, the logs). For every measured run the check is evaluated at the same shape (the stand-in's
depth and vocabulary), world size (one GPU), batch, offload and vLLM share, through the workflow's
own config path: config/config.yaml with the run's RL / SFT section laid over it and ``cluster`` set to
the measuring GPU. Per phase: predicted GiB, torch's peak allocated (the trainer's phase trace /
the HF Trainer's memory metrics) and nvidia-smi's peak above the GPU's memory before the run, and
the ratio predicted / torch. Then the per-layer line through the measured depths (``a + b L``,
least squares) at the paper's 32 layers, beside the check's own figure for the same.

--write RECORD_DIR also writes report.txt and record.json there (with the commit and machine
the measurement names).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import model as shape_model  # noqa: E402

#: measured phase -> (the check's job it is compared with (gentax.study.memory.JobMemory.job), its part,
#: the measured figure it is held against). The check's figures are allocations (states + activations),
#: the GPU's context and the allocator's cache being the budget's margin (``cluster.memory_check``), so a
#: phase is held against torch's peak allocated in the process that runs it: the actor worker (RL), the
#: trainer (SFT: the HF Trainer's tracker; one process, nothing else on the GPU). The rollout's vLLM
#: engine is a process of its own, which torch's counter in the actor worker does not see, so the rollout
#: is held against nvidia-smi (the whole GPU above its memory before the run). The reference log-probs
#: (parameters offloaded, verl_engine) have no figure.
PREDICTED_BY = {"gen": ("rl rollout", "total_gib", "smi_gib"),
                "old_log_prob": ("rl log-probs", "total_gib", "torch_gib"),
                "update_actor": ("rl actor update", "total_gib", "torch_gib"),
                "save_checkpoint": ("rl checkpoint save", "total_gib", "torch_gib"),
                "sft": ("sft_v2", "total_gib", "torch_gib")}
GIB = 1024**3


def read_run(run_dir: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines() if line.strip()]
    machine = next((r for r in lines if r["phase"] == "machine"), {})
    return machine, [r for r in lines if r["phase"] != "machine"]


def measured_config(layers: int, vocab: int, tmp: Path) -> Path:
    paper = json.loads(shape_model.PAPER_CONFIG.read_text())
    facts = {"vocab_size": vocab, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
    path = tmp / f"shape_L{layers}.json"
    config = shape_model.shape_config(paper, facts, layers=layers)
    config.pop("gentax_shape")
    path.write_text(json.dumps(config))
    return path


def workflow_config(record: dict, machine: dict, model_config: Path) -> dict:
    """config/config.yaml with the measured run's section and the measuring GPU (no memory check at load)."""
    from gentax.io import deep_merge, read_yaml

    cfg = read_yaml(REPO / "config" / "config.yaml")
    layer = {"cluster": {"gpus_per_node": 1, "gpu_memory_gib": round(machine["gpu_total_gib"], 2),
                         "model_config": str(model_config)}}
    if record["kind"] == "rl":
        from gentax.train.config import REPLACED_KEYS

        # a record from before the run spec held the episode settings (2026-12-03) has them in its RL section
        layer["rl"] = {k: v for k, v in record["config"]["rl"].items() if k not in REPLACED_KEYS}
    else:
        sft = {k: v for k, v in record["config"]["sft"].items() if k != "extra"}
        layer["inits"] = {"v2": {"sft": sft}}
    return deep_merge(cfg, layer)


def measured_turns(record: dict) -> int:
    """An RL record's Sokoban step limit: its run spec's, or in a record from before the run spec
    held it (2026-12-03), its RL section's ``max_steps``."""
    config = record["config"]
    if "run_spec" in config:
        return int(config["run_spec"]["domains"]["sokoban"]["max_steps"])
    return int(config["rl"]["max_steps"]["sokoban"])


def predictions(record: dict, machine: dict, vocab: int) -> dict:
    from gentax.study import memory

    with tempfile.TemporaryDirectory() as tmp:
        path = measured_config(record["layers"], vocab, Path(tmp))
        cfg = workflow_config(record, machine, path)
        memory.architecture.cache_clear()
        return {job.job: job for job in memory.job_estimates(cfg)}


def measured_rows(record: dict) -> list[dict]:
    """Per phase: seconds, torch peak, nvidia-smi peak above the baseline (the step's largest of each)."""
    base = record.get("baseline_gib") or 0.0
    if record["kind"] == "sft":
        metrics = record.get("train_results.json") or {}
        torch_peak = None
        if "train_mem_gpu_peaked_delta" in metrics:
            # the HF Trainer's tracker: the peak is the stage's start + its net allocation + the peak above that
            torch_peak = (metrics.get("before_init_mem_gpu", 0) + metrics.get("init_mem_gpu_alloc_delta", 0)
                          + metrics.get("train_mem_gpu_alloc_delta", 0) + metrics["train_mem_gpu_peaked_delta"]) / GIB
        smi = record.get("nvidia_smi_peak_gib")
        steps = record["config"]["sft"]["steps"]
        return [{"phase": "sft", "seconds": metrics["train_runtime"] / steps if metrics else None, "torch_gib": torch_peak,
                 "smi_gib": smi - base if smi is not None else None}]
    rows: dict[str, dict] = {}
    for row in record.get("phases", []):
        if "end" not in row or row["phase"] in ("step", "fit"):
            continue
        smi = row.get("nvidia_smi_peak_gib")
        have = rows.setdefault(row["phase"], {"phase": row["phase"], "seconds": [], "torch_gib": None, "smi_gib": None})
        have["seconds"].append(row["seconds"])
        for key, value in (("torch_gib", row.get("torch_max_allocated_gib")), ("smi_gib", smi - base if smi else None)):
            if value is not None:
                have[key] = max(have[key] or 0.0, value)
    return list(rows.values())


def fit_line(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """Least-squares a + b L through (L, value) points; None with fewer than two depths."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - b * mx, b


def at_paper_depth(table: list[dict], phase: str, key: str = "seconds") -> float | None:
    """The per-layer line of one phase's figure (its last step) at the paper model's 32 layers."""
    points = [(row["layers"], row[key][-1] if isinstance(row[key], list) else row[key])
              for row in table if row["phase"] == phase and row.get(key) is not None]
    line = fit_line(points)
    return line[0] + 32 * line[1] if line else None


def cost_figures(table: list[dict], records: list[dict], run_dir: Path) -> list[str]:
    """config/config.yaml ``cost:`` figures extrapolated from the measured step (docs/paper_shape.md "Cost").

    Training (old and reference log-probs, update) is compute-bound: seconds per token at 32 layers on one
    GPU, times the paper model's parameters over the stand-in's (its larger vocabulary), divided over 8
    GPUs (FSDP data parallel: linear scaling, all-gathers hidden under compute over NVLink). The rollout is
    decode-bound and sequential over turns: seconds per 512-token turn at 32 layers, times 0.6 for vLLM's
    tensor parallel 2 (half the weights read a GPU, less the all-reduce), 32 trajectories a replica being
    no slower than 16 when decode reads the weights. Turns per trajectory: the mean of the four domains'
    step limits (config/config.yaml), an upper figure (episodes end when solved). Tokens per step sample: this
    run's (prompt and a 512-token answer)."""
    import yaml

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    rl = [r for r in records if r["kind"] == "rl" and r.get("rc") == 0]
    if len(rl) < 2:
        return ["cost: needs RL steps at two depths"]
    import csv

    with (run_dir / f"{rl[-1]['phase']}.metrics.csv").open() as fh:
        last = list(csv.DictReader(fh))[-1]  # the measured (second) step of the deepest run
    # verl's throughput is the step's tokens over its seconds
    tokens, samples = float(last["tokens_per_s_per_gpu"]) * float(last["seconds"]), float(last["samples"])
    paper = json.loads(shape_model.PAPER_CONFIG.read_text())
    h, inter, layers = paper["hidden_size"], paper["intermediate_size"], paper["num_hidden_layers"]
    kv = paper["num_key_value_heads"] * h // paper["num_attention_heads"]
    per_layer = h * (2 * h + 2 * kv) + 3 * h * inter
    vocab_ratio = (layers * per_layer + 2 * paper["vocab_size"] * h) / (layers * per_layer + 2 * 49152 * h)
    turns_measured = measured_turns(rl[-1])
    train_s = sum(at_paper_depth(table, phase) for phase in ("old_log_prob", "ref", "update_actor"))
    per_token = train_s / tokens * vocab_ratio / 8
    turn_s = at_paper_depth(table, "gen") / turns_measured * vocab_ratio * 0.6
    turns = sum(d["max_steps"] for d in cfg["domains"].values()) / len(cfg["domains"])
    group = cfg["rl"]["group_size"] * cfg["rl"]["tasks_per_step"]
    step_tokens = group * turns * tokens / samples
    step_s = per_token * step_tokens + turns * turn_s
    start = at_paper_depth(table, "startup_to_first_step_s")
    sft = [r for r in table if r["phase"] == "sft" and r.get("seconds")]
    sft_s = None
    if sft:
        shape = sft[0]["layers"]
        stand_in = lambda n: n * per_layer + 2 * 49152 * h  # noqa: E731
        sft_s = sft[0]["seconds"] * stand_in(layers) / stand_in(shape) * vocab_ratio / 8
    eval_s = turns * turn_s / 0.6 / cfg["eval"]["episodes"]  # one GPU, every episode of a domain in one batch
    return [
        "cost figures for config/config.yaml, extrapolated (compare.cost_figures says how):",
        f"  training {per_token * 1e3:.3f} ms per token on 8 GPUs ({train_s:.1f} s for {tokens} tokens on one GPU at "
        f"32 layers, x {vocab_ratio:.3f} for the vocabulary); a 512-token turn {turn_s:.1f} s (vLLM TP 2)",
        f"  rl_step_minutes {step_s / 60:.1f}: {group} trajectories x {turns:g} turns x {tokens / samples:.0f} tokens "
        f"= {step_tokens / 1e6:.2f} M tokens, + {turns:g} turns of rollout",
        f"  job_start_minutes {start / 60:.1f}: start to first step at 32 layers (the line through the measured depths)",
        f"  sft_step_seconds {sft_s:.1f}: the {sft[0]['layers']}-layer step x parameters to 32 layers, over 8 GPUs"
        if sft_s else "  sft_step_seconds: not measured",
        f"  rollout_episode_seconds {eval_s:.2f}: {turns:g} turns x a turn on one GPU / {cfg['eval']['episodes']} "
        "episodes in one batch (decode only: env time not counted)",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--vocab", type=int, default=49152, help="the stand-in's vocabulary (the tokenizer's)")
    ap.add_argument("--write", type=Path, default=None)
    args = ap.parse_args()
    machine, records = read_run(args.run_dir)
    lines = [f"paper shape on {machine.get('gpu')} ({machine.get('gpu_total_gib', 0):.1f} GiB), torch "
             f"{machine.get('torch')}", "",
             "seconds: the last step's (RL) / a step's mean (SFT); GiB: predicted by gentax.study.memory at the run's",
             "shape and settings, torch's peak allocated, nvidia-smi's whole-GPU peak above the GPU before the run;",
             "ratio: predicted / the measured figure it is held against (marked *)", "",
             f"{'run':<8}{'phase':<16}{'seconds':>9}{'predicted':>11}{'torch':>9}{'smi':>9}{'ratio':>8}"]
    table = []
    for record in records:
        if record.get("rc") != 0:
            lines.append(f"{record['phase']:<8}failed: exit {record.get('rc')} (its log: {record['phase']}.log)")
            continue
        predicted = predictions(record, machine, args.vocab)
        for row in measured_rows(record):
            seconds = row["seconds"]
            shown_s = seconds[-1] if isinstance(seconds, list) else seconds
            job, part, against = PREDICTED_BY.get(row["phase"], (None, None, None))
            pred = getattr(predicted[job], part) if job in predicted else None
            ratio = pred / row[against] if pred and row.get(against) else None
            table.append({"run": record["phase"], "layers": record["layers"], **row, "predicted_gib": pred,
                          "held_against": against, "ratio": ratio})
            fmt = lambda v, spec: format(v, spec) if v is not None else "-".rjust(int(spec.split(".")[0]))  # noqa: E731
            mark = {key: "*" if key == against else " " for key in ("torch_gib", "smi_gib")}
            lines.append(f"{record['phase']:<8}{row['phase']:<16}{fmt(shown_s, '9.1f')}{fmt(pred, '11.1f')}"
                         f"{fmt(row['torch_gib'], '8.1f')}{mark['torch_gib']}{fmt(row['smi_gib'], '8.1f')}"
                         f"{mark['smi_gib']}{fmt(ratio, '8.2f')}")
        for key in ("startup_to_fit_s", "startup_to_first_step_s"):
            if key in record:
                table.append({"run": record["phase"], "layers": record["layers"], "phase": key,
                              "seconds": record[key]})
                lines.append(f"{record['phase']:<8}{key:<24} {record[key]:.0f} s")
    lines.append("")
    for phase in sorted({row["phase"] for row in table}):
        for key in ("torch_gib", "smi_gib", "seconds"):
            points = [(row["layers"], row[key][-1] if isinstance(row.get(key), list) else row.get(key))
                      for row in table if row["phase"] == phase and row.get(key) is not None]
            line = fit_line(points)
            if line:
                a, b = line
                unit = "s" if key == "seconds" else "GiB"
                lines.append(f"{phase:<24}{key:<10} a + b L: a {a:.2f} {unit}, b {b:.3f} {unit}/layer -> 32 layers "
                             f"{a + 32 * b:.1f} {unit}")
    lines += [""] + cost_figures(table, records, args.run_dir)
    text = "\n".join(lines)
    print(text)
    if args.write:
        args.write.mkdir(parents=True, exist_ok=True)
        (args.write / "report.txt").write_text(text + "\n")
        (args.write / "record.json").write_text(json.dumps({"machine": machine, "rows": table}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
