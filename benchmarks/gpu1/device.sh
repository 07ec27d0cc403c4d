#!/usr/bin/env bash
# Every GPU job of the workflow on the lent GPU machine, in consecutive device calls (each at most
# 10 minutes). Run from the repository's root on the device (its working tree):
#   bash benchmarks/gpu1/device.sh [--parts-root DIR] [--detach] [--kill KIND:RUN@STEP]... [--compare ARGS] [--commit C] SECONDS [snakemake args...]
#   bash benchmarks/gpu1/device.sh --collect WAIT_SECONDS
#   bash benchmarks/gpu1/device.sh --detach --twin 'TARGETS' SECONDS [snakemake args...]
# The bundle's parts (benchmarks/gpu1/bundle.py; one carried a call in DIR/.gpu1p<k>/) gather in
# /tmp/gpu1dev/carry, each checked as it arrives (install.py); /tmp lasts only while the machine stays
# warm, so the calls follow each other at once. Once all are there: unpacked, the code copied to
# /tmp/gpu1dev/repo (results/ outlives the call), and benchmarks/gpu1/drive.py runs Snakemake there
# (profiles/gpu1) for at most SECONDS, sampling the GPU. --detach runs it past this call (a later
# --collect waits for it). $OUT gets results.tar.xz (no weights) and record.tar.xz for report.py.
# --twin 'TARGETS' (with --detach) also runs TARGETS in a second copy from its own empty results folder
# (two runs of one config on one GPU); --collect then compares them (equivalence.py --folders).
set -u
S=/tmp/gpu1dev
here=$(pwd)
parts_root=$here detach=0 drive_args=() twin_targets=
no_weights=(--exclude='*.safetensors' --exclude='*.pt' --exclude='*.bin' --exclude='*.gguf' --exclude='optimizer*'
            --exclude='global_step_*')
collect() {  # results (no weights) and the drive's record into $OUT
  [ -d "$S/repo/results" ] && tar -C "$S/repo" "${no_weights[@]}" -cf - results | xz -3 -T8 > "$OUT/results.tar.xz"
  [ -d "$S/record" ] && tar -C "$S" -cf - record | xz -3 -T8 > "$OUT/record.tar.xz"
  cp "$S/drive.log" "$OUT/" 2>/dev/null
  if [ -d "$S/twin/results" ]; then
    [ -e "$S/twin.done" ] && echo "twin done: $(cat "$S/twin.done")" || echo "twin still running"
    python3 "$here/benchmarks/equivalence.py" --folders "$S/repo" "$S/twin" --out "$OUT/twin.json"
    tar -C "$S/twin" "${no_weights[@]}" -cf - results | xz -3 -T8 > "$OUT/twin_results.tar.xz"
    tail -c 200000 "$S/twin.log" > "$OUT/twin.log" 2>/dev/null
  fi
  ls -la "$OUT"
}
while [ $# -gt 0 ]; do
  case $1 in
    --parts-root) parts_root=$2; shift 2 ;;
    --detach) detach=1; shift ;;
    --compare|--commit|--kill) drive_args+=("$1" "$2"); shift 2 ;;
    --twin) twin_targets=$2; shift 2 ;;
    --collect)
      end=$(( $(date +%s) + $2 ))
      while [ ! -e "$S/drive.done" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
      [ -e "$S/drive.done" ] && echo "drive done: $(cat "$S/drive.done")" || echo "drive still running"
      tail -5 "$S/drive.log" 2>/dev/null
      collect; exit 0 ;;
    *) break ;;
  esac
done
seconds=$1; shift
# the carried bundle: this call's part(s) kept in /tmp, each checked; unpacked once all are there
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader
mkdir -p "$S/carry" && cp -r "$parts_root"/.gpu1p* "$S/carry/" 2>/dev/null
python3 "$here/benchmarks/gpu1/install.py" "$S/carry" "$S/bundle" --check
case $? in 0) ;; 1) exit 0 ;; *) exit 2 ;; esac  # 1: this call brought one part of several
python3 "$here/benchmarks/gpu1/install.py" "$S/carry" "$S/bundle" || exit 2
B=$S/bundle
export PYTHONPATH=$B/site PATH=$B/bin:$B/jre/bin:$PATH JAVA_HOME=$B/jre DISABLE_VERSION_CHECK=1 \
       HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
# NVLink multicast stays off (the lent machines ask for it); vLLM without flashinfer (not carried)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_USE_FLASHINFER_SAMPLER=0
# up to 12 jobs share the GPU (profiles/gpu1): each evaluation's vLLM engine asks for 6 % of it free
# at its start, a fixed 3 GiB KV cache (140k tokens of the 135M model; sized from the share, vLLM's
# profiling read other jobs' allocations and came out negative on an H100), eager mode (a few hundred
# decode steps a job: start-up matters more; gentax.rollout.generators.VLLM_ENGINE_ENV)
export GENTAX_VLLM_GPU_MEMORY_UTILIZATION=${GENTAX_VLLM_GPU_MEMORY_UTILIZATION:-0.06} \
       GENTAX_VLLM_KV_CACHE_GIB=${GENTAX_VLLM_KV_CACHE_GIB:-3} GENTAX_VLLM_ENFORCE_EAGER=${GENTAX_VLLM_ENFORCE_EAGER:-1}
# the bundle's versions (the one-GPU preset's bundle has no vLLM, verl or Ray: bundle.py --without)
python3 -c '
import importlib
for name in ("torch", "transformers", "snakemake", "vllm", "verl", "ray"):
    try:
        print(name, importlib.import_module(name).__version__, end="  ")
    except ImportError:
        print(name, "-", end="  ")
print()' && python3 -c 'import torch, transformers, snakemake' || exit 3
mkdir -p "$S/repo" "$S/record"
# the code only: results/ and .snakemake/ of earlier calls stay
tar --exclude='./.gpu1p*' --exclude=./results --exclude=./.snakemake -cf - . | tar -C "$S/repo" -xf -
cd "$S/repo" && mkdir -p results
# the site has no byte code (install.py): compiled once beside the first jobs, not by each job's imports
[ -e "$S/compiled" ] || { nice python3 -m compileall -q -j 8 "$B/site" > /dev/null 2>&1; touch "$S/compiled"; } &
rm -f "$S/drive.done"
cmd=(python3 benchmarks/gpu1/drive.py "$S/record" --seconds "$seconds" "${drive_args[@]}" --
     --profile profiles/gpu1 --workflow-profile none --scheduler greedy --keep-going "$@")
if [ "$detach" = 1 ]; then
  setsid nohup bash -c '"$@" > '"$S/drive.log"' 2>&1; echo "exit $?" > '"$S/drive.done" _ "${cmd[@]}" < /dev/null &
  if [ -n "$twin_targets" ] && [ ! -d "$S/twin" ]; then  # the second run: its own copy, its own results
    mkdir -p "$S/twin" && tar --exclude='./.gpu1p*' --exclude=./results --exclude=./.snakemake -C "$here" -cf - . | tar -C "$S/twin" -xf -
    (cd "$S/twin" && setsid nohup bash -c 'python3 -m snakemake "$@" > '"$S/twin.log"' 2>&1; echo "exit $?" > '"$S/twin.done" \
        _ --profile profiles/gpu1 --workflow-profile none --scheduler greedy --keep-going $twin_targets "$@" < /dev/null &)
    echo "twin started: $twin_targets"
  fi
  sleep 2; echo "drive detached (log $S/drive.log)"
  exit 0
fi
"${cmd[@]}" 2>&1 | tee "$S/drive.log"
echo "exit ${PIPESTATUS[0]}" > "$S/drive.done"
collect
