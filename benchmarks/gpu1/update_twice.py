"""Which kernel makes the local engine's RL update differ between two runs on a shared GPU?

The H200 twin of 2026-12-04 (benchmarks/gpu1/runs/2026-12-04/v1_twice/) trained step 1 of the V1
warm start on the same tokens from the same weights in two processes at once and got different
weights after the first update. One process alone on an idle GPU, unpadded batches, gave equal
gradients (backward_twice.py). This runs the engine's own update pass (``local_engine.micro_batch_backward``
on padded micro-batches of a step's shape: left-padded prompts of 150-400
tokens, responses of 5-40) in several processes at once, optionally beside processes that keep the
GPU busy with products, under each attention variant, and says per variant whether the forward's
log-probs and the gradients are bitwise equal between repeats in one process and between processes.

    python3 benchmarks/gpu1/update_twice.py OUT.json [--processes 2] [--load 2] [--repeats 3]
    python3 benchmarks/gpu1/update_twice.py OUT.json --device cpu --tiny   (the CPU test's smoke run)

Variants: ``engine`` (the local engine's update now: ``gentax.dtype.deterministic_attention`` around
the forward, strict deterministic mode around the backward), ``as_run`` (what the 2026-12-04 jobs
ran: sdpa as the model loads, strict mode around the backward only), ``strict_all`` (strict mode
around the forward too), ``math`` / ``efficient`` / ``cudnn`` (sdpa limited to that backend, strict
backward), ``eager`` (transformers' eager attention). A variant that
raises is recorded with its error. Model: SmolLM2-135M's shape (config/models), random float32
weights from seed 0, bf16 autocast on a GPU (the engine's ``autocast: auto``), as a fresh copy for
each variant. Needs torch, transformers and this checkout (gentax on the path).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # gentax: this checkout's (the workers get it on PYTHONPATH too)
VARIANTS = ("engine", "as_run", "strict_all", "math", "efficient", "cudnn", "eager")
ROWS, PROMPTS, RESPONSES = 16, (150, 400), (5, 40)


def _batch(vocab: int, tiny: bool, rows: int = ROWS):
    """``rows`` step samples of an RL step's shape (seed 0): prompts, responses, advantages."""
    import numpy as np

    rng = np.random.default_rng(0)
    low, high = (8, 24) if tiny else PROMPTS
    prompts = [rng.integers(10, vocab, rng.integers(low, high)).tolist() for _ in range(rows)]
    responses = [rng.integers(10, vocab, rng.integers(*RESPONSES)).tolist() for _ in range(rows)]
    advantages = np.linspace(-1.0, 1.0, rows)
    return prompts, responses, advantages


def _model(device: str, tiny: bool):
    """SmolLM2-135M's shape (or a 2-layer one), random float32 weights from seed 0, in train mode."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = json.loads((REPO / "config/models/SmolLM2-135M-Instruct.json").read_text())
    if tiny:
        config.update(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=512)
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**config)).to(device).train()


def _policy(model, device):
    """The engine's Policy around ``model`` without a model folder: what ``logprobs`` reads."""
    import torch

    from gentax.train import local_engine

    policy = local_engine.Policy.__new__(local_engine.Policy)
    policy.cfg = argparse.Namespace(temperature=1.0)
    policy.device = torch.device(device)
    policy.pad_id = 0
    policy.autocast_dtype = local_engine.autocast_dtype("auto", policy.device.type)
    policy.model = model
    return policy


