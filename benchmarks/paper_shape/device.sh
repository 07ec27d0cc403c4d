#!/usr/bin/env bash
# The paper-shape measurement (benchmarks/paper_shape/measure.py) on the lent GPU machine, in
# consecutive device calls (each at most 10 minutes), from the repository's root there:
#   bash benchmarks/paper_shape/device.sh [--phases rl:4,sft:4,sft:8,rl:8] WAIT_SECONDS
# A call that brings one part of the bundle (benchmarks/gpu1/bundle.py --without gguf,jre; the carry
# folders .gpu1p<k>/) stores it and ends (benchmarks/gpu1/bundle_env.sh). The call that completes it
# installs the bundle, copies the code and the carried tokenizer (.pshape/tokenizer/: the embedded
# model's, benchmarks/paper_shape/model.py) to /tmp/pshape and starts measure.py in a session of its
# own (it outlives the call while the machine stays warm); every call then waits up to WAIT_SECONDS
# for it and copies what it has recorded so far into $OUT (records.jsonl, paper_shape.tar.xz).
set -u
S=/tmp/pshape here=$(pwd) parts_root=$(pwd) phases=rl:4,sft:4,sft:8,rl:8
[ "${1:-}" = --phases ] && { phases=$2; shift 2; }
wait_s=${1:?WAIT_SECONDS}
. "$here/benchmarks/gpu1/bundle_env.sh"
case $? in 0) ;; 1) exit 0 ;; *) exit 2 ;; esac
if [ ! -e "$S/measure.started" ]; then
  [ -f "$here/.pshape/tokenizer/tokenizer.json" ] || { echo "no tokenizer carried (.pshape/tokenizer)"; exit 2; }
  mkdir -p "$S/repo" "$S/out" && cp -r "$here/.pshape/tokenizer" "$S/"
  tar --exclude='./.gpu1p*' --exclude='./.pshape' --exclude=./results --exclude=./.snakemake -cf - . | tar -C "$S/repo" -xf -
  python3 -c 'import torch, vllm, verl, ray, deepspeed, transformers; print("torch", torch.__version__, "vllm", vllm.__version__, "verl", verl.__version__, "ray", ray.__version__, "deepspeed", deepspeed.__version__, "transformers", transformers.__version__)' | tee "$S/out/versions.txt" || exit 3
  (cd "$S/repo" && git -C "$here" rev-parse HEAD > "$S/out/commit.txt" 2>/dev/null; \
   setsid nohup bash -c 'python3 benchmarks/paper_shape/measure.py "$1" --tokenizer "$2" --work "$3" --phases "$4" > "$5/measure.log" 2>&1; echo "exit $?" > "$5/measure.done"' \
     _ "$S/out" "$S/tokenizer" "$S/work" "$phases" "$S" < /dev/null > /dev/null 2>&1 &)
  touch "$S/measure.started"
  echo "measure started: $phases"
fi
end=$(( $(date +%s) + wait_s ))
while [ ! -e "$S/measure.done" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
[ -e "$S/measure.done" ] && echo "measure done: $(cat "$S/measure.done")" || echo "measure still running"
tail -5 "$S/measure.log" 2>/dev/null
cp "$S/out/records.jsonl" "$OUT/" 2>/dev/null
cp "$S/measure.log" "$OUT/" 2>/dev/null
tar -C "$S" -cf - out | xz -3 -T8 > "$OUT/paper_shape.tar.xz"
df -h /tmp | tail -1; nvidia-smi --query-gpu=memory.used --format=csv,noheader
ls -la "$OUT"
