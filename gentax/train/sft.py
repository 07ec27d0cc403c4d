"""SFT with LlamaFactory: ``llamafactory-cli train`` on a generated YAML, in its own environment
(docs/sft.md "Training").

    train_sft(cfg, data_dir, init_model, out_dir) -> Path    # out_dir: an HF model folder
    llamafactory_args(cfg, data_dir, init_model, output_dir, cutoff_len, world_size) -> dict
    find_llamafactory_cli(cfg) -> Path

LlamaFactory pins its own transformers, so it runs as a subprocess from its own environment; this
process writes the YAML, checks that no example exceeds ``cutoff_len`` and tidies the result. The
chat template is the tokenizer's own, so training sees exactly the prompt tokens the rollout
generators send. Precision ``auto``: bf16 on CUDA, fp32 on a CPU (docs/performance.md says why).
One SFT job per output (``gentax.io.output_lock``); LlamaFactory gets SIGTERM when the job dies; the
output folder is written atomically, its manifest last.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from gentax import io as gio
from gentax import progress as gprogress
from gentax.dtype import CUBLAS_WORKSPACE_CONFIG
from gentax.errors import GentaxError, short_reason
from gentax.io import repo_path
from gentax.train import tracking as gtracking
from gentax.train.sft_config import SFTTrain
from gentax.train.sft_data import DATASET_NAME, read_examples

DEFAULT_SFT_VENV = "/opt/gentax/venv-sft"
CLI_NAME = "llamafactory-cli"
#: LlamaFactory files that only make sense inside a training run
_RUN_ONLY_FILES = ("training_args.bin", "trainer_state.json", "all_results.json", "README.md")


def find_llamafactory_cli(cfg: SFTTrain) -> Path:
    """The ``llamafactory-cli`` executable to run: ``cfg.llamafactory_cli``, else ``$GENTAX_SFT_VENV/bin``,
    else beside this Python, else ``/opt/gentax/venv-sft/bin``, else ``PATH``."""
    candidates = []
    if cfg.llamafactory_cli:
        candidates.append(Path(cfg.llamafactory_cli))
    else:
        if os.environ.get("GENTAX_SFT_VENV"):
            candidates.append(Path(os.environ["GENTAX_SFT_VENV"]) / "bin" / CLI_NAME)
        candidates += [Path(sys.executable).parent / CLI_NAME, Path(DEFAULT_SFT_VENV) / "bin" / CLI_NAME]
        on_path = shutil.which(CLI_NAME)
        if on_path:
            candidates.append(Path(on_path))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    tried = ", ".join(str(c) for c in candidates) or "(none)"
    raise GentaxError(f"{CLI_NAME} not found (tried {tried}); run scripts/setup.sh, which installs the SFT venv")


def _world_size() -> int:
    import torch

    return max(1, torch.cuda.device_count())


def llamafactory_args(cfg: SFTTrain, data_dir: Path, init_model: Path, output_dir: Path, cutoff_len: int,
                      world_size: int) -> dict[str, Any]:
    """The ``llamafactory-cli train`` arguments (a YAML mapping) for this run."""
    per_step = cfg.micro_batch_size * world_size
    if cfg.batch_size % per_step:
        raise GentaxError(f"batch_size={cfg.batch_size} is not a multiple of micro_batch_size x devices = "
                          f"{cfg.micro_batch_size} x {world_size}")
    cuda = world_size > 1 or _cuda_available()
    bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and cuda)
    checkpointing = cuda if cfg.gradient_checkpointing == "auto" else bool(cfg.gradient_checkpointing)
    args: dict[str, Any] = {
        "model_name_or_path": str(init_model),
        "trust_remote_code": False,
        "stage": "sft",
        "do_train": True,
        "finetuning_type": "lora" if cfg.lora_rank > 0 else "freeze" if cfg.freeze_layers > 0 else "full",
        "dataset": DATASET_NAME,
        "dataset_dir": str(data_dir),
        "cutoff_len": int(cutoff_len),
        "overwrite_cache": True,
        "output_dir": str(output_dir),
        "overwrite_output_dir": True,
        "save_strategy": "no",
        "logging_steps": 1,
        "plot_loss": False,
        "report_to": "none",
        "per_device_train_batch_size": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.batch_size // per_step,
        "learning_rate": float(cfg.lr),
        "max_steps": cfg.steps,
        "lr_scheduler_type": cfg.lr_scheduler,
        # a float in [0, 1) is a ratio of the steps (transformers 5.x; its warmup_ratio was removed in 5.2)
        "warmup_steps": float(cfg.warmup_ratio),
        "weight_decay": float(cfg.weight_decay),
        "max_grad_norm": float(cfg.max_grad_norm),
        "bf16": bf16,
        "use_cpu": not cuda,  # HF Trainer refuses bf16 without a GPU unless told it trains on the CPU
        "disable_gradient_checkpointing": not checkpointing,
        "dataloader_num_workers": 0,
        "seed": cfg.seed,
        "data_seed": cfg.seed,
        # on a GPU, HF Trainer's full determinism (gentax.dtype.strict_determinism says why): two runs of
        # one SFT job give the same weights; a CPU run's default kernels are reproducible already
        "full_determinism": cuda,
    }
    if cfg.template is not None:
        args["template"] = cfg.template
    if cfg.lora_rank > 0:
        args.update(lora_rank=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_target=cfg.lora_target)
    if cfg.freeze_layers > 0:
        args.update(freeze_trainable_layers=cfg.freeze_layers, freeze_trainable_modules="all")
    if cfg.deepspeed and world_size > 1:  # ZeRO partitions across devices; one device trains without it
        args["deepspeed"] = str(repo_path(cfg.deepspeed))
    args.update(cfg.extra)
    return args


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def example_token_lengths(examples: list[dict[str, Any]], tokenizer) -> list[int]:
    """Tokens of each example as trained: chat-templated prompt + response + end-of-turn token."""
    lengths = []
    for example in examples:
        turns = example["conversations"]
        prompt = [{"role": "user", "content": turns[0]["value"]}]
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        prompt_len = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        response_len = len(tokenizer(turns[1]["value"], add_special_tokens=False)["input_ids"])
        lengths.append(prompt_len + response_len + 1)
    return lengths


def train_sft(cfg: SFTTrain, data_dir: str | Path, init_model: str | Path, out_dir: str | Path,
              *, stream=None, tracking: dict[str, Any] | None = None) -> Path:
    """Fine-tune ``init_model`` on ``data_dir`` into the HF folder ``out_dir`` (module docstring)."""
    from transformers import AutoTokenizer

    data_dir, init_model, out_dir = Path(data_dir).resolve(), Path(init_model).resolve(), Path(out_dir).resolve()
    if not (init_model / "config.json").is_file():
        raise GentaxError(f"initial model {init_model} is not an HF model folder (no config.json; --init, or the job spec's init)")
    examples = read_examples(data_dir)
    cli = find_llamafactory_cli(cfg)
    with gio.reading(init_model, "initial model", gio.rebuild_hint(init_model)):
        tokenizer = AutoTokenizer.from_pretrained(init_model)
    if cfg.template is None and not tokenizer.chat_template:
        raise GentaxError(f"{init_model}'s tokenizer has no chat template; set the SFT config key template")
    longest = max(example_token_lengths(examples, tokenizer))
    if cfg.cutoff_len is not None and longest > cfg.cutoff_len:
        raise GentaxError(f"the longest SFT example has {longest} tokens > cutoff_len={cfg.cutoff_len}; raise "
                          "cutoff_len (or null: fit the longest) so no prompt is truncated")
    cutoff_len = cfg.cutoff_len or longest
    stream = stream or sys.stdout

    track = gtracking.load_section(tracking)

    with gio.output_lock(out_dir, "SFT output"), gio.atomic_path(out_dir) as final:
        scratch = final.parent / "scratch"
        scratch.mkdir()
        lora = cfg.lora_rank > 0
        train_dir = scratch / "adapter" if lora else final
        args = llamafactory_args(cfg, data_dir, init_model, train_dir, cutoff_len, _world_size())
        # LlamaFactory's own reporting (HF Trainer report_to): TensorBoard events in OUT/tensorboard
        report, report_env = gtracking.sft_report_args(track, logging_dir=final / gtracking.TENSORBOARD_DIR,
                                                       out_dir=out_dir)
        args.update({key: value for key, value in report.items() if key not in cfg.extra})
        if not args["bf16"]:
            args["model_name_or_path"] = str(_float32_copy(init_model, scratch / "init_float32"))
        log_lines: list[str] = []
        _run(cli, "train", args, scratch, log_lines, stream, extra_env=report_env)
        if lora:
            export = {
                "model_name_or_path": str(init_model),
                "adapter_name_or_path": str(train_dir),
                "finetuning_type": "lora",
                "export_dir": str(final),
                "export_size": 5,
                "export_device": "cpu",
                "infer_dtype": "bfloat16" if args["bf16"] else "float32",
                "trust_remote_code": False,
            }
            if cfg.template is not None:
                export["template"] = cfg.template
            _run(cli, "export", export, scratch, log_lines, stream)
            for name in ("trainer_log.jsonl", "train_results.json"):
                if (train_dir / name).is_file():
                    shutil.copy2(train_dir / name, final / name)
        _finish_folder(final, out_dir, cfg, args, data_dir, init_model, longest, log_lines)
    return out_dir


def _float32_copy(init_model: Path, where: Path) -> Path:
    """``init_model`` itself when stored in float32, else a float32 copy at ``where``.

    LlamaFactory loads a model in its stored dtype and upcasts only the trainable parameters, so
    a bf16 folder trained in fp32 (the CPU) would keep frozen layers in bf16: mixed dtypes, and
    bf16 matrix products are slow on most CPUs."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    fix = gio.rebuild_hint(init_model)
    stored = gio.read_result_json(init_model / "config.json", fix=fix)
    if stored.get("dtype", stored.get("torch_dtype")) == "float32":
        return init_model
    with gio.reading(init_model, "initial model", fix):
        model = AutoModelForCausalLM.from_pretrained(init_model, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(init_model)
    model.config.dtype = "float32"
    model.save_pretrained(where)
    tokenizer.save_pretrained(where)
    return where


#: a progress bar's "k/n [" (the HF trainer's tqdm, which LlamaFactory prints)
_STEP_COUNTER = re.compile(r"\b(\d+)/(\d+) \[")
#: a line that names an exception (the reason a failed run gives, wherever its report ends)
_ERROR_LINE = re.compile(r"\b\w+(Error|Exception)\b")


def _run(cli: Path, command: str, args: dict[str, Any], scratch: Path, log_lines: list[str], stream,
         extra_env: dict[str, str] | None = None) -> None:
    """Run ``llamafactory-cli COMMAND args.yaml``, echoing its output; raise on failure."""
    config_path = scratch / f"{command}.yaml"
    config_path.write_text(yaml.safe_dump(args, sort_keys=True))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",  # everything is local: a download attempt is a bug
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(scratch / "datasets_cache"),  # per run: no stale or shared cache
        "WANDB_DISABLED": "true",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONUNBUFFERED": "1",
        # cuBLAS's reproducible products on a GPU (gentax.dtype.deterministic_kernels; LlamaFactory's
        # own full_determinism would also turn every op without a deterministic kernel into an error)
        "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG),
        **(extra_env or {}),
    }
    env.pop("VIRTUAL_ENV", None)  # the main venv's; the CLI's own interpreter decides
    argv = [str(cli), command, str(config_path)]
    log_lines.append("$ " + " ".join(argv) + "\n")
    stream.write(log_lines[-1])
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          cwd=scratch, preexec_fn=_end_with_parent) as proc, \
            gprogress.job(f"SFT {command}", int(args.get("max_steps") or 0),
                          "step") as job_progress:
        for line in proc.stdout:  # text mode: a progress bar's carriage returns end lines too
            log_lines.append(line)
            stream.write(line)
            counted = _STEP_COUNTER.search(line)
            if counted and int(counted.group(2)) == job_progress.total > 0:  # the training bar, not a loading one
                job_progress.at(int(counted.group(1)), job_progress.total)
        code = proc.wait()
    if code != 0:  # its whole output is in the job's log already: the error is one line
        tail = "".join(log_lines[-15:])
        full = "No space left on device" in tail or "os error 28" in tail
        where = f"; {gio.free_space(scratch)}" if full else ""
        last = next((line.strip() for line in reversed(log_lines) if _ERROR_LINE.search(line)),  # torchrun's
                    next((line.strip() for line in reversed(log_lines) if line.strip()), "no output"))  # report ends in =====
        raise GentaxError(f"`{CLI_NAME} {command}` failed with exit code {code}: {short_reason(last)}{where} "
                          f"(its output is in the job's log)")


