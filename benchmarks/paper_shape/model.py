"""A Hugging Face folder with the paper model's shape and random weights: no download needed.

    python benchmarks/paper_shape/model.py OUT_DIR --tokenizer TOKENIZER_DIR [--layers N]
        [--config config/models/Llama-3.1-8B-Instruct.json] [--device cuda] [--seed 0]

Memory and time of a training step depend on the architecture, not on the weights' values, so the
paper's Llama-3.1-8B is stood in for by its own config.json (``cluster.model_config``: layers,
hidden, heads, KV heads, intermediate size, RoPE) with random bf16 weights drawn by transformers'
own initialiser (``initializer_range``), seeded. ``--layers N`` keeps every other value and builds
N decoder layers (the per-layer extrapolation of benchmarks/paper_shape/measure.py).

The tokenizer is another model's (the embedded SmolLM2's stands in: the real Llama tokenizer is a
download). What that changes is the vocabulary: the embedding and the LM head get the tokenizer's
rows (49,152 for SmolLM2) instead of Llama's 128,256, i.e. 2 x 79,104 x 4,096 = 648 M fewer
parameters, and the logits of a token are narrower by the same factor. The folder's config.json
says so (``gentax_shape``), and gentax.study.memory, given that config, predicts for the shape that
ran; the vocabulary's share of the paper model is then the estimator's, not a measurement. The
token ids bos / eos / pad become the tokenizer's, so that generation stops where its chat template
says.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAPER_CONFIG = REPO / "config" / "models" / "Llama-3.1-8B-Instruct.json"
#: the tokenizer's files copied beside the weights (whatever of these the tokenizer folder has)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json",
                   "tokenizer.model")


def shape_config(paper: dict, tokenizer: dict, *, layers: int | None = None) -> dict:
    """The config.json of the stand-in: ``paper``'s architecture with ``layers`` decoder layers (None:
    the paper's) and ``tokenizer``'s vocabulary and special ids (``tokenizer``: vocab_size,
    bos_token_id, eos_token_id, pad_token_id). Raises ValueError on a layer count outside 1..paper's."""
    full = int(paper["num_hidden_layers"])
    if layers is not None and not 1 <= layers <= full:
        raise ValueError(f"--layers {layers}: must be between 1 and the paper model's {full}")
    config = dict(paper)
    config["num_hidden_layers"] = full if layers is None else layers
    config["vocab_size"] = int(tokenizer["vocab_size"])
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        config[key] = tokenizer[key]
    config["gentax_shape"] = {
        "from": PAPER_CONFIG.name if PAPER_CONFIG.is_file() else "paper config",
        "layers": f"{config['num_hidden_layers']} of {full}",
        "vocab": f"{config['vocab_size']} (the tokenizer's) instead of {paper['vocab_size']}",
        "weights": "random (transformers' initialiser, seeded): shape only",
    }
    return config


def tokenizer_facts(tokenizer_dir: Path) -> dict:
    """vocab_size (the tokenizer's length, rounded up to a multiple of 64 as Llama pads its table) and
    the special ids of the tokenizer in ``tokenizer_dir``."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    eos = tok.eos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    return {"vocab_size": -(-len(tok) // 64) * 64, "bos_token_id": tok.bos_token_id, "eos_token_id": eos,
            "pad_token_id": pad}


def build(out: Path, *, tokenizer_dir: Path, layers: int | None = None, config_path: Path = PAPER_CONFIG,
          device: str = "cpu", seed: int = 0) -> dict:
    """Write the stand-in to ``out`` (safetensors, bf16; written to a temporary folder, then renamed)
    and return its config."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = shape_config(json.loads(Path(config_path).read_text()), tokenizer_facts(tokenizer_dir), layers=layers)
    hf_config = AutoConfig.for_model(**{k: v for k, v in config.items() if k != "gentax_shape"})
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.bfloat16)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    del model
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copy2(tokenizer_dir / name, tmp / name)
    saved = json.loads((tmp / "config.json").read_text())
    saved["gentax_shape"] = config["gentax_shape"]
    (tmp / "config.json").write_text(json.dumps(saved, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--tokenizer", type=Path, required=True, help="folder of the tokenizer that stands in")
    ap.add_argument("--layers", type=int, default=None, help="decoder layers (default: the paper model's)")
    ap.add_argument("--config", type=Path, default=PAPER_CONFIG, help="the paper model's config.json")
    ap.add_argument("--device", default="cpu", help="where the random weights are drawn (cuda: seconds)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        config = build(args.out, tokenizer_dir=args.tokenizer, layers=args.layers, config_path=args.config,
                       device=args.device, seed=args.seed)
    except ValueError as exc:
        print(f"model.py: {exc}", file=sys.stderr)
        return 2
    print(f"{args.out}: {config['num_hidden_layers']} layers, hidden {config['hidden_size']}, "
          f"vocab {config['vocab_size']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
