"""Does one backward pass give the same gradients twice on this GPU? The two training losses of the
one-GPU study on SmolLM2-135M's shape (random weights, seed 0), each run twice from the same state
in torch's default mode and in the strict deterministic mode the jobs now train in
(``gentax.dtype.strict_determinism`` for the local RL engine; HF Trainer's ``full_determinism``
for LlamaFactory's SFT, ``gentax.train.sft.llamafactory_args``).

    python3 benchmarks/gpu1/backward_twice.py OUT.json [--config config/models/SmolLM2-135M-Instruct.json]

Losses (batch 16 of 320 tokens, the last 40 the "response"):
- ``sft``: the model's own loss on labels (cross-entropy over the response), bf16 weights, gradient
  checkpointing on (LlamaFactory's full fine-tuning on a GPU);
- ``rl``: float32 weights under bf16 autocast, the response tokens' log-probs (log_softmax, gather)
  times a fixed advantage, masked mean (the local engine's update pass, without the clipping).
Per loss and mode: whether it raised (an op without a deterministic kernel raises in strict mode),
and whether the two runs' gradients are bitwise equal (and the largest difference if not).
Needs only torch and transformers (the GPU machine's image); CUDA required.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

BATCH, LENGTH, RESPONSE = 16, 320, 40


def grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def one_pass(kind: str, model, tokens: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    if kind == "sft":
        labels = tokens.clone()
        labels[:, : LENGTH - RESPONSE] = -100
        model(input_ids=tokens, labels=labels).loss.backward()
    else:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=tokens).logits[:, LENGTH - RESPONSE - 1 : -1].float()
        logp = torch.log_softmax(logits, dim=-1).gather(-1, tokens[:, LENGTH - RESPONSE :, None]).squeeze(-1)
        advantage = torch.linspace(-1.0, 1.0, BATCH, device=logp.device)[:, None]
        (-(logp * advantage).mean()).backward()
    torch.cuda.synchronize()
    return grads(model)


def measure(kind: str, strict: bool, config: LlamaConfig, tokens: torch.Tensor) -> dict:
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).cuda()
    if kind == "sft":
        model = model.to(torch.bfloat16)
        model.gradient_checkpointing_enable()
    model.train()
    torch.use_deterministic_algorithms(strict, warn_only=False)
    torch.backends.cudnn.deterministic = strict
    row = {"loss": kind, "mode": "strict deterministic" if strict else "default"}
    try:
        started = time.perf_counter()
        first = one_pass(kind, model, tokens)
        second = one_pass(kind, model, tokens)
        row["seconds_two_passes"] = round(time.perf_counter() - started, 3)
    except RuntimeError as exc:
        row["raised"] = str(exc).splitlines()[0][:300]
        return row
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False
    differing = [i for i, (a, b) in enumerate(zip(first, second)) if not torch.equal(a, b)]
    row.update(raised=None, tensors=len(first), tensors_differing=len(differing),
               largest_difference=max((float((first[i].float() - second[i].float()).abs().max()) for i in differing),
                                      default=0.0))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--config", type=Path, default=Path("config/models/SmolLM2-135M-Instruct.json"))
    args = parser.parse_args()
    fields = json.loads(args.config.read_text())
    config = LlamaConfig(**{k: v for k, v in fields.items() if k not in ("architectures", "transformers_version")})
    config._attn_implementation = "sdpa"
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, config.vocab_size, (BATCH, LENGTH), generator=generator).cuda()
    rows = [measure(kind, strict, config, tokens) for kind in ("sft", "rl") for strict in (False, True)]
    record = {"machine": f"{torch.cuda.get_device_name()} ({platform.node()})", "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "batch": BATCH, "length": LENGTH, "rows": rows}
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