def _attention(variant: str):
    """The variant's kernel choice around the update's forward (``micro_batch_backward``'s
    ``attention``): a function of the device giving a context."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from gentax.dtype import deterministic_attention, strict_determinism

    backend = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "cudnn": SDPBackend.CUDNN_ATTENTION}.get(variant)
    if backend is not None:
        return lambda device: sdpa_kernel([backend])
    return {"engine": deterministic_attention, "strict_all": strict_determinism}.get(
        variant, lambda device: contextlib.nullcontext())  # as_run, eager: sdpa (or eager) as the model loads


def one_variant(variant: str, device: str, tiny: bool, repeats: int) -> dict:
    import torch

    from gentax.dtype import deterministic_kernels
    from gentax.train import grpo
    from gentax.train.local_engine import bits_checksum, micro_batch_backward

    deterministic_kernels(torch.device(device))
    model = _model(device, tiny)
    if variant == "eager":
        model.set_attn_implementation("eager")
    policy = _policy(model, device)
    prompts, responses, advantages = _batch(model.config.vocab_size, tiny)
    tokens = float(sum(map(len, responses)))
    out = {"variant": variant, "forward": [], "loss": [], "grads": []}
    try:
        for _ in range(repeats):
            model.zero_grad(set_to_none=True)
            logp, _, _, loss, _ = micro_batch_backward(policy, prompts, responses, advantages, tokens,
                                                       grpo.LossConfig(kl_coef=0.0), attention=_attention(variant))
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            out["forward"].append(bits_checksum([logp]))
            out["loss"].append(repr(float(loss.detach())))
            out["grads"].append(bits_checksum([p.grad for p in model.parameters() if p.grad is not None]))
    except Exception as error:  # a backend that cannot run this batch, or strict mode raising: recorded
        out["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
    return out


def worker(args) -> None:
    rows = [one_variant(v, args.device, args.tiny, args.repeats) for v in args.variants.split(",")]
    from gentax.io import write_json

    write_json(args.worker_out, rows)


def load(args) -> None:
    """Keep the GPU busy with bf16 products until ``--until`` (epoch seconds): a shared GPU."""
    import torch

    a = torch.randn(4096, 4096, device=args.device, dtype=torch.bfloat16)
    while time.time() < args.until:
        for _ in range(20):
            a = torch.tanh(a @ a)
        torch.cuda.synchronize()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--load", type=int, default=2, help="processes keeping the GPU busy meanwhile (0 on a CPU)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer model and short prompts (the CPU smoke test)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    ap.add_argument("--load-until", dest="until", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker_out:
        worker(args)
        return 0
    if args.until:
        load(args)
        return 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    base = [sys.executable, __file__, "--device", args.device, "--repeats", str(args.repeats), "--variants", args.variants]
    base += ["--tiny"] if args.tiny else []
    out = Path(args.out)
    loaders = [subprocess.Popen(base + ["--load-until", str(time.time() + 600)], env=env) for _ in range(args.load)]
    started = time.time()
    try:
        workers = [subprocess.Popen(base + ["--worker-out", f"{out}.p{k}"], env=env) for k in range(args.processes)]
        codes = [w.wait() for w in workers]
    finally:
        for p in loaders:
            p.kill()
    if any(codes):
        print(f"a worker failed: exit codes {codes}", file=sys.stderr)
        return 1
    runs = [json.loads(Path(f"{out}.p{k}").read_text()) for k in range(args.processes)]
    import torch

    record = {"device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "CPU",
              "torch": torch.__version__, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "processes": args.processes, "load_processes": args.load, "repeats": args.repeats,
              "seconds": round(time.time() - started, 1), "variants": []}
    for i, variant in enumerate(args.variants.split(",")):
        rows = [run[i] for run in runs]
        errors = sorted({r["error"] for r in rows if "error" in r})
        summary = {"variant": variant, "error": errors[0] if errors else None}
        if not errors:
            for key in ("forward", "grads"):
                summary[f"{key}_equal_within_process"] = all(len(set(r[key])) == 1 for r in rows)
                summary[f"{key}_equal_across_processes"] = len({x for r in rows for x in r[key]}) == 1
            summary["losses"] = sorted({x for r in rows for x in r["loss"]})
        summary["runs"] = rows
        record["variants"].append(summary)
        print({k: v for k, v in summary.items() if k != "runs"}, flush=True)
    from gentax.io import write_json

    write_json(out, record)
    for k in range(args.processes):
        Path(f"{out}.p{k}").unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
