"""Would fusing a layer's projections speed up bf16 decoding? (A lever measured and not kept.)

    python benchmarks/fused_projections.py [--threads 1] [--repeats 20]

On the embedded model's shapes (SmolLM2-135M: hidden 576; q/k/v 576/192/192; gate/up 1536/1536),
for micro-batches of 1-8 decode rows, it times oneDNN's prepacked bf16 linear (the kernel
``gentax.rollout.cpu_inference.PackedLinear`` runs) as separate products and as one product of
the concatenated weights, and says whether the outputs are equal bit for bit. Prints one line per
shape and batch. Timings depend on whatever else runs on the machine: run it on an idle one.
"""

from __future__ import annotations

import argparse

import torch
from roofline import best_of  # benchmarks/ is the script's folder, first on sys.path

HIDDEN = 576
GROUPS = {"q/k/v": [576, 192, 192], "gate/up": [1536, 1536]}


def linear(x, packed):
    return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    with torch.inference_mode():
        for rows in (1, 4, 8):
            x = torch.randn(rows, HIDDEN, dtype=torch.bfloat16)
            for name, outs in GROUPS.items():
                weights = [torch.randn(n, HIDDEN, dtype=torch.bfloat16) * 0.05 for n in outs]
                packed = [torch.ops.mkldnn._reorder_linear_weight(w, 8) for w in weights]
                fused = torch.ops.mkldnn._reorder_linear_weight(torch.cat(weights), 8)
                equal = torch.equal(torch.cat([linear(x, p) for p in packed], -1), linear(x, fused))
                apart = best_of(lambda: [linear(x, p) for p in packed], args.repeats)
                together = best_of(lambda: linear(x, fused), args.repeats)
                print(f"rows {rows} {name:8s} separate {apart * 1e6:5.0f} us  fused {together * 1e6:5.0f} us  "
                      f"saved {(apart - together) * 1e6:4.0f} us  bit-equal {equal}")


if __name__ == "__main__":
    main()