def _end_with_parent() -> None:
    """In the child: SIGTERM it when this process dies (Linux ``PR_SET_PDEATHSIG``), so a killed
    SFT job takes its trainer with it (torchrun passes the SIGTERM to its workers) instead of
    leaving it training into a temporary folder that the rerun removes."""
    import ctypes
    import ctypes.util

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def _finish_folder(final: Path, out_dir: Path, cfg: SFTTrain, args: dict[str, Any], data_dir: Path, init_model: Path,
                   longest: int, log_lines: list[str]) -> None:
    """Make the trained folder a clean model folder for eval and RL, with provenance."""
    config_path = final / "config.json"
    if not config_path.is_file():
        raise GentaxError(f"{CLI_NAME} finished but wrote no model into {final}")
    model_config = json.loads(config_path.read_text())
    model_config["use_cache"] = True  # LlamaFactory turns it off for training; generation wants it
    config_path.write_text(json.dumps(model_config, indent=2, sort_keys=True) + "\n")
    for name in _RUN_ONLY_FILES:
        (final / name).unlink(missing_ok=True)
    losses = []
    log_path = final / "trainer_log.jsonl"
    if log_path.is_file():
        losses = [json.loads(line).get("loss") for line in log_path.read_text().splitlines() if line.strip()]
        losses = [loss for loss in losses if loss is not None]
    manifest_path = data_dir / "manifest.json"
    data_manifest = gio.read_result_json(manifest_path, fix=gio.rebuild_hint(data_dir)) if manifest_path.is_file() else {}
    # the arguments as run, with the temporary folder's paths as they are once it is renamed into place
    recorded = yaml.safe_dump(args, sort_keys=True).replace(str(final), str(out_dir))
    (final / "sft_llamafactory.yaml").write_text(recorded.replace(str(final.parent), "<temporary>"))
    (final / "llamafactory.log").write_text("".join(log_lines))
    summary = {
        "init_model": str(init_model),
        "data": str(data_dir),
        "data_counts": data_manifest.get("counts"),
        "examples": data_manifest.get("examples"),
        "longest_example_tokens": longest,
        "steps": cfg.steps,
        "first_loss": losses[0] if losses else None,
        "final_loss": losses[-1] if losses else None,
        "config": cfg.to_dict(),
    }
    (final / "gentax_sft.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")
    gio.write_manifest(final)
