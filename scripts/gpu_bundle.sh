#!/usr/bin/env bash
# Builds what the GPU smoke (scripts/gpu_smoke.sh) carries to a GPU machine that has CUDA torch and
# transformers but no internet: the cp312 manylinux wheels verl's trainer path and the Sokoban /
# WebShop envs import beyond that machine's image, with ray trimmed of the parts verl's trainer
# never imports (java jars, rllib, serve, tune, train, llm, data), packed as ONE xz tarball
# (~37 MB, under the 64 MiB a device call may carry).
#   bash scripts/gpu_bundle.sh [OUT_DIR]        (default .gpu_bundle, git-ignored)
# The versions are the ones scripts/requirements.txt resolves to on the CPU machines.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/.gpu_bundle}
PY=${PYTHON:-/opt/gentax/venv/bin/python}
mkdir -p "$out/wheels" "$out/stage"
binary=(ray==2.60.0 pydantic_core==2.50.5 verl==0.9.1 pyzmq==27.3.0 datasets==5.2.0 pydantic==2.14.4
        tensordict==0.10.0 transferqueue==0.1.11 rpds-py==2026.9.1 msgspec==0.23.0 hydra-core==1.3.8
        fastapi==0.165.0 multiprocess==0.70.19 orjson==3.13.0 dill==0.4.1 jsonschema==4.26.0
        uvicorn==0.54.0 starlette==1.10.0 omegaconf==2.3.1 torchdata==0.11.0 opentelemetry-api==1.45.2
        referencing==0.37.0 cachetools==8.0.2 jsonschema-specifications==2025.9.1 typing-inspection==0.4.5
        annotated-types==0.8.0 pyvers==0.1.0 codetiming==1.4.0 rapidfuzz==3.14.6 gym-notices==0.1.0)
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64)
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
  -d "$out/wheels" "${binary[@]}"
# source-only on PyPI: pure-Python wheels built here
"$PY" -m pip wheel -q --no-deps -w "$out/wheels" antlr4-python3-runtime==4.9.3 gym==0.26.2 gym-sokoban==0.0.6
# ray, trimmed: unpack its wheel, drop what the trainer never imports
rm -rf "$out/stage/ray" && mkdir -p "$out/stage/ray"
(cd "$out/stage/ray" && unzip -q "$out"/wheels/ray-2.60.0-*.whl)
(cd "$out/stage/ray/ray" && rm -rf jars rllib serve tune train llm data)
rm -f "$out"/wheels/ray-2.60.0-*.whl
tar -C "$out" -cf - wheels -C "$out/stage" ray | xz -6 -T2 > "$out/bundle.tar.xz"
rm -rf "$out/stage" "$out/wheels"
ls -l "$out/bundle.tar.xz"
