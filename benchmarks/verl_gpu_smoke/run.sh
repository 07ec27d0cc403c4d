#!/usr/bin/env bash
# The GPU half of the verl smoke (see smoke.py): installs the carried bundle into /tmp (no network
# needed: the machine's own CUDA torch and transformers are used), then runs the phases.
#   bash benchmarks/verl_gpu_smoke/run.sh OUT_DIR [PHASE ...]
# NVLink multicast stays off (the lent machines ask for it; harmless elsewhere).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: run.sh OUT_DIR [PHASE ...]}; shift
bundle=${GENTAX_SMOKE_BUNDLE:-$repo/.gpu_bundle}
site=/tmp/gentax_site
if [ ! -e "$site/.installed" ]; then
  rm -rf "$site" && mkdir -p "$site/unpacked"
  tar -C "$site/unpacked" -xJf "$bundle/bundle.tar.xz"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site/lib" "$site"/unpacked/wheels/*.whl
  touch "$site/.installed"
fi
export PYTHONPATH="$repo:$site/unpacked/ray:$site/lib${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$out"
python3 -c 'import torch, transformers, ray, verl; print("torch", torch.__version__, "cuda", torch.cuda.device_count(), "transformers", transformers.__version__, "ray", ray.__version__, "verl", verl.__version__)' | tee "$out/versions.txt"
if [ $# -gt 0 ]; then
  exec python3 "$repo/benchmarks/verl_gpu_smoke/smoke.py" gpu --bundle "$bundle" --out "$out" --phases "$@"
else
  exec python3 "$repo/benchmarks/verl_gpu_smoke/smoke.py" gpu --bundle "$bundle" --out "$out"
fi
